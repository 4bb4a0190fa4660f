/*
 * test_server_capacity.c - a node's storage through the client over real
 * verbs: defaults that fit, refusals that say why, and space that comes
 * back when a table is dropped.
 *
 *   1. A node on its built-in defaults (256 MiB DRAM) holds a table made
 *      with the client's defaults: rs_table_spec_init + Adam at dim 16,
 *      capacity 0 (the node's default). 2^20 rows would need 340 MiB with
 *      Adam's state, so the node gives the largest capacity that fits;
 *      the table works (GET_OR_INIT, UPDATE, one-sided GET).
 *   2. A table that cannot fit is refused with RS_E_FULL and a message
 *      (through the client and recstore-ctl) giving the bytes it needs and
 *      the bytes free, both exact.
 *   3. Create / drop cycles of tables filling a 16 MiB DRAM node, with
 *      rows written and read back each time: no space leaks; then a
 *      default table made by recstore-ctl, which prints its capacity.
 *   4. A file-backed node: a default table comes back after a restart with
 *      the capacity the node chose (the pool's catalog record holds the
 *      resolved spec);
 *      dropped, the node restarted, a table of the whole pool fits again.
 * Nodes run in-process (server_harness.h); the file pool lives in
 * RS_PMEM_DIR if set, else TMPDIR.
 */
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "recstore/client.h"
#include "server_harness.h"
#include "stats.h"
#include "value/optimizer.h"
#include "value/slab_int.h" /* SLAB_DATA_OFF */

#ifndef RS_CTL_BIN
#error "RS_CTL_BIN: path of recstore-ctl (server_capacity.cmake)"
#endif

#define MiB (1ull << 20)
#define NROWS 32
#define SMALL (16 * MiB) /* storage of the small nodes */
#define CYCLES 4

/* What the node must choose: the largest capacity <= cap whose footprint
 * fits `bytes` (slab_table_fit, the arithmetic of docs/config.md). */
static uint64_t fit(uint32_t dim, uint32_t kind, bool file, uint64_t cap,
		    uint64_t bytes)
{
	struct slab_table_cfg c = {
		.name = "x", .dim = dim, .capacity = cap,
		.state_floats = (uint32_t)optim_state_floats(kind, dim),
	};

	return slab_table_fit(&c, file, bytes);
}

static uint64_t footprint(uint32_t dim, uint32_t kind, uint64_t cap)
{
	struct slab_table_cfg c = {
		.name = "x", .dim = dim, .capacity = cap,
		.state_floats = (uint32_t)optim_state_floats(kind, dim),
	};

	return slab_table_footprint(&c, false);
}


static int create(struct rs_client *c, const char *name, uint32_t dim,
		  const char *optim, uint64_t cap)
{
	struct rs_table_spec s = RS_TABLE_SPEC_INIT;

	SV_OK(rs_table_spec_init(&s, name, dim));
	SV_OK(rs_table_spec_set_optimizer(&s, optim));
	SV_CHECK(s.capacity == 0, "spec_init: capacity %llu, not the "
		 "node's default", (unsigned long long)s.capacity);
	s.capacity = cap;
	return rs_table_create(c, &s);
}

/* The storage counters of the client's (only) node, from one STATS. */
struct storage_stats {
	uint64_t bytes, free, extent;
};

static struct storage_stats node_storage(struct rs_client *c)
{
	struct tl_stat w[] = {
		{ NULL, "storage_bytes", 0, 0 },
		{ NULL, "storage_free_bytes", 0, 0 },
		{ NULL, "storage_free_extent", 0, 0 },
		{ 0 },
	};

	SV_OK(tl_stats_read(c, 0, w));
	SV_CHECK(w[0].seen && w[1].seen && w[2].seen,
		 "STATS lacks the storage counters");
	return (struct storage_stats){ w[0].v, w[1].v, w[2].v };
}

/* Keys and rows of batch `base` in a table of dim. */
static void batch(uint64_t base, uint32_t dim, uint64_t *keys, float *rows)
{
	for (unsigned i = 0; i < NROWS; i++) {
		keys[i] = base + i * 7919;
		for (uint32_t j = 0; j < dim; j++)
			rows[i * dim + j] = (float)(base + i) + (float)j / 64;
	}
}

/* GET batch base of table name (one-sided READs) and compare. */
static void get_check(struct rs_client *c, const char *name, uint64_t base)
{
	static float rows[NROWS * 64], out[NROWS * 64];
	uint64_t keys[NROWS];
	int st[NROWS];
	struct rs_table *t;
	uint32_t dim;

	SV_OK(rs_table_open(c, name, &t));
	dim = rs_table_dim(t);
	SV_CHECK(dim <= 64, "dim %u", dim);
	batch(base, dim, keys, rows);
	SV_OK(rs_get(t, keys, NROWS, out, st, 0));
	for (unsigned i = 0; i < NROWS; i++)
		SV_CHECK(st[i] == RS_KEY_FOUND &&
				 !memcmp(&out[i * dim], &rows[i * dim],
					 dim * sizeof(float)),
			 "%s: key %llu: status %d or wrong row", name,
			 (unsigned long long)keys[i], st[i]);
}

