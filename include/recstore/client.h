/*
 * recstore/client.h - the RecStore client library: embedding tables held by
 * memory nodes, read with one-sided RDMA READ, updated by RPC.
 *
 * Life cycle
 *	struct rs_client_config *cfg;
 *	struct rs_client *c;
 *	struct rs_table *t;
 *	rs_client_config_new(&cfg);
 *	rs_client_config_add_node(cfg, "10.0.0.1:7471");	(one per node)
 *	rs_client_open(&c, cfg);		(cfg may be deleted now)
 *	rs_table_open(c, "ads", &t);
 *	rs_get(t, keys, n, rows, status, 0);
 *	rs_update(t, keys, n, grads, NULL, 0);
 *	rs_client_close(&c);			(frees every table handle)
 *
 * Sharding. A key lives on exactly one memory node, chosen by consistent
 * hashing (a ring of virtual nodes, XXH3 over the node names "addr:port"):
 * every client configured with the same node list, in any order, agrees.
 * Every table exists on every node; each node holds its share of the keys.
 *
 * Values. Rows are `dim` floats to the caller, whatever the table stores
 * (fp16/bf16 tables are converted on the client). Row i of a batch is at
 * out + i * dim.
 *
 * Per-key status (the `status` arrays, one int per key; may be NULL):
 *	RS_KEY_FOUND (1)    the key exists (get), was updated/put/deleted
 *	RS_KEY_CREATED (2)  get_or_init created the key from the initializer
 *	RS_KEY_MISSING (0)  the key does not exist; its output row is untouched
 *	< 0                 an error code for this key (rs_strerror())
 * The return value is the number of keys with status FOUND or CREATED, or a
 * negative code when the call as a whole failed (arguments, no connection).
 * A key that failed individually does not fail the call: check `status`.
 *
 * Threads. A client and its table handles are thread-safe: any number of
 * threads may call any function concurrently (except rs_client_close).
 * Connections are pooled: a call borrows one connection context per memory
 * node (an RC queue pair with its own buffers) and returns it when done;
 * the pool grows up to rs_client_config_set_conns_per_node() contexts per
 * node, then callers wait for one. See docs/client.md.
 *
 * Ownership. Key, value and status buffers are the caller's; synchronous
 * calls do not keep them. Asynchronous calls use them until rs_op_wait()
 * returns (or rs_op_test() returned 1).
 *
 * ABI. Every struct the caller allocates and the library reads or fills
 * (rs_table_spec, rs_table_info, rs_node_stats, rs_client_stats,
 * rs_update_opts) starts with `uint32_t struct_size`, which the caller
 * sets before the call: `struct rs_table_spec s = RS_TABLE_SPEC_INIT;`
 * (or s.struct_size = sizeof(s)). New fields are only ever appended; the
 * library accepts the size of any release since 0.2 and reads and writes
 * only the bytes within struct_size (a field the caller's struct lacks
 * takes its default, which is what zero means). A size the library does
 * not know (0, garbage, or a newer release's) fails with RS_E_INVAL
 * naming the struct. struct rs_key_ref is a fixed tuple and never grows.
 * docs/client.md, "ABI rules".
 */
#ifndef RECSTORE_CLIENT_H
#define RECSTORE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rs_client;
struct rs_client_config;
struct rs_table;
struct rs_op;

/* ---- configuration (validated when set; errors name the bad value) ---- */

int rs_client_config_new(struct rs_client_config **out);
/* Accepts NULL and *cfg == NULL; sets *cfg to NULL. */
void rs_client_config_delete(struct rs_client_config **cfg);

/* Add a memory node "IPv4:port" or "[IPv6]:port" (port 1..65535; no white
 * space; the whole string is the node's name on the ring); order is
 * irrelevant. */
int rs_client_config_add_node(struct rs_client_config *cfg, const char *node);
/* Replace the node list with a comma- or space-separated list. */
int rs_client_config_set_nodes(struct rs_client_config *cfg,
			       const char *list);
/* Virtual nodes per memory node on the ring (1..4096, default 160). All
 * clients of one store must use the same value. */
int rs_client_config_set_vnodes(struct rs_client_config *cfg, unsigned n);
/* Location-cache capacity in keys (default 1M; 0 disables the cache). */
int rs_client_config_set_cache_entries(struct rs_client_config *cfg,
				       size_t n);
/* Bucket-image cache budget in bytes (default 32 MiB: 131,072 images of
 * 8 slots each; 0 disables it; at most 64 GiB): validated images of
 * index buckets, so a get of a key not in the location cache READs its
 * row at once when an image holds the key (docs/client.md, "Bucket
 * images"). */
