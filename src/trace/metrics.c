/*
 * metrics.c - the metrics registry, its renderers and the HTTP endpoint.
 *
 * Layout. A registry is a mutex plus a list of families sorted by name. A
 * family owns its strings (name, help, label names) and a list of series in
 * creation order. Every series starts with its hot value and is allocated
 * on its own cache line(s), so two counters bumped by different threads
 * never share a line:
 *
 *	counter:   _Atomic u64 value | struct mseries
 *	gauge:     _Atomic u64 bits of a double | struct mseries
 *	histogram: _Atomic u64 sum | struct mseries | nb | buckets[nb + 1]
 *
 * struct mseries links the series into its family and holds the label
 * values and the optional read callback.
 *
 * Invariants. Families are never freed before the registry; series are
 * freed only by metrics_*_remove() and metrics_registry_delete(). The list
 * structure and callbacks are touched only under r->lock; values only with
 * relaxed atomics (readers at render time may see a histogram's sum and
 * buckets a few observations apart; _count is the sum of the buckets read,
 * so each exposition is self-consistent).
 *
 * The HTTP endpoint is a libmicrohttpd daemon with its internal polling
 * thread (epoll on Linux): blocked in epoll_wait while nobody connects.
 * Each GET /metrics renders into an open_memstream buffer that MHD frees.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "common/rs_internal.h"
#include "trace/metrics.h"

enum mkind { MK_COUNTER, MK_GAUGE, MK_HISTOGRAM };

static const char *const kind_names[] = {"counter", "gauge", "histogram"};

struct mfamily;

struct mseries {
	struct mseries *next;
	struct mfamily *fam;
	char *values[METRICS_MAX_LABELS];
	metrics_read_fn fn;
	void *arg;
};

struct metrics_counter {
	_Atomic uint64_t v;
	struct mseries s;
};

struct metrics_gauge {
	_Atomic uint64_t bits;
	struct mseries s;
};

struct metrics_histogram {
	_Atomic uint64_t sum;
	struct mseries s;
	int nb;
	_Atomic uint64_t b[];		/* nb finite buckets, then +Inf */
};

struct mfamily {
	struct mfamily *next;
	char *name, *help;
	enum mkind kind;
	double scale;
	struct metrics_buckets bk;
	int nlabels;
	char *labels[METRICS_MAX_LABELS];
	struct mseries *series;
};

struct metrics_registry {
	pthread_mutex_t lock;
	struct mfamily *fams;
};

struct metrics_http {
	struct MHD_Daemon *d;
	struct metrics_registry *r;
	uint16_t port;
};

/* what a registration asks for */
struct mreq {
	enum mkind kind;
	const char *name, *help;
	double scale;
	struct metrics_buckets bk;
	metrics_read_fn fn;
	void *arg;
	int n;
	const char *lnames[METRICS_MAX_LABELS];
	const char *lvalues[METRICS_MAX_LABELS];
};

/* ---- registry ----------------------------------------------------------- */

int metrics_registry_new(struct metrics_registry **out)
{
	struct metrics_registry *r = calloc(1, sizeof(*r));

	if (!r)
		return rs_seterr(-ENOMEM, "metrics: out of memory");
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
}

static void *series_base(struct mseries *s)
{
	switch (s->fam->kind) {
	case MK_COUNTER:
		return (char *)s - offsetof(struct metrics_counter, s);
	case MK_GAUGE:
		return (char *)s - offsetof(struct metrics_gauge, s);
	default:
		return (char *)s - offsetof(struct metrics_histogram, s);
	}
}

static void series_free(struct mseries *s)
{
	for (int i = 0; i < s->fam->nlabels; i++)
		free(s->values[i]);
	free(series_base(s));
}

static void family_free(struct mfamily *f)
{
	struct mseries *s, *next;

	for (s = f->series; s; s = next) {
		next = s->next;
		series_free(s);
	}
	for (int i = 0; i < f->nlabels; i++)
		free(f->labels[i]);
	free(f->name);
	free(f->help);
	free(f);
}

