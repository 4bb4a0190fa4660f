/*
 * srv_evict_resend.c - deletions a primary decided on its own (TTL
 * expiries of the sweep, cap victims of a write's inserts) whose REPL to
 * a backup failed are sent again until the backups have them
 * (docs/eviction.md, "Deletions that did not reach a backup").
 *
 * Without this a failed chunk only failed its writers: a client retries
 * its own write, but nobody retries a deletion the primary made on its
 * own. The backup kept the row, the configuration did not necessarily
 * change (a slow backup that keeps its lease stays a member), and when
 * that backup later became the key's primary it served the row again.
 *
 * State: a bounded list of (table id, key) per node, SRV_EVR_MAX entries.
 * Callers add the keys of a failed wait; the sweep thread (rs-evict,
 * srv_evict.c) resends them every tick, in batches of SRV_EVR_BATCH, with
 * a backoff after a failed round (100 ms doubling to 5 s). A resend
 * enters the configuration as the sweep does (an active member holding
 * all its ranges, past the read lease) and, under the replication order
 * lock, for each key:
 *
 *   - its table is gone: dropped (the drop is replicated, fenced by
 *     epoch: the backups' copy of the table goes too);
 *   - this node is not the key's primary now: dropped, counted as
 *     abandoned (see below why the node must not send it);
 *   - the key has a row here again (a later write created it): dropped;
 *     that write queued the row itself (or failed to its client, who
 *     resends it), and a deletion now would undo it on the backups;
 *   - otherwise it is queued as a deletion for the key's backups (and
 *     joining members) of the current configuration, as a DELETE's is.
 *
 * Why that is correct. A deletion of a key the primary does not hold,
 * queued under `order`, brings every backup to the primary's state
 * whatever the entry's history (a backup without the row answers
 * RS_E_NOTFOUND, which a deletion accepts): so a duplicate, a key
 * expired twice, a table id reused after a drop, or a backup that is not
 * the one that failed cost a harmless deletion, never a lost row. The
 * backups of the current configuration are the ones that matter: a
 * member that is no longer a backup of the key has its copy freed when
 * it leaves the range (docs/replication.md, "Freeing what a node no
 * longer holds"), and a node that left and comes back under a new
 * incarnation drops what it held of the ranges it gains before it copies
 * them. A node copying ranges in (not ready) does not resend: a key it
 * has not copied yet is absent here but not deleted.
 *
 * When this node is no longer the key's primary, it must not send: the
 * new primary may have written the key since (a new row), and a late
 * deletion from a former primary would remove that row from its backups
 * only. The entry is dropped and counted (abandoned). What the new
 * primary serves then: for a TTL expiry, the row expires there too (a
 * backup stamps a REPL'd row's TTL clock when it applies it, and the new
 * primary's own sweep expires it within the TTL of its last write plus a
 * sweep pass); for a cap victim, the row with its last acknowledged
 * value, as if the eviction had not happened (a cache decision that did
 * not stick, never an older value), until the new primary's cap evicts
 * it again.
 *
 * The bound. At most SRV_EVR_MAX entries (16 bytes each: 1 MiB); a peer
 * that refuses every REPL, or a client whose inserts evict many rows
 * while a backup fails, cannot make it grow past that. A key that finds
 * the list full is not retried: it is counted (repl.evict_deletes_dropped)
 * and logged (rate-limited); for it, the case above (the row may be back
 * after a failover, a TTL row only until it expires again) applies.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rs_internal.h"
#include "server/srv_internal.h"
#include "server/srv_repl_int.h"

#define SRV_EVR_MAX (64u * 1024u)	/* entries kept at most */
#define SRV_EVR_BATCH 4096u		/* entries resent per round */
#define SRV_EVR_BACKOFF_MIN_MS 100u
#define SRV_EVR_BACKOFF_MAX_MS 5000u

void srv_evr_init(struct rs_server *s)
{
	struct srv_evr *e = &s->evr;

	if (e->init)
		return;
	pthread_mutex_init(&e->lock, NULL);
	e->init = true;
}

void srv_evr_fini(struct rs_server *s)
{
	struct srv_evr *e = &s->evr;

	if (!e->init)
		return;
	pthread_mutex_lock(&e->lock);
	free(e->v);
	e->v = NULL;
	e->n = e->cap = 0;
	atomic_store(&e->pending, 0);
	pthread_mutex_unlock(&e->lock);
}

