/*
 * srv_repl.c - replication on the memory node (docs/replication.md): the
 * configuration the node follows, the epoch fence, and primary-backup
 * forwarding of write results.
 *
 * The configuration. The membership agent (srv_coord.c) passes every
 * configuration of a higher epoch it reads from etcd to srv_repl_adopt(),
 * which hands it to the node's adopting thread (the agent must not wait:
 * its keepalives keep the node in the cluster); that thread builds its
 * placement and the node's place in it and swaps it in under `lock` (a
 * writer-preferring rwlock). Requests hold the read side
 * for their whole life, forwarding and waiting for backups included, so a
 * node never acknowledges a write, nor applies a forwarded row, in an
 * epoch it has left: adoption waits for them. Requests take the read side
 * with tryrdlock: while a new configuration waits to be adopted they are
 * answered RS_E_EPOCH at once (the client refreshes and retries), which
 * also breaks the cycle of two nodes each adopting while their writes wait
 * for the other's backup apply. CONFIG takes no side of `lock`: it answers
 * from an immutable view published with the configuration ("what CONFIG
 * answers" below), so it never waits for an adoption. A worker waiting
 * for its write's backups lets the node go on receiving (srv_wait_begin,
 * server.c "waits"): two nodes whose writes wait for each other's REPL
 * apply both still receive the REPLs.
 *
 * The fence. In a cluster every write (GET_OR_INIT, PUT, UPDATE, DELETE)
 * must carry PROTO_KF_EPOCH with the node's epoch, the node must be an
 * ACTIVE member of it under its own incarnation, and it must be the
 * primary of every key (whole-request RS_E_EPOCH otherwise). A REPL must
 * carry the node's epoch and the node must be a backup of every key.
 *
 * Forwarding. A write runs under `order` (one mutex per node) from the
 * first optimizer step to the moment its results are queued for the
 * backups, so the records of one key reach every backup's queue in the
 * order they were applied. Each backup (struct srv_peer) has one queue of
 * chunks (records of one table, in order) and at most one REPL message in
 * flight, sent by whichever waiting worker finds the peer idle: group
 * commit, no thread of its own, nothing running while idle. A worker
 * sends a REPL to every idle backup of its write before it waits for any
 * reply, so the backups apply in parallel and r = 3 costs one round trip
 * like r = 2, not two (srv_repl_wait). A chunk that
 * fails (the backup refused, timed out, or its connection died) fails
 * every chunk queued behind it; the workers waiting for them answer their
 * keys RS_E_EPOCH, which the client retries once the configuration
 * changed. A REPL answered RS_E_BUSY (a table of the backup grows,
 * srv_grow.c) is no failure: the chunk stays at the head of the queue
 * and is resent from the first record not taken after a backoff; a write
 * that waited REPL_BUSY_WAIT_MS for such a backup answers its keys
 * RS_E_BUSY (the client resends them; its records stay queued). The records are the rows and optimizer state as the primary
 * left them (never the gradient), so applying one twice is harmless.
 *
 * Cost: nothing without a cluster (s->repl.on false: one branch per
 * write). With one, `order` serialises the apply phase of the node's
 * writes (not their wait for the backups): the node's update rate is one
 * core's, the next step is per-key-range ordering.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/addr.h"
#include "common/le.h"
#include "server/srv_repl_int.h"

/* How long a write waits for a backup that answers RS_E_BUSY before it
 * answers its keys RS_E_BUSY (freeing its worker; the client resends). */
#define REPL_BUSY_WAIT_MS 500u
#define REPL_BUSY_BACKOFF_MAX_MS 64u
/* A backup busy without a break for this long is broken, not growing (a
 * growth copies millions of rows a second natively: 5 minutes is a
 * table of hundreds of millions of rows per node): it fails like one
 * that does not answer, and the configuration moves on without it. */
#define REPL_BUSY_MAX_MS 300000u

/* ---- peers ---- */

static void chunk_free(struct srv_chunk *ch)
{
	if (!ch)
		return;
	free(ch->keys);
	free(ch->cl);
	free(ch->sq);
	free(ch->db);
	free(ch->st);
	free(ch->cr);
	free(ch->kinds);
	free(ch->rows);
	free(ch);
}

/* What a chunk holds allocated (its capacity). */
static uint64_t chunk_bytes(const struct srv_chunk *c)
{
	return (uint64_t)c->cap * (45u + 4u * c->width) + sizeof(*c);
}

static void chunk_put_locked(struct srv_chunk *ch)
{
	if (--ch->refs == 0)
		chunk_free(ch);
}

static struct srv_peer *peer_new(struct rs_server *s,
				 const struct memb_member *m)
{
	struct srv_peer *p = rs_calloc(1, sizeof(*p));
	pthread_condattr_t ca;

	if (!p)
		return NULL;
	snprintf(p->id, sizeof(p->id), "%s", m->id);
	p->inc = m->inc;
	p->node.name = p->id;
	p->node.dev = s->dev;
	p->node.timeout_ms = SRV_REPL_TIMEOUT_MS;
	p->node.spin_us = 0;
	if (rs_addr_parse("node", m->addr, 0, false, p->node.host,
			  sizeof(p->node.host), &p->node.port) ||
	    cli_pool_init(&p->node.pool, 1)) {
		free(p);
		return NULL;
	}
	/* with credentials, a node speaks to its peers as the first admin
	 * of its own key list (nodes of a cluster share their keys) */
	for (size_t i = 0; s->auth_on && i < s->cfg.ncreds; i++)
		if (s->cfg.creds[i].role == AUTH_ROLE_ADMIN) {
			p->key = s->cfg.creds[i];
			p->node.key = &p->key;
			break;
		}
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	return p;
}

/* No request uses p (the configuration's write lock is held, or it was
 * never published). */
static void peer_free(struct srv_peer *p)
{
	if (!p)
		return;
	while (p->head) {
		struct srv_chunk *ch = p->head;

		p->head = ch->next;
		chunk_free(ch);
	}
	cli_pool_destroy(&p->node.pool);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->lock);
	memset(&p->key, 0, sizeof(p->key));
	free(p);
}

/* ---- what CONFIG answers ----
 *
 * An immutable view of a configuration, built with it and published
 * with it (under the write side of `lock`). CONFIG takes a reference
 * under view_lock, a mutex held only for that and for the swap, never
 * across a wait: so CONFIG never waits for an adoption, which may hold
 * or wait for `lock`'s write side for as long as the writes in flight
 * wait for their backups (or a purge of gained ranges takes), exactly
 * when clients that got RS_E_EPOCH ask CONFIG. The fields that change
 * without a new configuration (the read lease's age, readiness) are
 * read from atomics when the reply is built. */
struct srv_cfg_view {
	atomic_uint refs;	/* taken under view_lock only */
	struct proto_config pc;	/* age_ms, lease_ms, ready: per reply */
	int self;		/* g->self */
	struct proto_member mm[];	/* pc.n */
};

static struct srv_cfg_view *view_new(const struct srv_cfg *g)
{
	struct srv_cfg_view *v = rs_calloc(1, sizeof(*v) +
					g->c.n * sizeof(v->mm[0]));

