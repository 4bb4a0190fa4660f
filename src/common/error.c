/*
 * error.c - codes, messages and the thread-local last-error message.
 *
 * rs_seterr() formats into a per-thread buffer and returns the code it was
 * given, so a failing path reads `return rs_seterr(-ENOMEM, "...")`. Its
 * arguments may include rs_errormsg() (a message wrapping the previous
 * one).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "recstore/error.h"
#include "common/rs_internal.h"

static _Thread_local char errmsg[RS_ERRMSG_MAX];

static const char *const rs_names[] = {
	[0] = "success",
	[-(RS_E_INVAL - RS_E_BASE)] = "invalid argument",
	[-(RS_E_NOTFOUND - RS_E_BASE)] = "not found",
	[-(RS_E_EXISTS - RS_E_BASE)] = "already exists",
	[-(RS_E_FULL - RS_E_BASE)] = "no space left in index or slab",
	[-(RS_E_PROTO - RS_E_BASE)] = "protocol error",
	[-(RS_E_DIM - RS_E_BASE)] = "dimension mismatch",
	[-(RS_E_TOOBIG - RS_E_BASE)] = "request too large",
	[-(RS_E_TORN - RS_E_BASE)] = "torn read detected",
	[-(RS_E_DISCONNECTED - RS_E_BASE)] = "peer disconnected",
	[-(RS_E_VERBS - RS_E_BASE)] = "RDMA operation failed",
	[-(RS_E_NODEV - RS_E_BASE)] = "no matching RDMA device",
	[-(RS_E_CORRUPT - RS_E_BASE)] = "persistent data corrupt",
	[-(RS_E_STALE - RS_E_BASE)] = "stale location",
	[-(RS_E_TIMEOUT - RS_E_BASE)] = "timed out",
	[-(RS_E_UNSUPPORTED - RS_E_BASE)] = "not supported",
	[-(RS_E_OVERFLOW - RS_E_BASE)] = ("result would not be finite "
					  "(update refused, row unchanged)"),
	[-(RS_E_PERM - RS_E_BASE)] = "permission denied (role)",
	[-(RS_E_AUTH - RS_E_BASE)] = "authentication failed",
	[-(RS_E_BUSY - RS_E_BASE)] = "writes are paused (checkpoint): retry",
	[-(RS_E_EPOCH - RS_E_BASE)] = "configuration epoch mismatch: refresh "
				      "the configuration",
};

RS_EXPORT const char *rs_strerror(int code)
{
	if (code == 0)
		return rs_names[0];
	if (code < RS_E_BASE && code > RS_E_LAST)
		return rs_names[RS_E_BASE - code];
	if (code < 0 && code > RS_E_BASE)
		return strerror(-code);
	return "unknown error";
}

RS_EXPORT const char *rs_errormsg(void)
{
	return errmsg;
}

RS_EXPORT const char *rs_version(void)
{
	return RS_VERSION_STRING;
}

RS_EXPORT int rs_check_version(unsigned major, unsigned minor)
{
	if (major != RS_VERSION_MAJOR || minor > RS_VERSION_MINOR ||
	    (major == 0 && minor < 2))
		return rs_seterr(RS_E_UNSUPPORTED, "built against recstore "
				 "%u.%u, running with %s: %s", major, minor,
				 RS_VERSION_STRING,
				 major == 0 && minor < 2 ?
				 "0.1 structs carry no size, rebuild" :
				 "need the same major and at least that minor");
	return 0;
}

/* Formats into a local buffer first: an argument may be rs_errormsg()
 * itself ("connect: %s", rs_errormsg()), which vsnprintf into errmsg
 * would overwrite while reading it. Error paths only: the copy is free. */
int rs_seterr(int code, const char *fmt, ...)
{
	char msg[sizeof(errmsg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(errmsg, msg, sizeof(errmsg));
	return code;
}

void rs_errsave(char buf[RS_ERRMSG_MAX])
{
	memcpy(buf, errmsg, RS_ERRMSG_MAX);
}

void rs_errrestore(const char buf[RS_ERRMSG_MAX])
{
	memcpy(errmsg, buf, RS_ERRMSG_MAX);
}

void rs_clearerr(void)
{
	errmsg[0] = '\0';
}

int rs_random_id(uint64_t *out)
{
	uint64_t id = 0;

	while (!id) {
		ssize_t got = getrandom(&id, sizeof(id), 0);
		int err = errno;

		if (got < 0 && err != EINTR)
			return rs_seterr(-err, "getrandom: %s",
					 rs_strerror(-err));
		if (got != (ssize_t)sizeof(id))
			id = 0;
	}
	*out = id;
	return 0;
}