int rs_client_config_set_bucket_cache_bytes(struct rs_client_config *cfg,
					    size_t bytes);
/* Connection contexts (queue pairs) per node in the pool (1..256,
 * default 8). */
int rs_client_config_set_conns_per_node(struct rs_client_config *cfg,
					unsigned n);
/* Times a torn bucket or row READ is retried before a key falls back to
 * the GET RPC (0..1000, default 8). */
int rs_client_config_set_torn_retries(struct rs_client_config *cfg,
				      unsigned n);
/* Timeout of one request to one node, ms (1..3600000, default 10000). */
int rs_client_config_set_timeout_ms(struct rs_client_config *cfg,
				    unsigned ms);
/* Serve every get by the GET RPC instead of one-sided READs (0/1). */
int rs_client_config_set_rpc_reads(struct rs_client_config *cfg, int on);
/* Cluster mode with r > 1: READ a key at any of its replicas that is
 * ready, one chosen per client and key, instead of only at its primary
 * (0/1, default 1; docs/replication.md, "Reads from any replica"). */
int rs_client_config_set_replica_reads(struct rs_client_config *cfg, int on);
/* Threads that run asynchronous operations (0..64, default 1; 0: the
 * async calls run synchronously and return a finished op). */
int rs_client_config_set_async_threads(struct rs_client_config *cfg,
				       unsigned n);
/* Completion waits poll the CQ for this long after the last completion
 * before sleeping on the completion channel (0..1000000 us, default 50:
 * well above a hardware READ's latency, so a busy client never sleeps
 * and an idle one costs nothing). Under emulation, scale it to the
 * emulated READ latency. */
int rs_client_config_set_spin_us(struct rs_client_config *cfg, unsigned us);
/* Trace sampled requests to a JSONL file ("%p" -> pid); rate in [0, 1].
 * NULL path: take RS_TRACE / RS_TRACE_SAMPLE from the environment (the
 * default). Tracing is per process: the first client to open it wins. */
int rs_client_config_set_trace(struct rs_client_config *cfg, const char *path,
			       double rate);

/* RDMA device to use: a name ("rxe0") or the IP address of its netdev;
 * NULL or "" (the default): the first device. */
int rs_client_config_set_device(struct rs_client_config *cfg,
				const char *dev);

/* Credentials for nodes that require them (docs/security.md): a key id
 * and its secret (16..256 bytes), as configured on the nodes with a role.
 * The secret never goes on the wire: each connect request carries a MAC
 * of a fresh nonce and the time, and the client checks the node's MAC in
 * return (a node that cannot prove it knows the secret is refused, so a
 * client with credentials refuses nodes without any). The file form
 * reads the secret from path (one trailing newline ignored; a warning
 * when the file is readable by others). secret NULL: no credentials (the
 * default). The config keeps a copy, zeroed when deleted. A refused
 * connect fails with RS_E_AUTH ("authentication failed", never which
 * part); a request the key's role may not make fails with RS_E_PERM. */
int rs_client_config_set_credentials(struct rs_client_config *cfg,
				     uint32_t key_id, const void *secret,
				     size_t len);
int rs_client_config_set_credentials_file(struct rs_client_config *cfg,
					  uint32_t key_id, const char *path);

/* ---- client ---- */

/* Connect to every node of cfg (cfg is copied; delete it when you like).
 * Nodes in a cluster (docs/client.md, "Cluster mode"): cfg's nodes are
 * seeds; the client learns the members from them, connects the active
 * ones and follows the configuration's changes. */
int rs_client_open(struct rs_client **out,
		   const struct rs_client_config *cfg);
/* Finish outstanding async ops, disconnect, free everything, *c = NULL.
 * Accepts NULL and *c == NULL. */
void rs_client_close(struct rs_client **c);

/* The client's nodes: static mode, the configured ones; cluster mode,
 * its node slots, which grow when members join or move (a moved member's
 * old address keeps its slot: docs/client.md, "Members that join
 * later"). */
unsigned rs_client_node_count(const struct rs_client *c);
/* "addr:port" of node i as configured (cluster mode: as the member
 * registered it); NULL if i is out of range. */
const char *rs_client_node_name(const struct rs_client *c, unsigned i);
/* The node a key lives on (index as in rs_client_node_name()). */
unsigned rs_client_key_node(const struct rs_client *c, uint64_t key);

