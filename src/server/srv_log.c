/*
 * srv_log.c - the node's error messages, at the bottom of the node
 * module: every srv_ file calls them, so they live apart from the node's
 * life cycle (server.c) and depend on nothing of it. Its log lines
 * (srv_log, srv_warn, srv_log_peer) are macros over the library's one
 * log function (src/common/log.h, srv_internal.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "server/srv_internal.h"

int srv_err(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rs_seterr(code, "%s", msg);
}
