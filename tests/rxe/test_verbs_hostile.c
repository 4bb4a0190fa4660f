/*
 * test_verbs_hostile.c - the verbs layer against peers that break the rules
 * and against its own owner's late calls:
 *   - a message released after its conn was closed (node and client side);
 *   - connection requests without, with short or with garbage handshake
 *     bytes, asking for too many buffers or huge messages: refused with a
 *     reason the client can read, or accepted with the ring clamped;
 *   - a client that ignores its credits while the node holds its messages
 *     (it is cut off; a well-behaved client keeps working), one that
 *     returns 2^23-1 credits, one that sends an unknown immediate type, a
 *     SEND without immediate, a message larger than the receive buffer:
 *     each conn is failed with its reason, counted and disconnected;
 *   - connections per peer address;
 *   - a peer that vanishes (its IP address deleted from the netdev) is
 *     noticed by keepalive and its conn freed.
 * Misbehaving clients are rv client conns whose internals the test bends
 * (rv_internal.h) or on which it posts raw work requests; raw handshakes go
 * through librdmacm directly.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "verbs/rv_internal.h"
#include "verbs_common.h"

#define CREDITS 4
#define MSG_MAX 4096
#define HOARD 1024

static struct rv_dev *dev;

/* ---- a node: accept loop that records why conns went, and a receiver
 * that hoards messages (releases them only when told) ---- */

struct node {
	struct rv_listener *l;
	pthread_t acc, rx;
	atomic_bool stop;
	atomic_bool release;	/* the receiver releases what it gets */
	atomic_int connected, disconnected;
	pthread_mutex_t lock;
	struct rv_conn *conns[32];
	int nconns;
	int last_code;		/* rv_conn_status of the last DISCONNECTED */
	char last_why[256];
	struct rv_msg held[HOARD];
	atomic_int nheld;
	atomic_long got;
	atomic_long got_tagged;	/* messages whose 4 bytes are TAG_GOOD */
};

/* The last DISCONNECTED's status and reason, read under the lock the
 * accept thread writes them with. */
static int last_of(struct node *n, char *why, size_t len)
{
	int code;

	pthread_mutex_lock(&n->lock);
	code = n->last_code;
	snprintf(why, len, "%s", n->last_why);
	pthread_mutex_unlock(&n->lock);
	return code;
}

static void *node_acc(void *arg)
{
	struct node *n = arg;
	struct rv_event ev;

	while (!atomic_load(&n->stop)) {
		if (rv_listener_event(n->l, &ev, 100) < 0)
			continue;
		pthread_mutex_lock(&n->lock);
		if (ev.type == RV_EV_CONNECTED) {
			n->conns[n->nconns++ % 32] = ev.conn;
			atomic_fetch_add(&n->connected, 1);
		} else {
			n->last_code = rv_conn_status(ev.conn);
			snprintf(n->last_why, sizeof(n->last_why), "%s",
				 rs_errormsg());
			for (int i = 0; i < 32; i++)
				if (n->conns[i] == ev.conn)
					n->conns[i] = NULL;
			/* messages the receiver holds stay releasable */
			rv_conn_close(&ev.conn);
			atomic_fetch_add(&n->disconnected, 1);
		}
		pthread_mutex_unlock(&n->lock);
	}
	return NULL;
}

/* the payload of the well-behaved client's messages in credit_overrun */
static const uint32_t tag_good = 0x600d600d;

static void *node_rx(void *arg)
{
	struct node *n = arg;
	struct rv_msg m[8];
	int k;

	while (!atomic_load(&n->stop)) {
		k = rv_listener_recv(n->l, m, 8, 100);
		for (int i = 0; i < k; i++) {
			bool keep;

			atomic_fetch_add(&n->got, 1);
			if (m[i].len == 4 &&
			    !memcmp(m[i].data, &tag_good, 4))
				atomic_fetch_add(&n->got_tagged, 1);
			/* the entry is written before the count that
			 * publishes it, both under the lock */
			pthread_mutex_lock(&n->lock);
			keep = !atomic_load(&n->release) &&
			       atomic_load(&n->nheld) < HOARD;
			if (keep) {
				n->held[atomic_load(&n->nheld)] = m[i];
				atomic_fetch_add(&n->nheld, 1);
			}
			pthread_mutex_unlock(&n->lock);
			if (!keep)
				rv_msg_release(&m[i]);
		}
	}
	return NULL;
}

