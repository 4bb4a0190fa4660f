/*
 * config.h - the memory node's config (prefix srv_config_): one object,
 * struct srv_config, that the JSON file fills, that the public
 * rs_server_config wraps (srv_config_api.c) and that the node runs on.
 * Reference with an example: docs/config.md.
 *
 * The parser is strict: an unknown field is an error (typo protection,
 * with a "did you mean" when a known field is close), so is a field the
 * chosen optimizer or initializer does not use, a wrong JSON type, a value
 * out of range, a duplicate key or a duplicate table name. Every error is
 * RS_E_INVAL with a message that starts with the field's path, e.g.
 *   tables[2].optimizer.lr: must be a finite number > 0
 * (srv_config_load() prefixes the file name). Missing fields take the
 * defaults below, so "{}" and a NULL path are complete configs.
 *
 * The config creates no tables by itself: `tables` lists those the node
 * creates at start (if missing); others come from TABLE_CREATE RPCs.
 *
 * Ownership: srv_config_load()/srv_config_parse() allocate *out; free it
 * with srv_config_free(), which frees the strings and tables too. A config
 * is plain data: read it from any thread once loaded. A node keeps a copy
 * of its own (srv_config_copy()), released with srv_config_clear().
 */
#ifndef RS_SERVER_CONFIG_H
#define RS_SERVER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/proto.h"
#include "coord/coord.h"

enum srv_backend {
	SRV_BACKEND_DRAM = 0,
	SRV_BACKEND_PMEM = 1,
};

#define SRV_CONFIG_STORAGE_BYTES (256ull << 20)
#define SRV_CONFIG_MIN_STORAGE_BYTES (1ull << 20)
/* Rows of a table created with capacity 0 (at most: see docs/config.md,
 * "default_capacity"). The client's rs_table_spec_init() asks for it. */
#define SRV_CONFIG_DEFAULT_CAPACITY (1ull << 20)
#define SRV_CONFIG_WORKERS 2
#define SRV_CONFIG_MAX_WORKERS 256
#define SRV_CONFIG_TRACE_SAMPLE 0.01
#define SRV_CONFIG_MESSAGE_BYTES (256u << 10)
#define SRV_CONFIG_CONNS_PER_PEER 16
#define SRV_CONFIG_KEEPALIVE_MS 5000
#define SRV_CONFIG_MAX_KEEPALIVE_MS 3600000
#define SRV_CONFIG_SEND_TIMEOUT_MS 2000
#define SRV_CONFIG_MIN_SEND_TIMEOUT_MS 10
#define SRV_CONFIG_MAX_SEND_TIMEOUT_MS 600000
#define SRV_CONFIG_ADDR_MAX 255
#define SRV_CONFIG_COORD_LEASE_MS 5000
#define SRV_CONFIG_MIN_COORD_LEASE_MS 2000	/* etcd's minimum TTL */
#define SRV_CONFIG_MAX_COORD_LEASE_MS 600000
#define SRV_CONFIG_COORD_ENDPOINTS 8
#define SRV_CONFIG_COORD_URL_MAX 255
#define SRV_CONFIG_COORD_REPLICAS 3
#define SRV_CONFIG_DEVICE_MAX 63

/* One credential of the "auth" section: exactly one of secret and
 * secret_file is set (the file is read when the config is applied). */
struct srv_config_key {
	uint32_t id;		  /* 1..2^32-1, unique */
	uint32_t role;		  /* enum auth_role */
	char *secret;		  /* 16..256 bytes, or NULL */
	char *secret_file;	  /* or NULL */
};

