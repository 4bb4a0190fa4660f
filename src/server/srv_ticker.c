/*
 * srv_ticker.c - a node thread that calls fn(arg) every interval_ms until
 * it is stopped (the stage log's windows, the eviction sweep). It sleeps
 * on a condition variable (CLOCK_MONOTONIC), so a stop ends the wait at
 * once; fn runs without the ticker's lock.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "common/rs_internal.h"
#include "server/srv_internal.h"

static void *ticker_main(void *arg)
{
	struct srv_ticker *k = arg;
	struct timespec ts;

	pthread_mutex_lock(&k->lock);
	while (!k->stop) {
		rs_deadline_ms(CLOCK_MONOTONIC, k->interval_ms, &ts);
		while (!k->stop &&
		       pthread_cond_timedwait(&k->cv, &k->lock, &ts) != ETIMEDOUT)
			;
		if (k->stop)
			break;
		pthread_mutex_unlock(&k->lock);
		k->fn(k->arg);
		pthread_mutex_lock(&k->lock);
	}
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

int srv_ticker_start(struct srv_ticker *k, const char *name, int interval_ms,
		     void (*fn)(void *), void *arg)
{
	pthread_condattr_t ca;
	int ret;

	k->stop = false;
	k->interval_ms = interval_ms;
	k->fn = fn;
	k->arg = arg;
	pthread_mutex_init(&k->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
	ret = pthread_create(&k->thr, NULL, ticker_main, k);
	if (ret) {
		pthread_cond_destroy(&k->cv);
		pthread_mutex_destroy(&k->lock);
		return rs_seterr(-ret, "%s thread: %s", name, strerror(ret));
	}
	pthread_setname_np(k->thr, name);
	k->started = true;
	return 0;
}

void srv_ticker_stop(struct srv_ticker *k)
{
	if (!k->started)
		return;
	pthread_mutex_lock(&k->lock);
	k->stop = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->thr, NULL);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->lock);
	k->started = false;
}
