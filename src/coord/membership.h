/*
 * membership.h - cluster membership and configuration on top of the
 * coordination store (internal, prefix memb_). Design and the protocol it
 * prepares: docs/replication.md.
 *
 * Keys, under /recstore/<cluster>/:
 *   nodes/<id>  a node's registration, {"addr": "ip:port", "inc": "hex"},
 *               attached to a lease the node keeps alive: it disappears
 *               when the node dies or is cut off longer than the TTL.
 *               "inc" (incarnation) is random per process start: the same
 *               id with another inc is a restarted node whose memory is
 *               empty, not the member the configuration knows.
 *   config      the configuration, JSON (memb_config_format), written only
 *               by compare-and-swap on its mod_revision, the epoch one
 *               higher at every change.
 *   recovery/<id>  only after a restore of the store from an older
 *               snapshot: the configuration node <id> follows, on its
 *               lease (memb_recover()).
 *   decider     the id of the one node that runs memb_decide(),
 *               attached to that node's lease (taken by create-if-absent).
 *               The CAS on config keeps two deciders safe anyway; the key
 *               only keeps them from racing.
 *
 * memb_reconfigure() is the pure function from (current configuration,
 * live registrations, policy) to the next configuration: deterministic
 * (independent of the order of registrations), no I/O, no clock.
 *
 * Placement: replica sets are not stored; they are a function of the
 * configuration. The ring of ring.h (XXH3 points, `vnodes` per node) is
 * built over the ids of the ACTIVE members; the replica set of a key is
 * the successor list of its hash: the r distinct active members met
 * walking clockwise from it, the first one the primary. A member that
 * leaves the active set leaves every successor list it was in, the ones
 * behind it move up one (its primary ranges go to the next successor) and
 * one new member is appended at the tail; nothing else moves. Storing the
 * ranges would cost members x vnodes entries per configuration (160,000
 * for 1,000 nodes, beyond etcd's 1.5 MiB request limit) and could
 * disagree with the ring; the ring is exact and every party computes the
 * same one from the same members.
 */
#ifndef RS_COORD_MEMBERSHIP_H
#define RS_COORD_MEMBERSHIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord/coord.h"

#define MEMB_ID_MAX 63		/* [A-Za-z0-9_.-] */
#define MEMB_CLUSTER_MAX 63
#define MEMB_ADDR_MAX 127
#define MEMB_MAX_NODES 1024	/* PLACE_RING_MAX_NODES */
#define MEMB_MAX_R 5
#define MEMB_DEFAULT_R 3
#define MEMB_DEFAULT_VNODES 160
#define MEMB_MAX_VNODES 1024

enum memb_state {
	MEMB_ACTIVE = 0,	/* in the replica sets */
	MEMB_JOINING = 1,	/* registered, not yet in the replica sets */
	MEMB_DOWN = 2,		/* registration gone: out of the replica sets */
	/* drained (docs/replication.md, "Removing a node"): still in the
	 * active ring (it serves and leads its ranges) but out of the target
	 * ring, so that the members taking its place copy its ranges; DOWN
	 * once every member of the target ring synced */
	MEMB_LEAVING = 3,
};

/* In the active ring: serves reads, leads its primary ranges. */
static inline bool memb_serves(enum memb_state s)
{
	return s == MEMB_ACTIVE || s == MEMB_LEAVING;
}

/* In the target ring: the replica sets after joins and drains finish. */
static inline bool memb_targeted(enum memb_state s)
{
	return s == MEMB_ACTIVE || s == MEMB_JOINING;
}

struct memb_member {
	char id[MEMB_ID_MAX + 1];
	char addr[MEMB_ADDR_MAX + 1];
	uint64_t inc;		/* incarnation of the registration */
	enum memb_state state;
	uint64_t since;		/* epoch of the last state change */
};

