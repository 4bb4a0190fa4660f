/*
 * proto.h - the binary RPC format between clients and memory nodes
 * (prefix proto_). Message formats, field by field: docs/protocol.md.
 *
 * A message is one SEND (src/verbs carries it; no fragmentation): a fixed
 * 32-byte header, then an opcode-specific body. Every field is a
 * fixed-width little-endian integer (floats: IEEE-754 binary32 bit
 * patterns) written and read byte by byte through the functions here; no
 * wire struct is ever cast onto a buffer. Bulk arrays (keys, per-key
 * statuses, row elements) start at 8-byte aligned message offsets.
 *
 * Requests larger than the receiver's buffer must be split by the sender:
 * proto_keys_per_msg() says how many keys fit in a request AND its reply.
 *
 * Decoding. proto_decode() is the single entry point for any received
 * message: it checks the header (magic, version, known opcode and flags,
 * body length equal to what was received, total within the limits), then
 * the body: every length against the bytes present, every count against
 * the limits, enums against their ranges, reserved bytes zero, no trailing
 * bytes. It never reads outside [msg, msg + len) and never allocates.
 * Errors (always with an rs_errormsg() naming the message and field):
 *   RS_E_PROTO  malformed: bad magic / version / opcode / flags, truncated,
 *               trailing bytes, unknown enum value, non-zero reserved;
 *   RS_E_TOOBIG a count or size over a limit (keys, dim, tables, bytes);
 *   RS_E_INVAL  well-formed but out of range (bad table name, lr <= 0).
 *
 * Ownership: a decoded struct proto_msg points into the message buffer
 * (keys, statuses, rows, list entries): it is valid while that buffer is
 * (for a received message: until rv_msg_release()). Strings are copied
 * into fixed NUL-terminated arrays. Bulk pointers refer to WIRE data
 * (little-endian, unaligned as far as C is concerned): read them with
 * proto_load_*() / proto_key_at() / proto_status_at(). Encoders take HOST
 * arrays (uint64_t keys, float or uint16_t elements).
 *
 * Encoders write a complete message into buf (cap bytes, e.g. a send slot
 * from rv_msg_get_buf()) and return its total length (> 0) or RS_E_TOOBIG
 * if it does not fit (RS_E_INVAL for a value no decoder would accept).
 * From the caller's struct proto_hdr they take req_id, trace_id, the
 * PROTO_F_TRACE flag, for replies status, and for TABLE_CREATE, TABLE_DROP
 * and TABLE_GROW requests the PROTO_F_EPOCH flag with epoch; the encoder sets magic,
 * version, opcode, PROTO_F_REPLY and body_len.
 *
 * Everything here is reentrant; nothing keeps state.
 */
#ifndef RS_COMMON_PROTO_H
#define RS_COMMON_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/spec.h"

#define PROTO_MAGIC 0x31505352u /* bytes 'R' 'S' 'P' '1' */
#define PROTO_VERSION 1
#define PROTO_HDR_BYTES 32

/* Hard ceilings (a struct proto_limits may only lower them). */
#define PROTO_MIN_MESSAGE_BYTES 4096u
#define PROTO_MAX_MESSAGE_BYTES (256u << 20)
#define PROTO_MAX_BATCH_KEYS (1u << 24)
#define PROTO_MAX_DIM (1u << 16)
#define PROTO_MAX_TABLES 65536u
/* Rows of one table on one node: row references are 32-bit, UINT32_MAX is
 * "none". A TABLE_CREATE capacity of 0 asks for the node's default. */
#define PROTO_MAX_CAPACITY 0xFFFFFFFEull
#define PROTO_MAX_GROW_LOG2 32u /* 2^32 rows: capped at PROTO_MAX_CAPACITY */
#define PROTO_NAME_MAX 63     /* table, node, client and counter names */
#define PROTO_ERRMSG_MAX 511  /* error text in an error reply */
#define PROTO_NO_TABLE 0xffffffffu /* stats entry of the node itself */

/* Defaults of struct proto_limits. */
#define PROTO_DEFAULT_MESSAGE_BYTES (1u << 20)
#define PROTO_DEFAULT_BATCH_KEYS 65536u
#define PROTO_DEFAULT_DIM 4096u
#define PROTO_DEFAULT_TABLES 1024u

enum proto_op {
	PROTO_OP_HELLO = 1,
	PROTO_OP_TABLE_CREATE = 2,
	PROTO_OP_TABLE_DROP = 3,
	PROTO_OP_TABLE_DIR = 4,
	PROTO_OP_GET = 5,
	PROTO_OP_GET_OR_INIT = 6,
	PROTO_OP_PUT = 7,
	PROTO_OP_UPDATE = 8,
	PROTO_OP_DELETE = 9,
	PROTO_OP_STATS = 10,
	PROTO_OP_CKPT = 11,	/* checkpoint phases (admin) */
	PROTO_OP_LOAD = 12,	/* rows with optimizer state (admin, keyed) */
	PROTO_OP_CONFIG = 13,	/* the cluster configuration the node follows */
	PROTO_OP_REPL = 14,	/* primary -> backup: rows and state (admin) */
	PROTO_OP_COPY = 15,	/* new replica -> primary: copy ranges (admin) */
	PROTO_OP_TABLE_GROW = 16, /* grow a table (admin) */
	PROTO_OP_COUNT
};

