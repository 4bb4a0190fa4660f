/*
 * srv_config_load.c - the bridge between the config file (struct
 * srv_config, src/server/config.h, docs/config.md) and the options a node
 * runs with (struct srv_opts). The file format and its validation belong
 * to config.c; this file only maps fields, so that rs_server_config_new()
 * and an empty config file give the same node.
 */
#include <stdio.h>
#include <string.h>

#include "server/config.h"
#include "server/srv_internal.h"

/* The credentials of c into o (secret files are read here). */
static int keys_from_config(struct srv_opts *o, const struct srv_config *c)
{
	char field[48];
	int ret = 0;

	for (uint32_t i = 0; !ret && i < c->nkeys; i++) {
		const struct srv_config_key *k = &c->keys[i];

		snprintf(field, sizeof(field), "auth.keys[%u]", i);
		ret = k->secret_file ?
			      srv_opts_add_key_file(o, field, k->id, k->role,
						    k->secret_file) :
			      srv_opts_add_key(o, field, k->id, k->role,
					       k->secret, strlen(k->secret));
	}
	o->auth_skew_s = c->auth_skew_s;
	return ret;
}

/* Map a parsed config onto options that start from the defaults: the
 * fields go into a view that borrows c's strings and tables, and
 * srv_opts_copy() makes o's own copies of them. */
int srv_opts_from_config(struct srv_opts *o, const struct srv_config *c)
{
	struct srv_opts v;
	int ret;

	srv_opts_free(o);
	v = *o;
	snprintf(v.name, sizeof(v.name), "%s", c->name);
	snprintf(v.device, sizeof(v.device), "%s", c->device);
	_Static_assert(sizeof(v.listen_ip) >= sizeof(c->listen_addr),
		       "listen address");
	memcpy(v.listen_ip, c->listen_addr, sizeof(c->listen_addr));
	v.port = c->listen_port;
	v.metrics_port = c->metrics_port;
	v.workers = c->workers;
	v.spin_us = c->spin_us;
	v.max_conns_per_peer = c->max_conns_per_peer;
	v.keepalive_ms = c->keepalive_ms;
	v.send_timeout_ms = (int)c->send_timeout_ms;
	v.limits = c->limits;
	v.pool_bytes = c->storage_bytes;
	v.slab_flags = (v.slab_flags & ~SLAB_F_FORMAT) |
		       (c->storage_format ? SLAB_F_FORMAT : 0);
	v.default_capacity = c->default_capacity;
	v.trace_sample = c->trace_sample;
	v.pool_path = c->backend == SRV_BACKEND_PMEM ? c->storage_path : NULL;
	v.trace_path = c->trace_path;
	v.tables = c->tables;
	v.ntables = c->ntables;
	v.keys = NULL;
	v.nkeys = 0;
	v.coord_endpoints = c->coord_endpoints;
	v.checkpoint_dir = c->checkpoint_dir;
	memcpy(v.coord_cluster, c->coord_cluster, sizeof(v.coord_cluster));
	/* the member id: coord.id, else the node's name */
	memcpy(v.coord_id, c->coord_id[0] ? c->coord_id : c->name,
	       sizeof(v.coord_id));
	v.coord_lease_ms = c->coord_lease_ms;
	v.coord_replicas = c->coord_replicas;
	v.coord_decide = c->coord_decide != 0;
	v.coord_initial_members = c->coord_initial_members;
	v.coord_sec = c->coord_sec;	/* copied just below */
	ret = srv_opts_copy(o, &v);
	if (!ret)
		ret = keys_from_config(o, c);
	return ret;
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
