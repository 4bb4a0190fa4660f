/*
 * rv_wait.c - completion queues with channels, and the adaptive wait that
 * every blocking call of the verbs layer goes through.
 *
 * The wait loop, for one caller condition over one or more CQs:
 *
 *   spin:  progress (poll the CQs and handle completions); done? return.
 *          Keep spinning while the last completion (or the start of the
 *          wait) is less than spin_ns ago.
 *   arm:   ibv_req_notify_cq on each CQ, then progress once more: a
 *          completion that landed between the last poll and the arming
 *          raises no event, so it must be found by this poll. (With
 *          arm_progress, the owner arms and polls under one hold of its
 *          lock; the order, arm then poll, is the same.)
 *   sleep: poll(2) on the channel fds (+ extra fds such as the rdma_cm
 *          channel of a client conn) until the deadline; then take the
 *          channel events (non-blocking), and spin again - unless the
 *          sleep ended without an event (a capped sleep), then go
 *          straight back to arming.
 *
 * A caller that polled just before (w->polled) enters at the spin test: at
 * spin 0 it arms and re-polls at once instead of polling twice in a row.
 *
 * Time spent spinning and sleeping is added to the caller's rv_stats.
 * Channel fds are non-blocking so that several threads may sleep on the same
 * channel: whoever wakes first takes the event, the others find none.
 * Channel events are acknowledged in groups (ibv_ack_cq_events takes a
 * mutex) and all at destroy time.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <string.h>

#include "verbs/rv_internal.h"
#include "verbs/rv_fi.h"

#define RV_ACK_BATCH 64

int rv_cq_create(struct rv_dev *d, struct rv_cq *q, int cqe,
		 pthread_mutex_t *lock)
{
	int fl, ret;

	memset(q, 0, sizeof(*q));
	q->lock = lock;
	if (cqe > d->attr.max_cqe)
		return rs_seterr(RS_E_INVAL, "%s: CQ of %d entries exceeds the "
				 "device maximum %d", d->name, cqe,
				 d->attr.max_cqe);
	q->ch = ibv_create_comp_channel(d->ctx);
	if (!q->ch)
		return rs_seterr(-(errno ? errno : ENOMEM),
				 "%s: ibv_create_comp_channel: %s", d->name,
				 strerror(errno));
	fl = fcntl(q->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(q->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		ret = rs_seterr(-errno, "channel fd: %s", strerror(errno));
		goto err_ch;
	}
	q->cq = ibv_create_cq(d->ctx, cqe, NULL, q->ch, 0);
	if (!q->cq) {
		ret = rs_seterr(-(errno ? errno : ENOMEM),
				"%s: ibv_create_cq(%d): %s", d->name, cqe,
				strerror(errno));
		goto err_ch;
	}
	return 0;

err_ch:
	ibv_destroy_comp_channel(q->ch);
	q->ch = NULL;
	return ret;
}

static void take_events(struct rv_cq *q);

void rv_cq_destroy(struct rv_cq *q)
{
	if (q->cq) {
		take_events(q);
		if (q->unacked)
			ibv_ack_cq_events(q->cq, q->unacked);
		ibv_destroy_cq(q->cq);
		q->cq = NULL;
	}
	if (q->ch) {
		ibv_destroy_comp_channel(q->ch);
		q->ch = NULL;
	}
}

int rv_cq_arm_locked(struct rv_cq *q)
{
	int ret = ibv_req_notify_cq(q->cq, 0);

	RS_ASSERT_HELD(q->lock);
	return ret ? rs_seterr(-ret, "ibv_req_notify_cq: %s", strerror(ret))
		   : 0;
}

/* Consume the channel's events; the caller owns q (its lock, or q is
 * being destroyed and no other thread can reach it). */
static void take_events(struct rv_cq *q)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	while (ibv_get_cq_event(q->ch, &ev_cq, &ev_ctx) == 0) {
		if (++q->unacked >= RV_ACK_BATCH) {
			ibv_ack_cq_events(q->cq, q->unacked);
			q->unacked = 0;
		}
	}
}

void rv_cq_take_events_locked(struct rv_cq *q)
{
	RS_ASSERT_HELD(q->lock);
	take_events(q);
}

