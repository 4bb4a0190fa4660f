/*
 * config.c - strict JSON config parser for the memory node (jansson).
 *
 * Shape: each JSON object is parsed by one function that first checks its
 * keys against a list of known names (unknown -> error, with the closest
 * known name when one is within edit distance 2), then reads the fields
 * it knows in a fixed order, so that later checks can rely on earlier
 * values whatever order the file uses (tables are read last, after the
 * limits they are checked against). Cross-field checks come at the end.
 *
 * Errors: every message starts with the JSON path of the offending field,
 * kept in struct ctx as the parser descends ("tables[2].optimizer.lr");
 * fail() formats "<path>: <what>" and returns RS_E_INVAL, fail_at() does
 * the same for a field one level below the path. The first error
 * stops the parse; everything allocated so far is freed by the caller's
 * srv_config_free().
 *
 * Numbers: integer fields accept JSON integers only (1.5 and 1e3 are
 * refused, not rounded); float fields accept any JSON number and are
 * range-checked after conversion to fp32 (1e39 becomes inf and fails).
 * Seeds accept integers >= 0 or strings (decimal or 0x hex, full 64 bits).
 *
 * Credentials ("auth"): the parser checks their shape only; a secret_file
 * is read when the config is applied (srv_config_load.c), and a secret
 * given inline is zeroed when the config is freed.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <xxhash.h>

#include "common/auth.h"
#include "common/rs_internal.h"
#include "common/rs_json.h"
#include "common/spec.h"
#include "common/spec_fields.h"
#include "server/config.h"

struct ctx {
	char path[256];
	size_t len;
};

/* append sep and part to the path (truncated to fit); returns the length
 * to restore with pop() */
static size_t push(struct ctx *c, const char *sep, const char *part)
{
	size_t old = c->len;
	int n = snprintf(c->path + c->len, sizeof(c->path) - c->len, "%s%s",
			 sep, part);

	if (n > 0)
		c->len += (size_t)n < sizeof(c->path) - c->len
				  ? (size_t)n
				  : sizeof(c->path) - 1 - c->len;
	return old;
}

/* descend into .key / [i] */
static size_t push_key(struct ctx *c, const char *key)
{
	return push(c, c->len ? "." : "", key);
}

static size_t push_index(struct ctx *c, size_t i)
{
	char idx[24];

	snprintf(idx, sizeof(idx), "[%zu]", i);
	return push(c, "", idx);
}

static void pop(struct ctx *c, size_t old)
{
	c->len = old;
	c->path[old] = '\0';
}

static int vfail(struct ctx *c, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static int fail(struct ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail_at(struct ctx *c, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int vfail(struct ctx *c, const char *fmt, va_list ap)
{
	char msg[400];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	return rs_seterr(RS_E_INVAL, "%s: %s", c->len ? c->path : "config",
			 msg);
}

static int fail(struct ctx *c, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vfail(c, fmt, ap);
	va_end(ap);
	return rc;
}

/* fail() at the field key below the current path: "<path>.key: what" */
static int fail_at(struct ctx *c, const char *key, const char *fmt, ...)
{
	size_t old = push_key(c, key);
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vfail(c, fmt, ap);
	va_end(ap);
	pop(c, old);
	return rc;
}

/* Re-issue the current message under the field key: "<path>.key: msg".
 * (vfail() copies the message before rs_seterr() overwrites it.) */
static int fail_inner(struct ctx *c, const char *key)
{
	return fail_at(c, key, "%s", rs_errormsg());
}

/* The current message names a field below the current path ("lr: must
 * be ..."): join them as "<path>.lr: must be ...". */
static int fail_below(struct ctx *c)
{
	char inner[400];

	snprintf(inner, sizeof(inner), "%s", rs_errormsg());
	return rs_seterr(RS_E_INVAL, "%s%s%s", c->path, c->len ? "." : "",
			 inner);
}

/* ---- unknown keys ---- */

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[64], prev, tmp;

	if (la >= RS_ARRAY_SIZE(row) || lb >= RS_ARRAY_SIZE(row))
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t best = prev + (a[i - 1] != b[j - 1]);

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			tmp = row[j];
			row[j] = best;
			prev = tmp;
		}
	}
	return row[lb];
}

static int is_known(const char *key, const char *const *known)
{
	for (; *known; known++)
		if (strcmp(key, *known) == 0)
			return 1;
	return 0;
}

/* every key of obj must be one of known[] (NULL-terminated) */
static int check_keys(struct ctx *c, json_t *obj, const char *const *known)
{
	const char *key, *best = NULL;
	size_t d, best_d = 3;
	json_t *v;

	json_object_foreach(obj, key, v) {
		if (is_known(key, known))
			continue;
		for (const char *const *k = known; *k; k++)
			if ((d = edit_distance(key, *k)) < best_d)
				best_d = d, best = *k;
		return best ? fail_at(c, key, "unknown field (did you mean "
				      "'%s'?)", best)
			    : fail_at(c, key, "unknown field");
	}
	return 0;
}

/* ---- typed fields (absent: *out keeps its default) ---- */

static int get_uint(struct ctx *c, json_t *obj, const char *key,
		    uint64_t lo, uint64_t hi, uint64_t *out)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) < lo ||
	    (uint64_t)json_integer_value(v) > hi)
		return fail_at(c, key, "must be an integer in [%llu, %llu]",
			       (unsigned long long)lo, (unsigned long long)hi);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* get_uint into a narrower field; the range fits the field. */
