/*
 * srv_evict.c - the node's side of per-table eviction and admission
 * (docs/eviction.md): giving a table its eviction state from its spec,
 * the TTL sweep thread, and the STATS entries.
 *
 * The sweep thread exists only once a table has eviction (an idle node
 * without one has no timer: srv_evict_want). It wakes every
 * SRV_EV_TICK_MS, advances each evicting
 * table's coarse clock and, for tables with a TTL, visits at most
 * SRV_EV_SWEEP_SLOTS row slots per table and tick (a rate limit: request
 * workers never wait for it; its deletes take the same row and bucket
 * locks as a client DELETE, one row at a time). It does not run while a
 * checkpoint freezes writes: it enters as a writer, as a request does.
 *
 * In a replicated cluster each expiry is a replicated deletion, made as a
 * DELETE is (sweep_cluster): the sweep enters the configuration like a
 * write of the epoch it read at the start of the tick, expires only keys
 * this node is the primary of (the sink's filter: backups never expire
 * rows on their own), queues each deletion for the key's backups under
 * the replication order lock and waits for them before it counts the
 * expiries. It stops for the tick when the node is not an active member
 * holding all its ranges (copying, joining), while the read lease holds
 * writes, or when the epoch moved. Expiries whose wait failed go on the
 * resend list, which each tick serves first (srv_evict_resend.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rs_internal.h"
#include "server/srv_internal.h"
#include "server/srv_repl_int.h"
#include "value/slab_evict.h"

_Static_assert((int)SLAB_EV_NONE == (int)PROTO_EVICT_NONE &&
		       (int)SLAB_EV_LRU == (int)PROTO_EVICT_LRU &&
		       (int)SLAB_EV_LFU == (int)PROTO_EVICT_LFU &&
		       SLAB_EV_TTL_MAX == PROTO_EVICT_TTL_MAX &&
		       SLAB_EV_ADMIT_MAX == PROTO_EVICT_ADMIT_MAX,
	       "the store's eviction values are the wire's");

#define SRV_EV_TICK_MS 100
#define SRV_EV_SWEEP_SLOTS 4096

int srv_evict_attach(struct slab_table *st, const struct proto_table_spec *s)
{
	struct slab_ev_cfg c = {
		.policy = s->evict.policy,
		.max_rows = s->evict.max_rows,
		.ttl_s = s->evict.ttl_s,
		.admit_k = s->evict.admit_after,
	};
	int ret;

	if (!slab_ev_cfg_active(&c) || slab_ev_attached(st))
		return 0;
	ret = slab_ev_attach(st, &c);
	if (ret)
		return rs_seterr(ret, "table '%s': %s", s->name,
				 rs_errormsg());
	return 0;
}

/* May a cluster member sweep in epoch (q entered it)? It must be an
 * active member that holds all its ranges of that epoch (not copying
 * them in) and past the read lease's hold. */
static bool may_sweep(struct rs_server *s, const struct srv_repl_req *q,
		      uint64_t epoch)
{
	const struct srv_cfg *g = q->cfg;

	return atomic_load(&s->repl.ready) == epoch && !g->ngain &&
	       (!g->hold_until || rs_mono_ms() >= g->hold_until);
}

/*
 * One tick of table t's sweep on a cluster member, in epoch (read at the
 * tick's start): expire keys this node is the primary of, each one a
 * deletion forwarded to the key's backups (and joining members) in the
 * order of the node's writes, as a DELETE's is. false: the node left
 * the epoch or may not sweep now; the tick stops.
 */
