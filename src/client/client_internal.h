/*
 * client_internal.h - the client library's internal model (cli_).
 *
 *   struct rs_client      config copy, ring, location cache, nodes[],
 *                         table handles (a list, never shrinks), async
 *                         worker threads, counters
 *   struct cli_node       (conn.h) one memory node: address, connection
 *                         pool, and its table directory (below)
 *   struct rs_table       a table by name: dim/dtype, and per node the
 *                         node's view of it (struct cli_tloc: id,
 *                         generation, index geometry, rows region)
 *
 * Directory. Each node numbers its tables and gives each (re)creation a
 * new generation. A table handle caches, per node, the TABLE_DIR entry of
 * its name. It is re-fetched (cli_table_refresh) when the handle is opened,
 * when a node answers a keyed request with a stale-table error, and when a
 * one-sided READ on that table's regions fails. A cli_tloc also carries a
 * client-wide `uid`, new for every distinct (node, id, generation) seen:
 * location-cache entries carry it and are used only while it matches, so
 * entries of a dropped table can never be taken for those of its
 * re-creation.
 *
 * A handle holds views of the nodes the client had when it was last
 * refreshed (nloc); a node added since (cluster mode) reads as not valid
 * (cli_table_loc), which the data paths treat like a stale table: they
 * refresh the handle and resend.
 *
 * Locking. tbl->lock (rwlock) guards tbl->loc[] and nloc; readers copy
 * what they need under the read lock. c->tables_lock guards the handle list. Pools
 * have their own lock (conn.h). Counters are relaxed atomics.
 */
#ifndef CLI_CLIENT_INTERNAL_H
#define CLI_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/conn.h"
#include "client/bcache.h"
#include "client/lcache.h"
#include "client/rcache.h"
#include "client/once.h"
#include "client/peer.h"
#include "client/route.h"
#include "ckpt/ckpt.h"
#include "common/proto.h"
#include "index/pet_format.h"
#include "place/ring.h"
#include "recstore/client.h"
#include "value/row_format.h"

#define CLI_DEFAULT_CACHE_ENTRIES (1u << 20)
#define CLI_DEFAULT_BCACHE_BYTES ((size_t)32 << 20)
#define CLI_DEFAULT_CONNS 8
#define CLI_MAX_CONNS 256
#define CLI_DEFAULT_TORN_RETRIES 8
#define CLI_DEFAULT_TIMEOUT_MS 10000
/* Node slots of a cluster-mode client: as many as a configuration has
 * members (route.h: a member that moved takes a new slot). */
#define CLI_MAX_NODES PROTO_CONFIG_MAX_MEMBERS

struct rs_client_config {
	char **nodes;
	size_t nnodes;
	unsigned vnodes;
	size_t cache_entries;
	size_t bcache_bytes;	/* bucket-image cache (bcache.h) */
	unsigned conns_per_node;
	unsigned torn_retries;
	unsigned timeout_ms;
	int rpc_reads;
	int replica_reads;	/* cluster mode: READ at any ready replica */
	unsigned async_threads;
	unsigned spin_us;
	char *trace_path;
	double trace_rate; /* < 0: from the environment */
	char *device;
	struct auth_key *key;	/* credentials (owned, zeroed when freed);
				 * NULL: none */
};

/* A table as one node holds it. */
struct cli_tloc {
	bool valid;		/* the node has the table */
	uint32_t uid;		/* client-wide, for the location cache */
	struct proto_table_info info;
	bool onesided;		/* layouts this client can READ */
	struct pet_geom geom;	/* from info.index */
	struct row_geom rgeom;	/* from info.spec and info.rows */
};

struct rs_table {
	struct rs_client *c;
	char name[PROTO_NAME_MAX + 1];
	uint32_t dim, dtype;
	uint32_t luid;		/* client-wide, set at open: the location
				 * cache's table key (lcache.h) */
	pthread_rwlock_t lock;
	struct cli_tloc *loc;	/* [nloc], under lock */
	size_t nloc;		/* the client's node count at the last
				 * refresh; a node beyond it: not valid */
	struct cli_rcache *rc;	/* row cache (rcache.h), or NULL */
	struct rs_table *next;
};

