/*
 * slab_evict.c - per-table eviction and admission (API in slab_evict.h,
 * design in docs/eviction.md).
 *
 * State (DRAM, per table, never in the READable range):
 *   acc[row]   LRU: the logical clock at the row's last access.
 *              LFU: count (16 bits, halved every decay period) << 48 |
 *                   clock at the last access (48 bits).
 *   upd[row]   TTL only: the table clock (seconds) at the last write.
 *   used       rows counted against the cap: live rows plus inserts in
 *              flight. An insert reserves one (slab_ev_reserve) before it
 *              takes a row slot, evicting until it gets one, so live rows
 *              never exceed the cap, also with concurrent inserters.
 *   cms[]      admission: a count-min sketch of sightings (4 probes by
 *              double hashing into one array of 8-bit counters,
 *              conservative update, all halved every 8 x width sightings).
 *
 * The clock is one counter per table advanced by every access the node
 * sees (an atomic add). Victims: `sample` random row slots below the
 * allocation mark are read (a seqlock read of the row header, no index
 * probe); the LIVE one with the smallest score goes (a row whose TTL ran
 * out goes at once, counted as a TTL eviction). Cost per eviction: at
 * most 4 x sample slot reads, one index lookup and one delete.
 *
 * An eviction is slab_delete(): the index slot is cleared, the row made a
 * tombstone (cached client locations see RS_E_STALE), change tracking
 * records the key, and the evicting thread's sink (if any) gets the key.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/rs_internal.h"
#include "value/slab_evict.h"
#include "value/slab_int.h"

#define RELAXED memory_order_relaxed
#define STAMP_BITS 48
#define STAMP_MASK ((1ull << STAMP_BITS) - 1)
#define CNT_MAX 0xffffull
#define CMS_PROBES 4
#define CMS_MIN (1u << 12)
#define CMS_MAX (1u << 22)
#define PROBE_ROUNDS 4 /* slot reads per wanted candidate, at most */

enum ev_cause { EV_CAP, EV_TTL };

struct slab_ev {
	struct slab_ev_cfg cfg;
	uint64_t cap;
	unsigned shift;		/* LFU decay period = 2^shift accesses */
	_Atomic uint64_t used, clock;
	_Atomic uint64_t *acc;
	_Atomic uint32_t *upd;	/* NULL without a TTL */
	_Atomic uint32_t now;
	atomic_bool manual_clock;
	struct timespec t0;
	/* admission */
	_Atomic uint8_t *cms;	/* NULL without admission */
	uint32_t cms_mask;
	uint64_t cms_seed, cms_decay;
	_Atomic uint64_t sightings;
	/* TTL sweep */
	pthread_mutex_t sweep;
	uint64_t cursor;
	/* counters */
	_Atomic uint64_t ev_cap, ev_ttl, admitted, not_admitted, over_cap;
};

static _Thread_local struct slab_ev_sink *tl_sink;
static _Thread_local bool tl_replica;
static _Thread_local uint64_t tl_rng;

bool slab_ev_cfg_active(const struct slab_ev_cfg *c)
{
	return c->policy != SLAB_EV_NONE || c->ttl_s || c->admit_k > 1;
}

/* The wire's checks, with the field names, are proto_table_spec_validate's;
 * this is the store's own guard. */
int slab_ev_cfg_validate(const struct slab_ev_cfg *c, uint64_t capacity)
{
	if (c->policy >= SLAB_EV_POLICY_COUNT ||
	    (c->max_rows && c->policy == SLAB_EV_NONE) ||
	    c->max_rows > capacity || c->ttl_s > SLAB_EV_TTL_MAX ||
	    c->admit_k > SLAB_EV_ADMIT_MAX || c->sample > SLAB_EV_SAMPLE_MAX)
		return rs_seterr(RS_E_INVAL, "eviction: policy %u, cap %llu "
				 "(capacity %llu), ttl %u s, admission %u, "
				 "sample %u: out of range", c->policy,
				 (unsigned long long)c->max_rows,
				 (unsigned long long)capacity, c->ttl_s,
				 c->admit_k, c->sample);
	return 0;
}

static unsigned log2_up(uint64_t x)
{
	unsigned s = 0;

	while (s < 63 && (1ull << s) < x)
		s++;
	return s;
}

