/*
 * row_format.h - an embedding row as a one-sided reader sees it (row_).
 *
 * SHARED by the memory node and the client: a client READs a row's bytes
 * and calls row_validate() on them, the same function the server's tests
 * and recovery use. Design and correctness: docs/storage.md.
 *
 * Rows region: nrows rows of `stride` bytes each, row i at i * stride.
 * Row (64-bit words little-endian; stride = round_up(32 + payload, 64)):
 *
 *   0   version   even: stable; odd: a writer is inside. Per row slot,
 *                 only grows (also across delete and reuse)
 *   8   checksum  XXH3-64 of bytes [16, 32 + payload_bytes) seeded with
 *                 row_seed(table incarnation, version, row index)
 *   16  key       the full 64-bit key the row holds (or held, if FREE)
 *   24  state     u8: ROW_LIVE, ROW_FREE (a tombstone: deleted), or
 *                 ROW_PENDING (an insert not yet in the index)
 *   25  dtype     u8: ROW_F32 / ROW_F16 / ROW_BF16
 *   26  table_id  u16
 *   28  dim       u32
 *   32  payload   dim elements of dtype
 *   ..  padding   to the stride (not covered, undefined)
 *
 * row_validate() accepts a row image only if its version is even and the
 * checksum matches (else RS_E_TORN: READ it again), and then reports
 * RS_E_STALE if the row is valid but not what the reader looked for: a
 * tombstone, a pending insert, another key (the slot was freed and reused)
 * or another table geometry. A reader holding a cached location re-resolves the key through
 * the index on RS_E_STALE.
 *
 * Element types: fp32; fp16 (IEEE binary16) and bf16 (upper half of an
 * fp32) stored, converted to fp32 with round-to-nearest-even.
 *
 * Ownership: functions work on caller memory, keep no state, are
 * thread-safe and set no rs_errormsg() except row_geom_init().
 */
#ifndef RS_VALUE_ROW_FORMAT_H
#define RS_VALUE_ROW_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the row layout is little-endian"
#endif

#define ROW_HDR_BYTES 32
#define ROW_ALIGN 64
#define ROW_CSUM_OFF 16 /* checksum covers [16, 32 + payload_bytes) */
#define ROW_MAX_DIM 65536
/* Rows layout version (TABLE_DIR rows.layout): 2 seeds the checksum with
 * the table incarnation. */
#define ROW_LAYOUT_VERSION 2

/* word indices of the header */
#define ROW_W_VERSION 0
#define ROW_W_CSUM 1
#define ROW_W_KEY 2
#define ROW_W_META 3

enum row_dtype { ROW_F32 = 1, ROW_F16 = 2, ROW_BF16 = 3 };
/* The row header's dtype is the wire's (enum proto_dtype, = enum rs_dtype)
 * plus one, so that 0 in a slab_table_cfg means "the default"; these two
 * are the only conversions. */
_Static_assert(ROW_F32 == PROTO_DTYPE_FP32 + 1 &&
		       ROW_F16 == PROTO_DTYPE_FP16 + 1 &&
		       ROW_BF16 == PROTO_DTYPE_BF16 + 1,
	       "enum row_dtype is enum proto_dtype + 1");
static inline unsigned row_dtype_from_proto(uint32_t proto_dtype)
{
	return proto_dtype + 1;
}
static inline uint32_t row_dtype_to_proto(unsigned row_dtype)
{
	return row_dtype - 1;
}
/* ROW_PENDING: written by an insert whose index slot does not exist yet;
 * no reader accepts it (it becomes LIVE only once the index points at it,
 * or a tombstone if the insert loses). */
enum row_state { ROW_FREE = 0x46, ROW_LIVE = 0x4c, ROW_PENDING = 0x50 };

struct row_hdr {
	uint64_t version;
	uint64_t checksum;
	uint64_t key;
	uint8_t state;
	uint8_t dtype;
	uint16_t table_id;
	uint32_t dim;
};
_Static_assert(sizeof(struct row_hdr) == ROW_HDR_BYTES, "row header");

/* What a reader needs to address and validate rows of one table. */
struct row_geom {
	uint32_t dim;
	uint8_t dtype; /* enum row_dtype */
	uint8_t esize; /* bytes per element */
	uint16_t table_id;
	uint32_t payload_bytes; /* dim * esize */
	uint32_t stride;	/* bytes per row, multiple of 64 */
	uint64_t nrows;		/* rows in the region */
	uint64_t incarnation;	/* the table's incarnation (checksum seed):
				   0 from row_geom_init(), set by the caller */
};

/* Geometry for dim elements of dtype; 0 or RS_E_INVAL (with message). */
int row_geom_init(struct row_geom *g, uint32_t dim, unsigned dtype,
		  uint64_t nrows, uint16_t table_id);

/* "f32", "f16", "bf16"; NULL if unknown. row_dtype_parse(): inverse, or
 * RS_E_INVAL. */
const char *row_dtype_name(unsigned dtype);
int row_dtype_parse(const char *name);

/* Offset of row idx from the start of the rows region. */
static inline uint64_t row_off(const struct row_geom *g, uint32_t idx)
{
	return (uint64_t)idx * g->stride;
}

/* Seed of a row checksum: the version, the slot and the table's
 * incarnation (a random id per created table, the TABLE_DIR generation):
 * a table dropped and created again on the same extent restarts its row
 * versions, and only the incarnation tells its rows from the old ones. */
static inline uint64_t row_seed(uint64_t incarnation, uint64_t version,
				uint32_t idx)
{
	return version ^ ((uint64_t)idx * 0xC2B2AE3D27D4EB4FULL) ^ incarnation;
}

/* Checksum of a row image at `version` in slot idx. */
uint64_t row_checksum(const void *row, const struct row_geom *g, uint32_t idx,
		      uint64_t version);

/* The 64-bit meta word (state, dtype, table_id, dim) for g. */
static inline uint64_t row_meta(const struct row_geom *g, unsigned state)
{
	return (uint64_t)state | (uint64_t)g->dtype << 8 |
	       (uint64_t)g->table_id << 16 | (uint64_t)g->dim << 32;
}

/*
 * Validate a row image READ from slot idx, expected to hold key:
 *   0              consistent, LIVE, holds key: accept
 *   RS_E_TORN      odd version or checksum mismatch: READ again
 *   RS_E_STALE     consistent, but FREE or another key or geometry
 * *version (may be NULL) gets the image's version when not torn.
 */
int row_validate(const void *row, const struct row_geom *g, uint32_t idx,
		 uint64_t key, uint64_t *version);

/* Parsed header of an image (no validation). */
void row_hdr_get(const void *row, struct row_hdr *h);

static inline const void *row_payload(const void *row)
{
	return (const uint8_t *)row + ROW_HDR_BYTES;
}

/* Payload (g->dtype) <-> fp32. Buffers must not overlap. */
void row_payload_to_f32(const struct row_geom *g, const void *payload,
			float *out);
void row_payload_from_f32(const struct row_geom *g, const float *in,
			  void *payload);

/* 1 if every one of the g->dim finite fp32 values in stays finite when
 * stored as g->dtype (always for fp32; fp16 overflows at 65520, bf16 just
 * below FLT_MAX), else 0: storing it would write an infinity. */
int row_f32_fits(const struct row_geom *g, const float *in);

/* Scalar conversions (round to nearest even; NaN stays NaN). */
uint16_t row_f32_to_bf16(float f);
float row_bf16_to_f32(uint16_t h);
uint16_t row_f32_to_f16(float f);
float row_f16_to_f32(uint16_t h);

#endif
