/*
 * test_metrics.c - the metrics registry: counters bumped from many threads,
 * histogram buckets and quantiles, the Prometheus exposition compared line
 * by line, text and JSON renderings, removal, registration errors, the HTTP
 * endpoint scraped with a plain socket client on an ephemeral port, the
 * endpoint's idle CPU, and the metric names documented in docs/.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "recstore/error.h"
#include "common/rs_internal.h"
#include "trace/metrics.h"

#define NTHREADS 8
#define PER_THREAD 200000

static char *render(struct metrics_registry *r,
		    int (*fn)(struct metrics_registry *, FILE *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(fn(r, f), 0);
	fclose(f);
	return buf;
}

/* ---- counters from threads ---------------------------------------------- */

struct worker {
	struct metrics_registry *r;
	struct metrics_counter *shared;
	int id;
};

static void *bump(void *arg)
{
	struct worker *w = arg;
	struct metrics_counter *mine, *again;
	char type[16];

	snprintf(type, sizeof(type), "t%d", w->id % 4);
	/* registration from many threads at once: get-or-create */
	assert_int_equal(metrics_counter(w->r, &mine, "rs_test_by_type_total",
					 "per type", 1, "type", type, NULL), 0);
	assert_int_equal(metrics_counter(w->r, &again, "rs_test_by_type_total",
					 "per type", 1, "type", type, NULL), 0);
	assert_ptr_equal(mine, again);
	for (int i = 0; i < PER_THREAD; i++) {
		metrics_counter_add(w->shared, 1);
		metrics_counter_add(mine, 2);
	}
	return NULL;
}

