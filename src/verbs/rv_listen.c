/*
 * rv_listen.c - the server side: an rdma_cm listener, the accept loop, and
 * the shared receive queue (SRQ) of every accepted connection.
 *
 * Events. The listen id and every id it spawns report to one event channel
 * (l->ech, non-blocking). rv_listener_event() reads it: a CONNECT_REQUEST
 * is checked (our handshake header), answered by the caller's on_request
 * hook (before anything is allocated for it), and accepted with a new
 * conn (state ACCEPTING) or rejected (a hook's refusal with its reply
 * bytes, e.g. a credential check's reason);
 * ESTABLISHED turns the conn CONNECTED and is returned to the caller; a
 * DISCONNECTED fails the conn (QP to error, flush), answers the peer
 * (rdma_disconnect) and is returned once. Conns that never got delivered
 * (failed handshakes) are destroyed here. An accepted id's context is its
 * conn; it is cleared under cm_lock when the caller closes the conn, so an
 * event read concurrently finds NULL, and rdma_destroy_id() in the closing
 * thread waits until that event is acknowledged.
 *
 * Connection requests are checked before anything is allocated: our
 * handshake header (absent, short or garbage bytes are refused), the
 * peer's receive buffers (<= RV_SLOTS_MAX), max_conns, max_conns_per_peer
 * (conns from the same IP address, counted on the listener's list), then
 * the owner's on_request hook. A refusal carries its reason in the reject's
 * private data (rv_reject_pack), which rv_connect() reports, and counts in
 * l->cnt. The peer's msg_max sizes the conn's send ring (s_slots x
 * msg_max), so it is clamped to our own msg_max: we never send a message
 * larger than we accept.
 *
 * Receive side. One SRQ and one receive CQ serve all accepted conns. Each
 * conn is promised r_slots (= credits + 1) buffers, so the SRQ holds
 * r_slots per live conn plus one spare chunk (a burst from a peer that
 * ignores its credits lands there while it is being cut off): the pool
 * grows by one chunk of r_slots buffers when a connection arrives and there
 * are fewer live chunks than connections + 1 (buffers are shared, only the
 * count matters), and at most max_conns connections are accepted. It
 * shrinks when connections go: the chunks above conns + 1 retire (a posted
 * receive cannot be taken back from an SRQ, so each of their buffers is
 * parked instead of re-posted when it next comes back: after its message
 * was received and released), and a retiring top chunk whose buffers are
 * all parked is deregistered and freed. A connection arriving meanwhile
 * revives retiring chunks first (their parked buffers are re-posted). The
 * re-post path pays one compare for this (an atomic load in a release).
 *
 * Credits are enforced here, not trusted: a data message counts on its
 * conn (c->refs, one per message out) until released, and the peer's used
 * credits (messages out + released but not yet returned, rv_credit_rx_ok)
 * may never exceed the grant. A peer above it is cut off at once: the
 * message is re-posted, the conn failed ("exceeded its credits") and
 * counted, so it cannot hold more SRQ buffers than it was promised. A
 * message without immediate data or of an unknown type, credits returned
 * beyond the grant, and a message larger than the receive buffer (its RECV
 * completes with a length error) fail the conn the same way, each with its
 * reason and counter. Messages of a failed conn are re-posted, not queued.
 *
 * Failed conns. rv_conn_fail() on an accepted conn sets l->fail_pending and
 * writes fail_evfd; rv_listener_event() then finds the CONNECTED conns that
 * failed, disconnects them (rdma_disconnect) and delivers one DISCONNECTED
 * each, as if the peer had left, so the owner closes them. A conn that
 * fails before its ESTABLISHED is delivered CONNECTED, then DISCONNECTED.
 *
 * Keepalive. With conn.keepalive_ms set, a timerfd in rv_listener_fd()'s
 * epoll set fires every interval; rv_listener_event() then lets every
 * CONNECTED conn probe its peer if it was idle (rv_conn.c). An idle
 * listener thus wakes once per interval, and a vanished peer fails its
 * conn within about two intervals plus the transport's retry time. A completion is mapped to its
 * conn through wc.qp_num (open-addressing table, linear probing with
 * backward-shift deletion) and queued in a ring (the ready queue, one entry
 * per buffer, so it cannot overflow) until rv_listener_recv() hands it out.
 * Completions of a QP no longer in the map (a closed conn) are re-posted.
 *
 * Several threads may wait for messages: they sleep on the CQ channel and
 * on q_evfd, an eventfd kept readable exactly while the ready queue is
 * non-empty, so a message polled by one thread wakes the others. A thread
 * that took a channel event re-arms the CQ before it returns if others
 * sleep, so none of them is left waiting on a disarmed CQ.
 *
 * Locks: cm_lock (conn list, states, id contexts) -> rq_lock (CQ, map,
 * ready queue) -> conn.lock (credit messages of a conn).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "verbs/rv_internal.h"
#include "verbs/rv_fi.h"

void rv_listener_attr_init(struct rv_listener_attr *a)
{
	memset(a, 0, sizeof(*a));
	rv_conn_attr_init(&a->conn);
	a->max_conns = 64;
	a->max_conns_per_peer = 16;
	a->backlog = 64;
}

/* ---- qp_num -> conn map (rq_lock) ---- */

