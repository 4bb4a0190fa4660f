/*
 * test_pool_catalog.c - the pool's catalog records (a table's spec kept
 * inside the pool, slab_table_cfg.catalog) and the formatting rules of an
 * existing file or device (blank: formatted; anything else: refused
 * unless SLAB_F_FORMAT), on file pools:
 *   - round trip across a reopen, layout 3;
 *   - a torn or corrupt record is not returned (the table shows none);
 *   - crash order: a record written for a create whose directory entry
 *     never made it (a crash between the two) is ignored, and the slot's
 *     next table does not inherit it; a drop retires the record;
 *   - records are written once: set_catalog refuses to replace one;
 *   - a layout-2 pool (no records) opens, its tables have none, and a
 *     record can be added (the migration of its JSON catalog file);
 *   - a blank file is formatted, a non-blank one without a pool refused,
 *     formatted with SLAB_F_FORMAT, and a valid pool is never reformatted.
 * Files go to $TMPDIR (default /tmp).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/rs_internal.h"
#include "value/slab_int.h"
#include "pool.h"

#define MiB (1ULL << 20)

POOL_PATH_FIXTURES("pcat")

static struct slab_table *mktable(struct slab_store *st, const char *name,
				  const char *rec)
{
	struct slab_table_cfg tc = {.name = name, .dim = 8, .capacity = 100,
				    .state_floats = 8, .catalog = rec,
				    .catalog_len = rec ? (uint32_t)strlen(rec)
						       : 0};
	struct slab_table *t = NULL;

	assert_int_equal(slab_table_create(st, &tc, &t), 0);
	return t;
}

/* The record of t as a string; NULL if it has none. */
static const char *rec_of(struct slab_store *st, const char *name)
{
	static char buf[SLAB_CATALOG_MAX + 1];
	struct slab_table *t = slab_table_get(st, name);
	int len;

	assert_non_null(t);
	len = slab_table_catalog(st, t, buf, SLAB_CATALOG_MAX);
	if (len == RS_E_NOTFOUND)
		return NULL;
	assert_true(len >= 0);
	buf[len] = '\0';
	return buf;
}

static void round_trip(void **state)
{
	char big[SLAB_CATALOG_MAX + 1], small[4];
	struct slab_store_info si;
	struct slab_store *st =
		tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	struct slab_table_cfg tc = {.name = "x", .dim = 8, .capacity = 10};

	(void)state;
	mktable(st, "a", "{\"spec\": 1}");
	memset(big, 'b', SLAB_CATALOG_MAX);
	big[SLAB_CATALOG_MAX] = '\0';
	mktable(st, "b", big);
	mktable(st, "c", NULL);
	/* too long a record: refused before anything is written */
	tc.catalog = big;
	tc.catalog_len = SLAB_CATALOG_MAX + 1;
	assert_int_equal(slab_table_create(st, &tc, NULL), RS_E_INVAL);
	assert_null(slab_table_get(st, "x"));
	assert_int_equal(slab_table_catalog(st, slab_table_get(st, "a"),
					    small, sizeof(small)),
			 RS_E_INVAL);
	slab_store_close(&st);

	st = tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	slab_store_info(st, &si);
	assert_int_equal(si.layout, 3);
	assert_false(si.device);
	assert_string_equal(rec_of(st, "a"), "{\"spec\": 1}");
	assert_string_equal(rec_of(st, "b"), big);
	assert_null(rec_of(st, "c"));
	slab_store_close(&st);
}

static void torn_record_ignored(void **state)
{
	struct slab_store *st =
		tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	struct slab_table *t = mktable(st, "a", "{\"spec\": 2}");
	struct slab_catrec *r = (struct slab_catrec *)(st->cat +
		(uint64_t)slab_table_id(t) * SLAB_CAT_BYTES);

	(void)state;
	mktable(st, "b", "{\"spec\": 3}");
	r->data[3] ^= 0x20; /* a torn byte in the payload */
	slab_store_close(&st);
	st = tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	assert_null(rec_of(st, "a"));
	assert_string_equal(rec_of(st, "b"), "{\"spec\": 3}");
	/* a length beyond the record: not read past it */
	t = slab_table_get(st, "b");
	r = (struct slab_catrec *)(st->cat +
				   (uint64_t)slab_table_id(t) * SLAB_CAT_BYTES);
	r->len = SLAB_CATALOG_MAX + 1;
	assert_null(rec_of(st, "b"));
	slab_store_close(&st);
}

static void crash_order(void **state)
{
	struct slab_store *st =
		tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	struct slab_catrec *r;
	struct slab_table *t;
	unsigned id;

	(void)state;
	/* a create that crashed after its record, before its directory
	 * entry: the record, written for a uid no live entry has */
	t = mktable(st, "gone", "{\"spec\": 4}");
	id = slab_table_id(t);
	r = (struct slab_catrec *)(st->cat + (uint64_t)id * SLAB_CAT_BYTES);
	memset(&st->dir[id], 0, sizeof(st->dir[id]));
	slab_store_close(&st);
	st = tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	assert_null(slab_table_get(st, "gone"));
	/* the slot's next table, created without a record, must not show
	 * the stale one (a record of the same bytes but another uid) */
	t = mktable(st, "next", NULL);
	assert_int_equal(slab_table_id(t), id);
	r = (struct slab_catrec *)(st->cat + (uint64_t)id * SLAB_CAT_BYTES);
	assert_true(r->checksum != 0);
	assert_null(rec_of(st, "next"));
	/* a drop retires the record; the same name comes back without it */
	assert_int_equal(slab_table_drop(st, "next"), 0);
	t = mktable(st, "keep", "{\"spec\": 5}");
	assert_int_equal(slab_table_id(t), id);
	assert_int_equal(slab_table_drop(st, "keep"), 0);
	assert_true(r->checksum == 0);
	mktable(st, "keep", NULL);
	assert_null(rec_of(st, "keep"));
	slab_store_close(&st);
}

