/*
 * test_trace.c - trace events: many producer threads, the JSONL file parsed
 * back with jansson (exact counts, order per thread, one object per line),
 * deterministic sampling, drop counting with a paused writer, flush, the
 * environment, name escaping and truncation, and the cost when off.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "trace/metrics.h"
#include "trace/trace.h"

#define NTHREADS 8
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PER_THREAD 5000		/* jansson parsing under ASan/TSan is slow */
#else
#define PER_THREAD 20000
#endif

static const char *const stages[] = {
	"client.op", "client.build", "client.wait",
	"server.total", "server.apply", "server.index",
};

struct parsed {
	size_t events, opens, summaries, bad;
	json_int_t sum_events, sum_dropped;
	json_t *ev;			/* array of event objects */
};

static void tmp_path(char *buf, size_t n, const char *tag)
{
	const char *dir = getenv("TMPDIR");

	snprintf(buf, n, "%s/rs-test-trace-%s-%d.jsonl", dir ? dir : "/tmp",
		 tag, (int)getpid());
	unlink(buf);
}

/* Read a JSONL file; every line must be one JSON object. */
static void parse_file(const char *path, struct parsed *p)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	memset(p, 0, sizeof(*p));
	p->ev = json_array();
	assert_non_null(f);
	while ((len = getline(&line, &cap, f)) > 0) {
		json_error_t err;
		json_t *o;
		const char *type;

		assert_int_equal(line[len - 1], '\n');
		o = json_loadb(line, (size_t)len, 0, &err);
		if (!o || !json_is_object(o)) {
			p->bad++;
			json_decref(o);
			continue;
		}
		type = json_string_value(json_object_get(o, "type"));
		if (type && !strcmp(type, "open")) {
			p->opens++;
		} else if (type && !strcmp(type, "summary")) {
			p->summaries++;
			p->sum_events += json_integer_value(
				json_object_get(o, "events"));
			p->sum_dropped += json_integer_value(
				json_object_get(o, "dropped"));
		} else {
			p->events++;
			json_array_append(p->ev, o);
		}
		json_decref(o);
	}
	free(line);
	fclose(f);
}

static uint64_t ev_id(json_t *o)
{
	const char *s = json_string_value(json_object_get(o, "trace"));

	assert_non_null(s);
	assert_int_equal(strlen(s), 16);
	return strtoull(s, NULL, 16);
}

/* String member key of event i of p ("" when absent or not a string). */
static const char *ev_str(const struct parsed *p, size_t i, const char *key)
{
	const char *v = json_string_value(
		json_object_get(json_array_get(p->ev, i), key));

	return v ? v : "";
}

static json_int_t ev_int(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	assert_true(json_is_integer(v));
	return json_integer_value(v);
}

/* 0, or a pause of 50 us after every pace_every events */
static unsigned pace_every;

static void *producer(void *arg)
{
	uint64_t t = (uintptr_t)arg;
	struct timespec pause = {0, 50000};
	char table[16];

	snprintf(table, sizeof(table), "t%u", (unsigned)t);
	for (uint64_t i = 0; i < PER_THREAD; i++) {
		if (pace_every && i % pace_every == pace_every - 1)
			nanosleep(&pause, NULL);
		struct trace_event ev = {
			.trace_id = (t + 1) << 32 | i,
			.stage = stages[i % RS_ARRAY_SIZE(stages)],
			.table = table,
			.batch = (uint32_t)i,
			.bytes = i * 2,
			.start_us = trace_now_us(),
			.dur_us = i,
		};
		trace_emit(&ev);
	}
	return NULL;
}

/*
 * NTHREADS producers emit PER_THREAD events each into rings of ring_slots.
 * lossless: rings hold everything, so nothing may be dropped. Otherwise the
 * rings wrap many times and drops depend on scheduling; the accounting must
 * still be exact: written + dropped == emitted, the file holds exactly the
 * written events, once each, in order per thread, and its summary line
 * reports the drops.
 */
