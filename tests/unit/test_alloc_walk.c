/*
 * test_alloc_walk.c - every allocation of the storage side's operations
 * failed in turn (src/common/alloc.h), PMDK style: for each operation a
 * clean run counts its allocations N; then for k = 1..N the kth one fails
 * and the operation must return -ENOMEM (never crash, never succeed with
 * something missing), leak nothing (the sanitizer tree's LeakSanitizer
 * checks at exit), and a clean run of the same operation right after must
 * succeed with every key and value in place. Each k asserts that the
 * armed failure really fired, so the walk cannot pass vacuously.
 *
 * The operations, on tiny tables (two tables, a few dozen keys):
 *   - config: a node's configuration parsed (tables, keys, paths, the
 *     coordination section);
 *   - catalog: table specs as pool catalog records and back, and a
 *     layout-2 JSON catalog file parsed;
 *   - create: a file pool, two tables with catalog records, their keys;
 *   - open: that pool opened again (recovery), every key read back;
 *   - checkpoint: both tables dumped into part files and a MANIFEST
 *     (src/server/srv_slab_ckpt.c, src/ckpt), checked with ckpt_verify;
 *   - restore: that checkpoint loaded into the tables of a fresh store;
 *   - dump: the node's side of a checkpoint (srv_ckpt_dump, frozen), a
 *     full part of a table with its state, and an incremental one (the
 *     rows changed and the keys deleted since the full one);
 *   - adoption: the node's plan of a configuration it adopts
 *     (srv_copy_plan: the ranges it gains, what it keeps, the removal of
 *     the rows it held of gained ranges), as a joining node and as the
 *     survivor of a failure. The copy itself runs over verbs (COPY to the
 *     primary, rxe tests only).
 *
 * jansson's allocations count too: the test hands it rs_malloc
 * (json_set_alloc_funcs, process-wide, so only here and not in the
 * library), so a JSON text parsed or written (the config, a catalog
 * record, a MANIFEST) fails as the library's own allocations do. A text
 * that fails to parse is parsed again (src/common/rs_json.h): a run of
 * config, catalog or restore may then succeed in spite of the failure,
 * and is checked whole like a clean one.
 *
 * Built where RS_FAULT_INJECT is defined (Debug and sanitizer trees);
 * elsewhere it skips (77).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "common/alloc.h"
#include "common/rs_internal.h"
#include "recstore/log.h"

#ifndef RS_FAULT_INJECT
int main(void)
{
	printf("skip: built without RS_FAULT_INJECT (a Debug or sanitizer "
	       "tree has it)\n");
	return 77;
}
#else

#include "ckpt/ckpt.h"
#include "server/config.h"
#include "server/srv_catalog.h"
#include "server/srv_repl_int.h"
#include "server/srv_slab_ckpt.h"
#include "value/optimizer.h"
#include "value/slab.h"

#define NT 2
#define MiB (1ull << 20)

/* the tables: name, dim, optimizer (state floats), keys, catalog record */
static const struct tdef {
	const char *name;
	uint32_t dim;
	uint32_t optim;
	uint64_t nkeys;
	const char *rec;
} tdefs[NT] = {
	{ "a", 4, OPTIM_SGD, 24, "{\"spec\": \"a\"}" },
	{ "b", 3, OPTIM_ADAGRAD, 12, "{\"spec\": \"b\"}" },
};

struct fx {
	char dir[512], pool[600], ck[600];
	struct slab_store *src;		/* the checkpoint's source (DRAM) */
	struct slab_store *dst;		/* a restore's target (DRAM) */
	/* adoption */
	struct rs_server *s;
	struct srv_table *tab;
	struct srv_cfg g, g0;
	struct memb_member m[3], m0[3];
	bool survivor;
};

static uint32_t sf_of(const struct tdef *d)
{
	return (uint32_t)optim_state_floats(d->optim, d->dim);
}

/* key k of table d: keys 1, 4, 7, ... (3k + 1); values from the key */
static uint64_t key_of(uint64_t i)
{
	return 3 * i + 1;
}

static void val_of(const struct tdef *d, uint64_t key, float *v, float *s)
{
	for (uint32_t j = 0; j < d->dim; j++)
		v[j] = (float)key * 0.25f + (float)j;
	for (uint32_t j = 0; s && j < sf_of(d); j++)
		s[j] = (float)key * 0.5f + (float)j + 0.125f;
}

