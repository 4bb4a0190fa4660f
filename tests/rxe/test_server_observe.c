/*
 * test_server_observe.c - what a memory node tells about itself.
 *
 * 1. Metrics and STATS agree: after a known mix of requests, the node's
 *    Prometheus endpoint (metrics_port) and its STATS reply report the same
 *    request and key counts, connections and table rows.
 * 2. Tracing: requests that carry a sampled trace id (PROTO_F_TRACE) leave
 *    server.total plus server.index (GET, DELETE) or server.apply (UPDATE,
 *    PUT) events with the table name and batch size in the node's JSONL
 *    trace (opened from RS_TRACE, with sampling 0 so that only the flagged
 *    requests are recorded); an unflagged request leaves none.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "server_harness.h"
#include "trace/trace.h"

#define DIM 8
#define N 10

static char *http_get(uint16_t port, const char *path)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	size_t cap = 1 << 20, have = 0;
	char req[128], *buf = malloc(cap);
	ssize_t r;
	int fd;

	SV_CHECK(buf, "malloc");
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	SV_CHECK(fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof(a)),
		 "connect to the metrics port %u: %s", port, strerror(errno));
	snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	SV_CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req), "write");
	while (have + 1 < cap && (r = read(fd, buf + have, cap - 1 - have)) > 0)
		have += (size_t)r;
	buf[have] = '\0';
	close(fd);
	return buf;
}

/* Value of the Prometheus sample line that starts with `series `. */
static double prom(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (!strncmp(p, series, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	}
	sv_die("no series %s in /metrics", series);
	return 0;
}

static int keyed(struct sv_cli *k, uint32_t op,
		 const struct proto_table_info *t, const uint64_t *keys,
		 uint32_t n, const float *rows, uint64_t trace_id, bool flag)
{
	struct proto_keys_req q = { .table_id = t->id,
				    .table_gen = t->generation, .n = n,
				    .keys = keys };
	struct proto_hdr h;
	struct proto_msg m;
	int len;

	if (rows) {
		q.dim = DIM;
		q.rows = rows;
	}
	sv_hdr(k, &h);
	h.trace_id = trace_id;
	h.flags = flag ? PROTO_F_TRACE : 0;
	len = proto_enc_keys_req(k->buf, k->cap, &h, op, &q);
	SV_OK(len);
	return sv_call(k, (size_t)len, &m);
}

/* The trace file must hold (or not) an event of stage for id. */
static void expect_event(const char *text, uint64_t id, const char *stage,
			 bool want)
{
	char idstr[40], st[64];
	bool found = false;

	snprintf(idstr, sizeof(idstr), "\"%016llx\"", (unsigned long long)id);
	snprintf(st, sizeof(st), "\"%s\"", stage);
	for (const char *p = text; p && *p; p = strchr(p, '\n')) {
		const char *e;

		if (*p == '\n')
			p++;
		e = strchr(p, '\n');
		if (!e)
			e = p + strlen(p);
		if (memmem(p, (size_t)(e - p), idstr, strlen(idstr)) &&
		    memmem(p, (size_t)(e - p), st, strlen(st))) {
			found = true;
			if (want) {
				SV_CHECK(memmem(p, (size_t)(e - p),
						"\"table\":\"obs\"", 13),
					 "event without the table: %.*s",
					 (int)(e - p), p);
				printf("  %.*s\n", (int)(e - p), p);
			}
		}
	}
	SV_CHECK(found == want, "trace %016llx stage %s: %s",
		 (unsigned long long)id, stage, want ? "missing" : "unwanted");
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t cap = 1 << 20, n;
	char *b = malloc(cap);

	SV_CHECK(f && b, "reading %s", path);
	n = fread(b, 1, cap - 1, f);
	b[n] = '\0';
	fclose(f);
	return b;
}

int main(void)
{
	const char *ip = sv_ip();
	struct rs_server_config *cfg;
	struct proto_table_spec spec;
	struct proto_table_info t = { 0 };
	struct sv_node node;
	struct sv_cli k;
	char dir[] = "/tmp/rs-observe-XXXXXX", path[128], *text;
	uint64_t keys[N];
	float rows[N * DIM];
	uint16_t mport = 0;
	unsigned mp;
	double v;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sv_memlock();
	SV_CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(path, sizeof(path), "%s/trace.jsonl", dir);
	setenv("RS_TRACE", path, 1);
	setenv("RS_TRACE_SAMPLE", "0", 1);

	/* a free port for the endpoint: try a few */
	for (int i = 0; i < 20 && !mport; i++) {
		SV_OK(rs_server_config_new(&cfg));
		SV_OK(rs_server_config_set_workers(cfg, 2));
		mp = 20000 + (unsigned)(getpid() * 7 + i * 131) % 30000;
		SV_OK(rs_server_config_set_metrics_port(cfg, mp));
		memset(&node, 0, sizeof(node));
		{
			char listen[80];

			snprintf(listen, sizeof(listen), "%s:0", ip);
			SV_OK(rs_server_config_set_listen(cfg, listen));
		}
		if (rs_server_open(&node.s, cfg) == 0)
			mport = (uint16_t)rs_server_metrics_port(node.s);
		else
			printf("metrics port %u: %s\n", mp, rs_errormsg());
		rs_server_config_delete(&cfg);
	}
	SV_CHECK(mport, "no metrics port");
	sv_node_run(&node);
	printf("node on %s, metrics on port %u\n",
	       rs_server_listen_addr(node.s), mport);

	sv_cli_open(&k, node.ip, node.port);
	sv_spec(&spec, "obs", DIM, OPTIM_SGD);
	SV_OK(sv_create(&k, &spec, &t));
	for (int i = 0; i < N; i++) {
		keys[i] = 100 + (uint64_t)i;
		for (int j = 0; j < DIM; j++)
			rows[i * DIM + j] = (float)(i + j);
	}
	SV_OK(keyed(&k, PROTO_OP_PUT, &t, keys, N, rows, 0x1001, true));
	SV_OK(keyed(&k, PROTO_OP_GET, &t, keys, N, NULL, 0x1002, true));
	SV_OK(keyed(&k, PROTO_OP_UPDATE, &t, keys, N, rows, 0x1003, true));
	SV_OK(keyed(&k, PROTO_OP_GET, &t, keys, N, NULL, 0x1004, false));
	SV_OK(keyed(&k, PROTO_OP_DELETE, &t, keys, 3, NULL, 0x1005, true));

	/* metrics and STATS: the same numbers */
	text = http_get(mport, "/metrics");
	v = prom(text, "rs_requests_total{type=\"get\"}");
	SV_CHECK(v == 2 && v == (double)sv_stat(&k, PROTO_NO_TABLE,
						"requests.get"),
		 "gets: metrics %g", v);
	free(text);
	text = http_get(mport, "/metrics"); /* after the STATS above */
	v = prom(text, "rs_batch_keys_sum{type=\"get\"}");
	SV_CHECK(v == 2 * N && v == (double)sv_stat(&k, PROTO_NO_TABLE,
						    "get_keys"),
		 "get keys: metrics %g", v);
	v = prom(text, "rs_batch_keys_sum{type=\"update\"}");
	SV_CHECK(v == N && v == (double)sv_stat(&k, PROTO_NO_TABLE,
						"update_keys"),
		 "update keys: metrics %g", v);
	v = prom(text, "rs_connections");
	SV_CHECK(v == 1 && v == (double)sv_stat(&k, PROTO_NO_TABLE,
						"connections"),
		 "connections: metrics %g", v);
	v = prom(text, "rs_table_rows{table=\"obs\"}");
	SV_CHECK(v == N - 3 && v == (double)sv_stat(&k, t.id, "rows"),
		 "rows: metrics %g", v);
	v = prom(text, "rs_registered_memory_bytes");
	SV_CHECK(v > 0 && v == (double)sv_stat(&k, PROTO_NO_TABLE,
					       "mem_registered"),
		 "registered: metrics %g", v);
	SV_CHECK(prom(text, "rs_request_duration_seconds_count{type="
				"\"update\"}") == 1, "update duration count");
	printf("metrics and STATS agree: 2 gets of %d keys, %d updates, 1 "
	       "connection, %d rows, %.0f bytes registered\n", N, N, N - 3,
	       v);
	free(text);

	/* tracing */
	SV_OK(trace_flush());
	text = read_all(path);
	printf("trace events:\n");
	expect_event(text, 0x1001, "server.apply", true);
	expect_event(text, 0x1001, "server.total", true);
	expect_event(text, 0x1002, "server.index", true);
	expect_event(text, 0x1002, "server.total", true);
	expect_event(text, 0x1003, "server.apply", true);
	expect_event(text, 0x1003, "server.total", true);
	expect_event(text, 0x1004, "server.total", false);
	expect_event(text, 0x1005, "server.index", true);
	free(text);

	sv_cli_close(&k);
	sv_node_stop(&node);
	unlink(path);
	rmdir(dir);
	printf("ok\n");
	return 0;
}