struct memb_config {
	uint64_t epoch;		/* 0: none yet */
	unsigned r;		/* replicas per key */
	unsigned vnodes;	/* ring points per member */
	size_t n;
	struct memb_member *m;	/* n, sorted by id, ids distinct */
	/* Written only by memb_recover() (0 otherwise, and never carried
	 * into the next configuration): the highest epoch a live node
	 * followed when the store was found restored from an older
	 * snapshot. A node that saw the store go back follows no
	 * configuration until one with recovered >= the epoch it follows
	 * (docs/replication.md, "A store restored from a snapshot"). JSON
	 * field "recovered", absent when 0. */
	uint64_t recovered;
};

/* A live registration (nodes/<id>). */
struct memb_reg {
	char id[MEMB_ID_MAX + 1];
	char addr[MEMB_ADDR_MAX + 1];
	uint64_t inc;
	/* The epoch in which this node finished copying the ranges of its
	 * target sets (docs/replication.md, "Copying ranges"): published by
	 * a JOINING node, and by every member while one is LEAVING; 0: not
	 * yet. */
	uint64_t synced;
	/* An operator asked to drain this incarnation (the key drains
	 * names its inc under its id, in either form; memb_read_regs()
	 * sets it). */
	bool drain;
	/* Published only by a node that found the store's configuration
	 * older than the one it follows (a restore from a snapshot): the
	 * epoch it follows. No decider writes a configuration while a
	 * registration says a node follows a newer one than the store's.
	 * 0: none. */
	uint64_t seen;
};

/* A member by id and incarnation. */
struct memb_ref {
	char id[MEMB_ID_MAX + 1];
	uint64_t inc;
};

struct memb_policy {
	unsigned r;		/* for a new configuration; 1..MEMB_MAX_R */
	unsigned vnodes;	/* for a new configuration */
	/* true makes a joining node active in the same step (with r = 1,
	 * where there is no copy to make); false leaves it JOINING until
	 * its registration says it copied its ranges in the current epoch
	 * (synced). A first configuration makes every registered node
	 * active either way. */
	bool activate_joiners;
	/* No first configuration until this many nodes registered (an
	 * initial cluster: nodes that start together all hold their share
	 * from the start); 0 or 1: the first registration suffices. */
	unsigned first_members;
	/*
	 * The last complete holder (docs/replication.md, "The last complete
	 * holder"): a serving member whose registration is gone (not one
	 * registered again with another incarnation: that one's memory is
	 * empty) stays in its state while a range of the active ring it is
	 * in has no other member that is registered with its own
	 * incarnation and synced in the current epoch (holds all its
	 * ranges of it). Its keys are unavailable rather than lost: a lease
	 * that lapsed under load, not a death, costs no row. false: such a
	 * member goes down at once, whatever it held.
	 */
	bool keep_last;
	/* Members that go down even so (an operator's forced drain of a
	 * member that is gone, or the decider's keep timeout): by id and
	 * incarnation. memb_decide() adds those the key drains marks as
	 * drained by force while gone; an ordinary drain request is none. */
	const struct memb_ref *forget;
	size_t nforget;
	/* Called by memb_reconfigure() for each member it keeps that way,
	 * with the number of ranges no other member holds; NULL: none. */
	void (*on_kept)(void *arg, const struct memb_member *m,
			size_t ranges);
	void *kept_arg;
};

const char *memb_state_name(enum memb_state s);
int memb_check_id(const char *what, const char *id);

void memb_config_free(struct memb_config *c);
int memb_config_copy(struct memb_config *dst, const struct memb_config *src);
/* Same epoch, r, vnodes and members (ids, addresses, incarnations,
 * states, since). */
bool memb_config_same(const struct memb_config *a,
		      const struct memb_config *b);
/* Whether the store's configuration cur is older than followed, the one
 * a node follows: a lower epoch, or the same epoch with other contents
 * (a decider wrote that epoch again from an older configuration). Only a
 * restore of the store from an older snapshot does that. */
bool memb_config_regressed(const struct memb_config *cur,
			   const struct memb_config *followed);
/* JSON text; *out is malloc'ed, NUL-terminated. */
int memb_config_format(const struct memb_config *c, char **out, size_t *len);
/* Strict: RS_E_CORRUPT with the field for anything unexpected. */
int memb_config_parse(const char *json, size_t len, struct memb_config *out);

