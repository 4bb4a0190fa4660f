/*
 * ckpt_cluster_driver.c - the workload and the checks of
 * test_ckpt_cluster.sh (not a test of its own): checkpoints of a
 * replicated cluster and restores across store shapes.
 *
 *   ckpt_cluster_driver take SEEDS DIR
 *       create "cnt" (dim 4, SGD, lr 1: a row counts its updates) and
 *       "emb" (dim 8, Adagrad: rows and optimizer state) with K keys;
 *       one thread streams UPDATEs of every key of both tables (per key
 *       of "cnt": the steps acknowledged, and the ones whose outcome it
 *       does not know) while this one takes a checkpoint into DIR through
 *       rs_checkpoint. Checks: every key of both tables has exactly one
 *       record (one copy per key, not one per replica), and every row of
 *       "cnt" lies between the steps acknowledged before the checkpoint
 *       began and those acknowledged or in flight when it ended.
 *   ckpt_cluster_driver bump SEEDS N
 *       one UPDATE of the first N keys of both tables.
 *   ckpt_cluster_driver stale SEEDS TRIGGER DIR
 *       open a client (TRIGGER.ready), wait for TRIGGER, then take a
 *       checkpoint into DIR with the configuration learned at open: the
 *       test changed it meanwhile, so the first try must be refused by
 *       the nodes and the checkpoint taken again in the new epoch.
 *   ckpt_cluster_driver same DIR_A DIR_B
 *       both checkpoints hold exactly one record of each of the same
 *       keys per table, rows and optimizer state equal bit for bit.
 *
 * SEEDS: addr:port,addr:port. Exit 0, or 1 with a message.
 */
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "common/rs_internal.h"
#include "ckpt_nodes.h"
#include "recstore/client.h"

#define DRIVER_NAME "ckpt_cluster_driver"
#define DRIVER_TIMEOUT_MS 30000
#include "cluster_driver.h"

#define K 3000
#define CDIM 4
#define EDIM 8
#define EST EDIM		/* Adagrad: one accumulator per element */
#define REC_MAX (EDIM * 4 + EST * 4)

static uint64_t keys[K];

static void create(struct rs_client *c, const char *name, uint32_t dim,
		   const char *optim, float lr)
{
	struct rs_table_spec sp = RS_TABLE_SPEC_INIT;
	int ret;

	if (rs_table_spec_init(&sp, name, dim) ||
	    rs_table_spec_set_optimizer(&sp, optim))
		die("spec: %s", rs_errormsg());
	sp.optim.lr = lr;
	sp.capacity = 2 * K;
	ret = rs_table_create(c, &sp);
	if (ret && ret != RS_E_EXISTS)
		die("create %s: %s", name, rs_errormsg());
}

/* ---- the stream ---- */

struct stream {
	struct rs_client *c;
	atomic_bool stop;
	atomic_uint_fast64_t rounds;
	/* "cnt": per key, steps acknowledged and of unknown outcome */
	_Atomic uint64_t acked[K], unsure[K];
	int lasterr;
};

static void *stream_main(void *arg)
{
	struct stream *s = arg;
	struct rs_table *cnt = open_table_named(s->c, "cnt");
	struct rs_table *emb = open_table_named(s->c, "emb");
	static float g1[K * CDIM], ge[K * EDIM];
	static int st[K];
	uint64_t round = 0;

	for (int i = 0; i < K * CDIM; i++)
		g1[i] = -1.0f;
	while (!atomic_load(&s->stop)) {
		int ret;

		/* a gradient of every element that differs per round and
		 * key: the optimizer state moves with the rows */
		for (int i = 0; i < K * EDIM; i++)
			ge[i] = (float)((i * 7 + round * 13) % 17) / 16.0f -
				0.5f;
		ret = rs_update(cnt, keys, K, g1, st, 0);
		for (int i = 0; i < K; i++) {
			if (ret >= 0 && st[i] >= 0) {
				atomic_fetch_add(&s->acked[i], 1);
			} else {
				atomic_fetch_add(&s->unsure[i], 1);
				s->lasterr = ret < 0 ? ret : st[i];
			}
		}
		ret = rs_update(emb, keys, K, ge, st, 0);
		for (int i = 0; ret >= 0 && i < K; i++)
			if (st[i] < 0)
				ret = st[i];
		if (ret < 0)
			s->lasterr = ret;
		atomic_store(&s->rounds, ++round);
	}
	return NULL;
}

static void await_rounds(struct stream *s, uint64_t n)
{
	for (int i = 0; atomic_load(&s->rounds) < n; i++) {
		if (i > 120000)
			die("the stream is stuck at round %" PRIu64,
			    (uint64_t)atomic_load(&s->rounds));
		usleep(1000);
	}
}

/* ---- records of a checkpoint ---- */