	if (!v)
		return NULL;
	v->refs = 1;
	v->self = g->self;
	v->pc.epoch = g->c.epoch;
	v->pc.r = g->c.r;
	v->pc.vnodes = g->c.vnodes;
	v->pc.n = (uint32_t)g->c.n;
	v->pc.self = g->self >= 0 ? (uint32_t)g->self : PROTO_CONFIG_NO_SELF;
	for (size_t i = 0; i < g->c.n; i++) {
		/* clients route to a leaving member as to an active one: it
		 * serves until it is down */
		v->mm[i].state = memb_serves(g->c.m[i].state)
					 ? PROTO_MEMBER_ACTIVE
					 : (uint32_t)g->c.m[i].state;
		snprintf(v->mm[i].id, sizeof(v->mm[i].id), "%s",
			 g->c.m[i].id);
		snprintf(v->mm[i].addr, sizeof(v->mm[i].addr), "%s",
			 g->c.m[i].addr);
	}
	return v;
}

static void view_put(struct srv_cfg_view *v)
{
	if (v && atomic_fetch_sub(&v->refs, 1) == 1)
		free(v);
}

/* Make g's view (NULL: none) the one CONFIG answers; `lock` held for
 * writing. */
static void view_publish(struct srv_repl *rp, struct srv_cfg *g)
{
	struct srv_cfg_view *old;

	pthread_mutex_lock(&rp->view_lock);
	old = rp->view;
	rp->view = g ? g->view : NULL;
	if (rp->view)
		atomic_fetch_add(&rp->view->refs, 1);
	pthread_mutex_unlock(&rp->view_lock);
	view_put(old);
}

static void cfg_free(struct srv_cfg *g, bool peers)
{
	if (!g)
		return;
	view_put(g->view);
	for (size_t i = 0; g->from && i < g->c.n; i++)
		pthread_mutex_destroy(&g->from[i].lock);
	free(g->from);
	for (size_t i = 0; peers && g->peer && i < g->c.n; i++)
		peer_free(g->peer[i]);
	free(g->peer);
	free(g->gain);
	memb_placement_free(&g->prev_pl);
	free(g->prev_map);
	memb_placement_free(&g->tpl);
	memb_placement_free(&g->pl);
	memb_config_free(&g->c);
	free(g);
}

/* ---- the configuration ---- */

static struct srv_peer *find_peer(struct srv_cfg *old, const char *id,
				  uint64_t inc)
{
	for (size_t i = 0; old && i < old->c.n; i++)
		if (old->peer[i] && old->peer[i]->inc == inc &&
		    !strcmp(old->peer[i]->id, id)) {
			struct srv_peer *p = old->peer[i];

			old->peer[i] = NULL;	/* moved */
			return p;
		}
	return NULL;
}

/* The target ring of g (ACTIVE and JOINING members), when it differs
 * from the active ring: a member joins or leaves. NULL (and 0) otherwise. */
static int target_ring(struct srv_cfg *g)
{
	bool any = false;

	for (size_t i = 0; i < g->c.n; i++)
		any |= g->c.m[i].state == MEMB_JOINING ||
		       g->c.m[i].state == MEMB_LEAVING;
	return any ? memb_placement_target(&g->tpl, &g->c) : 0;
}

static struct srv_cfg *cfg_new(struct rs_server *s,
			       const struct memb_config *c)
{
	struct srv_cfg *g = rs_calloc(1, sizeof(*g));

	if (!g || memb_config_copy(&g->c, c) ||
	    memb_placement_new(&g->pl, &g->c) || target_ring(g) ||
	    !(g->peer = rs_calloc(g->c.n + 1, sizeof(*g->peer)))) {
		cfg_free(g, false);
		return NULL;
	}
	if (!(g->from = rs_calloc(g->c.n + 1, sizeof(*g->from)))) {
		cfg_free(g, false);
		return NULL;
	}
	for (size_t i = 0; i < g->c.n; i++)
		if (pthread_mutex_init(&g->from[i].lock, NULL)) {
			for (size_t j = 0; j < i; j++)
				pthread_mutex_destroy(&g->from[j].lock);
			free(g->from);
			g->from = NULL;
			cfg_free(g, false);
			return NULL;
		}
	g->self = g->tself = -1;
	for (size_t i = 0; i < g->c.n; i++) {
		const struct memb_member *m = &g->c.m[i];

		if (strcmp(m->id, srv_config_member_id(&s->cfg)) ||
		    m->inc != s->repl.inc)
			continue;
		if (memb_serves(m->state))
			g->self = (int)i;
		if (m->state != MEMB_DOWN)
			g->tself = (int)i;
	}
	if (!(g->view = view_new(g))) {
		cfg_free(g, false);
		return NULL;
	}
	return g;
}

bool srv_cfg_gains(const struct srv_cfg *g, uint64_t h)
{
	for (size_t i = 0; i < g->ngain; i++) {
		uint64_t lo = g->gain[i].lo, hi = g->gain[i].hi;

		if (lo < hi ? h > lo && h <= hi : h > lo || h <= hi)
			return true;
	}
	return false;
}

/*
 * Under the write side of `lock` (no request runs), for peer p (member pi
 * of g) carried over from the configuration before: the records still
 * queued for it were captured in an earlier epoch, by writes that gave
 * up waiting (srv_repl_wait's deadline). Shipped as they are in g's
 * epoch they could overwrite newer rows: the key may have had another
 * primary since, whose writes the backup took. So each record is made
 * what the node holds now (docs/replication.md, "Stale REPLs"): kept
 * only if this node is the key's primary in g, forwards it to p and does
 * not copy it in, with the row and state read again (a deletion if the
 * key is gone); dropped otherwise (the key's primary in g forwards its
 * own writes; copies bring the rest). Records of a chunk p took already
 * (before h->sent) go too.
 */
static void recapture(struct rs_server *s, struct srv_cfg *g, unsigned pi,
		      struct srv_peer *p)
{
	struct srv_chunk **link = &p->head, *ch;
	uint64_t kept = 0, dropped = 0;

	p->tail = NULL;
	while ((ch = *link)) {
		struct srv_table *t = srv_table_get_name(&s->tables, ch->table);
		uint32_t w = ch->width, out = 0;
		/* the same table, not one created again under its name */
		bool fits = t && w == t->spec.dim + t->state_floats &&
			    t->spec.ident == ch->ident;

		for (uint32_t i = ch->sent; i < ch->n; i++) {
			uint64_t key = ch->keys[i], h = memb_key_hash(key);
			unsigned set[MEMB_MAX_R];
			unsigned cnt = memb_replicas(g->pl, h, set);
			float *row = ch->rows + (size_t)out * w;

			if (!fits || g->self < 0 || !cnt ||
			    (int)set[0] != g->self ||
			    !srv_repl_forwards_to(g, h, pi) || srv_cfg_gains(g, h)) {
				dropped++;
				continue;
			}
			ch->keys[out] = key;
			ch->cl[out] = ch->cl[i];
			ch->sq[out] = ch->sq[i];
			ch->db[out] = ch->db[i];
			ch->st[out] = ch->st[i];
			ch->cr[out] = ch->cr[i];
			ch->kinds[out] = PROTO_REPL_ROW;
			if (slab_read_record(t->st, key, row)) {
				ch->kinds[out] = PROTO_REPL_DELETED;
				memset(row, 0, (size_t)w * sizeof(float));
			}
			out++;
		}
		if (t)
			srv_table_put(t);
		kept += out;
		ch->n = out;
		ch->sent = 0;
		if (!out) {	/* no request holds it: the queue's only */
			if (ch->retry)
				p->kept_bytes -= chunk_bytes(ch);
			*link = ch->next;
			chunk_put_locked(ch);
			continue;
		}
		p->tail = ch;
		link = &ch->next;
	}
	if (kept || dropped) {
		atomic_fetch_add(&s->repl.recaptured, kept);
		atomic_fetch_add(&s->repl.dropped_records, dropped);
		srv_log("repl: epoch %" PRIu64 ": backup '%s': %" PRIu64
			" queued records of earlier epochs read again from "
			"the rows, %" PRIu64 " dropped (no longer this node's "
			"to send there)", g->c.epoch, p->id, kept, dropped);
	}
}

