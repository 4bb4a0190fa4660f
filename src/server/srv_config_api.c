/*
 * srv_config_api.c - struct rs_server_config, the public and opaque node
 * config: a box around the one struct srv_config (config.h) that the JSON
 * file fills and the node runs on.
 *
 * rs_server_config_new() gives srv_config_defaults(): the rows' defaults
 * (config.c, srv_config_rows[]; docs/config.md: the default port on the
 * first IPv4 address of the first RDMA device, 2 workers, a 256 MiB DRAM
 * pool, 256 KiB messages, metrics off, no tables) and what the file does
 * not set (16 credits per connection, up to 128 connections, huge pages
 * when the system has them). rs_server_config_load() is the parser's config
 * itself, its file keys read into credentials. Every setter of one value
 * is rs_server_config_set() of the setting's row, so a setter, the file
 * and srv_config_validate() refuse a value with the same check and the
 * same message. rs_server_open() validates and copies the config
 * (srv_config_to_node()), so a config may be deleted as soon as the node
 * is open.
 *
 * Credentials: keys (id, role, secret) added by rs_server_config_add_key*
 * or the file's "auth" section; none means every peer is admin. A secret
 * file is read when it is added or loaded (so a bad path fails at
 * configuration) and a warning is logged when others may read it.
 *
 * Not thread-safe (a config is built by one thread, then handed over).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"
#include "server/config.h"
#include "server/srv_internal.h"

/* Every cross-field check and the rows' ranges, run by open (and by the
 * loader). */
int srv_config_validate(const struct srv_config *o)
{
	struct srv_machine m;
	int ret;

	if ((ret = srv_config_check_rows(o)))
		return ret;
	if (o->credits < 3 || o->credits > 1024)
		return rs_seterr(RS_E_INVAL, "credits: %u is not in 3..1024",
				 o->credits);
	if (o->max_conns < 1 || o->max_conns > 4096)
		return rs_seterr(RS_E_INVAL, "max_connections: %u is not in "
				 "1..4096", o->max_conns);
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
	if (o->ntables > SLAB_MAX_TABLES)
		return rs_seterr(RS_E_INVAL, "tables: %u tables, a node holds "
				 "at most %d", o->ntables, SLAB_MAX_TABLES);
	srv_machine_probe(&m);
	return srv_config_check_memory(o, &m);
}

/* ---- credentials ---- */

int srv_config_add_cred(struct srv_config *o, const char *field, uint32_t id,
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
	for (size_t i = 0; i < o->ncreds; i++)
		if (o->creds[i].id == id) {
			auth_key_wipe(&k);
			return rs_seterr(RS_E_INVAL, "%s.id: key id %u is "
					 "given twice", field, id);
		}
	keys = rs_realloc(o->creds, (o->ncreds + 1) * sizeof(*keys));
	if (!keys) {
		auth_key_wipe(&k);
		return rs_seterr(-ENOMEM, "config: out of memory");
	}
	keys[o->ncreds++] = k;
	o->creds = keys;
	auth_key_wipe(&k);
	return 0;
}

int srv_config_add_cred_file(struct srv_config *o, const char *field,
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
	ret = srv_config_add_cred(o, field, id, role, secret, len);
	sodium_memzero(secret, sizeof(secret));
	return ret;
}

/* The file's keys[] into credentials (secret files read here); keys[]
 * is freed then, so that its inline secrets live in one place. */
static int creds_from_keys(struct srv_config *c)
{
	struct srv_config spent;
	char field[48];
	int ret = 0;

	for (uint32_t i = 0; !ret && i < c->nkeys; i++) {
		const struct srv_config_key *k = &c->keys[i];

		snprintf(field, sizeof(field), "auth.keys[%u]", i);
		ret = k->secret_file ?
			      srv_config_add_cred_file(c, field, k->id, k->role,
						       k->secret_file) :
			      srv_config_add_cred(c, field, k->id, k->role,
						  k->secret,
						  strlen(k->secret));
	}
	memset(&spent, 0, sizeof(spent));
	spent.keys = c->keys;
	spent.nkeys = c->nkeys;
	c->keys = NULL;
	c->nkeys = 0;
	srv_config_clear(&spent);
	return ret;
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
	srv_config_defaults(&c->c);
	*out = c;
	return 0;
}

