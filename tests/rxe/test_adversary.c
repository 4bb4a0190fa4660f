/*
 * test_adversary.c - hostile peers against a memory node, with a
 * well-behaved client checked all along.
 *
 * The node is tools/recstore-server, run as a child process (so that its
 * RSS is its own). The attackers are this process (and, for "vanish",
 * copies of it re-executed with --child) speaking raw libibverbs +
 * librdmacm (adversary_raw.h), never src/verbs. The good client is the
 * project's client library (include/recstore/client.h) in a thread: it
 * PUTs NK known rows, then loops over one-sided GETs, GET RPCs and SGD
 * UPDATEs whose results it computes (lr 0.5, gradient 0.5: each update
 * takes exactly 0.25 off every element), and checks every status and every
 * value. Addresses: the node listens on RS_RDMA_IP; attackers connect from
 * the first address of RS_RDMA_IPS, the good client from the second (the
 * guest of ci/rxe-vm.sh carries 10.77.0.2-5 on veth0), so that a per-peer
 * limit can refuse the attacker without refusing the good client.
 *
 * Attacks (select with RS_ADV_ONLY=a,b or argv; all by default):
 *   handshake  rdma_cm private data absent, random, and absurd (msg_max 0,
 *              2^32-1, 2^30, 64 MiB; slots 0 / 0xffff; READ depth 0 /
 *              0xffff; wrong magic or version; a caller-bytes count past
 *              the data); accepted ones are held open while RSS is read.
 *   garbage    one conn per case: random bytes, lying body_len, lying key
 *              count and dim, a SEND without immediate, an unknown
 *              immediate type, a credit message granting 2^23-1 credits
 *              300 times, a SEND larger than the node's receive buffer, an
 *              empty SEND. None may get a success reply, and each must
 *              end in an error reply or a disconnect.
 *   flood      valid requests posted as fast as the send queue drains,
 *              ignoring the node's credits.
 *   withhold   conns that send requests and then never post receive
 *              buffers, or post a few and never return credits.
 *   conns      up to RS_ADV_CONNS (1000) connections from the attacker's
 *              address, held open; then a NEW good client must still get
 *              in from its own address.
 *   vanish     attacker processes SIGKILLed with large UPDATEs in flight;
 *              then one whose source address is removed before it dies.
 *   rdma       RDMA WRITE, WRITE_WITH_IMM, compare-and-swap, fetch-and-add
 *              into the advertised row and index regions, READs past their
 *              ends, before their start and with a wrong rkey: every one
 *              must complete in error, and the regions (read back raw)
 *              must be byte-identical before and after.
 * Each attack records the node's RSS (VmRSS + HugetlbPages) before, at its
 * peak, and after; the good client's operations, errors, wrong values and
 * p99 latency (against a quiet phase of the same run); the node's stderr
 * lines. Asserted per attack: no good-client error or wrong value, the
 * node alive and serving (a fresh client connects and reads), RSS growth
 * below ADV_RSS_BOUND, plus the attack's own check. p99 is printed, never
 * asserted. A node that dies is restarted for the next attack.
 */
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proto.h"
#include "recstore/client.h"
#include "recstore/error.h"
#include "adversary_raw.h"
#include "stats.h"

#if defined(__SANITIZE_THREAD__)
/*
 * ThreadSanitizer: librdmacm opens one verbs context per device and process,
 * so the attackers' raw QPs (this thread) and the good client's conns share
 * it, and the good client's async-event thread (src/verbs/rv_dev.c) reads
 * and acks the attackers' QP events (a garbage case fails its QP). The QP
 * was written here before the create_qp system call and its event comes
 * back through the kernel (a read() on the async fd): an ordering TSan
 * cannot see, inside libibverbs and the rxe provider, which are not
 * instrumented. Only that report is suppressed, and only in this test,
 * the one process that mixes raw verbs with the library's.
 */
/* The TSan runtime looks it up in the dynamic symbol table: exported here,
 * and the test links with -rdynamic in TSan builds (adversary.cmake). */
__attribute__((visibility("default"))) const char *
__tsan_default_suppressions(void);
__attribute__((visibility("default"))) const char *
__tsan_default_suppressions(void)
{
	return "race:ibv_ack_async_event\n";
}
#endif

#ifndef RS_SERVER_BIN
#error "RS_SERVER_BIN: path of tools/recstore-server (adversary.cmake)"
#endif

#define NK 32			/* good keys */
#define DIM 8
#define UPD_KEYS 4		/* keys per good update */
#define ADV_RSS_BOUND (64ll << 20)
#define MAX_LAT 400000
#define NODE_MSG_MAX (64u << 10)	/* the node's max_message_bytes */

/* ---- environment ---- */

static const char *node_ip, *adv_ip, *good_ip;
static char self_exe[4096];

/* ---- the node process ---- */

static struct {
	pid_t pid;
	char addr[96];
	uint16_t port;
	char log[256];		/* its stderr */
	char cfg[256];
	int status;		/* its wait status once reaped */
} node;

static void node_start(void)
{
	char listen[80], line[256];
	int o[2], fd;
	FILE *out, *f;

	snprintf(node.cfg, sizeof(node.cfg), "/tmp/adv-node-%d.json",
		 (int)getpid());
	snprintf(node.log, sizeof(node.log), "/tmp/adv-node-%d.log",
		 (int)getpid());
	f = fopen(node.cfg, "w");
	if (!f)
		exit(1);
	fprintf(f, "{ \"max_message_bytes\": %u, \"storage\": "
		"{ \"size\": \"64MiB\" } }\n", NODE_MSG_MAX);
	fclose(f);
	snprintf(listen, sizeof(listen), "%s:0", node_ip);
	if (pipe(o))
		exit(1);
	node.pid = fork();
	if (node.pid == 0) {
		fd = open(node.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(o[1], 1);
		if (fd >= 0)
			dup2(fd, 2);
		close(o[0]);
		execl(RS_SERVER_BIN, RS_SERVER_BIN, "-c", node.cfg, "--listen",
		      listen, "--workers", "2", (char *)NULL);
		_exit(127);
	}
	close(o[1]);
	out = fdopen(o[0], "r");
	if (!out || !fgets(line, sizeof(line), out) ||
	    sscanf(line, "recstore-server: listening on %95s", node.addr) != 1) {
		fprintf(stderr, "node did not start (log %s)\n", node.log);
		exit(1);
	}
	node.port = (uint16_t)atoi(strrchr(node.addr, ':') + 1);
	/* keep the pipe open: the node may print more; we never read it */
	(void)out;
}

static int node_alive(void)
{
	if (node.pid <= 0)
		return 0;
	if (waitpid(node.pid, &node.status, WNOHANG) == 0)
		return 1;
	node.pid = -1;	/* reaped: node.status says how it ended */
	return 0;
}

/* How a dead node ended, and its log from line `from` on (at most the
 * last 60 lines): a CI run keeps only the test's output. */
static void node_death_report(long from)
{
	char line[512];
	long n = 0, skip;
	FILE *f;

	if (WIFSIGNALED(node.status))
		printf("node died: signal %d\n", WTERMSIG(node.status));
	else if (WIFEXITED(node.status))
		printf("node died: exit status %d\n", WEXITSTATUS(node.status));
	f = fopen(node.log, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		n += !!strchr(line, '\n');
	skip = n - from > 60 ? n - 60 : from;
	rewind(f);
	printf("--- node log from line %ld ---\n", skip + 1);
	for (n = 0; fgets(line, sizeof(line), f);) {
		if (n >= skip)
			fputs(line, stdout);
		n += !!strchr(line, '\n');
	}
	printf("--- end of node log ---\n");
	fclose(f);
}

static void node_stop(void)
{
	int st;

	if (node.pid <= 0)
		return;
	kill(node.pid, SIGTERM);
	for (int i = 0; i < 100 && waitpid(node.pid, &st, WNOHANG) == 0; i++)
		usleep(50000);
	if (waitpid(node.pid, &st, WNOHANG) == 0) {
		kill(node.pid, SIGKILL);
		waitpid(node.pid, &st, 0);
	}
	node.pid = 0;
}

/* VmRSS + HugetlbPages of the node, bytes (-1 if gone). */
static long long node_rss(void)
{
	char path[64], line[256];
	long long kb = 0, v;
	FILE *f;
	int seen = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)node.pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %lld", &v) == 1 ||
		    sscanf(line, "HugetlbPages: %lld", &v) == 1) {
			kb += v;
			seen = 1;
		}
	}
	fclose(f);
	return seen ? kb << 10 : -1;
}