int slab_ev_attach(struct slab_table *t, const struct slab_ev_cfg *cfg)
{
	uint64_t cap = t->ent.capacity, width;
	struct slab_ev *ev;
	int rc;

	if (t->ev)
		return rs_seterr(RS_E_INVAL, "table '%s': eviction already "
				 "set", t->ent.name);
	rc = slab_ev_cfg_validate(cfg, cap);
	if (rc)
		return rc;
	ev = rs_calloc(1, sizeof(*ev));
	if (!ev)
		goto nomem;
	ev->cfg = *cfg;
	if (!ev->cfg.sample)
		ev->cfg.sample = SLAB_EV_SAMPLE_DEFAULT;
	ev->cap = cfg->max_rows ? cfg->max_rows : cap;
	ev->shift = log2_up(ev->cap) + 2; /* halve every 4..8 x cap */
	ev->acc = rs_calloc(cap, sizeof(*ev->acc));
	if (!ev->acc)
		goto nomem;
	if (cfg->ttl_s && !(ev->upd = rs_calloc(cap, sizeof(*ev->upd))))
		goto nomem;
	if (cfg->admit_k > 1) {
		width = 1ull << log2_up(4 * ev->cap);
		width = width < CMS_MIN ? CMS_MIN : width > CMS_MAX ? CMS_MAX
								   : width;
		ev->cms = rs_calloc(width, 1);
		if (!ev->cms)
			goto nomem;
		ev->cms_mask = (uint32_t)(width - 1);
		ev->cms_decay = 8 * width;
		ev->cms_seed = t->ent.uid ^ 0x5bd1e9955bd1e995ull;
	}
	if (pthread_mutex_init(&ev->sweep, NULL))
		goto nomem;
	clock_gettime(CLOCK_MONOTONIC, &ev->t0);
	atomic_init(&ev->used, atomic_load(&t->live));
	t->ev = ev;
	return 0;
nomem:
	if (ev) {
		free(ev->acc);
		free(ev->upd);
		free(ev->cms);
		free(ev);
	}
	return rs_seterr(-ENOMEM, "table '%s': no memory for the eviction "
			 "state of %llu rows", t->ent.name,
			 (unsigned long long)cap);
}

bool slab_ev_attached(const struct slab_table *t)
{
	return t->ev != NULL;
}

void slab_ev_fini(struct slab_table *t)
{
	struct slab_ev *ev = t->ev;

	t->ev = NULL;
	pthread_mutex_destroy(&ev->sweep);
	free(ev->acc);
	free(ev->upd);
	free(ev->cms);
	free(ev);
}

/* ---- access information (hot: one atomic add, one or two stores) ---- */

void slab_ev_touch(struct slab_table *t, uint32_t r)
{
	struct slab_ev *ev = t->ev;
	uint64_t c = atomic_fetch_add_explicit(&ev->clock, 1, RELAXED) + 1;
	uint64_t old, cnt, d;

	if (ev->cfg.policy != SLAB_EV_LFU) {
		atomic_store_explicit(&ev->acc[r], c, RELAXED);
		return;
	}
	/* racing touches of one row may lose a count: approximate */
	old = atomic_load_explicit(&ev->acc[r], RELAXED);
	cnt = old >> STAMP_BITS;
	d = (c >> ev->shift) - ((old & STAMP_MASK) >> ev->shift);
	cnt = d >= 16 ? 0 : cnt >> d;
	cnt += cnt < CNT_MAX;
	atomic_store_explicit(&ev->acc[r], cnt << STAMP_BITS | (c & STAMP_MASK),
			      RELAXED);
}

void slab_ev_wrote(struct slab_table *t, uint32_t r, bool fresh)
{
	struct slab_ev *ev = t->ev;

	if (fresh) /* the slot's previous key had its own count */
		atomic_store_explicit(&ev->acc[r], 0, RELAXED);
	slab_ev_touch(t, r);
	if (ev->upd)
		atomic_store_explicit(&ev->upd[r],
				      atomic_load_explicit(&ev->now, RELAXED),
				      RELAXED);
}

/* Score of row r now: the smallest goes first. */
static uint64_t score_of(const struct slab_ev *ev, uint32_t r, uint64_t clk)
{
	uint64_t a = atomic_load_explicit(&ev->acc[r], RELAXED), d;

	if (ev->cfg.policy != SLAB_EV_LFU)
		return a;
	d = (clk >> ev->shift) - ((a & STAMP_MASK) >> ev->shift);
	return (d >= 16 ? 0 : (a >> STAMP_BITS) >> d) << STAMP_BITS |
	       (a & STAMP_MASK);
}

static bool expired(const struct slab_ev *ev, uint32_t r, uint32_t now)
{
	uint32_t u;

	if (!ev->upd)
		return false;
	u = atomic_load_explicit(&ev->upd[r], RELAXED);
	/* more than ttl_s whole seconds: never before ttl_s have passed */
	return now > u && now - u > ev->cfg.ttl_s;
}

