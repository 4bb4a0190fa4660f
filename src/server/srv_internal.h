/*
 * srv_internal.h - the memory node's internal structures (prefix srv_),
 * shared by the files of src/server. Design notes: docs/server.md.
 *
 * Objects and ownership
 *   struct rs_server   the node: owns the options copy, the device, the
 *                      slab store, the table registry, the listener, the
 *                      connections, the workers, metrics and NUMA state.
 *   struct srv_tables  the registry: one struct srv_table per live table,
 *                      indexed by the slab table id (= the wire table id =
 *                      the row header's table_id).
 *   struct srv_table   one table: its slab handle, its REMOTE_READ
 *                      registration (index + rows, one MR), its spec
 *                      (optimizer, initializer) and directory entry.
 *                      Reference counted: the registry holds one reference,
 *                      every request using it holds one for its duration.
 *   struct srv_conn    one client connection (user pointer of its rv_conn).
 *   struct srv_worker  one worker thread and its scratch buffers.
 *
 * Threads
 *   run thread   rs_server_run(): rdma_cm events (connect/disconnect),
 *                closing dead connections, the stop request.
 *   workers      leader/followers: one receives from the listener's
 *                shared receive queue (rv_listener_recv, adaptive
 *                spin-then-block), hands over, and handles what it got
 *                (decode, run, reply on the request's connection).
 *   metrics      libmicrohttpd's thread (metrics.c) when metrics_port != 0.
 *
 * Locks (never take one to the left while holding one to the right):
 *   tables.admin -> tables.lock -> gate.lock
 *   tables.admin  serializes create / drop (slab calls, MR registration,
 *                 catalog records).
 *   tables.lock   rwlock over the slot array and the directory snapshot.
 *   gate.lock     the receive gate (see srv_gate_* in server.c).
 */
#ifndef RS_SERVER_SRV_INTERNAL_H
#define RS_SERVER_SRV_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <hwloc.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/ratelimit.h"
#include "common/rs_internal.h"
#include "coord/coord.h"
#include "recstore/server.h"
#include "server/config.h"
#include "server/srv_catalog.h"
#include "trace/metrics.h"
#include "value/slab.h"
#include "verbs/rv.h"

#define SRV_MAX_WORKERS 256
#define SRV_RECV_BATCH 16	  /* messages taken per rv_listener_recv */
/* Requests that may wait for backups at once (replicated writes, COPY
 * served), and the spare worker threads that take over receiving for
 * them (server.c, "waits"); a write over the bound is answered
 * RS_E_BUSY before any work. */
#define SRV_WAITS_MAX 32u
#define SRV_RECV_TIMEOUT_MS 1000  /* the leader re-checks "stop" this often */
#define SRV_RECV_TIMEOUT_WAKE_MS 60000 /* ... when it can be woken */
#define SRV_WAKE_LEN 16		  /* wake message: magic + node id */
#define SRV_PARK_TICK_MS 1	  /* run thread retries parked replies */
#define SRV_REPLY_MIN_BYTES (256u << 10) /* reply bound: at least this */

/* ---- the node's config: struct srv_config (config.h) ---- */

/* Every cross-field check and the rows' ranges (srv_config_api.c);
 * RS_E_INVAL names the field. */
int srv_config_validate(const struct srv_config *o);
/* Worst-case memory of a config (srv_memory.c), in bytes. */
/* The evicted-keys buffer of a cluster write: SRV_EVICTED_PER_KEY per key
 * of its batch and SRV_EVICTED_SPARE (srv_handlers.c, srv_memory.c). */
#define SRV_EVICTED_PER_KEY 4u
#define SRV_EVICTED_SPARE 64u
struct srv_mem_budget {
	uint64_t recv, send, parked, scratch, pool;
	uint64_t registered;	/* recv + send + pool */
	uint64_t total;
};
/* What the machine has: 0 unknown; memlock UINT64_MAX: no limit. */
struct srv_machine {
	uint64_t phys_bytes;
	uint64_t avail_bytes;	/* MemAvailable */
	uint64_t memlock_bytes;
};
void srv_config_budget(const struct srv_config *o, struct srv_mem_budget *b);
/* This machine, or what srv_machine_set() installed (tests; NULL: probe
 * again). */
void srv_machine_probe(struct srv_machine *m);
void srv_machine_set(const struct srv_machine *m);
/* RS_E_INVAL when the worst case exceeds m; the message says both. */
int srv_config_check_memory(const struct srv_config *o,
			    const struct srv_machine *m);
/* One log line: the worst case and the machine. */
void srv_log_memory(const struct srv_config *o);

/* Add a credential (id unique, role enum auth_role); the file form
 * reads the secret from path and warns when others may read the file.
 * RS_E_INVAL names `field` (e.g. "auth.keys[0]"). */
int srv_config_add_cred(struct srv_config *o, const char *field, uint32_t id,
			unsigned role, const void *secret, size_t len);
int srv_config_add_cred_file(struct srv_config *o, const char *field,
			     uint32_t id, unsigned role, const char *path);

/* The public config object is a box around the one config. */
struct rs_server_config {
	struct srv_config c;
};

struct coord;
struct memb_agent;
/* Validate cfg and copy it into *o (srv_config_clear). */
int srv_config_to_node(const struct rs_server_config *cfg,
		       struct srv_config *o);

/* ---- NUMA placement (srv_numa.c) ---- */

struct srv_numa {
	hwloc_topology_t topo;
	int nnodes;
	int node;		/* chosen NUMA node (os index), -1: none */
	hwloc_cpuset_t cpuset;	/* NULL: nothing to bind */
	hwloc_nodeset_t nodeset;
	hwloc_nodeset_t saved_set;
	hwloc_membind_policy_t saved_policy;
	char why[192];		/* the decision, for the log */
};

/* NUMA node of an RDMA device from sysfs (sysfs_root NULL: "/sys"); -1 if
 * unknown. */
int srv_numa_dev_node(const char *sysfs_root, const char *dev);
/* Load the topology (synthetic: hwloc synthetic description, for tests;
 * NULL: this machine) and decide. Not placing is not an error. */
int srv_numa_init(struct srv_numa *n, const char *dev, const char *sysfs_root,
		  const char *synthetic);
