/*
 * spec.c - the parameter schema of a table (spec.h): kind names, defaults
 * and range checks, and the JSON members of the catalog and the manifest,
 * each a loop over the field table (spec_fields.h) instead of a list of
 * names.
 *
 * Range messages keep the shape every caller and test has relied on:
 * "lr: must be a finite number > 0", "beta1: must be in [0, 1)",
 * "value: must be a finite number".
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "common/rs_internal.h"
#include "common/spec.h"
#include "common/spec_fields.h"
#include "common/spec_json.h"
#include "recstore/client.h"

/* The public enums are the wire's numbers (include/recstore/client.h);
 * the casts keep -Wenum-compare quiet, not the check. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(RS_OPT_SGD, OPTIM_SGD) &&
		       SAME(RS_OPT_ADAGRAD, OPTIM_ADAGRAD) &&
		       SAME(RS_OPT_ROWWISE_ADAGRAD, OPTIM_ROWWISE_ADAGRAD) &&
		       SAME(RS_OPT_ADAM, OPTIM_ADAM) && OPTIM_KIND_COUNT == 4,
	       "enum rs_optimizer and enum optim_kind");
_Static_assert(SAME(RS_INIT_ZEROS, INIT_ZEROS) &&
		       SAME(RS_INIT_CONSTANT, INIT_CONSTANT) &&
		       SAME(RS_INIT_UNIFORM, INIT_UNIFORM) &&
		       SAME(RS_INIT_NORMAL, INIT_NORMAL) &&
		       INIT_KIND_COUNT == 4,
	       "enum rs_init and enum init_kind");
_Static_assert(SAME(RS_DTYPE_FP32, PROTO_DTYPE_FP32) &&
		       SAME(RS_DTYPE_FP16, PROTO_DTYPE_FP16) &&
		       SAME(RS_DTYPE_BF16, PROTO_DTYPE_BF16) &&
		       PROTO_DTYPE_COUNT == 3,
	       "enum rs_dtype and enum proto_dtype (enum row_dtype: "
	       "value/row_format.h)");

/* recstore-ctl and the Python extension reach a row's member of struct
 * rs_table_spec's optim and init through the row's offset in struct
 * optim_params and init_params: the layouts must agree. */
#define SAME_OFF(M, S, n)                                                    \
	_Static_assert(offsetof(struct rs_table_spec, M.n) -                  \
			       offsetof(struct rs_table_spec, M) ==           \
		       offsetof(S, n), "rs_table_spec." #M "." #n);
#define OFF_OPTIM(A, n, ...) SAME_OFF(optim, struct optim_params, n)
#define OFF_INIT(A, n, ...) SAME_OFF(init, struct init_params, n)
SPEC_OPTIM_PARAMS(OFF_OPTIM, 0)
SPEC_INIT_PARAMS(OFF_INIT, 0)

#define FIELD_ROW(G, S, n, t, lo_, lo_o, hi_, hi_o, d, u)                   \
	{ .name = #n, .group = G, .type = SPEC_T_##t, .lo_open = lo_o,       \
	  .hi_open = hi_o, .off = offsetof(S, n), .lo = lo_, .hi = hi_,      \
	  .def = { SPEC_UNPAREN d }, .users = u },
#define OPTIM_ROW(A, ...) FIELD_ROW(SPEC_G_OPTIM, struct optim_params, \
				    __VA_ARGS__)
#define INIT_ROW(A, ...) FIELD_ROW(SPEC_G_INIT, struct init_params, \
				   __VA_ARGS__)

const struct spec_field spec_fields[] = {
	SPEC_OPTIM_PARAMS(OPTIM_ROW, 0)
	SPEC_INIT_PARAMS(INIT_ROW, 0)
};
const unsigned spec_nfields = RS_ARRAY_SIZE(spec_fields);

/* ---- kinds ---- */

