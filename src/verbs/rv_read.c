/*
 * rv_read.c - batched one-sided RDMA READ.
 *
 * A batch is an array of requests that the conn posts in order, as chains:
 * up to chain_max READ WRs linked together and handed to one ibv_post_send
 * (one doorbell), the last one signaled, all carrying the chain's op
 * sequence as wr_id (see rv_conn.c for the op ring). rv_chain_len() decides
 * the chain length from the bounds: READs in flight <= rd_depth (the
 * negotiated max_rd_atomic; a READ beyond it would stall in the NIC or be
 * refused by the responder) and the send-queue room. Batches wait in a FIFO
 * (c->bq_head) while they have unposted requests; each completion frees room
 * and the same progress call posts the next chains, so a batch of any size
 * flows through a bounded window.
 *
 * Status: a chain's completion sets the status of all its requests (0, or
 * the error of the failed chain); when the conn fails, queued requests get
 * the failure code at once and posted ones when their flush (or the drain)
 * completes. b->done counts finished requests and is published with release
 * order after the statuses, so rv_batch_done() can be read without the lock.
 * A waiter that sees the batch done may free it at once (rv_read_batch's
 * batch lives on its stack), so the store that completes a batch is the
 * last access to it: it leaves the queue (its next pointer read) and its
 * counters are updated before that store.
 * Zero-length requests succeed at once; a request longer than the port's
 * max_msg_sz fails alone with RS_E_TOOBIG (nothing posted for it).
 *
 * Work requests: c->wr[] (chain_max of them, 128 bytes each) is set up once
 * with what every READ shares (its sge, one of them, the opcode, the rest
 * zero: rv_read_wr_init()); a chain writes only wr_id, next, send_flags
 * and the remote address and rkey of each WR, never clearing the structs.
 */
#include <errno.h>
#include <string.h>

#include "verbs/rv_internal.h"
#include "verbs/rv_fi.h"

static void pop_batch(struct rv_conn *c)
{
	c->bq_head = c->bq_head->next;
	if (!c->bq_head)
		c->bq_tail = NULL;
}

static void finish_req(struct rv_batch *b, uint32_t i, int code)
{
	b->reqs[i].status = code;
	if (code && !b->result)
		b->result = code;
	__atomic_store_n(&b->done, b->done + 1, __ATOMIC_RELEASE);
}

static bool postable(const struct rv_conn *c, const struct rv_read_req *r)
{
	return r->len != 0 && r->len <= c->dev->max_msg;
}

/* Complete the unpostable requests at the head of b (the queue's head);
 * true if b left the queue (then b may be gone: not touched after). */
static bool skip_unpostable(struct rv_conn *c, struct rv_batch *b)
{
	while (b->posted < b->n && !postable(c, &b->reqs[b->posted])) {
		uint32_t i = b->posted++;
		bool last = b->posted == b->n;

		if (last)
			pop_batch(c);
		finish_req(b, i, b->reqs[i].len ? RS_E_TOOBIG : 0);
		if (last)
			return true;
	}
	return false;
}

void rv_read_wr_init(struct rv_conn *c)
{
	for (uint32_t m = 0; m < c->chain_max; m++) {
		struct ibv_send_wr *wr = &c->wr[m];

		memset(wr, 0, sizeof(*wr));
		wr->sg_list = &c->sge[m];
		wr->num_sge = 1;
		wr->opcode = IBV_WR_RDMA_READ;
	}
}

/* Fill c->wr[0..m) from b's next requests: only the fields that differ
 * between chains (rv_read_wr_init() set the rest once). */
static uint32_t build_chain(struct rv_conn *c, struct rv_batch *b,
			    uint32_t k, uint64_t seq)
{
	uint32_t m = 0;

	for (uint32_t i = b->posted; m < k && i < b->n; i++, m++) {
		struct rv_read_req *r = &b->reqs[i];
		struct ibv_send_wr *wr = &c->wr[m];

		if (!postable(c, r))
			break;
		c->sge[m].addr = (uintptr_t)r->local;
		c->sge[m].length = r->len;
		c->sge[m].lkey = r->lkey;
		wr->wr_id = seq;
		wr->next = wr + 1;
		wr->send_flags = 0;
		wr->wr.rdma.remote_addr = r->remote;
		wr->wr.rdma.rkey = r->rkey;
	}
	c->wr[m - 1].next = NULL;
	c->wr[m - 1].send_flags = IBV_SEND_SIGNALED;
	return m;
}

