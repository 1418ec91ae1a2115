/* fixture: a lib header */

int gw_x(void);
