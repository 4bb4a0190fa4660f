/*
 * srv_catalog.c - table specs (optimizer and initializer parameters, what
 * the slab directory does not keep about a table) as JSON:
 *  - the catalog record of each table inside the pool (slab_table_cfg.
 *    catalog): srv_spec_encode/decode, one spec object, compact;
 *  - the JSON catalog file of pools of layout 2 ("<pool>.tables.json"),
 *    read once at open so that its specs move into the pool's records
 *    (srv_tables.c); no longer written.
 *
 * File format (written by earlier versions):
 *   {"format": "recstore-tables", "version": 1,
 *    "tables": [{"uid": "00c0ffee12345678", "spec": {
 *        "name": "ads", "dim": 64, "dtype": "fp32", "capacity": 100000,
 *        "optimizer": {"kind": "adagrad", "flags": 0, "lr": 0.01, ...},
 *        "init": {"kind": "uniform", "value": 0, "a": 0.01, "std": 0.01,
 *                 "seed": 7}}}]}
 * uid is the slab table's incarnation id (hex; "" for an entry written
 * before its table existed). Floats are stored as doubles, which round-
 * trip every float exactly. The members of "optimizer" and "init" after
 * "kind" are the rows of the spec's field table (common/spec_fields.h,
 * common/spec_json.h). Records keep the keys "kind" and "init" although
 * the one spelling elsewhere is "type" and "initializer": an older node
 * opening this pool reads only these. Either spelling is read.
 *
 * The file's entries were written before their table and removed after
 * its drop, so an entry may name a table the pool does not have: only an
 * entry whose name (and uid, if set) matches a pool table is used.
 *
 * Not thread-safe: callers hold tables.admin.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/rs_json.h"
#include "common/spec_json.h"
#include "server/srv_catalog.h"

json_t *srv_spec_to_json(const struct proto_table_spec *s)
{
	const char *dt = proto_dtype_name(s->dtype);
	const struct proto_evict *e = &s->evict;
	json_t *j;

	j = json_pack("{s:s, s:I, s:s, s:I, s:o, s:o}", "name", s->name,
		      "dim", (json_int_t)s->dim, "dtype", dt ? dt : "?",
		      "capacity", (json_int_t)s->capacity, "optimizer",
		      spec_params_object(SPEC_G_OPTIM, SPEC_JSON_KIND_OLD,
					 &s->optim),
		      "init", spec_params_object(SPEC_G_INIT,
						 SPEC_JSON_KIND_OLD, &s->init));
	if (j && s->ident) {
		char id[17];

		snprintf(id, sizeof(id), "%016" PRIx64, s->ident);
		if (json_object_set_new(j, "ident", json_string(id))) {
			json_decref(j);
			return NULL;
		}
	}
	if ((j && s->grow_log2 &&
	     json_object_set_new(j, "grow_log2",
				 json_integer((json_int_t)s->grow_log2))) ||
	    (j && proto_evict_active(e) &&
	     json_object_set_new(j, "eviction", json_pack(
			"{s:s, s:I, s:I, s:I}", "policy",
			proto_evict_policy_name(e->policy), "max_rows",
			(json_int_t)e->max_rows, "ttl_s", (json_int_t)e->ttl_s,
			"admit_after", (json_int_t)e->admit_after)))) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* j[key] as a string, or as an integer: 0, or -1 if it is absent or of
 * another type. (json_unpack would do, but it allocates, and an
 * allocation that failed would read as a record that is not a spec.) */
static int get_s(json_t *j, const char *key, const char **out)
{
	*out = json_string_value(json_object_get(j, key));
	return *out ? 0 : -1;
}

static int get_i(json_t *j, const char *key, json_int_t *out)
{
	json_t *v = json_object_get(j, key);

	if (!json_is_integer(v))
		return -1;
	*out = json_integer_value(v);
	return 0;
}

