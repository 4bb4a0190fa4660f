/*
 * config.c - strict JSON config parser for the memory node (jansson).
 *
 * Shape: each JSON object is parsed by one function that first checks its
 * keys against a list of known names (unknown -> error, with the closest
 * known name when one is within edit distance 2), then reads the fields
 * it knows in a fixed order, so that later checks can rely on earlier
 * values whatever order the file uses (tables are read last, after the
 * limits they are checked against). Cross-field checks come at the end.
 * The fields that hold one value are rows of srv_config_rows[] (config.h):
 * an object reads its rows in table order (parse_rows()), the defaults
 * are the rows', and srv_config_set() parses one row from a string by
 * wrapping it in the JSON the row expects, so that a setting from C gets
 * the file's checks and messages. The rest (tables[], auth.keys[],
 * coord.endpoints[]) has its own code below.
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
 * is read when the file is loaded as a node config (srv_config_api.c:
 * keys[] become the credentials, creds[]), and a secret given inline is
 * zeroed when the config is freed.
 *
 * The same struct is the node's config (config.h): the public
 * rs_server_config wraps it, the node runs on a copy of it, and
 * srv_config_check_rows() holds the values it carries against the rows'
 * ranges with the parser's range checks and messages.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <xxhash.h>

#include "common/auth.h"
#include "common/defaults.h"
#include "common/rs_internal.h"
#include "common/rs_json.h"
#include "common/spec.h"
#include "common/spec_fields.h"
#include "server/config.h"
#include "value/slab.h"

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

/* ---- range checks: the parser's, and srv_config_check_rows()'s over
 * the values a config holds, with one message each ---- */

static int uint_range(struct ctx *c, const char *key, uint64_t lo,
		      uint64_t hi)
{
	return fail_at(c, key, "must be an integer in [%llu, %llu]",
		       (unsigned long long)lo, (unsigned long long)hi);
}

static int size_in(struct ctx *c, const char *key, uint64_t n, uint64_t lo,
		   uint64_t hi)
{
	if (n < lo || n > hi)
		return fail_at(c, key, "%llu bytes is outside [%llu, %llu]",
			       (unsigned long long)n, (unsigned long long)lo,
			       (unsigned long long)hi);
	return 0;
}

static int number_in(struct ctx *c, const char *key, double d, double lo,
		     double hi)
{
	if (!(d >= lo) || d > hi)
		return fail_at(c, key, "must be a number in [%g, %g]", lo, hi);
	return 0;
}

static int text_in(struct ctx *c, const char *key, const char *s,
		   uint64_t lo, uint64_t hi)
{
	if (strlen(s) < lo || strlen(s) > hi)
		return fail_at(c, key, "%llu to %llu bytes",
			       (unsigned long long)lo, (unsigned long long)hi);
	return 0;
}

static int path_in(struct ctx *c, const char *key, const char *s)
{
	if (!*s)
		return fail_at(c, key, "must not be empty (use null for none)");
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
		return uint_range(c, key, lo, hi);
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

/* null: no value (a file's field starts so; a setting by name is
 * cleared) */
static void set_null(json_t *obj, const char *key, char **dst)
{
	if (json_is_null(json_object_get(obj, key))) {
		free(*dst);
		*dst = NULL;
	}
}

static int dup_path(struct ctx *c, json_t *obj, const char *key, char **dst)
{
	const char *s;
	int rc = get_str(c, obj, key, 1, &s);

	if (!rc && !s)
		set_null(obj, key, dst);
	if (rc || !s || (rc = path_in(c, key, s)))
		return rc;
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
	int rc;

	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0)
		n = (uint64_t)json_integer_value(v);
	else if (!json_is_string(v))
		return fail_at(c, key, "must be a byte count or a string like "
			       "\"1GiB\"");
	else if (srv_config_parse_size(json_string_value(v), &n))
		return fail_inner(c, key);
	if ((rc = size_in(c, key, n, lo, hi)))
		return rc;
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
static int parse_rows(struct ctx *c, json_t *obj, const char *section,
		      struct srv_config *cfg);

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
	rc = parse_rows(c, o, "auth", cfg);
	if (!rc && (k = json_object_get(o, "keys"))) {
		old2 = push_key(c, "keys");
		rc = parse_keys(c, k, cfg);
		pop(c, old2);
	}
	pop(c, old);
	return rc;
}