static void counters_from_threads(void **state)
{
	struct metrics_registry *r;
	struct metrics_counter *shared, *c;
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];

	assert_int_equal(metrics_registry_new(&r), 0);
	assert_int_equal(metrics_counter(r, &shared, "rs_test_total", "all", 1,
					 NULL), 0);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){r, shared, i};
		assert_int_equal(pthread_create(&th[i], NULL, bump, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(metrics_counter_value(shared),
			 (uint64_t)NTHREADS * PER_THREAD);
	for (int t = 0; t < 4; t++) {
		char type[16];

		snprintf(type, sizeof(type), "t%d", t);
		assert_int_equal(metrics_counter(r, &c, "rs_test_by_type_total",
						 "x", 1, "type", type, NULL),
				 0);
		assert_int_equal(metrics_counter_value(c),
				 2ull * PER_THREAD * (NTHREADS / 4));
	}
	/* NULL series are no-ops */
	metrics_counter_add(NULL, 1);
	metrics_gauge_set(NULL, 1);
	metrics_gauge_add(NULL, 1);
	metrics_histogram_observe(NULL, 1);
	assert_int_equal(metrics_counter_value(NULL), 0);
	metrics_registry_delete(&r);
	assert_null(r);
	metrics_registry_delete(&r);
}

/* ---- histograms --------------------------------------------------------- */

static void histogram_buckets(void **state)
{
	struct metrics_registry *r;
	struct metrics_histogram *h, *ns;
	char *text;

	assert_int_equal(metrics_registry_new(&r), 0);
	assert_int_equal(metrics_histogram(r, &h, "rs_test_keys", "keys",
					   METRICS_BUCKETS_COUNT, NULL), 0);
	assert_true(isnan(metrics_histogram_quantile(h, 0.5)));
	for (uint64_t v = 1; v <= 100; v++)
		metrics_histogram_observe(h, v);
	assert_int_equal(metrics_histogram_count(h), 100);
	assert_true(metrics_histogram_sum(h) == 5050);
	/* nearest rank 50 is value 50, in bucket (32, 64] */
	assert_true(metrics_histogram_quantile(h, 0.5) == 64);
	assert_true(metrics_histogram_quantile(h, 0.32) == 32);
	assert_true(metrics_histogram_quantile(h, 0.33) == 64);
	assert_true(metrics_histogram_quantile(h, 0.99) == 128);
	assert_true(metrics_histogram_quantile(h, 0) == 1);
	assert_true(metrics_histogram_quantile(h, 0.02) == 2);
	assert_true(metrics_histogram_quantile(h, 0.03) == 4);
	metrics_histogram_observe(h, 1ull << 30);	/* beyond 2^24 */
	assert_true(isinf(metrics_histogram_quantile(h, 1)));
	assert_true(metrics_histogram_quantile(h, 0.99) == 128);

	assert_int_equal(metrics_histogram(r, &ns, "rs_test_seconds", "t",
					   NULL, NULL), 0);
	metrics_histogram_observe(ns, 1000);		/* 1 us */
	metrics_histogram_observe(ns, 0);
	metrics_histogram_observe(ns, 3000000000ull);	/* 3 s */
	assert_true(metrics_histogram_quantile(ns, 0.5) == 1.024e-06);
	assert_true(metrics_histogram_quantile(ns, 0.1) == 2.56e-07);
	assert_true(metrics_histogram_quantile(ns, 1) == 4294967296 / 1e9);
	assert_true(metrics_histogram_sum(ns) == 3.000001);
	text = render(r, metrics_write_prometheus);
	assert_non_null(strstr(text,
		"rs_test_seconds_bucket{le=\"2.56e-07\"} 1\n"
		"rs_test_seconds_bucket{le=\"5.12e-07\"} 1\n"
		"rs_test_seconds_bucket{le=\"1.024e-06\"} 2\n"));
	assert_non_null(strstr(text,
		"rs_test_seconds_bucket{le=\"4.294967296\"} 3\n"));
	assert_non_null(strstr(text, "rs_test_seconds_bucket{le=\"+Inf\"} 3\n"
				     "rs_test_seconds_sum 3.000001\n"
				     "rs_test_seconds_count 3\n"));
	assert_non_null(strstr(text,
		"rs_test_keys_bucket{le=\"16777216\"} 100\n"
		"rs_test_keys_bucket{le=\"+Inf\"} 101\n"
		"rs_test_keys_sum 1073746874\n"
		"rs_test_keys_count 101\n"));
	free(text);
	metrics_registry_delete(&r);
}

/* ---- exposition, line by line ------------------------------------------- */

static int fn_calls;

static double forty_two(void *arg)
{
	fn_calls++;
	return *(double *)arg;
}

static struct metrics_registry *sample_registry(double *fnval)
{
	static const struct metrics_buckets small = {1, 0, 3};
	struct metrics_registry *r;
	struct metrics_counter *get, *put, *spin;
	struct metrics_gauge *depth, *rows, *fill;
	struct metrics_histogram *h;

	assert_int_equal(metrics_registry_new(&r), 0);
	assert_int_equal(metrics_counter(r, &get, RS_M_REQUESTS,
					 "RPC requests served", 1,
					 "type", "get", NULL), 0);
	assert_int_equal(metrics_counter(r, &put, RS_M_REQUESTS, "ignored", 1,
					 "type", "put", NULL), 0);
	metrics_counter_add(get, 3);
	assert_int_equal(metrics_counter(r, &spin, RS_M_CQ_SPIN,
					 "Time spent\nspinning \\ polling", 1e9,
					 NULL), 0);
	metrics_counter_add(spin, 1500000000);
	assert_int_equal(metrics_gauge(r, &depth, RS_M_RPC_QUEUE_DEPTH,
				       "Queued RPCs", NULL), 0);
	metrics_gauge_set(depth, 5);
	metrics_gauge_add(depth, -2.5);
	assert_int_equal(metrics_gauge_fn(r, &rows, RS_M_TABLE_ROWS, "Rows",
					  forty_two, fnval, "table",
					  "a\"b\\c\nd", NULL), 0);
	assert_int_equal(metrics_gauge(r, &fill, RS_M_INDEX_FILL, "Fill",
				       "table", "ads", NULL), 0);
	metrics_gauge_set(fill, NAN);
	assert_int_equal(metrics_histogram(r, &h, RS_M_BATCH_KEYS, "Keys",
					   &small, "type", "get", NULL), 0);
	metrics_histogram_observe(h, 1);
	metrics_histogram_observe(h, 3);
	metrics_histogram_observe(h, 9);
	return r;
}

static const char *const expected[] = {
	"# HELP rs_batch_keys Keys",
	"# TYPE rs_batch_keys histogram",
	"rs_batch_keys_bucket{type=\"get\",le=\"1\"} 1",
	"rs_batch_keys_bucket{type=\"get\",le=\"2\"} 1",
	"rs_batch_keys_bucket{type=\"get\",le=\"4\"} 2",
	"rs_batch_keys_bucket{type=\"get\",le=\"+Inf\"} 3",
	"rs_batch_keys_sum{type=\"get\"} 13",
	"rs_batch_keys_count{type=\"get\"} 3",
	"# HELP rs_cq_spin_seconds_total Time spent\\nspinning \\\\ polling",
	"# TYPE rs_cq_spin_seconds_total counter",
	"rs_cq_spin_seconds_total 1.5",
	"# HELP rs_index_fill_ratio Fill",
	"# TYPE rs_index_fill_ratio gauge",
	"rs_index_fill_ratio{table=\"ads\"} NaN",
	"# HELP rs_requests_total RPC requests served",
	"# TYPE rs_requests_total counter",
	"rs_requests_total{type=\"get\"} 3",
	"rs_requests_total{type=\"put\"} 0",
	"# HELP rs_rpc_queue_depth Queued RPCs",
	"# TYPE rs_rpc_queue_depth gauge",
	"rs_rpc_queue_depth 2.5",
	"# HELP rs_table_rows Rows",
	"# TYPE rs_table_rows gauge",
	"rs_table_rows{table=\"a\\\"b\\\\c\\nd\"} 42",
};

static void exposition_format(void **state)
{
	double fnval = 42;
	struct metrics_registry *r = sample_registry(&fnval);
	char *text = render(r, metrics_write_prometheus), *line, *save;
	size_t n = 0;

	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save), n++) {
		assert_true(n < RS_ARRAY_SIZE(expected));
		assert_string_equal(line, expected[n]);
	}
	assert_int_equal(n, RS_ARRAY_SIZE(expected));
	free(text);
	metrics_registry_delete(&r);
}

