/*
 * rs_internal.h - helpers shared by every module of librecstore (not public).
 */
#ifndef RS_INTERNAL_H
#define RS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "recstore/error.h"

/* rs_malloc and the other allocators of the storage side, with their
 * failure injection (debug builds): every module includes them here. */
#include "common/alloc.h"

#define RS_EXPORT __attribute__((visibility("default")))
#define RS_LIKELY(x) __builtin_expect(!!(x), 1)
#define RS_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* A helper off the hot path: kept out of line, so that the loop that
 * calls it stays as compact as without it. */
#define RS_COLD __attribute__((cold, noinline))
#define RS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RS_CACHELINE 64
/* The longest client timeout (rs_client_config_set_timeout_ms); nodes
 * keep what a client may still resend for a multiple of it. */
#define RS_TIMEOUT_MAX_MS 3600000u

/* Record a message for rs_errormsg() and return code unchanged. */
int rs_seterr(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Size of the thread-local message, and a way for cleanup paths (closing a
 * connection after an error) to keep the message of the error that made
 * them run: save before, restore after. */
#define RS_ERRMSG_MAX 512
void rs_errsave(char buf[RS_ERRMSG_MAX]);
void rs_errrestore(const char buf[RS_ERRMSG_MAX]);
void rs_clearerr(void);

/*
 * Lock-rule assertions: RS_ASSERT_HELD(&mutex) states that the calling
 * thread holds a pthread mutex, where a comment or a _locked suffix says
 * so. Active with RS_DEBUG_LOCKS (Debug and sanitizer builds), compiled out
 * otherwise. glibc records the owner's thread id in every mutex it locks
 * (any type), so no wrapper type is needed; a broken rule prints the site
 * and aborts (debug builds only, like assert()). src/common/lockcheck.c.
 */
#if defined(RS_DEBUG_LOCKS) && defined(__GLIBC__)
#define RS_ASSERT_HELD(m) \
	rs_lock_assert_held((m)->__data.__owner, #m, __FILE__, __LINE__)
void rs_lock_assert_held(int owner, const char *what, const char *file,
			 int line);
#else
#define RS_ASSERT_HELD(m) ((void)0)
#endif

/* *out = a random non-zero 64-bit id (getrandom): 0, or -errno with the
 * error set. src/common/error.c. */
int rs_random_id(uint64_t *out);

/* CLOCK_MONOTONIC in milliseconds: the one clock every module measures
 * leases, timeouts, backoffs and ages with (never set back, so deadlines
 * and differences of two readings hold across wall-clock changes). */
static inline uint64_t rs_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The same clock in nanoseconds, for durations (stage times, waits). */
static inline uint64_t rs_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* *dl = the clock's time now + ms: a deadline for pthread_cond_timedwait
 * on a condition variable of that clock. */
static inline void rs_deadline_ms(clockid_t clock, int64_t ms,
				  struct timespec *dl)
{
	clock_gettime(clock, dl);
	dl->tv_sec += (time_t)(ms / 1000);
	dl->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl->tv_nsec >= 1000000000L) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000L;
	}
}

#endif