/* struct proto_hdr.flags */
#define PROTO_F_REPLY 0x1u /* a reply (else a request) */
#define PROTO_F_TRACE 0x2u /* sampled: trace_id names a trace */
#define PROTO_F_EPOCH 0x4u /* TABLE_CREATE, TABLE_DROP, TABLE_GROW
			      requests only: the
			      configuration epoch the client follows
			      (hdr.epoch, >= 1) ends the body
			      (PROTO_EPOCH_BYTES): a cluster member takes
			      the change only in that epoch */
#define PROTO_F_FROM 0x8u /* REPL requests only: the sending member's
			     incarnation and the REPL's sequence number
			     (repl_req.from_inc, from_seq, both >= 1) and
			     the table's identity (table_ident, 0: none)
			     end the body (PROTO_FROM_BYTES) */
#define PROTO_F_ALL (PROTO_F_REPLY | PROTO_F_TRACE | PROTO_F_EPOCH | \
		     PROTO_F_FROM)
#define PROTO_FROM_BYTES 24u

/* struct proto_keys_req.flags */
#define PROTO_KF_CREATE 0x1u /* UPDATE: initialise missing keys, then
				apply (else they fail with RS_E_NOTFOUND) */
#define PROTO_KF_LR 0x2u     /* UPDATE: apply with lr instead of the
				table's learning rate (lr finite, >= 0) */
#define PROTO_KF_EPOCH 0x4u  /* GET .. DELETE: the configuration epoch the
				client routed by follows the fixed part
				(PROTO_EPOCH_BYTES more; keys at offset 40) */
#define PROTO_EPOCH_BYTES 8u
#define PROTO_KF_ONCE 0x8u   /* GET_OR_INIT, PUT, UPDATE, DELETE: exactly
				once (docs/replication.md): client, seq and
				done_below follow (the epoch first, if any):
				PROTO_ONCE_BYTES more */
#define PROTO_ONCE_BYTES 24u
#define PROTO_KF_ROWS 0x10u  /* UPDATE: the reply carries every key's row
				as stored after the step, with its
				version, checksum and slot (an images
				reply, PROTO_IMAGE_BYTES per key): what a
				client's row cache keeps (docs/client.md,
				"Row cache") */
#define PROTO_IMAGE_BYTES 24u /* version u64, checksum u64, slot u32,
				 zero u32; all zero: no image */

/* struct proto_ckpt_req.phase (docs/checkpoint.md) */
enum proto_ckpt_phase {
	PROTO_CKPT_FREEZE = 1,	/* pause writes (RS_E_BUSY), wait for those
				   in flight; thaw alone after timeout_ms */
	PROTO_CKPT_DUMP = 2,	/* write one table's keys to a part file
				   (frozen only) */
	PROTO_CKPT_THAW = 3,	/* resume writes */
};
#define PROTO_CKF_STATE 0x1u	/* DUMP: with optimizer state */
#define PROTO_CKF_EPOCH 0x4u	/* FREEZE, DUMP: the configuration epoch
				 * follows (a cluster: docs/checkpoint.md) */
#define PROTO_CKF_INCR 0x2u	/* DUMP: only the changes since `base`
				 * (with PROTO_CKF_STATE; base follows id
				 * on the wire) */
#define PROTO_CKF_HELD 0x8u	/* DUMP of a cluster member (with
				 * PROTO_CKF_EPOCH, not INCR): every row the
				 * node holds, backup copies too; an
				 * inspection of one node (a checkpoint never
				 * sets it), no base of later increments */
#define PROTO_CKPT_ID_BYTES 16

/* Per-key status in keyed replies: 0, PROTO_ST_CREATED or a negative
 * error code (RS_E_NOTFOUND, RS_E_FULL, -ENOMEM, ...). */
#define PROTO_ST_OK 0
#define PROTO_ST_CREATED 1 /* the key did not exist and was initialised */

enum proto_dtype {
	PROTO_DTYPE_FP32 = 0,
	PROTO_DTYPE_FP16 = 1, /* IEEE binary16 bit patterns */
	PROTO_DTYPE_BF16 = 2, /* bfloat16 bit patterns */
	PROTO_DTYPE_COUNT
};

