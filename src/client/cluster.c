/*
 * cluster.c - cluster mode: learning the configuration from the memory
 * nodes at open and following its changes (docs/client.md, "Cluster
 * mode"; the state and its locking: struct rs_client in
 * client_internal.h; placement: route.h).
 *
 * Open. The configured nodes (already nodes[]) are seeds: the first that
 * answers CONFIG within CLI_CONFIG_WAIT_MS decides (a stopped seed is
 * given up then; none within it: each again with the whole timeout).
 * Epoch 0: static mode, untouched. Epoch >= 1: nodes[] becomes the
 * members, the seeds move to seeds[] (their contexts closed: a refresh
 * reconnects one only when no member answers), and every ACTIVE member
 * is connected, within CLI_CONFIG_WAIT_MS each (one that is not is left
 * to connect when a call needs it; a DOWN or JOINING one is not
 * contacted).
 *
 * A refresh round asks ACTIVE members of the current route, starting one
 * further along each round and the node that just failed last, until
 * CLI_CONFIG_ASK of them answered or one answered with a higher epoch;
 * the seeds only when no member answered. The highest epoch seen replaces
 * the route if it is higher than the client's (never lower). Before it
 * does, every ACTIVE member of it that no node slot of the client is (it
 * joined, or moved to another address, since the client opened) gets the
 * next free slot (grow(); client_internal.h, route.h); its contexts
 * connect when a call first needs one.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/addr.h"
#include "common/rs_internal.h"

/* Members a round hears from at most (they follow etcd's configuration
 * within a round trip of each other: a few suffice). */
#define CLI_CONFIG_ASK 3
/* How long a round waits for one member's answer (at most the client's
 * timeout): a member that is stopped (its NIC still takes the request)
 * must not hold up the round, and every get waiting for the read lease,
 * for a whole request timeout; the next member is asked instead. */
#define CLI_CONFIG_WAIT_MS 1000u
/* How long a call waits for a new connection to a member (and its
 * hello): a member that is stopped or cut off (its NIC takes the request,
 * its process never accepts it) must not hold a get or a write for a
 * whole request timeout per attempt; the call goes on to the key's other
 * replica or, after a refresh, its new primary. Far above a connection's
 * set-up time, even in an emulated guest under a sanitizer. */
#define CLI_MEMBER_CONNECT_MS 3000u

bool cli_conn_error(int code)
{
	switch (code) {
	case RS_E_DISCONNECTED:
	case RS_E_TIMEOUT:
	case RS_E_VERBS:
	case -ECONNREFUSED:
	case -ECONNABORTED:
	case -ECONNRESET:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ETIMEDOUT:
		return true;
	default:
		return false;
	}
}

size_t cli_active_nodes(struct rs_client *c, bool *active, size_t n)
{
	const struct cli_route *rt;
	size_t nact = 0;

	if (!c->cluster) {
		for (size_t i = 0; i < n; i++)
			active[i] = true;
		return n;
	}
	rt = cli_route_hold(c);
	for (size_t i = 0; i < n; i++) {
		/* a node the route does not know yet: not taking part */
		active[i] = i < rt->nknown && rt->active[i];
		nact += active[i];
	}
	cli_route_drop(c);
	return nact;
}

int cli_table_nodes(struct rs_client *c, unsigned **out, size_t *n,
		    uint64_t *epoch)
{
	const struct cli_route *rt;
	unsigned *v;
	int cnt;

	*out = NULL;
	*n = 0;
	*epoch = 0;
	if (!c->cluster) {
		size_t nn = cli_nnodes(c);

		if (!(v = calloc(nn ? nn : 1, sizeof(*v))))
			return rs_seterr(-ENOMEM, "table: out of memory");
		for (size_t i = 0; i < nn; i++)
			v[i] = (unsigned)i;
		*out = v;
		*n = nn;
		return 0;
	}
	rt = cli_route_hold(c);
	cnt = cli_route_table_nodes(rt, NULL, 0);
	v = cnt < 0 ? NULL : calloc(cnt ? (size_t)cnt : 1, sizeof(*v));
	if (v) {
		cli_route_table_nodes(rt, v, (size_t)cnt);
		*epoch = rt->epoch;
	}
	cli_route_drop(c);
	if (cnt < 0)
		return cnt;
	if (!v)
		return rs_seterr(-ENOMEM, "table: out of memory");
	*out = v;
	*n = (size_t)cnt;
	return 0;
}