/* PUT batch base into table name, then read it back. */
static void put_get(struct rs_client *c, const char *name, uint64_t base)
{
	static float rows[NROWS * 64];
	uint64_t keys[NROWS];
	int st[NROWS];
	struct rs_table *t;
	uint32_t dim;

	SV_OK(rs_table_open(c, name, &t));
	dim = rs_table_dim(t);
	SV_CHECK(dim <= 64, "dim %u", dim);
	batch(base, dim, keys, rows);
	SV_OK(rs_put(t, keys, NROWS, rows, st, 0));
	get_check(c, name, base);
}

/* ---- recstore-ctl ---- */

/* ctl_expect(args, code, n1, n2): sv_ctl_expect of recstore-ctl */
#define ctl_expect(...) sv_ctl_expect(RS_CTL_BIN, __VA_ARGS__)

static double t_start;

/* Elapsed time, for the log (the test must stay small). */
static void step(const char *what)
{
	printf("[%6.2f s] %s\n", sv_now() - t_start, what);
}

/* ---- 1, 2: defaults, refusals ---- */

static void defaults_fit(const char *ip)
{
	const uint64_t free0 = 256 * MiB - SLAB_DATA_OFF;
	uint64_t want = fit(16, OPTIM_ADAM, false, 1u << 20, free0);
	uint64_t need = footprint(16, OPTIM_ADAM, 4u << 20);
	uint64_t keys[NROWS];
	float rows[NROWS * 16];
	int st[NROWS];
	char n1[32], n2[32];
	struct rs_client *c;
	struct rs_table *t;
	struct sv_node n;
	double t0;
	int ret;

	sv_node_start(&n, ip, NULL); /* built-in defaults (2 workers) */
	c = sv_client_of(&n);
	step("default node up");
	t0 = sv_now();
	ret = create(c, "adam16", 16, "adam", 0);
	SV_CHECK(ret == 0, "a default Adam table of dim 16 on a default "
		 "node: %d (%s)", ret, rs_errormsg());
	printf("default Adam dim-16 table: %llu rows (asked 2^20, %.0f MiB "
	       "would not fit), created in %.2f s\n",
	       (unsigned long long)sv_capacity(c, "adam16"),
	       (double)footprint(16, OPTIM_ADAM, 1u << 20) / MiB,
	       sv_now() - t0);
	SV_CHECK(want > 500000 && want < (1u << 20), "fit %llu",
		 (unsigned long long)want);
	SV_CHECK(sv_capacity(c, "adam16") == want,
		 "capacity %llu, expected %llu",
		 (unsigned long long)sv_capacity(c, "adam16"),
		 (unsigned long long)want);
	SV_OK(rs_table_open(c, "adam16", &t));
	for (unsigned i = 0; i < NROWS; i++)
		keys[i] = 1000003ull * i;
	SV_OK(rs_get_or_init(t, keys, NROWS, rows, st, 0));
	for (unsigned i = 0; i < NROWS; i++)
		SV_CHECK(st[i] == RS_KEY_CREATED, "get_or_init %d", st[i]);
	for (unsigned i = 0; i < NROWS * 16; i++)
		rows[i] = 1.0f;
	SV_OK(rs_update(t, keys, NROWS, rows, st, 0));
	SV_OK(rs_get(t, keys, NROWS, rows, st, 0));
	for (unsigned i = 0; i < NROWS * 16; i++) /* one Adam step: -lr */
		SV_CHECK(fabsf(rows[i] + 0.001f) < 1e-6f, "row[%u] = %g", i,
			 (double)rows[i]);
	step("default Adam table used");

	/* the node is full now: a second default table is refused, and the
	 * message says so */
	ret = create(c, "sgd16", 16, "sgd", 0);
	printf("second default table: %s\n", rs_errormsg());
	SV_CHECK(ret == RS_E_FULL, "second default table: %d", ret);
	SV_CHECK(strstr(rs_errormsg(), "capacity 0 (the node's default)") &&
			 strstr(rs_errormsg(), "; 0 bytes are free"),
		 "message: %s", rs_errormsg());

	/* an explicit capacity that cannot fit: bytes needed and free */
	SV_OK(rs_table_drop(c, "adam16"));
	step("default Adam table dropped");
	ret = create(c, "huge", 16, "adam", 4u << 20);
	printf("too large: %s\n", rs_errormsg());
	SV_CHECK(ret == RS_E_FULL, "too large: %d", ret);
	snprintf(n1, sizeof(n1), "needs %llu bytes", (unsigned long long)need);
	snprintf(n2, sizeof(n2), "; %llu bytes are free",
		 (unsigned long long)free0);
	SV_CHECK(strstr(rs_errormsg(), n1) && strstr(rs_errormsg(), n2) &&
			 strstr(rs_errormsg(), "storage size 268435456"),
		 "message lacks '%s' or '%s': %s", n1, n2, rs_errormsg());
	SV_CHECK(sv_capacity(c, "huge") == 0, "refused table listed");
	rs_client_close(&c);

	step("refusals through the client");
	ctl_expect((const char *[]){ "-s", n.addr, "create", "huge", "--dim",
				     "16", "--optimizer", "adam",
				     "--capacity", "4194304", NULL }, 1, n1, n2);
	step("refusal through recstore-ctl");
	sv_node_stop(&n);
	step("default node stopped");
}

