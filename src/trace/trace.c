/*
 * trace.c - per-thread event rings and the JSONL writer thread.
 *
 * Layout. Each thread that emits gets one struct trace_ring, allocated on
 * its first event and linked into a registry list (g.rings, under g.lock).
 * A ring is a single-producer/single-consumer array of fixed-size slots:
 * the owning thread advances `head` (release) after filling a slot, the
 * writer thread advances `tail` (release) after formatting slots. Head and
 * tail live on separate cache lines; the producer keeps a private copy of
 * tail and rereads the real one only when the ring looks full or half full,
 * so an emit usually touches only its own cache lines.
 *
 * Invariants.
 *   - 0 <= head - tail <= mask + 1; slots [tail, head) hold events.
 *   - Only the owner writes head, dropped and tail_cache; only the writer
 *     (or trace_open() while no writer runs) writes tail and dropped_seen.
 *   - A ring is freed only when its thread has exited (`dead`, set by the
 *     pthread key destructor) and it has been drained; by the writer while
 *     one runs, else by the destructor itself. Both decide under g.lock.
 *   - Stage strings are static: the slot keeps the pointer.
 *
 * Wake-ups. The writer sleeps in futex_wait on g.wake with a timeout (1 ms
 * after a busy pass, doubling to 64 ms when idle). A producer whose ring
 * reaches half full, trace_flush() and trace_close() increment g.wake and,
 * if the writer is sleeping, futex_wake it. The writer samples g.wake
 * before each pass and waits on that value, so an increment made after the
 * sample cannot be missed; the seq_cst pair (producer: add wake, load
 * sleeping / writer: store sleeping, kernel compares wake) makes skipping
 * the system call safe.
 *
 * Idle. After TRACE_IDLE_PASSES empty passes at the longest timeout (about
 * one second without events) the writer sets g.idle, checks every ring once
 * more and, if all are empty, sleeps without a timeout: an idle traced
 * process wakes nobody. A producer publishes head, then (seq_cst fence)
 * loads g.idle and kicks the writer when it is set. Either the producer
 * sees g.idle or the writer's re-check sees the new head, so an event is
 * never left in a ring while the writer sleeps for good. The fence is paid
 * per recorded event only, never when tracing is off or not sampled.
 *
 * Flushing. trace_flush() takes a ticket (++g.flush_req) and waits until
 * the writer has completed a pass that started after the ticket
 * (g.flush_done >= ticket). The writer write(2)s its buffer at the end of
 * every pass, so a completed pass means the events are in the file.
 *
 * Ownership. g.fd, g.buf and the snapshot array belong to the writer while
 * it runs and to trace_open()/trace_close() otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "trace/trace.h"

#define TRACE_BUF_SIZE (64 * 1024)
#define TRACE_SLEEP_MIN_MS 1
#define TRACE_SLEEP_MAX_MS 64
#define TRACE_IDLE_PASSES 16
#define TRACE_RING_MIN 8
#define TRACE_RING_MAX (1u << 24)

struct trace_slot {
	uint64_t trace_id;
	const char *stage;
	uint64_t bytes;
	uint64_t start_us;
	uint64_t dur_us;
	uint32_t batch;
	char table[TRACE_TABLE_MAX + 1];	/* "" means no table */
};

struct trace_ring {
	/* producer's cache line */
	_Alignas(RS_CACHELINE) _Atomic uint64_t head;
	uint64_t tail_cache;
	_Atomic uint64_t dropped;
	/* consumer's cache line */
	_Alignas(RS_CACHELINE) _Atomic uint64_t tail;
	uint64_t dropped_seen;
	/* set once */
	_Alignas(RS_CACHELINE) uint64_t mask;
	pid_t tid;
	atomic_bool dead;
	struct trace_ring *next;		/* registry list, g.lock */
	struct trace_slot slots[];
};

atomic_bool trace_on_;

