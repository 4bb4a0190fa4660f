/*
 * srv_config_load.c - the bridge between the config file (struct
 * srv_config, src/server/config.h, docs/config.md) and the options a node
 * runs with (struct srv_opts). The file format and its validation belong
 * to config.c; this file only maps fields, so that rs_server_config_new()
 * and an empty config file give the same node.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The settings of c into v, borrowing c's strings: every field of the
 * config but tables and keys. config_view() is its inverse. */
static void opts_view(struct srv_opts *v, const struct srv_config *c)
{
	snprintf(v->name, sizeof(v->name), "%s", c->name);
	snprintf(v->device, sizeof(v->device), "%s", c->device);
	_Static_assert(sizeof(v->listen_ip) >= sizeof(c->listen_addr),
		       "listen address");
	memcpy(v->listen_ip, c->listen_addr, sizeof(c->listen_addr));
	v->port = c->listen_port;
	v->metrics_port = c->metrics_port;
	v->workers = c->workers;
	v->spin_us = c->spin_us;
	v->max_conns_per_peer = c->max_conns_per_peer;
	v->keepalive_ms = c->keepalive_ms;
	v->send_timeout_ms = (int)c->send_timeout_ms;
	v->limits = c->limits;
	v->pool_bytes = c->storage_bytes;
	v->slab_flags = (v->slab_flags & ~SLAB_F_FORMAT) |
			(c->storage_format ? SLAB_F_FORMAT : 0);
	v->default_capacity = c->default_capacity;
	v->trace_sample = c->trace_sample;
	v->pool_path = c->backend == SRV_BACKEND_PMEM ? c->storage_path : NULL;
	v->trace_path = c->trace_path;
	v->auth_skew_s = c->auth_skew_s;
	v->coord_endpoints = c->coord_endpoints;
	v->checkpoint_dir = c->checkpoint_dir;
	memcpy(v->coord_cluster, c->coord_cluster, sizeof(v->coord_cluster));
	/* the member id: coord.id, else the node's name */
	memcpy(v->coord_id, c->coord_id[0] ? c->coord_id : c->name,
	       sizeof(v->coord_id));
	v->coord_lease_ms = c->coord_lease_ms;
	v->coord_replicas = c->coord_replicas;
	v->coord_decide = c->coord_decide != 0;
	v->coord_initial_members = c->coord_initial_members;
	v->coord_sec = c->coord_sec;
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
	opts_view(&v, c);
	v.tables = c->tables;
	v.ntables = c->ntables;
	v.keys = NULL;
	v.nkeys = 0;
	ret = srv_opts_copy(o, &v);	/* copies the strings and coord_sec */
	if (!ret)
		ret = keys_from_config(o, c);
	return ret;
}

static int dup_or_null(char **dst, const char *src)
{
	*dst = src ? rs_strdup(src) : NULL;
	return src && !*dst ? -ENOMEM : 0;
}

/* o as a config of its own (no tables, no keys): opts_view()'s inverse.
 * The backend is pmem when there is a pool file; a member id equal to
 * the node's name reads as unset, as it would in the file. */
static int config_view(struct srv_config *c, const struct srv_opts *o)
{
	srv_config_defaults(c);
	snprintf(c->name, sizeof(c->name), "%s", o->name);
	snprintf(c->device, sizeof(c->device), "%s", o->device);
	snprintf(c->listen_addr, sizeof(c->listen_addr), "%s", o->listen_ip);
	c->listen_port = o->port;
	c->metrics_port = (uint16_t)o->metrics_port;
	c->workers = o->workers;
	c->spin_us = o->spin_us;
	c->max_conns_per_peer = o->max_conns_per_peer;
	c->keepalive_ms = o->keepalive_ms;
	c->send_timeout_ms = (uint32_t)o->send_timeout_ms;
	c->limits = o->limits;
	c->storage_bytes = o->pool_bytes;
	c->storage_format = (o->slab_flags & SLAB_F_FORMAT) != 0;
	c->default_capacity = o->default_capacity;
	c->trace_sample = o->trace_sample;
	c->backend = o->pool_path ? SRV_BACKEND_PMEM : SRV_BACKEND_DRAM;
	c->auth_skew_s = o->auth_skew_s;
	memcpy(c->coord_cluster, o->coord_cluster, sizeof(c->coord_cluster));
	if (strcmp(o->coord_id, o->name))
		memcpy(c->coord_id, o->coord_id, sizeof(c->coord_id));
	c->coord_lease_ms = o->coord_lease_ms;
	c->coord_replicas = o->coord_replicas;
	c->coord_decide = o->coord_decide;
	c->coord_initial_members = o->coord_initial_members;
	if (dup_or_null(&c->storage_path, o->pool_path) ||
	    dup_or_null(&c->trace_path, o->trace_path) ||
	    dup_or_null(&c->checkpoint_dir, o->checkpoint_dir) ||
	    dup_or_null(&c->coord_endpoints, o->coord_endpoints) ||
	    coord_etcd_files_copy(&c->coord_sec, &o->coord_sec))
		return rs_seterr(-ENOMEM, "config: out of memory");
	return 0;
}

int srv_config_from_opts(struct srv_config **out, const struct srv_opts *o)
{
	int ret;

	if (!(*out = rs_calloc(1, sizeof(**out))))
		return rs_seterr(-ENOMEM, "config: out of memory");
	if ((ret = config_view(*out, o)))
		srv_config_free(out);
	return ret;
}

/* The storage rows as one setting: a pool file means pmem, so setting
 * storage.path picks pmem (null: DRAM) and storage.backend dram drops the
 * path; pmem without a path is refused. */
static int storage_rule(struct srv_config *c, const char *path)
{
	if (!strcmp(path, "storage.path"))
		c->backend = c->storage_path ? SRV_BACKEND_PMEM
					     : SRV_BACKEND_DRAM;
	if (c->backend == SRV_BACKEND_DRAM) {
		free(c->storage_path);
		c->storage_path = NULL;
	} else if (!c->storage_path) {
		return rs_seterr(RS_E_INVAL, "%s: backend pmem needs a pool "
				 "file: set storage.path instead", path);
	}
	return 0;
}

/* Every setting of the file's table by its JSON path, through the
 * config's own parser (config.c): the options become a config, the
 * setting is parsed into it, the config becomes the options again. */
RS_EXPORT int rs_server_config_set(struct rs_server_config *cfg,
				   const char *path, const char *value)
{
	struct srv_config *c;
	struct srv_opts v, n;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	ret = srv_config_from_opts(&c, &cfg->o);
	if (ret)
		return ret;
	ret = srv_config_set(c, path, value);
	if (!ret)
		ret = storage_rule(c, path);
	if (!ret) {
		v = cfg->o;
		opts_view(&v, c);
		ret = srv_opts_copy(&n, &v);
	}
	srv_config_free(&c);
	if (ret)
		return ret;
	srv_opts_free(&cfg->o);
	cfg->o = n;
	return 0;
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
