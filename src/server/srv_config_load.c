/*
 * srv_config_load.c - the bridge between the config file (struct
 * srv_config, src/server/config.h, docs/config.md) and the options a node
 * runs with (struct srv_opts). The file format and its validation belong
 * to config.c; this file only maps fields, so that rs_server_config_new()
 * and an empty config file give the same node.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "server/config.h"
#include "server/srv_internal.h"

static int dup_or_null(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

/* Map a parsed config onto options that start from the defaults. */
int srv_opts_from_config(struct srv_opts *o, const struct srv_config *c)
{
	srv_opts_free(o);
	snprintf(o->name, sizeof(o->name), "%s", c->name);
	snprintf(o->device, sizeof(o->device), "%s", c->device);
	_Static_assert(sizeof(o->listen_ip) >= sizeof(c->listen_addr),
		       "listen address");
	memcpy(o->listen_ip, c->listen_addr, sizeof(c->listen_addr));
	o->port = c->listen_port;
	o->metrics_port = c->metrics_port;
	o->workers = c->workers;
	o->spin_us = c->spin_us;
	o->limits = c->limits;
	o->pool_bytes = c->storage_bytes;
	o->trace_sample = c->trace_sample;
	if ((c->backend == SRV_BACKEND_PMEM &&
	     dup_or_null(&o->pool_path, c->storage_path)) ||
	    dup_or_null(&o->trace_path, c->trace_path))
		goto nomem;
	if (c->ntables) {
		o->tables = malloc(c->ntables * sizeof(*o->tables));
		if (!o->tables)
			goto nomem;
		memcpy(o->tables, c->tables, c->ntables * sizeof(*o->tables));
		o->ntables = c->ntables;
	}
	return 0;
nomem:
	srv_opts_free(o);
	return rs_seterr(-ENOMEM, "config: out of memory");
}

RS_EXPORT int rs_server_config_load(struct rs_server_config **out,
				    const char *path)
{
	struct srv_config *c = NULL;
	int ret;

	if (!out)
		return rs_seterr(RS_E_INVAL, "config: out is NULL");
	*out = NULL;
	ret = srv_config_load(&c, path);
	if (ret)
		return ret;
	ret = rs_server_config_new(out);
	if (!ret)
		ret = srv_opts_from_config(&(*out)->o, c);
	if (!ret)
		ret = srv_opts_validate(&(*out)->o);
	srv_config_free(&c);
	if (ret)
		rs_server_config_delete(out);
	return ret;
}