static void run_many(uint32_t ring_slots, bool lossless)
{
	struct trace_options o = {.sample = 1, .ring_slots = ring_slots};
	static uint8_t seen[NTHREADS][PER_THREAD];
	const uint64_t total = (uint64_t)NTHREADS * PER_THREAD;
	int64_t last[NTHREADS];
	pthread_t th[NTHREADS];
	struct trace_stats st;
	struct parsed p;
	char path[256];
	uint32_t rings_before;

	tmp_path(path, sizeof(path), "many");
	o.path = path;
	assert_int_equal(trace_open_opts(&o), 0);
	assert_int_equal(trace_open(path, 1), RS_E_EXISTS);
	trace_get_stats(&st);
	rings_before = st.rings;
	for (uintptr_t t = 0; t < NTHREADS; t++)
		assert_int_equal(pthread_create(&th[t], NULL, producer,
						(void *)t), 0);
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	assert_int_equal(trace_flush(), 0);
	trace_get_stats(&st);
	print_message("ring %u: %" PRIu64 " written, %" PRIu64 " dropped\n",
		      ring_slots, st.written, st.dropped);
	assert_int_equal(st.written + st.dropped, total);
	if (lossless)
		assert_int_equal(st.dropped, 0);
	/* rings of exited threads were drained and freed */
	assert_int_equal(st.rings, rings_before);
	assert_int_equal(trace_close(), 0);
	assert_false(trace_enabled());

	parse_file(path, &p);
	assert_int_equal(p.bad, 0);
	assert_int_equal(p.opens, 1);
	assert_int_equal(p.summaries, 1);
	assert_int_equal(p.events, st.written);
	assert_int_equal(p.sum_events, st.written);
	assert_int_equal(p.sum_dropped, st.dropped);
	memset(seen, 0, sizeof(seen));
	for (int t = 0; t < NTHREADS; t++)
		last[t] = -1;
	for (size_t i = 0; i < json_array_size(p.ev); i++) {
		json_t *e = json_array_get(p.ev, i);
		uint64_t id = ev_id(e);
		unsigned t = (unsigned)(id >> 32) - 1;
		int64_t seq = (int64_t)(id & 0xffffffffu);
		char table[16];

		assert_true(t < NTHREADS && seq < PER_THREAD);
		assert_int_equal(seen[t][seq], 0);
		seen[t][seq] = 1;
		assert_true(seq > last[t]);	/* FIFO per thread */
		last[t] = seq;
		snprintf(table, sizeof(table), "t%u", t);
		assert_string_equal(json_string_value(
			json_object_get(e, "table")), table);
		assert_string_equal(json_string_value(
			json_object_get(e, "stage")),
			stages[seq % RS_ARRAY_SIZE(stages)]);
		assert_int_equal(ev_int(e, "batch"), seq);
		assert_int_equal(ev_int(e, "bytes"), seq * 2);
		assert_int_equal(ev_int(e, "dur_us"), seq);
		assert_true(ev_int(e, "start_us") > 0);
		assert_true(ev_int(e, "tid") > 0);
	}
	json_decref(p.ev);
	unlink(path);
}

static void many_threads_exact(void **state)
{
	run_many(1u << 15, true);
}

/* Paced so that the 64-slot rings wrap hundreds of times (the writer is
 * woken at half full); whatever is lost must be accounted for. */
static void many_threads_wrapping(void **state)
{
	pace_every = 16;
	run_many(64, false);
	pace_every = 0;
}

