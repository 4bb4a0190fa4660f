/*
 * rv_fi.c - the counter behind src/verbs failure injection (rv_fi.h).
 *
 * State: one armed (site, nth) pair and per-site call counts, guarded by a
 * mutex (debug builds only; the counting threads are a test's). Enrolment
 * is per thread, so calls of threads the test does not control (the
 * device's async event thread) neither count nor fail.
 */
#define RV_FI_NO_MACROS
#include "verbs/rv_fi.h"

#ifdef RS_FAULT_INJECT
#include <pthread.h>

__thread bool rv_fi_enrolled;

static pthread_mutex_t fi_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long fi_calls[RV_FI_NSITES + 1];	/* [ANY]: all */
static int fi_site = RV_FI_ANY;
static unsigned long fi_nth;
static bool fi_fired;

static const char *const fi_names[] = {
#define RV_FI_NAME(s) #s,
	RV_FI_SITES(RV_FI_NAME)
#undef RV_FI_NAME
};

void rv_fi_enroll(bool on)
{
	rv_fi_enrolled = on;
}

void rv_fi_arm(int site, unsigned long nth)
{
	pthread_mutex_lock(&fi_lock);
	for (int i = 0; i <= RV_FI_NSITES; i++)
		fi_calls[i] = 0;
	fi_site = site < 0 || site > RV_FI_ANY ? RV_FI_ANY : site;
	fi_nth = nth;
	fi_fired = false;
	pthread_mutex_unlock(&fi_lock);
}

unsigned long rv_fi_calls(int site)
{
	unsigned long n;

	pthread_mutex_lock(&fi_lock);
	n = site >= 0 && site <= RV_FI_ANY ? fi_calls[site] : 0;
	pthread_mutex_unlock(&fi_lock);
	return n;
}

bool rv_fi_fired(void)
{
	bool f;

	pthread_mutex_lock(&fi_lock);
	f = fi_fired;
	pthread_mutex_unlock(&fi_lock);
	return f;
}

const char *rv_fi_site_name(int site)
{
	return site >= 0 && site < RV_FI_NSITES ? fi_names[site] : "ANY";
}

bool rv_fi_fail_slow(int site)
{
	bool fail;

	pthread_mutex_lock(&fi_lock);
	fi_calls[site]++;
	fi_calls[RV_FI_ANY]++;
	fail = fi_nth && !fi_fired && fi_calls[fi_site] == fi_nth &&
	       (fi_site == RV_FI_ANY || fi_site == site);
	if (fail)
		fi_fired = true;
	pthread_mutex_unlock(&fi_lock);
	return fail;
}
#endif
