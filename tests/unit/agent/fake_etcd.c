// SPDX-License-Identifier: MIT
/* The fake etcd endpoint of the agent's unit tests: see fake_etcd.h. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_etcd.h"

static void conn_end(struct fake_etcd_conn *c)
{
	gw_watch_stop(&c->w);
	close(c->w.fd);
	c->on = false;
}

static void conn_read(struct gw_watch *w, uint32_t events)
{
	struct fake_etcd_conn *c = gw_container_of(w, struct fake_etcd_conn, w);
	struct fake_etcd *f = c->f;
	char *body, *cl;
	ssize_t n;

	(void)events;
	n = read(w->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
	if (n <= 0) {
		conn_end(c);
		return;
	}
	c->len += (size_t)n;
	c->buf[c->len] = '\0';
	body = strstr(c->buf, "\r\n\r\n");
	cl = strcasestr(c->buf, "Content-Length:");
	if (!body || !cl || strlen(body + 4) < strtoul(cl + 15, NULL, 10))
		return;		/* not all of it yet */
	json_decref(f->last);
	f->last = json_loads(body + 4, 0, NULL);
	f->served++;
	c->len = 0;
	if (f->silent_first > 0) {
		f->silent_first--;
		return;		/* stalled: the connection stays open, unanswered */
	}
	if (!f->reply)
		return;
	cr_assert_gt(write(w->fd, f->reply, strlen(f->reply)), 0);
	conn_end(c);
}

static void conn_accept(struct gw_watch *w, uint32_t events)
{
	struct fake_etcd *f = gw_container_of(w, struct fake_etcd, w);
	int fd = accept(f->lfd, NULL, NULL), i;

	(void)events;
	if (fd < 0)
		return;
	for (i = 0; i < FAKE_ETCD_CONNS && f->c[i].on; i++)
		;
	cr_assert_lt(i, FAKE_ETCD_CONNS);
	f->c[i] = (struct fake_etcd_conn){ .f = f, .on = true };
	gw_watch_init(&f->c[i].w, w->loop, fd, conn_read);
	cr_assert_eq(gw_watch_set(&f->c[i].w, EPOLLIN), 0);
}

int fake_etcd_port(int *fd_out)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	if (fd_out) {
		cr_assert_eq(listen(fd, 8), 0);
		*fd_out = fd;
	} else {
		close(fd);	/* nothing listens there: connections are refused */
	}
	return ntohs(a.sin_port);
}

void fake_etcd_reply(struct fake_etcd *f, const char *body)
{
	if (!body) {
		f->reply = NULL;
		return;
	}
	snprintf(f->replybuf, sizeof(f->replybuf), "HTTP/1.1 200 OK\r\nContent-Type: "
		 "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
		 strlen(body), body);
	f->reply = f->replybuf;
}

void fake_etcd_reply_raw(struct fake_etcd *f, const char *http)
{
	f->reply = http;
}

void fake_etcd_start(struct fake_etcd *f, struct gw_loop *loop, const char *body)
{
	memset(f, 0, sizeof(*f));
	f->port = fake_etcd_port(&f->lfd);
	fake_etcd_reply(f, body);
	gw_watch_init(&f->w, loop, f->lfd, conn_accept);
	cr_assert_eq(gw_watch_set(&f->w, EPOLLIN), 0);
}

void fake_etcd_stop(struct fake_etcd *f)
{
	for (int i = 0; i < FAKE_ETCD_CONNS; i++)
		if (f->c[i].on)
			conn_end(&f->c[i]);
	gw_watch_stop(&f->w);
	close(f->lfd);
	json_decref(f->last);
	f->last = NULL;
}