static uint32_t map_home(const struct rv_listener *l, uint32_t qpn)
{
	return (qpn * 0x9e3779b1u) & (l->map_cap - 1);
}

static struct rv_conn *map_get(const struct rv_listener *l, uint32_t qpn)
{
	for (uint32_t i = map_home(l, qpn);; i = (i + 1) & (l->map_cap - 1)) {
		if (!l->map[i].c)
			return NULL;
		if (l->map[i].qpn == qpn)
			return l->map[i].c;
	}
}

static void map_put(struct rv_listener *l, uint32_t qpn, struct rv_conn *c)
{
	uint32_t i = map_home(l, qpn);

	while (l->map[i].c)
		i = (i + 1) & (l->map_cap - 1);
	l->map[i].qpn = qpn;
	l->map[i].c = c;
}

static void map_del(struct rv_listener *l, uint32_t qpn)
{
	uint32_t mask = l->map_cap - 1, i = map_home(l, qpn), j, h;

	while (l->map[i].c && l->map[i].qpn != qpn)
		i = (i + 1) & mask;
	if (!l->map[i].c)
		return;
	/* backward-shift: pull later entries of the cluster into the hole */
	for (j = (i + 1) & mask; l->map[j].c; j = (j + 1) & mask) {
		h = map_home(l, l->map[j].qpn);
		if (((j - h) & mask) >= ((j - i) & mask)) {
			l->map[i] = l->map[j];
			i = j;
		}
	}
	l->map[i].c = NULL;
}

/* ---- ready queue (rq_lock) ---- */

static void evfd_set(int fd, bool on)
{
	uint64_t v = 1;

	if (on) {
		if (write(fd, &v, sizeof(v)) != sizeof(v))
			return;
	} else if (read(fd, &v, sizeof(v)) != sizeof(v)) {
		return;
	}
}

static void rq_push(struct rv_listener *l, struct rv_conn *c, uint32_t slot,
		    uint32_t len)
{
	struct rv_lmsg *e = &l->rq[(l->rq_head + l->rq_count) % l->rq_cap];

	e->c = c;
	e->slot = slot;
	e->len = len;
	if (l->rq_count++ == 0)
		evfd_set(l->q_evfd, true);
}

static int rq_take(struct rv_listener *l, struct rv_msg *msgs, int max)
{
	int n = 0;

	while (n < max && l->rq_count) {
		struct rv_lmsg *e = &l->rq[l->rq_head];

		l->rq_head = (l->rq_head + 1) % l->rq_cap;
		msgs[n].conn = e->c;
		msgs[n].data = rv_pool_addr(&l->pool, e->slot);
		msgs[n].len = e->len;
		msgs[n].slot = e->slot;
		msgs[n].pool = &l->pool;
		n++;
		if (--l->rq_count == 0)
			evfd_set(l->q_evfd, false);
	}
	return n;
}

/* ---- receive completions ---- */

/* Free the top chunks that are retiring and have all buffers parked. */
static void free_retired_locked(struct rv_listener *l)
{
	struct rv_pool *p = &l->pool;
	uint32_t n;

	while ((n = atomic_load(&p->nchunks)) > atomic_load(&l->live_chunks) &&
	       l->nparked[n - 1] == p->per_chunk) {
		rv_mr_free(&p->chunks[n - 1]);
		l->nparked[n - 1] = 0;
		atomic_store(&p->nchunks, n - 1);
	}
}

static int give_back_locked(struct rv_listener *l, uint32_t slot)
{
	uint32_t ch = slot / l->pool.per_chunk;

	if (ch < atomic_load(&l->live_chunks))
		return rv_pool_post(&l->pool, slot);
	l->parked[ch * l->pool.per_chunk + l->nparked[ch]++] = slot;
	free_retired_locked(l);
	return 0;
}

int rv_listener_give_back(struct rv_listener *l, uint32_t slot)
{
	int ret;

	if (slot / l->pool.per_chunk < atomic_load(&l->live_chunks))
		return rv_pool_post(&l->pool, slot);
	pthread_mutex_lock(&l->rq_lock);
	ret = give_back_locked(l, slot);
	pthread_mutex_unlock(&l->rq_lock);
	return ret;
}

/* Conns went (cm_lock held): keep chunks for nconns + 1 only. */
static void retire_extra(struct rv_listener *l)
{
	pthread_mutex_lock(&l->rq_lock);
	if (l->nconns + 1 < atomic_load(&l->live_chunks)) {
		atomic_store(&l->live_chunks, l->nconns + 1);
		free_retired_locked(l);
	}
	pthread_mutex_unlock(&l->rq_lock);
}

static void repost(struct rv_listener *l, uint32_t slot)
{
	give_back_locked(l, slot);
}

static void rx_failed(struct rv_listener *l, struct rv_conn *c,
		      const struct ibv_wc *wc)
{
	if (wc->status == IBV_WC_WR_FLUSH_ERR)
		return;
	/* too long for the buffer: a length error, or (rxe) a local QP
	 * operation error; a RECV posted by us fails for nothing else */
	if (wc->status == IBV_WC_LOC_LEN_ERR ||
	    wc->status == IBV_WC_LOC_QP_OP_ERR) {
		rv_stat_add(&l->cnt.oversize, 1);
		rv_conn_fail(c, RS_E_TOOBIG, "peer sent a message larger than "
			     "the receive buffer (%u bytes): %s", l->pool.size,
			     ibv_wc_status_str(wc->status));
		return;
	}
	rv_conn_fail(c, RS_E_VERBS, "RECV failed: %s (vendor error 0x%x)",
		     ibv_wc_status_str(wc->status), wc->vendor_err);
}

