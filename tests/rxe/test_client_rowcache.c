/*
 * test_client_rowcache.c - a client's row cache against two in-process
 * memory nodes over rxe:
 *   exact      cached rows are served after a 16-byte probe READ each
 *              (reads_posted counts them, bytes saved as expected); a row
 *              another client updates is caught by its probe and READ
 *              again (never the old value)
 *   updates    the client's own updates bring the new rows back in the
 *              reply (PROTO_KF_ROWS): the next get has no probe misses
 *              and returns what an uncached get returns, for fp32 and fp16
 *              tables (the node's rounding); keys deleted or created by
 *              the update's create flag
 *   stale      with a bound of S steps a cached row is used without any
 *              READ while it is at most S steps old, then probed
 *   drop       a table dropped and created again never serves old rows
 *   budget     the caches hold no more memory than asked
 *   observed   the nodes count the rows their UPDATE replies carried; the
 *              trace has client.rowcache events whose batch is the keys
 *              the cache served
 */
#include <math.h>

#include "client_harness.h"
#include "stats.h"

#define DIM 16
#define N 200




/* rows the nodes returned in UPDATE replies (both nodes) */
static uint64_t node_rows(struct rs_client *c)
{
	struct tl_stat w[] = { { NULL, "update_rows_returned", 0, 0 }, { 0 } };

	H_OK(tl_stats_sum(c, w, NULL));
	return w[0].v;
}

static void set_cache(struct rs_table *t, uint64_t bytes, uint32_t stale)
{
	struct rs_row_cache_opts o = RS_ROW_CACHE_OPTS_INIT;

	o.bytes = bytes;
	if (stale != UINT32_MAX) {
		o.flags = RS_ROW_CACHE_STALE;
		o.max_stale_steps = stale;
	}
	H_OK(rs_table_set_row_cache(t, &o));
}

/* rows of a get with the cache and of one without agree, all found */
static void same_as_uncached(struct rs_table *t, const uint64_t *keys,
			     size_t n, const char *what)
{
	static float a[(N + 5) * DIM], b[(N + 5) * DIM];
	static int sa[N + 5], sb[N + 5];

	int ga, gb;

	H_CHECK(n <= N + 5, "at most N + 5 keys");
	ga = rs_get(t, keys, n, a, sa, 0);
	gb = rs_get(t, keys, n, b, sb, RS_F_NOCACHE);
	H_CHECK(ga == (int)n && gb == (int)n, "%s: get %d, uncached get %d of "
		"%zu: statuses %d %d", what, ga, gb, n, sa[0], sb[0]);
	for (size_t i = 0; i < n * DIM; i++)
		H_CHECK(a[i] == b[i], "%s: key %llu elem %zu: cached %g, "
			"node %g", what, (unsigned long long)keys[i / DIM],
			i % DIM, a[i], b[i]);
}

static void exact(struct rs_client *c, struct rs_client *other,
		  struct rs_table *t, struct rs_table *to)
{
	static uint64_t keys[N];
	static float rows[N * DIM], out[N * DIM];
	static int st[N];
	struct rs_client_stats s0, s1;
	uint64_t stride = 128; /* 32-byte header + 64 bytes, to 64 */