void srv_numa_fini(struct srv_numa *n);
/* Bind the calling thread: 1 bound, 0 nothing to do, < 0 failed. */
int srv_numa_bind_thread(const struct srv_numa *n);
/* Bind the calling thread's allocations to the node until leave. */
int srv_numa_mem_enter(struct srv_numa *n);
void srv_numa_mem_leave(struct srv_numa *n);

/* ---- tables (srv_tables.c) ---- */

struct srv_table_counters {
	_Atomic uint64_t get_keys, get_or_init_keys, put_keys, update_keys,
		delete_keys, created_keys, missing_keys;
	/* admission (docs/eviction.md): GET_OR_INIT keys answered with the
	 * initializer's row without storing it; UPDATE keys whose gradient
	 * was not applied because the key was not admitted yet */
	_Atomic uint64_t init_served_keys, unadmitted_updates;
};

struct srv_table {
	unsigned id;
	struct proto_table_spec spec;
	struct proto_table_info info;	/* directory entry */
	struct slab_table *st;
	struct row_geom rgeom;		/* payload conversions */
	struct rv_mr *mr;		/* index + rows, REMOTE_READ */
	uint32_t state_floats;
	atomic_uint refs;
	struct srv_table_counters cnt;
	_Atomic uint64_t grow_after_ns;	/* an automatic growth failed: none
					   before this (CLOCK_MONOTONIC) */
	struct metrics_gauge *m_rows, *m_bytes, *m_fill;
	struct metrics_gauge *m_ev_cap, *m_ev_ttl; /* evicting tables */
	struct srv_tables *reg;
};

struct srv_tables {
	pthread_mutex_t admin;
	pthread_rwlock_t lock;
	struct srv_table *slot[SLAB_MAX_TABLES];
	unsigned count;
	_Atomic uint64_t dir_gen;	/* bumped by every create / drop */
	struct slab_store *store;
	struct rv_dev *dev;
	struct rs_server *srv;		/* for metrics and the log */
	struct srv_numa *numa;
	struct srv_catalog *cat;	/* layout-2 pools: the JSON catalog
					   file, read at open (migration) */
	const char *pool_path;		/* NULL: DRAM (points into s->cfg) */
	bool file_backed;
	double index_load;
	uint64_t default_capacity;	/* capacity 0: up to this many rows */
	struct proto_limits limits;
	_Atomic uint64_t registered_bytes;
	/* growth (srv_grow.c): tables a growth replaced, kept registered
	 * (their rows made to fail validation) until until_ns, so that
	 * one-sided READs in flight complete; reaped under admin */
	struct srv_retired {
		struct srv_table *t;
		uint64_t until_ns;
	} retired[SLAB_MAX_TABLES];
	unsigned nretired;
	_Atomic uint64_t grows, grow_rows, grow_us, grow_refusals;
};

/* Open the slab store of o (DRAM, file or device dax; a file pool
 * recovers its tables, their specs from its catalog records). */
int srv_tables_open(struct srv_tables *r, struct rs_server *s,
		    const struct srv_config *o);
void srv_tables_close(struct srv_tables *r);
/* Create (or, for an existing table of the same shape, adopt) the tables
 * of the config. Errors name the field ("tables[1]: ..."). */
int srv_tables_apply_config(struct srv_tables *r, const struct srv_config *o);

/* Create a table: 0 and *info, RS_E_EXISTS, RS_E_FULL (the message says
 * the bytes needed and free), RS_E_INVAL, ... A capacity of 0 gets the
 * node's default_capacity, or the largest capacity that fits if less;
 * info->spec.capacity is the capacity given. */
int srv_table_create(struct srv_tables *r, const struct proto_table_spec *s,
		     struct proto_table_info *info);
int srv_table_drop(struct srv_tables *r, const char *name);
/* A registered wrapper of slab table st (not linked anywhere yet), and
 * its undoing (the slab table is left alone). */
int srv_table_wrap(struct srv_tables *r, struct slab_table *st,
		   const struct proto_table_spec *spec, struct srv_table **out);
void srv_table_unwrap(struct srv_tables *r, struct srv_table *t);

/* ---- growth (srv_grow.c; docs/server.md, "Growth") ---- */

/* Grow table `name` to capacity rows (0: double it, up to its grow_log2
 * limit when it has one). gen != 0 is an automatic growth: `capacity` is
 * then the number of keys the request may insert, and nothing happens
 * (0) when the table no longer has generation gen, another admin
 * operation runs, or the spec's limit leaves no room. *info (may be NULL)
 * gets the new directory entry. */
int srv_table_grow(struct srv_tables *r, const char *name, uint64_t capacity,
		   uint64_t gen, struct proto_table_info *info);
/* Would an insert of n keys into t start a growth (its spec allows one,
 * and the keys may not fit below the fill threshold)? Cheap; no lock. */
bool srv_grow_due(const struct srv_table *t, uint32_t n);
/* Enter the write pause of growths only (a checkpoint's freeze does not
 * hold it): false while a table of the node grows; after true, leave
 * with srv_write_leave(). For REPL records (srv_grow.c head comment). */
bool srv_grow_enter(struct rs_server *s);
/* Free the retired tables whose grace period ended (wait: all of them,
 * sleeping until their grace ends). Caller holds admin. */
void srv_tables_reap(struct srv_tables *r, bool wait);

/* A reference to table id (NULL if none); srv_table_put() when done. */
struct srv_table *srv_table_get(struct srv_tables *r, uint32_t id);
/* The same by name (NULL if none). */
struct srv_table *srv_table_get_name(struct srv_tables *r, const char *name);
void srv_table_put(struct srv_table *t);

/* Snapshot of the directory: *out (malloc'ed, caller frees) gets the
 * entries sorted by id; returns the count and *gen the generation. */
int srv_tables_dir(struct srv_tables *r, struct proto_table_info **out,
		   uint64_t *gen);

/* ---- checkpoints (srv_ckpt.c, docs/checkpoint.md) ---- */

/* The write pause. A write request enters (writers++, then checks
 * frozen) and leaves; FREEZE sets frozen, then waits for writers to
 * drain. Both sides use sequentially consistent atomics, so a writer
 * either sees frozen (and answers RS_E_BUSY) or is counted before the
 * freezer's wait ends. A freeze ends by THAW or, when its deadline passes
 * with no DUMP running, by itself (a checkpointer that died). */