static long node_log_lines(void)
{
	FILE *f = fopen(node.log, "r");
	long n = 0;
	int ch;

	if (!f)
		return 0;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

/* ---- the good client ---- */

struct gstats {
	atomic_ulong ops, errors, bad;
	char first_err[200];
	uint32_t *lat_us;	/* [MAX_LAT] */
	atomic_uint nlat;
};

static struct {
	struct rs_client *c;
	struct rs_table *t;
	uint64_t keys[NK];
	float exp[NK * DIM];
	pthread_t th;
	atomic_int stop, no_updates;
	_Atomic(struct gstats *) cur;
	atomic_ulong total_ops;
} good;

static double now_s(void)
{
	return raw_now();
}

static struct rs_client *good_client(void)
{
	struct rs_client_config *cfg;
	struct rs_client *c = NULL;

	if (rs_client_config_new(&cfg))
		return NULL;
	rs_client_config_set_nodes(cfg, node.addr);
	if (good_ip)
		rs_client_config_set_device(cfg, good_ip);
	rs_client_config_set_cache_entries(cfg, 0);
	rs_client_config_set_timeout_ms(cfg, 10000);
	if (rs_client_open(&c, cfg))
		c = NULL;
	rs_client_config_delete(&cfg);
	return c;
}

static void gerr(struct gstats *s, const char *what, int ret)
{
	if (!s)
		return;
	if (atomic_fetch_add(&s->errors, 1) == 0)
		snprintf(s->first_err, sizeof(s->first_err), "%s: %d %s (%s)",
			 what, ret, rs_strerror(ret), rs_errormsg());
}

/* Re-PUT the expected rows (after a failed update left them unknown). */
static void good_resync(void)
{
	int st[NK];

	for (int i = 0; i < 50; i++) {
		if (rs_put(good.t, good.keys, NK, good.exp, st, 0) == NK)
			return;
		usleep(100000);
	}
}

static int good_check(struct gstats *s, const float *out, const int *st)
{
	int bad = 0;

	for (int i = 0; i < NK; i++)
		if (st[i] != RS_KEY_FOUND ||
		    memcmp(&out[i * DIM], &good.exp[i * DIM],
			   DIM * sizeof(float)))
			bad++;
	if (bad && s) {
		atomic_fetch_add(&s->bad, (unsigned long)bad);
		if (!s->first_err[0])
			snprintf(s->first_err, sizeof(s->first_err),
				 "%d wrong rows", bad);
	}
	return bad;
}

/* One good operation; round r picks which. */
static void good_op(unsigned long r)
{
	struct gstats *s = atomic_load(&good.cur);
	static float out[NK * DIM], g[UPD_KEYS * DIM];
	static int st[NK];
	int kind = (int)(r % 3), ret;
	double t0 = now_s();

	if (kind == 2 && atomic_load(&good.no_updates))
		kind = 0;
	if (kind < 2) {
		memset(out, 0xff, sizeof(out));
		ret = rs_get(good.t, good.keys, NK, out, st,
			     kind ? RS_F_RPC : 0);
		if (ret < 0)
			gerr(s, kind ? "rpc get" : "get", ret);
		else
			good_check(s, out, st);
	} else {
		unsigned first = (unsigned)(r / 3 * UPD_KEYS) % NK;

		for (int i = 0; i < UPD_KEYS * DIM; i++)
			g[i] = 0.5f;
		ret = rs_update(good.t, &good.keys[first], UPD_KEYS, g, st, 0);
		if (ret < 0) {
			gerr(s, "update", ret);
			good_resync();
		} else {
			for (int i = 0; i < UPD_KEYS * DIM; i++)
				good.exp[first * DIM + i] -= 0.25f;
			for (int i = 0; i < UPD_KEYS; i++)
				if (st[i] != RS_KEY_FOUND && s) {
					atomic_fetch_add(&s->bad, 1);
					snprintf(s->first_err,
						 sizeof(s->first_err),
						 "update status %d", st[i]);
				}
		}
	}
	if (s) {
		unsigned i = atomic_fetch_add(&s->nlat, 1);

		if (i < MAX_LAT)
			s->lat_us[i] = (uint32_t)((now_s() - t0) * 1e6);
		atomic_fetch_add(&s->ops, 1);
	}
	atomic_fetch_add(&good.total_ops, 1);
}

static void *good_main(void *arg)
{
	(void)arg;
	for (unsigned long r = 0; !atomic_load(&good.stop); r++)
		good_op(r);
	return NULL;
}

static void good_start(void)
{
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	int st[NK], ret;

	good.c = good_client();
	if (!good.c) {
		fprintf(stderr, "good client: %s\n", rs_errormsg());
		exit(1);
	}
	rs_table_spec_init(&spec, "adv", DIM);
	rs_table_spec_set_optimizer(&spec, "sgd");
	spec.optim.lr = 0.5f;
	spec.capacity = 4096;
	ret = rs_table_create(good.c, &spec);
	if (ret && ret != RS_E_EXISTS)
		exit(1);
	rs_table_spec_init(&spec, "junk", DIM);
	spec.capacity = 65536;
	ret = rs_table_create(good.c, &spec);
	if ((ret && ret != RS_E_EXISTS) || rs_table_open(good.c, "adv",
							 &good.t)) {
		fprintf(stderr, "tables: %s\n", rs_errormsg());
		exit(1);
	}
	for (int i = 0; i < NK; i++) {
		good.keys[i] = 1000 + (uint64_t)i * 7;
		for (int j = 0; j < DIM; j++)
			good.exp[i * DIM + j] = (float)(i * DIM + j + 1);
	}
	if (rs_put(good.t, good.keys, NK, good.exp, st, 0) != NK) {
		fprintf(stderr, "put: %s\n", rs_errormsg());
		exit(1);
	}
	atomic_store(&good.stop, 0);
	if (pthread_create(&good.th, NULL, good_main, NULL))
		exit(1);
}

static void good_end(void)
{
	atomic_store(&good.stop, 1);
	pthread_join(good.th, NULL);
	rs_client_close(&good.c);
}

/* A fresh client from the good address connects and reads every key. */
static int probe(char *why, size_t len)
{
	struct rs_client *c = good_client();
	struct rs_table *t;
	float out[NK * DIM];
	int st[NK], ok = 0;

	if (!c) {
		snprintf(why, len, "a new client cannot connect: %s",
			 rs_errormsg());
		return 0;
	}
	if (rs_table_open(c, "adv", &t) == 0 &&
	    rs_get(t, good.keys, NK, out, st, RS_F_RPC) == NK)
		ok = 1;
	else
		snprintf(why, len, "a new client cannot read: %s",
			 rs_errormsg());
	rs_client_close(&c);
	return ok;
}

/* ---- attack bookkeeping ---- */

struct result {
	int ok;			/* the attack's own check */
	char note[600];
	long long rss_peak;
};

static void note(struct result *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note(struct result *r, const char *fmt, ...)
{
	size_t n = strlen(r->note);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->note + n, sizeof(r->note) - n, fmt, ap);
	va_end(ap);
}

static void peak(struct result *r)
{
	long long v = node_rss();

	if (v > r->rss_peak)
		r->rss_peak = v;
}

static struct raw_opts adv_opts(void)
{
	struct raw_opts o;

	raw_opts_init(&o, adv_ip, node_ip, node.port);
	return o;
}

/* ---- raw protocol exchange (HELLO, TABLE_DIR) ---- */

static uint64_t adv_req_id = 1;

static int raw_call(struct raw_conn *c, int len, struct proto_msg *m,
		    uint8_t *copy, size_t cap)
{
	struct proto_limits lim;
	const uint8_t *d;
	uint32_t slot;
	int n, wcs = 0;

	if (len < 0 || raw_send(c, (uint32_t)len))
		return -EIO;
	n = raw_recv(c, 3000, &d, &slot, &wcs);
	if (n <= 0 || (size_t)n > cap)
		return n < 0 ? n : -ETIMEDOUT;
	memcpy(copy, d, (size_t)n);
	raw_release(c, slot);
	proto_limits_default(&lim);
	lim.max_message_bytes = PROTO_MAX_MESSAGE_BYTES;
	lim.max_batch_keys = PROTO_MAX_BATCH_KEYS;
	lim.max_dim = PROTO_MAX_DIM;
	return proto_decode(copy, (size_t)n, &lim, m);
}

/* Table `name`'s directory entry, asked by hand over a raw conn. */
static int raw_table(const char *name, struct proto_table_info *out)
{
	static uint8_t copy[64 << 10];
	struct raw_opts o = adv_opts();
	struct proto_hello_req hr = { .recv_bytes = 64 << 10 };
	struct proto_list_req lr = { 0 };
	struct proto_hdr h = { 0 };
	struct proto_table_info ti;
	struct proto_msg m;
	struct raw_conn c;
	int ret;

	if (raw_connect_ok(&c, &o))
		return -ECONNREFUSED;
	h.req_id = adv_req_id++;
	ret = raw_call(&c, proto_enc_hello_req(c.sbuf, o.ssize, &h, &hr), &m,
		       copy, sizeof(copy));
	while (!ret && lr.start < 64) {
		h.req_id = adv_req_id++;
		ret = raw_call(&c, proto_enc_list_req(c.sbuf, o.ssize, &h,
						       PROTO_OP_TABLE_DIR,
						       &lr), &m, copy,
			       sizeof(copy));
		if (ret || m.hdr.status)
			break;
		while (proto_table_dir_next(&m.u.table_dir, &ti)) {
			lr.start++;
			if (!strcmp(ti.spec.name, name)) {
				*out = ti;
				raw_close(&c);
				return 0;
			}
		}
		if (lr.start >= m.u.table_dir.total || !m.u.table_dir.n)
			break;
	}
	raw_close(&c);
	return ret ? ret : -ENOENT;
}

/* A GET of one good key, encoded into buf; its length. */
static int enc_get(uint8_t *buf, size_t cap, const struct proto_table_info
		   *t, uint32_t op)
{
	static const float row[DIM];
	struct proto_keys_req q = { .table_id = t->id,
				    .table_gen = t->generation, .n = 1,
				    .keys = &good.keys[0] };
	struct proto_hdr h = { .req_id = adv_req_id++ };

	if (op == PROTO_OP_UPDATE) {
		q.dim = DIM;
		q.rows = row;	/* zero gradient: changes nothing */
	}
	return proto_enc_keys_req(buf, cap, &h, op, &q);
}

static void put32le(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- attack: handshake ---- */

static void attack_handshake(struct result *r)
{
	struct variant {
		const char *name;
		uint16_t magic, slots, rd;
		uint8_t ver, ulen, len;
		uint32_t msg_max;
	} v[] = {
		{ "absent", 0, 0, 0, 0, 0, 0, 0 },
		{ "msg_max=0", RAW_HELLO_MAGIC, 17, 4, 1, 0, 12, 0 },
		{ "msg_max=2^32-1", RAW_HELLO_MAGIC, 17, 4, 1, 0, 12,
		  0xffffffffu },
		{ "msg_max=2^30", RAW_HELLO_MAGIC, 17, 4, 1, 0, 12, 1u << 30 },
		{ "slots=0", RAW_HELLO_MAGIC, 0, 4, 1, 0, 12, 4096 },
		{ "slots=0xffff", RAW_HELLO_MAGIC, 0xffff, 4, 1, 0, 12, 4096 },
		{ "rd=0", RAW_HELLO_MAGIC, 17, 0, 1, 0, 12, 4096 },
		{ "rd=0xffff", RAW_HELLO_MAGIC, 17, 0xffff, 1, 0, 12, 4096 },
		{ "magic", 0x1234, 17, 4, 1, 0, 12, 4096 },
		{ "version=2", RAW_HELLO_MAGIC, 17, 4, 2, 0, 12, 4096 },
		{ "ulen=255", RAW_HELLO_MAGIC, 17, 4, 1, 255, 12, 4096 },
		/* last: today's node pins slots x msg_max for it */
		{ "msg_max=16MiB", RAW_HELLO_MAGIC, 17, 4, 1, 0, 12, 16u << 20 },
	};
	enum { NV = sizeof(v) / sizeof(v[0]), NRAND = 12 };
	static struct raw_conn held[NV + NRAND];
	unsigned nheld = 0, rej = 0, err = 0;
	uint8_t priv[56];

	/* per variant: A accepted (held open), R refused, E<errno> other */
	for (unsigned i = 0; i < NV + NRAND; i++) {
		struct raw_opts o = adv_opts();
		int ret;

		memset(priv, 0, sizeof(priv));
		if (i < NRAND) {
			o.priv_len = (uint8_t)(1 + rand() % 56);
			for (unsigned j = 0; j < o.priv_len; j++)
				priv[j] = (uint8_t)rand();
			if (i % 2) /* a valid magic and version, random rest */
				priv[0] = 0x52, priv[1] = 0x56, priv[2] = 1;
		} else if (i - NRAND < NV) {
			const struct variant *x = &v[i - NRAND];

			raw_hello(priv, x->magic, x->ver, x->ulen, x->slots,
				  x->rd, x->msg_max);
			o.priv_len = x->len;
		}
		o.priv = o.priv_len ? priv : NULL;
		o.nrecv = 4;
		o.rsize = 4096;
		o.ssize = 4096;
		o.timeout_ms = 3000;
		ret = raw_connect(&held[nheld], &o);
		if (ret == 0)
			nheld++;
		else if (ret == RAW_REJECTED)
			rej++;
		else
			err++;
		if (i >= NRAND)
			note(r, " %s:", v[i - NRAND].name);
		else if (i == 0)
			note(r, "random:");
		if (ret < 0)
			note(r, "E%d", -ret);
		else
			note(r, "%c", ret ? 'R' : 'A');
		peak(r);
	}
	usleep(300000);
	peak(r);
	note(r, "; %u accepted, %u refused, %u other failures", nheld, rej,
	     err);
	for (unsigned i = 0; i < nheld; i++)
		raw_close(&held[i]);
	r->ok = 1;
}

/* ---- attack: garbage and lying messages ---- */


/* One node-wide STATS entry (-1 if it cannot be read). */
static long long node_stat(const char *key)
{
	struct tl_stat w[] = { { NULL, key, 0, 0 }, { 0 } };

	if (tl_stats_read(good.c, 0, w) < 0 || !w[0].seen)
		return -1;
	return (long long)w[0].v;
}

static long long node_conns(void)
{
	return node_stat("connections");
}

enum gkind {
	G_RAND64, G_RAND4K, G_BODYLEN_LONG, G_BODYLEN_MAX, G_BODYLEN_SHORT,
	G_NKEYS, G_NKEYS_MAX, G_DIM, G_NOIMM, G_IMM_TYPE, G_CREDIT_LIE,
	G_TOO_BIG, G_EMPTY, G_COUNT
};
static const char *const gname[G_COUNT] = {
	"rand64", "rand4k", "bodylen+1000", "bodylen=max", "bodylen-8",
	"n=2^24-1", "n=2^32-1", "dim=2^16", "no-imm", "imm-type=0x7f",
	"credits=2^23-1x300", "too-big", "empty",
};

/* One garbage case on a fresh conn: 'R' error reply, 'S' SUCCESS reply
 * (wrong), 'D' dropped, '-' neither a reply within a second nor a
 * disconnect within 2.5 s more (wrong: a silent node leaves the peer
 * holding a conn that no longer works). For '-', *held says whether the
 * node still counted the conn among its connections (1) or not (0). */
static char garbage_case(enum gkind k, const struct proto_table_info *t,
			 int *held)
{
	struct raw_opts o = adv_opts();
	struct raw_conn c;
	struct proto_msg m;
	struct proto_limits lim;
	enum ibv_wr_opcode op = IBV_WR_SEND_WITH_IMM;
	uint32_t imm = raw_imm(RAW_IMM_DATA, 0, 0), len, slot;
	const uint8_t *d;
	int n, wcs = 0;

	o.ssize = 2 * NODE_MSG_MAX;
	if (raw_connect_ok(&c, &o))
		return '?';
	len = (uint32_t)enc_get(c.sbuf, o.ssize, t, PROTO_OP_GET);
	switch (k) {
	case G_RAND64:
	case G_RAND4K:
		len = k == G_RAND64 ? 64 : 4000;
		for (uint32_t i = 0; i < len; i++)
			c.sbuf[i] = (uint8_t)rand();
		break;
	case G_BODYLEN_LONG:
		put32le(c.sbuf + 24, len - PROTO_HDR_BYTES + 1000);
		break;
	case G_BODYLEN_MAX:
		put32le(c.sbuf + 24, 0xffffffffu);
		break;
	case G_BODYLEN_SHORT:
		put32le(c.sbuf + 24, len - PROTO_HDR_BYTES - 8);
		break;
	case G_NKEYS:
		put32le(c.sbuf + 48, (1u << 24) - 1);
		break;
	case G_NKEYS_MAX:
		put32le(c.sbuf + 48, 0xffffffffu);
		break;
	case G_DIM:
		len = (uint32_t)enc_get(c.sbuf, o.ssize, t, PROTO_OP_UPDATE);
		put32le(c.sbuf + 52, 1u << 16);
		break;
	case G_NOIMM:
		op = IBV_WR_SEND;
		break;
	case G_IMM_TYPE:
		imm = raw_imm(0x7f, 0, 0);
		break;
	case G_CREDIT_LIE:
		for (int i = 0; i < 300; i++) {
			raw_post(&c, IBV_WR_SEND_WITH_IMM, 0,
				 raw_imm(RAW_IMM_CREDIT, 0x7fffff, 0), 0, 0,
				 2, 1);
			raw_recv(&c, 2, &d, &slot, &wcs); /* reap */
		}
		break;
	case G_TOO_BIG:
		len = (c.peer_msg_max ? c.peer_msg_max : NODE_MSG_MAX) + 4096;
		if (len > o.ssize)
			len = o.ssize;
		break;
	case G_EMPTY:
		len = 0;
		break;
	default:
		break;
	}
	raw_post(&c, op, len, imm, 0, 0, 1, 1);
	n = raw_recv(&c, 1000, &d, &slot, &wcs);
	if (n > 0) {
		proto_limits_default(&lim);
		lim.max_message_bytes = PROTO_MAX_MESSAGE_BYTES;
		n = proto_decode(d, (size_t)n, &lim, &m);
		raw_close(&c);
		/* a GET that really was a GET may succeed only for the
		 * credit lie, whose request itself is well-formed */
		return n == 0 && m.hdr.status == 0 ? 'S' : 'R';
	}
	n = n < 0 || raw_dropped(&c, 2500) ? 'D' : '-';
	if (n == '-') {
		long long with = node_conns(), without;

		raw_close(&c);
		usleep(500000);
		without = node_conns();
		*held = with >= 0 && without >= 0 && with > without;
	} else {
		raw_close(&c);
	}
	return (char)n;
}

/* An error reply or a disconnect is right for every case; a success reply
 * only for the lie about credits, whose request itself is well-formed.
 * A switch on purpose: the equivalent chain of comparisons, written inline
 * after the inlined garbage_case(), came out of GCC 12.2 at -O2 as "fail
 * unless 'S'" (seen in the disassembly: the 'R' and 'D' outcomes cleared
 * r->ok), so the release build failed the attack on every run. */
static int garbage_outcome_ok(enum gkind k, char outcome)
{
	switch (outcome) {
	case 'R':
	case 'D':
		return 1;
	case 'S':
		return k == G_CREDIT_LIE;
	default:
		return 0;
	}
}

static void attack_garbage(struct result *r)
{
	struct proto_table_info t;
	char out[G_COUNT + 1];

	if (raw_table("adv", &t)) {
		note(r, "cannot fetch the table directory by hand");
		return;
	}
	r->ok = 1;
	for (int k = 0; k < G_COUNT; k++) {
		int held = 0;

		out[k] = garbage_case((enum gkind)k, &t, &held);
		note(r, "%s%s:%c%s", k ? " " : "", gname[k], out[k],
		     held ? "(still counted)" : "");
		if (!garbage_outcome_ok((enum gkind)k, out[k]))
			r->ok = 0;
		peak(r);
	}
	out[G_COUNT] = 0;
}

/* ---- attack: a flood that ignores credits ---- */

static void attack_flood(struct result *r)
{
	struct proto_table_info t;
	struct raw_opts o = adv_opts();
	struct raw_conn c;
	struct ibv_wc wc[64];
	unsigned long posted = 0, done = 0, replies = 0, failed = 0;
	uint32_t len, inflight = 0;
	long long over0, over1;
	double t0, end, cut_at = -1;

	if (raw_table("adv", &t)) {
		note(r, "cannot fetch the table directory by hand");
		return;
	}
	over0 = node_stat("transport.credit_overrun");
	o.sq = 256;
	o.nrecv = 64;
	o.rsize = 4096;
	o.rnr_retry = 7;	/* retry for ever: keep pressing */
	o.retry = 7;
	if (raw_connect_ok(&c, &o)) {
		note(r, "cannot connect");
		return;
	}
	len = (uint32_t)enc_get(c.sbuf, o.ssize, &t, PROTO_OP_GET);
	t0 = now_s();
	end = t0 + 2.5;
	while (now_s() < end && !failed) {
		while (inflight < o.sq && !failed) {
			/* every message claims a data credit it never had */
			if (raw_post(&c, IBV_WR_SEND_WITH_IMM, len,
				     raw_imm(RAW_IMM_DATA, 0, 0), 0, 0, 1,
				     posted % 16 == 15))
				break;
			posted++;
			inflight++;
		}
		int n = ibv_poll_cq(c.cq, 64, wc);

		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				failed++;
			} else if (wc[i].wr_id & RAW_WRID_RECV) {
				replies++;
				raw_post_recv(&c, (uint32_t)(wc[i].wr_id &
							     ~RAW_WRID_RECV));
			} else {
				done += 16;
				inflight = inflight > 16 ? inflight - 16 : 0;
			}
		}
		/* the node cuts a conn by disconnecting it: its QP then
		 * ignores our retries, so the cut shows on the cm channel,
		 * not (for seconds) in our completions */
		if (raw_dropped(&c, 0)) {
			cut_at = now_s() - t0;
			break;
		}
		if (n <= 0)
			usleep(20);
		if (posted % 4096 == 0)
			peak(r);
	}
	if (cut_at < 0 && !failed && raw_dropped(&c, 3000))
		cut_at = now_s() - t0;
	peak(r);
	over1 = node_stat("transport.credit_overrun");
	note(r, "%lu sends posted, %lu acked, %lu replies (node's credit "
	     "grant %u); ", posted, done, replies,
	     c.peer_slots ? c.peer_slots - 1u : 0);
	if (cut_at >= 0)
		note(r, "the node cut the conn after %.2f s", cut_at);
	else
		note(r, "%s", failed ? "our sends failed" : "NEVER CUT OFF");
	note(r, ", credit overruns counted %lld -> %lld", over0, over1);
	raw_close(&c);
	/* a peer that sends past its credits breaks the protocol: with one
	 * shared receive queue it eats the buffers of every other conn, so
	 * the node must drop it, and for that reason */
	r->ok = (cut_at >= 0 || failed) && over0 >= 0 && over1 > over0;
}

