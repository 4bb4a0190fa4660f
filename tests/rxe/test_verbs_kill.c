/*
 * test_verbs_kill.c - a peer that dies turns into errors, never a hang.
 *
 * A forked child is the server (its own device handle, region and accept
 * loop). The parent connects, starts a large asynchronous READ batch, lets
 * it run, and SIGKILLs the child: the batch must finish within a bound
 * (asserted: 10 s) with the completed requests intact and the rest failed
 * with RS_E_DISCONNECTED or RS_E_VERBS, and every later operation must fail
 * at once. A second case kills the server while the conn idles and checks
 * that the next READ fails within the bound too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "verbs_common.h"

#define REGION (64u << 20)
#define BOUND_S 10.0

struct child {
	pid_t pid;
	uint16_t port;
};

/* The server process: report the port, then accept for ever. */
static void child_main(int wfd)
{
	struct rv_dev *d;
	struct vt_srv s;

	if (rv_dev_open(&d, vt_dev_name) < 0)
		_exit(2);
	vt_srv_start(&s, d, REGION, 1, NULL);
	{
		uint16_t port = rv_listener_port(s.l);

		if (write(wfd, &port, sizeof(port)) != sizeof(port))
			_exit(3);
	}
	for (;;)
		pause();
}

/*
 * Children are forked before this process touches verbs at all: a child
 * forked later would inherit librdmacm's open device fd, and its QP and
 * MR would outlive it inside our copy of that fd (so "killed" would not
 * mean "gone").
 */
static struct child spawn(void)
{
	struct child ch = { 0 };
	int p[2];

	if (pipe(p))
		exit(1);
	ch.pid = fork();
	if (ch.pid < 0)
		exit(1);
	if (ch.pid == 0) {
		close(p[0]);
		child_main(p[1]);
	}
	close(p[1]);
	if (read(p[0], &ch.port, sizeof(ch.port)) != sizeof(ch.port)) {
		fprintf(stderr, "server child failed to start\n");
		exit(1);
	}
	close(p[0]);
	return ch;
}

static struct child child_a, child_b;

static void reap(struct child *ch)
{
	int st;

	assert_int_equal(waitpid(ch->pid, &st, 0), ch->pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static bool is_conn_error(int code)
{
	return code == RS_E_DISCONNECTED || code == RS_E_VERBS;
}

static void killed_mid_batch(void **state)
{
	enum { N = 32768, LEN = 8192 };
	struct child ch = child_a;
	struct rv_read_req *reqs = calloc(N, sizeof(*reqs));
	struct rv_dev *dev;
	struct rv_conn *c;
	struct rv_mr *local;
	struct vt_region info;
	struct rv_batch b;
	int ok = 0, failed = 0, other = 0, ret;
	double t_kill, dt;

	VT_CHECK(rv_dev_open(&dev, vt_dev_name));
	c = vt_connect(dev, ch.port, NULL, &info);
	VT_CHECK(rv_mem_alloc(dev, (size_t)N * LEN / 16, RV_ACC_LOCAL_WRITE,
			      &local));
	for (int i = 0; i < N; i++)
		reqs[i] = (struct rv_read_req){
			.local = (uint8_t *)local->addr +
				 (size_t)(i % (N / 16)) * LEN,
			.lkey = local->lkey, .len = LEN,
			.remote = info.addr + (uint64_t)i * LEN % REGION,
			.rkey = info.rkey, .status = 1,
		};
	VT_CHECK(rv_read_post(c, &b, reqs, N));
	/* let it run a while: it must still be going when the peer dies */
	ret = rv_batch_wait(c, &b, 300);
	assert_int_equal(ret, RS_E_TIMEOUT);
	assert_false(rv_batch_done(&b));
	kill(ch.pid, SIGKILL);
	t_kill = vt_now();
	ret = rv_batch_wait(c, &b, 60000);
	dt = vt_now() - t_kill;
	for (int i = 0; i < N; i++) {
		if (reqs[i].status == 0)
			ok++;
		else if (is_conn_error(reqs[i].status))
			failed++;
		else
			other++;
	}
	printf("peer killed mid-batch: batch finished %.3f s after the kill "
	       "with %d (%s); %d READs done, %d failed, %d other\n", dt, ret,
	       rs_errormsg(), ok, failed, other);
	assert_true(is_conn_error(ret));
	assert_true(dt < BOUND_S);
	assert_true(ok > 0 && failed > 0);
	assert_int_equal(other, 0);
	/* every later operation fails at once */
	dt = vt_now();
	assert_true(is_conn_error(rv_read_batch(c, reqs, 4, 5000)));
	assert_true(is_conn_error(rv_msg_send(c, "x", 1, 5000)));
	assert_true(is_conn_error(rv_conn_status(c)));
	assert_true(vt_now() - dt < 1.0);
	rv_conn_close(&c);
	rv_mr_free(&local);
	rv_dev_close(&dev);
	reap(&ch);
	free(reqs);
}

static void killed_while_idle(void **state)
{
	struct child ch = child_b;
	struct rv_dev *dev;
	struct rv_conn *c;
	struct rv_mr *local;
	struct vt_region info;
	struct rv_read_req r;
	double t0, dt;
	int ret;

	VT_CHECK(rv_dev_open(&dev, vt_dev_name));
	c = vt_connect(dev, ch.port, NULL, &info);
	VT_CHECK(rv_mem_alloc(dev, 4096, RV_ACC_LOCAL_WRITE, &local));
	r = (struct rv_read_req){ .local = local->addr, .lkey = local->lkey,
				  .len = 4096, .remote = info.addr,
				  .rkey = info.rkey };
	VT_CHECK(rv_read_batch(c, &r, 1, 10000));
	kill(ch.pid, SIGKILL);
	reap(&ch);
	/* READs right after the death may still be answered (the dead
	 * peer's pinned pages and QP linger until its kernel side tears
	 * down); the first error must come within the bound */
	t0 = vt_now();
	do
		ret = rv_read_batch(c, &r, 1, 60000);
	while (ret == 0 && vt_now() - t0 < 2 * BOUND_S);
	dt = vt_now() - t0;
	printf("peer killed while idle: READs failed %.3f s after the kill "
	       "with %d (%s)\n", dt, ret, rs_errormsg());
	assert_true(is_conn_error(ret));
	assert_true(dt < BOUND_S);
	rv_conn_close(&c);
	rv_mr_free(&local);
	rv_dev_close(&dev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(killed_mid_batch),
		cmocka_unit_test(killed_while_idle),
	};

	vt_env();
	signal(SIGPIPE, SIG_IGN);
	child_a = spawn();
	child_b = spawn();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
