/*
 * rs_internal.h - helpers shared by every module of librecstore (not public).
 */
#ifndef RS_INTERNAL_H
#define RS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"

#define RS_EXPORT __attribute__((visibility("default")))
#define RS_LIKELY(x) __builtin_expect(!!(x), 1)
#define RS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RS_CACHELINE 64

/* Record a message for rs_errormsg() and return code unchanged. */
int rs_seterr(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void rs_clearerr(void);

#endif