static struct {
	pthread_mutex_t ctl;		/* serializes open/close */
	pthread_mutex_t lock;		/* registry, flush, writer state */
	pthread_cond_t flushed;
	struct trace_ring *rings;
	uint32_t nrings;
	bool writer_running;		/* g.lock */
	bool stopping;			/* g.lock */
	uint64_t flush_req;		/* g.lock */
	uint64_t flush_done;		/* g.lock */
	pthread_t writer;
	int fd;
	char *buf;
	size_t buf_len;
	struct trace_ring **snap;	/* writer's snapshot of the list */
	uint32_t snap_cap;
	double sample;
	_Atomic uint64_t threshold;	/* rate * 2^63; hash >> 1 below it */
	_Atomic uint32_t ring_slots;
	_Atomic uint32_t wake;
	atomic_int sleeping;
	atomic_bool idle;		/* writer sleeps until kicked */
	atomic_bool paused;
	_Atomic uint64_t written;
	_Atomic uint64_t dropped;	/* full rings, accounted by writer */
	_Atomic uint64_t noring;	/* emits lost to a failed ring alloc */
	_Atomic uint64_t write_errors;
	_Atomic uint64_t past_written;	/* totals of earlier sessions */
	_Atomic uint64_t past_dropped;
} g = {
	.ctl = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.flushed = PTHREAD_COND_INITIALIZER,
	.fd = -1,
	.ring_slots = TRACE_RING_SLOTS,
};

static _Thread_local struct trace_ring *my_ring;
static pthread_key_t ring_key;
static pthread_once_t ring_key_once = PTHREAD_ONCE_INIT;

/* ---- clocks, ids, sampling ---------------------------------------------- */

uint64_t trace_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* splitmix64 finalizer: a bijection, so distinct states give distinct ids */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t trace_new_id(void)
{
	static _Thread_local uint64_t state;
	static _Thread_local bool seeded;
	uint64_t id;

	if (RS_UNLIKELY(!seeded)) {
		if (getrandom(&state, sizeof(state), GRND_NONBLOCK) !=
		    (ssize_t)sizeof(state))
			state = trace_now_us() ^ ((uint64_t)gettid() << 32);
		seeded = true;
	}
	do {
		state += 0x9e3779b97f4a7c15ull;
		id = mix64(state);
	} while (id == 0);
	return id;
}

static uint64_t rate_threshold(double rate)
{
	if (!(rate > 0))
		return 0;
	if (rate >= 1)
		return 1ull << 63;
	return (uint64_t)ldexp(rate, 63);
}

static bool hash_below(uint64_t trace_id, uint64_t threshold)
{
	unsigned char le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(trace_id >> (8 * i));
	return (XXH64(le, sizeof(le), 0) >> 1) < threshold;
}

bool trace_id_in_sample(uint64_t trace_id, double rate)
{
	return hash_below(trace_id, rate_threshold(rate));
}

/* A zero threshold (sampling 0: only requests the client marked sampled
 * are traced) picks no id: answered without hashing. */
bool trace_in_sample_(uint64_t trace_id)
{
	uint64_t t = atomic_load_explicit(&g.threshold, memory_order_relaxed);

	return t && hash_below(trace_id, t);
}

/* ---- producer side ------------------------------------------------------ */

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void kick_writer(void)
{
	atomic_fetch_add(&g.wake, 1);
	if (atomic_load(&g.sleeping))
		futex_wake(&g.wake);
}

static void ring_destructor(void *arg)
{
	struct trace_ring *r = arg, **pp;

	my_ring = NULL;
	pthread_mutex_lock(&g.lock);
	if (g.writer_running) {
		atomic_store_explicit(&r->dead, true, memory_order_release);
		r = NULL;
	} else {
		for (pp = &g.rings; *pp != r; pp = &(*pp)->next)
			;
		*pp = r->next;
		g.nrings--;
	}
	pthread_mutex_unlock(&g.lock);
	free(r);
}

static void make_ring_key(void)
{
	if (pthread_key_create(&ring_key, ring_destructor) != 0)
		ring_key = (pthread_key_t)-1;
}

static struct trace_ring *ring_register(void)
{
	uint32_t slots = atomic_load(&g.ring_slots);
	size_t size = sizeof(struct trace_ring) +
		      (size_t)slots * sizeof(struct trace_slot);
	struct trace_ring *r;

