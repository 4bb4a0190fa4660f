/*
 * test_powerfail.c - power-failure crash images of a file pool: recovery
 * of every image holds every acknowledged update.
 *
 * test_crash SIGKILLs a writer, which loses nothing that was stored: the
 * CPU caches and the page cache survive a process crash. A power failure
 * keeps only what reached the media. This test runs a single-threaded
 * workload on a pool opened with a persist hook (slab_store_open_hooked):
 * every slab_persist() call goes to the hook instead of a flush, and the
 * hook keeps a shadow of the media, into which it copies each flushed
 * range, rounded out to its unit:
 *   - pmem mode: cache lines (pmem_persist flushes whole lines); media
 *     words are 8 bytes, failure-atomic;
 *   - msync mode: 4 KiB pages (pmem_msync writes whole pages).
 * At a random sample of persist calls (a crash point: just before that
 * flush takes effect; random gaps of 150 flushes on average, 25 during
 * the update-delete-insert cycles below, where a slot is reused under an
 * older redo-log entry) it builds crash images: the shadow, plus a subset
 * of the units in which the live pool differs from the shadow (8-byte
 * words in pmem mode, pages in msync mode: the cache or the kernel may
 * write any of them back early): none, all, and two random subsets (each
 * unit taken with probability 1/8, 1/2 or 7/8). Each image is written to
 * a file (a memfd), opened with slab_store_open (recovery runs) and
 * checked with crash_check.h, as test_crash checks after a kill:
 *   - every acknowledged key holds exactly its last acknowledged write
 *     (payload and optimizer state), acknowledged deletes are absent, no
 *     key appears that was never inserted, the in-flight operation is old
 *     or new, no index-visible row fails validation, pet_verify passes;
 *   - the second table ("aux", created, written and dropped over and over
 *     on the same extent) exists iff its create was acknowledged and its
 *     drop was not, with its acknowledged row, or either way while a
 *     create or drop is in flight;
 *   - recovery is idempotent: the image is opened a second time and must
 *     show the same state with the in-flight outcome now fixed;
 *   - every 4th image is also cut by a power failure during its own
 *     recovery (the recovery's flushes go through the same hook, one of
 *     them is the crash point) and that image is recovered and checked.
 * The workload: inserts (fresh keys and keys deleted before, often into
 * the slot they had; 8% of the operations are an update, delete and
 * insert again of one key), optimizer updates (slab_write_begin/commit), puts
 * (overwrite and insert), get_or_insert, deletes, at up to 95% index fill
 * (cuckoo moves), plus create / put / drop of the second table.
 *
 * Not modelled: a word stored twice between two persist calls is only
 * seen with its value at the next persist call; torn sectors inside a
 * page in msync mode (the pmem mode's word subsets cover any mix).
 *
 * The test can fail. With an insert's order broken (its PENDING row not
 * persisted before the index slot is published, or its LIVE image not
 * persisted before it returns) it reports an acknowledged key missing at
 * the first crash point; with the redo log replayed over a row torn by a
 * later unlogged write (recovery before 0.4), an in-flight re-insert
 * holding the value from before the delete, within a few hundred images.
 * (Checked by breaking the engine temporarily; seeds 1-8 and 1-3.)
 *
 * RS_POWERFAIL_SEED (default 1) seeds the workload and the subsets; the
 * seed is printed (the tables' hash seeds are random, as in a node, so
 * cuckoo paths and the counts vary a little between runs).
 * RS_STRESS_SCALE (default 1) scales the share of flushes that are crash
 * points, so the number of images (about 550 per mode at 1; the floor the
 * test asserts scales with it); the workload (3000 operations) stays.
 * RS_POWERFAIL_VERBOSE prints every crash point. The workload's pool
 * goes to $TMPDIR, the images to a memfd.
 */
#include <fcntl.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "value/slab_int.h"

#include "crash_check.h"