#define SRV_FROZEN_CKPT 1u	/* FREEZE .. THAW */
#define SRV_FROZEN_GROW 2u	/* a table grows (srv_grow.c) */
struct srv_ckpt {
	atomic_uint frozen;	/* SRV_FROZEN_*: who paused the writes */
	atomic_uint writers;	/* write requests inside */
	atomic_uint dumping;	/* DUMPs running: the deadline waits */
	_Atomic uint64_t since_ns, until_ns;
	pthread_mutex_t lock;	/* FREEZE / THAW against each other */
	_Atomic uint64_t pauses, paused_us, busy;	/* STATS */
};

struct rs_server;
/* A write request (PUT, UPDATE, DELETE, GET_OR_INIT, LOAD, create, drop)
 * may start: true (srv_write_leave() after), or false: answer RS_E_BUSY. */
bool srv_write_enter(struct rs_server *s);
void srv_write_leave(struct rs_server *s);
void srv_ckpt_init(struct rs_server *s);
void srv_ckpt_destroy(struct rs_server *s);
/* FREEZE: pause writes (or renew the pause) for at most timeout_ms and
 * wait for those in progress. THAW: resume; returns how long (us) writes
 * were paused (0: they were not). DUMP: one table into a part file under
 * checkpoint_dir (frozen only); *out describes it. */
/* epoch: the configuration a cluster member must follow as an active
 * member (0: not a cluster); RS_E_EPOCH otherwise, before it pauses
 * anything or, if it changed while the writes drained, after it resumed
 * them again. */
int srv_ckpt_freeze(struct rs_server *s, uint32_t timeout_ms, uint64_t epoch);
uint64_t srv_ckpt_thaw(struct rs_server *s);
struct proto_ckpt_req;
struct proto_ckpt_reply;
int srv_ckpt_dump(struct rs_server *s, const struct proto_ckpt_req *q,
		  struct proto_ckpt_reply *out);

/* ---- replication (srv_repl.c, docs/replication.md) ---- */

#define SRV_REPL_TIMEOUT_MS 2000	/* a backup's reply to one REPL */
#define SRV_REPL_PENDING 8		/* configurations waiting to be
					   adopted */

/* Exactly-once completion records (srv_once.c). The node's bounds; a
 * client's request may use three quarters of each, the rest is kept for
 * the records peers send (REPL, COPY). */
#define SRV_ONCE_MAX_CLIENTS 65536u
#define SRV_ONCE_MAX_CALLS 1024u	/* per client */
#define SRV_ONCE_MAX_ENTRIES (16u << 20) /* records per node (16 B each) */
#define SRV_ONCE_IDLE_MS 600000u	/* a client silent this long may go */
#define SRV_ONCE_MAX_FORGOTTEN 262144u	/* evicted clients remembered */
/* How long an evicted client is remembered after it was last heard of:
 * longer than any call of it can go on resending (srv_once.c). */
#define SRV_ONCE_FORGET_MS (4ull * RS_TIMEOUT_MAX_MS)
/* A credential's share of each bound (with credentials; without, the
 * one bucket's share is the node's): its clients' requests are refused
 * RS_E_BUSY past it, records peers send for it are kept up to twice it. */
#define SRV_ONCE_SHARE_DIV 8u
/* How far a request's seq may run ahead of the highest its client sent
 * here before (srv_once.c, "Tags"). */
#define SRV_ONCE_SEQ_WINDOW (1ull << 40)
struct once_client;
struct once_cred;
struct srv_once {
	pthread_mutex_t lock;
	struct once_client **bucket;
	struct once_cred **cbucket;	/* credentials' accounts */
	unsigned nclients;		/* clients with calls on record */
	unsigned nforgot;		/* evicted clients remembered */
	unsigned ncreds;		/* credentials with an account */
	/* the bounds (srv_once_init; tests lower them): the node's ... */
	unsigned max_clients, max_forgot;
	uint64_t max_entries;
	/* ... and a credential's share of them */
	unsigned cred_clients, cred_forgot;
	uint64_t cred_records;
	uint64_t created, entries, deduplicated, evicted, obsolete;
	uint64_t refused;		/* resends refused: records forgotten */
	uint64_t busy;			/* requests refused RS_E_BUSY */
	uint64_t dropped;		/* peers' records not kept */
	uint64_t ahead;			/* requests refused: seq too far ahead */
	uint64_t swept_ms;		/* the last eviction pass */
	uint64_t clock_ofs_ms;	/* added to the monotonic clock (tests) */
	uint8_t hkey[crypto_shorthash_KEYBYTES]; /* client chains' hash */
};
struct srv_once_counts {
	uint64_t clients, records, deduplicated, evicted, obsolete;
	uint64_t forgotten, refused;
	uint64_t creds, busy, dropped, ahead;
};
/* The exactly-once tag of a write (PROTO_KF_ONCE); client 0: none. cred:
 * the key id of the credential its client's connection authenticated
 * with (0 without credentials); a client id names a different client
 * under every credential. */
struct srv_once_tag {
	uint64_t client, seq, done_below;
	uint32_t cred;
};
/* A growth's pause of the node's writes (srv_grow.c): sets the growth's
 * freeze and waits at most wait_ms for the writes inside to leave; 0, or
 * RS_E_BUSY (a checkpoint's freeze, or writes that did not leave: the
 * freeze is lifted again). */
int srv_writes_pause(struct rs_server *s, unsigned wait_ms);
void srv_writes_resume(struct rs_server *s);
/* Shares per credential; srv_once_one_bucket() after init for a node
 * without credentials (one bucket, key id 0, whose share is the node's
 * bounds for clients' requests). */
int srv_once_init(struct srv_once *o);
void srv_once_one_bucket(struct srv_once *o);
void srv_once_fini(struct srv_once *o);
/* found[i] and st[i]: the status recorded for keys[i] of table tid in
 * the tagged call. Allocates nothing. Refuses (RS_E_BUSY) when the keys
 * not on record could take the tag's credential or the node past a
 * bound, so that a write is refused before it is applied, (RS_E_TIMEOUT)
 * a call of an evicted client whose records are gone, and (RS_E_INVAL) a
 * call declared done or a seq over SRV_ONCE_SEQ_WINDOW ahead. */