static void text_and_json(void **state)
{
	double fnval = 42;
	struct metrics_registry *r = sample_registry(&fnval);
	char *text = render(r, metrics_write_text);
	json_t *j, *s;
	json_error_t err;

	assert_non_null(strstr(text, "rs_requests_total{type=\"get\"} 3\n"));
	assert_non_null(strstr(text, "rs_batch_keys{type=\"get\"} count=3 "
				     "sum=13 p50<=4 p90<=+Inf p99<=+Inf\n"));
	assert_null(strstr(text, "# "));
	free(text);

	text = render(r, metrics_write_json);
	j = json_loads(text, 0, &err);
	assert_non_null(j);
	s = json_array_get(json_object_get(json_object_get(j, RS_M_REQUESTS),
					   "series"), 0);
	assert_string_equal(json_string_value(json_object_get(
		json_object_get(s, "labels"), "type")), "get");
	assert_int_equal(json_integer_value(json_object_get(s, "value")), 3);
	s = json_array_get(json_object_get(json_object_get(j, RS_M_CQ_SPIN),
					   "series"), 0);
	assert_true(json_real_value(json_object_get(s, "value")) == 1.5);
	s = json_array_get(json_object_get(json_object_get(j, RS_M_INDEX_FILL),
					   "series"), 0);
	assert_true(json_is_null(json_object_get(s, "value")));
	s = json_array_get(json_object_get(json_object_get(j, RS_M_BATCH_KEYS),
					   "series"), 0);
	assert_int_equal(json_integer_value(json_object_get(s, "count")), 3);
	assert_int_equal(json_array_size(json_object_get(s, "buckets")), 3);
	assert_string_equal(json_string_value(json_object_get(
		json_object_get(j, RS_M_BATCH_KEYS), "type")), "histogram");
	json_decref(j);
	free(text);
	metrics_registry_delete(&r);
}