	for (size_t i = 0; i < N; i++)
		keys[i] = i * 7919 + 3;
	h_fill(rows, keys, N, DIM, 1);
	H_CHECK(rs_put(t, keys, N, rows, st, 0) == N, "put");
	set_cache(t, 1 << 20, UINT32_MAX);
	/* first get: READs fill the cache */
	s0 = h_stats(c);
	H_CHECK(rs_get(t, keys, N, out, st, 0) == N, "get 1");
	s1 = h_stats(c);
	H_CHECK(s1.row_cache_fills - s0.row_cache_fills == N, "fills %llu",
		(unsigned long long)(s1.row_cache_fills - s0.row_cache_fills));
	H_CHECK(s1.row_cache_hits == s0.row_cache_hits, "no hits yet");
	/* second get: one probe per key, nothing else */
	s0 = s1;
	H_CHECK(rs_get(t, keys, N, out, st, 0) == N, "get 2");
	s1 = h_stats(c);
	H_CHECK(!memcmp(out, rows, sizeof(rows)), "cached rows differ");
	H_CHECK(s1.row_cache_hits - s0.row_cache_hits == N &&
			s1.row_cache_probes - s0.row_cache_probes == N &&
			s1.reads_posted - s0.reads_posted == N,
		"hits %llu probes %llu reads %llu",
		(unsigned long long)(s1.row_cache_hits - s0.row_cache_hits),
		(unsigned long long)(s1.row_cache_probes - s0.row_cache_probes),
		(unsigned long long)(s1.reads_posted - s0.reads_posted));
	H_CHECK(s1.row_cache_bytes_saved - s0.row_cache_bytes_saved ==
			N * (stride - 16),
		"bytes saved %llu", (unsigned long long)(
			s1.row_cache_bytes_saved - s0.row_cache_bytes_saved));
	/* another client changes 10 rows: their probes miss, the rows are
	 * READ again */
	h_fill(rows, keys, 10, DIM, 2);
	H_CHECK(rs_put(to, keys, 10, rows, st, 0) == 10, "other put");
	s0 = h_stats(c);
	H_CHECK(rs_get(t, keys, N, out, st, 0) == N, "get 3");
	s1 = h_stats(c);
	H_CHECK(!memcmp(out, rows, sizeof(rows)), "a changed row was served "
		"from the cache");
	H_CHECK(s1.row_cache_probe_misses - s0.row_cache_probe_misses == 10 &&
			s1.row_cache_hits - s0.row_cache_hits == N - 10,
		"probe misses %llu",
		(unsigned long long)(s1.row_cache_probe_misses -
				     s0.row_cache_probe_misses));
	/* ... and the new rows are cached: all hits again */
	s0 = s1;
	H_CHECK(rs_get(t, keys, N, out, st, 0) == N, "get 4");
	s1 = h_stats(c);
	H_CHECK(s1.row_cache_hits - s0.row_cache_hits == N, "refilled");
	/* a key the other client deletes: found missing, not served */
	H_CHECK(rs_delete(to, keys, 1, st, 0) == 1, "other delete");
	H_CHECK(rs_get(t, keys, N, out, st, 0) == N - 1 &&
			st[0] == RS_KEY_MISSING,
		"a deleted key: status %d", st[0]);
	H_CHECK(rs_put(t, keys, 1, rows, st, 0) == 1, "put back");
}

