/*
 * test_trace_analyze.c - the trace analyzer on synthetic client and server
 * files: exact nearest-rank percentiles, malformed lines, matching by trace
 * id and the network share, grouping, slowest traces, CSV (with quoting),
 * SVG structure (a small XML well-formedness checker) and the check rules.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "recstore/error.h"
#include "trace/analyze.h"

#define ADD_LINE(a, s) trace_analysis_add_line(a, s, strlen(s), "x", 1)

static char client_path[256], server_path[256];

static const char *const malformed[] = {
	"not json",
	"[1,2]",
	"{\"trace\":\"zz\",\"stage\":\"client.op\",\"dur_us\":1}",
	"{\"trace\":\"01\",\"stage\"",
	"{\"trace\":\"01\",\"stage\":\"client.op\",\"dur_us\":-1}",
	"{\"trace\":\"01\",\"stage\":\"client.op\"}",
	"{\"trace\":\"01\",\"stage\":\"client.op\",\"dur_us\":1,\"table\":5}",
	"{\"trace\":\"00000000000000001\",\"stage\":\"x\",\"dur_us\":1}",
};

static void ev(FILE *f, uint64_t id, const char *stage, const char *table,
	       uint64_t start, uint64_t dur)
{
	fprintf(f, "{\"trace\":\"%016" PRIx64 "\",\"stage\":\"%s\",", id,
		stage);
	if (table)
		fprintf(f, "\"table\":\"%s\",", table);
	fprintf(f, "\"batch\":8,\"bytes\":512,\"start_us\":%" PRIu64
		",\"dur_us\":%" PRIu64 ",\"tid\":1}\n", start, dur);
}

/*
 * Traces i = 1..100, table "ads" for odd i, "users" for even i:
 *   client.op 100+2i, client.wait 50+2i, client.build i;
 *   server (i <= 99 only) server.total 40+i, server.apply 30+i;
 * plus server-only trace 0x1000 (server.total 5, no table).
 * Hence network = 10+i for the 99 matched traces.
 */
static int setup(void **state)
{
	const char *dir = getenv("TMPDIR");
	FILE *c, *s;

	snprintf(client_path, sizeof(client_path), "%s/rs-ta-client-%d.jsonl",
		 dir ? dir : "/tmp", (int)getpid());
	snprintf(server_path, sizeof(server_path), "%s/rs-ta-server-%d.jsonl",
		 dir ? dir : "/tmp", (int)getpid());
	c = fopen(client_path, "w");
	s = fopen(server_path, "w");
	if (!c || !s)
		return -1;
	fputs("{\"type\":\"open\",\"pid\":1,\"sample\":1.0}\n", c);
	fputs("{\"type\":\"open\",\"pid\":2,\"sample\":1.0}\n", s);
	for (uint64_t i = 1; i <= 100; i++) {
		const char *t = i % 2 ? "ads" : "users";
		uint64_t st = 1000 * i;

		ev(c, i, "client.build", t, st, i);
		ev(c, i, "client.op", t, st, 100 + 2 * i);
		ev(c, i, "client.wait", t, st + i, 50 + 2 * i);
		if (i == 50) {
			for (size_t k = 0; k < 8; k++)
				fprintf(c, "%s\n", malformed[k]);
			fputs("   \n", c);	/* blank: not malformed */
		}
		if (i <= 99) {
			ev(s, i, "server.total", t, 7 * i, 40 + i);
			ev(s, i, "server.apply", t, 7 * i + 1, 30 + i);
		}
	}
	ev(s, 0x1000, "server.total", NULL, 1, 5);
	fputs("{\"type\":\"summary\",\"events\":300,\"dropped\":7}\n", c);
	fputs("{\"type\":\"summary\",\"events\":199,\"dropped\":0}\n", s);
	fclose(c);
	fclose(s);
	return 0;
}

static int teardown(void **state)
{
	unlink(client_path);
	unlink(server_path);
	return 0;
}

static struct trace_analysis *load_both(void)
{
	struct trace_analysis *a;

	assert_int_equal(trace_analysis_new(&a), 0);
	assert_int_equal(trace_analysis_load(a, client_path), 300);
	assert_int_equal(trace_analysis_load(a, server_path), 199);
	return a;
}

static void assert_stat(const struct trace_stat *s, uint64_t n, double mean,
			double min, double p25, double p50, double p75,
			double p95, double p99, double max)
{
	assert_int_equal(s->count, n);
	assert_true(s->mean == mean);
	assert_true(s->min == min);
	assert_true(s->p25 == p25);
	assert_true(s->p50 == p50);
	assert_true(s->p75 == p75);
	assert_true(s->p95 == p95);
	assert_true(s->p99 == p99);
	assert_true(s->max == max);
}