struct cli_async; /* data.c: check the caller's update options and copy them into a
 * full-size struct (struct_size = sizeof). 0 or RS_E_INVAL. */
int cli_update_opts(const struct rs_update_opts *in,
		    struct rs_update_opts *full);

/* async.c */

struct cli_counters {
	atomic_uint_fast64_t get_keys, onesided_keys, rpc_keys, rpc_fallbacks;
	atomic_uint_fast64_t lease_rpc_reads;
	atomic_uint_fast64_t backup_keys, backup_misses, diverted_keys;
	atomic_uint_fast64_t config_waits_cut;
	atomic_uint_fast64_t torn_retries, stale_locations, reads_posted;
	/* bucket-image cache (bcache.h): keys served by one row READ, and
	 * images that named another row */
	atomic_uint_fast64_t bc_hits, bc_stale;
	atomic_uint_fast64_t dir_refreshes;
	/* cluster mode: CONFIG rounds done by refreshes, and keys resent
	 * after an epoch refusal or a node's failure */
	atomic_uint_fast64_t config_refreshes, epoch_retries;
	/* keyed requests sent (their sum is rs_client_stats.rpcs) and keys
	 * carried, by PROTO_OP_GET..DELETE */
	/* row caches (rcache.h) */
	atomic_uint_fast64_t rc_hits, rc_stale_hits, rc_probes,
		rc_probe_misses, rc_fills, rc_update_rows, rc_bytes_saved;
	atomic_uint_fast64_t op_rpcs[PROTO_OP_DELETE - PROTO_OP_GET + 1];
	atomic_uint_fast64_t op_keys[PROTO_OP_DELETE - PROTO_OP_GET + 1];
};

/*
 * Cluster mode (docs/client.md, "Cluster mode"). At open the configured
 * nodes are seeds: the client asks them for CONFIG. Epoch 0 (no cluster):
 * static mode, exactly as before: nodes[] are the configured nodes, ring
 * is the static ring over their names, route is NULL and nothing below is
 * touched by a call. Epoch >= 1: nodes[] are node slots, the members of
 * the configuration learned at open first (all of them, its order, name =
 * addr), then every ACTIVE member a later configuration has and no slot
 * is (route.h); known[] their ids and addresses, seeds[] the configured
 * nodes, and route (route.h) says where keys go.
 *
 * Node slots. nodes[] and known[] are allocated once at open with
 * CLI_MAX_NODES entries (never moved, so a reader's pointer into them
 * stays valid) and slots are only ever appended: a refresh initialises
 * the new slots completely (name, address, pool; contexts connect on
 * first use), then publishes the higher count with a release store of
 * nnodes, then builds and swaps the route that points at them. A slot is
 * never changed or freed before close. So a reader may use nodes[i] for
 * any i below a count it acquire-loaded (cli_nnodes()) or below the
 * nknown of a route it holds (the route lock orders it after the slots'
 * initialisation). A call sizes its per-node arrays by one such count,
 * taken once: the RPC path by the route it maps its keys by (and grows
 * them when a newer route has more nodes), the one-sided get by
 * cli_nnodes() (a route with more nodes than that sends the call to the
 * RPC path), table refreshes and admin calls by cli_nnodes(). A handle's
 * views cover the nodes of its last refresh (struct rs_table). Memory:
 * the two arrays take CLI_MAX_NODES x (sizeof(struct cli_node) +
 * sizeof(struct proto_member)) bytes of address space (421,888 on
 * x86-64: 1024 x (216 + 196)),
 * zero pages from calloc until slots are used (a slot's share is
 * resident only once touched: a few pages for a small cluster).
 *
 * Route swaps. Every call in cluster mode reads the route while it maps
 * its keys to nodes; a refresh replaces it. Readers take route_lock
 * (rwlock) for reading only while they map keys (cli_route_hold/drop: no
 * I/O, no waiting under it, a few microseconds per batch); a refresh
 * builds the new route first, takes the write lock only to swap the
 * pointer and frees the old route after dropping it, when no reader can
 * still see it. Chosen over retiring old routes until close because it
 * bounds memory to one route (a route of 1000 members x 160 vnodes is
 * 2.6 MB, and a flapping cluster changes epochs without bound) and needs
 * no reclamation scheme; its cost, one uncontended-in-practice lock
 * round per call, is nothing next to the call's network round trip, and
 * static mode does not pay it.
 *
 * Refreshes. refresh_lock serialises CONFIG rounds. A thread that finds,
 * once it holds it, that the epoch moved past the one it routed by, or
 * that a round finished while it waited (refresh_rounds), uses that
 * result instead of asking again: any number of threads failing at once
 * cause one round.
 *
 * Exactly-once writes. A write call (GET_OR_INIT, PUT, UPDATE, DELETE)
 * takes the next sequence of `once` for its whole life (cli_rpc); every
 * message of it, resends included, carries PROTO_KF_ONCE with client_id,
 * that sequence and the client's done_below (once.h), and the node
 * applies each key of a (client, sequence) at most once.
 */