void metrics_registry_delete(struct metrics_registry **rp)
{
	struct metrics_registry *r = rp ? *rp : NULL;
	struct mfamily *f, *next;

	if (!r)
		return;
	for (f = r->fams; f; f = next) {
		next = f->next;
		family_free(f);
	}
	pthread_mutex_destroy(&r->lock);
	free(r);
	*rp = NULL;
}

/* ---- validation --------------------------------------------------------- */

static bool valid_name(const char *s, bool colon)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++) {
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' ||
		      (colon && *s == ':')))
			return false;
	}
	return true;
}

static int collect_labels(struct mreq *q, va_list ap)
{
	const char *n;

	q->n = 0;
	while ((n = va_arg(ap, const char *))) {
		const char *v = va_arg(ap, const char *);

		if (q->n == METRICS_MAX_LABELS)
			return rs_seterr(RS_E_INVAL, "metric %s: more than %d "
					 "labels", q->name, METRICS_MAX_LABELS);
		if (!valid_name(n, false) || !strncmp(n, "__", 2) ||
		    (q->kind == MK_HISTOGRAM && !strcmp(n, "le")))
			return rs_seterr(RS_E_INVAL, "metric %s: bad label "
					 "name '%s'", q->name, n);
		if (!v)
			return rs_seterr(RS_E_INVAL, "metric %s: label %s has "
					 "no value", q->name, n);
		for (int i = 0; i < q->n; i++)
			if (!strcmp(q->lnames[i], n))
				return rs_seterr(RS_E_INVAL, "metric %s: label "
						 "%s twice", q->name, n);
		q->lnames[q->n] = n;
		q->lvalues[q->n++] = v;
	}
	return 0;
}

static int check_request(const struct mreq *q)
{
	const struct metrics_buckets *b = &q->bk;

	if (!valid_name(q->name, true))
		return rs_seterr(RS_E_INVAL, "bad metric name '%s'",
				 q->name ? q->name : "(null)");
	if (!(q->scale > 0) || !isfinite(q->scale))
		return rs_seterr(RS_E_INVAL, "metric %s: scale %g must be "
				 "positive", q->name, q->scale);
	if (q->kind == MK_HISTOGRAM &&
	    (b->count < 1 || b->count > METRICS_MAX_BUCKETS ||
	     b->min_log2 < 0 || b->min_log2 + b->count - 1 > 63))
		return rs_seterr(RS_E_INVAL, "metric %s: buckets 2^%d x %d "
				 "out of range", q->name, b->min_log2,
				 b->count);
	return 0;
}

/* The existing family must agree with the request. */
static int family_matches(const struct mfamily *f, const struct mreq *q)
{
	if (f->kind != q->kind)
		return rs_seterr(RS_E_INVAL, "metric %s is a %s, not a %s",
				 q->name, kind_names[f->kind],
				 kind_names[q->kind]);
	if (f->nlabels != q->n)
		return rs_seterr(RS_E_INVAL, "metric %s has %d labels, not %d",
				 q->name, f->nlabels, q->n);
	for (int i = 0; i < q->n; i++)
		if (strcmp(f->labels[i], q->lnames[i]))
			return rs_seterr(RS_E_INVAL, "metric %s: label %d is "
					 "'%s', not '%s'", q->name, i,
					 f->labels[i], q->lnames[i]);
	if (f->scale != q->scale ||
	    (q->kind == MK_HISTOGRAM &&
	     (f->bk.min_log2 != q->bk.min_log2 ||
	      f->bk.count != q->bk.count)))
		return rs_seterr(RS_E_INVAL, "metric %s: scale or buckets "
				 "differ from the first registration",
				 q->name);
	return 0;
}

/* ---- registration ------------------------------------------------------- */

static struct mfamily *family_new(const struct mreq *q)
{
	struct mfamily *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->kind = q->kind;
	f->scale = q->scale;
	f->bk = q->bk;
	f->name = strdup(q->name);
	f->help = strdup(q->help ? q->help : "");
	if (!f->name || !f->help)
		goto fail;
	for (; f->nlabels < q->n; f->nlabels++) {
		f->labels[f->nlabels] = strdup(q->lnames[f->nlabels]);
		if (!f->labels[f->nlabels])
			goto fail;
	}
	return f;
fail:
	family_free(f);
	return NULL;
}