/* ---- attack: peers that withhold credits ---- */

static void attack_withhold(struct result *r)
{
	enum { NW = 4, REQS = 16 };
	struct proto_table_info t;
	struct raw_conn c[NW];
	int up[NW] = { 0 }, dropped = 0;
	double t0;

	if (raw_table("adv", &t)) {
		note(r, "cannot fetch the table directory by hand");
		return;
	}
	for (int i = 0; i < NW; i++) {
		struct raw_opts o = adv_opts();
		uint8_t h[RAW_HELLO_LEN];

		/* conns 0, 1: no receive buffer at all; 2, 3: four, never
		 * re-posted, no credit ever returned */
		o.nrecv = i < 2 ? 0 : 4;
		o.rsize = 4096;
		o.rnr_retry = 7;
		raw_hello(h, RAW_HELLO_MAGIC, 1, 0, 4, 4, 4096);
		o.priv = h;
		o.priv_len = sizeof(h);
		if (raw_connect(&c[i], &o))
			continue;
		up[i] = 1;
		for (int k = 0; k < REQS; k++) {
			uint32_t len = (uint32_t)enc_get(c[i].sbuf, o.ssize,
							 &t, PROTO_OP_GET);

			raw_post(&c[i], IBV_WR_SEND_WITH_IMM, len,
				 raw_imm(RAW_IMM_DATA, 0, 0), 0, 0, 1,
				 k == REQS - 1);
		}
	}
	t0 = now_s();
	while (now_s() - t0 < 12.0) {
		for (int i = 0; i < NW; i++)
			if (up[i] == 1 && raw_dropped(&c[i], 0)) {
				up[i] = 2;
				dropped++;
				note(r, "%sconn %d dropped after %.1f s",
				     dropped > 1 ? ", " : "", i, now_s() - t0);
			}
		if (dropped == NW)
			break;
		peak(r);
		usleep(100000);
	}
	note(r, "%s%d of %d withholding conns dropped by the node",
	     dropped ? "; " : "", dropped, NW);
	r->ok = 1;
	for (int i = 0; i < NW; i++) {
		if (up[i] == 1)
			r->ok = 0;	/* still holding a conn slot */
		if (up[i])
			raw_close(&c[i]);
	}
}

