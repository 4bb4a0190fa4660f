/*
 * log.h - every log line of the library (internal; public side:
 * recstore/log.h).
 *
 * rs_log(level, fmt, ...) formats a line and hands it to the function the
 * program installed, or writes "recstore: LINE" to stderr. The _from
 * variants name another prefix for that stderr line: each part of the
 * library keeps the one its lines have always had ("recstore-server",
 * "coord"), which operators' scripts and the tests grep for. The prefix is
 * the default writer's business only: an installed function receives the
 * bare message and the source location.
 *
 * rs_log_limited_from() is for lines a peer can cause (ratelimit.h): one
 * limiter per call site (a static of the caller's macro, e.g. the node's
 * srv_log_peer); a line below the threshold neither counts against it nor
 * is formatted.
 */
#ifndef RS_COMMON_LOG_H
#define RS_COMMON_LOG_H

#include <stdint.h>

#include "recstore/log.h"

struct rs_ratelimit;

/* Lines a format may produce; longer ones are cut. */
#define RS_LOG_LINE_MAX 1024

void rs_log_at(const char *prefix, enum rs_log_level level, const char *file,
	       int line, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

/* At most burst lines per interval_ns through rl, then one line carrying
 * the count of those dropped. */
void rs_log_limited_at(struct rs_ratelimit *rl, unsigned burst,
		       uint64_t interval_ns, const char *prefix,
		       enum rs_log_level level, const char *file, int line,
		       const char *func, const char *fmt, ...)
	__attribute__((format(printf, 9, 10)));

#define rs_log_from(prefix, level, ...)                                   \
	rs_log_at(prefix, level, __FILE__, __LINE__, __func__, __VA_ARGS__)
#define rs_log(level, ...) rs_log_from("recstore", level, __VA_ARGS__)

#define rs_log_limited_from(rl, burst, interval_ns, prefix, level, ...)   \
	rs_log_limited_at(rl, burst, interval_ns, prefix, level, __FILE__,  \
			  __LINE__, __func__, __VA_ARGS__)

#endif
