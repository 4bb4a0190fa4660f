/*
 * test_value.c - row format and slab store: row validation on hand-torn
 * images, element types, DRAM and file pools, tables, insert / update /
 * delete / reinsert, stale-location detection, capacity limits, and
 * recovery of hand-made crash images (torn row with redo log, unpublished
 * insert, torn bucket, damaged superblock).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "index/pet_sync.h"
#include "value/slab_int.h" /* white-box: crash images */

#define DIM 128
#define MiB (1ULL << 20)

static char pool_path[256];

static const char *tmpdir(void)
{
	const char *d = getenv("TMPDIR");

	return d && *d ? d : "/tmp";
}

static int setup_path(void **state)
{
	snprintf(pool_path, sizeof(pool_path), "%s/rs-test-value-%d.pool",
		 tmpdir(), (int)getpid());
	unlink(pool_path);
	return 0;
}

static int teardown_path(void **state)
{
	unlink(pool_path);
	return 0;
}

static void fill_vals(float *v, uint64_t key, uint32_t gen)
{
	for (int i = 0; i < DIM; i++)
		v[i] = (float)((key % 1000) * 1000 + gen) + (float)i / 256;
}

static struct slab_store *dram_pool(uint64_t size)
{
	struct slab_store_cfg cfg = {.size = size};
	struct slab_store *st;

	assert_int_equal(slab_store_open(&st, &cfg), 0);
	return st;
}

static struct slab_table *mktable(struct slab_store *st, const char *name,
				  uint64_t cap, uint32_t state_floats)
{
	struct slab_table_cfg tc = {.name = name,
				    .dim = DIM,
				    .capacity = cap,
				    .state_floats = state_floats};
	struct slab_table *t;

	assert_int_equal(slab_table_create(st, &tc, &t), 0);
	return t;
}

/* ---- row format ---- */