struct rs_client_stats {
	uint32_t struct_size;	  /* set by the caller: RS_CLIENT_STATS_INIT */
	uint32_t reserved;	  /* written as 0 */
	uint64_t get_keys;	  /* keys asked for by rs_get* */
	uint64_t onesided_keys;	  /* keys served by one-sided READ */
	uint64_t rpc_keys;	  /* keys served by the GET RPC */
	uint64_t rpc_fallbacks;	  /* keys sent to the RPC after torn READs */
	uint64_t torn_retries;	  /* bucket/row READs retried as torn */
	uint64_t stale_locations; /* cache entries found stale by the row */
	uint64_t cache_hits, cache_misses;
	uint64_t reads_posted;	  /* one-sided READ work requests */
	uint64_t rpcs;		  /* request messages sent */
	uint64_t dir_refreshes;	  /* table directory fetches */
	/* Keyed requests sent, by type, and the keys they carried after the
	 * client folded each batch's duplicate keys: with one client, what a
	 * node counts as rs_requests_total{type} and the sum of
	 * rs_batch_keys{type} (docs/metrics.md). */
	struct rs_rpc_count {
		uint64_t requests, keys;
	} rpc_get, rpc_get_or_init, rpc_put, rpc_update, rpc_delete;
	/* since 0.4, cluster mode (docs/client.md, "Cluster mode"); 0 for a
	 * client of nodes that are not in a cluster */
	uint64_t config_refreshes; /* CONFIG rounds to follow a change */
	uint64_t epoch_retries;	   /* keys resent to another primary after
				      an epoch refusal or a node failure */
	/* get calls served by the RPC because the read lease had run out:
	 * at the call's start no node could renew it, or it ended before
	 * the call's READs completed (docs/replication.md, "Read leases") */
	uint64_t lease_rpc_reads;
	/* keys a one-sided get READ at a backup (docs/replication.md,
	 * "Reads from any replica"), and of those the ones the backup did
	 * not have, which the primary then answered (GET RPC) */
	uint64_t backup_keys, backup_misses;
	/* CONFIG asks given up after the wait for one node (at
	 * most 1 s: a stopped node's NIC still takes the request) at open
	 * and in CONFIG rounds; the next node was asked instead */
	uint64_t config_waits_cut;
	/* keys a one-sided get READ at another replica of their
	 * set than its usual one, because a READ or connection of that one
	 * failed in the last 2 s (docs/replication.md, "Reads from any
	 * replica") */
	uint64_t diverted_keys;
	/* since 0.6: the row caches of this client's tables
	 * (rs_table_set_row_cache; docs/client.md, "Row cache") */
	uint64_t row_cache_hits;	/* keys a get served from a row cache */
	uint64_t row_cache_stale_hits;	/* of those, used without a probe
					   (bounded staleness) */
	uint64_t row_cache_probes;	/* version/checksum READs posted */
	uint64_t row_cache_probe_misses; /* probes that found the row changed
					    (the row was READ) */
	uint64_t row_cache_fills;	/* rows entered, from READs and from
					   update replies */
	uint64_t row_cache_update_rows;	/* rows update replies carried */
	uint64_t row_cache_evictions;	/* rows replaced by hotter ones */
	uint64_t row_cache_rejects;	/* rows not admitted (colder than the
					   row they would replace) */
	uint64_t row_cache_invalidations; /* entries dropped as out of date */
	uint64_t row_cache_bytes_saved;	/* row bytes not READ thanks to the
					   caches */
	uint64_t row_cache_bytes;	/* memory the row caches hold */
	/* since 0.9: the bucket-image cache
	 * (rs_client_config_set_bucket_cache_bytes; docs/client.md,
	 * "Bucket images") */
	uint64_t bucket_cache_hits;	/* keys missing the location cache
					   whose row one READ fetched, found
					   in a cached bucket image */
	uint64_t bucket_cache_stale;	/* of those, rows that no longer were
					   the key's (the buckets were READ) */
	uint64_t bucket_cache_fills;	/* images entered (bucket READs and
					   rs_table_prefetch_index) */
	uint64_t bucket_cache_capacity;	/* images it can hold */
};
#define RS_CLIENT_STATS_INIT \
	{ .struct_size = sizeof(struct rs_client_stats) }
/* Fill *out (out->struct_size set by the caller). 0 or RS_E_INVAL. */
int rs_client_get_stats(const struct rs_client *c,
			struct rs_client_stats *out);

/* ---- tables (administration; also what recstore-ctl uses) ---- */

enum rs_dtype { RS_DTYPE_FP32 = 0, RS_DTYPE_FP16 = 1, RS_DTYPE_BF16 = 2 };

/* Same numbering as the server's optimizer kinds (docs/optimizers.md). */
enum rs_optimizer {
	RS_OPT_SGD = 0,
	RS_OPT_ADAGRAD = 1,
	RS_OPT_ROWWISE_ADAGRAD = 2,
	RS_OPT_ADAM = 3,
};

