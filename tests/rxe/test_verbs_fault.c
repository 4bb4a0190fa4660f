/*
 * test_verbs_fault.c - every verbs, rdma_cm and allocation call of src/verbs
 * fails once, and the error and unwind paths behind it stay clean.
 *
 * One run is a representative sequence: device open, two registered
 * regions, listen, connect (an accepting thread: listener events), a READ
 * batch of the server's region, a message and its echo, then closing
 * everything. A clean run (nothing injected) must succeed and tells how
 * many calls of each injection site (src/verbs/rv_fi.h) it makes. Then the
 * sequence runs again with one call failing: for each site the first, the
 * middle and the last of its calls (RS_FI_ALL=1: every call of every site,
 * i.e. every injection point). Each such run must end, by an error returned
 * from some call (< 0 with a message) or by success when the code absorbed
 * the failure (a retry or a fallback), with every resource released: the
 * process's open files are counted after each run, and in the ASan tree
 * LeakSanitizer reports any leaked allocation at exit. No crash, no hang
 * (every wait is bounded and the ctest timeout catches the rest). A last
 * clean run must succeed again. Prints the points exercised.
 *
 * Only Debug and sanitizer builds have injection (RS_FAULT_INJECT); the
 * release build skips (77).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "verbs_common.h"
#include "verbs/rv_fi.h"

#ifdef RS_FAULT_INJECT

#define T_MS 3000
#define REGION (64u << 10)

struct run {
	struct rv_dev *d;
	struct rv_listener *l;
	struct rv_mr *region, *local;
	struct rv_conn *c;
	struct vt_region info;
	pthread_t acc;
	bool acc_started;
	atomic_bool stop;
	int srv_ret;		/* the accepting side's first error */
};

/* Server side: accept one conn, echo one message, wait for the
 * disconnect. On any error it closes its conn, which fails the client's
 * next call at once rather than after a timeout. */
static void *acceptor(void *arg)
{
	struct run *r = arg;
	struct rv_conn *sc = NULL;
	struct rv_event ev;
	struct rv_msg m;
	int ret = 0, got = 0;

	rv_fi_enroll(true);
	while (!atomic_load(&r->stop) && !sc) {
		ret = rv_listener_event(r->l, &ev, 200);
		if (ret == 0 && ev.type == RV_EV_CONNECTED)
			sc = ev.conn;
		else if (ret < 0 && ret != RS_E_TIMEOUT)
			goto out;
	}
	while (!atomic_load(&r->stop) && !got) {
		ret = rv_listener_recv(r->l, &m, 1, 200);
		if (ret == RS_E_TIMEOUT)
			continue;
		if (ret < 0)
			goto out;
		got = 1;
		ret = rv_msg_send(m.conn, m.data, m.len, T_MS);
		rv_msg_release(&m);
		if (ret < 0)
			goto out;
	}
	while (!atomic_load(&r->stop)) {
		ret = rv_listener_event(r->l, &ev, 200);
		if (ret == 0 && ev.type == RV_EV_DISCONNECTED)
			break;
		if (ret < 0 && ret != RS_E_TIMEOUT)
			goto out;
	}
	ret = 0;
out:
	if (ret < 0 && ret != RS_E_TIMEOUT)
		r->srv_ret = ret;
	rv_conn_close(&sc);
	rv_fi_enroll(false);
	return NULL;
}

static int client_part(struct run *r)
{
	struct rv_read_req q[4];
	struct rv_conn_attr a;
	struct rv_msg m;
	const void *p;
	size_t len;
	char ping[] = "ping", *buf = r->local->addr;
	int ret;

	rv_conn_attr_init(&a);
	a.connect_timeout_ms = T_MS;
	ret = rv_connect(r->d, vt_ip, rv_listener_port(r->l), &a, &r->c);
	if (ret < 0)
		return ret;
	p = rv_conn_peer_data(r->c, &len);
	assert_int_equal(len, sizeof(r->info));
	memcpy(&r->info, p, sizeof(r->info));
	for (int i = 0; i < 4; i++)
		q[i] = (struct rv_read_req){ .local = buf + i * 1024,
					     .lkey = r->local->lkey,
					     .len = 1024,
					     .remote = r->info.addr + i * 4096,
					     .rkey = r->info.rkey };
	ret = rv_read_batch(r->c, q, 4, T_MS);
	if (ret < 0)
		return ret;
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 1024; j += 97)
			assert_int_equal((uint8_t)buf[i * 1024 + j],
					 vt_byte((uint64_t)i * 4096 + j));
	ret = rv_msg_send(r->c, ping, sizeof(ping), T_MS);
	if (ret < 0)
		return ret;
	ret = rv_msg_recv(r->c, &m, 1, T_MS);
	if (ret < 0)
		return ret;
	assert_int_equal(m.len, sizeof(ping));
	assert_memory_equal(m.data, ping, sizeof(ping));
	rv_msg_release(&m);
	return 0;
}

