/*
 * spec.h - the parameter schema of a table: optimizer and initializer
 * kinds and their hyper-parameters as the wire, the files and the config
 * carry them (prefix spec_, and the historical optim_/init_ names of the
 * kinds and parameter structs). The kernels that use them live in
 * src/value (optimizer.h, initializer.h); this file is what both sides of
 * the wire read, so src/common depends on nothing above it.
 *
 * The fields are described once, in spec_fields.h; spec_fields[] is that
 * table as data (for the tools, the Python extension and the tests).
 * Formulas, defaults and references: docs/optimizers.md.
 *
 * Numbering: enum optim_kind and enum init_kind are the wire's numbers
 * and the public enums' (enum rs_optimizer, enum rs_init); common/spec.c
 * ties each pair with _Static_assert.
 */
#ifndef RS_COMMON_SPEC_H
#define RS_COMMON_SPEC_H

#include <stddef.h>
#include <stdint.h>

enum optim_kind {
	OPTIM_SGD = 0,
	OPTIM_ADAGRAD = 1,
	OPTIM_ROWWISE_ADAGRAD = 2,
	OPTIM_ADAM = 3,
	OPTIM_KIND_COUNT
};

/* optim_params.flags */
#define OPTIM_F_DECOUPLED 0x1u /* decoupled weight decay (AdamW style) */
#define OPTIM_F_ALL OPTIM_F_DECOUPLED

/*
 * Hyper-parameters of one table (members and ranges: spec_fields.h).
 * Fields a kind does not use are ignored by the kernels (but still
 * validated, so that defaults stay sane).
 */
struct optim_params {
	uint32_t kind;		   /* enum optim_kind */
	uint32_t flags;		   /* OPTIM_F_* */
	float lr;		   /* learning rate, > 0 */
	float eps;		   /* denominator term, > 0 */
	float beta1;		   /* Adam first moment decay, [0, 1) */
	float beta2;		   /* Adam second moment decay, [0, 1) */
	float weight_decay;	   /* >= 0; see value/optimizer.h */
	float initial_accumulator; /* Adagrad / row-wise G0, >= 0 */
};

enum init_kind {
	INIT_ZEROS = 0,
	INIT_CONSTANT = 1,
	INIT_UNIFORM = 2,
	INIT_NORMAL = 3,
	INIT_KIND_COUNT
};

struct init_params {
	uint32_t kind; /* enum init_kind */
	float value;   /* INIT_CONSTANT: every element, finite */
	float a;       /* INIT_UNIFORM: bound, elements in [-a, a], a >= 0 */
	float std;     /* INIT_NORMAL: standard deviation (mean 0), >= 0 */
	uint64_t seed; /* INIT_UNIFORM / INIT_NORMAL: table seed */
};

/* Name of a kind ("sgd", "adagrad", "rowwise_adagrad", "adam"); NULL if
 * unknown. optim_kind_parse() is its inverse: kind or RS_E_INVAL. */
const char *optim_kind_name(uint32_t kind);
int optim_kind_parse(const char *name);
/* "zeros", "constant", "uniform", "normal"; NULL if unknown.
 * init_kind_parse(): kind, or RS_E_INVAL with a message. */
const char *init_kind_name(uint32_t kind);
int init_kind_parse(const char *name);

/* Fill *p with the documented defaults of `kind` (spec_fields.h).
 * Returns 0 or RS_E_INVAL for an unknown kind. */
int optim_params_default(struct optim_params *p, uint32_t kind);
int init_params_default(struct init_params *p, uint32_t kind);

/* 0 if every field is in range, else RS_E_INVAL with a message naming the
 * field (e.g. "lr: must be a finite number > 0"). */
int optim_params_validate(const struct optim_params *p);
int init_params_validate(const struct init_params *p);

/* ---- the field table as data ---- */

enum spec_group { SPEC_G_OPTIM, SPEC_G_INIT };
#define SPEC_BIT(kind) (1u << (kind)) /* spec_field.users */
enum spec_type { SPEC_T_f32, SPEC_T_u32, SPEC_T_u64 };

struct spec_field {
	const char *name;     /* C member and JSON key */
	uint8_t group;	      /* enum spec_group */
	uint8_t type;	      /* enum spec_type */
	uint8_t lo_open, hi_open;
	uint32_t off;	      /* in struct optim_params / init_params */
	float lo, hi;	      /* f32 range; u32: hi is the mask of bits */
	float def[4];	      /* default by kind */
	uint32_t users;	      /* bit per kind that reads it */
};

extern const struct spec_field spec_fields[];
extern const unsigned spec_nfields;

/* The group's parameter struct of a spec part: p is a struct
 * optim_params * (SPEC_G_OPTIM) or a struct init_params *. */
static inline void *spec_field_ptr(const struct spec_field *f, void *p)
{
	return (char *)p + f->off;
}

/* 0 if f's value in params is valid, else RS_E_INVAL "<name>: ...". */
int spec_field_check(const struct spec_field *f, const void *params);

/* The key of an optimizer's or initializer's kind in a JSON object:
 * "type" (the config's and the manifest's, the one spelling); the
 * catalog inside a pool writes "kind" (read by older nodes). */
#define SPEC_JSON_KIND "type"
#define SPEC_JSON_KIND_OLD "kind"

#endif
