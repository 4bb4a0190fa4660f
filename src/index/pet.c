/*
 * pet.c - the PET-hash index: server-side insert, lookup, remove, cuckoo
 * displacement and recovery.
 *
 * Invariants (between operations, i.e. with no bucket lock held):
 *  I1 every key is in at most one slot, in one of its two candidate
 *     buckets; an occupied slot's tag is the key's tag;
 *  I2 every bucket's version is even and its checksum matches;
 *  I3 used == number of occupied slots.
 * While a move runs, its key is in both buckets (same ref) under the locks
 * of both; nobody else can look at it with a lock held.
 *
 * Locks: one byte per bucket in DRAM (p->locks), taken lower index first,
 * never more than two at a time. Displacement additionally holds
 * p->displace (taken before any bucket lock), so at most one BFS runs per
 * index and paths do not fight each other; fast-path inserts and removes
 * run concurrently with it, so each step of a path re-validates under the
 * bucket locks and a failed step restarts the search.
 *
 * Bucket writes build a private 16-word image (under the bucket lock, so
 * the copy is stable), then publish it with the seqlock writer protocol of
 * pet_sync.h and persist it. Buckets are only ever touched as 64-bit words:
 * tags and refs are extracted from their words by shifts.
 *
 * Displacement: breadth-first search from both candidate buckets (libcuckoo
 * style, bounded by PET_BFS_NODES and PET_BFS_DEPTH) for a bucket with a
 * free slot; then the keys along the path move one step each, starting at
 * the free end, which leaves a free slot in a candidate bucket of the new
 * key. With 8 slots per bucket this reaches well above 95% fill.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "index/pet.h"
#include "index/pet_sync.h"

#define PET_BFS_NODES 2048
#define PET_BFS_DEPTH 6
#define PET_VISIT_SLOTS 8192 /* power of two, >= 2 * PET_BFS_NODES */
#define PET_SLOW_ATTEMPTS 64

struct bfs_node {
	uint64_t bucket;
	uint64_t pkey;	/* key that moves from the parent into this bucket */
	int32_t parent; /* -1 for a candidate bucket of the new key */
	uint8_t pslot;	/* its slot in the parent bucket */
	uint8_t depth;
};

struct visit {
	uint64_t bucket;
	uint32_t stamp;
};

struct pet_index {
	uint8_t *region;
	size_t region_len;
	struct pet_geom g;
	uint64_t *buckets; /* word array, bucket b at buckets + 16 * b */
	_Atomic uint8_t *locks;
	pet_persist_fn persist;
	void *persist_ctx;

	pthread_mutex_t displace; /* guards everything below it */
	struct bfs_node *nodes;
	struct visit *visit;
	uint32_t stamp;

	_Atomic uint64_t used;
	_Atomic uint64_t displacements;
	_Atomic uint64_t slow_inserts;
	_Atomic uint64_t full_refusals;
	_Atomic uint64_t lookup_retries;
};

#define RELAXED memory_order_relaxed

/* ---- bucket images: uint64_t[PET_BUCKET_WORDS] ---- */

static inline uint8_t img_tag(const uint64_t *w, unsigned s)
{
	return (uint8_t)(w[PET_W_TAGS] >> (8 * s));
}

static inline uint32_t img_ref(const uint64_t *w, unsigned s)
{
	return (uint32_t)(w[PET_W_REF0 + s / 2] >> (32 * (s & 1)));
}

static inline void img_set(uint64_t *w, unsigned s, uint8_t tag,
			   uint64_t key, uint32_t ref)
{
	uint64_t *rw = &w[PET_W_REF0 + s / 2];
	unsigned sh = 32 * (s & 1);

	w[PET_W_TAGS] &= ~(0xFFULL << (8 * s));
	w[PET_W_TAGS] |= (uint64_t)tag << (8 * s);
	w[PET_W_KEY0 + s] = key;
	*rw &= ~(0xFFFFFFFFULL << sh);
	*rw |= (uint64_t)ref << sh;
}

static inline void img_clear(uint64_t *w, unsigned s)
{
	img_set(w, s, 0, 0, 0);
}

static inline int img_find(const uint64_t *w, uint64_t key, uint8_t tag)
{
	for (unsigned s = 0; s < PET_SLOTS; s++)
		if (img_tag(w, s) == tag && w[PET_W_KEY0 + s] == key)
			return (int)s;
	return -1;
}