/* Find or create the family; r->lock held. */
static int family_get(struct metrics_registry *r, const struct mreq *q,
		      struct mfamily **out)
{
	struct mfamily **pp, *f;
	int c = 1;

	RS_ASSERT_HELD(&r->lock);
	for (pp = &r->fams; *pp && (c = strcmp((*pp)->name, q->name)) < 0;
	     pp = &(*pp)->next)
		;
	if (*pp && c == 0) {
		*out = *pp;
		return family_matches(*pp, q);
	}
	f = family_new(q);
	if (!f)
		return rs_seterr(-ENOMEM, "metrics: out of memory");
	f->next = *pp;
	*pp = f;
	*out = f;
	return 0;
}

static struct mseries *series_alloc(const struct mfamily *f)
{
	size_t off, size;
	char *p;

	switch (f->kind) {
	case MK_COUNTER:
		off = offsetof(struct metrics_counter, s);
		size = sizeof(struct metrics_counter);
		break;
	case MK_GAUGE:
		off = offsetof(struct metrics_gauge, s);
		size = sizeof(struct metrics_gauge);
		break;
	default:
		off = offsetof(struct metrics_histogram, s);
		size = sizeof(struct metrics_histogram) +
		       (size_t)(f->bk.count + 1) * sizeof(uint64_t);
	}
	size = (size + RS_CACHELINE - 1) & ~(size_t)(RS_CACHELINE - 1);
	p = aligned_alloc(RS_CACHELINE, size);
	if (!p)
		return NULL;
	memset(p, 0, size);
	if (f->kind == MK_HISTOGRAM)
		((struct metrics_histogram *)p)->nb = f->bk.count;
	return (struct mseries *)(p + off);
}

static struct mseries *series_find(struct mfamily *f, const struct mreq *q)
{
	for (struct mseries *s = f->series; s; s = s->next) {
		int i;

		for (i = 0; i < q->n && !strcmp(s->values[i], q->lvalues[i]);
		     i++)
			;
		if (i == q->n)
			return s;
	}
	return NULL;
}

static int series_new(struct mfamily *f, const struct mreq *q,
		      struct mseries **out)
{
	struct mseries *s = series_alloc(f), **pp;

	if (!s)
		return rs_seterr(-ENOMEM, "metrics: out of memory");
	s->fam = f;
	s->fn = q->fn;
	s->arg = q->arg;
	for (int i = 0; i < q->n; i++) {
		s->values[i] = strdup(q->lvalues[i]);
		if (!s->values[i]) {
			series_free(s);
			return rs_seterr(-ENOMEM, "metrics: out of memory");
		}
	}
	for (pp = &f->series; *pp; pp = &(*pp)->next)
		;
	*pp = s;
	*out = s;
	return 0;
}

static int series_get(struct metrics_registry *r, struct mreq *q,
		      va_list ap, struct mseries **out)
{
	struct mfamily *f = NULL;
	struct mseries *s;
	int rc;

	*out = NULL;
	if (!r)
		return rs_seterr(RS_E_INVAL, "metrics: no registry");
	rc = check_request(q);
	if (rc == 0)
		rc = collect_labels(q, ap);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&r->lock);
	rc = family_get(r, q, &f);
	if (rc < 0)
		goto out_unlock;
	s = series_find(f, q);
	if (s && (s->fn || q->fn))
		rc = rs_seterr(RS_E_EXISTS, "metric %s: that series already "
			       "exists", q->name);
	else if (s)
		*out = s;
	else
		rc = series_new(f, q, out);
out_unlock:
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* What every registration does after filling its request: the labels
 * from the variadic arguments after `last`, the series (or NULL) into
 * *out, its status into rc. */
#define SERIES_REGISTER(rc, r, q, last, out)                           \
	do {                                                           \
		struct mseries *s_;                                    \
		va_list ap_;                                           \
									\
		va_start(ap_, last);                                   \
		(rc) = series_get((r), (q), ap_, &s_);                 \
		va_end(ap_);                                           \
		*(out) = s_ ? series_base(s_) : NULL;                  \
	} while (0)