/* Every key of d in t, with its value and state. */
static void check_table(struct slab_table *t, const struct tdef *d)
{
	float v[8], s[8], got[8];

	assert_non_null(t);
	assert_int_equal(slab_table_live(t), d->nkeys);
	for (uint64_t i = 0; i < d->nkeys; i++) {
		uint64_t k = key_of(i);

		val_of(d, k, v, s);
		if (slab_read(t, k, got, NULL))
			fail_msg("table %s: key %" PRIu64 " missing", d->name,
				 k);
		assert_memory_equal(got, v, d->dim * sizeof(float));
		if (!sf_of(d))
			continue;
		assert_int_equal(slab_read_state(t, k, got), 0);
		assert_memory_equal(got, s, sf_of(d) * sizeof(float));
	}
}

static void check_store(struct slab_store *st, bool catalog)
{
	char rec[SLAB_CATALOG_MAX + 1];

	for (int i = 0; i < NT; i++) {
		struct slab_table *t = slab_table_get(st, tdefs[i].name);
		int len;

		check_table(t, &tdefs[i]);
		if (!catalog)
			continue;
		len = slab_table_catalog(st, t, rec, SLAB_CATALOG_MAX);
		assert_int_equal(len, (int)strlen(tdefs[i].rec));
		assert_memory_equal(rec, tdefs[i].rec, (size_t)len);
	}
}

/* The tables of tdefs in st (with their records if catalog), filled
 * (fill): 0 or the first error. */
