/*
 * srv_grow.c - tables that grow online (docs/server.md, "Growth";
 * the slab side is src/value/slab_grow.c, docs/storage.md "Growth").
 *
 * A growth, under tables.admin:
 *   1. pause the node's writes (SRV_FROZEN_GROW: new writes are answered
 *      RS_E_BUSY, which clients retry with a backoff) and wait for those
 *      in progress; reads go on: one-sided READs and GET RPCs are served
 *      from the old table;
 *   2. build the grown table (slab_grow_begin: new extent, new
 *      incarnation, rows slot for slot, index rebuilt) and register it for
 *      REMOTE_READ; file pools: the table's catalog record goes with it
 *      (the new directory entry names the record's uid, slab_grow.c), and
 *      at open the capacity is the pool's;
 *   3. switch (slab_grow_commit: crash-safe directory switch), put the new
 *      wrapper in the slot (tables.lock), bump the directory generation;
 *      from here a keyed request with the old generation gets RS_E_STALE
 *      and its client refreshes the directory;
 *   4. wait for the requests still using the old wrapper, then make every
 *      bucket and row of the old extent fail validation
 *      (slab_table_retire), so a one-sided reader still on the old
 *      generation retries, falls back to the RPC and refreshes: no reader
 *      ever accepts a row of the old table once a write can reach the new
 *      one;
 *   5. resume writes; the old registration stays for SRV_GROW_GRACE_MS
 *      (READs in flight complete), then srv_tables_reap() deregisters it
 *      and frees the old extent.
 * Automatic growth: a request that may insert into a table whose spec has
 * grow_log2 and that would pass SRV_GROW_FILL of its capacity is answered
 * RS_E_BUSY and, once it left the write pause, its worker grows the table
 * (doubling until the keys fit below the threshold, at most to the limit).
 *
 * In a replicated cluster (docs/replication.md, "Tables that grow") each
 * member grows its own copy of a table. The pause covers what the
 * members ship each other too: a REPL record (a forwarded write or a
 * copied row) is a write (srv_grow_enter), answered RS_E_BUSY during the
 * pause and resent by its sender, which does not count that as a failed
 * backup; a REPL whose inserts would pass the threshold starts the
 * backup's own growth like an insert does. A primary's write leaves the
 * pause's count once it is applied and queued for its backups, before it
 * waits for them, so two members growing at once never wait for each
 * other.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/srv_internal.h"

#define SRV_GROW_GRACE_MS 500u
#define SRV_GROW_FILL_PCT 90u
#define SRV_GROW_RETRY_MS 10000u
/* How long a growth waits for the writes inside to leave (writes_pause) */
#define SRV_GROW_DRAIN_MS 1000u

static uint64_t grow_limit(const struct proto_table_spec *s)
{
	if (!s->grow_log2)
		return 0;
	return s->grow_log2 >= 32 ? PROTO_MAX_CAPACITY : 1ull << s->grow_log2;
}

static bool over_fill(uint64_t keys, uint64_t cap)
{
	return keys * 100 > cap * SRV_GROW_FILL_PCT;
}

bool srv_grow_due(const struct srv_table *t, uint32_t n)
{
	uint64_t cap = t->spec.capacity, lim = grow_limit(&t->spec);

	return lim > cap &&
	       over_fill(slab_table_live(t->st) + n, cap) &&
	       rs_mono_ns() >= atomic_load_explicit(&t->grow_after_ns,
						 memory_order_relaxed);
}

/* The automatic target: doubling until live + n keys are below the fill
 * threshold, at most lim. */
static uint64_t auto_target(uint64_t cap, uint64_t lim, uint64_t keys)
{
	uint64_t c = cap;

	while (c < lim && over_fill(keys, c))
		c = c > lim / 2 ? lim : 2 * c;
	return c > cap ? c : 0;
}

/* Pause every write of the node and wait for those inside, at most
 * wait_ms; RS_E_BUSY while a checkpoint freezes the node, or when the
 * writes inside did not leave in time (writes resume). A write leaves
 * after it applied and queued its records, never while it waits for a
 * backup, but a TABLE_CREATE or TABLE_DROP counted in waits for
 * tables.admin, which the growth holds: without the bound the two wait
 * for each other for ever. A growth and a checkpoint's DUMP never
 * overlap: the growth moves the table's change tracking (slab_grow.c
 * track_move) and swaps the table, so a DUMP meanwhile would set its tag
 * on the table that no longer serves. Decided under the freeze's lock; a
 * FREEZE waits for a growth that runs (srv_ckpt_freeze). */