int metrics_counter(struct metrics_registry *r, struct metrics_counter **out,
		    const char *name, const char *help, double scale, ...)
{
	struct mreq q = {.kind = MK_COUNTER, .name = name, .help = help,
			 .scale = scale};
	int rc;

	SERIES_REGISTER(rc, r, &q, scale, out);
	return rc;
}

int metrics_gauge(struct metrics_registry *r, struct metrics_gauge **out,
		  const char *name, const char *help, ...)
{
	struct mreq q = {.kind = MK_GAUGE, .name = name, .help = help,
			 .scale = 1};
	int rc;

	SERIES_REGISTER(rc, r, &q, help, out);
	return rc;
}

/* A counter or gauge whose value a callback reads at scrape time. */
#define SERIES_FN(fname, type, mk)                                     \
	int fname(struct metrics_registry *r, struct type **out,       \
		  const char *name, const char *help, metrics_read_fn fn, \
		  void *arg, ...)                                      \
	{                                                              \
		struct mreq q = {.kind = (mk), .name = name,           \
				 .help = help, .scale = 1, .fn = fn,   \
				 .arg = arg};                          \
		int rc;                                                \
									\
		if (!fn)                                               \
			return rs_seterr(RS_E_INVAL,                   \
					 "metric %s: no callback", name); \
		SERIES_REGISTER(rc, r, &q, arg, out);                  \
		return rc;                                             \
	}

SERIES_FN(metrics_counter_fn, metrics_counter, MK_COUNTER)
SERIES_FN(metrics_gauge_fn, metrics_gauge, MK_GAUGE)

int metrics_histogram(struct metrics_registry *r,
		      struct metrics_histogram **out, const char *name,
		      const char *help, const struct metrics_buckets *b, ...)
{
	struct mreq q = {.kind = MK_HISTOGRAM, .name = name, .help = help};
	int rc;

	q.bk = b ? *b : *METRICS_BUCKETS_NS;
	q.scale = q.bk.scale;
	SERIES_REGISTER(rc, r, &q, b, out);
	return rc;
}