static void removal_and_callbacks(void **state)
{
	double fnval = 7;
	struct metrics_registry *r;
	struct metrics_gauge *g, *g2;
	struct metrics_counter *c;
	char *text;

	assert_int_equal(metrics_registry_new(&r), 0);
	assert_int_equal(metrics_gauge_fn(r, &g, RS_M_TABLE_ROWS, "Rows",
					  forty_two, &fnval, "table", "t1",
					  NULL), 0);
	assert_int_equal(metrics_gauge_fn(r, &g2, RS_M_TABLE_ROWS, "Rows",
					  forty_two, &fnval, "table", "t1",
					  NULL), RS_E_EXISTS);
	assert_null(g2);
	assert_int_equal(metrics_gauge(r, &g2, RS_M_TABLE_ROWS, "Rows",
				       "table", "t1", NULL), RS_E_EXISTS);
	assert_int_equal(metrics_counter_fn(r, &c, "rs_test_fn_total", "f",
					    forty_two, &fnval, NULL), 0);
	assert_int_equal(metrics_counter_value(c), 7);
	fn_calls = 0;
	text = render(r, metrics_write_prometheus);
	assert_int_equal(fn_calls, 2);
	assert_non_null(strstr(text, "rs_table_rows{table=\"t1\"} 7\n"));
	assert_non_null(strstr(text, "rs_test_fn_total 7\n"));
	free(text);
	metrics_gauge_remove(r, &g);
	assert_null(g);
	metrics_gauge_remove(r, &g);		/* NULL: no-op */
	fn_calls = 0;
	text = render(r, metrics_write_prometheus);
	assert_int_equal(fn_calls, 1);		/* only the counter */
	assert_null(strstr(text, "rs_table_rows{"));
	assert_non_null(strstr(text, "# TYPE rs_table_rows gauge\n"));
	free(text);
	metrics_counter_remove(r, &c);
	metrics_registry_delete(&r);
}

static void registration_errors(void **state)
{
	struct metrics_registry *r;
	struct metrics_counter *c;
	struct metrics_gauge *g;
	struct metrics_histogram *h;
	struct metrics_http *http_h;
	static const struct metrics_buckets bad = {1, 60, 10};

	assert_int_equal(metrics_registry_new(&r), 0);
	assert_int_equal(metrics_counter(r, &c, "1bad", "x", 1, NULL),
			 RS_E_INVAL);
	assert_null(c);
	assert_int_equal(metrics_counter(r, &c, "bad-name", "x", 1, NULL),
			 RS_E_INVAL);
	assert_int_equal(metrics_counter(r, &c, "ok", "x", 0, NULL),
			 RS_E_INVAL);
	assert_int_equal(metrics_counter(r, &c, "ok", "x", 1, "__x", "v",
					 NULL), RS_E_INVAL);
	assert_int_equal(metrics_counter(r, &c, "ok", "x", 1, "a", "1", "a",
					 "2", NULL), RS_E_INVAL);
	assert_int_equal(metrics_counter(r, &c, "ok", "x", 1, "a", "1", "b",
					 "2", "c", "3", "d", "4", "e", "5",
					 NULL), RS_E_INVAL);
	assert_int_equal(metrics_histogram(r, &h, "h", "x", NULL, "le", "1",
					   NULL), RS_E_INVAL);
	assert_int_equal(metrics_histogram(r, &h, "h", "x", &bad, NULL),
			 RS_E_INVAL);
	assert_int_equal(metrics_counter(r, &c, "ns:ok_total", "x", 1, "a",
					 "1", NULL), 0);
	/* the family's shape is fixed by the first registration */
	assert_int_equal(metrics_counter(r, &c, "ns:ok_total", "x", 1, "b",
					 "1", NULL), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "label 0 is 'a'"));
	assert_int_equal(metrics_counter(r, &c, "ns:ok_total", "x", 1, NULL),
			 RS_E_INVAL);
	assert_int_equal(metrics_counter(r, &c, "ns:ok_total", "x", 2, "a",
					 "1", NULL), RS_E_INVAL);
	assert_int_equal(metrics_gauge(r, &g, "ns:ok_total", "x", "a", "1",
				       NULL), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "is a counter"));
	assert_int_equal(metrics_gauge_fn(r, &g, "g", "x", NULL, NULL, NULL),
			 RS_E_INVAL);
	assert_int_equal(metrics_http_start(r, "not-an-ip", 0, &http_h),
			 RS_E_INVAL);
	assert_null(http_h);
	metrics_registry_delete(&r);
}

