/*
 * rv_msg.c - two-sided messages: receive buffer pools, the send ring, and
 * credit-based flow control.
 *
 * Wire format: one message = one SEND_WITH_IMM. The payload is the caller's
 * bytes, nothing else (receive buffers hold exactly msg_max bytes, so the
 * data a receiver gets is aligned and can be decoded in place). The 32-bit
 * immediate carries the message type (data or credit-only) and the credits
 * the sender returns (rv_logic.h). Messages larger than the peer's msg_max
 * are refused (RS_E_TOOBIG): buffers are sized to the maximum instead of
 * fragmenting, which keeps receive zero-copy and one credit per message.
 *
 * Receive pools: `per_chunk` buffers of `size` bytes per registered chunk,
 * slot numbers global across chunks (slot / per_chunk = chunk). A client
 * conn has one chunk posted to its own RQ (credits + 1 buffers); a listener
 * adds a chunk per connection slot to its SRQ as connections arrive and
 * retires chunks when they go (see rv_listen.c). wr_id = RV_WRID_RECV | slot.
 *
 * Send ring: s_slots buffers of the peer's msg_max, used in order; a slot is
 * free again when its SEND op is retired (in order, rv_conn.c). A send needs
 * a free slot, a data credit and a send-queue slot. rv_msg_get_buf()
 * reserves the head slot and spends the credit at once, so rv_msg_post()
 * cannot block.
 *
 * Credits (protocol in rv_logic.h): c->credits (data messages we may still
 * send) grows by the credits in each received immediate, whoever polls the
 * receive CQ; c->owed (data buffers we re-posted since we last told the
 * peer) grows in rv_msg_release() after the buffer is back on the queue -
 * never before, or the peer could send into a buffer not yet posted. Every
 * send takes all of c->owed with it, and the ack of a credit-only message
 * we received (c->ack_pending), which returns the peer's c->token. A
 * credit-only message costs the token, never a data credit. Returned
 * credits are checked against the peer's grant (rv_credit_return_ok): a
 * peer returning more than it granted breaks the protocol and fails the
 * conn, instead of wrapping c->credits.
 *
 * Release. Every message out holds a reference on its conn (rv_conn.c,
 * "Lifetime"), so rv_msg_release() is safe after the conn was closed: the
 * reference is dropped before the credit is counted (the node's credit
 * check reads references + owed and must never see a credit twice), and a
 * closed conn gets no credit and no post on its QP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/rv_internal.h"
#include "verbs/rv_fi.h"

/* ---- receive pools ---- */

int rv_pool_init(struct rv_pool *p, uint32_t size, uint32_t per_chunk,
		 uint32_t max_chunks)
{
	memset(p, 0, sizeof(*p));
	p->size = size;
	p->per_chunk = per_chunk;
	p->max_chunks = max_chunks;
	p->chunks = calloc(max_chunks, sizeof(*p->chunks));
	if (!p->chunks)
		return rs_seterr(-ENOMEM, "receive pool: out of memory");
	return 0;
}

int rv_pool_grow(struct rv_pool *p, struct rv_dev *d)
{
	uint32_t i = atomic_load(&p->nchunks);
	int ret;

	if (i == p->max_chunks)
		return rs_seterr(RS_E_FULL, "receive pool full (%u chunks)",
				 p->max_chunks);
	ret = rv_mem_alloc(d, (size_t)p->per_chunk * p->size,
			   RV_ACC_LOCAL_WRITE, &p->chunks[i]);
	if (ret)
		return ret;
	atomic_store(&p->nchunks, i + 1);
	return 0;
}

void rv_pool_fini(struct rv_pool *p)
{
	uint32_t n = atomic_load(&p->nchunks);

	if (!p->chunks)
		return;
	for (uint32_t i = 0; i < n; i++)
		rv_mr_free(&p->chunks[i]);
	free(p->chunks);
	p->chunks = NULL;
}

void *rv_pool_addr(const struct rv_pool *p, uint32_t slot)
{
	const struct rv_mr *m = p->chunks[slot / p->per_chunk];

	return (uint8_t *)m->addr + (size_t)(slot % p->per_chunk) * p->size;
}