/* A data message of c arrived: count it against c's credits. */
static bool rx_data_ok(struct rv_listener *l, struct rv_conn *c)
{
	int held = atomic_fetch_add(&c->refs, 1);	/* this one included */

	if (rv_credit_rx_ok(held, atomic_load(&c->owed), l->r_slots - 1))
		return true;
	atomic_fetch_sub(&c->refs, 1);
	rv_stat_add(&l->cnt.credit_overruns, 1);
	rv_conn_fail(c, RS_E_PROTO, "peer exceeded its credits (%d messages "
		     "unreleased or unreturned, %u granted)",
		     held + atomic_load(&c->owed), l->r_slots - 1);
	return false;
}

static bool rx_proto_ok(struct rv_listener *l, struct rv_conn *c,
			const struct ibv_wc *wc)
{
	unsigned type = rv_imm_type(ntohl(wc->imm_data));

	if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
		rv_stat_add(&l->cnt.proto_errors, 1);
		rv_conn_fail(c, RS_E_PROTO, "peer sent a message without "
			     "immediate data (not this protocol)");
		return false;
	}
	if (type != RV_IMM_DATA && type != RV_IMM_CREDIT) {
		rv_stat_add(&l->cnt.proto_errors, 1);
		rv_conn_fail(c, RS_E_PROTO, "peer sent a message of unknown "
			     "type %u", type);
		return false;
	}
	if (rv_msg_credit_in(c, ntohl(wc->imm_data))) {
		rv_stat_add(&l->cnt.proto_errors, 1);
		return false;
	}
	return true;
}

static void rx_wc(struct rv_listener *l, const struct ibv_wc *wc)
{
	uint32_t slot = (uint32_t)(wc->wr_id & ~RV_WRID_RECV), imm;
	struct rv_conn *c = map_get(l, wc->qp_num);

	if (wc->status != IBV_WC_SUCCESS || !c) {
		if (c)
			rx_failed(l, c, wc);
		repost(l, slot);
		return;
	}
	if (atomic_load(&c->fail) || !rx_proto_ok(l, c, wc)) {
		repost(l, slot);	/* cut off: its messages are dropped */
		return;
	}
	imm = ntohl(wc->imm_data);
	if (rv_imm_type(imm) == RV_IMM_DATA) {
		if (!rx_data_ok(l, c)) {
			repost(l, slot);
			return;
		}
		rq_push(l, c, slot, wc->byte_len);
		rv_stat_add(&c->st.recvs, 1);
		rv_stat_add(&l->st.recvs, 1);
		return;
	}
	repost(l, slot);
	atomic_store(&c->ack_pending, 1);	/* the control buffer */
	pthread_mutex_lock(&c->lock);
	rv_conn_maybe_credit_locked(c);		/* the ack may bring the token */
	pthread_mutex_unlock(&c->lock);
}

static int rq_poll_locked(struct rv_listener *l)
{
	struct ibv_wc wc[16];
	int n = 0, k;

	RS_ASSERT_HELD(&l->rq_lock);
	do {
		k = ibv_poll_cq(l->rcq.cq, RS_ARRAY_SIZE(wc), wc);
		for (int i = 0; i < k; i++)
			rx_wc(l, &wc[i]);
		n += k > 0 ? k : 0;
	} while (k == (int)RS_ARRAY_SIZE(wc));
	return n;
}

int rv_listener_rq_progress(struct rv_listener *l)
{
	int n;

	pthread_mutex_lock(&l->rq_lock);
	n = rq_poll_locked(l);
	pthread_mutex_unlock(&l->rq_lock);
	return n;
}

/* A thread leaving a wait re-arms for the ones still sleeping. */
static void rearm_for_others(struct rv_listener *l, int self)
{
	if (__atomic_load_n(&l->recv_waiters, __ATOMIC_RELAXED) <= self)
		return;
	pthread_mutex_lock(&l->rq_lock);
	rv_cq_arm_locked(&l->rcq);
	rq_poll_locked(l);
	pthread_mutex_unlock(&l->rq_lock);
}

void rv_listener_rearm(struct rv_listener *l)
{
	rearm_for_others(l, 0);
}

static int lw_progress(void *p)
{
	return rv_listener_rq_progress(p);
}

static int lw_check(void *p)
{
	struct rv_listener *l = p;
	int r;

	pthread_mutex_lock(&l->rq_lock);
	r = l->rq_count > 0;
	pthread_mutex_unlock(&l->rq_lock);
	return r;
}