struct srv_config {
	char name[PROTO_NAME_MAX + 1];	      /* node name; "" */
	char device[SRV_CONFIG_DEVICE_MAX + 1]; /* RDMA device; "": the
						   device of listen_addr */
	char listen_addr[SRV_CONFIG_ADDR_MAX + 1]; /* "": the first IPv4
						      address of the device */
	uint16_t listen_port;	  /* RS_DEFAULT_PORT; 0: any free port */
	uint16_t metrics_port;	  /* Prometheus endpoint; 0: off */
	uint32_t backend;	  /* enum srv_backend; DRAM */
	char *storage_path;	  /* PMEM file; NULL with DRAM */
	uint64_t storage_bytes;	  /* 256 MiB */
	int storage_format;	  /* format a path holding no valid pool
				     even if not blank; 0 */
	uint64_t default_capacity; /* rows of a capacity-0 create; 1 Mi */
	uint32_t workers;	  /* RPC worker threads; 2 */
	uint32_t spin_us;	  /* adaptive polling window; 50 */
	uint32_t max_conns_per_peer; /* from one IP address; 0: any; 16 */
	uint32_t keepalive_ms;	  /* probe idle peers; 0: off; 5000 */
	uint32_t send_timeout_ms; /* a peer's replies without a credit this
				     long: it is cut off; 2000 */
	char *trace_path;	  /* JSONL trace file; NULL: tracing off */
	char *checkpoint_dir;	  /* where DUMP writes parts (a directory
				     per checkpoint); NULL: refused */
	double trace_sample;	  /* fraction of requests traced; 0.01 */
	struct proto_limits limits; /* max_message_bytes 256 KiB (the
				       node's receive buffers),
				       max_batch_keys 65536, max_dim 4096,
				       max_tables 1024 */
	uint32_t ntables;
	struct proto_table_spec *tables; /* ntables, validated */
	uint32_t nkeys;
	struct srv_config_key *keys;	/* "auth.keys"; none: no checks */
	uint32_t auth_skew_s;		/* "auth.max_skew_s"; 60 */
	/* "coord": membership in etcd (docs/replication.md); absent: none */
	char *coord_endpoints;		/* URLs joined by ','; NULL: off */
	char coord_cluster[PROTO_NAME_MAX + 1];
	char coord_id[PROTO_NAME_MAX + 1]; /* "": the node's name */
	uint32_t coord_lease_ms;	/* 5000 */
	uint32_t coord_replicas;	/* r of a first configuration; 3 */
	int coord_decide;		/* may become the decider; 1 */
	uint32_t coord_initial_members;	/* first configuration waits for
					   this many nodes; 1 */
	uint32_t coord_keep_s;		/* a member kept as the last complete
					   holder of a range goes down after
					   this long unregistered; 0: never */
	/* coord.tls.{ca,cert,key}_file, coord.user, coord.password_file */
	struct coord_etcd_files coord_sec;

	/* What the file does not set: the library's own, with their
	 * defaults in srv_config_defaults(). */
	char metrics_addr[64];	  /* "": 127.0.0.1 */
	uint32_t slab_flags;	  /* SLAB_F_HUGEPAGES; SLAB_F_FORMAT is
				     storage_format's (srv_config_slab_flags) */
	double index_load;	  /* 0: the slab store's default */
	uint32_t credits;	  /* receive buffers per connection - 1; 16 */
	uint32_t max_conns;	  /* 128 */
	/* The credentials a node checks: rs_server_config_add_key*(), and
	 * keys[] when the file is loaded as a node config (secret files
	 * read then; keys[] is emptied). Secrets zeroed when freed. */
	struct auth_key *creds;
	size_t ncreds;
};

/*
 * The scalar settings: one row each, in the order the parser reads them
 * (a section's rows after the top level's). The row drives the JSON
 * parser, srv_config_defaults() and srv_config_set(), so a setting is
 * added in one place. Sections with structure (tables[], auth.keys[],
 * coord.endpoints[]) and the objects themselves have their own code and
 * are listed in srv_config_structured[].
 */