/* ---- the scalar settings: one row each (config.h) ---- */

#define ROW(p, k, m)							\
	.path = (p), .kind = SRV_CK_##k,				\
	.off = offsetof(struct srv_config, m),				\
	.width = sizeof(((struct srv_config *)0)->m)
#define UINT(p, m, l, h, d)						\
	{ ROW(p, UINT, m), .lo = (l), .hi = (h), .def = (d) }
#define SIZE(p, m, l, h, d)						\
	{ ROW(p, SIZE, m), .lo = (l), .hi = (h), .def = (d) }
#define BOOL(p, m, d) { ROW(p, BOOL, m), .def = (d) }
#define STR(p, m, w) { ROW(p, STR, m), .what = (w) }
#define PATH(p, m) { ROW(p, PATH, m) }

static const char *const backends[] = { "dram", "pmem", NULL };

/* In the order the parser reads them: the top level, then a section at a
 * time (parse_root()); within a section, checks of later rows may rely
 * on earlier ones. */
const struct srv_config_row srv_config_rows[] = {
	STR("name", name, "a node name"),
	STR("device", device, NULL),
	UINT("metrics_port", metrics_port, 0, 65535, 0),
	UINT("default_capacity", default_capacity, 1, PROTO_MAX_CAPACITY,
	     SRV_CONFIG_DEFAULT_CAPACITY),
	UINT("workers", workers, 1, SRV_CONFIG_MAX_WORKERS,
	     SRV_CONFIG_WORKERS),
	UINT("spin_us", spin_us, 0, RS_SPIN_US_MAX,
	     RS_SPIN_US_DEFAULT),
	UINT("max_conns_per_peer", max_conns_per_peer, 0, 65535,
	     SRV_CONFIG_CONNS_PER_PEER),
	UINT("keepalive_ms", keepalive_ms, 0, SRV_CONFIG_MAX_KEEPALIVE_MS,
	     SRV_CONFIG_KEEPALIVE_MS),
	UINT("send_timeout_ms", send_timeout_ms,
	     SRV_CONFIG_MIN_SEND_TIMEOUT_MS, SRV_CONFIG_MAX_SEND_TIMEOUT_MS,
	     SRV_CONFIG_SEND_TIMEOUT_MS),
	PATH("checkpoint_dir", checkpoint_dir),
	UINT("max_batch_keys", limits.max_batch_keys, 1,
	     PROTO_MAX_BATCH_KEYS, PROTO_DEFAULT_BATCH_KEYS),
	SIZE("max_message_bytes", limits.max_message_bytes,
	     PROTO_MIN_MESSAGE_BYTES, PROTO_MAX_MESSAGE_BYTES,
	     SRV_CONFIG_MESSAGE_BYTES),
	UINT("max_dim", limits.max_dim, 1, PROTO_MAX_DIM, PROTO_DEFAULT_DIM),
	UINT("max_tables", limits.max_tables, 1, PROTO_MAX_TABLES,
	     PROTO_DEFAULT_TABLES),
	STR("listen.addr", listen_addr, NULL),
	UINT("listen.port", listen_port, 0, 65535, RS_DEFAULT_PORT),
	{ ROW("storage.backend", ENUM, backend), .def = SRV_BACKEND_DRAM,
	  .names = backends, .what = "backend" },
	PATH("storage.path", storage_path),
	SIZE("storage.size", storage_bytes, SRV_CONFIG_MIN_STORAGE_BYTES,
	     UINT64_MAX, SRV_CONFIG_STORAGE_BYTES),
	BOOL("storage.format", storage_format, 0),
	PATH("trace.path", trace_path),
	{ ROW("trace.sample", FLOAT, trace_sample), .flo = 0, .fhi = 1,
	  .fdef = SRV_CONFIG_TRACE_SAMPLE },
	UINT("auth.max_skew_s", auth_skew_s, 0, AUTH_MAX_SKEW_S,
	     AUTH_DEFAULT_SKEW_S),
	STR("coord.cluster", coord_cluster, "a name"),
	STR("coord.id", coord_id, "a name"),
	UINT("coord.lease_ms", coord_lease_ms, SRV_CONFIG_MIN_COORD_LEASE_MS,
	     SRV_CONFIG_MAX_COORD_LEASE_MS, SRV_CONFIG_COORD_LEASE_MS),
	UINT("coord.replicas", coord_replicas, 1, 5,
	     SRV_CONFIG_COORD_REPLICAS),
	BOOL("coord.decide", coord_decide, 1),
	UINT("coord.initial_members", coord_initial_members, 1, 1024, 1),
	UINT("coord.keep_s", coord_keep_s, 0, 604800, 0),
	{ ROW("coord.user", TEXT, coord_sec.user), .lo = 1, .hi = 128 },
	PATH("coord.password_file", coord_sec.password_file),
	PATH("coord.tls.ca_file", coord_sec.ca_file),
	PATH("coord.tls.cert_file", coord_sec.cert_file),
	PATH("coord.tls.key_file", coord_sec.key_file),
};
const size_t srv_config_nrows = RS_ARRAY_SIZE(srv_config_rows);
#undef ROW
#undef UINT
#undef SIZE
#undef BOOL
#undef STR
#undef PATH

