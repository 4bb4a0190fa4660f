/*
 * metrics.h - counters, gauges and histograms, rendered in the Prometheus
 * text exposition format (and as text/JSON for recstore-ctl), served over
 * HTTP by libmicrohttpd (internal API).
 *
 * Model. A registry holds metric families (one name, help, type, label
 * names); a family holds series (one value per combination of label
 * values). Callers look a series up once, at set-up time, and keep the
 * pointer; the hot path is then one relaxed atomic add on that pointer:
 *
 *	struct metrics_counter *gets;
 *	metrics_counter(reg, &gets, RS_M_REQUESTS, "RPC requests served", 1,
 *			"type", "get", NULL);
 *	...
 *	metrics_counter_add(gets, 1);		// hot path, lock-free
 *
 * The variadic arguments are label name/value pairs ending with NULL; the
 * first call for a name fixes the family's type, help, label names (same
 * order on later calls) and scale or buckets; later calls with the same
 * label values return the same series. Every hot-path function accepts
 * NULL and then does nothing, so code keeps working when metrics are off.
 *
 * Units. Values are integers in a raw unit; `scale` divides them at render
 * time (a counter of nanoseconds with scale 1e9 is rendered in seconds, as
 * Prometheus wants: *_seconds_total). Histograms count raw values into
 * fixed power-of-two buckets: bucket i holds values <= 2^(min_log2 + i),
 * plus +Inf; observing is two relaxed atomic adds (bucket, sum).
 *
 * Callbacks. *_fn series call fn(arg) when rendered (rows per table, queue
 * depth, CPU time...). fn runs on the rendering thread with the registry
 * lock held: it must be quick and must not call into the registry. After
 * metrics_*_remove() returns, fn is never called again and arg may be
 * freed.
 *
 * Concurrency. Registration, removal and rendering take the registry
 * mutex; add/set/observe never do. Series stay valid until removed or the
 * registry is deleted. The HTTP endpoint renders on libmicrohttpd's
 * internal thread, which blocks in epoll while idle (no CPU when nobody
 * scrapes); it must be stopped before its registry is deleted.
 *
 * Errors follow recstore/error.h: RS_E_INVAL (bad name, label, type or
 * label-set mismatch), RS_E_EXISTS (a callback series that already
 * exists), -ENOMEM, -errno from sockets.
 */
#ifndef RS_METRICS_H
#define RS_METRICS_H

#include <stdint.h>
#include <stdio.h>

/* Names shared by the memory node, the client, the dashboard and
 * docs/metrics.md, which gives each one's type, labels and meaning
 * (test_metrics checks that the docs and the dashboard mention them all). */
#define RS_M_REQUESTS			"rs_requests_total"
#define RS_M_REQUEST_ERRORS		"rs_request_errors_total"
#define RS_M_REQUEST_DURATION		"rs_request_duration_seconds"
#define RS_M_KEYS_SERVED		"rs_keys_served_total"
#define RS_M_BYTES_SERVED		"rs_bytes_served_total"
#define RS_M_UPDATE_ROWS		"rs_update_rows_returned_total"
#define RS_M_BATCH_KEYS			"rs_batch_keys"
#define RS_M_TABLE_ROWS			"rs_table_rows"
#define RS_M_TABLE_BYTES		"rs_table_bytes"
#define RS_M_INDEX_FILL			"rs_index_fill_ratio"
#define RS_M_TABLE_EVICTIONS		"rs_table_evictions"
#define RS_M_OPTIMIZER_APPLY		"rs_optimizer_apply_seconds"
#define RS_M_RPC_QUEUE_DEPTH		"rs_rpc_queue_depth"
#define RS_M_CONNECTIONS		"rs_connections"
#define RS_M_CONNS_CUT			"rs_connections_cut_total"
#define RS_M_TRANSPORT_EVENTS		"rs_transport_events_total"
#define RS_M_CQ_SPIN			"rs_cq_spin_seconds_total"
#define RS_M_CQ_BLOCKED			"rs_cq_blocked_seconds_total"
#define RS_M_CQ_WAKEUPS			"rs_cq_wakeups_total"
#define RS_M_REGISTERED_BYTES		"rs_registered_memory_bytes"
#define RS_M_REPL_EPOCH			"rs_repl_epoch"
#define RS_M_REPL_QUEUED		"rs_repl_queued_records"
#define RS_M_REPL_TO_COPY		"rs_repl_ranges_to_copy"
#define RS_M_REPL_COPIED		"rs_repl_copied_rows_total"
#define RS_M_REPL_FAILED		"rs_repl_failed_writes_total"
#define RS_M_REPL_HELD			"rs_repl_held_writes_total"
#define RS_M_REPL_FREED			"rs_repl_freed_rows_total"
#define RS_M_REPL_REGRESSED		"rs_repl_store_regressed_epoch"
#define RS_M_REPL_EVDEL_RESENT		"rs_repl_evict_deletions_resent_total"
#define RS_M_REPL_EVDEL_PENDING		"rs_repl_evict_deletions_pending"
#define RS_M_REPL_EVDEL_DROPPED		"rs_repl_evict_deletions_dropped_total"
#define RS_M_CLIENT_READS		"rs_client_rdma_reads_total"
#define RS_M_CLIENT_TORN		"rs_client_torn_reads_total"
#define RS_M_CLIENT_CACHE_HITS		"rs_client_location_cache_hits_total"
#define RS_M_CLIENT_CACHE_MISSES	"rs_client_location_cache_misses_total"
#define RS_M_TRACE_EVENTS		"rs_trace_events_total"
#define RS_M_TRACE_DROPPED		"rs_trace_dropped_total"
#define RS_M_PROCESS_CPU		"rs_process_cpu_seconds_total"
#define RS_M_PROCESS_RSS		"rs_process_resident_memory_bytes"
#define RS_M_BUILD_INFO			"rs_build_info"