#define NARROW_GET(fname, T)                                           \
	static int fname(struct ctx *c, json_t *obj, const char *key,  \
			 T lo, T hi, T *out)                           \
	{                                                              \
		uint64_t v = *out;                                     \
		int rc = get_uint(c, obj, key, lo, hi, &v);            \
									\
		*out = (T)v;                                           \
		return rc;                                             \
	}

NARROW_GET(get_u32, uint32_t)
NARROW_GET(get_u16, uint16_t)

/* obj[key] into *v when present and of one of the JSON types in `types`
 * (a mask of 1 << json_type); *v NULL when absent. */
static int get_of(struct ctx *c, json_t *obj, const char *key,
		  unsigned types, const char *want, json_t **v)
{
	*v = json_object_get(obj, key);
	if (*v && !(types & 1u << json_typeof(*v)))
		return fail_at(c, key, "must be %s", want);
	return 0;
}

#define J(t) (1u << (t))

static int get_float(struct ctx *c, json_t *obj, const char *key,
		     float *out)
{
	json_t *v;
	int rc = get_of(c, obj, key, J(JSON_INTEGER) | J(JSON_REAL),
			"a number", &v);

	if (!rc && v)
		*out = (float)json_number_value(v);
	return rc;
}

static int get_bool(struct ctx *c, json_t *obj, const char *key, int *out)
{
	json_t *v;
	int rc = get_of(c, obj, key, J(JSON_TRUE) | J(JSON_FALSE),
			"true or false", &v);

	if (!rc && v)
		*out = json_is_true(v);
	return rc;
}

/* a string into out[cap]; NULL when absent (or null and nullable) */
static int get_str(struct ctx *c, json_t *obj, const char *key,
		   int nullable, const char **out)
{
	json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v || (nullable && json_is_null(v)))
		return 0;
	if (!json_is_string(v))
		return fail_at(c, key, "must be a string%s",
			       nullable ? " or null" : "");
	*out = json_string_value(v);
	return 0;
}

static int copy_str(struct ctx *c, json_t *obj, const char *key, char *dst,
		    size_t cap)
{
	const char *s;
	int rc = get_str(c, obj, key, 0, &s);

	if (rc || !s)
		return rc;
	if (strlen(s) >= cap)
		return fail_at(c, key, "longer than %zu bytes", cap - 1);
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

static int dup_path(struct ctx *c, json_t *obj, const char *key, char **dst)
{
	const char *s;
	int rc = get_str(c, obj, key, 1, &s);

	if (rc || !s)
		return rc;
	if (!*s)
		return fail_at(c, key, "must not be empty (use null for none)");
	free(*dst);
	if (!(*dst = rs_strdup(s)))
		return rs_seterr(-ENOMEM, "config: out of memory");
	return 0;
}

/* ---- sizes and seeds ---- */

static const struct {
	const char *name;
	uint64_t mult;
} units[] = {
	{ "", 1 },
	{ "b", 1 },
	{ "k", 1ull << 10 },
	{ "kib", 1ull << 10 },
	{ "kb", 1000ull },
	{ "m", 1ull << 20 },
	{ "mib", 1ull << 20 },
	{ "mb", 1000000ull },
	{ "g", 1ull << 30 },
	{ "gib", 1ull << 30 },
	{ "gb", 1000000000ull },
	{ "t", 1ull << 40 },
	{ "tib", 1ull << 40 },
	{ "tb", 1000000000000ull },
};

int srv_config_parse_size(const char *s, uint64_t *out)
{
	const char *p = s, *u;
	uint64_t v = 0;
	size_t ulen;

	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		goto bad;
	for (; *p >= '0' && *p <= '9'; p++)
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			goto overflow;
	while (*p == ' ')
		p++;
	u = p;
	while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
		p++;
	ulen = (size_t)(p - u);
	while (*p == ' ')
		p++;
	if (*p)
		goto bad;
	for (size_t i = 0; i < RS_ARRAY_SIZE(units); i++) {
		if (strlen(units[i].name) != ulen ||
		    strncasecmp(u, units[i].name, ulen))
			continue;
		if (__builtin_mul_overflow(v, units[i].mult, &v))
			goto overflow;
		*out = v;
		return 0;
	}
bad:
	return rs_seterr(RS_E_INVAL, "'%s' is not a size (an integer with an "
			 "optional unit: B, K, KiB, KB, M, MiB, MB, G, GiB, "
			 "GB, T, TiB, TB)", s);
overflow:
	return rs_seterr(RS_E_INVAL, "'%s' does not fit 64 bits", s);
}

/* an integer (bytes) or a size string, in [lo, hi] */
static int get_size(struct ctx *c, json_t *obj, const char *key, uint64_t lo,
		    uint64_t hi, uint64_t *out)
{
	json_t *v = json_object_get(obj, key);
	uint64_t n;

	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0)
		n = (uint64_t)json_integer_value(v);
	else if (!json_is_string(v))
		return fail_at(c, key, "must be a byte count or a string like "
			       "\"1GiB\"");
	else if (srv_config_parse_size(json_string_value(v), &n))
		return fail_inner(c, key);
	if (n < lo || n > hi)
		return fail_at(c, key, "%llu bytes is outside [%llu, %llu]",
			       (unsigned long long)n, (unsigned long long)lo,
			       (unsigned long long)hi);
	*out = n;
	return 0;
}