const char *const srv_config_structured[] = {
	"listen", "storage", "trace", "auth", "auth.keys", "coord",
	"coord.endpoints", "coord.tls", "tables", NULL,
};

/* the object keys of each section, in the order "did you mean" prefers */
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
					  "initial_members", "keep_s", "tls", "user",
					  "password_file", NULL };
static const char *const tls_keys[] = { "ca_file", "cert_file", "key_file",
					NULL };

static const struct {
	const char *path;
	const char *const *keys;
} sections[] = {
	{ "", top_keys },	   { "listen", listen_keys },
	{ "storage", storage_keys }, { "trace", trace_keys },
	{ "auth", auth_keys },	   { "coord", coord_keys },
	{ "coord.tls", tls_keys },
};

const char *const *srv_config_keys(const char *path)
{
	for (size_t i = 0; path && i < RS_ARRAY_SIZE(sections); i++)
		if (strcmp(path, sections[i].path) == 0)
			return sections[i].keys;
	return NULL;
}

const struct srv_config_row *srv_config_row(const char *path)
{
	for (size_t i = 0; path && i < srv_config_nrows; i++)
		if (strcmp(path, srv_config_rows[i].path) == 0)
			return &srv_config_rows[i];
	return NULL;
}

/* the row's key in its object: "size" of "storage.size" */
static const char *row_key(const struct srv_config_row *r)
{
	const char *dot = strrchr(r->path, '.');

	return dot ? dot + 1 : r->path;
}

/* length of the row's section: 7 for "storage.size", 0 at the top */
static size_t row_section_len(const struct srv_config_row *r)
{
	return (size_t)(row_key(r) - r->path) - (row_key(r) != r->path);
}

static void *row_ptr(const struct srv_config_row *r, struct srv_config *cfg)
{
	return (char *)cfg + r->off;
}

/* an integer field of 2, 4 or 8 bytes (the rows' widths) */
static uint64_t load_uint(const void *p, size_t width)
{
	if (width == sizeof(uint16_t))
		return *(const uint16_t *)p;
	if (width == sizeof(uint32_t))
		return *(const uint32_t *)p;
	return *(const uint64_t *)p;
}

static void store_uint(void *p, size_t width, uint64_t v)
{
	if (width == sizeof(uint16_t))
		*(uint16_t *)p = (uint16_t)v;
	else if (width == sizeof(uint32_t))
		*(uint32_t *)p = (uint32_t)v;
	else
		*(uint64_t *)p = v;
}

/* a JSON number in [lo, hi] into a double */
static int get_number(struct ctx *c, json_t *obj, const char *key,
		      double lo, double hi, double *out)
{
	json_t *v = json_object_get(obj, key);
	int rc;

	if (!v)
		return 0;
	if (!json_is_number(v))
		return fail_at(c, key, "must be a number in [%g, %g]", lo, hi);
	if ((rc = number_in(c, key, json_number_value(v), lo, hi)))
		return rc;
	*out = json_number_value(v);
	return 0;
}

/* a string of lo..hi bytes or null into an owned copy */
static int get_text(struct ctx *c, json_t *obj, const char *key,
		    uint64_t lo, uint64_t hi, char **dst)
{
	const char *s;
	int rc = get_str(c, obj, key, 1, &s);

	if (!rc && !s)
		set_null(obj, key, dst);
	if (rc || !s || (rc = text_in(c, key, s, lo, hi)))
		return rc;
	free(*dst);
	if (!(*dst = rs_strdup(s)))
		return rs_seterr(-ENOMEM, "config: out of memory");
	return 0;
}

