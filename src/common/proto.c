/*
 * proto.c - encoding and hostile-input-safe decoding of RPC messages.
 *
 * Decoding reads through a cursor (struct rd) over [p, p + len) with a
 * sticky error: the first failure records its code and an rs_errormsg()
 * naming the message and field, and every later read returns zeros
 * without moving. So a decoder reads its fields in order, checks its
 * counts and limits as soon as they are known (before any length is
 * computed from them), and returns r.rc at the end; nothing is read past
 * len because every read is bounds-checked against what is left. Counts are
 * bounded by the limits before they are multiplied (n <= 2^24, dim <= 2^16,
 * element <= 4 bytes: every product fits 64 bits).
 *
 * Encoding writes through a cursor (struct wr) that always advances its
 * offset but stores only while the bytes fit; at the end, an offset past
 * the capacity means RS_E_TOOBIG with the size that was needed. Lists
 * (TABLE_DIR, STATS) roll the offset back to the last entry that fit.
 *
 * Integers are assembled byte by byte (compilers turn ld32/st32 into
 * single moves on little-endian machines); bulk arrays are memcpy'd on
 * little-endian hosts and converted element by element otherwise.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/le.h"
#include "common/proto.h"
#include "common/rs_internal.h"
#include "common/spec_fields.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

/* Fixed-part sizes of bodies (docs/protocol.md). */
#define KEYS_REQ_FIXED 32
#define KEYS_REPLY_FIXED 16
/* keys reply byte 9 (after dtype) */
#define REPLY_FORM_IMAGES 1u
#define SPEC_FIXED 64
#define INFO_FIXED 112
#define HELLO_REQ_FIXED 8
#define HELLO_REPLY_FIXED 32
#define LIST_REQ_FIXED 8
#define DIR_REPLY_FIXED 24
#define STATS_REPLY_FIXED 16
#define STAT_FIXED 12
#define CONFIG_REPLY_FIXED 24
#define REPL_REQ_FIXED 16

/* ---- little-endian scalars ---- */

static inline uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* ---- bulk arrays ---- */

uint64_t proto_key_at(const void *keys, uint32_t i)
{
	return le_ld64((const uint8_t *)keys + 8 * (size_t)i);
}

int32_t proto_status_at(const void *status, uint32_t i)
{
	return (int32_t)le_ld32((const uint8_t *)status + 4 * (size_t)i);
}

uint32_t proto_u32_at(const void *v, uint32_t i)
{
	return le_ld32((const uint8_t *)v + 4 * (size_t)i);
}

/*
 * Bulk copies between host arrays and little-endian wire arrays: one
 * memcpy on a little-endian host, element by element elsewhere. One pair
 * of definitions serves every element type: W bytes per element, LD/ST
 * the scalar codec, CONV the conversion from the codec's integer to T (or
 * back; empty when none is needed).
 */
#define BULK_LOAD(name, T, W, LD, CONV)                                 \
	void name(T *dst, const void *wire, size_t n)                   \
	{                                                               \
		const uint8_t *p = wire;                                \
									\
		if (HOST_LE && n) {                                     \
			memcpy(dst, wire, n * (W));                     \
			return;                                         \
		}                                                       \
		for (size_t i = 0; i < n; i++)                          \
			dst[i] = CONV(LD(p + (W) * i));                 \
	}
#define BULK_STORE(name, T, W, ST, CONV)                                \
	void name(void *wire, const T *src, size_t n)                   \
	{                                                               \
		uint8_t *p = wire;                                      \
									\
		if (HOST_LE && n) {                                     \
			memcpy(wire, src, n * (W));                     \
			return;                                         \
		}                                                       \
		for (size_t i = 0; i < n; i++)                          \
			ST(p + (W) * i, CONV(src[i]));                  \
	}

BULK_LOAD(proto_load_u64, uint64_t, 8, le_ld64, )
BULK_LOAD(proto_load_i32, int32_t, 4, le_ld32, (int32_t))
BULK_LOAD(proto_load_f32, float, 4, le_ld32, u2f)
BULK_LOAD(proto_load_u16, uint16_t, 2, le_ld16, )
BULK_STORE(proto_store_f32, float, 4, le_st32, f2u)
BULK_STORE(proto_store_u16, uint16_t, 2, le_st16, )
static BULK_STORE(store_u64s, uint64_t, 8, le_st64, )
static BULK_STORE(store_i32s, int32_t, 4, le_st32, (uint32_t))
static BULK_STORE(store_u32s, uint32_t, 4, le_st32, )

/* rows of n * dim elements of dtype, host -> wire */
static void store_rows(uint8_t *p, const void *rows, size_t count,
		       uint32_t dtype)
{
	if (dtype == PROTO_DTYPE_FP32)
		proto_store_f32(p, rows, count);
	else
		proto_store_u16(p, rows, count);
}

/* ---- names and sizes ---- */

static const char *const op_names[PROTO_OP_COUNT] = {
	[PROTO_OP_HELLO] = "HELLO",
	[PROTO_OP_TABLE_CREATE] = "TABLE_CREATE",
	[PROTO_OP_TABLE_DROP] = "TABLE_DROP",
	[PROTO_OP_TABLE_DIR] = "TABLE_DIR",
	[PROTO_OP_GET] = "GET",
	[PROTO_OP_GET_OR_INIT] = "GET_OR_INIT",
	[PROTO_OP_PUT] = "PUT",
	[PROTO_OP_UPDATE] = "UPDATE",
	[PROTO_OP_DELETE] = "DELETE",
	[PROTO_OP_STATS] = "STATS",
	[PROTO_OP_CKPT] = "CKPT",
	[PROTO_OP_LOAD] = "LOAD",
	[PROTO_OP_CONFIG] = "CONFIG",
	[PROTO_OP_REPL] = "REPL",
	[PROTO_OP_COPY] = "COPY",
	[PROTO_OP_TABLE_GROW] = "TABLE_GROW",
};

static const char *const dtype_names[PROTO_DTYPE_COUNT] = {
	[PROTO_DTYPE_FP32] = "fp32",
	[PROTO_DTYPE_FP16] = "fp16",
	[PROTO_DTYPE_BF16] = "bf16",
};

const char *proto_op_name(uint32_t op)
{
	return op > 0 && op < PROTO_OP_COUNT ? op_names[op] : "?";
}

const char *proto_dtype_name(uint32_t dtype)
{
	return dtype < PROTO_DTYPE_COUNT ? dtype_names[dtype] : NULL;
}

int proto_dtype_parse(const char *name)
{
	for (uint32_t d = 0; name && d < PROTO_DTYPE_COUNT; d++)
		if (strcmp(name, dtype_names[d]) == 0)
			return (int)d;
	return rs_seterr(RS_E_INVAL,
			 "unknown dtype '%s' (expected fp32, fp16 or bf16)",
			 name ? name : "(null)");
}