int rv_listener_recv(struct rv_listener *l, struct rv_msg *msgs, int max,
		     int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
			    rs_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct rv_wait w;
	uint64_t now;
	int n, ret;

	if (max <= 0 || !msgs)
		return rs_seterr(RS_E_INVAL, "rv_listener_recv: no room");
	memset(&w, 0, sizeof(w));
	w.fds[w.nfds++] = (struct rv_waitfd){ .fd = l->rcq.ch->fd,
					      .cq = &l->rcq };
	w.fds[w.nfds++] = (struct rv_waitfd){ .fd = l->q_evfd };
	w.progress = lw_progress;
	w.check = lw_check;
	w.arg = l;
	w.spin_ns = (uint64_t)l->attr.conn.spin_us * 1000;
	w.st = &l->st;
	for (;;) {
		pthread_mutex_lock(&l->rq_lock);
		n = rq_take(l, msgs, max);
		if (!n) {
			rq_poll_locked(l);
			n = rq_take(l, msgs, max);
		}
		pthread_mutex_unlock(&l->rq_lock);
		if (n) {
			rearm_for_others(l, 0);
			return n;
		}
		now = rs_mono_ns();
		if (deadline != UINT64_MAX && now >= deadline)
			return rs_seterr(RS_E_TIMEOUT, "no message within %d ms",
					 timeout_ms);
		__atomic_fetch_add(&l->recv_waiters, 1, __ATOMIC_RELAXED);
		ret = rv_wait_run(&w, deadline == UINT64_MAX ? -1 :
				  (int)((deadline - now) / 1000000ull));
		__atomic_fetch_sub(&l->recv_waiters, 1, __ATOMIC_RELAXED);
		if (ret)
			return ret;
	}
}

int rv_listener_recv_fd(const struct rv_listener *l)
{
	return l->rcq.ch->fd;
}

/* ---- conn detach ---- */

static void list_unlink(struct rv_listener *l, struct rv_conn *c)
{
	if (c->l_prev)
		c->l_prev->l_next = c->l_next;
	else if (l->conns == c)
		l->conns = c->l_next;
	if (c->l_next)
		c->l_next->l_prev = c->l_prev;
	c->l_next = c->l_prev = NULL;
}

void rv_listener_forget_conn(struct rv_listener *l, struct rv_conn *c)
{
	pthread_mutex_lock(&l->cm_lock);
	if (c->id && c->id->context == c) {
		c->id->context = NULL;
		list_unlink(l, c);
		l->nconns--;
		retire_extra(l);
		if (c->state == RV_CS_CONNECTED)
			rdma_disconnect(c->id);
	}
	c->state = 0;
	pthread_mutex_unlock(&l->cm_lock);
}

void rv_listener_drop_rx(struct rv_listener *l, struct rv_conn *c)
{
	uint32_t keep = 0;

	if (!c->qp)
		return;
	pthread_mutex_lock(&l->rq_lock);
	rq_poll_locked(l);	/* attribute c's last completions to c */
	for (uint32_t i = 0; i < l->rq_count; i++) {
		struct rv_lmsg e = l->rq[(l->rq_head + i) % l->rq_cap];

		if (e.c == c) {
			repost(l, e.slot);
			atomic_fetch_sub(&c->refs, 1);	/* never the last */
		} else
			l->rq[(l->rq_head + keep++) % l->rq_cap] = e;
	}
	if (l->rq_count && !keep)
		evfd_set(l->q_evfd, false);
	l->rq_count = keep;
	map_del(l, c->qp_num);
	pthread_mutex_unlock(&l->rq_lock);
}

/* ---- connection requests ---- */

static void reject(struct rv_listener *l, struct rdma_cm_id *id,
		   unsigned why, uint32_t limit)
{
	uint64_t *ctr[] = {
		[RV_REJ_MALFORMED] = &l->cnt.rej_malformed,
		[RV_REJ_LIMITS] = &l->cnt.rej_limits,
		[RV_REJ_FULL] = &l->cnt.rej_full,
		[RV_REJ_PEER_LIMIT] = &l->cnt.rej_per_peer,
		[RV_REJ_REFUSED] = &l->cnt.rej_refused,
		[RV_REJ_RESOURCES] = &l->cnt.rej_resources,
		[RV_REJ_DEVICE] = &l->cnt.rej_malformed,
	};
	uint8_t buf[RV_REJECT_LEN];
	int len = rv_reject_pack(buf, sizeof(buf), why, limit);

	if (why < RS_ARRAY_SIZE(ctr) && ctr[why])
		rv_stat_add(ctr[why], 1);
	rdma_reject(id, buf, (uint8_t)len);
}

/* The on_request hook's refusal, with its reply bytes when they fit. */
static void reject_with(struct rv_listener *l, struct rdma_cm_id *id,
			const void *data, size_t len)
{
	rv_stat_add(&l->cnt.rej_refused, 1);
	if (len && len <= RV_REJECT_PRIV_MAX)
		rdma_reject(id, data, (uint8_t)len);
	else
		rdma_reject(id, NULL, 0);
}

static bool same_host(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return false;
}

/* Room for one more conn from `peer`? 0, or the reason (and *limit). */
static unsigned admit(struct rv_listener *l,
		      const struct sockaddr_storage *peer, uint32_t *limit)
{
	uint32_t same = 0, n;

	pthread_mutex_lock(&l->cm_lock);
	n = l->nconns;
	if (l->attr.max_conns_per_peer)
		for (struct rv_conn *c = l->conns; c; c = c->l_next)
			same += same_host(&c->peer, peer);
	pthread_mutex_unlock(&l->cm_lock);
	if (n >= l->attr.max_conns) {
		*limit = l->attr.max_conns;
		return RV_REJ_FULL;
	}
	if (l->attr.max_conns_per_peer && same >= l->attr.max_conns_per_peer) {
		*limit = l->attr.max_conns_per_peer;
		return RV_REJ_PEER_LIMIT;
	}
	return 0;
}

