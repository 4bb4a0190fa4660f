/*
 * srv_log.c - the node's log lines and error messages, at the bottom of
 * the node module: every srv_ file calls them, so they live apart from
 * the node's life cycle (server.c) and depend on nothing of it.
 *
 * Lines go to stderr, one fprintf each (whole lines: stdio locks the
 * stream per call, so lines of concurrent threads do not interleave),
 * prefixed "recstore-server: ". srv_log_limited drops lines over its
 * call site's budget (srv_log_peer, srv_internal.h) and says how many it
 * dropped on the next line it lets through.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "server/srv_internal.h"

void srv_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "recstore-server: %s\n", line);
}

void srv_log_limited(struct rs_ratelimit *rl, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	unsigned sup = 0;
	va_list ap;

	/* the coarse clock is a vDSO read: no system call for a dropped
	 * line */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	if (!rs_ratelimit_ok(rl, SRV_LOG_BURST, SRV_LOG_INTERVAL_NS,
			     (uint64_t)ts.tv_sec * 1000000000ull +
				     (uint64_t)ts.tv_nsec, &sup))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (sup)
		fprintf(stderr, "recstore-server: %s (%u similar lines "
			"suppressed)\n", line, sup);
	else
		fprintf(stderr, "recstore-server: %s\n", line);
}

int srv_err(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rs_seterr(code, "%s", msg);
}
