/*
 * recstore-trace - summarize trace JSONL files written with RS_TRACE.
 *
 *   recstore-trace [--by none|table|prefix] [--slowest N] [--csv FILE]
 *                  [--svg FILE] [--check [--tolerance US]] FILE...
 *
 * Prints per-stage count/mean/p50/p95/p99/max, the network share per
 * request (client.wait - server.total, matched by trace id), and optionally
 * the slowest traces. Exit status: 0; 1 when --check finds violations;
 * 2 on bad usage or an unreadable input or output. All logic lives in
 * src/trace/analyze.c.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/error.h"
#include "trace/analyze.h"

struct args {
	struct trace_report_opts rep;
	const char *csv, *svg;
	int check;
	uint64_t tolerance;
};

static void usage(FILE *f)
{
	fputs("usage: recstore-trace [options] FILE...   (FILE '-' is stdin)\n"
	      "  --by none|table|prefix  group the stage table (default none)\n"
	      "  --slowest N             list the N slowest traces\n"
	      "  --csv FILE              write per-stage statistics as CSV\n"
	      "  --svg FILE              write a box/whisker chart as SVG\n"
	      "  --check                 verify client.op >= client.wait >= "
	      "server.total\n"
	      "                          (exit 1 on any violation)\n"
	      "  --tolerance US          allowance for --check (default 0)\n",
	      f);
}

static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s[0] || s[0] == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (*end || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{"by", required_argument, NULL, 'b'},
		{"slowest", required_argument, NULL, 's'},
		{"csv", required_argument, NULL, 'c'},
		{"svg", required_argument, NULL, 'g'},
		{"check", no_argument, NULL, 'k'},
		{"tolerance", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (!strcmp(optarg, "none"))
				a->rep.by = TRACE_BY_NONE;
			else if (!strcmp(optarg, "table"))
				a->rep.by = TRACE_BY_TABLE;
			else if (!strcmp(optarg, "prefix"))
				a->rep.by = TRACE_BY_PREFIX;
			else
				return -1;
			break;
		case 's':
			if (parse_uint(optarg, 1000000, &v) < 0)
				return -1;
			a->rep.slowest = (unsigned)v;
			break;
		case 'c':
			a->csv = optarg;
			break;
		case 'g':
			a->svg = optarg;
			break;
		case 'k':
			a->check = 1;
			break;
		case 't':
			if (parse_uint(optarg, UINT32_MAX, &a->tolerance) < 0)
				return -1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	return optind < argc ? optind : -1;
}

typedef int (*writer_fn)(struct trace_analysis *, enum trace_group, FILE *);

static int write_to(const char *path, writer_fn fn, struct trace_analysis *t,
		    enum trace_group by)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (!f) {
		perror(path);
		return -1;
	}
	rc = fn(t, by, f);
	if (fclose(f) != 0 || rc < 0) {
		fprintf(stderr, "%s: write failed\n", path);
		return -1;
	}
	return 0;
}

static int run_check(struct trace_analysis *t, uint64_t tolerance)
{
	struct trace_check r;
	int64_t v = trace_analysis_check(t, tolerance, stdout, &r);

	if (v < 0)
		return 2;
	printf("\ncheck: %" PRIu64 " traces checked, %" PRIu64
	       " violating (op<stage %" PRIu64 ", wait<server.total %" PRIu64
	       ", op<server.total %" PRIu64 ", total<stage %" PRIu64
	       "), tolerance %" PRIu64 " us\n", r.checked, r.violations,
	       r.op_lt_stage, r.wait_lt_total, r.op_lt_total,
	       r.total_lt_stage, tolerance);
	return v > 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct args a = {0};
	struct trace_analysis *t;
	int first = parse_args(argc, argv, &a), rc = 0;

	if (first < 0) {
		usage(stderr);
		return 2;
	}
	if (trace_analysis_new(&t) < 0) {
		fprintf(stderr, "recstore-trace: %s\n", rs_errormsg());
		return 2;
	}
	for (int i = first; i < argc && rc == 0; i++) {
		if (trace_analysis_load(t, argv[i]) < 0) {
			fprintf(stderr, "recstore-trace: %s\n", rs_errormsg());
			rc = 2;
		}
	}
	if (rc == 0 && trace_analysis_report(t, &a.rep, stdout) < 0)
		rc = 2;
	if (rc == 0 && a.csv &&
	    write_to(a.csv, trace_analysis_write_csv, t, a.rep.by) < 0)
		rc = 2;
	if (rc == 0 && a.svg &&
	    write_to(a.svg, trace_analysis_write_svg, t, a.rep.by) < 0)
		rc = 2;
	if (rc == 0 && a.check)
		rc = run_check(t, a.tolerance);
	trace_analysis_delete(&t);
	return rc;
}
