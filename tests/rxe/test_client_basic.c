/*
 * test_client_basic.c - the client against one in-process memory node over
 * rxe: put/get by one-sided READ, by RPC and with the cache bypassed agree;
 * missing keys say so; get-or-init creates from the initializer, also
 * inside a get (RS_F_INIT: one bucket round for a new key); a deleted
 * then re-put key is re-resolved (never stale data from the location
 * cache); a batch far above the QP's outstanding-READ bound; fp16 rows
 * come back as fp32; batches that repeat keys get every occurrence
 * right (each key READ once); async gets overlap; one get and one update over
 * two tables holding the same keys (rs_get_multi, rs_update_multi with a
 * repeated key and the create flag); list, stats, drop.
 */
#include <math.h>
#include <sched.h>

#include "client_harness.h"

#define DIM 32
#define N 3000 /* > any rxe max_qp_rd_atom: the batch is pipelined */




/* The key put_get() put at index i (generation 1). */
static uint64_t put_key(size_t i)
{
	return i * 1000003ull + 17;
}

static void put_get(struct rs_client *c, struct rs_table *t)
{
	static uint64_t keys[N];
	static float rows[N * DIM];
	static int st[N];
	struct rs_client_stats s0 = RS_CLIENT_STATS_INIT;
	struct rs_client_stats s1 = RS_CLIENT_STATS_INIT;
	static const unsigned flags[] = { 0, 0, RS_F_NOCACHE, RS_F_RPC };

	for (size_t i = 0; i < N; i++)
		keys[i] = put_key(i);
	h_fill(rows, keys, N, DIM, 1);
	H_CHECK(rs_put(t, keys, N, rows, st, 0) == N, "put");
	for (size_t f = 0; f < 4; f++) {
		rs_client_get_stats(c, &s0);
		memset(rows, 0, sizeof(rows));
		H_CHECK(rs_get(t, keys, N, rows, st, flags[f]) == N,
			"get flags %u", flags[f]);
		h_expect_rows(rows, st, keys, N, DIM, 1, "get");
		rs_client_get_stats(c, &s1);
		if (flags[f] & RS_F_RPC)
			H_CHECK(s1.rpc_keys - s0.rpc_keys == N, "rpc keys");
		else
			H_CHECK(s1.onesided_keys - s0.onesided_keys == N,
				"one-sided keys");
		if (f == 1) /* second plain get: all from the cache */
			H_CHECK(s1.cache_hits - s0.cache_hits == N &&
					s1.reads_posted - s0.reads_posted == N,
				"hot keys take one READ (%llu hits, %llu "
				"reads)",
				(unsigned long long)(s1.cache_hits -
						     s0.cache_hits),
				(unsigned long long)(s1.reads_posted -
						     s0.reads_posted));
	}
	printf("put/get: %d keys by READ, cached READ, cold READ, RPC: ok\n",
	       N);
}

/* Check one get of a batch with repeated keys: every occurrence of a key
 * has its key's status and row; a missing key's rows stay untouched. */
static void expect_dups(const float *rows, const int *st,
			const uint64_t *keys, size_t n, uint64_t miss,
			const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (keys[i] == miss) {
			H_CHECK(st[i] == RS_KEY_MISSING, "%s: slot %zu (missing"
				" key) status %d", what, i, st[i]);
			for (unsigned e = 0; e < DIM; e++)
				H_CHECK(rows[i * DIM + e] == -1.0f, "%s: slot "
					"%zu of a missing key written", what,
					i);
			continue;
		}
		h_expect_rows(rows + i * DIM, st + i, keys + i, 1, DIM, 1, what);
	}
}

/*
 * Batches that repeat keys: at the start, at the end, adjacent, far
 * apart, a missing key twice; and a batch of every key of put_get()
 * twice (beyond one READ buffer, so the repeats fall in later waves).
 * Every occurrence gets its key's status and row, by READ (warm and
 * cold) and by RPC; one-sided gets READ each distinct key once.
 */
