/*
 * spec_json.h - the hyper-parameters of a table spec as JSON members,
 * driven by the field table (spec_fields.h): what the node's catalog
 * records and the checkpoint manifest write and read. Each field is a
 * member named as its row: f32 a number (written as a double, which
 * round-trips every float), u32 an integer, u64 a string of 16 hex
 * digits (JSON numbers cannot carry 64 bits exactly).
 */
#ifndef RS_COMMON_SPEC_JSON_H
#define RS_COMMON_SPEC_JSON_H

#include <jansson.h>

#include "common/spec.h"

/* Add every field of group g from params to object o. 0 or -1 (out of
 * memory). */
int spec_params_to_json(json_t *o, enum spec_group g, const void *params);

/* A new object: the kind's name ("?" if unknown) under kind_key
 * (SPEC_JSON_KIND, or the catalog's SPEC_JSON_KIND_OLD), then every field
 * of group g. params is a struct optim_params or init_params, whose first
 * member is the kind. NULL: out of memory. */
json_t *spec_params_object(enum spec_group g, const char *kind_key,
			   const void *params);

/* Read every field of group g from o into params (no range check: the
 * caller validates). 0, or -1 with *bad the first key that is missing or
 * of the wrong type. A u64 string may have 1 to 16 hex digits. */
int spec_params_from_json(json_t *o, enum spec_group g, void *params,
			  const char **bad);

/* The kind string of an optimizer or initializer object: its "type", or
 * the catalog's "kind" (SPEC_JSON_KIND_OLD); NULL if neither is a
 * string. */
const char *spec_kind_from_json(json_t *o);

#endif