int rv_pool_post(struct rv_pool *p, uint32_t slot)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	int ret;

	sge.addr = (uintptr_t)rv_pool_addr(p, slot);
	sge.length = p->size;
	sge.lkey = p->chunks[slot / p->per_chunk]->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = RV_WRID_RECV | slot;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ret = p->srq ? ibv_post_srq_recv(p->srq, &wr, &bad)
		     : ibv_post_recv(p->qp, &wr, &bad);
	return ret ? rs_seterr(-ret, "posting a receive buffer: %s",
			       strerror(ret)) : 0;
}

/* ---- credits ---- */

int rv_msg_credit_in(struct rv_conn *c, uint32_t imm)
{
	uint32_t n = rv_imm_credits(imm);
	int cur;

	if (n) {
		cur = atomic_fetch_add(&c->credits, (int)n);
		if (!rv_credit_return_ok(cur, n, c->credits_max)) {
			atomic_fetch_sub(&c->credits, (int)n);
			rv_conn_fail(c, RS_E_PROTO, "peer returned %u credits "
				     "with %d left of the %u it granted", n, cur,
				     c->credits_max);
			return RS_E_PROTO;
		}
	}
	if (rv_imm_ack(imm))
		atomic_store(&c->token, 1);
	return 0;
}

static uint64_t new_op(struct rv_conn *c, enum rv_op_kind kind)
{
	uint64_t seq = c->seq_next++;
	struct rv_op *op = &c->ops[seq % c->ops_cap];

	op->kind = kind;
	op->nwr = 1;
	op->batch = NULL;
	c->sq_used++;
	return seq;
}

void rv_conn_maybe_credit_locked(struct rv_conn *c)
{
	struct ibv_send_wr wr, *bad;
	uint32_t owed;
	int ret;

	RS_ASSERT_HELD(&c->lock);
	if (!c->smr || atomic_load(&c->fail) ||
	    !rv_credit_ctrl_due(atomic_load(&c->owed),
				atomic_load(&c->token), c->c_thresh))
		return;
	/* nobody may be polling this CQ (an accepted conn that only
	 * receives): retire finished credit messages here */
	if (c->ctrl_inflight >= RV_CTRL_MAX || c->sq_used >= c->sq_depth)
		rv_conn_reap_locked(c);
	if (c->ctrl_inflight >= RV_CTRL_MAX || c->sq_used >= c->sq_depth ||
	    atomic_load(&c->fail))
		return;
	owed = (uint32_t)atomic_exchange(&c->owed, 0);
	atomic_store(&c->token, 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = new_op(c, RV_OP_CREDIT);
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(rv_imm_pack(RV_IMM_CREDIT, owed,
					atomic_exchange(&c->ack_pending, 0)));
	c->ctrl_inflight++;
	c->last_sig = wr.wr_id;
	rv_stat_bump(&c->st.credit_msgs, 1);
	ret = ibv_post_send(c->qp, &wr, &bad);
	if (ret)
		rv_conn_fail(c, RS_E_VERBS, "ibv_post_send (credit): %s",
			     strerror(ret));
}

/* ---- receive completions of a client conn ---- */

void rv_msg_recv_wc_locked(struct rv_conn *c, const struct ibv_wc *wc)
{
	uint32_t slot = (uint32_t)(wc->wr_id & ~RV_WRID_RECV), imm;
	struct rv_rxent *e;

	RS_ASSERT_HELD(&c->lock);
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			rv_conn_fail(c, RS_E_VERBS, "RECV failed: %s",
				     ibv_wc_status_str(wc->status));
		return;		/* the QP is in error: not re-posted */
	}
	if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
		rv_conn_fail(c, RS_E_PROTO, "peer sent a message without "
			     "immediate data (not this protocol)");
		return;
	}
	imm = ntohl(wc->imm_data);
	if (rv_imm_type(imm) != RV_IMM_DATA &&
	    rv_imm_type(imm) != RV_IMM_CREDIT) {
		rv_conn_fail(c, RS_E_PROTO, "peer sent a message of unknown "
			     "type %u", rv_imm_type(imm));
		return;
	}
	if (rv_msg_credit_in(c, imm))
		return;
	switch (rv_imm_type(imm)) {
	case RV_IMM_CREDIT:
		/* the control buffer: back at once, acknowledged in our next
		 * message (it is not a data credit) */
		if (rv_pool_post(&c->pool, slot) == 0)
			atomic_store(&c->ack_pending, 1);
		else
			rv_conn_fail(c, RS_E_VERBS, "re-posting a receive "
				     "buffer failed");
		break;
	case RV_IMM_DATA:
		e = &c->rxq[(c->rx_head + c->rx_count) % c->r_slots];
		e->slot = slot;
		e->len = wc->byte_len;
		c->rx_count++;
		rv_stat_bump(&c->st.recvs, 1);
		break;
	}
}

