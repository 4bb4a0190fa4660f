/*
 * abi.h - growable public structs (not public): every caller-allocated
 * struct of include/recstore starts with uint32_t struct_size, the size
 * the caller was compiled with. The library keeps, per struct, the list
 * of sizes it has had since it became growable (ascending; the last is
 * the current sizeof), accepts only those, and copies the caller's bytes
 * in and out of a full-size struct of its own, so that it never reads or
 * writes past the caller's struct_size. Fields are only ever appended,
 * and zero must mean "the default" for every field added after the first
 * size: a shorter struct is read as if the missing fields were zero.
 * docs/client.md, "ABI rules".
 */
#ifndef RS_COMMON_ABI_H
#define RS_COMMON_ABI_H

#include <stddef.h>
#include <stdint.h>

struct rs_abi_type {
	const char *name;	/* "struct rs_table_spec" */
	const uint32_t *sizes;	/* ascending; last = sizeof(current) */
	size_t nsizes;
};

/* 0 if size is one of t's sizes, else RS_E_INVAL with a message naming
 * the struct, the size given and the sizes known. p is the caller's
 * struct (NULL: RS_E_INVAL); its first 4 bytes are its struct_size. */
int rs_abi_check(const struct rs_abi_type *t, const void *p);

/* size of the caller's struct p (rs_abi_check() passed) */
uint32_t rs_abi_size(const void *p);

/* Caller -> library: full (full_size bytes) = p's bytes, zero beyond
 * them. Library -> caller: p's bytes = full's first struct_size bytes,
 * struct_size itself left as the caller set it. */
void rs_abi_in(void *full, size_t full_size, const void *p);
void rs_abi_out(void *p, const void *full, size_t full_size);

#endif
