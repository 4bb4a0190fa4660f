/*
 * route.c - a configuration as a placement of keys on the client's nodes
 * (see route.h). Pure: no I/O, no clock, no shared state.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/route.h"
#include "common/rs_internal.h"

void cli_config_free(struct cli_config *cfg)
{
	free(cfg->m);
	memset(cfg, 0, sizeof(*cfg));
}

void cli_config_keep_higher(struct cli_config *best, struct cli_config *got)
{
	if (cli_route_newer(best->epoch, got->epoch) ||
	    (best->epoch == got->epoch && got->read_until > best->read_until)) {
		cli_config_free(best);
		*best = *got;
		memset(got, 0, sizeof(*got));
	} else {
		cli_config_free(got);
	}
}

void cli_route_free(struct cli_route **rt)
{
	if (!rt || !*rt)
		return;
	place_ring_delete(&(*rt)->ring);
	free((*rt)->active);
	free((*rt)->joining);
	free((*rt)->unknown);
	free(*rt);
	*rt = NULL;
}

/* Members sorted by id, ids distinct (what the nodes send: checked,
 * since the ring's tie-break and the id mapping rely on it). */
static int check_config(const struct cli_config *cfg)
{
	if (cfg->epoch == 0)
		return rs_seterr(RS_E_PROTO, "configuration: epoch 0 is not "
				 "a cluster's");
	if (cfg->r < 1 || cfg->r > PROTO_CONFIG_MAX_R)
		return rs_seterr(RS_E_PROTO, "configuration %llu: r %u not in "
				 "1..%u", (unsigned long long)cfg->epoch,
				 cfg->r, PROTO_CONFIG_MAX_R);
	if (cfg->vnodes < 1 || cfg->vnodes > PLACE_RING_MAX_VNODES)
		return rs_seterr(RS_E_PROTO, "configuration %llu: vnodes %u "
				 "not in 1..%u", (unsigned long long)cfg->epoch,
				 cfg->vnodes, PLACE_RING_MAX_VNODES);
	if (cfg->n > PROTO_CONFIG_MAX_MEMBERS || cfg->n > PLACE_RING_MAX_NODES)
		return rs_seterr(RS_E_PROTO, "configuration %llu: %zu members",
				 (unsigned long long)cfg->epoch, cfg->n);
	for (size_t i = 1; i < cfg->n; i++)
		if (strcmp(cfg->m[i - 1].id, cfg->m[i].id) >= 0)
			return rs_seterr(RS_E_PROTO, "configuration %llu: "
					 "member ids not sorted and distinct "
					 "('%s', '%s')",
					 (unsigned long long)cfg->epoch,
					 cfg->m[i - 1].id, cfg->m[i].id);
	return 0;
}

size_t cli_route_find(const struct proto_member *known, size_t nknown,
		      const struct proto_member *m)
{
	for (size_t k = 0; k < nknown; k++)
		if (!strcmp(known[k].id, m->id) &&
		    !strcmp(known[k].addr, m->addr))
			return k;
	return nknown;
}

size_t cli_route_grow(const struct cli_config *cfg, struct proto_member *known,
		      size_t nknown, size_t cap)
{
	if (check_config(cfg))
		return nknown; /* cli_route_new() refuses it: no slots */
	for (size_t i = 0; i < cfg->n && nknown < cap; i++) {
		const struct proto_member *m = &cfg->m[i];

		if ((m->state == PROTO_MEMBER_ACTIVE ||
		     m->state == PROTO_MEMBER_JOINING) &&
		    cli_route_find(known, nknown, m) == nknown)
			known[nknown++] = *m;
	}
	return nknown;
}

int cli_route_new(struct cli_route **out, const struct cli_config *cfg,
		  const struct proto_member *known, size_t nknown)
{
	struct cli_route *rt;
	const char **names = NULL;
	unsigned *owner = NULL;
	size_t nact = 0;
	int ret;

	*out = NULL;
	ret = check_config(cfg);
	if (ret)
		return ret;
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return rs_seterr(-ENOMEM, "route: out of memory");
	rt->epoch = cfg->epoch;
	rt->r = cfg->r;
	rt->nknown = nknown;
	rt->active = calloc(nknown ? nknown : 1, sizeof(*rt->active));
	rt->joining = calloc(nknown ? nknown : 1, sizeof(*rt->joining));
	names = calloc(cfg->n ? cfg->n : 1, sizeof(*names));
	owner = calloc(cfg->n ? cfg->n : 1, sizeof(*owner));
	rt->unknown = calloc(cfg->n ? cfg->n : 1, sizeof(*rt->unknown));
	if (!rt->active || !rt->joining || !names || !owner ||
	    !rt->unknown) {
		ret = rs_seterr(-ENOMEM, "route: out of memory");
		goto out;
	}
	for (size_t i = 0; i < cfg->n; i++) {
		const struct proto_member *m = &cfg->m[i];
		size_t k;

		if (m->state == PROTO_MEMBER_JOINING) {
			k = cli_route_find(known, nknown, m);
			if (k < nknown)
				rt->joining[k] = true;
			else
				rt->njunknown++;
		}
		if (m->state != PROTO_MEMBER_ACTIVE)
			continue;
		k = cli_route_find(known, nknown, m);
		if (k < nknown) {
			rt->active[k] = true;
			rt->nactive++;
		} else {
			k = nknown + rt->nunknown;
			rt->unknown[rt->nunknown++] = *m;
		}
		names[nact] = m->id;
		owner[nact++] = (unsigned)k;
	}
	if (!nact) {
		ret = rs_seterr(RS_E_PROTO, "configuration %llu has no "
				"active member",
				(unsigned long long)cfg->epoch);
		goto out;
	}
	ret = place_ring_new_owned(&rt->ring, names, owner, nact, cfg->vnodes);
	if (ret == RS_E_INVAL)
		ret = RS_E_PROTO; /* the message says what */
out:
	free(names);
	free(owner);
	if (ret)
		cli_route_free(&rt);
	*out = rt;
	return ret;
}