/* ---- HTTP --------------------------------------------------------------- */

/* One request over a fresh TCP connection; returns the whole response. */
static char *http(uint16_t port, const char *request)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port)};
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_non_null(buf);
	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(write(fd, request, strlen(request)),
			 (ssize_t)strlen(request));
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		assert_int_equal(poll(&p, 1, 5000), 1);
		if (len + 1 >= cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		n = read(fd, buf + len, cap - len - 1);
		assert_true(n >= 0);
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	return buf;
}

static void http_scrape(void **state)
{
	double fnval = 42;
	struct metrics_registry *r = sample_registry(&fnval);
	struct metrics_http *h, *h2;
	char *want = render(r, metrics_write_prometheus), *resp, *body;
	uint16_t port;

	assert_int_equal(metrics_http_start(r, NULL, 0, &h), 0);
	port = metrics_http_port(h);
	assert_true(port > 0);
	print_message("metrics endpoint on 127.0.0.1:%u\n", port);

	resp = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n"
			  "Connection: close\r\n\r\n");
	assert_true(!strncmp(resp, "HTTP/1.1 200", 12));
	assert_non_null(strcasestr(resp, "Content-Type: text/plain; "
					 "version=0.0.4; charset=utf-8\r\n"));
	body = strstr(resp, "\r\n\r\n");
	assert_non_null(body);
	assert_string_equal(body + 4, want);
	free(resp);

	resp = http(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n"
			  "Connection: close\r\n\r\n");
	assert_true(!strncmp(resp, "HTTP/1.1 200", 12));
	assert_string_equal(strstr(resp, "\r\n\r\n"), "\r\n\r\n");
	free(resp);

	resp = http(port, "GET /other HTTP/1.0\r\n\r\n");
	assert_true(!strncmp(resp, "HTTP/1.0 404", 12) ||
		    !strncmp(resp, "HTTP/1.1 404", 12));
	free(resp);
	resp = http(port, "POST /metrics HTTP/1.1\r\nHost: x\r\n"
			  "Content-Length: 0\r\nConnection: close\r\n\r\n");
	assert_true(!strncmp(resp, "HTTP/1.1 405", 12));
	assert_non_null(strcasestr(resp, "Allow: GET, HEAD"));
	free(resp);

	/* the port is taken now */
	assert_true(metrics_http_start(r, "127.0.0.1", port, &h2) < 0);
	assert_null(h2);
	metrics_http_stop(&h);
	assert_null(h);
	metrics_http_stop(&h);
	free(want);
	metrics_registry_delete(&r);
}

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The endpoint's thread sleeps in epoll while nobody scrapes. */
static void http_idle_cpu(void **state)
{
	struct metrics_registry *r;
	struct metrics_http *h;
	struct timespec two = {2, 0};
	double t0, used;
	char *resp;

	assert_int_equal(metrics_registry_new(&r), 0);
	assert_int_equal(metrics_register_process(r), 0);
	assert_int_equal(metrics_http_start(r, "127.0.0.1", 0, &h), 0);
	resp = http(metrics_http_port(h), "GET /metrics HTTP/1.1\r\nHost: x"
					  "\r\nConnection: close\r\n\r\n");
	assert_non_null(strstr(resp, "\n" RS_M_PROCESS_CPU " "));
	assert_non_null(strstr(resp, "\n" RS_M_PROCESS_RSS " "));
	assert_non_null(strstr(resp, "\n" RS_M_BUILD_INFO "{version=\""));
	free(resp);
	t0 = cpu_seconds();
	nanosleep(&two, NULL);
	used = cpu_seconds() - t0;
	print_message("idle endpoint: %.3f ms CPU in 2 s = %.3f%% of a core "
		      "(bound 1%%)\n", used * 1e3, used / 2 * 100);
	assert_true(used < 0.02);
	metrics_http_stop(&h);
	metrics_registry_delete(&r);
}

