/*
 * rv_conn.c - RC connections: creation, the client side of rdma_cm, the
 * send-queue op ring, failure handling, progress and waiting, close.
 *
 * Send queue. Every post (a READ chain, a message, a credit message) is an
 * "op" with a sequence number; all WRs of the op carry the sequence as
 * wr_id. Ops live in a ring indexed by sequence. RC completes the send queue
 * in order, so the completion of op s (signaled) retires every op below s
 * too: their unsignaled WRs are done. READ chains are signaled on their last
 * WR; sends are signaled every s_sig_every ops (at most half the send ring,
 * so a full ring always holds a signaled op); credit messages always.
 * Bounds, enforced before each post: READs in flight <= rd_depth (the
 * negotiated max_rd_atomic), sends <= s_slots, credit messages <=
 * RV_CTRL_MAX, and their sum + 1 (the drain WR) is the QP's max_send_wr.
 * The CQ has room for a completion per WR plus every receive buffer, since
 * a flush completes even unsignaled WRs on some providers.
 *
 * Failure. rv_conn_fail() records the first failure code (atomic; any
 * thread: async-event thread, rdma_cm handler, completion handler) and
 * moves the QP to the error state; the device then flushes every posted WR.
 * The next progress call on the conn (under its lock) fails the queued READ
 * requests and posts one signaled "drain" WR; its completion comes after
 * every flushed WR, so when it arrives all ops are retired: an op whose
 * completion said success keeps status 0, the others get the error. If the
 * drain does not complete within RV_DRAIN_MS (a dead device), the remaining
 * ops are retired by force. Nothing is left pointing into caller memory.
 *
 * Client rdma_cm events (DISCONNECTED, DEVICE_REMOVAL) arrive on the conn's
 * own event channel, whose fd is part of every wait on the conn; accepted
 * conns get theirs through the listener's channel (rv_listen.c).
 *
 * Lifetime. A conn's memory (not its QP or buffers) outlives
 * rv_conn_close() while messages received on it are out: c->refs holds one
 * reference for the owner and one per message handed to the application
 * (queued in the listener's ready queue or a client conn's, or returned by
 * a receive call). Close tears everything down under c->lock's c->closed
 * and drops the owner's reference; rv_msg_release() drops a message's; the
 * last one frees the memory. A release after the close re-posts an SRQ
 * buffer (the listener's) but returns no credit and touches no QP. The
 * same count is the node's credit check (rv_listen.c).
 *
 * Keepalive. A conn idle for keepalive_ms (no message received since the
 * last look) gets a probe: a signaled zero-length RDMA WRITE, which needs
 * no receive buffer, no rkey and no memory on the peer, and is answered by
 * the peer's NIC alone. A peer that vanished never acknowledges it; after
 * the transport retries (retry_cnt, ack_timeout) it completes in error and
 * fails the conn ("keepalive unanswered"). Accepted conns are looked at by
 * the listener's accept loop on its timer; client conns when
 * rv_conn_status() is called or a data-path call ticks (never more often
 * than keepalive_ms). The probe takes one send-queue slot of its own.
 *
 * Locking: c->lock guards everything under "send queue", "send ring" and
 * the client receive queue, and the conn's CQ; it is never held while
 * sleeping. Counters are atomics.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/defaults.h"
#include "verbs/rv_internal.h"
#include "verbs/rv_fi.h"

void rv_conn_attr_init(struct rv_conn_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->msg_max = 4096;
	a->credits = 16;
	a->send_slots = 16;
	a->spin_us = RS_SPIN_US_DEFAULT;
	a->ack_timeout = 14;
	a->retry_cnt = 6;
	a->rnr_retry = 6;
	a->connect_timeout_ms = 5000;
	a->keepalive_ms = 5000;
}

static uint32_t dev_rd_max(const struct rv_dev *d)
{
	int m = d->attr.max_qp_rd_atom;

	if (d->attr.max_qp_init_rd_atom < m)
		m = d->attr.max_qp_init_rd_atom;
	if (m > 255)
		m = 255;
	return m > 0 ? (uint32_t)m : 1;
}

static int check_attr(const struct rv_dev *d, const struct rv_conn_attr *a)
{
	if (a->msg_max == 0 || a->msg_max > (1u << 30))
		return rs_seterr(RS_E_INVAL, "msg_max %u out of range "
				 "(1..2^30)", a->msg_max);
	if (a->credits < 3 || a->credits > 16383)
		return rs_seterr(RS_E_INVAL, "credits %u out of range (3..16383)",
				 a->credits);
	if (a->send_slots < 1 || a->send_slots > 16384)
		return rs_seterr(RS_E_INVAL, "send_slots %u out of range "
				 "(1..16384)", a->send_slots);
	if (a->ack_timeout > 31 || a->retry_cnt > 7 || a->rnr_retry > 7)
		return rs_seterr(RS_E_INVAL, "ack_timeout (<= 31), retry_cnt "
				 "and rnr_retry (<= 7) out of range");
	if (a->spin_us > RS_SPIN_US_MAX)
		return rs_seterr(RS_E_INVAL, "spin_us %u above one second",
				 a->spin_us);
	if (a->keepalive_ms > 3600000)
		return rs_seterr(RS_E_INVAL, "keepalive_ms %u above one hour",
				 a->keepalive_ms);
	(void)d;
	return 0;
}

int rv_conn_new(struct rv_dev *d, const struct rv_conn_attr *a,
		struct rv_listener *l, struct rv_conn **out)
{
	pthread_condattr_t ca;
	struct rv_conn *c;
	int ret, cqe;

	*out = NULL;
	ret = check_attr(d, a);
	if (ret)
		return ret;
	c = calloc(1, sizeof(*c));
	if (!c)
		return rs_seterr(-ENOMEM, "rv_conn: out of memory");
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->dev = d;
	c->l = l;
	c->epfd = -1;
	atomic_init(&c->refs, 1);
	c->ka_ns = (uint64_t)a->keepalive_ms * 1000000ull;
	c->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->kick_fd < 0) {
		ret = rs_seterr(-errno, "eventfd: %s", strerror(errno));
		goto err;
	}
	c->spin_ns = (uint64_t)a->spin_us * 1000;
	c->rd_depth = a->rd_depth ? a->rd_depth : dev_rd_max(d);
	if (c->rd_depth > dev_rd_max(d))
		c->rd_depth = dev_rd_max(d);
	c->chain_max = a->chain_max ? a->chain_max : c->rd_depth / 4;
	if (c->chain_max < 1)
		c->chain_max = 1;
	if (c->chain_max > c->rd_depth)
		c->chain_max = c->rd_depth;
	c->s_slots = a->send_slots;
	c->s_sig_every = c->s_slots / 2 ? c->s_slots / 2 : 1;
	c->r_slots = (uint32_t)a->credits + 1;
	c->r_size = a->msg_max;
	c->sq_depth = c->rd_depth + c->s_slots + RV_CTRL_MAX + RV_PROBE_MAX;
	c->ops_cap = c->sq_depth + 1;
	ret = -ENOMEM;
	c->ops = calloc(c->ops_cap, sizeof(*c->ops));
	c->wr = calloc(c->chain_max, sizeof(*c->wr));
	c->sge = calloc(c->chain_max, sizeof(*c->sge));
	if (!c->ops || !c->wr || !c->sge) {
		rs_seterr(ret, "rv_conn: out of memory");
		goto err;
	}
	rv_read_wr_init(c);
	cqe = (int)(c->sq_depth + 1 + (l ? 0 : c->r_slots));
	ret = rv_cq_create(d, &c->cq, cqe, &c->lock);
	if (ret)
		goto err;
	if (!l) {
		c->rxq = calloc(c->r_slots, sizeof(*c->rxq));
		if (!c->rxq) {
			ret = rs_seterr(-ENOMEM, "rv_conn: out of memory");
			goto err;
		}
		ret = rv_pool_init(&c->pool, c->r_size, c->r_slots, 1);
		if (ret)
			goto err;
		ret = rv_pool_grow(&c->pool, d);
		if (ret)
			goto err;
	}
	*out = c;
	return 0;
err:
	rv_conn_free(c);
	return ret;
}

int rv_conn_setup_qp(struct rv_conn *c, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa;
	int ret;

	c->id = id;
	memset(&qa, 0, sizeof(qa));
	qa.qp_context = c;
	qa.send_cq = c->cq.cq;
	qa.recv_cq = c->l ? c->l->rcq.cq : c->cq.cq;
	qa.srq = c->l ? c->l->srq : NULL;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = c->sq_depth + 1;
	qa.cap.max_recv_wr = c->l ? 0 : c->r_slots;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = c->l ? 0 : 1;
	qa.cap.max_inline_data = 64;
	if (rdma_create_qp(id, c->dev->pd, &qa)) {
		struct ibv_qp_init_attr q2 = qa;

		q2.cap.max_inline_data = 0;
		qa = q2;
		if (rdma_create_qp(id, c->dev->pd, &qa))
			return rs_seterr(-(errno ? errno : ENOMEM),
					 "%s: rdma_create_qp (%u send WRs): %s",
					 c->dev->name, c->sq_depth + 1,
					 strerror(errno));
	}
	c->qp = id->qp;
	c->qp_num = c->qp->qp_num;
	c->max_inline = qa.cap.max_inline_data;
	if (!c->l) {
		c->pool.qp = c->qp;
		for (uint32_t i = 0; i < c->r_slots; i++) {
			ret = rv_pool_post(&c->pool, i);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int rv_conn_apply_peer(struct rv_conn *c, const struct rv_hello *h)
{
	size_t ring;
	int ret;

	if (h->rd_depth < c->rd_depth)
		c->rd_depth = h->rd_depth;
	if (c->chain_max > c->rd_depth)
		c->chain_max = c->rd_depth;
	c->s_size = h->msg_max;
	c->credits_max = (uint32_t)h->slots - 1;	/* one is for control */
	atomic_store(&c->credits, (int)c->credits_max);
	atomic_store(&c->token, 1);
	c->c_thresh = rv_credit_thresh(c->r_slots);
	ring = (size_t)c->s_slots * (c->s_size ? c->s_size : 1);
	ret = rv_mem_alloc(c->dev, ring, RV_ACC_LOCAL_WRITE, &c->smr);
	if (ret)
		return ret;
	c->peer_priv_len = h->user_len;
	if (h->user_len)
		memcpy(c->peer_priv, h->user, h->user_len);
	return 0;
}

