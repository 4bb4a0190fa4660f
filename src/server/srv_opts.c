/*
 * srv_opts.c - struct rs_server_config (public, opaque) and struct
 * srv_opts, the options a node runs with.
 *
 * rs_server_config holds one srv_opts. rs_server_config_new() gives the
 * defaults below; rs_server_config_load() fills it from a JSON file
 * (srv_config_*.c); the setters validate when called and name the value
 * they refuse. rs_server_open() copies the options, so a config may be
 * deleted as soon as the node is open.
 *
 * Defaults: those of the config file (srv_config_defaults(), docs/
 * config.md: port 7471 on the first IPv4 address of the first RDMA
 * device, 2 workers, a 256 MiB DRAM pool, 256 KiB messages, metrics off,
 * no tables), plus what the file does not set: 16 credits per connection,
 * up to 128 connections, a 2 s send timeout, huge pages when the system
 * has them, tracing from RS_TRACE / RS_TRACE_SAMPLE unless the file says.
 *
 * Credentials: keys (id, role, secret) added by rs_server_config_add_key*
 * or the config file's "auth" section; none means every peer is admin.
 * A secret file is read when it is added (so a bad path fails at
 * configuration) and a warning is logged when others may read it.
 *
 * Ownership: an srv_opts owns pool_path, trace_path, tables and keys
 * (secrets are zeroed when freed).
 * Not thread-safe (a config is built by one thread, then handed over).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/config.h"
#include "server/srv_internal.h"

void srv_opts_defaults(struct srv_opts *o)
{
	struct srv_config c;

	/* the config file's defaults (config.h), plus what only the
	 * library sets */
	srv_config_defaults(&c);
	memset(o, 0, sizeof(*o));
	o->port = c.listen_port;
	o->workers = c.workers;
	o->spin_us = c.spin_us;
	o->max_conns_per_peer = c.max_conns_per_peer;
	o->keepalive_ms = c.keepalive_ms;
	o->pool_bytes = c.storage_bytes;
	o->default_capacity = c.default_capacity;
	o->limits = c.limits;
	o->trace_sample = c.trace_sample;
	o->slab_flags = SLAB_F_HUGEPAGES;
	o->credits = 16;
	o->max_conns = 128;
	o->send_timeout_ms = (int)c.send_timeout_ms;
	o->auth_skew_s = AUTH_DEFAULT_SKEW_S;
	o->coord_lease_ms = c.coord_lease_ms;
	o->coord_replicas = c.coord_replicas;
	o->coord_decide = c.coord_decide;
	o->coord_initial_members = c.coord_initial_members;
}

void srv_opts_free(struct srv_opts *o)
{
	free(o->pool_path);
	free(o->trace_path);
	free(o->tables);
	free(o->coord_endpoints);
	free(o->checkpoint_dir);
	coord_etcd_files_free(&o->coord_sec);
	o->coord_endpoints = o->checkpoint_dir = NULL;
	o->pool_path = o->trace_path = NULL;
	o->tables = NULL;
	o->ntables = 0;
	if (o->keys) {
		for (size_t i = 0; i < o->nkeys; i++)
			auth_key_wipe(&o->keys[i]);
		free(o->keys);
	}
	o->keys = NULL;
	o->nkeys = 0;
}

static int dup_str(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = rs_strdup(src);
	return *dst ? 0 : -ENOMEM;
}

int srv_opts_copy(struct srv_opts *dst, const struct srv_opts *src)
{
	*dst = *src;
	dst->pool_path = dst->trace_path = NULL;
	dst->coord_endpoints = dst->checkpoint_dir = NULL;
	memset(&dst->coord_sec, 0, sizeof(dst->coord_sec));
	dst->tables = NULL;
	dst->keys = NULL;
	dst->nkeys = 0;
	if (dup_str(&dst->pool_path, src->pool_path) ||
	    dup_str(&dst->trace_path, src->trace_path) ||
	    dup_str(&dst->coord_endpoints, src->coord_endpoints) ||
	    dup_str(&dst->checkpoint_dir, src->checkpoint_dir) ||
	    coord_etcd_files_copy(&dst->coord_sec, &src->coord_sec))
		goto nomem;
	if (src->ntables) {
		dst->tables = rs_malloc(src->ntables * sizeof(*dst->tables));
		if (!dst->tables)
			goto nomem;
		memcpy(dst->tables, src->tables,
		       src->ntables * sizeof(*dst->tables));
	}
	if (src->nkeys) {
		dst->keys = rs_malloc(src->nkeys * sizeof(*dst->keys));
		if (!dst->keys)
			goto nomem;
		memcpy(dst->keys, src->keys, src->nkeys * sizeof(*dst->keys));
		dst->nkeys = src->nkeys;
	}
	return 0;
nomem:
	srv_opts_free(dst);
	return rs_seterr(-ENOMEM, "config: out of memory");
}

/* The checks of single fields that both a setter and srv_opts_validate()
 * make, with the same message. */