static void duplicate_keys(struct rs_client *c, struct rs_table *t)
{
	enum { M = 12 };
	const uint64_t a = put_key(0), b = put_key(1), d = put_key(2),
		       miss = 555555555;
	const uint64_t keys[M] = { a, b, a, a, d, miss, b, d, miss, d, b, a };
	static const unsigned flags[] = { 0, 0, RS_F_NOCACHE, RS_F_RPC };
	static uint64_t big[2 * N];
	static float rows[2 * N * DIM];
	static int st[2 * N];

	for (size_t f = 0; f < 4; f++) {
		struct rs_client_stats s0 = RS_CLIENT_STATS_INIT;
		struct rs_client_stats s1 = RS_CLIENT_STATS_INIT;

		for (size_t i = 0; i < M * DIM; i++)
			rows[i] = -1.0f;
		rs_client_get_stats(c, &s0);
		H_CHECK(rs_get(t, keys, M, rows, st, flags[f]) == M - 2,
			"get with repeats, flags %u", flags[f]);
		rs_client_get_stats(c, &s1);
		expect_dups(rows, st, keys, M, miss, "repeats");
		if (!(flags[f] & RS_F_RPC))
			H_CHECK(s1.onesided_keys - s0.onesided_keys == 3,
				"each distinct key READ once (%llu)",
				(unsigned long long)(s1.onesided_keys -
						     s0.onesided_keys));
		if (f == 1)
			H_CHECK(s1.cache_hits - s0.cache_hits == 3,
				"one cache look-up per distinct key (%llu)",
				(unsigned long long)(s1.cache_hits -
						     s0.cache_hits));
	}
	for (size_t i = 0; i < N; i++) {
		big[i] = put_key(i);
		big[2 * N - 1 - i] = put_key(i);
	}
	for (size_t f = 0; f < 4; f++) {
		memset(rows, 0, sizeof(rows));
		H_CHECK(rs_get(t, big, 2 * N, rows, st, flags[f]) == 2 * N,
			"get of every key twice, flags %u", flags[f]);
		h_expect_rows(rows, st, big, 2 * N, DIM, 1, "every key twice");
	}
	printf("batches with repeated keys: ok\n");
}

static void missing_and_init(struct rs_table *t)
{
	uint64_t keys[3] = { 999999999, 17, 888888888 };
	float rows[3 * DIM];
	int st[3];

	H_CHECK(rs_get(t, keys, 3, rows, st, 0) == 1, "get missing");
	H_CHECK(st[0] == RS_KEY_MISSING && st[1] == RS_KEY_FOUND &&
			st[2] == RS_KEY_MISSING,
		"statuses %d %d %d", st[0], st[1], st[2]);
	H_CHECK(rs_get(t, keys, 3, rows, st, RS_F_RPC) == 1, "rpc missing");
	H_CHECK(st[0] == RS_KEY_MISSING && st[2] == RS_KEY_MISSING, "rpc st");
	H_CHECK(rs_get_or_init(t, keys, 3, rows, st, 0) == 3, "init");
	H_CHECK(st[0] == RS_KEY_CREATED && st[1] == RS_KEY_FOUND &&
			st[2] == RS_KEY_CREATED,
		"init statuses %d %d %d", st[0], st[1], st[2]);
	for (unsigned e = 0; e < DIM; e++)
		H_CHECK(rows[e] == 0.0f, "zeros initializer");
	H_CHECK(rs_get(t, keys, 3, rows, st, 0) == 3, "get created");
	printf("missing keys and get-or-init: ok\n");
}

/* RS_F_INIT: get-or-init in one call. Existing keys are READ (buckets,
 * then the row); a key absent at its first bucket READ goes straight to
 * the GET_OR_INIT RPC (no second round to prove it absent) and comes back
 * created from the initializer; the same keys again are all found. */
