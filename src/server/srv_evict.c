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
 * locks as a client DELETE, one row at a time). In a replicated cluster
 * the sweep does not run (its deletions would not reach the backups);
 * rows whose TTL ran out there go when an insert needs room (see the
 * design document). Nor does it run while a checkpoint freezes writes:
 * it enters as a writer, as a request does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rs_internal.h"
#include "server/srv_internal.h"
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

static void sweep_all(void *arg)
{
	struct rs_server *s = arg;

	for (uint32_t id = 0; id < SLAB_MAX_TABLES; id++) {
		struct srv_table *t = srv_table_get(&s->tables, id);

		if (!t)
			continue;
		if (slab_ev_attached(t->st)) {
			slab_ev_tick(t->st);
			/* a writer as requests are: never inside a
			 * checkpoint's freeze (srv_write_enter's order) */
			atomic_fetch_add(&s->ckpt.writers, 1);
			if (!s->repl.on && !atomic_load(&s->ckpt.frozen))
				(void)slab_ev_sweep(t->st, SRV_EV_SWEEP_SLOTS);
			srv_write_leave(s);
		}
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
		srv_log("warning: eviction: %s (TTLs and the access clock "
			"stand still)", rs_errormsg());
}

int srv_evict_start(struct rs_server *s)
{
	int ret = 0;

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