void rv_conn_fail(struct rv_conn *c, int code, const char *fmt, ...)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	int expect = 0;
	va_list ap;

	if (!atomic_compare_exchange_strong(&c->fail, &expect, code))
		return;
	va_start(ap, fmt);
	vsnprintf(c->fail_msg, sizeof(c->fail_msg), fmt, ap);
	va_end(ap);
	atomic_store_explicit(&c->fail_msg_set, true, memory_order_release);
	if (c->qp)
		ibv_modify_qp(c->qp, &qa, IBV_QP_STATE);
	rv_conn_kick(c);
	if (c->l)
		rv_listener_conn_failed(c->l);
}

int rv_conn_err(struct rv_conn *c)
{
	int code = atomic_load(&c->fail);

	if (!code)
		return 0;
	/* fail is set before its message is written: a reader between the
	 * two has only the code */
	if (!atomic_load_explicit(&c->fail_msg_set, memory_order_acquire))
		return rs_seterr(code, "QP %u: failed (%s)", c->qp_num,
				 rs_strerror(code));
	return rs_seterr(code, "QP %u: %s", c->qp_num, c->fail_msg);
}

/* ---- send-queue completions ---- */

void rv_op_retire_locked(struct rv_conn *c, uint64_t seq, int code)
{
	struct rv_op *op = &c->ops[seq % c->ops_cap];
	struct rv_batch *b;

	RS_ASSERT_HELD(&c->lock);
	switch (op->kind) {
	case RV_OP_READ:
		b = op->batch;
		for (uint32_t i = op->first; i < op->first + op->count; i++)
			b->reqs[i].status = code;
		if (code && !b->result)
			b->result = code;
		c->rd_inflight -= op->nwr;
		__atomic_store_n(&b->done, b->done + op->count,
				 __ATOMIC_RELEASE);
		break;
	case RV_OP_SEND:
		c->s_inflight--;
		break;
	case RV_OP_CREDIT:
		c->ctrl_inflight--;
		break;
	case RV_OP_PROBE:
		c->ka_inflight = false;
		break;
	}
	c->sq_used -= op->nwr;
	op->kind = 0;
	c->seq_done = seq + 1;
}