static const char *const optim_names[OPTIM_KIND_COUNT] = {
	[OPTIM_SGD] = "sgd",
	[OPTIM_ADAGRAD] = "adagrad",
	[OPTIM_ROWWISE_ADAGRAD] = "rowwise_adagrad",
	[OPTIM_ADAM] = "adam",
};

static const char *const init_names[INIT_KIND_COUNT] = {
	[INIT_ZEROS] = "zeros",
	[INIT_CONSTANT] = "constant",
	[INIT_UNIFORM] = "uniform",
	[INIT_NORMAL] = "normal",
};

/* Index of name in names[n], or RS_E_INVAL naming what and the choices. */
static int kind_parse(const char *const *names, uint32_t n, const char *name,
		      const char *what, const char *choices)
{
	for (uint32_t k = 0; name && k < n; k++)
		if (strcmp(name, names[k]) == 0)
			return (int)k;
	return rs_seterr(RS_E_INVAL, "unknown %s '%s' (expected %s)", what,
			 name ? name : "(null)", choices);
}

const char *optim_kind_name(uint32_t kind)
{
	return kind < OPTIM_KIND_COUNT ? optim_names[kind] : NULL;
}

int optim_kind_parse(const char *name)
{
	return kind_parse(optim_names, OPTIM_KIND_COUNT, name, "optimizer",
			  "sgd, adagrad, rowwise_adagrad or adam");
}

const char *init_kind_name(uint32_t kind)
{
	return kind < INIT_KIND_COUNT ? init_names[kind] : NULL;
}

int init_kind_parse(const char *name)
{
	return kind_parse(init_names, INIT_KIND_COUNT, name, "initializer",
			  "zeros, constant, uniform or normal");
}

/* ---- defaults and ranges ---- */

static void set_default(const struct spec_field *f, void *params,
			uint32_t kind)
{
	void *v = spec_field_ptr(f, params);

	if (f->type == SPEC_T_f32)
		*(float *)v = f->def[kind];
	else if (f->type == SPEC_T_u32)
		*(uint32_t *)v = (uint32_t)f->def[kind];
	else
		*(uint64_t *)v = (uint64_t)f->def[kind];
}

static void group_default(enum spec_group g, void *params, uint32_t kind)
{
	for (unsigned i = 0; i < spec_nfields; i++)
		if (spec_fields[i].group == g)
			set_default(&spec_fields[i], params, kind);
}

int optim_params_default(struct optim_params *p, uint32_t kind)
{
	if (kind >= OPTIM_KIND_COUNT)
		return rs_seterr(RS_E_INVAL, "unknown optimizer kind %u", kind);
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	group_default(SPEC_G_OPTIM, p, kind);
	return 0;
}

int init_params_default(struct init_params *p, uint32_t kind)
{
	if (kind >= INIT_KIND_COUNT)
		return rs_seterr(RS_E_INVAL, "unknown initializer kind %u",
				 kind);
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	group_default(SPEC_G_INIT, p, kind);
	return 0;
}

static int check_f32(const struct spec_field *f, float v)
{
	int bad = !isfinite(v) || (f->lo_open ? v <= f->lo : v < f->lo) ||
		  (f->hi_open ? v >= f->hi : v > f->hi);

	if (!bad)
		return 0;
	if (isinf(f->lo))
		return rs_seterr(RS_E_INVAL, "%s: must be a finite number",
				 f->name);
	if (isinf(f->hi))
		return rs_seterr(RS_E_INVAL,
				 "%s: must be a finite number %s %g", f->name,
				 f->lo_open ? ">" : ">=", (double)f->lo);
	return rs_seterr(RS_E_INVAL, "%s: must be in %c%g, %g%c", f->name,
			 f->lo_open ? '(' : '[', (double)f->lo, (double)f->hi,
			 f->hi_open ? ')' : ']');
}

