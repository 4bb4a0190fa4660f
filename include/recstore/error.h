/*
 * recstore/error.h - the one error convention of librecstore.
 *
 * Every function of the library that can fail returns 0 (or a non-negative
 * count) on success and a negative code on failure:
 *   - a negated errno value (-ENOMEM, -ETIMEDOUT, ...) for system errors;
 *   - an RS_E_* value, all below RS_E_BASE, for the store's own errors.
 * rs_strerror() names any code; rs_errormsg() returns the calling thread's
 * message for the last failure the library reported on that thread (what
 * failed and why, e.g. "table 'ads': dimension 64 does not match 128").
 * The library never calls exit() or abort() on bad input.
 */
#ifndef RECSTORE_ERROR_H
#define RECSTORE_ERROR_H

#include "recstore/log.h"
#include "recstore/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_E_BASE (-10000)

enum rs_error {
	RS_OK = 0,
	RS_E_INVAL = RS_E_BASE - 1,	  /* invalid argument or config value */
	RS_E_NOTFOUND = RS_E_BASE - 2,	  /* key or table not found */
	RS_E_EXISTS = RS_E_BASE - 3,	  /* table or key already exists */
	RS_E_FULL = RS_E_BASE - 4,	  /* index or slab has no room */
	RS_E_PROTO = RS_E_BASE - 5,	  /* malformed or unexpected message */
	RS_E_DIM = RS_E_BASE - 6,	  /* wrong dimension */
	RS_E_TOOBIG = RS_E_BASE - 7,	  /* batch or message over a limit */
	RS_E_TORN = RS_E_BASE - 8,	  /* validation failed (torn read) */
	RS_E_DISCONNECTED = RS_E_BASE - 9, /* peer gone, connection broken */
	RS_E_VERBS = RS_E_BASE - 10,	  /* a verbs work completion failed */
	RS_E_NODEV = RS_E_BASE - 11,	  /* no RDMA device matches */
	RS_E_CORRUPT = RS_E_BASE - 12,	  /* persistent data fails checks */
	RS_E_STALE = RS_E_BASE - 13,	  /* cached location no longer valid */
	RS_E_TIMEOUT = RS_E_BASE - 14,	  /* operation did not finish in time */
	RS_E_UNSUPPORTED = RS_E_BASE - 15, /* feature unavailable here */
	RS_E_OVERFLOW = RS_E_BASE - 16,	  /* update result would not be finite */
	RS_E_PERM = RS_E_BASE - 17,	  /* the connection's role may not do
					     this */
	RS_E_AUTH = RS_E_BASE - 18,	  /* authentication failed */
	RS_E_BUSY = RS_E_BASE - 19,	  /* writes paused (a checkpoint):
					     retry; the client library does */
	RS_E_EPOCH = RS_E_BASE - 20,	  /* the request's configuration epoch
					     is not the node's, or the node
					     is not the key's primary in it:
					     refresh the configuration */
	RS_E_LAST = RS_E_BASE - 21
};

/* Static description of any code (negative errno or RS_E_*). */
const char *rs_strerror(int code);

/* Thread-local message for the last failure on this thread; "" if none.
 * Valid until the next library call on the same thread. */
const char *rs_errormsg(void);

#ifdef __cplusplus
}
#endif
#endif