/* One run of the sequence; 0 or the first error. Releases everything. */
static int run_once(void)
{
	struct run r = { 0 };
	struct rv_listener_attr la;
	int ret;

	rv_fi_enroll(true);
	ret = rv_dev_open(&r.d, vt_dev_name);
	if (ret < 0)
		goto out;
	ret = rv_mem_alloc(r.d, REGION, RV_ACC_REMOTE_READ, &r.region);
	if (ret < 0)
		goto out;
	vt_fill(r.region->addr, REGION);
	ret = rv_mem_alloc(r.d, REGION, RV_ACC_LOCAL_WRITE, &r.local);
	if (ret < 0)
		goto out;
	r.info = (struct vt_region){ .addr = (uintptr_t)r.region->addr,
				     .len = REGION, .rkey = r.region->rkey };
	rv_listener_attr_init(&la);
	la.conn.priv = &r.info;
	la.conn.priv_len = sizeof(r.info);
	la.max_conns = 4;
	ret = rv_listen(r.d, vt_ip, 0, &la, &r.l);
	if (ret < 0)
		goto out;
	assert_int_equal(pthread_create(&r.acc, NULL, acceptor, &r), 0);
	r.acc_started = true;
	ret = client_part(&r);
out:
	if (ret < 0)
		assert_true(rs_errormsg()[0] != '\0');
	rv_conn_close(&r.c);
	atomic_store(&r.stop, true);
	if (r.acc_started)
		pthread_join(r.acc, NULL);
	if (!ret && r.srv_ret)
		ret = r.srv_ret;
	rv_listener_close(&r.l);
	rv_mr_free(&r.local);
	rv_mr_free(&r.region);
	rv_dev_close(&r.d);
	rv_fi_enroll(false);
	return ret;
}

static void every_site(void **state)
{
	unsigned long calls[RV_FI_NSITES], points = 0, fired = 0, failed = 0;
	bool all = getenv("RS_FI_ALL") && atoi(getenv("RS_FI_ALL"));
	int fds0, sites = 0;

	(void)state;
	VT_CHECK(run_once());	/* warm-up: libraries load, caches fill */
	fds0 = vt_count_fds();
	rv_fi_arm(RV_FI_ANY, 0);
	VT_CHECK(run_once());
	for (int s = 0; s < RV_FI_NSITES; s++) {
		calls[s] = rv_fi_calls(s);
		sites += calls[s] > 0;
	}
	printf("clean run: %lu injectable calls at %d sites\n",
	       rv_fi_calls(RV_FI_ANY), sites);
	assert_int_equal(vt_count_fds(), fds0);
	for (int s = 0; s < RV_FI_NSITES; s++) {
		unsigned long c = calls[s], prev = 0;

		for (unsigned long k = 1; k <= c; k++) {
			int ret;

			if (!all && k != 1 && k != (c + 1) / 2 && k != c)
				continue;
			if (k == prev)
				continue;
			prev = k;
			rv_fi_arm(s, k);
			ret = run_once();
			points++;
			fired += rv_fi_fired();
			failed += ret < 0;
			if (rv_fi_fired() && ret < 0)
				printf("  %s #%lu: %s\n", rv_fi_site_name(s),
				       k, rs_errormsg());
			if (vt_count_fds() != fds0)
				fail_msg("%s #%lu left %d files open",
					 rv_fi_site_name(s), k,
					 vt_count_fds() - fds0);
		}
	}
	rv_fi_arm(RV_FI_ANY, 0);
	VT_CHECK(run_once());
	assert_int_equal(vt_count_fds(), fds0);
	printf("%lu injection points run (%s), %lu failures injected, %lu "
	       "runs ended in an error, the rest absorbed it\n", points,
	       all ? "every call of every site" : "first, middle, last call "
	       "of each site", fired, failed);
	assert_true(points >= (unsigned long)sites && fired > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_site),
	};

	vt_env();
	return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void)
{
	printf("no failure injection in this build (RS_FAULT_INJECT): "
	       "skipped\n");
	return 77;
}

#endif
