/*
 * adversary_raw.c - the bodies of the helpers declared in
 * adversary_raw.h, which says what they are for.
 */
#include "adversary_raw.h"

/* Wait for `want`; *status of a REJECTED (else 0). */
static int raw_cm_expect(struct raw_conn *c, enum rdma_cm_event_type want,
			 struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev;
	int r = raw_cm_wait(c->ech, c->o.timeout_ms, &ev);

	if (r)
		return r;
	if (ev->event == want) {
		*out = ev;
		return 0;
	}
	r = ev->event == RDMA_CM_EVENT_REJECTED ? RAW_REJECTED : -ECONNREFUSED;
	rdma_ack_cm_event(ev);
	return r;
}

uint32_t raw_imm(unsigned type, uint32_t credits, int ack)
{
	return (uint32_t)type << 24 | (ack ? 1u << 23 : 0) |
	       (credits & 0x7fffffu);
}

void raw_hello(uint8_t *buf, uint16_t magic, uint8_t version,
	       uint8_t user_len, uint16_t slots,
	       uint16_t rd_depth, uint32_t msg_max)
{
	buf[0] = (uint8_t)magic;
	buf[1] = (uint8_t)(magic >> 8);
	buf[2] = version;
	buf[3] = user_len;
	buf[4] = (uint8_t)slots;
	buf[5] = (uint8_t)(slots >> 8);
	buf[6] = (uint8_t)rd_depth;
	buf[7] = (uint8_t)(rd_depth >> 8);
	for (int i = 0; i < 4; i++)
		buf[8 + i] = (uint8_t)(msg_max >> (8 * i));
}

double raw_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int raw_sockaddr(const char *ip, uint16_t port,
		 struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

void raw_opts_init(struct raw_opts *o, const char *src,
		   const char *dst, uint16_t port)
{
	memset(o, 0, sizeof(*o));
	o->src = src;
	o->dst = dst;
	o->port = port;
	o->nrecv = 8;
	o->rsize = 64 << 10;
	o->ssize = 64 << 10;
	o->sq = 64;
	o->retry = 3;
	o->rnr_retry = 3;
	o->timeout_ms = 5000;
}

int raw_cm_wait(struct rdma_event_channel *ech, int ms,
		struct rdma_cm_event **ev)
{
	struct pollfd p = { .fd = ech->fd, .events = POLLIN };
	int r = poll(&p, 1, ms);

	if (r == 0)
		return -ETIMEDOUT;
	if (r < 0)
		return -errno;
	return rdma_get_cm_event(ech, ev) ? -errno : 0;
}

int raw_post_recv(struct raw_conn *c, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->mem + (size_t)slot * c->o.rsize),
		.length = c->o.rsize, .lkey = c->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = RAW_WRID_RECV | slot,
				  .sg_list = &sge, .num_sge = 1 }, *bad;

	return -ibv_post_recv(c->qp, &wr, &bad);
}

static int raw_setup_qp(struct raw_conn *c)
{
	struct ibv_qp_init_attr qa;
	size_t bytes = (size_t)c->o.nrecv * c->o.rsize + c->o.ssize;

	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = c->pd ? ibv_create_cq(c->id->verbs,
				      (int)(c->o.sq + c->o.nrecv + 8), NULL,
				      NULL, 0) : NULL;
	c->mem = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
	if (!c->pd || !c->cq || !c->mem)
		return -ENOMEM;
	memset(c->mem, 0, bytes);
	c->sbuf = c->mem + (size_t)c->o.nrecv * c->o.rsize;
	c->mr = ibv_reg_mr(c->pd, c->mem, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		return -errno;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = c->o.sq;
	qa.cap.max_recv_wr = c->o.nrecv ? c->o.nrecv : 1;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->pd, &qa))
		return -errno;
	c->qp = c->id->qp;
	for (uint32_t i = 0; i < c->o.nrecv; i++)
		if (raw_post_recv(c, i))
			return -EIO;
	return 0;
}

static void raw_peer_hello(struct raw_conn *c, const uint8_t *p,
			   uint8_t len)
{
	if (!p || len < RAW_HELLO_LEN ||
	    (p[0] | p[1] << 8) != RAW_HELLO_MAGIC)
		return;
	c->hello_ok = 1;
	c->peer_slots = (uint16_t)(p[4] | p[5] << 8);
	c->peer_msg_max = (uint32_t)p[8] | (uint32_t)p[9] << 8 |
			  (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
}

void raw_close(struct raw_conn *c)
{
	if (c->id && c->qp)
		rdma_disconnect(c->id);
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ech)
		rdma_destroy_event_channel(c->ech);
	free(c->mem);
	memset(c, 0, sizeof(*c));
}