/* The optional "eviction" object (absent: none). 0 or -1. */
static int evict_from_json(json_t *j, struct proto_evict *e)
{
	json_int_t max_rows, ttl, k;
	const char *pol;
	int p;

	if (!j)
		return 0;
	if (get_s(j, "policy", &pol) || get_i(j, "max_rows", &max_rows) ||
	    get_i(j, "ttl_s", &ttl) || get_i(j, "admit_after", &k) ||
	    (p = proto_evict_policy_parse(pol)) < 0 || max_rows < 0 ||
	    max_rows > (json_int_t)PROTO_MAX_CAPACITY || ttl < 0 ||
	    ttl > PROTO_EVICT_TTL_MAX || k < 0 || k > PROTO_EVICT_ADMIT_MAX)
		return -1;
	e->policy = (uint32_t)p;
	e->max_rows = (uint64_t)max_rows;
	e->ttl_s = (uint32_t)ttl;
	e->admit_after = (uint32_t)k;
	return 0;
}

static int hex64(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s)
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 16);
	return errno || *end ? -1 : 0;
}

/* The "optimizer" and "init" objects (the config's spellings "type" and
 * "initializer" are read too). 0 or -1. */
static int params_from_json(json_t *j, struct proto_table_spec *s)
{
	json_t *opt = json_object_get(j, "optimizer");
	json_t *ini = json_object_get(j, "init");
	const char *bad;
	int ko, ki;

	if (!ini)
		ini = json_object_get(j, "initializer");
	if (!json_is_object(opt) || !json_is_object(ini))
		return -1;
	ko = optim_kind_parse(spec_kind_from_json(opt));
	ki = init_kind_parse(spec_kind_from_json(ini));
	if (ko < 0 || ki < 0 ||
	    spec_params_from_json(opt, SPEC_G_OPTIM, &s->optim, &bad) ||
	    spec_params_from_json(ini, SPEC_G_INIT, &s->init, &bad))
		return -1;
	s->optim.kind = (uint32_t)ko;
	s->init.kind = (uint32_t)ki;
	return 0;
}

int srv_spec_from_json(json_t *j, struct proto_table_spec *s)
{
	struct proto_limits lim;
	const char *name, *dtype;
	json_int_t dim, cap;
	int k;

	memset(s, 0, sizeof(*s));
	if (get_s(j, "name", &name) || get_i(j, "dim", &dim) ||
	    get_s(j, "dtype", &dtype) || get_i(j, "capacity", &cap))
		return -1;
	if (strlen(name) > PROTO_NAME_MAX || dim < 1 || dim > PROTO_MAX_DIM ||
	    cap < 1)
		return -1;
	strcpy(s->name, name);
	s->dim = (uint32_t)dim;
	s->capacity = (uint64_t)cap;
	if (json_object_get(j, "grow_log2")) { /* growth: absent is none */
		json_t *g = json_object_get(j, "grow_log2");

		if (!json_is_integer(g) || json_integer_value(g) < 0 ||
		    json_integer_value(g) > PROTO_MAX_GROW_LOG2)
			return -1;
		s->grow_log2 = (uint8_t)json_integer_value(g);
	}
	if (json_object_get(j, "ident")) { /* identity: absent is none */
		const char *id = json_string_value(json_object_get(j, "ident"));

		if (!id || hex64(id, &s->ident) || !s->ident)
			return -1;
	}
	k = proto_dtype_parse(dtype);
	if (k < 0 || params_from_json(j, s))
		return -1;
	s->dtype = (uint32_t)k;
	if (evict_from_json(json_object_get(j, "eviction"), &s->evict))
		return -1;
	/* what a node accepts in a TABLE_CREATE or its config: a damaged
	 * record must not give a table an infinite learning rate (a JSON
	 * number past the float range reads as inf) or a name, capacity or
	 * eviction no node would have written */
	proto_limits_default(&lim);
	lim.max_dim = PROTO_MAX_DIM;
	return proto_table_spec_validate(s, &lim) ? -1 : 0;
}

void srv_catalog_init(struct srv_catalog *c, const char *pool_path)
{
	memset(c, 0, sizeof(*c));
	if (pool_path)
		snprintf(c->path, sizeof(c->path), "%s.tables.json",
			 pool_path);
}

