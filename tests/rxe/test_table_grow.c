/*
 * test_table_grow.c - tables that grow online, over real verbs
 * (docs/server.md, "Growth").
 *
 *   1. A table created small (1024 rows, max_capacity 16384) is filled by
 *      a writer client with PUTs of new keys far past its capacity: the
 *      node grows it (1024 -> ... -> 16384, several growths) and no key is
 *      refused. Meanwhile reader threads, each with its own client, GET
 *      pinned keys in batches, alternating one-sided READs and the GET
 *      RPC, and check every value against the one written: a wrong row
 *      fails the test. The test asserts that reads completed while a
 *      growth was under way (verified gets counted across each PUT batch
 *      during which the capacity changed), that the readers went through
 *      the stale path (directory refreshes), and that one-sided READs
 *      served keys.
 *   2. Growth by command: recstore-ctl grow --capacity (a node prints the
 *      new capacity), grow past the table's limit without --capacity
 *      (refused, saying why), growth that does not fit the storage
 *      (RS_E_FULL with bytes needed and free); every key intact after.
 *   3. A table without max_capacity behaves as before: inserts past its
 *      capacity get RS_E_FULL per key, the others are stored.
 *      On a node of 6 MiB a growth that finds no room is refused once:
 *      the inserts past the capacity then get RS_E_FULL per key.
 *   3c. A growth and a checkpoint never overlap (a DUMP sets its change
 *      tracking tag on the table that serves afterwards): a growth asked
 *      for while the node is frozen by a checkpoint is refused with
 *      RS_E_BUSY and leaves the table as it was; a FREEZE that arrives
 *      while a growth copies (held there by the growth's test hook)
 *      returns only once the growth is done.
 *   4. A file-backed node grows an Adagrad table three times, stops and
 *      starts again on its pool: capacity, max_capacity, optimizer and
 *      every row are back (pool directory and catalog agree).
 * Nodes run in-process (server_harness.h): DRAM storage of 64 MiB, then a
 * 32 MiB pool file in RS_PMEM_DIR if set, else TMPDIR.
 */
#include <stdatomic.h>
#include <sys/wait.h>

#include "recstore/client.h"
#include "server/srv_internal.h" /* FREEZE / THAW of the node in-process */
#include "server_harness.h"
#include "stats.h"

#ifndef RS_CTL_BIN
#error "RS_CTL_BIN: path of recstore-ctl (table_grow.cmake)"
#endif

#define MiB (1ull << 20)
#define DIM 8
#define CAP0 1024u
#define MAXCAP 16384u
#define PINNED 512u	 /* keys written first, read throughout */
#define TOTAL 8000u	 /* keys the writer ends with */
#define BATCH 100u
#define READERS 2
#define RBATCH 32u

static double t_start;

static void step(const char *what)
{
	printf("[%6.2f s] %s\n", sv_now() - t_start, what);
}

static float val(uint64_t key, unsigned j)
{
	return (float)(key * 16 + j); /* rounded alike when written and read */
}

static uint64_t key_of(unsigned i)
{
	return 0x5bd1e995ull * i + 11;
}


static uint64_t node_stat(struct rs_client *c, const char *key)
{
	struct tl_stat q[] = { { NULL, key, 0, 0 }, { 0 } };

	SV_OK(tl_stats_read(c, 0, q));
	return q[0].v;
}

/* Write keys [from, to) with their values; every status OK or CREATED. */
static void put_range(struct rs_table *t, unsigned from, unsigned to)
{
	uint64_t keys[BATCH] = { 0 };
	float rows[BATCH * DIM] = { 0 };
	int st[BATCH];
	unsigned n = to - from;

	for (unsigned i = 0; i < n; i++) {
		keys[i] = key_of(from + i);
		for (unsigned j = 0; j < DIM; j++)
			rows[i * DIM + j] = val(keys[i], j);
	}
	SV_OK(rs_put(t, keys, n, rows, st, 0));
	for (unsigned i = 0; i < n; i++)
		SV_CHECK(st[i] == RS_KEY_FOUND || st[i] == RS_KEY_CREATED,
			 "put key %u: status %d", from + i, st[i]);
}