/* Same numbering as the server's initializers (docs/optimizers.md). A
 * created row is a pure function of (kind, parameters, seed, key). */
enum rs_init {
	RS_INIT_ZEROS = 0,    /* all zeros */
	RS_INIT_CONSTANT = 1, /* every element `value` */
	RS_INIT_UNIFORM = 2,  /* uniform in [-a, a] */
	RS_INIT_NORMAL = 3,   /* mean 0, standard deviation `std` */
};

#define RS_TABLE_NAME_MAX 63

struct rs_table_spec {
	uint32_t struct_size;	/* set by the caller: RS_TABLE_SPEC_INIT */
	char name[RS_TABLE_NAME_MAX + 1];
	uint32_t dim;		/* 1..65536 */
	uint32_t dtype;		/* enum rs_dtype */
	uint64_t capacity;	/* rows per node (0: the node's default) */
	struct {
		uint32_t kind;	/* enum rs_optimizer */
		uint32_t flags; /* 1: decoupled weight decay (AdamW) */
		float lr, eps, beta1, beta2, weight_decay;
		float initial_accumulator;
	} optim;
	struct {
		uint32_t kind;	/* enum rs_init */
		float value, a, std;
		uint64_t seed;
	} init;
	/* since 0.4: 0, or a power of two in [2, 2^32] above capacity: the
	 * node doubles the table when it fills, up to this many rows */
	uint64_t max_capacity;
	/* 0.5: eviction and admission (docs/eviction.md); all zero: none,
	 * a full table refuses new keys with RS_E_FULL */
	struct {
		uint32_t policy;      /* enum rs_evict_policy */
		uint32_t admit_after; /* a key gets a row at its k-th sighting
					 (0, 1: at once), <= 255 */
		uint64_t max_rows;    /* cap on live rows per node (needs a
					 policy); 0: the capacity */
		uint32_t ttl_s;	      /* evict rows not written for ttl_s
					 seconds (0: never), <= 10 years */
		uint32_t reserved;    /* 0 */
	} evict;
};

enum rs_evict_policy {
	RS_EVICT_NONE = 0,
	RS_EVICT_LRU = 1,	/* least recently used (sampled) */
	RS_EVICT_LFU = 2,	/* least frequently used, decaying counts */
};

#define RS_TABLE_SPEC_INIT \
	{ .struct_size = sizeof(struct rs_table_spec) }

/* Fill a spec with defaults: fp32, SGD (server default lr), zeros, node's
 * default capacity. spec->struct_size must be set (RS_TABLE_SPEC_INIT);
 * it is kept. RS_E_INVAL for a bad size, name or dim. */
int rs_table_spec_init(struct rs_table_spec *spec, const char *name,
		       uint32_t dim);
/* Optimizer by name ("sgd", "adagrad", "rowwise_adagrad", "adam") with its
 * documented default hyper-parameters. */
int rs_table_spec_set_optimizer(struct rs_table_spec *spec, const char *name);
/* Eviction by name ("none", "lru", "lfu"), cap (0: the capacity), TTL in
 * seconds on the last write (0: none) and admission after admit_after
 * sightings (0 or 1: none). RS_E_INVAL naming the bad value (a cap without
 * a policy, out-of-range TTL or count); the node checks the cap against
 * the capacity. 0.5. */
int rs_table_spec_set_eviction(struct rs_table_spec *spec, const char *policy,
			       uint64_t max_rows, uint32_t ttl_s,
			       uint32_t admit_after);

/* ---- a spec's names and hyper-parameters (since 0.8) ----
 * The spellings of the node config (docs/config.md) and recstore-ctl, for
 * programs that take a spec as text. A name of an unknown value is NULL;
 * a parse of an unknown name is RS_E_INVAL with a message naming it. */
const char *rs_dtype_name(uint32_t dtype);	/* "fp32", "fp16", "bf16" */
int rs_dtype_parse(const char *name);		/* enum rs_dtype */
/* "sgd", "adagrad", "rowwise_adagrad", "adam" */
const char *rs_optimizer_name(uint32_t kind);
/* "zeros", "constant", "uniform", "normal" */
const char *rs_init_name(uint32_t kind);
int rs_init_parse(const char *name);		/* enum rs_init */
const char *rs_evict_name(uint32_t policy);	/* "none", "lru", "lfu" */
int rs_evict_parse(const char *name);		/* enum rs_evict_policy */
/* The bounds rs_table_spec_set_eviction checks. */
#define RS_EVICT_TTL_MAX (3650u * 86400u)	/* seconds: 10 years */
#define RS_EVICT_ADMIT_MAX 255u