#define CAPACITY 600
#define LIVE_MAX (CAPACITY * 95 / 100)
#define AUX_KEY 42
#define POOL_BYTES (6ULL << 20) /* superblock area + two 2 MiB extents */
#define LINE 64
#define PAGE 4096
#define MODEL_SLOTS 8192
#define GONE_MAX 1024

enum pf_mode { PF_PMEM, PF_MSYNC };
enum { AUX_NONE, AUX_CREATE, AUX_DROP, AUX_PUT };

/* The media of one hooked store: the shadow holds what was flushed. */
struct media {
	enum pf_mode mode;
	const uint8_t *base; /* the live mapping (from the hook) */
	uint8_t *shadow;
	uint64_t *dirty; /* offsets of the units where live != shadow */
	uint64_t ndirty;
};

struct pf {
	struct media live;	/* the workload's pool */
	struct media rec;	/* an image's pool while it recovers */
	uint8_t *img, *img2;
	char pool_path[256], img_path[64];
	int img_fd;
	uint64_t rng;
	uint32_t sample;   /* mean gap between crash points, in flushes */
	int64_t countdown; /* to the next one */
	bool sampling, verbose;
	bool in_cycle; /* in an update-delete-insert cycle: gaps / 6 */
	/* recovery crash: at the rec_at-th flush of the recovery (0: none) */
	uint64_t rec_calls, rec_at;
	bool rec_cut;
	struct crash_model m;
	struct crash_stats acc;
	/* second table: acknowledged state and the op in flight */
	bool aux_present;
	uint32_t aux_gen; /* of AUX_KEY; 0: absent */
	int aux_op;
	uint32_t aux_op_gen;
	/* counts */
	uint64_t persists, points, images, rec_images, units;
};

static struct pf pf;

static size_t unit_of(const struct media *md)
{
	return md->mode == PF_PMEM ? 8 : PAGE;
}

/* A flush of [addr, addr + len): rounded out to lines or pages. */
static void media_flush(struct media *md, const uint8_t *base,
			const void *addr, size_t len)
{
	size_t u = md->mode == PF_PMEM ? LINE : PAGE;
	size_t off = (size_t)((const uint8_t *)addr - base);
	size_t lo = off / u * u, hi = (off + len + u - 1) / u * u;

	assert_true(off < POOL_BYTES && len <= POOL_BYTES - off);
	if (hi > POOL_BYTES)
		hi = POOL_BYTES;
	memcpy(md->shadow + lo, base + lo, hi - lo);
}

static void media_find_dirty(struct media *md)
{
	md->ndirty = 0;
	for (size_t pg = 0; pg < POOL_BYTES; pg += PAGE) {
		if (!memcmp(md->base + pg, md->shadow + pg, PAGE))
			continue;
		if (md->mode == PF_MSYNC) {
			md->dirty[md->ndirty++] = pg;
			continue;
		}
		for (size_t w = pg; w < pg + PAGE; w += 8)
			if (memcmp(md->base + w, md->shadow + w, 8))
				md->dirty[md->ndirty++] = w;
	}
}

/* out = shadow + the dirty units each taken with probability q/8 (q = 8:
 * all of them). */
static void media_image(struct media *md, uint8_t *out, unsigned q)
{
	size_t u = unit_of(md);

	memcpy(out, md->shadow, POOL_BYTES);
	for (uint64_t i = 0; i < md->ndirty; i++) {
		if (q < 8 && (!q || crash_rnd(&pf.rng) % 8 >= q))
			continue;
		memcpy(out + md->dirty[i], md->base + md->dirty[i], u);
		pf.units++;
	}
}

/* The image file is a memfd (tmpfs: no file system readahead or
 * write-back), opened by the store through /proc/self/fd: cleared by
 * truncating it, then the image's non-zero pages written. */