static void arm_all(const struct rv_wait *w)
{
	for (int i = 0; i < w->nfds; i++) {
		struct rv_cq *q = w->fds[i].cq;

		if (!q)
			continue;
		pthread_mutex_lock(q->lock);
		rv_cq_arm_locked(q);
		pthread_mutex_unlock(q->lock);
	}
}

static int sleep_ms(const struct rv_wait *w, uint64_t now, uint64_t deadline)
{
	uint64_t left;
	int ms, cap;

	if (deadline == UINT64_MAX) {
		ms = -1;
	} else {
		left = deadline > now ? deadline - now : 0;
		left = (left + 999999) / 1000000;
		ms = left > INT_MAX ? INT_MAX : (int)left;
	}
	cap = w->sleep_cap_ms ? w->sleep_cap_ms(w->arg) : -1;
	if (cap >= 0 && (ms < 0 || cap < ms))
		ms = cap;
	return ms;
}

static void handle_fds(const struct rv_wait *w, const struct pollfd *pf)
{
	for (int i = 0; i < w->nfds; i++) {
		if (!pf[i].revents)
			continue;
		if (w->fds[i].cq) {
			struct rv_cq *q = w->fds[i].cq;

			pthread_mutex_lock(q->lock);
			rv_cq_take_events_locked(q);
			pthread_mutex_unlock(q->lock);
		} else if (w->fds[i].on_ready) {
			w->fds[i].on_ready(w->arg);
		}
	}
}

int rv_wait_until(const struct rv_wait *w, uint64_t now, uint64_t deadline)
{
	uint64_t t0 = now, spin_from = t0, last = t0, t;
	struct pollfd pf[RS_ARRAY_SIZE(w->fds)];
	bool poll_now = !w->polled;
	int n, r, ms;

	for (;;) {
		if (poll_now) {
			n = w->progress(w->arg);
			r = w->check(w->arg);
			if (r)
				break;
			t = rs_mono_ns();
			if (n > 0)
				last = t;
		} else {	/* the caller polled at t0 */
			t = t0;
			poll_now = true;
		}
		if (t >= deadline) {
			r = RS_E_TIMEOUT;
			break;
		}
		if (t - last < w->spin_ns) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
			continue;
		}
		if (w->arm_progress) {
			n = w->arm_progress(w->arg);
		} else {
			arm_all(w);
			n = w->progress(w->arg);
		}
		r = w->check(w->arg);
		if (r)
			break;
		t = rs_mono_ns();
		if (n > 0) {
			last = t;
			continue;
		}
		rv_stat_add(&w->st->spin_ns, t - spin_from);
		for (int i = 0; i < w->nfds; i++) {
			pf[i].fd = w->fds[i].fd;
			pf[i].events = POLLIN;
			pf[i].revents = 0;
		}
		ms = sleep_ms(w, t, deadline);
		n = poll(pf, (nfds_t)w->nfds, ms);
		spin_from = rs_mono_ns();
		rv_stat_add(&w->st->block_ns, spin_from - t);
		rv_stat_add(&w->st->wakeups, 1);
		if (n < 0 && errno != EINTR)
			return rs_seterr(-errno, "poll: %s", strerror(errno));
		/* spin again only after a real wake-up, not after a timeout
		 * or a capped sleep with nothing to do */
		last = n > 0 ? spin_from : 0;
		if (n > 0)
			handle_fds(w, pf);
	}
	rv_stat_add(&w->st->spin_ns, rs_mono_ns() - spin_from);
	if (r == RS_E_TIMEOUT)
		return rs_seterr(RS_E_TIMEOUT, "timed out after %d ms",
				 deadline == UINT64_MAX ? -1 :
				 deadline <= t0 ? 0 :
				 (int)((deadline - t0) / 1000000ull));
	return r > 0 ? 0 : r;
}

int rv_wait_run(const struct rv_wait *w, int timeout_ms)
{
	uint64_t t0 = rs_mono_ns();

	return rv_wait_until(w, t0, timeout_ms < 0 ? UINT64_MAX :
			     t0 + (uint64_t)timeout_ms * 1000000ull);
}