static void row_geometry_and_types(void **state)
{
	struct row_geom g;
	float f[5] = {1.0f, -2.5f, 65504.0f, 3.14159f, 1e-3f}, back[5];
	uint8_t pl[10];

	assert_int_equal(row_geom_init(&g, 128, ROW_F32, 10, 3), 0);
	assert_int_equal(g.payload_bytes, 512);
	assert_int_equal(g.stride, 576);
	assert_int_equal(row_off(&g, 2), 1152);
	assert_int_equal(row_geom_init(&g, 128, ROW_BF16, 10, 3), 0);
	assert_int_equal(g.stride, 320);
	assert_int_equal(row_geom_init(&g, 0, ROW_F32, 1, 0), RS_E_INVAL);
	assert_int_equal(row_geom_init(&g, 8, 9, 1, 0), RS_E_INVAL);
	assert_int_equal(row_dtype_parse("bf16"), ROW_BF16);
	assert_int_equal(row_dtype_parse("f64"), RS_E_INVAL);
	assert_string_equal(row_dtype_name(ROW_F16), "f16");

	assert_int_equal(row_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(row_f32_to_bf16(1.00390625f), 0x3f80); /* tie: even */
	assert_int_equal(row_f32_to_bf16(1.01171875f), 0x3f82); /* tie: up */
	assert_true(isnan(row_bf16_to_f32(row_f32_to_bf16(NAN))));
	assert_int_equal(row_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(row_f32_to_f16(65504.0f), 0x7bff);
	assert_true(row_f16_to_f32(0x7c00) == INFINITY);
	assert_int_equal(row_geom_init(&g, 5, ROW_F16, 1, 0), 0);
	row_payload_from_f32(&g, f, pl);
	row_payload_to_f32(&g, pl, back);
	for (int i = 0; i < 5; i++)
		assert_true(fabsf(back[i] - f[i]) <= fabsf(f[i]) / 1024);
	{ /* values that would be stored as an infinity */
		float big[5] = {1.0f, -2.0f, 65504.0f, 3.0f, 4.0f};

		assert_true(row_f32_fits(&g, big));
		big[3] = -65520.0f; /* rounds to -inf in fp16 */
		assert_false(row_f32_fits(&g, big));
		assert_int_equal(row_geom_init(&g, 5, ROW_BF16, 1, 0), 0);
		assert_true(row_f32_fits(&g, big));
		big[1] = 3.4e38f; /* finite fp32, inf in bf16 */
		assert_false(row_f32_fits(&g, big));
		assert_int_equal(row_geom_init(&g, 5, ROW_F32, 1, 0), 0);
		assert_true(row_f32_fits(&g, big));
	}
	assert_int_equal(row_geom_init(&g, 5, ROW_BF16, 1, 0), 0);
	row_payload_from_f32(&g, f, pl);
	row_payload_to_f32(&g, pl, back);
	for (int i = 0; i < 5; i++)
		assert_true(fabsf(back[i] - f[i]) <= fabsf(f[i]) / 128);
}

/* Build a valid LIVE image of slot idx by hand. */
static void make_row(const struct row_geom *g, uint8_t *img, uint32_t idx,
		     uint64_t key, uint64_t version, uint32_t gen)
{
	uint64_t meta = row_meta(g, ROW_LIVE), cs;
	float v[DIM];

	memset(img, 0, g->stride);
	memcpy(img, &version, 8);
	memcpy(img + 16, &key, 8);
	memcpy(img + 24, &meta, 8);
	fill_vals(v, key, gen);
	row_payload_from_f32(g, v, img + ROW_HDR_BYTES);
	cs = row_checksum(img, g, idx, version);
	memcpy(img + 8, &cs, 8);
}

static void torn_rows_detected(void **state)
{
	struct row_geom g;
	uint8_t a[576], b[576], mix[576];
	uint64_t ver;

	assert_int_equal(row_geom_init(&g, DIM, ROW_F32, 100, 7), 0);
	make_row(&g, a, 5, 42, 10, 1);
	make_row(&g, b, 5, 42, 12, 2);
	assert_int_equal(row_validate(a, &g, 5, 42, &ver), 0);
	assert_int_equal(ver, 10);
	assert_int_equal(row_validate(b, &g, 5, 42, NULL), 0);
	/* wrong slot, wrong key */
	assert_int_equal(row_validate(a, &g, 6, 42, NULL), RS_E_TORN);
	assert_int_equal(row_validate(a, &g, 5, 43, NULL), RS_E_STALE);
	/* a writer inside */
	memcpy(mix, b, sizeof(mix));
	mix[0] |= 1;
	assert_int_equal(row_validate(mix, &g, 5, 42, NULL), RS_E_TORN);
	/* any 64 B line, or any 8 B word, of the other version */
	for (int line = 0; line < 9; line++) {
		memcpy(mix, b, sizeof(mix));
		memcpy(mix + 64 * line, a + 64 * line, 64);
		assert_int_equal(row_validate(mix, &g, 5, 42, NULL),
				 RS_E_TORN);
	}
	for (int w = 0; w < (ROW_HDR_BYTES + DIM * 4) / 8; w++) {
		memcpy(mix, b, sizeof(mix));
		memcpy(mix + 8 * w, a + 8 * w, 8);
		if (memcmp(mix, b, sizeof(mix))) /* key, meta: same */
			assert_int_equal(row_validate(mix, &g, 5, 42, NULL),
					 RS_E_TORN);
	}
	/* every single-bit flip in the covered bytes */
	for (int bit = 0; bit < (ROW_HDR_BYTES + DIM * 4) * 8; bit++) {
		memcpy(mix, b, sizeof(mix));
		mix[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_not_equal(row_validate(mix, &g, 5, 42, NULL), 0);
	}
	/* padding is not covered */
	memcpy(mix, b, sizeof(mix));
	mix[575] ^= 0xff;
	assert_int_equal(row_validate(mix, &g, 5, 42, NULL), 0);
	/* a tombstone of the same key is stale, not torn */
	{
		uint64_t meta = row_meta(&g, ROW_FREE), cs;

		memcpy(mix, b, sizeof(mix));
		memcpy(mix + 24, &meta, 8);
		cs = row_checksum(mix, &g, 5, 12);
		memcpy(mix + 8, &cs, 8);
		assert_int_equal(row_validate(mix, &g, 5, 42, &ver),
				 RS_E_STALE);
		assert_int_equal(ver, 12);
	}
}

/* ---- DRAM pool ---- */

static int count_cb(void *arg, uint64_t key, uint32_t row)
{
	(*(uint64_t *)arg)++;
	return 0;
}

static void dram_basic(void **state)
{
	struct slab_store *st = dram_pool(64 * MiB);
	struct slab_table *t = mktable(st, "emb", 1000, 2 * DIM);
	const uint64_t keys[] = {0, UINT64_MAX, 1, 12345};
	float v[DIM], out[DIM], sv[2 * DIM], so[2 * DIM];
	struct slab_table_stats ts;
	struct slab_store_info si;
	uint64_t ver, n = 0;
	uint32_t row;
	bool created;

	slab_store_info(st, &si);
	assert_false(si.file_backed);
	assert_int_equal(si.ntables, 1);
	assert_ptr_equal(slab_table_get(st, "emb"), t);
	assert_ptr_equal(slab_table_by_id(st, slab_table_id(t)), t);
	assert_null(slab_table_get(st, "nope"));
	assert_int_equal(slab_table_dim(t), DIM);
	assert_int_equal(slab_table_state_floats(t), 2 * DIM);

	for (size_t i = 0; i < RS_ARRAY_SIZE(keys); i++) {
		assert_int_equal(slab_read(t, keys[i], out, NULL),
				 RS_E_NOTFOUND);
		fill_vals(v, keys[i], 1);
		for (int j = 0; j < 2 * DIM; j++)
			sv[j] = (float)j;
		assert_int_equal(slab_insert(t, keys[i], v, sv, &row), 0);
		assert_int_equal(slab_insert(t, keys[i], v, sv, NULL),
				 RS_E_EXISTS);
	}
	for (size_t i = 0; i < RS_ARRAY_SIZE(keys); i++) {
		uint8_t raw[576];

		fill_vals(v, keys[i], 1);
		assert_int_equal(slab_read(t, keys[i], out, &ver), 0);
		assert_memory_equal(out, v, sizeof(v));
		assert_int_equal(ver, 4);
		assert_int_equal(slab_lookup(t, keys[i], &row), 0);
		slab_read_row(t, row, raw);
		assert_int_equal(row_validate(raw, &t->rg, row, keys[i], NULL),
				 0);
		assert_int_equal(slab_read_state(t, keys[i], so), 0);
		assert_float_equal(so[7], 7.0f, 0);
	}

	/* in-place update through begin/commit */
	{
		struct slab_wr w = {.val = out, .state = so};

		assert_int_equal(slab_write_begin(t, 0, &w), 0);
		assert_int_equal(w.version, 4);
		fill_vals(v, 0, 1);
		assert_memory_equal(w.val, v, sizeof(v));
		for (int i = 0; i < DIM; i++)
			w.val[i] += 1;
		w.state[0] = 99;
		assert_int_equal(slab_write_commit(&w), 0);
		assert_int_equal(slab_read(t, 0, out, &ver), 0);
		assert_int_equal(ver, 6);
		assert_float_equal(out[3], v[3] + 1, 0);
		assert_int_equal(slab_read_state(t, 0, so), 0);
		assert_float_equal(so[0], 99, 0);
		/* a backup's record: the row, then the state, in one buffer */
		{
			float rec[3 * DIM + 1];

			rec[3 * DIM] = -1;
			assert_int_equal(slab_read_record(t, 0, rec), 0);
			assert_memory_equal(rec, out, sizeof(out));
			assert_memory_equal(rec + DIM, so, sizeof(so));
			assert_float_equal(rec[3 * DIM], -1, 0);
			assert_int_equal(slab_read_record(t, 777, rec),
					 RS_E_NOTFOUND);
		}
		assert_int_equal(slab_write_begin(t, 777, &w), RS_E_NOTFOUND);
		assert_int_equal(slab_write_begin(t, 1, &w), 0);
		slab_write_abort(&w);
		assert_int_equal(slab_read(t, 1, out, &ver), 0);
		assert_int_equal(ver, 4);
	}
	/* put and get-or-insert */
	fill_vals(v, 5, 9);
	assert_int_equal(slab_put(t, 5, v, &created), 0);
	assert_true(created);
	assert_int_equal(slab_put(t, 5, v, &created), 0);
	assert_false(created);
	assert_int_equal(slab_get_or_insert(t, 5, NULL, NULL, &row, &created),
			 0);
	assert_false(created);
	assert_int_equal(slab_get_or_insert(t, 6, NULL, NULL, &row, &created),
			 0);
	assert_true(created);
	assert_int_equal(slab_read(t, 6, out, NULL), 0);
	assert_float_equal(out[0], 0, 0);

	assert_int_equal(slab_iterate(t, count_cb, &n), 0);
	assert_int_equal(n, 6);
	slab_table_stats(t, &ts);
	assert_int_equal(ts.live, 6);
	assert_int_equal(ts.index.used, 6);
	assert_int_equal(ts.inserts, 6);
	assert_true(ts.updates >= 2);

	assert_int_equal(slab_delete(t, UINT64_MAX), 0);
	assert_int_equal(slab_delete(t, UINT64_MAX), RS_E_NOTFOUND);
	assert_int_equal(slab_read(t, UINT64_MAX, out, NULL), RS_E_NOTFOUND);
	slab_store_close(&st);
	assert_null(st);
	slab_store_close(&st);
}

static void stale_location_detected(void **state)
{
	struct slab_store *st = dram_pool(16 * MiB);
	struct slab_table *t = mktable(st, "t", 64, 0);
	uint8_t raw[576];
	float v[DIM];
	uint32_t r, r2;
	uint64_t ver;

	fill_vals(v, 10, 1);
	assert_int_equal(slab_insert(t, 10, v, NULL, &r), 0);
	/* a client caches (10 -> r), then 10 is deleted */
	assert_int_equal(slab_delete(t, 10), 0);
	slab_read_row(t, r, raw);
	assert_int_equal(row_validate(raw, &t->rg, r, 10, &ver), RS_E_STALE);
	assert_int_equal(ver, 6); /* the tombstone moved the version on */
	/* the slot is reused by another key: still stale for 10 */
	assert_int_equal(slab_insert(t, 11, v, NULL, &r2), 0);
	assert_int_equal(r2, r);
	slab_read_row(t, r, raw);
	assert_int_equal(row_validate(raw, &t->rg, r, 10, NULL), RS_E_STALE);
	assert_int_equal(row_validate(raw, &t->rg, r, 11, &ver), 0);
	assert_int_equal(ver, 10);
	slab_store_close(&st);
}

/*
 * Phantom rows. A client caches (key 10 -> row r); 10 is deleted; two
 * writers insert 10 at once: A gets slot r (reused), B wins the index
 * while A is between publishing its row and inserting its index slot (the
 * test hook runs B there). A's row must never validate as LIVE for 10,
 * neither in that window nor after A lost (RS_E_EXISTS).
 */
static struct {
	uint32_t row;	 /* A's slot */
	int depth;	 /* hook re-entry (B's own insert) */
	int checked;	 /* times the window was inspected */
	int accepted;	 /* times a reader accepted A's row */
	bool race;	 /* run B inside A's window */
	float *valb;
} phantom;

static void phantom_hook(struct slab_table *t, uint32_t row, uint64_t key)
{
	uint8_t raw[576];

	if (phantom.depth++ == 0) {
		phantom.row = row;
		slab_read_row(t, row, raw);
		phantom.checked++;
		if (row_validate(raw, &t->rg, row, key, NULL) == 0)
			phantom.accepted++;
		if (phantom.race)
			assert_int_equal(slab_insert(t, key, phantom.valb,
						     NULL, NULL),
					 0);
		slab_read_row(t, row, raw);
		if (row_validate(raw, &t->rg, row, key, NULL) == 0)
			phantom.accepted++;
	}
	phantom.depth--;
}

static void phantom_rows_never_live(void **state)
{
	struct slab_store *st = dram_pool(16 * MiB);
	struct slab_table *t = mktable(st, "t", 64, 0);
	float va[DIM], vb[DIM], out[DIM];
	uint8_t raw[576];
	uint32_t r;

	fill_vals(va, 10, 1);
	fill_vals(vb, 10, 2);
	assert_int_equal(slab_insert(t, 10, va, NULL, &r), 0);
	assert_int_equal(slab_delete(t, 10), 0); /* a client still has r */
	memset(&phantom, 0, sizeof(phantom));
	phantom.race = true;
	phantom.valb = vb;
	slab_test_insert_hook = phantom_hook;
	assert_int_equal(slab_insert(t, 10, va, NULL, NULL), RS_E_EXISTS);
	slab_test_insert_hook = NULL;
	assert_int_equal(phantom.row, r); /* A reused the cached slot */
	assert_int_equal(phantom.checked, 1);
	assert_int_equal(phantom.accepted, 0);
	slab_read_row(t, r, raw);
	assert_int_equal(row_validate(raw, &t->rg, r, 10, NULL), RS_E_STALE);
	assert_int_equal(slab_read(t, 10, out, NULL), 0);
	assert_memory_equal(out, vb, sizeof(vb)); /* B's value */
	/* an insert that wins is LIVE once it returns */
	memset(&phantom, 0, sizeof(phantom));
	slab_test_insert_hook = phantom_hook;
	assert_int_equal(slab_insert(t, 11, va, NULL, &r), 0);
	slab_test_insert_hook = NULL;
	assert_int_equal(phantom.checked, 1);
	assert_int_equal(phantom.accepted, 0);
	slab_read_row(t, r, raw);
	assert_int_equal(row_validate(raw, &t->rg, r, 11, NULL), 0);
	assert_int_equal(pet_verify(t->pet, NULL), 0);
	slab_store_close(&st);
}

/*
 * A table dropped and created again (same name, id and extent) restarts
 * its row and bucket versions: the same key inserted with the same value
 * gives a byte-identical row apart from the checksum. A reader still
 * holding the old incarnation (TABLE_DIR generation) must reject every row
 * and every bucket of the new table.
 */
static void recreated_table_rejects_stale_reader(void **state)
{
	struct slab_store *st = dram_pool(16 * MiB);
	struct slab_table *t = mktable(st, "t", 64, 0);
	struct slab_table_geom g1, g2;
	struct slab_region ri;
	uint8_t raw[576];
	float v[DIM];
	uint64_t ver1, ver2;
	uint32_t r1, r2;

	fill_vals(v, 10, 1);
	assert_int_equal(slab_insert(t, 10, v, NULL, &r1), 0);
	slab_table_geom(t, &g1);
	slab_read_row(t, r1, raw);
	assert_int_equal(row_validate(raw, &g1.rows, r1, 10, &ver1), 0);
	assert_int_equal(slab_table_drop(st, "t"), 0);
	t = mktable(st, "t", 64, 0);
	assert_int_equal(slab_insert(t, 10, v, NULL, &r2), 0);
	slab_table_geom(t, &g2);
	assert_int_equal(g2.rows_off, g1.rows_off); /* same extent ... */
	assert_int_equal(r2, r1);		     /* ... slot ... */
	assert_int_equal(g2.rows.table_id, g1.rows.table_id);
	assert_int_not_equal(g2.uid, g1.uid);
	slab_read_row(t, r2, raw);
	assert_int_equal(row_validate(raw, &g2.rows, r2, 10, &ver2), 0);
	assert_int_equal(ver2, ver1); /* ... and version */
	assert_int_equal(row_validate(raw, &g1.rows, r2, 10, NULL),
			 RS_E_TORN);
	slab_table_regions(t, &ri, NULL, NULL);
	for (uint64_t b = 0; b < g2.index.nbuckets; b++) {
		const uint8_t *bk = (const uint8_t *)ri.addr +
				    pet_bucket_off(&g2.index, b);

		assert_int_equal(pet_bucket_validate(bk, b,
						     g2.index.incarnation),
				 0);
		assert_int_equal(pet_bucket_validate(bk, b,
						     g1.index.incarnation),
				 RS_E_TORN);
	}
	slab_store_close(&st);
}

static void rows_full_then_reuse(void **state)
{
	struct slab_store *st = dram_pool(16 * MiB);
	struct slab_table *t = mktable(st, "small", 100, 4);
	struct slab_table_stats ts;
	uint32_t r;

	for (uint64_t k = 0; k < 100; k++)
		assert_int_equal(slab_insert(t, k * 7919, NULL, NULL, &r), 0);
	assert_int_equal(slab_insert(t, 1, NULL, NULL, NULL), RS_E_FULL);
	assert_true(strstr(rs_errormsg(), "rows in use") != NULL);
	for (int cycle = 0; cycle < 20; cycle++) {
		for (uint64_t k = 0; k < 100; k += 3)
			assert_int_equal(slab_delete(t, k * 7919 + cycle), 0);
		for (uint64_t k = 0; k < 100; k++) {
			uint64_t key = k * 7919 + cycle + (k % 3 == 0);

			if (k % 3 == 0)
				assert_int_equal(slab_insert(t, key, NULL,
							     NULL, NULL),
						 0);
		}
		/* the ones not moved on keep their key */
		for (uint64_t k = 0; k < 100; k++)
			if (k % 3 != 0)
				assert_int_equal(
					slab_lookup(t, k * 7919 + cycle, &r),
					0);
		for (uint64_t k = 0; k < 100; k++)
			if (k % 3 != 0) {
				assert_int_equal(slab_delete(t, k * 7919 +
								     cycle),
						 0);
				assert_int_equal(slab_insert(t,
							     k * 7919 + cycle +
								     1,
							     NULL, NULL, NULL),
						 0);
			}
	}
	slab_table_stats(t, &ts);
	assert_int_equal(ts.live, 100);
	assert_int_equal(ts.hwm, 100); /* no slot leaked */
	assert_int_equal(ts.free_rows, 0);
	assert_int_equal(pet_verify(t->pet, NULL), 0);
	slab_store_close(&st);
}

static void index_full_status(void **state)
{
	struct slab_store *st = dram_pool(64 * MiB);
	struct slab_table_cfg tc = {.name = "tight", .dim = 4,
				    .capacity = 8000, .index_load = 1.0};
	struct slab_table_stats ts;
	struct slab_table *t;
	uint64_t ok = 0, full = 0;

	assert_int_equal(slab_table_create(st, &tc, &t), 0);
	memset(&phantom, 0, sizeof(phantom));
	slab_test_insert_hook = phantom_hook; /* no refused row is ever LIVE */
	/* index has exactly 8000 slots: rows never run out first */
	for (uint64_t k = 0; k < 8000; k++) {
		int rc = slab_insert(t, k * 0x9E3779B97F4A7C15ULL, NULL, NULL,
				     NULL);

		if (rc == 0)
			ok++;
		else if (rc == RS_E_FULL)
			full++;
		else
			fail_msg("insert: %s", rs_strerror(rc));
	}
	slab_test_insert_hook = NULL;
	assert_int_equal(phantom.checked, 8000);
	assert_int_equal(phantom.accepted, 0);
	slab_table_stats(t, &ts);
	print_message("index fill %.2f%% (%llu refused)\n",
		      100 * ts.index.fill, (unsigned long long)full);
	assert_true(ts.index.fill >= 0.90);
	assert_int_equal(ts.live, ok);
	assert_int_equal(ts.live + ts.free_rows, ts.hwm); /* nothing leaked */
	slab_store_close(&st);
}

static void tables_and_extents(void **state)
{
	struct slab_store *st = dram_pool(32 * MiB);
	struct slab_table_cfg tc = {.name = "a", .dim = 16, .capacity = 1000};
	struct slab_table *t, *a;
	struct slab_store_info si;
	uint32_t r;
	struct slab_table_geom g;
	struct slab_region ri, rr, rd;
	uint64_t fp = slab_table_footprint(&tc, false);

	assert_true(fp >= SLAB_ALIGN && fp % SLAB_ALIGN == 0);
	assert_int_equal(slab_table_create(st, &tc, &a), 0);
	assert_int_equal(slab_table_create(st, &tc, &t), RS_E_EXISTS);
	tc.name = "";
	assert_int_equal(slab_table_create(st, &tc, &t), RS_E_INVAL);
	tc.name = "b";
	tc.dim = 0;
	assert_int_equal(slab_table_create(st, &tc, &t), RS_E_INVAL);
	tc.dim = 16;
	tc.capacity = 100000000; /* does not fit */
	assert_int_equal(slab_table_create(st, &tc, &t), RS_E_FULL);
	tc.capacity = 1000;
	assert_int_equal(slab_table_create(st, &tc, &t), 0);
	assert_int_not_equal(slab_table_id(t), slab_table_id(a));

	slab_table_geom(t, &g);
	slab_table_regions(t, &ri, &rr, &rd);
	slab_store_info(st, &si);
	assert_ptr_equal(ri.addr, (uint8_t *)si.base + g.index_off);
	assert_ptr_equal(rr.addr, (uint8_t *)si.base + g.rows_off);
	assert_int_equal(ri.len, g.index_len);
	assert_int_equal(rr.len, 1000 * g.rows.stride);
	assert_ptr_equal(rd.addr, ri.addr);
	assert_ptr_equal((uint8_t *)rd.addr + rd.len,
			 (uint8_t *)rr.addr + rr.len);
	{ /* a client parses the index header it READs */
		struct pet_geom pg;

		assert_int_equal(pet_header_parse(ri.addr, &pg), 0);
		assert_memory_equal(&pg, &g.index, sizeof(pg));
	}
	assert_int_equal(slab_insert(t, 1, NULL, NULL, NULL), 0);
	assert_int_equal(slab_table_drop(st, "a"), 0);
	assert_int_equal(slab_table_drop(st, "a"), RS_E_NOTFOUND);
	tc.name = "c";
	assert_int_equal(slab_table_create(st, &tc, &a), 0); /* reuses */
	assert_int_equal(slab_lookup(t, 1, &r), 0); /* t survived */
	slab_store_info(st, &si);
	assert_int_equal(si.ntables, 2);
	slab_store_close(&st);
}

/* ---- file pools and recovery ---- */

static struct slab_store *file_pool(uint64_t size)
{
	struct slab_store_cfg cfg = {.path = pool_path, .size = size,
				     .flags = SLAB_F_SPARSE};
	struct slab_store *st;
	int rc = slab_store_open(&st, &cfg);

	if (rc)
		fail_msg("open %s: %s", pool_path, rs_errormsg());
	return st;
}

static void file_reopen(void **state)
{
	struct slab_store *st = file_pool(32 * MiB);
	struct slab_table *t = mktable(st, "emb", 500, 3);
	struct slab_table_cfg tc2 = {.name = "half", .dim = 8,
				     .dtype = ROW_BF16, .capacity = 50};
	struct slab_store_info si;
	struct slab_table_stats ts;
	struct slab_table *t2;
	float v[DIM], out[DIM], s3[3] = {1, 2, 3}, so[3];

	slab_store_info(st, &si);
	assert_true(si.file_backed);
	assert_int_equal(si.boot_count, 1);
	assert_int_equal(slab_table_create(st, &tc2, &t2), 0);
	for (uint64_t k = 0; k < 40; k++) {
		fill_vals(v, k, 1);
		assert_int_equal(slab_insert(t, k, v, s3, NULL), 0);
		assert_int_equal(slab_insert(t2, ~k, v, NULL, NULL), 0);
	}
	for (uint64_t k = 0; k < 40; k += 4)
		assert_int_equal(slab_delete(t, k), 0);
	for (uint64_t k = 1; k < 40; k += 4) {
		struct slab_wr w = {.val = out, .state = so};

		assert_int_equal(slab_write_begin(t, k, &w), 0);
		fill_vals(w.val, k, 2);
		w.state[2] = (float)k;
		assert_int_equal(slab_write_commit(&w), 0);
	}
	slab_store_close(&st);

	st = file_pool(0);
	slab_store_info(st, &si);
	assert_int_equal(si.boot_count, 2);
	assert_int_equal(si.ntables, 2);
	t = slab_table_get(st, "emb");
	t2 = slab_table_get(st, "half");
	assert_non_null(t);
	assert_non_null(t2);
	slab_table_stats(t, &ts);
	assert_int_equal(ts.live, 30);
	assert_int_equal(ts.recovery.rows_live, 30);
	assert_int_equal(ts.recovery.rows_reclaimed, 0);
	assert_int_equal(ts.recovery.index.torn_buckets, 0);
	assert_int_equal(ts.free_rows, ts.hwm - 30);
	for (uint64_t k = 0; k < 40; k++) {
		int rc = slab_read(t, k, out, NULL);

		if (k % 4 == 0) {
			assert_int_equal(rc, RS_E_NOTFOUND);
			continue;
		}
		assert_int_equal(rc, 0);
		fill_vals(v, k, k % 4 == 1 ? 2 : 1);
		assert_memory_equal(out, v, sizeof(v));
		assert_int_equal(slab_read_state(t, k, so), 0);
		assert_float_equal(so[2], (k % 4 == 1 ? (float)k : 3), 0);
		fill_vals(v, k, 1);
		assert_int_equal(slab_read(t2, ~k, out, NULL), 0);
		assert_float_equal(out[1], row_bf16_to_f32(row_f32_to_bf16(
						   v[1])),
				   0);
	}
	/* the pool keeps working after recovery */
	assert_int_equal(slab_insert(t, 1000, NULL, NULL, NULL), 0);
	slab_store_close(&st);
}

/* Bytes of the READable range of t past its index (padding, row slots):
 * how many are not zero. */
static uint64_t readable_dirty(struct slab_table *t)
{
	struct slab_region ri, rd;
	uint64_t n = 0;

	slab_table_regions(t, &ri, NULL, &rd);
	for (size_t i = ri.len; i < rd.len; i++)
		n += ((uint8_t *)rd.addr)[i] != 0;
	return n;
}

/* A table dropped from a file pool leaves its bytes in the file; a new
 * table on the same extent must not expose any of them to READs. */
static void recreated_table_exposes_nothing(void **state)
{
	struct slab_store *st = file_pool(16 * MiB);
	struct slab_table *a = mktable(st, "old", 1000, 0), *b;
	struct slab_table_cfg tc = {.name = "new", .dim = 16, .capacity = 100};
	struct slab_table_geom ga, gb;
	float v[DIM];

	for (uint64_t k = 0; k < 500; k++) {
		fill_vals(v, k, 7);
		assert_int_equal(slab_insert(a, k, v, NULL, NULL), 0);
	}
	slab_table_geom(a, &ga);
	assert_int_equal(slab_table_drop(st, "old"), 0);
	assert_int_equal(slab_table_create(st, &tc, &b), 0);
	slab_table_geom(b, &gb);
	/* same extent; b's smaller index ends inside a's buckets, b's rows
	 * lie over a's index and rows */
	assert_int_equal(gb.index_off, ga.index_off);
	assert_true(gb.index_off + gb.index_len < gb.rows_off);
	assert_true(gb.rows_off < ga.rows_off + 500 * ga.rows.stride);
	assert_int_equal(readable_dirty(b), 0);
	slab_store_close(&st);
	st = file_pool(0); /* what the file holds */
	b = slab_table_get(st, "new");
	assert_non_null(b);
	assert_int_equal(readable_dirty(b), 0);
	slab_store_close(&st);
}

static void recover_crash_images(void **state)
{
	struct slab_store *st = file_pool(16 * MiB);
	struct slab_table *t = mktable(st, "emb", 200, 2);
	struct slab_table_stats ts;
	float v[DIM], out[DIM], sv[2], so[2];
	uint32_t r_upd, r_orphan, r;
	struct pet_loc loc;
	uint64_t *w, torn_bucket;
	uint8_t *bk;

	for (uint64_t k = 0; k < 50; k++) {
		fill_vals(v, k, 1);
		sv[0] = (float)k;
		sv[1] = 1;
		assert_int_equal(slab_insert(t, k, v, sv, NULL), 0);
	}
	/* (a) key 7: update acknowledged, then a second update "crashes"
	 * after its redo-log entry, with the row half written */
	{
		struct slab_wr wr = {.val = out, .state = so};

		assert_int_equal(slab_write_begin(t, 7, &wr), 0);
		fill_vals(wr.val, 7, 2);
		wr.state[1] = 2;
		assert_int_equal(slab_write_commit(&wr), 0);
		assert_int_equal(slab_write_begin(t, 7, &wr), 0);
		r_upd = wr.row;
		fill_vals(wr.val, 7, 3);
		wr.state[1] = 3;
		/* commit by hand up to the middle of the row copy */
		uint64_t *img = slab_stage(t, slab_stripe_of(r_upd));

		img[ROW_W_KEY] = 7;
		img[ROW_W_META] = row_meta(&t->rg, ROW_LIVE);
		row_payload_from_f32(&t->rg, wr.val, img + 4);
		slab_row_prepare(t, r_upd, img);
		/* log_write() is static: redo it here the same way */
		uint8_t *e = slab_log_entry(t, slab_stripe_of(r_upd));
		struct slab_log_hdr *h = (struct slab_log_hdr *)e;

		memcpy(e + SLAB_LOG_HDR, img, t->rg.stride);
		memcpy(e + SLAB_LOG_HDR + t->rg.stride, wr.state, 8);
		h->row = r_upd;
		h->checksum = slab_log_checksum(t, e);
		w = slab_row_words(t, r_upd);
		w[0] += 1;			 /* odd: inside */
		memcpy(w + 4, img + 4, 100);	 /* part of the payload */
		slab_write_abort(&wr);
	}
	/* (b) key 60: row written, index slot never published */
	{
		assert_int_equal(slab_insert(t, 60, NULL, NULL, &r_orphan), 0);
		assert_int_equal(pet_remove(t->pet, 60, NULL), 0);
	}
	/* (c) a crash in the middle of inserting key 61 into a bucket that
	 * holds acknowledged keys: slot filled, version odd, no checksum */
	{
		uint64_t bw[PET_BUCKET_WORDS];
		int s;

		pet_locate(pet_geometry(t->pet), 61, &loc);
		torn_bucket = loc.b[0];
		bk = (uint8_t *)t->index + pet_bucket_off(pet_geometry(t->pet),
							   torn_bucket);
		memcpy(bw, bk, sizeof(bw));
		for (s = 0; s < PET_SLOTS && ((uint8_t *)&bw[2])[s]; s++)
			;
		assert_true(s < PET_SLOTS);
		bw[0] += 1;
		((uint8_t *)&bw[2])[s] = loc.tag;
		bw[PET_W_KEY0 + s] = 61;
		memcpy(bk, bw, 8 * (PET_W_KEY0 + s + 1)); /* refs not yet */
		assert_int_equal(pet_bucket_validate(bk, torn_bucket,
						     pet_geometry(t->pet)
							     ->incarnation),
				 RS_E_TORN);
	}
	slab_store_close(&st);

	st = file_pool(0);
	t = slab_table_get(st, "emb");
	slab_table_stats(t, &ts);
	print_message("recovery: %llu replayed, %llu reclaimed, %llu torn "
		      "buckets, %llu slots dropped\n",
		      (unsigned long long)ts.recovery.log_replayed,
		      (unsigned long long)ts.recovery.rows_reclaimed,
		      (unsigned long long)ts.recovery.index.torn_buckets,
		      (unsigned long long)ts.recovery.index.dropped);
	assert_int_equal(ts.recovery.log_replayed, 1);
	assert_int_equal(ts.recovery.rows_reclaimed, 1); /* key 60 */
	assert_int_equal(ts.recovery.index.torn_buckets, 1);
	assert_int_equal(ts.recovery.index.dropped, 1); /* key 61 */
	assert_int_equal(ts.live, 50);
	/* key 7 is the logged (complete) image: generation 3 */
	assert_int_equal(slab_read(t, 7, out, NULL), 0);
	fill_vals(v, 7, 3);
	assert_memory_equal(out, v, sizeof(v));
	assert_int_equal(slab_read_state(t, 7, so), 0);
	assert_float_equal(so[1], 3, 0);
	for (uint64_t k = 0; k < 50; k++) {
		assert_int_equal(slab_lookup(t, k, &r), 0);
		if (k != 7) {
			fill_vals(v, k, 1);
			assert_int_equal(slab_read(t, k, out, NULL), 0);
			assert_memory_equal(out, v, sizeof(v));
		}
	}
	assert_int_equal(slab_lookup(t, 60, &r), RS_E_NOTFOUND);
	assert_int_equal(slab_lookup(t, 61, &r), RS_E_NOTFOUND);
	{ /* the orphan is now a tombstone: stale for a cached location */
		uint8_t raw[576];

		slab_read_row(t, r_orphan, raw);
		assert_int_equal(row_validate(raw, &t->rg, r_orphan, 60, NULL),
				 RS_E_STALE);
	}
	assert_int_equal(pet_bucket_validate((uint8_t *)t->index +
						     pet_bucket_off(
							     pet_geometry(
								     t->pet),
							     torn_bucket),
					     torn_bucket,
					     pet_geometry(t->pet)->incarnation),
			 0);
	assert_int_equal(pet_verify(t->pet, NULL), 0);
	slab_store_close(&st);
}

static void bad_pools_refused(void **state)
{
	struct slab_store_cfg cfg = {.path = pool_path};
	struct slab_store *st;
	FILE *f;

	/* no file, no size */
	assert_int_equal(slab_store_open(&st, &cfg), -ENOENT);
	/* not a pool */
	f = fopen(pool_path, "w");
	assert_non_null(f);
	for (int i = 0; i < 4 * 1024 * 1024; i++)
		fputc('x', f);
	fclose(f);
	assert_int_equal(slab_store_open(&st, &cfg), RS_E_CORRUPT);
	unlink(pool_path);
	/* damaged superblock */
	st = file_pool(8 * MiB);
	mktable(st, "x", 10, 0);
	((uint8_t *)st->base)[20] ^= 1;
	slab_store_close(&st);
	assert_int_equal(slab_store_open(&st, &cfg), RS_E_CORRUPT);
	assert_true(strstr(rs_errormsg(), "superblock") != NULL);
	/* DRAM pool too small, bad flags */
	cfg.path = NULL;
	cfg.size = 1 * MiB;
	assert_int_equal(slab_store_open(&st, &cfg), RS_E_INVAL);
	cfg.size = 8 * MiB;
	cfg.flags = 0x100;
	assert_int_equal(slab_store_open(&st, &cfg), RS_E_INVAL);
	/* huge pages requested: works with or without them */
	cfg.flags = SLAB_F_HUGEPAGES;
	assert_int_equal(slab_store_open(&st, &cfg), 0);
	slab_store_close(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(row_geometry_and_types),
		cmocka_unit_test(torn_rows_detected),
		cmocka_unit_test(dram_basic),
		cmocka_unit_test(stale_location_detected),
		cmocka_unit_test(phantom_rows_never_live),
		cmocka_unit_test(recreated_table_rejects_stale_reader),
		cmocka_unit_test(rows_full_then_reuse),
		cmocka_unit_test(index_full_status),
		cmocka_unit_test(tables_and_extents),
		cmocka_unit_test_setup_teardown(file_reopen, setup_path,
						teardown_path),
		cmocka_unit_test_setup_teardown(recreated_table_exposes_nothing,
						setup_path, teardown_path),
		cmocka_unit_test_setup_teardown(recover_crash_images,
						setup_path, teardown_path),
		cmocka_unit_test_setup_teardown(bad_pools_refused, setup_path,
						teardown_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