/* one of names[] (NULL-ended) into its index: "unknown backend 'x'
 * (expected dram or pmem)" */
static int get_enum(struct ctx *c, json_t *obj, const char *key,
		    const struct srv_config_row *r, uint32_t *out)
{
	char list[128] = "";
	const char *s;
	size_t len = 0;
	int rc = get_str(c, obj, key, 0, &s);

	if (rc || !s)
		return rc;
	for (uint32_t i = 0; r->names[i]; i++) {
		if (strcmp(s, r->names[i]) == 0) {
			*out = i;
			return 0;
		}
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
					!i ? "" : r->names[i + 1] ? ", " : " or ",
					r->names[i]);
		if (len >= sizeof(list))
			len = sizeof(list) - 1;
	}
	return fail_at(c, key, "unknown %s '%s' (expected %s)", r->what, s,
		       list);
}

/* obj[row's key] into the row's field (absent: unchanged) */
static int parse_row(struct ctx *c, json_t *obj, const struct srv_config_row *r,
		     struct srv_config *cfg)
{
	const char *key = row_key(r);
	void *p = row_ptr(r, cfg);
	uint64_t v;
	int rc;

	switch (r->kind) {
	case SRV_CK_UINT:
	case SRV_CK_SIZE:
		v = load_uint(p, r->width);
		rc = r->kind == SRV_CK_UINT ?
			     get_uint(c, obj, key, r->lo, r->hi, &v) :
			     get_size(c, obj, key, r->lo, r->hi, &v);
		store_uint(p, r->width, v);
		return rc;
	case SRV_CK_BOOL:
		return get_bool(c, obj, key, p);
	case SRV_CK_STR:
		return copy_str(c, obj, key, p, r->width);
	case SRV_CK_PATH:
		return dup_path(c, obj, key, p);
	case SRV_CK_TEXT:
		return get_text(c, obj, key, r->lo, r->hi, p);
	case SRV_CK_ENUM:
		return get_enum(c, obj, key, r, p);
	case SRV_CK_FLOAT:
		return get_number(c, obj, key, r->flo, r->fhi, p);
	}
	return fail_at(c, key, "no parser for kind %d", (int)r->kind);
}

/* the rows of one section ("" the top level) from its object, in the
 * table's order */
static int parse_rows(struct ctx *c, json_t *obj, const char *section,
		      struct srv_config *cfg)
{
	size_t n = strlen(section);
	int rc = 0;

	for (size_t i = 0; !rc && i < srv_config_nrows; i++) {
		const struct srv_config_row *r = &srv_config_rows[i];

		if (row_section_len(r) == n && !strncmp(r->path, section, n))
			rc = parse_row(c, obj, r, cfg);
	}
	return rc;
}

static void row_default(const struct srv_config_row *r,
			struct srv_config *cfg)
{
	void *p = row_ptr(r, cfg);

	switch (r->kind) {
	case SRV_CK_UINT:
	case SRV_CK_SIZE:
		store_uint(p, r->width, r->def);
		break;
	case SRV_CK_BOOL:
		*(int *)p = (int)r->def;
		break;
	case SRV_CK_ENUM:
		*(uint32_t *)p = (uint32_t)r->def;
		break;
	case SRV_CK_FLOAT:
		*(double *)p = r->fdef;
		break;
	default:		/* strings: "" or NULL, as zeroed */
		break;
	}
}

/* s must be a name of the protocol's (what: "a node name") */
static int check_name(struct ctx *c, const char *key, const char *what,
		      const char *s)
{
	if (!proto_name_check(key, s, strlen(s)))
		return 0;
	return fail_at(c, key, "'%s' is not %s (up to %d of "
		       "[A-Za-z0-9_.-])", s, what, PROTO_NAME_MAX);
}

/* ---- top level ---- */

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

/* an object of rows only ("listen", "trace") */
static int parse_plain(struct ctx *c, json_t *root, const char *key,
		       struct srv_config *cfg)
{
	size_t old;
	json_t *o;
	int rc;

