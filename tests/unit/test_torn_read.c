/*
 * test_torn_read.c - concurrent stress of the one-sided read validation.
 *
 * Writer threads change rows and buckets through the server API while
 * reader threads copy raw bytes WITHOUT any lock, the way a NIC serves an
 * RDMA READ: in 64-byte chunks (or 8-byte words) in a shuffled order, with
 * small random delays and the odd yield between chunks, then validate the
 * copy with the client code (pet_bucket_validate, pet_bucket_find,
 * pet_confirm_absent, row_validate).
 *
 * Part 1 (rows): writers update rows in place, delete and re-insert keys
 * (so row slots are reused by other keys). Every payload element encodes
 * (key, generation), all elements of one write equal, so an accepted image
 * that mixes two writes, or two keys, is caught. Readers resolve keys
 * through the buckets, or use a cached location as a client would, and
 * must see RS_E_STALE when the slot changed hands.
 * Part 2 (buckets): an index at ~94% fill where writers replace keys all
 * the time, forcing cuckoo moves. In every accepted bucket each slot must
 * be self-consistent (tag, place and ref = f(key)); pinned keys that are
 * never deleted must always be found, using the miss-confirmation rule.
 *
 * Reads are copied with relaxed atomic loads, so the test has no data race
 * in the C11 sense (and runs clean under ASan/UBSan). RS_STRESS_SCALE
 * (default 1) multiplies the number of reads; about 24 million at 1.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "index/pet.h"
#include "index/pet_sync.h"
#include "value/slab_int.h" /* pet handle for pet_verify */

#define DIM 128
#define NKEYS 64
#define CAPACITY 128
#define WRITERS 2
#define READERS 2
#define ROW_READS (3000000ULL)	    /* per reader, part 1 */
#define BUCKET_LOOKUPS (2500000ULL) /* per reader, part 2 (x2+ READs) */

struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t scale(void)
{
	const char *s = getenv("RS_STRESS_SCALE");
	double f = s ? atof(s) : 1.0;

	return f > 0 ? (uint64_t)(f * 1000) : 1000;
}

/*
 * The race both stress tests run: WRITERS threads on writer_arg(i) and
 * READERS threads on reader_arg; once every reader has done its reads,
 * *stop is raised and the writers are joined.
 */
static void race(void *(*writer)(void *), void *(*writer_arg)(void *, int),
		 void *(*reader)(void *), void *ctx, _Atomic int *stop)
{
	pthread_t w[WRITERS], rd[READERS];

	for (int i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, writer,
						writer_arg(ctx, i)), 0);
	for (int i = 0; i < READERS; i++)
		assert_int_equal(pthread_create(&rd[i], NULL, reader, ctx), 0);
	for (int i = 0; i < READERS; i++)
		pthread_join(rd[i], NULL);
	atomic_store(stop, 1);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
}

static void *same_arg(void *ctx, int i)
{
	(void)i;
	return ctx;
}

/* ---- the "NIC": unordered, chunked copy ---- */

static void nic_delay(struct rng *r)
{
	uint64_t x = rnd(r);

	if ((x & 0xFFF) == 0)
		sched_yield(); /* a long gap: whole writes can pass */
	else if ((x & 0x3F) == 0)
		for (unsigned i = (x >> 12) & 0xF; i; i--)
			pet_cpu_relax();
}

static void nic_read(void *dst, const void *src, size_t len, struct rng *r)
{
	const uint64_t *s = src;
	uint64_t *d = dst;
	unsigned order[128], unit, n; /* up to 1 KiB */

	/* half the reads in 64 B chunks, half in single 8 B words */
	unit = (rnd(r) & 1) ? 8 : 1;
	n = (unsigned)(len / 8 / unit);
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	for (unsigned i = n - 1; i > 0; i--) {
		unsigned j = (unsigned)(rnd(r) % (i + 1)), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned c = order[i];

		for (unsigned w = 0; w < unit; w++)
			d[c * unit + w] = pet_ld(&s[c * unit + w]);
		nic_delay(r);
	}
}

/* ---- part 1: rows ---- */