static void series_remove(struct metrics_registry *r, struct mseries *s)
{
	struct mseries **pp;

	pthread_mutex_lock(&r->lock);
	for (pp = &s->fam->series; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = s->next;
	pthread_mutex_unlock(&r->lock);
	series_free(s);
}

/* Remove the series *p (if any) and clear the caller's handle. */
#define SERIES_REMOVE(r, p)                                            \
	do {                                                           \
		if ((r) && (p) && *(p)) {                              \
			series_remove((r), &(*(p))->s);                \
			*(p) = NULL;                                   \
		}                                                      \
	} while (0)

void metrics_counter_remove(struct metrics_registry *r,
			    struct metrics_counter **p)
{
	SERIES_REMOVE(r, p);
}

void metrics_gauge_remove(struct metrics_registry *r,
			  struct metrics_gauge **p)
{
	SERIES_REMOVE(r, p);
}

void metrics_histogram_remove(struct metrics_registry *r,
			      struct metrics_histogram **p)
{
	SERIES_REMOVE(r, p);
}

/* ---- hot path ----------------------------------------------------------- */

void metrics_counter_add(struct metrics_counter *c, uint64_t n)
{
	if (c)
		atomic_fetch_add_explicit(&c->v, n, memory_order_relaxed);
}

static uint64_t dbits(double v)
{
	uint64_t b;

	memcpy(&b, &v, sizeof(b));
	return b;
}

static double bitsd(uint64_t b)
{
	double v;

	memcpy(&v, &b, sizeof(v));
	return v;
}

void metrics_gauge_set(struct metrics_gauge *g, double v)
{
	if (g)
		atomic_store_explicit(&g->bits, dbits(v), memory_order_relaxed);
}

void metrics_gauge_add(struct metrics_gauge *g, double d)
{
	uint64_t old;

	if (!g)
		return;
	old = atomic_load_explicit(&g->bits, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(
		&g->bits, &old, dbits(bitsd(old) + d), memory_order_relaxed,
		memory_order_relaxed))
		;
}

static int bucket_of(const struct metrics_histogram *h, uint64_t raw)
{
	int min = h->s.fam->bk.min_log2, i;

	if (raw <= (1ull << min))
		return 0;
	i = 64 - __builtin_clzll(raw - 1) - min;
	return i > h->nb ? h->nb : i;
}

void metrics_histogram_observe(struct metrics_histogram *h, uint64_t raw)
{
	if (!h)
		return;
	atomic_fetch_add_explicit(&h->b[bucket_of(h, raw)], 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, raw, memory_order_relaxed);
}

/* ---- reading ------------------------------------------------------------ */

uint64_t metrics_counter_value(const struct metrics_counter *c)
{
	if (!c)
		return 0;
	if (c->s.fn) {
		double v = c->s.fn(c->s.arg);

		if (!(v >= 0))
			return 0;
		return v >= 0x1p64 ? UINT64_MAX : (uint64_t)v;
	}
	return atomic_load_explicit(&c->v, memory_order_relaxed);
}

double metrics_gauge_value(const struct metrics_gauge *g)
{
	if (!g)
		return NAN;
	if (g->s.fn)
		return g->s.fn(g->s.arg);
	return bitsd(atomic_load_explicit(&g->bits, memory_order_relaxed));
}

/* Snapshot of the buckets (cum[i] cumulative); returns the total. */
static uint64_t hist_snapshot(const struct metrics_histogram *h,
			      uint64_t *cum)
{
	uint64_t total = 0;

	for (int i = 0; i <= h->nb; i++) {
		total += atomic_load_explicit(&h->b[i], memory_order_relaxed);
		cum[i] = total;
	}
	return total;
}

static double hist_bound(const struct metrics_histogram *h, int i)
{
	const struct mfamily *f = h->s.fam;

	if (i >= h->nb)
		return INFINITY;
	return ldexp(1.0, f->bk.min_log2 + i) / f->scale;
}

static double hist_quantile(const struct metrics_histogram *h,
			    const uint64_t *cum, uint64_t total, double q)
{
	uint64_t rank;

	if (total == 0)
		return NAN;
	q = q < 0 ? 0 : q > 1 ? 1 : q;
	rank = (uint64_t)ceil(q * (double)total);
	if (rank == 0)
		rank = 1;
	for (int i = 0; i <= h->nb; i++)
		if (cum[i] >= rank)
			return hist_bound(h, i);
	return INFINITY;
}

uint64_t metrics_histogram_count(const struct metrics_histogram *h)
{
	uint64_t cum[METRICS_MAX_BUCKETS + 1];

	return h ? hist_snapshot(h, cum) : 0;
}

double metrics_histogram_sum(const struct metrics_histogram *h)
{
	if (!h)
		return 0;
	return (double)atomic_load_explicit(&h->sum, memory_order_relaxed) /
	       h->s.fam->scale;
}

double metrics_histogram_quantile(const struct metrics_histogram *h,
				  double q)
{
	uint64_t cum[METRICS_MAX_BUCKETS + 1], total;

	if (!h)
		return NAN;
	total = hist_snapshot(h, cum);
	return hist_quantile(h, cum, total, q);
}

uint64_t metrics_histogram_window(const struct metrics_histogram *h,
				  struct metrics_window *w, double *p50,
				  double *p99)
{
	uint64_t cur[METRICS_MAX_BUCKETS + 1], d[METRICS_MAX_BUCKETS + 1];

	*p50 = *p99 = NAN;
	if (!h)
		return 0;
	hist_snapshot(h, cur);
	/* every bucket only grows, so the differences of the cumulative
	 * counts are cumulative counts of the window */
	for (int i = 0; i <= h->nb; i++)
		d[i] = cur[i] - w->cum[i];
	memcpy(w->cum, cur, sizeof(cur[0]) * (size_t)(h->nb + 1));
	if (d[h->nb]) {
		*p50 = hist_quantile(h, d, d[h->nb], 0.50);
		*p99 = hist_quantile(h, d, d[h->nb], 0.99);
	}
	return d[h->nb];
}

/* ---- Prometheus text ---------------------------------------------------- */

static void put_escaped(FILE *out, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else if (quote && *s == '"')
			fputs("\\\"", out);
		else
			fputc(*s, out);
	}
}