int memb_reg_format(const struct memb_reg *r, char **out, size_t *len);
/* id comes from the key, the rest from the value. */
int memb_reg_parse(const char *id, const char *json, size_t len,
		   struct memb_reg *out);

/*
 * The next configuration. cur: the current one (epoch 0, n 0: none yet);
 * regs: the live registrations, any order, distinct ids. Rules:
 *   - a member without a registration, or whose registration has another
 *     incarnation (it restarted), becomes DOWN; with keep_last, a serving
 *     member without a registration that may be the last complete holder
 *     of a range stays as it is, unless forget names it;
 *   - a registration that is not a member, or a DOWN member registered
 *     again, joins: ACTIVE in a first configuration or with
 *     activate_joiners, JOINING otherwise (a restarted node both leaves and
 *     joins in one step);
 *   - a JOINING member whose registration (same incarnation) says it
 *     synced in cur's epoch becomes ACTIVE;
 *   - drain (docs/replication.md, "Removing a node"): an ACTIVE member
 *     whose registration carries a drain request becomes LEAVING, unless
 *     no ACTIVE member without one would be left; a LEAVING member whose
 *     request is gone becomes ACTIVE again; a LEAVING member becomes DOWN
 *     once every ACTIVE and JOINING member of cur is registered (same
 *     incarnation) with synced equal to cur's epoch; a drained
 *     incarnation does not join again;
 *   - addresses follow the registrations;
 *   - r and vnodes come from cur, or from the policy for the first one;
 *   - with MEMB_MAX_NODES members, DOWN members with the oldest `since`
 *     are forgotten to make room; registrations beyond that are left out
 *     (in id order).
 * Returns 1 and *next (epoch cur + 1) when anything changed, 0 and a copy
 * of cur when nothing did, < 0 on bad input.
 */
int memb_reconfigure(const struct memb_config *cur,
		     const struct memb_reg *regs, size_t nregs,
		     const struct memb_policy *p, struct memb_config *next);

/* ---- placement ---- */

struct memb_placement;

/* The ring of the active members of c (ACTIVE and LEAVING: those that
 * serve). With none, every replica set is empty. */
int memb_placement_new(struct memb_placement **out,
		       const struct memb_config *c);
/* The target ring of c: its ACTIVE and JOINING members. */
int memb_placement_target(struct memb_placement **out,
			  const struct memb_config *c);
void memb_placement_free(struct memb_placement **p);
uint64_t memb_key_hash(uint64_t key);
/* Replica set of a hash: member indexes into c->m, primary first;
 * returns the count, min(r, active members). out holds MEMB_MAX_R. */
/* Whether member `me` (index in the configuration; < 0: none) is in the
 * replica set of key hash h in the active ring act or the target ring tgt
 * (NULL: the same as act): whether it must keep the key's rows (they
 * are freed otherwise, docs/replication.md, "Freeing what a node no
 * longer holds"). */
bool memb_keeps(const struct memb_placement *act,
		const struct memb_placement *tgt, uint64_t h, int me);
unsigned memb_replicas(const struct memb_placement *p, uint64_t hash,
		       unsigned *out);
/* Whether member `who` is in the replica set of hash h in ring p (false
 * when p is NULL or who is negative). */
bool memb_in_set(const struct memb_placement *p, uint64_t h, int who);
/* The ring's ranges in order: range i is (start of i, start of i + 1];
 * its replica set is that of its end point. */
size_t memb_ranges(const struct memb_placement *p);
unsigned memb_range(const struct memb_placement *p, size_t i,
		    uint64_t *start, uint64_t *end, unsigned *out);

/* Keys whose replica set stays from one configuration to the next
 * (docs/replication.md, "Reads from any replica"). *map (malloc'ed,
 * from->n + 1 entries): for each member of from that serves there
 * (memb_serves), the index in to of the same member (id and incarnation)
 * if it serves in to, else -1. -ENOMEM. */
int memb_member_map(const struct memb_config *from,
		    const struct memb_config *to, int **map);