void srv_repl_table_dropped(struct rs_server *s, struct srv_repl_req *q,
			    const char *name)
{
	struct srv_cfg *g = q->cfg;
	uint64_t gone = 0;

	for (size_t i = 0; g && i < g->c.n; i++) {
		struct srv_peer *p = g->peer[i];
		struct srv_chunk **link, *ch, *prev = NULL;

		if (!p)
			continue;
		pthread_mutex_lock(&p->lock);
		link = &p->head;
		while ((ch = *link)) {
			/* the head a worker ships now is in flight: it goes */
			if (strcmp(ch->table, name) ||
			    (ch == p->head && p->sending)) {
				prev = ch;
				link = &ch->next;
				continue;
			}
			gone += ch->n - ch->sent;
			if (ch->retry)
				p->kept_bytes -= chunk_bytes(ch);
			ch->retry = false;
			ch->done = true;	/* its writes' table is gone */
			ch->err = 0;
			ch->sealed = true;
			*link = ch->next;
			if (p->tail == ch)
				p->tail = prev;
			chunk_put_locked(ch);
		}
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->lock);
	}
	if (gone) {
		atomic_fetch_add(&s->repl.dropped_records, gone);
		srv_log("repl: table '%s' dropped: %" PRIu64 " of its records "
			"queued for backups dropped with it", name, gone);
	}
}

/* The test hook RS_TEST_ADOPT_HOLD=FILE: an adoption waits with the
 * write side of the configuration lock taken while FILE exists (at most
 * 60 s), as a long purge of rows of gained ranges would (srv_copy_plan):
 * test_repl_fire asks CONFIG meanwhile. */
static void adopt_test_hold(uint64_t epoch)
{
	const char *f = getenv("RS_TEST_ADOPT_HOLD");

	if (!f || !*f || access(f, F_OK))
		return;
	srv_log("repl: epoch %" PRIu64 ": adoption held while %s exists",
		epoch, f);
	for (unsigned i = 0; i < 1200 && !access(f, F_OK); i++)
		usleep(50000);
	srv_log("repl: epoch %" PRIu64 ": adoption released", epoch);
}

static void adopt(struct rs_server *s, const struct memb_config *c)
{
	struct srv_repl *rp = &s->repl;
	struct srv_cfg *g = cfg_new(s, c), *old;
	char why[320] = "";
	bool drained;

	if (!g)
		srv_log_at(RS_LOG_ERROR, "repl: epoch %" PRIu64 ": out of "
			   "memory; writes stay refused until the next "
			   "configuration", c->epoch);
	atomic_store(&rp->adopting, true);
	pthread_rwlock_wrlock(&rp->lock);
	adopt_test_hold(c->epoch);
	old = rp->cur;
	for (size_t i = 0; g && i < g->c.n; i++) {
		const struct memb_member *m = &g->c.m[i];

		if ((int)i == g->tself || m->state == MEMB_DOWN)
			continue;
		g->peer[i] = find_peer(old, m->id, m->inc);
		if (!g->peer[i])
			g->peer[i] = peer_new(s, m);
		if (!g->peer[i] && !why[0])
			snprintf(why, sizeof(why), "peer '%s' (%s): cannot "
				 "set up", m->id, m->addr);
	}
	if (g && old && g->self >= 0 && rp->lease_ms) {
		g->hold_until = rs_mono_ms() + rp->lease_ms;
		if (old->self >= 0 && old->c.epoch + 1 == g->c.epoch &&
		    !memb_member_map(&old->c, &g->c, &g->prev_map)) {
			g->prev_pl = old->pl;	/* moved */
			old->pl = NULL;
			g->prev_self = old->self;
		}
	}
	/* no request runs: what the node holds of the ranges it gains can
	 * go before the first write of the new epoch is forwarded here */
	if (g && !why[0] && srv_copy_plan(s, g))
		snprintf(why, sizeof(why), "%s", rs_errormsg());
	for (size_t i = 0; g && !why[0] && i < g->c.n; i++)
		if (g->peer[i] && g->peer[i]->head)
			recapture(s, g, (unsigned)i, g->peer[i]);
	if (g && why[0]) {
		cfg_free(g, true);
		g = NULL;
	}
	if (g)
		g->adopted_ms = rs_mono_ms();
	rp->cur = g;
	view_publish(rp, g);
	atomic_store(&rp->epoch, g ? g->c.epoch : 0);
	drained = g && g->tself < 0 && old && old->self >= 0 &&
		  old->c.m[old->self].state == MEMB_LEAVING;
	pthread_rwlock_unlock(&rp->lock);
	atomic_store(&rp->adopting, false);
	cfg_free(old, true);
	if (!g)
		srv_warn("repl: epoch %" PRIu64 " not adopted%s%s: writes are "
			"refused", c->epoch, why[0] ? ": " : "", why);
	else
		srv_log("repl: epoch %" PRIu64 " adopted: %zu members, r %u, "
			"this node %s, %zu range%s to copy in%s", c->epoch,
			c->n, c->r, g->tself >= 0 ?
			memb_state_name(g->c.m[g->tself].state) :
			"not a member", g->ngain, g->ngain == 1 ? "" : "s",
			drained ? "; drained: its ranges are held by the "
			"other members, it can be stopped" : "");
}

/* The adopting thread: adoption waits for the requests in flight (up to
 * a backup's timeout), which must not hold up the agent's keepalives. */
static void *adopt_main(void *arg)
{
	struct rs_server *s = arg;
	struct srv_repl *rp = &s->repl;

	pthread_mutex_lock(&rp->plock);
	for (;;) {
		struct memb_config *c;

		while (!rp->npending && !rp->pstop &&
		       !atomic_load(&rp->tables_missing)) {
			int64_t ms = srv_sweep_next_ms(s);

			if (ms < 0) {
				pthread_cond_wait(&rp->pcv, &rp->plock);
			} else if (ms > 0) {
				struct timespec dl;

				rs_deadline_ms(CLOCK_REALTIME, ms, &dl);
				pthread_cond_timedwait(&rp->pcv, &rp->plock,
						       &dl);
			} else {	/* rows of ranges it left */
				pthread_mutex_unlock(&rp->plock);
				srv_sweep_slice(s);
				pthread_mutex_lock(&rp->plock);
			}
		}
		if (rp->pstop)
			break;
		if (!rp->npending) {	/* a REPL named a missing table */
			pthread_mutex_unlock(&rp->plock);
			srv_copy_tables(s);
			pthread_mutex_lock(&rp->plock);
			continue;
		}
		c = rp->pending[0];
		memmove(rp->pending, rp->pending + 1,
			--rp->npending * sizeof(*rp->pending));
		pthread_mutex_unlock(&rp->plock);
		adopt(s, c);
		memb_config_free(c);
		free(c);
		srv_copy_run(s);
		pthread_mutex_lock(&rp->plock);
	}
	pthread_mutex_unlock(&rp->plock);
	return NULL;
}