static int get_seed(struct ctx *c, json_t *obj, const char *key,
		    uint64_t *out)
{
	json_t *v = json_object_get(obj, key);
	const char *s, *digits;
	char *end;
	int hex;

	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return fail_at(c, key, "must be an integer >= 0 or a string "
			       "(decimal or 0x hex)");
	s = json_string_value(v);
	hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	digits = hex ? s + 2 : s;
	/* strtoull would accept spaces and a sign: demand a digit */
	end = (char *)digits;
	errno = 0;
	if (hex ? isxdigit((unsigned char)digits[0])
		: isdigit((unsigned char)digits[0]))
		*out = strtoull(digits, &end, hex ? 16 : 10);
	if (end == digits || *end || errno)
		return fail_at(c, key, "'%s' is not a 64-bit unsigned integer "
			       "(decimal or 0x hex)", s);
	return 0;
}

/* ---- tables ---- */

/*
 * An optimizer or initializer object: "type", the rows of its group in
 * the spec's field table (common/spec_fields.h) but the optimizer's
 * flags, which the config spells as the boolean decoupled_weight_decay.
 * A field that the kind does not use is refused (a typo or a forgotten
 * change of type).
 */
#define KEYS_MAX 16
static void group_keys(enum spec_group g, const char **keys)
{
	size_t n = 0;

	keys[n++] = SPEC_JSON_KIND;
	for (unsigned i = 0; i < spec_nfields; i++)
		if (spec_fields[i].group == g &&
		    spec_fields[i].type != SPEC_T_u32 && n < KEYS_MAX - 2)
			keys[n++] = spec_fields[i].name;
	if (g == SPEC_G_OPTIM)
		keys[n++] = "decoupled_weight_decay";
	keys[n] = NULL;
}

static int check_group_keys(struct ctx *c, json_t *o, enum spec_group g)
{
	const char *keys[KEYS_MAX];

	group_keys(g, keys);
	return check_keys(c, o, keys);
}

static int check_unused(struct ctx *c, json_t *o, enum spec_group g,
			int kind, const char *what, const char *type)
{
	for (unsigned i = 0; i < spec_nfields; i++) {
		const struct spec_field *f = &spec_fields[i];

		if (f->group == g && json_object_get(o, f->name) &&
		    !(f->users & SPEC_BIT(kind)))
			return fail_at(c, f->name, "not used by %s '%s'",
				       what, type);
	}
	return 0;
}

/* The group's fields present in o into params (absent: unchanged). */
static int get_params(struct ctx *c, json_t *o, enum spec_group g,
		      void *params)
{
	int rc = 0;

	for (unsigned i = 0; !rc && i < spec_nfields; i++) {
		const struct spec_field *f = &spec_fields[i];
		void *v = spec_field_ptr(f, params);

		if (f->group != g || f->type == SPEC_T_u32)
			continue;
		rc = f->type == SPEC_T_f32 ? get_float(c, o, f->name, v)
					   : get_seed(c, o, f->name, v);
	}
	return rc;
}

static int parse_optimizer(struct ctx *c, json_t *o, struct optim_params *p)
{
	const char *type;
	int kind = 0, adamw = 0, decoupled, rc = 0;

	if (!json_is_object(o))
		return fail(c, "must be an object");
	if ((rc = check_group_keys(c, o, SPEC_G_OPTIM)) ||
	    (rc = get_str(c, o, "type", 0, &type)))
		return rc;
	if (!type)
		return fail_at(c, "type", "required (sgd, adagrad, "
			       "rowwise_adagrad, adam or adamw)");
	if (strcmp(type, "adamw") == 0) {
		kind = OPTIM_ADAM;
		adamw = 1;
	} else if ((kind = optim_kind_parse(type)) < 0) {
		return fail_at(c, "type", "unknown optimizer '%s' (expected "
			       "sgd, adagrad, rowwise_adagrad, adam or adamw)",
			       type);
	}
	if ((rc = check_unused(c, o, SPEC_G_OPTIM, kind, "optimizer", type)))
		return rc;
	optim_params_default(p, (uint32_t)kind);
	if (adamw)
		p->weight_decay = 0.01f; /* as torch.optim.AdamW */
	decoupled = adamw;
	if ((rc = get_params(c, o, SPEC_G_OPTIM, p)) ||
	    (rc = get_bool(c, o, "decoupled_weight_decay", &decoupled)))
		return rc;
	p->flags = decoupled ? OPTIM_F_DECOUPLED : 0;
	if (optim_params_validate(p))
		return fail_below(c);
	return 0;
}