/* Whether member self of prev's configuration was the primary of hash h
 * there and every replica of h there is one in cur (map:
 * memb_member_map() from prev's configuration to cur's). */
bool memb_set_kept(const struct memb_placement *prev, const int *map,
		   int self, const struct memb_placement *cur, uint64_t h);

/* ---- the store ---- */

/* "/recstore/<cluster>/" + what; out holds COORD_KEY_MAX + 1. */
int memb_key(char *out, const char *cluster, const char *what);

/* The configuration (epoch 0 when none), its mod_revision (0: none) and
 * the store's revision at the read (rev may be NULL). */
int memb_read_config(struct coord *c, const char *cluster,
		     struct memb_config *out, int64_t *mod_rev, int64_t *rev);
/* Live registrations; *regs malloc'ed. Unparsable ones are skipped (and
 * counted in *bad when bad is not NULL). A registration whose incarnation
 * a drain request (the key drains) names has drain set. */
int memb_read_regs(struct coord *c, const char *cluster,
		   struct memb_reg **regs, size_t *n, size_t *bad);

/*
 * Ask for member id to be drained (cancel: withdraw the request). All the
 * requests of a cluster are one key, drains = {"<id>": "<incarnation of
 * its registration>", ...}, which the decider reads through
 * memb_read_regs(); a request is a compare-and-swap on it, redone on a
 * conflict (up to MEMB_DRAIN_TRIES times, then RS_E_BUSY), so concurrent
 * requests are decided one after the other and none can slip past the
 * checks another made. Refused (RS_E_INVAL, with the reason) for a node
 * that is not an ACTIVE or LEAVING member, the last ACTIVE member, or
 * (unless force) one that is not registered with the incarnation the
 * configuration knows, or one without which, with the members already
 * being drained, fewer than r members would hold copies. A forced
 * request for a member whose registration is gone writes its entry as
 * {"inc": "<incarnation the configuration knows>", "gone": true} (in
 * place of an ordinary entry for it): the only entry that puts it down
 * at the next decision even as the last complete holder of a range
 * (memb_policy.keep_last). Asking twice, or withdrawing what was not
 * asked, is no error. The request names one incarnation: a node restarted
 * under the same id joins normally.
 */
#define MEMB_DRAIN_TRIES 16
int memb_drain_request(struct coord *c, const char *cluster, const char *id,
		       bool cancel, bool force);

/*
 * One decision: read the registrations and the configuration, compute the
 * next one and write it by CAS on the mod_revision read. Returns 1 when it
 * wrote a new configuration (*epoch its epoch), 0 when nothing changed or
 * another decider wrote first (the caller decides again on the next
 * change), < 0 on a store error. Safe with any number of concurrent
 * deciders: each configuration is derived from the one it replaces.
 */
int memb_decide(struct coord *c, const char *cluster,
		const struct memb_policy *p, uint64_t *epoch);
/*
 * memb_decide() by a node that follows configuration `followed` (NULL:
 * none). It writes nothing, and returns MEMB_DECIDE_REGRESSED with
 * *epoch the newer epoch, when the store's configuration is older than
 * followed (memb_config_regressed()) or than one a registration says
 * its node follows (memb_reg.seen): the store was restored from an older
 * snapshot, and a configuration derived from it could hand ranges to
 * members that no longer hold them. memb_decide() checks the
 * registrations the same way.
 */
#define MEMB_DECIDE_REGRESSED 2
int memb_decide_from(struct coord *c, const char *cluster,
		     const struct memb_policy *p,
		     const struct memb_config *followed, uint64_t *epoch);

/*
 * After a restore of the store from an older snapshot (docs/replication.md,
 * "A store restored from a snapshot"): every node that follows a newer
 * configuration than the store's publishes it under recovery/<id> (on its
 * lease) and seen in its registration. memb_recover() takes the newest
 * published one and writes it back as the configuration, its epoch one
 * above every epoch the store and the registrations name, with recovered
 * set to its own epoch, by compare-and-swap. Returns 1 (*out: what was
 * written), 0 when there is nothing to recover (no registration names a
 * newer epoch than the store's, none published; *out: the store's
 * configuration), RS_E_BUSY when a registration names a newer epoch than
 * any published configuration (its node has not published yet: retry),
 * RS_E_STALE when the configuration changed meanwhile, < 0 on a store
 * error. *out is the caller's to free.
 */