	pthread_once(&ring_key_once, make_ring_key);
	if (ring_key == (pthread_key_t)-1)
		return NULL;
	size = (size + RS_CACHELINE - 1) & ~(size_t)(RS_CACHELINE - 1);
	r = aligned_alloc(RS_CACHELINE, size);
	if (!r)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->mask = slots - 1;
	r->tid = gettid();
	if (pthread_setspecific(ring_key, r) != 0) {
		free(r);
		return NULL;
	}
	pthread_mutex_lock(&g.lock);
	r->next = g.rings;
	g.rings = r;
	g.nrings++;
	pthread_mutex_unlock(&g.lock);
	my_ring = r;
	return r;
}

/* Length of s cut to at most max bytes, never inside a UTF-8 sequence
 * (backs up over continuation bytes). */
static size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	return n;
}

static size_t copy_table(char *dst, const char *src)
{
	size_t n = utf8_cut(src, TRACE_TABLE_MAX);

	memcpy(dst, src, n);
	dst[n] = '\0';
	return n;
}

void trace_emit_(const struct trace_event *ev)
{
	struct trace_ring *r = my_ring;
	struct trace_slot *s;
	uint64_t h, fill, half;

	if (RS_UNLIKELY(!r)) {
		r = ring_register();
		if (!r) {
			atomic_fetch_add_explicit(&g.noring, 1,
						  memory_order_relaxed);
			return;
		}
	}
	h = atomic_load_explicit(&r->head, memory_order_relaxed);
	if (RS_UNLIKELY(h - r->tail_cache > r->mask)) {
		r->tail_cache = atomic_load_explicit(&r->tail,
						     memory_order_acquire);
		if (h - r->tail_cache > r->mask) {
			uint64_t d = atomic_load_explicit(&r->dropped,
							  memory_order_relaxed);
			atomic_store_explicit(&r->dropped, d + 1,
					      memory_order_relaxed);
			return;
		}
	}
	s = &r->slots[h & r->mask];
	s->trace_id = ev->trace_id;
	s->stage = ev->stage;
	s->bytes = ev->bytes;
	s->start_us = ev->start_us;
	s->dur_us = ev->dur_us;
	s->batch = ev->batch;
	if (ev->table)
		copy_table(s->table, ev->table);
	else
		s->table[0] = '\0';
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst); /* see "Idle" above */
	if (RS_UNLIKELY(atomic_load_explicit(&g.idle, memory_order_relaxed)))
		kick_writer();

	half = (r->mask + 1) / 2;
	fill = h + 1 - r->tail_cache;
	if (RS_UNLIKELY(fill == half)) {
		r->tail_cache = atomic_load_explicit(&r->tail,
						     memory_order_acquire);
		if (h + 1 - r->tail_cache >= half)
			kick_writer();
	}
}

/* ---- writer side -------------------------------------------------------- */

static void buf_write_out(void)
{
	size_t off = 0;

	while (off < g.buf_len) {
		ssize_t n = write(g.fd, g.buf + off, g.buf_len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			atomic_fetch_add(&g.write_errors, 1);
			break;
		}
		off += (size_t)n;
	}
	g.buf_len = 0;
}

/* Append obj as one compact line; the buffer is written out when full. */
static void buf_put_json(json_t *obj)
{
	size_t need;

	if (!obj)
		return;
	for (int attempt = 0; attempt < 2; attempt++) {
		size_t room = TRACE_BUF_SIZE - g.buf_len;

		need = json_dumpb(obj, g.buf + g.buf_len, room, JSON_COMPACT);
		if (need > 0 && need < room) {
			g.buf[g.buf_len + need] = '\n';
			g.buf_len += need + 1;
			break;
		}
		buf_write_out();
	}
	json_decref(obj);
}