struct recs {
	uint32_t len;		/* bytes per record: payload and state */
	uint64_t n, dup, stray;
	uint8_t *seen;		/* [K] */
	uint8_t *data;		/* [K * REC_MAX] */
};

#define KEY_MUL 0x9e3779b97f4a7c15ull	/* keys[i] = KEY_MUL * (i + 1) */

static int key_index(uint64_t key)
{
	/* KEY_MUL is odd: invertible mod 2^64 (Newton: 6 steps) */
	uint64_t inv = KEY_MUL, i;

	for (int s = 0; s < 6; s++)
		inv *= 2 - KEY_MUL * inv;
	i = key * inv - 1;
	return i < K ? (int)i : -1;
}

static void add_record(void *arg, const struct ckpt_part_desc *d,
		       const struct ckpt_record *rec)
{
	struct recs *out = arg;
	int k = key_index(rec->key);
	uint32_t pb = d->dim * 4;

	out->len = pb + d->state_floats * 4;
	if (out->len > REC_MAX)
		die("records of %u bytes", out->len);
	if (rec->kind != CKPT_REC_ROW || k < 0) {
		out->stray++;
		return;
	}
	if (out->seen[k]++) {
		out->dup++;
		return;
	}
	out->n++;
	memcpy(out->data + (size_t)k * REC_MAX, rec->payload, pb);
	memcpy(out->data + (size_t)k * REC_MAX + pb, rec->state,
	       d->state_floats * 4);
}

static void records(const char *dir, const char *table, struct recs *out)
{
	memset(out, 0, sizeof(*out));
	out->seen = calloc(K, 1);
	out->data = calloc(K, REC_MAX);
	if (!out->seen || !out->data)
		die("out of memory");
	ckpt_each_record(dir, table, add_record, out);
	if (!out->len)
		die("%s: no records of table '%s'", dir, table);
}

static void recs_free(struct recs *r)
{
	free(r->seen);
	free(r->data);
}

/* exactly one record of every key */
static int one_each(const char *dir, const char *table, struct recs *r)
{
	if (r->n == K && !r->dup && !r->stray)
		return 0;
	printf("%s, table %s: %" PRIu64 " keys of %d, %" PRIu64 " duplicate "
	       "records, %" PRIu64 " records of other keys\n", dir, table,
	       r->n, K, r->dup, r->stray);
	return 1;
}

/* ---- commands ---- */

static int do_take(const char *seeds, const char *dir)
{
	struct rs_client *c = open_client(seeds), *adm = open_client(seeds);
	struct rs_ckpt_opts o = RS_CKPT_OPTS_INIT;
	struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;
	static struct stream s;
	static uint64_t lo[K], hi[K];
	static float zc[K * CDIM], ze[K * EDIM];
	static int st[K];
	struct recs rc, re;
	uint64_t r0, r1;
	pthread_t thr;
	int bad = 0;

	create(c, "cnt", CDIM, "sgd", 1.0f);
	create(c, "emb", EDIM, "adagrad", 0.1f);
	for (int i = 0; i < K * EDIM; i++)
		ze[i] = (float)(i % 11) / 8.0f;
	if (rs_put(open_table_named(c, "cnt"), keys, K, zc, st, 0) < 0 ||
	    rs_put(open_table_named(c, "emb"), keys, K, ze, st, 0) < 0)
		die("put: %s", rs_errormsg());
	s.c = c;
	if (pthread_create(&thr, NULL, stream_main, &s))
		die("no thread");
	await_rounds(&s, 3);
	for (int i = 0; i < K; i++)
		lo[i] = atomic_load(&s.acked[i]);
	r0 = atomic_load(&s.rounds);
	if (rs_checkpoint(adm, dir, &o, &rep))
		die("checkpoint: %s", rs_errormsg());
	r1 = atomic_load(&s.rounds);
	/* the acknowledged steps and those in flight (one round) */
	for (int i = 0; i < K; i++)
		hi[i] = atomic_load(&s.acked[i]) + atomic_load(&s.unsure[i]) +
			1;
	await_rounds(&s, r1 + 2);	/* the stream goes on after it */
	atomic_store(&s.stop, true);
	pthread_join(thr, NULL);
	printf("take: checkpoint %s of %" PRIu64 " rows, writes paused "
	       "%.3f s, rounds %" PRIu64 "..%" PRIu64 " of the stream around "
	       "it, %" PRIu64 " in all (last stream error: %s)\n", rep.id,
	       rep.rows, (double)rep.paused_us / 1e6, r0, r1,
	       (uint64_t)atomic_load(&s.rounds),
	       s.lasterr ? rs_strerror(s.lasterr) : "none");
	if (rep.rows != 2 * (uint64_t)K) {
		printf("take: %" PRIu64 " rows in the checkpoint, %d keys\n",
		       rep.rows, 2 * K);
		bad++;
	}
	records(dir, "cnt", &rc);
	records(dir, "emb", &re);
	bad += one_each(dir, "cnt", &rc) + one_each(dir, "emb", &re);
	for (int i = 0; i < K && !bad; i++) {
		float v;

		memcpy(&v, rc.data + (size_t)i * REC_MAX, 4);
		if (v < (double)lo[i] || v > (double)hi[i]) {
			printf("key %d: %.0f steps in the checkpoint, not in "
			       "[%" PRIu64 ", %" PRIu64 "]: not one point of "
			       "the stream\n", i, v, lo[i], hi[i]);
			bad++;
		}
	}
	if (!bad)
		printf("take: every key once per table, every count between "
		       "the steps acknowledged before and after\n");
	recs_free(&rc);
	recs_free(&re);
	rs_client_close(&adm);
	rs_client_close(&c);
	return bad ? 1 : 0;
}