struct proto_hdr {
	uint8_t version;
	uint8_t opcode;	   /* enum proto_op */
	uint16_t flags;	   /* PROTO_F_* */
	uint64_t req_id;   /* chosen by the client, echoed in the reply */
	uint64_t trace_id; /* end-to-end trace id (0: none) */
	uint32_t body_len; /* bytes after the header */
	int32_t status;	   /* replies: 0 or the request's error code */
	uint64_t epoch;	   /* with PROTO_F_EPOCH (TABLE_CREATE, TABLE_DROP,
			      TABLE_GROW requests): >= 1, in the body;
			      else 0 */
};

struct proto_limits {
	uint32_t max_message_bytes; /* whole message, header included */
	uint32_t max_batch_keys;
	uint32_t max_dim;
	uint32_t max_tables;
};

/* ---- shared pieces ------------------------------------------------------ */

/* What a table is (TABLE_CREATE request, config "tables", directory). */
/* Optional eviction and admission of a table (docs/eviction.md). All zero:
 * none (a full table refuses inserts with RS_E_FULL). On the wire only
 * when not all zero: bit 0 of the spec flags byte, then a block after the
 * table name. */
enum proto_evict_policy {
	PROTO_EVICT_NONE = 0,
	PROTO_EVICT_LRU = 1,
	PROTO_EVICT_LFU = 2,
	PROTO_EVICT_COUNT
};
#define PROTO_SPEC_F_EVICT 0x1u
#define PROTO_SPEC_F_GROW 0x2u	/* a growth block follows (grow_log2) */
#define PROTO_SPEC_F_IDENT 0x4u	/* an identity block follows (ident) */
#define PROTO_EVICT_TTL_MAX (3650u * 86400u) /* seconds: 10 years */
#define PROTO_EVICT_ADMIT_MAX 255u

struct proto_evict {
	uint32_t policy;   /* enum proto_evict_policy */
	uint32_t admit_after; /* a key gets a row at its k-th sighting
			      (0, 1: at once); <= PROTO_EVICT_ADMIT_MAX */
	uint64_t max_rows; /* cap on live rows (needs a policy); 0: the
			      capacity */
	uint32_t ttl_s;	   /* evict rows not written for ttl_s seconds;
			      0: none; <= PROTO_EVICT_TTL_MAX */
};

struct proto_table_spec {
	char name[PROTO_NAME_MAX + 1]; /* [A-Za-z0-9_.-]{1,63} */
	uint32_t dim;		       /* 1..max_dim */
	uint32_t dtype;		       /* enum proto_dtype: storage format */
	uint64_t capacity;	       /* rows, 1..PROTO_MAX_CAPACITY; 0 in
					  a TABLE_CREATE request: the
					  node's default */
	struct optim_params optim;
	struct init_params init;
	uint8_t grow_log2;	       /* 0: fixed capacity; 1..32: the node
					  grows the table (doubling) when it
					  fills, up to 2^grow_log2 rows
					  (at most PROTO_MAX_CAPACITY) */
	struct proto_evict evict;
	uint8_t wire_flags;	       /* PROTO_SPEC_F_*: the encoder's (0 in
					  a decoded spec) */
	uint64_t ident;		       /* the table's identity across a
					  cluster: drawn at random by the
					  client that creates it, the same at
					  every member, another after a drop
					  and a create (0: none, a table of
					  an older build: never compared;
					  docs/replication.md, "Stale
					  REPLs") */
};

/* Does e ask for anything (a policy, a TTL or admission)? */
int proto_evict_active(const struct proto_evict *e);
/* "none", "lru", "lfu"; NULL if unknown. Parse: policy or RS_E_INVAL. */
const char *proto_evict_policy_name(uint32_t policy);
int proto_evict_policy_parse(const char *name);

/* A node's PET-hash index of one table (see src/index/pet_format.h). */
struct proto_index_geom {
	uint64_t addr;	       /* region start (remote virtual address) */
	uint64_t bytes;	       /* region length */
	uint32_t rkey;
	uint32_t layout;       /* index format version */
	uint64_t nbuckets;     /* >= 1 */
	uint32_t bucket_bytes; /* >= 1 */
	uint32_t buckets_off;  /* offset of bucket 0 in the region */
	uint32_t slots;	       /* slots per bucket, >= 1 */
	uint64_t seed1, seed2; /* hash seeds */
};

/* The rows of one table: row r at addr + r * row_bytes. */
struct proto_rows_region {
	uint64_t addr;
	uint64_t bytes;
	uint32_t rkey;
	uint32_t layout;    /* row format version */
	uint32_t row_bytes; /* stride; >= dim * dtype size */
};

/* One table as a client sees it (TABLE_CREATE reply, TABLE_DIR entry). */
struct proto_table_info {
	uint32_t id;
	uint64_t generation; /* changes whenever the id is (re)assigned */
	struct proto_table_spec spec;
	struct proto_index_geom index;
	struct proto_rows_region rows;
};

/* ---- message bodies (one per opcode and direction) ---------------------- */

struct proto_hello_req {
	uint32_t recv_bytes;		/* client's receive buffer size */
	char name[PROTO_NAME_MAX + 1];	/* client name for logs; may be "" */
};

