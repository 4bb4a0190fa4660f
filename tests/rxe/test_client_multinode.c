/*
 * test_client_multinode.c - several memory nodes (RS_RDMA_IP plus the
 * addresses of RS_RDMA_IPS, all on one rxe device). Keys written through a
 * client of all nodes spread over them as the ring says; every key is
 * found on the node the ring names, and ONLY there: checked with one
 * direct single-node client per node (its ring sends every key to that one
 * node, so its GET RPC asks exactly that node). Gets that span nodes run
 * in parallel and agree with the RPC path; warm, every key is one READ at
 * the node its cache entry names. Then one node stops: its keys
 * fail with a per-key error (promptly, no hang), the others' keys are
 * still served, by READ and by RPC.
 */
#include <stdbool.h>
#include <time.h>

#include "client_harness.h"

#define DIM 8
#define N 2000
#define NODES 3

static uint64_t keys[N];
static float rows[N * DIM];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Stop the last node; its keys must fail, the others' must not. */
static void node_down(struct harness *h, struct rs_client *c,
		      struct rs_table *t)
{
	static float back[N * DIM];
	static int st[N];
	unsigned dead = NODES - 1;

	sv_node_close(&h->node[dead]);
	h->n = dead; /* h_stop() leaves it alone */
	for (int f = 0; f < 2; f++) {
		size_t ok = 0, failed = 0;
		int code = 0;
		double t0 = now_s();
		int ret = rs_get(t, keys, N, back, st, f ? RS_F_RPC : 0);

		H_CHECK(ret >= 0, "the call itself succeeds (%d)", ret);
		for (size_t i = 0; i < N; i++) {
			bool on_dead = rs_client_key_node(c, keys[i]) == dead;

			if (on_dead) {
				H_CHECK(st[i] < 0, "key %zu on the stopped node:"
					" status %d", i, st[i]);
				failed++;
				code = st[i];
			} else {
				H_CHECK(st[i] == RS_KEY_FOUND &&
						!memcmp(back + i * DIM,
							rows + i * DIM,
							DIM * sizeof(float)),
					"key %zu on a live node: %d", i, st[i]);
				ok++;
			}
		}
		printf("node %u stopped, %s get: %zu keys served, %zu failed "
		       "(%s) in %.2f s\n", dead, f ? "RPC" : "one-sided", ok,
		       failed, rs_strerror(code), now_s() - t0);
		H_CHECK(failed > 0 && ok > 0, "both kinds of keys");
	}
}

int main(void)
{
	struct harness h;
	struct rs_client *c, *direct[NODES];
	struct rs_table *t, *td[NODES];
	static float back[N * DIM];
	static int st[N];
	size_t per[NODES] = { 0 };

	h_start(&h, NODES);
	c = h_client(&h);
	t = h_table(c, "spread", DIM, "sgd", RS_DTYPE_FP32, 4096);
	for (size_t i = 0; i < N; i++) {
		keys[i] = (uint64_t)(i % 26) << 56 | i;
		for (int e = 0; e < DIM; e++)
			rows[i * DIM + e] = (float)(i * DIM + e);
	}
	H_CHECK(rs_put(t, keys, N, rows, st, 0) == N, "put");
	for (int f = 0; f < 3; f++) {
		struct rs_client_stats s0 = RS_CLIENT_STATS_INIT;
		struct rs_client_stats s1 = RS_CLIENT_STATS_INIT;

		memset(back, 0, sizeof(back));
		rs_client_get_stats(c, &s0);
		H_CHECK(rs_get(t, keys, N, back, st, f == 2 ? RS_F_RPC : 0) ==
				N,
			"get across nodes");
		rs_client_get_stats(c, &s1);
		H_CHECK(!memcmp(rows, back, sizeof(rows)), "rows agree");
		/* the second: every key a cache hit, READ at the node its
		 * entry names (no placement): one READ each, right rows */
		if (f == 1)
			H_CHECK(s1.cache_hits - s0.cache_hits == N &&
					s1.reads_posted - s0.reads_posted == N,
				"warm keys: %llu hits, %llu READs",
				(unsigned long long)(s1.cache_hits -
						     s0.cache_hits),
				(unsigned long long)(s1.reads_posted -
						     s0.reads_posted));
	}
	for (unsigned n = 0; n < NODES; n++) {
		direct[n] = h_client_opts(&h, (int)n, 0, 0);
		H_OK(rs_table_open(direct[n], "spread", &td[n]));
	}
	for (size_t i = 0; i < N; i++) {
		unsigned owner = rs_client_key_node(c, keys[i]);
		float row[DIM];
		int s;

		H_CHECK(owner < NODES, "owner");
		per[owner]++;
		for (unsigned n = 0; n < NODES; n++) {
			H_OK(rs_get(td[n], &keys[i], 1, row, &s, RS_F_RPC));
			H_CHECK((s == RS_KEY_FOUND) == (n == owner),
				"key %zu: node %u says %d, owner %u (%s)", i,
				n, s, owner, rs_client_node_name(c, owner));
		}
	}
	for (unsigned n = 0; n < NODES; n++) {
		printf("node %s holds %zu of %d keys\n",
		       rs_client_node_name(c, n), per[n], N);
		H_CHECK(per[n] > N / NODES / 2, "keys spread over the nodes");
		rs_client_close(&direct[n]);
	}
	node_down(&h, c, t);
	rs_client_close(&c);
	h_stop(&h);
	printf("1 passed, 0 failed\n");
	return 0;
}