/* Read keys [0, n) (in batches) and check every value. */
static void check_all(struct rs_table *t, unsigned n, unsigned flags)
{
	uint64_t keys[RBATCH];
	float rows[RBATCH * DIM];
	int st[RBATCH];

	for (unsigned b = 0; b < n; b += RBATCH) {
		unsigned m = n - b < RBATCH ? n - b : RBATCH;

		for (unsigned i = 0; i < m; i++)
			keys[i] = key_of(b + i);
		SV_OK(rs_get(t, keys, m, rows, st, flags));
		for (unsigned i = 0; i < m; i++) {
			SV_CHECK(st[i] == RS_KEY_FOUND, "key %u: status %d",
				 b + i, st[i]);
			for (unsigned j = 0; j < DIM; j++)
				SV_CHECK(rows[i * DIM + j] == val(keys[i], j),
					 "key %u [%u]: %g, expected %g", b + i,
					 j, (double)rows[i * DIM + j],
					 (double)val(keys[i], j));
		}
	}
}

/* ---- readers ---- */

struct reader {
	pthread_t th;
	const char *addr;
	unsigned id;
	uint64_t gets, keys;
	struct rs_client_stats cs;
};

static atomic_bool stop_readers;
static _Atomic uint64_t verified_gets; /* all readers */

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct rs_client *c = sv_client(r->addr, 60000);
	struct rs_table *t;
	uint64_t keys[RBATCH], x = 0x9E3779B97F4A7C15ull * (r->id + 1);
	float rows[RBATCH * DIM];
	int st[RBATCH];

	SV_OK(rs_table_open(c, "g", &t));
	while (!atomic_load(&stop_readers)) {
		/* every 4th get by RPC: that path meets the old generation */
		unsigned flags = (r->gets & 3) == 3 ? RS_F_RPC : 0;

		for (unsigned i = 0; i < RBATCH; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			keys[i] = key_of((unsigned)(x % PINNED));
		}
		SV_OK(rs_get(t, keys, RBATCH, rows, st, flags));
		for (unsigned i = 0; i < RBATCH; i++) {
			SV_CHECK(st[i] == RS_KEY_FOUND, "reader %u: key %llu: "
				 "status %d", r->id,
				 (unsigned long long)keys[i], st[i]);
			for (unsigned j = 0; j < DIM; j++)
				SV_CHECK(rows[i * DIM + j] == val(keys[i], j),
					 "reader %u: key %llu [%u]: %g, "
					 "expected %g: a wrong row", r->id,
					 (unsigned long long)keys[i], j,
					 (double)rows[i * DIM + j],
					 (double)val(keys[i], j));
		}
		r->gets++;
		r->keys += RBATCH;
		atomic_fetch_add(&verified_gets, 1);
	}
	r->cs.struct_size = sizeof(r->cs);
	SV_OK(rs_client_get_stats(c, &r->cs));
	rs_client_close(&c);
	return NULL;
}

/* ---- 1: automatic growth under readers ---- */

static void grows_under_readers(const struct sv_node *n,
				struct rs_client *c)
{
	struct rs_table_spec s = RS_TABLE_SPEC_INIT;
	struct reader rd[READERS];
	struct rs_table *t;
	uint64_t cap = CAP0, in_growth = 0, growths = 0, refreshes = 0;
	uint64_t onesided = 0, fallbacks = 0;
	double t0;