static void retire_upto(struct rv_conn *c, uint64_t seq, int code)
{
	while (c->seq_done < seq)
		rv_op_retire_locked(c, c->seq_done, 0);
	if (c->seq_done == seq)
		rv_op_retire_locked(c, seq, code);
}

static void retire_all(struct rv_conn *c, int code)
{
	while (c->seq_done < c->seq_next)
		rv_op_retire_locked(c, c->seq_done, code);
}

static const char *op_name(const struct rv_conn *c, uint64_t seq)
{
	switch (c->ops[seq % c->ops_cap].kind) {
	case RV_OP_READ:
		return "READ";
	case RV_OP_SEND:
		return "SEND";
	case RV_OP_PROBE:
		return "keepalive probe (peer unresponsive?)";
	default:
		return "credit SEND";
	}
}

static void sq_wc(struct rv_conn *c, const struct ibv_wc *wc)
{
	uint64_t seq = wc->wr_id;
	int code;

	if (seq < c->seq_done || seq >= c->seq_next)
		return;		/* a flushed WR of an op already retired */
	if (wc->status == IBV_WC_SUCCESS) {
		retire_upto(c, seq, 0);
		return;
	}
	if (wc->status == IBV_WC_WR_FLUSH_ERR && atomic_load(&c->fail)) {
		code = atomic_load(&c->fail);
	} else {
		code = wc->status == IBV_WC_WR_FLUSH_ERR ? RS_E_DISCONNECTED
							 : RS_E_VERBS;
		if (c->l && c->ops[seq % c->ops_cap].kind == RV_OP_PROBE)
			rv_stat_add(&c->l->cnt.ka_failures, 1);
		rv_conn_fail(c, code, "%s failed: %s (vendor error 0x%x)",
			     op_name(c, seq), ibv_wc_status_str(wc->status),
			     wc->vendor_err);
	}
	retire_upto(c, seq, code);
}

static void handle_wc(struct rv_conn *c, const struct ibv_wc *wc)
{
	if (wc->wr_id & RV_WRID_RECV)
		rv_msg_recv_wc_locked(c, wc);
	else if (wc->wr_id == RV_WRID_DRAIN)
		retire_all(c, atomic_load(&c->fail));
	else
		sq_wc(c, wc);
}

static void post_drain(struct rv_conn *c)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = RV_WRID_DRAIN;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	c->drain_posted = true;
	c->drain_deadline = rs_mono_ns() + RV_DRAIN_MS * 1000000ull;
	if (!c->qp || ibv_post_send(c->qp, &wr, &bad))
		retire_all(c, atomic_load(&c->fail));
}

static void finish_failed(struct rv_conn *c, int code)
{
	rv_read_fail_queued_locked(c, code);
	if (c->seq_done == c->seq_next)
		return;
	if (!c->drain_posted)
		post_drain(c);
	else if (rs_mono_ns() > c->drain_deadline)
		retire_all(c, code);
}

int rv_conn_reap_locked(struct rv_conn *c)
{
	struct ibv_wc wc[16];
	int n = 0, k;

	RS_ASSERT_HELD(&c->lock);
	do {
		k = ibv_poll_cq(c->cq.cq, RS_ARRAY_SIZE(wc), wc);
		if (k < 0) {
			rv_conn_fail(c, RS_E_VERBS, "ibv_poll_cq failed (%d)",
				     k);
			break;
		}
		for (int i = 0; i < k; i++)
			handle_wc(c, &wc[i]);
		n += k;
	} while (k == (int)RS_ARRAY_SIZE(wc));
	return n;
}