int srv_writes_pause(struct rs_server *s, unsigned wait_ms)
{
	uint64_t end;

	pthread_mutex_lock(&s->ckpt.lock);
	if (atomic_load(&s->ckpt.frozen) & SRV_FROZEN_CKPT) {
		pthread_mutex_unlock(&s->ckpt.lock);
		return rs_seterr(RS_E_BUSY, "a checkpoint pauses this node's "
				 "writes: the table grows after it (retry)");
	}
	atomic_fetch_or(&s->ckpt.frozen, SRV_FROZEN_GROW);
	pthread_mutex_unlock(&s->ckpt.lock);
	end = rs_mono_ns() + (uint64_t)wait_ms * 1000000u;
	while (atomic_load(&s->ckpt.writers)) {
		if (rs_mono_ns() >= end) {
			unsigned n = (unsigned)atomic_load(&s->ckpt.writers);

			srv_writes_resume(s);
			return rs_seterr(RS_E_BUSY, "%u writes inside did not "
					 "leave within %u ms (a table create "
					 "or drop waits for this growth): the "
					 "table grows later (retry)", n,
					 wait_ms);
		}
		usleep(20);
	}
	return 0;
}

void srv_writes_resume(struct rs_server *s)
{
	atomic_fetch_and(&s->ckpt.frozen, ~SRV_FROZEN_GROW);
}

bool srv_grow_enter(struct rs_server *s)
{
	atomic_fetch_add(&s->ckpt.writers, 1);
	if (RS_LIKELY(!(atomic_load(&s->ckpt.frozen) & SRV_FROZEN_GROW)))
		return true;
	atomic_fetch_sub(&s->ckpt.writers, 1);
	return false;
}

void srv_tables_reap(struct srv_tables *r, bool wait)
{
	unsigned k = 0;

	RS_ASSERT_HELD(&r->admin);
	for (unsigned i = 0; i < r->nretired; i++) {
		struct srv_retired *q = &r->retired[i];
		uint64_t now = rs_mono_ns();

		if (now < q->until_ns && !wait) {
			r->retired[k++] = *q;
			continue;
		}
		if (now < q->until_ns)
			usleep((useconds_t)((q->until_ns - now) / 1000u + 1));
		slab_table_release(r->store, q->t->st);
		srv_table_unwrap(r, q->t);
	}
	r->nretired = k;
}

/* Capacity asked (0: double, within the limit) -> the target, or an
 * error saying why not. */
static int target_of(const struct srv_table *t, uint64_t asked,
		     uint64_t *out)
{
	uint64_t cap = t->spec.capacity, lim = grow_limit(&t->spec);

	if (!asked) {
		asked = cap > PROTO_MAX_CAPACITY / 2 ? PROTO_MAX_CAPACITY
						     : 2 * cap;
		if (lim && asked > lim)
			asked = lim;
	}
	if (asked <= cap)
		return rs_seterr(RS_E_INVAL, "table '%s' has %" PRIu64 " rows: "
				 "cannot grow to %" PRIu64 "%s", t->spec.name,
				 cap, asked, lim && lim <= cap ?
				 " (its grow_log2 limit)" : "");
	*out = asked;
	return 0;
}

/* Add the old table's request counters to the new one's (which may be
 * counting already); nobody counts into the old one any more. */
static void counters_move(struct srv_table_counters *from,
			  struct srv_table_counters *to)
{
	_Atomic uint64_t *a = (_Atomic uint64_t *)from;
	_Atomic uint64_t *b = (_Atomic uint64_t *)to;

	_Static_assert(sizeof(*from) % sizeof(*a) == 0, "counters only");
	for (size_t i = 0; i < sizeof(*from) / sizeof(*a); i++)
		atomic_fetch_add_explicit(&b[i],
					  atomic_load_explicit(
						  &a[i], memory_order_relaxed),
					  memory_order_relaxed);
}

/* Steps 2-5 of the head comment for t (a reference held); admin held,
 * writes paused. */