void srv_evr_add(struct rs_server *s, uint32_t table_id,
		 const uint64_t *keys, uint32_t n)
{
	struct srv_evr *e = &s->evr;
	uint32_t lost = 0;

	if (!n || !e->init)
		return;
	pthread_mutex_lock(&e->lock);
	if (e->n + n > e->cap && e->cap < SRV_EVR_MAX) {
		uint32_t cap = e->cap ? e->cap : 1024u;
		void *v;

		while (cap < e->n + n && cap < SRV_EVR_MAX)
			cap *= 2;
		if (cap > SRV_EVR_MAX)
			cap = SRV_EVR_MAX;
		v = rs_realloc(e->v, (size_t)cap * sizeof(*e->v));
		if (v) {
			e->v = v;
			e->cap = cap;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		if (e->n == e->cap) {
			lost = n - i;
			break;
		}
		e->v[e->n].table_id = table_id;
		e->v[e->n].key = keys[i];
		e->n++;
	}
	atomic_store(&e->pending, e->n);
	pthread_mutex_unlock(&e->lock);
	if (lost) {
		atomic_fetch_add(&e->dropped, lost);
		srv_warn_peer("eviction: %u deletions that did not reach a "
			     "backup cannot be kept for a resend (%u pending "
			     "at most): those rows may come back at a backup "
			     "that becomes their primary", lost, SRV_EVR_MAX);
	}
}

/* May a cluster member resend in epoch (q entered it)? As the sweep: an
 * active member holding all its ranges, past the read lease. */
static bool may_resend(struct rs_server *s, const struct srv_repl_req *q,
		       uint64_t epoch)
{
	const struct srv_cfg *g = q->cfg;

	return atomic_load(&s->repl.ready) == epoch && !g->ngain &&
	       (!g->hold_until || rs_mono_ms() >= g->hold_until);
}

/* Take the first m entries out (the resend owns them; entries are only
 * ever removed by the sweep thread, added at the end by anyone). */
static void evr_consume(struct srv_evr *e, uint32_t m)
{
	pthread_mutex_lock(&e->lock);
	memmove(e->v, e->v + m, (size_t)(e->n - m) * sizeof(*e->v));
	e->n -= m;
	atomic_store(&e->pending, e->n);
	pthread_mutex_unlock(&e->lock);
}

static void evr_backoff(struct srv_evr *e, uint64_t now)
{
	e->backoff_ms = !e->backoff_ms ? SRV_EVR_BACKOFF_MIN_MS
		      : e->backoff_ms >= SRV_EVR_BACKOFF_MAX_MS / 2
			      ? SRV_EVR_BACKOFF_MAX_MS
			      : 2u * e->backoff_ms;
	e->next_ms = now + e->backoff_ms;
}

void srv_evr_tick(struct rs_server *s, uint64_t epoch)
{
	struct srv_evr *e = &s->evr;
	struct srv_repl_req q = { 0 };
	struct srv_evr_key *b;
	struct srv_table *t = NULL;
	uint64_t now = rs_mono_ms(), sent = 0, gone = 0;
	uint32_t m, width = 0;
	float *zero = NULL;
	size_t zcap = 0;
	int ret = 0;

	if (!e->init || !atomic_load(&e->pending) || now < e->next_ms ||
	    !s->repl.on || !epoch)
		return;
	pthread_mutex_lock(&e->lock);
	m = e->n < SRV_EVR_BATCH ? e->n : SRV_EVR_BATCH;
	b = m ? rs_malloc((size_t)m * sizeof(*b)) : NULL;
	if (b)
		memcpy(b, e->v, (size_t)m * sizeof(*b));
	pthread_mutex_unlock(&e->lock);
	if (!b)
		return;
	/* a writer, as the sweep (never inside a checkpoint's freeze) */
	atomic_fetch_add(&s->ckpt.writers, 1);
	if (atomic_load(&s->ckpt.frozen) ||
	    pthread_rwlock_tryrdlock(&s->repl.lock)) {
		srv_write_leave(s);
		free(b);
		return;
	}
	q.held = true;
	q.cfg = s->repl.cur;
	if (!q.cfg || q.cfg->c.epoch != epoch || q.cfg->self < 0 ||
	    !may_resend(s, &q, epoch)) {
		srv_repl_exit(s, &q);
		srv_write_leave(s);
		free(b);
		return;
	}
	pthread_mutex_lock(&s->repl.order);
	for (uint32_t i = 0; !ret && i < m; i++) {
		uint32_t row;

		if (!t || t->id != b[i].table_id) {
			if (t)
				srv_table_put(t);
			t = srv_table_get(&s->tables, b[i].table_id);
			if (t) {
				width = t->spec.dim + t->state_floats;
				if (width > zcap) {
					free(zero);
					zcap = width;
					if (!(zero = rs_calloc(zcap,
							    sizeof(*zero))))
						ret = -ENOMEM;
				}
			}
		}
		if (ret)
			break;
		if (!t)
			continue;	/* the table went: nothing to delete */
		if (!srv_repl_is_primary(&q, b[i].key)) {
			gone++;
			continue;
		}
		if (slab_lookup(t->st, b[i].key, &row) != RS_E_NOTFOUND)
			continue;	/* written again: its record rules */
		ret = srv_repl_record(s, &q, &t->spec, width, b[i].key,
				      true, zero, NULL, PROTO_ST_OK);
		sent++;
	}
	pthread_mutex_unlock(&s->repl.order);
	if (!ret && srv_repl_pending(&q))
		ret = srv_repl_wait(s, &q);
	srv_repl_exit(s, &q);
	if (t)
		srv_table_put(t);
	srv_write_leave(s);
	free(zero);
	free(b);
	if (ret) {
		atomic_fetch_add(&e->failed_rounds, 1);
		evr_backoff(e, now);
		srv_warn_peer("eviction: resending %u deletions to the backups "
			     "failed (%s); retrying in %u ms", m,
			     rs_strerror(ret), e->backoff_ms);
		return;
	}
	e->backoff_ms = 0;
	e->next_ms = 0;
	atomic_fetch_add(&e->resent, sent);
	atomic_fetch_add(&e->abandoned, gone);
	evr_consume(e, m);
	if (gone)
		srv_warn_peer("eviction: %" PRIu64 " deletions not resent: "
			     "this node is no longer the keys' primary",
			     gone);
}

void srv_evr_counts(struct rs_server *s, struct srv_evr_counts *c)
{
	const struct srv_evr *e = &s->evr;

	c->pending = atomic_load(&e->pending);
	c->resent = atomic_load(&e->resent);
	c->dropped = atomic_load(&e->dropped);
	c->abandoned = atomic_load(&e->abandoned);
	c->failed_rounds = atomic_load(&e->failed_rounds);
}