int rv_conn_progress_locked(struct rv_conn *c)
{
	int n = rv_conn_reap_locked(c), code;

	RS_ASSERT_HELD(&c->lock);
	rv_conn_tick_locked(c);
	code = atomic_load(&c->fail);
	if (code) {
		finish_failed(c, code);
	} else {
		rv_read_post_queued_locked(c);
		rv_conn_maybe_credit_locked(c);
	}
	return n;
}

/* ---- keepalive ---- */

static uint64_t seq_of_probe(struct rv_conn *c)
{
	uint64_t seq = c->seq_next++;
	struct rv_op *op = &c->ops[seq % c->ops_cap];

	op->kind = RV_OP_PROBE;
	op->nwr = 1;
	op->batch = NULL;
	c->sq_used++;
	return seq;
}

void rv_conn_keepalive_locked(struct rv_conn *c)
{
	struct ibv_send_wr wr, *bad;
	uint64_t seen = __atomic_load_n(&c->st.recvs, __ATOMIC_RELAXED);
	int ret;

	rv_conn_reap_locked(c);	/* retires (or fails on) the last probe */
	if (!c->ka_ns || !c->qp || atomic_load(&c->fail) || c->ka_inflight)
		return;
	if (seen != c->ka_seen) {	/* it spoke since the last look */
		c->ka_seen = seen;
		return;
	}
	if (c->sq_used >= c->sq_depth)
		return;		/* busy sending: not idle */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = seq_of_probe(c);
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	c->ka_inflight = true;
	c->last_sig = wr.wr_id;
	if (c->l)
		rv_stat_add(&c->l->cnt.ka_probes, 1);
	ret = ibv_post_send(c->qp, &wr, &bad);
	if (ret)
		rv_conn_fail(c, RS_E_VERBS, "ibv_post_send (keepalive): %s",
			     strerror(ret));
}

/* Client conns: a keepalive look at most every keepalive_ms. */
static void client_keepalive_locked(struct rv_conn *c, uint64_t now)
{
	if (!c->ka_ns || c->l || now < c->ka_next)
		return;
	c->ka_next = now + c->ka_ns;
	rv_conn_keepalive_locked(c);
}

/* ---- client rdma_cm events after establishment ---- */

void rv_conn_cm_events_locked(struct rv_conn *c)
{
	struct rdma_cm_event *ev;

	RS_ASSERT_HELD(&c->lock);
	if (!c->ech)
		return;
	while (rdma_get_cm_event(c->ech, &ev) == 0) {
		switch (ev->event) {
		case RDMA_CM_EVENT_DISCONNECTED:
			rv_conn_fail(c, RS_E_DISCONNECTED,
				     "peer disconnected");
			rdma_disconnect(c->id);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			rv_conn_fail(c, RS_E_DISCONNECTED, "device removed");
			break;
		default:
			break;
		}
		rdma_ack_cm_event(ev);
	}
}

void rv_conn_cm_events(void *arg)
{
	struct rv_conn *c = arg;

	pthread_mutex_lock(&c->lock);
	rv_conn_cm_events_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/*
 * A client conn whose operations keep completing inside the spin window
 * never sleeps on its rdma_cm fd; look at it every RV_CM_TICK calls, at
 * most every RV_CM_CHECK_MS, so that a DISCONNECTED is seen within that
 * time even then (a zero-timeout poll(2); the clock is read once per
 * RV_CM_TICK calls).
 */
#define RV_CM_TICK 64
#define RV_CM_CHECK_MS 10

void rv_conn_tick_locked(struct rv_conn *c)
{
	struct pollfd pf;
	uint64_t now;

	RS_ASSERT_HELD(&c->lock);
	if (!c->ech || ++c->cm_tick % RV_CM_TICK)
		return;
	now = rs_mono_ns();
	if (now - c->cm_checked < RV_CM_CHECK_MS * 1000000ull)
		return;
	c->cm_checked = now;
	client_keepalive_locked(c, now);
	pf.fd = c->ech->fd;
	pf.events = POLLIN;
	if (poll(&pf, 1, 0) > 0)
		rv_conn_cm_events_locked(c);
}

/* ---- waiting ----
 *
 * Several threads may wait on one conn (a receiver and a sender, or
 * several senders). Only one of them, the poller, sleeps on the conn's
 * channels; the others (followers) sleep on c->cv. The poller broadcasts
 * c->cv whenever it handled completions, and hands over when it leaves,
 * so that a waiter whose condition was met by someone else's progress
 * wakes up; a follower never sleeps on the channel, where the poller
 * could take its event. State changes made outside completions (a
 * failure, a released send reservation) write c->kick_fd, which is in the
 * poller's fd set. Followers also wake every RV_FOLLOW_MS as a safety net.
 *
 * Fast path. A waiter that finds no poller polls the CQ once under the
 * lock it took to look (a READ has often completed by the time its caller
 * waits) and returns if that met its condition: no clock read, no arming,
 * no second lock. Only then does it read the clock, become the poller and
 * go on at rv_wait_until's spin test (w.polled), which at spin 0 arms the
 * CQ and polls it again under one hold of c->lock (cw_arm_progress) before
 * sleeping: the arm-then-poll order that loses no wake-up. A wait that
 * ends at that first poll adds no spin time to the conn's stats.
 */
#define RV_FOLLOW_MS 50

struct conn_wait {
	struct rv_conn *c;
	int (*check)(void *);	/* called with c->lock held */
	void *arg;
	bool rx;	/* accepted conn waiting for credits: poll the SRQ CQ */
	bool lockless;	/* check reads atomics only (a batch) */
	bool polled;	/* progressed and checked at t_in, under the lock
			 * held since (the fast path) */
	uint64_t t_in;
};

static int cw_progress(void *p)
{
	struct conn_wait *w = p;
	struct rv_conn *c = w->c;
	int n, m = 0;

	if (w->rx)
		m = rv_listener_rq_progress(c->l);
	pthread_mutex_lock(&c->lock);
	n = rv_conn_progress_locked(c);
	if (n + m > 0 && c->waiters > 1)
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->lock);
	return n + m;
}