static void write_image(const uint8_t *img)
{
	static const uint8_t zero[PAGE];

	assert_int_equal(ftruncate(pf.img_fd, 0), 0);
	assert_int_equal(ftruncate(pf.img_fd, POOL_BYTES), 0);
	for (size_t pg = 0; pg < POOL_BYTES; pg += PAGE)
		if (memcmp(img + pg, zero, PAGE))
			assert_int_equal(pwrite(pf.img_fd, img + pg, PAGE,
						(off_t)pg), PAGE);
}

/* ---- checking one image ---- */

struct aux_seen {
	bool exists;
	uint32_t gen;
};

static int aux_row(void *arg, uint64_t key, uint32_t row)
{
	struct slab_table *a = arg;
	uint8_t raw[ROW_HDR_BYTES + CRASH_DIM * 4 + 64];

	assert_true(key == AUX_KEY);
	slab_read_row(a, row, raw);
	assert_int_equal(row_validate(raw, &a->rg, row, key, NULL), 0);
	return 0;
}

static struct aux_seen check_aux(struct slab_store *st)
{
	struct slab_table *a = slab_table_get(st, "aux");
	struct aux_seen s = {.exists = a != NULL};
	float v[CRASH_DIM];

	if (pf.aux_op != AUX_CREATE && pf.aux_op != AUX_DROP)
		assert_int_equal(s.exists, pf.aux_present);
	if (!a)
		return s;
	assert_int_equal(pet_verify(a->pet, NULL), 0);
	assert_int_equal(slab_iterate(a, aux_row, a), 0);
	if (slab_read(a, AUX_KEY, v, NULL) == 0) {
		for (int j = 1; j < CRASH_DIM; j++)
			assert_true(v[j] == v[0]);
		s.gen = (uint32_t)v[0];
		assert_true(s.gen != 0);
	}
	if (pf.aux_op == AUX_CREATE && !pf.aux_present)
		assert_int_equal(s.gen, 0); /* a new table is empty */
	else if (pf.aux_op == AUX_PUT)
		assert_true(s.gen == pf.aux_gen || s.gen == pf.aux_op_gen);
	else
		assert_int_equal(s.gen, pf.aux_gen);
	return s;
}

static void rec_hook(void *ctx, const uint8_t *base, const void *addr,
		     size_t len)
{
	struct media *md = ctx;

	md->base = base;
	if (++pf.rec_calls == pf.rec_at) {
		media_find_dirty(md);
		media_image(md, pf.img2, (unsigned)(crash_rnd(&pf.rng) % 9));
		pf.rec_cut = true;
	}
	media_flush(md, base, addr, len);
}

/* Open the image file (recovery), check it against the model and the aux
 * state, twice: the second open must find the state the first left. */
static void check_file(void)
{
	struct slab_store_cfg cfg = {.path = pf.img_path,
				     .flags = SLAB_F_NOSYNC};
	struct crash_rec sin = pf.m.inflight;
	int shave = pf.m.have_inflight;
	struct crash_entry saved = {0}, *e = NULL;
	struct aux_seen first = {0};

	if (shave) {
		e = crash_model_get(&pf.m, sin.key, 1);
		saved = *e;
	}
	for (int pass = 0; pass < 2; pass++) {
		struct slab_store *st;
		struct slab_table *t;
		struct aux_seen s;

		if (slab_store_open(&st, &cfg))
			fail_msg("image %llu: open: %s",
				 (unsigned long long)pf.images, rs_errormsg());
		t = slab_table_get(st, "crash");
		assert_non_null(t);
		if (!pass)
			crash_stats_add(&pf.acc, t);
		crash_verify_table(&pf.m, t, pass ? NULL : &pf.acc);
		s = check_aux(st);
		if (!pass)
			first = s;
		else
			assert_true(s.exists == first.exists &&
				    s.gen == first.gen);
		slab_store_close(&st);
	}
	if (shave) {
		*e = saved;
		pf.m.inflight = sin;
		pf.m.have_inflight = 1;
	}
	pf.images++;
}

