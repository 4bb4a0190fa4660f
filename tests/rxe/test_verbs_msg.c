/*
 * test_verbs_msg.c - two-sided messages over Soft-RoCE: sizes from 0 to the
 * maximum, many messages in flight (more than the credits, so flow control
 * has to hold senders back), both directions, several clients on one
 * listener (the SRQ must tell them apart), one-way streams in both
 * directions (credits come back in credit-only messages), and limits.
 *
 * The server is threads of this process: an accept loop and an echo
 * worker on the listener's shared receive queue (several workers would
 * reorder one conn's replies; test_verbs_idle runs two). Each client sends from
 * one thread and receives the echoes in another, checking order and bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <poll.h>
#include <cmocka.h>

#include "verbs_common.h"

#define MSG_MAX (64u << 10)
#define CREDITS 8

static struct rv_dev *dev;
static struct vt_srv srv;

static const uint32_t sizes[] = { 0, 1, 7, 100, 4095, 4096, 4097, 20000,
				  MSG_MAX - 1, MSG_MAX };

static void fill(uint8_t *p, uint32_t len, uint32_t tag, uint32_t seq)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seq * 7 + tag * 13);
	if (len >= 8) {
		memcpy(p, &tag, 4);
		memcpy(p + 4, &seq, 4);
	}
}

static uint32_t size_of(uint32_t seq)
{
	return sizes[seq % (sizeof(sizes) / sizeof(sizes[0]))];
}

static int setup(void **state)
{
	struct rv_listener_attr la;

	VT_CHECK(rv_dev_open(&dev, vt_ip));	/* by address this time */
	rv_listener_attr_init(&la);
	la.conn.msg_max = MSG_MAX;
	la.conn.credits = CREDITS;
	la.conn.send_slots = 8;
	la.max_conns = 8;
	/* one echo worker: two would race and reorder a conn's replies */
	vt_srv_start(&srv, dev, 0, 1, &la);
	return 0;
}

static int teardown(void **state)
{
	vt_srv_stop(&srv);
	rv_dev_close(&dev);
	return 0;
}

struct client {
	struct rv_conn *c;
	uint32_t tag, n;
	_Atomic long got;	/* read by the watchdog */
	int err;
	pthread_t rx;
};

static void *rx_main(void *arg)
{
	struct client *cl = arg;
	static _Thread_local uint8_t want[MSG_MAX];
	struct rv_msg m[4];

	while (cl->got < cl->n) {
		int k = rv_msg_recv(cl->c, m, 4, 30000);

		if (k < 0) {
			cl->err = k;
			return NULL;
		}
		for (int i = 0; i < k; i++) {
			uint32_t seq = (uint32_t)cl->got++;

			fill(want, size_of(seq), cl->tag, seq);
			if (m[i].len != size_of(seq) ||
			    memcmp(m[i].data, want, m[i].len)) {
				fprintf(stderr, "client %u: echo %u wrong "
					"(len %u, want %u)\n", cl->tag, seq,
					m[i].len, size_of(seq));
				cl->err = -1;
			}
			rv_msg_release(&m[i]);
		}
	}
	return NULL;
}

static struct rv_conn *client_conn(void)
{
	struct rv_conn_attr a;

	rv_conn_attr_init(&a);
	a.msg_max = MSG_MAX;
	a.credits = CREDITS;
	a.send_slots = 8;
	return vt_connect(dev, rv_listener_port(srv.l), &a, NULL);
}

static void *tx_main(void *arg)
{
	struct client *cl = arg;
	static _Thread_local uint8_t buf[MSG_MAX];

	for (uint32_t seq = 0; seq < cl->n; seq++) {
		int ret;

		fill(buf, size_of(seq), cl->tag, seq);
		ret = rv_msg_send(cl->c, buf, size_of(seq), 30000);
		if (ret < 0) {
			char d[256];

			fprintf(stderr, "send %u: %s: %s\n", seq, rs_errormsg(),
				rv_conn_describe(cl->c, d, sizeof(d)));
			cl->err = ret;
			break;
		}
	}
	return NULL;
}

/* Dumps every conn's state when the echoes stop moving (diagnostics). */
static struct client *wd_cl;
static int wd_n;
static atomic_bool wd_stop;

static void *watchdog_main(void *arg)
{
	long last = -1;
	char d[256];

	(void)arg;
	while (!atomic_load(&wd_stop)) {
		long sum = 0;

		for (int i = 0; i < 20 && !atomic_load(&wd_stop); i++)
			usleep(100000);
		for (int i = 0; i < wd_n; i++)
			sum += wd_cl[i].got;
		if (sum != last) {
			last = sum;
			continue;
		}
		fprintf(stderr, "stalled at %ld echoes, echoed %ld:\n", sum,
			atomic_load(&srv.echoed));
		for (int i = 0; i < wd_n; i++)
			fprintf(stderr, "  client %d got %ld: %s\n", i,
				wd_cl[i].got,
				rv_conn_describe(wd_cl[i].c, d, sizeof(d)));
		pthread_mutex_lock(&srv.lock);
		for (int k = 0; k < VT_MAX_CONNS; k++)
			if (srv.conns[k])
				fprintf(stderr, "  server: %s\n",
					rv_conn_describe(srv.conns[k], d,
							 sizeof(d)));
		pthread_mutex_unlock(&srv.lock);
	}
	return NULL;
}