static inline int img_free_slot(const uint64_t *w)
{
	for (unsigned s = 0; s < PET_SLOTS; s++)
		if (!img_tag(w, s))
			return (int)s;
	return -1;
}

static inline unsigned img_nfree(const uint64_t *w)
{
	unsigned n = 0;

	for (unsigned s = 0; s < PET_SLOTS; s++)
		n += !img_tag(w, s);
	return n;
}

static inline unsigned img_used(const uint64_t *w)
{
	return PET_SLOTS - img_nfree(w);
}

/* ---- shared buckets ---- */

static inline uint64_t *bucket_words(const struct pet_index *p, uint64_t b)
{
	return p->buckets + b * PET_BUCKET_WORDS;
}

static void lock2(struct pet_index *p, uint64_t a, uint64_t b)
{
	uint64_t lo = a < b ? a : b, hi = a < b ? b : a;

	pet_lock(&p->locks[lo]);
	pet_lock(&p->locks[hi]);
}

static void unlock2(struct pet_index *p, uint64_t a, uint64_t b)
{
	pet_unlock(&p->locks[a]);
	pet_unlock(&p->locks[b]);
}

/* Copy bucket b while holding its lock (no writer can interfere). */
static void bucket_copy_locked(const struct pet_index *p, uint64_t b,
			       uint64_t *img)
{
	pet_copy_out(img, bucket_words(p, b), PET_BUCKET_WORDS);
}

/* Lock-free consistent copy of bucket b (seqlock read); returns version. */
static uint64_t bucket_snapshot(const struct pet_index *p, uint64_t b,
				uint64_t *img)
{
	const uint64_t *w = bucket_words(p, b);
	unsigned spins = 0;

	for (;;) {
		uint64_t v = pet_ld_acq(&w[PET_W_VERSION]);

		if (v & 1) {
			pet_backoff(&spins);
			continue;
		}
		pet_copy_out(img + 1, w + 1, PET_BUCKET_WORDS - 1);
		atomic_thread_fence(memory_order_acquire);
		if (pet_ld(&w[PET_W_VERSION]) == v) {
			img[PET_W_VERSION] = v;
			return v;
		}
	}
}

/* Publish img as the new content of bucket b (caller holds b's lock). */
static void bucket_publish(struct pet_index *p, uint64_t b, uint64_t *img)
{
	uint64_t *w = bucket_words(p, b);
	uint64_t v = pet_ld(&w[PET_W_VERSION]);

	img[PET_W_VERSION] = v + 2;
	img[PET_W_CSUM] = pet_bucket_checksum(img, b, v + 2, p->g.incarnation);
	v = pet_write_open(&w[PET_W_VERSION]);
	pet_copy_in(w + 1, img + 1, PET_BUCKET_WORDS - 1);
	pet_write_close(&w[PET_W_VERSION], v);
	if (p->persist)
		p->persist(p->persist_ctx, w, PET_BUCKET_BYTES);
}

/*
 * Look for key in bucket b without a lock: 1 and *ref if found, else 0;
 * *ver gets the version of the consistent state that was searched.
 */
static int bucket_probe(const struct pet_index *p, uint64_t b, uint64_t key,
			uint8_t tag, uint32_t *ref, uint64_t *ver)
{
	const uint64_t *w = bucket_words(p, b);
	const uint64_t lo7 = 0x7F7F7F7F7F7F7F7FULL;
	unsigned spins = 0;

	for (;;) {
		uint64_t v = pet_ld_acq(&w[PET_W_VERSION]);
		uint64_t x, m;
		uint32_t r = 0;
		int found = 0;

		if (v & 1) {
			pet_backoff(&spins);
			continue;
		}
		x = pet_ld(&w[PET_W_TAGS]) ^ (0x0101010101010101ULL * tag);
		m = ~(((x & lo7) + lo7) | x | lo7);
		while (m) {
			unsigned s = (unsigned)__builtin_ctzll(m) >> 3;

			if (pet_ld(&w[PET_W_KEY0 + s]) == key) {
				uint64_t rw = pet_ld(&w[PET_W_REF0 + s / 2]);

				r = (uint32_t)(rw >> (32 * (s & 1)));
				found = 1;
				break;
			}
			m &= m - 1;
		}
		atomic_thread_fence(memory_order_acquire);
		if (pet_ld(&w[PET_W_VERSION]) != v)
			continue;
		*ver = v;
		if (found)
			*ref = r;
		return found;
	}
}

/* ---- geometry, format, open ---- */