/* ---- 3: cycles on a small DRAM node ---- */

static const char *const optims[] = { "sgd", "adagrad", "adam" };
static const uint32_t kinds[] = { OPTIM_SGD, OPTIM_ADAGRAD, OPTIM_ADAM };

static void dram_cycles(const char *ip)
{
	const uint64_t free0 = SMALL - SLAB_DATA_OFF;
	uint64_t want = fit(8, OPTIM_SGD, false, 1u << 20, free0);
	struct rs_server_config *cfg;
	struct rs_client *c;
	struct sv_node n;
	double t0 = sv_now();
	struct storage_stats ss;
	char needle[96];

	SV_OK(rs_server_config_new(&cfg));
	SV_OK(rs_server_config_set_workers(cfg, 2));
	SV_OK(rs_server_config_set_storage(cfg, NULL, SMALL));
	sv_node_start(&n, ip, cfg);
	rs_server_config_delete(&cfg);
	c = sv_client_of(&n);
	ss = node_storage(c);
	SV_CHECK(ss.bytes == SMALL && ss.free == free0 && ss.extent == free0,
		 "STATS: storage %llu, free %llu", (unsigned long long)ss.bytes,
		 (unsigned long long)ss.free);
	for (unsigned r = 0; r < CYCLES; r++) {
		uint32_t dim = r % 2 ? 16 : 40;
		uint64_t cap = fit(dim, kinds[r % 3], false, 1u << 30, free0);
		char name[16];
		int ret;

		snprintf(name, sizeof(name), "cyc%u", r);
		ret = create(c, name, dim, optims[r % 3], cap);
		SV_CHECK(ret == 0, "cycle %u: %llu rows (%s, dim %u): %d (%s)",
			 r, (unsigned long long)cap, optims[r % 3], dim, ret,
			 rs_errormsg());
		SV_CHECK(sv_capacity(c, name) == cap, "cycle %u: capacity", r);
		SV_CHECK(node_storage(c).free < 2 * MiB,
			 "cycle %u: the table does not fill the node", r);
		put_get(c, name, 100 * r);
		SV_OK(rs_table_drop(c, name));
		ss = node_storage(c);
		SV_CHECK(ss.free == free0 && ss.extent == free0,
			 "cycle %u: %llu bytes free after the drop, not %llu",
			 r, (unsigned long long)ss.free,
			 (unsigned long long)free0);
	}
	step("DRAM cycles");
	/* and a default table takes all of it again (made by recstore-ctl,
	 * which prints the capacity the node chose) */
	snprintf(needle, sizeof(needle), "capacity %llu (the nodes' default",
		 (unsigned long long)want);
	ctl_expect((const char *[]){ "-s", n.addr, "create", "dflt", "--dim",
				     "8", NULL }, 0, needle, NULL);
	SV_CHECK(sv_capacity(c, "dflt") == want, "default capacity %llu",
		 (unsigned long long)sv_capacity(c, "dflt"));
	put_get(c, "dflt", 5);
	rs_client_close(&c);
	sv_node_stop(&n);
	printf("DRAM: %d create/drop cycles of %llu MiB tables: %.2f s\n",
	       CYCLES, (unsigned long long)(free0 / MiB), sv_now() - t0);
}

/* ---- 4: a file-backed node restarted between drop and create ---- */

static void file_node(struct sv_node *n, const char *ip, const char *pool)
{
	struct rs_server_config *cfg;

	SV_OK(rs_server_config_new(&cfg));
	SV_OK(rs_server_config_set_workers(cfg, 2));
	SV_OK(rs_server_config_set_storage(cfg, pool, SMALL));
	sv_node_start(n, ip, cfg);
	rs_server_config_delete(&cfg);
}