/* Three clients, each 600 messages of every size, echoed back. */
static void echo_many_clients(void **state)
{
	enum { NC = 3, N = 600 };
	struct client cl[NC];
	pthread_t tx[NC], wd;
	struct rv_stats st;
	double t0 = vt_now();

	for (int i = 0; i < NC; i++) {
		cl[i] = (struct client){ .c = client_conn(), .tag = 100 + i,
					 .n = N };
		assert_int_equal(rv_conn_msg_max(cl[i].c), MSG_MAX);
	}
	wd_cl = cl;
	wd_n = NC;
	pthread_create(&wd, NULL, watchdog_main, NULL);
	for (int i = 0; i < NC; i++) {
		pthread_create(&cl[i].rx, NULL, rx_main, &cl[i]);
		pthread_create(&tx[i], NULL, tx_main, &cl[i]);
	}
	for (int i = 0; i < NC; i++) {
		pthread_join(tx[i], NULL);
		pthread_join(cl[i].rx, NULL);
	}
	atomic_store(&wd_stop, true);
	pthread_join(wd, NULL);
	for (int i = 0; i < NC; i++) {
		assert_int_equal(cl[i].err, 0);
		assert_int_equal(cl[i].got, N);
		rv_conn_stats(cl[i].c, &st);
		printf("client %d: %llu sent, %llu received, %llu credit msgs,"
		       " spin %.1f ms, blocked %.1f ms, %llu wakeups\n", i,
		       (unsigned long long)st.sends,
		       (unsigned long long)st.recvs,
		       (unsigned long long)st.credit_msgs, st.spin_ns / 1e6,
		       st.block_ns / 1e6, (unsigned long long)st.wakeups);
		rv_conn_close(&cl[i].c);
	}
	printf("%d x %d echoes of sizes 0..%u in %.2f s\n", NC, N, MSG_MAX,
	       vt_now() - t0);
}

/* One way, client -> server: the server never sends data back, so its
 * credits must come back in credit-only messages. */
static void one_way_to_server(void **state)
{
	enum { N = 400 };
	struct rv_conn *c = client_conn();
	struct rv_stats st;
	uint8_t one = 0xee;	/* the echo workers drop 1-byte 0xee */
	long before = atomic_load(&srv.echoed);

	for (int i = 0; i < N; i++)
		VT_CHECK(rv_msg_send(c, &one, 1, 30000));
	for (int i = 0; i < 3000 && atomic_load(&srv.echoed) - before < N;
	     i++)
		usleep(10000);
	assert_int_equal(atomic_load(&srv.echoed) - before, N);
	rv_conn_stats(c, &st);
	printf("one way to server: %d sent, %llu credit messages received "
	       "back as %llu recvs\n", N, (unsigned long long)st.credit_msgs,
	       (unsigned long long)st.recvs);
	assert_int_equal(st.recvs, 0);
	rv_conn_close(&c);
}

/* One way, server -> client, on a conn the server got from the listener,
 * to a slow consumer: flow control holds the fast sender back. */
struct slow {
	struct rv_conn *c;
	int n, got, err;
};

static void *slow_main(void *arg)
{
	struct slow *sl = arg;
	struct rv_msg m;

	while (sl->got < sl->n) {
		int k = rv_msg_recv(sl->c, &m, 1, 30000);

		if (k < 0) {
			sl->err = k;
			break;
		}
		if (m.len != 4 || *(uint32_t *)m.data != (uint32_t)sl->got)
			sl->err = -1;
		rv_msg_release(&m);
		if (++sl->got % 50 == 0)
			usleep(20000);
	}
	return NULL;
}

static void one_way_to_client(void **state)
{
	enum { N = 500 };
	struct rv_conn *sc = NULL;
	struct rv_stats st;
	struct slow sl = { .n = N };
	pthread_t t;

	/* mark the server's older conns, then find the new one */
	pthread_mutex_lock(&srv.lock);
	for (int k = 0; k < VT_MAX_CONNS; k++)
		if (srv.conns[k])
			rv_conn_set_user(srv.conns[k], (void *)2);
	pthread_mutex_unlock(&srv.lock);
	sl.c = client_conn();
	for (int i = 0; i < 500 && !sc; i++) {
		pthread_mutex_lock(&srv.lock);
		for (int k = 0; k < VT_MAX_CONNS; k++)
			if (srv.conns[k] && !rv_conn_user(srv.conns[k]))
				sc = srv.conns[k];
		pthread_mutex_unlock(&srv.lock);
		if (!sc)
			usleep(10000);
	}
	assert_non_null(sc);
	rv_conn_set_user(sc, (void *)1);
	pthread_create(&t, NULL, slow_main, &sl);
	for (uint32_t i = 0; i < N; i++)
		VT_CHECK(rv_msg_send(sc, &i, sizeof(i), 30000));
	pthread_join(t, NULL);
	assert_int_equal(sl.err, 0);
	assert_int_equal(sl.got, N);
	rv_conn_stats(sl.c, &st);
	printf("one way to client: %d received by a slow consumer, client "
	       "sent %llu credit messages\n", sl.got,
	       (unsigned long long)st.credit_msgs);
	assert_true(st.credit_msgs > 0);
	assert_int_equal(st.sends, 0);
	rv_conn_close(&sl.c);
}

