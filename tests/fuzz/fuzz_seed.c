/*
 * fuzz_seed.c - writing a harness's seed corpus (see fuzz_seed.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void fuzz_seed_put_text(const char *stem, size_t i, const void *head,
			size_t nhead, const char *text)
{
	size_t n = strlen(text);
	char name[64], *buf = malloc(nhead + n);

	if (!buf) {
		perror("fuzz_seed_put_text");
		exit(1);
	}
	memcpy(buf, head, nhead);
	memcpy(buf + nhead, text, n);
	snprintf(name, sizeof(name), "%s-%zu", stem, i);
	fuzz_seed_put(name, buf, nhead + n);
	free(buf);
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