static json_t *json_u64(uint64_t v)
{
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* Strict UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF): what jansson accepts, so that every line parses anywhere. */
static bool utf8_valid(const unsigned char *p)
{
	while (*p) {
		unsigned c = *p, n, cp;

		if (c < 0x80) {
			p++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, cp = c & 0x07;
		else
			return false;
		for (unsigned i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		p += n + 1;
	}
	return true;
}

/* Longest stage name written; longer ones are cut at a character. */
#define TRACE_STAGE_OUT_MAX 128
/* Worst case of one event line: every name byte escaped as \u00XX. */
#define TRACE_LINE_MAX (6 * (TRACE_STAGE_OUT_MAX + TRACE_TABLE_MAX) + 256)

/* Append "s" as a JSON string, escaped; fallback when s is not UTF-8. */
static const char hex_digits[] = "0123456789abcdef";

static char *put_jstr(char *o, const char *s, size_t max,
		      const char *fallback)
{
	const unsigned char *p;
	size_t n;

	if (!s || !utf8_valid((const unsigned char *)s))
		s = fallback;
	n = utf8_cut(s, max);
	*o++ = '"';
	for (p = (const unsigned char *)s; p < (const unsigned char *)s + n;
	     p++) {
		if (*p == '"' || *p == '\\') {
			*o++ = '\\';
			*o++ = (char)*p;
		} else if (*p == '\n') {
			*o++ = '\\';
			*o++ = 'n';
		} else if (*p == '\t') {
			*o++ = '\\';
			*o++ = 't';
		} else if (*p < 0x20) {
			memcpy(o, "\\u00", 4);
			o[4] = hex_digits[*p >> 4];
			o[5] = hex_digits[*p & 15];
			o += 6;
		} else {
			*o++ = (char)*p;
		}
	}
	*o++ = '"';
	return o;
}

static char *put_u64(char *o, const char *key, uint64_t v)
{
	size_t klen = strlen(key);
	char d[20];
	int n = 0;

	memcpy(o, key, klen);
	o += klen;
	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		*o++ = d[--n];
	return o;
}

/*
 * One event as a JSONL line into the write buffer, formatted by hand: the
 * writer's cost per event is what tracing at a high rate costs a process
 * (about 20k instructions per event through jansson's object model, a few
 * hundred this way). Same keys, order and limits as before: byte counts
 * above INT64_MAX print as INT64_MAX; a name that is not UTF-8 prints "?".
 */
static void put_event(const struct trace_slot *s, pid_t tid)
{
	char *o;

	if (TRACE_BUF_SIZE - g.buf_len < TRACE_LINE_MAX)
		buf_write_out();
	o = g.buf + g.buf_len;
	memcpy(o, "{\"trace\":\"", 10);
	o += 10;
	for (int i = 60; i >= 0; i -= 4)
		*o++ = hex_digits[(s->trace_id >> i) & 15];
	*o++ = '"';
	memcpy(o, ",\"stage\":", 9);
	o = put_jstr(o + 9, s->stage, TRACE_STAGE_OUT_MAX, "?");
	if (s->table[0]) {
		memcpy(o, ",\"table\":", 9);
		o = put_jstr(o + 9, s->table, TRACE_TABLE_MAX, "?");
	}
	o = put_u64(o, ",\"batch\":", s->batch);
	o = put_u64(o, ",\"bytes\":",
		    s->bytes > INT64_MAX ? INT64_MAX : s->bytes);
	o = put_u64(o, ",\"start_us\":",
		    s->start_us > INT64_MAX ? INT64_MAX : s->start_us);
	o = put_u64(o, ",\"dur_us\":",
		    s->dur_us > INT64_MAX ? INT64_MAX : s->dur_us);
	o = put_u64(o, ",\"tid\":", (uint64_t)(tid > 0 ? tid : 0));
	*o++ = '}';
	*o++ = '\n';
	g.buf_len = (size_t)(o - g.buf);
}

/* Format every event of r; returns how many. */
static uint64_t drain_ring(struct trace_ring *r)
{
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
	uint64_t d = atomic_load_explicit(&r->dropped, memory_order_relaxed);

	for (uint64_t i = t; i != h; i++)
		put_event(&r->slots[i & r->mask], r->tid);
	atomic_store_explicit(&r->tail, h, memory_order_release);
	if (d != r->dropped_seen) {
		atomic_fetch_add(&g.dropped, d - r->dropped_seen);
		r->dropped_seen = d;
	}
	atomic_fetch_add(&g.written, h - t);
	return h - t;
}

/* Copy the registry into g.snap; dead[i] records r->dead before draining. */
static uint32_t snapshot_rings(bool **dead)
{
	uint32_t n = 0;

	pthread_mutex_lock(&g.lock);
	if (g.nrings > g.snap_cap || !g.snap) {
		uint32_t cap = g.nrings * 2 + 8;
		void *p = realloc(g.snap, cap * (sizeof(*g.snap) + 1));

		if (p) {
			g.snap = p;
			g.snap_cap = cap;
		}
	}
	if (!g.snap) {
		pthread_mutex_unlock(&g.lock);
		return 0;
	}
	*dead = (bool *)(g.snap + g.snap_cap);
	for (struct trace_ring *r = g.rings; r && n < g.snap_cap; r = r->next) {
		g.snap[n] = r;
		(*dead)[n++] = atomic_load_explicit(&r->dead,
						    memory_order_acquire);
	}
	pthread_mutex_unlock(&g.lock);
	return n;
}

static void free_dead_rings(uint32_t n, const bool *dead)
{
	pthread_mutex_lock(&g.lock);
	for (uint32_t i = 0; i < n; i++) {
		struct trace_ring *r = g.snap[i], **pp;

		if (!dead[i])
			continue;
		for (pp = &g.rings; *pp != r; pp = &(*pp)->next)
			;
		*pp = r->next;
		g.nrings--;
		free(r);
	}
	pthread_mutex_unlock(&g.lock);
}

static uint64_t drain_all(void)
{
	uint64_t total = 0;
	bool *dead;
	uint32_t n = snapshot_rings(&dead);

	for (uint32_t i = 0; i < n; i++)
		total += drain_ring(g.snap[i]);
	free_dead_rings(n, dead);
	buf_write_out();
	return total;
}

/* Sleep until g.wake moves from seen, or ms milliseconds (< 0: no limit). */
static void writer_sleep(uint32_t seen, int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	atomic_store(&g.sleeping, 1);
	syscall(SYS_futex, (uint32_t *)&g.wake, FUTEX_WAIT_PRIVATE, seen,
		ms < 0 ? NULL : &ts, NULL, 0);
	atomic_store(&g.sleeping, 0);
}

/* Does any ring hold an event the writer has not taken? (seq_cst loads of
 * head: the writer's half of the "Idle" handshake.) */
static bool rings_pending(void)
{
	bool any = false;

	pthread_mutex_lock(&g.lock);
	for (struct trace_ring *r = g.rings; r && !any; r = r->next)
		any = atomic_load(&r->head) !=
		      atomic_load_explicit(&r->tail, memory_order_relaxed);
	pthread_mutex_unlock(&g.lock);
	return any;
}

static void *writer_main(void *arg)
{
	int sleep_ms = TRACE_SLEEP_MIN_MS;
	unsigned idle_passes = 0;

	for (;;) {
		uint32_t seen = atomic_load(&g.wake);
		uint64_t req, n = 0;
		bool stop;

		pthread_mutex_lock(&g.lock);
		req = g.flush_req;
		stop = g.stopping;
		pthread_mutex_unlock(&g.lock);
		if (stop || req != g.flush_done || !atomic_load(&g.paused))
			n = drain_all();
		pthread_mutex_lock(&g.lock);
		g.flush_done = req;
		pthread_cond_broadcast(&g.flushed);
		pthread_mutex_unlock(&g.lock);
		if (stop)
			break;
		if (n || atomic_load(&g.paused)) {
			idle_passes = 0;
		} else if (sleep_ms == TRACE_SLEEP_MAX_MS &&
			   ++idle_passes >= TRACE_IDLE_PASSES) {
			atomic_store(&g.idle, true);
			if (!rings_pending())
				writer_sleep(seen, -1);
			atomic_store(&g.idle, false);
			idle_passes = 0;
			sleep_ms = TRACE_SLEEP_MIN_MS;
			continue;
		}
		sleep_ms = n ? TRACE_SLEEP_MIN_MS
			     : (sleep_ms * 2 > TRACE_SLEEP_MAX_MS
					? TRACE_SLEEP_MAX_MS : sleep_ms * 2);
		writer_sleep(seen, sleep_ms);
	}
	return NULL;
}

/* ---- control ------------------------------------------------------------ */

/* Expand "%p" to the pid and "%%" to "%". */
static int expand_path(const char *in, char *out, size_t cap)
{
	size_t o = 0;

	for (const char *p = in; *p; p++) {
		int n = 1;

		if (p[0] == '%' && p[1] == 'p') {
			n = snprintf(out + o, cap - o, "%d", (int)getpid());
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			if (o + 1 < cap)
				out[o] = '%';
			p++;
		} else if (o + 1 < cap) {
			out[o] = *p;
		}
		if (n < 0 || o + (size_t)n >= cap)
			return rs_seterr(RS_E_INVAL, "trace path too long");
		o += (size_t)n;
	}
	out[o] = '\0';
	return 0;
}

static void put_open_line(void)
{
	json_t *o = json_object();

	if (!o)
		return;
	json_object_set_new(o, "type", json_string("open"));
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "sample", json_real(g.sample));
	json_object_set_new(o, "clock", json_string("monotonic_us"));
	json_object_set_new(o, "start_us", json_u64(trace_now_us()));
	json_object_set_new(o, "version", json_string(RS_VERSION_STRING));
	buf_put_json(o);
	buf_write_out();
}

static void put_summary_line(void)
{
	json_t *o = json_object();

	if (!o)
		return;
	json_object_set_new(o, "type", json_string("summary"));
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "events", json_u64(atomic_load(&g.written)));
	json_object_set_new(o, "dropped",
			    json_u64(atomic_load(&g.dropped) +
				     atomic_load(&g.noring)));
	json_object_set_new(o, "write_errors",
			    json_u64(atomic_load(&g.write_errors)));
	buf_put_json(o);
	buf_write_out();
}