/* Check a request's handshake and our limits: 0, or the reason. */
static unsigned check_request(struct rv_listener *l, struct rdma_cm_event *e,
			      struct rv_hello *h,
			      struct sockaddr_storage *peer, uint32_t *limit)
{
	struct sockaddr *sa = rdma_get_peer_addr(e->id);

	*limit = 0;
	if (rv_hello_unpack(e->param.conn.private_data,
			    e->param.conn.private_data_len, h))
		return RV_REJ_MALFORMED;
	if (e->id->verbs != l->dev->ctx)
		return RV_REJ_DEVICE;
	if (h->slots > RV_SLOTS_MAX) {
		*limit = RV_SLOTS_MAX;
		return RV_REJ_LIMITS;
	}
	if (h->msg_max > l->attr.conn.msg_max)
		h->msg_max = l->attr.conn.msg_max;	/* sizes our ring */
	memset(peer, 0, sizeof(*peer));
	if (sa && sa->sa_family == AF_INET)
		memcpy(peer, sa, sizeof(struct sockaddr_in));
	else if (sa && sa->sa_family == AF_INET6)
		memcpy(peer, sa, sizeof(struct sockaddr_in6));
	return admit(l, peer, limit);
}

/* Grow the SRQ pool so that it holds `chunks` live chunks of r_slots
 * buffers (one per conn and a spare): retiring chunks come back first
 * (their parked buffers re-posted), then new ones are added. */
static int ensure_pool(struct rv_listener *l, uint32_t chunks)
{
	uint32_t have, live;
	int ret = 0;

	pthread_mutex_lock(&l->rq_lock);
	while ((live = atomic_load(&l->live_chunks)) < chunks &&
	       live < atomic_load(&l->pool.nchunks)) {
		for (uint32_t i = 0; i < l->nparked[live] && !ret; i++)
			ret = rv_pool_post(&l->pool,
					   l->parked[live * l->pool.per_chunk +
						     i]);
		l->nparked[live] = 0;
		atomic_store(&l->live_chunks, live + 1);
	}
	pthread_mutex_unlock(&l->rq_lock);
	if (ret)
		return ret;
	while ((have = atomic_load(&l->pool.nchunks)) < chunks) {
		ret = rv_pool_grow(&l->pool, l->dev);
		if (ret)
			return ret;
		for (uint32_t i = 0; i < l->pool.per_chunk; i++) {
			ret = rv_pool_post(&l->pool,
					   have * l->pool.per_chunk + i);
			if (ret)
				return ret;
		}
		atomic_store(&l->live_chunks, have + 1);
	}
	return 0;
}

/*
 * Answer one CONNECT_REQUEST (before it is acknowledged). Returns a conn
 * for the caller to free after the ack if accepting failed half way;
 * *destroy_id tells the caller to destroy a bare rejected id.
 */
static struct rv_conn *on_connect_request(struct rv_listener *l,
					  struct rdma_cm_event *e,
					  bool *destroy_id)
{
	uint8_t reply[RV_ACCEPT_PRIV_MAX], priv[RV_HELLO_LEN +
						  RV_ACCEPT_PRIV_MAX];
	struct rv_conn_attr *ca = &l->attr.conn;
	struct rdma_cm_id *id = e->id;
	struct rdma_conn_param cp;
	struct rv_hello h, mine;
	struct rv_conn *c = NULL;
	struct sockaddr_storage peer;
	size_t rlen = 0;
	uint32_t grant, n, lim;
	uint8_t tmo = ca->ack_timeout;
	unsigned why;
	int len;

	*destroy_id = true;
	id->context = NULL;
	why = check_request(l, e, &h, &peer, &lim);
	if (why)
		goto reject;
	why = RV_REJ_REFUSED;
	if (l->attr.on_request) {
		if (l->attr.on_request(l->attr.arg, h.user, h.user_len, reply,
				       &rlen) < 0) {
			reject_with(l, id, reply, rlen);
			return NULL;
		}
		if (rlen > RV_ACCEPT_PRIV_MAX)
			goto reject;
	} else {
		rlen = ca->priv_len;
		if (rlen)
			memcpy(reply, ca->priv, rlen);
	}
	why = RV_REJ_RESOURCES;
	if (rv_conn_new(l->dev, ca, l, &c))
		goto reject;
	c->peer = peer;
	pthread_mutex_lock(&l->cm_lock);
	n = l->nconns;
	pthread_mutex_unlock(&l->cm_lock);
	grant = h.rd_depth < c->rd_depth ? h.rd_depth : c->rd_depth;
	mine = h;	/* our READs toward the client: its responder side */
	mine.rd_depth = e->param.conn.initiator_depth ?
			e->param.conn.initiator_depth : 1;
	if (rv_conn_apply_peer(c, &mine) || ensure_pool(l, n + 2))
		goto reject_conn;
	rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tmo,
			sizeof(tmo));
	if (rv_conn_setup_qp(c, id))
		goto reject_conn;
	pthread_mutex_lock(&l->rq_lock);
	map_put(l, c->qp_num, c);
	pthread_mutex_unlock(&l->rq_lock);
	mine = (struct rv_hello){ .slots = (uint16_t)l->r_slots,
				  .rd_depth = (uint16_t)grant,
				  .msg_max = ca->msg_max };
	len = rv_hello_pack(priv, sizeof(priv), &mine, reply, rlen);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = priv;
	cp.private_data_len = (uint8_t)len;
	cp.responder_resources = (uint8_t)grant;
	cp.initiator_depth = (uint8_t)c->rd_depth;
	cp.retry_count = ca->retry_cnt;
	cp.rnr_retry_count = ca->rnr_retry;
	c->state = RV_CS_ACCEPTING;
	pthread_mutex_lock(&l->cm_lock);
	c->l_next = l->conns;
	if (l->conns)
		l->conns->l_prev = c;
	l->conns = c;
	l->nconns++;
	id->context = c;
	pthread_mutex_unlock(&l->cm_lock);
	if (rdma_accept(id, &cp)) {
		pthread_mutex_lock(&l->cm_lock);
		id->context = NULL;
		list_unlink(l, c);
		l->nconns--;
		pthread_mutex_unlock(&l->cm_lock);
		goto reject_conn;
	}
	rv_dev_link(l->dev, c);
	*destroy_id = false;
	return NULL;

