/*
 * rv_fi.c - the names of the src/verbs failure injection sites (rv_fi.h).
 * The counter is src/common/alloc.c's, shared with the allocator sites.
 */
#define RV_FI_NO_MACROS
#include "verbs/rv_fi.h"

#ifdef RS_FAULT_INJECT
static const char *const fi_names[] = {
#define RV_FI_NAME(s) #s,
	RV_FI_SITES(RV_FI_NAME)
#undef RV_FI_NAME
};

const char *rv_fi_site_name(int site)
{
	if (site > RV_FI_BEFORE_VERBS && site < RV_FI_NSITES)
		return fi_names[site - RV_FI_BEFORE_VERBS - 1];
	return rs_fi_site_name(site);
}
#endif