struct rs_client {
	struct rs_client_config cfg;
	struct place_ring *ring;	/* static mode */
	struct cli_lcache *cache;
	struct cli_bcache *bcache;	/* bucket images (bcache.h), or NULL */
	struct rv_dev *dev;
	atomic_size_t nnodes;		/* published node slots */
	struct cli_node *nodes;		/* [CLI_MAX_NODES] in cluster mode */
	/* cluster mode */
	bool cluster;
	struct cli_route *route;	/* under route_lock */
	pthread_rwlock_t route_lock;
	pthread_mutex_t refresh_lock;
	atomic_uint_fast64_t epoch;	/* route->epoch */
	/* one-sided reads by the route until then (rs_mono_ms; read
	 * lease, docs/replication.md), else GETs go to the RPC path */
	_Atomic int64_t read_until;
	atomic_uint_fast64_t refresh_rounds;
	struct proto_member *known;	/* [CLI_MAX_NODES] (refresh_lock) */
	/* [CLI_MAX_NODES]: the epoch each node said it is ready in (CONFIG:
	 * it holds all its ranges of it); gets READ at a backup only then */
	_Atomic uint64_t *ready;
	/* [CLI_MAX_NODES]: gets READ elsewhere while avoid[slot] >
	 * rs_mono_ms() (a READ or connection of the node failed: get.c);
	 * avoid_max: the largest of them (0: none set), so that a get
	 * without failures reads no clock for it */
	_Atomic int64_t *avoid;
	_Atomic int64_t avoid_max;
	struct cli_node *seeds;
	size_t nseeds;
	size_t ask_next;		/* rotation of CONFIG asks (refresh_lock) */
	uint64_t client_id;		/* exactly-once writes: random, != 0 */
	struct cli_once once;		/* their call sequence (once.h) */
	pthread_mutex_t tables_lock;
	struct rs_table *tables;
	atomic_uint next_uid;
	struct cli_async *async;
	struct cli_counters cnt;
	atomic_uint_fast64_t step;	/* rs_client_step() */
	bool trace_opened;
};

#define CLI_INC(c, field, n) \
	atomic_fetch_add_explicit(&(c)->cnt.field, (n), memory_order_relaxed)

/* config.c */
int cli_config_copy(struct rs_client_config *dst,
		    const struct rs_client_config *src);
void cli_config_release(struct rs_client_config *cfg);