/* The hyper-parameters of a spec's optim and init blocks, one row each in
 * the wire's order (docs/optimizers.md): row i's name (the member's and
 * the config's JSON key, e.g. "weight_decay", "a"), its group (the block)
 * and its type. A later release may add rows. */
enum rs_param_group { RS_PARAM_OPTIM = 0, RS_PARAM_INIT = 1 };
enum rs_param_type { RS_PARAM_F32 = 0, RS_PARAM_U32 = 1, RS_PARAM_U64 = 2 };
/* The number of rows. */
unsigned rs_table_spec_param_count(void);
/* 0 with row i's name, group and type (each may be NULL), RS_E_NOTFOUND
 * past the last row. */
int rs_table_spec_param(unsigned i, const char **name, uint32_t *group,
			uint32_t *type);
/* The member of spec that row i names: a float *, uint32_t * or
 * uint64_t * after its type; NULL past the last row. */
void *rs_table_spec_param_ptr(struct rs_table_spec *spec, unsigned i);

/* Create the table on every node (a cluster: every active and joining
 * member, in one configuration epoch; docs/replication.md, "Tables").
 * RS_E_EXISTS if it existed everywhere already (nodes that lacked it get
 * it). */
int rs_table_create(struct rs_client *c, const struct rs_table_spec *spec);
/* Drop it on every node (a cluster: as a create); RS_E_NOTFOUND if no
 * node had it. */
int rs_table_drop(struct rs_client *c, const char *name);
/* Grow it on every node to capacity rows per node (0: double it, up to
 * its max_capacity when it has one), online: reads go on, writes pause
 * for the copy (docs/server.md, "Growth"). RS_E_NOTFOUND if no node had
 * it; RS_E_FULL (bytes needed and free) when a node has no room. */
int rs_table_grow(struct rs_client *c, const char *name, uint64_t capacity);

/* The whole spec of a table, as the first node that has it reports it.
 * spec->struct_size set by the caller. RS_E_NOTFOUND if no node has it. */
int rs_table_get_spec(struct rs_client *c, const char *name,
		      struct rs_table_spec *spec);

/* A summary of one table (rs_table_get_spec() gives the whole spec). It
 * holds no rs_table_spec: both structs grow at their ends, independently. */
struct rs_table_info {
	uint32_t struct_size;	/* set by the caller: RS_TABLE_INFO_INIT */
	uint32_t dim;
	uint32_t dtype;		/* enum rs_dtype */
	uint32_t optimizer;	/* enum rs_optimizer */
	char name[RS_TABLE_NAME_MAX + 1];
	uint64_t rows;		/* live rows, summed over nodes */
	uint64_t capacity;	/* row capacity, summed over nodes */
	float lr;		/* the table's learning rate */
	uint32_t init;		/* enum rs_init */
};
#define RS_TABLE_INFO_INIT \
	{ .struct_size = sizeof(struct rs_table_info) }
/* Tables known to the nodes (the union), sorted by name. Fills up to max
 * entries and returns how many tables there are (may exceed max). The
 * array's element size is out[0].struct_size (set it; the library sets
 * it in every element it fills); out may be NULL when max is 0. */
int rs_table_list(struct rs_client *c, struct rs_table_info *out, size_t max);

/* Per-node counters, as the node reports them in its STATS reply. */
struct rs_node_stats {
	uint32_t struct_size;	/* set by the caller: RS_NODE_STATS_INIT */
	uint32_t reserved;	/* written as 0 */
	uint64_t tables, rows;
	uint64_t rpc_get_keys, rpc_get_or_init_keys, rpc_put_keys;
	uint64_t rpc_update_keys, rpc_delete_keys, rpc_requests;
	uint64_t cpu_user_us, cpu_sys_us; /* node process rusage */
	uint64_t mem_registered;	  /* bytes registered for READ */
};
#define RS_NODE_STATS_INIT \
	{ .struct_size = sizeof(struct rs_node_stats) }
/* Fill *out (out->struct_size set by the caller). */
int rs_node_get_stats(struct rs_client *c, unsigned node,
		      struct rs_node_stats *out);
/* Every counter node `node` reports, as (table name or NULL for the node
 * itself, counter name, value); stops early and returns fn's value if fn
 * returns non-zero. */
int rs_node_stats_foreach(struct rs_client *c, unsigned node,
			  int (*fn)(void *arg, const char *table,
				    const char *key, uint64_t value),
			  void *arg);

/* ---- data ---- */

/* A handle for a table by name. Handles are owned by the client (the same
 * pointer for the same name) and live until rs_client_close(). The
 * client re-reads a node's table directory when the node reports that it
 * changed, so a handle stays usable across drop + create. */
int rs_table_open(struct rs_client *c, const char *name,
		  struct rs_table **out);
