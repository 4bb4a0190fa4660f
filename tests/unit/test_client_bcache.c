/*
 * test_client_bcache.c - the bucket-image cache (src/client/bcache.c):
 * a key is found only in the image of its own (view, geometry, bucket),
 * a replaced image answers for its new contents, the cache holds no more
 * than its capacity (CLOCK keeps a used image over an unused one), a
 * dropped image is gone, a disabled cache answers "no image", and
 * concurrent puts, finds and drops never mix two images.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "client/bcache.h"

#define TAG(key) ((uint8_t)(PET_TAG_USED | ((key) & 0x7f)))

/* A bucket image holding keys base .. base + n - 1, slot i -> ref
 * base * 10 + i (the checksum is not the cache's business). */
static void bucket(struct pet_bucket *bk, uint64_t base, unsigned n)
{
	memset(bk, 0, sizeof(*bk));
	bk->version = 2;
	for (unsigned i = 0; i < n && i < PET_SLOTS; i++) {
		bk->tag[i] = TAG(base + i);
		bk->key[i] = base + i;
		bk->ref[i] = (uint32_t)(base * 10 + i);
	}
}

static void find_put_drop(void **state)
{
	struct cli_bcache *c;
	struct pet_bucket bk;
	uint32_t ref = 0;

	(void)state;
	assert_int_equal(cli_bcache_new(&c, 1 << 20), 0);
	assert_non_null(c);
	assert_int_equal(cli_bcache_find(c, 1, 9, 5, 100, TAG(100), &ref), -1);
	bucket(&bk, 100, 4);
	cli_bcache_put(c, 1, 9, 5, &bk);
	assert_int_equal(cli_bcache_find(c, 1, 9, 5, 102, TAG(102), &ref), 1);
	assert_int_equal(ref, 1002);
	/* the image is there, the key is not (no verdict on absence) */
	assert_int_equal(cli_bcache_find(c, 1, 9, 5, 104, TAG(104), &ref), 0);
	/* another view, geometry or bucket: no image */
	assert_int_equal(cli_bcache_find(c, 2, 9, 5, 102, TAG(102), &ref), -1);
	assert_int_equal(cli_bcache_find(c, 1, 8, 5, 102, TAG(102), &ref), -1);
	assert_int_equal(cli_bcache_find(c, 1, 9, 6, 102, TAG(102), &ref), -1);
	/* a newer image replaces the old one */
	bucket(&bk, 200, 2);
	cli_bcache_put(c, 1, 9, 5, &bk);
	assert_int_equal(cli_bcache_find(c, 1, 9, 5, 102, TAG(102), &ref), 0);
	assert_int_equal(cli_bcache_find(c, 1, 9, 5, 201, TAG(201), &ref), 1);
	assert_int_equal(ref, 2001);
	cli_bcache_drop(c, 1, 9, 5);
	assert_int_equal(cli_bcache_find(c, 1, 9, 5, 201, TAG(201), &ref), -1);
	cli_bcache_delete(&c);
	assert_null(c);
}

static void bounded_and_clock(void **state)
{
	struct cli_bcache_stats st;
	struct cli_bcache *c;
	struct pet_bucket bk;
	size_t cap, held = 0;
	uint32_t ref;

	(void)state;
	assert_int_equal(cli_bcache_new(&c, 64 << 10), 0);
	cap = cli_bcache_capacity(c);
	assert_true(cap >= 256 && cap <= 512);	/* 64 KiB of ~150 B ways */
	/* bucket 0 is used between every put: CLOCK keeps it */
	bucket(&bk, 0, 1);
	cli_bcache_put(c, 1, 1, 0, &bk);
	for (uint64_t b = 1; b <= 4 * cap; b++) {
		bucket(&bk, b * 8, 1);
		cli_bcache_put(c, 1, 1, b, &bk);
		assert_int_equal(cli_bcache_find(c, 1, 1, 0, 0, TAG(0), &ref),
				 1);
	}
	for (uint64_t b = 0; b <= 4 * cap; b++)
		held += cli_bcache_find(c, 1, 1, b, b * 8, TAG(b * 8), &ref) == 1;
	assert_true(held <= cap);
	assert_true(held >= cap / 2);
	cli_bcache_get_stats(c, &st);
	assert_int_equal(st.capacity, cap);
	assert_int_equal(st.fills, 4 * cap + 1);
	assert_true(st.evictions >= 3 * cap);
	cli_bcache_delete(&c);
}

static void disabled(void **state)
{
	struct cli_bcache *c = (void *)1;
	struct pet_bucket bk;
	uint32_t ref;

	(void)state;
	assert_int_equal(cli_bcache_new(&c, 0), 0);
	assert_null(c);
	bucket(&bk, 1, 1);
	cli_bcache_put(NULL, 1, 1, 1, &bk);
	cli_bcache_drop(NULL, 1, 1, 1);
	assert_int_equal(cli_bcache_find(NULL, 1, 1, 1, 1, TAG(1), &ref), -1);
	assert_int_equal(cli_bcache_capacity(NULL), 0);
	assert_int_not_equal(cli_bcache_new(&c, (size_t)65 << 30), 0);
	assert_null(c);
}

struct worker {
	struct cli_bcache *c;
	unsigned id;
	size_t bad, found;
};

/* Bucket b always holds keys b * 8 .. b * 8 + 7 (refs from bucket()): a
 * find that returns another ref saw two images mixed. */
static void *hammer(void *arg)
{
	struct worker *w = arg;
	uint64_t x = w->id * 7919 + 1;
	struct pet_bucket bk;

	for (int i = 0; i < 100000; i++) {
		uint64_t b, key;
		uint32_t ref;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b = x % 3000;
		key = b * 8 + (x >> 32) % 8;
		switch (i % 4) {
		case 0:
			bucket(&bk, b * 8, 8);
			cli_bcache_put(w->c, 7, 3, b, &bk);
			break;
		case 3:
			cli_bcache_drop(w->c, 7, 3, b);
			break;
		default:
			if (cli_bcache_find(w->c, 7, 3, b, key, TAG(key),
					    &ref) == 1) {
				w->found++;
				w->bad += ref != b * 80 + key % 8;
			}
		}
	}
	return NULL;
}

static void threads(void **state)
{
	struct worker w[4];
	pthread_t t[4];
	struct cli_bcache *c;
	size_t found = 0;

	(void)state;
	assert_int_equal(cli_bcache_new(&c, 256 << 10), 0);
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct worker){ .c = c, .id = i };
		assert_int_equal(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(w[i].bad, 0);
		found += w[i].found;
	}
	assert_true(found > 0); /* the finds really met images */
	cli_bcache_delete(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(find_put_drop),
		cmocka_unit_test(bounded_and_clock),
		cmocka_unit_test(disabled),
		cmocka_unit_test(threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