static void limits(void **state)
{
	static uint8_t big[MSG_MAX + 1];
	struct rv_conn *c = client_conn();
	struct rv_msg m;
	void *slot;

	assert_int_equal(rv_msg_send(c, big, MSG_MAX + 1, 1000), RS_E_TOOBIG);
	assert_int_equal(rv_msg_recv(c, &m, 1, 0), RS_E_TIMEOUT);
	assert_int_equal(rv_msg_recv(c, &m, 1, 50), RS_E_TIMEOUT);
	/* zero-copy form, then the echo comes back */
	assert_int_equal(rv_msg_get_buf(c, &slot, 1000), (int)MSG_MAX);
	memcpy(slot, "hello", 5);
	VT_CHECK(rv_msg_post(c, 5));
	assert_int_equal(rv_msg_post(c, 5), RS_E_INVAL);
	assert_int_equal(rv_msg_recv(c, &m, 1, 10000), 1);
	assert_int_equal(m.len, 5);
	assert_memory_equal(m.data, "hello", 5);
	rv_msg_release(&m);
	assert_int_equal(rv_conn_status(c), 0);
	rv_conn_close(&c);
}

/* An external event loop: poll on rv_conn_fd(), arm before sleeping. */
static void event_loop(void **state)
{
	struct rv_conn *c = client_conn();
	struct rv_msg m;
	struct pollfd pf;
	int fd = rv_conn_fd(c), got = 0;

	VT_CHECK(fd);
	assert_int_equal(rv_conn_fd(c), fd);	/* made once */
	pf = (struct pollfd){ .fd = fd, .events = POLLIN };
	/* idle and armed: the fd stays quiet */
	assert_int_equal(rv_conn_arm(c), 0);
	assert_int_equal(poll(&pf, 1, 200), 0);
	/* fewer than the credits: we only start receiving after sending */
	for (int i = 0; i < CREDITS - 2; i++)
		VT_CHECK(rv_msg_send(c, &i, sizeof(i), 5000));
	while (got < CREDITS - 2) {
		int n = rv_msg_recv(c, &m, 1, 0);

		if (n == 1) {
			assert_int_equal(*(int *)m.data, got);
			rv_msg_release(&m);
			got++;
			continue;
		}
		assert_int_equal(n, RS_E_TIMEOUT);
		if (rv_conn_arm(c) > 0)
			continue;	/* work arrived while arming */
		assert_int_equal(poll(&pf, 1, 10000), 1);
		VT_CHECK(rv_conn_progress(c));
	}
	/* late send completions may still come in; then quiet again */
	for (int i = 0; i < 100 && rv_conn_arm(c) > 0; i++)
		;
	assert_int_equal(poll(&pf, 1, 100), 0);
	rv_conn_close(&c);
}

/* Handle listener events for a while (one CONNECTED at most). */
static void *one_event_main(void *arg)
{
	struct rv_event ev;

	if (rv_listener_event(arg, &ev, 3000) == 0)
		assert_int_equal(ev.type, RV_EV_CONNECTED);
	return NULL;
}

/* A listener with room for one conn refuses the second. */
static void max_conns(void **state)
{
	struct rv_listener_attr la;
	struct rv_listener *l;
	struct rv_conn *a = NULL, *b = NULL;
	pthread_t t;
	int ret;

	rv_listener_attr_init(&la);
	la.max_conns = 1;
	VT_CHECK(rv_listen(dev, vt_ip, 0, &la, &l));
	/* the accept loop must run while a client connects */
	pthread_create(&t, NULL, one_event_main, l);
	VT_CHECK(rv_connect(dev, vt_ip, rv_listener_port(l), NULL, &a));
	pthread_join(t, NULL);
	/* the accept loop answers (rejects) while we connect */
	pthread_create(&t, NULL, one_event_main, l);
	ret = rv_connect(dev, vt_ip, rv_listener_port(l), NULL, &b);
	pthread_join(t, NULL);
	printf("second conn to a full listener: %d (%s)\n", ret,
	       rs_errormsg());
	assert_int_equal(ret, -ECONNREFUSED);
	assert_null(b);
	rv_conn_close(&a);
	rv_listener_close(&l);	/* closes the accepted conn too */
	/* nobody listens there any more */
	assert_int_equal(rv_connect(dev, vt_ip, 1, NULL, &b), -ECONNREFUSED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(echo_many_clients),
		cmocka_unit_test(one_way_to_server),
		cmocka_unit_test(one_way_to_client),
		cmocka_unit_test(limits),
		cmocka_unit_test(event_loop),
		cmocka_unit_test(max_conns),
	};

	vt_env();
	return cmocka_run_group_tests(tests, setup, teardown);
}