/* ---- sending ---- */

static bool can_reserve(struct rv_conn *c)
{
	return !c->s_reserved && c->s_inflight < c->s_slots &&
	       c->sq_used < c->sq_depth &&
	       rv_credit_data_ok(atomic_load(&c->credits));
}

static int send_check(void *p)	/* c->lock held */
{
	struct rv_conn *c = p;

	return atomic_load(&c->fail) ? 1 : can_reserve(c);
}

int rv_msg_get_buf(struct rv_conn *c, void **buf, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
			    rs_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	uint64_t now;
	int ret, left;

	if (!c->smr)
		return rs_seterr(RS_E_INVAL, "conn is not connected");
	for (;;) {
		pthread_mutex_lock(&c->lock);
		rv_conn_tick_locked(c);
		if (atomic_load(&c->fail)) {
			pthread_mutex_unlock(&c->lock);
			return rv_conn_err(c);
		}
		if (can_reserve(c)) {
			c->s_reserved = true;
			atomic_fetch_sub(&c->credits, 1);
			*buf = (uint8_t *)c->smr->addr +
			       (size_t)c->s_head * c->s_size;
			pthread_mutex_unlock(&c->lock);
			return (int)(c->s_size > INT32_MAX ? INT32_MAX
							   : c->s_size);
		}
		pthread_mutex_unlock(&c->lock);
		now = rs_mono_ns();
		if (deadline != UINT64_MAX && now >= deadline && timeout_ms)
			return rs_seterr(RS_E_TIMEOUT, "no send slot or credit "
					 "within %d ms", timeout_ms);
		left = deadline == UINT64_MAX ? -1 :
		       (int)((deadline - (now < deadline ? now : deadline)) /
			     1000000ull);
		ret = rv_conn_wait(c, send_check, c, c->l != NULL, left);
		if (ret)
			return ret;
	}
}

int rv_msg_post(struct rv_conn *c, size_t len)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	uint32_t owed;
	int ret, code;

	pthread_mutex_lock(&c->lock);
	if (!c->s_reserved) {
		pthread_mutex_unlock(&c->lock);
		return rs_seterr(RS_E_INVAL, "rv_msg_post without "
				 "rv_msg_get_buf");
	}
	c->s_reserved = false;
	if (c->waiters)
		pthread_cond_broadcast(&c->cv);	/* other senders */
	rv_conn_kick(c);
	code = atomic_load(&c->fail);
	if (code || len > c->s_size) {
		atomic_fetch_add(&c->credits, 1);
		pthread_mutex_unlock(&c->lock);
		if (code)
			return rv_conn_err(c);
		return rs_seterr(RS_E_TOOBIG, "message of %zu bytes (the peer "
				 "takes at most %u)", len, c->s_size);
	}
	sge.addr = (uintptr_t)c->smr->addr + (size_t)c->s_head * c->s_size;
	sge.length = (uint32_t)len;
	sge.lkey = c->smr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = new_op(c, RV_OP_SEND);
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	owed = (uint32_t)atomic_exchange(&c->owed, 0);
	wr.imm_data = htonl(rv_imm_pack(RV_IMM_DATA, owed,
					atomic_exchange(&c->ack_pending, 0)));
	if (rv_signal_due(wr.wr_id, c->last_sig, c->s_sig_every)) {
		wr.send_flags |= IBV_SEND_SIGNALED;
		c->last_sig = wr.wr_id;
	}
	if (len && len <= c->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	c->s_head = (c->s_head + 1) % c->s_slots;
	c->s_inflight++;
	rv_stat_bump(&c->st.sends, 1);
	ret = ibv_post_send(c->qp, &wr, &bad);
	if (ret)
		rv_conn_fail(c, RS_E_VERBS, "ibv_post_send (SEND): %s",
			     strerror(ret));
	pthread_mutex_unlock(&c->lock);
	return ret ? rv_conn_err(c) : 0;
}