/* The summary and the spec the nodes give for table name; 0 or
 * RS_E_NOTFOUND. */
static int spec_of(struct rs_client *c, const char *name,
		   struct rs_table_info *out, struct rs_table_spec *spec)
{
	struct rs_table_info t[8] = { RS_TABLE_INFO_INIT };
	int n = rs_table_list(c, t, 8);

	SV_CHECK(n >= 0 && n <= 8, "list: %d (%s)", n, rs_errormsg());
	for (int i = 0; i < n; i++)
		if (!strcmp(t[i].name, name)) {
			*out = t[i];
			return rs_table_get_spec(c, name, spec);
		}
	return RS_E_NOTFOUND;
}

/*
 * Start 1: a default (capacity-0) Adam table with lr 0.005 takes the pool.
 * Start 2: it is back with the capacity the node chose and its lr (the
 * catalog record holds the resolved spec, not capacity 0), rows intact;
 * drop.
 * Start 3 (restarted between the drop and the create): a table of the
 * whole pool again.
 */
static int file_restarts(const char *ip)
{
	const uint64_t free0 = SMALL - SLAB_DATA_OFF;
	uint64_t dflt = fit(16, OPTIM_ADAM, true, 1u << 20, free0);
	uint64_t cap = fit(16, OPTIM_ADAM, true, 1u << 30, free0);
	const char *base = getenv("RS_PMEM_DIR");
	char dir[512], pool[600];
	struct rs_table_info ti = RS_TABLE_INFO_INIT;
	struct rs_table_spec s = RS_TABLE_SPEC_INIT, ts = RS_TABLE_SPEC_INIT;
	struct rs_client *c;
	struct sv_node n;
	double t0 = sv_now();
	int ret;

	snprintf(dir, sizeof(dir), "%s/rs-cap-XXXXXX",
		 base ? base : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SV_CHECK(mkdtemp(dir), "mkdtemp %s", dir);
	snprintf(pool, sizeof(pool), "%s/pool", dir);
	file_node(&n, ip, pool);
	c = sv_client_of(&n);
	SV_OK(rs_table_spec_init(&s, "fd", 16));
	SV_OK(rs_table_spec_set_optimizer(&s, "adam"));
	s.optim.lr = 0.005f;
	ret = rs_table_create(c, &s);
	if (ret && strstr(rs_errormsg(), "cannot be pinned")) {
		printf("skip the file pool: %s\n", rs_errormsg());
		rs_client_close(&c);
		sv_node_stop(&n);
		return 77;
	}
	SV_CHECK(ret == 0, "fd: %d (%s)", ret, rs_errormsg());
	SV_CHECK(sv_capacity(c, "fd") == dflt, "fd: capacity %llu, not %llu",
		 (unsigned long long)sv_capacity(c, "fd"),
		 (unsigned long long)dflt);
	put_get(c, "fd", 1);
	rs_client_close(&c);
	sv_node_stop(&n);
	step("file node: default table created");

	file_node(&n, ip, pool);
	c = sv_client_of(&n);
	SV_OK(spec_of(c, "fd", &ti, &ts));
	SV_CHECK(ti.capacity == dflt && ts.capacity == dflt &&
			 ts.optim.lr == 0.005f && ti.lr == 0.005f,
		 "fd after a restart: capacity %llu, lr %g",
		 (unsigned long long)ti.capacity, (double)ts.optim.lr);
	get_check(c, "fd", 1);
	SV_OK(rs_table_drop(c, "fd"));
	rs_client_close(&c);
	sv_node_stop(&n);
	step("file node: restarted, default table read and dropped");

	file_node(&n, ip, pool); /* restarted between the drop and create */
	c = sv_client_of(&n);
	ret = create(c, "f1", 16, "adam", cap);
	SV_CHECK(ret == 0, "f1 after a drop and a restart: %d (%s)", ret,
		 rs_errormsg());
	put_get(c, "f1", 1000);
	rs_client_close(&c);
	sv_node_stop(&n);
	step("file node: restarted, a table of the whole pool created");
	snprintf(pool, sizeof(pool), "rm -rf '%s'", dir);
	if (system(pool))
		printf("warning: could not remove %s\n", dir);
	printf("file pool: 3 starts, tables of %llu (default) and %llu Adam "
	       "rows: %.2f s\n", (unsigned long long)dflt,
	       (unsigned long long)cap, sv_now() - t0);
	return 0;
}

int main(void)
{
	const char *ip = sv_ip();
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sv_memlock();
	t_start = sv_now();
	defaults_fit(ip);
	dram_cycles(ip);
	ret = file_restarts(ip);
	printf(ret ? "ok (file pool skipped)\n" : "ok\n");
	return 0;
}
