/*
 * srv_stagelog.c - per-stage windows in a file a person can tail.
 *
 * With RS_STAGE_FILE set in the node's environment ("%p" becomes the pid),
 * a thread appends, every RS_STAGE_INTERVAL_MS (default 1000, 10..3600000),
 * one line per stage that saw work in that window:
 *
 *	2026-12-03T07:40:01 node stage=rpc.update count=112 p50_ms=0.262 p99_ms=1.049
 *
 * The stages are the RPC types (the rs_request_duration_seconds{type}
 * histograms) and the optimizer kernels (rs_optimizer_apply_seconds
 * {optimizer}, "apply.<optimizer>"); p50 and p99 are the upper bounds of
 * the histogram buckets (powers of two) that hold them. The windows
 * partition the node's observations: the last one is written when the
 * node closes, so the counts of a stage over all lines equal its total.
 * The trainer side (examples/dlrm.py) writes lines of the same form.
 * Unset, nothing runs; set, the thread sleeps between windows and, when no
 * request came, reads the request counters and nothing else.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/srv_internal.h"
#include "value/optimizer.h"

#define STAGELOG_MIN_MS 10
#define STAGELOG_MAX_MS 3600000

/* path with "%p" replaced by the pid */
static int expand(const char *in, char *out, size_t cap)
{
	size_t n = 0;

	for (const char *p = in; *p; p++) {
		int w;

		if (p[0] == '%' && p[1] == 'p') {
			w = snprintf(out + n, cap - n, "%ld", (long)getpid());
			p++;
		} else {
			w = snprintf(out + n, cap - n, "%c", *p);
		}
		if (w < 0 || (size_t)w >= cap - n)
			return -1;
		n += (size_t)w;
	}
	return n ? 0 : -1;
}

static void put_window(struct rs_server *s, const char *ts, const char *name,
		       const struct metrics_histogram *h,
		       struct metrics_window *w)
{
	double p50, p99;
	uint64_t n = metrics_histogram_window(h, w, &p50, &p99);

	if (n)
		fprintf(s->stagelog.f, "%s node stage=%s count=%llu "
			"p50_ms=%.3f p99_ms=%.3f\n", ts, name,
			(unsigned long long)n, p50 * 1e3, p99 * 1e3);
}

/* Requests the node counted so far: a window in which it did not move is
 * skipped without reading the histograms (an idle node's thread reads
 * SRV_RT_COUNT counters per interval and nothing else). A request counted
 * before its duration was observed is not lost: a skipped window leaves
 * the snapshots as they were, and the next window or the last one at close
 * takes it. */
static uint64_t requests_so_far(struct rs_server *s)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < SRV_RT_COUNT; i++)
		n += metrics_counter_value(s->m.requests[i]);
	return n;
}

static void flush_windows(struct rs_server *s, bool last)
{
	struct srv_stagelog *g = &s->stagelog;
	uint64_t seen = requests_so_far(s);
	char ts[32], name[64];
	time_t now = time(NULL);
	struct tm tm;

	if (!last && seen == g->seen)
		return;
	g->seen = seen;
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", localtime_r(&now, &tm));
	for (unsigned i = 0; i < SRV_RT_COUNT; i++) {
		snprintf(name, sizeof(name), "rpc.%s", srv_req_type_name(i));
		put_window(s, ts, name, s->m.duration[i], &g->w[i]);
	}
	for (unsigned k = 0; k < SRV_STAGELOG_APPLY; k++) {
		snprintf(name, sizeof(name), "apply.%s", optim_kind_name(k));
		put_window(s, ts, name, s->m.apply[k], &g->w[SRV_RT_COUNT + k]);
	}
	fflush(g->f);
}

static void stagelog_tick(void *arg)
{
	flush_windows(arg, false);
}

int srv_stagelog_start(struct rs_server *s)
{
	struct srv_stagelog *g = &s->stagelog;
	const char *path = getenv("RS_STAGE_FILE");
	const char *iv = getenv("RS_STAGE_INTERVAL_MS");
	char file[4096], *end;
	long ms = 1000;
	int ret;

	if (!path || !*path)
		return 0;
	if (iv && *iv) {
		errno = 0;
		ms = strtol(iv, &end, 10);
		if (errno || *end || ms < STAGELOG_MIN_MS ||
		    ms > STAGELOG_MAX_MS)
			return rs_seterr(RS_E_INVAL, "RS_STAGE_INTERVAL_MS: '%s' "
					 "is not a number of ms in %d..%d", iv,
					 STAGELOG_MIN_MS, STAGELOG_MAX_MS);
	}
	if (expand(path, file, sizeof(file)))
		return rs_seterr(RS_E_INVAL, "RS_STAGE_FILE: '%s' is empty or "
				 "too long", path);
	g->f = fopen(file, "a");
	if (!g->f)
		return rs_seterr(-errno, "RS_STAGE_FILE: %s: %s", file,
				 strerror(errno));
	memset(g->w, 0, sizeof(g->w));
	g->seen = 0;
	ret = srv_ticker_start(&g->tick, "rs-stages", (int)ms, stagelog_tick,
			       s);
	if (ret) {
		fclose(g->f);
		g->f = NULL;
	}
	return ret;
}

void srv_stagelog_stop(struct rs_server *s)
{
	struct srv_stagelog *g = &s->stagelog;

	if (!g->tick.started)
		return;
	srv_ticker_stop(&g->tick);
	flush_windows(s, true);	/* the last window: every observation */
	fclose(g->f);
	g->f = NULL;
}