/* Check image pf.img; every 4th one is first cut by a power failure at a
 * random flush of its own recovery, and that image is checked instead. */
static void check_image(void)
{
	write_image(pf.img);
	if (pf.images % 4 == 3) {
		struct slab_store_cfg cfg = {.path = pf.img_path};
		struct slab_store *st;

		memcpy(pf.rec.shadow, pf.img, POOL_BYTES);
		pf.rec_calls = 0;
		pf.rec_at = 1 + crash_rnd(&pf.rng) % 24;
		pf.rec_cut = false;
		if (slab_store_open_hooked(&st, &cfg, rec_hook, &pf.rec))
			fail_msg("image %llu: open: %s",
				 (unsigned long long)pf.images, rs_errormsg());
		slab_store_close(&st);
		if (pf.rec_cut) { /* else the file holds the recovered pool */
			write_image(pf.img2);
			pf.rec_images++;
		}
	}
	check_file();
}

static void crash_point(void)
{
	static const unsigned q[] = {1, 4, 7};
	uint64_t n;

	pf.points++;
	media_find_dirty(&pf.live);
	n = pf.live.ndirty;
	if (pf.verbose)
		print_message("crash point at flush %llu: %llu dirty units, "
			      "op %d key %llu in flight\n",
			      (unsigned long long)pf.persists,
			      (unsigned long long)n,
			      pf.m.have_inflight ? pf.m.inflight.op : 0,
			      (unsigned long long)pf.m.inflight.key);
	media_image(&pf.live, pf.img, 0); /* only what was flushed */
	check_image();
	if (!n)
		return;
	media_image(&pf.live, pf.img, 8); /* everything written */
	check_image();
	for (int i = 0; i < 2; i++) {
		media_image(&pf.live, pf.img, q[crash_rnd(&pf.rng) % 3]);
		check_image();
	}
}

static void live_hook(void *ctx, const uint8_t *base, const void *addr,
		      size_t len)
{
	struct media *md = ctx;

	md->base = base;
	pf.persists++;
	/* crash points at random gaps averaging `sample` flushes (a sixth
	 * of that inside a cycle): their number varies little */
	if (pf.sampling) {
		pf.countdown -= pf.in_cycle ? 6 : 1;
		if (pf.countdown <= 0) {
			pf.countdown = 1 + (int64_t)(crash_rnd(&pf.rng) %
						     (2 * pf.sample));
			crash_point();
		}
	}
	media_flush(md, base, addr, len);
}

/* ---- the workload ---- */

struct keys {
	uint64_t live[CAPACITY], nlive;
	uint64_t gone[GONE_MAX], ngone; /* deleted, most recent last */
	uint64_t fresh;
};

/* A key to insert: the one deleted last (when `again`, or half the
 * time: it often gets its old slot back), else a new one. */
static uint64_t new_key(struct keys *k, bool again)
{
	if (k->ngone && (again || crash_rnd(&pf.rng) % 2))
		return k->gone[--k->ngone];
	return k->fresh++;
}

enum { K_INSERT, K_UPDATE, K_PUT, K_GOI, K_DELETE, K_CYCLE };

static int pick_kind(const struct keys *k, bool room)
{
	uint64_t x = crash_rnd(&pf.rng) % 100;

	if (!k->nlive || (x < 40 && room))
		return K_INSERT;
	if (x < 60)
		return K_UPDATE;
	if (x < 70)
		return K_PUT;
	if (x < 77)
		return K_GOI;
	return x < 92 ? K_DELETE : K_CYCLE;
}

/* One operation of `kind` (-1: a random one) on the key at live[*pi]
 * (*pi past the end: a random one), or on a key to insert. */