int srv_once_lookup(struct srv_once *o, const struct srv_once_tag *tag,
		    uint32_t tid, const uint64_t *keys, uint32_t n,
		    int32_t *st, bool *found);
/* Record the keys with st[i] >= 0 (those already on record are kept),
 * after a srv_once_lookup of the same call that took it, the caller
 * holding one lock (`order`) across both: no bound is checked again.
 * Nothing to record: nothing allocated. */
int srv_once_add(struct srv_once *o, const struct srv_once_tag *tag,
		 uint32_t tid, const uint64_t *keys, const int32_t *st,
		 uint32_t n);
/* srv_once_add for records a replica receives (REPL, COPY): a record of
 * a call its client has declared done (seq below the done_below already
 * seen) is obsolete: skipped and counted, not an error. Records over a
 * bound (twice the credential's share, the node's) are dropped and
 * counted: returns 1 then, else 0 or -ENOMEM. */
int srv_once_record(struct srv_once *o, const struct srv_once_tag *tag,
		    uint32_t tid, const uint64_t *keys, const int32_t *st,
		    uint32_t n);
/* fn for every record of table tid (lock held: fn must not call back
 * in); stops at the first non-zero return, which it returns. */
typedef int (*srv_once_fn)(void *arg, const struct srv_once_tag *tag,
			   uint64_t key, int32_t st);
int srv_once_each(struct srv_once *o, uint32_t tid, srv_once_fn fn, void *arg);
void srv_once_stats(struct srv_once *o, struct srv_once_counts *out);


struct srv_cfg;
struct srv_cfg_view;
struct srv_chunk;
struct srv_ranges;
/* Table names (srv_copy.c). */
#define SRV_TNAMES_MAX (2u * SLAB_MAX_TABLES)
struct srv_tnames {
	unsigned n;
	char v[SRV_TNAMES_MAX][PROTO_NAME_MAX + 1];
};

struct srv_repl {
	bool on;			/* a cluster member (coord section) */
	uint64_t inc;			/* this process's incarnation: set
					   before the agent starts, which
					   then hands over configurations */
	pthread_rwlock_t lock;		/* cur; held by requests (read) */
	struct srv_cfg *cur;		/* NULL: no configuration yet */
	/* what CONFIG answers: cur's immutable view, published with cur
	 * under `lock`'s write side and read under view_lock (held only to
	 * take a reference), so CONFIG never waits for an adoption */
	pthread_mutex_t view_lock;
	struct srv_cfg_view *view;	/* NULL: no configuration yet */
	atomic_bool adopting;		/* an adoption waits for or holds
					   `lock`'s write side */
	_Atomic uint64_t configs_adopting;	/* CONFIGs answered then */
	_Atomic uint64_t repls_all_waiting;	/* REPLs applied while every
						   worker of the node waited
						   for its backups */
	pthread_mutex_t order;		/* apply + queue of replicated writes */
	_Atomic uint64_t epoch;		/* cur's, for STATS */
	_Atomic uint64_t forwarded_writes, failed_writes, refused, applied;
	_Atomic uint64_t held;		/* writes answered RS_E_BUSY by the
					   read lease */
	_Atomic uint64_t parallel;	/* REPLs posted while another of the
					   same worker's was in flight */
	_Atomic uint64_t busy_writes;	/* writes answered RS_E_BUSY: a
					   backup's table grew too long */
	/* REPLs this node sent, numbered in sending order (the sequence a
	 * backup applies them in: "Stale REPLs"); REPLs it refused as a
	 * backup because a later one of the same sender was applied, or
	 * because their sender is not the keys' primary */
	_Atomic uint64_t repl_seq;
	_Atomic uint64_t stale_repls, foreign_repls;
	/* REPLs refused as a backup because they were for another table of
	 * the same name (its identity differs: dropped and created again) */
	_Atomic uint64_t other_table_repls;
	/* records of queued chunks carried into a new configuration:
	 * re-read from the rows (re-captured) or dropped (the node is no
	 * longer the key's primary, or the peer no longer its backup) */
	_Atomic uint64_t recaptured, dropped_records;
	/* the adopting thread and the configurations it is handed, oldest
	 * first (each is adopted in turn: a node that skips one cannot
	 * tell what it gained, see srv_copy.c) */
	pthread_t thr;
	bool started, pstop;
	pthread_mutex_t plock;
	pthread_cond_t pcv;
	struct memb_config *pending[SRV_REPL_PENDING];
	unsigned npending;
	struct srv_once once;		/* exactly-once records */
	/* copying ranges in (srv_copy.c; the adopting thread's) */
	struct srv_ranges *have;	/* the key-hash ranges the node
					   holds completely as of have_epoch
					   (NULL: none known) */
	uint64_t have_epoch;
	_Atomic uint64_t synced;	/* that epoch, for the registration */
	/* that epoch if this node is an ACTIVE member of it (0: copying,
	 * not active): CONFIG says it, and clients then READ keys here as
	 * a backup (docs/replication.md, "Reads from any replica") */
	_Atomic uint64_t ready;
	/* the read lease (docs/replication.md, "Read leases") */
	_Atomic int64_t read_ms;	/* the agent's last read of the
					   configuration (monotonic ms) */
	_Atomic uint64_t seen;		/* the highest epoch it handed over */
	uint32_t lease_ms;		/* V: how long a read vouches */
	_Atomic uint64_t copied_rows, copies_done, copy_failures;
	/* ranges it came to lead without holding them completely: every
	 * other holder failed while it copied them (srv_copy.c) */
	_Atomic uint64_t unheld_ranges;
	/* the epoch the coordination store's configuration went back to
	 * (a restore from an older snapshot; the agent sets it, 0: none) */
	_Atomic uint64_t regressed;
	/* tables it missed (srv_copy.c, "Tables"): a REPL named a table it
	 * lacks; the tables it created from a member's directory whose rows
	 * are not all copied yet; how many it created and dropped so */
	atomic_bool tables_missing;
	struct srv_tnames fresh;
	/* tables a client created here while the node was joining (under
	 * plock): the copy takes them into `fresh` (srv_copy.c) */
	struct srv_tnames direct;
	_Atomic uint64_t tables_created, tables_dropped;
	/* freeing the rows of ranges it no longer holds (srv_sweep.c; the
	 * adopting thread's) */
	struct {
		uint64_t epoch;		/* of the configuration swept */
		uint64_t not_before;	/* monotonic ms: the read lease of
					   the epoch before has run out */
		uint64_t last;		/* the last slice (monotonic ms) */
		uint64_t freed;		/* in this epoch */
		unsigned table;		/* the next table id to walk */
		uint64_t cursor;	/* its row slot */
		bool done;
	} sweep;
	_Atomic uint64_t freed_rows;
};

