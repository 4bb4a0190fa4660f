/*
 * test_slab_ckpt.c - tables into checkpoint parts and back (src/server/
 * srv_slab_ckpt.c): every key's payload (each dtype) and optimizer state
 * restored bit for bit into a table of another store, across parts of
 * different partitions; an incremental part (changed rows, deleted keys)
 * applied over a restored base; an export (no state) keeps the state of
 * existing keys; a part of another geometry is refused; a full target
 * says after how many rows; a filter (a cluster node's primary keys)
 * applies to the rows and the deletions of both walks.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ckpt/ckpt.h"
#include "common/rs_internal.h"
#include "server/srv_slab_ckpt.h"
#include "value/optimizer.h"
#include "value/row_format.h"
#include "value/slab.h"

#define NKEYS 2000
#define DIM 12

struct fx {
	char dir[64];
	struct slab_store *a, *b;
	unsigned dtype;		/* enum row_dtype */
	uint32_t sf;
};

static struct slab_store *dram(void)
{
	struct slab_store_cfg cfg = { .size = 64u << 20 };
	struct slab_store *st;

	if (slab_store_open(&st, &cfg))
		fail_msg("open: %s", rs_errormsg());
	return st;
}

static struct slab_table *table(struct slab_store *st, const char *name,
				unsigned dtype, uint32_t sf, uint64_t cap)
{
	struct slab_table_cfg c = { .name = name, .dim = DIM, .dtype = dtype,
				    .capacity = cap, .state_floats = sf };
	struct slab_table *t;

	if (slab_table_create(st, &c, &t))
		fail_msg("create: %s", rs_errormsg());
	return t;
}

/* key k's values: distinct per key and element, and odd bits in the
 * mantissa (so a lossy conversion would show) */
static void fill(uint64_t k, unsigned salt, float *v, float *s, uint32_t sf)
{
	for (int j = 0; j < DIM; j++)
		v[j] = (float)k * 0.0137f + (float)j * 1.001f + (float)salt;
	for (uint32_t j = 0; j < sf; j++)
		s[j] = (float)k * 0.5f + (float)j + 0.25f * (float)salt;
}

/* Set key's payload and state (insert or overwrite). */
static void set_key(struct slab_table *t, uint64_t k, unsigned salt,
		    uint32_t sf)
{
	float v[DIM], s[2 * DIM + 1], vb[DIM], sb[2 * DIM + 1];
	struct slab_wr w = { .val = vb, .state = sf ? sb : NULL };

	fill(k, salt, v, s, sf);
	if (slab_insert(t, k, v, sf ? s : NULL, NULL) == 0)
		return;
	assert_int_equal(slab_write_begin(t, k, &w), 0);
	memcpy(w.val, v, sizeof(v));
	if (sf)
		memcpy(w.state, s, sf * sizeof(float));
	assert_int_equal(slab_write_commit(&w), 0);
}

/* The payload bytes and state of key in t. */
static void image(struct slab_table *t, uint64_t k, uint8_t *payload,
		  float *state)
{
	struct slab_table_geom g;
	uint8_t row[ROW_HDR_BYTES + DIM * 4 + 64];
	uint32_t slot;

	slab_table_geom(t, &g);
	assert_int_equal(slab_lookup(t, k, &slot), 0);
	slab_read_row(t, slot, row);
	memcpy(payload, row + ROW_HDR_BYTES, g.rows.payload_bytes);
	if (slab_table_state_floats(t))
		assert_int_equal(slab_read_state(t, k, state), 0);
}