static int parse_initializer(struct ctx *c, json_t *o, struct init_params *p)
{
	const char *type;
	int kind = 0, rc = 0;

	if (!json_is_object(o))
		return fail(c, "must be an object");
	if ((rc = check_group_keys(c, o, SPEC_G_INIT)) ||
	    (rc = get_str(c, o, "type", 0, &type)))
		return rc;
	if (!type)
		return fail_at(c, "type", "required (zeros, constant, uniform "
			       "or normal)");
	if ((kind = init_kind_parse(type)) < 0)
		return fail_inner(c, "type");
	if ((rc = check_unused(c, o, SPEC_G_INIT, kind, "initializer", type)))
		return rc;
	if (kind == INIT_CONSTANT && !json_object_get(o, "value"))
		return fail_at(c, "value",
			       "required by initializer 'constant'");
	init_params_default(p, (uint32_t)kind);
	if ((rc = get_params(c, o, SPEC_G_INIT, p)))
		return rc;
	if (init_params_validate(p))
		return fail_below(c);
	return 0;
}

static const char *const table_keys[] = {
	"name", "dim", "dtype", "capacity", "max_capacity", "optimizer",
	"initializer", NULL,
};

static int parse_table(struct ctx *c, json_t *t, const struct srv_config *cfg,
		       struct proto_table_spec *s)
{
	const char *name, *dtype;
	json_t *o;
	size_t old;
	uint64_t cap = 0;
	int rc, d;

	if (!json_is_object(t))
		return fail(c, "must be an object");
	if ((rc = check_keys(c, t, table_keys)))
		return rc;
	memset(s, 0, sizeof(*s));

	if ((rc = get_str(c, t, "name", 0, &name)))
		return rc;
	if (!name)
		return fail_at(c, "name", "required");
	if (proto_name_check("name", name, strlen(name)))
		return fail_at(c, "name", "'%s' is not a table name (1 to %d "
			       "of [A-Za-z0-9_.-])", name, PROTO_NAME_MAX);
	memcpy(s->name, name, strlen(name) + 1);

	if (!json_object_get(t, "dim"))
		return fail_at(c, "dim", "required");
	if ((rc = get_u32(c, t, "dim", 1, cfg->limits.max_dim, &s->dim)))
		return rc;

	if ((rc = get_str(c, t, "dtype", 0, &dtype)))
		return rc;
	if (dtype) {
		if ((d = proto_dtype_parse(dtype)) < 0)
			return fail_inner(c, "dtype");
		s->dtype = (uint32_t)d;
	}

	if (!json_object_get(t, "capacity"))
		return fail_at(c, "capacity", "required (rows)");
	if ((rc = get_uint(c, t, "capacity", 1, PROTO_MAX_CAPACITY, &cap)))
		return rc;
	s->capacity = cap;
	if (json_object_get(t, "max_capacity")) {
		if ((rc = get_uint(c, t, "max_capacity", 2, 1ULL << 32, &cap)))
			return rc;
		if (cap & (cap - 1) || cap <= s->capacity)
			return fail_at(c, "max_capacity", "must be a power of "
				       "two above capacity (the table doubles "
				       "up to it when it fills)");
		s->grow_log2 = (uint8_t)__builtin_ctzll(cap);
	}

	optim_params_default(&s->optim, OPTIM_SGD);
	if ((o = json_object_get(t, "optimizer"))) {
		old = push_key(c, "optimizer");
		rc = parse_optimizer(c, o, &s->optim);
		pop(c, old);
		if (rc)
			return rc;
	}
	/* default: uniform(-0.01, 0.01). The default seed is a hash of the
	 * table name, so that two tables do not start with identical rows
	 * for equal keys. */
	init_params_default(&s->init, INIT_UNIFORM);
	if ((o = json_object_get(t, "initializer"))) {
		old = push_key(c, "initializer");
		rc = parse_initializer(c, o, &s->init);
		pop(c, old);
		if (rc)
			return rc;
	}
	if (!o || !json_object_get(o, "seed"))
		s->init.seed = XXH3_64bits(s->name, strlen(s->name));
	if (proto_table_spec_validate(s, &cfg->limits))
		return fail_below(c);
	return 0;
}

/* a row must fit one message each way: GET replies carry it in the
 * table's dtype, UPDATE requests as fp32 gradients (the widest case) */
static int check_fits(struct ctx *c, const struct proto_table_spec *s,
		      const struct proto_limits *lim)
{
	const size_t m = lim->max_message_bytes;

	if (proto_keys_per_msg(PROTO_OP_GET, s->dim, s->dtype, m, m, 1) < 0 ||
	    proto_keys_per_msg(PROTO_OP_UPDATE, s->dim, PROTO_DTYPE_FP32, m,
			       m, 1) < 0)
		return fail_at(c, "dim", "a row of %u elements does not fit "
			       "one message of max_message_bytes %zu", s->dim,
			       m);
	return 0;
}

