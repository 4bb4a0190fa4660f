/*
 * test_grow.c - tables that grow (src/value/slab_grow.c; docs/storage.md,
 * "Growth"): after a growth every live key is in the same row slot with
 * its payload, version and optimizer state bit for bit, deleted keys stay
 * absent, the index verifies, the change tracking carries over; readers of
 * the old incarnation reject the new extent, and the old extent once it is
 * retired; a growth that does not fit is refused with RS_E_FULL and the
 * table is untouched; in a file pool a process that dies at any cut point
 * of a growth (and under SIGKILL at random moments) leaves exactly the old
 * or the new table with every row. Files go to $TMPDIR (default /tmp).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "index/pet_format.h"
#include "value/optimizer.h"
#include "pool.h"
#include "value/slab_int.h" /* white-box: handles, regions */

#define MiB (1ULL << 20)
#define FILE_FLAGS (SLAB_F_SPARSE | SLAB_F_NOSYNC)
#define DIM 8
#define NKEYS 900u
#define CAP0 1000u

POOL_PATH_FIXTURES("grow")

static struct slab_table_cfg cfg_of(uint64_t cap)
{
	struct slab_table_cfg c = {
		.name = "g", .dim = DIM, .capacity = cap,
		.state_floats = (uint32_t)optim_state_floats(OPTIM_ADAM, DIM),
	};

	return c;
}

static uint64_t key_of(unsigned i)
{
	return i * 0x9E3779B97F4A7C15ULL + 7;
}

static bool deleted(unsigned i)
{
	return i % 9 == 4;
}

/* NKEYS keys with payload and state derived from the key; every 9th
 * deleted again; a few updated (versions move on). */
static void fill(struct slab_table *t)
{
	float v[DIM], s[64];
	uint32_t sf = slab_table_state_floats(t);

	for (unsigned i = 0; i < NKEYS; i++) {
		for (unsigned j = 0; j < DIM; j++)
			v[j] = (float)i + (float)j / 16;
		for (unsigned j = 0; j < sf; j++)
			s[j] = (float)i * 3 + (float)j;
		assert_int_equal(slab_insert(t, key_of(i), v, s, NULL), 0);
	}
	for (unsigned i = 0; i < NKEYS; i++)
		if (deleted(i))
			assert_int_equal(slab_delete(t, key_of(i)), 0);
	for (unsigned i = 0; i < NKEYS; i += 7) {
		struct slab_wr w;
		float val[DIM], st[64];

		if (deleted(i))
			continue;
		w.val = val;
		w.state = st;
		assert_int_equal(slab_write_begin(t, key_of(i), &w), 0);
		val[0] += 1000;
		st[0] -= 5;
		assert_int_equal(slab_write_commit(&w), 0);
	}
}

/* What a key looks like: slot, row image without the checksum, state. */
struct snap {
	uint32_t row;
	uint8_t img[256];
	float state[64];
};

static void snap_of(struct slab_table *t, unsigned i, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	assert_int_equal(slab_lookup(t, key_of(i), &s->row), 0);
	slab_read_row(t, s->row, s->img);
	memset(s->img + 8, 0, 8); /* the checksum: seeded by the uid */
	assert_int_equal(slab_read_state(t, key_of(i), s->state), 0);
}

/* Every key of fill() as it was in before[] (NULL: as fill() left it),
 * and `extra` other keys. */
static void check_rows(struct slab_table *t, const struct snap *before,
		       uint64_t extra)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < NKEYS; i++) {
		struct snap s;
		uint32_t r;

		if (deleted(i)) {
			assert_int_equal(slab_lookup(t, key_of(i), &r),
					 RS_E_NOTFOUND);
			continue;
		}
		snap_of(t, i, &s);
		if (before)
			assert_memory_equal(&s, &before[i], sizeof(s));
		n++;
	}
	n += extra;
	assert_int_equal(slab_table_live(t), n);
	assert_int_equal(pet_verify(t->pet, &n), 0);
	assert_int_equal(n, slab_table_live(t));
}