uint32_t rs_table_dim(const struct rs_table *t);
/* READ the table's whole index at every node that serves it one-sided, in
 * large READs, into the bucket-image cache (at most its capacity): a
 * trainer's first get of any key then takes one round trip. Images
 * torn by a concurrent writer are skipped (the cold path READs those
 * buckets). *buckets (may be NULL): images entered. 0, or an error
 * (RS_E_INVAL: the cache is disabled). */
int rs_table_prefetch_index(struct rs_table *t, uint64_t *buckets);
const char *rs_table_name(const struct rs_table *t);

#define RS_KEY_MISSING 0
#define RS_KEY_FOUND 1
#define RS_KEY_CREATED 2

/* flags of the data calls */
#define RS_F_RPC 0x1u	  /* gets: use the GET RPC, not one-sided READ */
#define RS_F_NOCACHE 0x2u /* gets: neither use nor fill the location cache
			     nor the bucket-image cache */
/* since 0.9, gets: get-or-init in one call. Keys found one-sided are READ
 * as without it; a key found in neither of its buckets at the first READ
 * (no second round to prove it absent), and every key a get would send
 * to the GET RPC, goes to the GET_OR_INIT RPC, which returns its row or
 * creates it from the table's initializer (status RS_KEY_CREATED). The
 * result counts found and created keys. */
#define RS_F_INIT 0x4u

/* Read n rows into out[n * dim]. Keys may repeat. */
int rs_get(struct rs_table *t, const uint64_t *keys, size_t n, float *out,
	   int *status, unsigned flags);

/* One key of a batch that spans tables (a recommendation model's sparse
 * features: one batch, many tables). out receives dim floats. A fixed
 * tuple, passed by arrays on the hot path: it never grows (a call that
 * needs more per key will take a new struct). */
struct rs_key_ref {
	struct rs_table *table;
	uint64_t key;
	float *out;
};
/* rs_get over keys of any tables of one client, in one round of READs. */
int rs_get_multi(struct rs_client *c, const struct rs_key_ref *refs,
		 size_t n, int *status, unsigned flags);
/* Like rs_get, but a missing key is created on its node from the table's
 * initializer (status RS_KEY_CREATED) and returned. */
int rs_get_or_init(struct rs_table *t, const uint64_t *keys, size_t n,
		   float *out, int *status, unsigned flags);
/* Apply the table's optimizer with gradients grads[n * dim]. Duplicate
 * keys in one call are summed and applied as ONE step. Missing keys are
 * not created (status RS_KEY_MISSING). */
int rs_update(struct rs_table *t, const uint64_t *keys, size_t n,
	      const float *grads, int *status, unsigned flags);
/* Options of one update (all optional; zero means the default). */
struct rs_update_opts {
	uint32_t struct_size;	/* set by the caller: RS_UPDATE_OPTS_INIT */
	uint32_t flags;		/* RS_UPDATE_* */
	float lr;		/* with RS_UPDATE_LR: this step's learning
				   rate, finite and >= 0 (a learning-rate
				   schedule); else the table's lr */
};
#define RS_UPDATE_OPTS_INIT \
	{ .struct_size = sizeof(struct rs_update_opts) }
#define RS_UPDATE_LR 0x1u /* use opts->lr instead of the table's lr */
/* since 0.6: a missing key is handled by the table's policy instead of
 * answering RS_KEY_MISSING: created from the initializer, then the step
 * (status RS_KEY_CREATED); in a table with admission, a sighting that
 * does not yet admit the key leaves it absent and drops its gradient
 * (status RS_KEY_FOUND, counted by the node as
 * admission.unadmitted_updates; docs/eviction.md). What a trainer sends
 * for rows it looked up with rs_get_or_init(). */
#define RS_UPDATE_CREATE 0x2u
/* rs_update with options (opts NULL: exactly rs_update). An lr that is
 * NaN, infinite or negative fails the call with RS_E_INVAL before
 * anything is sent (and a node refuses one as well). The lr applies to
 * this call only: the table's lr is unchanged. */
int rs_update_ex(struct rs_table *t, const uint64_t *keys, size_t n,
		 const float *grads, int *status, unsigned flags,
		 const struct rs_update_opts *opts);
/* The rows a node would create for keys with rs_get_or_init(), computed
 * here without the network: the initializer of spec (a pure function of
 * its kind, parameters, seed and the key; docs/optimizers.md,
 * "Initializers"), rounded to spec->dtype as the node stores it. For a
 * lookup that must not write (a trainer in evaluation). out[n * dim].
 * RS_E_INVAL naming the bad field of spec. Since 0.6. */
int rs_table_init_rows(const struct rs_table_spec *spec, const uint64_t *keys,
		       size_t n, float *out);
