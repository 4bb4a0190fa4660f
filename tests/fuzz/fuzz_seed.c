/*
 * fuzz_seed.c - writing a harness's seed corpus (see fuzz_seed.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz_seed.h"

static const char *seed_dir;
static unsigned seed_count;

void fuzz_seed_put(const char *name, const void *p, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", seed_dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
	seed_count++;
}

void fuzz_seed_init(void (*make_seeds)(void))
{
	const char *dir = getenv("RS_FUZZ_SEED_DIR");

	if (!dir || !*dir)
		return;
	if (mkdir(dir, 0755) && errno != EEXIST) {
		perror(dir);
		exit(1);
	}
	seed_dir = dir;
	make_seeds();
	printf("wrote %u seeds to %s\n", seed_count, dir);
	exit(0);
}