static int check_workers(unsigned n)
{
	if (n < 1 || n > SRV_MAX_WORKERS)
		return rs_seterr(RS_E_INVAL, "workers: %u is not in 1..%d", n,
				 SRV_MAX_WORKERS);
	return 0;
}

static int check_metrics_port(unsigned port)
{
	if (port > 65535)
		return rs_seterr(RS_E_INVAL, "metrics_port: %u is not in "
				 "0..65535", port);
	return 0;
}

/* 0 stands for the default size */
static int check_pool_bytes(uint64_t size)
{
	if (size && size < SRV_CONFIG_MIN_STORAGE_BYTES)
		return rs_seterr(RS_E_INVAL, "storage.size: at least 1 MiB");
	return 0;
}

/* Every cross-field check, run by open (and by the loader). */
int srv_opts_validate(const struct srv_opts *o)
{
	struct srv_machine m;
	int ret;

	if ((ret = check_workers(o->workers)))
		return ret;
	if (o->credits < 3 || o->credits > 1024)
		return rs_seterr(RS_E_INVAL, "credits: %u is not in 3..1024",
				 o->credits);
	if (o->max_conns < 1 || o->max_conns > 4096)
		return rs_seterr(RS_E_INVAL, "max_connections: %u is not in "
				 "1..4096", o->max_conns);
	if ((ret = check_metrics_port(o->metrics_port)) ||
	    (ret = check_pool_bytes(o->pool_bytes)))
		return ret;
	if (o->default_capacity < 1 ||
	    o->default_capacity > PROTO_MAX_CAPACITY)
		return rs_seterr(RS_E_INVAL, "default_capacity: %llu is not in "
				 "1..%llu",
				 (unsigned long long)o->default_capacity,
				 PROTO_MAX_CAPACITY);
	if (o->index_load < 0 || o->index_load > 1)
		return rs_seterr(RS_E_INVAL, "index_load: %g is not in (0, 1]",
				 o->index_load);
	ret = proto_limits_validate(&o->limits);
	if (ret)
		return srv_err(ret, "limits: %s", rs_errormsg());
	for (size_t i = 0; i < o->ntables; i++) {
		ret = proto_table_spec_validate(&o->tables[i], &o->limits);
		if (ret)
			return srv_err(ret, "tables[%zu]: %s", i,
					 rs_errormsg());
		for (size_t j = 0; j < i; j++)
			if (!strcmp(o->tables[i].name, o->tables[j].name))
				return rs_seterr(RS_E_INVAL, "tables[%zu].name: "
						 "'%s' is also tables[%zu]", i,
						 o->tables[i].name, j);
	}
	if (o->auth_skew_s > AUTH_MAX_SKEW_S)
		return rs_seterr(RS_E_INVAL, "auth.max_skew_s: %u is not in "
				 "0..%d", o->auth_skew_s, AUTH_MAX_SKEW_S);
	if (o->ntables > SLAB_MAX_TABLES)
		return rs_seterr(RS_E_INVAL, "tables: %zu tables, a node holds "
				 "at most %d", o->ntables, SLAB_MAX_TABLES);
	srv_machine_probe(&m);
	return srv_opts_check_memory(o, &m);
}

/* ---- credentials ---- */

int srv_opts_add_key(struct srv_opts *o, const char *field, uint32_t id,
		     unsigned role, const void *secret, size_t len)
{
	struct auth_key k, *keys;
	int ret;

	if (role < AUTH_ROLE_READ || role > AUTH_ROLE_ADMIN)
		return rs_seterr(RS_E_INVAL, "%s.role: must be read, data or "
				 "admin", field);
	ret = auth_key_init(&k, id, role, secret, len);
	if (ret)
		return srv_err(ret, "%s: %s", field, rs_errormsg());
	for (size_t i = 0; i < o->nkeys; i++)
		if (o->keys[i].id == id) {
			auth_key_wipe(&k);
			return rs_seterr(RS_E_INVAL, "%s.id: key id %u is "
					 "given twice", field, id);
		}
	keys = rs_realloc(o->keys, (o->nkeys + 1) * sizeof(*keys));
	if (!keys) {
		auth_key_wipe(&k);
		return rs_seterr(-ENOMEM, "config: out of memory");
	}
	keys[o->nkeys++] = k;
	o->keys = keys;
	auth_key_wipe(&k);
	return 0;
}

int srv_opts_add_key_file(struct srv_opts *o, const char *field,
			  uint32_t id, unsigned role, const char *path)
{
	uint8_t secret[AUTH_SECRET_MAX];
	size_t len;
	bool world;
	int ret;

	if (!path || !*path)
		return rs_seterr(RS_E_INVAL, "%s.secret_file: empty path",
				 field);
	ret = auth_secret_file(path, secret, &len, &world);
	if (ret)
		return srv_err(ret == RS_E_INVAL ? ret : RS_E_INVAL,
			       "%s.secret_file: %s", field, rs_errormsg());
	if (world)
		srv_warn("warning: %s.secret_file %s may be read by other "
			"users (chmod 600 it)", field, path);
	ret = srv_opts_add_key(o, field, id, role, secret, len);
	sodium_memzero(secret, sizeof(secret));
	return ret;
}