/* ---- attack: 1,000 connections ---- */

enum { MC_FREE, MC_RESOLVING, MC_CONNECTING, MC_UP, MC_FAILED };

struct mconn {
	struct rdma_cm_id *id;
	int state;
};

/* Many connections on one event channel, one PD and one CQ. */
struct mass {
	struct rdma_event_channel *ech;
	struct mconn *m;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct sockaddr_in src, dst;
	uint8_t hello[RAW_HELLO_LEN];
	unsigned want, started, up, refused, failed, pending;
};

static void mass_fail(struct mass *a, struct mconn *x)
{
	if (x->state == MC_RESOLVING || x->state == MC_CONNECTING)
		a->pending--;
	else if (x->state == MC_UP)
		a->up--;
	else
		return;
	x->state = MC_FAILED;
	a->failed++;
}

/* Route resolved: a minimal QP, then the (well-formed) handshake. */
static int mass_connect_one(struct mass *a, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct rdma_conn_param cp = { 0 };

	if (!a->pd) {
		a->pd = ibv_alloc_pd(id->verbs);
		a->cq = a->pd ? ibv_create_cq(id->verbs, 4096, NULL, NULL, 0)
			      : NULL;
	}
	qa.send_cq = qa.recv_cq = a->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (!a->cq || rdma_create_qp(id, a->pd, &qa))
		return -1;
	cp.private_data = a->hello;
	cp.private_data_len = sizeof(a->hello);
	cp.initiator_depth = cp.responder_resources = 1;
	cp.retry_count = 3;
	cp.rnr_retry_count = 3;
	return rdma_connect(id, &cp) ? -1 : 0;
}