static void main_op(struct slab_table *t, struct keys *k, uint32_t gen,
		    int kind, uint64_t *pi)
{
	uint64_t i = 0;
	bool room = k->nlive < LIVE_MAX, fresh, created = false;
	struct crash_rec r = {.gen = gen, .sgen = gen, .op = OP_INSERT};
	float val[CRASH_DIM], state[CRASH_SFLOATS];
	struct crash_entry *e = NULL;
	int rc;

	if (kind < 0)
		kind = pick_kind(k, room);
	if (kind == K_CYCLE) { /* update, delete, insert again */
		uint64_t ci = crash_rnd(&pf.rng) % k->nlive;

		pf.in_cycle = true;
		main_op(t, k, gen, K_UPDATE, &ci);
		main_op(t, k, gen + 1, K_DELETE, &ci);
		if (k->nlive < LIVE_MAX)
			main_op(t, k, gen + 2, K_INSERT, &ci);
		pf.in_cycle = false;
		return;
	}
	fresh = kind == K_INSERT ||
		((kind == K_PUT || kind == K_GOI) && room &&
		 crash_rnd(&pf.rng) % 2);
	if (fresh) {
		r.key = new_key(k, pi != NULL);
	} else {
		i = pi && *pi < k->nlive ? *pi : crash_rnd(&pf.rng) % k->nlive;
		r.key = k->live[i];
		e = crash_model_get(&pf.m, r.key, 0);
		assert_true(e && e->present);
		r.op = kind == K_DELETE ? OP_DELETE : OP_UPDATE;
		if (kind == K_PUT)
			r.sgen = e->sgen; /* the payload only */
		else if (kind == K_GOI)
			r.gen = e->gen, r.sgen = e->sgen; /* no change */
	}
	if (fresh && kind == K_PUT)
		r.sgen = 0; /* inserted by a put: state zeros */
	crash_fill(r.key, r.gen, r.sgen, val, state);
	r.phase = PH_BEGIN;
	crash_model_apply(&pf.m, &r);
	pf.sampling = true;
	switch (kind) {
	case K_INSERT:
		rc = slab_insert(t, r.key, val, state, NULL);
		break;
	case K_UPDATE: {
		float wv[CRASH_DIM], ws[CRASH_SFLOATS];
		struct slab_wr w = {.val = wv, .state = ws};

		assert_int_equal(slab_write_begin(t, r.key, &w), 0);
		crash_fill(r.key, gen, gen, w.val, w.state);
		rc = slab_write_commit(&w);
		break;
	}
	case K_PUT:
		rc = slab_put(t, r.key, val, &created);
		break;
	case K_GOI:
		rc = slab_get_or_insert(t, r.key, val, state, NULL, &created);
		break;
	default:
		rc = slab_delete(t, r.key);
		break;
	}
	pf.sampling = false;
	if (rc == RS_E_FULL && fresh) { /* index full: no effect */
		pf.m.have_inflight = 0;
		return;
	}
	assert_int_equal(rc, 0);
	if (kind == K_PUT || kind == K_GOI)
		assert_int_equal(created, fresh);
	r.phase = PH_ACK;
	crash_model_apply(&pf.m, &r);
	if (fresh) {
		k->live[k->nlive++] = r.key;
	} else if (kind == K_DELETE) {
		k->live[i] = k->live[--k->nlive];
		if (k->ngone < GONE_MAX)
			k->gone[k->ngone++] = r.key;
	}
}

static void aux_op(struct slab_store *st, uint32_t gen)
{
	struct slab_table_cfg ac = {.name = "aux", .dim = CRASH_DIM,
				    .capacity = 64};
	float val[CRASH_DIM];

	for (int j = 0; j < CRASH_DIM; j++)
		val[j] = (float)gen;
	pf.aux_op = !pf.aux_present ? AUX_CREATE
		    : crash_rnd(&pf.rng) % 3 ? AUX_PUT
					     : AUX_DROP;
	pf.aux_op_gen = gen;
	pf.sampling = true;
	if (pf.aux_op == AUX_CREATE) {
		assert_int_equal(slab_table_create(st, &ac, NULL), 0);
		pf.aux_present = true;
		pf.aux_gen = 0;
	} else if (pf.aux_op == AUX_PUT) {
		assert_int_equal(slab_put(slab_table_get(st, "aux"), AUX_KEY,
					  val, NULL), 0);
		pf.aux_gen = gen;
	} else {
		assert_int_equal(slab_table_drop(st, "aux"), 0);
		pf.aux_present = false;
		pf.aux_gen = 0;
	}
	pf.sampling = false;
	pf.aux_op = AUX_NONE;
}