void srv_repl_table_missing(struct rs_server *s)
{
	struct srv_repl *rp = &s->repl;

	if (atomic_exchange(&rp->tables_missing, true))
		return;
	pthread_mutex_lock(&rp->plock);
	pthread_cond_signal(&rp->pcv);
	pthread_mutex_unlock(&rp->plock);
}

void srv_repl_adopt(struct rs_server *s, const struct memb_config *c)
{
	struct srv_repl *rp = &s->repl;
	struct memb_config *copy = rs_calloc(1, sizeof(*copy));

	/* before the agent stores the time of this read: a node never
	 * vouches for an epoch older than one it has seen */
	atomic_store(&rp->seen, c->epoch);
	if (!copy || memb_config_copy(copy, c)) {
		free(copy);
		srv_log_at(RS_LOG_ERROR, "repl: epoch %" PRIu64 ": out of "
			   "memory", c->epoch);
		return;
	}
	pthread_mutex_lock(&rp->plock);
	if (rp->npending == SRV_REPL_PENDING) {
		/* the oldest goes: the node then cannot tell what it gained
		 * and copies all its ranges again (srv_copy.c) */
		memb_config_free(rp->pending[0]);
		free(rp->pending[0]);
		memmove(rp->pending, rp->pending + 1,
			--rp->npending * sizeof(*rp->pending));
	}
	rp->pending[rp->npending++] = copy;
	pthread_cond_signal(&rp->pcv);
	pthread_mutex_unlock(&rp->plock);
}

int srv_repl_start(struct rs_server *s)
{
	struct srv_repl *rp = &s->repl;
	int ret;

	if (!rp->on)
		return 0;
	ret = pthread_create(&rp->thr, NULL, adopt_main, s);
	if (ret)
		return rs_seterr(-ret, "repl: pthread_create: %s",
				 strerror(ret));
	rp->started = true;
	return 0;
}

void srv_repl_stop(struct rs_server *s)
{
	struct srv_repl *rp = &s->repl;

	if (!rp->started)
		return;
	pthread_mutex_lock(&rp->plock);
	rp->pstop = true;
	pthread_cond_signal(&rp->pcv);
	pthread_mutex_unlock(&rp->plock);
	pthread_join(rp->thr, NULL);
	rp->started = false;
}

int srv_repl_init(struct rs_server *s)
{
	struct srv_repl *rp = &s->repl;
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(
		&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&rp->lock, &a);
	pthread_rwlockattr_destroy(&a);
	pthread_mutex_init(&rp->order, NULL);
	pthread_mutex_init(&rp->view_lock, NULL);
	pthread_mutex_init(&rp->plock, NULL);
	pthread_cond_init(&rp->pcv, NULL);
	if (srv_once_init(&rp->once))
		return -ENOMEM;
	if (!s->auth_on)
		srv_once_one_bucket(&rp->once);
	return 0;
}

void srv_repl_fini(struct rs_server *s)
{
	struct srv_repl *rp = &s->repl;

	srv_repl_stop(s);
	while (rp->npending) {
		memb_config_free(rp->pending[--rp->npending]);
		free(rp->pending[rp->npending]);
	}
	srv_copy_fini(s);
	view_publish(rp, NULL);
	cfg_free(rp->cur, true);
	rp->cur = NULL;
	srv_once_fini(&rp->once);
	pthread_cond_destroy(&rp->pcv);
	pthread_mutex_destroy(&rp->plock);
	pthread_mutex_destroy(&rp->view_lock);
	pthread_mutex_destroy(&rp->order);
	pthread_rwlock_destroy(&rp->lock);
}

/* ---- requests ---- */

static bool forwards_in(const struct srv_cfg *g, uint64_t h,
			const unsigned *set, unsigned cnt, unsigned mi);

int srv_repl_enter(struct rs_server *s, struct srv_repl_req *q,
		   uint64_t epoch, const void *keys, uint32_t n, bool backup)
{
	struct srv_repl *rp = &s->repl;
	struct srv_cfg *g;
	unsigned set[MEMB_MAX_R];

	memset(q, 0, sizeof(*q));
	q->prim = -2;
	if (pthread_rwlock_tryrdlock(&rp->lock)) {
		atomic_fetch_add(&rp->refused, 1);
		return rs_seterr(RS_E_EPOCH, "the node is adopting a new "
				 "configuration: retry");
	}
	g = rp->cur;
	q->held = true;
	q->cfg = g;
	if (!g || (backup ? g->tself : g->self) < 0) {
		atomic_fetch_add(&rp->refused, 1);
		return rs_seterr(RS_E_EPOCH, "this node is not %s member of "
				 "the configuration (epoch %" PRIu64 ")",
				 backup ? "a" : "an active",
				 g ? g->c.epoch : 0);
	}
	if (epoch != g->c.epoch) {
		atomic_fetch_add(&rp->refused, 1);
		return rs_seterr(RS_E_EPOCH, "epoch %" PRIu64 ": the node "
				 "follows epoch %" PRIu64, epoch, g->c.epoch);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t key = proto_key_at(keys, i), h = memb_key_hash(key);
		unsigned cnt = memb_replicas(g->pl, h, set);
		bool prim = cnt && (int)set[0] == g->self;
		bool ok = backup ? !prim && forwards_in(g, h, set, cnt,
							(unsigned)g->tself)
				 : prim;

		if (backup && cnt)	/* one primary for all, or -1 */
			q->prim = q->prim == -2 || q->prim == (int)set[0]
					  ? (int)set[0] : -1;
		if (!ok) {
			atomic_fetch_add(&rp->refused, 1);
			return rs_seterr(RS_E_EPOCH, "key %" PRIu64 ": this "
					 "node is not its %s in epoch %" PRIu64,
					 key, backup ? "backup" : "primary",
					 g->c.epoch);
		}
	}
	return 0;
}

bool srv_repl_is_primary(void *q_, uint64_t key)
{
	const struct srv_repl_req *q = q_;
	unsigned set[MEMB_MAX_R];
	unsigned cnt = memb_replicas(q->cfg->pl, memb_key_hash(key), set);

	return cnt && (int)set[0] == q->cfg->self;
}

int srv_repl_hold(struct rs_server *s, struct srv_repl_req *q,
		  const void *keys, uint32_t n)
{
	struct srv_cfg *g = q->cfg;
	uint64_t now;

	if (RS_LIKELY(!g->hold_until))
		return 0;
	now = rs_mono_ms();
	if (now >= g->hold_until)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t key = proto_key_at(keys, i);

		if (g->prev_pl &&
		    memb_set_kept(g->prev_pl, g->prev_map, g->prev_self,
				  g->pl, memb_key_hash(key)))
			continue;
		atomic_fetch_add(&s->repl.held, 1);
		return rs_seterr(RS_E_BUSY, "key %" PRIu64 ": its replica set "
				 "changed in epoch %" PRIu64 " and this node "
				 "takes writes of it in %" PRIu64 " ms (read "
				 "lease)", key, g->c.epoch,
				 g->hold_until - now);
	}
	return 0;
}

static bool in_list(const unsigned *set, unsigned cnt, unsigned mi)
{
	for (unsigned j = 0; j < cnt; j++)
		if (set[j] == mi)
			return true;
	return false;
}

