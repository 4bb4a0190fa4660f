/*
 * pool.c - the bodies of the helpers declared in pool.h, which says what
 * they are for.
 */
#include "pool.h"

void tl_pool_path(char *path, size_t cap, const char *name)
{
	const char *d = getenv("TMPDIR");

	snprintf(path, cap, "%s/rs-test-%s-%d.pool", d && *d ? d : "/tmp",
		 name, (int)getpid());
}

struct slab_store *tl_pool_open(const char *path, uint64_t size,
				unsigned flags)
{
	struct slab_store_cfg cfg = {.path = path, .size = size,
				     .flags = flags};
	struct slab_store *st;
	int rc = slab_store_open(&st, &cfg);

	if (rc)
		fail_msg("open %s: %s", path ? path : "(dram)", rs_errormsg());
	return st;
}