static double scale(void)
{
	const char *s = getenv("RS_STRESS_SCALE");
	double f = s ? atof(s) : 1.0;

	return f > 0 ? f : 1.0;
}

static void report(enum pf_mode mode, uint64_t nops,
		   const struct slab_table_stats *ts, uint64_t images,
		   uint64_t rec_images)
{
	print_message("%s mode: %llu ops, %llu flushes, %llu crash points, "
		      "%llu images (%llu cut again during their recovery), "
		      "%llu unflushed units taken; recovery: %llu log "
		      "replays, %llu rows reclaimed (%llu torn), %llu torn "
		      "buckets, %llu slots dropped; %llu cuckoo moves, %llu "
		      "keys live\n",
		      mode == PF_PMEM ? "pmem (8-byte words, lines)"
				      : "msync (pages)",
		      (unsigned long long)nops,
		      (unsigned long long)pf.persists,
		      (unsigned long long)pf.points,
		      (unsigned long long)images,
		      (unsigned long long)rec_images,
		      (unsigned long long)pf.units,
		      (unsigned long long)pf.acc.replayed,
		      (unsigned long long)pf.acc.reclaimed,
		      (unsigned long long)pf.acc.torn_rows,
		      (unsigned long long)pf.acc.torn_buckets,
		      (unsigned long long)pf.acc.dropped,
		      (unsigned long long)ts->index.displacements,
		      (unsigned long long)ts->live);
}

static void run_mode(enum pf_mode mode, uint64_t seed, double sc)
{
	struct slab_store_cfg cfg = {.path = pf.pool_path,
				     .size = POOL_BYTES,
				     .flags = SLAB_F_SPARSE};
	struct slab_table_cfg tc = {.name = "crash", .dim = CRASH_DIM,
				    .capacity = CAPACITY,
				    .state_floats = CRASH_SFLOATS,
				    .index_load = 1.0};
	uint64_t nops = 3000, floor;
	struct slab_table_stats ts;
	struct slab_store *st;
	struct slab_table *t;
	struct keys *k = calloc(1, sizeof(*k));
	uint64_t images0 = pf.images, rec0 = pf.rec_images;

	assert_non_null(k);
	k->fresh = 1ULL << 40;
	k->live[0] = 0; /* keys 0 and all-ones are keys like any other */
	k->gone[0] = UINT64_MAX;
	k->ngone = 1;
	crash_model_init(&pf.m, MODEL_SLOTS);
	memset(&pf.acc, 0, sizeof(pf.acc));
	pf.live.mode = pf.rec.mode = mode;
	memset(pf.live.shadow, 0, POOL_BYTES); /* a new file reads as zeros */
	pf.rng = seed;
	pf.countdown = pf.sample;
	pf.aux_present = false;
	pf.aux_gen = 0;
	pf.aux_op = AUX_NONE;
	unlink(pf.pool_path);
	assert_int_equal(slab_store_open_hooked(&st, &cfg, live_hook,
						&pf.live), 0);
	assert_int_equal(slab_table_create(st, &tc, &t), 0);
	{ /* key 0 first (row 0), so that it is in every image */
		struct crash_rec r = {.key = 0, .gen = 1, .sgen = 1,
				      .op = OP_INSERT, .phase = PH_ACK};
		float val[CRASH_DIM], state[CRASH_SFLOATS];

		crash_fill(0, 1, 1, val, state);
		assert_int_equal(slab_insert(t, 0, val, state, NULL), 0);
		crash_model_apply(&pf.m, &r);
		k->nlive = 1;
	}
	for (uint64_t n = 0; n < nops; n++) {
		uint32_t gen = 3 * (uint32_t)n + 2; /* a cycle takes 3 */

		if (crash_rnd(&pf.rng) % 100 < 3)
			aux_op(st, gen);
		else
			main_op(t, k, gen, -1, NULL);
	}
	/* all acknowledged, nothing in flight: the shadow alone */
	media_image(&pf.live, pf.img, 0);
	write_image(pf.img);
	check_file();
	slab_table_stats(t, &ts);
	report(mode, nops, &ts, pf.images - images0, pf.rec_images - rec0);
	/* not vacuous: many images (about 550 x scale expected), cuckoo
	 * moves ran, and at full scale recovery had torn state to repair */
	floor = (uint64_t)(250 * sc);
	assert_true(pf.images - images0 >= (floor > 20 ? floor : 20));
	assert_true(ts.index.displacements > 0);
	if (sc >= 0.5) {
		assert_true(pf.acc.replayed > 0 && pf.acc.reclaimed > 0);
		if (mode == PF_PMEM)
			assert_true(pf.acc.torn_rows > 0 &&
				    pf.acc.torn_buckets > 0);
	}
	slab_store_close(&st);
	unlink(pf.pool_path);
	free(pf.m.map);
	free(k);
	pf.persists = pf.points = pf.units = 0;
}