/* One request's hold on the configuration and the chunks it waits for. */
struct srv_repl_req {
	struct srv_cfg *cfg;
	bool held;
	bool slot;		/* holds a wait slot (srv_wait_reserve) */
	unsigned nchunks, cap;
	struct srv_chunk **chunks;
	unsigned *chunk_peer;
	/* as a backup: the keys' primary (member index), if all of them
	 * have one; -1 if they have several, -2 before any key */
	int prim;
};

struct srv_repl_stats {
	uint64_t epoch, forwarded_writes, failed_writes, refused, applied;
	uint64_t synced, copied_rows, copies_done, copy_failures, gained;
	uint64_t unheld_ranges, regressed;
	uint64_t held, parallel, busy_writes;
	uint64_t configs_adopting, repls_all_waiting;
	uint64_t stale_repls, foreign_repls, recaptured, dropped_records;
	uint64_t other_table_repls;
	uint64_t tables_created, tables_dropped, freed_rows;
	uint64_t chunks_shipped, chunks_failed, queued, busy_repls;
	bool active;
};

struct memb_config;
int srv_repl_init(struct rs_server *s);
/* The adopting thread (a cluster member only); fini stops it. */
int srv_repl_start(struct rs_server *s);
void srv_repl_stop(struct rs_server *s);
void srv_repl_fini(struct rs_server *s);
/* A REPL named a table this node lacks: the adopting thread creates it
 * as the other members have it and copies its rows (srv_copy.c). */
void srv_repl_table_missing(struct rs_server *s);
/* A client created table `name` here in the epoch of q (srv_repl_enter
 * held): at a joining member, its rows written at the other members
 * before are copied in over every range (srv_copy.c). */
void srv_repl_table_created(struct rs_server *s, const struct srv_repl_req *q,
			    const char *name);
/* srv_sweep.c, on the adopting thread: ms until the next slice of the
 * sweep (0: now; < 0: nothing to sweep), and one slice. */
int64_t srv_sweep_next_ms(struct rs_server *s);
void srv_sweep_slice(struct rs_server *s);
/* The agent's callback: follow configuration c. */
void srv_repl_adopt(struct rs_server *s, const struct memb_config *c);
/* Take the configuration for a request of epoch over n wire keys: the
 * node must be their primary (backup: one of their backups). 0, or
 * RS_E_EPOCH with a message. srv_repl_exit() after, either way. */
int srv_repl_enter(struct rs_server *s, struct srv_repl_req *q,
		   uint64_t epoch, const void *keys, uint32_t n, bool backup);
void srv_repl_exit(struct rs_server *s, struct srv_repl_req *q);
/* Table name was dropped here, in the epoch of q (srv_repl_enter held):
 * its records still queued for backups go, so that none reaches a
 * table created later under the same name (docs/replication.md, "Stale
 * REPLs"). */
void srv_repl_table_dropped(struct rs_server *s, struct srv_repl_req *q,
			    const char *name);
struct srv_from;
/* For a REPL from the member of
 * incarnation from_inc, as srv_repl_enter() admitted it as a backup (q):
 * the sender must be the primary of every key in q's epoch (q->prim). Takes that
 * sender's lock (released by srv_repl_from_done) and refuses a REPL
 * numbered at or below one applied already. 0 or an error (set). */
int srv_repl_from_begin(struct rs_server *s, struct srv_repl_req *q,
			uint64_t from_inc, uint64_t from_seq,
			struct srv_from **out);
/* applied: the REPL's records were applied (its number is the last) */
void srv_repl_from_done(struct srv_from *f, uint64_t from_seq,
			bool applied);
/* For a write after srv_repl_enter(): RS_E_BUSY while the read lease
 * holds writes of a key this node just became the primary of. */
int srv_repl_hold(struct rs_server *s, struct srv_repl_req *q,
		  const void *keys, uint32_t n);
/* After srv_repl_enter(q) as a primary: is this node key's primary
 * (an eviction victim must be; q is a struct srv_repl_req *). */
bool srv_repl_is_primary(void *q, uint64_t key);
/* Queue key's new row and state (width floats) or its deletion for the
 * key's backups (under s->repl.order). 0 or -ENOMEM. */
int srv_repl_record(struct rs_server *s, struct srv_repl_req *q,
		    const struct proto_table_spec *table, uint32_t width,
		    uint64_t key,
		    bool deleted, const float *row,
		    const struct srv_once_tag *tag, int32_t st);
/* The same in two steps, so that a caller reads the row only for a key
 * that has somewhere to go: the members key's record goes to (into to,
 * SRV_REPL_MAX_TO entries: its backups, then the members of its target
 * set that are not in its active set), their count (0: none, at r = 1
 * with no change of configuration under way); then the record for them. */
#define SRV_REPL_MAX_TO (2 * PROTO_CONFIG_MAX_R)
unsigned srv_repl_targets(const struct srv_repl_req *q, uint64_t key,
			  unsigned *to);
int srv_repl_record_to(struct srv_repl_req *q, const unsigned *to,
		       unsigned nto, const struct proto_table_spec *table,
		       uint32_t width, uint64_t key, bool deleted,
		       const float *row, const struct srv_once_tag *tag,
		       int32_t st);
/* Ship and wait until every backup acknowledged q's records: 0 or the
 * first failure. */
int srv_repl_wait(struct rs_server *s, struct srv_repl_req *q);
bool srv_repl_pending(const struct srv_repl_req *q);
/* COPY (srv_copy.c): queue the rows asked for to the requester and wait
 * for its acknowledgement. 0 and *out, or an error with a message. */