static void totals_and_malformed(void **state)
{
	struct trace_analysis *a = load_both();
	struct trace_totals t;

	trace_analysis_totals(a, &t);
	assert_int_equal(t.files, 2);
	assert_int_equal(t.events, 499);
	assert_int_equal(t.malformed, 8);
	assert_int_equal(t.meta, 4);
	assert_int_equal(t.lines, 499 + 8 + 4);
	assert_int_equal(t.dropped, 7);
	assert_int_equal(t.traces, 101);
	assert_int_equal(t.matched, 99);
	assert_int_equal(t.client_only, 1);
	assert_int_equal(t.server_only, 1);
	assert_int_equal(trace_analysis_load(a, "/nonexistent/x"), -ENOENT);
	trace_analysis_delete(&a);
	assert_null(a);
	trace_analysis_delete(&a);	/* NULL is fine */
}

static void percentiles_exact(void **state)
{
	struct trace_analysis *a = load_both();
	struct trace_stat s;

	assert_int_equal(trace_analysis_stage(a, TRACE_BY_NONE, "all",
					      "client.op", &s), 0);
	assert_stat(&s, 100, 201, 102, 150, 200, 250, 290, 298, 300);
	assert_int_equal(trace_analysis_stage(a, TRACE_BY_NONE, "all",
					      "client.wait", &s), 0);
	assert_stat(&s, 100, 151, 52, 100, 150, 200, 240, 248, 250);
	/* [5, 41..139]: v[k] = 40 + k for k >= 1 */
	assert_int_equal(trace_analysis_stage(a, TRACE_BY_NONE, "all",
					      "server.total", &s), 0);
	assert_stat(&s, 100, 89.15, 5, 64, 89, 114, 134, 138, 139);
	assert_int_equal(trace_analysis_stage(a, TRACE_BY_NONE, "all",
					      "nope", &s), RS_E_NOTFOUND);
	trace_analysis_delete(&a);

	/* tiny samples: nearest rank never interpolates */
	assert_int_equal(trace_analysis_new(&a), 0);
	ADD_LINE(a, "{\"trace\":\"1\",\"stage\":\"s\","
				"\"dur_us\":2}");
	assert_int_equal(trace_analysis_stage(a, TRACE_BY_NONE, "all", "s",
					      &s), 0);
	assert_stat(&s, 1, 2, 2, 2, 2, 2, 2, 2, 2);
	ADD_LINE(a, "{\"trace\":\"2\",\"stage\":\"s\","
				"\"dur_us\":1}");
	assert_int_equal(trace_analysis_stage(a, TRACE_BY_NONE, "all", "s",
					      &s), 0);
	assert_stat(&s, 2, 1.5, 1, 1, 1, 2, 2, 2, 2);
	trace_analysis_delete(&a);
}

static void network_matching(void **state)
{
	struct trace_analysis *a = load_both();
	struct trace_stat net, share;

	assert_int_equal(trace_analysis_network(a, &net, &share), 0);
	/* 11..109 */
	assert_stat(&net, 99, 60, 11, 35, 60, 85, 105, 109, 109);
	assert_int_equal(share.count, 99);
	/* i = 1: 11 / 102; i = 99: 109 / 298 */
	assert_true(share.min > 10.78 && share.min < 10.79);
	assert_true(share.max > 36.57 && share.max < 36.59);
	trace_analysis_delete(&a);

	assert_int_equal(trace_analysis_new(&a), 0);
	assert_int_equal(trace_analysis_network(a, &net, NULL),
			 RS_E_NOTFOUND);
	trace_analysis_delete(&a);
}

static void grouping(void **state)
{
	struct trace_analysis *a = load_both();
	struct trace_stat s;

	/* odd i: 102, 106, ..., 298 */
	assert_int_equal(trace_analysis_stage(a, TRACE_BY_TABLE, "ads",
					      "client.op", &s), 0);
	assert_stat(&s, 50, 200, 102, 150, 198, 250, 290, 298, 298);
	assert_int_equal(trace_analysis_stage(a, TRACE_BY_TABLE, "-",
					      "server.total", &s), 0);
	assert_int_equal(s.count, 1);
	assert_int_equal(trace_analysis_stage(a, TRACE_BY_PREFIX, "server",
					      "server.apply", &s), 0);
	assert_int_equal(s.count, 99);
	assert_int_equal(trace_analysis_stage(a, TRACE_BY_PREFIX, "client",
					      "server.apply", &s),
			 RS_E_NOTFOUND);
	trace_analysis_delete(&a);
}

static char *capture(struct trace_analysis *a, int what,
		     enum trace_group by, unsigned slowest)
{
	struct trace_report_opts o = {.by = by, .slowest = slowest};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	switch (what) {
	case 0:
		assert_int_equal(trace_analysis_report(a, &o, f), 0);
		break;
	case 1:
		assert_int_equal(trace_analysis_write_csv(a, by, f), 0);
		break;
	default:
		assert_int_equal(trace_analysis_write_svg(a, by, f), 0);
	}
	fclose(f);
	return buf;
}