static void written_once(void **state)
{
	struct slab_store *st =
		tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	struct slab_table *a = mktable(st, "a", "{\"spec\": 6}");
	struct slab_table *b = mktable(st, "b", NULL);

	(void)state;
	assert_int_equal(slab_table_set_catalog(st, a, "new", 3),
			 RS_E_EXISTS);
	assert_int_equal(slab_table_set_catalog(st, b, "x", SLAB_CATALOG_MAX
						+ 1),
			 RS_E_INVAL);
	assert_int_equal(slab_table_set_catalog(st, b, "{\"spec\": 7}", 11),
			 0);
	slab_store_close(&st);
	st = tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	assert_string_equal(rec_of(st, "a"), "{\"spec\": 6}");
	assert_string_equal(rec_of(st, "b"), "{\"spec\": 7}");
	slab_store_close(&st);
}

/* Rewrite the superblock as an earlier version wrote it. */
static void make_layout2(struct slab_store *st)
{
	st->sb->layout_version = 2;
	st->sb->checksum = XXH3_64bits(st->sb,
				       offsetof(struct slab_super, checksum));
}

static void layout2_opens_and_migrates(void **state)
{
	struct slab_store_info si;
	struct slab_store *st =
		tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);

	(void)state;
	mktable(st, "old", NULL);
	make_layout2(st);
	slab_store_close(&st);
	st = tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	slab_store_info(st, &si);
	assert_int_equal(si.layout, 2);
	assert_null(rec_of(st, "old"));
	assert_int_equal(slab_table_set_catalog(st, slab_table_get(st, "old"),
						"{\"spec\": 8}", 11),
			 0);
	slab_store_close(&st);
	st = tl_pool_open(pool_path, 16 * MiB, SLAB_F_SPARSE);
	slab_store_info(st, &si);
	assert_int_equal(si.layout, 2); /* the superblock is not rewritten */
	assert_string_equal(rec_of(st, "old"), "{\"spec\": 8}");
	/* a layout from the future is refused */
	st->sb->layout_version = 9;
	st->sb->checksum = XXH3_64bits(st->sb,
				       offsetof(struct slab_super, checksum));
	slab_store_close(&st);
	{
		struct slab_store_cfg cfg = {.path = pool_path};

		assert_int_equal(slab_store_open(&st, &cfg), RS_E_CORRUPT);
		assert_non_null(strstr(rs_errormsg(), "layout 9"));
	}
	unlink(pool_path);
}

static void write_at(off_t off, const char *s)
{
	int fd = open(pool_path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, s, strlen(s), off), (ssize_t)strlen(s));
	close(fd);
}

static void blank_formatted_other_refused(void **state)
{
	struct slab_store_cfg cfg = {.path = pool_path};
	struct slab_store *st = NULL;
	int fd;

	(void)state;
	/* blank: formatted at its own size */
	fd = open(pool_path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 8 * MiB), 0);
	close(fd);
	assert_int_equal(slab_store_open(&st, &cfg), 0);
	mktable(st, "t", "{\"spec\": 9}");
	slab_store_close(&st);
	/* a valid pool is never reformatted, even when asked */
	cfg.flags = SLAB_F_FORMAT;
	assert_int_equal(slab_store_open(&st, &cfg), 0);
	assert_string_equal(rec_of(st, "t"), "{\"spec\": 9}");
	slab_store_close(&st);
	cfg.flags = 0;
	/* something else (a superblock overwritten by a file system, say):
	 * refused, left alone */
	write_at(0, "not a pool");
	assert_int_equal(slab_store_open(&st, &cfg), RS_E_CORRUPT);
	assert_non_null(strstr(rs_errormsg(), "refusing to format"));
	assert_int_equal(slab_store_open(&st, &cfg), RS_E_CORRUPT);
	/* a byte anywhere in the first 2 MiB counts */
	fd = open(pool_path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 8 * MiB), 0);
	close(fd);
	write_at((off_t)(2 * MiB - 1), "x");
	assert_int_equal(slab_store_open(&st, &cfg), RS_E_CORRUPT);
	/* asked to: formatted */
	cfg.flags = SLAB_F_FORMAT;
	assert_int_equal(slab_store_open(&st, &cfg), 0);
	assert_null(slab_table_get(st, "t"));
	mktable(st, "u", NULL);
	slab_store_close(&st);
	cfg.flags = 0;
	assert_int_equal(slab_store_open(&st, &cfg), 0);
	assert_non_null(slab_table_get(st, "u"));
	slab_store_close(&st);
	unlink(pool_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(round_trip, setup_path,
						teardown_path),
		cmocka_unit_test_setup_teardown(torn_record_ignored, setup_path,
						teardown_path),
		cmocka_unit_test_setup_teardown(crash_order, setup_path,
						teardown_path),
		cmocka_unit_test_setup_teardown(written_once, setup_path,
						teardown_path),
		cmocka_unit_test_setup_teardown(layout2_opens_and_migrates,
						setup_path, teardown_path),
		cmocka_unit_test_setup_teardown(blank_formatted_other_refused,
						setup_path, teardown_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