static void same_keys(struct slab_table *x, struct slab_table *y,
		      bool compare_state)
{
	struct slab_table_stats sx, sy;
	uint8_t px[DIM * 4], py[DIM * 4];
	float fx_[2 * DIM + 1], fy[2 * DIM + 1];
	struct slab_table_geom g;

	slab_table_stats(x, &sx);
	slab_table_stats(y, &sy);
	assert_int_equal(sx.live, sy.live);
	slab_table_geom(x, &g);
	for (uint64_t k = 0; k < 3 * NKEYS; k++) {
		uint32_t slot;

		if (slab_lookup(x, k, &slot)) {
			assert_int_equal(slab_lookup(y, k, &slot),
					 RS_E_NOTFOUND);
			continue;
		}
		image(x, k, px, fx_);
		image(y, k, py, fy);
		assert_memory_equal(px, py, g.rows.payload_bytes);
		if (compare_state)
			assert_memory_equal(fx_, fy, slab_table_state_floats(x) *
						     sizeof(float));
	}
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/rs-sckpt-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->a = dram();
	f->b = dram();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	slab_store_close(&f->a);
	slab_store_close(&f->b);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void desc_of(struct slab_table *t, const uint8_t id[CKPT_ID_BYTES],
		    uint32_t part, bool with_state, struct ckpt_part_desc *d)
{
	struct slab_table_geom g;

	slab_table_geom(t, &g);
	memset(d, 0, sizeof(*d));
	memcpy(d->id, id, CKPT_ID_BYTES);
	d->part = part;
	d->dim = DIM;
	d->dtype = row_dtype_to_proto(g.rows.dtype);
	d->optim_kind = slab_table_state_floats(t) == 2 * DIM + 1 ?
				OPTIM_ADAM :
			slab_table_state_floats(t) == DIM ? OPTIM_ADAGRAD :
							     OPTIM_SGD;
	d->with_state = with_state;
	d->state_floats = with_state ? slab_table_state_floats(t) : 0;
}

static void dump(struct slab_table *t, const char *path,
		 const struct ckpt_part_desc *d, uint64_t want)
{
	struct ckpt_writer *w;
	struct ckpt_part_sum sum;
	uint64_t rows;

	assert_int_equal(ckpt_part_create(&w, path, d, 0), 0);
	if (slab_table_dump(t, w, d, &rows))
		fail_msg("dump: %s", rs_errormsg());
	assert_int_equal(rows, want);
	assert_int_equal(ckpt_part_finish(w, &sum), 0);
	assert_int_equal(sum.rows, want);
}

static void load(struct slab_table *t, const char *path,
		 const struct ckpt_part_desc *d, struct slab_load_stats *st)
{
	struct ckpt_reader *r;

	assert_int_equal(ckpt_part_open(&r, path, d), 0);
	if (slab_table_load(t, r, st))
		fail_msg("load: %s", rs_errormsg());
	ckpt_part_close(r);
}

/* Two source tables ("nodes" of one store), restored into one table. */
static void full_roundtrip(struct fx *f, unsigned dtype, uint32_t sf)
{
	struct slab_table *s0 = table(f->a, "n0", dtype, sf, NKEYS);
	struct slab_table *s1 = table(f->a, "n1", dtype, sf, NKEYS);
	struct slab_table *all = table(f->a, "all", dtype, sf, 2 * NKEYS);
	struct slab_table *dst = table(f->b, "dst", dtype, sf, 2 * NKEYS);
	struct ckpt_part_desc d0, d1;
	struct slab_load_stats st;
	uint8_t id[CKPT_ID_BYTES];
	char p0[PATH_MAX], p1[PATH_MAX];

	for (uint64_t k = 0; k < NKEYS; k++) {
		set_key(k % 2 ? s1 : s0, k, 0, sf);
		set_key(all, k, 0, sf);
	}
	/* a few deleted keys and overwritten rows first */
	for (uint64_t k = 0; k < NKEYS; k += 17) {
		assert_int_equal(slab_delete(k % 2 ? s1 : s0, k), 0);
		assert_int_equal(slab_delete(all, k), 0);
	}
	for (uint64_t k = 1; k < NKEYS; k += 5) {
		if (k % 17 == 0)
			continue;
		set_key(k % 2 ? s1 : s0, k, 3, sf);
		set_key(all, k, 3, sf);
	}
	ckpt_new_id(id);
	snprintf(p0, sizeof(p0), "%s/n0.rsck", f->dir);
	snprintf(p1, sizeof(p1), "%s/n1.rsck", f->dir);
	desc_of(s0, id, 0, true, &d0);
	desc_of(s1, id, 1, true, &d1);
	{
		struct slab_table_stats a, b;

		slab_table_stats(s0, &a);
		slab_table_stats(s1, &b);
		dump(s0, p0, &d0, a.live);
		dump(s1, p1, &d1, b.live);
	}
	load(dst, p0, &d0, &st);
	load(dst, p1, &d1, &st);
	same_keys(all, dst, true);
	printf("%s, %u state floats: %u keys restored bit for bit from 2 "
	       "parts\n", row_dtype_name(dtype), sf, (unsigned)(NKEYS -
	       (NKEYS + 16) / 17));
}

static void roundtrip_fp32_adam(void **state)
{
	full_roundtrip(*state, ROW_F32, 2 * DIM + 1);
}

static void roundtrip_bf16_adagrad(void **state)
{
	full_roundtrip(*state, ROW_BF16, DIM);
}

static void roundtrip_fp16_sgd(void **state)
{
	full_roundtrip(*state, ROW_F16, 0);
}

/* base + increment == the source after more changes */
/* The table's change tracking writes the increment: exactly the keys
 * changed and deleted since the base (a key deleted and inserted again
 * is a row; a new key deleted again a deletion), and it applies over the
 * restored base to the source's state. */
static void incremental(void **state)
{
	struct fx *f = *state;
	uint32_t sf = DIM;
	struct slab_table *src = table(f->a, "src", ROW_F32, sf, 3 * NKEYS);
	struct slab_table *dst = table(f->b, "dst", ROW_F32, sf, 3 * NKEYS);
	struct ckpt_part_desc d;
	struct ckpt_writer *w;
	struct ckpt_part_sum sum;
	struct slab_load_stats st;
	uint8_t id[CKPT_ID_BYTES], base_id[CKPT_ID_BYTES];
	char base[PATH_MAX], inc[PATH_MAX];
	uint64_t rows, deleted, want_rows = 0, want_del = 0;

	for (uint64_t k = 0; k < NKEYS; k++)
		set_key(src, k, 0, sf);
	ckpt_new_id(base_id);
	/* untagged: no increment */
	assert_int_equal(slab_track_check(src, base_id), RS_E_STALE);
	assert_non_null(strstr(rs_errormsg(), "take a full checkpoint"));
	desc_of(src, base_id, 0, true, &d);
	snprintf(base, sizeof(base), "%s/base.rsck", f->dir);
	dump(src, base, &d, NKEYS);
	slab_track_reset(src, base_id);
	load(dst, base, &d, &st);
	assert_int_equal(st.inserted, NKEYS);
	/* changes since the base: updates, deletions, new keys */
	for (uint64_t k = 0; k < 2 * NKEYS; k += 3) {
		if (k % 2 && k < NKEYS) {
			assert_int_equal(slab_delete(src, k), 0);
			want_del++;
			continue;
		}
		set_key(src, k, 9, sf);
		want_rows++;
	}
	assert_int_equal(slab_delete(src, 2), 0);	/* deleted, put again */
	set_key(src, 2, 5, sf);
	want_rows++;
	set_key(src, 3 * NKEYS - 1, 1, sf);		/* new, deleted */
	assert_int_equal(slab_delete(src, 3 * NKEYS - 1), 0);
	want_del++;
	assert_int_equal(slab_track_check(src, base_id), 0);
	ckpt_new_id(id);
	assert_int_equal(slab_track_check(src, id), RS_E_STALE);
	assert_non_null(strstr(rs_errormsg(), "another checkpoint"));
	desc_of(src, id, 0, true, &d);
	snprintf(inc, sizeof(inc), "%s/inc.rsck", f->dir);
	assert_int_equal(ckpt_part_create(&w, inc, &d, 0), 0);
	if (slab_table_dump_changes(src, w, &d, &rows, &deleted))
		fail_msg("dump: %s", rs_errormsg());
	assert_int_equal(ckpt_part_finish(w, &sum), 0);
	assert_int_equal(rows, want_rows);
	assert_int_equal(deleted, want_del);
	assert_int_equal(sum.rows, want_rows);
	assert_int_equal(sum.deleted, want_del);
	load(dst, inc, &d, &st);
	assert_true(st.inserted > 0 && st.overwritten > 0 && st.deleted > 0);
	same_keys(src, dst, true);
	/* a reset empties the tracking */
	slab_track_reset(src, id);
	assert_int_equal(ckpt_part_create(&w, base, &d, 0), -EEXIST);
	snprintf(inc, sizeof(inc), "%s/inc2.rsck", f->dir);
	assert_int_equal(ckpt_part_create(&w, inc, &d, 0), 0);
	assert_int_equal(slab_table_dump_changes(src, w, &d, &rows, &deleted),
			 0);
	assert_int_equal(ckpt_part_finish(w, &sum), 0);
	assert_int_equal(rows + deleted, 0);
}

static bool odd_key(void *arg, uint64_t key)
{
	(*(unsigned *)arg)++;
	return key % 2;
}

/* The records of the part at path, with only odd keys. */
static void only_odd(const char *path, const struct ckpt_part_desc *d,
		     uint64_t rows, uint64_t deleted)
{
	struct ckpt_reader *r;
	struct ckpt_record rec;
	uint64_t nr = 0, nd = 0;
	int rc;

	assert_int_equal(ckpt_part_open(&r, path, d), 0);
	while ((rc = ckpt_part_next(r, &rec)) == 1) {
		assert_true(rec.key % 2);
		if (rec.kind == CKPT_REC_DELETED)
			nd++;
		else
			nr++;
	}
	assert_int_equal(rc, 0);
	ckpt_part_close(r);
	assert_int_equal(nr, rows);
	assert_int_equal(nd, deleted);
}

/* A cluster node dumps the keys it is the primary of: a filter on the
 * full and the incremental walks (rows and deletions alike). */
static void filtered(void **state)
{
	struct fx *f = *state;
	struct slab_table *t = table(f->a, "flt", ROW_F32, DIM, NKEYS);
	struct ckpt_part_desc d;
	struct ckpt_writer *w;
	struct ckpt_part_sum sum;
	uint8_t id[CKPT_ID_BYTES];
	char path[PATH_MAX];
	uint64_t rows, deleted = 0;
	unsigned asked = 0;

	for (uint64_t k = 0; k < NKEYS; k++)
		set_key(t, k, 0, DIM);
	ckpt_new_id(id);
	desc_of(t, id, 0, true, &d);
	snprintf(path, sizeof(path), "%s/flt.rsck", f->dir);
	assert_int_equal(ckpt_part_create(&w, path, &d, 0), 0);
	assert_int_equal(slab_table_dump_keys(t, w, &d, false, odd_key,
					      &asked, &rows, NULL), 0);
	assert_int_equal(ckpt_part_finish(w, &sum), 0);
	assert_int_equal(rows, NKEYS / 2);
	assert_int_equal(asked, NKEYS);
	only_odd(path, &d, NKEYS / 2, 0);
	slab_track_reset(t, id);
	for (uint64_t k = 0; k < 100; k++)
		set_key(t, k, 4, DIM);
	for (uint64_t k = 100; k < 110; k++)
		assert_int_equal(slab_delete(t, k), 0);
	ckpt_new_id(id);
	desc_of(t, id, 0, true, &d);
	snprintf(path, sizeof(path), "%s/flt-inc.rsck", f->dir);
	assert_int_equal(ckpt_part_create(&w, path, &d, 0), 0);
	assert_int_equal(slab_table_dump_keys(t, w, &d, true, odd_key, &asked,
					      &rows, &deleted), 0);
	assert_int_equal(ckpt_part_finish(w, &sum), 0);
	assert_int_equal(rows, 50);
	assert_int_equal(deleted, 5);
	only_odd(path, &d, 50, 5);
}

/* More deletions than the tracking keeps: the next increment is refused
 * (never silently incomplete) until a reset. */
static void track_bound(void **state)
{
	struct fx *f = *state;
	uint64_t n = SLAB_TRACK_GONE_MAX + 1;
	struct slab_table *t = table(f->a, "big", ROW_F32, 0, n);
	uint8_t id[CKPT_ID_BYTES];

	for (uint64_t k = 0; k < n; k++)
		assert_int_equal(slab_insert(t, k, NULL, NULL, NULL), 0);
	ckpt_new_id(id);
	slab_track_reset(t, id);
	for (uint64_t k = 0; k < n - 1; k++)
		assert_int_equal(slab_delete(t, k), 0);
	assert_int_equal(slab_track_check(t, id), 0);	/* at the bound */
	assert_int_equal(slab_delete(t, n - 1), 0);
	assert_int_equal(slab_track_check(t, id), RS_E_STALE);
	assert_non_null(strstr(rs_errormsg(), "more than 65536 keys deleted"));
	slab_track_reset(t, id);
	assert_int_equal(slab_track_check(t, id), 0);
}

/* an export (rows only) over existing keys keeps their state */
static void export_keeps_state(void **state)
{
	struct fx *f = *state;
	struct slab_table *src = table(f->a, "src", ROW_F32, DIM, NKEYS);
	struct slab_table *dst = table(f->b, "dst", ROW_F32, DIM, NKEYS);
	struct ckpt_part_desc d;
	struct slab_load_stats st;
	uint8_t id[CKPT_ID_BYTES], p[DIM * 4];
	float s[DIM];
	char path[PATH_MAX];

	for (uint64_t k = 0; k < 100; k++) {
		set_key(src, k, 1, DIM);
		set_key(dst, k, 2, DIM);	/* other rows, other state */
	}
	ckpt_new_id(id);
	desc_of(src, id, 0, false, &d);
	snprintf(path, sizeof(path), "%s/export.rsck", f->dir);
	dump(src, path, &d, 100);
	load(dst, path, &d, &st);
	assert_int_equal(st.overwritten, 100);
	same_keys(src, dst, false);	/* the rows are the export's */
	for (uint64_t k = 0; k < 100; k++) {
		float v[DIM], want[DIM];

		image(dst, k, p, s);
		fill(k, 2, v, want, DIM);
		assert_memory_equal(s, want, sizeof(want));
	}
}

static void refused(void **state)
{
	struct fx *f = *state;
	struct slab_table *src = table(f->a, "src", ROW_F32, DIM, 64);
	struct slab_table *other = table(f->b, "o", ROW_BF16, DIM, 64);
	struct slab_table *small = table(f->b, "small", ROW_F32, DIM, 8);
	struct ckpt_part_desc d;
	struct ckpt_reader *r;
	struct slab_load_stats st;
	uint8_t id[CKPT_ID_BYTES];
	char path[PATH_MAX];

	for (uint64_t k = 0; k < 40; k++)
		set_key(src, k, 0, DIM);
	ckpt_new_id(id);
	desc_of(src, id, 0, true, &d);
	snprintf(path, sizeof(path), "%s/p.rsck", f->dir);
	dump(src, path, &d, 40);
	assert_int_equal(ckpt_part_open(&r, path, &d), 0);
	assert_int_equal(slab_table_load(other, r, &st), RS_E_DIM);
	printf("%s\n", rs_errormsg());
	ckpt_part_close(r);
	assert_int_equal(ckpt_part_open(&r, path, &d), 0);
	assert_int_equal(slab_table_load(small, r, &st), RS_E_FULL);
	printf("%s\n", rs_errormsg());
	assert_non_null(strstr(rs_errormsg(), "is full after"));
	ckpt_part_close(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(roundtrip_fp32_adam, setup,
						teardown),
		cmocka_unit_test_setup_teardown(roundtrip_bf16_adagrad, setup,
						teardown),
		cmocka_unit_test_setup_teardown(roundtrip_fp16_sgd, setup,
						teardown),
		cmocka_unit_test_setup_teardown(incremental, setup, teardown),
		cmocka_unit_test_setup_teardown(track_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(filtered, setup, teardown),
		cmocka_unit_test_setup_teardown(export_keeps_state, setup,
						teardown),
		cmocka_unit_test_setup_teardown(refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