/* Forget events and drop counts left from a previous session. */
static void reset_rings(void)
{
	pthread_mutex_lock(&g.lock);
	for (struct trace_ring *r = g.rings; r; r = r->next) {
		atomic_store(&r->tail, atomic_load(&r->head));
		r->dropped_seen = atomic_load(&r->dropped);
	}
	pthread_mutex_unlock(&g.lock);
	atomic_fetch_add(&g.past_written, atomic_load(&g.written));
	atomic_fetch_add(&g.past_dropped, atomic_load(&g.dropped) +
					  atomic_load(&g.noring));
	atomic_store(&g.written, 0);
	atomic_store(&g.dropped, 0);
	atomic_store(&g.noring, 0);
	atomic_store(&g.write_errors, 0);
}

static int check_options(const struct trace_options *o)
{
	uint32_t s = o->ring_slots;

	if (!o->path || !o->path[0])
		return rs_seterr(RS_E_INVAL, "trace: no output path");
	if (!(o->sample >= 0 && o->sample <= 1))
		return rs_seterr(RS_E_INVAL,
				 "trace: sample rate %g is not in [0, 1]",
				 o->sample);
	if (s && (s < TRACE_RING_MIN || s > TRACE_RING_MAX || (s & (s - 1))))
		return rs_seterr(RS_E_INVAL,
				 "trace: ring size %u is not a power of two "
				 "in [%u, %u]", s, TRACE_RING_MIN,
				 TRACE_RING_MAX);
	return 0;
}

