const struct gw_conf_key conf_mp_keys[] = {
	{ .name = "engine", .type = GW_CONF_ENUM },
	{ 0 }
};

const struct gw_conf_key conf_new_keys[] = {
	{ .name = "color", .type = GW_CONF_STR },
	{ 0 }
};
