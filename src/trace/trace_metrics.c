/*
 * trace_metrics.c - the tracer's totals as Prometheus counters. Apart
 * from trace.c because metrics (libmicrohttpd) are node code: the client
 * library (librecstore-client) traces but has no metrics endpoint.
 */
#include "trace/metrics.h"
#include "trace/trace.h"

static double metric_written(void *arg)
{
	return (double)trace_events_written();
}

static double metric_dropped(void *arg)
{
	return (double)trace_events_dropped();
}

int trace_register_metrics(struct metrics_registry *r)
{
	struct metrics_counter *c;
	int rc;

	rc = metrics_counter_fn(r, &c, RS_M_TRACE_EVENTS,
				"Trace events written (all sessions)",
				metric_written, NULL, NULL);
	if (rc < 0)
		return rc;
	return metrics_counter_fn(r, &c, RS_M_TRACE_DROPPED,
				  "Trace events dropped on full rings",
				  metric_dropped, NULL, NULL);
}