	SV_OK(rs_table_spec_init(&s, "g", DIM));
	s.capacity = CAP0;
	s.max_capacity = MAXCAP;
	SV_OK(rs_table_create(c, &s));
	SV_OK(rs_table_open(c, "g", &t));
	for (unsigned i = 0; i < PINNED; i += BATCH)
		put_range(t, i, i + BATCH < PINNED ? i + BATCH : PINNED);
	check_all(t, PINNED, 0);
	step("pinned keys written");
	for (unsigned i = 0; i < READERS; i++) {
		rd[i] = (struct reader){ .addr = n->addr, .id = i };
		SV_CHECK(!pthread_create(&rd[i].th, NULL, reader_main, &rd[i]),
			 "pthread_create");
	}
	while (atomic_load(&verified_gets) < 20) /* readers are reading */
		usleep(1000);
	t0 = sv_now();
	for (unsigned i = PINNED; i < TOTAL; i += BATCH) {
		uint64_t g0 = atomic_load(&verified_gets), c1;

		put_range(t, i, i + BATCH < TOTAL ? i + BATCH : TOTAL);
		c1 = sv_capacity(c, "g");
		if (c1 != cap) {
			uint64_t during = atomic_load(&verified_gets) - g0;

			printf("  capacity %llu -> %llu at %u keys; %llu "
			       "verified gets meanwhile\n",
			       (unsigned long long)cap,
			       (unsigned long long)c1, i + BATCH,
			       (unsigned long long)during);
			in_growth += during;
			growths++;
			cap = c1;
		}
	}
	step("writer done");
	atomic_store(&stop_readers, true);
	for (unsigned i = 0; i < READERS; i++) {
		pthread_join(rd[i].th, NULL);
		printf("  reader %u: %llu gets (%llu keys), one-sided %llu, "
		       "RPC fallbacks %llu, torn retries %llu, directory "
		       "refreshes %llu\n", i, (unsigned long long)rd[i].gets,
		       (unsigned long long)rd[i].keys,
		       (unsigned long long)rd[i].cs.onesided_keys,
		       (unsigned long long)rd[i].cs.rpc_fallbacks,
		       (unsigned long long)rd[i].cs.torn_retries,
		       (unsigned long long)rd[i].cs.dir_refreshes);
		refreshes += rd[i].cs.dir_refreshes;
		onesided += rd[i].cs.onesided_keys;
		fallbacks += rd[i].cs.rpc_fallbacks;
	}
	printf("writes of %u keys in %.2f s; %llu growths, node: grow.count "
	       "%llu, grow.rows %llu, grow.us %llu; %llu verified gets "
	       "during growths\n", TOTAL - PINNED, sv_now() - t0,
	       (unsigned long long)growths,
	       (unsigned long long)node_stat(c, "grow.count"),
	       (unsigned long long)node_stat(c, "grow.rows"),
	       (unsigned long long)node_stat(c, "grow.us"),
	       (unsigned long long)in_growth);
	SV_CHECK(cap == MAXCAP, "capacity %llu at the end, expected %u",
		 (unsigned long long)cap, MAXCAP);
	SV_CHECK(growths >= 3 && node_stat(c, "grow.count") == 4,
		 "growths: %llu seen, node %llu", (unsigned long long)growths,
		 (unsigned long long)node_stat(c, "grow.count"));
	SV_CHECK(in_growth > 0, "no reader finished a get while the table "
		 "grew: the race was not run");
	SV_CHECK(refreshes >= READERS, "readers refreshed the directory %llu "
		 "times: they never met a new generation",
		 (unsigned long long)refreshes);
	SV_CHECK(onesided > 0, "no key was served by a one-sided READ");
	(void)fallbacks;
	check_all(t, TOTAL, 0);
	check_all(t, TOTAL, RS_F_RPC);
	step("every key intact, one-sided and by RPC");
}

/* ---- 2: by command ---- */

/* ctl_expect(args, code, n1, n2): sv_ctl_expect of recstore-ctl */
#define ctl_expect(...) sv_ctl_expect(RS_CTL_BIN, __VA_ARGS__)

static void grows_by_command(const struct sv_node *n, struct rs_client *c)
{
	struct rs_table *t;
	int ret;

	ctl_expect((const char *[]){ "-s", n->addr, "grow", "g", "--capacity",
				     "40000", NULL },
		   0, "grew table 'g': capacity 40000", NULL);
	SV_CHECK(sv_capacity(c, "g") == 40000, "capacity %llu",
		 (unsigned long long)sv_capacity(c, "g"));
	/* past its max_capacity only by an explicit capacity */
	ctl_expect((const char *[]){ "-s", n->addr, "grow", "g", NULL }, 1,
		   "cannot grow to 16384", "grow_log2 limit");
	/* more than the storage holds: the bytes needed and free */
	ret = rs_table_grow(c, "g", 4000000);
	printf("  rs_table_grow(4000000): %s\n", rs_errormsg());
	SV_CHECK(ret == RS_E_FULL && strstr(rs_errormsg(), "needs ") &&
			 strstr(rs_errormsg(), "bytes are free"),
		 "grow past the storage: %d (%s)", ret, rs_errormsg());
	SV_CHECK(rs_table_grow(c, "nope", 0) == RS_E_NOTFOUND, "unknown");
	SV_OK(rs_table_open(c, "g", &t));
	check_all(t, TOTAL, 0);
	check_all(t, TOTAL, RS_F_RPC);
	step("grown by command; every key intact");
}