static void node_start(struct node *n, const struct rv_listener_attr *la,
		       bool rx)
{
	memset(n, 0, sizeof(*n));
	pthread_mutex_init(&n->lock, NULL);
	VT_CHECK(rv_listen(dev, vt_ip, 0, la, &n->l));
	pthread_create(&n->acc, NULL, node_acc, n);
	if (rx)
		pthread_create(&n->rx, NULL, node_rx, n);
	else
		n->rx = 0;
}

static void node_release_held(struct node *n)
{
	static struct rv_msg out[HOARD];
	int k;

	pthread_mutex_lock(&n->lock);
	k = atomic_exchange(&n->nheld, 0);
	memcpy(out, n->held, (size_t)k * sizeof(out[0]));
	pthread_mutex_unlock(&n->lock);
	for (int i = 0; i < k; i++)
		rv_msg_release(&out[i]);
}

static void node_stop(struct node *n)
{
	atomic_store(&n->stop, true);
	pthread_join(n->acc, NULL);
	if (n->rx)
		pthread_join(n->rx, NULL);
	node_release_held(n);
	for (int i = 0; i < 32; i++)
		rv_conn_close(&n->conns[i]);
	rv_listener_close(&n->l);
	pthread_mutex_destroy(&n->lock);
}

static void wait_for(atomic_int *v, int want, int ms)
{
	for (int i = 0; i < ms / 10 && atomic_load(v) < want; i++)
		usleep(10000);
}

static void wait_for_long(atomic_long *v, long want, int ms)
{
	for (int i = 0; i < ms / 10 && atomic_load(v) < want; i++)
		usleep(10000);
}

static void listener_attr(struct rv_listener_attr *la)
{
	rv_listener_attr_init(la);
	la->conn.msg_max = MSG_MAX;
	la->conn.credits = CREDITS;
	la->conn.send_slots = CREDITS;
	la->max_conns = 16;
}

static int setup(void **state)
{
	VT_CHECK(rv_dev_open(&dev, vt_dev_name));
	return 0;
}

static int teardown(void **state)
{
	rv_dev_close(&dev);
	return 0;
}

/* ---- 1. releasing after close ---- */

static void release_after_close(void **state)
{
	struct rv_listener_attr la;
	struct node n;
	struct rv_conn *c, *sc;
	struct rv_msg m;
	int one = 1;

	listener_attr(&la);
	node_start(&n, &la, false);
	c = vt_connect(dev, rv_listener_port(n.l), NULL, NULL);
	wait_for(&n.connected, 1, 5000);
	assert_int_equal(atomic_load(&n.connected), 1);
	VT_CHECK(rv_msg_send(c, &one, sizeof(one), 5000));
	assert_int_equal(rv_listener_recv(n.l, &m, 1, 5000), 1);
	/* the owner closes the node's conn while a worker holds m */
	pthread_mutex_lock(&n.lock);
	sc = n.conns[0];
	n.conns[0] = NULL;
	pthread_mutex_unlock(&n.lock);
	assert_ptr_equal(m.conn, sc);
	rv_conn_close(&sc);
	rv_msg_release(&m);	/* use-after-free before the fix (ASan) */

	/* same on the client side: a message out when the conn closes */
	sc = NULL;
	wait_for(&n.connected, 1, 10);
	rv_conn_close(&c);
	c = vt_connect(dev, rv_listener_port(n.l), NULL, NULL);
	wait_for(&n.connected, 2, 5000);
	pthread_mutex_lock(&n.lock);
	sc = n.conns[1];
	pthread_mutex_unlock(&n.lock);
	assert_non_null(sc);
	VT_CHECK(rv_msg_send(sc, &one, sizeof(one), 5000));
	assert_int_equal(rv_msg_recv(c, &m, 1, 5000), 1);
	rv_conn_close(&c);
	rv_msg_release(&m);
	node_stop(&n);
}

/* ---- 2. handshakes ---- */

struct raw {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static struct rdma_cm_event *raw_expect(struct raw *r)
{
	struct rdma_cm_event *ev = NULL;
	struct pollfd pf = { .fd = r->ech->fd, .events = POLLIN };

	if (poll(&pf, 1, 5000) != 1 || rdma_get_cm_event(r->ech, &ev))
		fail_msg("no rdma_cm event");
	return ev;
}

/* Connect with exactly `priv`; returns the final event type and, for a
 * REJECTED, the reason the node gave (0 if none). */
static int raw_connect(uint16_t port, const void *priv, uint8_t len,
		       unsigned *why, struct raw *r)
{
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons(port) };
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	uint32_t lim;
	int type;

