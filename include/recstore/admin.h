/*
 * recstore/admin.h - administering a replicated cluster of memory nodes
 * through its coordination store, etcd (docs/replication.md): what
 * recstore-ctl's cluster, drain and recover commands do, as calls.
 *
 *	struct rs_admin *a;
 *	struct rs_admin_etcd_opts o = RS_ADMIN_ETCD_OPTS_INIT;
 *	rs_admin_open_etcd(&a, "http://10.0.0.9:2379", "prod", &o);
 *	rs_admin_drain(a, "node-3", 0);
 *	rs_admin_read_config(a, &cfg);	(until node-3 is DOWN)
 *	rs_admin_config_free(&cfg);
 *	rs_admin_close(&a);
 *
 * The calls are the primitives (one read, one write, one wait); the
 * policy of a command (how long to wait, what to retry) is the caller's,
 * since a program and an operator want different ones. An etcd that is
 * unreachable or slow fails a call with -ECONNREFUSED or RS_E_TIMEOUT;
 * every write here may be redone (a request that took effect is found
 * made). Tables, statistics and checkpoints are calls of the client
 * (recstore/client.h), which reaches the nodes themselves.
 *
 * Only in the full library (librecstore, pkg-config recstore): etcd is
 * node code, trainers never talk to it. One thread at a time per
 * struct rs_admin. Errors follow recstore/error.h; rs_errormsg() says
 * what failed (an etcd error starts with "etcd").
 */
#ifndef RECSTORE_ADMIN_H
#define RECSTORE_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rs_admin;

#define RS_ADMIN_ID_MAX 63	/* a member id or cluster name, [A-Za-z0-9_.-] */
#define RS_ADMIN_ADDR_MAX 127
#define RS_ADMIN_MAX_R 5	/* replicas per key */

/* How to reach etcd. The strings are read during the call only. */
struct rs_admin_etcd_opts {
	uint32_t struct_size;	/* set by the caller: RS_ADMIN_ETCD_OPTS_INIT */
	uint32_t timeout_ms;	/* of each etcd call; 0: 5000 */
	const char *ca_file;	/* https: the CA of the members' certificates */
	const char *cert_file, *key_file;	/* a client certificate */
	/* etcd authentication: the password is read from the file (16 to
	 * 256 bytes, one trailing newline ignored) */
	const char *user, *password_file;
};
#define RS_ADMIN_ETCD_OPTS_INIT \
	{ .struct_size = sizeof(struct rs_admin_etcd_opts) }

/* 0 when id is 1..RS_ADMIN_ID_MAX characters of [A-Za-z0-9_.-], else
 * RS_E_INVAL with a message that starts with what. */
int rs_admin_check_id(const char *what, const char *id);

/* Open the cluster named cluster in the etcd of endpoints (comma-separated
 * URLs, http:// or https://). o may be NULL. RS_E_INVAL for a bad name or
 * option; an unreadable password file fails here too. */
int rs_admin_open_etcd(struct rs_admin **out, const char *endpoints,
		       const char *cluster, const struct rs_admin_etcd_opts *o);
/* Accepts NULL and *a == NULL; sets *a to NULL. */
void rs_admin_close(struct rs_admin **a);

/* What the open found worth a warning (a bit set per finding). */
#define RS_ADMIN_WARN_PASSWORD_READABLE 1u	/* others may read the file */
unsigned rs_admin_warnings(const struct rs_admin *a);

/* ---- the configuration ---- */

/* A member's state (docs/replication.md, "Membership"). */
enum rs_admin_state {
	RS_ADMIN_ACTIVE = 0,	/* in the replica sets */
	RS_ADMIN_JOINING = 1,	/* registered, copying its ranges */
	RS_ADMIN_DOWN = 2,	/* out of the replica sets */
	RS_ADMIN_LEAVING = 3,	/* drained: serves while others copy */
};
/* "active", "joining", "down", "leaving"; "?" for another value. */
const char *rs_admin_state_name(uint32_t state);

/* The structs below are allocated by the library: a later release may
 * append fields to rs_admin_config, never to the array elements. */
struct rs_admin_member {
	char id[RS_ADMIN_ID_MAX + 1];
	char addr[RS_ADMIN_ADDR_MAX + 1];
	uint64_t inc;		/* incarnation of its registration */
	uint32_t state;		/* enum rs_admin_state */
	uint32_t reserved;
	uint64_t since;		/* epoch of its last state change */
};