static int start_writer(void)
{
	int rc;

	pthread_mutex_lock(&g.lock);
	g.stopping = false;
	g.flush_req = g.flush_done = 0;
	g.writer_running = true;
	pthread_mutex_unlock(&g.lock);
	rc = pthread_create(&g.writer, NULL, writer_main, NULL);
	if (rc != 0) {
		pthread_mutex_lock(&g.lock);
		g.writer_running = false;
		pthread_mutex_unlock(&g.lock);
		return rs_seterr(-rc, "trace: cannot start writer: %s",
				 strerror(rc));
	}
	pthread_setname_np(g.writer, "rs-trace");
	return 0;
}

int trace_open_opts(const struct trace_options *o)
{
	char path[PATH_MAX];
	int rc;

	rc = check_options(o);
	if (rc < 0)
		return rc;
	rc = expand_path(o->path, path, sizeof(path));
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&g.ctl);
	if (g.fd >= 0) {
		rc = rs_seterr(RS_E_EXISTS, "trace: already open");
		goto out_unlock;
	}
	g.buf = malloc(TRACE_BUF_SIZE);
	if (!g.buf) {
		rc = rs_seterr(-ENOMEM, "trace: no memory for buffer");
		goto out_unlock;
	}
	g.buf_len = 0;
	g.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (g.fd < 0) {
		rc = rs_seterr(-errno, "trace: cannot open '%s': %s", path,
			       strerror(errno));
		goto out_free_buf;
	}
	g.sample = o->sample;
	atomic_store(&g.threshold, rate_threshold(o->sample));
	atomic_store(&g.ring_slots, o->ring_slots ? o->ring_slots
						  : TRACE_RING_SLOTS);
	reset_rings();
	put_open_line();
	rc = start_writer();
	if (rc < 0)
		goto out_close;
	atomic_store_explicit(&trace_on_, true, memory_order_release);
	pthread_mutex_unlock(&g.ctl);
	return 0;