/* cluster.c: cluster mode (see struct rs_client) */
/* Gets READ the keys of node slot `slot` at other replicas for
 * CLI_AVOID_MS (its READs, its connection or a CONFIG ask failed; a READ
 * at a killed node fails only after the transport's retries, and a new
 * connection to a stopped one waits its bound: neither should be paid by
 * every get until the configuration drops the node). Nothing outside
 * cluster mode (no avoid array). */
#define CLI_AVOID_MS 2000
void cli_node_avoid(struct rs_client *c, size_t slot);
/* After the configured nodes are initialised as nodes[]: ask them for
 * CONFIG (first that answers). Epoch 0: returns 0, static mode, nothing
 * connected beyond what the ask needed. Else switches the client to
 * cluster mode and connects every ACTIVE member. */
int cli_cluster_open(struct rs_client *c);
void cli_cluster_close(struct rs_client *c);
/* Learn a configuration newer than `seen` (the epoch a failed request was
 * routed by); ask node `avoid` (the one that failed; SIZE_MAX: none) last.
 * One CONFIG round for any number of concurrent callers. 0 (whether or
 * not anything newer was found) or the error of the last node asked. */
int cli_cluster_refresh(struct rs_client *c, uint64_t seen, size_t avoid);
/* Cluster mode, before a one-sided read: whether the route's read lease
 * holds (renewed by a CONFIG round when it ran out). false: read through
 * the RPC, which the primary checks against its epoch. */
bool cli_cluster_can_read(struct rs_client *c);
/* The client's node count (acquire: nodes[0..count) are initialised). */
static inline size_t cli_nnodes(const struct rs_client *c)
{
	return atomic_load_explicit(&((struct rs_client *)c)->nnodes,
				    memory_order_acquire);
}
/* active[i] for i < n (a count from cli_nnodes()): node i takes part
 * (static: every node; cluster: the ACTIVE members of the current route).
 * Returns how many. */
size_t cli_active_nodes(struct rs_client *c, bool *active, size_t n);
/* The nodes a table create or drop goes to (*out malloc'ed, *n of them)
 * and the epoch it names: every node and 0 without a cluster; else the
 * route's cli_route_table_nodes() (ACTIVE, then JOINING members) and its
 * epoch. RS_E_UNSUPPORTED when a member has no node slot, -ENOMEM. */
int cli_table_nodes(struct rs_client *c, unsigned **out, size_t *n,
		    uint64_t *epoch);
/* Cluster mode: the route, held for reading while keys are mapped. */
static inline const struct cli_route *cli_route_hold(struct rs_client *c)
{
	pthread_rwlock_rdlock(&c->route_lock);
	return c->route;
}

static inline void cli_route_drop(struct rs_client *c)
{
	pthread_rwlock_unlock(&c->route_lock);
}

/* wire.c: request/reply exchange on a borrowed context */
int cli_wire_hello(struct cli_conn *cc);
/* Ask node n for its configuration (members malloc'ed in *out). A node
 * that answers that it does not know CONFIG (an older node: RS_E_PROTO or
 * RS_E_UNSUPPORTED in an error reply) is not in a cluster: epoch 0.
 * wait_ms: how long to wait for the reply (0: the node's timeout). */
int cli_wire_config(struct cli_node *n, struct cli_config *out,
		    unsigned wait_ms);

/* table.c */
int cli_table_refresh(struct rs_table *t);
/* One CKPT request to node `node` (index in the config); *out: its reply.
 * wait_ms: how long its reply may take, when longer than the client's
 * timeout (a DUMP writes a whole table first); 0: the timeout. */
int cli_node_ckpt(struct rs_client *c, unsigned node,
		  const struct proto_ckpt_req *q, unsigned wait_ms,
		  struct proto_ckpt_reply *out);
/* TABLE_CREATE of ps on every node; *existed: nodes that had it. */
int cli_table_create_proto(struct rs_client *c,
			   const struct proto_table_spec *ps, size_t *existed);
/* A wire spec into the caller's public spec (its struct_size checked). */
int cli_table_spec_out(const struct proto_table_spec *p,
		       struct rs_table_spec *out);
