/*
 * test_server_kill.c - clients that vanish must not hurt the node.
 *
 * The node runs in this process (a thread). Client processes (this binary
 * re-executed with --child) misbehave while a well-behaved client in a
 * thread is checked all along (PUT + GET + verify):
 *   kill   sends a burst of large UPDATE requests and is SIGKILLed while
 *          the node is still working on them (mid-request, replies
 *          pending, receive buffers of the dead QP in use);
 *   stuck  keeps sending requests and never consumes a reply, so the node
 *          runs out of send credits toward it: the node must drop it after
 *          its send timeout instead of blocking workers for ever.
 * After each phase the node must be serving, and its connection count
 * (STATS "connections") must come back to the clients still alive.
 *
 * Two rules of the node's release path are checked on the way (server.c,
 * "checked rules"): with two workers, one conn's messages are handled one
 * at a time, the rest wait (STATS requests_deferred must grow: the cap
 * was reached; in Debug and sanitizer builds a breach aborts the node);
 * and a worker never touches a conn after its last release: in those
 * builds the last release of a dead conn pauses 50 ms after its decrement
 * while the run thread frees the conn, so a later access is a
 * use-after-free for ASan, and debug.dead_releases must show that such
 * releases happened.
 */
#include <signal.h>
#include <sys/wait.h>

#include "server_harness.h"

#define DIM 32
#define BATCH 1500

static struct sv_node node;
static struct sv_good good = { .node = &node, .nkeys = 16, .dim = 4,
				 .span = 200 };

/* ---- child side ---- */

static size_t enc_update(struct sv_cli *k, uint32_t id, uint64_t gen,
			 uint32_t n, uint64_t salt)
{
	static uint64_t keys[BATCH];
	static float g[BATCH * DIM];
	struct proto_keys_req q = { .table_id = id, .table_gen = gen, .n = n,
				    .dim = DIM, .flags = PROTO_KF_CREATE,
				    .keys = keys, .rows = g };
	struct proto_hdr h;
	int len;

	for (uint32_t i = 0; i < n; i++) {
		keys[i] = salt * 100000 + i;
		for (int j = 0; j < DIM; j++)
			g[i * DIM + j] = 0.001f * (float)(j + 1);
	}
	sv_hdr(k, &h);
	len = proto_enc_keys_req(k->buf, k->cap, &h, PROTO_OP_UPDATE, &q);
	SV_OK(len);
	return (size_t)len;
}

static int child(char **argv)
{
	const char *mode = argv[2], *ip = argv[3];
	uint16_t port = (uint16_t)atoi(argv[4]);
	uint32_t id = (uint32_t)strtoul(argv[5], NULL, 10);
	uint64_t gen = strtoull(argv[6], NULL, 16);
	struct sv_cli k;

	sv_memlock();
	sv_cli_open(&k, ip, port);
	if (!strcmp(mode, "kill")) {
		for (int i = 0; i < 12; i++) {
			size_t len = enc_update(&k, id, gen, BATCH,
						(uint64_t)getpid() + i);

			SV_OK(rv_msg_send(k.c, k.buf, len, SV_TIMEOUT_MS));
		}
		printf("sent\n");
		fflush(stdout);
		pause(); /* the parent kills us now */
		return 1;
	}
	/* stuck: send until the node drops us; never receive */
	for (int i = 0; i < 10000; i++) {
		size_t len = enc_update(&k, id, gen, 16, (uint64_t)i);
		int ret = rv_msg_send(k.c, k.buf, len, 20000);

		if (ret < 0) {
			printf("dropped after %d requests: %s\n", i,
			       rs_strerror(ret));
			fflush(stdout);
			_exit(0); /* keep the dead conn: exit, no close */
		}
	}
	printf("never dropped\n");
	return 1;
}

/* ---- parent side ---- */

struct kid {
	pid_t pid;
	FILE *out;
};