static void sampling_deterministic(void **state)
{
	const double rates[] = {0.001, 0.01, 0.1, 0.5};
	size_t n = 200000, in01 = 0;
	char path[256];

	for (size_t r = 0; r < RS_ARRAY_SIZE(rates); r++) {
		size_t hits = 0;

		for (uint64_t id = 1; id <= n; id++) {
			bool a = trace_id_in_sample(id * 0x1234567ull,
						    rates[r]);

			hits += a;
			/* the same answer every time; nested rates */
			assert_int_equal(a, trace_id_in_sample(
				id * 0x1234567ull, rates[r]));
			if (a && r + 1 < RS_ARRAY_SIZE(rates))
				assert_true(trace_id_in_sample(
					id * 0x1234567ull, rates[r + 1]));
		}
		print_message("rate %.3f: %zu of %zu sampled\n", rates[r],
			      hits, n);
		assert_true(hits > n * rates[r] * 0.85);
		assert_true(hits < n * rates[r] * 1.15);
	}
	for (uint64_t id = 1; id <= 1000; id++) {
		assert_false(trace_id_in_sample(id, 0));
		assert_true(trace_id_in_sample(id, 1));
		in01 += trace_id_in_sample(id, 0.1);
	}
	/* Pinned: the hash is part of the protocol between client and server
	 * builds; changing it silently splits their samples. */
	assert_int_equal(in01, 117);
	assert_false(trace_id_in_sample(66, 0.01));
	assert_true(trace_id_in_sample(67, 0.01));
	assert_true(trace_id_in_sample(74, 0.01));

	/* off: nothing is sampled */
	assert_false(trace_sampled(42));
	assert_false(trace_wanted(42, true));
	tmp_path(path, sizeof(path), "sample");
	assert_int_equal(trace_open(path, 0.25), 0);
	for (uint64_t id = 1; id <= 10000; id++) {
		assert_int_equal(trace_sampled(id),
				 trace_id_in_sample(id, 0.25));
		assert_true(trace_wanted(id, true));
		assert_int_equal(trace_wanted(id, false),
				 trace_id_in_sample(id, 0.25));
	}
	assert_int_equal(trace_close(), 0);
	unlink(path);
	assert_int_equal(trace_open(path, 1.5), RS_E_INVAL);
	assert_int_equal(trace_open(path, -0.1), RS_E_INVAL);
	assert_false(trace_enabled());
}

static void *burst(void *arg)
{
	uint64_t n = (uintptr_t)arg;

	for (uint64_t i = 0; i < n; i++)
		trace_emit(&(struct trace_event){.trace_id = i + 1,
						 .stage = "client.op"});
	return NULL;
}

static void drops_counted(void **state)
{
	struct trace_options o = {.sample = 1, .ring_slots = 64};
	struct trace_stats st;
	struct parsed p;
	pthread_t th;
	char path[256];

	tmp_path(path, sizeof(path), "drops");
	o.path = path;
	assert_int_equal(trace_open_opts(&o), 0);
	trace_test_pause_writer(true);
	/* a fresh thread gets a 64-slot ring; 100 events overflow it by 36 */
	assert_int_equal(pthread_create(&th, NULL, burst,
					(void *)(uintptr_t)100), 0);
	pthread_join(th, NULL);
	assert_int_equal(trace_flush(), 0);
	trace_get_stats(&st);
	assert_int_equal(st.written, 64);
	assert_int_equal(st.dropped, 36);
	trace_test_pause_writer(false);
	assert_int_equal(trace_close(), 0);
	parse_file(path, &p);
	assert_int_equal(p.bad, 0);
	assert_int_equal(p.events, 64);
	assert_int_equal(p.sum_events, 64);
	assert_int_equal(p.sum_dropped, 36);
	/* the ring kept the oldest events */
	for (size_t i = 0; i < 64; i++)
		assert_int_equal(ev_id(json_array_get(p.ev, i)), i + 1);
	json_decref(p.ev);
	unlink(path);
}