struct proto_hello_reply {
	uint64_t node_id;
	uint64_t dir_generation;	/* bumped by every create / drop */
	struct proto_limits limits;	/* the node's (max_message_bytes =
					   its receive buffer size) */
	char name[PROTO_NAME_MAX + 1];	/* node name; may be "" */
};

/* TABLE_GROW request: grow the table to `capacity` rows (0: double it,
 * up to its grow_log2 limit when it has one). */
struct proto_table_grow {
	uint64_t capacity;		/* 0..PROTO_MAX_CAPACITY */
	char name[PROTO_NAME_MAX + 1];
};

/* TABLE_DIR and STATS requests ask for a page of a list. */
struct proto_list_req {
	uint32_t start; /* index of the first entry wanted */
};

/* TABLE_DIR reply: entries [start, start + n) of total. Decoded as a
 * validated view; read the entries with proto_table_dir_next(). */
struct proto_table_dir {
	uint64_t generation; /* directory generation (restart if it moves) */
	uint32_t total;	     /* tables on the node */
	uint32_t start;
	uint32_t n;	     /* entries in this message */
	/* iterator state (private) */
	const uint8_t *p;
	size_t len, off;
	uint32_t next;
};

/* One counter. table_id PROTO_NO_TABLE: the node's own counters. */
struct proto_stat {
	uint32_t table_id;
	char key[PROTO_NAME_MAX + 1]; /* [A-Za-z0-9_.-]{1,63} */
	uint64_t value;
};

/* STATS reply: entries [start, start + n) of total; proto_stats_next(). */
struct proto_stats {
	uint32_t total;
	uint32_t start;
	uint32_t n;
	/* iterator state (private) */
	const uint8_t *p;
	size_t len, off;
	uint32_t next;
};

/*
 * Keyed requests: GET, GET_OR_INIT, DELETE (keys only: dim = 0, dtype = 0,
 * rows NULL) and PUT, UPDATE (keys + rows: 1 <= dim, row i = elements
 * [i * dim, (i + 1) * dim) in dtype; UPDATE rows are gradients), LOAD
 * (rows of the table's dim weights followed by its optimizer state, fp32:
 * dim here is that width, up to 3 * max_dim + 1).
 * Encoding: keys = const uint64_t[n], rows = const float[n * dim] (fp32)
 * or const uint16_t[n * dim] (fp16/bf16), host order.
 * Decoded: keys and rows point at the wire arrays inside the message.
 */
struct proto_keys_req {
	uint32_t table_id;
	uint32_t flags;	    /* PROTO_KF_* */
	uint64_t table_gen; /* expected table generation; 0: do not check */
	uint32_t n;	    /* keys, 0..max_batch_keys */
	uint32_t dim;
	uint32_t dtype;
	float lr;	    /* with PROTO_KF_LR; else 0 on the wire */
	uint64_t epoch;	    /* with PROTO_KF_EPOCH (>= 1); else 0 */
	/* with PROTO_KF_ONCE (else 0): the client's id (!= 0), the call's
	 * sequence number (>= 1; a resend of the call's keys carries the
	 * same one) and the lowest sequence of the client's calls still in
	 * flight (<= seq: the node may forget every call below it) */
	uint64_t client, seq, done_below;
	const void *keys;
	const void *rows;
};

/*
 * CONFIG (request: empty body). Reply: the configuration the node follows
 * (docs/replication.md): epoch 0 and no members when the node is not in a
 * cluster. Members in the configuration's order (sorted by id); `self` is
 * the replying node's index among them (PROTO_CONFIG_NO_SELF: none).
 * Decoded as a validated view; read members with proto_config_next().
 */