static void report_text(void **state)
{
	struct trace_analysis *a = load_both();
	char *r = capture(a, 0, TRACE_BY_NONE, 3), *p, *q;

	assert_non_null(strstr(r, "malformed lines 8"));
	assert_non_null(strstr(r, "events dropped by writers 7"));
	/* first malformed line: after 3*50 events and the open line */
	p = strstr(r, "malformed: ");
	assert_non_null(p);
	assert_non_null(strstr(p, "rs-ta-client-"));
	assert_non_null(strstr(p, ".jsonl:152: not JSON"));
	assert_non_null(strstr(r, "99 traces matched by id (1 client-only, "
				  "1 server-only)"));
	/* slowest three in order: i = 100, 99, 98 */
	p = strstr(r, "0000000000000064  300 us");
	q = strstr(r, "0000000000000063  298 us");
	assert_non_null(p);
	assert_non_null(q);
	assert_true(p < q);
	assert_non_null(strstr(q, "0000000000000062  296 us"));
	/* trace 99 lists both sides, server events offset from their own
	 * first event */
	assert_non_null(strstr(q, "server.apply     +1"));
	assert_null(strstr(r, "0000000000000061  294 us"));
	free(r);
	trace_analysis_delete(&a);
}

static void csv_export(void **state)
{
	struct trace_analysis *a = load_both();
	char *c = capture(a, 1, TRACE_BY_NONE, 0);
	int lines = 0;
	static const char head[] = "group,stage,count,mean_us,min_us,p25_us,"
				   "p50_us,p75_us,p95_us,p99_us,max_us\n";

	assert_true(!strncmp(c, head, strlen(head)));
	assert_non_null(strstr(c, "\nall,client.op,100,201,102,150,200,250,"
				  "290,298,300\n"));
	assert_non_null(strstr(c, "\nall,server.total,100,89.150,5,64,89,114,"
				  "134,138,139\n"));
	assert_non_null(strstr(c, "\n*,network_us,99,60,11,35,60,85,105,109,"
				  "109\n"));
	assert_non_null(strstr(c, "\n*,network_share_pct,99,"));
	for (char *p = c; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 1 + 5 + 2);
	free(c);
	trace_analysis_delete(&a);

	/* quoting */
	assert_int_equal(trace_analysis_new(&a), 0);
	ADD_LINE(a, "{\"trace\":\"1\",\"stage\":\"s\","
				"\"table\":\"a,\\\"b\",\"dur_us\":2}");
	c = capture(a, 1, TRACE_BY_TABLE, 0);
	assert_non_null(strstr(c, "\n\"a,\"\"b\",s,1,2,2,2,2,2,2,2,2\n"));
	free(c);
	trace_analysis_delete(&a);
}

/* Minimal XML well-formedness: balanced, properly nested elements, quoted
 * attributes, no raw '<' or bad '&' in text. Returns elements seen. */
static int xml_check(const char *s)
{
	const char *stack[64];
	size_t stlen[64];
	int depth = 0, elems = 0;

	while (*s) {
		if (*s == '&') {
			const char *semi = strchr(s, ';');

			assert_non_null(semi);
			assert_true(!strncmp(s, "&amp;", 5) ||
				    !strncmp(s, "&lt;", 4) ||
				    !strncmp(s, "&gt;", 4) ||
				    !strncmp(s, "&quot;", 6) ||
				    !strncmp(s, "&apos;", 6));
			s = semi + 1;
			continue;
		}
		if (*s != '<') {
			assert_true(*s != '>');
			s++;
			continue;
		}
		if (s[1] == '?') {
			s = strstr(s, "?>");
			assert_non_null(s);
			s += 2;
			continue;
		}
		if (s[1] == '/') {
			size_t n = strcspn(s + 2, ">");

			assert_true(depth > 0);
			depth--;
			assert_int_equal(n, stlen[depth]);
			assert_true(!strncmp(s + 2, stack[depth], n));
			s += 2 + n + 1;
			continue;
		}
		{
			const char *name = s + 1, *p;
			size_t n = strcspn(name, " />");
			char q = 0;

			assert_true(n > 0);
			for (p = name + n; *p && (q || (*p != '>')); p++) {
				if (q && *p == q)
					q = 0;
				else if (!q && (*p == '"' || *p == '\''))
					q = *p;
				else if (!q)
					assert_true(*p != '<');
			}
			assert_int_equal(*p, '>');
			elems++;
			if (p[-1] != '/') {
				assert_true(depth < 64);
				stack[depth] = name;
				stlen[depth++] = n;
			}
			s = p + 1;
		}
	}
	assert_int_equal(depth, 0);
	return elems;
}

