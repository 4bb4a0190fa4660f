/*
 * log.c - the one way out for the library's log lines (log.h,
 * recstore/log.h).
 *
 * Two process-wide settings, each one atomic word: the installed function
 * (NULL: the default writer) and the threshold. Lines are written from any
 * thread with no lock: a line reads each setting once, so a change races
 * only with lines already under way, which finish with the old function.
 * Relaxed order is enough: the function pointer is the only thing a
 * reader takes from the store (the function's own state is the
 * program's to publish).
 *
 * The default writer keeps the library's historic output byte for byte:
 * one fprintf per line, "PREFIX: MESSAGE\n", so that lines of several
 * threads do not interleave within a line (stderr is unbuffered; glibc
 * writes one fprintf under the stream's lock).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "common/log.h"
#include "common/ratelimit.h"
#include "common/rs_internal.h"

static _Atomic(rs_log_function *) log_fn;
static atomic_int log_threshold = RS_LOG_DEBUG;

RS_EXPORT int rs_set_log_function(rs_log_function *fn)
{
	atomic_store_explicit(&log_fn, fn, memory_order_relaxed);
	return 0;
}

RS_EXPORT int rs_set_log_threshold(enum rs_log_level level)
{
	if ((int)level < RS_LOG_FATAL || (int)level > RS_LOG_DEBUG)
		return rs_seterr(RS_E_INVAL, "log threshold %d is not an "
				 "rs_log_level (%d..%d)", (int)level,
				 RS_LOG_FATAL, RS_LOG_DEBUG);
	atomic_store_explicit(&log_threshold, (int)level,
			      memory_order_relaxed);
	return 0;
}

static bool log_wanted(enum rs_log_level level)
{
	return (int)level <= atomic_load_explicit(&log_threshold,
						  memory_order_relaxed);
}

static void log_emit(const char *prefix, enum rs_log_level level,
		     const char *file, int line, const char *func,
		     const char *msg)
{
	rs_log_function *fn = atomic_load_explicit(&log_fn,
						    memory_order_relaxed);

	if (fn)
		fn(level, file, line, func, msg);
	else
		fprintf(stderr, "%s: %s\n", prefix, msg);
}

void rs_log_at(const char *prefix, enum rs_log_level level, const char *file,
	       int line, const char *func, const char *fmt, ...)
{
	char msg[RS_LOG_LINE_MAX];
	va_list ap;

	if (!log_wanted(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_emit(prefix, level, file, line, func, msg);
}

void rs_log_limited_at(struct rs_ratelimit *rl, unsigned burst,
		       uint64_t interval_ns, const char *prefix,
		       enum rs_log_level level, const char *file, int line,
		       const char *func, const char *fmt, ...)
{
	/* the count goes after a message cut at RS_LOG_LINE_MAX, as it
	 * always has */
	char msg[RS_LOG_LINE_MAX + 64];
	struct timespec ts;
	unsigned sup = 0;
	va_list ap;
	int n;

	if (!log_wanted(level))
		return;
	/* the coarse clock is a vDSO read: no system call for a dropped
	 * line */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	if (!rs_ratelimit_ok(rl, burst, interval_ns,
			     (uint64_t)ts.tv_sec * 1000000000ull +
				     (uint64_t)ts.tv_nsec, &sup))
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, RS_LOG_LINE_MAX, fmt, ap);
	va_end(ap);
	if (sup) {
		size_t at = n < 0 ? 0 : (size_t)n < RS_LOG_LINE_MAX ?
			    (size_t)n : RS_LOG_LINE_MAX - 1;

		snprintf(msg + at, sizeof(msg) - at,
			 " (%u similar lines suppressed)", sup);
	}
	log_emit(prefix, level, file, line, func, msg);
}