/* Copy node i's view of t (under the read lock). */
void cli_table_loc(struct rs_table *t, unsigned node, struct cli_tloc *out);

/* get.c: the one-sided batched read; keys of any tables */
struct cli_key {
	struct rs_table *t;
	uint64_t key;
	float *out;
};
int cli_get(struct rs_client *c, const struct cli_key *keys, size_t n,
	    int *status, unsigned flags);

/* rpc.c: keyed RPCs (GET .. DELETE) for keys of any tables, grouped per
 * node, split into messages under both sides' limits, pipelined, nodes in
 * parallel. Duplicate keys are folded first (UPDATE: gradients summed;
 * PUT: last row wins; others: asked once). in[i] (PUT/UPDATE) points at
 * key i's dim floats; keys[i].out receives rows (GET/GET_OR_INIT). `sel`,
 * when given, restricts the call to keys[sel[0..m)]; status stays indexed
 * like keys. `ko` (NULL: none) gives the requests' PROTO_KF_* flags and
 * lr. Returns 0 (per-key outcomes in status) or a call error. */
struct cli_keyed_opts {
	uint32_t kflags; /* PROTO_KF_* */
	float lr;	 /* with PROTO_KF_LR */
};
int cli_rpc(struct rs_client *c, uint32_t op, const struct cli_key *keys,
	    const float *const *in, const size_t *sel, size_t m, int *status,
	    uint64_t trace_id, bool sampled, const struct cli_keyed_opts *ko);

/* data.c: check the caller's update options and copy them into a
 * full-size struct (struct_size = sizeof). 0 or RS_E_INVAL. */
int cli_update_opts(const struct rs_update_opts *in,
		    struct rs_update_opts *full);

/* ckpt.c: checkpoint and restore (docs/checkpoint.md) */
struct cli_ckpt_progress {
	const char *phase;	/* "freeze", "dump", "verify", "load", "done" */
	uint64_t start_us, last_us, elapsed_us;
	uint64_t rows, bytes;	/* done so far */
	uint64_t total_rows, total_bytes;	/* restore: of the checkpoint */
};
struct cli_ckpt_opts {
	const char *const *tables;	/* names; ntables 0: every table */
	size_t ntables;
	bool export_only;	/* rows without optimizer state (serving) */
	const char *base;	/* an increment on the checkpoint there */
	uint32_t freeze_ms;	/* nodes thaw alone after this; 0: 60 s */
	void (*progress)(void *arg, const struct cli_ckpt_progress *p);
	void *arg;		/* called at most once a second, and per phase */
};
struct cli_ckpt_report {
	uint8_t id[CKPT_ID_BYTES];
	uint32_t tables, parts;
	uint64_t rows, deleted, bytes, raw_bytes;
	uint64_t paused_us;	/* checkpoint: longest write pause of a node */
	uint64_t elapsed_us;
	bool with_state;	/* rows and optimizer state (not an export) */
};
/* Take a checkpoint of c's store into path: a new directory, or an empty
 * one; the nodes must see it as <checkpoint_dir>/<last component of
 * path> (a shared file system, or one host). */
int cli_checkpoint(struct rs_client *c, const char *path,
		   const struct cli_ckpt_opts *o, struct cli_ckpt_report *rep);
/* Verify the checkpoint in path, then load it into c's store. */
int cli_restore(struct rs_client *c, const char *path,
		const struct cli_ckpt_opts *o, struct cli_ckpt_report *rep);

/* async.c */
int cli_async_start(struct rs_client *c, unsigned threads);
void cli_async_stop(struct rs_client *c);

/* Test hook (NULL outside tests): a cluster get calls it once its READs
 * completed, before it checks that its read lease still holds (get.c);
 * test_repl ends the lease there to take the renewal path every call. */
extern void (*cli_test_reads_done)(struct rs_client *c);

#endif