/* One gradient of a batch that spans tables (a training step's update of
 * all its tables). grad points at dim floats. A fixed tuple, like
 * struct rs_key_ref. Since 0.6. */
struct rs_grad_ref {
	struct rs_table *table;
	uint64_t key;
	const float *grad;
};
/*
 * A row cache for table t on this client (since 0.6; docs/client.md, "Row
 * cache"): hot rows kept here, in at most `bytes` of memory (rows,
 * metadata and the frequency sketch), admitted by frequency. A get of a
 * cached key proves the copy current with a 16-byte READ of the row's
 * version and checksum words (exact, the default), or with
 * RS_ROW_CACHE_STALE uses a copy at most max_stale_steps steps old
 * (rs_client_step) without any READ. Updates of t ask the node for the
 * new rows, so rows this client updates stay cached and current. bytes 0
 * removes t's cache. Not concurrently with data calls on t. RS_E_INVAL
 * if bytes cannot hold 8 rows.
 */
struct rs_row_cache_opts {
	uint32_t struct_size;	/* set by the caller: RS_ROW_CACHE_OPTS_INIT */
	uint32_t flags;		/* RS_ROW_CACHE_* */
	uint64_t bytes;		/* memory budget; 0: no cache */
	uint32_t max_stale_steps; /* with RS_ROW_CACHE_STALE */
	uint32_t reserved;	/* 0 */
};
#define RS_ROW_CACHE_OPTS_INIT \
	{ .struct_size = sizeof(struct rs_row_cache_opts) }
#define RS_ROW_CACHE_STALE 0x1u
int rs_table_set_row_cache(struct rs_table *t,
			   const struct rs_row_cache_opts *opts);
/* Advance this client's step clock (one training step: what bounded
 * staleness counts); returns the new step. Since 0.6. */
uint64_t rs_client_step(struct rs_client *c);
/* rs_update_ex over keys of any tables of one client, in one exchange:
 * every node gets its requests of every table before any reply is
 * awaited (not one round trip per table). A (table, key) that repeats is
 * summed into one step, as rs_update. opts apply to every key (NULL: none).
 * Returns the count of keys applied, or an error for the whole call. */
int rs_update_multi(struct rs_client *c, const struct rs_grad_ref *refs,
		    size_t n, int *status, unsigned flags,
		    const struct rs_update_opts *opts);
/* Write rows (create or overwrite; optimizer state of a new key starts
 * fresh). With duplicate keys the last row wins. */
int rs_put(struct rs_table *t, const uint64_t *keys, size_t n,
	   const float *values, int *status, unsigned flags);
int rs_delete(struct rs_table *t, const uint64_t *keys, size_t n,
	      int *status, unsigned flags);

/* ---- asynchronous forms ----
 * Start the operation and return at once with *op; the buffers stay the
 * caller's and must live until the op is finished. */
int rs_get_async(struct rs_table *t, const uint64_t *keys, size_t n,
		 float *out, int *status, unsigned flags, struct rs_op **op);
int rs_get_multi_async(struct rs_client *c, const struct rs_key_ref *refs,
		       size_t n, int *status, unsigned flags,
		       struct rs_op **op);
int rs_update_async(struct rs_table *t, const uint64_t *keys, size_t n,
		    const float *grads, int *status, unsigned flags,
		    struct rs_op **op);
/* opts is read before the call returns (it need not outlive it). */
int rs_update_ex_async(struct rs_table *t, const uint64_t *keys, size_t n,
		       const float *grads, int *status, unsigned flags,
		       const struct rs_update_opts *opts, struct rs_op **op);
/* 1 if finished, 0 if still running. */
int rs_op_test(struct rs_op *op);
/* Wait for the op, free it (*op = NULL) and return what the synchronous
 * call would have returned. */
int rs_op_wait(struct rs_op **op);

/* ---- checkpoints (docs/checkpoint.md) ----
 *
 * A checkpoint is a directory: a MANIFEST and one compressed, checksummed
 * part file per table and node, in a format independent of the node
 * count (docs/checkpoint-format.md). Taking one pauses the store's writes
 * for the time the nodes take to write their parts (writes meanwhile are
 * retried by the library, reads go on). The nodes write the parts
 * themselves: each must see the directory as <its checkpoint_dir>/<last
 * component of path> (a shared file system, or one host). Restoring
 * reads the parts here and loads them into any store, of any node count.
 */

/* Progress of a long checkpoint or restore, passed to the callback (at
 * most once a second, and at every phase). Filled by the library:
 * struct_size is the library's; read only fields within it. */