static int config_round(struct rs_client *c, size_t avoid);

static bool timed_out(int ret)
{
	return ret == RS_E_TIMEOUT || ret == -ETIMEDOUT;
}

/* CONFIG of node n waiting at most wait_ms for its answer, and for a
 * connection if one must be set up (0: the node's timeout). A member
 * asked in a lease-renewal round is bounded like a seed: after a call to
 * a stopped member timed out its context is closed, and the next round
 * connects again (its NIC takes the request, its process never accepts
 * it). */
static int ask_wait(struct rs_client *c, struct cli_node *n,
		    unsigned wait_ms, struct cli_config *out)
{
	bool cut = wait_ms && wait_ms < n->timeout_ms;
	int ret;

	ret = cli_wire_config(n, out, wait_ms);
	if (cut && timed_out(ret))
		CLI_INC(c, config_waits_cut, 1);
	return ret;
}

/* Ask the seeds in order, each for at most CLI_CONFIG_WAIT_MS: the first
 * answer. When none answered but some ran out of that time (slow, not
 * gone), once more with the whole timeout each. */
static int ask_seeds(struct rs_client *c, struct cli_config *out)
{
	bool slow = false;
	int first = 0;

	for (unsigned pass = 0; pass < 2 && (!pass || slow); pass++)
		for (size_t i = 0; i < c->nnodes; i++) {
			int ret = ask_wait(c, &c->nodes[i],
					   pass ? 0 : CLI_CONFIG_WAIT_MS, out);

			if (!ret)
				return 0;
			slow |= timed_out(ret);
			if (!first)
				first = ret;
		}
	return first ? first : rs_seterr(RS_E_INVAL, "client: no seed");
}

static int node_init(struct rs_client *c, struct cli_node *n, size_t idx,
		     const char *addr, unsigned conns)
{
	int ret;

	memset(n, 0, sizeof(*n));
	n->idx = (unsigned)idx;
	n->dev = c->dev;
	n->timeout_ms = c->cfg.timeout_ms;
	n->connect_ms = CLI_MEMBER_CONNECT_MS;
	n->spin_us = c->cfg.spin_us;
	n->key = c->cfg.key;
	n->name = strdup(addr);
	if (!n->name)
		return rs_seterr(-ENOMEM, "client: out of memory");
	ret = rs_addr_parse("node", n->name, 0, false, n->host,
			    sizeof(n->host), &n->port);
	if (!ret)
		ret = cli_pool_init(&n->pool, conns);
	if (ret) {
		free(n->name);
		n->name = NULL;
	}
	return ret;
}

/* Seeds: close their contexts (a refresh reconnects one if needed), one
 * context each from now on. */
static int seeds_park(struct rs_client *c)
{
	for (size_t i = 0; i < c->nseeds; i++) {
		cli_pool_destroy(&c->seeds[i].pool);
		if (cli_pool_init(&c->seeds[i].pool, 1)) {
			/* close destroys the pools before i only */
			for (size_t j = i + 1; j < c->nseeds; j++)
				cli_pool_destroy(&c->seeds[j].pool);
			c->nseeds = i;
			return rs_seterr(-ENOMEM, "client: pool");
		}
	}
	return 0;
}

/* Exactly-once writes: the client's id, random and non-zero (the nodes
 * key their completion records by it; a reopened client is a new one). */
static int client_id_new(struct rs_client *c)
{
	return rs_random_id(&c->client_id);
}

