/*
 * spec_names.c - the public names of a table spec's values and its table
 * of hyper-parameters (include/recstore/client.h, "a spec's names"):
 * thin wrappers over src/common's, so that a program (recstore-ctl's
 * create) spells a spec as the node config does without the internal
 * headers. The _Static_asserts tie the public numbers to the internal
 * ones; the names themselves live once, in src/common.
 */
#include "common/proto.h"
#include "common/rs_internal.h"
#include "common/spec.h"
#include "recstore/client.h"

/* (int): the enums are distinct types, -Wenum-compare */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(RS_EVICT_TTL_MAX == PROTO_EVICT_TTL_MAX, "TTL bound");
_Static_assert(RS_EVICT_ADMIT_MAX == PROTO_EVICT_ADMIT_MAX, "admit bound");
_Static_assert(SAME(RS_EVICT_NONE, PROTO_EVICT_NONE) &&
	       SAME(RS_EVICT_LRU, PROTO_EVICT_LRU) &&
	       SAME(RS_EVICT_LFU, PROTO_EVICT_LFU), "eviction policies");
_Static_assert(SAME(RS_PARAM_OPTIM, SPEC_G_OPTIM) &&
	       SAME(RS_PARAM_INIT, SPEC_G_INIT), "parameter groups");
_Static_assert(SAME(RS_PARAM_F32, SPEC_T_f32) &&
	       SAME(RS_PARAM_U32, SPEC_T_u32) &&
	       SAME(RS_PARAM_U64, SPEC_T_u64), "parameter types");

RS_EXPORT const char *rs_dtype_name(uint32_t dtype)
{
	return proto_dtype_name(dtype);
}

RS_EXPORT int rs_dtype_parse(const char *name)
{
	if (!name)
		return rs_seterr(RS_E_INVAL, "dtype: NULL");
	return proto_dtype_parse(name);
}

RS_EXPORT const char *rs_optimizer_name(uint32_t kind)
{
	return optim_kind_name(kind);
}

RS_EXPORT const char *rs_init_name(uint32_t kind)
{
	return init_kind_name(kind);
}

RS_EXPORT int rs_init_parse(const char *name)
{
	if (!name)
		return rs_seterr(RS_E_INVAL, "initializer: NULL");
	return init_kind_parse(name);
}

RS_EXPORT const char *rs_evict_name(uint32_t policy)
{
	return proto_evict_policy_name(policy);
}

RS_EXPORT int rs_evict_parse(const char *name)
{
	if (!name)
		return rs_seterr(RS_E_INVAL, "eviction policy: NULL");
	return proto_evict_policy_parse(name);
}

RS_EXPORT unsigned rs_table_spec_param_count(void)
{
	return spec_nfields;
}

RS_EXPORT int rs_table_spec_param(unsigned i, const char **name,
				  uint32_t *group, uint32_t *type)
{
	if (i >= spec_nfields)
		return rs_seterr(RS_E_NOTFOUND, "spec parameter %u: there "
				 "are %u", i, spec_nfields);
	if (name)
		*name = spec_fields[i].name;
	if (group)
		*group = spec_fields[i].group;
	if (type)
		*type = spec_fields[i].type;
	return 0;
}

/* The public spec's optim and init blocks have the layout of struct
 * optim_params and init_params (asserted in spec.c), so a row's offset
 * into the internal struct is its offset into the public block. */
RS_EXPORT void *rs_table_spec_param_ptr(struct rs_table_spec *spec,
					unsigned i)
{
	const struct spec_field *f;

	if (!spec || i >= spec_nfields)
		return NULL;
	f = &spec_fields[i];
	return spec_field_ptr(f, f->group == SPEC_G_OPTIM
					 ? (void *)&spec->optim
					 : (void *)&spec->init);
}