static int count(const char *s, const char *needle)
{
	int n = 0;

	for (; (s = strstr(s, needle)); s++)
		n++;
	return n;
}

static void svg_export(void **state)
{
	struct trace_analysis *a = load_both();
	char *g = capture(a, 2, TRACE_BY_NONE, 0);

	assert_true(!strncmp(g, "<?xml", 5));
	assert_non_null(strstr(g, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
	assert_true(xml_check(g) > 5 * 6);
	assert_int_equal(count(g, "<rect class=\"box\""), 5);
	assert_int_equal(count(g, "<g class=\"row\">"), 5);
	assert_non_null(strstr(g, ">client.op</text>"));
	/* decades from 1 us (min 1) to 1 ms (max 300) */
	assert_non_null(strstr(g, ">1us</text>"));
	assert_non_null(strstr(g, ">1ms</text>"));
	free(g);
	g = capture(a, 2, TRACE_BY_TABLE, 0);
	xml_check(g);
	assert_int_equal(count(g, "<rect class=\"box\""), 5 + 5 + 1);
	free(g);
	trace_analysis_delete(&a);

	/* names that need escaping; an empty analysis still makes an SVG */
	assert_int_equal(trace_analysis_new(&a), 0);
	g = capture(a, 2, TRACE_BY_TABLE, 0);
	xml_check(g);
	free(g);
	ADD_LINE(a, "{\"trace\":\"1\",\"stage\":\"s\","
				"\"table\":\"<x&y>'\\\"\",\"dur_us\":0}");
	g = capture(a, 2, TRACE_BY_TABLE, 0);
	xml_check(g);
	assert_non_null(strstr(g, "&lt;x&amp;y&gt;&apos;&quot; / s"));
	free(g);
	trace_analysis_delete(&a);
}

static void add(struct trace_analysis *a, uint64_t id, const char *stage,
		uint64_t dur)
{
	char line[200];
	int n = snprintf(line, sizeof(line), "{\"trace\":\"%" PRIx64
			 "\",\"stage\":\"%s\",\"dur_us\":%" PRIu64 "}", id,
			 stage, dur);

	trace_analysis_add_line(a, line, (size_t)n, "mem", 1);
}

static void check_rules(void **state)
{
	struct trace_analysis *a;
	struct trace_check r;
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	assert_int_equal(trace_analysis_new(&a), 0);
	add(a, 0x10, "client.op", 100);		/* consistent */
	add(a, 0x10, "client.build", 10);
	add(a, 0x10, "client.wait", 50);
	add(a, 0x10, "server.total", 40);
	add(a, 0x10, "server.apply", 30);
	add(a, 0x11, "client.op", 10);		/* op < wait < total */
	add(a, 0x11, "client.wait", 20);
	add(a, 0x11, "server.total", 30);
	add(a, 0x12, "server.total", 5);	/* total < apply */
	add(a, 0x12, "server.apply", 9);
	add(a, 0x13, "client.op", 50);		/* off by one */
	add(a, 0x13, "client.wait", 50);
	add(a, 0x13, "server.total", 51);
	add(a, 0x14, "client.op", 50);		/* nothing to check */

	f = open_memstream(&out, &len);
	assert_int_equal(trace_analysis_check(a, 0, f, &r), 3);
	fclose(f);
	assert_int_equal(r.checked, 4);
	assert_int_equal(r.violations, 3);
	assert_int_equal(r.op_lt_stage, 1);
	assert_int_equal(r.wait_lt_total, 2);
	assert_int_equal(r.op_lt_total, 2);
	assert_int_equal(r.total_lt_stage, 1);
	assert_non_null(strstr(out, "violation 0000000000000011: client.op 10 "
				    "< client.wait 20 client.wait 20 < "
				    "server.total 30 client.op 10 < "
				    "server.total 30\n"));
	assert_non_null(strstr(out, "violation 0000000000000012: server.total"
				    " 5 < server.apply 9\n"));
	assert_null(strstr(out, "0000000000000010"));
	free(out);

	assert_int_equal(trace_analysis_check(a, 1, NULL, &r), 2);
	assert_int_equal(r.wait_lt_total, 1);
	trace_analysis_delete(&a);

	/* the consistent synthetic files pass */
	a = load_both();
	assert_int_equal(trace_analysis_check(a, 0, NULL, &r), 0);
	/* 0x1000 has nothing to check */
	assert_int_equal(r.checked, 100);
	trace_analysis_delete(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(totals_and_malformed),
		cmocka_unit_test(percentiles_exact),
		cmocka_unit_test(network_matching),
		cmocka_unit_test(grouping),
		cmocka_unit_test(report_text),
		cmocka_unit_test(csv_export),
		cmocka_unit_test(svg_export),
		cmocka_unit_test(check_rules),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