/* ---- 3: no growth configured: as before ---- */

static void fixed_table_refuses(struct rs_client *c)
{
	struct rs_table_spec s = RS_TABLE_SPEC_INIT;
	uint64_t keys[300];
	float rows[300 * DIM];
	int st[300];
	unsigned ok = 0, full = 0;
	struct rs_table *t;

	SV_OK(rs_table_spec_init(&s, "fixed", DIM));
	s.capacity = 256;
	SV_OK(rs_table_create(c, &s));
	SV_OK(rs_table_open(c, "fixed", &t));
	for (unsigned i = 0; i < 300; i++) {
		keys[i] = key_of(i);
		for (unsigned j = 0; j < DIM; j++)
			rows[i * DIM + j] = val(keys[i], j);
	}
	(void)rs_put(t, keys, 300, rows, st, 0);
	for (unsigned i = 0; i < 300; i++) {
		ok += st[i] == RS_KEY_CREATED;
		full += st[i] == RS_E_FULL;
	}
	printf("  fixed table of 256 rows: %u stored, %u RS_E_FULL\n", ok,
	       full);
	SV_CHECK(ok == 256 && full == 44 && sv_capacity(c, "fixed") == 256,
		 "stored %u, full %u, capacity %llu", ok, full,
		 (unsigned long long)sv_capacity(c, "fixed"));
	step("a table without max_capacity refuses as before");
}

/* ---- 3c: a growth and a checkpoint's freeze ---- */

static atomic_int hold_state;	/* 1: a growth holds in its copy; 2: go */

static void hold_copy(int point)
{
	if (point != 0)
		return;
	atomic_store(&hold_state, 1);
	while (atomic_load(&hold_state) != 2)
		usleep(1000);
}

struct grow_arg {
	const char *addr;
	int ret;
};

static void *grow_main(void *arg)
{
	struct grow_arg *g = arg;
	struct rs_client *c = sv_client(g->addr, 60000);

	g->ret = rs_table_grow(c, "gc", 2 * CAP0);
	rs_client_close(&c);
	return NULL;
}

struct freeze_arg {
	struct rs_server *s;
	atomic_bool done;
};

static void *freeze_main(void *arg)
{
	struct freeze_arg *f = arg;

	SV_OK(srv_ckpt_freeze(f->s, 60000, 0));
	atomic_store(&f->done, true);
	return NULL;
}

static void growth_and_checkpoint(const struct sv_node *n,
				  struct rs_client *c)
{
	struct rs_table_spec s = RS_TABLE_SPEC_INIT;
	struct grow_arg g = { .addr = n->addr };
	struct freeze_arg f = { .s = n->s };
	pthread_t gt, ft;
	struct rs_table *t;
	int ret;