	if ((rc = sub_object(c, root, key, srv_config_keys(key), &o, &old)) ||
	    !o)
		return rc;
	rc = parse_rows(c, o, key, cfg);
	pop(c, old);
	return rc;
}

static int parse_storage(struct ctx *c, json_t *root, struct srv_config *cfg)
{
	size_t old;
	json_t *o;
	int rc;

	if ((rc = sub_object(c, root, "storage", storage_keys, &o, &old)) ||
	    !o)
		return rc;
	if ((rc = parse_rows(c, o, "storage", cfg)))
		goto out;
	if (cfg->backend == SRV_BACKEND_PMEM && !cfg->storage_path)
		rc = fail_at(c, "path", "required with backend pmem");
	else if (cfg->backend == SRV_BACKEND_DRAM && cfg->storage_path)
		rc = fail_at(c, "path", "only used with backend pmem");
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

/* coord.user with coord.password_file, coord.tls (the rows are read; the
 * files are read when the node connects to etcd) */
static int parse_etcd_security(struct ctx *c, json_t *o,
			       struct srv_config *cfg)
{
	struct coord_etcd_files *f = &cfg->coord_sec;
	size_t old;
	json_t *t;
	int rc;

	if (!f->user != !f->password_file)
		return fail_at(c, f->user ? "password_file" : "user",
			       "required with %s", f->user ? "user"
							   : "password_file");
	if ((rc = sub_object(c, o, "tls", tls_keys, &t, &old)) || !t)
		return rc;
	if (!(rc = parse_rows(c, t, "coord.tls", cfg)) &&
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
	    (rc = parse_rows(c, o, "coord", cfg)) ||
	    (rc = check_name(c, "cluster", "a name", cfg->coord_cluster)))
		goto out;
	if (cfg->coord_id[0])
		rc = check_name(c, "id", "a name", cfg->coord_id);
	else if (!cfg->name[0])
		rc = fail_at(c, "id", "required when the node has no \"name\"");
	if (!rc)
		rc = parse_etcd_security(c, o, cfg);
out:
	pop(c, old);
	return rc;
}

/* The top level's rows, then the sections; tables last (they are checked
 * against the limits and storage.size). */
static int parse_root(struct ctx *c, json_t *root, struct srv_config *cfg)
{
	size_t old;
	json_t *t;
	int rc;

	if (!json_is_object(root))
		return fail(c, "must be a JSON object");
	if ((rc = check_keys(c, root, top_keys)) ||
	    (rc = parse_rows(c, root, "", cfg)) ||
	    (rc = parse_plain(c, root, "listen", cfg)) ||
	    (rc = parse_storage(c, root, cfg)) ||
	    (rc = parse_plain(c, root, "trace", cfg)) ||
	    (rc = parse_auth(c, root, cfg)))
		return rc;
	if (cfg->name[0] &&
	    (rc = check_name(c, "name", "a node name", cfg->name)))
		return rc;
	if ((rc = parse_coord(c, root, cfg)))
		return rc;
	if (!(t = json_object_get(root, "tables")))
		return 0;
	old = push_key(c, "tables");
	rc = parse_tables(c, t, cfg);
	pop(c, old);
	return rc;
}

/* ---- one setting from a string ---- */

/* value as the JSON the row's parser expects, so that a setting by name
 * and a file pass the same checks with the same messages: a number when
 * it reads as one, else a string, which the number rows refuse */
static json_t *value_json(const struct srv_config_row *r, const char *s)
{
	char *end;
	long long n;
	double d;

	if (!s)
		return json_null();
	errno = 0;
	if (r->kind == SRV_CK_UINT && (isdigit((unsigned char)s[0]) ||
				       (s[0] == '-' &&
					isdigit((unsigned char)s[1])))) {
		n = strtoll(s, &end, 10);
		if (!*end && !errno)
			return json_integer(n);
	} else if (r->kind == SRV_CK_BOOL && !strcmp(s, "true")) {
		return json_true();
	} else if (r->kind == SRV_CK_BOOL && !strcmp(s, "false")) {
		return json_false();
	} else if (r->kind == SRV_CK_FLOAT && *s && !isspace((unsigned char)*s)) {
		d = strtod(s, &end);
		if (!*end && !errno && isfinite(d))
			return json_real(d);
	}
	return json_string_nocheck(s);
}

/* an unknown path, with the closest row's */
static int unknown_path(const char *path)
{
	const char *best = NULL;
	size_t d, best_d = 3;

	if (is_known(path, srv_config_structured))
		return rs_seterr(RS_E_INVAL, "%s: not a single setting (the "
				 "file's section, or a setter of its own)",
				 path);
	for (size_t i = 0; i < srv_config_nrows; i++)
		if ((d = edit_distance(path, srv_config_rows[i].path)) < best_d)
			best_d = d, best = srv_config_rows[i].path;
	if (best)
		return rs_seterr(RS_E_INVAL, "%s: unknown field (did you mean "
				 "'%s'?)", path, best);
	return rs_seterr(RS_E_INVAL, "%s: unknown field", path);
}

/* The row's parse of {key: value} at the row's section; a name row is
 * checked as the file's is, and keeps its old value when refused. */
static int set_row(const struct srv_config_row *r, json_t *obj,
		   struct srv_config *cfg)
{
	struct ctx c = { .len = row_section_len(r) };
	char *p = row_ptr(r, cfg), old[SRV_CONFIG_ADDR_MAX + 1];
	int name = r->kind == SRV_CK_STR && r->what && r->width <= sizeof(old);
	int rc;

	snprintf(c.path, sizeof(c.path), "%.*s", (int)c.len, r->path);
	if (name)
		memcpy(old, p, r->width);
	rc = parse_row(&c, obj, r, cfg);
	if (!rc && name && p[0] &&
	    (rc = check_name(&c, row_key(r), r->what, p)))
		memcpy(p, old, r->width);
	return rc;
}

int srv_config_set(struct srv_config *cfg, const char *path, const char *value)
{
	const struct srv_config_row *r = srv_config_row(path);
	json_t *obj, *v;
	int rc;

	if (!cfg || !path)
		return rs_seterr(RS_E_INVAL, "config: %s is NULL",
				 cfg ? "the path" : "the config");
	if (!r)
		return unknown_path(path);
	v = value_json(r, value);
	obj = json_object();
	if (!v || !obj || json_object_set_new(obj, row_key(r), v)) {
		if (!obj)
			json_decref(v);
		json_decref(obj);
		return rs_seterr(-ENOMEM, "config: out of memory");
	}
	rc = set_row(r, obj, cfg);
	json_decref(obj);
	return rc;
}

/* ---- the values a config holds ---- */

/* the row's range check over its field's value */
static int check_row(const struct srv_config_row *r,
		     const struct srv_config *cfg)
{
	struct ctx c = { .len = row_section_len(r) };
	const void *p = (const char *)cfg + r->off;
	const char *key = row_key(r), *str;
	uint64_t v;

	snprintf(c.path, sizeof(c.path), "%.*s", (int)c.len, r->path);
	switch (r->kind) {
	case SRV_CK_UINT:
		v = load_uint(p, r->width);
		return v < r->lo || v > r->hi ? uint_range(&c, key, r->lo,
							   r->hi) : 0;
	case SRV_CK_SIZE:
		return size_in(&c, key, load_uint(p, r->width), r->lo, r->hi);
	case SRV_CK_FLOAT:
		return number_in(&c, key, *(const double *)p, r->flo, r->fhi);
	case SRV_CK_PATH:
	case SRV_CK_TEXT:
		str = *(char *const *)p;
		if (!str)
			return 0;
		return r->kind == SRV_CK_PATH ? path_in(&c, key, str)
					      : text_in(&c, key, str, r->lo,
							r->hi);
	case SRV_CK_ENUM:
		for (v = 0; r->names[v]; v++)
			;
		if (*(const uint32_t *)p >= v)
			return fail_at(&c, key, "unknown %s %u", r->what,
				       *(const uint32_t *)p);
		return 0;
	default:		/* BOOL, STR: any value the field holds */
		return 0;
	}
}

int srv_config_check_rows(const struct srv_config *c)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < srv_config_nrows; i++)
		rc = check_row(&srv_config_rows[i], c);
	return rc;
}