int raw_connect(struct raw_conn *c, const struct raw_opts *o)
{
	struct sockaddr_in src, dst;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	int r;

	memset(c, 0, sizeof(*c));
	c->o = *o;
	if (raw_sockaddr(o->dst, o->port, &dst) ||
	    (o->src && raw_sockaddr(o->src, 0, &src)))
		return -EINVAL;
	c->ech = rdma_create_event_channel();
	if (!c->ech || rdma_create_id(c->ech, &c->id, c, RDMA_PS_TCP)) {
		c->id = NULL;
		r = -errno;
		goto fail;
	}
	r = -EIO;
	if (rdma_resolve_addr(c->id, o->src ? (struct sockaddr *)&src : NULL,
			      (struct sockaddr *)&dst, o->timeout_ms))
		goto fail;
	if ((r = raw_cm_expect(c, RDMA_CM_EVENT_ADDR_RESOLVED, &ev)))
		goto fail;
	rdma_ack_cm_event(ev);
	r = -EIO;
	if (rdma_resolve_route(c->id, o->timeout_ms))
		goto fail;
	if ((r = raw_cm_expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED, &ev)))
		goto fail;
	rdma_ack_cm_event(ev);
	if ((r = raw_setup_qp(c)))
		goto fail;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = o->priv;
	cp.private_data_len = o->priv_len;
	cp.initiator_depth = 4;
	cp.responder_resources = 4;
	cp.retry_count = o->retry;
	cp.rnr_retry_count = o->rnr_retry;
	r = -EIO;
	if (rdma_connect(c->id, &cp))
		goto fail;
	if ((r = raw_cm_expect(c, RDMA_CM_EVENT_ESTABLISHED, &ev)))
		goto fail;
	raw_peer_hello(c, ev->param.conn.private_data,
		       ev->param.conn.private_data_len);
	rdma_ack_cm_event(ev);
	return 0;
fail:
	raw_close(c);
	return r;
}

int raw_connect_ok(struct raw_conn *c, struct raw_opts *o)
{
	uint8_t h[RAW_HELLO_LEN];

	int r;

	raw_hello(h, RAW_HELLO_MAGIC, 1, 0,
		  (uint16_t)(o->nrecv >= 4 ? o->nrecv : 4), 4, o->rsize);
	o->priv = h;
	o->priv_len = sizeof(h);
	r = raw_connect(c, o);
	/* h dies with this frame: leave no pointer to it behind */
	o->priv = NULL;
	o->priv_len = 0;
	c->o.priv = NULL;
	c->o.priv_len = 0;
	return r;
}

int raw_dropped(struct raw_conn *c, int ms)
{
	struct rdma_cm_event *ev;
	int r = raw_cm_wait(c->ech, ms, &ev);

	if (r)
		return 0;
	r = ev->event == RDMA_CM_EVENT_DISCONNECTED ||
	    ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
	    ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT;
	rdma_ack_cm_event(ev);
	return r;
}

int raw_post(struct raw_conn *c, enum ibv_wr_opcode op,
	     uint32_t len, uint32_t imm, uint64_t raddr,
	     uint32_t rkey, uint64_t wr_id, int signaled)
{
	struct ibv_sge sge = { .addr = (uintptr_t)c->sbuf, .length = len,
			       .lkey = c->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = len || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
		     op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 1 : 0;
	wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	wr.imm_data = htonl(imm);
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		sge.length = 8;
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 0xdeadbeefdeadbeefull;
	} else if (op != IBV_WR_SEND && op != IBV_WR_SEND_WITH_IMM) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return -ibv_post_send(c->qp, &wr, &bad);
}

int raw_poll(struct raw_conn *c, int ms, struct ibv_wc *wc)
{
	double end = raw_now() + ms / 1e3;

	do {
		int n = ibv_poll_cq(c->cq, 1, wc);

		if (n < 0)
			return -EIO;
		if (n)
			return 1;
		if (ms > 5)
			usleep(50);
	} while (raw_now() < end);
	return 0;
}

int raw_send(struct raw_conn *c, uint32_t len)
{
	uint32_t imm = raw_imm(RAW_IMM_DATA, c->owed, c->ack);

	c->owed = 0;
	c->ack = 0;
	return raw_post(c, IBV_WR_SEND_WITH_IMM, len, imm, 0, 0, 1, 1);
}

int raw_recv(struct raw_conn *c, int ms, const uint8_t **data,
	     uint32_t *slot, int *wc_status)
{
	double end = raw_now() + ms / 1e3;
	struct ibv_wc wc;

	while (raw_now() < end) {
		int n = raw_poll(c, (int)((end - raw_now()) * 1e3) + 1, &wc);

		if (n <= 0)
			return n;
		if (wc.status != IBV_WC_SUCCESS) {
			*wc_status = wc.status;
			return -EIO;
		}
		if (!(wc.wr_id & RAW_WRID_RECV))
			continue;
		*slot = (uint32_t)(wc.wr_id & ~RAW_WRID_RECV);
		if ((ntohl(wc.imm_data) >> 24) == RAW_IMM_CREDIT) {
			raw_post_recv(c, *slot);
			c->ack = 1;
			continue;
		}
		*data = c->mem + (size_t)*slot * c->o.rsize;
		return (int)wc.byte_len;
	}
	return 0;
}

void raw_release(struct raw_conn *c, uint32_t slot)
{
	if (!raw_post_recv(c, slot))
		c->owed++;
}
