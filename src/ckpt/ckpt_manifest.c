/*
 * ckpt_manifest.c - a checkpoint's MANIFEST, and verifying a checkpoint.
 *
 * MANIFEST is one line "recstore-checkpoint <version> xxh64=<16 hex>"
 * followed by JSON (docs/checkpoint-format.md); the checksum covers every
 * byte after that first line. Floats are written with 17 significant
 * digits, so they read back bit for bit; 64-bit values that JSON numbers
 * cannot carry exactly (checksums, seeds) are hex strings.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "ckpt/ckpt_int.h"
#include "common/rs_internal.h"
#include "common/rs_json.h"
#include "common/spec_json.h"
#include "value/optimizer.h"
#include "value/row_format.h"

#define MAGIC_LINE "recstore-checkpoint"
#define MANIFEST_MAX (256u << 20)
#define MAX_TABLES 65536u
#define MAX_PARTS (1u << 20)

static const char *const kind_names[] = {
	[CKPT_FULL] = "full",
	[CKPT_INCREMENTAL] = "incremental",
	[CKPT_EXPORT] = "export",
};

void ckpt_new_id(uint8_t id[CKPT_ID_BYTES])
{
	size_t got = 0;

	while (got < CKPT_ID_BYTES) {
		ssize_t k = getrandom(id + got, CKPT_ID_BYTES - got, 0);

		if (k > 0)
			got += (size_t)k;
		else if (errno != EINTR)
			break;
	}
	if (got < CKPT_ID_BYTES) {	/* no entropy source: time and pid */
		uint64_t a = (uint64_t)time(NULL), b = (uint64_t)getpid();

		le_st64(id, XXH64(&a, sizeof(a), b));
		le_st64(id + 8, XXH64(&b, sizeof(b), a));
	}
}

