/*
 * recstore-engine-bench - native benchmark of the storage engine (no
 * network, no RDMA): PET-hash inserts and lookups at 90% load, slab row
 * inserts / reads / in-place updates, and the CPU cost of the one-sided
 * validation a client runs on READ bytes (row of 128 x fp32, bucket), with
 * the checksum functions that were considered for it. Rates are per
 * core: operations per second of the measuring thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so a busy machine slows them less than it
 * would wall-clock rates.
 *
 *   recstore-engine-bench [-m all|index|rows|validate|callgrind]
 *                         [-k index keys] [-r rows] [-d dim]
 *                         [-n lookups] [-t threads] [-i iterations]
 *
 * -m callgrind runs each validation kernel, and one optimizer step of each
 * optimizer kind, -i times in its own function
 * (cg_*), for instruction counts that do not depend on a noisy machine:
 *   valgrind --tool=callgrind --callgrind-out-file=cg.out \
 *       recstore-engine-bench -m callgrind -i 100000
 *   callgrind_annotate --inclusive=yes cg.out | grep cg_
 * and divide by -i. Results and the exact commands: docs/benchmarks.md.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <xxhash.h>
#define XXH_DISPATCH_DISABLE_REPLACE /* name both variants explicitly */
#include <xxh_x86dispatch.h>

#include "common/rs_internal.h"
#include "index/pet.h"
#include "value/optimizer.h"
#include "value/slab.h"

struct opts {
	const char *mode;
	uint64_t keys, rows, lookups, iters;
	uint32_t dim;
	int threads;
};

static volatile uint64_t sink;

/* CPU time of the calling thread: rates are per core and do not count
 * time the thread spent preempted on a busy machine. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t i)
{
	uint64_t z = i + 0x9E3779B97F4A7C15ULL;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static void *big_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, len, MADV_HUGEPAGE);
	return p;
}

/* ---- index ---- */

struct lk_arg {
	struct pet_index *p;
	uint64_t keys, n, base, found;
	double secs;
};

static void *lookup_thread(void *a)
{
	struct lk_arg *la = a;
	uint64_t s = la->base * 7 + 1, found = 0;
	uint32_t ref;
	double t0 = now();

	for (uint64_t i = 0; i < la->n; i++) {
		s = mix(s);
		found += pet_lookup(la->p, mix(la->base + s % la->keys),
				    &ref) == 0;
	}
	la->secs = now() - t0;
	la->found = found;
	return NULL;
}

/* Lookups from `threads` concurrent threads; returns lookups per
 * CPU-second (per core). */