static int collect(void *arg, uint64_t key, uint32_t row)
{
	uint64_t *sum = arg;

	(void)row;
	sum[0]++;
	sum[1] ^= key;
	return 0;
}

static void grow_keeps_rows_and_rejects_old(void **state)
{
	struct slab_store *st = tl_pool_open(NULL, 64 * MiB, 0);
	struct slab_table_cfg c = cfg_of(CAP0);
	struct slab_table *t, *nt;
	struct slab_table_geom og, ng;
	struct slab_store_info si0, si1;
	static struct snap before[NKEYS];
	uint8_t tag[SLAB_TRACK_TAG_BYTES] = { 1, 2, 3 };
	uint64_t ch0[2] = { 0, 0 }, ch1[2] = { 0, 0 }, old_ext;
	uint8_t *old_rows;
	uint32_t r;

	(void)state;
	assert_int_equal(slab_table_create(st, &c, &t), 0);
	fill(t);
	slab_track_reset(t, tag);
	{ /* changes after the checkpoint tag: two updates, one delete */
		float v[DIM] = { 5 };

		assert_int_equal(slab_put(t, key_of(1), v, NULL), 0);
		assert_int_equal(slab_put(t, key_of(2), v, NULL), 0);
	}
	slab_track_changed(t, collect, ch0);
	assert_int_equal(ch0[0], 2);
	for (unsigned i = 0; i < NKEYS; i++)
		if (!deleted(i))
			snap_of(t, i, &before[i]);
	slab_table_geom(t, &og);
	slab_store_info(st, &si0);
	old_ext = t->ent.ext_len;
	old_rows = t->rows;

	/* not larger: refused */
	assert_int_equal(slab_grow_begin(st, t, CAP0, 0, &nt), RS_E_INVAL);
	assert_int_equal(slab_grow_begin(st, t, 4 * CAP0, 0, &nt), 0);
	/* not visible yet; the old table serves reads meanwhile */
	assert_ptr_equal(slab_table_get(st, "g"), t);
	check_rows(t, before, 0);
	assert_int_equal(slab_grow_commit(st, t, nt), 0);
	assert_ptr_equal(slab_table_get(st, "g"), nt);
	assert_int_equal(slab_table_capacity(nt), 4 * CAP0);
	slab_table_geom(nt, &ng);
	assert_true(ng.uid != og.uid);
	assert_true(ng.index.nbuckets > og.index.nbuckets);
	check_rows(nt, before, 0);

	/* the new extent's rows with the old incarnation: torn, always */
	for (unsigned i = 0; i < NKEYS; i++) {
		if (deleted(i))
			continue;
		assert_int_equal(slab_lookup(nt, key_of(i), &r), 0);
		assert_int_equal(row_validate(nt->rows + row_off(&og.rows, r),
					      &og.rows, r, key_of(i), NULL),
				 RS_E_TORN);
		/* and the new one accepts them */
		assert_int_equal(row_validate(nt->rows + row_off(&ng.rows, r),
					      &ng.rows, r, key_of(i), NULL),
				 0);
		/* the old extent still holds them until retired */
		assert_int_equal(row_validate(old_rows + row_off(&og.rows, r),
					      &og.rows, r, key_of(i), NULL),
				 0);
	}
	/* change tracking carried over: same tag, same changed keys */
	assert_int_equal(slab_track_check(nt, tag), 0);
	slab_track_changed(nt, collect, ch1);
	assert_memory_equal(ch0, ch1, sizeof(ch0));

	/* retire: every old bucket and row fails validation */
	slab_table_retire(t);
	for (unsigned i = 0; i < NKEYS; i++) {
		struct pet_loc loc;

		r = before[i].row;
		if (deleted(i))
			continue;
		assert_int_equal(row_validate(old_rows + row_off(&og.rows, r),
					      &og.rows, r, key_of(i), NULL),
				 RS_E_TORN);
		pet_locate(&og.index, key_of(i), &loc);
		for (int b = 0; b < 2; b++)
			assert_int_equal(
				pet_bucket_validate(
					t->index + pet_bucket_off(&og.index,
								  loc.b[b]),
					loc.b[b], og.uid),
				RS_E_TORN);
	}
	/* the old extent is in use until released */
	slab_store_info(st, &si1);
	assert_int_equal(si1.free_total + nt->ent.ext_len, si0.free_total);
	slab_table_release(st, t);
	slab_store_info(st, &si1);
	assert_int_equal(si1.free_total + nt->ent.ext_len,
			 si0.free_total + old_ext);

	/* the grown table takes the rows the old one had no room for */
	for (unsigned i = NKEYS; i < 3 * CAP0; i++)
		assert_int_equal(slab_insert(nt, key_of(i), NULL, NULL, NULL),
				 0);
	check_rows(nt, NULL, 3 * CAP0 - NKEYS);
	/* and grows again through the one-call form */
	assert_int_equal(slab_table_grow(st, "g", 8 * CAP0, 0, &t), 0);
	assert_int_equal(slab_table_capacity(t), 8 * CAP0);
	check_rows(t, NULL, 3 * CAP0 - NKEYS);
	slab_store_close(&st);
}