reject_conn:
	c->id = id;		/* rv_conn_free destroys QP and id */
	*destroy_id = false;
	reject(l, id, RV_REJ_RESOURCES, 0);
	return c;
reject:
	reject(l, id, why, lim);
	return NULL;
}

/* Detach an undelivered conn under cm_lock; the caller frees it. */
static struct rv_conn *drop_accepting(struct rv_listener *l,
				      struct rv_conn *c)
{
	c->id->context = NULL;
	list_unlink(l, c);
	l->nconns--;
	retire_extra(l);
	c->state = 0;
	return c;
}

/* Handle one event: 1 if *out is for the caller, 0 if not, < 0 if none. */
static int one_event(struct rv_listener *l, struct rv_event *out)
{
	struct rdma_cm_event *e;
	struct rdma_cm_id *bare = NULL;
	struct rv_conn *c, *dead = NULL;
	bool destroy_id;
	int ret = 0;

	if (rdma_get_cm_event(l->ech, &e))
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN
			: rs_seterr(-errno, "rdma_get_cm_event: %s",
				    strerror(errno));
	if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		dead = on_connect_request(l, e, &destroy_id);
		if (destroy_id)
			bare = e->id;
		goto ack;
	}
	if (e->id == l->id)
		goto ack;	/* e.g. DEVICE_REMOVAL: conns fail by async */
	pthread_mutex_lock(&l->cm_lock);
	c = e->id->context;
	switch (c ? e->event : RDMA_CM_EVENT_TIMEWAIT_EXIT) {
	case RDMA_CM_EVENT_ESTABLISHED:
		if (c->state == RV_CS_ACCEPTING) {
			c->state = RV_CS_CONNECTED;
			*out = (struct rv_event){ RV_EV_CONNECTED, c };
			ret = 1;
			if (atomic_load(&c->fail))	/* failed before */
				atomic_store(&l->fail_pending, 1);
		}
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rv_conn_fail(c, RS_E_DISCONNECTED, "peer disconnected (%s)",
			     rdma_event_str(e->event));
		if (c->state == RV_CS_CONNECTED) {
			rdma_disconnect(e->id);
			c->state = RV_CS_DISCONNECTED;
			*out = (struct rv_event){ RV_EV_DISCONNECTED, c };
			ret = 1;
		} else if (c->state == RV_CS_ACCEPTING) {
			dead = drop_accepting(l, c);
		}
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&l->cm_lock);
ack:
	rdma_ack_cm_event(e);
	if (dead)
		rv_conn_free(dead);
	if (bare)
		rdma_destroy_id(bare);
	return ret;
}

void rv_listener_conn_failed(struct rv_listener *l)
{
	atomic_store(&l->fail_pending, 1);
	evfd_set(l->fail_evfd, true);
}

/* A CONNECTED conn that failed on this side: disconnect it and tell the
 * owner. 1 if *out is filled. */
static int failed_event(struct rv_listener *l, struct rv_event *out)
{
	struct rv_conn *c;
	uint64_t v;

	if (!atomic_exchange(&l->fail_pending, 0))
		return 0;
	if (read(l->fail_evfd, &v, sizeof(v)) < 0) {
		/* not readable: nothing to drain */
	}
	pthread_mutex_lock(&l->cm_lock);
	for (c = l->conns; c; c = c->l_next)
		if (c->state == RV_CS_CONNECTED && atomic_load(&c->fail))
			break;
	if (c) {
		rdma_disconnect(c->id);
		c->state = RV_CS_DISCONNECTED;
		rv_stat_add(&l->cnt.failed, 1);
		*out = (struct rv_event){ RV_EV_DISCONNECTED, c };
		atomic_store(&l->fail_pending, 1);	/* maybe more */
	}
	pthread_mutex_unlock(&l->cm_lock);
	return c != NULL;
}