static double run_lookups(struct pet_index *p, uint64_t keys, uint64_t base,
			  uint64_t n, int threads, uint64_t *found)
{
	pthread_t th[64];
	struct lk_arg la[64];
	double cpu = 0;

	*found = 0;
	for (int i = 0; i < threads; i++) {
		la[i] = (struct lk_arg){p, keys, n / threads, base, 0, 0};
		pthread_create(&th[i], NULL, lookup_thread, &la[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		*found += la[i].found;
		cpu += la[i].secs;
	}
	return (double)(n / threads * threads) / cpu;
}

static int bench_index(const struct opts *o)
{
	struct pet_geom g;
	struct pet_index *p;
	struct pet_stats st;
	uint64_t found, len;
	double t0, ins, hit1, miss1, hitn;
	void *region;

	if (pet_geom_for(o->keys, 0.9, 0x1234, 0x5678, &g))
		return -1;
	len = pet_region_bytes(g.nbuckets);
	region = big_alloc(len);
	if (!region || pet_format(region, len, &g, NULL, NULL) ||
	    pet_open(&p, region, len, NULL, NULL))
		return -1;
	t0 = now();
	for (uint64_t i = 0; i < o->keys; i++)
		if (pet_insert(p, mix(i), (uint32_t)i)) {
			fprintf(stderr, "insert %llu: %s\n",
				(unsigned long long)i, rs_errormsg());
			return -1;
		}
	ins = (double)o->keys / (now() - t0);
	pet_get_stats(p, &st);
	hit1 = run_lookups(p, o->keys, 0, o->lookups, 1, &found);
	if (found != o->lookups)
		fprintf(stderr, "warning: %llu of %llu found\n",
			(unsigned long long)found,
			(unsigned long long)o->lookups);
	miss1 = run_lookups(p, o->keys, o->keys, o->lookups, 1, &found);
	hitn = run_lookups(p, o->keys, 0, o->lookups, o->threads, &found);
	printf("## index: %llu keys, %llu buckets (%.1f MiB), fill %.1f%%, "
	       "%llu cuckoo moves\n",
	       (unsigned long long)o->keys, (unsigned long long)g.nbuckets,
	       (double)len / (1 << 20), 100 * st.fill,
	       (unsigned long long)st.displacements);
	printf("| index op | per core | ns/op |\n|---|---|---|\n");
	printf("| insert 0 -> 90%% (1 thread) | %.2f M/s | %.0f |\n",
	       ins / 1e6, 1e9 / ins);
	printf("| lookup hit at 90%% (1 thread) | %.2f M/s | %.0f |\n",
	       hit1 / 1e6, 1e9 / hit1);
	printf("| lookup miss at 90%% (1 thread) | %.2f M/s | %.0f |\n",
	       miss1 / 1e6, 1e9 / miss1);
	printf("| lookup hit, %d threads at once (per core) | %.2f M/s | %.0f "
	       "|\n\n", o->threads, hitn / 1e6, 1e9 / hitn);
	pet_close(&p);
	munmap(region, len);
	return 0;
}

/* ---- rows ---- */

static int bench_rows(const struct opts *o)
{
	struct slab_table_cfg tc = {.name = "bench", .dim = o->dim,
				    .capacity = o->rows, .index_load = 0.9};
	struct slab_store_cfg sc = {.flags = SLAB_F_HUGEPAGES};
	struct slab_table_stats ts;
	struct slab_store *st;
	struct slab_table *t;
	float *v = calloc(o->dim, sizeof(float));
	uint64_t n = o->rows, s = 1;
	double t0, ins, rd, upd, lk;
	uint32_t r;

	sc.size = slab_table_footprint(&tc, false) + (8ULL << 20);
	if (!v || slab_store_open(&st, &sc) || slab_table_create(st, &tc, &t))
		return -1;
	t0 = now();
	for (uint64_t i = 0; i < n; i++) {
		v[0] = (float)i;
		if (slab_insert(t, mix(i), v, NULL, NULL)) {
			fprintf(stderr, "insert: %s\n", rs_errormsg());
			return -1;
		}
	}
	ins = (double)n / (now() - t0);
	t0 = now();
	for (uint64_t i = 0; i < o->lookups; i++) {
		s = mix(s);
		sink += slab_lookup(t, mix(s % n), &r);
	}
	lk = (double)o->lookups / (now() - t0);
	t0 = now();
	for (uint64_t i = 0; i < o->lookups; i++) {
		s = mix(s);
		sink += slab_read(t, mix(s % n), v, NULL);
	}
	rd = (double)o->lookups / (now() - t0);
	t0 = now();
	for (uint64_t i = 0; i < o->lookups / 4; i++) {
		struct slab_wr w = {.val = v};

		s = mix(s);
		if (slab_write_begin(t, mix(s % n), &w))
			return -1;
		for (uint32_t j = 0; j < o->dim; j++)
			w.val[j] += 0.5f;
		slab_write_commit(&w);
	}
	upd = (double)(o->lookups / 4) / (now() - t0);
	slab_table_stats(t, &ts);
	printf("## rows: %llu rows of %u x fp32 (stride %u B), index fill "
	       "%.1f%%, DRAM pool\n",
	       (unsigned long long)n, o->dim, (unsigned)(32 + o->dim * 4 +
							  63) / 64 * 64,
	       100 * ts.index.fill);
	printf("| row op (1 thread) | rate | ns/op |\n|---|---|---|\n");
	printf("| slab_insert (row + index) | %.2f M/s | %.0f |\n",
	       ins / 1e6, 1e9 / ins);
	printf("| slab_lookup (index only) | %.2f M/s | %.0f |\n", lk / 1e6,
	       1e9 / lk);
	printf("| slab_read (lookup + seqlock copy) | %.2f M/s | %.0f |\n",
	       rd / 1e6, 1e9 / rd);
	printf("| slab_write_begin/commit (update) | %.2f M/s | %.0f |\n\n",
	       upd / 1e6, 1e9 / upd);
	slab_store_close(&st);
	free(v);
	return 0;
}

/* ---- validation and checksum kernels ---- */

struct vfix {
	struct row_geom g;
	uint8_t *row;
	float *w, *state, *grad; /* optimizer kernels: dim, 2 dim + 1, dim */
	struct optim_params op[OPTIM_KIND_COUNT];
	uint8_t bucket[PET_BUCKET_BYTES];
	uint64_t bucket_idx;
	size_t covered; /* bytes the row checksum covers */
};

static int vfix_init(struct vfix *f, uint32_t dim)
{
	uint64_t ver = 8, key = 42, meta, cs;
	float x;

	if (row_geom_init(&f->g, dim, ROW_F32, 1000, 1))
		return -1;
	f->g.incarnation = 0x5EED0F7AB1E5ULL; /* a table's uid */
	f->row = aligned_alloc(64, f->g.stride);
	if (!f->row)
		return -1;
	memset(f->row, 0, f->g.stride);
	meta = row_meta(&f->g, ROW_LIVE);
	memcpy(f->row, &ver, 8);
	memcpy(f->row + 16, &key, 8);
	memcpy(f->row + 24, &meta, 8);
	for (uint32_t i = 0; i < dim; i++) {
		x = (float)i * 0.25f;
		memcpy(f->row + 32 + 4 * i, &x, 4);
	}
	cs = row_checksum(f->row, &f->g, 7, ver);
	memcpy(f->row + 8, &cs, 8);
	f->covered = 16 + f->g.payload_bytes;
	f->w = calloc(4 * (size_t)dim + 1, sizeof(float));
	if (!f->w)
		return -1;
	f->state = f->w + dim;
	f->grad = f->state + 2 * (size_t)dim + 1;
	for (uint32_t i = 0; i < dim; i++) {
		f->w[i] = (float)i * 0.25f;
		f->grad[i] = 1e-3f * (float)(i % 7) - 3e-3f;
	}
	for (uint32_t k = 0; k < OPTIM_KIND_COUNT; k++)
		optim_params_default(&f->op[k], k);
	/* a full bucket */
	memset(f->bucket, 0, sizeof(f->bucket));
	for (int s = 0; s < PET_SLOTS; s++) {
		uint64_t k = mix((uint64_t)s);
		uint32_t rf = (uint32_t)s;

		f->bucket[16 + s] = (uint8_t)(0x80 | s);
		memcpy(f->bucket + 8 * (PET_W_KEY0 + s), &k, 8);
		memcpy(f->bucket + 8 * PET_W_REF0 + 4 * s, &rf, 4);
	}
	f->bucket_idx = 3;
	cs = pet_bucket_checksum(f->bucket, f->bucket_idx, 0,
				 f->g.incarnation);
	memcpy(f->bucket + 8, &cs, 8);
	return row_validate(f->row, &f->g, 7, 42, NULL) ||
	       pet_bucket_validate(f->bucket, f->bucket_idx, f->g.incarnation);
}

__attribute__((target("sse4.2"))) static uint32_t crc32c(const void *p,
							 size_t n)
{
	const uint8_t *b = p;
	uint64_t c = 0xFFFFFFFF;

	for (; n >= 8; n -= 8, b += 8) {
		uint64_t w;

		memcpy(&w, b, 8);
		c = __builtin_ia32_crc32di(c, w);
	}
	for (; n; n--, b++)
		c = __builtin_ia32_crc32qi((uint32_t)c, *b);
	return (uint32_t)c ^ 0xFFFFFFFF;
}

#define CG_LOOP(name, expr)                                                  \
	__attribute__((noinline)) static void name(struct vfix *f,           \
						   uint64_t n)               \
	{                                                                    \
		uint64_t acc = 0;                                            \
		for (uint64_t i = 0; i < n; i++) {                           \
			__asm__ __volatile__("" ::: "memory");               \
			acc += (uint64_t)(expr);                             \
		}                                                            \
		sink += acc;                                                 \
	}

CG_LOOP(cg_row_validate, row_validate(f->row, &f->g, 7, 42, NULL))
CG_LOOP(cg_bucket_validate, pet_bucket_validate(f->bucket, f->bucket_idx, f->g.incarnation))
CG_LOOP(cg_bucket_validate_find,
	pet_bucket_validate(f->bucket, f->bucket_idx, f->g.incarnation) +
		pet_bucket_find(f->bucket, mix(5), 0x85, &(uint32_t){0}))
CG_LOOP(cg_xxh3_64, XXH3_64bits_withSeed(f->row + 16, f->covered, i))
CG_LOOP(cg_xxh3_64_dispatch,
	XXH3_64bits_withSeed_dispatch(f->row + 16, f->covered, i))
CG_LOOP(cg_xxh3_128,
	XXH3_128bits_withSeed_dispatch(f->row + 16, f->covered, i).low64)
CG_LOOP(cg_xxh64, XXH64(f->row + 16, f->covered, i))
CG_LOOP(cg_xxh32, XXH32(f->row + 16, f->covered, (uint32_t)i))
CG_LOOP(cg_crc32c, crc32c(f->row + 16, f->covered))
/* one optimizer step on a row of dim floats (state reused across calls:
 * the values stay small and finite) */
#define CG_OPTIM(k) optim_apply(&f->op[k], f->w, f->state, f->grad, f->g.dim)
CG_LOOP(cg_optim_sgd, CG_OPTIM(OPTIM_SGD))
CG_LOOP(cg_optim_adagrad, CG_OPTIM(OPTIM_ADAGRAD))
CG_LOOP(cg_optim_rowwise_adagrad, CG_OPTIM(OPTIM_ROWWISE_ADAGRAD))
CG_LOOP(cg_optim_adam, CG_OPTIM(OPTIM_ADAM))

struct kernel {
	const char *name;
	void (*fn)(struct vfix *, uint64_t);
};

static const struct kernel kernels[] = {
	{"row_validate (XXH3-64 dispatch, as shipped)", cg_row_validate},
	{"pet_bucket_validate", cg_bucket_validate},
	{"pet_bucket_validate + pet_bucket_find", cg_bucket_validate_find},
	{"XXH3-64 seeded (libxxhash default build)", cg_xxh3_64},
	{"XXH3-64 seeded (libxxhash runtime dispatch)", cg_xxh3_64_dispatch},
	{"XXH3-128 seeded (dispatch)", cg_xxh3_128},
	{"XXH64", cg_xxh64},
	{"XXH32", cg_xxh32},
	{"CRC32C (SSE4.2 crc32 instruction)", cg_crc32c},
};

/* Optimizer kernels (callgrind mode only): one step on one row. */
static const struct kernel optim_kernels[] = {
	{"optim_apply sgd", cg_optim_sgd},
	{"optim_apply adagrad", cg_optim_adagrad},
	{"optim_apply rowwise_adagrad", cg_optim_rowwise_adagrad},
	{"optim_apply adam", cg_optim_adam},
};

/* Best of 5 runs of n calls: ns per call. */
static double time_kernel(const struct kernel *k, struct vfix *f, uint64_t n)
{
	double best = 1e30;

	for (int rep = 0; rep < 5; rep++) {
		double t0 = now(), dt;

		k->fn(f, n);
		dt = (now() - t0) / (double)n * 1e9;
		if (dt < best)
			best = dt;
	}
	return best;
}

static int bench_validate(const struct opts *o)
{
	struct vfix f;

	if (vfix_init(&f, o->dim))
		return -1;
	printf("## validation (1 thread, data in L1): row of %u x fp32 "
	       "(%zu checksummed bytes), bucket 128 B\n",
	       o->dim, f.covered);
	printf("| kernel | ns/call |\n|---|---|\n");
	for (size_t i = 0; i < RS_ARRAY_SIZE(kernels); i++)
		printf("| %s | %.1f |\n", kernels[i].name,
		       time_kernel(&kernels[i], &f, o->iters));
	printf("\n");
	free(f.w);
	free(f.row);
	return 0;
}

static int run_callgrind(const struct opts *o)
{
	struct vfix f;

	if (vfix_init(&f, o->dim))
		return -1;
	for (size_t i = 0; i < RS_ARRAY_SIZE(kernels); i++)
		kernels[i].fn(&f, o->iters);
	for (size_t i = 0; i < RS_ARRAY_SIZE(optim_kernels); i++)
		optim_kernels[i].fn(&f, o->iters);
	printf("ran each cg_* kernel %llu times\n",
	       (unsigned long long)o->iters);
	free(f.w);
	free(f.row);
	return 0;
}

/* ---- main ---- */

static void usage(void)
{
	fprintf(stderr,
		"usage: recstore-engine-bench [-m all|index|rows|validate|"
		"callgrind]\n"
		"  [-k index keys (4000000)] [-r rows (500000)] [-d dim "
		"(128)]\n"
		"  [-n lookups (4000000)] [-t threads (2)] [-i iters "
		"(2000000)]\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
	int c;

	*o = (struct opts){"all", 4000000, 500000, 4000000, 2000000, 128, 2};
	while ((c = getopt(argc, argv, "m:k:r:d:n:t:i:h")) != -1) {
		switch (c) {
		case 'm':
			o->mode = optarg;
			break;
		case 'k':
			o->keys = strtoull(optarg, NULL, 0);
			break;
		case 'r':
			o->rows = strtoull(optarg, NULL, 0);
			break;
		case 'd':
			o->dim = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'n':
			o->lookups = strtoull(optarg, NULL, 0);
			break;
		case 't':
			o->threads = atoi(optarg);
			break;
		case 'i':
			o->iters = strtoull(optarg, NULL, 0);
			break;
		default:
			return -1;
		}
	}
	if (o->threads < 1 || o->threads > 64 || !o->keys || !o->rows ||
	    !o->lookups || !o->iters)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	int all, rc = 0;

	if (parse(argc, argv, &o)) {
		usage();
		return 2;
	}
	all = !strcmp(o.mode, "all");
	if (!strcmp(o.mode, "callgrind"))
		return run_callgrind(&o) ? 1 : 0;
	if (all || !strcmp(o.mode, "validate"))
		rc |= bench_validate(&o);
	if (all || !strcmp(o.mode, "index"))
		rc |= bench_index(&o);
	if (all || !strcmp(o.mode, "rows"))
		rc |= bench_rows(&o);
	if (rc)
		fprintf(stderr, "failed: %s\n", rs_errormsg());
	return rc ? 1 : 0;
}