static int parse_tables(struct ctx *c, json_t *arr, struct srv_config *cfg)
{
	uint64_t need = 0, bytes;
	size_t n, old;
	int rc;

	if (!json_is_array(arr))
		return fail(c, "must be an array");
	n = json_array_size(arr);
	if (n > cfg->limits.max_tables)
		return fail(c, "%zu tables, over max_tables %u", n,
			    cfg->limits.max_tables);
	if (n && !(cfg->tables = rs_calloc(n, sizeof(*cfg->tables))))
		return rs_seterr(-ENOMEM, "config: out of memory");
	for (size_t i = 0; i < n; i++) {
		struct proto_table_spec *s = &cfg->tables[i];

		old = push_index(c, i);
		rc = parse_table(c, json_array_get(arr, i), cfg, s);
		if (!rc)
			rc = check_fits(c, s, &cfg->limits);
		for (size_t j = 0; !rc && j < i; j++)
			if (strcmp(cfg->tables[j].name, s->name) == 0)
				rc = fail_at(c, "name", "duplicate table '%s' "
					     "(also tables[%zu])", s->name, j);
		pop(c, old);
		if (rc)
			return rc;
		cfg->ntables = (uint32_t)(i + 1);
		/* a lower bound: rows alone, without headers or state */
		bytes = (uint64_t)s->dim * proto_dtype_size(s->dtype);
		if (__builtin_mul_overflow(bytes, s->capacity, &bytes) ||
		    __builtin_add_overflow(need, bytes, &need))
			need = UINT64_MAX;
	}
	if (need > cfg->storage_bytes)
		return fail(c, "the rows alone need at least %llu bytes, "
			    "storage.size is %llu", (unsigned long long)need,
			    (unsigned long long)cfg->storage_bytes);
	return 0;
}

/* ---- credentials ---- */

static int sub_object(struct ctx *c, json_t *obj, const char *key,
		      const char *const *known, json_t **sub, size_t *old);

static const char *const key_keys[] = { "id", "role", "secret",
					"secret_file", NULL };
static const char *const auth_keys[] = { "keys", "max_skew_s", NULL };

static int parse_key(struct ctx *c, json_t *o, struct srv_config_key *k)
{
	const char *role, *secret;
	int rc, r;

	if (!json_is_object(o))
		return fail(c, "must be an object");
	if ((rc = check_keys(c, o, key_keys)))
		return rc;
	if (!json_object_get(o, "id"))
		return fail_at(c, "id", "required (1..4294967295)");
	if ((rc = get_u32(c, o, "id", 1, UINT32_MAX, &k->id)) ||
	    (rc = get_str(c, o, "role", 0, &role)))
		return rc;
	if ((r = auth_role_parse(role)) < 0)
		return fail_at(c, "role", "required: read, data or admin");
	k->role = (uint32_t)r;
	if ((rc = get_str(c, o, "secret", 0, &secret)) ||
	    (rc = dup_path(c, o, "secret_file", &k->secret_file)))
		return rc;
	if (!secret == !k->secret_file)
		return fail(c, "give exactly one of secret and secret_file");
	if (secret && (strlen(secret) < AUTH_SECRET_MIN ||
		       strlen(secret) > AUTH_SECRET_MAX))
		return fail_at(c, "secret", "must be %d to %d bytes",
			       AUTH_SECRET_MIN, AUTH_SECRET_MAX);
	if (secret && !(k->secret = rs_strdup(secret)))
		return rs_seterr(-ENOMEM, "config: out of memory");
	return 0;
}

static int parse_keys(struct ctx *c, json_t *arr, struct srv_config *cfg)
{
	size_t n, old;
	int rc;

	if (!json_is_array(arr))
		return fail(c, "must be an array");
	n = json_array_size(arr);
	if (n > 4096)
		return fail(c, "%zu keys, at most 4096", n);
	if (n && !(cfg->keys = rs_calloc(n, sizeof(*cfg->keys))))
		return rs_seterr(-ENOMEM, "config: out of memory");
	for (size_t i = 0; i < n; i++) {
		old = push_index(c, i);
		cfg->nkeys = (uint32_t)(i + 1);
		rc = parse_key(c, json_array_get(arr, i), &cfg->keys[i]);
		for (size_t j = 0; !rc && j < i; j++)
			if (cfg->keys[j].id == cfg->keys[i].id)
				rc = fail_at(c, "id", "key id %u also in "
					     "keys[%zu]", cfg->keys[i].id, j);
		pop(c, old);
		if (rc)
			return rc;
	}
	return 0;
}

static int parse_auth(struct ctx *c, json_t *root, struct srv_config *cfg)
{
	size_t old, old2;
	json_t *o, *k;
	int rc;

	if ((rc = sub_object(c, root, "auth", auth_keys, &o, &old)) || !o)
		return rc;
	rc = get_u32(c, o, "max_skew_s", 0, AUTH_MAX_SKEW_S,
		     &cfg->auth_skew_s);
	if (!rc && (k = json_object_get(o, "keys"))) {
		old2 = push_key(c, "keys");
		rc = parse_keys(c, k, cfg);
		pop(c, old2);
	}
	pop(c, old);
	return rc;
}

/* ---- top level ---- */

static const char *const listen_keys[] = { "addr", "port", NULL };
static const char *const storage_keys[] = { "backend", "path", "size",
					    "format", NULL };
static const char *const trace_keys[] = { "path", "sample", NULL };
static const char *const top_keys[] = {
	"name", "device", "listen", "metrics_port", "storage", "tables",
	"workers", "spin_us", "trace", "max_batch_keys", "max_message_bytes",
	"max_dim", "max_tables", "max_conns_per_peer", "keepalive_ms",
	"send_timeout_ms", "auth", "default_capacity", "coord",
	"checkpoint_dir", NULL,
};
static const char *const coord_keys[] = { "endpoints", "cluster", "id",
					  "lease_ms", "replicas", "decide",
					  "initial_members", "tls", "user",
					  "password_file", NULL };
static const char *const tls_keys[] = { "ca_file", "cert_file", "key_file",
					NULL };