/* "ADDR:PORT" (IPv4, or [IPv6]:PORT). */
int srv_parse_listen(const char *s, char *ip, size_t iplen, uint16_t *port)
{
	const char *colon, *host = s;
	size_t hl;
	unsigned long p;
	char *end;

	if (!s || !*s)
		return rs_seterr(RS_E_INVAL, "listen: empty address");
	colon = strrchr(s, ':');
	if (!colon || colon == s)
		return rs_seterr(RS_E_INVAL, "listen: '%s' is not ADDR:PORT",
				 s);
	hl = (size_t)(colon - s);
	if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') {
		host++;
		hl -= 2;
	}
	if (hl >= iplen)
		return rs_seterr(RS_E_INVAL, "listen: address '%s' is too "
				 "long", s);
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || p > 65535)
		return rs_seterr(RS_E_INVAL, "listen: port '%s' is not in "
				 "0..65535", colon + 1);
	memcpy(ip, host, hl);
	ip[hl] = '\0';
	*port = (uint16_t)p;
	return 0;
}

/* ---- public config object ---- */

RS_EXPORT int rs_server_config_new(struct rs_server_config **out)
{
	struct rs_server_config *c;

	if (!out)
		return rs_seterr(RS_E_INVAL, "config: out is NULL");
	c = rs_calloc(1, sizeof(*c));
	if (!c) {
		*out = NULL;
		return rs_seterr(-ENOMEM, "config: out of memory");
	}
	srv_opts_defaults(&c->o);
	*out = c;
	return 0;
}

RS_EXPORT void rs_server_config_delete(struct rs_server_config **cfg)
{
	if (!cfg || !*cfg)
		return;
	srv_opts_free(&(*cfg)->o);
	free(*cfg);
	*cfg = NULL;
}

RS_EXPORT int rs_server_config_set_listen(struct rs_server_config *cfg,
					  const char *addr_port)
{
	char ip[sizeof(cfg->o.listen_ip)];
	uint16_t port;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	ret = srv_parse_listen(addr_port, ip, sizeof(ip), &port);
	if (ret)
		return ret;
	memcpy(cfg->o.listen_ip, ip, sizeof(ip));
	cfg->o.port = port;
	return 0;
}

RS_EXPORT int rs_server_config_set_workers(struct rs_server_config *cfg,
					   unsigned n)
{
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	if ((ret = check_workers(n)))
		return ret;
	cfg->o.workers = n;
	return 0;
}

RS_EXPORT int rs_server_config_set_storage(struct rs_server_config *cfg,
					   const char *path, uint64_t size)
{
	char *p = NULL;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	if (path && !*path)
		return rs_seterr(RS_E_INVAL, "storage.path: empty");
	if ((ret = check_pool_bytes(size)))
		return ret;
	if (path && !(p = rs_strdup(path)))
		return rs_seterr(-ENOMEM, "config: out of memory");
	free(cfg->o.pool_path);
	cfg->o.pool_path = p;
	cfg->o.pool_bytes = size ? size : SRV_CONFIG_STORAGE_BYTES;
	return 0;
}

RS_EXPORT int rs_server_config_set_metrics_port(struct rs_server_config *cfg,
						unsigned port)
{
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	if ((ret = check_metrics_port(port)))
		return ret;
	cfg->o.metrics_port = port;
	return 0;
}

static int role_arg(const char *role, unsigned *out)
{
	int r = auth_role_parse(role);

	if (r < 0)
		return rs_seterr(RS_E_INVAL, "role '%s': must be read, data "
				 "or admin", role ? role : "(null)");
	*out = (unsigned)r;
	return 0;
}

RS_EXPORT int rs_server_config_add_key(struct rs_server_config *cfg,
				       uint32_t key_id, const char *role,
				       const void *secret, size_t len)
{
	unsigned r = 0;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	if ((ret = role_arg(role, &r)))
		return ret;
	return srv_opts_add_key(&cfg->o, "key", key_id, r, secret, len);
}

RS_EXPORT int rs_server_config_add_key_file(struct rs_server_config *cfg,
					    uint32_t key_id, const char *role,
					    const char *path)
{
	unsigned r = 0;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	if ((ret = role_arg(role, &r)))
		return ret;
	return srv_opts_add_key_file(&cfg->o, "key", key_id, r, path);
}

RS_EXPORT int rs_server_config_set_auth_skew(struct rs_server_config *cfg,
					     unsigned seconds)
{
	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	if (seconds > AUTH_MAX_SKEW_S)
		return rs_seterr(RS_E_INVAL, "auth.max_skew_s: %u is not in "
				 "0..%d", seconds, AUTH_MAX_SKEW_S);
	cfg->o.auth_skew_s = seconds;
	return 0;
}

int srv_config_to_opts(const struct rs_server_config *cfg, struct srv_opts *o)
{
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "server: config is NULL");
	ret = srv_opts_validate(&cfg->o);
	if (ret)
		return ret;
	return srv_opts_copy(o, &cfg->o);
}
