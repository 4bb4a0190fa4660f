/*
 * abi.c - size checks and copies of the growable public structs (abi.h).
 */
#include <stdio.h>
#include <string.h>

#include "common/abi.h"
#include "common/rs_internal.h"

uint32_t rs_abi_size(const void *p)
{
	uint32_t size;

	memcpy(&size, p, sizeof(size));
	return size;
}

int rs_abi_check(const struct rs_abi_type *t, const void *p)
{
	char known[96] = "";
	size_t off = 0;
	uint32_t size;

	if (!p)
		return rs_seterr(RS_E_INVAL, "%s: NULL pointer", t->name);
	size = rs_abi_size(p);
	for (size_t i = 0; i < t->nsizes; i++)
		if (size == t->sizes[i])
			return 0;
	for (size_t i = 0; i < t->nsizes && off < sizeof(known); i++)
		off += (size_t)snprintf(known + off, sizeof(known) - off,
					"%s%u", i ? ", " : "", t->sizes[i]);
	return rs_seterr(RS_E_INVAL, "%s: struct_size %u is not a size this "
			 "library (%s) knows (%s): set it with the struct's "
			 "RS_*_INIT or sizeof, and check RS_CHECK_VERSION()",
			 t->name, size, RS_VERSION_STRING, known);
}

void rs_abi_in(void *full, size_t full_size, const void *p)
{
	size_t n = rs_abi_size(p);

	if (n > full_size)
		n = full_size;
	memset(full, 0, full_size);
	memcpy(full, p, n);
}

void rs_abi_out(void *p, const void *full, size_t full_size)
{
	uint32_t size = rs_abi_size(p);
	size_t n = size < full_size ? size : full_size;

	memcpy(p, full, n);
	memcpy(p, &size, sizeof(size));
}