const char *srv_config_member_id(const struct srv_config *c)
{
	return c->coord_id[0] ? c->coord_id : c->name;
}

unsigned srv_config_slab_flags(const struct srv_config *c)
{
	return (c->slab_flags & ~SLAB_F_FORMAT) |
	       (c->storage_format ? SLAB_F_FORMAT : 0);
}

/* ---- entry points ---- */

void srv_config_defaults(struct srv_config *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < srv_config_nrows; i++)
		row_default(&srv_config_rows[i], c);
	/* what only the library sets */
	c->slab_flags = SLAB_F_HUGEPAGES;
	c->credits = 16;
	c->max_conns = 128;
}

static void keys_free(struct srv_config_key *keys, uint32_t n)
{
	for (uint32_t i = 0; keys && i < n; i++) {
		char *sec = keys[i].secret;

		if (sec) {
			sodium_memzero(sec, strlen(sec));
			free(sec);
		}
		free(keys[i].secret_file);
	}
	free(keys);
}

void srv_config_clear(struct srv_config *c)
{
	free(c->storage_path);
	free(c->trace_path);
	free(c->checkpoint_dir);
	free(c->coord_endpoints);
	coord_etcd_files_free(&c->coord_sec);
	free(c->tables);
	keys_free(c->keys, c->nkeys);
	for (size_t i = 0; c->creds && i < c->ncreds; i++)
		auth_key_wipe(&c->creds[i]);
	free(c->creds);
	c->storage_path = c->trace_path = c->checkpoint_dir = NULL;
	c->coord_endpoints = NULL;
	c->tables = NULL;
	c->keys = NULL;
	c->creds = NULL;
	c->ntables = c->nkeys = 0;
	c->ncreds = 0;
}