static int do_bump(const char *seeds, int n)
{
	struct rs_client *c = open_client(seeds);
	static float g1[K * CDIM], ge[K * EDIM];
	static int st[K];

	if (n < 1 || n > K)
		die("bump: %d keys", n);
	for (int i = 0; i < K * CDIM; i++)
		g1[i] = -1.0f;
	for (int i = 0; i < K * EDIM; i++)
		ge[i] = 0.25f;
	if (rs_update(open_table_named(c, "cnt"), keys, (size_t)n, g1, st, 0) < 0 ||
	    rs_update(open_table_named(c, "emb"), keys, (size_t)n, ge, st, 0) < 0)
		die("update: %s", rs_errormsg());
	for (int i = 0; i < n; i++)
		if (st[i] < 0)
			die("update key %d: %s", i, rs_strerror(st[i]));
	printf("bump: %d keys of both tables\n", n);
	rs_client_close(&c);
	return 0;
}

static atomic_int again;

static void on_progress(void *arg, const struct rs_ckpt_progress *p)
{
	(void)arg;
	if (!strncmp(p->phase, "configuration changed", 21))
		atomic_fetch_add(&again, 1);
}

static int do_stale(const char *seeds, const char *trigger, const char *dir)
{
	struct rs_client *c = open_client(seeds);
	struct rs_ckpt_opts o = RS_CKPT_OPTS_INIT;
	struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s.ready", trigger);
	if (!(f = fopen(path, "w")))
		die("%s: cannot write", path);
	fclose(f);
	for (int i = 0; access(trigger, F_OK); i++) {
		if (i > 300000)
			die("no trigger");
		usleep(1000);
	}
	o.progress = on_progress;
	if (rs_checkpoint(c, dir, &o, &rep))
		die("checkpoint: %s", rs_errormsg());
	printf("stale: checkpoint %s of %" PRIu64 " rows, taken again %d "
	       "time(s) after the configuration changed\n", rep.id, rep.rows,
	       atomic_load(&again));
	rs_client_close(&c);
	return atomic_load(&again) >= 1 ? 0 : 1;
}

static int do_same(const char *a, const char *b)
{
	static const char *const tabs[] = { "cnt", "emb" };
	int bad = 0;

	for (int t = 0; t < 2; t++) {
		struct recs x, y;
		int diff = 0;

		records(a, tabs[t], &x);
		records(b, tabs[t], &y);
		bad += one_each(a, tabs[t], &x) + one_each(b, tabs[t], &y);
		if (x.len != y.len || !x.len) {
			printf("table %s: records of %u and %u bytes\n",
			       tabs[t], x.len, y.len);
			bad++;
		}
		for (int i = 0; !bad && i < K; i++)
			if (memcmp(x.data + (size_t)i * REC_MAX,
				   y.data + (size_t)i * REC_MAX, x.len)) {
				if (!diff++)
					printf("table %s, key %d: the records "
					       "differ\n", tabs[t], i);
			}
		bad += diff;
		if (!bad)
			printf("same: table %s: %d keys, once each, rows and "
			       "state (%u bytes a key) equal bit for bit\n",
			       tabs[t], K, x.len);
		recs_free(&x);
		recs_free(&y);
	}
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	for (int i = 0; i < K; i++)
		keys[i] = KEY_MUL * (uint64_t)(i + 1);
	if (argc == 4 && !strcmp(argv[1], "take"))
		return do_take(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "bump"))
		return do_bump(argv[2], atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "stale"))
		return do_stale(argv[2], argv[3], argv[4]);
	if (argc == 4 && !strcmp(argv[1], "same"))
		return do_same(argv[2], argv[3]);
	fprintf(stderr, "usage: ckpt_cluster_driver take|bump|stale|same ...\n");
	return 2;
}