	memset(r, 0, sizeof(*r));
	inet_pton(AF_INET, vt_ip, &dst.sin_addr);
	r->ech = rdma_create_event_channel();
	assert_non_null(r->ech);
	assert_int_equal(rdma_create_id(r->ech, &r->id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_resolve_addr(r->id, NULL,
					   (struct sockaddr *)&dst, 2000), 0);
	ev = raw_expect(r);
	assert_int_equal(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	assert_int_equal(rdma_resolve_route(r->id, 2000), 0);
	ev = raw_expect(r);
	assert_int_equal(ev->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(ev);
	r->pd = ibv_alloc_pd(r->id->verbs);
	r->cq = ibv_create_cq(r->id->verbs, 8, NULL, NULL, 0);
	assert_non_null(r->pd);
	assert_non_null(r->cq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = r->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	assert_int_equal(rdma_create_qp(r->id, r->pd, &qa), 0);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = priv;
	cp.private_data_len = len;
	cp.initiator_depth = cp.responder_resources = 1;
	cp.retry_count = 3;
	cp.rnr_retry_count = 3;
	assert_int_equal(rdma_connect(r->id, &cp), 0);
	ev = raw_expect(r);
	type = ev->event;
	*why = 0;
	if (type == RDMA_CM_EVENT_REJECTED &&
	    rv_reject_unpack(ev->param.conn.private_data,
			     ev->param.conn.private_data_len, why, &lim))
		*why = 0;
	rdma_ack_cm_event(ev);
	return type;
}

static void raw_close(struct raw *r)
{
	if (r->id->qp)
		rdma_destroy_qp(r->id);
	ibv_destroy_cq(r->cq);
	ibv_dealloc_pd(r->pd);
	rdma_destroy_id(r->id);
	rdma_destroy_event_channel(r->ech);
}

static void handshake_bounds(void **state)
{
	struct rv_listener_attr la;
	struct rv_listener_counters ct;
	struct node n;
	struct raw r;
	uint8_t buf[56];
	struct rv_hello h = { .slots = 17, .rd_depth = 1 };
	unsigned why;
	int len;

	listener_attr(&la);
	node_start(&n, &la, false);
	/* absent, short, garbage */
	assert_int_equal(raw_connect(rv_listener_port(n.l), NULL, 0, &why, &r),
			 RDMA_CM_EVENT_REJECTED);
	assert_int_equal(why, RV_REJ_MALFORMED);
	raw_close(&r);
	memcpy(buf, "\x52\x56\x01", 3);
	assert_int_equal(raw_connect(rv_listener_port(n.l), buf, 5, &why, &r),
			 RDMA_CM_EVENT_REJECTED);
	assert_int_equal(why, RV_REJ_MALFORMED);
	raw_close(&r);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 37 + 11);
	assert_int_equal(raw_connect(rv_listener_port(n.l), buf, 56, &why, &r),
			 RDMA_CM_EVENT_REJECTED);
	assert_int_equal(why, RV_REJ_MALFORMED);
	raw_close(&r);
	/* more receive buffers than a conn may have */
	h.slots = 65535;
	h.msg_max = 4096;
	len = rv_hello_pack(buf, sizeof(buf), &h, NULL, 0);
	assert_int_equal(raw_connect(rv_listener_port(n.l), buf, (uint8_t)len,
				     &why, &r), RDMA_CM_EVENT_REJECTED);
	assert_int_equal(why, RV_REJ_LIMITS);
	raw_close(&r);
	/* msg_max 2^32-1: accepted, the node's ring sized by its own limit
	 * (before: slots x 4 GiB before any HELLO) */
	h.slots = 17;
	h.msg_max = UINT32_MAX;
	len = rv_hello_pack(buf, sizeof(buf), &h, NULL, 0);
	assert_int_equal(raw_connect(rv_listener_port(n.l), buf, (uint8_t)len,
				     &why, &r), RDMA_CM_EVENT_ESTABLISHED);
	wait_for(&n.connected, 1, 5000);
	pthread_mutex_lock(&n.lock);
	assert_non_null(n.conns[0]);
	assert_int_equal(rv_conn_msg_max(n.conns[0]), MSG_MAX);
	pthread_mutex_unlock(&n.lock);
	rdma_disconnect(r.id);
	raw_close(&r);
	rv_listener_counters(n.l, &ct);
	printf("rejected: malformed %llu limits %llu\n",
	       (unsigned long long)ct.rej_malformed,
	       (unsigned long long)ct.rej_limits);
	assert_int_equal(ct.rej_malformed, 3);
	assert_int_equal(ct.rej_limits, 1);
	node_stop(&n);
}

/* ---- 3. credits and protocol ---- */

/* Post a raw SEND on a client conn's QP, outside its op ring (unsignaled:
 * no completion unless it fails). */
static void raw_send(struct rv_conn *c, enum ibv_wr_opcode op, uint32_t imm,
		     struct rv_mr *mr, uint32_t len)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1ull << 61;
	wr.opcode = op;
	wr.imm_data = htonl(imm);
	if (mr) {
		sge.addr = (uintptr_t)mr->addr;
		sge.length = len;
		sge.lkey = mr->lkey;
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	pthread_mutex_lock(&c->lock);
	assert_int_equal(ibv_post_send(c->qp, &wr, &bad), 0);
	pthread_mutex_unlock(&c->lock);
}

static void credit_overrun(void **state)
{
	struct rv_listener_attr la;
	struct rv_listener_counters ct;
	struct node n;
	struct rv_conn *good, *bad;
	uint32_t v = 7;
	char why[256];
	int code;

	listener_attr(&la);
	node_start(&n, &la, true);	/* holds every message */
	good = vt_connect(dev, rv_listener_port(n.l), NULL, NULL);
	bad = vt_connect(dev, rv_listener_port(n.l), NULL, NULL);
	wait_for(&n.connected, 2, 5000);
	/* ignore flow control: 4x the credits the node granted */
	for (int i = 0; i < 4 * CREDITS; i++) {
		atomic_store(&bad->credits, 1000);
		if (rv_msg_send(bad, &v, sizeof(v), 2000) < 0)
			break;
	}
	wait_for(&n.disconnected, 1, 10000);
	code = last_of(&n, why, sizeof(why));
	printf("bad client: node says %d (%s)\n", code, why);
	assert_int_equal(atomic_load(&n.disconnected), 1);
	assert_int_equal(code, RS_E_PROTO);
	assert_non_null(strstr(why, "exceeded its credits"));
	/* the well-behaved client still gets all its credits' worth in;
	 * the other got at most its grant in (the node may drop what it
	 * had queued of a conn it cut off) */
	for (int i = 0; i < CREDITS; i++)
		VT_CHECK(rv_msg_send(good, &tag_good, sizeof(tag_good), 5000));
	wait_for_long(&n.got_tagged, CREDITS, 20000);
	printf("messages in: %ld of the good client, %ld of the other\n",
	       atomic_load(&n.got_tagged),
	       atomic_load(&n.got) - atomic_load(&n.got_tagged));
	assert_int_equal(atomic_load(&n.got_tagged), CREDITS);
	assert_true(atomic_load(&n.got) - atomic_load(&n.got_tagged) <=
		    CREDITS);
	assert_int_equal(rv_conn_status(good), 0);
	rv_listener_counters(n.l, &ct);
	assert_int_equal(ct.credit_overruns, 1);
	assert_int_equal(ct.failed, 1);
	atomic_store(&n.release, true);
	node_release_held(&n);
	rv_conn_close(&bad);
	rv_conn_close(&good);
	node_stop(&n);
}

/* One bad message on a fresh conn: the node fails, counts and
 * disconnects it, with `want` in its reason. */
static void one_bad(struct node *n, int kind, const char *want, int code)
{
	char why[256];
	int got;
	struct rv_conn *c = vt_connect(dev, rv_listener_port(n->l), NULL, NULL);
	struct rv_mr *mr = NULL;
	int before = atomic_load(&n->disconnected);
	uint32_t v = 1;

	wait_for(&n->connected, atomic_load(&n->connected) + 1, 200);
	switch (kind) {
	case 0:		/* 2^23-1 credits returned */
		atomic_store(&c->owed, (int)RV_IMM_CREDIT_MAX);
		VT_CHECK(rv_msg_send(c, &v, sizeof(v), 5000));
		break;
	case 1:		/* unknown immediate type */
		raw_send(c, IBV_WR_SEND_WITH_IMM, rv_imm_pack(9, 0, false),
			 NULL, 0);
		break;
	case 2:		/* SEND without immediate */
		raw_send(c, IBV_WR_SEND, 0, NULL, 0);
		break;
	case 3:		/* larger than the receive buffer */
		VT_CHECK(rv_mem_alloc(dev, 2 * MSG_MAX, RV_ACC_LOCAL_WRITE,
				      &mr));
		raw_send(c, IBV_WR_SEND_WITH_IMM,
			 rv_imm_pack(RV_IMM_DATA, 0, false), mr, MSG_MAX + 1);
		break;
	}
	wait_for(&n->disconnected, before + 1, 10000);
	got = last_of(n, why, sizeof(why));
	printf("bad message %d: node says %d (%s)\n", kind, got, why);
	assert_int_equal(atomic_load(&n->disconnected), before + 1);
	assert_int_equal(got, code);
	assert_non_null(strstr(why, want));
	rv_conn_close(&c);
	rv_mr_free(&mr);
}

static void bad_messages(void **state)
{
	struct rv_listener_attr la;
	struct rv_listener_counters ct;
	struct node n;

	listener_attr(&la);
	node_start(&n, &la, true);
	atomic_store(&n.release, true);
	one_bad(&n, 0, "returned 8388607 credits", RS_E_PROTO);
	one_bad(&n, 1, "unknown type 9", RS_E_PROTO);
	one_bad(&n, 2, "without immediate", RS_E_PROTO);
	one_bad(&n, 3, "larger than the receive buffer", RS_E_TOOBIG);
	rv_listener_counters(n.l, &ct);
	assert_int_equal(ct.proto_errors, 3);
	assert_int_equal(ct.oversize, 1);
	assert_int_equal(ct.failed, 4);
	node_stop(&n);
}

/* ---- 4. connections per peer ---- */

static const char *other_ip(char *buf, size_t len)
{
	const char *ips = getenv("RS_RDMA_IPS");

	if (!ips || !*ips)
		return NULL;
	snprintf(buf, len, "%s", ips);
	buf[strcspn(buf, " ")] = '\0';
	return buf;
}

static void per_peer_limit(void **state)
{
	struct rv_listener_attr la;
	struct rv_listener_counters ct;
	struct rv_dev *dev2 = NULL;
	struct rv_conn *c[3] = { NULL }, *x = NULL;
	struct node n;
	char ip2[64];
	int ret;

	listener_attr(&la);
	la.max_conns_per_peer = 2;
	node_start(&n, &la, false);
	c[0] = vt_connect(dev, rv_listener_port(n.l), NULL, NULL);
	c[1] = vt_connect(dev, rv_listener_port(n.l), NULL, NULL);
	ret = rv_connect(dev, vt_ip, rv_listener_port(n.l), NULL, &c[2]);
	printf("third conn from %s: %d (%s)\n", vt_ip, ret, rs_errormsg());
	assert_int_equal(ret, -ECONNREFUSED);
	assert_non_null(strstr(rs_errormsg(), "too many connections from "
				"this address"));
	if (other_ip(ip2, sizeof(ip2))) {	/* another address is fine */
		VT_CHECK(rv_dev_open(&dev2, ip2));
		VT_CHECK(rv_connect(dev2, vt_ip, rv_listener_port(n.l), NULL,
				    &x));
	}
	/* a closed conn frees its peer's slot */
	rv_conn_close(&c[0]);
	wait_for(&n.disconnected, 1, 5000);
	VT_CHECK(rv_connect(dev, vt_ip, rv_listener_port(n.l), NULL, &c[0]));
	rv_listener_counters(n.l, &ct);
	assert_int_equal(ct.rej_per_peer, 1);
	for (int i = 0; i < 3; i++)
		rv_conn_close(&c[i]);
	rv_conn_close(&x);
	node_stop(&n);
	rv_dev_close(&dev2);
}

/* ---- SRQ size follows the connections ---- */

static void srq_shrinks(void **state)
{
	struct rv_listener_attr la;
	struct rv_listener_counters ct;
	struct rv_conn *c[4];
	struct node n;
	uint32_t v = 3;

	listener_attr(&la);
	node_start(&n, &la, true);
	atomic_store(&n.release, true);
	for (int i = 0; i < 4; i++)
		c[i] = vt_connect(dev, rv_listener_port(n.l), NULL, NULL);
	wait_for(&n.connected, 4, 5000);
	rv_listener_counters(n.l, &ct);
	assert_int_equal(ct.srq_buffers, 5 * (CREDITS + 1));	/* + spare */
	for (int i = 1; i < 4; i++)
		rv_conn_close(&c[i]);
	wait_for(&n.disconnected, 3, 5000);
	assert_int_equal(atomic_load(&n.disconnected), 3);
	/* traffic cycles the SRQ: retired buffers are parked, chunks go */
	for (int i = 0; i < 20 * (CREDITS + 1); i++)
		VT_CHECK(rv_msg_send(c[0], &v, sizeof(v), 5000));
	wait_for_long(&n.got, 20 * (CREDITS + 1), 5000);
	rv_listener_counters(n.l, &ct);
	printf("SRQ buffers after 3 of 4 conns went: %llu\n",
	       (unsigned long long)ct.srq_buffers);
	assert_int_equal(ct.srq_buffers, 2 * (CREDITS + 1));
	/* and grows again */
	c[1] = vt_connect(dev, rv_listener_port(n.l), NULL, NULL);
	c[2] = vt_connect(dev, rv_listener_port(n.l), NULL, NULL);
	wait_for(&n.connected, 6, 5000);
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 2 * CREDITS; k++)
			VT_CHECK(rv_msg_send(c[i], &v, sizeof(v), 5000));
	wait_for_long(&n.got, 20 * (CREDITS + 1) + 6 * CREDITS, 5000);
	assert_int_equal(atomic_load(&n.got), 20 * (CREDITS + 1) + 6 * CREDITS);
	rv_listener_counters(n.l, &ct);
	assert_int_equal(ct.srq_buffers, 4 * (CREDITS + 1));
	for (int i = 0; i < 3; i++)
		rv_conn_close(&c[i]);
	node_stop(&n);
}

/* ---- 5. keepalive ---- */

static int netdev_of(const char *devname, char *out, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/"
		 "gid_attrs/ndevs/0", devname);
	f = fopen(path, "r");
	if (!f || !fgets(out, (int)len, f)) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

static int ip_addr(const char *verb, const char *ip, const char *nd)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "ip addr %s %s/24 dev %s 2>/dev/null",
		 verb, ip, nd);
	return system(cmd);
}