out_close:
	close(g.fd);
	g.fd = -1;
out_free_buf:
	free(g.buf);
	g.buf = NULL;
out_unlock:
	pthread_mutex_unlock(&g.ctl);
	return rc;
}

int trace_open(const char *path, double sample)
{
	struct trace_options o = {.path = path, .sample = sample};

	return trace_open_opts(&o);
}

int trace_open_env(void)
{
	const char *path = getenv("RS_TRACE");
	const char *s = getenv("RS_TRACE_SAMPLE");
	double rate = TRACE_DEFAULT_SAMPLE;
	int rc;

	if (!path || !path[0] || trace_enabled())
		return 0;
	if (s && s[0]) {
		char *end;

		errno = 0;
		rate = strtod(s, &end);
		if (errno || *end || !(rate >= 0 && rate <= 1))
			return rs_seterr(RS_E_INVAL,
					 "RS_TRACE_SAMPLE='%s' is not a rate "
					 "in [0, 1]", s);
	}
	rc = trace_open(path, rate);
	if (rc == RS_E_EXISTS)
		return 0;
	return rc < 0 ? rc : 1;
}

int trace_flush(void)
{
	uint64_t ticket;

	pthread_mutex_lock(&g.lock);
	if (!g.writer_running) {
		pthread_mutex_unlock(&g.lock);
		return rs_seterr(RS_E_INVAL, "trace: not open");
	}
	ticket = ++g.flush_req;
	pthread_mutex_unlock(&g.lock);
	kick_writer();
	pthread_mutex_lock(&g.lock);
	while (g.writer_running && g.flush_done < ticket)
		pthread_cond_wait(&g.flushed, &g.lock);
	pthread_mutex_unlock(&g.lock);
	return 0;
}

int trace_close(void)
{
	pthread_mutex_lock(&g.ctl);
	if (g.fd < 0) {
		pthread_mutex_unlock(&g.ctl);
		return 0;
	}
	atomic_store(&trace_on_, false);
	pthread_mutex_lock(&g.lock);
	g.stopping = true;
	pthread_mutex_unlock(&g.lock);
	kick_writer();
	pthread_join(g.writer, NULL);
	pthread_mutex_lock(&g.lock);
	g.writer_running = false;
	pthread_cond_broadcast(&g.flushed);
	/* rings whose thread exited after the writer's last pass */
	for (struct trace_ring **pp = &g.rings; *pp;) {
		struct trace_ring *r = *pp;

		if (atomic_load(&r->dead)) {
			*pp = r->next;
			g.nrings--;
			free(r);
		} else {
			pp = &r->next;
		}
	}
	pthread_mutex_unlock(&g.lock);

	put_summary_line();
	close(g.fd);
	g.fd = -1;
	free(g.buf);
	g.buf = NULL;
	free(g.snap);
	g.snap = NULL;
	g.snap_cap = 0;
	atomic_store(&g.paused, false);
	pthread_mutex_unlock(&g.ctl);
	return 0;
}

void trace_get_stats(struct trace_stats *st)
{
	st->written = atomic_load(&g.written);
	st->dropped = atomic_load(&g.dropped) + atomic_load(&g.noring);
	st->write_errors = atomic_load(&g.write_errors);
	pthread_mutex_lock(&g.lock);
	st->rings = g.nrings;
	pthread_mutex_unlock(&g.lock);
}

bool trace_test_writer_idle(void)
{
	return atomic_load(&g.idle);
}

void trace_test_pause_writer(bool pause)
{
	atomic_store(&g.paused, pause);
	if (!pause)
		kick_writer();
}

/* ---- totals (src/trace/trace_metrics.c exports them) ------------------ */

uint64_t trace_events_written(void)
{
	return atomic_load(&g.past_written) + atomic_load(&g.written);
}

uint64_t trace_events_dropped(void)
{
	return atomic_load(&g.past_dropped) + atomic_load(&g.dropped) +
	       atomic_load(&g.noring);
}
