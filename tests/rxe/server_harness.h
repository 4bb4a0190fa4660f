/*
 * server_harness.h - shared pieces of the memory node's rxe tests
 * (tests/rxe/test_server_*.c): a node run in-process on a thread, and a
 * RAW client that speaks the wire protocol through src/verbs directly, so
 * that tests can send anything (garbage, lies, floods) and see exactly what
 * the node answers.
 *
 * Every helper aborts the test (exit 1) with a message on an unexpected
 * error; sv_skip_without_device() exits 77 when RS_RDMA_DEV is unset.
 */
#ifndef SERVER_HARNESS_H
#define SERVER_HARNESS_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/rs_internal.h"
#include "recstore/client.h"
#include "recstore/server.h"
#include "harness_check.h"
#include "verbs/rv.h"

#define SV_MSG_MAX (256u << 10)
#define SV_TIMEOUT_MS 30000

#define sv_die hc_die
#define SV_OK HC_OK
#define SV_CHECK HC_CHECK

static inline double sv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline const char *sv_ip(void)
{
	const char *dev = getenv("RS_RDMA_DEV"), *ip = getenv("RS_RDMA_IP");

	if (!dev || !*dev || !ip || !*ip) {
		fprintf(stderr, "skip: RS_RDMA_DEV/RS_RDMA_IP not set\n");
		exit(77);
	}
	return ip;
}

static inline void sv_memlock(void)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

	setrlimit(RLIMIT_MEMLOCK, &rl);
}

/* ---- a node in a thread ---- */

struct sv_node {
	struct rs_server *s;
	pthread_t th;
	char addr[96];
	char ip[64];
	uint16_t port;
	int run_ret;
};

static void *sv_node_main(void *arg)
{
	struct sv_node *n = arg;

	n->run_ret = rs_server_run(n->s);
	if (n->run_ret < 0)
		fprintf(stderr, "node: run failed: %s\n", rs_errormsg());
	return NULL;
}

/* Start a node on ip:0 (cfg NULL: defaults with 2 workers). */
static inline void sv_node_start(struct sv_node *n, const char *ip,
				 struct rs_server_config *cfg)
{
	struct rs_server_config *own = NULL;
	char listen[80];
	const char *colon;

	memset(n, 0, sizeof(*n));
	if (!cfg) {
		SV_OK(rs_server_config_new(&own));
		SV_OK(rs_server_config_set_workers(own, 2));
		cfg = own;
	}
	snprintf(listen, sizeof(listen), "%s:0", ip);
	SV_OK(rs_server_config_set_listen(cfg, listen));
	SV_OK(rs_server_open(&n->s, cfg));
	rs_server_config_delete(&own);
	snprintf(n->addr, sizeof(n->addr), "%s", rs_server_listen_addr(n->s));
	colon = strrchr(n->addr, ':');
	snprintf(n->ip, sizeof(n->ip), "%.*s", (int)(colon - n->addr),
		 n->addr);
	n->port = (uint16_t)atoi(colon + 1);
	if (pthread_create(&n->th, NULL, sv_node_main, n))
		sv_die("pthread_create");
}

static inline void sv_node_stop(struct sv_node *n)
{
	rs_server_stop(n->s);
	pthread_join(n->th, NULL);
	rs_server_close(&n->s);
	SV_CHECK(n->run_ret == 0, "run returned %d", n->run_ret);
}

/* ---- a tool run as a process ---- */

/* Run bin with args (up to 14) and environment env; its exit status (128
 * if it did not exit), its stdout and stderr into out. */
