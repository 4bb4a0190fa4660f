/*
 * analyze.h - reading trace JSONL files back: per-stage latency statistics,
 * network share, slowest traces, CSV and SVG export, consistency check.
 * The logic behind tools/recstore-trace (internal API).
 *
 * Input: any number of files written by trace.c (client and server files
 * mixed). Event lines need "trace" (1..16 hex digits), "stage" (non-empty
 * string) and "dur_us" (integer >= 0); "table" (string), "batch", "bytes",
 * "start_us" (integers >= 0) are optional but must have those types when
 * present. Lines with a "type" key are metadata; the "dropped" counts of
 * {"type":"summary"} lines are summed. Blank lines are skipped. Anything
 * else is malformed: counted, the first few remembered with file:line and
 * a reason, never fatal.
 *
 * Definitions (all in microseconds):
 *   - percentile p of n sorted values is the nearest-rank value
 *     v[ceil(p * n / 100) - 1]; mean is the arithmetic mean.
 *   - group: with TRACE_BY_NONE every event is in group "all"; by table, the
 *     event's table ("-" when it has none); by prefix, the stage name up to
 *     its first '.' ("client", "server").
 *   - per trace, a stage's duration is the largest duration among that
 *     trace's events of that stage (a request fanned out to several memory
 *     nodes waits for the slowest).
 *   - network of a trace = client.wait - server.total (may be negative when
 *     the clocks' resolutions disagree); share = network / client.op * 100.
 *   - latency of a trace = client.op, or else its longest stage.
 *   - check rules, each with an allowance of tolerance_us:
 *	client.op >= every other client.* stage; client.wait >= server.total;
 *	client.op >= server.total; server.total >= every other server.* stage.
 *
 * Ownership: an analysis owns copies of every string it reads; results
 * written to FILE streams the caller owns. Not thread-safe: one thread per
 * analysis.
 */
#ifndef RS_TRACE_ANALYZE_H
#define RS_TRACE_ANALYZE_H

#include <stdint.h>
#include <stdio.h>

enum trace_group {
	TRACE_BY_NONE,
	TRACE_BY_TABLE,
	TRACE_BY_PREFIX,
};

struct trace_stat {
	uint64_t count;
	double mean, min, p25, p50, p75, p95, p99, max;
};

struct trace_totals {
	uint64_t files;
	uint64_t lines;		/* non-blank lines read */
	uint64_t events;
	uint64_t meta;		/* "type" lines */
	uint64_t malformed;
	uint64_t dropped;	/* sum of the writers' summary lines */
	uint64_t traces;	/* distinct trace ids */
	uint64_t matched;	/* traces with client.wait and server.total */
	uint64_t client_only;	/* traces with client.* events only */
	uint64_t server_only;	/* traces with server.* events only */
};

struct trace_check {
	uint64_t checked;	/* traces where at least one rule applied */
	uint64_t violations;	/* traces breaking at least one rule */
	uint64_t op_lt_stage;	/* client.op < another client.* stage */
	uint64_t wait_lt_total;	/* client.wait < server.total */
	uint64_t op_lt_total;	/* client.op < server.total */
	uint64_t total_lt_stage; /* server.total < another server.* stage */
};

struct trace_report_opts {
	enum trace_group by;
	unsigned slowest;	/* list the N slowest traces; 0: none */
};

struct trace_analysis;

int trace_analysis_new(struct trace_analysis **out);
/* Frees everything; accepts NULL and *a == NULL; sets *a = NULL. */
void trace_analysis_delete(struct trace_analysis **a);

/* Read one file ("-" reads stdin). Returns the number of events read, or
 * -errno when the file cannot be read. */
int trace_analysis_load(struct trace_analysis *a, const char *path);
/* Read an open stream; name is used in messages. */
int trace_analysis_load_stream(struct trace_analysis *a, FILE *f,
			       const char *name);
/* One line (no newline needed); for tests and streaming readers. */
void trace_analysis_add_line(struct trace_analysis *a, const char *line,
			     size_t len, const char *name, uint64_t lineno);

/* Queries below index lazily after loading (loading more resets it). */
void trace_analysis_totals(struct trace_analysis *a, struct trace_totals *t);
/* Statistics of one (group, stage) cell: 0, or RS_E_NOTFOUND. */
int trace_analysis_stage(struct trace_analysis *a, enum trace_group by,
			 const char *group, const char *stage,
			 struct trace_stat *out);
/* Network time and share of matched traces: 0, or RS_E_NOTFOUND when no
 * trace matched. share may be NULL; share->count counts the matched traces
 * that also have a client.op > 0. */
int trace_analysis_network(struct trace_analysis *a, struct trace_stat *net,
			   struct trace_stat *share);
/* Apply the check rules; violating traces are listed on out (may be NULL).
 * Returns the number of violating traces, or a negative error. */
int64_t trace_analysis_check(struct trace_analysis *a, uint64_t tolerance_us,
			     FILE *out, struct trace_check *res);

/* The human-readable report: totals, malformed lines, per-stage table,
 * network share, slowest traces. 0 or negative. */
int trace_analysis_report(struct trace_analysis *a,
			  const struct trace_report_opts *o, FILE *out);
/* group,stage,count,mean_us,min_us,p25_us,p50_us,p75_us,p95_us,p99_us,
 * max_us - one row per (group, stage), then group "*" rows "network_us"
 * and "network_share_pct" when traces matched. RFC 4180 quoting. */
int trace_analysis_write_csv(struct trace_analysis *a, enum trace_group by,
			     FILE *out);
/* A standalone SVG: one box/whisker row per (group, stage) on a log axis
 * (whiskers min..max, box p25..p75, median bar, p95 and p99 ticks). */
int trace_analysis_write_svg(struct trace_analysis *a, enum trace_group by,
			     FILE *out);

#endif
