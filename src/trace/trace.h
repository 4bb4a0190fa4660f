/*
 * trace.h - sampled per-stage trace events, written as JSONL (internal API).
 *
 * A request gets a 64-bit trace id on the client (trace_new_id()); the id
 * travels over the wire with a "sampled" bit, and every stage of the request
 * on either side may emit one event:
 *
 *	{"trace":"00c0ffee00000001","stage":"server.apply","table":"ads",
 *	 "batch":128,"bytes":65536,"start_us":81234567,"dur_us":42,"tid":4711}
 *
 * The trace id is written as 16 hex digits (a JSON number cannot hold every
 * u64 exactly in many readers). start_us is CLOCK_MONOTONIC on the emitting
 * host: comparable between events of one process, not between hosts;
 * durations are comparable everywhere. Besides events, a file holds one
 * {"type":"open",...} line per trace_open() and one {"type":"summary",
 * "events":N,"dropped":D,...} line per trace_close().
 *
 * Sampling. trace_sampled(id) hashes the id (XXH64, seed 0, of its 8
 * little-endian bytes), and samples it when (hash >> 1) < rate * 2^63. This
 * function is part of the protocol: a client and a server
 * configured with the same rate choose the same requests without talking.
 * The client decides and sets the wire bit; the server records a request
 * when the bit is set OR trace_sampled(id) holds (a server traced with rate
 * 0 records exactly what clients asked for):
 *
 *	client:	id = trace_new_id(); sampled = trace_sampled(id);
 *		t0 = trace_now_us(); ... ;
 *		if (sampled) trace_end(&(struct trace_event){.trace_id = id,
 *			.stage = "client.op", .table = name, .batch = n,
 *			.bytes = b, .start_us = t0});
 *	server:	if (trace_wanted(hdr->trace_id, hdr->flags & SAMPLED))
 *			...
 *
 * Cost. When tracing is off, trace_sampled()/trace_wanted()/trace_emit()
 * are one load of a global flag and a predicted branch. When on, emitting
 * is a copy of ~80 bytes into the calling thread's single-producer ring:
 * no lock, no system call, no allocation (except the first event of a
 * thread, which allocates and registers its ring under a mutex). A full
 * ring drops the event and counts it; the hot path never waits.
 *
 * Writer. One background thread drains every ring, formats each event with
 * jansson, and appends whole lines to the file with write(2) on an
 * O_APPEND descriptor, so lines never interleave, even with other
 * processes writing the same file. It sleeps between passes (1 ms after a
 * busy pass, backing off to 64 ms when idle) and is woken early by a
 * producer whose ring crosses half full, by trace_flush() and by
 * trace_close().
 *
 * Concurrency. trace_emit() may be called from any thread at any time.
 * trace_open()/trace_close() must not race with each other; events emitted
 * while trace_close() runs may be lost (never corrupted: rings live until
 * their thread exits). Rings of exited threads are drained, then freed.
 *
 * Errors follow recstore/error.h: 0 or a count on success, negative on
 * failure with rs_errormsg() set.
 */
#ifndef RS_TRACE_H
#define RS_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/rs_internal.h"

/* Longest table name kept in an event (longer names are truncated). */
#define TRACE_TABLE_MAX 31
/* Default ring capacity per thread, in events (power of two). */
#define TRACE_RING_SLOTS 4096
/* Rate used when RS_TRACE is set and RS_TRACE_SAMPLE is not. */
#define TRACE_DEFAULT_SAMPLE 0.01

/* One stage of one request, as passed to trace_emit(). */
struct trace_event {
	uint64_t trace_id;	/* shared by the stages of a request */
	const char *stage;	/* "client.op", ...: static storage, the
				 * pointer is kept until the writer runs */
	const char *table;	/* copied (first TRACE_TABLE_MAX bytes);
				 * NULL: no table */
	uint32_t batch;		/* keys in the request */
	uint64_t bytes;		/* payload bytes */
	uint64_t start_us;	/* trace_now_us() when the stage began */
	uint64_t dur_us;	/* duration; trace_end() fills it in */
};