static bool sweep_cluster(struct rs_server *s, struct srv_table *t,
			  uint64_t epoch)
{
	uint32_t width = t->spec.dim + t->state_floats;
	struct slab_ev_sink sink = { .cap = SRV_EV_SWEEP_SLOTS,
				     .accept = srv_repl_is_primary,
				     .defer_ttl = true };
	struct srv_repl_req q = { 0 };
	uint64_t *keys;
	float *zero;
	int ret = 0;

	/* as srv_repl_enter, without counting refusals: nobody asked */
	if (pthread_rwlock_tryrdlock(&s->repl.lock))
		return false;
	q.held = true;
	q.cfg = s->repl.cur;
	if (!q.cfg || q.cfg->c.epoch != epoch || q.cfg->self < 0 ||
	    !may_sweep(s, &q, epoch)) {
		srv_repl_exit(s, &q);
		return false;
	}
	keys = rs_malloc(SRV_EV_SWEEP_SLOTS * sizeof(*keys));
	zero = rs_calloc(width, sizeof(*zero));
	if (!keys || !zero) {
		free(keys);
		free(zero);
		srv_repl_exit(s, &q);
		return false;
	}
	sink.keys = keys;
	sink.arg = &q;
	pthread_mutex_lock(&s->repl.order);
	slab_ev_sink_set(&sink);
	(void)slab_ev_sweep(t->st, SRV_EV_SWEEP_SLOTS);
	slab_ev_sink_set(NULL);
	for (uint32_t i = 0; !ret && i < sink.n; i++)
		ret = srv_repl_record(s, &q, &t->spec, width, keys[i],
				      true, zero, NULL, PROTO_ST_OK);
	pthread_mutex_unlock(&s->repl.order);
	if (!ret && srv_repl_pending(&q))
		ret = srv_repl_wait(s, &q);
	/* gone here either way; a backup that did not take its deletions
	 * failed its chunk: they are sent again until it has them
	 * (srv_evict_resend.c) */
	slab_ev_count_ttl(t->st, sink.n);
	if (ret) {
		srv_evr_add(s, t->id, keys, sink.n);
		srv_warn_peer("eviction: table '%s': %u expired rows: the "
			     "backups did not acknowledge their deletion "
			     "(%s); resent later", t->spec.name, sink.n,
			     rs_strerror(ret));
	}
	srv_repl_exit(s, &q);
	free(keys);
	free(zero);
	return !ret;
}

static void sweep_all(void *arg)
{
	struct rs_server *s = arg;
	uint64_t epoch = s->repl.on ? atomic_load(&s->repl.epoch) : 0;
	bool go = !s->repl.on || epoch;

	/* first the deletions that did not reach a backup, so that they go
	 * out before more of the same kind */
	srv_evr_tick(s, epoch);
	for (uint32_t id = 0; id < SLAB_MAX_TABLES; id++) {
		struct srv_table *t;

		/* a writer as requests are, counted before the table is
		 * taken: never inside a checkpoint's freeze or a growth's
		 * copy, never on a table a growth retired (srv_grow.c) */
		atomic_fetch_add(&s->ckpt.writers, 1);
		t = srv_table_get(&s->tables, id);
		if (t && slab_ev_attached(t->st)) {
			slab_ev_tick(t->st);
			if (go && t->spec.evict.ttl_s &&
			    !atomic_load(&s->ckpt.frozen)) {
				if (!s->repl.on)
					(void)slab_ev_sweep(t->st,
							    SRV_EV_SWEEP_SLOTS);
				else
					go = sweep_cluster(s, t, epoch);
			}
		}
		srv_write_leave(s);
		if (t)
			srv_table_put(t);
	}
}

static int sweep_start(struct rs_server *s)
{
	if (s->evsweep.started)
		return 0;
	return srv_ticker_start(&s->evsweep, "rs-evict", SRV_EV_TICK_MS,
				sweep_all, s);
}

/* tables.admin held */
void srv_evict_want(struct rs_server *s)
{
	s->evict_want = true;
	if (s->evict_ready && sweep_start(s))
		srv_warn("warning: eviction: %s (TTLs and the access clock "
			"stand still)", rs_errormsg());
}

int srv_evict_start(struct rs_server *s)
{
	int ret = 0;

	srv_evr_init(s);
	pthread_mutex_lock(&s->tables.admin);
	s->evict_ready = true;
	if (s->evict_want)
		ret = sweep_start(s);
	pthread_mutex_unlock(&s->tables.admin);
	return ret;
}

void srv_evict_stop(struct rs_server *s)
{
	srv_ticker_stop(&s->evsweep);
	srv_evr_fini(s);
}

void srv_evict_counts(struct srv_table *t, struct srv_evict_counts *c)
{
	struct slab_ev_stats es;

	slab_ev_stats(t->st, &es);
	memset(c, 0, sizeof(*c));
	c->on = slab_ev_attached(t->st);
	c->policy = es.policy;
	c->max_rows = es.max_rows;
	c->ttl_s = es.ttl_s;
	c->admit_k = es.admit_k;
	c->evicted_capacity = es.evicted_capacity;
	c->evicted_ttl = es.evicted_ttl;
	c->admitted = es.admitted;
	c->not_admitted = es.not_admitted;
	c->over_cap = es.over_cap;
	c->init_served = atomic_load(&t->cnt.init_served_keys);
	c->unadmitted = atomic_load(&t->cnt.unadmitted_updates);
}