static void get_init(struct harness *h, struct rs_table *tw)
{
	enum { E = 100, M = 100 };
	uint64_t keys[E + M];
	float rows[(E + M) * DIM];
	int st[E + M];
	struct rs_client *c = h_client(h); /* cold location cache */
	struct rs_client_stats s0, s1;
	struct rs_table *t;

	for (size_t i = 0; i < E + M; i++)
		keys[i] = (7ull << 40) + i;
	h_fill(rows, keys, E, DIM, 8);
	H_CHECK(rs_put(tw, keys, E, rows, st, 0) == E, "put");
	H_OK(rs_table_open(c, "basic", &t));
	s0 = h_stats(c);
	memset(rows, 0xff, sizeof(rows));
	H_CHECK(rs_get(t, keys, E + M, rows, st, RS_F_INIT) == E + M,
		"get-or-init in one call");
	h_expect_rows(rows, st, keys, E, DIM, 8, "existing keys");
	for (size_t i = E; i < E + M; i++) {
		H_CHECK(st[i] == RS_KEY_CREATED, "key %zu status %d", i,
			st[i]);
		for (unsigned e = 0; e < DIM; e++)
			H_CHECK(rows[i * DIM + e] == 0.0f, "created row");
	}
	s1 = h_stats(c);
	/* buckets + row for each existing key, one bucket round for each
	 * new one (4 READs without RS_F_INIT: two rounds prove it absent) */
	H_CHECK(s1.reads_posted - s0.reads_posted == 3 * E + 2 * M,
		"%llu READs for %d existing and %d new keys",
		(unsigned long long)(s1.reads_posted - s0.reads_posted), E, M);
	H_CHECK(s1.rpc_get_or_init.keys - s0.rpc_get_or_init.keys == M &&
			s1.rpc_get.keys == s0.rpc_get.keys,
		"only the new keys went by GET_OR_INIT");
	s0 = s1;
	H_CHECK(rs_get(t, keys, E + M, rows, st, RS_F_INIT) == E + M, "again");
	for (size_t i = 0; i < E + M; i++)
		H_CHECK(st[i] == RS_KEY_FOUND, "again: key %zu status %d", i,
			st[i]);
	s1 = h_stats(c);
	H_CHECK(s1.rpc_get_or_init.keys == s0.rpc_get_or_init.keys,
		"again: no RPC");
	H_CHECK(rs_get(t, keys, 1, rows, st, 0x80) == RS_E_INVAL,
		"unknown flag refused");
	rs_client_close(&c);
	printf("get-or-init in one call (RS_F_INIT): ok\n");
}

static void delete_reput(struct rs_client *c, struct rs_table *t)
{
	uint64_t keys[64];
	float rows[64 * DIM];
	int st[64];
	struct rs_client_stats s0 = RS_CLIENT_STATS_INIT;
	struct rs_client_stats s1 = RS_CLIENT_STATS_INIT;

	for (size_t i = 0; i < 64; i++)
		keys[i] = (1ull << 40) + i;
	h_fill(rows, keys, 64, DIM, 2);
	H_CHECK(rs_put(t, keys, 64, rows, st, 0) == 64, "put");
	H_CHECK(rs_get(t, keys, 64, rows, st, 0) == 64, "get (caches)");
	h_expect_rows(rows, st, keys, 64, DIM, 2, "before delete");
	H_CHECK(rs_delete(t, keys, 32, st, 0) == 32, "delete");
	rs_client_get_stats(c, &s0);
	H_CHECK(rs_get(t, keys, 64, rows, st, 0) == 32, "get after delete");
	for (size_t i = 0; i < 32; i++)
		H_CHECK(st[i] == RS_KEY_MISSING, "deleted key %zu: %d", i,
			st[i]);
	rs_client_get_stats(c, &s1);
	H_CHECK(s1.stale_locations - s0.stale_locations >= 32,
		"stale cache entries detected by the row header");
	/* Re-put with new values, interleaved with other new keys so the
	 * freed slots get reused by other keys too. */
	for (size_t i = 0; i < 32; i++)
		keys[32 + i] = (1ull << 41) + i;
	h_fill(rows, keys, 64, DIM, 3);
	H_CHECK(rs_put(t, keys + 32, 32, rows + 32 * DIM, st, 0) == 32, "p2");
	H_CHECK(rs_put(t, keys, 32, rows, st, 0) == 32, "re-put");
	for (int round = 0; round < 2; round++) {
		memset(rows, 0, sizeof(rows));
		H_CHECK(rs_get(t, keys, 64, rows, st, 0) == 64, "get re-put");
		h_expect_rows(rows, st, keys, 64, DIM, 3, "after re-put");
	}
	printf("delete + re-put through the location cache: ok\n");
}

