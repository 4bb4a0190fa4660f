/*
 * pet_format.c - bucket addressing and validation shared by server and
 * client (see pet_format.h for the layout and the reader rules).
 *
 * Hashing: h_i = XXH3-64(key as 8 little-endian bytes, seed_i).
 *   b1  = fastrange(h1, n)              = (h1 * n) >> 64
 *   b2' = fastrange(h2, n - 1); b2 = b2' + (b2' >= b1)   so b2 != b1
 *   tag = 0x80 | (h1 & 0x7f)            low bits, independent of b1
 * fastrange (Lemire) maps a 64-bit hash onto [0, n) without a division and
 * works for any n, so the bucket count need not be a power of two.
 *
 * The checksum is XXH3-64 over bytes [16, 128) with a seed derived from the
 * version and the bucket index, so it also covers the version (a torn pair
 * of version and checksum words fails) and the bucket's position (a READ
 * at the wrong address fails). Cost: one XXH3 of 112 bytes, about 10 ns.
 */
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/rs_internal.h"
#include "index/pet_format.h"

static inline uint64_t fastrange64(uint64_t h, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)h * n) >> 64);
}

void pet_locate(const struct pet_geom *g, uint64_t key, struct pet_loc *loc)
{
	uint64_t h1 = XXH3_64bits_withSeed(&key, sizeof(key), g->seed1);
	uint64_t h2 = XXH3_64bits_withSeed(&key, sizeof(key), g->seed2);
	uint64_t b1 = fastrange64(h1, g->nbuckets);
	uint64_t b2 = fastrange64(h2, g->nbuckets - 1);

	loc->b[0] = b1;
	loc->b[1] = b2 + (b2 >= b1);
	loc->tag = (uint8_t)(PET_TAG_USED | (h1 & 0x7f));
}

uint64_t pet_bucket_checksum(const void *bucket, uint64_t b, uint64_t version,
			     uint64_t incarnation)
{
	return XXH3_64bits_withSeed((const uint8_t *)bucket + PET_CSUM_OFF,
				    PET_BUCKET_BYTES - PET_CSUM_OFF,
				    pet_bucket_seed(version, b, incarnation));
}

/* Word i of a byte image (memcpy: no alignment or aliasing assumption on
 * the buffer a NIC wrote into). */
static inline uint64_t word(const void *bucket, unsigned i)
{
	uint64_t w;

	memcpy(&w, (const uint8_t *)bucket + 8 * i, sizeof(w));
	return w;
}

int pet_bucket_validate(const void *bucket, uint64_t b, uint64_t incarnation)
{
	uint64_t v = word(bucket, PET_W_VERSION);

	if (v & 1)
		return RS_E_TORN;
	if (pet_bucket_checksum(bucket, b, v, incarnation) !=
	    word(bucket, PET_W_CSUM))
		return RS_E_TORN;
	return 0;
}

/* Bit 7 of each byte of the result is set where x has a zero byte (exact:
 * no carries between bytes). */
static inline uint64_t zero_bytes(uint64_t x)
{
	const uint64_t lo7 = 0x7F7F7F7F7F7F7F7FULL;

	return ~(((x & lo7) + lo7) | x | lo7);
}

int pet_bucket_find(const void *bucket, uint64_t key, uint8_t tag,
		    uint32_t *ref)
{
	uint64_t m = zero_bytes(word(bucket, PET_W_TAGS) ^
				(0x0101010101010101ULL * tag));

	while (m) {
		unsigned s = (unsigned)__builtin_ctzll(m) >> 3;

		if (word(bucket, PET_W_KEY0 + s) == key) {
			*ref = (uint32_t)(word(bucket, PET_W_REF0 + s / 2) >>
					  (32 * (s & 1)));
			return 0;
		}
		m &= m - 1;
	}
	return RS_E_NOTFOUND;
}

static uint64_t header_checksum(const struct pet_header *h)
{
	return XXH3_64bits(h, offsetof(struct pet_header, checksum));
}

void pet_header_fill(struct pet_header *h, const struct pet_geom *g)
{
	memset(h, 0, sizeof(*h));
	h->magic = PET_MAGIC;
	h->layout_version = PET_LAYOUT_VERSION;
	h->bucket_bytes = PET_BUCKET_BYTES;
	h->slots = PET_SLOTS;
	h->buckets_off = PET_HEADER_BYTES;
	h->nbuckets = g->nbuckets;
	h->seed1 = g->seed1;
	h->seed2 = g->seed2;
	h->incarnation = g->incarnation;
	h->checksum = header_checksum(h);
}

int pet_header_parse(const void *hdr, struct pet_geom *g)
{
	struct pet_header h;

	memcpy(&h, hdr, sizeof(h));
	if (h.checksum != header_checksum(&h))
		return RS_E_TORN;
	if (h.magic != PET_MAGIC || h.layout_version != PET_LAYOUT_VERSION ||
	    h.bucket_bytes != PET_BUCKET_BYTES || h.slots != PET_SLOTS ||
	    h.buckets_off != PET_HEADER_BYTES || h.nbuckets < 2)
		return RS_E_CORRUPT;
	g->nbuckets = h.nbuckets;
	g->seed1 = h.seed1;
	g->seed2 = h.seed2;
	g->incarnation = h.incarnation;
	g->bucket_bytes = h.bucket_bytes;
	g->buckets_off = h.buckets_off;
	return 0;
}