static void mass_event(struct mass *a, struct rdma_cm_event *ev)
{
	struct mconn *x = ev->id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(ev->id, 5000))
			mass_fail(a, x);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (mass_connect_one(a, ev->id))
			mass_fail(a, x);
		else
			x->state = MC_CONNECTING;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		x->state = MC_UP;
		a->up++;
		a->pending--;
		break;
	case RDMA_CM_EVENT_REJECTED:
		x->state = MC_FAILED;
		a->refused++;
		a->pending--;
		break;
	default:	/* errors, unreachable, DISCONNECTED of a held one */
		mass_fail(a, x);
		break;
	}
}

/* Connect up to a->want (32 in flight) until budget_s passes or the node
 * has refused 256 times (it plainly refuses). */
static void mass_run(struct mass *a, struct result *r, double budget_s)
{
	double end = now_s() + budget_s;

	while ((a->started < a->want || a->pending) && now_s() < end &&
	       a->refused < 256) {
		struct rdma_cm_event *ev;

		while (a->started < a->want && a->pending < 32) {
			struct mconn *x = &a->m[a->started++];

			if (rdma_create_id(a->ech, &x->id, x, RDMA_PS_TCP) ||
			    rdma_resolve_addr(x->id,
					      (struct sockaddr *)&a->src,
					      (struct sockaddr *)&a->dst,
					      5000)) {
				x->state = MC_FAILED;
				a->failed++;
				continue;
			}
			x->state = MC_RESOLVING;
			a->pending++;
		}
		if (raw_cm_wait(a->ech, 200, &ev))
			continue;
		mass_event(a, ev);
		rdma_ack_cm_event(ev);
		if (a->up && a->up % 32 == 0)
			peak(r);
	}
}