static int grow_locked(struct srv_tables *r, struct srv_table *t,
		       uint64_t capacity, struct proto_table_info *info)
{
	struct timespec nap = { 0, 50 * 1000 };
	struct srv_table *nt = NULL;
	struct slab_table *nst;
	struct proto_table_spec spec = t->spec;
	uint64_t t0 = rs_mono_ns(), us;
	int ret, mem;

	if (r->nretired == SLAB_MAX_TABLES)
		srv_tables_reap(r, true);
	mem = srv_numa_mem_enter(r->numa);
	ret = slab_grow_begin(r->store, t->st, capacity, r->index_load, &nst);
	if (ret == RS_E_FULL && r->nretired) {
		/* the extents of earlier growths may be what is missing */
		srv_tables_reap(r, true);
		ret = slab_grow_begin(r->store, t->st, capacity,
				      r->index_load, &nst);
	}
	if (mem > 0)
		srv_numa_mem_leave(r->numa);
	if (ret)
		return ret;
	spec.capacity = slab_table_capacity(nst);
	ret = srv_table_wrap(r, nst, &spec, &nt);
	if (ret) {
		slab_grow_abort(r->store, nst);
		return ret;
	}
	ret = slab_grow_commit(r->store, t->st, nst);
	if (ret) {
		srv_table_unwrap(r, nt);
		slab_grow_abort(r->store, nst);
		return ret;
	}
	pthread_rwlock_wrlock(&r->lock);
	r->slot[t->id] = nt;
	atomic_fetch_add(&r->dir_gen, 1);
	pthread_rwlock_unlock(&r->lock);
	srv_metrics_table_remove(r->srv, t);
	srv_metrics_table_add(r->srv, nt);
	srv_table_put(t); /* the registry's reference */
	srv_table_put(t); /* the caller's */
	while (atomic_load_explicit(&t->refs, memory_order_acquire))
		nanosleep(&nap, NULL);
	counters_move(&t->cnt, &nt->cnt);
	slab_table_retire(t->st);
	r->retired[r->nretired].t = t;
	r->retired[r->nretired++].until_ns = rs_mono_ns() +
					     SRV_GROW_GRACE_MS * 1000000ull;
	us = (rs_mono_ns() - t0) / 1000u;
	atomic_fetch_add(&r->grows, 1);
	atomic_fetch_add(&r->grow_rows, slab_table_live(nst));
	atomic_fetch_add(&r->grow_us, us);
	srv_log("table '%s' grew from %" PRIu64 " to %" PRIu64 " rows "
		"(%" PRIu64 " rows copied in %.3f ms; new generation %016"
		PRIx64 ")", spec.name, t->spec.capacity, spec.capacity,
		slab_table_live(nst), (double)us / 1000.0,
		nt->info.generation);
	if (info)
		*info = nt->info;
	return 0;
}

int srv_table_grow(struct srv_tables *r, const char *name, uint64_t capacity,
		   uint64_t gen, struct proto_table_info *info)
{
	struct rs_server *s = r->srv;
	struct srv_table *t;
	uint64_t target = 0;
	int ret;

	if (gen) { /* automatic: never wait behind another admin operation */
		if (pthread_mutex_trylock(&r->admin))
			return 0;
	} else {
		pthread_mutex_lock(&r->admin);
	}
	srv_tables_reap(r, false);
	t = srv_table_get_name(r, name);
	if (!t) {
		pthread_mutex_unlock(&r->admin);
		return gen ? 0 : rs_seterr(RS_E_NOTFOUND, "table '%s' not "
					   "found", name);
	}
	if (gen && t->info.generation != gen) {
		ret = 0; /* grown (or recreated) meanwhile */
		goto out;
	}
	if (gen) {
		target = auto_target(t->spec.capacity, grow_limit(&t->spec),
				     slab_table_live(t->st) + capacity);
		ret = 0;
		if (!target)
			goto out;
	} else if ((ret = target_of(t, capacity, &target))) {
		goto out;
	}
	if ((ret = srv_writes_pause(s, SRV_GROW_DRAIN_MS))) {
		/* automatic: the first insert past the fill after the
		 * checkpoint grows it */
		ret = gen ? 0 : ret;
		goto out;
	}
	ret = grow_locked(r, t, target, info);
	srv_writes_resume(s);
	if (ret) {
		/* an automatic growth that failed (no room, most likely) is
		 * not tried again for a while: meanwhile inserts past the
		 * capacity get RS_E_FULL per key, as without growth */
		atomic_store(&t->grow_after_ns,
			     rs_mono_ns() + SRV_GROW_RETRY_MS * 1000000ull);
		atomic_fetch_add(&r->grow_refusals, 1);
		srv_warn_peer("table '%s': growth to %" PRIu64 " rows failed: "
			     "%s", name, target, rs_errormsg());
	}
	if (!ret) {
		pthread_mutex_unlock(&r->admin);
		return 0; /* t's reference went with the registry's */
	}
out:
	srv_table_put(t);
	pthread_mutex_unlock(&r->admin);
	return ret;
}