/* Arm the conn's CQ, then poll it (not for rx waits, whose SRQ CQ is
 * armed under the listener's lock by rv_wait.c). */
static int cw_arm_progress(void *p)
{
	struct conn_wait *w = p;
	struct rv_conn *c = w->c;
	int n;

	pthread_mutex_lock(&c->lock);
	rv_cq_arm_locked(&c->cq);
	n = rv_conn_progress_locked(c);
	if (n > 0 && c->waiters > 1)
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->lock);
	return n;
}

static int cw_check(void *p)
{
	struct conn_wait *w = p;
	int r;

	if (w->lockless)
		return w->check(w->arg);
	pthread_mutex_lock(&w->c->lock);
	r = w->check(w->arg);
	pthread_mutex_unlock(&w->c->lock);
	return r;
}

static int cw_cap(void *p)
{
	struct conn_wait *w = p;

	if (atomic_load(&w->c->fail))
		return 10;	/* drain deadline */
	/* credits of an accepted conn are polled by the listener's
	 * workers too, who may take the SRQ channel event */
	return w->rx ? 1 : -1;
}

static void cw_cm(void *p)
{
	struct conn_wait *w = p;

	rv_conn_cm_events(w->c);
}

static void cw_kicked(void *p)
{
	struct conn_wait *w = p;
	uint64_t v;

	if (read(w->c->kick_fd, &v, sizeof(v)) < 0)
		return;
}

void rv_conn_kick(struct rv_conn *c)
{
	uint64_t one = 1;

	if (c->kick_fd >= 0 &&
	    __atomic_load_n(&c->waiters, __ATOMIC_RELAXED) > 0 &&
	    write(c->kick_fd, &one, sizeof(one)) < 0)
		return;
}

/* c->cv runs on CLOCK_MONOTONIC, like rs_mono_ns(). */
static void follow_until(struct timespec *ts, uint64_t deadline)
{
	uint64_t cap = rs_mono_ns() + RV_FOLLOW_MS * 1000000ull;

	if (deadline > cap)
		deadline = cap;
	ts->tv_sec = (time_t)(deadline / 1000000000ull);
	ts->tv_nsec = (long)(deadline % 1000000000ull);
}

static int poll_as_leader(struct rv_conn *c, struct conn_wait *cw,
			  uint64_t deadline)
{
	struct rv_wait w;

	memset(&w, 0, sizeof(w));
	w.fds[w.nfds++] = (struct rv_waitfd){ .fd = c->cq.ch->fd,
					      .cq = &c->cq };
	w.fds[w.nfds++] = (struct rv_waitfd){ .fd = c->kick_fd,
					      .on_ready = cw_kicked };
	if (c->ech)
		w.fds[w.nfds++] = (struct rv_waitfd){ .fd = c->ech->fd,
						      .on_ready = cw_cm };
	if (cw->rx)
		w.fds[w.nfds++] = (struct rv_waitfd){ .fd = c->l->rcq.ch->fd,
						      .cq = &c->l->rcq };
	w.progress = cw_progress;
	if (!cw->rx)
		w.arm_progress = cw_arm_progress;
	w.check = cw_check;
	w.sleep_cap_ms = cw_cap;
	w.arg = cw;
	w.spin_ns = c->spin_ns;
	w.st = &c->st;
	w.polled = cw->polled;
	return rv_wait_until(&w, cw->polled ? cw->t_in : rs_mono_ns(),
			     deadline);
}

int rv_conn_wait(struct rv_conn *c, int (*check)(void *), void *arg,
		 bool rx, int timeout_ms)
{
	struct conn_wait cw = { .c = c, .check = check, .arg = arg,
				.rx = c->l && rx,
				.lockless = check == rv_batch_check };
	uint64_t deadline;
	struct timespec ts;
	int ret = 0, n;

	pthread_mutex_lock(&c->lock);
	if (check(arg)) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (!c->polling && !cw.rx) {	/* fast path (see above) */
		n = rv_conn_progress_locked(c);
		if (n > 0 && c->waiters > 0)
			pthread_cond_broadcast(&c->cv);
		if (check(arg)) {
			pthread_mutex_unlock(&c->lock);
			return 0;
		}
		cw.polled = true;
	}
	cw.t_in = rs_mono_ns();
	deadline = timeout_ms < 0 ? UINT64_MAX :
		   cw.t_in + (uint64_t)timeout_ms * 1000000ull;
	__atomic_fetch_add(&c->waiters, 1, __ATOMIC_RELAXED);
	for (;;) {
		if (check(arg))
			break;
		if (c->polling && rs_mono_ns() >= deadline) {
			ret = rs_seterr(RS_E_TIMEOUT, "timed out after %d ms",
					timeout_ms);
			break;
		}
		if (c->polling) {	/* follower */
			cw.polled = false;
			follow_until(&ts, deadline);
			pthread_cond_timedwait(&c->cv, &c->lock, &ts);
			continue;
		}
		c->polling = true;
		pthread_mutex_unlock(&c->lock);
		ret = poll_as_leader(c, &cw, deadline);
		pthread_mutex_lock(&c->lock);
		c->polling = false;
		if (c->waiters > 1)
			pthread_cond_broadcast(&c->cv);	/* hand over */
		break;
	}
	__atomic_fetch_sub(&c->waiters, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->lock);
	if (cw.rx)
		rv_listener_rearm(c->l);
	return ret;
}