struct trace_options {
	const char *path;	/* output file, appended to; "%p" -> pid */
	double sample;		/* 0..1: share of trace ids sampled */
	uint32_t ring_slots;	/* ring per thread, 2^k; 0: default */
};

struct trace_stats {
	uint64_t written;	/* events written to the file */
	uint64_t dropped;	/* events lost to full rings */
	uint64_t write_errors;	/* failed write(2) calls */
	uint32_t rings;		/* rings currently registered */
};

/* Private: the flag read by the inline fast paths, and their slow halves. */
extern atomic_bool trace_on_;
bool trace_in_sample_(uint64_t trace_id);
void trace_emit_(const struct trace_event *ev);

/* Start tracing to o->path with rate o->sample. RS_E_EXISTS if already
 * open, RS_E_INVAL for a bad rate or ring size, -errno if the file cannot
 * be opened. Starts the writer thread. */
int trace_open_opts(const struct trace_options *o);
/* Shorthand for trace_open_opts() with the default ring size. */
int trace_open(const char *path, double sample);
/* Open from the environment: RS_TRACE=path, RS_TRACE_SAMPLE=rate
 * (default TRACE_DEFAULT_SAMPLE). Returns 1 when tracing was started,
 * 0 when RS_TRACE is unset or empty, or when tracing is already open,
 * negative on a bad value or an unopenable file. */
int trace_open_env(void);
/* Write every event emitted before the call (as seen by this thread),
 * then fsync-free flush to the file. 0, or RS_E_INVAL when not open. */
int trace_flush(void);
/* Flush, append the summary line, stop the writer, close the file.
 * Returns 0; a no-op returning 0 when not open. */
int trace_close(void);
/* Counters since the last trace_open(). */
void trace_get_stats(struct trace_stats *st);

/* Monotonic clock in microseconds. */
uint64_t trace_now_us(void);
/* A fresh non-zero trace id (per-thread generator seeded from
 * getrandom(); ids are unique with overwhelming probability). */
uint64_t trace_new_id(void);
/* The deterministic sampling decision, independent of trace_on_: true when
 * hash(trace_id) < rate * 2^64. Exposed for tests and tools. */
bool trace_id_in_sample(uint64_t trace_id, double rate);

/* True when tracing is open. */
static inline bool trace_enabled(void)
{
	return RS_UNLIKELY(atomic_load_explicit(&trace_on_,
						memory_order_relaxed));
}

/* True when tracing is open and trace_id falls into the sample. */
static inline bool trace_sampled(uint64_t trace_id)
{
	return trace_enabled() && trace_in_sample_(trace_id);
}

/* Server side: record this request? (wire bit set, or sampled here.) */
static inline bool trace_wanted(uint64_t trace_id, bool wire_sampled)
{
	return trace_enabled() && (wire_sampled || trace_in_sample_(trace_id));
}

/* Record one event (the caller decided it is sampled). */
static inline void trace_emit(const struct trace_event *ev)
{
	if (trace_enabled())
		trace_emit_(ev);
}

/* The start of a stage that will be recorded only when `sampled`: reads
 * the clock only then, so that an unsampled op pays no clock read. */
static inline uint64_t trace_start_us(bool sampled)
{
	return RS_UNLIKELY(sampled) ? trace_now_us() : 0;
}

/* Set ev->dur_us = now - ev->start_us and record it. */
static inline void trace_end(struct trace_event *ev)
{
	if (trace_enabled()) {
		uint64_t now = trace_now_us();

		ev->dur_us = now > ev->start_us ? now - ev->start_us : 0;
		trace_emit_(ev);
	}
}

/* Process totals over all sessions: events written, events dropped. */
uint64_t trace_events_written(void);
uint64_t trace_events_dropped(void);

/* Register RS_M_TRACE_EVENTS and RS_M_TRACE_DROPPED (the totals above) as
 * callback counters in r (see metrics.h). Node library only
 * (src/trace/trace_metrics.c): the client library has no metrics. */
struct metrics_registry;
int trace_register_metrics(struct metrics_registry *r);

/* Tests only: stop (true) or resume (false) the writer's draining. */
void trace_test_pause_writer(bool pause);
/* Tests only: is the writer asleep until kicked (no events for ~1 s)? */
bool trace_test_writer_idle(void);

#endif