#define PROTO_CONFIG_MAX_MEMBERS 1024u	/* MEMB_MAX_NODES */
#define PROTO_CONFIG_MAX_R 5u		/* MEMB_MAX_R */
#define PROTO_CONFIG_MAX_VNODES 4096u	/* PLACE_RING_MAX_VNODES */
#define PROTO_ADDR_MAX 127		/* "ip:port" of a member */
#define PROTO_CONFIG_NO_SELF 0xffffffffu
#define PROTO_CONFIG_AGE_NONE 0xffffffffu
#define PROTO_CONFIG_MAX_LEASE_MS 600000u
enum proto_member_state {
	PROTO_MEMBER_ACTIVE = 0,	/* enum memb_state */
	PROTO_MEMBER_JOINING = 1,
	PROTO_MEMBER_DOWN = 2,
};
struct proto_member {
	uint32_t state;			/* enum proto_member_state */
	char id[PROTO_NAME_MAX + 1];	/* [A-Za-z0-9_.-]{1,63} */
	char addr[PROTO_ADDR_MAX + 1];	/* 1..127 printable bytes */
};
struct proto_config {
	uint64_t epoch;		/* 0: not in a cluster (then n = 0) */
	uint32_t r;		/* 1..PROTO_CONFIG_MAX_R (0 with epoch 0) */
	uint32_t vnodes;	/* 1..PROTO_CONFIG_MAX_VNODES (0 with epoch 0) */
	uint32_t n;		/* members, <= PROTO_CONFIG_MAX_MEMBERS */
	uint32_t self;		/* < n, or PROTO_CONFIG_NO_SELF */
	/* The read lease (docs/replication.md, "Read leases"): the node read
	 * this configuration from the coordination store age_ms ago
	 * (PROTO_CONFIG_AGE_NONE: never, or not in a cluster), and a client
	 * may READ one-sidedly by it until lease_ms after that read
	 * (0: not in a cluster). After the members on the wire. */
	uint32_t age_ms;
	uint32_t lease_ms;	/* <= PROTO_CONFIG_MAX_LEASE_MS */
	/* The epoch of the configuration this node follows when it holds
	 * every range it serves there completely (it is an active member and
	 * copied in what it gained), else 0: a client READs a key at a
	 * backup only in an epoch the backup said it is ready for
	 * (docs/replication.md, "Reads from any replica"). <= epoch; 0 with
	 * self none. After lease_ms. */
	uint64_t ready;
	/* iterator state (private) */
	const uint8_t *p;
	size_t len, off;
	uint32_t next;
};

/*
 * REPL request (node to node, admin): rows with their optimizer state as
 * the primary's write left them, or deletions, for the backups of the
 * keys' replica sets in `epoch`. Records apply in order; the reply is a
 * keyed reply with one status per record (0, PROTO_ST_CREATED or an
 * error). Each record also carries the completion of the exactly-once
 * call that wrote it (client 0: none; else client, seq >= 1, done_below
 * <= seq, the status the client got: 0 or PROTO_ST_CREATED, and the
 * key id of the credential the client's connection authenticated with:
 * 0 without credentials; the node keys its records by it).
 * Encoding: keys, clients, seqs, done_below = const uint64_t[n],
 * statuses = const int32_t[n], creds = const uint32_t[n], kinds =
 * const uint8_t[n] (PROTO_REPL_*), rows = const float[n * width] (a
 * deletion's row is ignored by the encoder and zeros on the wire).
 * Decoded: wire pointers.
 */
enum proto_repl_kind {
	PROTO_REPL_ROW = 0,	/* set the row and state (insert or overwrite) */
	PROTO_REPL_DELETED = 1,	/* remove the key */
};
struct proto_repl_req {
	uint64_t epoch;			/* >= 1 */
	uint32_t n;			/* records, 0..max_batch_keys */
	uint32_t width;			/* dim + state floats, 1..3*max_dim+1 */
	char table[PROTO_NAME_MAX + 1];	/* the table's name */
	const void *keys;
	const void *clients, *seqs, *done_below;
	const void *statuses, *creds;
	const void *kinds;
	const void *rows;
	/* with PROTO_F_FROM (set by the encoder when from_inc is not 0):
	 * the sender's incarnation and this REPL's number in the sender's
	 * sequence (grows with every REPL the node sends): a backup applies
	 * REPLs of one sender only in that order (docs/replication.md,
	 * "Stale REPLs"); and the identity of the sender's table (its
	 * spec's ident, 0: none): a backup whose table of that name has
	 * another refuses the REPL */
	uint64_t from_inc, from_seq, table_ident;
};

/*
 * COPY request (node to node, admin; docs/replication.md, "Copying
 * ranges"): the member `id` (incarnation `inc`), which gains the key-hash
 * ranges listed in `epoch`, asks the primary of those ranges to queue the
 * rows of `table` it holds there, with their state and exactly-once
 * completions, as REPL records to it behind the writes it forwards.
 * The primary scans its row slots from `cursor` and stops once it queued
 * about `max` records; the reply says where to go on from.
 * A range is (lo, hi] of the key hash; lo >= hi wraps past 2^64 - 1.
 * Encoding: ranges = const uint64_t[2 * nranges] (lo, hi pairs).
 * Decoded: wire pointer.
 */
#define PROTO_COPY_MAX_RANGES 1024u
#define PROTO_COPY_MAX_BATCH 65536u
struct proto_copy_req {
	uint64_t epoch;			/* >= 1 */
	uint64_t inc;			/* the requester's incarnation */
	uint64_t cursor;		/* row slot to start at */
	uint32_t max;			/* 1..PROTO_COPY_MAX_BATCH */
	uint32_t nranges;		/* 1..PROTO_COPY_MAX_RANGES */
	char id[PROTO_NAME_MAX + 1];	/* the requester's member id */
	char table[PROTO_NAME_MAX + 1];
	const void *ranges;
};

/* COPY reply: where to go on (done: the scan reached the end of the
 * table) and how many records were queued (and acknowledged by the
 * requester) for this request. */
struct proto_copy_reply {
	uint64_t cursor;
	uint64_t copied;
	uint32_t done;			/* 0 or 1 */
};

