/*
 * server_harness.c - the bodies of the helpers declared in
 * server_harness.h, which says what they are for.
 */
#include "server_harness.h"

#include "common/addr.h"

double sv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

const char *sv_ip(void)
{
	const char *dev = getenv("RS_RDMA_DEV"), *ip = getenv("RS_RDMA_IP");

	if (!dev || !*dev || !ip || !*ip) {
		fprintf(stderr, "skip: RS_RDMA_DEV/RS_RDMA_IP not set\n");
		exit(77);
	}
	return ip;
}

void sv_memlock(void)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

	setrlimit(RLIMIT_MEMLOCK, &rl);
}

static void *sv_node_main(void *arg)
{
	struct sv_node *n = arg;

	n->run_ret = rs_server_run(n->s);
	if (n->run_ret < 0)
		fprintf(stderr, "node %s: run failed: %s (%s)\n", n->addr,
			rs_strerror(n->run_ret), rs_errormsg());
	return NULL;
}

void sv_node_run(struct sv_node *n)
{
	snprintf(n->addr, sizeof(n->addr), "%s", rs_server_listen_addr(n->s));
	if (rs_addr_parse(NULL, n->addr, 0, false, n->ip, sizeof(n->ip),
			  &n->port))
		sv_die("listen address %s: %s", n->addr, rs_errormsg());
	if (pthread_create(&n->th, NULL, sv_node_main, n))
		sv_die("pthread_create");
}

void sv_node_open(struct sv_node *n, const struct rs_server_config *cfg)
{
	memset(n, 0, sizeof(*n));
	SV_OK(rs_server_open(&n->s, cfg));
	sv_node_run(n);
}

int sv_node_close(struct sv_node *n)
{
	rs_server_stop(n->s);
	pthread_join(n->th, NULL);
	rs_server_close(&n->s);
	return n->run_ret;
}

struct rs_server_config *sv_config(const char *fmt, ...)
{
	char path[] = "/tmp/rs-test-cfg-XXXXXX";
	struct rs_server_config *cfg = NULL;
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	va_list ap;

	SV_CHECK(f, "mkstemp");
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
	SV_OK(rs_server_config_load(&cfg, path));
	unlink(path);
	return cfg;
}

void sv_node_start(struct sv_node *n, const char *ip,
		   struct rs_server_config *cfg)
{
	struct rs_server_config *own = NULL;
	char listen[80];

	if (!cfg) {
		SV_OK(rs_server_config_new(&own));
		SV_OK(rs_server_config_set_workers(own, 2));
		cfg = own;
	}
	snprintf(listen, sizeof(listen), "%s:0", ip);
	SV_OK(rs_server_config_set_listen(cfg, listen));
	sv_node_open(n, cfg);
	rs_server_config_delete(&own);
}

void sv_node_stop(struct sv_node *n)
{
	int ret = sv_node_close(n);

	SV_CHECK(ret == 0, "run returned %d", ret);
}

