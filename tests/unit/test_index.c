/*
 * test_index.c - the PET-hash index: addressing, insert/lookup/remove,
 * filling to >= 90% then RS_E_FULL, delete/reinsert cycles, keys 0 and
 * all-ones, torn-bucket detection on hand-made torn images, recovery
 * repair of a torn bucket, and concurrent server threads.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "index/pet.h"

#define FX_INC 0xfeedf00dULL /* the fixtures' incarnation */

struct fx {
	void *region;
	size_t len;
	struct pet_index *p;
};

static uint64_t rng_state = 0x853c49e6748fea9bULL;

static uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint32_t ref_of(uint64_t key)
{
	return (uint32_t)(key * 0x9E3779B97F4A7C15ULL >> 32) ^ 0x5bd1e995u;
}

static struct fx *fx_new(uint64_t nbuckets)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct pet_geom g = {.nbuckets = nbuckets,
			     .seed1 = 0x1234,
			     .seed2 = 0xabcdef,
			     .bucket_bytes = PET_BUCKET_BYTES,
			     .buckets_off = PET_HEADER_BYTES,
			     .incarnation = FX_INC};

	assert_non_null(f);
	f->len = pet_region_bytes(nbuckets);
	f->region = aligned_alloc(64, f->len);
	assert_non_null(f->region);
	assert_int_equal(pet_format(f->region, f->len, &g, NULL, NULL), 0);
	assert_int_equal(pet_open(&f->p, f->region, f->len, NULL, NULL), 0);
	return f;
}

static void fx_free(struct fx *f)
{
	pet_close(&f->p);
	assert_null(f->p);
	pet_close(&f->p); /* NULL is accepted */
	free(f->region);
	free(f);
}

static uint8_t *bucket_at(struct fx *f, uint64_t b)
{
	return (uint8_t *)f->region +
	       pet_bucket_off(pet_geometry(f->p), b);
}

static void geometry(void **state)
{
	struct pet_geom g;
	struct pet_loc l1, l2;

	assert_int_equal(pet_geom_for(1000, 0.9, 1, 2, &g), 0);
	assert_int_equal(g.nbuckets, 139); /* ceil(1000 / 7.2) */
	assert_int_equal(pet_geom_for(1000, 0.9, 3, 3, &g), RS_E_INVAL);
	assert_int_equal(pet_geom_for(1000, 0, 1, 2, &g), RS_E_INVAL);
	assert_int_equal(pet_geom_for(1, 1, 1, 2, &g), 0);
	assert_int_equal(g.nbuckets, 2);
	assert_int_equal(pet_geom_for(1000, 0.9, 1, 2, &g), 0);
	for (int i = 0; i < 100000; i++) {
		uint64_t k = i < 2 ? (i ? UINT64_MAX : 0) : rnd();

		pet_locate(&g, k, &l1);
		pet_locate(&g, k, &l2);
		assert_true(l1.b[0] == l2.b[0] && l1.b[1] == l2.b[1] &&
			    l1.tag == l2.tag);
		assert_true(l1.b[0] < g.nbuckets && l1.b[1] < g.nbuckets);
		assert_true(l1.b[0] != l1.b[1]);
		assert_true(l1.tag & PET_TAG_USED);
		assert_int_equal(pet_bucket_off(&g, l1.b[0]),
				 PET_HEADER_BYTES +
					 l1.b[0] * PET_BUCKET_BYTES);
	}
}

static void header_roundtrip(void **state)
{
	struct fx *f = fx_new(64);
	struct pet_geom g;
	uint8_t hdr[PET_HEADER_BYTES];

	memcpy(hdr, f->region, sizeof(hdr));
	assert_int_equal(pet_header_parse(hdr, &g), 0);
	assert_memory_equal(&g, pet_geometry(f->p), sizeof(g));
	hdr[17] ^= 1; /* nbuckets */
	assert_int_equal(pet_header_parse(hdr, &g), RS_E_TORN);
	hdr[17] ^= 1;
	hdr[0] ^= 1; /* magic: checksum catches it first */
	assert_int_equal(pet_header_parse(hdr, &g), RS_E_TORN);
	fx_free(f);
}

