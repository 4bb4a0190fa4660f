/*
 * test_pool_hugetlb.c - a DRAM pool on MAP_HUGETLB pages keeps every page
 * it reserved, so a table created or grown where a dropped or grown-out
 * table was never faults on a huge page the system no longer has.
 *
 * A private MAP_HUGETLB mapping reserves its huge pages when it is mapped.
 * Giving an extent's pages back with MADV_DONTNEED frees them, and (on the
 * kernels we run, 6.1) the reservation is not restored: the next touch of
 * that range needs a huge page nobody reserved. A node's connections map
 * their rings and buffers on huge pages too (MAP_POPULATE: they take every
 * unreserved one there is), so on a busy node that touch finds none and
 * the kernel kills the node with SIGBUS. The nemesis found it (a node dead
 * at a grow on 4 nodes: the third grow reused the extent the first freed).
 *
 * The test, in the guest (ci/rxe-vm.sh reserves huge pages; exit 77 where
 * MAP_HUGETLB fails):
 *   1. a 16 MiB DRAM pool on huge pages; table "a" (2 MiB extent) filled;
 *      it grows (a larger extent; the old one is released); "c" is
 *      created and dropped (released too);
 *   2. every unreserved free huge page of the system is taken by another
 *      mapping (MAP_POPULATE), as a node's connections take them, and the
 *      test checks that none is left (HugePages_Free == HugePages_Rsvd):
 *      the condition of the fault really holds;
 *   3. table "b" is created first fit in a released extent (checked: it
 *      overlaps one) and filled, "a" grows again into the other one: no
 *      SIGBUS (a handler reports one as a failure), every row of both
 *      tables reads back exactly.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/rs_internal.h"
#include "value/slab_int.h" /* white-box: the extents of the tables */

#define MiB (1ULL << 20)
#define HUGE (2 * MiB)
#define DIM 16u

static int failures;

#define CHECK(c, ...)                                                       \
	do {                                                                \
		if (!(c)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			failures++;                                         \
		}                                                           \
	} while (0)

static void on_sigbus(int sig)
{
	static const char m[] = "FAIL: SIGBUS: a touch of the pool found no "
				"huge page (a released extent lost its "
				"reservation)\n";

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(2);
	_exit(1);
}

static long meminfo(const char *field)
{
	char line[128];
	size_t n = strlen(field);
	long v = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static uint64_t key_of(const char *t, unsigned i)
{
	return (uint64_t)(unsigned char)t[0] << 40 | (i * 2654435761u + 1);
}

static struct slab_table *make(struct slab_store *st, const char *name,
			       uint64_t cap)
{
	struct slab_table_cfg c = {.name = name, .dim = DIM, .capacity = cap};
	struct slab_table *t = NULL;
	int rc = slab_table_create(st, &c, &t);

	CHECK(rc == 0, "create %s (%llu rows): %d %s", name,
	      (unsigned long long)cap, rc, rs_errormsg());
	return t;
}

static void fill(struct slab_table *t, const char *name, unsigned n)
{
	float v[DIM];

	for (unsigned i = 0; i < n; i++) {
		for (unsigned j = 0; j < DIM; j++)
			v[j] = (float)i + (float)j / 32;
		CHECK(slab_insert(t, key_of(name, i), v, NULL, NULL) == 0,
		      "insert %s[%u]: %s", name, i, rs_errormsg());
	}
}

static void verify(struct slab_table *t, const char *name, unsigned n)
{
	float v[DIM];

	for (unsigned i = 0; i < n; i++) {
		int rc = slab_read(t, key_of(name, i), v, NULL);

		CHECK(rc == 0, "get %s[%u]: %d", name, i, rc);
		for (unsigned j = 0; !rc && j < DIM; j++)
			CHECK(v[j] == (float)i + (float)j / 32,
			      "%s[%u][%u] = %g", name, i, j, (double)v[j]);
	}
}

static bool overlaps(const struct slab_table *t, uint64_t off, uint64_t len)
{
	return t->ent.ext_off < off + len && off < t->ent.ext_off + t->ent.ext_len;
}

int main(void)
{
	struct slab_store_cfg cfg = {.size = 16 * MiB,
				     .flags = SLAB_F_HUGEPAGES};
	struct slab_store *st = NULL;
	struct slab_store_info info;
	struct slab_table *a, *b, *c;
	uint64_t freed_off[2], freed_len[2];
	long nfree, nrsvd, take;
	void *hog = MAP_FAILED;
	int rc;

	signal(SIGBUS, on_sigbus);
	rc = slab_store_open(&st, &cfg);
	if (rc) {
		fprintf(stderr, "FAIL: DRAM pool: %d %s\n", rc, rs_errormsg());
		return 1;
	}
	slab_store_info(st, &info);
	if (!info.hugetlb) {
		printf("pool_hugetlb: MAP_HUGETLB unavailable here "
		       "(HugePages_Free %ld): skipped\n",
		       meminfo("HugePages_Free"));
		slab_store_close(&st);
		return 77;
	}

	/* 1. released extents: a grown-out one and a dropped one */
	a = make(st, "a", 4096);
	if (!a)
		return 1;
	fill(a, "a", 3000);
	freed_off[0] = a->ent.ext_off;
	freed_len[0] = a->ent.ext_len;
	rc = slab_table_grow(st, "a", 8192, 0, &a);
	CHECK(rc == 0, "grow a to 8192: %d %s", rc, rs_errormsg());
	c = make(st, "c", 4096);
	if (!c)
		return 1;
	fill(c, "c", 1000);
	freed_off[1] = c->ent.ext_off;
	freed_len[1] = c->ent.ext_len;
	CHECK(slab_table_drop(st, "c") == 0, "drop c: %s", rs_errormsg());

	/* 2. no unreserved huge page left, as on a node whose connections
	 * took them */
	nfree = meminfo("HugePages_Free");
	nrsvd = meminfo("HugePages_Rsvd");
	take = nfree - nrsvd;
	if (take > 0) {
		hog = mmap(NULL, (size_t)take * HUGE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
			   MAP_POPULATE, -1, 0);
		CHECK(hog != MAP_FAILED, "taking %ld huge pages failed", take);
	}
	printf("pool_hugetlb: huge pages free %ld, reserved %ld: took %ld; "
	       "now free %ld, reserved %ld\n", nfree, nrsvd, take,
	       meminfo("HugePages_Free"), meminfo("HugePages_Rsvd"));
	CHECK(meminfo("HugePages_Free") == meminfo("HugePages_Rsvd"),
	      "unreserved huge pages are left: the test would prove nothing");

	/* 3. a table into a released extent, a growth into the other */
	b = make(st, "b", 4096);
	if (!b)
		return 1;
	CHECK(overlaps(b, freed_off[0], freed_len[0]) ||
	      overlaps(b, freed_off[1], freed_len[1]),
	      "b (extent %llu+%llu) is in no released extent",
	      (unsigned long long)b->ent.ext_off,
	      (unsigned long long)b->ent.ext_len);
	fill(b, "b", 3000);
	rc = slab_table_grow(st, "a", 16384, 0, &a);
	CHECK(rc == 0, "grow a to 16384: %d %s", rc, rs_errormsg());
	verify(a, "a", 3000);
	verify(b, "b", 3000);
	printf("pool_hugetlb: b at %llu, a grown to 16384 rows: %s\n",
	       (unsigned long long)b->ent.ext_off, failures ? "FAILED" : "ok");

	if (hog != MAP_FAILED)
		munmap(hog, (size_t)take * HUGE);
	slab_store_close(&st);
	return failures ? 1 : 0;
}