	SV_OK(rs_table_spec_init(&s, "gc", DIM));
	s.capacity = CAP0;
	s.max_capacity = MAXCAP;
	SV_OK(rs_table_create(c, &s));
	SV_OK(rs_table_open(c, "gc", &t));
	put_range(t, 0, BATCH);
	put_range(t, BATCH, 2 * BATCH);
	/* frozen by a checkpoint: no growth */
	SV_OK(srv_ckpt_freeze(n->s, 60000, 0));
	ret = rs_table_grow(c, "gc", 2 * CAP0);
	printf("  grow while frozen: %s\n", rs_errormsg());
	SV_CHECK(ret == RS_E_BUSY && strstr(rs_errormsg(), "checkpoint"),
		 "a growth during a checkpoint's freeze: %d (%s)", ret,
		 rs_errormsg());
	srv_ckpt_thaw(n->s);
	SV_CHECK(sv_capacity(c, "gc") == CAP0, "capacity %llu",
		 (unsigned long long)sv_capacity(c, "gc"));
	/* a freeze waits for a growth that copies */
	atomic_store(&hold_state, 0);
	slab_grow_test_hook = hold_copy;
	SV_CHECK(!pthread_create(&gt, NULL, grow_main, &g), "thread");
	while (atomic_load(&hold_state) != 1)
		usleep(1000);
	SV_CHECK(!pthread_create(&ft, NULL, freeze_main, &f), "thread");
	usleep(300 * 1000);
	SV_CHECK(!atomic_load(&f.done), "a FREEZE returned while a growth "
		 "was copying the table");
	atomic_store(&hold_state, 2);
	pthread_join(gt, NULL);
	pthread_join(ft, NULL);
	slab_grow_test_hook = NULL;
	SV_CHECK(g.ret == 0 && atomic_load(&f.done), "grow %d (%s)", g.ret,
		 rs_errormsg());
	srv_ckpt_thaw(n->s);
	SV_CHECK(sv_capacity(c, "gc") == 2 * CAP0, "capacity %llu",
		 (unsigned long long)sv_capacity(c, "gc"));
	SV_OK(rs_table_open(c, "gc", &t));
	check_all(t, 2 * BATCH, RS_F_RPC);
	step("no growth during a checkpoint's freeze; a freeze waits for "
	     "a growth");
}

/* ---- 3b: a growth that finds no room ---- */

/* A node of 6 MiB (two 2 MiB extents): a table of 64 floats per row grows
 * 1024 -> 2048 -> 4096 rows (each in one extent; the second reuses the
 * first's extent once the grace period ended), then the next growth
 * needs 4 MiB and fails: the inserts past the capacity get RS_E_FULL per
 * key (no endless RS_E_BUSY), every stored key stays readable. */
static void growth_without_room(const char *ip)
{
	struct rs_server_config *cfg;
	struct rs_table_spec s = RS_TABLE_SPEC_INIT;
	static uint64_t keys[BATCH];
	static float rows[BATCH * 64], out[BATCH * 64];
	int st[BATCH];
	unsigned ok = 0, full = 0;
	struct rs_client *c;
	struct rs_table *t;
	struct sv_node n;

	SV_OK(rs_server_config_new(&cfg));
	SV_OK(rs_server_config_set_workers(cfg, 2));
	SV_OK(rs_server_config_set_storage(cfg, NULL, 6 * MiB));
	sv_node_start(&n, ip, cfg);
	rs_server_config_delete(&cfg);
	c = sv_client(n.addr, 60000);
	SV_OK(rs_table_spec_init(&s, "t", 64));
	s.capacity = 1024;
	s.max_capacity = 65536;
	SV_OK(rs_table_create(c, &s));
	SV_OK(rs_table_open(c, "t", &t));
	for (unsigned b = 0; b < 5000; b += BATCH) {
		for (unsigned i = 0; i < BATCH; i++) {
			keys[i] = key_of(b + i);
			for (unsigned j = 0; j < 64; j++)
				rows[i * 64 + j] = val(keys[i], j);
		}
		(void)rs_put(t, keys, BATCH, rows, st, 0);
		for (unsigned i = 0; i < BATCH; i++) {
			ok += st[i] == RS_KEY_CREATED;
			full += st[i] == RS_E_FULL;
		}
	}
	printf("  6 MiB node: capacity %llu, %u keys stored, %u RS_E_FULL, "
	       "growths %llu, failed %llu\n",
	       (unsigned long long)sv_capacity(c, "t"), ok, full,
	       (unsigned long long)node_stat(c, "grow.count"),
	       (unsigned long long)node_stat(c, "grow.failures"));
	SV_CHECK(sv_capacity(c, "t") == 4096 && ok == 4096 &&
			 full == 5000 - 4096 &&
			 node_stat(c, "grow.count") == 2 &&
			 node_stat(c, "grow.failures") >= 1,
		 "capacity %llu, stored %u, full %u",
		 (unsigned long long)sv_capacity(c, "t"), ok, full);
	for (unsigned b = 0; b < 4096; b += BATCH) {
		unsigned m = 4096 - b < BATCH ? 4096 - b : BATCH;

		for (unsigned i = 0; i < m; i++)
			keys[i] = key_of(b + i);
		SV_OK(rs_get(t, keys, m, out, st, 0));
		for (unsigned i = 0; i < m; i++)
			SV_CHECK(st[i] == RS_KEY_FOUND &&
					 out[i * 64 + 63] == val(keys[i], 63),
				 "key %u after the failed growth", b + i);
	}
	rs_client_close(&c);
	sv_node_stop(&n);
	step("a growth without room: RS_E_FULL per key, rows intact");
}