static void mass_close(struct mass *a)
{
	for (unsigned i = 0; i < a->started; i++) {
		struct mconn *x = &a->m[i];

		if (!x->id)
			continue;
		if (x->state == MC_UP)
			rdma_disconnect(x->id);
		if (x->id->qp)
			rdma_destroy_qp(x->id);
		rdma_destroy_id(x->id);
	}
	if (a->cq)
		ibv_destroy_cq(a->cq);
	if (a->pd)
		ibv_dealloc_pd(a->pd);
	if (a->ech)
		rdma_destroy_event_channel(a->ech);
	free(a->m);
}

static void attack_conns(struct result *r)
{
	const char *env = getenv("RS_ADV_CONNS");
	struct mass a = { .want = env ? (unsigned)atoi(env) : 1000 };
	char why[300] = "";

	a.ech = rdma_create_event_channel();
	a.m = calloc(a.want ? a.want : 1, sizeof(*a.m));
	if (!a.ech || !a.m) {
		note(r, "out of memory");
		mass_close(&a);
		return;
	}
	raw_sockaddr(adv_ip, 0, &a.src);
	raw_sockaddr(node_ip, node.port, &a.dst);
	raw_hello(a.hello, RAW_HELLO_MAGIC, 1, 0, 4, 1, 4096);
	mass_run(&a, r, 20.0);
	peak(r);
	note(r, "%u tried: %u held open, %u refused, %u failed%s", a.started,
	     a.up, a.refused, a.failed, a.refused ? "" : " (the node refused "
	     "none: its limit was not reached in time)");
	/* with all of them held: a new good client from its own address */
	r->ok = 1;
	if (good_ip && strcmp(good_ip, adv_ip)) {
		int in = probe(why, sizeof(why));

		note(r, "; new good client: %s", in ? "connects" : why);
		r->ok = in;
	} else {
		note(r, "; (no separate good address: new-client check "
		     "skipped)");
	}
	peak(r);
	mass_close(&a);
}

/* ---- attack: peers that vanish mid-request ---- */

/* Child: connect from argv's address, send large UPDATEs, say "sent",
 * wait to be killed. */
static int vanish_child(char **argv)
{
	struct raw_opts o;
	struct raw_conn c;
	static uint64_t keys[1024];
	static float g[1024 * DIM];
	struct proto_keys_req q = { .dim = DIM, .flags = PROTO_KF_CREATE,
				    .keys = keys, .rows = g };
	struct proto_hdr h = { 0 };
	uint8_t *base;
	uint32_t n;

	node_ip = argv[2];
	raw_opts_init(&o, argv[4], node_ip, (uint16_t)atoi(argv[3]));
	q.table_id = (uint32_t)strtoul(argv[5], NULL, 10);
	q.table_gen = strtoull(argv[6], NULL, 16);
	o.ssize = 12 * NODE_MSG_MAX;	/* a slot per message in flight */
	if (raw_connect_ok(&c, &o))
		return 2;
	base = c.sbuf;
	n = (NODE_MSG_MAX - 256) / (8 + DIM * 4);
	q.n = n > 1024 ? 1024 : n;
	for (int b = 0; b < 12; b++) {
		int len;

		for (uint32_t i = 0; i < q.n; i++) {
			keys[i] = (uint64_t)getpid() << 20 | (uint64_t)b << 10 |
				  i;
			for (int j = 0; j < DIM; j++)
				g[i * DIM + j] = 0.01f;
		}
		h.req_id = (uint64_t)b + 1;
		c.sbuf = base + (size_t)b * NODE_MSG_MAX;
		len = proto_enc_keys_req(c.sbuf, NODE_MSG_MAX, &h,
					 PROTO_OP_UPDATE, &q);
		if (len < 0 || raw_send(&c, (uint32_t)len))
			return 3;
	}
	printf("sent\n");
	fflush(stdout);
	pause();
	return 1;
}

static pid_t vanish_spawn(const struct proto_table_info *t, FILE **out)
{
	char port[16], id[16], gen[32];
	int p[2];
	pid_t pid;

	snprintf(port, sizeof(port), "%u", node.port);
	snprintf(id, sizeof(id), "%u", t->id);
	snprintf(gen, sizeof(gen), "%" PRIx64, t->generation);
	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execl(self_exe, self_exe, "--child", node_ip, port, adv_ip, id,
		      gen, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*out = fdopen(p[0], "r");
	return pid;
}

/* The netdev and prefix of addr ("ip -o -4 addr"); 0 if found. */
static int addr_dev(const char *addr, char *dev, size_t len, int *prefix)
{
	char line[512], want[64], d[64], a[64];
	FILE *f = popen("ip -o -4 addr show 2>/dev/null", "r");
	int found = -1;

	if (!f)
		return -1;
	snprintf(want, sizeof(want), "%s/", addr);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*d: %63s inet %63s", d, a) == 2 &&
		    !strncmp(a, want, strlen(want))) {
			snprintf(dev, len, "%s", d);
			*prefix = atoi(a + strlen(want));
			found = 0;
		}
	pclose(f);
	return found;
}