static const char *dt_name(uint32_t dtype)
{
	return dtype < PROTO_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

uint32_t proto_dtype_size(uint32_t dtype)
{
	switch (dtype) {
	case PROTO_DTYPE_FP32:
		return 4;
	case PROTO_DTYPE_FP16:
	case PROTO_DTYPE_BF16:
		return 2;
	default:
		return 0;
	}
}

/* ops whose request is a keyed request (REPL's is not: repl_req) */
static int is_keyed(uint32_t op)
{
	return (op >= PROTO_OP_GET && op <= PROTO_OP_DELETE) ||
	       op == PROTO_OP_LOAD;
}

/* ops whose reply is a keyed reply: the keyed ones and REPL */
static int is_keyed_reply(uint32_t op)
{
	return is_keyed(op) || op == PROTO_OP_REPL;
}

static int req_has_rows(uint32_t op)
{
	return op == PROTO_OP_PUT || op == PROTO_OP_UPDATE ||
	       op == PROTO_OP_LOAD;
}

/* The widest row with optimizer state for tables of up to max_dim:
 * the weights and the state (Adam's is 2 * dim + 1). */
static uint32_t state_width_max(uint32_t max_dim)
{
	return 3 * max_dim + 1;
}

/* The widest request row of op under lim: LOAD rows carry the optimizer
 * state after the weights. */
static uint32_t req_dim_max(uint32_t op, const struct proto_limits *lim)
{
	return op == PROTO_OP_LOAD ? state_width_max(lim->max_dim)
				   : lim->max_dim;
}

static int reply_has_rows(uint32_t op)
{
	return op == PROTO_OP_GET || op == PROTO_OP_GET_OR_INIT;
}

int proto_lr_ok(float lr)
{
	return isfinite(lr) && lr >= 0.0f;
}

/* PROTO_KF_* bits a keyed request of op may carry (GET writes nothing,
 * and LOAD sets rows as they are: nothing to do exactly once) */
static uint32_t keys_flags_allowed(uint32_t op)
{
	switch (op) {
	case PROTO_OP_UPDATE:
		return PROTO_KF_CREATE | PROTO_KF_LR | PROTO_KF_EPOCH |
		       PROTO_KF_ONCE | PROTO_KF_ROWS;
	case PROTO_OP_GET_OR_INIT:
	case PROTO_OP_PUT:
	case PROTO_OP_DELETE:
		return PROTO_KF_EPOCH | PROTO_KF_ONCE;
	case PROTO_OP_GET:
	case PROTO_OP_LOAD:
		return PROTO_KF_EPOCH;
	default:
		return 0;
	}
}

/*
 * The exactly-once fields of a call (a keyed request with PROTO_KF_ONCE,
 * a REPL record with a client): client != 0, seq >= 1, done_below <= seq.
 * 0 or RS_E_PROTO with a message naming the field (fields[0..2]: the
 * names of client, seq and done_below); an encoder turns it into
 * RS_E_INVAL.
 */
static int once_check(const char *const fields[3], uint64_t client,
		      uint64_t seq, uint64_t done_below)
{
	if (client == 0)
		return rs_seterr(RS_E_PROTO, "%s: must not be 0", fields[0]);
	if (seq == 0)
		return rs_seterr(RS_E_PROTO, "%s: must be >= 1", fields[1]);
	if (done_below > seq)
		return rs_seterr(RS_E_PROTO, "%s: %" PRIu64 " is over %s %"
				 PRIu64, fields[2], done_below, fields[1],
				 seq);
	return 0;
}

static const char *const once_fields[3] = { "client", "seq", "done_below" };

static int name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

/* 0 if s[0..len) is 1..max bytes that ok accepts, else RS_E_INVAL with a
 * message naming what and the byte refused, which is "not <set>" */
static int str_check(const char *what, const char *s, size_t len, int max,
		     int (*ok)(unsigned char), const char *set)
{
	if (len == 0)
		return rs_seterr(RS_E_INVAL, "%s: must not be empty", what);
	if (len > (size_t)max)
		return rs_seterr(RS_E_INVAL,
				 "%s: %zu bytes long, the limit is %d", what,
				 len, max);
	for (size_t i = 0; i < len; i++)
		if (!ok((unsigned char)s[i]))
			return rs_seterr(RS_E_INVAL,
					 "%s: byte 0x%02x at %zu is not %s",
					 what, (unsigned char)s[i], i, set);
	return 0;
}

int proto_name_check(const char *what, const char *s, size_t len)
{
	return str_check(what, s, len, PROTO_NAME_MAX, name_char,
			 "one of [A-Za-z0-9_.-]");
}

/* Re-issue the current error message with a prefix. */
static int prefix_err(int rc, const char *prefix)
{
	char inner[512];

	snprintf(inner, sizeof(inner), "%s", rs_errormsg());
	return rs_seterr(rc, "%s%s", prefix, inner);
}

static const char *const evict_names[PROTO_EVICT_COUNT] = {
	"none", "lru", "lfu"
};

const char *proto_evict_policy_name(uint32_t policy)
{
	return policy < PROTO_EVICT_COUNT ? evict_names[policy] : NULL;
}

int proto_evict_policy_parse(const char *name)
{
	for (unsigned i = 0; name && i < PROTO_EVICT_COUNT; i++)
		if (!strcmp(name, evict_names[i]))
			return (int)i;
	return rs_seterr(RS_E_INVAL, "eviction policy '%s': not one of none, "
			 "lru, lfu", name ? name : "(null)");
}

int proto_evict_active(const struct proto_evict *e)
{
	return e->policy != PROTO_EVICT_NONE || e->max_rows || e->ttl_s ||
	       e->admit_after > 1;
}

static int evict_validate(const struct proto_evict *e, uint64_t capacity)
{
	if (e->policy >= PROTO_EVICT_COUNT)
		return rs_seterr(RS_E_INVAL, "eviction.policy: unknown value "
				 "%u (0 none, 1 lru, 2 lfu)", e->policy);
	if (e->max_rows && e->policy == PROTO_EVICT_NONE)
		return rs_seterr(RS_E_INVAL, "eviction.max_rows: a cap needs "
				 "a policy (lru or lfu) to choose victims");
	if (e->max_rows > PROTO_MAX_CAPACITY ||
	    (capacity && e->max_rows > capacity))
		return rs_seterr(RS_E_INVAL, "eviction.max_rows: %llu rows is "
				 "more than the capacity (%llu)",
				 (unsigned long long)e->max_rows,
				 (unsigned long long)(capacity ? capacity :
						      PROTO_MAX_CAPACITY));
	if (e->ttl_s > PROTO_EVICT_TTL_MAX)
		return rs_seterr(RS_E_INVAL, "eviction.ttl: %u s is more than "
				 "%u s (10 years)", e->ttl_s,
				 PROTO_EVICT_TTL_MAX);
	if (e->admit_after > PROTO_EVICT_ADMIT_MAX)
		return rs_seterr(RS_E_INVAL, "eviction.admit_after: %u is more "
				 "than %u sightings", e->admit_after,
				 PROTO_EVICT_ADMIT_MAX);
	return 0;
}

int proto_table_spec_validate(const struct proto_table_spec *s,
			      const struct proto_limits *lim)
{
	struct proto_limits def;
	int rc;

	if (!lim) {
		proto_limits_default(&def);
		lim = &def;
	}
	rc = proto_name_check("name", s->name, strnlen(s->name,
						      sizeof(s->name)));
	if (rc)
		return rc;
	if (s->dim == 0)
		return rs_seterr(RS_E_INVAL, "dim: must be >= 1");
	if (s->dim > lim->max_dim)
		return rs_seterr(RS_E_TOOBIG, "dim: %u is over the limit %u",
				 s->dim, lim->max_dim);
	if (s->dtype >= PROTO_DTYPE_COUNT)
		return rs_seterr(RS_E_INVAL, "dtype: unknown dtype %u",
				 s->dtype);
	if (s->capacity > PROTO_MAX_CAPACITY)
		return rs_seterr(RS_E_TOOBIG, "capacity: %llu rows is over the "
				 "limit %llu", (unsigned long long)s->capacity,
				 PROTO_MAX_CAPACITY);
	if (s->grow_log2 > PROTO_MAX_GROW_LOG2)
		return rs_seterr(RS_E_INVAL, "grow_log2: %u is over %u (growth "
				 "up to 2^%u rows)", s->grow_log2,
				 PROTO_MAX_GROW_LOG2, PROTO_MAX_GROW_LOG2);
	if ((rc = optim_params_validate(&s->optim)))
		return prefix_err(rc, "optimizer.");
	if ((rc = init_params_validate(&s->init)))
		return prefix_err(rc, "initializer.");
	/* a cap with victims and a growth at 90% of the capacity would
	 * race for the same inserts: a table grows or evicts (a TTL and
	 * admission go with either) */
	if (s->grow_log2 && s->evict.policy != PROTO_EVICT_NONE)
		return rs_seterr(RS_E_INVAL, "table '%s': eviction.policy: a "
				 "table that grows (max_capacity) has no "
				 "eviction policy (a TTL and admission are "
				 "allowed)", s->name);
	return evict_validate(&s->evict, s->capacity);
}

void proto_limits_default(struct proto_limits *lim)
{
	*lim = (struct proto_limits){
		.max_message_bytes = PROTO_DEFAULT_MESSAGE_BYTES,
		.max_batch_keys = PROTO_DEFAULT_BATCH_KEYS,
		.max_dim = PROTO_DEFAULT_DIM,
		.max_tables = PROTO_DEFAULT_TABLES,
	};
}

static int check_limit(const char *what, uint32_t v, uint32_t lo,
		       uint32_t hi)
{
	if (v < lo || v > hi)
		return rs_seterr(RS_E_INVAL, "%s: %u is outside [%u, %u]", what,
				 v, lo, hi);
	return 0;
}

int proto_limits_validate(const struct proto_limits *lim)
{
	int rc;

	if ((rc = check_limit("max_message_bytes", lim->max_message_bytes,
			      PROTO_MIN_MESSAGE_BYTES,
			      PROTO_MAX_MESSAGE_BYTES)) ||
	    (rc = check_limit("max_batch_keys", lim->max_batch_keys, 1,
			      PROTO_MAX_BATCH_KEYS)) ||
	    (rc = check_limit("max_dim", lim->max_dim, 1, PROTO_MAX_DIM)) ||
	    (rc = check_limit("max_tables", lim->max_tables, 1,
			      PROTO_MAX_TABLES)))
		return rc;
	return 0;
}

static uint64_t rows_bytes(uint32_t n, uint32_t dim, uint32_t dtype)
{
	return (uint64_t)n * dim * proto_dtype_size(dtype);
}

/* n int32 statuses, padded to 8 bytes */
static uint64_t status_bytes(uint32_t n)
{
	return 4 * (uint64_t)n + 4 * (n & 1);
}

static uint64_t req_bytes(uint32_t op, uint32_t n, uint32_t dim,
			  uint32_t dtype)
{
	return PROTO_HDR_BYTES + KEYS_REQ_FIXED + 8 * (uint64_t)n +
	       (req_has_rows(op) ? rows_bytes(n, dim, dtype) : 0);
}

static uint64_t reply_bytes(uint32_t op, uint32_t n, uint32_t dim,
			    uint32_t dtype)
{
	return PROTO_HDR_BYTES + KEYS_REPLY_FIXED + status_bytes(n) +
	       (reply_has_rows(op) ? rows_bytes(n, dim, dtype) : 0);
}

size_t proto_keys_req_bytes(uint32_t op, uint32_t n, uint32_t dim,
			    uint32_t dtype)
{
	if (!is_keyed(op) || (req_has_rows(op) && !proto_dtype_size(dtype)))
		return 0;
	return (size_t)req_bytes(op, n, dim, dtype);
}

/* An images reply (UPDATE with PROTO_KF_ROWS): statuses, images, rows. */
static uint64_t images_reply_bytes(uint32_t n, uint32_t dim, uint32_t dtype)
{
	return PROTO_HDR_BYTES + KEYS_REPLY_FIXED + status_bytes(n) +
	       (uint64_t)PROTO_IMAGE_BYTES * n + rows_bytes(n, dim, dtype);
}

size_t proto_images_reply_bytes(uint32_t n, uint32_t dim, uint32_t dtype)
{
	if (!dim || dim > PROTO_MAX_DIM || !proto_dtype_size(dtype) ||
	    n > PROTO_MAX_BATCH_KEYS)
		return 0;
	return (size_t)images_reply_bytes(n, dim, dtype);
}

int proto_images_per_msg(uint32_t dim, uint32_t dtype, size_t reply_max)
{
	uint64_t n, per = 4 + PROTO_IMAGE_BYTES +
			  (uint64_t)dim * proto_dtype_size(dtype);

	if (!dim || dim > PROTO_MAX_DIM || !proto_dtype_size(dtype))
		return rs_seterr(RS_E_INVAL, "UPDATE rows: bad row shape %u x "
				 "dtype %u", dim, dtype);
	if (reply_max > PROTO_MAX_MESSAGE_BYTES)
		reply_max = PROTO_MAX_MESSAGE_BYTES;
	n = reply_max > PROTO_HDR_BYTES + KEYS_REPLY_FIXED
		    ? (reply_max - PROTO_HDR_BYTES - KEYS_REPLY_FIXED) / per
		    : 0;
	if (n > PROTO_MAX_BATCH_KEYS)
		n = PROTO_MAX_BATCH_KEYS;
	while (n > 0 && images_reply_bytes((uint32_t)n, dim, dtype) >
				reply_max)
		n--;
	if (n == 0)
		return rs_seterr(RS_E_TOOBIG, "UPDATE rows: one row of %u x %s "
				 "does not fit replies of %zu bytes", dim,
				 dt_name(dtype), reply_max);
	return (int)n;
}

size_t proto_keys_reply_bytes(uint32_t op, uint32_t n, uint32_t dim,
			      uint32_t dtype)
{
	if (!is_keyed_reply(op) ||
	    (reply_has_rows(op) && !proto_dtype_size(dtype)))
		return 0;
	return (size_t)reply_bytes(op, n, dim, dtype);
}

/* zero bytes that bring x to a multiple of 8 */
static uint64_t pad8(uint64_t x)
{
	return (8 - (x & 7)) & 7;
}

/* The records of a REPL request after the table name: n keys, clients,
 * seqs and done_below (u64), n statuses padded to 8, n kinds padded to
 * 8, n rows of width floats. Every product fits 64 bits for n and width
 * within the hard ceilings (2^24 x (3 * 2^16 + 1) x 4). */
static uint64_t repl_records_bytes(uint32_t n, uint32_t width)
{
	return 4 * 8 * (uint64_t)n + 4 * 2 * (uint64_t)n + n + pad8(n) +
	       4 * (uint64_t)n * width;
}

/* A REPL request: the fixed part, the table name padded to 8, records */
static uint64_t repl_bytes(uint32_t n, uint32_t width, size_t name_len)
{
	const uint64_t name = 2 + (uint64_t)name_len;

	return PROTO_HDR_BYTES + REPL_REQ_FIXED + name + pad8(name) +
	       repl_records_bytes(n, width) + PROTO_FROM_BYTES;
}

size_t proto_repl_req_bytes(uint32_t n, uint32_t width, size_t name_len)
{
	if (n > PROTO_MAX_BATCH_KEYS || width == 0 ||
	    width > state_width_max(PROTO_MAX_DIM) || name_len == 0 ||
	    name_len > PROTO_NAME_MAX)
		return 0;
	return (size_t)repl_bytes(n, width, name_len);
}

int proto_keys_per_msg(uint32_t op, uint32_t dim, uint32_t dtype,
		       size_t req_max, size_t reply_max, uint32_t max_keys)
{
	const int rows = req_has_rows(op) || reply_has_rows(op);
	const uint64_t row = rows ? (uint64_t)dim * proto_dtype_size(dtype)
				  : 0;
	uint64_t n = max_keys, fit;

	if (!is_keyed(op))
		return rs_seterr(RS_E_INVAL, "%s is not a keyed operation",
				 proto_op_name(op));
	if (rows && (dim == 0 || !proto_dtype_size(dtype)))
		return rs_seterr(RS_E_INVAL, "%s: dim %u / dtype %u carry no "
				 "rows", proto_op_name(op), dim, dtype);
	if (n > PROTO_MAX_BATCH_KEYS)
		n = PROTO_MAX_BATCH_KEYS;
	if (req_max > PROTO_MAX_MESSAGE_BYTES)
		req_max = PROTO_MAX_MESSAGE_BYTES;
	if (reply_max > PROTO_MAX_MESSAGE_BYTES)
		reply_max = PROTO_MAX_MESSAGE_BYTES;
	/* first guess by division, then step down over the odd-n padding */
	fit = req_max > PROTO_HDR_BYTES + KEYS_REQ_FIXED
		      ? (req_max - PROTO_HDR_BYTES - KEYS_REQ_FIXED) /
				(8 + (req_has_rows(op) ? row : 0))
		      : 0;
	if (fit < n)
		n = fit;
	fit = reply_max > PROTO_HDR_BYTES + KEYS_REPLY_FIXED
		      ? (reply_max - PROTO_HDR_BYTES - KEYS_REPLY_FIXED) /
				(4 + (reply_has_rows(op) ? row : 0))
		      : 0;
	if (fit < n)
		n = fit;
	while (n > 0 && (req_bytes(op, (uint32_t)n, dim, dtype) > req_max ||
			 reply_bytes(op, (uint32_t)n, dim, dtype) > reply_max))
		n--;
	if (n == 0)
		return rs_seterr(RS_E_TOOBIG,
				 "%s: one key with a row of %u x %s does not "
				 "fit messages of %zu / %zu bytes",
				 proto_op_name(op), dim, dt_name(dtype),
				 req_max, reply_max);
	return (int)n;
}

/* ---- decoding cursor ---- */

struct rd {
	const uint8_t *p;
	size_t len, off;
	int rc;		  /* first error, sticky */
	const char *what; /* "GET request", for messages */
};

static int rd_fail(struct rd *r, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* record the first failure; returns the sticky code */
static int rd_fail(struct rd *r, int code, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	if (r->rc)
		return r->rc;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return r->rc = rs_seterr(code, "%s: %s", r->what, msg);
}

/* n bytes at the cursor, or NULL (and the error) if fewer are left */
static const uint8_t *rd_take(struct rd *r, size_t n, const char *field)
{
	const uint8_t *q;

	if (r->rc)
		return NULL;
	if (r->len - r->off < n) {
		rd_fail(r, RS_E_PROTO, "truncated at %s (offset %zu needs %zu "
			"bytes, %zu left)", field, r->off, n, r->len - r->off);
		return NULL;
	}
	q = r->p + r->off;
	r->off += n;
	return q;
}

static uint8_t rd_u8(struct rd *r, const char *field)
{
	const uint8_t *q = rd_take(r, 1, field);

	return q ? q[0] : 0;
}

static uint16_t rd_u16(struct rd *r, const char *field)
{
	const uint8_t *q = rd_take(r, 2, field);

	return q ? le_ld16(q) : 0;
}

static uint32_t rd_u32(struct rd *r, const char *field)
{
	const uint8_t *q = rd_take(r, 4, field);

	return q ? le_ld32(q) : 0;
}

static uint64_t rd_u64(struct rd *r, const char *field)
{
	const uint8_t *q = rd_take(r, 8, field);

	return q ? le_ld64(q) : 0;
}

static float rd_f32(struct rd *r, const char *field)
{
	return u2f(rd_u32(r, field));
}

/* n reserved bytes that must be zero */
static void rd_zero(struct rd *r, size_t n, const char *field)
{
	const uint8_t *q = rd_take(r, n, field);

	for (size_t i = 0; q && i < n; i++)
		if (q[i]) {
			rd_fail(r, RS_E_PROTO, "%s: reserved byte %zu is "
				"0x%02x", field, i, q[i]);
			return;
		}
}

enum str_kind {
	STR_NAME,     /* 1..63 name characters */
	STR_OPT_NAME, /* 0..63 name characters */
	STR_TEXT,     /* 0..PROTO_ERRMSG_MAX bytes, controls -> '?' */
};

/* u16 length + bytes into out[cap] (NUL-terminated) */
static void rd_str(struct rd *r, const char *field, enum str_kind kind,
		   char *out, size_t cap)
{
	const size_t max = kind == STR_TEXT ? PROTO_ERRMSG_MAX : PROTO_NAME_MAX;
	uint16_t n = rd_u16(r, field);
	const uint8_t *q;

	out[0] = '\0';
	if (r->rc)
		return;
	if (n > max || n >= cap) {
		rd_fail(r, RS_E_PROTO, "%s: length %u over the limit %zu",
			field, n, max);
		return;
	}
	if (!(q = rd_take(r, n, field)))
		return;
	if (kind != STR_TEXT && (n || kind == STR_NAME) &&
	    proto_name_check(field, (const char *)q, n)) {
		rd_fail(r, RS_E_INVAL, "%s", rs_errormsg());
		return;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = q[i] >= 0x20 && q[i] < 0x7f ? (char)q[i] : '?';
	out[n] = '\0';
}

static void rd_end(struct rd *r)
{
	if (!r->rc && r->off != r->len)
		rd_fail(r, RS_E_PROTO, "%zu trailing bytes after offset %zu",
			r->len - r->off, r->off);
}

/* ---- encoding cursor ---- */

struct wr {
	uint8_t *p;
	size_t cap, off; /* off may pass cap: then nothing more is stored */
};

/* n bytes at the cursor, or NULL when they do not fit (still counted) */
static uint8_t *wr_take(struct wr *w, size_t n)
{
	uint8_t *q = NULL;

	if (w->off <= w->cap && w->cap - w->off >= n)
		q = w->p + w->off;
	w->off += n;
	return q;
}

static void wr_u8(struct wr *w, uint8_t v)
{
	uint8_t *q = wr_take(w, 1);

	if (q)
		q[0] = v;
}

static void wr_u16(struct wr *w, uint16_t v)
{
	uint8_t *q = wr_take(w, 2);

	if (q)
		le_st16(q, v);
}

static void wr_u32(struct wr *w, uint32_t v)
{
	uint8_t *q = wr_take(w, 4);

	if (q)
		le_st32(q, v);
}

static void wr_u64(struct wr *w, uint64_t v)
{
	uint8_t *q = wr_take(w, 8);

	if (q)
		le_st64(q, v);
}

static void wr_f32(struct wr *w, float v)
{
	wr_u32(w, f2u(v));
}

static void wr_zero(struct wr *w, size_t n)
{
	uint8_t *q = wr_take(w, n);

	if (q)
		memset(q, 0, n);
}

static void wr_bytes(struct wr *w, const void *s, size_t n)
{
	uint8_t *q = wr_take(w, n);

	if (q && n)
		memcpy(q, s, n);
}

static void wr_str(struct wr *w, const char *s, size_t n)
{
	wr_u16(w, (uint16_t)n);
	wr_bytes(w, s, n);
}

static void wr_begin(struct wr *w, void *buf, size_t cap)
{
	w->p = buf;
	w->cap = cap < PROTO_MAX_MESSAGE_BYTES ? cap : PROTO_MAX_MESSAGE_BYTES;
	w->off = PROTO_HDR_BYTES;
}

/* Write the header (now that the body length is known); total or error. */
static int wr_finish(struct wr *w, const struct proto_hdr *h, uint32_t op,
		     int reply)
{
	uint16_t flags = (uint16_t)((h ? h->flags & PROTO_F_TRACE : 0) |
				    (reply ? PROTO_F_REPLY : 0));

	if (h && !reply && (op == PROTO_OP_TABLE_CREATE ||
			    op == PROTO_OP_TABLE_DROP ||
			    op == PROTO_OP_TABLE_GROW))
		flags |= (uint16_t)(h->flags & PROTO_F_EPOCH);
	if (h && !reply && op == PROTO_OP_REPL)
		flags |= (uint16_t)(h->flags & PROTO_F_FROM);
	uint8_t *p = w->p;

	if (w->off > w->cap)
		return rs_seterr(RS_E_TOOBIG,
				 "%s %s needs %zu bytes, the buffer holds %zu",
				 proto_op_name(op), reply ? "reply" : "request",
				 w->off, w->cap);
	le_st32(p, PROTO_MAGIC);
	p[4] = PROTO_VERSION;
	p[5] = (uint8_t)op;
	le_st16(p + 6, flags);
	le_st64(p + 8, h ? h->req_id : 0);
	le_st64(p + 16, h ? h->trace_id : 0);
	le_st32(p + 24, (uint32_t)(w->off - PROTO_HDR_BYTES));
	le_st32(p + 28, (uint32_t)(reply && h ? h->status : 0));
	return (int)w->off;
}

/* A message whose body is only words: q[0..nq) then d[0..nd). */
static int enc_words(void *buf, size_t cap, const struct proto_hdr *h,
		     uint32_t op, int reply, const uint64_t *q, size_t nq,
		     const uint32_t *d, size_t nd)
{
	struct wr w;

	wr_begin(&w, buf, cap);
	for (size_t i = 0; i < nq; i++)
		wr_u64(&w, q[i]);
	for (size_t i = 0; i < nd; i++)
		wr_u32(&w, d[i]);
	return wr_finish(&w, h, op, reply);
}

/* ---- shared pieces: table spec and table info ---- */

static int enc_name_check(const char *what, const char *s, size_t cap,
			  int may_be_empty, size_t *len)
{
	*len = s ? strnlen(s, cap) : 0;
	if (*len == 0 && may_be_empty)
		return 0;
	if (*len >= cap)
		return rs_seterr(RS_E_INVAL, "%s: longer than %zu bytes", what,
				 cap - 1);
	return proto_name_check(what, s, *len);
}

static int enc_spec_check(const struct proto_table_spec *s, size_t *nlen)
{
	int rc = enc_name_check("name", s->name, sizeof(s->name), 0, nlen);

	if (rc)
		return rc;
	if (s->dtype >= PROTO_DTYPE_COUNT ||
	    s->optim.kind >= OPTIM_KIND_COUNT ||
	    s->init.kind >= INIT_KIND_COUNT ||
	    s->evict.policy >= PROTO_EVICT_COUNT)
		return rs_seterr(RS_E_INVAL, "table '%s': unknown dtype %u, "
				 "optimizer %u, initializer %u or eviction "
				 "policy %u", s->name, s->dtype, s->optim.kind,
				 s->init.kind, s->evict.policy);
	return 0;
}

/*
 * The fixed parts of a table spec and a table info, in wire order, each
 * written once: F(type, member, name) is a field of that wire type, Z(n,
 * name) n reserved zero bytes. The encoder and the decoder below expand
 * the same list, so they cannot disagree on order or width. The
 * hyper-parameters come from the spec's field table, whose rows are in
 * wire order.
 */
#define SPEC_FIELDS(F, Z)                                              \
	F(u32, dim, "dim")                                             \
	F(u8, dtype, "dtype")                                          \
	F(u8, optim.kind, "optimizer.type")                            \
	F(u8, init.kind, "initializer.type")                           \
	F(u8, wire_flags, "spec flags")                                \
	F(u64, capacity, "capacity")                                   \
	SPEC_OPTIM_PARAMS(SPEC_WIRE_OPTIM, F)                          \
	SPEC_INIT_PARAMS(SPEC_WIRE_INIT, F)

/* a row of the field table (common/spec_fields.h) as a wire field */
#define SPEC_WIRE_OPTIM(F, n, type, ...) F(type, optim.n, "optimizer." #n)
#define SPEC_WIRE_INIT(F, n, type, ...) F(type, init.n, "initializer." #n)

#define INFO_FIELDS(F, Z)                                              \
	F(u32, id, "id")                                               \
	Z(4, "info reserved")                                          \
	F(u64, generation, "generation")                               \
	F(u64, index.addr, "index.addr")                               \
	F(u64, index.bytes, "index.bytes")                             \
	F(u32, index.rkey, "index.rkey")                               \
	F(u32, index.layout, "index.layout")                           \
	F(u64, index.nbuckets, "index.nbuckets")                       \
	F(u32, index.bucket_bytes, "index.bucket_bytes")               \
	F(u32, index.buckets_off, "index.buckets_off")                 \
	F(u32, index.slots, "index.slots")                             \
	Z(4, "index reserved")                                         \
	F(u64, index.seed1, "index.seed1")                             \
	F(u64, index.seed2, "index.seed2")                             \
	F(u64, rows.addr, "rows.addr")                                 \
	F(u64, rows.bytes, "rows.bytes")                               \
	F(u32, rows.rkey, "rows.rkey")                                 \
	F(u32, rows.layout, "rows.layout")                             \
	F(u32, rows.row_bytes, "rows.row_bytes")                       \
	Z(4, "rows reserved")

typedef uint8_t wire_u8;
typedef uint32_t wire_u32;
typedef uint64_t wire_u64;
typedef float wire_f32;

/* expansions over a struct pointer `s` and a writer `w` / reader `r` */
#define WR_FIELD(type, member, name) wr_##type(w, (wire_##type)s->member);
#define WR_ZERO(n, name) wr_zero(w, n);
#define RD_FIELD(type, member, name) s->member = rd_##type(r, name);
#define RD_ZERO(n, name) rd_zero(r, n, name);

/* The eviction block after the name (spec flag PROTO_SPEC_F_EVICT). */
#define EVICT_FIELDS(F, Z)                                             \
	F(u8, evict.policy, "eviction.policy")                         \
	Z(3, "eviction reserved")                                      \
	F(u32, evict.admit_after, "eviction.admit_after")                  \
	F(u64, evict.max_rows, "eviction.max_rows")                    \
	F(u32, evict.ttl_s, "eviction.ttl")                            \
	Z(4, "eviction reserved")

/* The growth block after it (spec flag PROTO_SPEC_F_GROW). */
#define GROW_FIELDS(F, Z)                                              \
	F(u8, grow_log2, "grow_log2")                                  \
	Z(7, "growth reserved")

/* The identity block after it (spec flag PROTO_SPEC_F_IDENT). */
#define IDENT_FIELDS(F, Z)                                             \
	F(u64, ident, "ident")

#define SPEC_F_KNOWN (PROTO_SPEC_F_EVICT | PROTO_SPEC_F_GROW |         \
		      PROTO_SPEC_F_IDENT)

static void wr_spec(struct wr *w, const struct proto_table_spec *spec,
		    size_t nlen)
{
	struct proto_table_spec c = *spec;
	const struct proto_table_spec *s = &c;

	c.wire_flags = (proto_evict_active(&c.evict) ? PROTO_SPEC_F_EVICT
						     : 0) |
		       (c.grow_log2 ? PROTO_SPEC_F_GROW : 0) |
		       (c.ident ? PROTO_SPEC_F_IDENT : 0);
	SPEC_FIELDS(WR_FIELD, WR_ZERO)
	wr_str(w, s->name, nlen);
	if (c.wire_flags & PROTO_SPEC_F_EVICT) {
		EVICT_FIELDS(WR_FIELD, WR_ZERO)
	}
	if (c.wire_flags & PROTO_SPEC_F_GROW) {
		GROW_FIELDS(WR_FIELD, WR_ZERO)
	}
	if (c.wire_flags & PROTO_SPEC_F_IDENT) {
		IDENT_FIELDS(WR_FIELD, WR_ZERO)
	}
}

/* structure only; semantics are check_spec()'s */
static void rd_spec(struct rd *r, struct proto_table_spec *s)
{
	memset(s, 0, sizeof(*s));
	SPEC_FIELDS(RD_FIELD, RD_ZERO)
	rd_str(r, "name", STR_NAME, s->name, sizeof(s->name));
	if (r->rc)
		return;
	if (s->wire_flags & ~SPEC_F_KNOWN) {
		rd_fail(r, RS_E_PROTO, "spec flags: unknown bits 0x%02x",
			s->wire_flags & ~SPEC_F_KNOWN);
		return;
	}
	if (s->wire_flags & PROTO_SPEC_F_EVICT) {
		EVICT_FIELDS(RD_FIELD, RD_ZERO)
		if (r->rc)
			return;
	}
	if (s->wire_flags & PROTO_SPEC_F_GROW) {
		GROW_FIELDS(RD_FIELD, RD_ZERO)
		if (r->rc)
			return;
	}
	if (s->wire_flags & PROTO_SPEC_F_IDENT) {
		IDENT_FIELDS(RD_FIELD, RD_ZERO)
		if (r->rc)
			return;
		if (!s->ident) {
			rd_fail(r, RS_E_PROTO, "ident: an identity block "
				"with identity 0");
			return;
		}
	}
	s->wire_flags = 0; /* an encoding detail: specs compare equal */
	if (s->dtype >= PROTO_DTYPE_COUNT)
		rd_fail(r, RS_E_PROTO, "dtype: unknown value %u", s->dtype);
	else if (s->optim.kind >= OPTIM_KIND_COUNT)
		rd_fail(r, RS_E_PROTO, "optimizer.type: unknown value %u",
			s->optim.kind);
	else if (s->init.kind >= INIT_KIND_COUNT)
		rd_fail(r, RS_E_PROTO, "initializer.type: unknown value %u",
			s->init.kind);
}

static void check_spec(struct rd *r, const struct proto_table_spec *s,
		       const struct proto_limits *lim)
{
	int rc;

	if (r->rc)
		return;
	if ((rc = proto_table_spec_validate(s, lim)))
		rd_fail(r, rc, "table '%s': %s", s->name, rs_errormsg());
}

static void wr_info(struct wr *w, const struct proto_table_info *s,
		    size_t nlen)
{
	INFO_FIELDS(WR_FIELD, WR_ZERO)
	wr_spec(w, &s->spec, nlen);
}

static void rd_info(struct rd *r, struct proto_table_info *s)
{
	INFO_FIELDS(RD_FIELD, RD_ZERO)
	rd_spec(r, &s->spec);
}

/* the geometry a client will compute remote addresses from */
static void check_info(struct rd *r, const struct proto_table_info *t,
		       const struct proto_limits *lim)
{
	const struct proto_index_geom *x = &t->index;
	const struct proto_rows_region *y = &t->rows;
	const uint64_t min_row =
		(uint64_t)t->spec.dim * proto_dtype_size(t->spec.dtype);

	check_spec(r, &t->spec, lim);
	if (r->rc)
		return;
	if (x->addr + x->bytes < x->addr || y->addr + y->bytes < y->addr)
		rd_fail(r, RS_E_INVAL, "table '%s': a region wraps around the "
			"address space", t->spec.name);
	else if (x->nbuckets == 0 || x->bucket_bytes == 0 || x->slots == 0)
		rd_fail(r, RS_E_INVAL, "table '%s': index.nbuckets, "
			"bucket_bytes and slots must be >= 1", t->spec.name);
	else if (x->buckets_off > x->bytes ||
		 x->nbuckets > (x->bytes - x->buckets_off) / x->bucket_bytes)
		rd_fail(r, RS_E_INVAL, "table '%s': %" PRIu64 " buckets of %u "
			"bytes from offset %u overflow the %" PRIu64
			"-byte index region", t->spec.name, x->nbuckets,
			x->bucket_bytes, x->buckets_off, x->bytes);
	else if (y->row_bytes < min_row)
		rd_fail(r, RS_E_INVAL, "table '%s': rows.row_bytes %u is "
			"smaller than a row of %u x %s", t->spec.name,
			y->row_bytes, t->spec.dim, dt_name(t->spec.dtype));
}

/* ---- decoders, one per body ---- */

static int dec_hello_req(struct rd *r, struct proto_hello_req *m)
{
	m->recv_bytes = rd_u32(r, "recv_bytes");
	rd_zero(r, 4, "reserved");
	rd_str(r, "name", STR_OPT_NAME, m->name, sizeof(m->name));
	if (!r->rc && check_limit("recv_bytes", m->recv_bytes,
				  PROTO_MIN_MESSAGE_BYTES,
				  PROTO_MAX_MESSAGE_BYTES))
		rd_fail(r, RS_E_INVAL, "%s", rs_errormsg());
	return r->rc;
}

static int dec_hello_reply(struct rd *r, struct proto_hello_reply *m)
{
	m->node_id = rd_u64(r, "node_id");
	m->dir_generation = rd_u64(r, "dir_generation");
	m->limits.max_message_bytes = rd_u32(r, "max_message_bytes");
	m->limits.max_batch_keys = rd_u32(r, "max_batch_keys");
	m->limits.max_dim = rd_u32(r, "max_dim");
	m->limits.max_tables = rd_u32(r, "max_tables");
	rd_str(r, "name", STR_OPT_NAME, m->name, sizeof(m->name));
	if (!r->rc && proto_limits_validate(&m->limits))
		rd_fail(r, RS_E_INVAL, "%s", rs_errormsg());
	return r->rc;
}

static int dec_list_req(struct rd *r, struct proto_list_req *m)
{
	m->start = rd_u32(r, "start");
	rd_zero(r, 4, "reserved");
	return r->rc;
}

/* entries [start, start + n) of a list must lie within total */
static int rd_entries(struct rd *r, uint32_t start, uint32_t n,
		      uint32_t total)
{
	if ((uint64_t)start + n > total)
		return rd_fail(r, RS_E_PROTO, "entries [%u, %u + %u) exceed "
			       "total %u", start, start, n, total);
	return 0;
}

static void rd_stat(struct rd *r, struct proto_stat *e)
{
	e->table_id = rd_u32(r, "stat.table_id");
	e->value = rd_u64(r, "stat.value");
	rd_str(r, "stat.key", STR_NAME, e->key, sizeof(e->key));
}

static int dec_table_dir(struct rd *r, const struct proto_limits *lim,
			  struct proto_table_dir *d)
{
	struct proto_table_info t;

	d->generation = rd_u64(r, "generation");
	d->total = rd_u32(r, "total");
	d->start = rd_u32(r, "start");
	d->n = rd_u32(r, "n");
	rd_zero(r, 4, "reserved");
	if (r->rc)
		return r->rc;
	if (d->total > lim->max_tables)
		return rd_fail(r, RS_E_TOOBIG, "total: %u tables, over the "
			       "limit %u", d->total, lim->max_tables);
	if (rd_entries(r, d->start, d->n, d->total))
		return r->rc;
	d->p = r->p;
	d->len = r->len;
	d->off = r->off;
	d->next = 0;
	/* validate every entry now, so that iteration cannot fail */
	for (uint32_t i = 0; i < d->n && !r->rc; i++) {
		rd_info(r, &t);
		check_info(r, &t, lim);
	}
	return r->rc;
}

static int dec_stats(struct rd *r, struct proto_stats *s)
{
	struct proto_stat e;

	s->total = rd_u32(r, "total");
	s->start = rd_u32(r, "start");
	s->n = rd_u32(r, "n");
	rd_zero(r, 4, "reserved");
	if (r->rc)
		return r->rc;
	if (rd_entries(r, s->start, s->n, s->total))
		return r->rc;
	s->p = r->p;
	s->len = r->len;
	s->off = r->off;
	s->next = 0;
	/* each entry takes >= STAT_FIXED + 3 bytes: the loop is bounded
	 * by the body length whatever n claims */
	for (uint32_t i = 0; i < s->n && !r->rc; i++)
		rd_stat(r, &e);
	return r->rc;
}

/*
 * n, dim and dtype of a keyed body against the limits, then the length of
 * what follows the fixed part: items_bytes of keys or statuses, plus *rb
 * bytes of rows when the body carries rows (else dim and dtype must be 0).
 */
static int rd_keyed_shape(struct rd *r, const struct proto_limits *lim,
			  int rows, uint32_t n, uint32_t dim, uint32_t dtype,
			  uint32_t dim_max, const char *items,
			  uint64_t items_bytes, uint64_t *rb)
{
	*rb = 0;
	if (n > lim->max_batch_keys)
		return rd_fail(r, RS_E_TOOBIG, "n: %u keys, over the limit %u",
			       n, lim->max_batch_keys);
	if (rows) {
		if (dtype >= PROTO_DTYPE_COUNT)
			return rd_fail(r, RS_E_PROTO, "dtype: unknown value %u",
				       dtype);
		if (dim == 0)
			return rd_fail(r, RS_E_PROTO, "dim: must be >= 1");
		if (dim > dim_max)
			return rd_fail(r, RS_E_TOOBIG, "dim: %u is over the "
				       "limit %u", dim, dim_max);
		*rb = rows_bytes(n, dim, dtype);
	} else if (dim || dtype) {
		return rd_fail(r, RS_E_PROTO, "dim %u / dtype %u: must be 0 "
			       "(no rows)", dim, dtype);
	}
	if (r->len - r->off != items_bytes + *rb)
		return rd_fail(r, RS_E_PROTO, "%u %s%s need %" PRIu64
			       " bytes after the fixed part, %zu present",
			       n, items, *rb ? " and rows" : "",
			       items_bytes + *rb, r->len - r->off);
	return 0;
}

static int dec_keys_req(struct rd *r, uint32_t op,
			 const struct proto_limits *lim,
			 struct proto_keys_req *m)
{
	const uint32_t allowed = keys_flags_allowed(op);
	uint64_t rb;

	m->table_id = rd_u32(r, "table_id");
	m->flags = rd_u32(r, "flags");
	m->table_gen = rd_u64(r, "table_gen");
	m->n = rd_u32(r, "n");
	m->dim = rd_u32(r, "dim");
	m->dtype = rd_u8(r, "dtype");
	rd_zero(r, 3, "reserved");
	if (m->flags & PROTO_KF_LR)
		m->lr = rd_f32(r, "lr");
	else
		rd_zero(r, 4, "lr (without the LR flag)");
	m->keys = m->rows = NULL;
	if (r->rc)
		return r->rc;
	if (m->flags & ~allowed)
		return rd_fail(r, RS_E_PROTO, "flags: unknown bits 0x%x",
			       m->flags & ~allowed);
	if ((m->flags & PROTO_KF_LR) && !proto_lr_ok(m->lr))
		return rd_fail(r, RS_E_INVAL, "lr: %g is not a finite number "
			       ">= 0", (double)m->lr);
	/* the epoch sits between the fixed part and the keys: the size
	 * check below counts from after it */
	if (m->flags & PROTO_KF_EPOCH) {
		m->epoch = rd_u64(r, "epoch");
		if (!r->rc && m->epoch == 0)
			return rd_fail(r, RS_E_PROTO, "epoch: 0 with the "
				       "EPOCH flag");
	}
	/* then the exactly-once fields (after the epoch, if any) */
	if (m->flags & PROTO_KF_ONCE) {
		m->client = rd_u64(r, "client");
		m->seq = rd_u64(r, "seq");
		m->done_below = rd_u64(r, "done_below");
		if (!r->rc && once_check(once_fields, m->client, m->seq,
					 m->done_below))
			return rd_fail(r, RS_E_PROTO, "%s (with the ONCE "
				       "flag)", rs_errormsg());
	}
	if (op == PROTO_OP_LOAD && m->n && m->dtype != PROTO_DTYPE_FP32)
		return rd_fail(r, RS_E_PROTO, "dtype: LOAD rows are fp32");
	if (rd_keyed_shape(r, lim, req_has_rows(op), m->n, m->dim, m->dtype,
			   req_dim_max(op, lim), "keys", 8 * (uint64_t)m->n,
			   &rb))
		return r->rc;
	m->keys = rd_take(r, 8 * (size_t)m->n, "keys");
	if (rb)
		m->rows = rd_take(r, (size_t)rb, "rows");
	return r->rc;
}

static int dec_keys_reply(struct rd *r, uint32_t op,
			   const struct proto_limits *lim,
			   struct proto_keys_reply *m)
{
	const int may_create = op == PROTO_OP_GET_OR_INIT ||
			       op == PROTO_OP_LOAD || op == PROTO_OP_REPL ||
			       op == PROTO_OP_PUT || op == PROTO_OP_UPDATE;
	uint64_t rb;

	uint8_t form;

	m->n = rd_u32(r, "n");
	m->dim = rd_u32(r, "dim");
	m->dtype = rd_u8(r, "dtype");
	form = rd_u8(r, "form");
	rd_zero(r, 6, "reserved");
	m->status = m->rows = m->images = NULL;
	if (r->rc)
		return r->rc;
	if (form > REPLY_FORM_IMAGES ||
	    (form == REPLY_FORM_IMAGES && op != PROTO_OP_UPDATE))
		return rd_fail(r, RS_E_PROTO, "form: %u is not a %s reply form",
			       form, proto_op_name(op));
	if (rd_keyed_shape(r, lim, reply_has_rows(op) || form, m->n, m->dim,
			   m->dtype, lim->max_dim, "statuses",
			   status_bytes(m->n) +
				   (form ? (uint64_t)PROTO_IMAGE_BYTES * m->n
					 : 0),
			   &rb))
		return r->rc;
	m->status = rd_take(r, 4 * (size_t)m->n, "status");
	for (uint32_t i = 0; i < m->n; i++) {
		int32_t st = proto_status_at(m->status, i);

		if (st > PROTO_ST_CREATED ||
		    (st == PROTO_ST_CREATED && !may_create))
			return rd_fail(r, RS_E_PROTO, "status[%u]: %d is not "
				       "a %s key status", i, st,
				       proto_op_name(op));
	}
	if (m->n & 1)
		rd_zero(r, 4, "status padding");
	if (form)
		m->images = rd_take(r, (size_t)PROTO_IMAGE_BYTES * m->n,
				    "images");
	for (uint32_t i = 0; form && !r->rc && i < m->n; i++) {
		const uint8_t *im = (const uint8_t *)m->images +
				    (size_t)i * PROTO_IMAGE_BYTES;

		if (le_ld32(im + 20))
			return rd_fail(r, RS_E_PROTO, "images[%u]: reserved "
				       "word is not 0", i);
	}
	if (rb)
		m->rows = rd_take(r, (size_t)rb, "rows");
	return r->rc;
}

void proto_image_at(const void *images, uint32_t i, struct proto_image *out)
{
	const uint8_t *im = (const uint8_t *)images +
			    (size_t)i * PROTO_IMAGE_BYTES;

	out->version = le_ld64(im);
	out->checksum = le_ld64(im + 8);
	out->slot = le_ld32(im + 16);
}

static int dec_error(struct rd *r, struct proto_error *e)
{
	rd_str(r, "message", STR_TEXT, e->msg, sizeof(e->msg));
	return r->rc;
}

static int dec_hdr(struct proto_hdr *h, const uint8_t *p, size_t len,
		   const struct proto_limits *lim)
{
	uint32_t magic;

	if (len < PROTO_HDR_BYTES)
		return rs_seterr(RS_E_PROTO, "message of %zu bytes is shorter "
				 "than the %d-byte header", len,
				 PROTO_HDR_BYTES);
	magic = le_ld32(p);
	h->version = p[4];
	h->opcode = p[5];
	h->flags = le_ld16(p + 6);
	h->req_id = le_ld64(p + 8);
	h->trace_id = le_ld64(p + 16);
	h->body_len = le_ld32(p + 24);
	h->status = (int32_t)le_ld32(p + 28);
	if (magic != PROTO_MAGIC)
		return rs_seterr(RS_E_PROTO, "bad magic 0x%08x (expected "
				 "0x%08x)", magic, PROTO_MAGIC);
	if (h->version != PROTO_VERSION)
		return rs_seterr(RS_E_PROTO, "unsupported protocol version %u "
				 "(this build speaks %d)", h->version,
				 PROTO_VERSION);
	if (h->opcode == 0 || h->opcode >= PROTO_OP_COUNT)
		return rs_seterr(RS_E_PROTO, "unknown opcode %u", h->opcode);
	if (h->flags & ~PROTO_F_ALL)
		return rs_seterr(RS_E_PROTO, "%s: unknown header flags 0x%x",
				 proto_op_name(h->opcode),
				 h->flags & ~PROTO_F_ALL);
	if (len > lim->max_message_bytes)
		return rs_seterr(RS_E_TOOBIG, "%s: message of %zu bytes is "
				 "over the limit %u", proto_op_name(h->opcode),
				 len, lim->max_message_bytes);
	if (h->body_len != len - PROTO_HDR_BYTES)
		return rs_seterr(RS_E_PROTO, "%s: header says %u body bytes, "
				 "%zu arrived", proto_op_name(h->opcode),
				 h->body_len, len - PROTO_HDR_BYTES);
	if (!(h->flags & PROTO_F_REPLY) && h->status != 0)
		return rs_seterr(RS_E_PROTO, "%s request: status %d (must be "
				 "0)", proto_op_name(h->opcode), h->status);
	if ((h->flags & PROTO_F_REPLY) && h->status > 0)
		return rs_seterr(RS_E_PROTO, "%s reply: status %d (must be "
				 "<= 0)", proto_op_name(h->opcode), h->status);
	return 0;
}

/* ---- CKPT ---- */

#define CKPT_TIMEOUT_MAX 600000u

/* A name that may become a path component: not "." or "..", no leading
 * dot (proto names allow dots). */
static int ckpt_name_ok(const char *s)
{
	return s[0] && s[0] != '.';
}

static int dec_ckpt_req(struct rd *r, struct proto_ckpt_req *m)
{
	const uint8_t *id;
	int dump;

	m->phase = rd_u32(r, "phase");
	m->flags = rd_u32(r, "flags");
	m->timeout_ms = rd_u32(r, "timeout_ms");
	m->table_idx = rd_u32(r, "table_idx");
	m->part_idx = rd_u32(r, "part_idx");
	rd_zero(r, 4, "reserved");
	id = rd_take(r, PROTO_CKPT_ID_BYTES, "id");
	if (id)
		memcpy(m->id, id, PROTO_CKPT_ID_BYTES);
	if (m->flags & PROTO_CKF_INCR) {
		id = rd_take(r, PROTO_CKPT_ID_BYTES, "base");
		if (id)
			memcpy(m->base, id, PROTO_CKPT_ID_BYTES);
	}
	if (m->flags & PROTO_CKF_EPOCH)
		m->epoch = rd_u64(r, "epoch");
	rd_str(r, "dir", STR_OPT_NAME, m->dir, sizeof(m->dir));
	rd_str(r, "table", STR_OPT_NAME, m->table, sizeof(m->table));
	rd_str(r, "file", STR_OPT_NAME, m->file, sizeof(m->file));
	if (r->rc)
		return r->rc;
	if (m->phase < PROTO_CKPT_FREEZE || m->phase > PROTO_CKPT_THAW)
		return rd_fail(r, RS_E_PROTO, "phase: unknown value %u",
			       m->phase);
	if (m->flags & ~(PROTO_CKF_STATE | PROTO_CKF_INCR | PROTO_CKF_EPOCH |
			 PROTO_CKF_HELD))
		return rd_fail(r, RS_E_PROTO, "flags: unknown bits 0x%x",
			       m->flags & ~(PROTO_CKF_STATE | PROTO_CKF_INCR |
					    PROTO_CKF_EPOCH | PROTO_CKF_HELD));
	if ((m->flags & PROTO_CKF_HELD) &&
	    (m->phase != PROTO_CKPT_DUMP || !(m->flags & PROTO_CKF_EPOCH) ||
	     (m->flags & PROTO_CKF_INCR)))
		return rd_fail(r, RS_E_PROTO, "flags: every held row is a "
			       "DUMP of a cluster member's epoch, not an "
			       "increment");
	if ((m->flags & PROTO_CKF_EPOCH) &&
	    (m->phase == PROTO_CKPT_THAW || m->epoch == 0))
		return rd_fail(r, RS_E_PROTO, "flags: an epoch (>= 1) is for "
			       "FREEZE and DUMP");
	if ((m->flags & PROTO_CKF_INCR) && (m->phase != PROTO_CKPT_DUMP ||
					    !(m->flags & PROTO_CKF_STATE)))
		return rd_fail(r, RS_E_PROTO, "flags: an incremental part is "
			       "a DUMP with optimizer state");
	if (m->phase == PROTO_CKPT_FREEZE &&
	    (m->timeout_ms < 1 || m->timeout_ms > CKPT_TIMEOUT_MAX))
		return rd_fail(r, RS_E_INVAL, "timeout_ms: %u is not in "
			       "[1, %u]", m->timeout_ms, CKPT_TIMEOUT_MAX);
	dump = m->phase == PROTO_CKPT_DUMP;
	if (dump && (!ckpt_name_ok(m->dir) || !ckpt_name_ok(m->file) ||
		     !m->table[0]))
		return rd_fail(r, RS_E_INVAL, "DUMP needs a table, and a "
			       "directory and a file name that do not start "
			       "with a dot");
	if (!dump && (m->dir[0] || m->table[0] || m->file[0]))
		return rd_fail(r, RS_E_PROTO, "names are for DUMP only");
	return 0;
}

static int dec_ckpt_reply(struct rd *r, struct proto_ckpt_reply *m)
{
	m->rows = rd_u64(r, "rows");
	m->deleted = rd_u64(r, "deleted");
	m->raw_bytes = rd_u64(r, "raw_bytes");
	m->bytes = rd_u64(r, "bytes");
	m->xxh64 = rd_u64(r, "xxh64");
	m->paused_us = rd_u64(r, "paused_us");
	return r->rc;
}

/* ---- CONFIG and REPL ---- */

/* a member's address: printable ASCII without space (0x21..0x7e) */
static int addr_char(unsigned char c)
{
	return c >= 0x21 && c <= 0x7e;
}

/* 0 if s[0..len) may be a member's address, else RS_E_INVAL */
static int addr_check(const char *what, const char *s, size_t len)
{
	return str_check(what, s, len, PROTO_ADDR_MAX, addr_char,
			 "printable ASCII (0x21..0x7e)");
}

/* ready: an epoch up to the configuration's, 0 when the node is none of
 * its members (and always 0 with epoch 0) */
static int ready_check(const struct proto_config *c)
{
	if (c->ready > c->epoch)
		return rs_seterr(RS_E_PROTO, "ready: epoch %" PRIu64 " is past "
				 "the configuration's %" PRIu64, c->ready,
				 c->epoch);
	if (c->ready && c->self == PROTO_CONFIG_NO_SELF)
		return rs_seterr(RS_E_PROTO, "ready: epoch %" PRIu64 " from a "
				 "node that is no member (self 0x%x)",
				 c->ready, PROTO_CONFIG_NO_SELF);
	return 0;
}

/* The fixed part of a CONFIG reply: 0, or the decoder's code with a
 * message naming the field. */
static int config_check(const struct proto_config *c)
{
	if (c->epoch == 0) {
		if (c->r || c->vnodes || c->n ||
		    c->self != PROTO_CONFIG_NO_SELF)
			return rs_seterr(RS_E_PROTO, "epoch 0 (no cluster): "
					 "r %u, vnodes %u, n %u, self 0x%x "
					 "must be 0, 0, 0 and 0x%x", c->r,
					 c->vnodes, c->n, c->self,
					 PROTO_CONFIG_NO_SELF);
		return 0;
	}
	if (c->lease_ms > PROTO_CONFIG_MAX_LEASE_MS)
		return rs_seterr(RS_E_INVAL, "lease_ms: %u is over the limit "
				 "%u", c->lease_ms, PROTO_CONFIG_MAX_LEASE_MS);
	if (c->r < 1 || c->r > PROTO_CONFIG_MAX_R)
		return rs_seterr(RS_E_INVAL, "r: %u is not in [1, %u]", c->r,
				 PROTO_CONFIG_MAX_R);
	if (c->vnodes < 1 || c->vnodes > PROTO_CONFIG_MAX_VNODES)
		return rs_seterr(RS_E_INVAL, "vnodes: %u is not in [1, %u]",
				 c->vnodes, PROTO_CONFIG_MAX_VNODES);
	if (c->n > PROTO_CONFIG_MAX_MEMBERS)
		return rs_seterr(RS_E_TOOBIG, "n: %u members, over the limit "
				 "%u", c->n, PROTO_CONFIG_MAX_MEMBERS);
	if (c->self >= c->n && c->self != PROTO_CONFIG_NO_SELF)
		return rs_seterr(RS_E_PROTO, "self: %u is neither a member "
				 "index (n %u) nor 0x%x", c->self, c->n,
				 PROTO_CONFIG_NO_SELF);
	return ready_check(c);
}

/* u16 length + 1..PROTO_ADDR_MAX address bytes into out (NUL-terminated) */
static void rd_addr(struct rd *r, const char *field, char *out)
{
	uint16_t n = rd_u16(r, field);
	const uint8_t *q;

	out[0] = '\0';
	if (r->rc)
		return;
	if (n > PROTO_ADDR_MAX) {
		rd_fail(r, RS_E_PROTO, "%s: length %u over the limit %d",
			field, n, PROTO_ADDR_MAX);
		return;
	}
	if (!(q = rd_take(r, n, field)))
		return;
	if (addr_check(field, (const char *)q, n)) {
		rd_fail(r, RS_E_INVAL, "%s", rs_errormsg());
		return;
	}
	memcpy(out, q, n);
	out[n] = '\0';
}

/* member i of a CONFIG reply: u8 state, u8 reserved, id, addr */
static void rd_member(struct rd *r, uint32_t i, struct proto_member *m)
{
	char f[40];

	memset(m, 0, sizeof(*m));
	snprintf(f, sizeof(f), "members[%u].state", i);
	m->state = rd_u8(r, f);
	if (!r->rc && m->state > PROTO_MEMBER_DOWN) {
		rd_fail(r, RS_E_PROTO, "%s: unknown value %u", f, m->state);
		return;
	}
	snprintf(f, sizeof(f), "members[%u] reserved", i);
	rd_zero(r, 1, f);
	snprintf(f, sizeof(f), "members[%u].id", i);
	rd_str(r, f, STR_NAME, m->id, sizeof(m->id));
	snprintf(f, sizeof(f), "members[%u].addr", i);
	rd_addr(r, f, m->addr);
}

static int dec_config(struct rd *r, struct proto_config *c)
{
	char prev[PROTO_NAME_MAX + 1] = "";
	struct proto_member m;
	int rc;

	c->epoch = rd_u64(r, "epoch");
	c->r = rd_u32(r, "r");
	c->vnodes = rd_u32(r, "vnodes");
	c->n = rd_u32(r, "n");
	c->self = rd_u32(r, "self");
	if (r->rc)
		return r->rc;
	if ((rc = config_check(c)))
		return rd_fail(r, rc, "%s", rs_errormsg());
	c->p = r->p;
	c->len = r->len;
	c->off = r->off;
	c->next = 0;
	/* validate every entry now, so that iteration cannot fail (n is
	 * bounded above, and each entry takes >= 6 bytes) */
	for (uint32_t i = 0; i < c->n && !r->rc; i++) {
		rd_member(r, i, &m);
		if (!r->rc && i > 0 && strcmp(prev, m.id) >= 0)
			return rd_fail(r, RS_E_PROTO, "members[%u].id: '%s' "
				       "after '%s': members are sorted by id, "
				       "each once", i, m.id, prev);
		memcpy(prev, m.id, sizeof(prev));
	}
	c->age_ms = rd_u32(r, "age_ms");
	c->lease_ms = rd_u32(r, "lease_ms");
	c->ready = rd_u64(r, "ready");
	if (r->rc)
		return r->rc;
	if (c->epoch == 0 && (c->lease_ms || c->age_ms != PROTO_CONFIG_AGE_NONE))
		return rd_fail(r, RS_E_PROTO, "epoch 0 (no cluster): age_ms "
			       "0x%x, lease_ms %u must be 0x%x and 0",
			       c->age_ms, c->lease_ms, PROTO_CONFIG_AGE_NONE);
	if (c->lease_ms > PROTO_CONFIG_MAX_LEASE_MS)
		return rd_fail(r, RS_E_INVAL, "lease_ms: %u is over the limit "
			       "%u", c->lease_ms, PROTO_CONFIG_MAX_LEASE_MS);
	if ((rc = ready_check(c)))
		return rd_fail(r, rc, "%s", rs_errormsg());
	return 0;
}

/* a deleted record's row: all zero bytes */
static int row_is_zero(const uint8_t *row, size_t bytes, size_t *at)
{
	for (size_t b = 0; b < bytes; b++)
		if (row[b]) {
			*at = b;
			return 0;
		}
	return 1;
}

/*
 * The exactly-once completion of REPL record i: none (client 0: seq,
 * done_below, status and cred 0) or a call's (client, seq >= 1,
 * done_below <= seq, status 0 or PROTO_ST_CREATED, any cred). 0 or
 * RS_E_PROTO naming the field. Every record of every REPL passes here:
 * the field names are formatted only for a message.
 */
static int repl_once_check(uint32_t i, uint64_t client, uint64_t seq,
			   uint64_t done_below, int32_t status, uint32_t cred)
{
	char f[3][32];
	const char *const fields[3] = { f[0], f[1], f[2] };

	if (client == 0) {
		if (seq == 0 && done_below == 0 && status == 0 && cred == 0)
			return 0;
		if (cred && !seq && !done_below && !status)
			return rs_seterr(RS_E_PROTO, "creds[%u] %u: must be 0 "
					 "when clients[%u] is 0", i, cred, i);
		return rs_seterr(RS_E_PROTO, "seqs[%u] %" PRIu64 ", "
				 "done_below[%u] %" PRIu64 ", statuses[%u] "
				 "%d: must be 0 when clients[%u] is 0", i,
				 seq, i, done_below, i, status, i);
	}
	if (seq >= 1 && done_below <= seq &&
	    (status == PROTO_ST_OK || status == PROTO_ST_CREATED))
		return 0;
	snprintf(f[0], sizeof(f[0]), "clients[%u]", i);
	snprintf(f[1], sizeof(f[1]), "seqs[%u]", i);
	snprintf(f[2], sizeof(f[2]), "done_below[%u]", i);
	if (once_check(fields, client, seq, done_below))
		return RS_E_PROTO;
	return rs_seterr(RS_E_PROTO, "statuses[%u]: %d is not 0 or %d "
			 "(created)", i, status, PROTO_ST_CREATED);
}

static int dec_repl_req(struct rd *r, const struct proto_limits *lim,
			int from, struct proto_repl_req *m)
{
	const uint32_t width_max = state_width_max(lim->max_dim);
	const uint8_t *clients, *seqs, *done, *statuses, *creds, *kinds, *rows;
	size_t row, at;
	uint64_t need;

	m->epoch = rd_u64(r, "epoch");
	m->n = rd_u32(r, "n");
	m->width = rd_u32(r, "width");
	rd_str(r, "table", STR_NAME, m->table, sizeof(m->table));
	rd_zero(r, (size_t)pad8(r->off), "table padding");
	m->keys = m->clients = m->seqs = m->done_below = NULL;
	m->statuses = m->creds = m->kinds = m->rows = NULL;
	m->from_inc = m->from_seq = m->table_ident = 0;
	if (r->rc)
		return r->rc;
	if (m->epoch == 0)
		return rd_fail(r, RS_E_PROTO, "epoch: must be >= 1");
	if (m->n > lim->max_batch_keys)
		return rd_fail(r, RS_E_TOOBIG, "n: %u records, over the limit "
			       "%u", m->n, lim->max_batch_keys);
	if (m->width == 0)
		return rd_fail(r, RS_E_PROTO, "width: must be >= 1");
	if (m->width > width_max)
		return rd_fail(r, RS_E_TOOBIG, "width: %u is over the limit "
			       "%u", m->width, width_max);
	/* n <= 2^24, width <= 3 * 2^16 + 1: no product overflows */
	row = 4 * (size_t)m->width;
	need = repl_records_bytes(m->n, m->width) +
	       (from ? PROTO_FROM_BYTES : 0);
	if (r->len - r->off != need)
		return rd_fail(r, RS_E_PROTO, "%u records of width %u%s need %"
			       PRIu64 " bytes after the table name, %zu "
			       "present", m->n, m->width,
			       from ? " and the sender" : "", need,
			       r->len - r->off);
	m->keys = rd_take(r, 8 * (size_t)m->n, "keys");
	clients = rd_take(r, 8 * (size_t)m->n, "clients");
	seqs = rd_take(r, 8 * (size_t)m->n, "seqs");
	done = rd_take(r, 8 * (size_t)m->n, "done_below");
	statuses = rd_take(r, 4 * (size_t)m->n, "statuses");
	creds = rd_take(r, 4 * (size_t)m->n, "creds");
	for (uint32_t i = 0; creds && i < m->n; i++)
		if (repl_once_check(i, proto_key_at(clients, i),
				    proto_key_at(seqs, i),
				    proto_key_at(done, i),
				    proto_status_at(statuses, i),
				    proto_u32_at(creds, i)))
			return rd_fail(r, RS_E_PROTO, "%s", rs_errormsg());
	kinds = rd_take(r, m->n, "kinds");
	for (uint32_t i = 0; kinds && i < m->n; i++)
		if (kinds[i] > PROTO_REPL_DELETED)
			return rd_fail(r, RS_E_PROTO, "kinds[%u]: unknown "
				       "value %u", i, kinds[i]);
	rd_zero(r, (size_t)pad8(m->n), "kinds padding");
	rows = rd_take(r, m->n * row, "rows");
	for (uint32_t i = 0; rows && i < m->n; i++)
		if (kinds[i] == PROTO_REPL_DELETED &&
		    !row_is_zero(rows + i * row, row, &at))
			return rd_fail(r, RS_E_PROTO, "rows[%u]: a deleted "
				       "record's row must be zero bytes (byte "
				       "%zu is 0x%02x)", i, at,
				       rows[i * row + at]);
	if (from) {
		m->from_inc = rd_u64(r, "from_inc");
		m->from_seq = rd_u64(r, "from_seq");
		m->table_ident = rd_u64(r, "table_ident");
		if (!r->rc && (!m->from_inc || !m->from_seq))
			return rd_fail(r, RS_E_PROTO, "from_inc %" PRIu64
				       ", from_seq %" PRIu64 ": must be >= 1",
				       m->from_inc, m->from_seq);
	}
	if (r->rc)
		return r->rc;
	m->clients = clients;
	m->seqs = seqs;
	m->done_below = done;
	m->statuses = statuses;
	m->creds = creds;
	m->kinds = kinds;
	m->rows = rows;
	return 0;
}

/* ---- COPY ---- */

static int dec_copy_req(struct rd *r, struct proto_copy_req *m)
{
	m->epoch = rd_u64(r, "epoch");
	m->inc = rd_u64(r, "inc");
	m->cursor = rd_u64(r, "cursor");
	m->max = rd_u32(r, "max");
	m->nranges = rd_u32(r, "nranges");
	rd_str(r, "id", STR_NAME, m->id, sizeof(m->id));
	rd_str(r, "table", STR_NAME, m->table, sizeof(m->table));
	rd_zero(r, (size_t)pad8(r->off), "names padding");
	m->ranges = NULL;
	if (r->rc)
		return r->rc;
	if (m->epoch == 0)
		return rd_fail(r, RS_E_PROTO, "epoch: must be >= 1");
	if (m->max < 1 || m->max > PROTO_COPY_MAX_BATCH)
		return rd_fail(r, RS_E_INVAL, "max: %u is not in [1, %u]",
			       m->max, PROTO_COPY_MAX_BATCH);
	if (m->nranges < 1 || m->nranges > PROTO_COPY_MAX_RANGES)
		return rd_fail(r, RS_E_TOOBIG, "nranges: %u is not in [1, %u]",
			       m->nranges, PROTO_COPY_MAX_RANGES);
	m->ranges = rd_take(r, 16 * (size_t)m->nranges, "ranges");
	return r->rc;
}

static int dec_copy_reply(struct rd *r, struct proto_copy_reply *m)
{
	m->cursor = rd_u64(r, "cursor");
	m->copied = rd_u64(r, "copied");
	m->done = rd_u32(r, "done");
	rd_zero(r, 4, "reserved");
	if (!r->rc && m->done > 1)
		return rd_fail(r, RS_E_PROTO, "done: %u is not 0 or 1",
			       m->done);
	return r->rc;
}

/* TABLE_CREATE, TABLE_DROP, TABLE_GROW: the epoch that ends the body with
 * PROTO_F_EPOCH (>= 1) */
static void rd_table_epoch(struct rd *r, struct proto_hdr *h)
{
	if (!(h->flags & PROTO_F_EPOCH))
		return;
	h->epoch = rd_u64(r, "epoch");
	if (!r->rc && h->epoch == 0)
		rd_fail(r, RS_E_PROTO, "epoch: 0 with the epoch flag");
}

static int dec_request(struct rd *r, const struct proto_limits *lim,
			struct proto_msg *m)
{
	if ((m->hdr.flags & PROTO_F_EPOCH) &&
	    m->hdr.opcode != PROTO_OP_TABLE_CREATE &&
	    m->hdr.opcode != PROTO_OP_TABLE_DROP &&
	    m->hdr.opcode != PROTO_OP_TABLE_GROW)
		return rd_fail(r, RS_E_PROTO, "header flag epoch: only "
			       "TABLE_CREATE, TABLE_DROP and TABLE_GROW "
			       "requests carry one");
	if ((m->hdr.flags & PROTO_F_FROM) && m->hdr.opcode != PROTO_OP_REPL)
		return rd_fail(r, RS_E_PROTO, "header flag from: only REPL "
			       "requests carry one");
	switch (m->hdr.opcode) {
	case PROTO_OP_HELLO:
		return dec_hello_req(r, &m->u.hello_req);
	case PROTO_OP_TABLE_CREATE:
		rd_spec(r, &m->u.table_create);
		rd_table_epoch(r, &m->hdr);
		rd_end(r);
		check_spec(r, &m->u.table_create, lim);
		return r->rc;
	case PROTO_OP_TABLE_DROP:
		rd_str(r, "name", STR_NAME, m->u.table_drop,
		       sizeof(m->u.table_drop));
		rd_table_epoch(r, &m->hdr);
		return r->rc;
	case PROTO_OP_TABLE_GROW:
		m->u.table_grow.capacity = rd_u64(r, "capacity");
		rd_str(r, "name", STR_NAME, m->u.table_grow.name,
		       sizeof(m->u.table_grow.name));
		rd_table_epoch(r, &m->hdr);
		if (!r->rc && m->u.table_grow.capacity > PROTO_MAX_CAPACITY)
			rd_fail(r, RS_E_TOOBIG, "capacity: %llu rows is over "
				"the limit %llu",
				(unsigned long long)m->u.table_grow.capacity,
				PROTO_MAX_CAPACITY);
		return r->rc;
	case PROTO_OP_TABLE_DIR:
	case PROTO_OP_STATS:
		return dec_list_req(r, &m->u.list_req);
	case PROTO_OP_CKPT:
		return dec_ckpt_req(r, &m->u.ckpt_req);
	case PROTO_OP_CONFIG:
		return r->rc; /* empty body: rd_end() checks */
	case PROTO_OP_REPL:
		return dec_repl_req(r, lim, (m->hdr.flags & PROTO_F_FROM) != 0,
				    &m->u.repl_req);
	case PROTO_OP_COPY:
		return dec_copy_req(r, &m->u.copy_req);
	default:
		return dec_keys_req(r, m->hdr.opcode, lim, &m->u.keys_req);
	}
}

static int dec_reply(struct rd *r, const struct proto_limits *lim,
		      struct proto_msg *m)
{
	if (m->hdr.flags & PROTO_F_EPOCH)
		return rd_fail(r, RS_E_PROTO, "header flag epoch in a reply");
	if (m->hdr.flags & PROTO_F_FROM)
		return rd_fail(r, RS_E_PROTO, "header flag from in a reply");
	if (m->hdr.status < 0)
		return dec_error(r, &m->u.error);
	switch (m->hdr.opcode) {
	case PROTO_OP_HELLO:
		return dec_hello_reply(r, &m->u.hello_reply);
	case PROTO_OP_TABLE_CREATE:
	case PROTO_OP_TABLE_GROW:
		rd_info(r, &m->u.table_info);
		rd_end(r);
		check_info(r, &m->u.table_info, lim);
		return r->rc;
	case PROTO_OP_TABLE_DROP:
		return r->rc; /* empty body: rd_end() checks */
	case PROTO_OP_TABLE_DIR:
		return dec_table_dir(r, lim, &m->u.table_dir);
	case PROTO_OP_STATS:
		return dec_stats(r, &m->u.stats);
	case PROTO_OP_CKPT:
		return dec_ckpt_reply(r, &m->u.ckpt_reply);
	case PROTO_OP_CONFIG:
		return dec_config(r, &m->u.config);
	case PROTO_OP_COPY:
		return dec_copy_reply(r, &m->u.copy_reply);
	default: /* GET .. DELETE, LOAD, REPL */
		return dec_keys_reply(r, m->hdr.opcode, lim, &m->u.keys_reply);
	}
}

int proto_decode(const void *msg, size_t len, const struct proto_limits *lim,
		 struct proto_msg *out)
{
	struct proto_limits def;
	char what[48];
	struct rd r;
	int rc, reply;

	if (!lim) {
		proto_limits_default(&def);
		lim = &def;
	}
	memset(out, 0, sizeof(*out));
	if ((rc = dec_hdr(&out->hdr, msg, len, lim)))
		return rc;
	reply = !!(out->hdr.flags & PROTO_F_REPLY);
	snprintf(what, sizeof(what), "%s %s", proto_op_name(out->hdr.opcode),
		 reply ? "reply" : "request");
	r = (struct rd){ .p = (const uint8_t *)msg + PROTO_HDR_BYTES,
			 .len = len - PROTO_HDR_BYTES, .what = what };
	if (reply)
		dec_reply(&r, lim, out);
	else
		dec_request(&r, lim, out);
	rd_end(&r);
	return r.rc;
}

int proto_table_dir_next(struct proto_table_dir *d,
			 struct proto_table_info *out)
{
	struct rd r = { .p = d->p, .len = d->len, .off = d->off,
			.what = "TABLE_DIR reply" };

	if (d->next >= d->n)
		return 0;
	memset(out, 0, sizeof(*out));
	rd_info(&r, out);
	d->off = r.off;
	d->next++;
	return r.rc ? 0 : 1;
}

int proto_config_next(struct proto_config *c, struct proto_member *out)
{
	struct rd r = { .p = c->p, .len = c->len, .off = c->off,
			.what = "CONFIG reply" };

	if (c->next >= c->n)
		return 0;
	rd_member(&r, c->next, out);
	c->off = r.off;
	c->next++;
	return r.rc ? 0 : 1;
}

int proto_stats_next(struct proto_stats *s, struct proto_stat *out)
{
	struct rd r = { .p = s->p, .len = s->len, .off = s->off,
			.what = "STATS reply" };

	if (s->next >= s->n)
		return 0;
	rd_stat(&r, out);
	s->off = r.off;
	s->next++;
	return r.rc ? 0 : 1;
}

/* ---- encoders ---- */

int proto_enc_hello_req(void *buf, size_t cap, const struct proto_hdr *h,
			const struct proto_hello_req *m)
{
	struct wr w;
	size_t nlen;
	int rc = enc_name_check("name", m->name, sizeof(m->name), 1, &nlen);

	if (rc)
		return rc;
	wr_begin(&w, buf, cap);
	wr_u32(&w, m->recv_bytes);
	wr_u32(&w, 0);
	wr_str(&w, m->name, nlen);
	return wr_finish(&w, h, PROTO_OP_HELLO, 0);
}

int proto_enc_hello_reply(void *buf, size_t cap, const struct proto_hdr *h,
			  const struct proto_hello_reply *m)
{
	struct wr w;
	size_t nlen;
	int rc = enc_name_check("name", m->name, sizeof(m->name), 1, &nlen);

	if (rc)
		return rc;
	wr_begin(&w, buf, cap);
	wr_u64(&w, m->node_id);
	wr_u64(&w, m->dir_generation);
	wr_u32(&w, m->limits.max_message_bytes);
	wr_u32(&w, m->limits.max_batch_keys);
	wr_u32(&w, m->limits.max_dim);
	wr_u32(&w, m->limits.max_tables);
	wr_str(&w, m->name, nlen);
	return wr_finish(&w, h, PROTO_OP_HELLO, 1);
}

/* PROTO_F_EPOCH names an epoch >= 1 (no decoder takes 0) */
static int enc_table_epoch_check(const struct proto_hdr *h)
{
	if (h && (h->flags & PROTO_F_EPOCH) && h->epoch == 0)
		return rs_seterr(RS_E_INVAL, "epoch flag with epoch 0");
	return 0;
}

int proto_enc_table_create_req(void *buf, size_t cap,
			       const struct proto_hdr *h,
			       const struct proto_table_spec *m)
{
	struct wr w;
	size_t nlen;
	int rc = enc_spec_check(m, &nlen);

	if (rc)
		return rc;
	if ((rc = enc_table_epoch_check(h)))
		return rc;
	wr_begin(&w, buf, cap);
	wr_spec(&w, m, nlen);
	if (h && (h->flags & PROTO_F_EPOCH))
		wr_u64(&w, h->epoch);
	return wr_finish(&w, h, PROTO_OP_TABLE_CREATE, 0);
}

/* A reply carrying one table info (TABLE_CREATE, TABLE_GROW). */
static int enc_info_reply(void *buf, size_t cap, const struct proto_hdr *h,
			  const struct proto_table_info *m, uint32_t op)
{
	struct wr w;
	size_t nlen;
	int rc = enc_spec_check(&m->spec, &nlen);

	if (rc)
		return rc;
	wr_begin(&w, buf, cap);
	wr_info(&w, m, nlen);
	return wr_finish(&w, h, op, 1);
}

int proto_enc_table_create_reply(void *buf, size_t cap,
				 const struct proto_hdr *h,
				 const struct proto_table_info *m)
{
	return enc_info_reply(buf, cap, h, m, PROTO_OP_TABLE_CREATE);
}

int proto_enc_table_grow_req(void *buf, size_t cap, const struct proto_hdr *h,
			     const struct proto_table_grow *m)
{
	struct wr w;
	size_t nlen;
	int rc = enc_name_check("name", m->name, sizeof(m->name), 0, &nlen);

	if (rc || (rc = enc_table_epoch_check(h)))
		return rc;
	wr_begin(&w, buf, cap);
	wr_u64(&w, m->capacity);
	wr_str(&w, m->name, nlen);
	if (h && (h->flags & PROTO_F_EPOCH))
		wr_u64(&w, h->epoch);
	return wr_finish(&w, h, PROTO_OP_TABLE_GROW, 0);
}

int proto_enc_table_grow_reply(void *buf, size_t cap,
			       const struct proto_hdr *h,
			       const struct proto_table_info *m)
{
	return enc_info_reply(buf, cap, h, m, PROTO_OP_TABLE_GROW);
}

int proto_enc_table_drop_req(void *buf, size_t cap, const struct proto_hdr *h,
			     const char *name)
{
	struct wr w;
	size_t nlen;
	int rc = enc_name_check("name", name, PROTO_NAME_MAX + 1, 0, &nlen);

	if (rc || (rc = enc_table_epoch_check(h)))
		return rc;
	wr_begin(&w, buf, cap);
	wr_str(&w, name, nlen);
	if (h && (h->flags & PROTO_F_EPOCH))
		wr_u64(&w, h->epoch);
	return wr_finish(&w, h, PROTO_OP_TABLE_DROP, 0);
}

int proto_enc_table_drop_reply(void *buf, size_t cap,
			       const struct proto_hdr *h)
{
	return enc_words(buf, cap, h, PROTO_OP_TABLE_DROP, 1, NULL, 0, NULL,
			 0);
}

int proto_enc_list_req(void *buf, size_t cap, const struct proto_hdr *h,
		       uint32_t op, const struct proto_list_req *m)
{
	const uint32_t d[] = { m->start, 0 };

	if (op != PROTO_OP_TABLE_DIR && op != PROTO_OP_STATS)
		return rs_seterr(RS_E_INVAL, "%s is not a list request",
				 proto_op_name(op));
	return enc_words(buf, cap, h, op, 0, NULL, 0, d, RS_ARRAY_SIZE(d));
}

/*
 * A list reply (TABLE_DIR, STATS): the generation (TABLE_DIR only), total,
 * start, n and reserved, then as many of the n entries as fit; put()
 * checks and writes entry k of list. An entry that does not fit is rolled
 * back and n patched to those written; when not even the first fits, the
 * reply is RS_E_TOOBIG.
 */
static int enc_list_reply(void *buf, size_t cap, const struct proto_hdr *h,
			  uint32_t op, uint64_t generation, uint32_t total,
			  uint32_t start, const void *list, uint32_t n,
			  int (*put)(struct wr *, const void *, uint32_t),
			  uint32_t *written)
{
	struct wr w;
	size_t n_at;
	uint32_t k = 0;
	int rc;

	*written = 0;
	if ((uint64_t)start + n > total)
		return rs_seterr(RS_E_INVAL, "%s reply: entries [%u, %u + %u) "
				 "exceed total %u", proto_op_name(op), start,
				 start, n, total);
	wr_begin(&w, buf, cap);
	if (op == PROTO_OP_TABLE_DIR)
		wr_u64(&w, generation);
	wr_u32(&w, total);
	wr_u32(&w, start);
	n_at = w.off;
	wr_u32(&w, 0); /* n, patched below */
	wr_u32(&w, 0);
	for (; k < n; k++) {
		size_t before = w.off;

		if ((rc = put(&w, list, k)))
			return rc;
		if (w.off > w.cap) {
			if (k > 0) /* else not even one: RS_E_TOOBIG below */
				w.off = before;
			break;
		}
	}
	if (w.off <= w.cap)
		le_st32(w.p + n_at, k);
	*written = w.off <= w.cap ? k : 0;
	return wr_finish(&w, h, op, 1);
}

static int put_table_info(struct wr *w, const void *list, uint32_t k)
{
	const struct proto_table_info *t =
		(const struct proto_table_info *)list + k;
	size_t nlen;
	int rc = enc_spec_check(&t->spec, &nlen);

	if (rc)
		return rc;
	wr_info(w, t, nlen);
	return 0;
}

static int put_stat(struct wr *w, const void *list, uint32_t k)
{
	const struct proto_stat *s = (const struct proto_stat *)list + k;
	size_t klen;
	int rc = enc_name_check("stat key", s->key, sizeof(s->key), 0, &klen);

	if (rc)
		return rc;
	wr_u32(w, s->table_id);
	wr_u64(w, s->value);
	wr_str(w, s->key, klen);
	return 0;
}

int proto_enc_table_dir_reply(void *buf, size_t cap, const struct proto_hdr *h,
			      uint64_t generation, uint32_t total,
			      uint32_t start,
			      const struct proto_table_info *tables,
			      uint32_t n, uint32_t *written)
{
	return enc_list_reply(buf, cap, h, PROTO_OP_TABLE_DIR, generation,
			      total, start, tables, n, put_table_info,
			      written);
}

int proto_enc_stats_reply(void *buf, size_t cap, const struct proto_hdr *h,
			  uint32_t total, uint32_t start,
			  const struct proto_stat *stats, uint32_t n,
			  uint32_t *written)
{
	return enc_list_reply(buf, cap, h, PROTO_OP_STATS, 0, total, start,
			      stats, n, put_stat, written);
}

static int check_keyed(uint32_t op, uint32_t n, uint32_t dim,
		       uint32_t dtype, int rows, int reply)
{
	const char *dir = reply ? "reply" : "request";

	if (!(reply ? is_keyed_reply(op) : is_keyed(op)))
		return rs_seterr(RS_E_INVAL, "%s has no keyed %s",
				 proto_op_name(op), dir);
	if (n > PROTO_MAX_BATCH_KEYS)
		return rs_seterr(RS_E_TOOBIG, "%s %s: %u keys, over the limit "
				 "%u", proto_op_name(op), dir, n,
				 PROTO_MAX_BATCH_KEYS);
	if (rows && (dim == 0 ||
		     dim > (op == PROTO_OP_LOAD ? state_width_max(PROTO_MAX_DIM)
						: PROTO_MAX_DIM) ||
		     dtype >= PROTO_DTYPE_COUNT))
		return rs_seterr(RS_E_INVAL, "%s %s: bad row shape %u x dtype "
				 "%u", proto_op_name(op), dir, dim, dtype);
	return 0;
}

/* n, dim, dtype, reserved and the request's lr (replies: 0): the tail of
 * both keyed fixed parts */
static void wr_keyed_shape(struct wr *w, uint32_t n, uint32_t dim,
			   uint32_t dtype, int rows, float lr)
{
	wr_u32(w, n);
	wr_u32(w, rows ? dim : 0);
	wr_u8(w, (uint8_t)(rows ? dtype : 0));
	wr_zero(w, 3);
	wr_f32(w, lr);
}

int proto_enc_ckpt_req(void *buf, size_t cap, const struct proto_hdr *h,
		       const struct proto_ckpt_req *m)
{
	size_t ld, lt, lf;
	struct wr w;
	int rc;

	if ((rc = enc_name_check("dir", m->dir, sizeof(m->dir), 1, &ld)) ||
	    (rc = enc_name_check("table", m->table, sizeof(m->table), 1,
				 &lt)) ||
	    (rc = enc_name_check("file", m->file, sizeof(m->file), 1, &lf)))
		return rc;
	wr_begin(&w, buf, cap);
	wr_u32(&w, m->phase);
	wr_u32(&w, m->flags);
	wr_u32(&w, m->timeout_ms);
	wr_u32(&w, m->table_idx);
	wr_u32(&w, m->part_idx);
	wr_u32(&w, 0);
	wr_bytes(&w, m->id, PROTO_CKPT_ID_BYTES);
	if (m->flags & PROTO_CKF_INCR)
		wr_bytes(&w, m->base, PROTO_CKPT_ID_BYTES);
	if (m->flags & PROTO_CKF_EPOCH)
		wr_u64(&w, m->epoch);
	wr_str(&w, m->dir, ld);
	wr_str(&w, m->table, lt);
	wr_str(&w, m->file, lf);
	return wr_finish(&w, h, PROTO_OP_CKPT, 0);
}

int proto_enc_ckpt_reply(void *buf, size_t cap, const struct proto_hdr *h,
			 const struct proto_ckpt_reply *m)
{
	const uint64_t q[] = { m->rows, m->deleted, m->raw_bytes,
			       m->bytes, m->xxh64, m->paused_us };

	return enc_words(buf, cap, h, PROTO_OP_CKPT, 1, q, RS_ARRAY_SIZE(q),
			 NULL, 0);
}

int proto_enc_config_req(void *buf, size_t cap, const struct proto_hdr *h)
{
	return enc_words(buf, cap, h, PROTO_OP_CONFIG, 0, NULL, 0, NULL, 0);
}

/* member i (after prev, NULL for the first) as a decoder will check it;
 * its id and addr lengths */
static int enc_member_check(uint32_t i, const struct proto_member *m,
			    const struct proto_member *prev, size_t *idlen,
			    size_t *addrlen)
{
	char what[40];
	int rc;

	if (m->state > PROTO_MEMBER_DOWN)
		return rs_seterr(RS_E_INVAL, "CONFIG reply: members[%u].state:"
				 " unknown value %u", i, m->state);
	snprintf(what, sizeof(what), "members[%u].id", i);
	if ((rc = enc_name_check(what, m->id, sizeof(m->id), 0, idlen)))
		return prefix_err(rc, "CONFIG reply: ");
	snprintf(what, sizeof(what), "members[%u].addr", i);
	*addrlen = strnlen(m->addr, sizeof(m->addr));
	if (*addrlen == sizeof(m->addr))
		return rs_seterr(RS_E_INVAL, "CONFIG reply: %s: longer than "
				 "%d bytes", what, PROTO_ADDR_MAX);
	if ((rc = addr_check(what, m->addr, *addrlen)))
		return prefix_err(rc, "CONFIG reply: ");
	if (prev && strcmp(prev->id, m->id) >= 0)
		return rs_seterr(RS_E_INVAL, "CONFIG reply: members[%u].id: "
				 "'%s' after '%s': members are sorted by id, "
				 "each once", i, m->id, prev->id);
	return 0;
}

int proto_enc_config_reply(void *buf, size_t cap, const struct proto_hdr *h,
			   const struct proto_config *c,
			   const struct proto_member *members)
{
	size_t il = 0, al = 0;
	struct wr w;
	int rc;

	if (config_check(c))
		return prefix_err(RS_E_INVAL, "CONFIG reply: ");
	wr_begin(&w, buf, cap);
	wr_u64(&w, c->epoch);
	wr_u32(&w, c->r);
	wr_u32(&w, c->vnodes);
	wr_u32(&w, c->n);
	wr_u32(&w, c->self);
	for (uint32_t i = 0; i < c->n; i++) {
		const struct proto_member *m = &members[i];

		if ((rc = enc_member_check(i, m, i ? m - 1 : NULL, &il, &al)))
			return rc;
		wr_u8(&w, (uint8_t)m->state);
		wr_zero(&w, 1);
		wr_str(&w, m->id, il);
		wr_str(&w, m->addr, al);
	}
	wr_u32(&w, c->epoch ? c->age_ms : PROTO_CONFIG_AGE_NONE);
	wr_u32(&w, c->epoch ? c->lease_ms : 0);
	wr_u64(&w, c->ready);
	return wr_finish(&w, h, PROTO_OP_CONFIG, 1);
}

/* n host u64 into the message, or n zeros for NULL */
static void wr_u64s(struct wr *w, const uint64_t *v, uint32_t n)
{
	uint8_t *q = wr_take(w, 8 * (size_t)n);

	if (q && v)
		store_u64s(q, v, n);
	else if (q)
		memset(q, 0, 8 * (size_t)n);
}

static uint64_t u64_or_0(const uint64_t *v, uint32_t i)
{
	return v ? v[i] : 0;
}

int proto_enc_copy_req(void *buf, size_t cap, const struct proto_hdr *h,
		       const struct proto_copy_req *m)
{
	size_t li, lt;
	struct wr w;
	int rc;

	if ((rc = enc_name_check("id", m->id, sizeof(m->id), 0, &li)) ||
	    (rc = enc_name_check("table", m->table, sizeof(m->table), 0,
				 &lt)))
		return prefix_err(rc, "COPY request: ");
	if (m->epoch == 0 || m->max < 1 || m->max > PROTO_COPY_MAX_BATCH ||
	    m->nranges < 1 || m->nranges > PROTO_COPY_MAX_RANGES)
		return rs_seterr(RS_E_INVAL, "COPY request: epoch %" PRIu64
				 " (>= 1), max %u (1..%u), nranges %u "
				 "(1..%u)", m->epoch, m->max,
				 PROTO_COPY_MAX_BATCH, m->nranges,
				 PROTO_COPY_MAX_RANGES);
	wr_begin(&w, buf, cap);
	wr_u64(&w, m->epoch);
	wr_u64(&w, m->inc);
	wr_u64(&w, m->cursor);
	wr_u32(&w, m->max);
	wr_u32(&w, m->nranges);
	wr_str(&w, m->id, li);
	wr_str(&w, m->table, lt);
	wr_zero(&w, (size_t)pad8(w.off));
	wr_u64s(&w, m->ranges, 2 * m->nranges);
	return wr_finish(&w, h, PROTO_OP_COPY, 0);
}

int proto_enc_copy_reply(void *buf, size_t cap, const struct proto_hdr *h,
			 const struct proto_copy_reply *m)
{
	const uint64_t q[] = { m->cursor, m->copied };
	const uint32_t d[] = { m->done ? 1 : 0, 0 };

	return enc_words(buf, cap, h, PROTO_OP_COPY, 1, q, RS_ARRAY_SIZE(q),
			 d, RS_ARRAY_SIZE(d));
}

int proto_enc_repl_req(void *buf, size_t cap, const struct proto_hdr *h,
		       const struct proto_repl_req *m)
{
	const uint32_t width_max = state_width_max(PROTO_MAX_DIM);
	const uint64_t *clients = m->clients, *seqs = m->seqs;
	const uint64_t *done = m->done_below;
	const int32_t *statuses = m->statuses;
	const uint32_t *creds = m->creds;
	const uint8_t *kinds = m->kinds;
	const float *rows = m->rows;
	struct proto_hdr hh = { 0 };
	size_t nlen, row;
	struct wr w;
	uint8_t *q;
	int rc;

	if ((rc = enc_name_check("table", m->table, sizeof(m->table), 0,
				 &nlen)))
		return prefix_err(rc, "REPL request: ");
	if (m->from_inc && !m->from_seq)
		return rs_seterr(RS_E_INVAL, "REPL request: a sender "
				 "(from_inc) without a sequence number");
	if (h)
		hh = *h;
	hh.flags = (uint16_t)((hh.flags & ~PROTO_F_FROM) |
			      (m->from_inc ? PROTO_F_FROM : 0));
	if (m->epoch == 0)
		return rs_seterr(RS_E_INVAL, "REPL request: epoch: must be "
				 ">= 1");
	if (m->n > PROTO_MAX_BATCH_KEYS)
		return rs_seterr(RS_E_TOOBIG, "REPL request: %u records, over "
				 "the limit %u", m->n, PROTO_MAX_BATCH_KEYS);
	if (m->width == 0 || m->width > width_max)
		return rs_seterr(RS_E_INVAL, "REPL request: width %u is not "
				 "in [1, %u]", m->width, width_max);
	for (uint32_t i = 0; i < m->n; i++) {
		if (kinds[i] > PROTO_REPL_DELETED)
			return rs_seterr(RS_E_INVAL, "REPL request: kinds[%u]: "
					 "unknown value %u", i, kinds[i]);
		if (repl_once_check(i, u64_or_0(clients, i),
				    u64_or_0(seqs, i), u64_or_0(done, i),
				    statuses ? statuses[i] : 0,
				    creds ? creds[i] : 0))
			return prefix_err(RS_E_INVAL, "REPL request: ");
	}
	wr_begin(&w, buf, cap);
	wr_u64(&w, m->epoch);
	wr_u32(&w, m->n);
	wr_u32(&w, m->width);
	wr_str(&w, m->table, nlen);
	wr_zero(&w, (size_t)pad8(w.off));
	wr_u64s(&w, m->keys, m->n);
	wr_u64s(&w, clients, m->n);
	wr_u64s(&w, seqs, m->n);
	wr_u64s(&w, done, m->n);
	if ((q = wr_take(&w, 4 * (size_t)m->n))) {
		if (statuses)
			store_i32s(q, statuses, m->n);
		else
			memset(q, 0, 4 * (size_t)m->n);
	}
	if ((q = wr_take(&w, 4 * (size_t)m->n))) {
		if (creds)
			store_u32s(q, creds, m->n);
		else
			memset(q, 0, 4 * (size_t)m->n);
	}
	wr_bytes(&w, kinds, m->n);
	wr_zero(&w, (size_t)pad8(m->n));
	row = 4 * (size_t)m->width;
	if ((q = wr_take(&w, m->n * row)))
		for (uint32_t i = 0; i < m->n; i++) {
			if (kinds[i] == PROTO_REPL_ROW)
				proto_store_f32(q + i * row,
						rows + (size_t)i * m->width,
						m->width);
			else
				memset(q + i * row, 0, row);
		}
	if (m->from_inc) {
		wr_u64(&w, m->from_inc);
		wr_u64(&w, m->from_seq);
		wr_u64(&w, m->table_ident);
	}
	return wr_finish(&w, &hh, PROTO_OP_REPL, 0);
}

int proto_enc_keys_req(void *buf, size_t cap, const struct proto_hdr *h,
		       uint32_t op, const struct proto_keys_req *m)
{
	const int rows = req_has_rows(op);
	uint64_t rb = rows ? rows_bytes(m->n, m->dim, m->dtype) : 0;
	struct wr w;
	uint8_t *q;
	int rc = check_keyed(op, m->n, m->dim, m->dtype, rows, 0);

	if (rc)
		return rc;
	if (m->flags & ~keys_flags_allowed(op))
		return rs_seterr(RS_E_INVAL, "%s request: flags 0x%x not "
				 "allowed", proto_op_name(op), m->flags);
	if ((m->flags & PROTO_KF_LR) && !proto_lr_ok(m->lr))
		return rs_seterr(RS_E_INVAL, "%s request: lr %g is not a "
				 "finite number >= 0", proto_op_name(op),
				 (double)m->lr);
	if ((m->flags & PROTO_KF_EPOCH) && m->epoch == 0)
		return rs_seterr(RS_E_INVAL, "%s request: epoch 0 with the "
				 "EPOCH flag", proto_op_name(op));
	if ((m->flags & PROTO_KF_ONCE) &&
	    once_check(once_fields, m->client, m->seq, m->done_below))
		return rs_seterr(RS_E_INVAL, "%s request: %s (with the ONCE "
				 "flag)", proto_op_name(op), rs_errormsg());
	wr_begin(&w, buf, cap);
	wr_u32(&w, m->table_id);
	wr_u32(&w, m->flags);
	wr_u64(&w, m->table_gen);
	wr_keyed_shape(&w, m->n, m->dim, m->dtype, rows,
		       m->flags & PROTO_KF_LR ? m->lr : 0.0f);
	if (m->flags & PROTO_KF_EPOCH)
		wr_u64(&w, m->epoch);
	if (m->flags & PROTO_KF_ONCE) {
		wr_u64(&w, m->client);
		wr_u64(&w, m->seq);
		wr_u64(&w, m->done_below);
	}
	if ((q = wr_take(&w, 8 * (size_t)m->n)))
		store_u64s(q, m->keys, m->n);
	if (rb && (q = wr_take(&w, (size_t)rb)))
		store_rows(q, m->rows, (size_t)m->n * m->dim, m->dtype);
	return wr_finish(&w, h, op, 0);
}

int proto_keys_reply_begin(void *buf, size_t cap, const struct proto_hdr *h,
			   uint32_t op, uint32_t n, uint32_t dim,
			   uint32_t dtype, struct proto_reply_writer *wo)
{
	const int rows = reply_has_rows(op);
	struct wr w;
	int rc = check_keyed(op, n, dim, dtype, rows, 1);

	memset(wo, 0, sizeof(*wo));
	if (rc)
		return rc;
	wr_begin(&w, buf, cap);
	wr_keyed_shape(&w, n, dim, dtype, rows, 0.0f);
	wo->status = wr_take(&w, 4 * (size_t)n);
	if (n & 1)
		wr_zero(&w, 4);
	if (rows) {
		wo->row_bytes = (size_t)dim * proto_dtype_size(dtype);
		wo->rows = wr_take(&w, (size_t)n * wo->row_bytes);
	}
	if ((rc = wr_finish(&w, h, op, 1)) < 0) {
		memset(wo, 0, sizeof(*wo));
		return rc;
	}
	wo->n = n;
	if (!rows)
		wo->rows = NULL;
	return rc;
}

int proto_images_reply_begin(void *buf, size_t cap, const struct proto_hdr *h,
			     uint32_t n, uint32_t dim, uint32_t dtype,
			     struct proto_reply_writer *wo)
{
	struct wr w;
	int rc = check_keyed(PROTO_OP_UPDATE, n, dim, dtype, 1, 1);

	memset(wo, 0, sizeof(*wo));
	if (rc)
		return rc;
	wr_begin(&w, buf, cap);
	wr_u32(&w, n);
	wr_u32(&w, dim);
	wr_u8(&w, (uint8_t)dtype);
	wr_u8(&w, REPLY_FORM_IMAGES);
	wr_zero(&w, 6);
	wo->status = wr_take(&w, 4 * (size_t)n);
	if (n & 1)
		wr_zero(&w, 4);
	wo->images = wr_take(&w, (size_t)PROTO_IMAGE_BYTES * n);
	wo->row_bytes = (size_t)dim * proto_dtype_size(dtype);
	wo->rows = wr_take(&w, (size_t)n * wo->row_bytes);
	if ((rc = wr_finish(&w, h, PROTO_OP_UPDATE, 1)) < 0) {
		memset(wo, 0, sizeof(*wo));
		return rc;
	}
	wo->n = n;
	return rc;
}

void proto_image_set(struct proto_reply_writer *w, uint32_t i,
		     const struct proto_image *im)
{
	uint8_t *p = w->images + (size_t)i * PROTO_IMAGE_BYTES;

	le_st64(p, im->version);
	le_st64(p + 8, im->checksum);
	le_st32(p + 16, im->slot);
	le_st32(p + 20, 0);
}

void proto_reply_set(struct proto_reply_writer *w, uint32_t i, int32_t st)
{
	le_st32(w->status + 4 * (size_t)i, (uint32_t)st);
}

void proto_reply_fail(struct proto_reply_writer *w, uint32_t i, int32_t st)
{
	proto_reply_set(w, i, st);
	if (w->rows)
		memset(w->rows + i * w->row_bytes, 0, w->row_bytes);
	if (w->images)
		memset(w->images + (size_t)i * PROTO_IMAGE_BYTES, 0,
		       PROTO_IMAGE_BYTES);
}

int proto_enc_keys_reply(void *buf, size_t cap, const struct proto_hdr *h,
			 uint32_t op, const struct proto_keys_reply *m)
{
	struct proto_reply_writer w;
	int len;

	if (m->images) {	/* an images reply (UPDATE with PROTO_KF_ROWS) */
		if (op != PROTO_OP_UPDATE)
			return rs_seterr(RS_E_INVAL, "%s reply: images belong "
					 "to UPDATE replies", proto_op_name(op));
		len = proto_images_reply_begin(buf, cap, h, m->n, m->dim,
					       m->dtype, &w);
		if (len < 0)
			return len;
		store_i32s(w.status, m->status, m->n);
		memcpy(w.images, m->images, (size_t)PROTO_IMAGE_BYTES * m->n);
		store_rows(w.rows, m->rows, (size_t)m->n * m->dim, m->dtype);
		return len;
	}
	len = proto_keys_reply_begin(buf, cap, h, op, m->n, m->dim, m->dtype,
				     &w);

	if (len < 0)
		return len;
	store_i32s(w.status, m->status, m->n);
	if (w.rows)
		store_rows(w.rows, m->rows, (size_t)m->n * m->dim, m->dtype);
	return len;
}

int proto_enc_error(void *buf, size_t cap, const struct proto_hdr *h,
		    uint32_t op, int32_t code, const char *msg)
{
	struct proto_hdr eh = h ? *h : (struct proto_hdr){ 0 };
	size_t n = msg ? strnlen(msg, PROTO_ERRMSG_MAX) : 0;
	struct wr w;

	if (op == 0 || op >= PROTO_OP_COUNT || code >= 0)
		return rs_seterr(RS_E_INVAL, "error reply: op %u, code %d "
				 "(must be < 0)", op, code);
	eh.status = code;
	wr_begin(&w, buf, cap);
	wr_str(&w, msg, n);
	return wr_finish(&w, &eh, op, 1);
}