/* ---- docs --------------------------------------------------------------- */

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;

	if (!f)
		return NULL;
	buf = malloc(1 << 20);
	assert_non_null(buf);
	len = fread(buf, 1, (1 << 20) - 1, f);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

static void names_documented(void **state)
{
	static const char *const names[] = {
		RS_M_REQUESTS, RS_M_REQUEST_ERRORS, RS_M_REQUEST_DURATION,
		RS_M_KEYS_SERVED, RS_M_BYTES_SERVED, RS_M_BATCH_KEYS,
		RS_M_TABLE_ROWS, RS_M_TABLE_BYTES, RS_M_INDEX_FILL,
		RS_M_OPTIMIZER_APPLY, RS_M_RPC_QUEUE_DEPTH, RS_M_CONNECTIONS,
		RS_M_CONNS_CUT, RS_M_TRANSPORT_EVENTS,
		RS_M_CQ_SPIN, RS_M_CQ_BLOCKED, RS_M_CQ_WAKEUPS,
		RS_M_REGISTERED_BYTES, RS_M_CLIENT_READS, RS_M_CLIENT_TORN,
		RS_M_CLIENT_CACHE_HITS, RS_M_CLIENT_CACHE_MISSES,
		RS_M_TRACE_EVENTS, RS_M_TRACE_DROPPED, RS_M_PROCESS_CPU,
		RS_M_PROCESS_RSS, RS_M_BUILD_INFO,
	};
	char *doc = slurp(RS_SOURCE_DIR "/docs/metrics.md");
	char *dash = slurp(RS_SOURCE_DIR "/docs/grafana-dashboard.json");
	json_error_t err;
	json_t *j;

	assert_non_null(doc);
	assert_non_null(dash);
	j = json_loads(dash, 0, &err);
	assert_non_null(j);
	assert_true(json_is_array(json_object_get(j, "panels")));
	json_decref(j);
	for (size_t i = 0; i < RS_ARRAY_SIZE(names); i++) {
		char tick[128];

		snprintf(tick, sizeof(tick), "`%s", names[i]);
		if (!strstr(doc, tick))
			fail_msg("%s is not documented in docs/metrics.md",
				 names[i]);
		if (!strstr(dash, names[i]))
			fail_msg("%s is not on docs/grafana-dashboard.json",
				 names[i]);
	}
	free(doc);
	free(dash);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(counters_from_threads),
		cmocka_unit_test(histogram_buckets),
		cmocka_unit_test(exposition_format),
		cmocka_unit_test(text_and_json),
		cmocka_unit_test(removal_and_callbacks),
		cmocka_unit_test(registration_errors),
		cmocka_unit_test(http_scrape),
		cmocka_unit_test(http_idle_cpu),
		cmocka_unit_test(names_documented),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