int memb_recover(struct coord *c, const char *cluster,
		 struct memb_config *out);

/* ---- the node's agent ---- */

struct memb_agent_opts {
	const char *cluster;
	const char *id;
	const char *addr;	/* what clients connect to */
	int64_t lease_s;	/* registration TTL */
	/* With policy.keep_last: a member kept as the last complete
	 * holder of a range goes down after this many seconds without a
	 * registration (what only it held is lost then); 0: never, only
	 * an operator's forced drain puts it down. */
	int64_t keep_s;
	bool decide;		/* may become the decider */
	struct memb_policy policy;
	/* log lines (already rate-limited by the agent); NULL: the
	 * library's log (common/log.h, prefix "coord") */
	void (*log)(void *arg, const char *line);
	void *log_arg;
	/* Called from the agent's thread (or tick's caller) with every
	 * configuration of a higher epoch than the last one passed (never a
	 * lower one); the callee copies what it keeps. NULL: none. */
	void (*on_config)(void *arg, const struct memb_config *c);
	void *config_arg;
	/* The epoch the node finished copying its ranges in, published in
	 * its registration (read by the agent's thread at every round;
	 * owned by the caller, outlives the agent). NULL: never. */
	_Atomic uint64_t *synced;
	/* Set at every round that read the configuration: the monotonic ms
	 * (CLOCK_MONOTONIC) just before the read was sent (the read lease,
	 * docs/replication.md; caller-owned like synced). NULL: none. */
	_Atomic int64_t *read_ms;
	/* Set to the store's epoch when the agent finds the store's
	 * configuration older than the one it follows, back to 0 once a
	 * recovery is followed (memb_agent_regressed(); caller-owned like
	 * synced). NULL: none. */
	_Atomic uint64_t *regressed;
};

struct memb_agent;

/* The agent uses c, which the caller closes after memb_agent_free(); it
 * sets c->cancel. Nothing is contacted yet. */
int memb_agent_new(struct memb_agent **out, struct coord *c,
		   const struct memb_agent_opts *o);
/*
 * One round at time now_ms (monotonic): grant a lease if there is none,
 * keep it alive once a third of its TTL has passed (a lost lease: grant a
 * new one and register again), register, take the decider key if free,
 * and if deciding run memb_decide(). Returns 0 or the round's error.
 */
int memb_agent_tick(struct memb_agent *a, int64_t now_ms);
/* The revision to wait for changes after (the last one seen). */
int64_t memb_agent_rev(const struct memb_agent *a);
bool memb_agent_is_decider(const struct memb_agent *a);
uint64_t memb_agent_epoch(const struct memb_agent *a);
/* Non-zero while the store's configuration is older than the one the
 * agent follows (a restore from an older snapshot): the store's epoch
 * when that was found. Then the agent follows no configuration but one
 * memb_recover() wrote for it, decides none, and publishes the one it
 * follows (recovery/<id>, seen in its registration). */
uint64_t memb_agent_regressed(const struct memb_agent *a);
/* This process's incarnation (its registration's "inc"): a member entry
 * with the agent's id is this node only if its inc is this one. */
uint64_t memb_agent_inc(const struct memb_agent *a);
/* Run ticks in a thread: after each, wait for a change under the
 * cluster's prefix or the next keepalive; after an error retry within
 * a second (a third of the TTL if that is shorter, so that one failed
 * round never costs the lease). Failures are logged once, then once a
 * minute, and the recovery once. */
int memb_agent_start(struct memb_agent *a);
/* Stop the thread, revoke the lease (the registration and a decider key
 * go at once: a clean leave). Accepts NULL. */
void memb_agent_free(struct memb_agent **a);

#endif
