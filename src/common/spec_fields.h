/*
 * spec_fields.h - the hyper-parameters of a table spec, described once.
 *
 * Each row of SPEC_OPTIM_PARAMS (struct optim_params) and
 * SPEC_INIT_PARAMS (struct init_params) is one field, in WIRE ORDER (the
 * TABLE_CREATE body, docs/protocol.md), as
 *
 *   X(A, name, type, lo, lo_open, hi, hi_open, defaults, users)
 *
 *   A         passed through untouched (an expansion's own argument)
 *   name      the C member AND its one JSON spelling (config, catalog,
 *             manifest, recstore-ctl's --name, Python's keyword; Python
 *             prefixes the initializer's with "init_")
 *   type      the wire type: f32 (JSON number), u32 (JSON integer: bits,
 *             lo/hi unused, hi is the mask of known bits), u64 (JSON:
 *             16 hex digits in files, an integer or string in the config)
 *   lo, hi    the valid range of an f32 (lo_open / hi_open: exclusive;
 *             an infinite bound: none, but the value must be finite)
 *   defaults  (d0, d1, d2, d3): the default under each kind, by enum
 *             value (optim_kind or init_kind)
 *   users     bit per kind (SPEC_BIT) that reads the field; the node's
 *             config refuses a field its kind does not use
 *
 * Driven by it: the wire codec (common/proto.c), the client's conversion
 * (client/table.c), defaults and range checks and the JSON of the catalog
 * and the manifest (common/spec.c), the node config's tables
 * (server/config.c), recstore-ctl's options and the Python keywords
 * (python/recstore/_native.c exports spec_fields[]). A new hyper-parameter
 * is one line here plus its member (docs/DEVELOPING.md, "The table spec");
 * tests/unit/test_spec_fields.c walks every path with every row.
 *
 * The kinds themselves (type), the shape (name, dim, dtype, capacity),
 * growth and eviction are not rows: each has a shape of its own.
 */
#ifndef RS_COMMON_SPEC_FIELDS_H
#define RS_COMMON_SPEC_FIELDS_H

#include <math.h> /* INFINITY */

#include "common/spec.h" /* the kinds, SPEC_BIT */

#define SPEC_OPT_ALL 0xfu
#define SPEC_OPT_ADAGRADS (SPEC_BIT(OPTIM_ADAGRAD) | \
			   SPEC_BIT(OPTIM_ROWWISE_ADAGRAD))
#define SPEC_OPT_ADAM SPEC_BIT(OPTIM_ADAM)

/* kinds: sgd, adagrad, rowwise_adagrad, adam */
#define SPEC_OPTIM_PARAMS(X, A)                                             \
	X(A, flags, u32, 0, 0, OPTIM_F_ALL, 0, (0, 0, 0, 0), SPEC_OPT_ALL) \
	X(A, lr, f32, 0, 1, INFINITY, 0,                                    \
	  (0.01f, 0.01f, 0.01f, 0.001f), SPEC_OPT_ALL)                      \
	X(A, eps, f32, 0, 1, INFINITY, 0, (1e-8f, 1e-10f, 1e-8f, 1e-8f),    \
	  SPEC_OPT_ADAGRADS | SPEC_OPT_ADAM)                                \
	X(A, beta1, f32, 0, 0, 1, 1, (0.9f, 0.9f, 0.9f, 0.9f),              \
	  SPEC_OPT_ADAM)                                                    \
	X(A, beta2, f32, 0, 0, 1, 1, (0.999f, 0.999f, 0.999f, 0.999f),      \
	  SPEC_OPT_ADAM)                                                    \
	X(A, weight_decay, f32, 0, 0, INFINITY, 0, (0, 0, 0, 0),            \
	  SPEC_OPT_ALL)                                                     \
	X(A, initial_accumulator, f32, 0, 0, INFINITY, 0, (0, 0, 0, 0),     \
	  SPEC_OPT_ADAGRADS)

/* kinds: zeros, constant, uniform, normal */
#define SPEC_INIT_PARAMS(X, A)                                              \
	X(A, value, f32, -INFINITY, 0, INFINITY, 0, (0, 0, 0, 0),           \
	  SPEC_BIT(INIT_CONSTANT))                                          \
	X(A, a, f32, 0, 0, INFINITY, 0, (0.01f, 0.01f, 0.01f, 0.01f),       \
	  SPEC_BIT(INIT_UNIFORM))                                           \
	X(A, std, f32, 0, 0, INFINITY, 0, (0.01f, 0.01f, 0.01f, 0.01f),     \
	  SPEC_BIT(INIT_NORMAL))                                            \
	X(A, seed, u64, 0, 0, 0, 0, (0, 0, 0, 0),                           \
	  SPEC_BIT(INIT_UNIFORM) | SPEC_BIT(INIT_NORMAL))

/* Helpers for expansions: SPEC_UNPAREN((a, b)) is a, b; SPEC_CALL(m, ...)
 * expands its arguments before m splits them. */
#define SPEC_UNPAREN(...) __VA_ARGS__
#define SPEC_CALL(m, ...) m(__VA_ARGS__)

#endif
