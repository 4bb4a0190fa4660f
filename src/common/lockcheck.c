/*
 * lockcheck.c - the failure side of RS_ASSERT_HELD (rs_internal.h).
 *
 * A debug-build check only: with RS_DEBUG_LOCKS the macro passes the owner
 * thread id glibc keeps in the mutex (0: unlocked); a mismatch with the
 * calling thread is a broken lock rule, logged (log.h), then abort():
 * continuing would let the data race the rule prevents happen. Release
 * builds compile the macro and this function out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "common/rs_internal.h"

#if defined(RS_DEBUG_LOCKS) && defined(__GLIBC__)
void rs_lock_assert_held(int owner, const char *what, const char *file,
			 int line)
{
	int self = (int)gettid();
	char site[256];

	if (RS_LIKELY(owner == self))
		return;
	/* the prefix is the site of the broken rule, not this file */
	snprintf(site, sizeof(site), "%s:%d", file, line);
	rs_log_at(site, RS_LOG_FATAL, file, line, "", "lock rule broken: %s "
		  "is %s", what, owner ? "held by another thread" : "not held");
	abort();
}
#endif
