/*
 * cluster_driver.c - the bodies of the helpers declared in
 * cluster_driver.h, which says what they are for.
 */
#include "cluster_driver.h"

void cd_die(const char *name, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: ", name);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

void cd_ready(const char *out)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s.ready", out);
	if ((f = fopen(path, "w")))
		fclose(f);
}

struct rs_client *cd_open_client(const char *name, const char *seeds,
				 unsigned timeout_ms)
{
	struct rs_client_config *cfg;
	struct rs_client *c;
	char buf[1024], *tok, *save = NULL;
	int ret;

	if (rs_client_config_new(&cfg))
		cd_die(name, "config: %s", rs_errormsg());
	snprintf(buf, sizeof(buf), "%s", seeds);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (rs_client_config_add_node(cfg, tok))
			cd_die(name, "node %s: %s", tok, rs_errormsg());
	rs_client_config_set_timeout_ms(cfg, timeout_ms);
	ret = rs_client_open(&c, cfg);
	rs_client_config_delete(&cfg);
	if (ret)
		cd_die(name, "open: %s (%s)", rs_strerror(ret), rs_errormsg());
	return c;
}

struct rs_table *cd_open_table(const char *name, struct rs_client *c,
			       const char *table)
{
	struct rs_table *t;

	if (rs_table_open(c, table, &t))
		cd_die(name, "table %s: %s", table, rs_errormsg());
	return t;
}