/* obj[key] must be an object if present; *sub = it or NULL */
static int sub_object(struct ctx *c, json_t *obj, const char *key,
		      const char *const *known, json_t **sub, size_t *old)
{
	int rc;

	*sub = json_object_get(obj, key);
	if (!*sub)
		return 0;
	*old = push_key(c, key);
	if (!json_is_object(*sub))
		rc = fail(c, "must be an object");
	else
		rc = check_keys(c, *sub, known);
	if (rc)
		pop(c, *old);
	return rc;
}

static int parse_listen(struct ctx *c, json_t *root, struct srv_config *cfg)
{
	size_t old;
	json_t *o;
	int rc;

	if ((rc = sub_object(c, root, "listen", listen_keys, &o, &old)) || !o)
		return rc;
	if (!(rc = copy_str(c, o, "addr", cfg->listen_addr,
			    sizeof(cfg->listen_addr))))
		rc = get_u16(c, o, "port", 0, 65535, &cfg->listen_port);
	pop(c, old);
	return rc;
}

static int parse_storage(struct ctx *c, json_t *root, struct srv_config *cfg)
{
	const char *backend;
	size_t old;
	json_t *o;
	int rc;

	if ((rc = sub_object(c, root, "storage", storage_keys, &o, &old)) ||
	    !o)
		return rc;
	if ((rc = get_str(c, o, "backend", 0, &backend)))
		goto out;
	if (backend) {
		if (strcmp(backend, "dram") == 0)
			cfg->backend = SRV_BACKEND_DRAM;
		else if (strcmp(backend, "pmem") == 0)
			cfg->backend = SRV_BACKEND_PMEM;
		else {
			rc = fail_at(c, "backend", "unknown backend '%s' "
				     "(expected dram or pmem)", backend);
			goto out;
		}
	}
	if ((rc = dup_path(c, o, "path", &cfg->storage_path)) ||
	    (rc = get_size(c, o, "size", SRV_CONFIG_MIN_STORAGE_BYTES,
			   UINT64_MAX, &cfg->storage_bytes)) ||
	    (rc = get_bool(c, o, "format", &cfg->storage_format)))
		goto out;
	if (cfg->backend == SRV_BACKEND_PMEM && !cfg->storage_path)
		rc = fail_at(c, "path", "required with backend pmem");
	else if (cfg->backend == SRV_BACKEND_DRAM && cfg->storage_path)
		rc = fail_at(c, "path", "only used with backend pmem");
out:
	pop(c, old);
	return rc;
}

static int parse_trace(struct ctx *c, json_t *root, struct srv_config *cfg)
{
	json_t *o, *v;
	size_t old;
	int rc;

	if ((rc = sub_object(c, root, "trace", trace_keys, &o, &old)) || !o)
		return rc;
	if ((rc = dup_path(c, o, "path", &cfg->trace_path)))
		goto out;
	if ((v = json_object_get(o, "sample"))) {
		if (!json_is_number(v) || !(json_number_value(v) >= 0) ||
		    json_number_value(v) > 1)
			rc = fail_at(c, "sample", "must be a number in [0, 1]");
		else
			cfg->trace_sample = json_number_value(v);
	}
out:
	pop(c, old);
	return rc;
}

/* coord.endpoints: 1..8 http(s) URLs, joined by ',' into *out */
static int parse_endpoints(struct ctx *c, json_t *arr, char **out)
{
	size_t cap = SRV_CONFIG_COORD_ENDPOINTS *
		     (SRV_CONFIG_COORD_URL_MAX + 1), len = 0;
	char *list;

	if (!json_is_array(arr) || json_array_size(arr) < 1 ||
	    json_array_size(arr) > SRV_CONFIG_COORD_ENDPOINTS)
		return fail_at(c, "endpoints", "must be an array of 1..%d URLs",
			       SRV_CONFIG_COORD_ENDPOINTS);
	if (!(list = rs_calloc(1, cap)))
		return rs_seterr(-ENOMEM, "config: out of memory");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *u = json_string_value(json_array_get(arr, i));
		size_t n = u ? strlen(u) : 0;

		if (!u || n < 8 || n > SRV_CONFIG_COORD_URL_MAX ||
		    strchr(u, ',') ||
		    (strncmp(u, "http://", 7) && strncmp(u, "https://", 8))) {
			free(list);
			return fail_at(c, "endpoints", "[%zu]: must be an "
				       "http:// or https:// URL of up to %d "
				       "bytes without ','", i,
				       SRV_CONFIG_COORD_URL_MAX);
		}
		len += (size_t)snprintf(list + len, cap - len, "%s%s",
					i ? "," : "", u);
	}
	free(*out);
	*out = list;
	return 0;
}

/* coord.tls, coord.user, coord.password_file (checked for shape; the
 * files are read when the node connects to etcd) */
static int parse_etcd_security(struct ctx *c, json_t *o,
			       struct coord_etcd_files *f)
{
	const char *user;
	size_t old;
	json_t *t;
	int rc;