/* CKPT request. dir, table, file: names (DUMP; empty otherwise); the
 * part is written to <the node's checkpoint_dir>/<dir>/<file>. */
struct proto_ckpt_req {
	uint32_t phase;		/* enum proto_ckpt_phase */
	uint32_t flags;		/* PROTO_CKF_* */
	uint32_t timeout_ms;	/* FREEZE: 1..600000 */
	uint32_t table_idx;	/* DUMP: the part's place in the manifest */
	uint32_t part_idx;
	uint8_t id[PROTO_CKPT_ID_BYTES];	/* the checkpoint's id */
	uint8_t base[PROTO_CKPT_ID_BYTES];	/* PROTO_CKF_INCR: the id of
						 * the checkpoint it extends */
	uint64_t epoch;		/* PROTO_CKF_EPOCH: >= 1 */
	char dir[PROTO_NAME_MAX + 1];
	char table[PROTO_NAME_MAX + 1];
	char file[PROTO_NAME_MAX + 1];
};

/* CKPT reply: DUMP: the part written; THAW: how long writes were paused
 * (FREEZE: 0 so far). */
struct proto_ckpt_reply {
	uint64_t rows, deleted, raw_bytes, bytes, xxh64;
	uint64_t paused_us;
};

/*
 * Keyed replies: n per-key statuses (int32), plus for GET / GET_OR_INIT
 * n rows of dim elements in dtype (the table's storage format; the row of
 * a failed key is all zero bytes). PUT / UPDATE / DELETE: dim = 0,
 * dtype = 0, rows NULL. Encoding: status = const int32_t[n], rows as in
 * proto_keys_req. Decoded: wire pointers.
 */
struct proto_keys_reply {
	uint32_t n;
	uint32_t dim;
	uint32_t dtype;
	const void *status;
	const void *rows;
	/* UPDATE with PROTO_KF_ROWS: n images (PROTO_IMAGE_BYTES each, wire
	 * format, proto_image_at()) and rows of dim in dtype (the table's
	 * storage format; an image of zeros: no row, e.g. a failed key);
	 * else NULL. proto_enc_keys_reply() encodes an images reply when it
	 * is set. */
	const void *images;
};

/* One key's row image of an images reply. */
struct proto_image {
	uint64_t version;  /* the row's version after the step; 0: none */
	uint64_t checksum; /* its header checksum (row_checksum) */
	uint32_t slot;	   /* its row slot on the node */
};
void proto_image_at(const void *images, uint32_t i, struct proto_image *out);

/* Any reply with hdr.status < 0 carries only a message. */
struct proto_error {
	char msg[PROTO_ERRMSG_MAX + 1]; /* control bytes replaced by '?' */
};

/*
 * A decoded message. Which member is valid:
 *   HELLO          request: hello_req        reply: hello_reply
 *   TABLE_CREATE   request: table_create     reply: table_info
 *   TABLE_DROP     request: table_drop       reply: (empty body)
 *   TABLE_DIR      request: list_req         reply: table_dir
 *   GET .. DELETE  request: keys_req         reply: keys_reply
 *   STATS          request: list_req         reply: stats
 *   CKPT           request: ckpt_req         reply: ckpt_reply
 *   LOAD           request: keys_req         reply: keys_reply
 *   CONFIG         request: (empty body)     reply: config
 *   REPL           request: repl_req         reply: keys_reply
 *   COPY           request: copy_req         reply: copy_reply
 *   TABLE_GROW     request: table_grow       reply: table_info
 *   any reply with hdr.status < 0: error
 */
struct proto_msg {
	struct proto_hdr hdr;
	union {
		struct proto_hello_req hello_req;
		struct proto_hello_reply hello_reply;
		struct proto_table_spec table_create;
		struct proto_table_info table_info;
		char table_drop[PROTO_NAME_MAX + 1];
		struct proto_table_grow table_grow;
		struct proto_list_req list_req;
		struct proto_table_dir table_dir;
		struct proto_keys_req keys_req;
		struct proto_keys_reply keys_reply;
		struct proto_stats stats;
		struct proto_ckpt_req ckpt_req;
		struct proto_ckpt_reply ckpt_reply;
		struct proto_config config;
		struct proto_repl_req repl_req;
		struct proto_copy_req copy_req;
		struct proto_copy_reply copy_reply;
		struct proto_error error;
	} u;
};

/* ---- names, limits, sizes ----------------------------------------------- */

const char *proto_op_name(uint32_t op); /* "GET", ...; "?" if unknown */
const char *proto_dtype_name(uint32_t dtype); /* "fp32"...; NULL */
int proto_dtype_parse(const char *name);      /* dtype or RS_E_INVAL */
uint32_t proto_dtype_size(uint32_t dtype);    /* 4, 2, 2; 0 if unknown */

/* Table / counter names: 0 if s[0..len) is 1..63 of [A-Za-z0-9_.-], else
 * RS_E_INVAL with "<what>: ..." in the message. */