enum srv_config_kind {
	SRV_CK_UINT,	/* JSON integer in [lo, hi]; u16, u32 or u64 */
	SRV_CK_SIZE,	/* byte count or "1GiB" in [lo, hi] */
	SRV_CK_BOOL,	/* true / false into an int */
	SRV_CK_STR,	/* string into a char array (width - 1 bytes) */
	SRV_CK_PATH,	/* non-empty string or null, owned char * */
	SRV_CK_TEXT,	/* string of lo..hi bytes or null, owned char * */
	SRV_CK_ENUM,	/* one of names[] into a uint32_t (its index) */
	SRV_CK_FLOAT,	/* JSON number in [flo, fhi] into a double */
};

struct srv_config_row {
	const char *path;	/* "workers", "storage.size" */
	enum srv_config_kind kind;
	size_t off, width;	/* of the field in struct srv_config */
	uint64_t lo, hi, def;	/* UINT, SIZE; TEXT: lo, hi bytes;
				   BOOL, ENUM: def */
	double flo, fhi, fdef;	/* FLOAT */
	const char *const *names; /* ENUM */
	const char *what;	/* ENUM: "backend"; STR: checked as a name,
				   "a node name" (when not empty) */
};

extern const struct srv_config_row srv_config_rows[];
extern const size_t srv_config_nrows;
/* The JSON paths with their own code: objects and arrays. NULL-ended. */
extern const char *const srv_config_structured[];

/* The row of path, or NULL. */
const struct srv_config_row *srv_config_row(const char *path);

/* The keys the parser accepts in the object at path ("" the top level,
 * "coord.tls"), NULL-terminated; NULL for no such object. */
const char *const *srv_config_keys(const char *path);

/*
 * Set the row at path from a string, with the checks and messages of the
 * file: value is what the JSON would hold, unquoted ("4", "2GiB", "true",
 * "pmem", "0.5"); NULL stands for null. RS_E_INVAL names the path, an
 * unknown one with the closest known path; -ENOMEM. Checks of one value
 * only (whether a pmem backend has a path is for the caller).
 */
int srv_config_set(struct srv_config *c, const char *path, const char *value);

/* Fill *c with the defaults (no allocation; nothing to free): the rows'
 * and the library's own fields. */
void srv_config_defaults(struct srv_config *c);

/* The rows' range checks over the values *c holds, with the parser's
 * messages ("workers: must be an integer in [1, 256]"): what
 * srv_config_validate() makes of fields set without a row. */
int srv_config_check_rows(const struct srv_config *c);

/* The member id in etcd: coord.id, else the node's name. */
const char *srv_config_member_id(const struct srv_config *c);

/* The slab store's flags: slab_flags with SLAB_F_FORMAT when
 * storage.format is set. */
unsigned srv_config_slab_flags(const struct srv_config *c);

/* dst = a deep copy of src (strings, tables, keys, credentials). 0, or
 * -ENOMEM with dst holding nothing. */
int srv_config_copy(struct srv_config *dst, const struct srv_config *src);

/* Free what *c owns (secrets zeroed) and leave it empty; not c itself. */
void srv_config_clear(struct srv_config *c);

/* Parse the file at path (NULL: the defaults). 0 and *out, -errno if the
 * file cannot be read, RS_E_INVAL for a bad config, -ENOMEM. */
int srv_config_load(struct srv_config **out, const char *path);

/* Parse JSON text of len bytes (need not be NUL-terminated). */
int srv_config_parse(struct srv_config **out, const char *text, size_t len);

/* Free a config and everything it owns; *c = NULL. Accepts NULL. */
void srv_config_free(struct srv_config **c);

/*
 * A byte size: an integer with an optional unit, case-insensitive, with
 * optional spaces in between: B; K, M, G, T and KiB, MiB, GiB, TiB
 * (powers of 1024); KB, MB, GB, TB (powers of 1000). "1GiB", "512 M".
 * 0 and *out, or RS_E_INVAL (bad syntax, overflow) with a message.
 */
int srv_config_parse_size(const char *s, uint64_t *out);

#endif