static inline int sv_run(const char *bin, const char *const *args,
			 char *const *env, char *out, size_t len)
{
	const char *argv[16] = { bin };
	int p[2], n = 1, status;
	size_t have = 0;
	ssize_t r;
	pid_t pid;

	for (; *args && n < 15; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	SV_CHECK(!pipe(p), "pipe");
	pid = fork();
	SV_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		execve(bin, (char *const *)argv, env);
		_exit(127);
	}
	close(p[1]);
	while (have + 1 < len &&
	       (r = read(p[0], out + have, len - 1 - have)) > 0)
		have += (size_t)r;
	out[have] = '\0';
	close(p[0]);
	SV_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Run bin (recstore-ctl) with args, no environment; expect exit status
 * code and both needles in its output (n2 may be NULL). */
static inline void sv_ctl_expect(const char *bin, const char *const *args,
				 int code, const char *n1, const char *n2)
{
	char out[4096], *env[] = { NULL };
	int st = sv_run(bin, args, env, out, sizeof(out));

	printf("  recstore-ctl %s %s -> %d: %s", args[2], args[3], st, out);
	SV_CHECK(st == code, "exit %d, expected %d: %s", st, code, out);
	SV_CHECK(strstr(out, n1) && (!n2 || strstr(out, n2)),
		 "output lacks '%s' or '%s': %s", n1, n2 ? n2 : "", out);
}

/* The capacity rs_table_list gives for table name (not listed: 0). */
static inline uint64_t sv_capacity(struct rs_client *c, const char *name)
{
	struct rs_table_info t[8] = { RS_TABLE_INFO_INIT };
	int n = rs_table_list(c, t, 8);

	SV_CHECK(n >= 0 && n <= 8, "list: %d (%s)", n, rs_errormsg());
	for (int i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			return t[i].capacity;
	return 0;
}

/* A client of node n only (30 s timeout). */
static inline struct rs_client *sv_client_of(const struct sv_node *n)
{
	struct rs_client_config *cfg;
	struct rs_client *c;

	SV_OK(rs_client_config_new(&cfg));
	SV_OK(rs_client_config_set_nodes(cfg, n->addr));
	SV_OK(rs_client_config_set_timeout_ms(cfg, 30000));
	SV_OK(rs_client_open(&c, cfg));
	rs_client_config_delete(&cfg);
	return c;
}

/* ---- a raw client ---- */

struct sv_cli {
	struct rv_dev *dev;
	struct rv_conn *c;
	uint8_t *buf;		/* request under construction */
	uint32_t cap;		/* what the node accepts */
	uint64_t next_id;
	struct proto_limits lim;
};

static inline void sv_cli_open(struct sv_cli *k, const char *ip,
			       uint16_t port)
{
	struct rv_conn_attr a;

	memset(k, 0, sizeof(*k));
	SV_OK(rv_dev_open(&k->dev, ip));
	rv_conn_attr_init(&a);
	a.msg_max = SV_MSG_MAX;
	a.credits = 16;
	a.send_slots = 16;
	SV_OK(rv_connect(k->dev, ip, port, &a, &k->c));
	k->cap = rv_conn_msg_max(k->c);
	k->buf = calloc(1, k->cap > SV_MSG_MAX ? k->cap : SV_MSG_MAX);
	SV_CHECK(k->buf, "calloc");
	k->next_id = 1;
	proto_limits_default(&k->lim);
	k->lim.max_message_bytes = SV_MSG_MAX;
	k->lim.max_batch_keys = PROTO_MAX_BATCH_KEYS;
	k->lim.max_dim = PROTO_MAX_DIM;
}

static inline void sv_cli_close(struct sv_cli *k)
{
	rv_conn_close(&k->c);
	rv_dev_close(&k->dev);
	free(k->buf);
	k->buf = NULL;
}

static inline void sv_hdr(struct sv_cli *k, struct proto_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->req_id = k->next_id++;
}

static inline int sv_send(struct sv_cli *k, const void *b, size_t len)
{
	return rv_msg_send(k->c, b, len, SV_TIMEOUT_MS);
}

/* Receive one message and decode it as a reply; raw stays held (release
 * with rv_msg_release). Returns proto_decode's result. */
static inline int sv_recv(struct sv_cli *k, struct rv_msg *raw,
			  struct proto_msg *m)
{
	int n = rv_msg_recv(k->c, raw, 1, SV_TIMEOUT_MS);

	SV_CHECK(n == 1, "no reply: %d (%s)", n, rs_strerror(n));
	return proto_decode(raw->data, raw->len, &k->lim, m);
}

/* Send len bytes, wait for the reply; *m decoded (error replies too).
 * Returns the reply's status (0 or negative). The raw message is released
 * (so pointers into it are invalid): for keyed replies use sv_call_raw. */
static inline int sv_call(struct sv_cli *k, size_t len, struct proto_msg *m)
{
	struct rv_msg raw;
	int ret;

	SV_OK(sv_send(k, k->buf, len));
	ret = sv_recv(k, &raw, m);
	SV_CHECK(ret == 0, "reply does not decode: %s", rs_strerror(ret));
	SV_CHECK(m->hdr.flags & PROTO_F_REPLY, "not a reply");
	rv_msg_release(&raw);
	return m->hdr.status;
}

static inline int sv_call_raw(struct sv_cli *k, size_t len,
			      struct proto_msg *m, struct rv_msg *raw)
{
	int ret;

	SV_OK(sv_send(k, k->buf, len));
	ret = sv_recv(k, raw, m);
	SV_CHECK(ret == 0, "reply does not decode: %s", rs_strerror(ret));
	return m->hdr.status;
}

static inline void sv_spec(struct proto_table_spec *s, const char *name,
			   uint32_t dim, uint32_t kind)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->dim = dim;
	s->dtype = PROTO_DTYPE_FP32;
	s->capacity = 4096;
	optim_params_default(&s->optim, kind);
	init_params_default(&s->init, INIT_ZEROS);
}

/* Create a table; its directory entry into *info. */
static inline int sv_create(struct sv_cli *k,
			    const struct proto_table_spec *s,
			    struct proto_table_info *info)
{
	struct proto_hdr h;
	struct proto_msg m;
	int len, st;

	sv_hdr(k, &h);
	len = proto_enc_table_create_req(k->buf, k->cap, &h, s);
	SV_OK(len);
	st = sv_call(k, (size_t)len, &m);
	if (!st && info)
		*info = m.u.table_info;
	return st;
}

static inline int sv_drop(struct sv_cli *k, const char *name)
{
	struct proto_hdr h;
	struct proto_msg m;
	int len;

	sv_hdr(k, &h);
	len = proto_enc_table_drop_req(k->buf, k->cap, &h, name);
	SV_OK(len);
	return sv_call(k, (size_t)len, &m);
}

/* Keyed request on table t with n keys and (PUT / UPDATE) rows; statuses
 * into st[n] and (GET / GET_OR_INIT) rows into out[n * dim]. Returns the
 * reply status (< 0: an error reply, message in rs_errormsg()). */
static inline int sv_keys(struct sv_cli *k, uint32_t op,
			  const struct proto_table_info *t,
			  const uint64_t *keys, uint32_t n, const float *rows,
			  uint32_t flags, int32_t *st, float *out)
{
	struct proto_keys_req q = {
		.table_id = t->id, .flags = flags, .table_gen = t->generation,
		.n = n, .keys = keys,
	};
	struct proto_hdr h;
	struct proto_msg m;
	struct rv_msg raw;
	int len, ret;

	if (rows) {
		q.dim = t->spec.dim;
		q.dtype = PROTO_DTYPE_FP32;
		q.rows = rows;
	}
	sv_hdr(k, &h);
	len = proto_enc_keys_req(k->buf, k->cap, &h, op, &q);
	SV_OK(len);
	ret = sv_call_raw(k, (size_t)len, &m, &raw);
	SV_CHECK(m.hdr.req_id == h.req_id && m.hdr.opcode == op,
		 "reply %llu/%u to %llu/%u",
		 (unsigned long long)m.hdr.req_id, m.hdr.opcode,
		 (unsigned long long)h.req_id, op);
	if (ret < 0) {
		rs_seterr(ret, "%s", m.u.error.msg);
	} else {
		SV_CHECK(m.u.keys_reply.n == n, "%u statuses for %u keys",
			 m.u.keys_reply.n, n);
		if (st)
			proto_load_i32(st, m.u.keys_reply.status, n);
		if (out && m.u.keys_reply.rows)
			proto_load_f32(out, m.u.keys_reply.rows,
				       (size_t)n * t->spec.dim);
	}
	rv_msg_release(&raw);
	return ret;
}

/* STATS: the value of node counter `key` (table_id PROTO_NO_TABLE, or a
 * table's id). */
static inline uint64_t sv_stat(struct sv_cli *k, uint32_t table,
			       const char *key)
{
	uint32_t start = 0, total = 1;
	uint64_t v = UINT64_MAX;

	while (start < total) {
		struct proto_list_req lr = { .start = start };
		struct proto_hdr h;
		struct proto_msg m;
		struct proto_stat s;
		struct rv_msg raw;
		int len;

		sv_hdr(k, &h);
		len = proto_enc_list_req(k->buf, k->cap, &h, PROTO_OP_STATS,
					 &lr);
		SV_OK(len);
		SV_OK(sv_call_raw(k, (size_t)len, &m, &raw));
		total = m.u.stats.total;
		start += m.u.stats.n;
		while (proto_stats_next(&m.u.stats, &s))
			if (s.table_id == table && !strcmp(s.key, key))
				v = s.value;
		rv_msg_release(&raw);
		SV_CHECK(m.u.stats.n || start >= total, "empty stats page");
	}
	SV_CHECK(v != UINT64_MAX, "no stat %s", key);
	return v;
}

/*
 * The well-behaved client that runs beside a hostile or dying one: on its
 * own connection it creates table "good" (dim floats, SGD) and, round
 * after round until stopped, PUTs nkeys rows (keys cycle over `span`
 * rounds' worth), GETs them back and checks every status and row.
 * `rounds` counts the verified rounds.
 */
#define SV_GOOD_MAX_KEYS 32
#define SV_GOOD_MAX_DIM 8

struct sv_good {
	struct sv_node *node;
	unsigned nkeys, dim, span;
	_Atomic int stop;
	_Atomic unsigned long rounds;	/* read by the main thread */
	pthread_t th;
};

static void *sv_good_main(void *arg)
{
	struct sv_good *g = arg;
	struct proto_table_spec spec;
	struct proto_table_info t;
	struct sv_cli k;
	uint64_t keys[SV_GOOD_MAX_KEYS];
	float rows[SV_GOOD_MAX_KEYS * SV_GOOD_MAX_DIM];
	float out[SV_GOOD_MAX_KEYS * SV_GOOD_MAX_DIM];
	int32_t st[SV_GOOD_MAX_KEYS];
	unsigned n = g->nkeys, dim = g->dim;

	sv_cli_open(&k, g->node->ip, g->node->port);
	sv_spec(&spec, "good", dim, OPTIM_SGD);
	SV_OK(sv_create(&k, &spec, &t));
	for (unsigned long r = 0; !g->stop; r++) {
		for (unsigned i = 0; i < n; i++) {
			keys[i] = r % g->span * n + i;
			for (unsigned j = 0; j < dim; j++)
				rows[i * dim + j] = (float)(r * 10 + j);
		}
		SV_OK(sv_keys(&k, PROTO_OP_PUT, &t, keys, n, rows, 0, st,
			      NULL));
		for (unsigned i = 0; i < n; i++)
			SV_CHECK(st[i] >= 0, "good client: put status %d",
				 st[i]);
		memset(out, 0xff, sizeof(out));
		SV_OK(sv_keys(&k, PROTO_OP_GET, &t, keys, n, NULL, 0, st,
			      out));
		for (unsigned i = 0; i < n; i++)
			SV_CHECK(st[i] == 0 && !memcmp(&out[i * dim],
						       &rows[i * dim],
						       dim * sizeof(float)),
				 "good client: key %llu: status %d or wrong "
				 "row", (unsigned long long)keys[i], st[i]);
		g->rounds = r + 1;
	}
	sv_cli_close(&k);
	return NULL;
}

static inline void sv_good_start(struct sv_good *g)
{
	SV_CHECK(g->nkeys <= SV_GOOD_MAX_KEYS && g->dim <= SV_GOOD_MAX_DIM &&
		 g->span > 0, "sv_good: bad shape");
	if (pthread_create(&g->th, NULL, sv_good_main, g))
		sv_die("pthread_create");
}

/* Stop the good client; its verified rounds. */
static inline unsigned long sv_good_stop(struct sv_good *g)
{
	g->stop = 1;
	pthread_join(g->th, NULL);
	return g->rounds;
}

#endif