static void flush_and_reopen(void **state)
{
	struct parsed p;
	char path[256];

	tmp_path(path, sizeof(path), "flush");
	assert_int_equal(trace_flush(), RS_E_INVAL);
	assert_int_equal(trace_open(path, 1), 0);
	for (int i = 0; i < 10; i++)
		trace_emit(&(struct trace_event){.trace_id = 7,
						 .stage = "server.total",
						 .dur_us = (uint64_t)i});
	assert_int_equal(trace_flush(), 0);
	parse_file(path, &p);		/* still open: no summary yet */
	assert_int_equal(p.events, 10);
	assert_int_equal(p.opens, 1);
	assert_int_equal(p.summaries, 0);
	json_decref(p.ev);
	assert_int_equal(trace_close(), 0);
	assert_int_equal(trace_close(), 0);	/* idempotent */

	/* appended to: a second session adds lines */
	assert_int_equal(trace_open(path, 1), 0);
	trace_emit(&(struct trace_event){.trace_id = 8, .stage = "client.op"});
	assert_int_equal(trace_close(), 0);
	parse_file(path, &p);
	assert_int_equal(p.bad, 0);
	assert_int_equal(p.events, 11);
	assert_int_equal(p.opens, 2);
	assert_int_equal(p.summaries, 2);
	assert_int_equal(p.sum_events, 11);
	json_decref(p.ev);
	unlink(path);
}

static void from_environment(void **state)
{
	char path[256], pattern[256], *pct;
	struct parsed p;

	tmp_path(path, sizeof(path), "env");
	/* "...env-<pid>.jsonl" spelled with %p */
	snprintf(pattern, sizeof(pattern), "%s", path);
	pct = strstr(pattern, "env-");
	assert_non_null(pct);
	strcpy(pct + 4, "%p.jsonl");

	unsetenv("RS_TRACE");
	assert_int_equal(trace_open_env(), 0);
	assert_false(trace_enabled());
	setenv("RS_TRACE", pattern, 1);
	setenv("RS_TRACE_SAMPLE", "abc", 1);
	assert_int_equal(trace_open_env(), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "RS_TRACE_SAMPLE"));
	setenv("RS_TRACE_SAMPLE", "2", 1);
	assert_int_equal(trace_open_env(), RS_E_INVAL);
	setenv("RS_TRACE_SAMPLE", "0.5", 1);
	assert_int_equal(trace_open_env(), 1);
	assert_true(trace_enabled());
	assert_int_equal(trace_open_env(), 0);	/* already open */
	assert_int_equal(trace_close(), 0);
	parse_file(path, &p);
	assert_int_equal(p.opens, 1);
	json_decref(p.ev);
	unlink(path);
	unsetenv("RS_TRACE");
	unsetenv("RS_TRACE_SAMPLE");

	setenv("RS_TRACE", "/nonexistent-dir/x.jsonl", 1);
	assert_int_equal(trace_open_env(), -ENOENT);
	unsetenv("RS_TRACE");
	assert_false(trace_enabled());
}

static void names_escaped_and_truncated(void **state)
{
	/* 30 ASCII bytes then a 3-byte character crossing byte 31 */
	const char *longname =
		"abcdefghijklmnopqrstuvwxyz0123\xe2\x82\xac-tail";
	struct parsed p;
	char path[256];

	tmp_path(path, sizeof(path), "names");
	assert_int_equal(trace_open(path, 1), 0);
	trace_emit(&(struct trace_event){.trace_id = 1, .stage = "x\"y\n",
					 .table = "t\"a\\b\n"});
	trace_emit(&(struct trace_event){.trace_id = 2, .stage = "client.op",
					 .table = longname});
	trace_emit(&(struct trace_event){.trace_id = 3, .stage = "client.op",
					 .table = "bad\xff"});
	trace_emit(&(struct trace_event){.trace_id = UINT64_MAX,
					 .stage = NULL,
					 .bytes = UINT64_MAX});
	/* control characters; an overlong '/', a surrogate: not UTF-8 */
	trace_emit(&(struct trace_event){.trace_id = 5, .stage = "s\x01\t\r",
					 .table = "\xc0\xaf"});
	trace_emit(&(struct trace_event){.trace_id = 6, .stage = "\xed\xa0\x80",
					 .table = "caf\xc3\xa9"});
	assert_int_equal(trace_close(), 0);
	parse_file(path, &p);
	assert_int_equal(p.bad, 0);
	assert_int_equal(p.events, 6);
	assert_string_equal(ev_str(&p, 4, "stage"), "s\x01\t\r");
	assert_string_equal(ev_str(&p, 4, "table"), "?");
	assert_string_equal(ev_str(&p, 5, "stage"), "?");
	assert_string_equal(ev_str(&p, 5, "table"), "caf\xc3\xa9");
	assert_string_equal(ev_str(&p, 0, "stage"), "x\"y\n");
	assert_string_equal(ev_str(&p, 0, "table"), "t\"a\\b\n");
	assert_string_equal(ev_str(&p, 1, "table"),
			    "abcdefghijklmnopqrstuvwxyz0123");
	assert_string_equal(ev_str(&p, 2, "table"), "?");
	assert_int_equal(ev_id(json_array_get(p.ev, 3)), UINT64_MAX);
	assert_null(json_object_get(json_array_get(p.ev, 3), "table"));
	assert_int_equal(ev_int(json_array_get(p.ev, 3), "bytes"), INT64_MAX);
	json_decref(p.ev);
	unlink(path);
}

