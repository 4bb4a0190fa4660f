/*
 * le.h - little-endian scalars of the wire and file formats (the protocol,
 * auth tokens, checkpoint parts). Byte by byte, so alignment and the
 * host's byte order do not matter; compilers turn each into one load or
 * store on little-endian hosts.
 */
#ifndef RS_COMMON_LE_H
#define RS_COMMON_LE_H

#include <stdint.h>

static inline uint16_t le_ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static inline uint32_t le_ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t le_ld64(const uint8_t *p)
{
	return (uint64_t)le_ld32(p) | (uint64_t)le_ld32(p + 4) << 32;
}

static inline void le_st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void le_st32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void le_st64(uint8_t *p, uint64_t v)
{
	le_st32(p, (uint32_t)v);
	le_st32(p + 4, (uint32_t)(v >> 32));
}

#endif