static uint64_t rng_next(void)
{
	uint64_t x = tl_rng;

	if (!x) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = ((uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull) ^
		    (uintptr_t)&tl_rng;
		x |= 1;
	}
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	tl_rng = x;
	return x;
}

/* Evict key from slot r if the index still points there: 1 evicted,
 * 0 not (it went meanwhile). */
static int ev_remove(struct slab_table *t, uint64_t key, uint32_t r,
		     enum ev_cause cause)
{
	struct slab_ev *ev = t->ev;
	struct slab_ev_sink *s = tl_sink;
	uint32_t ref;

	if (pet_lookup(t->pet, key, &ref) || ref != r ||
	    slab_delete(t, key) != 0)
		return 0;
	if (cause == EV_CAP || !s || !s->defer_ttl)
		atomic_fetch_add_explicit(cause == EV_TTL ? &ev->ev_ttl
							  : &ev->ev_cap,
					  1, RELAXED);
	if (s) {
		if (s->n < s->cap)
			s->keys[s->n++] = key;
		else
			s->overflow = true;
	}
	return 1;
}

/* Choose and evict one victim by the policy: 1 evicted, 0 lost a race
 * (try again), RS_E_FULL nothing live found. */
static int evict_one(struct slab_table *t)
{
	struct slab_ev *ev = t->ev;
	uint64_t n = atomic_load_explicit(&t->next, memory_order_acquire);
	uint64_t clk = atomic_load_explicit(&ev->clock, RELAXED);
	uint32_t now = atomic_load_explicit(&ev->now, RELAXED);
	uint64_t best = UINT64_MAX, best_key = 0, k;
	unsigned live = 0;
	uint32_t best_r = 0;

	for (unsigned i = 0; n && i < PROBE_ROUNDS * ev->cfg.sample; i++) {
		uint32_t r = (uint32_t)(((unsigned __int128)rng_next() * n) >>
					64);
		uint64_t sc;

		if (!slab_slot_live_key(t, r, &k) ||
		    (tl_sink && tl_sink->accept &&
		     !tl_sink->accept(tl_sink->arg, k)))
			continue;
		if (expired(ev, r, now))
			return ev_remove(t, k, r, EV_TTL);
		sc = score_of(ev, r, clk);
		if (!live++ || sc < best) {
			best = sc;
			best_key = k;
			best_r = r;
		}
		if (live == ev->cfg.sample)
			break;
	}
	if (!live)
		return rs_seterr(RS_E_FULL, "table '%s': at its cap of %llu "
				 "rows and no victim found",
				 t->ent.name, (unsigned long long)ev->cap);
	return ev_remove(t, best_key, best_r, EV_CAP);
}

int slab_ev_reserve(struct slab_table *t)
{
	struct slab_ev *ev = t->ev;
	unsigned races = 0;

	for (;;) {
		uint64_t u = atomic_load_explicit(&ev->used, RELAXED);
		int rc;

		if (u < ev->cap || (tl_replica && u < t->ent.capacity)) {
			if (!atomic_compare_exchange_weak_explicit(
				    &ev->used, &u, u + 1, RELAXED, RELAXED))
				continue;
			if (u >= ev->cap)
				atomic_fetch_add_explicit(&ev->over_cap, 1,
							  RELAXED);
			return 0;
		}
		if (ev->cfg.policy == SLAB_EV_NONE || tl_replica)
			return rs_seterr(RS_E_FULL, "table '%s': all %llu "
					 "rows in use", t->ent.name,
					 (unsigned long long)u);
		rc = evict_one(t);
		if (rc < 0)
			return rc;
		if (rc == 0 && ++races > 64)
			return rs_seterr(RS_E_FULL, "table '%s': at its cap "
					 "of %llu rows, every victim went "
					 "before it could be evicted",
					 t->ent.name,
					 (unsigned long long)ev->cap);
	}
}

void slab_ev_release(struct slab_table *t)
{
	atomic_fetch_sub_explicit(&t->ev->used, 1, RELAXED);
}

/* ---- admission ---- */