static int cluster_init(struct rs_client *c, const struct cli_config *cfg)
{
	size_t connected = 0;
	int ret;

	ret = client_id_new(c);
	if (ret)
		return ret;

	if (cfg->n > CLI_MAX_NODES)
		return rs_seterr(RS_E_PROTO, "configuration %llu: %zu members",
				 (unsigned long long)cfg->epoch, cfg->n);
	c->seeds = c->nodes;
	c->nseeds = c->nnodes;
	c->nodes = NULL;
	c->nnodes = 0;
	c->cluster = true; /* from here close frees names and seeds */
	place_ring_delete(&c->ring); /* the static ring: unused now */
	ret = seeds_park(c);
	if (ret)
		return ret;
	/* every slot the client may ever use, once (client_internal.h) */
	c->nodes = calloc(CLI_MAX_NODES, sizeof(*c->nodes));
	c->known = calloc(CLI_MAX_NODES, sizeof(*c->known));
	c->ready = calloc(CLI_MAX_NODES, sizeof(*c->ready));
	c->avoid = calloc(CLI_MAX_NODES, sizeof(*c->avoid));
	if (!c->nodes || !c->known || !c->ready || !c->avoid)
		return rs_seterr(-ENOMEM, "client: out of memory");
	for (size_t i = 0; i < cfg->n; i++) {
		ret = node_init(c, &c->nodes[i], i, cfg->m[i].addr,
				c->cfg.conns_per_node);
		if (ret)
			return ret;
		c->known[i] = cfg->m[i];
		c->nnodes++;
	}
	ret = cli_route_new(&c->route, cfg, c->known, c->nnodes);
	if (ret)
		return ret;
	atomic_store(&c->epoch, cfg->epoch);
	atomic_store(&c->read_until, cfg->read_until);
	/* every ACTIVE member connected now, each within the wait of a
	 * CONFIG ask: one that is stopped or slow is left to connect when a
	 * call first needs it (the open fails when none connects) */
	for (size_t i = 0; i < c->nnodes; i++) {
		struct cli_conn *cc;
		int r;

		if (!c->route->active[i])
			continue;
		r = cli_conn_get_within(&c->nodes[i], &cc, CLI_CONFIG_WAIT_MS);
		if (!r) {
			cli_conn_put(cc);
			connected++;
		} else if (!cli_conn_error(r)) {
			return r;
		} else if (!ret) {
			ret = r;
		}
	}
	if (!connected && ret)
		return ret;
	/* one round now: which members are ready for replica reads */
	pthread_mutex_lock(&c->refresh_lock);
	(void)config_round(c, SIZE_MAX);
	pthread_mutex_unlock(&c->refresh_lock);
	return 0;
}

int cli_cluster_open(struct rs_client *c)
{
	struct cli_config cfg;
	int ret = ask_seeds(c, &cfg);

	if (ret)
		return ret;
	if (cfg.epoch)
		ret = cluster_init(c, &cfg);
	cli_config_free(&cfg);
	return ret;
}

void cli_cluster_close(struct rs_client *c)
{
	if (!c->cluster)
		return;
	for (size_t i = 0; i < c->nnodes; i++)
		free(c->nodes[i].name);
	for (size_t i = 0; i < c->nseeds; i++)
		cli_pool_destroy(&c->seeds[i].pool);
	free(c->seeds);	/* seed names are the config's */
	free(c->known);
	free(c->ready);
	free(c->avoid);
	cli_route_free(&c->route);
}

/* Give the ACTIVE members of cfg that no slot is (they joined, or moved
 * to another address, since the client opened) the next free slots, and
 * publish them (refresh_lock held: only we change nodes[] and known[]).
 * A slot whose node cannot be set up (its address does not parse, no
 * memory) ends the growth here: it and the members after it stay without
 * a slot in this route, their keys fail, and the next refresh tries
 * again. */
static void grow(struct rs_client *c, const struct cli_config *cfg)
{
	size_t have = c->nnodes, n;

	n = cli_route_grow(cfg, c->known, have, CLI_MAX_NODES);
	for (size_t i = have; i < n; i++)
		if (node_init(c, &c->nodes[i], i, c->known[i].addr,
			      c->cfg.conns_per_node)) {
			n = i;
			break;
		}
	/* the slots are complete before a reader can see the count */
	if (n > have)
		atomic_store_explicit(&c->nnodes, n, memory_order_release);
}

/* Make cfg the route (its epoch is higher: checked by the caller). */
static int adopt(struct rs_client *c, const struct cli_config *cfg)
{
	struct cli_route *rt, *old;
	int ret;

	grow(c, cfg);
	ret = cli_route_new(&rt, cfg, c->known, c->nnodes);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&c->route_lock);
	old = c->route;
	c->route = rt;
	atomic_store(&c->epoch, rt->epoch);
	pthread_rwlock_unlock(&c->route_lock);
	cli_route_free(&old);
	return 0;
}