int srv_copy_serve(struct rs_server *s, const struct proto_copy_req *m,
		   struct proto_copy_reply *out);
/* CONFIG reply into buf: length or < 0. */
int srv_repl_config(struct rs_server *s, void *buf, size_t cap,
		    const struct proto_hdr *h);
void srv_repl_stats(struct rs_server *s, struct srv_repl_stats *st);

/* ---- connections ---- */

struct srv_conn {
	struct rv_conn *rc;
	struct rs_server *srv;
	uint64_t id;
	atomic_uint held;	/* messages handed to workers, not released;
				 * | SRV_HELD_DEAD once dead */
	atomic_bool dead;	/* to be closed by the run thread */
	bool delivered;		/* rv reported it CONNECTED */
	bool is_wake;		/* the node's own wake connection */
	uint8_t role;		/* enum auth_role: what it may ask */
	uint32_t key;		/* the key id it authenticated with (0: no
				 * credentials): its exactly-once account */
	_Atomic uint32_t reply_max; /* the peer's receive buffer size */
	char peer[PROTO_NAME_MAX + 1];
	struct srv_conn *next, *prev;
	/* replies that found no send slot or credit at once (server.c) */
	pthread_mutex_t send_lock;	/* sends on rc; the list below */
	struct srv_parked *parked, **parked_tail;
	atomic_uint nparked;
	uint64_t parked_since_ns;	/* oldest parked or last progress */
	/* fairness: at most srv.conn_cap messages handled at once, the rest
	 * wait here for a worker done with one of them (server.c) */
	atomic_uint active;	/* being handled */
	atomic_uint nq;		/* = q_len, read without q_lock */
	pthread_mutex_t q_lock;
	struct rv_msg *q;	/* ring of q_cap (credits + 1) */
	uint32_t q_cap, q_head, q_len;
#ifdef RS_DEBUG_LOCKS
	atomic_uint handling;	/* in srv_handle now: checked <= conn_cap */
#endif
};

#define SRV_HELD_DEAD (1u << 31)

/* Ask the run thread to close c (any thread). */
void srv_conn_kill(struct srv_conn *c, int why);

/* Largest reply c takes: its receive size (HELLO, rv), at most the node's
 * reply bound max(max_message_bytes, SRV_REPLY_MIN_BYTES). */
uint32_t srv_reply_cap(const struct srv_conn *c);

/* Send a reply on c without waiting: sent at once, or copied and parked
 * on c (sent by the next reply on c or by the run thread). 0, or < 0
 * (c is then dead: failed, or cut off for breaking the protocol). Any
 * worker holding a message of c. */
int srv_conn_send(struct srv_conn *c, const void *buf, size_t len);
/* ---- credentials (srv_auth.c) ---- */

/* Set up checking when s->o.keys has credentials (before the listener);
 * srv_auth_announce() logs the mode once the listener has an address. */
int srv_auth_open(struct rs_server *s);
void srv_auth_announce(struct rs_server *s);
void srv_auth_close(struct rs_server *s);
/* rv_listener_attr.on_request: the credential check of a connect
 * request (run thread, before the listener allocates anything). */
int srv_auth_on_request(void *arg, const void *priv, size_t len,
			void *reply, size_t *reply_len);
/* Connect requests refused at the credential check (all reasons). */
uint64_t srv_auth_refused(struct rs_server *s);
/* The role of a connection from its connect request bytes. */
unsigned srv_auth_conn_role(struct rs_server *s, const void *priv,
			    size_t len);
/* The key id a connection authenticated with, from the same bytes (0
 * without credentials, or for bytes of no known key). */
uint32_t srv_auth_conn_key(struct rs_server *s, const void *priv,
			   size_t len);

/* ---- metrics and stats (srv_stats.c) ---- */

enum srv_req_type {
	SRV_RT_HELLO, SRV_RT_CREATE, SRV_RT_DROP, SRV_RT_DIR, SRV_RT_GET,
	SRV_RT_GET_OR_INIT, SRV_RT_PUT, SRV_RT_UPDATE, SRV_RT_DELETE,
	SRV_RT_STATS, SRV_RT_CKPT, SRV_RT_LOAD, SRV_RT_CONFIG, SRV_RT_REPL,
	SRV_RT_COPY, SRV_RT_GROW, SRV_RT_BAD, SRV_RT_COUNT
};

/* Why a peer was cut off (rs_connections_cut_total{reason}). */
enum srv_cut_reason {
	SRV_CUT_NO_CREDIT,	/* a reply found no credit for send_timeout */
	SRV_CUT_OVERRUN,	/* more replies owed than requests allowed */
	SRV_CUT_COUNT
};

/* The listener's counters that the node exports (srv_stats.c). */
#define SRV_TRANSPORT_COUNT 10

/* the replication series (srv_stats.c) */
#define SRV_REPL_METRICS 11
struct srv_repl_metric {
	struct rs_server *s;
	unsigned which;
};

struct srv_metrics {
	struct metrics_registry *reg;
	struct srv_repl_metric repl_arg[SRV_REPL_METRICS];
	struct metrics_gauge *repl_g[SRV_REPL_METRICS];
	struct metrics_counter *repl_c[SRV_REPL_METRICS];
	struct metrics_counter *requests[SRV_RT_COUNT];
	struct metrics_counter *errors[SRV_RT_COUNT];
	struct metrics_histogram *duration[SRV_RT_COUNT];
	struct metrics_histogram *batch[SRV_RT_COUNT];
	struct metrics_histogram *apply[4];	/* per optimizer kind */
	struct metrics_counter *keys_served;
	struct metrics_counter *bytes_served;
	struct metrics_counter *update_rows; /* rows UPDATE replies carried */
	struct metrics_counter *conns_total;
	struct metrics_gauge *conns;
	struct metrics_gauge *queue_depth;
	struct metrics_gauge *registered;
	struct metrics_counter *cq_spin, *cq_block, *cq_wakeups;
	struct metrics_counter *cut[SRV_CUT_COUNT];
	/* the listener's transport counters (rv_listener_counters), read
	 * when rendered: rs_transport_events_total{event} */
	struct metrics_counter *transport[SRV_TRANSPORT_COUNT];
	struct srv_transport_arg {
		struct rs_server *s;
		unsigned which;
	} transport_arg[SRV_TRANSPORT_COUNT];
	struct metrics_http *http;
};