int slab_ev_admit(struct slab_table *t, uint64_t key)
{
	struct slab_ev *ev = t->ev;
	XXH128_hash_t h;
	uint32_t idx[CMS_PROBES];
	unsigned min = 255, est;

	if (!ev || !ev->cms)
		return 1;
	h = XXH3_128bits_withSeed(&key, sizeof(key), ev->cms_seed);
	for (unsigned i = 0; i < CMS_PROBES; i++) {
		unsigned v;

		idx[i] = (uint32_t)(h.low64 + i * (h.high64 | 1)) &
			 ev->cms_mask;
		v = atomic_load_explicit(&ev->cms[idx[i]], RELAXED);
		min = v < min ? v : min;
	}
	est = min;
	if (min < 255) { /* conservative update: only the smallest grow */
		for (unsigned i = 0; i < CMS_PROBES; i++)
			if (atomic_load_explicit(&ev->cms[idx[i]], RELAXED) ==
			    min)
				atomic_store_explicit(&ev->cms[idx[i]],
						      (uint8_t)(min + 1),
						      RELAXED);
		est = min + 1;
	}
	if ((atomic_fetch_add_explicit(&ev->sightings, 1, RELAXED) + 1) %
		    ev->cms_decay ==
	    0) /* forget slowly: halve every counter */
		for (uint32_t i = 0; i <= ev->cms_mask; i++)
			atomic_store_explicit(
				&ev->cms[i],
				atomic_load_explicit(&ev->cms[i], RELAXED) / 2,
				RELAXED);
	if (est >= ev->cfg.admit_k) {
		atomic_fetch_add_explicit(&ev->admitted, 1, RELAXED);
		return 1;
	}
	atomic_fetch_add_explicit(&ev->not_admitted, 1, RELAXED);
	return 0;
}

/* ---- TTL ---- */

void slab_ev_set_now(struct slab_table *t, uint32_t now_s)
{
	atomic_store(&t->ev->manual_clock, true);
	atomic_store_explicit(&t->ev->now, now_s, RELAXED);
}

void slab_ev_tick(struct slab_table *t)
{
	struct slab_ev *ev = t->ev;
	struct timespec ts;

	if (!ev || atomic_load(&ev->manual_clock))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	atomic_store_explicit(&ev->now, (uint32_t)(ts.tv_sec - ev->t0.tv_sec),
			      RELAXED);
}

uint64_t slab_ev_sweep(struct slab_table *t, uint64_t budget)
{
	struct slab_ev *ev = t->ev;
	const struct slab_ev_sink *s = tl_sink;
	uint64_t n, gone = 0, k;
	uint32_t now;

	if (!ev || !ev->upd || pthread_mutex_trylock(&ev->sweep))
		return 0;
	now = atomic_load_explicit(&ev->now, RELAXED);
	n = atomic_load_explicit(&t->next, memory_order_acquire);
	for (uint64_t i = 0; n && i < budget && i < n; i++) {
		uint32_t r;

		if (s && s->n >= s->cap)
			break;	/* the rest next time: never overflow */
		if (ev->cursor >= n)
			ev->cursor = 0;
		r = (uint32_t)ev->cursor++;
		if (expired(ev, r, now) && slab_slot_live_key(t, r, &k) &&
		    (!s || !s->accept || s->accept(s->arg, k)))
			gone += (uint64_t)ev_remove(t, k, r, EV_TTL);
	}
	pthread_mutex_unlock(&ev->sweep);
	return gone;
}

void slab_ev_count_ttl(struct slab_table *t, uint64_t n)
{
	if (t->ev)
		atomic_fetch_add_explicit(&t->ev->ev_ttl, n, RELAXED);
}

/* ---- modes, sinks, counters ---- */

void slab_ev_sink_set(struct slab_ev_sink *s)
{
	tl_sink = s;
}

void slab_ev_replica_mode(bool on)
{
	tl_replica = on;
}

void slab_ev_stats(struct slab_table *t, struct slab_ev_stats *st)
{
	struct slab_ev *ev = t->ev;

	memset(st, 0, sizeof(*st));
	if (!ev)
		return;
	st->policy = ev->cfg.policy;
	st->max_rows = ev->cap;
	st->ttl_s = ev->cfg.ttl_s;
	st->admit_k = ev->cfg.admit_k;
	st->used = atomic_load_explicit(&ev->used, RELAXED);
	st->evicted_capacity = atomic_load_explicit(&ev->ev_cap, RELAXED);
	st->evicted_ttl = atomic_load_explicit(&ev->ev_ttl, RELAXED);
	st->admitted = atomic_load_explicit(&ev->admitted, RELAXED);
	st->not_admitted = atomic_load_explicit(&ev->not_admitted, RELAXED);
	st->over_cap = atomic_load_explicit(&ev->over_cap, RELAXED);
	st->decay_period = ev->cfg.policy == SLAB_EV_LFU ? 1ull << ev->shift
							 : 0;
}