unsigned cli_route_replicas(const struct cli_route *rt, uint64_t key,
			    unsigned *out)
{
	return place_ring_successors(rt->ring, place_ring_key_hash(key), out,
				     rt->r);
}

/* Whether a get may READ key's set member b (at index i of the set). */
static bool may_read(const struct cli_route *rt, unsigned b, unsigned i,
		     const _Atomic uint64_t *ready, size_t nn)
{
	if (!i)
		return true;	/* the primary */
	if (b >= nn || b >= rt->nknown)
		return false;
	return atomic_load_explicit(&ready[b], memory_order_relaxed) ==
	       rt->epoch;
}

unsigned cli_route_reader_avoid(const struct cli_route *rt, uint64_t key,
				uint64_t salt, const _Atomic uint64_t *ready,
				size_t nn, unsigned *primary,
				const _Atomic int64_t *avoid, int64_t now,
				bool *moved)
{
	unsigned set[PROTO_CONFIG_MAX_R], cnt, i = 0;
	uint64_t x;

	*moved = false;
	cnt = cli_route_replicas(rt, key, set);
	*primary = set[0];
	if (cnt >= 2) {
		/* splitmix64's finaliser: independent of the ring's hash */
		x = key ^ salt;
		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
		x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
		x ^= x >> 31;
		i = (unsigned)(x % cnt);
		if (!may_read(rt, set[i], i, ready, nn))
			i = 0;
	}
	if (!avoid || set[i] >= nn ||
	    atomic_load_explicit(&avoid[set[i]], memory_order_relaxed) <= now)
		return set[i];
	for (unsigned j = 1; j < cnt; j++) {
		unsigned k = (i + j) % cnt, b = set[k];

		if (may_read(rt, b, k, ready, nn) && b < nn &&
		    atomic_load_explicit(&avoid[b], memory_order_relaxed) <=
			    now) {
			*moved = true;
			return b;
		}
	}
	return CLI_ROUTE_NONE;
}

unsigned cli_route_reader(const struct cli_route *rt, uint64_t key,
			  uint64_t salt, const _Atomic uint64_t *ready,
			  size_t nn, unsigned *primary)
{
	bool moved;

	return cli_route_reader_avoid(rt, key, salt, ready, nn, primary,
				      NULL, 0, &moved);
}

int cli_route_table_nodes(const struct cli_route *rt, unsigned *out,
			  size_t cap)
{
	size_t n = 0;

	if (rt->nunknown || rt->njunknown)
		return rs_seterr(RS_E_UNSUPPORTED, "configuration %llu: %zu "
				 "member%s without a node slot (all %zu are "
				 "taken): a table create or drop cannot reach "
				 "every member; reopen the client",
				 (unsigned long long)rt->epoch,
				 rt->nunknown + rt->njunknown,
				 rt->nunknown + rt->njunknown == 1 ? "" : "s",
				 rt->nknown);
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < rt->nknown; k++)
			if (pass ? rt->joining[k] : rt->active[k]) {
				if (n < cap)
					out[n] = (unsigned)k;
				n++;
			}
	return (int)n;
}

int cli_route_unknown(const struct cli_route *rt, unsigned owner)
{
	const struct proto_member *m;

	if (owner < rt->nknown || owner - rt->nknown >= rt->nunknown)
		return rs_seterr(RS_E_UNSUPPORTED, "node %u: no such node in "
				 "configuration %llu", owner,
				 (unsigned long long)rt->epoch);
	m = &rt->unknown[owner - rt->nknown];
	return rs_seterr(RS_E_UNSUPPORTED, "node %s (%s) of configuration "
			 "%llu has no node slot: all %zu are taken (members "
			 "that joined or moved since the client opened): "
			 "reopen the client", m->id, m->addr,
			 (unsigned long long)rt->epoch, rt->nknown);
}