static void spawn(struct kid *c, const char *mode,
		  const struct proto_table_info *t)
{
	char port[16], id[16], gen[24];
	int fds[2];

	snprintf(port, sizeof(port), "%u", node.port);
	snprintf(id, sizeof(id), "%u", t->id);
	snprintf(gen, sizeof(gen), "%" PRIx64, t->generation);
	if (pipe(fds))
		sv_die("pipe");
	c->pid = fork();
	if (c->pid < 0)
		sv_die("fork");
	if (c->pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl("/proc/self/exe", "test_server_kill", "--child", mode,
		      node.ip, port, id, gen, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	c->out = fdopen(fds[0], "r");
}

static void read_line(struct kid *c, char *line, size_t len)
{
	if (!fgets(line, (int)len, c->out))
		sv_die("child %d said nothing", (int)c->pid);
	line[strcspn(line, "\n")] = '\0';
}

static int reap(struct kid *c)
{
	int status;

	waitpid(c->pid, &status, 0);
	fclose(c->out);
	return status;
}

/* Wait until the node counts `want` connections (dead ones cleaned up). */
static void wait_conns(struct sv_cli *ctl, uint64_t want, const char *what)
{
	double t0 = sv_now();
	uint64_t n;

	while ((n = sv_stat(ctl, PROTO_NO_TABLE, "connections")) != want) {
		SV_CHECK(sv_now() - t0 < 30, "%s: %llu connections after "
			 "30 s, expected %llu", what, (unsigned long long)n,
			 (unsigned long long)want);
		usleep(100 * 1000);
	}
	printf("%s: node back to %llu connections after %.1f s\n", what,
	       (unsigned long long)want, sv_now() - t0);
}

int main(int argc, char **argv)
{
	struct proto_table_spec spec;
	struct proto_table_info t;
	struct sv_cli ctl;
	char line[256];
	unsigned long r0;
	uint64_t deferred;
#ifdef RS_DEBUG_LOCKS
	uint64_t dead;
#endif
	struct kid c;
	const char *ip;
	int status;

	if (argc >= 7 && !strcmp(argv[1], "--child"))
		return child(argv);
	ip = sv_ip();
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	sv_memlock();
	setenv("RS_TEST_RELEASE_DELAY_US", "50000", 1);
	sv_node_start(&node, ip, NULL);
	printf("node on %s\n", node.addr);
	sv_cli_open(&ctl, node.ip, node.port);
	sv_spec(&spec, "k", DIM, OPTIM_ADAGRAD);
	spec.capacity = 65536;
	SV_OK(sv_create(&ctl, &spec, &t));
	sv_good_start(&good);
	while (!good.rounds)
		usleep(10000);

	for (int round = 0; round < 3; round++) {
		r0 = good.rounds;
		spawn(&c, "kill", &t);
		read_line(&c, line, sizeof(line));
		SV_CHECK(!strcmp(line, "sent"), "child: %s", line);
		kill(c.pid, SIGKILL);
		status = reap(&c);
		SV_CHECK(WIFSIGNALED(status), "child was not killed");
		printf("round %d: client killed with 12 x %d-key updates in "
		       "flight\n", round, BATCH);
		wait_conns(&ctl, 2, "after the kill");
		SV_CHECK(good.rounds > r0, "good client starved");
	}
	deferred = sv_stat(&ctl, PROTO_NO_TABLE, "requests_deferred");
	printf("requests that waited behind their conn's share of the "
	       "workers: %llu\n", (unsigned long long)deferred);
	SV_CHECK(deferred > 0, "no request waited for its conn's share of "
		 "the workers: the fairness cap was never reached");
#ifdef RS_DEBUG_LOCKS
	dead = sv_stat(&ctl, PROTO_NO_TABLE, "debug.dead_releases");
	printf("last releases of a dead conn (each paused after its "
	       "decrement while the conn was freed): %llu\n",
	       (unsigned long long)dead);
	SV_CHECK(dead > 0, "no worker released a message of a dead conn: "
		 "the release race was not exercised");
#endif

	r0 = good.rounds;
	spawn(&c, "stuck", &t);
	read_line(&c, line, sizeof(line));
	status = reap(&c);
	printf("stuck client: %s\n", line);
	SV_CHECK(!strncmp(line, "dropped", 7) && WIFEXITED(status) &&
		 WEXITSTATUS(status) == 0, "stuck client was not dropped");
	wait_conns(&ctl, 2, "after the stuck client");
	SV_CHECK(good.rounds > r0, "good client starved by the stuck one");

	sv_good_stop(&good);
	printf("well-behaved client: %lu verified rounds\n", good.rounds);
	sv_cli_close(&ctl);
	sv_node_stop(&node);
	printf("ok\n");
	return 0;
}