/* ---- client connect ---- */

static int cm_event_code(const struct rdma_cm_event *ev, const char *ip,
			 uint16_t port)
{
	unsigned why;
	uint32_t lim;

	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		if (rv_reject_unpack(ev->param.conn.private_data,
				     ev->param.conn.private_data_len, &why,
				     &lim) == 0)
			return rs_seterr(-ECONNREFUSED, "connection to %s:%u "
					 "rejected: %s (limit %u)", ip, port,
					 rv_reject_str(why), lim);
		return rs_seterr(-ECONNREFUSED, "connection to %s:%u refused "
				 "(no listener, or rejected; status %d)", ip,
				 port, ev->status);
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		return rs_seterr(-EHOSTUNREACH, "%s:%u unreachable (%s, status "
				 "%d)", ip, port, rdma_event_str(ev->event),
				 ev->status);
	default:
		return rs_seterr(-ECONNABORTED, "connecting to %s:%u: %s "
				 "(status %d)", ip, port,
				 rdma_event_str(ev->event), ev->status);
	}
}

/* A refusal's bytes for the caller (a->reject_buf), zero-padded. */
static void keep_reject(const struct rv_conn_attr *a,
			const struct rdma_cm_event *ev)
{
	size_t n = ev->param.conn.private_data_len;

	memset(a->reject_buf, 0, a->reject_cap);
	if (!ev->param.conn.private_data)
		return;
	if (n > a->reject_cap)
		n = a->reject_cap;
	memcpy(a->reject_buf, ev->param.conn.private_data, n);
}