int pet_geom_for(uint64_t keys, double load, uint64_t seed1, uint64_t seed2,
		 struct pet_geom *g)
{
	double nb;

	if (!(load > 0.0 && load <= 1.0))
		return rs_seterr(RS_E_INVAL, "index load %g not in (0, 1]",
				 load);
	if (seed1 == seed2)
		return rs_seterr(RS_E_INVAL, "index hash seeds must differ");
	nb = (double)keys / (PET_SLOTS * load);
	if (nb > (double)(UINT64_MAX / PET_BUCKET_BYTES / 2))
		return rs_seterr(RS_E_INVAL, "index for %llu keys too large",
				 (unsigned long long)keys);
	g->nbuckets = (uint64_t)nb;
	if ((double)g->nbuckets < nb)
		g->nbuckets++;
	if (g->nbuckets < 2)
		g->nbuckets = 2;
	g->seed1 = seed1;
	g->seed2 = seed2;
	g->incarnation = 0;
	g->bucket_bytes = PET_BUCKET_BYTES;
	g->buckets_off = PET_HEADER_BYTES;
	return 0;
}

int pet_format(void *region, size_t len, const struct pet_geom *g,
	       pet_persist_fn persist, void *ctx)
{
	uint64_t *w;

	if (g->nbuckets < 2 || g->seed1 == g->seed2 ||
	    len < pet_region_bytes(g->nbuckets))
		return rs_seterr(RS_E_INVAL,
				 "index region of %zu bytes cannot hold %llu "
				 "buckets", len,
				 (unsigned long long)g->nbuckets);
	pet_header_fill(region, g);
	w = (uint64_t *)((uint8_t *)region + PET_HEADER_BYTES);
	for (uint64_t b = 0; b < g->nbuckets; b++, w += PET_BUCKET_WORDS) {
		memset(w, 0, PET_BUCKET_BYTES);
		w[PET_W_CSUM] = pet_bucket_checksum(w, b, 0, g->incarnation);
	}
	if (persist)
		persist(ctx, region, pet_region_bytes(g->nbuckets));
	return 0;
}

static uint64_t count_used(const struct pet_index *p)
{
	uint64_t n = 0;

	for (uint64_t b = 0; b < p->g.nbuckets; b++)
		n += img_used(bucket_words(p, b));
	return n;
}

int pet_open(struct pet_index **out, void *region, size_t len,
	     pet_persist_fn persist, void *ctx)
{
	struct pet_index *p;
	struct pet_geom g;
	int rc;

	*out = NULL;
	if (len < PET_HEADER_BYTES)
		return rs_seterr(RS_E_INVAL, "index region too small");
	rc = pet_header_parse(region, &g);
	if (rc)
		return rs_seterr(RS_E_CORRUPT, "index header invalid (%s)",
				 rs_strerror(rc));
	if (len < pet_region_bytes(g.nbuckets))
		return rs_seterr(RS_E_CORRUPT,
				 "index region %zu bytes, header says %llu",
				 len, (unsigned long long)pet_region_bytes(
					      g.nbuckets));
	p = rs_calloc(1, sizeof(*p));
	if (!p)
		goto err_alloc;
	p->locks = rs_calloc(g.nbuckets, 1);
	if (!p->locks)
		goto err_locks;
	p->nodes = rs_malloc(PET_BFS_NODES * sizeof(*p->nodes));
	if (!p->nodes)
		goto err_nodes;
	p->visit = rs_calloc(PET_VISIT_SLOTS, sizeof(*p->visit));
	if (!p->visit)
		goto err_visit;
	rc = pthread_mutex_init(&p->displace, NULL);
	if (rc)
		goto err_mutex;
	p->region = region;
	p->region_len = pet_region_bytes(g.nbuckets);
	p->g = g;
	p->buckets = (uint64_t *)((uint8_t *)region + g.buckets_off);
	p->persist = persist;
	p->persist_ctx = ctx;
	atomic_init(&p->used, count_used(p));
	*out = p;
	return 0;

err_mutex:
	free(p->visit);
err_visit:
	free(p->nodes);
err_nodes:
	free((void *)p->locks);
err_locks:
	free(p);
err_alloc:
	return rs_seterr(-ENOMEM, "index: out of memory for %llu buckets",
			 (unsigned long long)g.nbuckets);
}

void pet_close(struct pet_index **pp)
{
	struct pet_index *p = pp ? *pp : NULL;

	if (!p)
		return;
	pthread_mutex_destroy(&p->displace);
	free(p->visit);
	free(p->nodes);
	free((void *)p->locks);
	free(p);
	*pp = NULL;
}