void rv_read_post_queued_locked(struct rv_conn *c)
{
	struct ibv_send_wr *bad;
	struct rv_batch *b;
	struct rv_op *op;
	uint32_t k, m;
	uint64_t seq;
	int ret;

	RS_ASSERT_HELD(&c->lock);
	while ((b = c->bq_head)) {
		if (skip_unpostable(c, b))
			continue;
		k = rv_chain_len(c->rd_inflight, c->rd_depth,
				 c->sq_depth - c->sq_used, c->chain_max,
				 b->n - b->posted);
		if (!k)
			return;
		seq = c->seq_next++;
		m = build_chain(c, b, k, seq);
		op = &c->ops[seq % c->ops_cap];
		op->kind = RV_OP_READ;
		op->nwr = (uint16_t)m;
		op->first = b->posted;
		op->count = m;
		op->batch = b;
		c->sq_used += m;
		c->rd_inflight += m;
		c->last_sig = seq;
		b->posted += m;
		if (b->posted == b->n)
			pop_batch(c);
		rv_stat_bump(&c->st.reads, m);
		rv_stat_bump(&c->st.chains, 1);
		ret = ibv_post_send(c->qp, c->wr, &bad);
		if (ret) {
			rv_conn_fail(c, RS_E_VERBS, "ibv_post_send (READ chain "
				     "of %u): %s", m, strerror(ret));
			return;
		}
	}
}

void rv_read_fail_queued_locked(struct rv_conn *c, int code)
{
	struct rv_batch *b;

	RS_ASSERT_HELD(&c->lock);
	while ((b = c->bq_head)) {
		uint32_t left = b->n - b->posted;

		for (uint32_t i = b->posted; i < b->n; i++) {
			b->reqs[i].status = code;
			if (!b->result)
				b->result = code;
		}
		b->posted = b->n;
		pop_batch(c);
		/* the last access: a waiter may free b once it is done */
		__atomic_store_n(&b->done, b->done + left, __ATOMIC_RELEASE);
	}
}

int rv_read_post(struct rv_conn *c, struct rv_batch *b,
		 struct rv_read_req *reqs, size_t n)
{
	int code;

	if (!c || !b || (!reqs && n))
		return rs_seterr(RS_E_INVAL, "rv_read_post: bad arguments");
	if (n > UINT32_MAX)
		return rs_seterr(RS_E_TOOBIG, "batch of %zu requests", n);
	memset(b, 0, sizeof(*b));
	b->reqs = reqs;
	b->n = (uint32_t)n;
	pthread_mutex_lock(&c->lock);
	rv_conn_tick_locked(c);
	code = atomic_load(&c->fail);
	if (!n) {	/* done at once: never queued, where it could be freed */
		pthread_mutex_unlock(&c->lock);
		return code ? rv_conn_err(c) : 0;
	}
	if (c->bq_tail)
		c->bq_tail->next = b;
	else
		c->bq_head = b;
	c->bq_tail = b;
	if (code)
		rv_read_fail_queued_locked(c, code);
	else
		rv_read_post_queued_locked(c);
	pthread_mutex_unlock(&c->lock);
	return code ? rv_conn_err(c) : 0;
}

int rv_batch_check(void *p)	/* lock-free: b->done is atomic */
{
	return rv_batch_done(p) ? 1 : 0;
}

static int batch_result(struct rv_conn *c, struct rv_batch *b)
{
	if (!b->result)
		return 0;
	if (atomic_load(&c->fail))
		return rv_conn_err(c);
	return rs_seterr(b->result, "READ batch: %s", rs_strerror(b->result));
}

int rv_batch_wait(struct rv_conn *c, struct rv_batch *b, int timeout_ms)
{
	int ret;

	if (!rv_batch_done(b)) {
		ret = rv_conn_wait(c, rv_batch_check, b, false, timeout_ms);
		if (ret)
			return ret;
	}
	return batch_result(c, b);
}

int rv_read_batch(struct rv_conn *c, struct rv_read_req *reqs, size_t n,
		  int timeout_ms)
{
	struct rv_batch b;
	int ret;

	ret = rv_read_post(c, &b, reqs, n);
	if (ret)
		return ret;
	ret = rv_batch_wait(c, &b, timeout_ms);
	if (ret == RS_E_TIMEOUT && !rv_batch_done(&b)) {
		/* b lives on this stack: fail the conn and let the flush
		 * (bounded by RV_DRAIN_MS) finish it before returning */
		rv_conn_fail(c, RS_E_TIMEOUT, "READ batch of %zu timed out "
			     "after %d ms", n, timeout_ms);
		rv_batch_wait(c, &b, -1);
		return rs_seterr(RS_E_TIMEOUT, "READ batch of %zu timed out "
				 "after %d ms", n, timeout_ms);
	}
	return ret;
}