	if ((rc = get_str(c, o, "user", 1, &user)) ||
	    (rc = dup_path(c, o, "password_file", &f->password_file)))
		return rc;
	if (user && (!*user || strlen(user) > 128))
		return fail_at(c, "user", "1 to 128 bytes");
	if (user && !(f->user = rs_strdup(user)))
		return rs_seterr(-ENOMEM, "config: out of memory");
	if (!f->user != !f->password_file)
		return fail_at(c, f->user ? "password_file" : "user",
			       "required with %s", f->user ? "user"
							   : "password_file");
	if ((rc = sub_object(c, o, "tls", tls_keys, &t, &old)) || !t)
		return rc;
	if (!(rc = dup_path(c, t, "ca_file", &f->ca_file)) &&
	    !(rc = dup_path(c, t, "cert_file", &f->cert_file)) &&
	    !(rc = dup_path(c, t, "key_file", &f->key_file)) &&
	    !f->cert_file != !f->key_file)
		rc = fail_at(c, f->cert_file ? "key_file" : "cert_file",
			     "required with %s", f->cert_file ? "cert_file"
							      : "key_file");
	pop(c, old);
	return rc;
}

static int parse_coord(struct ctx *c, json_t *root, struct srv_config *cfg)
{
	size_t old;
	json_t *o, *e;
	int rc;

	if ((rc = sub_object(c, root, "coord", coord_keys, &o, &old)) || !o)
		return rc;
	if (!(e = json_object_get(o, "endpoints")))
		rc = fail_at(c, "endpoints", "required (the etcd URLs)");
	else if (!json_object_get(o, "cluster"))
		rc = fail_at(c, "cluster", "required");
	if (rc || (rc = parse_endpoints(c, e, &cfg->coord_endpoints)) ||
	    (rc = copy_str(c, o, "cluster", cfg->coord_cluster,
			   sizeof(cfg->coord_cluster))) ||
	    (rc = copy_str(c, o, "id", cfg->coord_id,
			   sizeof(cfg->coord_id))) ||
	    (rc = get_u32(c, o, "lease_ms", SRV_CONFIG_MIN_COORD_LEASE_MS,
			  SRV_CONFIG_MAX_COORD_LEASE_MS,
			  &cfg->coord_lease_ms)) ||
	    (rc = get_u32(c, o, "replicas", 1, 5, &cfg->coord_replicas)) ||
	    (rc = get_bool(c, o, "decide", &cfg->coord_decide)) ||
	    (rc = get_u32(c, o, "initial_members", 1, 1024,
			  &cfg->coord_initial_members)))
		goto out;
	if (proto_name_check("cluster", cfg->coord_cluster,
			     strlen(cfg->coord_cluster)))
		rc = fail_at(c, "cluster", "'%s' is not a name (up to %d of "
			     "[A-Za-z0-9_.-])", cfg->coord_cluster,
			     PROTO_NAME_MAX);
	else if (cfg->coord_id[0] &&
		 proto_name_check("id", cfg->coord_id, strlen(cfg->coord_id)))
		rc = fail_at(c, "id", "'%s' is not a name (up to %d of "
			     "[A-Za-z0-9_.-])", cfg->coord_id, PROTO_NAME_MAX);
	else if (!cfg->coord_id[0] && !cfg->name[0])
		rc = fail_at(c, "id", "required when the node has no \"name\"");
	if (!rc)
		rc = parse_etcd_security(c, o, &cfg->coord_sec);
out:
	pop(c, old);
	return rc;
}

static int parse_root(struct ctx *c, json_t *root, struct srv_config *cfg)
{
	uint64_t msg = cfg->limits.max_message_bytes;
	size_t old;
	json_t *t;
	int rc;

	if (!json_is_object(root))
		return fail(c, "must be a JSON object");
	if ((rc = check_keys(c, root, top_keys)) ||
	    (rc = copy_str(c, root, "name", cfg->name, sizeof(cfg->name))) ||
	    (rc = copy_str(c, root, "device", cfg->device,
			   sizeof(cfg->device))) ||
	    (rc = parse_listen(c, root, cfg)) ||
	    (rc = get_u16(c, root, "metrics_port", 0, 65535,
			  &cfg->metrics_port)) ||
	    (rc = parse_storage(c, root, cfg)) ||
	    (rc = get_uint(c, root, "default_capacity", 1, PROTO_MAX_CAPACITY,
			   &cfg->default_capacity)) ||
	    (rc = get_u32(c, root, "workers", 1, SRV_CONFIG_MAX_WORKERS,
			  &cfg->workers)) ||
	    (rc = get_u32(c, root, "spin_us", 0, SRV_CONFIG_MAX_SPIN_US,
			  &cfg->spin_us)) ||
	    (rc = get_u32(c, root, "max_conns_per_peer", 0, 65535,
			  &cfg->max_conns_per_peer)) ||
	    (rc = get_u32(c, root, "keepalive_ms", 0,
			  SRV_CONFIG_MAX_KEEPALIVE_MS, &cfg->keepalive_ms)) ||
	    (rc = get_u32(c, root, "send_timeout_ms",
			  SRV_CONFIG_MIN_SEND_TIMEOUT_MS,
			  SRV_CONFIG_MAX_SEND_TIMEOUT_MS,
			  &cfg->send_timeout_ms)) ||
	    (rc = parse_trace(c, root, cfg)) ||
	    (rc = dup_path(c, root, "checkpoint_dir", &cfg->checkpoint_dir)) ||
	    (rc = parse_auth(c, root, cfg)) ||
	    (rc = get_u32(c, root, "max_batch_keys", 1, PROTO_MAX_BATCH_KEYS,
			  &cfg->limits.max_batch_keys)) ||
	    (rc = get_size(c, root, "max_message_bytes",
			   PROTO_MIN_MESSAGE_BYTES, PROTO_MAX_MESSAGE_BYTES,
			   &msg)) ||
	    (rc = get_u32(c, root, "max_dim", 1, PROTO_MAX_DIM,
			  &cfg->limits.max_dim)) ||
	    (rc = get_u32(c, root, "max_tables", 1, PROTO_MAX_TABLES,
			  &cfg->limits.max_tables)))
		return rc;
	cfg->limits.max_message_bytes = (uint32_t)msg;
	if (cfg->name[0] && proto_name_check("name", cfg->name,
					     strlen(cfg->name)))
		return fail_at(c, "name", "'%s' is not a node name (up to %d "
			       "of [A-Za-z0-9_.-])", cfg->name, PROTO_NAME_MAX);
	if ((rc = parse_coord(c, root, cfg)))
		return rc;
	if (!(t = json_object_get(root, "tables")))
		return 0;
	old = push_key(c, "tables");
	rc = parse_tables(c, t, cfg);
	pop(c, old);
	return rc;
}