static void half_precision(struct rs_client *c, const char *name,
			   uint32_t dtype)
{
	struct rs_table *t = h_table(c, name, DIM, "sgd", dtype, 1024);
	uint64_t keys[16];
	float rows[16 * DIM], back[16 * DIM];
	int st[16];

	for (size_t i = 0; i < 16; i++)
		keys[i] = i;
	for (size_t i = 0; i < 16 * DIM; i++)
		rows[i] = (float)(i % 64) / 4.0f; /* exact in fp16 and bf16 */
	H_CHECK(rs_put(t, keys, 16, rows, st, 0) == 16, "put %s", name);
	for (int f = 0; f < 2; f++) {
		H_CHECK(rs_get(t, keys, 16, back, st, f ? RS_F_RPC : 0) == 16,
			"get %s", name);
		H_CHECK(!memcmp(rows, back, sizeof(rows)), "%s round trip",
			name);
	}
	printf("%s table: ok\n", name);
}

/* Another client drops and re-creates a table this client has open and
 * cached: gets must see the new table's rows (never the old ones, never
 * a false MISSING). */
static void recreated_table(struct harness *h, struct rs_client *c)
{
	struct rs_client *other = h_client(h);
	struct rs_table *t = h_table(c, "again", DIM, "sgd", RS_DTYPE_FP32,
				     512), *t2;
	uint64_t keys[40];
	float rows[40 * DIM];
	int st[40];

	for (size_t i = 0; i < 40; i++)
		keys[i] = 700 + i;
	h_fill(rows, keys, 40, DIM, 5);
	H_CHECK(rs_put(t, keys, 40, rows, st, 0) == 40, "put");
	H_CHECK(rs_get(t, keys, 40, rows, st, 0) == 40, "get (caches)");
	H_OK(rs_table_drop(other, "again"));
	t2 = h_table(other, "again", DIM, "adagrad", RS_DTYPE_FP32, 2048);
	h_fill(rows, keys, 40, DIM, 6);
	H_CHECK(rs_put(t2, keys, 40, rows, st, 0) == 40, "put new");
	for (int f = 0; f < 3; f++) {
		memset(rows, 0, sizeof(rows));
		H_OK(rs_get(t, keys, 40, rows, st, f == 2 ? RS_F_RPC : 0));
		h_expect_rows(rows, st, keys, 40, DIM, 6, "re-created table");
	}
	rs_client_close(&other);
	H_OK(rs_table_drop(c, "again"));
	printf("table dropped and re-created by another client: ok\n");
}

static void async_overlap(struct rs_table *t)
{
	static uint64_t keys[4][500];
	static float rows[4][500 * DIM];
	static int st[4][500];
	struct rs_op *op[4];
	int done = 0;

	for (int b = 0; b < 4; b++) {
		for (size_t i = 0; i < 500; i++)
			keys[b][i] = (b * 500 + i) * 1000003ull + 17;
		H_OK(rs_get_async(t, keys[b], 500, rows[b], st[b], 0, &op[b]));
	}
	/* "compute" while the batches fly */
	for (volatile int spin = 0; spin < 1000000; spin++)
		;
	for (int b = 0; b < 4; b++) {
		int r = rs_op_test(op[b]);

		H_CHECK(r == 0 || r == 1, "rs_op_test %d returned %d", b, r);
		done += r;
	}
	/* Batch 0 through rs_op_test alone: once it says 1 the rows and
	 * statuses are final, before rs_op_wait. */
	for (long spins = 0; rs_op_test(op[0]) != 1; spins++) {
		H_CHECK(spins < 100000000L, "rs_op_test never returned 1");
		sched_yield();
	}
	h_expect_rows(rows[0], st[0], keys[0], 500, DIM, 1, "async (tested)");
	H_CHECK(rs_op_test(op[0]) == 1, "a finished op stays finished");
	for (int b = 0; b < 4; b++) {
		H_CHECK(rs_op_wait(&op[b]) == 500 && !op[b], "async %d", b);
		h_expect_rows(rows[b], st[b], keys[b], 500, DIM, 1, "async");
	}
	H_CHECK(rs_op_test(NULL) == RS_E_INVAL, "rs_op_test(NULL)");
	printf("async gets: ok (%d finished before the wait)\n", done);
}