void ckpt_id_hex(const uint8_t id[CKPT_ID_BYTES],
		 char hex[2 * CKPT_ID_BYTES + 1])
{
	for (int i = 0; i < CKPT_ID_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
}

static int id_parse(const char *s, uint8_t id[CKPT_ID_BYTES])
{
	if (!s || strlen(s) != 2 * CKPT_ID_BYTES)
		return -1;
	for (int i = 0; i < CKPT_ID_BYTES; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		id[i] = (uint8_t)v;
	}
	return 0;
}

void ckpt_part_desc_for(const struct ckpt_manifest *m, uint32_t t,
			uint32_t p, struct ckpt_part_desc *d)
{
	const struct ckpt_table_entry *e = &m->tables[t];

	memset(d, 0, sizeof(*d));
	memcpy(d->id, m->id, CKPT_ID_BYTES);
	d->table = t;
	d->part = p;
	d->dim = e->spec.dim;
	d->dtype = e->spec.dtype;
	d->optim_kind = e->spec.optim.kind;
	d->with_state = m->kind != CKPT_EXPORT;
	d->state_floats = d->with_state ? e->state_floats : 0;
}

/* ---- writing ---- */

static json_t *hex64(uint64_t v)
{
	char b[17];

	snprintf(b, sizeof(b), "%016" PRIx64, v);
	return json_string(b);
}

static json_t *spec_json(const struct ckpt_table_entry *e)
{
	const struct proto_table_spec *s = &e->spec;

	return json_pack(
		"{s:s, s:i, s:s, s:I, s:o, s:o, s:i}", "name", s->name, "dim",
		(int)s->dim, "dtype", proto_dtype_name(s->dtype), "capacity",
		(json_int_t)s->capacity, "optimizer",
		spec_params_object(SPEC_G_OPTIM, SPEC_JSON_KIND, &s->optim),
		"initializer",
		spec_params_object(SPEC_G_INIT, SPEC_JSON_KIND, &s->init),
		"state_floats", (int)e->state_floats);
}

/* Does the table have settings of manifest version 2 (growth, eviction)? */
static bool has_v2(const struct proto_table_spec *s)
{
	return s->grow_log2 || proto_evict_active(&s->evict);
}

/* The version m is written in: 2 only if a table needs it, so that a
 * checkpoint without growth or eviction is read by older builds too. */
static unsigned manifest_version(const struct ckpt_manifest *m)
{
	for (uint32_t t = 0; t < m->ntables; t++)
		if (has_v2(&m->tables[t].spec))
			return 2;
	return CKPT_FORMAT_VERSION;
}

/* Version 2's members of a table: "max_capacity" (2^grow_log2) and
 * "eviction" (as the node's catalog writes it), each only when set. */
static int v2_json(json_t *jt, const struct proto_table_spec *s)
{
	const struct proto_evict *e = &s->evict;

	if (s->grow_log2 &&
	    json_object_set_new(jt, "max_capacity",
				json_integer((json_int_t)(1ull << s->grow_log2))))
		return -1;
	if (proto_evict_active(e) &&
	    json_object_set_new(jt, "eviction", json_pack(
		    "{s:s, s:I, s:I, s:I}", "policy",
		    proto_evict_policy_name(e->policy), "max_rows",
		    (json_int_t)e->max_rows, "ttl_s", (json_int_t)e->ttl_s,
		    "admit_after", (json_int_t)e->admit_after)))
		return -1;
	return 0;
}

static json_t *manifest_json(const struct ckpt_manifest *m)
{
	char id[2 * CKPT_ID_BYTES + 1], base[2 * CKPT_ID_BYTES + 1];
	json_t *o, *tables = json_array();

	ckpt_id_hex(m->id, id);
	ckpt_id_hex(m->base, base);
	for (uint32_t t = 0; tables && t < m->ntables; t++) {
		const struct ckpt_table_entry *e = &m->tables[t];
		json_t *jt = spec_json(e), *parts = json_array();

		for (uint32_t p = 0; jt && parts && p < e->nparts; p++) {
			const struct ckpt_part_entry *pe = &e->parts[p];

			json_array_append_new(parts, json_pack(
				"{s:s, s:I, s:I, s:I, s:I, s:o}", "file",
				pe->file, "rows", (json_int_t)pe->sum.rows,
				"deleted", (json_int_t)pe->sum.deleted,
				"record_bytes",
				(json_int_t)pe->sum.raw_bytes, "bytes",
				(json_int_t)pe->sum.bytes, "xxh64",
				hex64(pe->sum.xxh64)));
		}
		if (!jt || !parts ||
		    json_array_size(parts) != e->nparts ||
		    v2_json(jt, &e->spec)) {
			json_decref(parts);
			json_decref(jt);
			json_decref(tables);
			return NULL;
		}
		if (json_object_set_new(jt, "parts", parts)) { /* takes it */
			json_decref(jt);
			json_decref(tables);
			return NULL;
		}
		json_array_append_new(tables, jt);
	}
	if (!tables || json_array_size(tables) != m->ntables) {
		json_decref(tables);
		return NULL;
	}
	o = json_pack("{s:s, s:i, s:s, s:s, s:s?, s:I, s:o}", "format",
		      MAGIC_LINE, "version", (int)manifest_version(m), "id", id,
		      "kind",
		      kind_names[m->kind], "base",
		      m->kind == CKPT_INCREMENTAL ? base : NULL, "created_ms",
		      (json_int_t)m->created_ms, "tables", tables);
	if (o && m->kind == CKPT_INCREMENTAL &&
	    json_object_set_new(o, "base_dir", json_string(m->base_dir))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t k = write(fd, buf, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		buf += k;
		n -= (size_t)k;
	}
	return 0;
}

int ckpt_manifest_save(const char *dir, const struct ckpt_manifest *m)
{
	char path[PATH_MAX], tmp[PATH_MAX], head[64];
	json_t *o;
	char *body = NULL;
	int fd = -1, dfd, rc;

	if (m->kind < CKPT_FULL || m->kind > CKPT_EXPORT)
		return rs_seterr(RS_E_INVAL, "checkpoint: unknown kind %u",
				 m->kind);
	if (m->kind == CKPT_INCREMENTAL && !ckpt_file_name_ok(m->base_dir))
		return rs_seterr(RS_E_INVAL, "checkpoint: base directory "
				 "'%s' is not a plain name", m->base_dir);
	if ((size_t)snprintf(path, sizeof(path), "%s/" CKPT_MANIFEST, dir) >=
		    sizeof(path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/." CKPT_MANIFEST ".tmp",
			     dir) >= sizeof(tmp))
		return rs_seterr(RS_E_INVAL, "checkpoint: path too long");
	o = manifest_json(m);
	body = o ? rs_json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER |
					    JSON_REAL_PRECISION(17)) : NULL;
	json_decref(o);
	if (!body)
		return rs_seterr(-ENOMEM, "checkpoint: cannot build the "
				 "manifest");
	snprintf(head, sizeof(head), MAGIC_LINE " %u xxh64=%016" PRIx64 "\n",
		 manifest_version(m), (uint64_t)XXH64(body, strlen(body), 0));
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = rs_seterr(-errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if ((rc = write_all(fd, head, strlen(head))) ||
	    (rc = write_all(fd, body, strlen(body))) ||
	    (rc = fsync(fd) ? -errno : 0)) {
		rc = rs_seterr(rc, "%s: %s", tmp, strerror(-rc));
		goto out;
	}
	close(fd);
	fd = -1;
	if (rename(tmp, path)) {
		rc = rs_seterr(-errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	rc = 0;
out:
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	free(body);
	return rc;
}

/* ---- reading ---- */

struct mctx {
	const char *path;
	int rc;
	unsigned version;	/* the manifest's */
};

/* Record the first problem, "PATH: WHERE: WHAT". */
static int bad(struct mctx *c, const char *where, const char *what)
{
	if (!c->rc)
		c->rc = rs_seterr(RS_E_CORRUPT, "%s: %s: %s", c->path, where,
				  what);
	return c->rc;
}

/* Record that field WHERE.KEY is WHAT. */
static void bad_field(struct mctx *c, const char *where, const char *key,
		      const char *what)
{
	char w[256];

	snprintf(w, sizeof(w), "%s.%s", where, key);
	bad(c, w, what);
}

static uint64_t get_u64(struct mctx *c, json_t *o, const char *key,
			uint64_t max, const char *where)
{
	json_t *v = json_object_get(o, key);

	if (json_is_integer(v) && json_integer_value(v) >= 0 &&
	    (uint64_t)json_integer_value(v) <= max)
		return (uint64_t)json_integer_value(v);
	bad_field(c, where, key, "missing, or not an integer in range");
	return 0;
}

static const char *get_str(struct mctx *c, json_t *o, const char *key,
			   const char *where)
{
	json_t *v = json_object_get(o, key);

	if (json_is_string(v))
		return json_string_value(v);
	bad_field(c, where, key, "missing, or not a string");
	return "";
}

static uint64_t get_hex64(struct mctx *c, json_t *o, const char *key,
			  const char *where)
{
	const char *s = get_str(c, o, key, where);
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 16);
	if (strlen(s) != 16 || *end || errno)
		bad_field(c, where, key, "not 16 hex digits");
	return v;
}

/* A part's file name: a plain name in the checkpoint's directory. */
bool ckpt_file_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n >= CKPT_FILE_MAX || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '-' || s[i] == '_' || s[i] == '.' ||
		      (s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

/* Version 2's members of table jt into s (absent: none), checked as a
 * node checks a spec. */
static void v2_from_json(struct mctx *c, json_t *jt,
			 struct proto_table_spec *s, const char *where)
{
	json_t *je = json_object_get(jt, "eviction");
	struct proto_limits lim;
	char w[160];
	int k;

	if (json_object_get(jt, "max_capacity")) {
		uint64_t mc = get_u64(c, jt, "max_capacity",
				      1ull << PROTO_MAX_GROW_LOG2, where);
		unsigned l = 0;

		while (l < 63 && (1ull << l) < mc)
			l++;
		if (mc < 2 || (1ull << l) != mc)
			bad_field(c, where, "max_capacity",
				  "not a power of two of at least 2");
		s->grow_log2 = (uint8_t)l;
	}
	if (je) {
		snprintf(w, sizeof(w), "%s.eviction", where);
		if (!json_is_object(je)) {
			bad(c, w, "not an object");
			return;
		}
		k = proto_evict_policy_parse(get_str(c, je, "policy", w));
		if (k < 0)
			bad(c, w, "unknown policy");
		s->evict.policy = k < 0 ? 0 : (uint32_t)k;
		s->evict.max_rows = get_u64(c, je, "max_rows",
					    PROTO_MAX_CAPACITY, w);
		s->evict.ttl_s = (uint32_t)get_u64(c, je, "ttl_s",
						   PROTO_EVICT_TTL_MAX, w);
		s->evict.admit_after = (uint32_t)get_u64(
			c, je, "admit_after", PROTO_EVICT_ADMIT_MAX, w);
	}
	if (c->rc || !has_v2(s))
		return;
	proto_limits_default(&lim);
	lim.max_dim = ROW_MAX_DIM;
	if (proto_table_spec_validate(s, &lim)) {
		char msg[200];

		snprintf(msg, sizeof(msg), "%s", rs_errormsg());
		bad(c, where, msg);
	}
}

/* The optimizer (g SPEC_G_OPTIM) or initializer object o of table
 * `where`: its type (or the catalog's "kind"), then the field table's
 * members. */
static void params_from_json(struct mctx *c, json_t *o, enum spec_group g,
			     void *params, const char *where)
{
	const char *sect = g == SPEC_G_OPTIM ? "optimizer" : "initializer";
	const char *type = spec_kind_from_json(o), *key;
	char w[160];
	int k;

	snprintf(w, sizeof(w), "%s.%s", where, sect);
	if (!type)
		bad_field(c, w, SPEC_JSON_KIND, "missing, or not a string");
	k = g == SPEC_G_OPTIM ? optim_kind_parse(type) : init_kind_parse(type);
	if (type && k < 0)
		bad(c, w, "unknown type");
	if (spec_params_from_json(o, g, params, &key))
		bad_field(c, w, key, "missing, or of the wrong type");
	/* the kind is the struct's first member in both groups */
	*(uint32_t *)params = k < 0 ? 0 : (uint32_t)k;
}

static void table_from_json(struct mctx *c, json_t *jt,
			    struct ckpt_table_entry *e, const char *where)
{
	struct proto_table_spec *s = &e->spec;
	json_t *jo = json_object_get(jt, "optimizer");
	json_t *ji = json_object_get(jt, "initializer");
	json_t *parts = json_object_get(jt, "parts");
	const char *name = get_str(c, jt, "name", where);
	char w[160];
	int k;

	if (!ji) /* the catalog's spelling, accepted as an alias */
		ji = json_object_get(jt, "init");

	if (strlen(name) > PROTO_NAME_MAX ||
	    proto_name_check("name", name, strlen(name)))
		bad(c, where, "bad table name");
	else
		snprintf(s->name, sizeof(s->name), "%s", name);
	s->dim = (uint32_t)get_u64(c, jt, "dim", ROW_MAX_DIM, where);
	if (!s->dim)
		bad(c, where, "dim 0");
	k = proto_dtype_parse(get_str(c, jt, "dtype", where));
	if (k < 0)
		bad(c, where, "unknown dtype");
	s->dtype = k < 0 ? 0 : (uint32_t)k;
	s->capacity = get_u64(c, jt, "capacity", PROTO_MAX_CAPACITY, where);
	if (!json_is_object(jo) || !json_is_object(ji)) {
		bad(c, where, "optimizer or initializer missing");
		return;
	}
	params_from_json(c, jo, SPEC_G_OPTIM, &s->optim, where);
	params_from_json(c, ji, SPEC_G_INIT, &s->init, where);
	e->state_floats = (uint32_t)get_u64(c, jt, "state_floats",
					    2u * ROW_MAX_DIM + 1, where);
	if (!c->rc &&
	    e->state_floats != optim_state_floats(s->optim.kind, s->dim))
		bad(c, where, "state_floats does not match the optimizer");
	if (!c->rc && c->version >= 2)
		v2_from_json(c, jt, s, where);
	if (!json_is_array(parts) || json_array_size(parts) > MAX_PARTS) {
		bad(c, where, "parts missing or too many");
		return;
	}
	if (c->rc)
		return;
	e->nparts = (uint32_t)json_array_size(parts);
	e->parts = rs_calloc(e->nparts ? e->nparts : 1, sizeof(*e->parts));
	if (!e->parts) {
		c->rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
		return;
	}
	for (uint32_t p = 0; p < e->nparts && !c->rc; p++) {
		json_t *jp = json_array_get(parts, p);
		struct ckpt_part_entry *pe = &e->parts[p];
		const char *file;

		snprintf(w, sizeof(w), "%s.parts[%u]", where, p);
		if (!json_is_object(jp)) {
			bad(c, w, "not an object");
			break;
		}
		file = get_str(c, jp, "file", w);
		if (!ckpt_file_name_ok(file))
			bad(c, w, "bad file name");
		else
			snprintf(pe->file, sizeof(pe->file), "%s", file);
		pe->sum.rows = get_u64(c, jp, "rows", INT64_MAX, w);
		pe->sum.deleted = get_u64(c, jp, "deleted", INT64_MAX, w);
		pe->sum.raw_bytes = get_u64(c, jp, "record_bytes", INT64_MAX,
					    w);
		pe->sum.bytes = get_u64(c, jp, "bytes", INT64_MAX, w);
		pe->sum.xxh64 = get_hex64(c, jp, "xxh64", w);
	}
}

static int read_file(const char *path, char **out, size_t *len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return rs_seterr(-errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > MANIFEST_MAX) {
		close(fd);
		return rs_seterr(RS_E_CORRUPT, "%s: not a regular file of at "
				 "most %u bytes", path, MANIFEST_MAX);
	}
	buf = rs_malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return rs_seterr(-ENOMEM, "checkpoint: out of memory");
	}
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? -errno : RS_E_CORRUPT;
			close(fd);
			free(buf);
			return rs_seterr(rc, "%s: read failed", path);
		}
		got += (size_t)k;
	}
	close(fd);
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

int ckpt_manifest_load(const char *dir, struct ckpt_manifest **out)
{
	char path[PATH_MAX], *buf = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/" CKPT_MANIFEST, dir) >=
	    sizeof(path))
		return rs_seterr(RS_E_INVAL, "checkpoint: path too long");
	if ((rc = read_file(path, &buf, &len)))
		return rc;
	rc = ckpt_manifest_parse(path, buf, len, out);
	free(buf);
	return rc;
}

int ckpt_manifest_parse(const char *path, const char *buf, size_t len,
			struct ckpt_manifest **out)
{
	char w[64], head[64];
	struct ckpt_manifest *m = NULL;
	struct mctx c = { .path = path };
	json_error_t jerr;
	bool oom;
	json_t *o = NULL, *tables;
	const char *body, *s;
	unsigned version;
	uint64_t sum;
	int n = 0;

	*out = NULL;
	/* the first line, in its one canonical spelling */
	if (sscanf(buf, MAGIC_LINE " %u xxh64=%16" SCNx64 "%n", &version,
		   &sum, &n) != 2 || buf[n] != '\n' ||
	    snprintf(head, sizeof(head), MAGIC_LINE " %u xxh64=%016" PRIx64
		     "\n", version, sum) != n + 1 ||
	    memcmp(buf, head, (size_t)n + 1)) {
		c.rc = rs_seterr(RS_E_CORRUPT, "%s: not a checkpoint manifest",
				 path);
		goto out;
	}
	if (version < 1 || version > CKPT_MANIFEST_VERSION_MAX) {
		c.rc = rs_seterr(RS_E_UNSUPPORTED, "%s: format version %u "
				 "(this build reads 1 to %u)", path, version,
				 CKPT_MANIFEST_VERSION_MAX);
		goto out;
	}
	c.version = version;
	body = buf + n + 1;
	if (XXH64(body, len - (size_t)(n + 1), 0) != sum) {
		c.rc = rs_seterr(RS_E_CORRUPT, "%s: checksum mismatch (the "
				 "manifest is damaged)", path);
		goto out;
	}
	o = rs_json_loadb(body, len - (size_t)(n + 1), JSON_REJECT_DUPLICATES,
			  &jerr, &oom);
	if (oom) {
		c.rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
		goto out;
	}
	if (!json_is_object(o)) {
		bad(&c, "(top)", "not a JSON object");
		goto out;
	}
	if (!(m = rs_calloc(1, sizeof(*m)))) {
		c.rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
		goto out;
	}
	if (id_parse(get_str(&c, o, "id", "(top)"), m->id))
		bad(&c, "id", "not 32 hex digits");
	s = get_str(&c, o, "kind", "(top)");
	for (unsigned k = CKPT_FULL; k <= CKPT_EXPORT; k++)
		if (!strcmp(s, kind_names[k]))
			m->kind = k;
	if (!m->kind)
		bad(&c, "kind", "unknown");
	if (m->kind == CKPT_INCREMENTAL &&
	    id_parse(get_str(&c, o, "base", "(top)"), m->base))
		bad(&c, "base", "not 32 hex digits");
	if (m->kind == CKPT_INCREMENTAL) {
		s = get_str(&c, o, "base_dir", "(top)");
		if (!ckpt_file_name_ok(s))
			bad(&c, "base_dir", "not a plain directory name");
		else
			snprintf(m->base_dir, sizeof(m->base_dir), "%s", s);
	}
	m->created_ms = get_u64(&c, o, "created_ms", INT64_MAX, "(top)");
	tables = json_object_get(o, "tables");
	if (!json_is_array(tables) || json_array_size(tables) > MAX_TABLES)
		bad(&c, "tables", "missing or too many");
	if (c.rc)
		goto out;
	m->ntables = (uint32_t)json_array_size(tables);
	m->tables = rs_calloc(m->ntables ? m->ntables : 1, sizeof(*m->tables));
	if (!m->tables) {
		c.rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
		goto out;
	}
	for (uint32_t t = 0; t < m->ntables && !c.rc; t++) {
		snprintf(w, sizeof(w), "tables[%u]", t);
		if (!json_is_object(json_array_get(tables, t)))
			bad(&c, w, "not an object");
		else
			table_from_json(&c, json_array_get(tables, t),
					&m->tables[t], w);
	}
out:
	json_decref(o);
	if (c.rc) {
		ckpt_manifest_free(m);
		return c.rc;
	}
	*out = m;
	return 0;
}

void ckpt_manifest_free(struct ckpt_manifest *m)
{
	if (!m)
		return;
	for (uint32_t t = 0; m->tables && t < m->ntables; t++)
		free(m->tables[t].parts);
	free(m->tables);
	free(m);
}

/* ---- verify ---- */

static int verify_part(const char *dir, const struct ckpt_manifest *m,
		       uint32_t t, uint32_t p, struct ckpt_verify_stats *st)
{
	const struct ckpt_part_entry *pe = &m->tables[t].parts[p];
	struct ckpt_part_desc d;
	struct ckpt_reader *r;
	struct ckpt_record rec;
	struct ckpt_part_sum got;
	char path[PATH_MAX];
	struct stat sb;
	int rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, pe->file) >=
	    sizeof(path))
		return rs_seterr(RS_E_INVAL, "checkpoint: path too long");
	if (stat(path, &sb))
		return rs_seterr(-errno, "%s: %s (listed in the manifest)",
				 path, errno == ENOENT ? "missing" :
				 strerror(errno));
	if ((uint64_t)sb.st_size != pe->sum.bytes)
		return rs_seterr(RS_E_CORRUPT, "%s: %lld bytes, the manifest "
				 "says %llu", path, (long long)sb.st_size,
				 (unsigned long long)pe->sum.bytes);
	ckpt_part_desc_for(m, t, p, &d);
	if ((rc = ckpt_part_open(&r, path, &d)))
		return rc;
	while ((rc = ckpt_part_next(r, &rec)) > 0)
		;
	if (!rc) {
		ckpt_part_sum_of(r, &got);
		if (got.xxh64 != pe->sum.xxh64 || got.rows != pe->sum.rows ||
		    got.deleted != pe->sum.deleted ||
		    got.raw_bytes != pe->sum.raw_bytes)
			rc = rs_seterr(RS_E_CORRUPT, "%s: does not match the "
				       "manifest (checksum or counts)", path);
	}
	ckpt_part_close(r);
	if (!rc && st) {
		st->parts++;
		st->rows += got.rows;
		st->deleted += got.deleted;
		st->bytes += got.bytes;
		st->raw_bytes += got.raw_bytes;
	}
	return rc;
}

int ckpt_verify(const char *dir, struct ckpt_verify_stats *st)
{
	struct ckpt_manifest *m;
	int rc;

	if (st)
		memset(st, 0, sizeof(*st));
	if ((rc = ckpt_manifest_load(dir, &m)))
		return rc;
	for (uint32_t t = 0; !rc && t < m->ntables; t++)
		for (uint32_t p = 0; !rc && p < m->tables[t].nparts; p++)
			rc = verify_part(dir, m, t, p, st);
	ckpt_manifest_free(m);
	return rc;
}