int srv_metrics_init(struct rs_server *s);
/* Start the HTTP endpoint when metrics_port != 0. */
int srv_metrics_serve(struct rs_server *s);
void srv_metrics_fini(struct rs_server *s);
void srv_metrics_table_add(struct rs_server *s, struct srv_table *t);
void srv_metrics_table_remove(struct rs_server *s, struct srv_table *t);
const char *srv_req_type_name(unsigned rt);

/* One STATS entry source: the node's counters and every table's. */
struct srv_stat_list {
	struct proto_stat *v;
	uint32_t n, cap;
};
int srv_stats_collect(struct rs_server *s, struct srv_stat_list *out);

/* ---- workers and request handling (srv_worker.c, srv_handlers.c) ---- */

struct srv_worker {
	struct rs_server *srv;
	unsigned idx;
	pthread_t thr;
	bool started;
	atomic_uint_fast64_t busy_ns;
	/* scratch, grown on demand (srv_scratch) */
	void *keys, *vals, *idx_map, *coalesce, *status, *row, *state, *tmp;
	void *once;	/* exactly-once filtering (srv_handlers.c) */
	size_t keys_cap, vals_cap, idx_cap, coalesce_cap, status_cap,
		row_cap, state_cap, tmp_cap, once_cap;
	void *evicted;	/* keys this write evicted (cluster: shipped) */
	size_t evicted_cap;
	void *images;	/* an UPDATE's row images (PROTO_KF_ROWS) */
	size_t images_cap;
	void *reply;		/* the reply being built: reply_limit bytes */
	/* the batch being handled, a ring (server.c): a worker about to
	 * wait for backups hands what is left of it over (srv_wait_begin) */
	struct rv_msg batch[SRV_RECV_BATCH];
	bool admitted[SRV_RECV_BATCH];
	unsigned bhead, blen;
};

/* A received message another worker handles (server.c, "waits"). */
struct srv_handoff {
	struct rv_msg m;
	bool admitted;
};

/* Grow *buf to at least bytes. 0 or -ENOMEM. */
int srv_scratch(void **buf, size_t *cap, size_t bytes);

/* Waits for backups (server.c, "waits"). A request that may wait takes
 * a slot first (false: SRV_WAITS_MAX wait, answer RS_E_BUSY); around the
 * wait itself, a worker hands the rest of its batch and, when no other
 * worker is left to receive, the receiving to a spare thread. Both are
 * no-ops on threads that are not workers. */
bool srv_wait_reserve(struct rs_server *s);
void srv_wait_unreserve(struct rs_server *s);
void srv_wait_begin(struct rs_server *s);
void srv_wait_end(struct rs_server *s);

/* Handle one received message completely: decode, run, reply. */
void srv_handle(struct srv_worker *w, struct srv_conn *c, const void *msg,
		size_t len);

/* ---- the node ---- */

struct srv_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned inside;	/* 1: a leader is receiving (and counting) */
	unsigned closers;	/* run thread closing conns */
	/* waits (server.c): worker threads started (configured + spares),
	 * waiting for backups, parked as spares; wakes owed to parked ones */
	unsigned nthreads, nwaiting, nparked, wakes;
	pthread_cond_t spare_cv;
	struct srv_handoff *ho;	/* ring of ho_cap, ho_len from ho_head */
	unsigned ho_head, ho_len, ho_cap;
};

/* A thread calling fn(arg) every interval_ms until stopped
 * (srv_ticker.c). */
struct srv_ticker {
	bool started, stop;	/* stop: under lock */
	int interval_ms;
	void (*fn)(void *arg);
	void *arg;
	pthread_t thr;
	pthread_mutex_t lock;
	pthread_cond_t cv;
};
int srv_ticker_start(struct srv_ticker *k, const char *name, int interval_ms,
		     void (*fn)(void *), void *arg);
void srv_ticker_stop(struct srv_ticker *k); /* no-op if not started */

/* Per-stage windows to RS_STAGE_FILE (srv_stagelog.c). */
#define SRV_STAGELOG_APPLY 4	/* optimizer kinds */
struct srv_stagelog {
	struct srv_ticker tick;
	uint64_t seen;		/* requests at the last window written */
	FILE *f;
	struct metrics_window w[SRV_RT_COUNT + SRV_STAGELOG_APPLY];
};
int srv_stagelog_start(struct rs_server *s);
void srv_stagelog_stop(struct rs_server *s);

/* Eviction and admission (srv_evict.c, docs/eviction.md). */
struct srv_evict_counts {
	bool on;
	uint64_t policy, max_rows, ttl_s, admit_k;
	uint64_t evicted_capacity, evicted_ttl, admitted, not_admitted,
		over_cap, init_served, unadmitted;
};
/* Give slab table st the eviction state its spec asks for (none: 0). */
int srv_evict_attach(struct slab_table *st, const struct proto_table_spec *s);
/* The sweep thread: started at open if a table has eviction, else by
 * srv_evict_want() (tables.admin held) when the first one gets it. */
int srv_evict_start(struct rs_server *s);
void srv_evict_want(struct rs_server *s);
void srv_evict_stop(struct rs_server *s);
void srv_evict_counts(struct srv_table *t, struct srv_evict_counts *c);

/* srv_evict_resend.c: deletions the primary made on its own (TTL
 * expiries, cap victims) whose REPL failed, resent until the backups
 * took them (docs/eviction.md, "Deletions that did not reach a
 * backup"). Bounded; add counts and logs what does not fit. */
struct srv_evr_key {
	uint32_t table_id;
	uint64_t key;
};
struct srv_evr {
	pthread_mutex_t lock;	/* v, n, cap */
	bool init;
	struct srv_evr_key *v;	/* oldest first */
	uint32_t n, cap;
	uint64_t next_ms;	/* the sweep thread's: next round (mono) */
	unsigned backoff_ms;
	atomic_uint_fast64_t pending, resent, dropped, abandoned,
		failed_rounds;
};
struct srv_evr_counts {
	uint64_t pending, resent, dropped, abandoned, failed_rounds;
};
void srv_evr_init(struct rs_server *s);
void srv_evr_fini(struct rs_server *s);
/* Keys of table table_id deleted here whose deletion a backup did not
 * acknowledge. */