struct rows_ctx {
	struct slab_table *t;
	const uint8_t *base; /* pool base, as a remote address space */
	struct slab_table_geom g;
	_Atomic uint64_t gen;
	_Atomic int stop;
	uint64_t reads_per_reader;
	/* results */
	_Atomic uint64_t row_reads, bucket_reads, accepted, torn_rows,
		torn_buckets, stale, absent, bad;
	_Atomic uint64_t writes, deletes, inserts;
};

static float enc(uint64_t key, uint64_t gen)
{
	return (float)(((key & 0x3FF) << 13) | (gen & 0x1FFF));
}

static void fill(float *v, uint64_t key, uint64_t gen)
{
	for (int i = 0; i < DIM; i++)
		v[i] = enc(key, gen);
}

/* Writers leave most of the (2) cores to the readers: bursts of 16 ops. */
static void writer_pause(void)
{
	struct timespec ts = {0, 20000};

	nanosleep(&ts, NULL);
}

static void *rows_writer(void *arg)
{
	struct rows_ctx *c = arg;
	struct rng r = {(uint64_t)(uintptr_t)&r ^ 0x1234};
	float val[DIM];

	for (uint64_t n = 1;
	     !atomic_load_explicit(&c->stop, memory_order_relaxed); n++) {
		uint64_t k = rnd(&r) % NKEYS, op = rnd(&r) % 100;

		if (n % 16 == 0)
			writer_pause();
		if (op < 80) {
			struct slab_wr w = {.val = val};

			if (slab_write_begin(c->t, k, &w) == 0) {
				fill(val, k, atomic_fetch_add(&c->gen, 1));
				if (slab_write_commit(&w))
					atomic_fetch_add(&c->bad, 1);
				atomic_fetch_add(&c->writes, 1);
			}
		} else if (op < 85) {
			if (slab_delete(c->t, k) == 0)
				atomic_fetch_add(&c->deletes, 1);
		} else {
			fill(val, k, atomic_fetch_add(&c->gen, 1));
			if (slab_insert(c->t, k, val, NULL, NULL) == 0)
				atomic_fetch_add(&c->inserts, 1);
		}
	}
	return NULL;
}

/* READ bucket b until it validates (counting torn copies). */
static void read_bucket(const uint8_t *ibase, const struct pet_geom *g,
			uint64_t b, uint8_t *buf, struct rng *r,
			uint64_t *reads, uint64_t *torn)
{
	for (;;) {
		(*reads)++;
		nic_read(buf, ibase + pet_bucket_off(g, b), PET_BUCKET_BYTES,
			 r);
		if (pet_bucket_validate(buf, b, g->incarnation) == 0)
			return;
		(*torn)++;
	}
}

/* One-sided resolution of key: 0 and *ref, or RS_E_NOTFOUND. */
static int resolve(const uint8_t *ibase, const struct pet_geom *g,
		   uint64_t key, uint32_t *ref, struct rng *r,
		   uint64_t *reads, uint64_t *torn, uint64_t *rechecks)
{
	uint8_t b0[PET_BUCKET_BYTES], b1[PET_BUCKET_BYTES];
	uint64_t v1[2], v2[2];
	struct pet_loc loc;

	pet_locate(g, key, &loc);
	read_bucket(ibase, g, loc.b[0], b0, r, reads, torn);
	read_bucket(ibase, g, loc.b[1], b1, r, reads, torn);
	for (;;) {
		if (pet_bucket_find(b0, key, loc.tag, ref) == 0 ||
		    pet_bucket_find(b1, key, loc.tag, ref) == 0)
			return 0;
		v1[0] = pet_bucket_version(b0);
		v1[1] = pet_bucket_version(b1);
		read_bucket(ibase, g, loc.b[0], b0, r, reads, torn);
		read_bucket(ibase, g, loc.b[1], b1, r, reads, torn);
		v2[0] = pet_bucket_version(b0);
		v2[1] = pet_bucket_version(b1);
		if (pet_confirm_absent(v1, v2))
			return RS_E_NOTFOUND;
		(*rechecks)++;
	}
}

