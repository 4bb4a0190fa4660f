/*
 * route.h - where keys go in cluster mode (internal, cli_route_).
 *
 * A node in a cluster answers CONFIG with the configuration it follows
 * (docs/replication.md): an epoch, r, vnodes and the members (id, addr,
 * state), sorted by id. A route is what a client needs of it to place
 * keys: the ring of src/place/ring.c over the ids of the ACTIVE members
 * with the configuration's vnodes, whose owners are the client's node
 * indexes, so that the replica set of a key is
 * place_ring_successors(ring, place_ring_key_hash(key), out, r) in client node
 * indexes, primary first: exactly memb_replicas() of
 * src/coord/membership.c mapped through the member list
 * (tests/unit/test_client_route.c checks it).
 *
 * The client's nodes are slots that only ever grow (client_internal.h):
 * at open, the members of the configuration it learned then, in its
 * order; later, before a configuration is made the route, every ACTIVE
 * or JOINING member that no slot is (same id at the same address:
 * cli_route_grow()) gets the next slot (a JOINING one takes no keys,
 * but table creates and drops go to it: cli_route_table_nodes()). A member that moved (the same id
 * at another address: restarted elsewhere) is a new slot too; its old
 * slot stays as it was (never reused or changed while a route or a call
 * may point at it) and is simply not ACTIVE in the routes that follow.
 * Only when every slot is taken (CLI_MAX_NODES, the protocol's member
 * maximum: a cluster whose members moved that often) does a member stay
 * without one: it gets an owner number >= nknown and its keys fail with
 * RS_E_UNSUPPORTED ("no node slot left ... reopen the client";
 * cli_route_unknown()).
 *
 * A route is immutable once built; struct rs_client swaps routes whole
 * (client_internal.h says how readers are kept safe).
 */
#ifndef CLI_ROUTE_H
#define CLI_ROUTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "place/ring.h"

/* A configuration as the client keeps it (members malloc'ed). */
struct cli_config {
	uint64_t epoch;		/* 0: not a cluster */
	uint32_t r, vnodes;
	size_t n;
	struct proto_member *m;	/* n, the configuration's order */
	/* the read lease it came with: until this client monotonic ms a
	 * client may READ one-sidedly by it (0: the node could not vouch;
	 * docs/replication.md, "Read leases") */
	int64_t read_until;
	/* the answering node: its index in m (SIZE_MAX: none or not a
	 * member) and the epoch it said it is ready in (proto_config.ready:
	 * it holds all its ranges of it; 0: none) */
	size_t self;
	uint64_t ready;
};

struct cli_route {
	uint64_t epoch;
	unsigned r;		/* replicas per key, 1..PROTO_CONFIG_MAX_R */
	size_t nknown;		/* the client's nodes */
	struct place_ring *ring;	/* over the ACTIVE members' ids */
	bool *active;		/* [nknown]: the node is an ACTIVE member */
	size_t nactive;		/* of the known nodes */
	/* ACTIVE members without a slot (all taken): owner nknown + i */
	size_t nunknown;
	struct proto_member *unknown;
	bool *joining;		/* [nknown]: the node is a JOINING member */
	size_t njunknown;	/* JOINING members without a slot */
};

void cli_config_free(struct cli_config *cfg);
/* Keep in *best the one of *best and *got with the higher epoch (on a
 * tie the longer read lease); the other is freed, *got is left empty. */
void cli_config_keep_higher(struct cli_config *best, struct cli_config *got);

/* The slot of member m among known[0..nknown): the one with its id at its
 * address; nknown if none. */
size_t cli_route_find(const struct proto_member *known, size_t nknown,
		      const struct proto_member *m);

/*
 * Give the ACTIVE and JOINING members of cfg that have no slot in known[0..nknown) the
 * next slots, in cfg's order, while nknown < cap: copies them into
 * known[nknown..) and returns the new count. A configuration that
 * cli_route_new() refuses gives no slots.
 */
size_t cli_route_grow(const struct cli_config *cfg, struct proto_member *known,
		      size_t nknown, size_t cap);

/*
 * Build the route of cfg (epoch >= 1) for a client whose nodes are
 * known[0..nknown) (id and addr; state ignored). RS_E_PROTO when cfg
 * cannot be routed by (no ACTIVE member, r or vnodes out of range,
 * duplicate ids), -ENOMEM.
 */
int cli_route_new(struct cli_route **out, const struct cli_config *cfg,
		  const struct proto_member *known, size_t nknown);
void cli_route_free(struct cli_route **rt);

/* The replica set of key: owners (node indexes; >= nknown: no slot),
 * primary first; returns the count (min(r, ACTIVE members)). out holds
 * PROTO_CONFIG_MAX_R. */
unsigned cli_route_replicas(const struct cli_route *rt, uint64_t key,
			    unsigned *out);

/*
 * The replica a client READs key at (docs/replication.md, "Reads from any
 * replica"): the one at index mix(key, salt) % count of the key's set, a
 * choice that stays the same for one client while the set does (so a
 * client's reads of a key come from one replica, and different clients
 * spread one hot key over all of them); the primary when that replica
 * has no node slot below nn or ready[slot] is not the route's epoch (the
 * node has not said it holds its ranges of it). *primary: the key's
 * primary.
 */
unsigned cli_route_reader(const struct cli_route *rt, uint64_t key,
			  uint64_t salt, const _Atomic uint64_t *ready,
			  size_t nn, unsigned *primary);

/*
 * The same, away from the nodes a get should not READ at now: avoid[slot]
 * > now (rs_mono_ms) for a node whose READs or connection failed lately
 * (get.c). When the replica chosen above is one of them, the next member
 * of the key's set (in set order from it) that may be READ (the primary,
 * or a ready backup) and is not avoided, with *moved set; CLI_ROUTE_NONE
 * when there is none (the get asks the primary by RPC). avoid NULL: as
 * cli_route_reader().
 */
#define CLI_ROUTE_NONE UINT32_MAX
unsigned cli_route_reader_avoid(const struct cli_route *rt, uint64_t key,
				uint64_t salt, const _Atomic uint64_t *ready,
				size_t nn, unsigned *primary,
				const _Atomic int64_t *avoid, int64_t now,
				bool *moved);

/*
 * The nodes a table create or drop goes to in the route's epoch
 * (docs/replication.md, "Tables"): every member that holds or will hold
 * ranges in it, the ACTIVE ones first (in slot order), then the JOINING
 * ones (a joining node copies tables from the active ones: a drop must
 * reach it after them). Writes up to cap slots to out and returns how
 * many there are; RS_E_UNSUPPORTED (message set) when one of them has no
 * node slot (the change could not reach it).
 */
int cli_route_table_nodes(const struct cli_route *rt, unsigned *out,
			  size_t cap);

/* For an owner >= nknown (no slot was left for it): set the message and
 * return RS_E_UNSUPPORTED. */
int cli_route_unknown(const struct cli_route *rt, unsigned owner);

/* Whether a configuration of epoch `seen` may replace one of `have`:
 * only a higher epoch (a client never goes back). */
static inline bool cli_route_newer(uint64_t have, uint64_t seen)
{
	return seen > have;
}

#endif