/* ---- 4: a file pool: the grown table and its spec after a restart ---- */

static void file_node(struct sv_node *n, const char *ip, const char *pool)
{
	struct rs_server_config *cfg;

	SV_OK(rs_server_config_new(&cfg));
	SV_OK(rs_server_config_set_workers(cfg, 2));
	SV_OK(rs_server_config_set_storage(cfg, pool, 32 * MiB));
	sv_node_start(n, ip, cfg);
	rs_server_config_delete(&cfg);
}

static void grows_in_a_file_pool(const char *ip)
{
	const char *base = getenv("RS_PMEM_DIR");
	struct rs_table_spec s = RS_TABLE_SPEC_INIT, ts = RS_TABLE_SPEC_INIT;
	char dir[512], pool[600];
	struct rs_client *c;
	struct rs_table *t;
	struct sv_node n;

	snprintf(dir, sizeof(dir), "%s/rs-grow-XXXXXX",
		 base ? base : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SV_CHECK(mkdtemp(dir), "mkdtemp %s", dir);
	snprintf(pool, sizeof(pool), "%s/pool", dir);
	file_node(&n, ip, pool);
	c = sv_client(n.addr, 60000);
	SV_OK(rs_table_spec_init(&s, "g", DIM));
	SV_OK(rs_table_spec_set_optimizer(&s, "adagrad"));
	s.capacity = 512;
	s.max_capacity = 4096;
	SV_OK(rs_table_create(c, &s));
	SV_OK(rs_table_open(c, "g", &t));
	for (unsigned i = 0; i < 2000; i += BATCH)
		put_range(t, i, i + BATCH);
	SV_CHECK(sv_capacity(c, "g") == 4096 && node_stat(c, "grow.count") == 3,
		 "file pool: capacity %llu after %llu growths",
		 (unsigned long long)sv_capacity(c, "g"),
		 (unsigned long long)node_stat(c, "grow.count"));
	rs_client_close(&c);
	sv_node_stop(&n);
	step("file node: grown three times, stopped");

	file_node(&n, ip, pool);
	c = sv_client(n.addr, 60000);
	SV_OK(rs_table_get_spec(c, "g", &ts));
	SV_CHECK(ts.capacity == 4096 && ts.max_capacity == 4096 &&
			 ts.optim.kind == RS_OPT_ADAGRAD,
		 "after the restart: capacity %llu, max %llu, optimizer %u",
		 (unsigned long long)ts.capacity,
		 (unsigned long long)ts.max_capacity, ts.optim.kind);
	SV_OK(rs_table_open(c, "g", &t));
	check_all(t, 2000, 0);
	check_all(t, 2000, RS_F_RPC);
	rs_client_close(&c);
	sv_node_stop(&n);
	unlink(pool);
	snprintf(pool + strlen(pool), sizeof(pool) - strlen(pool),
		 ".tables.json");
	unlink(pool);
	rmdir(dir);
	step("file node restarted: grown table, spec and rows intact");
}

int main(void)
{
	struct rs_server_config *cfg;
	struct rs_client *c;
	struct sv_node n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sv_memlock();
	t_start = sv_now();
	SV_OK(rs_server_config_new(&cfg));
	SV_OK(rs_server_config_set_workers(cfg, 2));
	SV_OK(rs_server_config_set_storage(cfg, NULL, 64 * MiB));
	sv_node_start(&n, sv_ip(), cfg);
	rs_server_config_delete(&cfg);
	c = sv_client(n.addr, 60000);
	step("node up");
	grows_under_readers(&n, c);
	grows_by_command(&n, c);
	fixed_table_refuses(c);
	growth_and_checkpoint(&n, c);
	rs_client_close(&c);
	sv_node_stop(&n);
	growth_without_room(sv_ip());
	grows_in_a_file_pool(sv_ip());
	printf("ok\n");
	return 0;
}