/* Wait for event `want`; rej (optional) keeps a refusal's bytes. */
static int cm_expect(struct rv_conn *c, enum rdma_cm_event_type want,
		     uint64_t deadline, const char *ip, uint16_t port,
		     const struct rv_conn_attr *rej, struct rdma_cm_event **evp)
{
	struct pollfd pf = { .fd = c->ech->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	uint64_t now;
	int n, ret;

	for (;;) {
		now = rs_mono_ns();
		if (now >= deadline)
			return rs_seterr(RS_E_TIMEOUT, "connecting to %s:%u: "
					 "no %s in time", ip, port,
					 rdma_event_str(want));
		n = poll(&pf, 1, (int)((deadline - now + 999999) / 1000000));
		if (n < 0 && errno != EINTR)
			return rs_seterr(-errno, "poll: %s", strerror(errno));
		if (n > 0)
			break;
	}
	if (rdma_get_cm_event(c->ech, &ev))
		return rs_seterr(-errno, "rdma_get_cm_event: %s",
				 strerror(errno));
	if (ev->event != want || ev->status) {
		if (ev->event == RDMA_CM_EVENT_REJECTED && rej && rej->reject_buf)
			keep_reject(rej, ev);
		ret = cm_event_code(ev, ip, port);
		rdma_ack_cm_event(ev);
		return ret;
	}
	*evp = ev;
	return 0;
}

static int client_connect(struct rv_conn *c, const struct rv_conn_attr *a,
			  const char *ip, uint16_t port)
{
	struct rv_dev *d = c->dev;
	uint64_t deadline = rs_mono_ns() +
			    (uint64_t)a->connect_timeout_ms * 1000000ull;
	struct sockaddr_storage dst;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	uint8_t priv[RV_HELLO_LEN + RV_CONNECT_PRIV_MAX];
	struct rv_hello h = { .slots = (uint16_t)c->r_slots,
			      .rd_depth = (uint16_t)c->rd_depth,
			      .msg_max = c->r_size };
	uint8_t tmo = a->ack_timeout;
	int ret, len, fl, ms = a->connect_timeout_ms;

	memset(&dst, 0, sizeof(dst));
	if (inet_pton(AF_INET, ip, &((struct sockaddr_in *)&dst)->sin_addr)) {
		dst.ss_family = AF_INET;
		((struct sockaddr_in *)&dst)->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, ip,
			     &((struct sockaddr_in6 *)&dst)->sin6_addr)) {
		dst.ss_family = AF_INET6;
		((struct sockaddr_in6 *)&dst)->sin6_port = htons(port);
	} else {
		return rs_seterr(RS_E_INVAL, "'%s' is not an IP address", ip);
	}
	c->ech = rdma_create_event_channel();
	if (!c->ech)
		return rs_seterr(-(errno ? errno : ENODEV),
				 "rdma_create_event_channel: %s",
				 strerror(errno));
	if (rdma_create_id(c->ech, &c->id, c, RDMA_PS_TCP)) {
		c->id = NULL;
		return rs_seterr(-errno, "rdma_create_id: %s", strerror(errno));
	}
	if (rdma_resolve_addr(c->id, d->has_ip ? (struct sockaddr *)&d->ip
					       : NULL,
			      (struct sockaddr *)&dst, ms))
		return rs_seterr(-errno, "rdma_resolve_addr(%s): %s", ip,
				 strerror(errno));
	ret = cm_expect(c, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, ip, port,
			NULL, &ev);
	if (ret)
		return ret;
	rdma_ack_cm_event(ev);
	if (c->id->verbs != d->ctx)
		return rs_seterr(RS_E_NODEV, "the route to %s uses device %s, "
				 "not %s", ip,
				 c->id->verbs ?
				 ibv_get_device_name(c->id->verbs->device) :
				 "(none)", d->name);
	if (rdma_resolve_route(c->id, ms))
		return rs_seterr(-errno, "rdma_resolve_route(%s): %s", ip,
				 strerror(errno));
	ret = cm_expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, ip, port,
			NULL, &ev);
	if (ret)
		return ret;
	rdma_ack_cm_event(ev);
	/* A kernel without the option keeps rdma_cm's default timeout. */
	rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			&tmo, sizeof(tmo));
	ret = rv_conn_setup_qp(c, c->id);
	if (ret)
		return ret;
	len = rv_hello_pack(priv, sizeof(priv), &h, a->priv, a->priv_len);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = priv;
	cp.private_data_len = (uint8_t)len;
	cp.initiator_depth = (uint8_t)c->rd_depth;
	cp.responder_resources = (uint8_t)dev_rd_max(d);
	cp.retry_count = a->retry_cnt;
	cp.rnr_retry_count = a->rnr_retry;
	c->state = RV_CS_CONNECTING;
	if (rdma_connect(c->id, &cp))
		return rs_seterr(-errno, "rdma_connect(%s:%u): %s", ip, port,
				 strerror(errno));
	ret = cm_expect(c, RDMA_CM_EVENT_ESTABLISHED, deadline, ip, port, a,
			&ev);
	if (ret)
		return ret;
	if (rv_hello_unpack(ev->param.conn.private_data,
			    ev->param.conn.private_data_len, &h) ||
	    h.slots > RV_SLOTS_MAX || h.msg_max > (1u << 30)) {
		rdma_ack_cm_event(ev);
		return rs_seterr(RS_E_PROTO, "%s:%u: the server's handshake "
				 "is not ours (not a verbs-layer listener?)",
				 ip, port);
	}
	ret = rv_conn_apply_peer(c, &h);
	rdma_ack_cm_event(ev);
	if (ret)
		return ret;
	fl = fcntl(c->ech->fd, F_GETFL);
	if (fl < 0 || fcntl(c->ech->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return rs_seterr(-errno, "cm channel: %s", strerror(errno));
	c->state = RV_CS_CONNECTED;
	return 0;
}

int rv_connect(struct rv_dev *d, const char *ip, uint16_t port,
	       const struct rv_conn_attr *a, struct rv_conn **out)
{
	struct rv_conn_attr def;
	struct rv_conn *c;
	int ret;

	*out = NULL;
	if (!a) {
		rv_conn_attr_init(&def);
		a = &def;
	}
	if (!ip)
		return rs_seterr(RS_E_INVAL, "rv_connect: no address");
	if (a->priv_len > RV_CONNECT_PRIV_MAX)
		return rs_seterr(RS_E_TOOBIG, "handshake data of %zu bytes "
				 "(at most %d)", a->priv_len,
				 RV_CONNECT_PRIV_MAX);
	if (a->connect_timeout_ms <= 0)
		return rs_seterr(RS_E_INVAL, "connect_timeout_ms must be > 0");
	ret = rv_conn_new(d, a, NULL, &c);
	if (ret)
		return ret;
	ret = client_connect(c, a, ip, port);
	if (ret) {
		rv_conn_free(c);
		return ret;
	}
	rv_dev_link(d, c);
	*out = c;
	return 0;
}

/* ---- close ---- */

static int idle_check(void *p)	/* c->lock held */
{
	struct rv_conn *c = p;

	return c->seq_done == c->seq_next && !c->bq_head;
}

static void conn_free_memory(struct rv_conn *c)
{
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Under c->lock, like the message releases: the last one out frees the
 * memory only once nobody else holds or waits for the lock. */
void rv_conn_unref(struct rv_conn *c)
{
	bool last;

	pthread_mutex_lock(&c->lock);
	last = atomic_fetch_sub(&c->refs, 1) == 1;
	pthread_mutex_unlock(&c->lock);
	if (last)
		conn_free_memory(c);
}

void rv_conn_free(struct rv_conn *c)
{
	if (!c)
		return;
	if (c->l)
		rv_listener_drop_rx(c->l, c);
	pthread_mutex_lock(&c->lock);
	c->closed = true;	/* late releases touch no QP nor pool now */
	pthread_mutex_unlock(&c->lock);
	rv_dev_unlink(c->dev, c);
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	rv_cq_destroy(&c->cq);
	/* an accepted id's events are acknowledged by the listener thread
	 * right after handling; rdma_destroy_id waits for that */
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ech)
		rdma_destroy_event_channel(c->ech);
	rv_pool_fini(&c->pool);
	rv_mr_free(&c->smr);
	if (c->epfd >= 0)
		close(c->epfd);
	if (c->kick_fd >= 0)
		close(c->kick_fd);
	c->epfd = c->kick_fd = -1;
	free(c->rxq);
	free(c->ops);
	free(c->wr);
	free(c->sge);
	c->rxq = NULL;
	c->ops = NULL;
	c->wr = NULL;
	c->sge = NULL;
	c->qp = NULL;
	c->id = NULL;
	c->ech = NULL;
	rv_conn_unref(c);	/* the owner's reference */
}

void rv_conn_close(struct rv_conn **cp)
{
	struct rv_conn *c = cp ? *cp : NULL;
	struct rdma_cm_id *id;
	char saved[RS_ERRMSG_MAX];

	if (!c)
		return;
	/* closing often follows a failure: a drain that times out here must
	 * not replace the message of the error the caller is reporting */
	rs_errsave(saved);
	id = c->id;
	if (c->l) {
		/* detach from the listener's event handling (and its failed
		 * conns scan) first; disconnects */
		rv_listener_forget_conn(c->l, c);
	}
	rv_conn_fail(c, RS_E_DISCONNECTED, "connection closed");
	if (!c->l && id && c->state == RV_CS_CONNECTED)
		rdma_disconnect(id);
	if (rv_conn_wait(c, idle_check, c, false, 2 * RV_DRAIN_MS) < 0) {
		pthread_mutex_lock(&c->lock);
		rv_read_fail_queued_locked(c, atomic_load(&c->fail));
		retire_all(c, atomic_load(&c->fail));
		pthread_mutex_unlock(&c->lock);
	}
	rv_conn_free(c);
	*cp = NULL;
	rs_errrestore(saved);
}

/* ---- accessors, status, event-loop hooks ---- */

int rv_conn_status(struct rv_conn *c)
{
	if (c->ech) {
		pthread_mutex_lock(&c->lock);
		rv_conn_cm_events_locked(c);
		client_keepalive_locked(c, rs_mono_ns());
		pthread_mutex_unlock(&c->lock);
	}
	return rv_conn_err(c);
}

const void *rv_conn_peer_data(const struct rv_conn *c, size_t *len)
{
	if (len)
		*len = c->peer_priv_len;
	return c->peer_priv;
}

uint32_t rv_conn_qp_num(const struct rv_conn *c)
{
	return c->qp_num;
}

uint32_t rv_conn_msg_max(const struct rv_conn *c)
{
	return c->s_size;
}

uint32_t rv_conn_rd_depth(const struct rv_conn *c)
{
	return c->rd_depth;
}

uint32_t rv_conn_chain_max(const struct rv_conn *c)
{
	return c->chain_max;
}

void rv_conn_set_user(struct rv_conn *c, void *user)
{
	c->user = user;
}

void *rv_conn_user(const struct rv_conn *c)
{
	return c->user;
}

void rv_conn_stats(const struct rv_conn *c, struct rv_stats *st)
{
	const uint64_t *src = (const uint64_t *)&c->st;
	uint64_t *dst = (uint64_t *)st;

	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

const char *rv_conn_describe(struct rv_conn *c, char *buf, size_t len)
{
	pthread_mutex_lock(&c->lock);
	snprintf(buf, len, "qp %u fail %d credits %d token %d owed %d ack %d "
		 "sends %u/%u%s ctrl %u sq %u/%u reads %u/%u ops %llu..%llu "
		 "rx %u waiters %d", c->qp_num, atomic_load(&c->fail),
		 atomic_load(&c->credits), atomic_load(&c->token),
		 atomic_load(&c->owed), atomic_load(&c->ack_pending),
		 c->s_inflight, c->s_slots, c->s_reserved ? " reserved" : "",
		 c->ctrl_inflight, c->sq_used, c->sq_depth, c->rd_inflight,
		 c->rd_depth, (unsigned long long)c->seq_done,
		 (unsigned long long)c->seq_next, c->rx_count, c->waiters);
	pthread_mutex_unlock(&c->lock);
	return buf;
}

int rv_conn_fd(struct rv_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd;

	pthread_mutex_lock(&c->lock);
	if (c->epfd >= 0)
		goto out;
	fd = epoll_create1(EPOLL_CLOEXEC);
	if (fd < 0) {
		pthread_mutex_unlock(&c->lock);
		return rs_seterr(-errno, "epoll_create1: %s", strerror(errno));
	}
	ev.data.fd = c->cq.ch->fd;
	if (epoll_ctl(fd, EPOLL_CTL_ADD, c->cq.ch->fd, &ev) == 0 && c->ech) {
		ev.data.fd = c->ech->fd;
		epoll_ctl(fd, EPOLL_CTL_ADD, c->ech->fd, &ev);
	}
	c->epfd = fd;
out:
	pthread_mutex_unlock(&c->lock);
	return c->epfd;
}

int rv_conn_arm(struct rv_conn *c)
{
	struct pollfd pf;
	int n;

	if (c->ech) {
		pf.fd = c->ech->fd;
		pf.events = POLLIN;
		if (poll(&pf, 1, 0) > 0) {
			rv_conn_cm_events(c);
			return 1;
		}
	}
	pthread_mutex_lock(&c->lock);
	rv_cq_take_events_locked(&c->cq);
	rv_cq_arm_locked(&c->cq);
	n = rv_conn_progress_locked(c);
	pthread_mutex_unlock(&c->lock);
	return n;
}

int rv_conn_progress(struct rv_conn *c)
{
	int n;

	pthread_mutex_lock(&c->lock);
	n = rv_conn_progress_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (c->l && n >= 0)
		n += rv_listener_rq_progress(c->l);
	return n;
}