/* ---- entry points ---- */

void srv_config_defaults(struct srv_config *c)
{
	memset(c, 0, sizeof(*c));
	c->listen_port = SRV_CONFIG_PORT;
	c->backend = SRV_BACKEND_DRAM;
	c->storage_bytes = SRV_CONFIG_STORAGE_BYTES;
	c->default_capacity = SRV_CONFIG_DEFAULT_CAPACITY;
	c->workers = SRV_CONFIG_WORKERS;
	c->spin_us = SRV_CONFIG_SPIN_US;
	c->max_conns_per_peer = SRV_CONFIG_CONNS_PER_PEER;
	c->keepalive_ms = SRV_CONFIG_KEEPALIVE_MS;
	c->send_timeout_ms = SRV_CONFIG_SEND_TIMEOUT_MS;
	c->trace_sample = SRV_CONFIG_TRACE_SAMPLE;
	proto_limits_default(&c->limits);
	c->limits.max_message_bytes = SRV_CONFIG_MESSAGE_BYTES;
	c->auth_skew_s = AUTH_DEFAULT_SKEW_S;
	c->coord_lease_ms = SRV_CONFIG_COORD_LEASE_MS;
	c->coord_replicas = SRV_CONFIG_COORD_REPLICAS;
	c->coord_decide = 1;
	c->coord_initial_members = 1;
}

void srv_config_free(struct srv_config **c)
{
	if (!c || !*c)
		return;
	free((*c)->storage_path);
	free((*c)->trace_path);
	free((*c)->checkpoint_dir);
	free((*c)->coord_endpoints);
	coord_etcd_files_free(&(*c)->coord_sec);
	free((*c)->tables);
	for (uint32_t i = 0; i < (*c)->nkeys; i++) {
		char *sec = (*c)->keys[i].secret;

		if (sec) {
			sodium_memzero(sec, strlen(sec));
			free(sec);
		}
		free((*c)->keys[i].secret_file);
	}
	free((*c)->keys);
	free(*c);
	*c = NULL;
}

static int from_json(struct srv_config **out, json_t *root)
{
	struct srv_config *cfg = rs_malloc(sizeof(*cfg));
	struct ctx c = { .len = 0 };
	int rc;

	if (!cfg)
		return rs_seterr(-ENOMEM, "config: out of memory");
	srv_config_defaults(cfg);
	c.path[0] = '\0';
	if (root && (rc = parse_root(&c, root, cfg))) {
		srv_config_free(&cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

static int syntax_error(const json_error_t *e, bool oom)
{
	if (oom)
		return rs_seterr(-ENOMEM, "config: out of memory");
	return rs_seterr(RS_E_INVAL, "line %d, column %d: %s", e->line,
			 e->column, e->text);
}

int srv_config_parse(struct srv_config **out, const char *text, size_t len)
{
	json_error_t e;
	json_t *root;
	bool oom;
	int rc;

	*out = NULL;
	root = rs_json_loadb(text, len, JSON_REJECT_DUPLICATES, &e, &oom);
	if (!root)
		return syntax_error(&e, oom);
	rc = from_json(out, root);
	json_decref(root);
	return rc;
}

int srv_config_load(struct srv_config **out, const char *path)
{
	json_error_t e;
	json_t *root;
	bool oom;
	FILE *f;
	int rc;

	*out = NULL;
	if (!path)
		return from_json(out, NULL);
	if (!(f = fopen(path, "r")))
		return rs_seterr(-errno, "%s: %s", path, strerror(errno));
	fclose(f);
	root = rs_json_load_file(path, JSON_REJECT_DUPLICATES, &e, &oom);
	if (oom)
		return rs_seterr(-ENOMEM, "%s: out of memory", path);
	if (!root)
		return rs_seterr(RS_E_INVAL, "%s: line %d, column %d: %s",
				 path, e.line, e.column, e.text);
	rc = from_json(out, root);
	json_decref(root);
	if (rc) {
		char inner[400];

		snprintf(inner, sizeof(inner), "%s", rs_errormsg());
		rc = rs_seterr(rc, "%s: %s", path, inner);
	}
	return rc;
}