static void basic_and_special_keys(void **state)
{
	struct fx *f = fx_new(16);
	const uint64_t keys[] = {0, UINT64_MAX, 1, 0x8000000000000000ULL};
	uint32_t ref;

	for (size_t i = 0; i < RS_ARRAY_SIZE(keys); i++)
		assert_int_equal(pet_lookup(f->p, keys[i], &ref),
				 RS_E_NOTFOUND);
	for (size_t i = 0; i < RS_ARRAY_SIZE(keys); i++)
		assert_int_equal(pet_insert(f->p, keys[i], (uint32_t)i), 0);
	for (size_t i = 0; i < RS_ARRAY_SIZE(keys); i++) {
		assert_int_equal(pet_lookup(f->p, keys[i], &ref), 0);
		assert_int_equal(ref, i);
		assert_int_equal(pet_insert(f->p, keys[i], 99), RS_E_EXISTS);
	}
	assert_int_equal(pet_remove(f->p, 0, &ref), 0);
	assert_int_equal(ref, 0);
	assert_int_equal(pet_lookup(f->p, 0, &ref), RS_E_NOTFOUND);
	assert_int_equal(pet_lookup(f->p, UINT64_MAX, &ref), 0);
	assert_int_equal(ref, 1);
	assert_int_equal(pet_remove(f->p, 0, NULL), RS_E_NOTFOUND);
	assert_int_equal(pet_insert(f->p, 0, 7), 0);
	assert_int_equal(pet_lookup(f->p, 0, &ref), 0);
	assert_int_equal(ref, 7);
	assert_int_equal(pet_verify(f->p, NULL), 0);
	fx_free(f);
}

/* Insert random keys until RS_E_FULL; return how many went in. */
static uint64_t fill(struct fx *f, uint64_t *keys, uint64_t max)
{
	uint64_t n = 0;

	while (n < max) {
		uint64_t k = rnd();
		int rc = pet_insert(f->p, k, ref_of(k));

		if (rc == RS_E_FULL)
			break;
		if (rc == RS_E_EXISTS)
			continue;
		assert_int_equal(rc, 0);
		keys[n++] = k;
	}
	return n;
}

static void check_all(struct fx *f, const uint64_t *keys, uint64_t n)
{
	uint32_t ref;

	for (uint64_t i = 0; i < n; i++) {
		assert_int_equal(pet_lookup(f->p, keys[i], &ref), 0);
		assert_int_equal(ref, ref_of(keys[i]));
	}
}

static void fill_until_full(void **state)
{
	const uint64_t nb = 2048, slots = nb * PET_SLOTS;
	struct fx *f = fx_new(nb);
	uint64_t *keys = malloc(slots * sizeof(*keys));
	struct pet_stats st;
	uint64_t n, k, nkeys;
	uint32_t ref;

	n = fill(f, keys, slots);
	pet_get_stats(f->p, &st);
	print_message("filled %llu of %llu slots (%.2f%%), %llu moves\n",
		      (unsigned long long)n, (unsigned long long)slots,
		      100.0 * st.fill, (unsigned long long)st.displacements);
	assert_true(st.fill >= 0.90);
	assert_int_equal(st.used, n);
	assert_true(st.full_refusals >= 1);
	assert_true(st.displacements > 0);
	/* RS_E_FULL changed nothing, and says so again */
	do
		k = rnd();
	while (pet_lookup(f->p, k, &ref) == 0);
	assert_int_equal(pet_insert(f->p, k, 1), RS_E_FULL);
	assert_true(strstr(rs_errormsg(), "full") != NULL);
	assert_int_equal(pet_lookup(f->p, k, &ref), RS_E_NOTFOUND);
	check_all(f, keys, n);
	assert_int_equal(pet_verify(f->p, &nkeys), 0);
	assert_int_equal(nkeys, n);
	/* a delete makes room for exactly that much */
	assert_int_equal(pet_remove(f->p, keys[0], NULL), 0);
	assert_int_equal(pet_insert(f->p, keys[0], ref_of(keys[0])), 0);
	free(keys);
	fx_free(f);
}