static void admin(struct rs_client *c)
{
	struct rs_table_info info[8] = { RS_TABLE_INFO_INIT };
	struct rs_node_stats ns = RS_NODE_STATS_INIT;
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	int n;

	H_OK(rs_node_get_stats(c, 0, &ns));
	n = rs_table_list(c, info, 8);

	H_CHECK(n == 3, "three tables listed, got %d", n);
	H_CHECK(!strcmp(info[0].name, "basic") &&
			!strcmp(info[1].name, "bhalfs") &&
			!strcmp(info[2].name, "halfs") &&
			info[2].dtype == RS_DTYPE_FP16 &&
			info[2].struct_size == sizeof(info[2]) &&
			info[0].dim == DIM && info[0].rows > N,
		"list content (rows %llu)",
		(unsigned long long)info[0].rows);
	H_OK(rs_table_get_spec(c, "halfs", &spec));
	H_CHECK(!strcmp(spec.name, "halfs") && spec.dim == DIM &&
			spec.dtype == RS_DTYPE_FP16 &&
			spec.struct_size == sizeof(spec),
		"get_spec content");
	H_CHECK(rs_table_get_spec(c, "nope", &spec) == RS_E_NOTFOUND,
		"get_spec of a missing table");
	/* growable structs: a size the library does not know is refused */
	ns.struct_size = 8;
	H_CHECK(rs_node_get_stats(c, 0, &ns) == RS_E_INVAL &&
			strstr(rs_errormsg(), "struct rs_node_stats"),
		"node stats with a bad struct_size: %s", rs_errormsg());
	info[0].struct_size = sizeof(info[0]) + 8;
	H_CHECK(rs_table_list(c, info, 8) == RS_E_INVAL,
		"list with an unknown struct_size");
	info[0].struct_size = sizeof(info[0]);
	H_CHECK(rs_table_list(c, NULL, 0) == 3, "list count only");
	spec.struct_size = 0;
	H_CHECK(rs_table_create(c, &spec) == RS_E_INVAL,
		"create with struct_size 0");
	H_CHECK(ns.rpc_requests > 0 && ns.tables == 3,
		"node stats: %llu requests, %llu tables",
		(unsigned long long)ns.rpc_requests,
		(unsigned long long)ns.tables);
	H_OK(rs_table_drop(c, "halfs"));
	H_CHECK(rs_table_drop(c, "halfs") == RS_E_NOTFOUND, "drop twice");
	H_CHECK(rs_table_list(c, info, 8) == 2, "two tables left");
	printf("list/stats/drop: ok\n");
}

/* Keys 0..M-1 in two tables of different dims; one rs_update_multi over
 * both (lr 1 on zero rows: a row becomes minus its summed gradient), key 0
 * of table a twice, and key M (absent) with RS_UPDATE_CREATE; then one
 * rs_get_multi over both. */
