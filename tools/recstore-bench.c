/*
 * recstore-bench - a recommendation-style workload against memory nodes.
 *
 * Model: --tables embedding tables (default 26, like the Criteo sparse
 * features) of --dim floats; each batch is --batch fused 64-bit ids, the
 * table number in the top 8 bits and a Zipf(--zipf)-distributed row number
 * below, over --keys rows per table. Per run:
 *   1. create the tables if missing (optimizer --optim), warm every row with
 *      get-or-init;
 *   2. get phase: batched gets by one-sided READ (rs_get_multi);
 *   3. update phase: the same batches as gradients (rs_update per table);
 *   4. the get phase again with every get forced through the GET RPC;
 * each reporting keys/s, batches/s, p50/p99 per batch and, when the node's
 * CPU time is known (--server-pid, or the node's STATS rusage), the server
 * CPU time per million keys.
 *
 * Other modes: --single-key (latency of one-key gets, location cache warm
 * and cold), --verify (puts known rows, reads them back both ways, checks an
 * update). Every result line starts with "bench:"; machine-readable
 * "result NAME VALUE" lines follow for ci/bench-store.sh.
 *
 * Defaults are small so that a run finishes in well under a minute inside
 * the TCG-emulated rxe guest: 1000 keys per table, 5 iterations per phase.
 * For real hardware use e.g. --keys 1000000 --seconds 10.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recstore/client.h"

#include "common/defaults.h"

#define MAX_TABLES 255
#define TABLE_SHIFT 56

struct opts {
	const char *nodes;
	unsigned tables, batch, dim, threads, iters;
	double zipf, seconds;
	uint64_t keys;
	const char *optim;
	const char *evict; /* eviction policy of created tables, or NULL */
	const char *prefix;
	char server_pids[256];
	int single_key, verify, no_rpc, no_update, cold, primary_reads;
	double idle; /* --idle: seconds to stay connected and idle at the end */
	unsigned lat_samples;
	int single_mode; /* --single-mode: only that mode (< 0: all three) */
	int spin_us; /* < 0: client default */
	double update_lr; /* >= 0: every update passes this lr (rs_update_ex) */
};

struct bench {
	struct opts o;
	struct rs_client *c;
	struct rs_table *t[MAX_TABLES];
	double *cdf; /* Zipf CDF over ranks 0..keys-1 */
};

struct phase_result {
	double secs;
	uint64_t keys, batches, errors, missing;
	double p50_us, p99_us;
};

/* ---- small utilities ---- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static double uniform01(uint64_t *s)
{
	return (xorshift(s) >> 11) * (1.0 / 9007199254740992.0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	i = (size_t)(p * (n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

/* ---- Zipf over ranks: CDF table + binary search (any exponent > 0) ---- */

static int zipf_init(struct bench *b)
{
	double sum = 0;

	b->cdf = malloc(b->o.keys * sizeof(double));
	if (!b->cdf)
		return -ENOMEM;
	for (uint64_t r = 0; r < b->o.keys; r++) {
		sum += b->o.zipf > 0 ? 1.0 / pow((double)(r + 1), b->o.zipf)
				     : 1.0;
		b->cdf[r] = sum;
	}
	for (uint64_t r = 0; r < b->o.keys; r++)
		b->cdf[r] /= sum;
	return 0;
}