static void keepalive_vanished_peer(void **state)
{
	struct rv_listener_attr la;
	struct rv_listener_counters ct;
	struct rv_dev *dev2 = NULL;
	struct rv_conn *c = NULL;
	struct node n;
	char ip2[64], nd[64], why[256];

	if (!other_ip(ip2, sizeof(ip2)) || netdev_of(vt_dev_name, nd,
						     sizeof(nd)))
		skip();
	listener_attr(&la);
	la.conn.keepalive_ms = 200;
	la.conn.ack_timeout = 12;	/* ~17 ms, 4 retries: ~0.1 s */
	la.conn.retry_cnt = 3;
	node_start(&n, &la, true);
	atomic_store(&n.release, true);
	VT_CHECK(rv_dev_open(&dev2, ip2));
	VT_CHECK(rv_connect(dev2, vt_ip, rv_listener_port(n.l), NULL, &c));
	wait_for(&n.connected, 1, 5000);
	/* alive and idle: probes are answered, nothing fails */
	usleep(700000);
	rv_listener_counters(n.l, &ct);
	assert_true(ct.ka_probes >= 1);
	assert_int_equal(atomic_load(&n.disconnected), 0);
	/* the client's host vanishes: packets to it go nowhere */
	if (ip_addr("del", ip2, nd)) {
		rv_conn_close(&c);
		node_stop(&n);
		rv_dev_close(&dev2);
		skip();
	}
	wait_for(&n.disconnected, 1, 30000);
	ip_addr("add", ip2, nd);
	last_of(&n, why, sizeof(why));
	printf("vanished peer: node says %s\n", why);
	rv_listener_counters(n.l, &ct);
	printf("probes %llu, keepalive failures %llu\n",
	       (unsigned long long)ct.ka_probes,
	       (unsigned long long)ct.ka_failures);
	assert_int_equal(atomic_load(&n.disconnected), 1);
	assert_non_null(strstr(why, "keepalive"));
	assert_int_equal(ct.ka_failures, 1);
	rv_conn_close(&c);
	node_stop(&n);
	rv_dev_close(&dev2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(release_after_close),
		cmocka_unit_test(handshake_bounds),
		cmocka_unit_test(credit_overrun),
		cmocka_unit_test(bad_messages),
		cmocka_unit_test(per_peer_limit),
		cmocka_unit_test(srq_shrinks),
		cmocka_unit_test(keepalive_vanished_peer),
	};

	vt_env();
	return cmocka_run_group_tests(tests, setup, teardown);
}