void srv_evr_add(struct rs_server *s, uint32_t table_id,
		 const uint64_t *keys, uint32_t n);
/* On the sweep thread, each tick (epoch: read at its start). */
void srv_evr_tick(struct rs_server *s, uint64_t epoch);
void srv_evr_counts(struct rs_server *s, struct srv_evr_counts *c);

struct rs_server {
	struct srv_config cfg;	/* a copy of the config it was opened with */
	char listen_addr[300];
	struct rv_dev *dev;
	struct rv_dev_caps caps;
	struct srv_numa numa;
	struct srv_tables tables;
	struct srv_metrics m;
	struct rv_listener *l;
	uint64_t node_id;
	struct auth_node auth;	/* used when auth_on */
	bool auth_on;
	struct metrics_counter *m_auth[AUTH_W_COUNT];
	bool trace_opened;
	struct srv_stagelog stagelog;
	struct srv_ticker evsweep;	/* the TTL sweep (srv_evict.c) */
	bool evict_want, evict_ready;	/* under tables.admin */
	struct srv_evr evr;	/* deletions to resend (srv_evict_resend.c) */

	int stop_fd;		/* eventfd: rs_server_stop() */
	int poke_fd;		/* eventfd: a conn became closable */
	atomic_bool stopping;	/* workers: leave */
	atomic_bool stop_req;	/* run loop: leave */
	atomic_bool running;
	int fatal;		/* why the node stopped by itself */
	bool tables_open;

	struct srv_gate gate;
	pthread_mutex_t conns_lock;	/* the list below, nconns */
	struct srv_conn *conns;
	unsigned nconns;	/* clients (the wake conn not counted) */
	uint64_t conns_total;
	struct rv_stats closed_cq;	/* CQ counters of closed conns */
	atomic_uint inflight;	/* requests being handled */
	atomic_uint parked_conns;	/* conns with parked replies */
	uint32_t reply_limit;	/* max(max_message_bytes, SRV_REPLY_MIN_BYTES) */
	unsigned conn_cap;	/* messages of one conn handled at once */
	_Atomic uint64_t deferred;	/* messages queued behind conn_cap */
	struct srv_ckpt ckpt;		/* the write pause (srv_ckpt.c) */
	struct srv_repl repl;		/* replication (srv_repl.c) */
#ifdef RS_DEBUG_LOCKS
	/* Debug and sanitizer builds (server.c, "checked rules"): a pause
	 * after the last release of a dead conn (RS_TEST_RELEASE_DELAY_US)
	 * and how many such releases there were (STATS debug.dead_releases). */
	unsigned release_delay_us;
	_Atomic uint64_t dead_releases;
#endif

	struct srv_worker *workers;	/* o.workers + SRV_WAITS_MAX */
	unsigned nworkers;
	atomic_uint waits;		/* slots taken (srv_wait_reserve) */
	atomic_uint waiting;		/* gate.nwaiting, for reading */
	_Atomic uint64_t spares_started, waits_refused;

	/* wake connection: the node's own client conn to its listener */
	struct rv_conn *_Atomic wake;
	uint8_t wake_msg[SRV_WAKE_LEN];
	uint64_t wake_token;	/* secret: not the node id HELLO tells */
	struct coord *coord;		/* membership: NULL when off */
	struct memb_agent *agent;
	pthread_t wake_thr;
	atomic_bool wake_pending;	/* its connect request is expected */
	bool wake_thr_started;
	atomic_bool wake_thr_done;
};

/* rs_seterr() for messages built from rs_errormsg() (which rs_seterr
 * would overwrite while reading it): formats into a local buffer first. */
int srv_err(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * The node's log lines (src/common/log.h): "recstore-server: ..." on
 * stderr unless the program installed a log function. srv_log is a
 * notice (what happened: a table created, an epoch adopted), srv_warn a
 * warning (what needs a look); srv_log_at names the level (RS_LOG_ERROR
 * for a part of the node that stopped).
 */
#define SRV_LOG_PREFIX "recstore-server"
#define srv_log_at(level, ...) rs_log_from(SRV_LOG_PREFIX, level, __VA_ARGS__)
#define srv_log(...) srv_log_at(RS_LOG_NOTICE, __VA_ARGS__)
#define srv_warn(...) srv_log_at(RS_LOG_WARNING, __VA_ARGS__)

/* Lines a peer can cause (bad requests, dropped connections, protocol
 * violations, table changes it asks for) go through a limiter of their
 * call site: SRV_LOG_BURST lines per SRV_LOG_INTERVAL_NS, then one
 * "(K similar lines suppressed)" on the next line let through. */
#define SRV_LOG_BURST 10
#define SRV_LOG_INTERVAL_NS (10ull * 1000000000ull)
#define srv_log_limited_at(rl, level, ...)                                \
	rs_log_limited_from(rl, SRV_LOG_BURST, SRV_LOG_INTERVAL_NS,         \
			    SRV_LOG_PREFIX, level, __VA_ARGS__)
#define srv_log_limited(rl, ...)                                          \
	srv_log_limited_at(rl, RS_LOG_NOTICE, __VA_ARGS__)
#define srv_log_peer_at(level, ...)                                       \
	do {                                                              \
		static struct rs_ratelimit srv_rl_;                       \
		srv_log_limited_at(&srv_rl_, level, __VA_ARGS__);         \
	} while (0)
#define srv_log_peer(...) srv_log_peer_at(RS_LOG_NOTICE, __VA_ARGS__)
#define srv_warn_peer(...) srv_log_peer_at(RS_LOG_WARNING, __VA_ARGS__)

/* Membership (srv_coord.c): with coord_endpoints set, register the node
 * in etcd and keep it registered from a thread of its own; a no-op
 * otherwise. Never fails because etcd is unreachable (the agent
 * retries). srv_coord_stop leaves the cluster (revokes the lease). */
int srv_coord_start(struct rs_server *s);
void srv_coord_stop(struct rs_server *s);

#endif