/* ---- lookup ---- */

int pet_lookup(struct pet_index *p, uint64_t key, uint32_t *ref)
{
	struct pet_loc loc;
	uint64_t v[2];

	pet_locate(&p->g, key, &loc);
	/* both buckets' lines in flight at once: a hit in b[0] otherwise
	 * waits for line 0 (tags) then line 1 (ref), then b[1] */
	for (int i = 0; i < 2; i++) {
		const uint64_t *w = bucket_words(p, loc.b[i]);

		__builtin_prefetch(w);
		__builtin_prefetch(w + 8);
	}
	for (;;) {
		if (bucket_probe(p, loc.b[0], key, loc.tag, ref, &v[0]) ||
		    bucket_probe(p, loc.b[1], key, loc.tag, ref, &v[1]))
			return 0;
		/* Reader rule 3 (pet_format.h): prove the miss. */
		if (pet_ld_acq(&bucket_words(p, loc.b[0])[0]) == v[0] &&
		    pet_ld_acq(&bucket_words(p, loc.b[1])[0]) == v[1])
			return RS_E_NOTFOUND;
		atomic_fetch_add_explicit(&p->lookup_retries, 1, RELAXED);
	}
}

/* ---- insert ---- */

/* 0 inserted, RS_E_EXISTS, or 1: both candidate buckets are full. */
static int insert_fast(struct pet_index *p, uint64_t key, uint32_t ref,
		       const struct pet_loc *loc)
{
	uint64_t img[2][PET_BUCKET_WORDS];
	unsigned nfree[2];
	int i, s;

	lock2(p, loc->b[0], loc->b[1]);
	for (i = 0; i < 2; i++) {
		bucket_copy_locked(p, loc->b[i], img[i]);
		if (img_find(img[i], key, loc->tag) >= 0) {
			unlock2(p, loc->b[0], loc->b[1]);
			return RS_E_EXISTS;
		}
		nfree[i] = img_nfree(img[i]);
	}
	if (!nfree[0] && !nfree[1]) {
		unlock2(p, loc->b[0], loc->b[1]);
		return 1;
	}
	i = nfree[0] >= nfree[1] ? 0 : 1; /* the emptier bucket */
	s = img_free_slot(img[i]);
	img_set(img[i], (unsigned)s, loc->tag, key, ref);
	bucket_publish(p, loc->b[i], img[i]);
	atomic_fetch_add_explicit(&p->used, 1, RELAXED);
	unlock2(p, loc->b[0], loc->b[1]);
	return 0;
}

/* Mark bucket b visited in this search; false if it already was. */
static bool visit_once(struct pet_index *p, uint64_t b)
{
	uint64_t h = b * 0x9E3779B97F4A7C15ULL;
	uint32_t i = (uint32_t)(h >> 40) & (PET_VISIT_SLOTS - 1);

	for (;; i = (i + 1) & (PET_VISIT_SLOTS - 1)) {
		struct visit *v = &p->visit[i];

		if (v->stamp != p->stamp) {
			v->stamp = p->stamp;
			v->bucket = b;
			return true;
		}
		if (v->bucket == b)
			return false;
	}
}

static void bfs_push(struct pet_index *p, int *n, uint64_t bucket,
		     uint64_t pkey, int parent, unsigned pslot, unsigned depth)
{
	struct bfs_node *nd = &p->nodes[(*n)++];

	nd->bucket = bucket;
	nd->pkey = pkey;
	nd->parent = parent;
	nd->pslot = (uint8_t)pslot;
	nd->depth = (uint8_t)depth;
}

/* Breadth-first search for a bucket with a free slot; index of its node,
 * or -1. Holds p->displace. */
static int bfs(struct pet_index *p, const struct pet_loc *loc)
{
	uint64_t img[PET_BUCKET_WORDS];
	int n = 0;

	if (++p->stamp == 0) {
		memset(p->visit, 0, PET_VISIT_SLOTS * sizeof(*p->visit));
		p->stamp = 1;
	}
	for (int i = 0; i < 2; i++) {
		visit_once(p, loc->b[i]);
		bfs_push(p, &n, loc->b[i], 0, -1, 0, 0);
	}
	for (int head = 0; head < n; head++) {
		struct bfs_node nd = p->nodes[head];

		bucket_snapshot(p, nd.bucket, img);
		if (img_free_slot(img) >= 0)
			return head;
		if (nd.depth >= PET_BFS_DEPTH)
			continue;
		for (unsigned s = 0; s < PET_SLOTS && n < PET_BFS_NODES;
		     s++) {
			uint64_t x = img[PET_W_KEY0 + s];
			struct pet_loc xl;
			uint64_t alt;

			pet_locate(&p->g, x, &xl);
			alt = xl.b[0] == nd.bucket ? xl.b[1] : xl.b[0];
			if (visit_once(p, alt))
				bfs_push(p, &n, alt, x, head, s, nd.depth + 1u);
		}
	}
	return -1;
}