static void power_failure_images(void **state)
{
	const char *s = getenv("RS_POWERFAIL_SEED");
	const char *d = getenv("TMPDIR");
	uint64_t seed = s ? strtoull(s, NULL, 0) : 1;
	double sc = scale();

	(void)state;
	pf.verbose = getenv("RS_POWERFAIL_VERBOSE") != NULL;
	pf.sample = (uint32_t)(150 / sc);
	if (pf.sample < 1)
		pf.sample = 1;
	/* each image opens a store twice: keep glibc from returning its
	 * buffers to the kernel every time (TLB flushes dominate in a VM) */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	snprintf(pf.pool_path, sizeof(pf.pool_path), "%s/rs-test-pf-%d.pool",
		 d && *d ? d : "/tmp", (int)getpid());
	pf.img_fd = memfd_create("rs-test-pf-image", 0);
	assert_true(pf.img_fd >= 0);
	snprintf(pf.img_path, sizeof(pf.img_path), "/proc/self/fd/%d",
		 pf.img_fd);
	pf.live.shadow = malloc(POOL_BYTES);
	pf.rec.shadow = malloc(POOL_BYTES);
	pf.img = malloc(POOL_BYTES);
	pf.img2 = malloc(POOL_BYTES);
	pf.live.dirty = malloc(POOL_BYTES / 8 * sizeof(uint64_t));
	pf.rec.dirty = malloc(POOL_BYTES / 8 * sizeof(uint64_t));
	assert_true(pf.live.shadow && pf.rec.shadow && pf.img && pf.img2 &&
		    pf.live.dirty && pf.rec.dirty);
	print_message("seed %llu (RS_POWERFAIL_SEED), scale %.2f\n",
		      (unsigned long long)seed, sc);
	run_mode(PF_PMEM, seed, sc);
	run_mode(PF_MSYNC, seed, sc);
	print_message("power failure images: %llu checked (%llu cut during "
		      "recovery), all recovered holding every acknowledged "
		      "update\n", (unsigned long long)pf.images,
		      (unsigned long long)pf.rec_images);
	close(pf.img_fd);
	free(pf.live.shadow);
	free(pf.rec.shadow);
	free(pf.img);
	free(pf.img2);
	free(pf.live.dirty);
	free(pf.rec.dirty);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(power_failure_images),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
