/*
 * srv_repl_int.h - what srv_repl.c (configuration, fence, forwarding) and
 * srv_copy.c (copying ranges to a node that gains them) share.
 */
#ifndef RS_SERVER_SRV_REPL_INT_H
#define RS_SERVER_SRV_REPL_INT_H

#include <stdatomic.h>

#include "client/peer.h"
#include "coord/membership.h"
#include "server/srv_internal.h"

#define REPL_CHUNK_KEYS 4096u	/* records per chunk (one or more REPLs) */

struct srv_chunk {
	struct srv_chunk *next;
	char table[PROTO_NAME_MAX + 1];
	uint64_t ident;		/* the table's identity (its spec's) */
	uint32_t width, n, cap;
	bool sealed;		/* being shipped: no more appends */
	uint32_t sent;		/* records the backup took (a REPL answered
				   RS_E_BUSY is resent from there) */
	bool done;
	int err;		/* when done: 0 or why it failed */
	/* failed, and kept at the head of the queue to be sent again before
	 * anything behind it ("A REPL that failed is sent again" in
	 * docs/replication.md): the next write to the peer ships it first */
	bool retry;
	unsigned refs;		/* the queue's + one per waiting request */
	uint64_t *keys;
	uint64_t *cl, *sq, *db;	/* completion: client, seq, done_below */
	int32_t *st;		/* the status the client got (completion) */
	uint32_t *cr;		/* its credential's key id (completion) */
	uint8_t *kinds;
	float *rows;		/* n * width */
};

struct srv_peer {
	char id[MEMB_ID_MAX + 1];
	uint64_t inc;
	struct cli_node node;	/* pool of one connection */
	struct auth_key key;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct srv_chunk *head, *tail;	/* queued, oldest first */
	bool sending;
	/* the backup answered RS_E_BUSY (a table of it grows): its head is
	 * resent from busy_until (monotonic ms; 0: not busy), the backoff
	 * busy_ms doubling from 1 to 64 ms; not a failure, unless busy
	 * without a break since busy_since for REPL_BUSY_MAX_MS */
	uint64_t busy_until, busy_since;
	unsigned busy_ms;
	uint64_t shipped, failed, busy;	/* chunks; REPLs answered busy */
	uint64_t kept_bytes;	/* of the chunks kept to be sent again */
};

/* What the chunks kept for one backup to be sent again may hold; over
 * it the oldest go (counted, logged: their calls' resends may apply
 * twice after a failover to that backup). */
#define REPL_KEEP_MAX_BYTES (64ull << 20)



/* A key-hash range (lo, hi] this node gains in a configuration, and the
 * member (index in c.m) that is its primary there: the copy's source. */
struct srv_gain {
	uint64_t lo, hi;
	unsigned src;
};

/* The configuration with what the node derived from it. */
struct srv_cfg {
	struct memb_config c;
	struct memb_placement *pl;	/* the ACTIVE members' ring */
	/* the target ring: ACTIVE and JOINING members (NULL: no JOINING
	 * member, the same as pl); primaries forward to its replica sets
	 * too, so that a joining node receives every write of its ranges */
	struct memb_placement *tpl;
	int self;		/* index in c.m, -1: not an active member */
	int tself;		/* index in c.m in the target ring, or -1 */
	struct srv_peer **peer;	/* [c.n], NULL for self and DOWN members */
	/* the read lease: until hold_until (monotonic ms; 0: none) writes
	 * of keys this node was not the primary of in prev_pl (the ring of
	 * the epoch before, NULL: it was not active or skipped an epoch)
	 * wait, so that none is acknowledged while a client may still read
	 * by the configuration before */
	uint64_t hold_until;
	/* when this node began to follow it (monotonic ms): a client's read
	 * lease of an epoch before it ends within the lease after that
	 * (srv_copy.c, purge_gained) */
	uint64_t adopted_ms;
	struct memb_placement *prev_pl;
	int prev_self;
	/* [members of the epoch before]: the same member's index here if it
	 * is ACTIVE in both, else -1. A key whose replica set lost a member
	 * waits out the lease as well: a client may READ it at any replica
	 * (docs/replication.md, "Reads from any replica") */
	int *prev_map;
	struct srv_gain *gain;	/* ranges to copy in (adjacent ones
				   of one source merged) */
	size_t ngain;
	struct srv_cfg_view *view;	/* what CONFIG answers (one
					   reference) */
	/* [c.n]: per sender, the REPLs this node applied as a backup in
	 * this epoch: the lock serialises one sender's REPLs (a sender has
	 * one in flight per backup, so it never waits but for a stale one),
	 * last_seq is the highest applied (docs/replication.md, "Stale
	 * REPLs") */
	struct srv_from {
		pthread_mutex_t lock;
		uint64_t last_seq;
	} *from;
};

static inline const struct memb_placement *srv_cfg_target(
	const struct srv_cfg *g)
{
	return g->tpl ? g->tpl : g->pl;
}

/* Whether key hash h lies in a range g makes this node copy in (g->gain). */
bool srv_cfg_gains(const struct srv_cfg *g, uint64_t h);

/* Whether member mi is among the nodes key hash h is forwarded to (its
 * active or target replica set, the primary excluded). */
bool srv_repl_forwards_to(const struct srv_cfg *g, uint64_t h, unsigned mi);
/* Append one record to peer pi's queue (caller holds `order`). */
int srv_repl_append(struct srv_repl_req *q, unsigned pi,
		    const struct proto_table_spec *ts,
		    uint32_t width, uint64_t key, uint8_t kind,
		    const float *row, const struct srv_once_tag *tag,
		    int32_t st);

/* srv_copy.c. Under the configuration's write lock, before g is
 * published: work out the ranges g makes this node gain (g->gain) and
 * remove what the node still holds in them from an earlier time. */
int srv_copy_plan(struct rs_server *s, struct srv_cfg *g);
/* On the adopting thread after g was published: copy the gained ranges
 * in; returns when done, when a newer configuration waits, or at stop. */
void srv_copy_run(struct rs_server *s);
/* On the adopting thread, when a REPL named a table this node lacks
 * (tables_missing): create it as its members have it and copy its rows. */
void srv_copy_tables(struct rs_server *s);
void srv_copy_fini(struct rs_server *s);


#endif