static void ids_unique(void **state)
{
	enum { N = 100000 };
	uint64_t *ids = malloc(N * sizeof(*ids));

	assert_non_null(ids);
	for (int i = 0; i < N; i++) {
		ids[i] = trace_new_id();
		assert_true(ids[i] != 0);
	}
	for (int i = 1; i < N; i++)	/* consecutive ids differ wildly */
		assert_true(ids[i] != ids[i - 1]);
	free(ids);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Voluntary context switches of this process' "rs-trace" thread. */
static long writer_switches(void)
{
	char path[96], comm[32], line[128];
	long v = -1;

	for (int tid = 1; tid < 4194304 && v < 0; tid++) {
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
		f = fopen(path, "r");
		if (!f)
			continue;
		comm[0] = '\0';
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
		if (strncmp(comm, "rs-trace", 8))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
		f = fopen(path, "r");
		assert_non_null(f);
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "voluntary_ctxt_switches:", 24))
				v = strtol(line + 24, NULL, 10);
		fclose(f);
	}
	return v;
}

static void *emit_one(void *arg)
{
	trace_emit(&(struct trace_event){.trace_id = (uintptr_t)arg,
					 .stage = "client.op"});
	return NULL;
}

/* Without events the writer sleeps for good (no periodic wake-ups), and an
 * event from any thread, old or new, wakes it without a trace_flush(). */
static void idle_writer_sleeps_and_wakes(void **state)
{
	struct trace_stats st;
	struct parsed p;
	pthread_t th;
	char path[256];
	long s0, s1;
	int i;

	tmp_path(path, sizeof(path), "idle");
	assert_int_equal(trace_open(path, 1), 0);
	emit_one((void *)1);
	assert_int_equal(trace_flush(), 0);
	for (i = 0; i < 1000 && !trace_test_writer_idle(); i++)
		usleep(10000);
	assert_true(trace_test_writer_idle());
	s0 = writer_switches();
	assert_true(s0 >= 0);
	usleep(500000);
	s1 = writer_switches();
	print_message("idle writer: %ld wake-ups in 0.5 s\n", s1 - s0);
	assert_int_equal(s1, s0);
	for (int round = 0; round < 2; round++) {
		/* round 0: this thread's ring; round 1: a new thread's */
		if (round == 0) {
			emit_one((void *)2);
		} else {
			for (i = 0; i < 1000 && !trace_test_writer_idle(); i++)
				usleep(10000);
			assert_true(trace_test_writer_idle());
			assert_int_equal(pthread_create(&th, NULL, emit_one,
							(void *)3), 0);
			pthread_join(th, NULL);
		}
		for (i = 0; i < 500; i++) {
			trace_get_stats(&st);
			if (st.written == 2u + (unsigned)round)
				break;
			usleep(10000);
		}
		assert_int_equal(st.written, 2 + round);
	}
	assert_int_equal(trace_close(), 0);
	parse_file(path, &p);
	assert_int_equal(p.bad, 0);
	assert_int_equal(p.events, 3);
	json_decref(p.ev);
	unlink(path);
}