static void *rows_reader(void *arg)
{
	struct rows_ctx *c = arg;
	struct rng r = {(uint64_t)(uintptr_t)&r ^ 0x9876};
	const uint8_t *ibase = c->base + c->g.index_off;
	const uint8_t *rbase = c->base + c->g.rows_off;
	uint32_t cache[NKEYS];
	uint8_t row[1024];
	uint64_t reads = 0, breads = 0, acc = 0, torn = 0, tornb = 0;
	uint64_t stale = 0, absent = 0, bad = 0, rechecks = 0;

	for (int i = 0; i < NKEYS; i++)
		cache[i] = UINT32_MAX;
	while (reads < c->reads_per_reader) {
		uint64_t k = rnd(&r) % NKEYS;
		uint32_t ref = cache[k];
		int rc;

		if (ref == UINT32_MAX || (rnd(&r) & 3) == 0) {
			if (resolve(ibase, &c->g.index, k, &ref, &r, &breads,
				    &tornb, &rechecks)) {
				absent++;
				cache[k] = UINT32_MAX;
				continue;
			}
			if (ref >= CAPACITY) {
				bad++;
				continue;
			}
		}
		for (;;) {
			reads++;
			nic_read(row, rbase + row_off(&c->g.rows, ref),
				 c->g.rows.stride, &r);
			rc = row_validate(row, &c->g.rows, ref, k, NULL);
			if (rc != RS_E_TORN)
				break;
			torn++;
		}
		if (rc == RS_E_STALE) {
			stale++;
			cache[k] = UINT32_MAX;
			continue;
		}
		/* accepted: every element must encode this key, one write */
		{
			float first, x;

			memcpy(&first, row + ROW_HDR_BYTES, 4);
			if (((uint32_t)first >> 13) != (k & 0x3FF))
				bad++;
			for (int i = 1; i < DIM; i++) {
				memcpy(&x, row + ROW_HDR_BYTES + 4 * i, 4);
				if (x != first) {
					bad++;
					break;
				}
			}
		}
		acc++;
		cache[k] = ref;
	}
	atomic_fetch_add(&c->row_reads, reads);
	atomic_fetch_add(&c->bucket_reads, breads);
	atomic_fetch_add(&c->accepted, acc);
	atomic_fetch_add(&c->torn_rows, torn);
	atomic_fetch_add(&c->torn_buckets, tornb);
	atomic_fetch_add(&c->stale, stale);
	atomic_fetch_add(&c->absent, absent);
	atomic_fetch_add(&c->bad, bad);
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void torn_rows(void **state)
{
	struct slab_store_cfg sc = {.size = 64ULL << 20};
	struct slab_table_cfg tc = {.name = "stress", .dim = DIM,
				    .capacity = CAPACITY};
	struct slab_store_info si;
	struct slab_table_stats ts;
	struct slab_store *st;
	struct rows_ctx *c = calloc(1, sizeof(*c));
	float val[DIM];
	double t0;

	assert_int_equal(slab_store_open(&st, &sc), 0);
	assert_int_equal(slab_table_create(st, &tc, &c->t), 0);
	slab_store_info(st, &si);
	c->base = si.base;
	slab_table_geom(c->t, &c->g);
	c->reads_per_reader = ROW_READS * scale() / 1000;
	for (uint64_t k = 0; k < NKEYS; k++) {
		fill(val, k, atomic_fetch_add(&c->gen, 1));
		assert_int_equal(slab_insert(c->t, k, val, NULL, NULL), 0);
	}
	t0 = now();
	race(rows_writer, same_arg, rows_reader, c, &c->stop);
	slab_table_stats(c->t, &ts);
	print_message(
		"rows: %.1f s, %llu row READs + %llu bucket READs; accepted "
		"%llu, torn detected and retried: %llu rows, %llu buckets; "
		"stale %llu, absent %llu; writer ops: %llu updates, %llu "
		"deletes, %llu inserts\n",
		now() - t0, (unsigned long long)c->row_reads,
		(unsigned long long)c->bucket_reads,
		(unsigned long long)c->accepted,
		(unsigned long long)c->torn_rows,
		(unsigned long long)c->torn_buckets,
		(unsigned long long)c->stale, (unsigned long long)c->absent,
		(unsigned long long)c->writes, (unsigned long long)c->deletes,
		(unsigned long long)c->inserts);
	assert_int_equal(c->bad, 0);
	assert_true(c->torn_rows > 0);	/* the race did happen */
	assert_true(c->stale > 0);	/* slot reuse was seen */
	assert_int_equal(pet_verify(c->t->pet, NULL), 0);
	assert_int_equal(ts.live + ts.free_rows, ts.hwm);
	slab_store_close(&st);
	free(c);
}

/* ---- part 2: buckets under cuckoo churn ---- */

#define NB 1024
#define PINNED 2000
#define CHURN 5700 /* (PINNED + CHURN) / (NB * 8) = 94% */

struct idx_writer {
	struct idx_ctx *c;
	int id;
};

struct idx_ctx {
	struct idx_writer w[WRITERS]; /* the writers' arguments */
	void *region;
	struct pet_index *p;
	const struct pet_geom *g;
	uint64_t churn[CHURN];
	_Atomic int stop;
	uint64_t lookups_per_reader;
	_Atomic uint64_t reads, torn, rechecks, bad, missed, replaced, full;
	_Atomic uint64_t accepted_buckets;
};

static uint32_t ref_of(uint64_t key)
{
	return (uint32_t)(key * 0x9E3779B97F4A7C15ULL >> 32);
}

static void *idx_writer_arg(void *ctx, int i)
{
	struct idx_ctx *c = ctx;

	c->w[i] = (struct idx_writer){c, i};
	return &c->w[i];
}

static void *idx_writer(void *arg)
{
	struct idx_writer *iw = arg;
	struct idx_ctx *c = iw->c;
	struct rng r = {0x5555ULL * (uint64_t)(iw->id + 1)};

	for (uint64_t n = 1;
	     !atomic_load_explicit(&c->stop, memory_order_relaxed); n++) {
		uint64_t i = rnd(&r) % (CHURN / WRITERS) * WRITERS +
			     (uint64_t)iw->id;
		uint64_t k = rnd(&r) | 1; /* pinned keys are even */

		if (n % 16 == 0)
			writer_pause();
		if (c->churn[i] && pet_remove(c->p, c->churn[i], NULL))
			atomic_fetch_add(&c->bad, 1);
		c->churn[i] = 0;
		if (pet_insert(c->p, k, ref_of(k)) == 0)
			c->churn[i] = k;
		else
			atomic_fetch_add(&c->full, 1);
		atomic_fetch_add_explicit(&c->replaced, 1,
					  memory_order_relaxed);
	}
	return NULL;
}

/* Every occupied slot of an accepted bucket must be self-consistent. */
static int bucket_consistent(const struct pet_geom *g, const uint8_t *bk,
			     uint64_t b)
{
	for (unsigned s = 0; s < PET_SLOTS; s++) {
		uint64_t key;
		uint32_t ref;
		struct pet_loc l;

		if (!bk[16 + s])
			continue;
		memcpy(&key, bk + 8 * (PET_W_KEY0 + s), 8);
		memcpy(&ref, bk + 8 * PET_W_REF0 + 4 * s, 4);
		pet_locate(g, key, &l);
		if (bk[16 + s] != l.tag || (b != l.b[0] && b != l.b[1]) ||
		    ref != ref_of(key))
			return 0;
	}
	return 1;
}

static void *idx_reader(void *arg)
{
	struct idx_ctx *c = arg;
	struct rng r = {(uint64_t)(uintptr_t)&r};
	const uint8_t *ibase = c->region;
	uint64_t reads = 0, torn = 0, rechecks = 0, bad = 0, missed = 0;
	uint64_t acc = 0;

	for (uint64_t n = 0; n < c->lookups_per_reader; n++) {
		uint64_t key = (rnd(&r) % PINNED) * 2; /* a pinned key */
		uint8_t bk[2][PET_BUCKET_BYTES];
		struct pet_loc loc;
		uint64_t v1[2] = {0, 0};
		uint32_t ref;
		int found = 0;

		pet_locate(c->g, key, &loc);
		for (int round = 0; !found; round++) {
			uint64_t v2[2];

			/* the two READs complete in either order, sometimes
			 * far apart */
			int first = (int)(rnd(&r) & 1);

			for (int j = 0; j < 2; j++) {
				int i = j ^ first;

				if (j == 1 && (rnd(&r) & 255) == 0)
					writer_pause(); /* moves go by */
				read_bucket(ibase, c->g, loc.b[i],
					    bk[i], &r, &reads, &torn);
				acc++;
				if (!bucket_consistent(c->g, bk[i], loc.b[i]))
					bad++;
				v2[i] = pet_bucket_version(bk[i]);
				if (pet_bucket_find(bk[i], key, loc.tag,
						    &ref) == 0) {
					found = 1;
					if (ref != ref_of(key))
						bad++;
				}
			}
			if (found)
				break;
			if (round > 0 && pet_confirm_absent(v1, v2)) {
				missed++; /* a pinned key "proven" absent */
				break;
			}
			/* a reader without rule 3 would have said absent */
			rechecks++;
			v1[0] = v2[0];
			v1[1] = v2[1];
		}
	}
	atomic_fetch_add(&c->reads, reads);
	atomic_fetch_add(&c->torn, torn);
	atomic_fetch_add(&c->rechecks, rechecks);
	atomic_fetch_add(&c->bad, bad);
	atomic_fetch_add(&c->missed, missed);
	atomic_fetch_add(&c->accepted_buckets, acc);
	return NULL;
}

static void torn_buckets(void **state)
{
	struct idx_ctx *c = calloc(1, sizeof(*c));
	struct pet_geom g = {.nbuckets = NB, .seed1 = 11, .seed2 = 22,
			     .bucket_bytes = PET_BUCKET_BYTES,
			     .buckets_off = PET_HEADER_BYTES,
			     .incarnation = 0x7ab1e};
	size_t len = pet_region_bytes(NB);
	struct pet_stats ps;
	struct rng r = {42};
	double t0;

	c->region = aligned_alloc(64, len);
	assert_int_equal(pet_format(c->region, len, &g, NULL, NULL), 0);
	assert_int_equal(pet_open(&c->p, c->region, len, NULL, NULL), 0);
	c->g = pet_geometry(c->p);
	c->lookups_per_reader = BUCKET_LOOKUPS * scale() / 1000;
	for (uint64_t k = 0; k < PINNED; k++)
		assert_int_equal(pet_insert(c->p, 2 * k, ref_of(2 * k)), 0);
	for (int i = 0; i < CHURN; i++) {
		uint64_t k = rnd(&r) | 1;

		assert_int_equal(pet_insert(c->p, k, ref_of(k)), 0);
		c->churn[i] = k;
	}
	pet_get_stats(c->p, &ps);
	print_message("index at %.1f%% fill\n", 100 * ps.fill);
	t0 = now();
	race(idx_writer, idx_writer_arg, idx_reader, c, &c->stop);
	pet_get_stats(c->p, &ps);
	print_message(
		"buckets: %.1f s, %llu bucket READs, %llu accepted; torn "
		"detected and retried %llu; misses re-checked (rule 3) %llu; "
		"%llu keys "
		"replaced (%llu refused full), %llu cuckoo moves\n",
		now() - t0, (unsigned long long)c->reads,
		(unsigned long long)c->accepted_buckets,
		(unsigned long long)c->torn,
		(unsigned long long)c->rechecks,
		(unsigned long long)c->replaced, (unsigned long long)c->full,
		(unsigned long long)ps.displacements);
	assert_int_equal(c->bad, 0);
	assert_int_equal(c->missed, 0);
	assert_true(c->torn > 0);
	assert_true(ps.displacements > 0);
	assert_int_equal(pet_verify(c->p, NULL), 0);
	pet_close(&c->p);
	free(c->region);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(torn_rows),
		cmocka_unit_test(torn_buckets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