int spec_field_check(const struct spec_field *f, const void *params)
{
	const void *v = (const char *)params + f->off;
	uint32_t bits;

	switch (f->type) {
	case SPEC_T_f32:
		return check_f32(f, *(const float *)v);
	case SPEC_T_u32:
		bits = *(const uint32_t *)v & ~(uint32_t)f->hi;
		if (bits)
			return rs_seterr(RS_E_INVAL, "%s: unknown bits 0x%x",
					 f->name, bits);
		return 0;
	default:
		return 0; /* every 64-bit value is valid */
	}
}

static int group_check(enum spec_group g, const void *params)
{
	int rc;

	for (unsigned i = 0; i < spec_nfields; i++)
		if (spec_fields[i].group == g &&
		    (rc = spec_field_check(&spec_fields[i], params)))
			return rc;
	return 0;
}

int optim_params_validate(const struct optim_params *p)
{
	if (p->kind >= OPTIM_KIND_COUNT)
		return rs_seterr(RS_E_INVAL, "type: unknown optimizer kind %u",
				 p->kind);
	return group_check(SPEC_G_OPTIM, p);
}

int init_params_validate(const struct init_params *p)
{
	if (p->kind >= INIT_KIND_COUNT)
		return rs_seterr(RS_E_INVAL,
				 "type: unknown initializer kind %u", p->kind);
	return group_check(SPEC_G_INIT, p);
}

/* ---- JSON ---- */

static json_t *field_to_json(const struct spec_field *f, const void *params)
{
	const void *v = (const char *)params + f->off;
	char hex[17];

	if (f->type == SPEC_T_f32)
		return json_real((double)*(const float *)v);
	if (f->type == SPEC_T_u32)
		return json_integer((json_int_t)*(const uint32_t *)v);
	snprintf(hex, sizeof(hex), "%016" PRIx64, *(const uint64_t *)v);
	return json_string(hex);
}

int spec_params_to_json(json_t *o, enum spec_group g, const void *params)
{
	for (unsigned i = 0; i < spec_nfields; i++)
		if (spec_fields[i].group == g &&
		    json_object_set_new(o, spec_fields[i].name,
					field_to_json(&spec_fields[i],
						      params)))
			return -1;
	return 0;
}

json_t *spec_params_object(enum spec_group g, const char *kind_key,
			   const void *params)
{
	uint32_t kind = *(const uint32_t *)params;
	const char *name = g == SPEC_G_OPTIM ? optim_kind_name(kind)
					     : init_kind_name(kind);
	json_t *o = json_pack("{s:s}", kind_key, name ? name : "?");

	if (o && spec_params_to_json(o, g, params)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int hex64(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || strlen(s) > 16 || *s == '-' || *s == '+' ||
	    *s == ' ')
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 16);
	return errno || *end ? -1 : 0;
}

static int field_from_json(const struct spec_field *f, json_t *j,
			   void *params)
{
	void *v = spec_field_ptr(f, params);
	json_int_t i;

	switch (f->type) {
	case SPEC_T_f32:
		if (!json_is_number(j))
			return -1;
		*(float *)v = (float)json_number_value(j);
		return 0;
	case SPEC_T_u32:
		i = json_integer_value(j);
		if (!json_is_integer(j) || i < 0 || i > (json_int_t)UINT32_MAX)
			return -1;
		*(uint32_t *)v = (uint32_t)i;
		return 0;
	default:
		return hex64(json_string_value(j), (uint64_t *)v);
	}
}

int spec_params_from_json(json_t *o, enum spec_group g, void *params,
			  const char **bad)
{
	for (unsigned i = 0; i < spec_nfields; i++) {
		const struct spec_field *f = &spec_fields[i];

		if (f->group != g)
			continue;
		if (field_from_json(f, json_object_get(o, f->name), params)) {
			*bad = f->name;
			return -1;
		}
	}
	return 0;
}

const char *spec_kind_from_json(json_t *o)
{
	json_t *k = json_object_get(o, SPEC_JSON_KIND);

	if (!k)
		k = json_object_get(o, SPEC_JSON_KIND_OLD);
	return json_string_value(k);
}