int rv_msg_send(struct rv_conn *c, const void *buf, size_t len,
		int timeout_ms)
{
	void *slot;
	int ret;

	if (c->smr && len > c->s_size)
		return rs_seterr(RS_E_TOOBIG, "message of %zu bytes (the peer "
				 "takes at most %u)", len, c->s_size);
	ret = rv_msg_get_buf(c, &slot, timeout_ms);
	if (ret < 0)
		return ret;
	if (len)
		memcpy(slot, buf, len);
	return rv_msg_post(c, len);
}

/* ---- receiving on a client conn ---- */

static int take_locked(struct rv_conn *c, struct rv_msg *msgs, int max)
{
	int n = 0;

	RS_ASSERT_HELD(&c->lock);
	while (n < max && c->rx_count) {
		struct rv_rxent *e = &c->rxq[c->rx_head];

		c->rx_head = (c->rx_head + 1) % c->r_slots;
		c->rx_count--;
		msgs[n].conn = c;
		msgs[n].data = rv_pool_addr(&c->pool, e->slot);
		msgs[n].len = e->len;
		msgs[n].slot = e->slot;
		msgs[n].pool = &c->pool;
		c->outstanding++;
		atomic_fetch_add(&c->refs, 1);
		n++;
	}
	return n;
}

static int rx_check(void *p)	/* c->lock held */
{
	struct rv_conn *c = p;

	return c->rx_count > 0 || atomic_load(&c->fail);
}

int rv_msg_recv(struct rv_conn *c, struct rv_msg *msgs, int max,
		int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
			    rs_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	uint64_t now;
	int n, ret, left;

	if (c->l)
		return rs_seterr(RS_E_INVAL, "an accepted conn receives "
				 "through rv_listener_recv");
	if (max <= 0 || !msgs)
		return rs_seterr(RS_E_INVAL, "rv_msg_recv: no room");
	for (;;) {
		pthread_mutex_lock(&c->lock);
		n = take_locked(c, msgs, max);
		if (!n) {
			rv_conn_progress_locked(c);
			n = take_locked(c, msgs, max);
		}
		pthread_mutex_unlock(&c->lock);
		if (n)
			return n;
		if (atomic_load(&c->fail))
			return rv_conn_err(c);
		now = rs_mono_ns();
		if (deadline != UINT64_MAX && now >= deadline)
			return rs_seterr(RS_E_TIMEOUT, "no message within %d ms",
					 timeout_ms);
		left = deadline == UINT64_MAX ? -1 :
		       (int)((deadline - now) / 1000000ull);
		ret = rv_conn_wait(c, rx_check, c, false, left);
		if (ret)
			return ret;
	}
}

void rv_msg_release(struct rv_msg *m)
{
	struct rv_conn *c = m ? m->conn : NULL;
	struct rv_pool *p = m ? m->pool : NULL;
	bool posted = false, last;

	if (!p)
		return;
	m->pool = NULL;
	/* the SRQ is the listener's: the buffer goes back in any case */
	if (c->l)
		posted = rv_listener_give_back(c->l, m->slot) == 0;
	pthread_mutex_lock(&c->lock);
	if (!c->l) {
		posted = !c->closed && !atomic_load(&c->fail) &&
			 rv_pool_post(p, m->slot) == 0;
		c->outstanding--;
	}
	/* 1 -> 0 only after the close dropped the owner's reference */
	last = atomic_fetch_sub(&c->refs, 1) == 1;
	if (posted && !c->closed) {
		atomic_fetch_add(&c->owed, 1);
		rv_conn_maybe_credit_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
	if (last) {	/* the close is over: nobody else holds c */
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->lock);
		free(c);
	}
}