static void multi_tables(struct rs_client *c)
{
	enum { M = 40, D2 = 8 };
	struct rs_table *a = h_table(c, "multi_a", DIM, "sgd", RS_DTYPE_FP32,
				     1024);
	struct rs_table *b = h_table(c, "multi_b", D2, "sgd", RS_DTYPE_FP32,
				     1024);
	static float za[M * DIM], zb[M * D2], ga[(M + 2) * DIM], gb[M * D2];
	static float oa[(M + 1) * DIM], ob[M * D2];
	struct rs_grad_ref g[2 * M + 2];
	struct rs_key_ref r[2 * M + 1];
	struct rs_update_opts o = RS_UPDATE_OPTS_INIT;
	uint64_t keys[M + 1];
	int st[2 * M + 2];
	size_t n = 0;

	for (uint64_t i = 0; i <= M; i++)
		keys[i] = i;
	H_CHECK(rs_put(a, keys, M, za, st, 0) == M, "put a");
	H_CHECK(rs_put(b, keys, M, zb, st, 0) == M, "put b");
	for (size_t i = 0; i < (M + 2) * DIM; i++)
		ga[i] = (float)(i % 97) / 8.0f;
	for (size_t i = 0; i < M * D2; i++)
		gb[i] = -(float)(i % 89) / 4.0f;
	for (uint64_t i = 0; i < M; i++) {
		g[n++] = (struct rs_grad_ref){ a, i, ga + i * DIM };
		g[n++] = (struct rs_grad_ref){ b, i, gb + i * D2 };
	}
	g[n++] = (struct rs_grad_ref){ a, 0, ga + M * DIM };	   /* again */
	g[n++] = (struct rs_grad_ref){ a, M, ga + (M + 1) * DIM }; /* new */
	o.flags = RS_UPDATE_LR | RS_UPDATE_CREATE;
	o.lr = 1.0f;
	H_CHECK(rs_update_multi(c, g, n, st, 0, &o) == (int)n,
		"update_multi: %s", rs_errormsg());
	H_CHECK(st[n - 1] == RS_KEY_CREATED && st[0] == RS_KEY_FOUND,
		"statuses %d %d", st[n - 1], st[0]);
	n = 0;
	for (uint64_t i = 0; i <= M; i++)
		r[n++] = (struct rs_key_ref){ a, i, oa + i * DIM };
	for (uint64_t i = 0; i < M; i++)
		r[n++] = (struct rs_key_ref){ b, i, ob + i * D2 };
	H_CHECK(rs_get_multi(c, r, n, st, 0) == (int)n, "get_multi");
	for (uint64_t i = 0; i <= M; i++)
		for (unsigned e = 0; e < DIM; e++) {
			float want = -ga[(i == M ? M + 1 : i) * DIM + e] -
				     (i == 0 ? ga[M * DIM + e] : 0.0f);

			H_CHECK(oa[i * DIM + e] == want, "a key %llu elem %u: "
				"%g != %g", (unsigned long long)i, e,
				oa[i * DIM + e], want);
		}
	for (uint64_t i = 0; i < M; i++)
		for (unsigned e = 0; e < D2; e++)
			H_CHECK(ob[i * D2 + e] == -gb[i * D2 + e],
				"b key %llu elem %u", (unsigned long long)i, e);
	H_CHECK(rs_update_multi(c, g, 1, st, 0, NULL) == 1, "no opts");
	g[0].grad = NULL;
	H_CHECK(rs_update_multi(c, g, 1, st, 0, NULL) == RS_E_INVAL,
		"a NULL gradient is refused");
	H_OK(rs_table_drop(c, "multi_a"));
	H_OK(rs_table_drop(c, "multi_b"));
	printf("update_multi and get_multi over two tables: ok\n");
}

int main(void)
{
	struct harness h;
	struct rs_client *c;
	struct rs_table *t;

	h_start(&h, 1);
	c = h_client(&h);
	t = h_table(c, "basic", DIM, "sgd", RS_DTYPE_FP32, 16384);
	H_CHECK(rs_table_dim(t) == DIM, "dim");
	put_get(c, t);
	duplicate_keys(c, t);
	missing_and_init(t);
	get_init(&h, t);
	delete_reput(c, t);
	half_precision(c, "halfs", RS_DTYPE_FP16);
	half_precision(c, "bhalfs", RS_DTYPE_BF16);
	async_overlap(t);
	multi_tables(c);
	recreated_table(&h, c);
	admin(c);
	rs_client_close(&c);
	H_CHECK(c == NULL, "close clears the handle");
	h_stop(&h);
	printf("1 passed, 0 failed\n");
	return 0;
}