/* The keepalive timer fired: let every established conn probe its peer. */
static void keepalive_tick(struct rv_listener *l)
{
	uint64_t n;

	if (l->ka_tfd < 0 || read(l->ka_tfd, &n, sizeof(n)) != sizeof(n))
		return;
	pthread_mutex_lock(&l->cm_lock);
	for (struct rv_conn *c = l->conns; c; c = c->l_next) {
		if (c->state != RV_CS_CONNECTED)
			continue;
		pthread_mutex_lock(&c->lock);
		rv_conn_keepalive_locked(c);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&l->cm_lock);
}

int rv_listener_event(struct rv_listener *l, struct rv_event *ev,
		      int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
			    rs_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct pollfd pf = { .fd = l->ep_fd, .events = POLLIN };
	uint64_t now;
	int r, ms;

	for (;;) {
		keepalive_tick(l);
		if (failed_event(l, ev))
			return 0;
		r = one_event(l, ev);
		if (r == 1)
			return 0;
		if (r == 0)
			continue;
		if (r != -EAGAIN)
			return r;
		now = rs_mono_ns();
		if (now >= deadline)
			return rs_seterr(RS_E_TIMEOUT, "no connection event "
					 "within %d ms", timeout_ms);
		ms = deadline == UINT64_MAX ? -1 :
		     (int)((deadline - now + 999999) / 1000000);
		rv_stat_add(&l->st.wakeups, 1);
		if (poll(&pf, 1, ms) < 0 && errno != EINTR)
			return rs_seterr(-errno, "poll: %s", strerror(errno));
	}
}

int rv_listener_fd(const struct rv_listener *l)
{
	return l->ep_fd;
}

void rv_listener_counters(const struct rv_listener *l,
			  struct rv_listener_counters *out)
{
	const uint64_t *src = (const uint64_t *)&l->cnt;
	uint64_t *dst = (uint64_t *)out;

	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	out->srq_buffers = (uint64_t)atomic_load(&l->pool.nchunks) *
			   l->pool.per_chunk;
}

uint16_t rv_listener_port(const struct rv_listener *l)
{
	return l->port;
}

void rv_listener_stats(const struct rv_listener *l, struct rv_stats *st)
{
	const uint64_t *src = (const uint64_t *)&l->st;
	uint64_t *dst = (uint64_t *)st;

	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/* ---- create / close ---- */

static int bind_listen(struct rv_listener *l, const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	if (!ip || !*ip) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(port);
	} else if (inet_pton(AF_INET, ip, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
	} else {
		return rs_seterr(RS_E_INVAL, "'%s' is not an IP address", ip);
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)&ss))
		return rs_seterr(-errno, "rdma_bind_addr(%s:%u): %s",
				 ip ? ip : "*", port, strerror(errno));
	if (l->id->verbs && l->id->verbs != l->dev->ctx)
		return rs_seterr(RS_E_NODEV, "%s is on device %s, not %s", ip,
				 ibv_get_device_name(l->id->verbs->device),
				 l->dev->name);
	if (rdma_listen(l->id, l->attr.backlog))
		return rs_seterr(-errno, "rdma_listen(%s:%u): %s",
				 ip ? ip : "*", port, strerror(errno));
	l->port = ntohs(rdma_get_src_port(l->id));
	return 0;
}

static int check_lattr(const struct rv_dev *d, const struct rv_listener_attr *a)
{
	uint64_t total = ((uint64_t)a->max_conns + 1) * (a->conn.credits + 1u);

	if (a->max_conns == 0 || a->max_conns > 65535)
		return rs_seterr(RS_E_INVAL, "max_conns %u out of range "
				 "(1..65535)", a->max_conns);
	if (a->conn.credits < 3)
		return rs_seterr(RS_E_INVAL, "credits %u below 3",
				 a->conn.credits);
	if (total > (uint64_t)d->attr.max_srq_wr ||
	    total + 1 > (uint64_t)d->attr.max_cqe)
		return rs_seterr(RS_E_INVAL, "max_conns %u x %u receive "
				 "buffers exceeds the device (SRQ %d, CQ %d)",
				 a->max_conns, a->conn.credits + 1u,
				 d->attr.max_srq_wr, d->attr.max_cqe);
	if (a->conn.priv_len > RV_ACCEPT_PRIV_MAX)
		return rs_seterr(RS_E_TOOBIG, "reply data of %zu bytes (at "
				 "most %d)", a->conn.priv_len,
				 RV_ACCEPT_PRIV_MAX);
	if (a->backlog <= 0)
		return rs_seterr(RS_E_INVAL, "backlog must be > 0");
	return 0;
}