struct rs_ckpt_progress {
	uint32_t struct_size;
	uint32_t reserved;
	const char *phase;	/* "freeze", "dump", "verify", "load", "done" */
	uint64_t rows, bytes;	/* done so far */
	uint64_t total_rows;	/* restore: the checkpoint's; else 0 */
	uint64_t total_bytes;	/* restore: the checkpoint's; else 0 */
	uint64_t elapsed_us;
};

#define RS_CKPT_EXPORT 1u	/* rows only, no optimizer state (serving) */

struct rs_ckpt_opts {
	uint32_t struct_size;	/* set by the caller: RS_CKPT_OPTS_INIT */
	uint32_t flags;		/* RS_CKPT_EXPORT */
	uint32_t freeze_ms;	/* nodes resume writes alone after this
				 * (a checkpointer that died); 0: 60 s */
	uint32_t ntables;	/* 0: every table */
	const char *const *tables;	/* ntables names */
	void (*progress)(void *arg, const struct rs_ckpt_progress *p);
	void *arg;
	/* since 0.4: rs_checkpoint takes an increment on the checkpoint in
	 * this directory (a sibling of path; only the rows changed and the
	 * keys deleted since it, of its tables); NULL: a full checkpoint */
	const char *base;
};
#define RS_CKPT_OPTS_INIT { .struct_size = sizeof(struct rs_ckpt_opts) }

/* What a checkpoint holds, or what a restore loaded. */
struct rs_ckpt_report {
	uint32_t struct_size;	/* set by the caller: RS_CKPT_REPORT_INIT */
	uint32_t tables, parts;
	uint32_t with_state;	/* 1: rows and optimizer state; 0: export */
	uint64_t rows, bytes;	/* rows; bytes of the part files */
	uint64_t raw_bytes;	/* the records, uncompressed */
	uint64_t paused_us;	/* checkpoint: longest write pause of a node */
	uint64_t elapsed_us;
	char id[40];		/* the checkpoint's id: 32 hex digits */
	/* since 0.8 */
	uint64_t deleted;	/* keys deleted (an increment records them) */
	uint32_t incremental;	/* rs_checkpoint, rs_ckpt_verify: 1 for an
				 * increment; rs_restore: 0 */
	uint32_t reserved;
};
#define RS_CKPT_REPORT_INIT { .struct_size = sizeof(struct rs_ckpt_report) }

/* Checkpoint c's store (the tables of opts, all when opts is NULL or
 * names none) into path: a new or empty directory. rep may be NULL. */
int rs_checkpoint(struct rs_client *c, const char *path,
		  const struct rs_ckpt_opts *opts, struct rs_ckpt_report *rep);
/* Verify the checkpoint in path (an increment: with its chain of bases
 * back to a full checkpoint, found by the directory names the manifests
 * record), then load it (the chain, oldest first) into c's store: tables are
 * created as the checkpoint has them (an existing one must have the same
 * dim, dtype and optimizer), rows and optimizer state set as they were
 * (an export's rows keep the store's state). Nothing is written when
 * verification fails. */
int rs_restore(struct rs_client *c, const char *path,
	       const struct rs_ckpt_opts *opts, struct rs_ckpt_report *rep);
/* Check every file of the checkpoint in path (sizes, checksums, every
 * record); RS_E_CORRUPT or -ENOENT with a message that names the file.
 * No store needed. rep may be NULL. */
int rs_ckpt_verify(const char *path, struct rs_ckpt_report *rep);

/* Reading a checkpoint or an export without a store (e.g. to serve). */
struct rs_ckpt_reader;
/* Verify the checkpoint in path and open it for reading. */
int rs_ckpt_reader_open(struct rs_ckpt_reader **out, const char *path);
void rs_ckpt_reader_close(struct rs_ckpt_reader **r);
/* Its tables, 0 .. count - 1. */
unsigned rs_ckpt_reader_table_count(const struct rs_ckpt_reader *r);
/* Table i's spec (spec->struct_size set by the caller) and the optimizer
 * state floats per row it holds (0 in an export; may be NULL). */
int rs_ckpt_reader_table(const struct rs_ckpt_reader *r, unsigned i,
			 struct rs_table_spec *spec, uint32_t *state_floats);
/* The next rows of table i: up to max keys, their rows (dim fp32 each,
 * whatever the table's dtype) and, when state is not NULL and the
 * checkpoint has it, their optimizer state (state_floats each). Returns
 * how many (0 at the end of the table) or an error. Tables are read
 * independently, each once from its start. */
int rs_ckpt_reader_read(struct rs_ckpt_reader *r, unsigned i, uint64_t *keys,
			float *rows, float *state, size_t max);

#ifdef __cplusplus
}
#endif
#endif