void cli_node_avoid(struct rs_client *c, size_t slot)
{
	int64_t until, max;

	if (!c->avoid || slot >= CLI_MAX_NODES)
		return;
	until = (int64_t)rs_mono_ms() + CLI_AVOID_MS;
	atomic_store_explicit(&c->avoid[slot], until, memory_order_relaxed);
	max = atomic_load_explicit(&c->avoid_max, memory_order_relaxed);
	while (max < until &&
	       !atomic_compare_exchange_weak(&c->avoid_max, &max, until))
		;
}

/* Ask node slot i (SIZE_MAX: a seed); note the epoch it is ready in
 * when it is the member the slot is; keep the higher of its answer and
 * *best. 0 if it answered. A member that does not answer in time (its
 * connection failed, or it is stopped: its NIC still takes requests) is
 * avoided by gets as after a failed READ. */
static int ask(struct rs_client *c, struct cli_node *n, size_t i,
	       struct cli_config *best)
{
	struct cli_config got;
	int ret = ask_wait(c, n, CLI_CONFIG_WAIT_MS, &got);

	if (ret && i < CLI_MAX_NODES && cli_conn_error(ret))
		cli_node_avoid(c, i);
	if (ret)
		return ret;
	if (i < CLI_MAX_NODES && got.self < got.n &&
	    !strcmp(got.m[got.self].id, c->known[i].id))
		atomic_store_explicit(&c->ready[i], got.ready,
				      memory_order_relaxed);
	cli_config_keep_higher(best, &got);
	return 0;
}

/* One round (refresh_lock held: the route is ours to read). */
static int config_round(struct rs_client *c, size_t avoid)
{
	const struct cli_route *rt = c->route;
	struct cli_config best = { 0 };
	size_t nn = rt->nknown, answered = 0, start = c->ask_next % nn;
	int ret, last = RS_E_DISCONNECTED;

	rs_seterr(last, "cluster: no node answered CONFIG");
	c->ask_next = (start + 1) % nn;
	for (size_t k = 0; k < nn && answered < CLI_CONFIG_ASK &&
			   best.epoch <= rt->epoch; k++) {
		size_t i = (start + k) % nn;

		if (!rt->active[i] || i == avoid)
			continue;
		ret = ask(c, &c->nodes[i], i, &best);
		if (ret)
			last = ret;
		else
			answered++;
	}
	if (!answered && avoid < nn && rt->active[avoid]) {
		ret = ask(c, &c->nodes[avoid], avoid, &best);
		if (ret)
			last = ret;
		else
			answered++;
	}
	for (size_t i = 0; !answered && i < c->nseeds; i++) {
		ret = ask(c, &c->seeds[i], SIZE_MAX, &best);
		if (ret)
			last = ret;
		else
			answered++;
	}
	CLI_INC(c, config_refreshes, 1);
	ret = answered ? 0 : last;
	if (answered && cli_route_newer(rt->epoch, best.epoch)) {
		ret = adopt(c, &best);
		if (!ret)
			atomic_store(&c->read_until, best.read_until);
	} else if (answered && best.epoch == rt->epoch &&
		   best.read_until > atomic_load(&c->read_until)) {
		atomic_store(&c->read_until, best.read_until);
	}
	cli_config_free(&best);
	return ret;
}

bool cli_cluster_can_read(struct rs_client *c)
{
	if ((int64_t)rs_mono_ms() < atomic_load(&c->read_until))
		return true;
	(void)cli_cluster_refresh(c, atomic_load(&c->epoch), SIZE_MAX);
	return (int64_t)rs_mono_ms() < atomic_load(&c->read_until);
}

int cli_cluster_refresh(struct rs_client *c, uint64_t seen, size_t avoid)
{
	uint64_t rounds = atomic_load(&c->refresh_rounds);
	int ret = 0;

	pthread_mutex_lock(&c->refresh_lock);
	/* Another thread adopted a newer configuration, or finished a
	 * round while we waited for the lock: use its result. */
	if (atomic_load(&c->epoch) == seen &&
	    atomic_load(&c->refresh_rounds) == rounds) {
		ret = config_round(c, avoid);
		atomic_fetch_add(&c->refresh_rounds, 1);
	}
	pthread_mutex_unlock(&c->refresh_lock);
	return ret;
}
