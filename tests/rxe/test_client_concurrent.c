/*
 * test_client_concurrent.c - no torn or mixed rows, ever. Writer threads
 * PUT rows of a few hot keys over and over; every element of a row they
 * write encodes (key, generation), so a row mixing two writes, or a row of
 * another key, is detectable. Reader threads of several clients (sharing a
 * client, and on clients of their own) get the same hot keys by one-sided
 * READ (cached and uncached; the shared client has fewer connection
 * contexts than threads, so calls also wait for the pool) the whole time and check every row they are
 * given: all elements equal, encoding the key they asked for, with a
 * generation that a writer really wrote. Deletes and re-puts of some keys
 * run alongside (a reader may then see MISSING, never wrong data).
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "client_harness.h"

#define DIM 64
#define HOT 8
#define WRITERS 2
#define READERS 3
#define SECONDS 6

static atomic_bool stop;
static atomic_uint_fast64_t reads, rows_ok, missing, writes;
static _Atomic uint32_t max_gen[HOT];

static float encode(uint64_t key, uint32_t gen)
{
	/* exact in fp32: key < 2^8, gen < 2^15 */
	return (float)(key * 32768u + gen);
}

struct wctx {
	struct rs_table *t;
	unsigned id;
};

static void *writer(void *arg)
{
	struct wctx *w = arg;
	uint64_t keys[HOT];
	float rows[HOT * DIM];
	int st[HOT];

	for (uint32_t gen = 1 + w->id; !atomic_load(&stop) && gen < 32768;
	     gen += WRITERS) {
		for (unsigned k = 0; k < HOT; k++) {
			keys[k] = k;
			for (unsigned e = 0; e < DIM; e++)
				rows[k * DIM + e] = encode(k, gen);
			/* announce before writing: a reader may see it
			 * as soon as the node has it */
			uint32_t cur = atomic_load(&max_gen[k]);
			while (cur < gen &&
			       !atomic_compare_exchange_weak(&max_gen[k], &cur,
							     gen))
				;
		}
		H_OK(rs_put(w->t, keys, HOT, rows, st, 0));
		if (gen % 7 == 0) /* now and then, delete and re-put one */
			H_OK(rs_delete(w->t, &keys[gen % HOT], 1, st, 0));
		atomic_fetch_add(&writes, HOT);
	}
	return NULL;
}

struct rctx {
	struct rs_table *t;
	unsigned flags;
};

static void *reader(void *arg)
{
	struct rctx *r = arg;
	uint64_t keys[HOT * 4];
	float rows[HOT * 4 * DIM];
	int st[HOT * 4];

	while (!atomic_load(&stop)) {
		for (unsigned i = 0; i < HOT * 4; i++)
			keys[i] = i % HOT; /* duplicates in the batch too */
		H_OK(rs_get(r->t, keys, HOT * 4, rows, st, r->flags));
		for (unsigned i = 0; i < HOT * 4; i++) {
			const float *row = rows + i * DIM;
			uint32_t gen;

			atomic_fetch_add(&reads, 1);
			if (st[i] == RS_KEY_MISSING) {
				atomic_fetch_add(&missing, 1);
				continue;
			}
			H_CHECK(st[i] == RS_KEY_FOUND, "status %d", st[i]);
			for (unsigned e = 1; e < DIM; e++)
				H_CHECK(row[e] == row[0], "MIXED row: key %u "
					"elem 0 %g, elem %u %g", i % HOT,
					row[0], e, row[e]);
			H_CHECK((uint64_t)row[0] / 32768u == keys[i],
				"row of key %llu returned for key %llu",
				(unsigned long long)((uint64_t)row[0] / 32768u),
				(unsigned long long)keys[i]);
			gen = (uint32_t)((uint64_t)row[0] % 32768u);
			H_CHECK(gen <= atomic_load(&max_gen[keys[i]]),
				"generation %u was never written", gen);
			atomic_fetch_add(&rows_ok, 1);
		}
	}
	return NULL;
}

int main(void)
{
	struct harness h;
	struct rs_client *shared, *own[2];
	struct rs_table *t, *tw, *to[2];
	pthread_t wt[WRITERS], rt[READERS + 2];
	struct wctx wc[WRITERS];
	struct rctx rc[READERS + 2];
	struct rs_client_stats cs = RS_CLIENT_STATS_INIT;

	h_start(&h, 1);
	/* 5 threads on 2 contexts per node: calls wait for the pool */
	shared = h_client_conns(&h, -1, 1u << 16, 1, 2);
	t = h_table(shared, "hot", DIM, "sgd", RS_DTYPE_FP32, 256);
	tw = t;
	for (int i = 0; i < 2; i++) {
		own[i] = h_client_opts(&h, -1, i ? 0 : 1024, 0);
		H_OK(rs_table_open(own[i], "hot", &to[i]));
	}
	for (unsigned i = 0; i < WRITERS; i++) {
		wc[i] = (struct wctx){ tw, i };
		pthread_create(&wt[i], NULL, writer, &wc[i]);
	}
	for (unsigned i = 0; i < READERS + 2; i++) {
		rc[i].t = i < READERS ? t : to[i - READERS];
		rc[i].flags = i == 1 ? RS_F_NOCACHE : 0;
		pthread_create(&rt[i], NULL, reader, &rc[i]);
	}
	sleep(SECONDS);
	atomic_store(&stop, true);
	for (unsigned i = 0; i < WRITERS; i++)
		pthread_join(wt[i], NULL);
	for (unsigned i = 0; i < READERS + 2; i++)
		pthread_join(rt[i], NULL);
	rs_client_get_stats(shared, &cs);
	printf("%llu rows written, %llu read: %llu checked whole, %llu "
	       "missing (deleted); torn retries %llu, stale cache entries "
	       "%llu, RPC fallbacks %llu\n",
	       (unsigned long long)writes, (unsigned long long)reads,
	       (unsigned long long)rows_ok, (unsigned long long)missing,
	       (unsigned long long)cs.torn_retries,
	       (unsigned long long)cs.stale_locations,
	       (unsigned long long)cs.rpc_fallbacks);
	H_CHECK(rows_ok > 100 && writes > 100, "the test did work");
	for (int i = 0; i < 2; i++)
		rs_client_close(&own[i]);
	rs_client_close(&shared);
	h_stop(&h);
	printf("1 passed, 0 failed\n");
	return 0;
}