/* Move key x from slot s of bucket src to a free slot of bucket dst.
 * 0, or -1 if the bucket contents changed since the search. */
static int move_one(struct pet_index *p, uint64_t src, unsigned s,
		    uint64_t x, uint64_t dst)
{
	uint64_t si[PET_BUCKET_WORDS], di[PET_BUCKET_WORDS];
	int f, rc = -1;

	lock2(p, src, dst);
	bucket_copy_locked(p, src, si);
	bucket_copy_locked(p, dst, di);
	if (!img_tag(si, s) || si[PET_W_KEY0 + s] != x)
		goto out;
	f = img_free_slot(di);
	if (f < 0)
		goto out;
	img_set(di, (unsigned)f, img_tag(si, s), x, img_ref(si, s));
	bucket_publish(p, dst, di); /* add first (persisted) ... */
	/* ... and make the add visible before any store of the removal,
	 * also to observers a release fence does not cover (a NIC on a
	 * weakly ordered CPU); an mfence on x86, once per move */
	atomic_thread_fence(memory_order_seq_cst);
	img_clear(si, s);
	bucket_publish(p, src, si); /* ... then remove */
	atomic_fetch_add_explicit(&p->displacements, 1, RELAXED);
	rc = 0;
out:
	unlock2(p, src, dst);
	return rc;
}

/* Walk the path from its free end back to a candidate bucket. */
static int run_path(struct pet_index *p, int end)
{
	for (int cur = end; p->nodes[cur].parent >= 0;) {
		const struct bfs_node *c = &p->nodes[cur];
		const struct bfs_node *par = &p->nodes[c->parent];

		if (move_one(p, par->bucket, c->pslot, c->pkey, c->bucket))
			return -1;
		cur = c->parent;
	}
	return 0;
}

static int insert_slow(struct pet_index *p, uint64_t key, uint32_t ref,
		       const struct pet_loc *loc)
{
	int rc = 1, end;

	pthread_mutex_lock(&p->displace);
	atomic_fetch_add_explicit(&p->slow_inserts, 1, RELAXED);
	for (int attempt = 0; attempt < PET_SLOW_ATTEMPTS; attempt++) {
		rc = insert_fast(p, key, ref, loc);
		if (rc <= 0)
			break;
		end = bfs(p, loc);
		if (end < 0)
			break;
		run_path(p, end); /* on failure, search again */
	}
	pthread_mutex_unlock(&p->displace);
	if (rc <= 0)
		return rc;
	atomic_fetch_add_explicit(&p->full_refusals, 1, RELAXED);
	return rs_seterr(RS_E_FULL, "index full: %llu of %llu slots used",
			 (unsigned long long)atomic_load(&p->used),
			 (unsigned long long)(p->g.nbuckets * PET_SLOTS));
}

int pet_insert(struct pet_index *p, uint64_t key, uint32_t ref)
{
	struct pet_loc loc;
	int rc;

	pet_locate(&p->g, key, &loc);
	rc = insert_fast(p, key, ref, &loc);
	if (rc <= 0)
		return rc;
	return insert_slow(p, key, ref, &loc);
}

/* ---- remove ---- */

int pet_remove(struct pet_index *p, uint64_t key, uint32_t *ref)
{
	uint64_t img[PET_BUCKET_WORDS];
	struct pet_loc loc;
	int found = 0;

	pet_locate(&p->g, key, &loc);
	lock2(p, loc.b[0], loc.b[1]);
	for (int i = 0; i < 2 && !found; i++) {
		int s;

		bucket_copy_locked(p, loc.b[i], img);
		s = img_find(img, key, loc.tag);
		if (s < 0)
			continue;
		if (ref)
			*ref = img_ref(img, (unsigned)s);
		img_clear(img, (unsigned)s);
		bucket_publish(p, loc.b[i], img);
		found = 1;
	}
	unlock2(p, loc.b[0], loc.b[1]);
	if (!found)
		return RS_E_NOTFOUND;
	atomic_fetch_sub_explicit(&p->used, 1, RELAXED);
	return 0;
}