/* srv_repl_forwards_to() for h's active set already computed (set, cnt) */
static bool forwards_in(const struct srv_cfg *g, uint64_t h,
			const unsigned *set, unsigned cnt, unsigned mi)
{
	unsigned tset[MEMB_MAX_R], tcnt;

	if (in_list(set, cnt, mi))
		return set[0] != mi;	/* its backups */
	if (!g->tpl)
		return false;
	/* the members of its target set that are not in its active set: a
	 * joining one, or an active one taking a leaving one's place */
	tcnt = memb_replicas(g->tpl, h, tset);
	return in_list(tset, tcnt, mi);
}

bool srv_repl_forwards_to(const struct srv_cfg *g, uint64_t h, unsigned mi)
{
	unsigned set[MEMB_MAX_R];

	return forwards_in(g, h, set, memb_replicas(g->pl, h, set), mi);
}

int srv_repl_from_begin(struct rs_server *s, struct srv_repl_req *q,
			uint64_t from_inc, uint64_t from_seq,
			struct srv_from **out)
{
	struct srv_cfg *g = q->cfg;
	struct srv_from *f;
	size_t mi = g->c.n;

	*out = NULL;
	for (size_t i = 0; from_inc && i < g->c.n; i++)
		if (g->c.m[i].inc == from_inc && (int)i != g->tself) {
			mi = i;
			break;
		}
	if (mi == g->c.n) {
		atomic_fetch_add(&s->repl.foreign_repls, 1);
		return rs_seterr(RS_E_EPOCH, "REPL from incarnation %016"
				 PRIx64 ": no other member of epoch %" PRIu64
				 " has it", from_inc, g->c.epoch);
	}
	/* srv_repl_enter found the keys' primary (-2: a REPL of no key) */
	if (q->prim != -2 && q->prim != (int)mi) {
		atomic_fetch_add(&s->repl.foreign_repls, 1);
		return rs_seterr(RS_E_EPOCH, "REPL from '%s': it is not the "
				 "primary of %s its keys in epoch %" PRIu64,
				 g->c.m[mi].id, q->prim == -1 ? "all" : "any of",
				 g->c.epoch);
	}
	f = &g->from[mi];
	pthread_mutex_lock(&f->lock);
	if (from_seq <= f->last_seq) {
		uint64_t last = f->last_seq;

		pthread_mutex_unlock(&f->lock);
		atomic_fetch_add(&s->repl.stale_repls, 1);
		return rs_seterr(RS_E_STALE, "REPL %" PRIu64 " of '%s': its "
				 "REPL %" PRIu64 " was applied already (this "
				 "one was overtaken: its sender gave up on it)",
				 from_seq, g->c.m[mi].id, last);
	}
	*out = f;
	return 0;
}

void srv_repl_from_done(struct srv_from *f, uint64_t from_seq, bool applied)
{
	if (!f)
		return;
	if (applied)
		f->last_seq = from_seq;
	pthread_mutex_unlock(&f->lock);
}

void srv_repl_exit(struct rs_server *s, struct srv_repl_req *q)
{
	struct srv_chunk **hold = q->chunks;

	if (q->nchunks) {
		struct srv_cfg *g = q->cfg;

		for (unsigned i = 0; i < q->nchunks; i++) {
			struct srv_peer *p = g->peer[q->chunk_peer[i]];

			pthread_mutex_lock(&p->lock);
			chunk_put_locked(hold[i]);
			pthread_mutex_unlock(&p->lock);
		}
	}
	free(q->chunks);
	free(q->chunk_peer);
	if (q->slot)
		srv_wait_unreserve(s);
	if (q->held)
		pthread_rwlock_unlock(&s->repl.lock);
	memset(q, 0, sizeof(*q));
}

/* Remember that q waits for ch of peer pi (once per chunk). */
static int hold_chunk(struct srv_repl_req *q, struct srv_chunk *ch,
		      unsigned pi)
{
	for (unsigned i = 0; i < q->nchunks; i++)
		if (q->chunks[i] == ch)
			return 0;
	if (q->nchunks == q->cap) {
		unsigned cap = q->cap ? 2 * q->cap : 8;
		void *a = rs_realloc(q->chunks, cap * sizeof(*q->chunks));
		void *b;

		if (!a)
			return -ENOMEM;
		q->chunks = a;
		b = rs_realloc(q->chunk_peer, cap * sizeof(*q->chunk_peer));
		if (!b)
			return -ENOMEM;
		q->chunk_peer = b;
		q->cap = cap;
	}
	ch->refs++;
	q->chunks[q->nchunks] = ch;
	q->chunk_peer[q->nchunks++] = pi;
	return 0;
}

int srv_repl_append(struct srv_repl_req *q, unsigned pi,
		    const struct proto_table_spec *ts,
		    uint32_t width, uint64_t key, uint8_t kind,
		    const float *row, const struct srv_once_tag *tag,
		    int32_t st)
{
	struct srv_peer *p = q->cfg->peer[pi];
	struct srv_chunk *ch;
	int ret = 0;

	pthread_mutex_lock(&p->lock);
	ch = p->tail;
	if (!ch || ch->sealed || ch->n == ch->cap || ch->width != width ||
	    ch->ident != ts->ident || strcmp(ch->table, ts->name)) {
		ch = rs_calloc(1, sizeof(*ch));
		if (ch) {
			ch->cap = REPL_CHUNK_KEYS;
			ch->width = width;
			ch->refs = 1;
			snprintf(ch->table, sizeof(ch->table), "%s",
				 ts->name);
			ch->ident = ts->ident;
			ch->keys = rs_malloc(ch->cap * sizeof(*ch->keys));
			ch->cl = rs_malloc(ch->cap * sizeof(*ch->cl));
			ch->sq = rs_malloc(ch->cap * sizeof(*ch->sq));
			ch->db = rs_malloc(ch->cap * sizeof(*ch->db));
			ch->st = rs_malloc(ch->cap * sizeof(*ch->st));
			ch->cr = rs_malloc(ch->cap * sizeof(*ch->cr));
			ch->kinds = rs_malloc(ch->cap);
			ch->rows = rs_malloc((size_t)ch->cap * width *
					  sizeof(float));
		}
		if (!ch || !ch->keys || !ch->cl || !ch->sq || !ch->db ||
		    !ch->st || !ch->cr || !ch->kinds || !ch->rows) {
			chunk_free(ch);
			pthread_mutex_unlock(&p->lock);
			return -ENOMEM;
		}
		if (p->tail)
			p->tail->next = ch;
		else
			p->head = ch;
		p->tail = ch;
	}
	ch->keys[ch->n] = key;
	ch->cl[ch->n] = tag ? tag->client : 0;
	ch->sq[ch->n] = tag && tag->client ? tag->seq : 0;
	ch->db[ch->n] = tag && tag->client ? tag->done_below : 0;
	ch->st[ch->n] = tag && tag->client ? st : 0;
	ch->cr[ch->n] = tag && tag->client ? tag->cred : 0;
	ch->kinds[ch->n] = kind;
	memcpy(ch->rows + (size_t)ch->n * width, row,
	       (size_t)width * sizeof(float));
	ch->n++;
	ret = hold_chunk(q, ch, pi);
	pthread_mutex_unlock(&p->lock);
	return ret;
}

_Static_assert(SRV_REPL_MAX_TO >= 2 * MEMB_MAX_R, "targets of a record");