static void attack_vanish(struct result *r)
{
	struct proto_table_info t;
	char line[64], dev[64], cmd[256];
	int prefix, st, killed = 0;

	if (raw_table("junk", &t)) {
		note(r, "cannot fetch the table directory by hand");
		return;
	}
	r->ok = 1;
	for (int i = 0; i < 2; i++) {
		int by_ip = i == 1;
		FILE *out = NULL;
		double t0 = now_s();
		pid_t pid = vanish_spawn(&t, &out);

		if (pid < 0 || !out || !fgets(line, sizeof(line), out)) {
			note(r, "child %d did not connect; ", i);
			if (pid > 0) {
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
			}
			if (out)
				fclose(out);
			continue;
		}
		note(r, "child %d sent after %.1f s; ", i, now_s() - t0);
		if (by_ip) {
			if (geteuid() || !strcmp(adv_ip, node_ip) ||
			    (good_ip && !strcmp(adv_ip, good_ip)) ||
			    addr_dev(adv_ip, dev, sizeof(dev), &prefix)) {
				note(r, "address removal skipped; ");
				by_ip = 0;
			} else {
				snprintf(cmd, sizeof(cmd), "ip addr del %s/%d "
					 "dev %s", adv_ip, prefix, dev);
				by_ip = system(cmd) == 0;
				note(r, "%s; ", by_ip ? "address removed "
				     "under a live conn" : "ip addr del failed");
				usleep(1000000);
			}
		} else {
			usleep(20000 * (unsigned)(i + 1));
		}
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		fclose(out);
		killed++;
		if (by_ip) {
			usleep(500000);
			snprintf(cmd, sizeof(cmd), "ip addr add %s/%d dev %s",
				 adv_ip, prefix, dev);
			if (system(cmd)) {
				note(r, "cannot re-add %s; ", adv_ip);
				r->ok = 0;
			}
		}
		peak(r);
	}
	usleep(500000);
	note(r, "%d attackers killed mid-request", killed);
}

/* ---- attack: one-sided writes, atomics, out-of-bounds reads ---- */

/* One op on a fresh conn; the completion status (-1: none). */
static int rdma_case(enum ibv_wr_opcode op, uint64_t addr, uint32_t rkey,
		     uint32_t len, uint8_t *copy)
{
	struct raw_opts o = adv_opts();
	struct raw_conn c;
	struct ibv_wc wc;
	int st = -1;

	o.ssize = len > 4096 ? len : 4096;
	if (raw_connect_ok(&c, &o))
		return -2;
	memset(c.sbuf, 0xab, o.ssize);
	if (!raw_post(&c, op, len, 0x01000000, addr, rkey, 7, 1)) {
		while (raw_poll(&c, 3000, &wc) == 1)
			if (wc.wr_id == 7) {
				st = wc.status;
				break;
			}
	}
	if (st == IBV_WC_SUCCESS && copy)
		memcpy(copy, c.sbuf, len);
	raw_close(&c);
	return st;
}

static void attack_rdma(struct result *r)
{
	static uint8_t rows0[4096], idx0[4096], rows1[4096], idx1[4096];
	struct proto_table_info t;
	uint64_t ra, ia, lo, hi;
	uint32_t rk, ik, rlen, ilen;
	int fails = 0;

	if (raw_table("adv", &t)) {
		note(r, "cannot fetch the table directory by hand");
		return;
	}
	ra = t.rows.addr, rk = t.rows.rkey;
	ia = t.index.addr, ik = t.index.rkey;
	rlen = t.rows.bytes < 4096 ? (uint32_t)t.rows.bytes : 4096;
	ilen = t.index.bytes < 4096 ? (uint32_t)t.index.bytes : 4096;
	/* the advertised regions (index, rows) share one rkey; out of
	 * bounds is outside both */
	lo = ia < ra ? ia : ra;
	hi = ia + t.index.bytes > ra + t.rows.bytes ? ia + t.index.bytes
						    : ra + t.rows.bytes;
	atomic_store(&good.no_updates, 1);
	usleep(200000);	/* an update in flight lands before the snapshot */
	if (rdma_case(IBV_WR_RDMA_READ, ra, rk, rlen, rows0) != 0 ||
	    rdma_case(IBV_WR_RDMA_READ, ia, ik, ilen, idx0) != 0) {
		note(r, "control READs in bounds failed");
		atomic_store(&good.no_updates, 0);
		return;
	}
	r->ok = 1;
	struct {
		const char *name;
		enum ibv_wr_opcode op;
		uint64_t addr;
		uint32_t rkey, len;
	} c[] = {
		{ "write-rows", IBV_WR_RDMA_WRITE, ra, rk, 64 },
		{ "write-index", IBV_WR_RDMA_WRITE, ia, ik, 64 },
		{ "write-imm-rows", IBV_WR_RDMA_WRITE_WITH_IMM, ra, rk, 64 },
		{ "cas-rows", IBV_WR_ATOMIC_CMP_AND_SWP, ra, rk, 8 },
		{ "faa-index", IBV_WR_ATOMIC_FETCH_AND_ADD, ia + 64, ik, 8 },
		{ "read-past-end", IBV_WR_RDMA_READ, hi, rk, 64 },
		{ "read-straddle-end", IBV_WR_RDMA_READ, hi - 32, rk, 64 },
		{ "read-before", IBV_WR_RDMA_READ, lo - 64, rk, 64 },
		{ "read-straddle-start", IBV_WR_RDMA_READ, lo - 32, ik, 64 },
		{ "read-far", IBV_WR_RDMA_READ, hi + (1ull << 20), rk, 64 },
		{ "read-bad-rkey", IBV_WR_RDMA_READ, ra, rk ^ 0x5a5a00, 64 },
	};
	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int st = rdma_case(c[i].op, c[i].addr, c[i].rkey, c[i].len,
				   NULL);

		note(r, "%s%s:%s", i ? " " : "", c[i].name,
		     st == -1 ? "no-completion" : st == -2 ? "no-conn" :
		     ibv_wc_status_str((enum ibv_wc_status)st));
		if (st == IBV_WC_SUCCESS) {
			fails++;
			r->ok = 0;
		}
		peak(r);
	}
	if (rdma_case(IBV_WR_RDMA_READ, ra, rk, rlen, rows1) != 0 ||
	    rdma_case(IBV_WR_RDMA_READ, ia, ik, ilen, idx1) != 0 ||
	    memcmp(rows0, rows1, rlen) || memcmp(idx0, idx1, ilen)) {
		note(r, "; REGIONS CHANGED or unreadable");
		r->ok = 0;
	} else {
		note(r, "; regions unchanged");
	}
	if (fails)
		note(r, "; %d one-sided ops SUCCEEDED", fails);
	atomic_store(&good.no_updates, 0);
}

/* ---- runner ---- */

static void attack_quiet(struct result *r)
{
	usleep(1000000);
	r->ok = 1;
}

struct attack {
	const char *name;
	void (*fn)(struct result *);
};

