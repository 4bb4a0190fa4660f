/*
 * ckpt_int.h - what the files of src/ckpt share (not an interface).
 */
#ifndef RS_CKPT_CKPT_INT_H
#define RS_CKPT_CKPT_INT_H

#include <string.h>

#include "ckpt/ckpt.h"
#include "common/le.h"

/* fp32 arrays <-> little-endian (the row format already requires a
 * little-endian host: a copy) */
static inline void ckpt_store_f32(uint8_t *p, const float *v, size_t n)
{
	memcpy(p, v, n * 4);
}

static inline void ckpt_load_f32(float *v, const uint8_t *p, size_t n)
{
	memcpy(v, p, n * 4);
}

/* The geometry of d is one a part may have; what: the file, for the
 * message. 0 or RS_E_CORRUPT. */
int ckpt_desc_check(const struct ckpt_part_desc *d, const char *what);
/* Bytes of one row's payload (dim elements of dtype). */
size_t ckpt_payload_bytes(const struct ckpt_part_desc *d);

#endif