unsigned srv_repl_targets(const struct srv_repl_req *q, uint64_t key,
			  unsigned *to)
{
	const struct srv_cfg *g = q->cfg;
	unsigned set[MEMB_MAX_R], cnt, tset[MEMB_MAX_R], tcnt, n = 0;
	uint64_t h;

	if (g->c.r <= 1 && !g->tpl)	/* no backups, no change under way */
		return 0;
	h = memb_key_hash(key);
	cnt = memb_replicas(g->pl, h, set);
	for (unsigned j = 1; j < cnt; j++)
		to[n++] = set[j];
	if (RS_LIKELY(!g->tpl))
		return n;
	/* the members of the key's target set not in its active set */
	tcnt = memb_replicas(g->tpl, h, tset);
	for (unsigned j = 0; j < tcnt; j++)
		if (!in_list(set, cnt, tset[j]))
			to[n++] = tset[j];
	return n;
}

int srv_repl_record_to(struct srv_repl_req *q, const unsigned *to,
		       unsigned nto, const struct proto_table_spec *table,
		       uint32_t width, uint64_t key, bool deleted,
		       const float *row, const struct srv_once_tag *tag,
		       int32_t st)
{
	uint8_t kind = deleted ? PROTO_REPL_DELETED : PROTO_REPL_ROW;
	int ret;

	for (unsigned j = 0; j < nto; j++)
		if ((ret = srv_repl_append(q, to[j], table, width, key, kind,
					   row, tag, st)))
			return ret;
	return 0;
}

int srv_repl_record(struct rs_server *s, struct srv_repl_req *q,
		    const struct proto_table_spec *table, uint32_t width,
		    uint64_t key,
		    bool deleted, const float *row,
		    const struct srv_once_tag *tag, int32_t st)
{
	unsigned to[SRV_REPL_MAX_TO];

	(void)s;
	return srv_repl_record_to(q, to, srv_repl_targets(q, key, to), table,
				  width, key, deleted, row, tag, st);
}

/* How many records of ch from off fit one REPL on cc (both sides'
 * message and batch limits). */
static uint32_t slice_keys(const struct cli_conn *cc,
			   const struct srv_chunk *ch, uint32_t off)
{
	size_t nl = strlen(ch->table);
	uint32_t k = ch->n - off;

	while (k > 1 && (proto_repl_req_bytes(k, ch->width, nl) > cc->msg_max ||
			 k > cc->max_batch_keys ||
			 proto_keys_reply_bytes(PROTO_OP_REPL, k, 0, 0) >
				 CLI_MSG_MAX))
		k /= 2;
	return k;
}

/* Send records [off, off + n) of ch in one REPL on cc; *req_id: the
 * request's, for its reply. */
static int slice_post(struct srv_repl *rp, struct cli_conn *cc,
		      const struct srv_chunk *ch, uint64_t epoch,
		      uint32_t off, uint32_t n, uint64_t *req_id)
{
	struct proto_repl_req m = {
		.epoch = epoch, .n = n, .width = ch->width,
		.from_inc = rp->inc,
		/* numbered as sent: one REPL in flight per backup, so the
		 * backup sees them in this order unless one was overtaken */
		.from_seq = atomic_fetch_add(&rp->repl_seq, 1) + 1,
		.table_ident = ch->ident,
		.keys = ch->keys + off, .kinds = ch->kinds + off,
		.clients = ch->cl + off, .seqs = ch->sq + off,
		.done_below = ch->db + off, .statuses = ch->st + off,
		.creds = ch->cr + off,
		.rows = ch->rows + (size_t)off * ch->width,
	};
	struct proto_hdr h;
	int len;

	snprintf(m.table, sizeof(m.table), "%s", ch->table);
	cli_hdr_init(&h, 0, false);
	len = proto_enc_repl_req(cc->msg, cc->msg_max, &h, &m);
	if (len < 0)
		return len;
	*req_id = h.req_id;
	return cli_conn_send(cc, cc->msg, (size_t)len);
}

/* Receive and check the reply to the REPL of records [off, off + n) of
 * ch (request req_id). */
static int slice_check(struct cli_conn *cc, const struct srv_chunk *ch,
		       uint32_t off, uint32_t n, uint64_t req_id)
{
	struct proto_msg rep;
	struct rv_msg raw;
	int ret;

	ret = cli_wire_recv(cc, PROTO_OP_REPL, req_id, &raw, &rep);
	if (ret)
		return ret;
	if (rep.u.keys_reply.n != n)
		ret = rs_seterr(RS_E_PROTO, "REPL reply: %u statuses for %u "
				"records", rep.u.keys_reply.n, n);
	for (uint32_t i = 0; !ret && i < n; i++) {
		int32_t st = proto_status_at(rep.u.keys_reply.status, i);

		if (st < 0 && !(st == RS_E_NOTFOUND &&
				ch->kinds[off + i] == PROTO_REPL_DELETED))
			ret = rs_seterr(st, "key %" PRIu64 " of table '%s': "
					"%s", ch->keys[off + i], ch->table,
					rs_strerror(st));
	}
	rv_msg_release(&raw);
	return ret;
}

/*
 * One backup's REPL that a worker sent and has not yet had the reply to:
 * chunk h, the head of p's queue, which the worker shipping it claimed
 * (p->sending); its first k records are in flight on cc. A worker posts
 * the first REPL to every idle backup of its write before it waits for
 * any reply, so the backups apply in parallel; the rest of a chunk
 * larger than one message follows slice by slice (at most one REPL in
 * flight per backup).
 */
struct repl_post {
	struct srv_peer *p;
	struct srv_chunk *h;
	struct cli_conn *cc;	/* NULL: no connection */
	uint32_t k;
	uint64_t req_id;
	int ret;
	char why[200];		/* ret's message */
};

#define REPL_POSTS 8u		/* backups posted to at once by a worker */

static void post_start(struct srv_repl *rp, struct repl_post *po,
		       uint64_t epoch)
{
	po->ret = cli_conn_get(&po->p->node, &po->cc);
	if (po->ret) {
		po->cc = NULL;
	} else {
		po->k = slice_keys(po->cc, po->h, po->h->sent);
		po->ret = slice_post(rp, po->cc, po->h, epoch, po->h->sent,
				     po->k, &po->req_id);
	}
	if (po->ret)
		snprintf(po->why, sizeof(po->why), "%s", rs_errormsg());
}

/* Under p->lock: the kept chunks over REPL_KEEP_MAX_BYTES go, oldest
 * first (never one a shipper holds: h). */
static void keep_bound(struct rs_server *s, struct srv_peer *p,
		       const struct srv_chunk *h)
{
	uint64_t dropped = 0;

	while (p->kept_bytes > REPL_KEEP_MAX_BYTES && p->head &&
	       p->head->retry && p->head != h) {
		struct srv_chunk *d = p->head;

		p->kept_bytes -= chunk_bytes(d);
		dropped += d->n - d->sent;
		p->head = d->next;
		if (!p->head)
			p->tail = NULL;
		chunk_put_locked(d);
	}
	if (dropped) {
		atomic_fetch_add(&s->repl.dropped_records, dropped);
		srv_warn_peer("repl: backup '%s': %" PRIu64 " records of failed "
			     "writes dropped (over %llu MiB kept to send "
			     "again): its rows of those keys may differ until "
			     "they are written again, and a resend of those "
			     "calls after a failover to it may apply twice",
			     p->id, dropped, REPL_KEEP_MAX_BYTES >> 20);
	}
}