/* This client's updates bring their rows back: no probe misses after. */
static void own_updates(struct rs_client *c, const char *name,
			uint32_t dtype)
{
	struct rs_table *t = h_table(c, name, DIM, "adagrad", dtype, 4096);
	static uint64_t keys[N + 5];
	static float rows[(N + 5) * DIM], g[(N + 5) * DIM];
	static int st[N + 5];
	struct rs_update_opts o = RS_UPDATE_OPTS_INIT;
	struct rs_client_stats s0, s1;

	for (size_t i = 0; i < N + 5; i++)
		keys[i] = i * 104729 + 11;
	h_fill(rows, keys, N, DIM, 3);
	for (size_t i = 0; i < (N + 5) * DIM; i++)
		g[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
	H_CHECK(rs_put(t, keys, N, rows, st, 0) == N, "%s: put", name);
	set_cache(t, 1 << 20, UINT32_MAX);
	same_as_uncached(t, keys, N, name); /* fills */
	for (int round = 0; round < 3; round++) {
		uint64_t nr = node_rows(c);

		s0 = h_stats(c);
		/* five keys more, created by the update (create flag) */
		o.flags = RS_UPDATE_CREATE;
		H_CHECK(rs_update_ex(t, keys, N + 5, g, st, 0, &o) == N + 5,
			"%s: update: %s", name, rs_errormsg());
		s1 = h_stats(c);
		H_CHECK(s1.row_cache_update_rows - s0.row_cache_update_rows ==
				N + 5,
			"%s: rows in update replies %llu", name,
			(unsigned long long)(s1.row_cache_update_rows -
					     s0.row_cache_update_rows));
		H_CHECK(node_rows(c) - nr == N + 5, "%s: the nodes count %llu "
			"rows returned", name,
			(unsigned long long)(node_rows(c) - nr));
		s0 = s1;
		same_as_uncached(t, keys, N + 5, name);
		s1 = h_stats(c);
		H_CHECK(s1.row_cache_probe_misses == s0.row_cache_probe_misses,
			"%s round %d: %llu probe misses after own update", name,
			round, (unsigned long long)(s1.row_cache_probe_misses -
						    s0.row_cache_probe_misses));
		H_CHECK(s1.row_cache_hits - s0.row_cache_hits >= N + 5,
			"%s: hits %llu", name,
			(unsigned long long)(s1.row_cache_hits -
					     s0.row_cache_hits));
	}
	/* this client's delete drops the entry */
	H_CHECK(rs_delete(t, keys, 1, st, 0) == 1, "%s: delete", name);
	H_CHECK(rs_get(t, keys, 1, rows, st, 0) == 0 && st[0] == RS_KEY_MISSING,
		"%s: own delete still served: %d", name, st[0]);
	H_OK(rs_table_drop(c, name));
}

static void stale(struct rs_client *c, struct rs_client *other)
{
	struct rs_table *t = h_table(c, "rc_stale", DIM, "sgd", RS_DTYPE_FP32,
				     4096);
	struct rs_table *to;
	static uint64_t keys[N];
	static float rows[N * DIM], out[N * DIM], v2[N * DIM];
	static int st[N];
	struct rs_client_stats s0, s1;

	H_OK(rs_table_open(other, "rc_stale", &to));
	for (size_t i = 0; i < N; i++)
		keys[i] = i + 1;
	h_fill(rows, keys, N, DIM, 4);
	h_fill(v2, keys, N, DIM, 5);
	H_CHECK(rs_put(t, keys, N, rows, st, 0) == N, "put");
	set_cache(t, 1 << 20, 2);
	H_CHECK(rs_get(t, keys, N, out, st, 0) == N, "fill");
	H_CHECK(rs_put(to, keys, N, v2, st, 0) == N, "other put");
	for (int step = 0; step <= 2; step++) {
		s0 = h_stats(c);
		H_CHECK(rs_get(t, keys, N, out, st, 0) == N, "get");
		s1 = h_stats(c);
		H_CHECK(s1.reads_posted == s0.reads_posted &&
				s1.row_cache_stale_hits - s0.row_cache_stale_hits
					== N,
			"step %d: %llu READs, %llu stale hits", step,
			(unsigned long long)(s1.reads_posted - s0.reads_posted),
			(unsigned long long)(s1.row_cache_stale_hits -
					     s0.row_cache_stale_hits));
		H_CHECK(!memcmp(out, rows, sizeof(rows)), "within the bound: "
			"the cached rows");
		rs_client_step(c);
	}
	/* three steps old: probed, found changed, READ */
	s0 = h_stats(c);
	H_CHECK(rs_get(t, keys, N, out, st, 0) == N, "get");
	s1 = h_stats(c);
	H_CHECK(s1.row_cache_probe_misses - s0.row_cache_probe_misses == N,
		"past the bound: probe misses %llu",
		(unsigned long long)(s1.row_cache_probe_misses -
				     s0.row_cache_probe_misses));
	H_CHECK(!memcmp(out, v2, sizeof(v2)), "past the bound: new rows");
	H_OK(rs_table_drop(c, "rc_stale"));
}

static void recreated(struct rs_client *c)
{
	struct rs_table *t = h_table(c, "rc_drop", DIM, "sgd", RS_DTYPE_FP32,
				     4096);
	static uint64_t keys[N];
	static float rows[N * DIM], out[N * DIM];
	static int st[N];

	for (size_t i = 0; i < N; i++)
		keys[i] = i + 100;
	h_fill(rows, keys, N, DIM, 6);
	H_CHECK(rs_put(t, keys, N, rows, st, 0) == N, "put");
	set_cache(t, 1 << 20, 1000);
	H_CHECK(rs_get(t, keys, N, out, st, 0) == N, "fill");
	H_OK(rs_table_drop(c, "rc_drop"));
	t = h_table(c, "rc_drop", DIM, "sgd", RS_DTYPE_FP32, 4096);
	h_fill(rows, keys, N, DIM, 7);
	H_CHECK(rs_put(t, keys, N / 2, rows, st, 0) == N / 2, "put again");
	H_CHECK(rs_get(t, keys, N, out, st, 0) == N / 2, "half the keys");
	for (size_t i = 0; i < N; i++)
		H_CHECK(i < N / 2 ? st[i] == RS_KEY_FOUND &&
					    !memcmp(out + i * DIM,
						    rows + i * DIM, DIM * 4)
				  : st[i] == RS_KEY_MISSING,
			"key %zu of a new table: status %d", i, st[i]);
	H_OK(rs_table_drop(c, "rc_drop"));
}

static void budget(struct rs_client *c, struct rs_table *t)
{
	struct rs_row_cache_opts o = RS_ROW_CACHE_OPTS_INIT;
	struct rs_client_stats s, s0;

	s0 = h_stats(c);
	o.bytes = 64; /* not even 8 rows */
	H_CHECK(rs_table_set_row_cache(t, &o) == RS_E_INVAL, "tiny budget");
	o.bytes = 1 << 20;
	o.flags = 0x80;
	H_CHECK(rs_table_set_row_cache(t, &o) == RS_E_INVAL, "bad flags");
	o.flags = 0;
	o.bytes = 0;
	H_OK(rs_table_set_row_cache(t, &o));
	s = h_stats(c);
	/* t's cache held at most its budget (the other handles keep
	 * theirs) */
	H_CHECK(s0.row_cache_bytes > s.row_cache_bytes &&
			s0.row_cache_bytes - s.row_cache_bytes <= 1 << 20 &&
			s0.row_cache_bytes - s.row_cache_bytes > 1 << 19,
		"t's cache: %llu bytes",
		(unsigned long long)(s0.row_cache_bytes - s.row_cache_bytes));
}

#define TRACE_FILE "rowcache-trace.jsonl"

/* The traced client (every call sampled: tracing is per process and the
 * first client opens it). */
static struct rs_client *traced_client(struct harness *h)
{
	struct rs_client_config *cfg;
	struct rs_client *c;

	remove(TRACE_FILE);
	H_OK(rs_client_config_new(&cfg));
	H_OK(rs_client_config_set_nodes(cfg, h->list));
	H_OK(rs_client_config_set_timeout_ms(cfg, 60000));
	H_OK(rs_client_config_set_trace(cfg, TRACE_FILE, 1.0));
	H_OK(rs_client_open(&c, cfg));
	rs_client_config_delete(&cfg);
	return c;
}

/* client.rowcache events, and one whose batch is a whole get's N keys
 * (exact(): the second get, every key a matching probe) */
static void trace_has_rowcache(void)
{
	FILE *f = fopen(TRACE_FILE, "r");
	char line[1024], want[64];
	unsigned events = 0, whole = 0;

	H_CHECK(f, "no trace file " TRACE_FILE);
	snprintf(want, sizeof(want), "\"batch\":%d,", N);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "\"stage\":\"client.rowcache\"")) {
			events++;
			whole += strstr(line, want) != NULL;
		}
	fclose(f);
	H_CHECK(events > 0 && whole > 0, "client.rowcache events: %u, with "
		"batch %d: %u", events, N, whole);
	remove(TRACE_FILE);
}

int main(void)
{
	struct harness h;
	struct rs_client *c, *other;
	struct rs_table *t, *to;

	h_start(&h, 2);
	c = traced_client(&h);
	other = h_client(&h);
	t = h_table(c, "rc_exact", DIM, "sgd", RS_DTYPE_FP32, 4096);
	H_OK(rs_table_open(other, "rc_exact", &to));
	exact(c, other, t, to);
	own_updates(c, "rc_upd32", RS_DTYPE_FP32);
	own_updates(c, "rc_upd16", RS_DTYPE_FP16);
	stale(c, other);
	recreated(c);
	budget(c, t);
	rs_client_close(&other);
	rs_client_close(&c);
	trace_has_rowcache();
	h_stop(&h);
	printf("1 passed, 0 failed\n");
	return 0;
}