static uint64_t zipf_rank(const struct bench *b, uint64_t *rng)
{
	double u = uniform01(rng);
	uint64_t lo = 0, hi = b->o.keys - 1;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (b->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static uint64_t fused_id(unsigned table, uint64_t row)
{
	return (uint64_t)table << TABLE_SHIFT | row;
}

static unsigned id_table(uint64_t id)
{
	return (unsigned)(id >> TABLE_SHIFT);
}

/* ---- server CPU time ---- */

/* utime + stime of a process, in seconds; < 0 if unknown. */
static double pid_cpu_s(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* comm may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Total server CPU seconds: --server-pid list, else the nodes' rusage. */
static double server_cpu_s(struct bench *b)
{
	double total = 0;

	if (b->o.server_pids[0]) {
		char buf[256], *tok, *save = NULL;

		snprintf(buf, sizeof(buf), "%s", b->o.server_pids);
		for (tok = strtok_r(buf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			double s = pid_cpu_s(strtol(tok, NULL, 10));

			if (s < 0)
				return -1;
			total += s;
		}
		return total;
	}
	for (unsigned i = 0; i < rs_client_node_count(b->c); i++) {
		struct rs_node_stats st = RS_NODE_STATS_INIT;

		if (rs_node_get_stats(b->c, i, &st) < 0)
			return -1;
		if (st.cpu_user_us + st.cpu_sys_us == 0)
			return -1;
		total += (st.cpu_user_us + st.cpu_sys_us) / 1e6;
	}
	return total;
}

/* ---- set-up ---- */

static int open_tables(struct bench *b)
{
	for (unsigned i = 0; i < b->o.tables; i++) {
		struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
		char name[RS_TABLE_NAME_MAX + 1];
		int ret;

		snprintf(name, sizeof(name), "%s%u", b->o.prefix, i);
		ret = rs_table_open(b->c, name, &b->t[i]);
		if (ret == 0 && rs_table_dim(b->t[i]) != b->o.dim) {
			fprintf(stderr, "bench: table %s has dim %u, not %u\n",
				name, rs_table_dim(b->t[i]), b->o.dim);
			return RS_E_DIM;
		}
		if (ret == 0)
			continue;
		if (ret != RS_E_NOTFOUND)
			goto fail;
		ret = rs_table_spec_init(&spec, name, b->o.dim);
		if (!ret)
			ret = rs_table_spec_set_optimizer(&spec, b->o.optim);
		if (!ret) {
			spec.init.kind = RS_INIT_UNIFORM;
			spec.init.a = 0.01f;
			spec.init.seed = i + 1;
			spec.capacity = b->o.keys + b->o.keys / 2 + 1024;
			if (b->o.evict) /* capped at the capacity: the cost
					   of the access information */
				ret = rs_table_spec_set_eviction(
					&spec, b->o.evict, 0, 0, 0);
			if (!ret)
				ret = rs_table_create(b->c, &spec);
		}
		if (!ret)
			ret = rs_table_open(b->c, name, &b->t[i]);
		if (ret)
			goto fail;
		continue;
fail:
		fprintf(stderr, "bench: table %s: %s (%s)\n", name,
			rs_strerror(ret), rs_errormsg());
		return ret;
	}
	return 0;
}

static int warm(struct bench *b)
{
	size_t n = b->o.batch;
	uint64_t *keys = malloc(n * sizeof(*keys));
	float *rows = malloc(n * b->o.dim * sizeof(float));
	double t0 = now_s();
	int ret = 0;

	if (!keys || !rows) {
		ret = -ENOMEM;
		goto out;
	}
	for (unsigned t = 0; t < b->o.tables && ret >= 0; t++)
		for (uint64_t r = 0; r < b->o.keys && ret >= 0; r += n) {
			size_t m = b->o.keys - r < n ? b->o.keys - r : n;

			for (size_t i = 0; i < m; i++)
				keys[i] = fused_id(t, r + i);
			ret = rs_get_or_init(b->t[t], keys, m, rows, NULL, 0);
			if (ret >= 0 && (size_t)ret != m)
				ret = RS_E_NOTFOUND;
		}
	/* A trainer's location cache is warm after its first epoch: fill it
	 * (one-sided gets of every key) so the get phase measures that. */
	for (unsigned t = 0; t < b->o.tables && ret >= 0 && !b->o.cold; t++)
		for (uint64_t r = 0; r < b->o.keys && ret >= 0; r += n) {
			size_t m = b->o.keys - r < n ? b->o.keys - r : n;

			for (size_t i = 0; i < m; i++)
				keys[i] = fused_id(t, r + i);
			ret = rs_get(b->t[t], keys, m, rows, NULL, 0);
		}
	if (ret < 0)
		fprintf(stderr, "bench: warm-up: %s (%s)\n", rs_strerror(ret),
			rs_errormsg());
	else
		printf("bench: warmed %u tables x %" PRIu64 " keys%s in %.2f "
		       "s\n", b->o.tables, b->o.keys,
		       b->o.cold ? "" : " (and the location cache)",
		       now_s() - t0);
out:
	free(keys);
	free(rows);
	return ret < 0 ? ret : 0;
}

/* ---- the batched phases ---- */

enum phase { PH_GET, PH_GET_RPC, PH_UPDATE };

struct worker {
	struct bench *b;
	enum phase ph;
	unsigned id;
	double deadline;
	uint64_t iters;
	double *lat; /* per batch, us */
	size_t nlat, maxlat;
	uint64_t keys, errors, missing;
	int ret;
};

static void make_batch(struct bench *b, uint64_t *rng, uint64_t *ids)
{
	for (unsigned i = 0; i < b->o.batch; i++)
		ids[i] = fused_id((unsigned)(xorshift(rng) % b->o.tables),
				  zipf_rank(b, rng));
}

static int do_get(struct worker *w, const uint64_t *ids,
		  struct rs_key_ref *refs, float *rows, int *status)
{
	struct bench *b = w->b;
	unsigned flags = w->ph == PH_GET_RPC ? RS_F_RPC : 0;
	int ret;

	for (unsigned i = 0; i < b->o.batch; i++) {
		refs[i].table = b->t[id_table(ids[i])];
		refs[i].key = ids[i];
		refs[i].out = rows + (size_t)i * b->o.dim;
	}
	ret = rs_get_multi(b->c, refs, b->o.batch, status, flags);
	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < b->o.batch; i++) {
		w->errors += status[i] < 0;
		w->missing += status[i] == RS_KEY_MISSING;
	}
	return 0;
}

/* Gradients grouped by table (a small constant, so rows stay bounded). */
static int do_update(struct worker *w, const uint64_t *ids, uint64_t *keys,
		     float *grads, int *status)
{
	struct bench *b = w->b;

	for (unsigned t = 0; t < b->o.tables; t++) {
		size_t m = 0;
		int ret;

		for (unsigned i = 0; i < b->o.batch; i++)
			if (id_table(ids[i]) == t)
				keys[m++] = ids[i];
		if (!m)
			continue;
		for (size_t i = 0; i < m * b->o.dim; i++)
			grads[i] = 1e-4f;
		if (b->o.update_lr >= 0) {
			struct rs_update_opts uo = RS_UPDATE_OPTS_INIT;

			uo.flags = RS_UPDATE_LR;
			uo.lr = (float)b->o.update_lr;
			ret = rs_update_ex(b->t[t], keys, m, grads, status, 0,
					   &uo);
		} else {
			ret = rs_update(b->t[t], keys, m, grads, status, 0);
		}
		if (ret < 0)
			return ret;
		for (size_t i = 0; i < m; i++) {
			w->errors += status[i] < 0;
			w->missing += status[i] == RS_KEY_MISSING;
		}
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct bench *b = w->b;
	size_t n = b->o.batch;
	uint64_t rng = 0x1234567ull * (w->id + 1) + (uint64_t)w->ph;
	uint64_t *ids = malloc(n * sizeof(*ids));
	uint64_t *keys = malloc(n * sizeof(*keys));
	float *rows = malloc(n * b->o.dim * sizeof(float));
	struct rs_key_ref *refs = malloc(n * sizeof(*refs));
	int *status = malloc(n * sizeof(*status));

	if (!ids || !keys || !rows || !refs || !status) {
		w->ret = -ENOMEM;
		goto out;
	}
	for (uint64_t it = 0;; it++) {
		double t0;

		if (w->deadline > 0 ? now_s() >= w->deadline : it >= w->iters)
			break;
		make_batch(b, &rng, ids);
		t0 = now_s();
		if (w->ph == PH_UPDATE)
			w->ret = do_update(w, ids, keys, rows, status);
		else
			w->ret = do_get(w, ids, refs, rows, status);
		if (w->ret < 0)
			break;
		if (w->nlat < w->maxlat)
			w->lat[w->nlat++] = (now_s() - t0) * 1e6;
		w->keys += n;
	}
out:
	free(ids);
	free(keys);
	free(rows);
	free(refs);
	free(status);
	return NULL;
}

static int run_phase(struct bench *b, enum phase ph, struct phase_result *r)
{
	unsigned nt = b->o.threads;
	struct worker *w = calloc(nt, sizeof(*w));
	pthread_t *tid = calloc(nt, sizeof(*tid));
	size_t maxlat = b->o.seconds > 0 ? 1000000 : b->o.iters;
	double *all = NULL, t0;
	size_t nall = 0;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	if (!w || !tid)
		goto nomem;
	t0 = now_s();
	for (unsigned i = 0; i < nt; i++) {
		w[i] = (struct worker){ .b = b, .ph = ph, .id = i,
					.iters = b->o.iters, .maxlat = maxlat };
		w[i].deadline = b->o.seconds > 0 ? t0 + b->o.seconds : 0;
		w[i].lat = malloc(maxlat * sizeof(double));
		if (!w[i].lat || pthread_create(&tid[i], NULL, worker_main,
						&w[i])) {
			nt = i;
			ret = -ENOMEM;
			break;
		}
	}
	for (unsigned i = 0; i < nt; i++)
		pthread_join(tid[i], NULL);
	r->secs = now_s() - t0;
	all = malloc((nt ? nt : 1) * maxlat * sizeof(double));
	for (unsigned i = 0; i < nt; i++) {
		if (w[i].ret < 0 && !ret)
			ret = w[i].ret;
		r->keys += w[i].keys;
		r->errors += w[i].errors;
		r->missing += w[i].missing;
		r->batches += w[i].nlat;
		if (all) {
			memcpy(all + nall, w[i].lat, w[i].nlat * sizeof(double));
			nall += w[i].nlat;
		}
	}
	if (all) {
		r->p50_us = percentile(all, nall, 0.50);
		r->p99_us = percentile(all, nall, 0.99);
	}
	for (unsigned i = 0; i < b->o.threads; i++)
		free(w[i].lat);
	free(all);
	free(w);
	free(tid);
	return ret;
nomem:
	free(w);
	free(tid);
	return -ENOMEM;
}

static const char *phase_name(enum phase ph)
{
	return ph == PH_GET ? "get" : ph == PH_GET_RPC ? "get_rpc" : "update";
}

static int bench_phase(struct bench *b, enum phase ph)
{
	struct phase_result r;
	struct rs_client_stats cs0 = RS_CLIENT_STATS_INIT;
	struct rs_client_stats cs1 = RS_CLIENT_STATS_INIT;
	double cpu0 = server_cpu_s(b), cpu1;
	const char *name = phase_name(ph);
	int ret;

	rs_client_get_stats(b->c, &cs0);
	ret = run_phase(b, ph, &r);
	cpu1 = server_cpu_s(b);
	rs_client_get_stats(b->c, &cs1);
	if (ret < 0) {
		fprintf(stderr, "bench: %s: %s (%s)\n", name, rs_strerror(ret),
			rs_errormsg());
		return ret;
	}
	printf("bench: %-8s %10.0f keys/s %8.1f batches/s  p50 %9.1f us  "
	       "p99 %9.1f us  (%" PRIu64 " batches, %.2f s, %" PRIu64
	       " missing, %" PRIu64 " errors)\n",
	       name, r.keys / r.secs, r.batches / r.secs, r.p50_us, r.p99_us,
	       r.batches, r.secs, r.missing, r.errors);
	printf("result %s_keys_per_s %.0f\n", name, r.keys / r.secs);
	printf("result %s_batches_per_s %.2f\n", name, r.batches / r.secs);
	printf("result %s_p50_us %.1f\nresult %s_p99_us %.1f\n", name,
	       r.p50_us, name, r.p99_us);
	if (ph != PH_UPDATE) {
		printf("bench: %-8s reads posted %" PRIu64 ", rpc keys %"
		       PRIu64 ", torn retries %" PRIu64 ", fallbacks %" PRIu64
		       ", cache hits %" PRIu64 "\n", name,
		       cs1.reads_posted - cs0.reads_posted,
		       cs1.rpc_keys - cs0.rpc_keys,
		       cs1.torn_retries - cs0.torn_retries,
		       cs1.rpc_fallbacks - cs0.rpc_fallbacks,
		       cs1.cache_hits - cs0.cache_hits);
		if (r.keys)
			printf("result %s_backup_share %.3f\n", name,
			       (double)(cs1.backup_keys - cs0.backup_keys) /
				       r.keys);
	}
	if (cpu0 >= 0 && cpu1 >= 0 && r.keys) {
		double per_m = (cpu1 - cpu0) / (r.keys / 1e6);

		printf("bench: %-8s server CPU %.3f s = %.3f s per million "
		       "keys (%.1f%% of one core)\n", name, cpu1 - cpu0, per_m,
		       100.0 * (cpu1 - cpu0) / r.secs);
		printf("result %s_server_cpu_s_per_mkeys %.4f\n", name, per_m);
		printf("result %s_server_cpu_pct %.2f\n", name,
		       100.0 * (cpu1 - cpu0) / r.secs);
	}
	return r.errors ? RS_E_PROTO : 0;
}

/* ---- single-key latency ---- */

/* A client without a location cache, its first table's index images
 * prefetched: every get of it is a location-cache miss (--single-key's
 * image mode). */
static int image_client(struct bench *b, struct rs_client **c2,
			struct rs_table **t2, uint64_t *images,
			struct rs_client_stats *s0)
{
	struct rs_client_config *cfg = NULL;
	int ret = rs_client_config_new(&cfg);

	if (!ret)
		ret = rs_client_config_set_nodes(cfg, b->o.nodes);
	if (!ret)
		ret = rs_client_config_set_cache_entries(cfg, 0);
	if (!ret && b->o.primary_reads)
		ret = rs_client_config_set_replica_reads(cfg, 0);
	if (!ret && b->o.spin_us >= 0)
		ret = rs_client_config_set_spin_us(cfg, (unsigned)b->o.spin_us);
	if (!ret)
		ret = rs_client_open(c2, cfg);
	rs_client_config_delete(&cfg);
	if (!ret)
		ret = rs_table_open(*c2, rs_table_name(b->t[0]), t2);
	if (!ret)
		ret = rs_table_prefetch_index(*t2, images);
	if (!ret)
		ret = rs_client_get_stats(*c2, s0);
	return ret;
}

/*
 * One-key gets of one key in four modes: warm (the location cache holds
 * the key: one READ), cold (the caches are bypassed: bucket READs, then
 * the row READ), image (a second client without a location cache whose
 * bucket images were prefetched: the cold get of a key it never READ,
 * one READ) and rpc (the GET RPC). Warm, cold and image samples
 * alternate, so all see the same conditions of a noisy (e.g. emulated)
 * machine.
 */
static int single_key(struct bench *b)
{
	static const struct {
		const char *name;
		unsigned flags;
	} mode[] = { { "warm", 0 }, { "cold", RS_F_NOCACHE },
		     { "image", 0 }, { "rpc", RS_F_RPC } };
	enum { NMODE = sizeof(mode) / sizeof(mode[0]), ONESIDED = 3 };
	struct rs_client_stats s0 = RS_CLIENT_STATS_INIT, s1 = s0;
	unsigned n = b->o.lat_samples;
	int only = b->o.single_mode;
	double *lat = malloc((size_t)NMODE * n * sizeof(double));
	float *row = malloc(b->o.dim * sizeof(float));
	uint64_t key = fused_id(0, 0), images = 0;
	struct rs_client *c2 = NULL;
	struct rs_table *t2 = NULL;
	int st, ret = 0;

	if (!lat || !row) {
		ret = -ENOMEM;
		goto out;
	}
	/* the image mode's client, only when that mode runs (a prefetch is
	 * a READ of the whole index) */
	if (only < 0 || only == 2)
		ret = image_client(b, &c2, &t2, &images, &s0);
	/* untimed: fills the cache for the warm mode */
	if (!ret)
		ret = rs_get(b->t[0], &key, 1, row, &st, 0);
	/* one-sided modes interleaved; rpc after them (its server-side
	 * work would otherwise disturb the one-sided samples) */
	for (unsigned i = 0; i < 2 * n && ret >= 0; i++)
		for (unsigned m = i < n ? 0 : ONESIDED;
		     m < (i < n ? (unsigned)ONESIDED : NMODE) && ret >= 0;
		     m++) {
			if (only >= 0 && m != (unsigned)only)
				continue;
			double t0 = now_s();

			ret = rs_get(m == 2 ? t2 : b->t[0], &key, 1, row, &st,
				     mode[m].flags);
			lat[m * n + i % n] = (now_s() - t0) * 1e6;
			if (ret == 0)
				ret = RS_E_NOTFOUND;
		}
	if (ret < 0) {
		fprintf(stderr, "bench: single-key: %s (%s)\n",
			rs_strerror(ret), rs_errormsg());
		goto out;
	}
	if (c2)
		rs_client_get_stats(c2, &s1);
	for (unsigned m = 0; m < NMODE; m++) {
		double p50 = percentile(lat + m * n, n, 0.5);

		if (only >= 0 && m != (unsigned)only)
			continue;
		double p99 = percentile(lat + m * n, n, 0.99);

		printf("bench: single-key %-5s p50 %8.1f us  p99 %8.1f us  "
		       "(%u gets, %zu-byte payload)\n", mode[m].name, p50, p99,
		       n, b->o.dim * sizeof(float));
		printf("result single_%s_p50_us %.2f\n", mode[m].name, p50);
		printf("result single_%s_p99_us %.2f\n", mode[m].name, p99);
	}
	if (only < 0 || only == 2) {
		uint64_t gets = s1.get_keys - s0.get_keys;

		printf("bench: single-key image: %" PRIu64 " bucket images "
		       "prefetched; %" PRIu64 " gets, %" PRIu64 " READs, %"
		       PRIu64 " served by an image\n", images, gets,
		       s1.reads_posted - s0.reads_posted,
		       s1.bucket_cache_hits - s0.bucket_cache_hits);
		printf("result single_image_reads_per_get %.2f\n",
		       gets ? (double)(s1.reads_posted - s0.reads_posted) /
				      (double)gets
			    : 0.0);
	}
out:
	rs_client_close(&c2);
	free(lat);
	free(row);
	return ret < 0 ? ret : 0;
}

/* ---- verify ---- */

static float pattern(uint64_t key, unsigned i)
{
	return (float)((key * 31 + i) % 1000) / 8.0f;
}

static int verify(struct bench *b)
{
	unsigned dim = b->o.dim, n = b->o.batch;
	uint64_t *keys = malloc(n * sizeof(*keys));
	float *rows = malloc((size_t)n * dim * sizeof(float));
	int *st = malloc(n * sizeof(int));
	size_t bad = 0;
	int ret = -ENOMEM;

	if (!keys || !rows || !st)
		goto out;
	for (unsigned i = 0; i < n; i++) {
		keys[i] = fused_id(0, i % b->o.keys);
		for (unsigned j = 0; j < dim; j++)
			rows[(size_t)i * dim + j] = pattern(keys[i], j);
	}
	ret = rs_put(b->t[0], keys, n, rows, st, 0);
	for (unsigned f = 0; f < 3 && ret >= 0; f++) {
		unsigned flags = f == 0 ? 0 : f == 1 ? RS_F_NOCACHE : RS_F_RPC;

		memset(rows, 0, (size_t)n * dim * sizeof(float));
		ret = rs_get(b->t[0], keys, n, rows, st, flags);
		for (unsigned i = 0; i < n && ret >= 0; i++)
			for (unsigned j = 0; j < dim; j++)
				bad += st[i] != RS_KEY_FOUND ||
				       rows[(size_t)i * dim + j] !=
					       pattern(keys[i], j);
	}
	if (ret < 0)
		fprintf(stderr, "bench: verify: %s (%s)\n", rs_strerror(ret),
			rs_errormsg());
	printf("bench: verify %s (%zu bad elements)\n",
	       ret >= 0 && !bad ? "ok" : "FAILED", bad);
	if (ret >= 0 && bad)
		ret = RS_E_CORRUPT;
out:
	free(keys);
	free(rows);
	free(st);
	return ret < 0 ? ret : 0;
}

/* ---- what the client sent; staying idle ---- */

/* The keyed requests this client sent, by the type names the node's
 * rs_requests_total{type} uses (tests/rxe/test_observe_e2e.sh compares). */
static void print_client_requests(struct bench *b)
{
	struct rs_client_stats cs = RS_CLIENT_STATS_INIT;

	rs_client_get_stats(b->c, &cs);
	const struct {
		const char *name;
		struct rs_rpc_count n;
	} t[] = { { "get", cs.rpc_get }, { "get_or_init", cs.rpc_get_or_init },
		  { "put", cs.rpc_put }, { "update", cs.rpc_update },
		  { "delete", cs.rpc_delete } };

	printf("bench: client sent");
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		printf("%s %s %" PRIu64 " (%" PRIu64 " keys)", i ? "," : "",
		       t[i].name, t[i].n.requests, t[i].n.keys);
	printf("\n");
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		printf("result client_requests_%s %" PRIu64 "\n"
		       "result client_keys_%s %" PRIu64 "\n", t[i].name,
		       t[i].n.requests, t[i].name, t[i].n.keys);
}

/*
 * --idle: stay connected, doing nothing, until SIGINT/SIGTERM or the time
 * is up; then close normally. The signals are blocked in every thread from
 * the start (main() does it before the client's threads exist) and taken
 * here with sigtimedwait(), so nothing polls while idle.
 */
static void stay_idle(double secs)
{
	struct timespec ts = { .tv_sec = (time_t)secs,
			       .tv_nsec = (long)((secs - (time_t)secs) * 1e9) };
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	printf("bench: idle, connected, for up to %.0f s (pid %d)\n", secs,
	       (int)getpid());
	fflush(stdout);
	do
		sig = sigtimedwait(&set, NULL, &ts);
	while (sig < 0 && errno == EINTR);
	printf("bench: idle period ended (%s)\n",
	       sig > 0 ? "signal" : "time");
}

/* ---- arguments ---- */

static void usage(FILE *f)
{
	fprintf(f,
"usage: recstore-bench --nodes ADDR:PORT[,ADDR:PORT...] [options]\n"
"  --tables N       tables (default 26)      --dim N      floats/row (128)\n"
"  --batch N        keys per batch (4096)    --keys N     rows/table (1000)\n"
"  --zipf S         Zipf exponent (0.99)     --threads N  threads (1)\n"
"  --iters N        batches per phase and thread (5)\n"
"  --seconds S      run each phase S seconds instead of --iters\n"
"  --optim NAME     optimizer of created tables (sgd)\n"
"  --evict POLICY   created tables evict by POLICY (lru, lfu) at their\n"
"                   capacity (docs/eviction.md)\n"
"  --prefix P       table names P0..P<N-1> (bench_t)\n"
"  --server-pid P[,P...]  server processes whose CPU time to report\n"
"  --no-rpc         skip the RPC get phase   --no-update  skip updates\n"
"  --primary-reads  cluster mode: READ at primaries only (no replica reads)\n"
"  --spin-us N      client completion polling window (default 50)\n"
"  --update-lr X    updates pass learning rate X (rs_update_ex, as an lr\n"
"                   schedule would); default: the table's lr\n"
"  --cold           do not pre-fill the location cache before the phases\n"
"  --single-key     one-key get latency: warm, cold, image, rpc (--samples N)\n"
"  --single-mode M  --single-key of mode M only (warm, cold, image or rpc: one\n"
"                   untimed get, then N of that mode; ci/bench-path.sh\n"
"                   counts a call's instructions so)\n"
"  --verify         put, read back (cached, uncached, RPC) and compare\n"
"  --idle S         at the end stay connected and idle for S seconds, or\n"
"                   until SIGINT/SIGTERM (blocked until then)\n");
}

static int parse_uint(const char *s, unsigned long long lo,
		      unsigned long long hi, unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end || end == s || *v < lo || *v > hi ? -1 : 0;
}

static int parse_args(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "nodes", 1, 0, 'n' }, { "tables", 1, 0, 't' },
		{ "batch", 1, 0, 'b' }, { "dim", 1, 0, 'd' },
		{ "zipf", 1, 0, 'z' },	{ "keys", 1, 0, 'k' },
		{ "iters", 1, 0, 'i' }, { "seconds", 1, 0, 's' },
		{ "threads", 1, 0, 'T' }, { "optim", 1, 0, 'o' },
		{ "prefix", 1, 0, 'p' }, { "server-pid", 1, 0, 'P' },
		{ "no-rpc", 0, 0, 'R' }, { "no-update", 0, 0, 'U' },
		{ "single-key", 0, 0, '1' }, { "verify", 0, 0, 'v' },
		{ "samples", 1, 0, 'S' }, { "help", 0, 0, 'h' },
		{ "cold", 0, 0, 'C' }, { "spin-us", 1, 0, 'W' },
		{ "idle", 1, 0, 'I' }, { "update-lr", 1, 0, 'L' },
		{ "primary-reads", 0, 0, 'B' }, { "evict", 1, 0, 'E' },
		{ "single-mode", 1, 0, 'M' },
		{ 0, 0, 0, 0 }
	};
	unsigned long long v;
	int c;

	*o = (struct opts){ .tables = 26, .batch = 4096, .dim = 128,
			    .threads = 1, .iters = 5, .zipf = 0.99,
			    .keys = 1000, .optim = "sgd", .prefix = "bench_t",
			    .lat_samples = 200, .single_mode = -1,
			    .spin_us = -1,
			    .update_lr = -1 };
	o->nodes = getenv("RS_NODES");
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		int bad = 0;

		switch (c) {
		case 'n': o->nodes = optarg; break;
		case 't': bad = parse_uint(optarg, 1, MAX_TABLES, &v);
			o->tables = (unsigned)v; break;
		case 'b': bad = parse_uint(optarg, 1, 1 << 20, &v);
			o->batch = (unsigned)v; break;
		case 'd': bad = parse_uint(optarg, 1, 65536, &v);
			o->dim = (unsigned)v; break;
		case 'k': bad = parse_uint(optarg, 1, 1ull << 32, &v);
			o->keys = v; break;
		case 'i': bad = parse_uint(optarg, 1, 1u << 30, &v);
			o->iters = (unsigned)v; break;
		case 'T': bad = parse_uint(optarg, 1, 256, &v);
			o->threads = (unsigned)v; break;
		case 'S': bad = parse_uint(optarg, 1, 1u << 24, &v);
			o->lat_samples = (unsigned)v; break;
		case 'M': o->single_key = 1;
			o->single_mode = !strcmp(optarg, "warm") ? 0 :
					 !strcmp(optarg, "cold") ? 1 :
					 !strcmp(optarg, "image") ? 2 :
					 !strcmp(optarg, "rpc") ? 3 : -1;
			bad = o->single_mode < 0; break;
		case 'z': o->zipf = strtod(optarg, NULL);
			bad = !(o->zipf >= 0 && o->zipf < 10); break;
		case 's': o->seconds = strtod(optarg, NULL);
			bad = !(o->seconds > 0); break;
		case 'o': o->optim = optarg; break;
		case 'E': o->evict = optarg; break;
		case 'p': o->prefix = optarg; break;
		case 'P': snprintf(o->server_pids, sizeof(o->server_pids),
				   "%s", optarg); break;
		case 'R': o->no_rpc = 1; break;
		case 'B': o->primary_reads = 1; break;
		case 'U': o->no_update = 1; break;
		case '1': o->single_key = 1; break;
		case 'v': o->verify = 1; break;
		case 'C': o->cold = 1; break;
		case 'W': bad = parse_uint(optarg, 0, RS_SPIN_US_MAX, &v);
			o->spin_us = (int)v; break;
		case 'L': o->update_lr = strtod(optarg, NULL);
			bad = !(o->update_lr >= 0 && o->update_lr < 1e30);
			break;
		case 'I': o->idle = strtod(optarg, NULL);
			bad = !(o->idle > 0 && o->idle <= 86400); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
		if (bad) {
			fprintf(stderr, "recstore-bench: bad value '%s'\n",
				optarg);
			return -1;
		}
	}
	if (!o->nodes) {
		fprintf(stderr, "recstore-bench: --nodes is required\n");
		usage(stderr);
		return -1;
	}
	return 0;
}

static int run(struct bench *b)
{
	int ret;

	ret = open_tables(b);
	if (!ret)
		ret = zipf_init(b);
	if (!ret)
		ret = warm(b);
	if (ret)
		return ret;
	if (b->o.verify)
		return verify(b);
	if (b->o.single_key)
		return single_key(b);
	printf("bench: %u tables, dim %u, batch %u, zipf %.2f, %" PRIu64
	       " keys/table, %u thread(s), %s\n", b->o.tables, b->o.dim,
	       b->o.batch, b->o.zipf, b->o.keys, b->o.threads,
	       rs_client_node_count(b->c) > 1 ? "several nodes" : "one node");
	ret = bench_phase(b, PH_GET);
	if (!ret && !b->o.no_update)
		ret = bench_phase(b, PH_UPDATE);
	if (!ret && !b->o.no_rpc)
		ret = bench_phase(b, PH_GET_RPC);
	print_client_requests(b);
	return ret;
}

int main(int argc, char **argv)
{
	struct rs_client_config *cfg = NULL;
	struct bench b = { 0 };
	int ret;

	if (parse_args(&b.o, argc, argv))
		return 2;
	if (b.o.idle > 0) { /* before any thread exists: see stay_idle() */
		sigset_t set;

		sigemptyset(&set);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	}
	ret = rs_client_config_new(&cfg);
	if (!ret)
		ret = rs_client_config_set_nodes(cfg, b.o.nodes);
	if (!ret && b.o.primary_reads)
		ret = rs_client_config_set_replica_reads(cfg, 0);
	if (!ret && b.o.spin_us >= 0)
		ret = rs_client_config_set_spin_us(cfg, (unsigned)b.o.spin_us);
	if (!ret)
		ret = rs_client_open(&b.c, cfg);
	rs_client_config_delete(&cfg);
	if (ret) {
		fprintf(stderr, "recstore-bench: %s (%s)\n", rs_strerror(ret),
			rs_errormsg());
		return 1;
	}
	ret = run(&b);
	if (!ret && b.o.idle > 0)
		stay_idle(b.o.idle);
	rs_client_close(&b.c);
	free(b.cdf);
	return ret ? 1 : 0;
}