#define METRICS_MAX_LABELS 4
#define METRICS_MAX_BUCKETS 64

/* Histogram layout: bucket i holds raw values <= 2^(min_log2 + i),
 * i < count; rendered bounds and sums are divided by scale. */
struct metrics_buckets {
	double scale;
	int min_log2;
	int count;
};

/* Durations observed in nanoseconds, rendered in seconds: 256 ns .. 34 s */
#define METRICS_BUCKETS_NS (&(const struct metrics_buckets){1e9, 8, 28})
/* Sizes and counts: 1 .. 2^24 */
#define METRICS_BUCKETS_COUNT (&(const struct metrics_buckets){1, 0, 25})

struct metrics_registry;
struct metrics_counter;
struct metrics_gauge;
struct metrics_histogram;
struct metrics_http;

typedef double (*metrics_read_fn)(void *arg);

#define METRICS_SENTINEL __attribute__((sentinel))

int metrics_registry_new(struct metrics_registry **out);
/* Frees every family and series; accepts NULL; sets *r = NULL. */
void metrics_registry_delete(struct metrics_registry **r);

/* Get or create a counter series. scale: 1 for plain counts. */
int metrics_counter(struct metrics_registry *r, struct metrics_counter **out,
		    const char *name, const char *help, double scale, ...)
	METRICS_SENTINEL;
/* A counter whose value is fn(arg) at render time (must not decrease). */
int metrics_counter_fn(struct metrics_registry *r,
		       struct metrics_counter **out, const char *name,
		       const char *help, metrics_read_fn fn, void *arg, ...)
	METRICS_SENTINEL;
int metrics_gauge(struct metrics_registry *r, struct metrics_gauge **out,
		  const char *name, const char *help, ...) METRICS_SENTINEL;
int metrics_gauge_fn(struct metrics_registry *r, struct metrics_gauge **out,
		     const char *name, const char *help, metrics_read_fn fn,
		     void *arg, ...) METRICS_SENTINEL;
/* b: NULL means METRICS_BUCKETS_NS. */
int metrics_histogram(struct metrics_registry *r,
		      struct metrics_histogram **out, const char *name,
		      const char *help, const struct metrics_buckets *b, ...)
	METRICS_SENTINEL;

/* Remove one series (the family stays); *p is set to NULL. */
void metrics_counter_remove(struct metrics_registry *r,
			    struct metrics_counter **p);
void metrics_gauge_remove(struct metrics_registry *r,
			  struct metrics_gauge **p);
void metrics_histogram_remove(struct metrics_registry *r,
			      struct metrics_histogram **p);

/* Hot path: lock-free, NULL-tolerant. */
void metrics_counter_add(struct metrics_counter *c, uint64_t n);
void metrics_gauge_set(struct metrics_gauge *g, double v);
void metrics_gauge_add(struct metrics_gauge *g, double d);
void metrics_histogram_observe(struct metrics_histogram *h, uint64_t raw);

/* Reading back (raw counter value; gauge value; histogram count, sum in
 * rendered units, and the upper bound, in rendered units, of the bucket
 * holding the nearest-rank q-quantile: +INFINITY in the +Inf bucket, NAN
 * when empty). */
uint64_t metrics_counter_value(const struct metrics_counter *c);
double metrics_gauge_value(const struct metrics_gauge *g);
uint64_t metrics_histogram_count(const struct metrics_histogram *h);
double metrics_histogram_sum(const struct metrics_histogram *h);
double metrics_histogram_quantile(const struct metrics_histogram *h,
				  double q);

/* Prometheus text format 0.0.4: families sorted by name, # HELP / # TYPE,
 * histograms as _bucket{le=...} (cumulative), _sum, _count. */
/* A window over a histogram: caller-owned, zeroed before its first use. */
struct metrics_window {
	uint64_t cum[METRICS_MAX_BUCKETS + 1];
};
/* What h observed since *w was last taken (everything, the first time):
 * the count, and its p50 and p99 as bucket upper bounds in the family's
 * unit (NaN when the count is 0). *w then holds the current counts. */
uint64_t metrics_histogram_window(const struct metrics_histogram *h,
				  struct metrics_window *w, double *p50,
				  double *p99);

int metrics_write_prometheus(struct metrics_registry *r, FILE *out);
/* For recstore-ctl stats: one line per series, histograms summarized as
 * count, sum, mean and bucket bounds of p50/p90/p99. */
int metrics_write_text(struct metrics_registry *r, FILE *out);
/* The same numbers as one JSON object: {"name": {"type", "help",
 * "series": [{"labels": {...}, "value": v} or {"labels", "count", "sum",
 * "buckets": [[le, cumulative], ...]}]}}. */
int metrics_write_json(struct metrics_registry *r, FILE *out);

/* Standard process series: RS_M_PROCESS_CPU, RS_M_PROCESS_RSS and
 * RS_M_BUILD_INFO{version}. */
int metrics_register_process(struct metrics_registry *r);

/* Serve GET /metrics on addr:port (addr NULL: "127.0.0.1"; IPv4 or IPv6
 * literal; port 0: an ephemeral port). Other paths get 404, other methods
 * 405. The registry must outlive the endpoint. */
int metrics_http_start(struct metrics_registry *r, const char *addr,
		       uint16_t port, struct metrics_http **out);
uint16_t metrics_http_port(const struct metrics_http *h);
/* Stops the thread, closes the socket; accepts NULL; sets *h = NULL. */
void metrics_http_stop(struct metrics_http **h);

#endif