int proto_name_check(const char *what, const char *s, size_t len);

/* 0 if every field of the spec is valid under lim (name, dim, dtype,
 * capacity, optimizer and initializer parameters), else RS_E_INVAL or
 * RS_E_TOOBIG with a message naming the field. A capacity of 0 is valid
 * (the node's default: a node resolves it before anything is sized). */
int proto_table_spec_validate(const struct proto_table_spec *s,
			      const struct proto_limits *lim);

/* 1 if lr may be an UPDATE's per-request learning rate (PROTO_KF_LR):
 * finite and >= 0 (0 is a valid step of a schedule: no change of the
 * weights, the optimizer state still advances). */
int proto_lr_ok(float lr);

void proto_limits_default(struct proto_limits *lim);
/* 0 if each limit is within [minimum, hard ceiling], else RS_E_INVAL. */
int proto_limits_validate(const struct proto_limits *lim);

/* Total bytes of a keyed request / reply of op with n keys and rows of
 * dim elements of dtype (dim and dtype are ignored for the direction that
 * carries no rows). 0 for a non-keyed op or unknown dtype. */
size_t proto_keys_req_bytes(uint32_t op, uint32_t n, uint32_t dim,
			    uint32_t dtype);
size_t proto_keys_reply_bytes(uint32_t op, uint32_t n, uint32_t dim,
			      uint32_t dtype);

/*
 * Split helper: the largest n <= max_keys such that a keyed request of op
 * with n keys fits req_max bytes (the node's receive buffer) and its reply
 * fits reply_max bytes (the client's). Returns n >= 1, RS_E_TOOBIG if not
 * even one key fits, RS_E_INVAL for a non-keyed op, unknown dtype or
 * dim 0 where rows travel.
 */
int proto_keys_per_msg(uint32_t op, uint32_t dim, uint32_t dtype,
		       size_t req_max, size_t reply_max, uint32_t max_keys);

/* ---- wire array access -------------------------------------------------- */

uint64_t proto_key_at(const void *keys, uint32_t i);
int32_t proto_status_at(const void *status, uint32_t i);
uint32_t proto_u32_at(const void *v, uint32_t i);
void proto_load_u64(uint64_t *dst, const void *wire, size_t n);
void proto_load_i32(int32_t *dst, const void *wire, size_t n);
void proto_load_f32(float *dst, const void *wire, size_t n);
void proto_load_u16(uint16_t *dst, const void *wire, size_t n);
void proto_store_f32(void *wire, const float *src, size_t n);
void proto_store_u16(void *wire, const uint16_t *src, size_t n);

/* ---- decoding ----------------------------------------------------------- */

/* Decode any message of len bytes (see the head comment). 0 or error. */
int proto_decode(const void *msg, size_t len, const struct proto_limits *lim,
		 struct proto_msg *out);

/* Next entry of a decoded TABLE_DIR / STATS reply: 1 and *out, or 0 at the
 * end. The view was validated by proto_decode(); these cannot fail. */
int proto_table_dir_next(struct proto_table_dir *d,
			 struct proto_table_info *out);
int proto_config_next(struct proto_config *c, struct proto_member *out);
int proto_stats_next(struct proto_stats *s, struct proto_stat *out);

/* ---- encoding ----------------------------------------------------------- */

int proto_enc_hello_req(void *buf, size_t cap, const struct proto_hdr *h,
			const struct proto_hello_req *m);
int proto_enc_hello_reply(void *buf, size_t cap, const struct proto_hdr *h,
			  const struct proto_hello_reply *m);
int proto_enc_table_create_req(void *buf, size_t cap,
			       const struct proto_hdr *h,
			       const struct proto_table_spec *m);
int proto_enc_table_create_reply(void *buf, size_t cap,
				 const struct proto_hdr *h,
				 const struct proto_table_info *m);
int proto_enc_table_grow_req(void *buf, size_t cap, const struct proto_hdr *h,
			     const struct proto_table_grow *m);
/* the reply is a table info, like TABLE_CREATE's */
int proto_enc_table_grow_reply(void *buf, size_t cap,
			       const struct proto_hdr *h,
			       const struct proto_table_info *m);
int proto_enc_table_drop_req(void *buf, size_t cap, const struct proto_hdr *h,
			     const char *name);
int proto_enc_table_drop_reply(void *buf, size_t cap,
			       const struct proto_hdr *h);
/* TABLE_DIR / STATS requests: op PROTO_OP_TABLE_DIR or PROTO_OP_STATS */
int proto_enc_list_req(void *buf, size_t cap, const struct proto_hdr *h,
		       uint32_t op, const struct proto_list_req *m);

/*
 * TABLE_DIR / STATS replies: encode as many of the n entries given as fit
 * (entries[0..*written), at least one if n > 0, else RS_E_TOOBIG); total
 * and start describe the whole list. The client asks again from
 * start + *written until it has total entries.
 */