static void put_double(FILE *out, double v)
{
	if (isnan(v))
		fputs("NaN", out);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", out);
	else
		fprintf(out, "%.15g", v);
}

/* {a="x",b="y"[,le="..."]}; nothing at all when there are no labels */
static void put_labels(FILE *out, const struct mseries *s, const char *le)
{
	const struct mfamily *f = s->fam;

	if (f->nlabels == 0 && !le)
		return;
	fputc('{', out);
	for (int i = 0; i < f->nlabels; i++) {
		fprintf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
		put_escaped(out, s->values[i], true);
		fputc('"', out);
	}
	if (le)
		fprintf(out, "%sle=\"%s\"", f->nlabels ? "," : "", le);
	fputc('}', out);
}

/* raw / scale, exactly when the scale is 1 */
static void put_scaled(FILE *out, uint64_t raw, double scale)
{
	if (scale == 1)
		fprintf(out, "%" PRIu64, raw);
	else
		put_double(out, (double)raw / scale);
}

static void prom_series(FILE *out, const struct mseries *s)
{
	const struct mfamily *f = s->fam;
	const struct metrics_histogram *h;
	uint64_t cum[METRICS_MAX_BUCKETS + 1], total;

	if (f->kind != MK_HISTOGRAM) {
		fputs(f->name, out);
		put_labels(out, s, NULL);
		fputc(' ', out);
		if (f->kind == MK_COUNTER && !s->fn)
			put_scaled(out, metrics_counter_value(series_base(
				(struct mseries *)s)), f->scale);
		else if (f->kind == MK_COUNTER)
			put_double(out, s->fn(s->arg));
		else
			put_double(out, metrics_gauge_value(series_base(
				(struct mseries *)s)));
		fputc('\n', out);
		return;
	}
	h = series_base((struct mseries *)s);
	total = hist_snapshot(h, cum);
	for (int i = 0; i <= h->nb; i++) {
		char le[40];

		if (i < h->nb)
			snprintf(le, sizeof(le), "%.15g", hist_bound(h, i));
		else
			strcpy(le, "+Inf");
		fprintf(out, "%s_bucket", f->name);
		put_labels(out, s, le);
		fprintf(out, " %" PRIu64 "\n", cum[i]);
	}
	fprintf(out, "%s_sum", f->name);
	put_labels(out, s, NULL);
	fputc(' ', out);
	put_scaled(out, atomic_load_explicit(&h->sum, memory_order_relaxed),
		   f->scale);
	fprintf(out, "\n%s_count", f->name);
	put_labels(out, s, NULL);
	fprintf(out, " %" PRIu64 "\n", total);
}

int metrics_write_prometheus(struct metrics_registry *r, FILE *out)
{
	pthread_mutex_lock(&r->lock);
	for (const struct mfamily *f = r->fams; f; f = f->next) {
		fprintf(out, "# HELP %s ", f->name);
		put_escaped(out, f->help, false);
		fprintf(out, "\n# TYPE %s %s\n", f->name, kind_names[f->kind]);
		for (const struct mseries *s = f->series; s; s = s->next)
			prom_series(out, s);
	}
	pthread_mutex_unlock(&r->lock);
	return ferror(out) ? rs_seterr(-EIO, "metrics: write error") : 0;
}

/* ---- text and JSON ------------------------------------------------------ */

static void text_series(FILE *out, const struct mseries *s)
{
	const struct mfamily *f = s->fam;
	const struct metrics_histogram *h;
	uint64_t cum[METRICS_MAX_BUCKETS + 1], total;
	static const double qs[] = {0.5, 0.9, 0.99};
	static const char *const qn[] = {"p50", "p90", "p99"};

	if (f->kind != MK_HISTOGRAM) {
		prom_series(out, s);
		return;
	}
	h = series_base((struct mseries *)s);
	total = hist_snapshot(h, cum);
	fputs(f->name, out);
	put_labels(out, s, NULL);
	fprintf(out, " count=%" PRIu64 " sum=", total);
	put_scaled(out, atomic_load_explicit(&h->sum, memory_order_relaxed),
		   f->scale);
	for (size_t i = 0; total && i < RS_ARRAY_SIZE(qs); i++) {
		fprintf(out, " %s<=", qn[i]);
		put_double(out, hist_quantile(h, cum, total, qs[i]));
	}
	fputc('\n', out);
}

