/*
 * alloc.c - the counter behind failure injection (alloc.h): the
 * allocator sites of every module and the verbs sites of src/verbs/rv_fi.h.
 *
 * State: one armed (site, nth) pair and per-site call counts, guarded by a
 * mutex (debug builds only; the counting threads are a test's). Enrolment
 * is per thread, so calls of threads the test does not control (the
 * device's async event thread, a node's workers) neither count nor fail.
 * Without RS_FAULT_INJECT this file compiles to nothing.
 */
#include "common/alloc.h"

#ifdef RS_FAULT_INJECT
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

__thread bool rs_fi_enrolled;

static pthread_mutex_t fi_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long fi_calls[RS_FI_ALLOC + 1];	/* [ANY], [ALLOC] */
static int fi_site = RS_FI_ANY;
static unsigned long fi_nth;
static bool fi_fired;

static const char *const fi_names[] = {
#define RS_FI_NAME(s) #s,
	RS_FI_ALLOC_SITES(RS_FI_NAME)
#undef RS_FI_NAME
};

void rs_fi_enroll(bool on)
{
	rs_fi_enrolled = on;
}

void rs_fi_arm(int site, unsigned long nth)
{
	pthread_mutex_lock(&fi_lock);
	for (int i = 0; i <= RS_FI_ALLOC; i++)
		fi_calls[i] = 0;
	fi_site = site < 0 || site > RS_FI_ALLOC ? RS_FI_ANY : site;
	fi_nth = nth;
	fi_fired = false;
	pthread_mutex_unlock(&fi_lock);
}

unsigned long rs_fi_calls(int site)
{
	unsigned long n;

	pthread_mutex_lock(&fi_lock);
	n = site >= 0 && site <= RS_FI_ALLOC ? fi_calls[site] : 0;
	pthread_mutex_unlock(&fi_lock);
	return n;
}

bool rs_fi_fired(void)
{
	bool f;

	pthread_mutex_lock(&fi_lock);
	f = fi_fired;
	pthread_mutex_unlock(&fi_lock);
	return f;
}

const char *rs_fi_site_name(int site)
{
	if (site >= 0 && site < RS_FI_NALLOC)
		return fi_names[site];
	return site == RS_FI_ANY ? "ANY" : site == RS_FI_ALLOC ? "ALLOC" : "?";
}

/* RS_FI_BACKTRACE set: where the armed failure fires, on stderr (to find
 * the site a walk's step names). */
static void fi_backtrace(int site)
{
	void *pc[32];
	int n = backtrace(pc, 32);

	fprintf(stderr, "rs_fi: failing a call of site %d (%s):\n", site,
		rs_fi_site_name(site));
	backtrace_symbols_fd(pc, n, STDERR_FILENO);
}

bool rs_fi_fail_slow(int site)
{
	bool alloc = site < RS_FI_NALLOC, fail;

	pthread_mutex_lock(&fi_lock);
	fi_calls[site]++;
	fi_calls[RS_FI_ANY]++;
	fi_calls[RS_FI_ALLOC] += alloc;
	fail = fi_nth && !fi_fired && fi_calls[fi_site] == fi_nth &&
	       (fi_site == RS_FI_ANY || fi_site == site ||
		(fi_site == RS_FI_ALLOC && alloc));
	if (fail)
		fi_fired = true;
	pthread_mutex_unlock(&fi_lock);
	if (fail && getenv("RS_FI_BACKTRACE"))
		fi_backtrace(site);
	return fail;
}
#endif