int proto_enc_table_dir_reply(void *buf, size_t cap, const struct proto_hdr *h,
			      uint64_t generation, uint32_t total,
			      uint32_t start,
			      const struct proto_table_info *tables,
			      uint32_t n, uint32_t *written);
int proto_enc_stats_reply(void *buf, size_t cap, const struct proto_hdr *h,
			  uint32_t total, uint32_t start,
			  const struct proto_stat *stats, uint32_t n,
			  uint32_t *written);

int proto_enc_ckpt_req(void *buf, size_t cap, const struct proto_hdr *h,
		       const struct proto_ckpt_req *m);
int proto_enc_ckpt_reply(void *buf, size_t cap, const struct proto_hdr *h,
			 const struct proto_ckpt_reply *m);

/* CONFIG: the request has an empty body; the reply lists n members
 * (all of them: RS_E_TOOBIG if they do not fit cap). c->p, len, off and
 * next are ignored. */
int proto_enc_config_req(void *buf, size_t cap, const struct proto_hdr *h);
int proto_enc_config_reply(void *buf, size_t cap, const struct proto_hdr *h,
			   const struct proto_config *c,
			   const struct proto_member *members);
/* REPL request; its reply is proto_enc_keys_reply(..., PROTO_OP_REPL). */
int proto_enc_copy_req(void *buf, size_t cap, const struct proto_hdr *h,
		       const struct proto_copy_req *m);
int proto_enc_copy_reply(void *buf, size_t cap, const struct proto_hdr *h,
			 const struct proto_copy_reply *m);
int proto_enc_repl_req(void *buf, size_t cap, const struct proto_hdr *h,
		       const struct proto_repl_req *m);
/* Bytes of a REPL request of n records of width floats for table name of
 * name_len bytes. */
size_t proto_repl_req_bytes(uint32_t n, uint32_t width, size_t name_len);

/* Keyed request / reply of op (GET .. DELETE, LOAD, REPL for replies);
 * see the struct comments. A request with PROTO_KF_EPOCH is
 * PROTO_EPOCH_BYTES longer than proto_keys_req_bytes() says, one with
 * PROTO_KF_ONCE PROTO_ONCE_BYTES longer. */
int proto_enc_keys_req(void *buf, size_t cap, const struct proto_hdr *h,
		       uint32_t op, const struct proto_keys_req *m);
int proto_enc_keys_reply(void *buf, size_t cap, const struct proto_hdr *h,
			 uint32_t op, const struct proto_keys_reply *m);

/*
 * Zero-copy keyed reply: lay out the header and the fixed part in buf and
 * return the total length; the caller then fills EVERY key i with
 * proto_reply_set() (after writing row i at w->rows + i * w->row_bytes,
 * little-endian elements, e.g. proto_store_f32 or memcpy on x86/arm) or
 * proto_reply_fail() (status and an all-zero row). Nothing else is
 * initialised: a slot left unfilled leaks stale buffer bytes.
 */
struct proto_reply_writer {
	uint8_t *status;  /* n int32, wire */
	uint8_t *rows;	  /* n * row_bytes; NULL without rows */
	uint8_t *images;  /* n * PROTO_IMAGE_BYTES; NULL but in an images
			     reply */
	size_t row_bytes; /* dim * dtype size; 0 without rows */
	uint32_t n;
};
int proto_keys_reply_begin(void *buf, size_t cap, const struct proto_hdr *h,
			   uint32_t op, uint32_t n, uint32_t dim,
			   uint32_t dtype, struct proto_reply_writer *w);
/* The reply to an UPDATE with PROTO_KF_ROWS: statuses, images and rows
 * (dim x dtype, the table's). proto_image_set() fills key i's image;
 * proto_reply_fail() zeroes its image and row. */
int proto_images_reply_begin(void *buf, size_t cap, const struct proto_hdr *h,
			     uint32_t n, uint32_t dim, uint32_t dtype,
			     struct proto_reply_writer *w);
void proto_image_set(struct proto_reply_writer *w, uint32_t i,
		     const struct proto_image *im);
/* Bytes of such a reply for n keys (0: bad shape), and how many keys fit
 * one of reply_max bytes (RS_E_TOOBIG: not one). */
size_t proto_images_reply_bytes(uint32_t n, uint32_t dim, uint32_t dtype);
int proto_images_per_msg(uint32_t dim, uint32_t dtype, size_t reply_max);
void proto_reply_set(struct proto_reply_writer *w, uint32_t i, int32_t st);
void proto_reply_fail(struct proto_reply_writer *w, uint32_t i, int32_t st);

/* Error reply to op: hdr.status = code (< 0), body = msg (truncated to
 * PROTO_ERRMSG_MAX bytes). */
int proto_enc_error(void *buf, size_t cap, const struct proto_hdr *h,
		    uint32_t op, int32_t code, const char *msg);

#endif