static const struct attack attacks[] = {
	{ "quiet", attack_quiet },	   { "handshake", attack_handshake },
	{ "garbage", attack_garbage },	   { "flood", attack_flood },
	{ "withhold", attack_withhold },   { "conns", attack_conns },
	{ "vanish", attack_vanish },	   { "rdma", attack_rdma },
};
#define NATTACK (sizeof(attacks) / sizeof(attacks[0]))

struct row {
	const char *name;
	int ran, pass;
	long long rss0, rss_peak, rss1;
	unsigned long ops, errors, bad;
	double p99_us, secs;
	long log_lines;
	char why[1400];
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double p99(struct gstats *s)
{
	unsigned n = atomic_load(&s->nlat);

	if (n > MAX_LAT)
		n = MAX_LAT;
	if (!n)
		return 0;
	qsort(s->lat_us, n, sizeof(uint32_t), cmp_u32);
	return s->lat_us[(size_t)((n - 1) * 0.99)];
}

static void run_one(const struct attack *a, struct row *w)
{
	static struct gstats s;
	static uint32_t lat[MAX_LAT];
	struct result r = { 0 };
	unsigned long before;
	char why[300] = "";
	long log0 = node_log_lines();
	double t0, start = now_s();
	int alive, served;

	memset(&s, 0, sizeof(s));
	s.lat_us = lat;
	w->name = a->name;
	w->ran = 1;
	w->rss0 = node_rss();
	r.rss_peak = w->rss0;
	atomic_store(&good.cur, &s);
	usleep(200000);
	a->fn(&r);
	usleep(500000);
	/* still serving: the good client completes more operations */
	before = atomic_load(&good.total_ops);
	t0 = now_s();
	while (atomic_load(&good.total_ops) < before + 3 && now_s() - t0 < 15)
		usleep(10000);
	served = atomic_load(&good.total_ops) >= before + 3;
	atomic_store(&good.cur, NULL);
	/* the operation in flight may still write to s: wait for its end
	 * (its writes come before its total_ops increment) */
	before = atomic_load(&good.total_ops);
	t0 = now_s();
	while (atomic_load(&good.total_ops) < before + 2 && now_s() - t0 < 15)
		usleep(10000);
	alive = node_alive();
	if (alive && served)
		served = probe(why, sizeof(why));
	w->rss1 = node_rss();
	w->rss_peak = r.rss_peak > w->rss1 ? r.rss_peak : w->rss1;
	w->ops = atomic_load(&s.ops);
	w->errors = atomic_load(&s.errors);
	w->bad = atomic_load(&s.bad);
	w->p99_us = p99(&s);
	w->log_lines = node_log_lines() - log0;
	w->secs = now_s() - start;
	w->pass = r.ok && alive && served && !w->errors && !w->bad &&
		  w->rss_peak - w->rss0 < ADV_RSS_BOUND;
	snprintf(w->why, sizeof(w->why), "%s%s%s%s%s%s%s%s", r.note,
		 alive ? "" : " | NODE DIED",
		 alive && !served ? " | NOT SERVING: " : "",
		 alive && !served ? why : "",
		 w->errors || w->bad ? " | good client: " : "",
		 w->errors || w->bad ? s.first_err : "",
		 w->rss_peak - w->rss0 >= ADV_RSS_BOUND ? " | RSS GREW" : "",
		 r.ok ? "" : " | ATTACK CHECK FAILED");
	printf("%-9s %s (%.1f s)  %s\n", a->name, w->pass ? "pass" : "FAIL",
	       w->secs, w->why);
	if (!alive)
		node_death_report(log0);
	fflush(stdout);
}

static int selected(const char *name, int argc, char **argv)
{
	const char *only = getenv("RS_ADV_ONLY");
	char buf[256], *tok, *save = NULL;

	if (!strcmp(name, "quiet"))
		return 1;	/* the baseline always runs */
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (!strcmp(argv[i], name))
				return 1;
		return 0;
	}
	if (!only || !*only)
		return 1;
	snprintf(buf, sizeof(buf), "%s", only);
	for (tok = strtok_r(buf, " ,", &save); tok;
	     tok = strtok_r(NULL, " ,", &save))
		if (!strcmp(tok, name))
			return 1;
	return 0;
}

static void print_table(const struct row *w)
{
	double q = w[0].p99_us;

	printf("\n%-9s %-5s %9s %9s %9s %7s %6s %5s %9s %7s %6s %5s\n",
	       "attack",
	       "", "rss0_MiB", "peak_MiB", "rss1_MiB", "ops", "errors",
	       "wrong", "p99_us", "x_quiet", "log", "secs");
	for (unsigned i = 0; i < NATTACK; i++) {
		if (!w[i].ran)
			continue;
		printf("%-9s %-5s %9.1f %9.1f %9.1f %7lu %6lu %5lu %9.0f "
		       "%7.1f %6ld %5.1f\n", w[i].name,
		       w[i].pass ? "pass" : "FAIL",
		       w[i].rss0 / 1048576.0, w[i].rss_peak / 1048576.0,
		       w[i].rss1 / 1048576.0, w[i].ops, w[i].errors, w[i].bad,
		       w[i].p99_us, q > 0 ? w[i].p99_us / q : 0,
		       w[i].log_lines, w[i].secs);
	}
}

static void pick_addresses(void)
{
	static char ips[4][48];
	const char *list = getenv("RS_RDMA_IPS");
	char buf[256], *tok, *save = NULL;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", list ? list : "");
	for (tok = strtok_r(buf, " ,", &save); tok && n < 4;
	     tok = strtok_r(NULL, " ,", &save))
		snprintf(ips[n++], sizeof(ips[0]), "%s", tok);
	adv_ip = n > 0 ? ips[0] : node_ip;
	good_ip = n > 1 ? ips[1] : NULL;
}

int main(int argc, char **argv)
{
	static struct row rows[NATTACK];
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	int failed = 0;

	if (argc > 6 && !strcmp(argv[1], "--child"))
		return vanish_child(argv);
	node_ip = getenv("RS_RDMA_IP");
	if (!getenv("RS_RDMA_DEV") || !node_ip || !*node_ip) {
		fprintf(stderr, "skip: RS_RDMA_DEV/RS_RDMA_IP not set\n");
		return 77;
	}
	setrlimit(RLIMIT_MEMLOCK, &rl);
	signal(SIGPIPE, SIG_IGN);
	if (readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1) < 0)
		return 1;
	pick_addresses();
	srand(12345);
	printf("node on %s, attackers from %s, good client from %s\n",
	       node_ip, adv_ip, good_ip ? good_ip : "(default)");
	node_start();
	good_start();
	for (unsigned i = 0; i < NATTACK; i++) {
		if (!selected(attacks[i].name, argc, argv))
			continue;
		run_one(&attacks[i], &rows[i]);
		failed += !rows[i].pass;
		if (!node_alive() || !rows[i].pass) {
			/* a fresh node and good client for the next attack */
			good_end();
			node_stop();
			node_start();
			good_start();
		}
	}
	good_end();
	print_table(rows);
	node_stop();
	unlink(node.cfg);
	printf("\nnode log: %s\n%d attack(s) failed\n", node.log, failed);
	return failed ? 1 : 0;
}