int srv_catalog_find(const struct srv_catalog *c, const char *name)
{
	for (unsigned i = 0; i < c->n; i++)
		if (!strcmp(c->ent[i].spec.name, name))
			return (int)i;
	return -1;
}

int srv_catalog_set(struct srv_catalog *c, const struct proto_table_spec *s,
		    uint64_t uid)
{
	int i = srv_catalog_find(c, s->name);

	if (i < 0) {
		if (c->n == SRV_CATALOG_MAX)
			return rs_seterr(RS_E_FULL, "catalog: %d tables",
					 SRV_CATALOG_MAX);
		i = (int)c->n++;
	}
	c->ent[i].spec = *s;
	c->ent[i].uid = uid;
	return 0;
}

/* The parsed file root (consumed) into c; path: its name in messages. */
static int catalog_from_json(struct srv_catalog *c, json_t *root,
			     const char *path)
{
	json_t *tabs, *e;
	size_t i;

	tabs = json_object_get(root, "tables");
	if (!json_is_array(tabs)) {
		json_decref(root);
		return rs_seterr(RS_E_CORRUPT, "catalog %s: no \"tables\" "
				 "array", path);
	}
	json_array_foreach(tabs, i, e) {
		struct proto_table_spec s;
		const char *uid = json_string_value(json_object_get(e, "uid"));
		uint64_t u = 0;

		if (srv_spec_from_json(json_object_get(e, "spec"), &s) ||
		    !uid || (*uid && hex64(uid, &u)) ||
		    srv_catalog_set(c, &s, u)) {
			json_decref(root);
			return rs_seterr(RS_E_CORRUPT, "catalog %s: entry %zu "
					 "is malformed", path, i);
		}
	}
	json_decref(root);
	return 0;
}

int srv_catalog_load(struct srv_catalog *c)
{
	json_error_t jerr;
	json_t *root;
	bool oom;

	c->n = 0;
	if (!c->path[0])
		return 0;
	if (access(c->path, F_OK) && errno == ENOENT)
		return 0;
	root = rs_json_load_file(c->path, 0, &jerr, &oom);
	if (oom)
		return rs_seterr(-ENOMEM, "catalog %s: out of memory",
				 c->path);
	if (!root)
		return rs_seterr(RS_E_CORRUPT, "catalog %s: line %d: %s",
				 c->path, jerr.line, jerr.text);
	return catalog_from_json(c, root, c->path);
}

int srv_catalog_parse(struct srv_catalog *c, const char *text, size_t len)
{
	const char *path = c->path[0] ? c->path : "(text)";
	json_error_t jerr;
	json_t *root;
	bool oom;

	c->n = 0;
	root = rs_json_loadb(text, len, 0, &jerr, &oom);
	if (oom)
		return rs_seterr(-ENOMEM, "catalog %s: out of memory", path);
	if (!root)
		return rs_seterr(RS_E_CORRUPT, "catalog %s: line %d: %s",
				 path, jerr.line, jerr.text);
	return catalog_from_json(c, root, path);
}

int srv_spec_encode(const struct proto_table_spec *s, char *buf, size_t cap)
{
	json_t *j = srv_spec_to_json(s);
	char *text = j ? rs_json_dumps(j, JSON_COMPACT |
					     JSON_REAL_PRECISION(9)) : NULL;
	size_t len = text ? strlen(text) : 0;

	json_decref(j);
	if (!text)
		return rs_seterr(-ENOMEM, "catalog: out of memory");
	if (!len || len > cap || len > INT32_MAX) {
		free(text);
		return rs_seterr(RS_E_INVAL, "table '%s': its spec does not "
				 "fit a catalog record of %zu bytes", s->name,
				 cap);
	}
	memcpy(buf, text, len);
	free(text);
	return (int)len;
}

int srv_spec_decode(const void *buf, size_t len, struct proto_table_spec *s)
{
	json_error_t jerr;
	bool oom;
	json_t *j = rs_json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr,
				  &oom);
	int ret = j ? srv_spec_from_json(j, s) : -1;

	json_decref(j);
	if (oom)
		return rs_seterr(-ENOMEM, "catalog: out of memory");
	return ret;
}