int metrics_write_text(struct metrics_registry *r, FILE *out)
{
	pthread_mutex_lock(&r->lock);
	for (const struct mfamily *f = r->fams; f; f = f->next)
		for (const struct mseries *s = f->series; s; s = s->next)
			text_series(out, s);
	pthread_mutex_unlock(&r->lock);
	return ferror(out) ? rs_seterr(-EIO, "metrics: write error") : 0;
}

static json_t *json_num(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *json_scaled(uint64_t raw, double scale)
{
	if (scale == 1 && raw <= INT64_MAX)
		return json_integer((json_int_t)raw);
	return json_num((double)raw / scale);
}

static json_t *json_series(const struct mseries *s)
{
	const struct mfamily *f = s->fam;
	json_t *o = json_object(), *labels = json_object(), *b;
	const struct metrics_histogram *h;
	uint64_t cum[METRICS_MAX_BUCKETS + 1], total;

	for (int i = 0; i < f->nlabels; i++)
		json_object_set_new(labels, f->labels[i],
				    json_string(s->values[i]));
	json_object_set_new(o, "labels", labels);
	if (f->kind == MK_COUNTER && !s->fn) {
		json_object_set_new(o, "value", json_scaled(
			metrics_counter_value(series_base((struct mseries *)s)),
			f->scale));
		return o;
	}
	if (f->kind != MK_HISTOGRAM) {
		json_object_set_new(o, "value", json_num(
			f->kind == MK_COUNTER
				? s->fn(s->arg)
				: metrics_gauge_value(series_base(
					  (struct mseries *)s))));
		return o;
	}
	h = series_base((struct mseries *)s);
	total = hist_snapshot(h, cum);
	json_object_set_new(o, "count", json_integer((json_int_t)total));
	json_object_set_new(o, "sum", json_scaled(atomic_load_explicit(
		&h->sum, memory_order_relaxed), f->scale));
	b = json_array();
	for (int i = 0; i < h->nb; i++)
		json_array_append_new(b, json_pack("[f,I]", hist_bound(h, i),
						   (json_int_t)cum[i]));
	json_object_set_new(o, "buckets", b);
	return o;
}

int metrics_write_json(struct metrics_registry *r, FILE *out)
{
	json_t *root = json_object();
	int rc = 0;

	if (!root)
		return rs_seterr(-ENOMEM, "metrics: out of memory");
	pthread_mutex_lock(&r->lock);
	for (const struct mfamily *f = r->fams; f; f = f->next) {
		json_t *fam = json_object(), *series = json_array();

		json_object_set_new(fam, "type",
				    json_string(kind_names[f->kind]));
		json_object_set_new(fam, "help", json_string(f->help));
		for (const struct mseries *s = f->series; s; s = s->next)
			json_array_append_new(series, json_series(s));
		json_object_set_new(fam, "series", series);
		json_object_set_new(root, f->name, fam);
	}
	pthread_mutex_unlock(&r->lock);
	if (json_dumpf(root, out, JSON_INDENT(2)) < 0 || fputc('\n', out) < 0)
		rc = rs_seterr(-EIO, "metrics: write error");
	json_decref(root);
	return rc;
}

/* ---- process series ----------------------------------------------------- */

static double process_cpu(void *arg)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return NAN;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double process_rss(void *arg)
{
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");
	int n;

	if (!f)
		return NAN;
	n = fscanf(f, "%lu %lu", &size, &resident);
	fclose(f);
	return n == 2 ? (double)resident * (double)sysconf(_SC_PAGESIZE) : NAN;
}

int metrics_register_process(struct metrics_registry *r)
{
	struct metrics_counter *cpu;
	struct metrics_gauge *rss, *info;
	int rc;

	rc = metrics_counter_fn(r, &cpu, RS_M_PROCESS_CPU,
				"User plus system CPU time of this process",
				process_cpu, NULL, NULL);
	if (rc < 0 && rc != RS_E_EXISTS)
		return rc;
	rc = metrics_gauge_fn(r, &rss, RS_M_PROCESS_RSS,
			      "Resident memory of this process", process_rss,
			      NULL, NULL);
	if (rc < 0 && rc != RS_E_EXISTS)
		return rc;
	rc = metrics_gauge(r, &info, RS_M_BUILD_INFO,
			   "Always 1; the version label names the build",
			   "version", RS_VERSION_STRING, NULL);
	if (rc < 0)
		return rc;
	metrics_gauge_set(info, 1);
	return 0;
}

/* ---- HTTP --------------------------------------------------------------- */

static enum MHD_Result http_reply(struct MHD_Connection *c, unsigned status,
				  char *body, size_t len, const char *ctype,
				  bool must_free)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(
		len, body, must_free ? MHD_RESPMEM_MUST_FREE
				     : MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		if (must_free)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					"GET, HEAD");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result http_handle(void *cls, struct MHD_Connection *c,
				   const char *url, const char *method,
				   const char *version, const char *upload,
				   size_t *upload_size, void **req_cls)
{
	static char not_found[] = "not found; try /metrics\n";
	static char not_allowed[] = "method not allowed\n";
	struct metrics_http *h = cls;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return http_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed,
				  sizeof(not_allowed) - 1, "text/plain", false);
	if (strcmp(url, "/metrics"))
		return http_reply(c, MHD_HTTP_NOT_FOUND, not_found,
				  sizeof(not_found) - 1, "text/plain", false);
	f = open_memstream(&buf, &len);
	if (!f)
		return MHD_NO;
	rc = metrics_write_prometheus(h->r, f);
	if (fclose(f) != 0 || rc < 0) {
		free(buf);
		return MHD_NO;
	}
	return http_reply(c, MHD_HTTP_OK, buf, len,
			  "text/plain; version=0.0.4; charset=utf-8", true);
}