static void delete_reinsert_cycles(void **state)
{
	const uint64_t nb = 512, slots = nb * PET_SLOTS;
	struct fx *f = fx_new(nb);
	uint64_t *keys = malloc(slots * sizeof(*keys));
	uint64_t n = fill(f, keys, slots * 92 / 100);
	uint32_t ref;

	assert_int_equal(n, slots * 92 / 100);
	for (int round = 0; round < 50; round++) {
		/* delete a random third, reinsert fresh keys and some old */
		for (uint64_t i = 0; i < n; i++) {
			if (rnd() % 3)
				continue;
			assert_int_equal(pet_remove(f->p, keys[i], &ref), 0);
			assert_int_equal(ref, ref_of(keys[i]));
			assert_int_equal(pet_lookup(f->p, keys[i], &ref),
					 RS_E_NOTFOUND);
			if (rnd() & 1)
				keys[i] = rnd();
			assert_int_equal(pet_insert(f->p, keys[i],
						    ref_of(keys[i])),
					 0);
		}
		check_all(f, keys, n);
	}
	assert_int_equal(pet_verify(f->p, NULL), 0);
	free(keys);
	fx_free(f);
}

static void torn_bucket_detected(void **state)
{
	struct fx *f = fx_new(4);
	uint8_t before[PET_BUCKET_BYTES], after[PET_BUCKET_BYTES];
	uint8_t mix[PET_BUCKET_BYTES];
	struct pet_loc loc;
	uint64_t k = 42, b;
	uint32_t ref;

	pet_locate(pet_geometry(f->p), k, &loc);
	for (uint64_t i = 100; i < 106; i++) /* some other content */
		assert_int_equal(pet_insert(f->p, i, (uint32_t)i), 0);
	assert_int_equal(pet_insert(f->p, k, 1), 0);
	memcpy(before, bucket_at(f, loc.b[0]), sizeof(before));
	b = pet_bucket_find(before, k, loc.tag, &ref) == 0 ? loc.b[0]
							   : loc.b[1];
	memcpy(before, bucket_at(f, b), sizeof(before));
	assert_int_equal(pet_bucket_validate(before, b, FX_INC), 0);
	assert_int_equal(pet_bucket_find(before, k, loc.tag, &ref), 0);
	assert_int_equal(ref, 1);
	assert_int_equal(pet_remove(f->p, k, NULL), 0);
	memcpy(after, bucket_at(f, b), sizeof(after));
	assert_int_equal(pet_bucket_find(after, k, loc.tag, &ref),
			 RS_E_NOTFOUND);
	assert_int_equal(pet_bucket_validate(after, b, FX_INC), 0);
	assert_int_equal(pet_bucket_validate(after, b ^ 1, FX_INC), RS_E_TORN);
	/* another incarnation of the index (a table created again) */
	assert_int_equal(pet_bucket_validate(after, b, FX_INC ^ 1), RS_E_TORN);

	/* every single-bit flip is caught */
	for (size_t i = 0; i < sizeof(after) * 8; i++) {
		memcpy(mix, after, sizeof(mix));
		mix[i / 8] ^= (uint8_t)(1u << (i % 8));
		assert_int_equal(pet_bucket_validate(mix, b, FX_INC), RS_E_TORN);
	}
	/* odd version: a writer was inside */
	memcpy(mix, after, sizeof(mix));
	mix[0] |= 1;
	assert_int_equal(pet_bucket_validate(mix, b, FX_INC), RS_E_TORN);
	/* the NIC returned lines (or 8-byte words) of two versions */
	for (int w = 0; w < PET_BUCKET_WORDS; w++) {
		memcpy(mix, after, sizeof(mix));
		memcpy(mix + 8 * w, before + 8 * w, 8);
		if (memcmp(mix, after, sizeof(mix)))
			assert_int_equal(pet_bucket_validate(mix, b, FX_INC),
					 RS_E_TORN);
	}
	for (int line = 0; line < 2; line++) {
		memcpy(mix, after, sizeof(mix));
		memcpy(mix + 64 * line, before + 64 * line, 64);
		if (memcmp(mix, after, sizeof(mix)))
			assert_int_equal(pet_bucket_validate(mix, b, FX_INC),
					 RS_E_TORN);
	}
	fx_free(f);
}

static uint64_t keep_calls;

static bool keep_if_ref_matches(void *arg, uint64_t key, uint32_t ref)
{
	(void)arg;
	keep_calls++;
	return ref == ref_of(key);
}

