/*
 * row_format.c - row geometry, checksum, validation and element-type
 * conversions shared by server and client (layout: row_format.h).
 *
 * The checksum is one XXH3-64 pass over key, meta and payload with a seed
 * that mixes the version and the row index: a torn pair of (version,
 * checksum) words, a payload from another write, or a READ at the wrong
 * row address all fail it, except with probability about 2^-64 per
 * accepted image (docs/storage.md gives the argument). For 128 x fp32
 * (528 covered bytes) XXH3 costs about 350 instructions (AVX2), some
 * 30 ns on one core (docs/benchmarks.md).
 *
 * fp16 uses the compiler's _Float16 (IEEE binary16, round to nearest
 * even); bf16 is the upper half of an fp32 with the same rounding.
 */
#include <math.h>
#include <string.h>

#include <xxhash.h>
#if defined(__x86_64__)
/* Rows are long inputs (> 240 bytes), where XXH3 vectorizes: the
 * library's runtime dispatch (AVX2 when present) takes 351 instructions
 * for 528 bytes where the default SSE2 build takes 796 (callgrind, see
 * docs/benchmarks.md). The hash value is the same on every CPU. */
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define row_xxh3 XXH3_64bits_withSeed_dispatch
#else
#define row_xxh3 XXH3_64bits_withSeed
#endif

#include "common/rs_internal.h"
#include "value/row_format.h"

static const char *const dtype_names[] = {
	[ROW_F32] = "f32",
	[ROW_F16] = "f16",
	[ROW_BF16] = "bf16",
};

const char *row_dtype_name(unsigned dtype)
{
	if (dtype < ROW_F32 || dtype > ROW_BF16)
		return NULL;
	return dtype_names[dtype];
}

int row_dtype_parse(const char *name)
{
	for (unsigned d = ROW_F32; d <= ROW_BF16; d++)
		if (name && !strcmp(name, dtype_names[d]))
			return (int)d;
	return rs_seterr(RS_E_INVAL, "unknown element type '%s'",
			 name ? name : "(null)");
}

int row_geom_init(struct row_geom *g, uint32_t dim, unsigned dtype,
		  uint64_t nrows, uint16_t table_id)
{
	if (!row_dtype_name(dtype))
		return rs_seterr(RS_E_INVAL, "unknown element type %u", dtype);
	if (dim == 0 || dim > ROW_MAX_DIM)
		return rs_seterr(RS_E_INVAL, "dimension %u not in [1, %u]",
				 dim, ROW_MAX_DIM);
	memset(g, 0, sizeof(*g));
	g->dim = dim;
	g->dtype = (uint8_t)dtype;
	g->esize = dtype == ROW_F32 ? 4 : 2;
	g->table_id = table_id;
	g->payload_bytes = dim * g->esize;
	g->stride = (ROW_HDR_BYTES + g->payload_bytes + ROW_ALIGN - 1) &
		    ~(uint32_t)(ROW_ALIGN - 1);
	g->nrows = nrows;
	return 0;
}

uint64_t row_checksum(const void *row, const struct row_geom *g, uint32_t idx,
		      uint64_t version)
{
	return row_xxh3((const uint8_t *)row + ROW_CSUM_OFF,
			ROW_HDR_BYTES - ROW_CSUM_OFF + g->payload_bytes,
			row_seed(g->incarnation, version, idx));
}

static inline uint64_t word(const void *row, unsigned i)
{
	uint64_t w;

	memcpy(&w, (const uint8_t *)row + 8 * i, sizeof(w));
	return w;
}

int row_validate(const void *row, const struct row_geom *g, uint32_t idx,
		 uint64_t key, uint64_t *version)
{
	uint64_t v = word(row, ROW_W_VERSION);

	if (v & 1)
		return RS_E_TORN;
	if (row_checksum(row, g, idx, v) != word(row, ROW_W_CSUM))
		return RS_E_TORN;
	if (version)
		*version = v;
	if (word(row, ROW_W_META) != row_meta(g, ROW_LIVE) ||
	    word(row, ROW_W_KEY) != key)
		return RS_E_STALE;
	return 0;
}

void row_hdr_get(const void *row, struct row_hdr *h)
{
	memcpy(h, row, sizeof(*h));
}

uint16_t row_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if (isnan(f))
		return (uint16_t)((u >> 16) | 0x40); /* stay a (quiet) NaN */
	u += 0x7FFF + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

float row_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

uint16_t row_f32_to_f16(float f)
{
	_Float16 h = (_Float16)f;
	uint16_t u;

	memcpy(&u, &h, sizeof(u));
	return u;
}

float row_f16_to_f32(uint16_t u)
{
	_Float16 h;

	memcpy(&h, &u, sizeof(h));
	return (float)h;
}

void row_payload_to_f32(const struct row_geom *g, const void *payload,
			float *out)
{
	const uint8_t *p = payload;
	uint16_t h;

	if (g->dtype == ROW_F32) {
		memcpy(out, payload, g->payload_bytes);
		return;
	}
	for (uint32_t i = 0; i < g->dim; i++) {
		memcpy(&h, p + 2 * i, sizeof(h));
		out[i] = g->dtype == ROW_F16 ? row_f16_to_f32(h)
					     : row_bf16_to_f32(h);
	}
}

int row_f32_fits(const struct row_geom *g, const float *in)
{
	uint16_t bad = 0;

	if (g->dtype == ROW_F32)
		return 1;
	for (uint32_t i = 0; i < g->dim; i++) /* exponent all ones: inf */
		bad |= g->dtype == ROW_F16
			       ? (uint16_t)((row_f32_to_f16(in[i]) & 0x7c00) ==
					    0x7c00)
			       : (uint16_t)((row_f32_to_bf16(in[i]) & 0x7f80) ==
					    0x7f80);
	return !bad;
}

void row_payload_from_f32(const struct row_geom *g, const float *in,
			  void *payload)
{
	uint8_t *p = payload;
	uint16_t h;

	if (g->dtype == ROW_F32) {
		memcpy(payload, in, g->payload_bytes);
		return;
	}
	for (uint32_t i = 0; i < g->dim; i++) {
		h = g->dtype == ROW_F16 ? row_f32_to_f16(in[i])
					: row_f32_to_bf16(in[i]);
		memcpy(p + 2 * i, &h, sizeof(h));
	}
}
