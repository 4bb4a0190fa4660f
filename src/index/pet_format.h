/*
 * pet_format.h - the PET-hash index as a one-sided reader sees it (pet_).
 *
 * This header and pet_format.c are SHARED by the memory node and the client:
 * the client READs raw bytes out of a node's index region and calls the same
 * functions the server uses to locate buckets and validate what it got.
 * Design and correctness argument: docs/storage.md.
 *
 * Region layout (one contiguous byte range, registered for REMOTE_READ):
 *
 *   offset 0      struct pet_header (128 B): magic, geometry, hash seeds
 *   offset 128    bucket 0, bucket 1, ... (PET_BUCKET_BYTES each)
 *
 * Bucket (128 B = two cache lines, 64-bit words little-endian):
 *
 *   word 0        version   even: stable; odd: a writer is inside
 *   word 1        checksum  XXH3-64 of bytes [16, 128) seeded with
 *                           pet_bucket_seed(version, bucket index,
 *                           incarnation)
 *   word 2        tag[8]    one byte per slot: 0 = empty, else
 *                           0x80 | 7-bit fingerprint of the key
 *   words 3..10   key[8]    full 64-bit keys (every value is a valid key:
 *                           occupancy is the tag, never a reserved key)
 *   words 11..14  ref[8]    32-bit references (row index in the table)
 *   word 15       reserved  zero
 *
 * A key lives in one of two candidate buckets b1 != b2, from two XXH3-64
 * hashes of the key's 8 little-endian bytes with the table's two seeds
 * (pet_locate()). A reader READs both buckets (one doorbell), validates each
 * with pet_bucket_validate() and searches them with pet_bucket_find().
 *
 * Reader rules (see docs/storage.md for why they are enough):
 *  1. A bucket whose version is odd or whose checksum does not match is
 *     torn (RS_E_TORN): READ it again.
 *  2. A key found in a valid bucket was present when that bucket was read:
 *     accept its ref (the row itself is validated separately).
 *  3. A key found in neither valid bucket is NOT yet proven absent: a
 *     concurrent cuckoo move may have carried it from the bucket read last
 *     to the bucket read first. READ both buckets again; if both versions
 *     are unchanged, the key was absent (at the end of the first round);
 *     otherwise repeat from 1. pet_confirm_absent() states the test.
 *
 * struct pet_bucket documents the layout; code reads images through memcpy
 * (buffers a NIC wrote into need not be typed or aligned).
 *
 * Ownership: all functions here work on caller memory and keep no state;
 * they are thread-safe and never set rs_errormsg() (hot path).
 */
#ifndef RS_INDEX_PET_FORMAT_H
#define RS_INDEX_PET_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the PET-hash layout is little-endian"
#endif

#define PET_MAGIC 0x3148534148544550ULL /* "PETHASH1" */
#define PET_LAYOUT_VERSION 2 /* 2: bucket checksums seeded by incarnation */
#define PET_HEADER_BYTES 128
#define PET_BUCKET_BYTES 128
#define PET_BUCKET_WORDS (PET_BUCKET_BYTES / 8)
#define PET_SLOTS 8
#define PET_TAG_USED 0x80

/* Word indices inside a bucket (servers access buckets word by word). */
#define PET_W_VERSION 0
#define PET_W_CSUM 1
#define PET_W_TAGS 2
#define PET_W_KEY0 3
#define PET_W_REF0 11
#define PET_W_RSVD 15
#define PET_CSUM_OFF 16 /* checksum covers bytes [16, 128) */

struct pet_bucket {
	uint64_t version;
	uint64_t checksum;
	uint8_t tag[PET_SLOTS];
	uint64_t key[PET_SLOTS];
	uint32_t ref[PET_SLOTS];
	uint64_t reserved;
};
_Static_assert(sizeof(struct pet_bucket) == PET_BUCKET_BYTES, "bucket size");
_Static_assert(offsetof(struct pet_bucket, key) == PET_W_KEY0 * 8, "keys");
_Static_assert(offsetof(struct pet_bucket, ref) == PET_W_REF0 * 8, "refs");