RS_EXPORT void rs_server_config_delete(struct rs_server_config **cfg)
{
	if (!cfg || !*cfg)
		return;
	srv_config_clear(&(*cfg)->c);
	free(*cfg);
	*cfg = NULL;
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
	if (!(*out = rs_calloc(1, sizeof(**out)))) {
		srv_config_free(&c);
		return rs_seterr(-ENOMEM, "config: out of memory");
	}
	(*out)->c = *c;		/* the parsed config itself */
	free(c);
	ret = creds_from_keys(&(*out)->c);
	if (!ret)
		ret = srv_config_validate(&(*out)->c);
	if (ret)
		rs_server_config_delete(out);
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
 * config's own row parser (config.c); a refused value changes nothing. */
RS_EXPORT int rs_server_config_set(struct rs_server_config *cfg,
				   const char *path, const char *value)
{
	uint32_t backend;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	backend = cfg->c.backend;
	ret = srv_config_set(&cfg->c, path, value);
	if (!ret && (ret = storage_rule(&cfg->c, path)))
		cfg->c.backend = backend;
	return ret;
}

/* rs_server_config_set() of an unsigned value */
static int set_uint(struct rs_server_config *cfg, const char *path,
		    uint64_t v)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRIu64, v);
	return rs_server_config_set(cfg, path, text);
}

RS_EXPORT int rs_server_config_set_listen(struct rs_server_config *cfg,
					  const char *addr_port)
{
	char ip[SRV_CONFIG_ADDR_MAX + 1], old[sizeof(ip)];
	uint16_t port;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	/* "ADDR:PORT" or "[IPv6]:PORT", no default port; port 0: any free
	 * port */
	ret = rs_addr_parse("listen", addr_port, 0, true, ip, sizeof(ip),
			    &port);
	if (ret)
		return ret;
	memcpy(old, cfg->c.listen_addr, sizeof(old));
	ret = rs_server_config_set(cfg, "listen.addr", ip);
	if (!ret && (ret = set_uint(cfg, "listen.port", port)))
		memcpy(cfg->c.listen_addr, old, sizeof(old));
	return ret;
}

RS_EXPORT int rs_server_config_set_workers(struct rs_server_config *cfg,
					   unsigned n)
{
	return set_uint(cfg, "workers", n);
}

/* size 0: the row's default; a refused path keeps the old size */
RS_EXPORT int rs_server_config_set_storage(struct rs_server_config *cfg,
					   const char *path, uint64_t size)
{
	uint64_t old;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config: NULL");
	old = cfg->c.storage_bytes;
	ret = set_uint(cfg, "storage.size",
		       size ? size : srv_config_row("storage.size")->def);
	if (!ret && (ret = rs_server_config_set(cfg, "storage.path", path)))
		cfg->c.storage_bytes = old;
	return ret;
}

RS_EXPORT int rs_server_config_set_metrics_port(struct rs_server_config *cfg,
						unsigned port)
{
	return set_uint(cfg, "metrics_port", port);
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
	return srv_config_add_cred(&cfg->c, "key", key_id, r, secret, len);
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
	return srv_config_add_cred_file(&cfg->c, "key", key_id, r, path);
}

RS_EXPORT int rs_server_config_set_auth_skew(struct rs_server_config *cfg,
					     unsigned seconds)
{
	return set_uint(cfg, "auth.max_skew_s", seconds);
}

int srv_config_to_node(const struct rs_server_config *cfg,
		       struct srv_config *o)
{
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "server: config is NULL");
	ret = srv_config_validate(&cfg->c);
	if (ret)
		return ret;
	return srv_config_copy(o, &cfg->c);
}