static void grow_that_does_not_fit_is_refused(void **state)
{
	struct slab_store *st = tl_pool_open(NULL, 8 * MiB, 0);
	struct slab_table_cfg c = cfg_of(CAP0);
	struct slab_table *t, *nt = NULL;
	const char *m;

	(void)state;
	assert_int_equal(slab_table_create(st, &c, &t), 0);
	fill(t);
	assert_int_equal(slab_grow_begin(st, t, 1ULL << 20, 0, &nt),
			 RS_E_FULL);
	m = rs_errormsg();
	print_message("%s\n", m);
	assert_non_null(strstr(m, "table 'g' (1048576 rows) needs "));
	assert_non_null(strstr(m, "bytes are free"));
	assert_null(nt);
	assert_ptr_equal(slab_table_get(st, "g"), t);
	check_rows(t, NULL, 0);
	/* the reservation is gone: a growth that fits works */
	assert_int_equal(slab_table_grow(st, "g", 2 * CAP0, 0, &nt), 0);
	check_rows(nt, NULL, 0);
	slab_store_close(&st);
}

/* ---- file pools: a crash at any point leaves the old or the new ---- */

static int cut_at = -1;

static void cut(int point)
{
	if (point == cut_at)
		_exit(0); /* NOSYNC: what was written is in the page cache */
}

/* the table's catalog record (the node keeps its spec there): a grown
 * table keeps it, whatever the cut */
static const char catalog_rec[] = "{\"spec of\": \"g\"}";

static void make_file_table(void)
{
	struct slab_store *st;
	struct slab_table_cfg c = cfg_of(CAP0);
	struct slab_table *t;

	unlink(pool_path);
	st = tl_pool_open(pool_path, 32 * MiB, FILE_FLAGS);
	c.catalog = catalog_rec;
	c.catalog_len = sizeof(catalog_rec);
	assert_int_equal(slab_table_create(st, &c, &t), 0);
	fill(t);
	slab_store_close(&st);
}

/* After a crash: the table is the old one or a grown one, with all rows,
 * and its extent plus the free space make up the pool. Returns its
 * capacity. */
static uint64_t check_after_crash(void)
{
	struct slab_store *st = tl_pool_open(pool_path, 0, FILE_FLAGS);
	struct slab_table *t = slab_table_get(st, "g");
	struct slab_store_info si;
	uint64_t cap;

	char rec[SLAB_CATALOG_MAX];

	assert_non_null(t);
	check_rows(t, NULL, 0);
	assert_int_equal(slab_table_catalog(st, t, rec, sizeof(rec)),
			 sizeof(catalog_rec));
	assert_memory_equal(rec, catalog_rec, sizeof(catalog_rec));
	slab_store_info(st, &si);
	assert_int_equal(si.free_total + t->ent.ext_len,
			 si.len - SLAB_DATA_OFF);
	assert_int_equal(((struct slab_dirent *)((uint8_t *)si.base +
					   SLAB_GROW_REC_OFF))->checksum, 0);
	cap = slab_table_capacity(t);
	slab_store_close(&st);
	return cap;
}