int sv_run(const char *bin, const char *const *args,
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

void sv_ctl_expect(const char *bin, const char *const *args,
		   int code, const char *n1, const char *n2)
{
	char out[4096], *env[] = { NULL };
	int st = sv_run(bin, args, env, out, sizeof(out));

	printf("  recstore-ctl %s %s -> %d: %s", args[2], args[3], st, out);
	SV_CHECK(st == code, "exit %d, expected %d: %s", st, code, out);
	SV_CHECK(strstr(out, n1) && (!n2 || strstr(out, n2)),
		 "output lacks '%s' or '%s': %s", n1, n2 ? n2 : "", out);
}

uint64_t sv_capacity(struct rs_client *c, const char *name)
{
	struct rs_table_info t[8] = { RS_TABLE_INFO_INIT };
	int n = rs_table_list(c, t, 8);

	SV_CHECK(n >= 0 && n <= 8, "list: %d (%s)", n, rs_errormsg());
	for (int i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			return t[i].capacity;
	return 0;
}

struct rs_client *sv_client(const char *nodes, unsigned timeout_ms)
{
	struct rs_client_config *cfg;
	struct rs_client *c;

	SV_OK(rs_client_config_new(&cfg));
	SV_OK(rs_client_config_set_nodes(cfg, nodes));
	SV_OK(rs_client_config_set_timeout_ms(cfg, timeout_ms));
	SV_OK(rs_client_open(&c, cfg));
	rs_client_config_delete(&cfg);
	return c;
}

struct rs_client *sv_client_of(const struct sv_node *n)
{
	return sv_client(n->addr, 30000);
}

int sv_connect(struct rv_dev *d, const char *ip, uint16_t port,
	       const struct sv_conn_opts *o, struct rv_conn **out)
{
	struct rv_conn_attr a;

	rv_conn_attr_init(&a);
	a.msg_max = o->msg_max;
	a.credits = o->slots;
	a.send_slots = o->slots;
	a.priv = o->priv;
	a.priv_len = o->priv_len;
	a.reject_buf = o->rej;
	a.reject_cap = o->rej_cap;
	return rv_connect(d, ip, port, &a, out);
}

void sv_cli_open(struct sv_cli *k, const char *ip,
		 uint16_t port)
{
	struct sv_conn_opts o = { .msg_max = SV_MSG_MAX, .slots = 16 };

	memset(k, 0, sizeof(*k));
	SV_OK(rv_dev_open(&k->dev, ip));
	SV_OK(sv_connect(k->dev, ip, port, &o, &k->c));
	k->cap = rv_conn_msg_max(k->c);
	k->buf = calloc(1, k->cap > SV_MSG_MAX ? k->cap : SV_MSG_MAX);
	SV_CHECK(k->buf, "calloc");
	k->next_id = 1;
	proto_limits_default(&k->lim);
	k->lim.max_message_bytes = SV_MSG_MAX;
	k->lim.max_batch_keys = PROTO_MAX_BATCH_KEYS;
	k->lim.max_dim = PROTO_MAX_DIM;
}

void sv_cli_close(struct sv_cli *k)
{
	rv_conn_close(&k->c);
	rv_dev_close(&k->dev);
	free(k->buf);
	k->buf = NULL;
}

void sv_hdr(struct sv_cli *k, struct proto_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->req_id = k->next_id++;
}

int sv_send(struct sv_cli *k, const void *b, size_t len)
{
	return rv_msg_send(k->c, b, len, SV_TIMEOUT_MS);
}

int sv_recv(struct sv_cli *k, struct rv_msg *raw,
	    struct proto_msg *m)
{
	int n = rv_msg_recv(k->c, raw, 1, SV_TIMEOUT_MS);

	SV_CHECK(n == 1, "no reply: %d (%s)", n, rs_strerror(n));
	return proto_decode(raw->data, raw->len, &k->lim, m);
}

int sv_call(struct sv_cli *k, size_t len, struct proto_msg *m)
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

int sv_call_raw(struct sv_cli *k, size_t len,
		struct proto_msg *m, struct rv_msg *raw)
{
	int ret;

	SV_OK(sv_send(k, k->buf, len));
	ret = sv_recv(k, raw, m);
	SV_CHECK(ret == 0, "reply does not decode: %s", rs_strerror(ret));
	return m->hdr.status;
}

void sv_spec(struct proto_table_spec *s, const char *name,
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

int sv_create(struct sv_cli *k,
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

int sv_drop(struct sv_cli *k, const char *name)
{
	struct proto_hdr h;
	struct proto_msg m;
	int len;

	sv_hdr(k, &h);
	len = proto_enc_table_drop_req(k->buf, k->cap, &h, name);
	SV_OK(len);
	return sv_call(k, (size_t)len, &m);
}

int sv_keys(struct sv_cli *k, uint32_t op,
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

uint64_t sv_stat(struct sv_cli *k, uint32_t table,
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

void sv_good_start(struct sv_good *g)
{
	SV_CHECK(g->nkeys <= SV_GOOD_MAX_KEYS && g->dim <= SV_GOOD_MAX_DIM &&
		 g->span > 0, "sv_good: bad shape");
	if (pthread_create(&g->th, NULL, sv_good_main, g))
		sv_die("pthread_create");
}

unsigned long sv_good_stop(struct sv_good *g)
{
	g->stop = 1;
	pthread_join(g->th, NULL);
	return g->rounds;
}