/*
 * Under p->lock: h was shipped with result ret (0 or why it failed).
 * After a failure h and everything behind it are done with that error
 * (their writes fail) but stay queued, marked retry: the primary applied
 * those writes and recorded their completions, and a later REPL of the
 * same keys would carry their rows without those completions, so that a
 * resend of such a call after a failover to the backup would apply
 * again. The next write to the peer sends them first (claim_idle ships
 * the head), and a new configuration reads them again (recapture).
 */
static void peer_shipped(struct rs_server *s, struct srv_peer *p,
			 struct srv_chunk *h, int ret, const char *why)
{
	/* h and, after a failure, everything behind it; but h goes if the
	 * backup refused it as stale: for a table it no longer has (another
	 * of the same name, dropped and created again), where sending it
	 * again cannot help (a REPL overtaken by a later one never gets
	 * here: its sender gave up on it) */
	for (struct srv_chunk *c = h; c; c = ret ? c->next : NULL) {
		bool keep = ret && !(c == h && ret == RS_E_STALE);

		c->done = true;
		c->err = ret;
		c->sealed = true;
		if (keep && !c->retry) {
			c->retry = true;
			p->kept_bytes += chunk_bytes(c);
		} else if (!keep && c->retry) {
			c->retry = false;
			p->kept_bytes -= chunk_bytes(c);
		}
		if (ret && !keep)
			atomic_fetch_add(&s->repl.dropped_records,
					 c->n - c->sent);
	}
	p->busy_until = 0;
	p->busy_ms = 0;
	if (ret) {
		p->failed++;
		srv_warn_peer("repl: backup '%s': %s (%s); %s", p->id, why,
			     rs_strerror(ret), ret == RS_E_FULL
			     ? "the writes of its keys that need a new row there "
			       "fail with RS_E_FULL until it has room"
			     : "its keys' writes fail until the configuration "
			       "changes");
	} else {
		p->shipped++;
	}
	/* drop the done chunks from the queue (not the kept ones) */
	while (p->head && p->head->done && !p->head->retry) {
		struct srv_chunk *d = p->head;

		p->head = d->next;
		if (!p->head)
			p->tail = NULL;
		chunk_put_locked(d);
	}
	if (ret)
		keep_bound(s, p, h);
	chunk_put_locked(h);
	p->sending = false;
	pthread_cond_broadcast(&p->cv);
}

/* Under p->lock: the backup answered h's REPL RS_E_BUSY; h stays at
 * the head (h->sent: what it took), resent after the backoff. false:
 * busy for too long (REPL_BUSY_MAX_MS); nothing done. */
static bool peer_busy(struct srv_peer *p, struct srv_chunk *h)
{
	uint64_t now = rs_mono_ms();

	if (!p->busy_ms)
		p->busy_since = now;
	else if (now - p->busy_since >= REPL_BUSY_MAX_MS)
		return false;
	p->busy_ms = !p->busy_ms ? 1u : p->busy_ms >= REPL_BUSY_BACKOFF_MAX_MS
					      ? REPL_BUSY_BACKOFF_MAX_MS
					      : 2u * p->busy_ms;
	p->busy_until = now + p->busy_ms;
	p->busy++;
	chunk_put_locked(h);
	p->sending = false;
	pthread_cond_broadcast(&p->cv);
	return true;
}

/* The reply to po's REPL, then the rest of its chunk; p is idle again.
 * Returns the result (RS_E_BUSY: the backup asks for a resend later). */
static int post_finish(struct rs_server *s, struct repl_post *po,
		       uint64_t epoch)
{
	struct srv_repl *rp = &s->repl;
	struct srv_chunk *h = po->h;
	uint32_t off = h->sent, k = po->k;
	uint64_t id = po->req_id;
	int ret = po->ret;

	if (!ret)
		ret = slice_check(po->cc, h, off, k, id);
	while (!ret) {
		h->sent = off += k;	/* the shipper's alone (p->sending) */
		if (off >= h->n)
			break;
		k = slice_keys(po->cc, h, off);
		ret = slice_post(rp, po->cc, h, epoch, off, k, &id);
		if (!ret)
			ret = slice_check(po->cc, h, off, k, id);
	}
	if (ret && !po->ret)
		snprintf(po->why, sizeof(po->why), "%s", rs_errormsg());
	if (po->cc) {
		if (ret && ret != RS_E_BUSY)
			cli_conn_fail(po->cc, ret);
		cli_conn_put(po->cc);
	}
	pthread_mutex_lock(&po->p->lock);
	if (ret != RS_E_BUSY || !peer_busy(po->p, h)) {
		if (ret == RS_E_BUSY) {
			ret = RS_E_TIMEOUT;
			snprintf(po->why, sizeof(po->why), "busy (growing a "
				 "table) for more than %u s",
				 REPL_BUSY_MAX_MS / 1000u);
		}
		peer_shipped(s, po->p, h, ret, po->why);
	}
	pthread_mutex_unlock(&po->p->lock);
	return ret;
}

/* Claim the head of every idle backup that a chunk of q, not yet done,
 * waits in the queue of (up to REPL_POSTS); *wait: the index of a chunk
 * whose backup is busy (q->nchunks: none). */
static unsigned claim_idle(struct srv_repl_req *q, struct repl_post *post,
			   unsigned *wait)
{
	uint64_t now = rs_mono_ms();
	unsigned np = 0;

	*wait = q->nchunks;
	for (unsigned i = 0; i < q->nchunks; i++) {
		struct srv_peer *p = q->cfg->peer[q->chunk_peer[i]];

		pthread_mutex_lock(&p->lock);
		if (!q->chunks[i]->done && !p->sending && p->head &&
		    now >= p->busy_until && np < REPL_POSTS) {
			p->sending = true;
			p->head->sealed = true;
			p->head->refs++;
			post[np++] = (struct repl_post){ .p = p,
							 .h = p->head };
		} else if (!q->chunks[i]->done && *wait == q->nchunks) {
			*wait = i;
		}
		pthread_mutex_unlock(&p->lock);
	}
	return np;
}

/* Sleep until the backup of q's chunk i may have moved (at most 50 ms,
 * or to the end of its busy backoff: the caller checks its deadline). */
static void await_peer(struct srv_repl_req *q, unsigned i)
{
	struct srv_peer *p = q->cfg->peer[q->chunk_peer[i]];
	uint64_t now = rs_mono_ms(), ms = 50;
	struct timespec dl;

	pthread_mutex_lock(&p->lock);
	if (p->busy_until > now && p->busy_until - now < ms)
		ms = p->busy_until - now;
	rs_deadline_ms(CLOCK_MONOTONIC, (unsigned)ms, &dl);
	if (!q->chunks[i]->done && (p->sending || p->busy_until > now))
		pthread_cond_timedwait(&p->cv, &p->lock, &dl);
	pthread_mutex_unlock(&p->lock);
}

/* Whether the backup of q's chunk i last answered RS_E_BUSY. */
static bool peer_is_busy(struct srv_repl_req *q, unsigned i)
{
	struct srv_peer *p = q->cfg->peer[q->chunk_peer[i]];
	bool b;

	pthread_mutex_lock(&p->lock);
	b = p->busy_until != 0;
	pthread_mutex_unlock(&p->lock);
	return b;
}