static int make_rx(struct rv_listener *l)
{
	struct ibv_srq_init_attr sa;
	uint32_t total = (l->attr.max_conns + 1) * l->r_slots;
	int ret;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = total;
	sa.attr.max_sge = 1;
	l->srq = ibv_create_srq(l->dev->pd, &sa);
	if (!l->srq)
		return rs_seterr(-(errno ? errno : ENOMEM),
				 "%s: ibv_create_srq(%u): %s", l->dev->name,
				 total, strerror(errno));
	ret = rv_cq_create(l->dev, &l->rcq, (int)total + 1, &l->rq_lock);
	if (ret)
		return ret;
	ret = rv_pool_init(&l->pool, l->attr.conn.msg_max, l->r_slots,
			   l->attr.max_conns + 1);
	if (ret)
		return ret;
	l->pool.srq = l->srq;
	for (l->map_cap = 16; l->map_cap < 2 * l->attr.max_conns;)
		l->map_cap *= 2;
	l->map = calloc(l->map_cap, sizeof(*l->map));
	l->rq_cap = total;
	l->rq = calloc(total, sizeof(*l->rq));
	l->parked = calloc(total, sizeof(*l->parked));
	l->nparked = calloc(l->attr.max_conns + 1, sizeof(*l->nparked));
	if (!l->map || !l->rq || !l->parked || !l->nparked)
		return rs_seterr(-ENOMEM, "listener: out of memory");
	l->q_evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->q_evfd < 0)
		return rs_seterr(-errno, "eventfd: %s", strerror(errno));
	return 0;
}

static int ep_add(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

/* rv_listener_fd(): the cm channel, failed conns, the keepalive timer. */
static int make_fds(struct rv_listener *l)
{
	uint32_t ms = l->attr.conn.keepalive_ms;
	struct itimerspec its = {
		.it_interval = { ms / 1000, (long)(ms % 1000) * 1000000 },
		.it_value = { ms / 1000, (long)(ms % 1000) * 1000000 },
	};

	l->ep_fd = epoll_create1(EPOLL_CLOEXEC);
	l->fail_evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->ep_fd < 0 || l->fail_evfd < 0 || ep_add(l->ep_fd, l->ech->fd) ||
	    ep_add(l->ep_fd, l->fail_evfd))
		return rs_seterr(-errno, "listener fds: %s", strerror(errno));
	if (!ms)
		return 0;
	l->ka_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC |
				   TFD_NONBLOCK);
	if (l->ka_tfd < 0 || timerfd_settime(l->ka_tfd, 0, &its, NULL) ||
	    ep_add(l->ep_fd, l->ka_tfd))
		return rs_seterr(-errno, "keepalive timer: %s",
				 strerror(errno));
	return 0;
}

int rv_listen(struct rv_dev *d, const char *ip, uint16_t port,
	      const struct rv_listener_attr *a, struct rv_listener **out)
{
	struct rv_listener_attr def;
	struct rv_listener *l;
	int ret, fl;

	*out = NULL;
	if (!a) {
		rv_listener_attr_init(&def);
		a = &def;
	}
	ret = check_lattr(d, a);
	if (ret)
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return rs_seterr(-ENOMEM, "listener: out of memory");
	l->dev = d;
	l->attr = *a;
	l->q_evfd = -1;
	l->ep_fd = l->fail_evfd = l->ka_tfd = -1;
	if (a->conn.priv_len)
		memcpy(l->reply_default, a->conn.priv, a->conn.priv_len);
	l->attr.conn.priv = l->reply_default;
	l->r_slots = a->conn.credits + 1u;
	pthread_mutex_init(&l->cm_lock, NULL);
	pthread_mutex_init(&l->rq_lock, NULL);
	ret = make_rx(l);
	if (ret)
		goto err;
	l->ech = rdma_create_event_channel();
	if (!l->ech) {
		ret = rs_seterr(-(errno ? errno : ENODEV),
				"rdma_create_event_channel: %s",
				strerror(errno));
		goto err;
	}
	fl = fcntl(l->ech->fd, F_GETFL);
	if (fl < 0 || fcntl(l->ech->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		ret = rs_seterr(-errno, "cm channel: %s", strerror(errno));
		goto err;
	}
	ret = make_fds(l);
	if (ret)
		goto err;
	if (rdma_create_id(l->ech, &l->id, NULL, RDMA_PS_TCP)) {
		l->id = NULL;
		ret = rs_seterr(-errno, "rdma_create_id: %s", strerror(errno));
		goto err;
	}
	ret = bind_listen(l, ip, port);
	if (ret)
		goto err;
	*out = l;
	return 0;
err:
	rv_listener_close(&l);
	return ret;
}

void rv_listener_close(struct rv_listener **lp)
{
	struct rv_listener *l = lp ? *lp : NULL;
	struct rv_conn *c;

	if (!l)
		return;
	for (;;) {
		pthread_mutex_lock(&l->cm_lock);
		c = l->conns;
		pthread_mutex_unlock(&l->cm_lock);
		if (!c)
			break;
		rv_conn_close(&c);
	}
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ech)
		rdma_destroy_event_channel(l->ech);
	if (l->srq)
		ibv_destroy_srq(l->srq);
	rv_cq_destroy(&l->rcq);
	rv_pool_fini(&l->pool);
	if (l->q_evfd >= 0)
		close(l->q_evfd);
	if (l->ep_fd >= 0)
		close(l->ep_fd);
	if (l->fail_evfd >= 0)
		close(l->fail_evfd);
	if (l->ka_tfd >= 0)
		close(l->ka_tfd);
	free(l->map);
	free(l->rq);
	free(l->parked);
	free(l->nparked);
	pthread_mutex_destroy(&l->cm_lock);
	pthread_mutex_destroy(&l->rq_lock);
	free(l);
	*lp = NULL;
}