static void grow_child(uint64_t cap)
{
	struct slab_store *st = tl_pool_open(pool_path, 0, FILE_FLAGS);

	slab_grow_test_hook = cut;
	if (slab_table_grow(st, "g", cap, 0, NULL))
		_exit(3);
	slab_store_close(&st);
	_exit(0);
}

static void crash_at_every_cut_point(void **state)
{
	(void)state;
	for (int p = -1; p <= 4; p++) {
		pid_t pid;
		int ws;
		uint64_t cap;

		make_file_table();
		pid = fork();
		assert_true(pid >= 0);
		if (!pid) {
			cut_at = p;
			grow_child(3 * CAP0);
		}
		assert_int_equal(waitpid(pid, &ws, 0), pid);
		assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
		cap = check_after_crash();
		/* before the record (0, 1): old; from it on (2..4, -1: no
		 * cut): new */
		assert_int_equal(cap, p >= 0 && p < 2 ? CAP0 : 3 * CAP0);
	}
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* SIGKILL at a random moment of a child that opens the pool and grows the
 * table: rounds until both outcomes were seen (the kill really fell before
 * and after the switch), at least 8, at most 60. */
static void sigkill_while_growing(void **state)
{
	unsigned seed = (unsigned)time(NULL), olds = 0, news = 0, round;
	uint64_t t0, span;
	pid_t pid;

	(void)state;
	print_message("seed %u\n", seed);
	srand(seed);
	make_file_table(); /* how long a child takes, uncut */
	t0 = mono_us();
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		grow_child(3 * CAP0);
	waitpid(pid, NULL, 0);
	span = 2 * (mono_us() - t0) + 1;
	for (round = 0; round < 60 && (round < 8 || !olds || !news);
	     round++) {
		uint64_t cap;

		make_file_table();
		pid = fork();
		assert_true(pid >= 0);
		if (!pid)
			grow_child(3 * CAP0);
		usleep((useconds_t)((uint64_t)rand() % span));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		cap = check_after_crash();
		assert_true(cap == CAP0 || cap == 3 * CAP0);
		olds += cap == CAP0;
		news += cap != CAP0;
	}
	print_message("%u SIGKILLs within %llu us of the start: %u old "
		      "tables, %u grown\n", round, (unsigned long long)span,
		      olds, news);
	assert_true(olds > 0 && news > 0);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What a growth costs per row copied (printed; speed is not asserted):
 * 50000 keys of dim 8 with Adam state, DRAM, grown from 2^16 to 2^17. */
static void growth_cost(void **state)
{
	struct slab_store *st = tl_pool_open(NULL, 128 * MiB, 0);
	struct slab_table_cfg c = cfg_of(1u << 16);
	struct slab_table *t, *nt;
	float v[DIM] = { 1, 2, 3 };
	uint64_t t0, t1, t2;

	(void)state;
	assert_int_equal(slab_table_create(st, &c, &t), 0);
	for (unsigned i = 0; i < 50000; i++)
		assert_int_equal(slab_insert(t, key_of(i), v, NULL, NULL), 0);
	t0 = mono_ns();
	assert_int_equal(slab_grow_begin(st, t, 1u << 17, 0, &nt), 0);
	t1 = mono_ns();
	assert_int_equal(slab_grow_commit(st, t, nt), 0);
	slab_table_retire(t);
	slab_table_release(st, t);
	t2 = mono_ns();
	assert_int_equal(slab_table_live(nt), 50000);
	print_message("growth of 50000 rows (dim 8, Adam state): copy and "
		      "index %.1f ms (%.0f ns per row), switch, retire and "
		      "release %.2f ms\n", (double)(t1 - t0) / 1e6,
		      (double)(t1 - t0) / 50000, (double)(t2 - t1) / 1e6);
	slab_store_close(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(grow_keeps_rows_and_rejects_old),
		cmocka_unit_test(grow_that_does_not_fit_is_refused),
		cmocka_unit_test(growth_cost),
		cmocka_unit_test_setup_teardown(crash_at_every_cut_point,
						setup_path, teardown_path),
		cmocka_unit_test_setup_teardown(sigkill_while_growing,
						setup_path, teardown_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