struct rs_admin_config {
	uint64_t epoch;		/* 0: no configuration yet */
	uint32_t r;		/* replicas per key */
	uint32_t vnodes;	/* ring points per member */
	uint64_t recovered;	/* written by a recovery: the epoch it restored */
	int64_t mod_rev;	/* the configuration's etcd revision (0: none) */
	int64_t rev;		/* the store's at the read: for rs_admin_wait */
	size_t n;
	struct rs_admin_member *m;	/* n, sorted by id */
};

/* The cluster's configuration into *out (free with
 * rs_admin_config_free). */
int rs_admin_read_config(struct rs_admin *a, struct rs_admin_config **out);
/* Accepts NULL and *c == NULL; sets *c to NULL. */
void rs_admin_config_free(struct rs_admin_config **c);

/* Wait until something of the cluster changes after revision rev (a
 * config's rev), at most timeout_ms: 0 either way, < 0 on an error. */
int rs_admin_wait(struct rs_admin *a, int64_t rev, int timeout_ms);

/* ---- registrations: the nodes alive now ---- */

struct rs_admin_reg {
	char id[RS_ADMIN_ID_MAX + 1];
	char addr[RS_ADMIN_ADDR_MAX + 1];
	uint64_t inc;		/* incarnation: a restart gets a new one */
	uint64_t synced;	/* epoch it finished copying its ranges in */
	/* the epoch it follows when that is newer than the store's (etcd
	 * restored from an older snapshot: run rs_admin_recover); 0: none */
	uint64_t seen;
	uint32_t drain;		/* 1: a drain of this incarnation is asked */
	uint32_t reserved;
};

struct rs_admin_regs {
	size_t n;
	size_t unreadable;	/* registrations that did not parse */
	struct rs_admin_reg *reg;	/* n */
};

int rs_admin_read_regs(struct rs_admin *a, struct rs_admin_regs **out);
void rs_admin_regs_free(struct rs_admin_regs **r);

/* The id of the node that decides configurations into *id (free it), or
 * NULL when none holds the key. */
int rs_admin_read_decider(struct rs_admin *a, char **id);

/* ---- placement: the replica sets of a configuration ---- */

struct rs_admin_placement;

/* The ring of cfg's serving members (ACTIVE and LEAVING). */
int rs_admin_placement_new(struct rs_admin_placement **out,
			   const struct rs_admin_config *cfg);
void rs_admin_placement_free(struct rs_admin_placement **p);
/* Its ranges in ring order: range i is (*start, *end] of the 64-bit key
 * hashes, range 0 wraps. set[] (RS_ADMIN_MAX_R) gets the indexes into
 * cfg->m of its replica set, primary first; returns their number (0 for
 * an i past the last range). */
size_t rs_admin_placement_ranges(const struct rs_admin_placement *p);
unsigned rs_admin_placement_range(const struct rs_admin_placement *p,
				  size_t i, uint64_t *start, uint64_t *end,
				  unsigned *set);

/* ---- changes ---- */

/* Run one reconfigure step, as the decider node does (safe next to it:
 * the write is a compare-and-swap), with replicas r when there is no
 * configuration yet. Returns 1 when a configuration was written (*epoch
 * its epoch), 0 when nothing changed, RS_ADMIN_DECIDE_REGRESSED when a
 * node follows a newer epoch (*epoch) than etcd's: recover first. */
#define RS_ADMIN_DECIDE_REGRESSED 2
int rs_admin_decide(struct rs_admin *a, unsigned replicas, uint64_t *epoch);

/* Ask for member id to be drained (docs/replication.md, "Removing a
 * node"), or withdraw the request. RS_E_INVAL with the reason when it
 * would leave fewer than r members holding copies (unless FORCE), for a
 * member that is not registered (unless FORCE: one whose registration is
 * gone is then put down at the next decision, even as the last complete
 * holder of a range, and rows only it held are lost), or for a node that
 * is not a serving member; RS_E_BUSY when concurrent requests kept
 * winning. Asking twice is no error. */
#define RS_ADMIN_DRAIN_CANCEL 1u
#define RS_ADMIN_DRAIN_FORCE 2u
int rs_admin_drain(struct rs_admin *a, const char *id, unsigned flags);

/* After etcd was restored from an older snapshot (docs/replication.md,
 * "A store restored from a snapshot"): write the newest configuration a
 * live node follows back, one epoch above any seen. Returns 1 (*out: what
 * was written, its recovered the epoch restored), 0 when there is nothing
 * to recover (*out: etcd's configuration), RS_E_BUSY while a node has not
 * yet published what it follows, RS_E_STALE when the configuration
 * changed meanwhile (both: try again). */
int rs_admin_recover(struct rs_admin *a, struct rs_admin_config **out);

#ifdef __cplusplus
}
#endif
#endif