static void repair_torn_bucket(void **state)
{
	const uint64_t nb = 64;
	struct fx *f = fx_new(nb);
	uint64_t *keys = malloc(nb * PET_SLOTS * sizeof(*keys));
	uint64_t n = fill(f, keys, nb * PET_SLOTS * 9 / 10), b = 5;
	uint8_t *bk = bucket_at(f, b), old[PET_BUCKET_BYTES];
	struct pet_repair_stats rs;
	uint64_t lost_key = 0;
	uint32_t ref;
	int lost = 0;

	/* crash image: bucket 5's second line is from before a change to
	 * one of its slots (slot 6: key in line 1, ref in line 1) */
	memcpy(old, bk, sizeof(old));
	if (old[16 + 6]) {
		memcpy(&lost_key, old + 8 * (PET_W_KEY0 + 6), 8);
		lost = 1;
	}
	memset(bk + 8 * (PET_W_KEY0 + 6), 0xEE, 8); /* key 6 garbage */
	bk[0] |= 1;				   /* crash mid-write */
	assert_int_equal(pet_bucket_validate(bk, b, FX_INC), RS_E_TORN);
	keep_calls = 0;
	pet_repair(f->p, keep_if_ref_matches, NULL, &rs);
	assert_int_equal(rs.torn_buckets, 1);
	assert_int_equal(rs.dropped, lost);
	assert_int_equal(rs.kept, n - (uint64_t)lost);
	/* the garbage key is misplaced: dropped before keep() is asked */
	assert_int_equal(keep_calls, n - (uint64_t)lost);
	assert_int_equal(pet_verify(f->p, NULL), 0);
	for (uint64_t i = 0; i < n; i++) {
		int rc = pet_lookup(f->p, keys[i], &ref);

		if (lost && keys[i] == lost_key)
			assert_int_equal(rc, RS_E_NOTFOUND);
		else
			assert_int_equal(rc, 0);
	}
	free(keys);
	fx_free(f);
}

struct worker {
	struct fx *f;
	uint64_t base;
	int n;
	int rounds;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint32_t ref;

	for (int r = 0; r < w->rounds; r++) {
		for (int i = 0; i < w->n; i++) {
			uint64_t k = w->base + (uint64_t)i;

			if (pet_insert(w->f->p, k, ref_of(k)))
				return (void *)1;
		}
		for (int i = 0; i < w->n; i++) {
			uint64_t k = w->base + (uint64_t)i;

			if (pet_lookup(w->f->p, k, &ref) || ref != ref_of(k))
				return (void *)2;
		}
		for (int i = 0; i < w->n; i += 2)
			if (pet_remove(w->f->p, w->base + (uint64_t)i, NULL))
				return (void *)3;
		for (int i = 1; i < w->n; i += 2)
			if (pet_lookup(w->f->p, w->base + (uint64_t)i, &ref))
				return (void *)4;
		for (int i = 1; i < w->n; i += 2)
			if (pet_remove(w->f->p, w->base + (uint64_t)i, NULL))
				return (void *)5;
	}
	return NULL;
}

static void concurrent_threads(void **state)
{
	enum { T = 4, N = 1860 };
	const uint64_t nb = 1024; /* 8192 slots: up to 95.7% full */
	struct fx *f = fx_new(nb);
	struct worker w[T];
	pthread_t th[T];
	struct pet_stats st;

	/* a resident population that must survive all the churn */
	for (uint64_t k = 0; k < 400; k++)
		assert_int_equal(pet_insert(f->p, ~k, ref_of(~k)), 0);
	for (int i = 0; i < T; i++) {
		w[i] = (struct worker){f, (uint64_t)i << 40, N, 30};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main,
						&w[i]),
				 0);
	}
	for (int i = 0; i < T; i++) {
		void *ret;

		assert_int_equal(pthread_join(th[i], &ret), 0);
		assert_null(ret);
	}
	for (uint64_t k = 0; k < 400; k++) {
		uint32_t ref;

		assert_int_equal(pet_lookup(f->p, ~k, &ref), 0);
		assert_int_equal(ref, ref_of(~k));
	}
	pet_get_stats(f->p, &st);
	print_message("concurrent: %llu moves, %llu slow inserts, "
		      "%llu lookup re-checks\n",
		      (unsigned long long)st.displacements,
		      (unsigned long long)st.slow_inserts,
		      (unsigned long long)st.lookup_retries);
	assert_int_equal(st.used, 400);
	assert_int_equal(pet_verify(f->p, NULL), 0);
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(geometry),
		cmocka_unit_test(header_roundtrip),
		cmocka_unit_test(basic_and_special_keys),
		cmocka_unit_test(fill_until_full),
		cmocka_unit_test(delete_reinsert_cycles),
		cmocka_unit_test(torn_bucket_detected),
		cmocka_unit_test(repair_torn_bucket),
		cmocka_unit_test(concurrent_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