/* ---- recovery and checks (exclusive use) ---- */

void pet_repair(struct pet_index *p, pet_keep_fn keep, void *arg,
		struct pet_repair_stats *st)
{
	uint64_t img[PET_BUCKET_WORDS];
	uint64_t used = 0;

	memset(st, 0, sizeof(*st));
	for (uint64_t b = 0; b < p->g.nbuckets; b++) {
		bool dirty = pet_bucket_validate(bucket_words(p, b), b,
						 p->g.incarnation) != 0;

		if (dirty)
			st->torn_buckets++;
		bucket_copy_locked(p, b, img);
		for (unsigned s = 0; s < PET_SLOTS; s++) {
			uint64_t x = img[PET_W_KEY0 + s];
			struct pet_loc xl;

			if (!img_tag(img, s))
				continue;
			pet_locate(&p->g, x, &xl);
			if (img_tag(img, s) == xl.tag &&
			    (b == xl.b[0] || b == xl.b[1]) &&
			    (!keep || keep(arg, x, img_ref(img, s)))) {
				st->kept++;
				used++;
				continue;
			}
			img_clear(img, s);
			st->dropped++;
			dirty = true;
		}
		if (!dirty)
			continue;
		/* normalize a version left odd by a crash, then publish */
		pet_st(&bucket_words(p, b)[0], (img[0] | 1) + 1);
		bucket_publish(p, b, img);
	}
	atomic_store(&p->used, used);
}

int pet_verify(struct pet_index *p, uint64_t *keys)
{
	uint64_t img[PET_BUCKET_WORDS];
	uint64_t n = 0;

	for (uint64_t b = 0; b < p->g.nbuckets; b++) {
		bucket_copy_locked(p, b, img);
		if (pet_bucket_validate(img, b, p->g.incarnation))
			return rs_seterr(RS_E_CORRUPT, "bucket %llu torn",
					 (unsigned long long)b);
		for (unsigned s = 0; s < PET_SLOTS; s++) {
			uint64_t x = img[PET_W_KEY0 + s];
			uint64_t other[PET_BUCKET_WORDS];
			struct pet_loc xl;
			uint64_t ob;

			if (!img_tag(img, s))
				continue;
			n++;
			pet_locate(&p->g, x, &xl);
			if (img_tag(img, s) != xl.tag ||
			    (b != xl.b[0] && b != xl.b[1]))
				return rs_seterr(RS_E_CORRUPT,
						 "key %#llx misplaced in "
						 "bucket %llu",
						 (unsigned long long)x,
						 (unsigned long long)b);
			for (unsigned t = s + 1; t < PET_SLOTS; t++)
				if (img_tag(img, t) &&
				    img[PET_W_KEY0 + t] == x)
					goto dup;
			ob = b == xl.b[0] ? xl.b[1] : xl.b[0];
			bucket_copy_locked(p, ob, other);
			if (img_find(other, x, xl.tag) >= 0)
				goto dup;
			continue;
dup:
			return rs_seterr(RS_E_CORRUPT, "key %#llx twice",
					 (unsigned long long)x);
		}
	}
	if (n != atomic_load(&p->used))
		return rs_seterr(RS_E_CORRUPT, "%llu keys, counter says %llu",
				 (unsigned long long)n,
				 (unsigned long long)atomic_load(&p->used));
	if (keys)
		*keys = n;
	return 0;
}

void pet_get_stats(const struct pet_index *p, struct pet_stats *st)
{
	st->nbuckets = p->g.nbuckets;
	st->slots = p->g.nbuckets * PET_SLOTS;
	st->used = atomic_load_explicit(&p->used, RELAXED);
	st->fill = (double)st->used / (double)st->slots;
	st->displacements = atomic_load_explicit(&p->displacements, RELAXED);
	st->slow_inserts = atomic_load_explicit(&p->slow_inserts, RELAXED);
	st->full_refusals = atomic_load_explicit(&p->full_refusals, RELAXED);
	st->lookup_retries = atomic_load_explicit(&p->lookup_retries,
						  RELAXED);
}

const struct pet_geom *pet_geometry(const struct pet_index *p)
{
	return &p->g;
}

void *pet_region(const struct pet_index *p, size_t *len)
{
	if (len)
		*len = p->region_len;
	return p->region;
}
