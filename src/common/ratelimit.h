/*
 * ratelimit.h - a per-call-site limit on log lines (internal).
 *
 * Any log line a peer can cause (a bad request, a disconnect, a protocol
 * violation) must not let that peer fill the disk or slow the node with
 * writes to stderr. A struct rs_ratelimit, one per call site (a static in
 * the logging macro), lets `burst` lines through per `interval_ns`, then
 * counts the lines it drops; the first line let through after a drop
 * carries the count, so the log says "K similar lines suppressed" once
 * instead of K times.
 *
 * Windows are fixed: the first line after interval_ns since the window
 * began opens a new one. The caller passes the time (CLOCK_MONOTONIC in
 * ns; tests pass their own), so the limiter itself makes no system call.
 *
 * Threads: any number at once, lock-free. Races only blur the count at a
 * window's edge (a line more or less), never lose the suppressed count.
 * A zero-initialised struct is ready (a static needs no set-up).
 */
#ifndef RS_COMMON_RATELIMIT_H
#define RS_COMMON_RATELIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct rs_ratelimit {
	_Atomic uint64_t start_ns;	/* current window; 0: none yet */
	atomic_uint lines;		/* let through in this window */
	atomic_uint dropped;		/* since the last line let through */
};

/*
 * May a line be written now? true: write it; *suppressed is the number of
 * lines dropped since the previous line let through (report it with this
 * one). false: drop it (counted).
 */
static inline bool rs_ratelimit_ok(struct rs_ratelimit *rl, unsigned burst,
				   uint64_t interval_ns, uint64_t now_ns,
				   unsigned *suppressed)
{
	uint64_t start = atomic_load_explicit(&rl->start_ns,
					      memory_order_relaxed);

	if (start == 0 || now_ns - start >= interval_ns) {
		if (atomic_compare_exchange_strong(&rl->start_ns, &start,
						   now_ns ? now_ns : 1))
			atomic_store(&rl->lines, 0);
	}
	if (atomic_fetch_add(&rl->lines, 1) >= burst) {
		atomic_fetch_add(&rl->dropped, 1);
		return false;
	}
	*suppressed = atomic_exchange(&rl->dropped, 0);
	return true;
}

#endif