static int parse_addr(const char *addr, uint16_t port,
		      struct sockaddr_storage *ss, bool *v6)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	*v6 = false;
	if (inet_pton(AF_INET, addr, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		*v6 = true;
		return 0;
	}
	return rs_seterr(RS_E_INVAL, "metrics: '%s' is not an IPv4 or IPv6 "
			 "address", addr);
}

int metrics_http_start(struct metrics_registry *r, const char *addr,
		       uint16_t port, struct metrics_http **out)
{
	struct sockaddr_storage ss;
	const union MHD_DaemonInfo *info;
	struct metrics_http *h;
	bool v6;
	int rc;

	*out = NULL;
	if (!r)
		return rs_seterr(RS_E_INVAL, "metrics: no registry");
	if (!addr)
		addr = "127.0.0.1";
	rc = parse_addr(addr, port, &ss, &v6);
	if (rc < 0)
		return rc;
	h = calloc(1, sizeof(*h));
	if (!h)
		return rs_seterr(-ENOMEM, "metrics: out of memory");
	h->r = r;
	errno = 0;
	h->d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD |
					(v6 ? MHD_USE_IPv6 : 0),
				port, NULL, NULL, http_handle, h,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_LIMIT, 64u,
				MHD_OPTION_CONNECTION_TIMEOUT, 10u,
				MHD_OPTION_END);
	if (!h->d) {
		rc = errno ? -errno : -EADDRNOTAVAIL;
		free(h);
		return rs_seterr(rc, "metrics: cannot serve on %s:%u: %s",
				 addr, port, strerror(-rc));
	}
	info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info ? info->port : port;
	*out = h;
	return 0;
}

uint16_t metrics_http_port(const struct metrics_http *h)
{
	return h ? h->port : 0;
}

void metrics_http_stop(struct metrics_http **hp)
{
	struct metrics_http *h = hp ? *hp : NULL;

	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
	*hp = NULL;
}