/* The first failure among q's chunks (0: all acknowledged). */
static int chunks_result(struct srv_repl_req *q)
{
	int first = 0;

	for (unsigned i = 0; i < q->nchunks && !first; i++) {
		struct srv_peer *p = q->cfg->peer[q->chunk_peer[i]];

		pthread_mutex_lock(&p->lock);
		first = q->chunks[i]->err;
		pthread_mutex_unlock(&p->lock);
	}
	return first;
}

/*
 * Wait until every chunk of q is done. Each round posts a REPL to every
 * idle backup q waits for (group commit: the head of its queue, whoever
 * queued it), then takes their replies; when every backup q waits for
 * is busy with another worker's REPL, it sleeps on one of them.
 */
int srv_repl_wait(struct rs_server *s, struct srv_repl_req *q)
{
	uint64_t epoch = q->cfg->c.epoch, deadline = 0, busy_since = 0;
	int first = 0;

	/* on a worker: the node goes on receiving meanwhile (server.c,
	 * "waits"), so a backup waiting for this node's REPL apply never
	 * waits for this wait */
	srv_wait_begin(s);
	for (;;) {
		struct repl_post post[REPL_POSTS];
		unsigned wait, np = claim_idle(q, post, &wait), busy = 0;
		bool flying = false, stuck;

		for (unsigned k = 0; k < np; k++) {
			post_start(&s->repl, &post[k], epoch);
			if (!post[k].ret && flying)
				atomic_fetch_add(&s->repl.parallel, 1);
			flying |= !post[k].ret;
		}
		for (unsigned k = 0; k < np; k++)
			busy += post_finish(s, &post[k], epoch) == RS_E_BUSY;
		if (!np && wait == q->nchunks)
			break;
		/* only held up by backups that grow a table: bounded, then
		 * the keys are answered RS_E_BUSY (no failed backup) */
		stuck = np ? busy == np : peer_is_busy(q, wait);
		if (!stuck) {
			busy_since = 0;
		} else if (!busy_since) {
			busy_since = rs_mono_ms();
		} else if (rs_mono_ms() - busy_since >= REPL_BUSY_WAIT_MS) {
			first = rs_seterr(RS_E_BUSY, "a backup of the keys "
					  "('%s') grows a table: retry",
					  np ? post[0].p->id
					     : q->cfg->peer[q->chunk_peer[
						       wait]]->id);
			break;
		}
		if (np) {
			deadline = 0;
			continue;
		}
		if (!deadline) {
			deadline = rs_mono_ms() + 2u * SRV_REPL_TIMEOUT_MS +
				   1000u;
		} else if (rs_mono_ms() >= deadline) {
			/* a sender stuck beyond its own timeouts: give up on
			 * this request; its chunks stay queued */
			first = rs_seterr(RS_E_TIMEOUT, "backup '%s': no "
					  "acknowledgement in time",
					  q->cfg->peer[q->chunk_peer[wait]]->id);
			break;
		}
		await_peer(q, wait);
	}
	srv_wait_end(s);
	if (!first)
		first = chunks_result(q);
	if (first == RS_E_BUSY)
		atomic_fetch_add(&s->repl.busy_writes, 1);
	else if (first)
		atomic_fetch_add(&s->repl.failed_writes, 1);
	else if (q->nchunks)
		atomic_fetch_add(&s->repl.forwarded_writes, 1);
	return first;
}

bool srv_repl_pending(const struct srv_repl_req *q)
{
	return q->nchunks != 0;
}

/* ---- CONFIG ---- */

/* Served from the published view: never waits for the configuration
 * lock (see "what CONFIG answers" above). */
int srv_repl_config(struct rs_server *s, void *buf, size_t cap,
		    const struct proto_hdr *h)
{
	struct srv_repl *rp = &s->repl;
	struct proto_config pc = { .self = PROTO_CONFIG_NO_SELF };
	struct srv_cfg_view *v;
	int len;

	if (atomic_load(&rp->adopting))
		atomic_fetch_add(&rp->configs_adopting, 1);
	pthread_mutex_lock(&rp->view_lock);
	v = rp->view;
	if (v)
		atomic_fetch_add(&v->refs, 1);
	pthread_mutex_unlock(&rp->view_lock);
	if (v) {
		int64_t read = atomic_load(&rp->read_ms);
		int64_t age = (int64_t)rs_mono_ms() - read;

		pc = v->pc;
		pc.age_ms = PROTO_CONFIG_AGE_NONE;
		if (read > 0 && atomic_load(&rp->seen) == pc.epoch)
			pc.age_ms = age < 0 ? 0 : age >= PROTO_CONFIG_AGE_NONE
						       ? PROTO_CONFIG_AGE_NONE - 1
						       : (uint32_t)age;
		pc.lease_ms = rp->lease_ms;
		if (v->self >= 0 && atomic_load(&rp->ready) == pc.epoch)
			pc.ready = pc.epoch;
	}
	len = proto_enc_config_reply(buf, cap, h, &pc, v ? v->mm : NULL);
	view_put(v);
	return len;
}

void srv_repl_stats(struct rs_server *s, struct srv_repl_stats *st)
{
	struct srv_repl *rp = &s->repl;
	struct srv_cfg *g;

	memset(st, 0, sizeof(*st));
	st->epoch = atomic_load(&rp->epoch);
	st->forwarded_writes = atomic_load(&rp->forwarded_writes);
	st->failed_writes = atomic_load(&rp->failed_writes);
	st->refused = atomic_load(&rp->refused);
	st->applied = atomic_load(&rp->applied);
	st->synced = atomic_load(&rp->synced);
	st->held = atomic_load(&rp->held);
	st->parallel = atomic_load(&rp->parallel);
	st->busy_writes = atomic_load(&rp->busy_writes);
	st->configs_adopting = atomic_load(&rp->configs_adopting);
	st->repls_all_waiting = atomic_load(&rp->repls_all_waiting);
	st->stale_repls = atomic_load(&rp->stale_repls);
	st->foreign_repls = atomic_load(&rp->foreign_repls);
	st->other_table_repls = atomic_load(&rp->other_table_repls);
	st->recaptured = atomic_load(&rp->recaptured);
	st->dropped_records = atomic_load(&rp->dropped_records);
	st->copied_rows = atomic_load(&rp->copied_rows);
	st->copies_done = atomic_load(&rp->copies_done);
	st->copy_failures = atomic_load(&rp->copy_failures);
	st->unheld_ranges = atomic_load(&rp->unheld_ranges);
	st->regressed = atomic_load(&rp->regressed);
	st->tables_created = atomic_load(&rp->tables_created);
	st->tables_dropped = atomic_load(&rp->tables_dropped);
	st->freed_rows = atomic_load(&rp->freed_rows);
	if (pthread_rwlock_tryrdlock(&rp->lock))
		return;
	st->gained = rp->cur ? rp->cur->ngain : 0;
	g = rp->cur;
	for (size_t i = 0; g && i < g->c.n; i++) {
		struct srv_peer *p = g->peer[i];

		if (!p)
			continue;
		pthread_mutex_lock(&p->lock);
		st->chunks_shipped += p->shipped;
		st->chunks_failed += p->failed;
		st->busy_repls += p->busy;
		for (struct srv_chunk *c = p->head; c; c = c->next)
			st->queued += c->n;
		pthread_mutex_unlock(&p->lock);
	}
	st->active = g && g->self >= 0;
	pthread_rwlock_unlock(&rp->lock);
}