/* Region header, written once when the region is formatted. */
struct pet_header {
	uint64_t magic;		 /* PET_MAGIC */
	uint32_t layout_version; /* PET_LAYOUT_VERSION */
	uint32_t bucket_bytes;	 /* PET_BUCKET_BYTES */
	uint32_t slots;		 /* PET_SLOTS */
	uint32_t buckets_off;	 /* offset of bucket 0: PET_HEADER_BYTES */
	uint64_t nbuckets;
	uint64_t seed1, seed2;
	uint64_t incarnation; /* mixed into every bucket checksum seed */
	uint64_t checksum; /* XXH3-64 of the bytes above, seed 0 */
	uint8_t pad[PET_HEADER_BYTES - 64];
};
_Static_assert(sizeof(struct pet_header) == PET_HEADER_BYTES, "header size");

/* Everything a remote reader needs to find a key's buckets. */
struct pet_geom {
	uint64_t nbuckets; /* >= 2 */
	uint64_t seed1, seed2;
	uint32_t bucket_bytes; /* PET_BUCKET_BYTES */
	uint32_t buckets_off;  /* PET_HEADER_BYTES */
	uint64_t incarnation;  /* of the table: bucket checksum seed */
};

/* Where a key may live. */
struct pet_loc {
	uint64_t b[2]; /* candidate buckets, b[0] != b[1] */
	uint8_t tag;   /* PET_TAG_USED | fingerprint */
};

/* Byte size of a region holding nbuckets buckets. */
static inline uint64_t pet_region_bytes(uint64_t nbuckets)
{
	return PET_HEADER_BYTES + nbuckets * PET_BUCKET_BYTES;
}

/* Offset of bucket b from the start of the region. */
static inline uint64_t pet_bucket_off(const struct pet_geom *g, uint64_t b)
{
	return g->buckets_off + b * g->bucket_bytes;
}

/* Candidate buckets and tag of key (2 XXH3-64 of the key's bytes). */
void pet_locate(const struct pet_geom *g, uint64_t key, struct pet_loc *loc);

/* Seed of a bucket's checksum: binds it to the version, the position and
 * the index's incarnation (pet_geom.incarnation: a table created again on
 * the same extent restarts its bucket versions; a reader holding the old
 * incarnation rejects every bucket of the new one). */
static inline uint64_t pet_bucket_seed(uint64_t version, uint64_t b,
				       uint64_t incarnation)
{
	return version ^ (b * 0x9E3779B97F4A7C15ULL) ^ incarnation;
}

/* Checksum bucket bytes would carry at version `version` as bucket b of an
 * index of that incarnation. */
uint64_t pet_bucket_checksum(const void *bucket, uint64_t b, uint64_t version,
			     uint64_t incarnation);

/* 0 if the 128 bytes at `bucket` are a consistent image of bucket b of an
 * index of that incarnation, else RS_E_TORN (odd version or checksum
 * mismatch). */
int pet_bucket_validate(const void *bucket, uint64_t b, uint64_t incarnation);

/* Search a VALIDATED bucket image: 0 and *ref if key is there, else
 * RS_E_NOTFOUND. tag is pet_loc.tag of the key. */
int pet_bucket_find(const void *bucket, uint64_t key, uint8_t tag,
		    uint32_t *ref);

/* Version of a bucket image (for rule 3). */
static inline uint64_t pet_bucket_version(const void *bucket)
{
	uint64_t v;

	__builtin_memcpy(&v, bucket, sizeof(v));
	return v;
}

/* Rule 3: a miss in both buckets of round 1 (versions v1[2]) is proven by
 * a second round (versions v2[2]) iff no bucket changed in between. */
static inline bool pet_confirm_absent(const uint64_t v1[2],
				      const uint64_t v2[2])
{
	return v1[0] == v2[0] && v1[1] == v2[1];
}

/* Parse a region header READ from a node: 0 and *g, or RS_E_TORN (bad
 * checksum) / RS_E_CORRUPT (wrong magic, version or geometry). */
int pet_header_parse(const void *hdr, struct pet_geom *g);

/* Fill a header for geometry g (used when formatting a region). */
void pet_header_fill(struct pet_header *h, const struct pet_geom *g);

#endif