void srv_config_free(struct srv_config **c)
{
	if (!c || !*c)
		return;
	srv_config_clear(*c);
	free(*c);
	*c = NULL;
}

static int dup_or_null(char **dst, const char *src)
{
	*dst = src ? rs_strdup(src) : NULL;
	return src && !*dst ? -ENOMEM : 0;
}

static int copy_keys(struct srv_config *dst, const struct srv_config *src)
{
	if (!src->nkeys)
		return 0;
	if (!(dst->keys = rs_calloc(src->nkeys, sizeof(*dst->keys))))
		return -ENOMEM;
	for (uint32_t i = 0; i < src->nkeys; i++) {
		dst->nkeys = i + 1;
		dst->keys[i].id = src->keys[i].id;
		dst->keys[i].role = src->keys[i].role;
		if (dup_or_null(&dst->keys[i].secret, src->keys[i].secret) ||
		    dup_or_null(&dst->keys[i].secret_file,
				src->keys[i].secret_file))
			return -ENOMEM;
	}
	return 0;
}

/* an array of n elements of size each, or NULL when n is 0 */
static int dup_array(void **dst, const void *src, size_t n, size_t size)
{
	*dst = NULL;
	if (!n)
		return 0;
	if (!(*dst = rs_malloc(n * size)))
		return -ENOMEM;
	memcpy(*dst, src, n * size);
	return 0;
}

int srv_config_copy(struct srv_config *dst, const struct srv_config *src)
{
	*dst = *src;
	dst->storage_path = dst->trace_path = dst->checkpoint_dir = NULL;
	dst->coord_endpoints = NULL;
	memset(&dst->coord_sec, 0, sizeof(dst->coord_sec));
	dst->tables = NULL;
	dst->keys = NULL;
	dst->creds = NULL;
	dst->nkeys = 0;
	dst->ncreds = 0;
	if (dup_or_null(&dst->storage_path, src->storage_path) ||
	    dup_or_null(&dst->trace_path, src->trace_path) ||
	    dup_or_null(&dst->checkpoint_dir, src->checkpoint_dir) ||
	    dup_or_null(&dst->coord_endpoints, src->coord_endpoints) ||
	    coord_etcd_files_copy(&dst->coord_sec, &src->coord_sec) ||
	    dup_array((void **)&dst->tables, src->tables, src->ntables,
		      sizeof(*src->tables)) ||
	    copy_keys(dst, src) ||
	    dup_array((void **)&dst->creds, src->creds, src->ncreds,
		      sizeof(*src->creds)))
		goto nomem;
	dst->ncreds = src->ncreds;
	return 0;
nomem:
	dst->ntables = dst->tables ? dst->ntables : 0;
	srv_config_clear(dst);
	return rs_seterr(-ENOMEM, "config: out of memory");
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