static int make_tables(struct slab_store *st, bool catalog, bool fill)
{
	float v[8], s[8];
	int ret;

	for (int i = 0; i < NT; i++) {
		const struct tdef *d = &tdefs[i];
		struct slab_table_cfg c = {
			.name = d->name, .dim = d->dim, .capacity = 64,
			.state_floats = sf_of(d),
			.catalog = catalog ? d->rec : NULL,
			.catalog_len = catalog ? (uint32_t)strlen(d->rec) : 0 };
		struct slab_table *t;

		if ((ret = slab_table_create(st, &c, &t)))
			return ret;
		for (uint64_t j = 0; fill && j < d->nkeys; j++) {
			val_of(d, key_of(j), v, s);
			ret = slab_insert(t, key_of(j), v, sf_of(d) ? s : NULL,
					  NULL);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static struct slab_store *dram(void)
{
	struct slab_store_cfg cfg = { .size = 8 * MiB };
	struct slab_store *st = NULL;

	if (slab_store_open(&st, &cfg))
		fail_msg("DRAM store: %s", rs_errormsg());
	return st;
}

/* ---- the walk ---- */

struct op {
	const char *name;
	void (*prepare)(struct fx *f);	/* before each run, not counted */
	int (*run)(struct fx *f);	/* the operation: 0 or an error */
	void (*check)(struct fx *f);	/* after a run that succeeded */
	void (*after_fail)(struct fx *f); /* after one that failed (or NULL) */
	/* JSON is parsed again after a failure (src/common/rs_json.h): a
	 * run may succeed in spite of the failure, and must then be whole */
	bool absorbs;
};

static int run_counted(const struct op *op, struct fx *f, unsigned long k)
{
	int ret;

	op->prepare(f);
	rs_fi_arm(RS_FI_ALLOC, k);
	rs_fi_enroll(true);
	ret = op->run(f);
	rs_fi_enroll(false);
	return ret;
}

/* Walk op's allocations; returns how many there were. */
static unsigned long walk(const struct op *op, struct fx *f)
{
	struct timespec t0, t1;
	unsigned long n, absorbed = 0;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = run_counted(op, f, 0);
	if (ret)
		fail_msg("%s: clean run: %d (%s)", op->name, ret,
			 rs_errormsg());
	n = rs_fi_calls(RS_FI_ALLOC);
	assert_true(n > 0);
	assert_false(rs_fi_fired());
	op->check(f);
	for (unsigned long k = 1; k <= n; k++) {
		ret = run_counted(op, f, k);
		if (!rs_fi_fired())
			fail_msg("%s: allocation %lu of %lu not reached (%lu "
				 "counted)", op->name, k, n,
				 rs_fi_calls(RS_FI_ALLOC));
		if (!ret && op->absorbs) {	/* parsed again: whole? */
			op->check(f);
			absorbed++;
		} else if (ret != -ENOMEM)
			fail_msg("%s: allocation %lu of %lu failed: returned "
				 "%d (%s), not -ENOMEM", op->name, k, n, ret,
				 ret ? rs_errormsg() : "success");
		if (op->after_fail)
			op->after_fail(f);
		ret = run_counted(op, f, 0);
		if (ret)
			fail_msg("%s: clean run after allocation %lu failed: "
				 "%d (%s)", op->name, k, ret, rs_errormsg());
		if (rs_fi_calls(RS_FI_ALLOC) != n)
			fail_msg("%s: clean run after allocation %lu failed: "
				 "%lu allocations, not %lu", op->name, k,
				 rs_fi_calls(RS_FI_ALLOC), n);
		op->check(f);
	}
	rs_fi_arm(RS_FI_ANY, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%s: %lu allocations, each failed once: -ENOMEM", op->name, n);
	if (op->absorbs)
		printf(" or (%lu of them) absorbed by parsing again, whole",
		       absorbed);
	printf("; then a clean run intact (%.0f ms)\n",
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	return n;
}

/* ---- create and open ---- */

static void create_prepare(struct fx *f)
{
	unlink(f->pool);
}

static int create_run(struct fx *f)
{
	struct slab_store_cfg cfg = { .path = f->pool, .size = 16 * MiB,
				      .flags = SLAB_F_SPARSE };
	struct slab_store *st = NULL;
	int ret;

	if ((ret = slab_store_open(&st, &cfg)))
		return ret;
	ret = make_tables(st, true, true);
	slab_store_close(&st);
	return ret;
}

/* the pool, opened without failures: every key of both tables */
static void pool_check(struct fx *f)
{
	struct slab_store_cfg cfg = { .path = f->pool };
	struct slab_store *st = NULL;

	if (slab_store_open(&st, &cfg))
		fail_msg("open %s: %s", f->pool, rs_errormsg());
	check_store(st, true);
	slab_store_close(&st);
}

/* What a failed create left opens, and a table in it is whole. */
static void create_after_fail(struct fx *f)
{
	struct slab_store_cfg cfg = { .path = f->pool };
	struct slab_store *st = NULL;

	if (access(f->pool, F_OK))
		return;
	if (slab_store_open(&st, &cfg))
		fail_msg("a failed create's pool: %s", rs_errormsg());
	for (int i = 0; i < NT; i++) {
		struct slab_table *t = slab_table_get(st, tdefs[i].name);

		if (t)
			assert_true(slab_table_live(t) <= tdefs[i].nkeys);
	}
	slab_store_close(&st);
}

static void nothing(struct fx *f)
{
	(void)f;
}

static int open_run(struct fx *f)
{
	struct slab_store_cfg cfg = { .path = f->pool };
	struct slab_store *st = NULL;
	int ret;

	if ((ret = slab_store_open(&st, &cfg)))
		return ret;
	check_store(st, true);
	slab_store_close(&st);
	return 0;
}

static const struct op op_create = { "create", create_prepare, create_run,
				     pool_check, create_after_fail, false };
static const struct op op_open = { "open", nothing, open_run, pool_check,
				   NULL, false };

/* ---- checkpoint and restore ---- */

static void manifest_of(struct ckpt_manifest *m, struct ckpt_table_entry *te,
			struct ckpt_part_entry *pe)
{
	memset(m, 0, sizeof(*m));
	ckpt_new_id(m->id);
	m->kind = CKPT_FULL;
	m->created_ms = 1764000000123ull;
	m->ntables = NT;
	m->tables = te;
	memset(te, 0, NT * sizeof(*te));
	memset(pe, 0, NT * sizeof(*pe));
	for (int i = 0; i < NT; i++) {
		snprintf(te[i].spec.name, sizeof(te[i].spec.name), "%s",
			 tdefs[i].name);
		te[i].spec.dim = tdefs[i].dim;
		te[i].spec.dtype = PROTO_DTYPE_FP32;
		te[i].spec.capacity = 64;
		te[i].spec.optim = (struct optim_params){
			.kind = tdefs[i].optim, .lr = 0.01f, .eps = 1e-8f,
			.initial_accumulator = 0.1f };
		te[i].state_floats = sf_of(&tdefs[i]);
		te[i].nparts = 1;
		te[i].parts = &pe[i];
		snprintf(pe[i].file, sizeof(pe[i].file), "t%d-p0.rsck", i);
	}
}

static void ck_clear(struct fx *f)
{
	char p[PATH_MAX];

	for (int i = 0; i < NT; i++) {
		snprintf(p, sizeof(p), "%s/t%d-p0.rsck", f->ck, i);
		unlink(p);
	}
	snprintf(p, sizeof(p), "%s/MANIFEST", f->ck);
	unlink(p);
}

static int dump_one(struct fx *f, const struct ckpt_manifest *m, int i)
{
	struct ckpt_part_desc d;
	struct ckpt_writer *w;
	char path[PATH_MAX];
	uint64_t rows;
	int ret;

	ckpt_part_desc_for(m, (uint32_t)i, 0, &d);
	snprintf(path, sizeof(path), "%s/%s", f->ck, m->tables[i].parts->file);
	if ((ret = ckpt_part_create(&w, path, &d, 0)))
		return ret;
	ret = slab_table_dump(slab_table_get(f->src, tdefs[i].name), w, &d,
			      &rows);
	if (ret) {
		ckpt_part_abort(w);
		return ret;
	}
	return ckpt_part_finish(w, &m->tables[i].parts->sum);
}

static int ckpt_run(struct fx *f)
{
	struct ckpt_table_entry te[NT];
	struct ckpt_part_entry pe[NT];
	struct ckpt_manifest m;
	int ret = 0;

	manifest_of(&m, te, pe);
	for (int i = 0; !ret && i < NT; i++)
		ret = dump_one(f, &m, i);
	if (!ret)
		ret = ckpt_manifest_save(f->ck, &m);
	if (ret)
		ck_clear(f);	/* the checkpointer's part: no MANIFEST */
	return ret;
}

static int restore_run(struct fx *f)
{
	struct ckpt_manifest *m;
	int ret;

	if ((ret = ckpt_manifest_load(f->ck, &m)))
		return ret;
	for (uint32_t i = 0; !ret && i < m->ntables; i++) {
		struct ckpt_reader *r;
		struct ckpt_part_desc d;
		struct slab_load_stats ls;
		char path[PATH_MAX];

		ckpt_part_desc_for(m, i, 0, &d);
		snprintf(path, sizeof(path), "%s/%s", f->ck,
			 m->tables[i].parts[0].file);
		if ((ret = ckpt_part_open(&r, path, &d)))
			break;
		ret = slab_table_load(slab_table_get(f->dst,
						     m->tables[i].spec.name),
				      r, &ls);
		ckpt_part_close(r);
	}
	ckpt_manifest_free(m);
	return ret;
}

/* a fresh target for a restore */
static void restore_prepare(struct fx *f)
{
	slab_store_close(&f->dst);
	f->dst = dram();
	assert_int_equal(make_tables(f->dst, false, false), 0);
}

static void restore_check(struct fx *f)
{
	check_store(f->dst, false);
}

/* the checkpoint verifies and restores whole */
static void ckpt_check(struct fx *f)
{
	struct ckpt_verify_stats vs;
	uint64_t keys = 0;

	if (ckpt_verify(f->ck, &vs))
		fail_msg("verify: %s", rs_errormsg());
	for (int i = 0; i < NT; i++)
		keys += tdefs[i].nkeys;
	assert_int_equal(vs.rows, keys);
	restore_prepare(f);
	assert_int_equal(restore_run(f), 0);
	restore_check(f);
}

static const struct op op_ckpt = { "checkpoint", ck_clear, ckpt_run,
				   ckpt_check, NULL, false };
static const struct op op_restore = { "restore", restore_prepare,
				      restore_run, restore_check, NULL, true };

/* ---- adoption: srv_copy_plan ---- */

#define AD_KEYS 64u

static void members(struct memb_member *m, const enum memb_state *st,
		    uint64_t since)
{
	for (int i = 0; i < 3; i++) {
		memset(&m[i], 0, sizeof(m[i]));
		snprintf(m[i].id, sizeof(m[i].id), "n%d", i);
		snprintf(m[i].addr, sizeof(m[i].addr), "10.0.0.%d:7000", i);
		m[i].inc = 1;
		m[i].state = st[i];
		m[i].since = since;
	}
}

static void cfg_make(struct srv_cfg *g, struct memb_member *m,
		     uint64_t epoch, int me)
{
	memset(g, 0, sizeof(*g));
	g->c = (struct memb_config){ .epoch = epoch, .r = 2, .vnodes = 8,
				     .n = 3, .m = m };
	assert_int_equal(memb_placement_new(&g->pl, &g->c), 0);
	assert_int_equal(memb_placement_target(&g->tpl, &g->c), 0);
	g->self = m[me].state == MEMB_ACTIVE ? me : -1;
	g->tself = me;
}

static void cfg_clear(struct srv_cfg *g)
{
	memb_placement_free(&g->pl);
	memb_placement_free(&g->tpl);
	free(g->gain);
	g->gain = NULL;
	g->ngain = 0;
}

/* Every key in the table again, and the configuration before (the
 * survivor: the epoch it held its ranges in) adopted, uncounted. */
static void adopt_prepare(struct fx *f)
{
	static const uint8_t tag[SLAB_TRACK_TAG_BYTES];
	struct slab_table *t = f->tab->st;
	float v[8];

	/* the deletions a plan makes are tracked for the next incremental
	 * checkpoint: a fresh list, with room for them (one deletion), so
	 * that every plan makes the same allocations */
	for (uint64_t k = 0; k < AD_KEYS; k++) {
		val_of(&tdefs[0], k, v, NULL);
		assert_int_equal(slab_put(t, k, v, NULL), 0);
	}
	slab_track_reset(t, tag);
	assert_int_equal(slab_delete(t, 0), 0);
	val_of(&tdefs[0], 0, v, NULL);
	assert_int_equal(slab_put(t, 0, v, NULL), 0);
	free(f->g.gain);
	f->g.gain = NULL;
	f->g.ngain = 0;
	srv_copy_fini(f->s);
	if (f->survivor) {
		free(f->g0.gain);
		f->g0.gain = NULL;
		f->g0.ngain = 0;
		assert_int_equal(srv_copy_plan(f->s, &f->g0), 0);
		assert_non_null(f->s->repl.have);
	}
}

static int adopt_run(struct fx *f)
{
	return srv_copy_plan(f->s, &f->g);
}

/* the rows of gained ranges removed, every other row intact */
static void adopt_check(struct fx *f)
{
	float v[8], got[8];
	uint64_t kept = 0;

	assert_true(f->g.ngain > 0);
	for (uint64_t k = 0; k < AD_KEYS; k++) {
		int ret = slab_read(f->tab->st, k, got, NULL);

		if (srv_cfg_gains(&f->g, memb_key_hash(k))) {
			assert_int_equal(ret, RS_E_NOTFOUND);
			continue;
		}
		assert_int_equal(ret, 0);
		val_of(&tdefs[0], k, v, NULL);
		assert_memory_equal(got, v, tdefs[0].dim * sizeof(float));
		kept++;
	}
	assert_true(kept > 0);
	if (f->survivor)
		assert_non_null(f->s->repl.have);
}

static const struct op op_adopt = { "adoption", adopt_prepare, adopt_run,
				    adopt_check, NULL, false };

static void adopt_setup(struct fx *f)
{
	struct slab_table *st;

	f->s = calloc(1, sizeof(*f->s));
	f->tab = calloc(1, sizeof(*f->tab));
	assert_non_null(f->s);
	assert_non_null(f->tab);
	f->src = dram();
	assert_int_equal(make_tables(f->src, false, false), 0);
	st = slab_table_get(f->src, tdefs[0].name);
	f->tab->st = st;
	f->tab->id = slab_table_id(st);
	atomic_init(&f->tab->refs, 1);
	pthread_rwlock_init(&f->s->tables.lock, NULL);
	f->s->tables.slot[f->tab->id] = f->tab;
}

/* One plan uncounted first: the table's first deletions grow its free
 * list and its list of deleted keys (slab_delete, which cannot fail: it
 * degrades instead, docs/DEVELOPING.md), after which every plan makes the
 * same allocations. */
static void adopt_walk(struct fx *f)
{
	adopt_prepare(f);
	assert_int_equal(adopt_run(f), 0);
	walk(&op_adopt, f);
}

static void adopt_teardown(struct fx *f)
{
	srv_copy_fini(f->s);
	cfg_clear(&f->g);
	cfg_clear(&f->g0);
	pthread_rwlock_destroy(&f->s->tables.lock);
	free(f->tab);
	free(f->s);
	slab_store_close(&f->src);
}

/* A node joining a cluster of two: it gains its target ranges. */
static void adopt_joining(void **state)
{
	static const enum memb_state st[3] = { MEMB_ACTIVE, MEMB_ACTIVE,
					       MEMB_JOINING };
	struct fx *f = *state;

	adopt_setup(f);
	members(f->m, st, 5);
	cfg_make(&f->g, f->m, 5, 2);
	adopt_walk(f);
	adopt_teardown(f);
}

/* n1 of three failed: n2, which held its ranges in epoch 6, keeps them
 * and gains the ranges it is appended to as a new backup. */
static void adopt_survivor(void **state)
{
	static const enum memb_state st0[3] = { MEMB_ACTIVE, MEMB_ACTIVE,
						MEMB_ACTIVE };
	static const enum memb_state st[3] = { MEMB_ACTIVE, MEMB_DOWN,
					       MEMB_ACTIVE };
	struct fx *f = *state;

	adopt_setup(f);
	f->survivor = true;
	members(f->m0, st0, 6);
	cfg_make(&f->g0, f->m0, 6, 2);
	members(f->m, st, 7);
	cfg_make(&f->g, f->m, 7, 2);
	adopt_walk(f);
	adopt_teardown(f);
}

/* ---- the node's DUMP: srv_ckpt_dump ---- */

#define DUMP_DELS 3u	/* keys the increment deletes (and puts back) */

/* A node of one table (tdefs[1], with state) and its keys, frozen. */
static void node_setup(struct fx *f)
{
	const struct tdef *d = &tdefs[1];
	struct slab_table *st;
	float v[8], s[8];

	adopt_setup(f);
	st = slab_table_get(f->src, d->name);
	for (uint64_t i = 0; i < d->nkeys; i++) {
		val_of(d, key_of(i), v, s);
		assert_int_equal(slab_insert(st, key_of(i), v, s, NULL), 0);
	}
	f->tab->st = st;
	f->s->tables.slot[f->tab->id] = NULL;
	f->tab->id = slab_table_id(st);
	f->s->tables.slot[f->tab->id] = f->tab;
	snprintf(f->tab->spec.name, sizeof(f->tab->spec.name), "%s", d->name);
	f->tab->spec.dim = d->dim;
	f->tab->spec.dtype = PROTO_DTYPE_FP32;
	f->tab->spec.optim.kind = d->optim;
	f->tab->state_floats = sf_of(d);
	srv_ckpt_init(f->s);
	f->s->cfg.checkpoint_dir = f->ck;
	assert_int_equal(srv_ckpt_freeze(f->s, 600000, 0), 0);
}

static void node_teardown(struct fx *f)
{
	char p[PATH_MAX];

	srv_ckpt_thaw(f->s);
	srv_ckpt_destroy(f->s);
	snprintf(p, sizeof(p), "%s/node/t.rsck", f->ck);
	unlink(p);
	snprintf(p, sizeof(p), "%s/node", f->ck);
	rmdir(p);
	adopt_teardown(f);
}

static struct proto_ckpt_req dump_req;
static struct proto_ckpt_reply dump_rep;

static void dump_req_of(uint32_t flags, uint8_t id, uint8_t base)
{
	memset(&dump_req, 0, sizeof(dump_req));
	dump_req.phase = PROTO_CKPT_DUMP;
	dump_req.flags = flags;
	memset(dump_req.id, id, sizeof(dump_req.id));
	memset(dump_req.base, base, sizeof(dump_req.base));
	snprintf(dump_req.dir, sizeof(dump_req.dir), "node");
	snprintf(dump_req.table, sizeof(dump_req.table), "%s",
		 tdefs[1].name);
	snprintf(dump_req.file, sizeof(dump_req.file), "t.rsck");
}

static void dump_unlink(struct fx *f)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/node/t.rsck", f->ck);
	unlink(p);
}

static int dump_run(struct fx *f)
{
	return srv_ckpt_dump(f->s, &dump_req, &dump_rep);
}

/* the part: the rows and deletions the reply says, all readable */
static void dump_check_part(struct fx *f, uint64_t rows, uint64_t dels)
{
	struct ckpt_reader *r;
	struct ckpt_record rec;
	char p[PATH_MAX];
	uint64_t n[3] = { 0 };
	int ret;

	assert_int_equal(dump_rep.rows, rows);
	assert_int_equal(dump_rep.deleted, dels);
	snprintf(p, sizeof(p), "%s/node/t.rsck", f->ck);
	if (ckpt_part_open(&r, p, NULL))
		fail_msg("%s: %s", p, rs_errormsg());
	while ((ret = ckpt_part_next(r, &rec)) == 1)
		n[rec.kind]++;
	ckpt_part_close(r);
	assert_int_equal(ret, 0);
	assert_int_equal(n[CKPT_REC_ROW], rows);
	assert_int_equal(n[CKPT_REC_DELETED], dels);
}

static void full_prepare(struct fx *f)
{
	dump_unlink(f);
	dump_req_of(PROTO_CKF_STATE, 1, 0);
}

static void full_check(struct fx *f)
{
	dump_check_part(f, tdefs[1].nkeys, 0);
}

/* The increment's base: a full part (id 1), uncounted; then DUMP_DELS
 * keys deleted and one key's row changed. */
static void incr_prepare(struct fx *f)
{
	struct slab_table *t = f->tab->st;
	float v[8], s[8];

	for (uint64_t i = 0; i < DUMP_DELS; i++) {	/* back, if gone */
		val_of(&tdefs[1], key_of(i), v, s);
		slab_insert(t, key_of(i), v, s, NULL);
	}
	full_prepare(f);
	assert_int_equal(dump_run(f), 0);
	dump_unlink(f);
	for (uint64_t i = 0; i < DUMP_DELS; i++)
		assert_int_equal(slab_delete(t, key_of(i)), 0);
	val_of(&tdefs[1], key_of(DUMP_DELS), v, s);
	assert_int_equal(slab_put(t, key_of(DUMP_DELS), v, NULL), 0);
	dump_req_of(PROTO_CKF_STATE | PROTO_CKF_INCR, 2, 1);
}

static void incr_check(struct fx *f)
{
	dump_check_part(f, 1, DUMP_DELS);
}

static const struct op op_dump_full = { "dump (full)", full_prepare,
					dump_run, full_check, NULL, false };
static const struct op op_dump_incr = { "dump (incremental)", incr_prepare,
					dump_run, incr_check, NULL, false };

/* ---- the node's configuration ---- */

static const char config_text[] =
	"{\"name\": \"n1\", \"storage\": {\"backend\": \"pmem\", "
	"\"path\": \"/tmp/pool\", \"size\": \"64MiB\"},"
	" \"trace\": {\"path\": \"/tmp/trace.jsonl\"},"
	" \"checkpoint_dir\": \"/tmp/ck\","
	" \"tables\": [{\"name\": \"a\", \"dim\": 4, \"capacity\": 64},"
	" {\"name\": \"b\", \"dim\": 3, \"capacity\": 32,"
	" \"optimizer\": {\"type\": \"adagrad\", \"lr\": 0.1}}],"
	" \"auth\": {\"keys\": [{\"id\": 1, \"role\": \"data\", "
	"\"secret\": \"0123456789abcdef\"}, {\"id\": 2, \"role\": \"admin\", "
	"\"secret_file\": \"/tmp/secret\"}]},"
	" \"coord\": {\"endpoints\": [\"http://e:1\", \"http://e:2\"], "
	"\"cluster\": \"c\", \"user\": \"u\", \"password_file\": \"/tmp/pw\", "
	"\"tls\": {\"ca_file\": \"/tmp/ca\", \"cert_file\": \"/tmp/cert\", "
	"\"key_file\": \"/tmp/key\"}}}";

static struct srv_config *config_parsed;

static int config_run(struct fx *f)
{
	(void)f;
	return srv_config_parse(&config_parsed, config_text,
				strlen(config_text));
}

static void config_check(struct fx *f)
{
	struct srv_config *c = config_parsed;

	(void)f;
	assert_non_null(c);
	assert_int_equal(c->ntables, 2);
	assert_string_equal(c->tables[1].name, "b");
	assert_string_equal(c->storage_path, "/tmp/pool");
	assert_string_equal(c->checkpoint_dir, "/tmp/ck");
	assert_string_equal(c->coord_endpoints, "http://e:1,http://e:2");
	srv_config_free(&config_parsed);
}

static void config_after_fail(struct fx *f)
{
	(void)f;
	assert_null(config_parsed);
}

static const struct op op_config = { "config", nothing, config_run,
				     config_check, config_after_fail, true };

/* ---- the catalog ---- */

static struct srv_catalog walk_cat;
static struct proto_table_spec cat_back[NT];

static void spec_of(int i, struct proto_table_spec *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", tdefs[i].name);
	s->dim = tdefs[i].dim;
	s->dtype = PROTO_DTYPE_FP32;
	s->capacity = 64;
	s->optim = (struct optim_params){ .kind = tdefs[i].optim,
					  .lr = 0.01f, .eps = 1e-8f,
					  .initial_accumulator = 0.1f };
	s->init = (struct init_params){ .kind = INIT_NORMAL, .std = 0.01f,
					.seed = 42 };
}

static int catalog_run(struct fx *f)
{
	char rec[NT][SLAB_CATALOG_MAX], text[2 * SLAB_CATALOG_MAX + 200];
	struct proto_table_spec s;
	int len[NT], ret;

	(void)f;
	for (int i = 0; i < NT; i++) {
		spec_of(i, &s);
		len[i] = srv_spec_encode(&s, rec[i], sizeof(rec[i]));
		if (len[i] < 0)
			return len[i];
		ret = srv_spec_decode(rec[i], (size_t)len[i], &cat_back[i]);
		if (ret)
			return ret;
	}
	snprintf(text, sizeof(text), "{\"tables\": [{\"uid\": \"\", "
		 "\"spec\": %.*s}, {\"uid\": \"\", \"spec\": %.*s}]}",
		 len[0], rec[0], len[1], rec[1]);
	srv_catalog_init(&walk_cat, NULL);
	return srv_catalog_parse(&walk_cat, text, strlen(text));
}

static void catalog_check(struct fx *f)
{
	struct proto_table_spec s;

	(void)f;
	assert_int_equal(walk_cat.n, NT);
	for (int i = 0; i < NT; i++) {
		spec_of(i, &s);
		assert_memory_equal(&cat_back[i], &s, sizeof(s));
		assert_memory_equal(&walk_cat.ent[i].spec, &s, sizeof(s));
	}
}

static const struct op op_catalog = { "catalog", nothing, catalog_run,
				      catalog_check, NULL, true };

/* ---- the tests ---- */

static void config(void **state)
{
	walk(&op_config, *state);
}

static void catalog(void **state)
{
	walk(&op_catalog, *state);
}

static void node_dump(void **state)
{
	struct fx *f = *state;

	node_setup(f);
	walk(&op_dump_full, f);
	walk(&op_dump_incr, f);
	node_teardown(f);
}

static void create_and_open(void **state)
{
	struct fx *f = *state;

	walk(&op_create, f);
	walk(&op_open, f);
}

static void checkpoint_and_restore(void **state)
{
	struct fx *f = *state;

	f->src = dram();
	assert_int_equal(make_tables(f->src, false, true), 0);
	walk(&op_ckpt, f);
	walk(&op_restore, f);
	slab_store_close(&f->dst);
	slab_store_close(&f->src);
}

static int setup(void **state)
{
	const char *tmp = getenv("TMPDIR");
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s/rs-alloc-walk-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->pool, sizeof(f->pool), "%s/pool", f->dir);
	snprintf(f->ck, sizeof(f->ck), "%s/ck", f->dir);
	if (mkdir(f->ck, 0755))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	unlink(f->pool);
	ck_clear(f);
	rmdir(f->ck);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void *json_alloc(size_t n)
{
	return rs_malloc(n);
}

static void json_free(void *p)
{
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(config, setup, teardown),
		cmocka_unit_test_setup_teardown(catalog, setup, teardown),
		cmocka_unit_test_setup_teardown(create_and_open, setup,
						teardown),
		cmocka_unit_test_setup_teardown(checkpoint_and_restore, setup,
						teardown),
		cmocka_unit_test_setup_teardown(node_dump, setup, teardown),
		cmocka_unit_test_setup_teardown(adopt_joining, setup,
						teardown),
		cmocka_unit_test_setup_teardown(adopt_survivor, setup,
						teardown),
	};

	setvbuf(stdout, NULL, _IONBF, 0);
	json_set_alloc_funcs(json_alloc, json_free);
	rs_set_log_threshold(RS_LOG_WARNING);	/* not a purge's line per run */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