static void off_records_nothing(void **state)
{
	enum { N = 20000000 };
	struct trace_stats before, after;
	uint64_t t0, t1, hits = 0;
	double ns;

	assert_false(trace_enabled());
	trace_get_stats(&before);
	t0 = thread_cpu_ns();
	for (uint64_t i = 0; i < N; i++) {
		struct trace_event ev = {.trace_id = i, .stage = "client.op"};

		if (trace_sampled(i))
			hits++;
		trace_emit(&ev);
		__asm__ volatile("" ::: "memory");
	}
	t1 = thread_cpu_ns();
	trace_get_stats(&after);
	ns = (double)(t1 - t0) / N;
	/* a figure, not a verdict: the cost is measured in
	 * ci/bench-trace.sh (docs/benchmarks.md) */
	print_message("off: %.2f ns (thread CPU) per sampled()+emit() pair\n",
		      ns);
	assert_int_equal(hits, 0);
	/* nothing registered */
	assert_int_equal(after.rings, before.rings);
	assert_int_equal(after.written, before.written);
}

/* The value of an unlabelled series, read from the exposition text. */
static unsigned long long scrape(struct metrics_registry *r, const char *name)
{
	char *buf = NULL, key[128];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	unsigned long long v = 0;
	const char *p;

	assert_int_equal(metrics_write_prometheus(r, f), 0);
	fclose(f);
	snprintf(key, sizeof(key), "\n%s ", name);
	p = strstr(buf, key);
	assert_non_null(p);
	assert_int_equal(sscanf(p + strlen(key), "%llu", &v), 1);
	free(buf);
	return v;
}

static void exported_as_metrics(void **state)
{
	struct trace_options o = {.sample = 1, .ring_slots = 8};
	struct metrics_registry *r;
	unsigned long long ev0, dr0;
	pthread_t th;
	char path[256];

	assert_int_equal(metrics_registry_new(&r), 0);
	assert_int_equal(trace_register_metrics(r), 0);
	assert_int_equal(trace_register_metrics(r), RS_E_EXISTS);
	/* process totals: earlier sessions of this test program count too */
	ev0 = scrape(r, RS_M_TRACE_EVENTS);
	dr0 = scrape(r, RS_M_TRACE_DROPPED);
	tmp_path(path, sizeof(path), "metrics");
	o.path = path;
	assert_int_equal(trace_open_opts(&o), 0);
	trace_test_pause_writer(true);
	assert_int_equal(pthread_create(&th, NULL, burst,
					(void *)(uintptr_t)10), 0);
	pthread_join(th, NULL);
	trace_test_pause_writer(false);
	assert_int_equal(trace_close(), 0);
	assert_int_equal(scrape(r, RS_M_TRACE_EVENTS) - ev0, 8);
	assert_int_equal(scrape(r, RS_M_TRACE_DROPPED) - dr0, 2);
	/* and they survive the next open */
	assert_int_equal(trace_open(path, 1), 0);
	assert_int_equal(scrape(r, RS_M_TRACE_EVENTS) - ev0, 8);
	assert_int_equal(trace_close(), 0);
	metrics_registry_delete(&r);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(many_threads_exact),
		cmocka_unit_test(many_threads_wrapping),
		cmocka_unit_test(sampling_deterministic),
		cmocka_unit_test(drops_counted),
		cmocka_unit_test(flush_and_reopen),
		cmocka_unit_test(from_environment),
		cmocka_unit_test(names_escaped_and_truncated),
		cmocka_unit_test(ids_unique),
		cmocka_unit_test(off_records_nothing),
		cmocka_unit_test(idle_writer_sleeps_and_wakes),
		cmocka_unit_test(exported_as_metrics),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
