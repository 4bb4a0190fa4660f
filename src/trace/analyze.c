/*
 * analyze.c - trace JSONL analysis (see analyze.h for the definitions).
 *
 * Layout. Every event line becomes a struct ta_event in one growing array;
 * its stage and table names are interned in a string pool (open-addressed
 * table of ids, XXH3 hashes), so events are small and names compare by id.
 * Nothing is indexed while loading. The first query after loading builds
 * the index:
 *   - rank[id]: the alphabetical rank of every pooled string (stable,
 *     readable output order); prefix[id]: the id of the stage name's text
 *     before its first '.';
 *   - order[]: event numbers sorted by (trace id, side, start, stage);
 *   - traces[]: one entry per trace id, a run of order[] plus the per-trace
 *     maxima that the network share, the slowest list and the check need.
 * Statistics are computed on demand by sorting (group, stage) cells and
 * then each cell's durations; percentiles are exact nearest-rank values.
 *
 * Invariant: a->indexed is false whenever events were added since the
 * last index; every query calls ta_index() first.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xxhash.h>

#include "common/rs_internal.h"
#include "trace/analyze.h"

#define TA_NONE UINT32_MAX
#define TA_BAD_KEPT 10

struct ta_event {
	uint64_t trace;
	uint64_t start;
	uint64_t dur;
	uint64_t bytes;
	uint32_t stage;
	uint32_t table;			/* TA_NONE: no table */
	uint32_t batch;
};

struct ta_pool {
	char **s;
	uint32_t n, cap;
	uint32_t *slot;			/* ids, TA_NONE = empty */
	uint32_t nslot;			/* power of two, >= 2 * n */
};

struct ta_trace {
	uint64_t id;
	uint32_t first, n;		/* run in order[] */
	int64_t op, wait, total;	/* largest durations; -1: absent */
	int64_t cother, sother;		/* largest other client/server */
	uint32_t cother_id, sother_id;
	bool client, server;
	uint64_t latency;
};

struct ta_row {
	uint32_t group, stage;
	struct trace_stat st;
};

struct trace_analysis {
	struct ta_event *ev;
	size_t nev, cap;
	struct ta_pool pool;
	struct trace_totals tot;
	char *bad[TA_BAD_KEPT];
	unsigned nbad;
	/* index */
	bool indexed;
	uint32_t *rank, *prefix;
	uint32_t *order;
	struct ta_trace *traces;
	size_t ntraces;
	uint32_t id_all, id_dash, id_client, id_server;
	uint32_t id_op, id_wait, id_total;
};

/* ---- string pool -------------------------------------------------------- */

static int pool_grow(struct ta_pool *p)
{
	uint32_t nslot = p->nslot ? p->nslot * 2 : 64;
	uint32_t *slot = malloc(nslot * sizeof(*slot));

	if (!slot)
		return -ENOMEM;
	memset(slot, 0xff, nslot * sizeof(*slot));
	for (uint32_t i = 0; i < p->n; i++) {
		uint32_t h = (uint32_t)XXH3_64bits(p->s[i], strlen(p->s[i]));

		while (slot[h & (nslot - 1)] != TA_NONE)
			h++;
		slot[h & (nslot - 1)] = i;
	}
	free(p->slot);
	p->slot = slot;
	p->nslot = nslot;
	return 0;
}

/* Id of s[0..len); added when insert is set. TA_NONE: absent or no memory */
static uint32_t pool_find(struct ta_pool *p, const char *s, size_t len,
			  bool insert)
{
	uint32_t h, id;

	if (insert && 2 * (p->n + 1) > p->nslot && pool_grow(p) < 0)
		return TA_NONE;
	if (p->nslot == 0)
		return TA_NONE;
	h = (uint32_t)XXH3_64bits(s, len);
	for (;; h++) {
		id = p->slot[h & (p->nslot - 1)];
		if (id == TA_NONE)
			break;
		if (!strncmp(p->s[id], s, len) && p->s[id][len] == '\0')
			return id;
	}
	if (!insert)
		return TA_NONE;
	if (p->n == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 64;
		char **ns = realloc(p->s, cap * sizeof(*ns));

		if (!ns)
			return TA_NONE;
		p->s = ns;
		p->cap = cap;
	}
	p->s[p->n] = strndup(s, len);
	if (!p->s[p->n])
		return TA_NONE;
	p->slot[h & (p->nslot - 1)] = p->n;
	return p->n++;
}

static uint32_t pool_id(struct ta_pool *p, const char *s)
{
	return pool_find(p, s, strlen(s), true);
}

static void pool_free(struct ta_pool *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		free(p->s[i]);
	free(p->s);
	free(p->slot);
	memset(p, 0, sizeof(*p));
}

/* ---- life cycle --------------------------------------------------------- */

int trace_analysis_new(struct trace_analysis **out)
{
	struct trace_analysis *a = calloc(1, sizeof(*a));

	if (!a)
		return rs_seterr(-ENOMEM, "trace analysis: out of memory");
	*out = a;
	return 0;
}

static void ta_unindex(struct trace_analysis *a)
{
	free(a->rank);
	free(a->prefix);
	free(a->order);
	free(a->traces);
	a->rank = a->prefix = a->order = NULL;
	a->traces = NULL;
	a->ntraces = 0;
	a->indexed = false;
}

void trace_analysis_delete(struct trace_analysis **ap)
{
	struct trace_analysis *a = ap ? *ap : NULL;

	if (!a)
		return;
	ta_unindex(a);
	for (unsigned i = 0; i < a->nbad; i++)
		free(a->bad[i]);
	pool_free(&a->pool);
	free(a->ev);
	free(a);
	*ap = NULL;
}

/* ---- parsing ------------------------------------------------------------ */

static void note_bad(struct trace_analysis *a, const char *name,
		     uint64_t lineno, const char *why)
{
	a->tot.malformed++;
	if (a->nbad < TA_BAD_KEPT &&
	    asprintf(&a->bad[a->nbad], "%s:%" PRIu64 ": %s", name, lineno,
		     why) >= 0)
		a->nbad++;
}

static bool parse_hex_id(const char *s, uint64_t *out)
{
	size_t n = s ? strlen(s) : 0;
	uint64_t v = 0;

	if (n == 0 || n > 16)
		return false;
	for (size_t i = 0; i < n; i++) {
		int c = s[i], d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return true;
}

/* Optional non-negative integer field: true when absent or valid. */
static bool opt_uint(json_t *o, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	*out = 0;
	if (!v)
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

static void add_meta(struct trace_analysis *a, json_t *o)
{
	const char *type = json_string_value(json_object_get(o, "type"));
	json_t *d = json_object_get(o, "dropped");

	a->tot.meta++;
	if (type && !strcmp(type, "summary") && json_is_integer(d) &&
	    json_integer_value(d) > 0)
		a->tot.dropped += (uint64_t)json_integer_value(d);
}

static const char *add_event(struct trace_analysis *a, json_t *o)
{
	json_t *stage = json_object_get(o, "stage");
	json_t *table = json_object_get(o, "table");
	json_t *dur = json_object_get(o, "dur_us");
	struct ta_event e;
	uint64_t batch;

	if (!parse_hex_id(json_string_value(json_object_get(o, "trace")),
			  &e.trace))
		return "missing or bad \"trace\" (1-16 hex digits)";
	if (!json_is_string(stage) || json_string_length(stage) == 0 ||
	    strlen(json_string_value(stage)) != json_string_length(stage))
		return "missing or bad \"stage\"";
	if (!json_is_integer(dur) || json_integer_value(dur) < 0)
		return "missing or bad \"dur_us\"";
	e.dur = (uint64_t)json_integer_value(dur);
	if (table && !json_is_null(table) &&
	    (!json_is_string(table) || strlen(json_string_value(table)) !=
					       json_string_length(table)))
		return "bad \"table\"";
	if (!opt_uint(o, "start_us", &e.start) ||
	    !opt_uint(o, "bytes", &e.bytes) || !opt_uint(o, "batch", &batch) ||
	    batch > UINT32_MAX)
		return "bad \"start_us\", \"bytes\" or \"batch\"";
	e.batch = (uint32_t)batch;
	e.stage = pool_find(&a->pool, json_string_value(stage),
			    json_string_length(stage), true);
	e.table = TA_NONE;
	if (json_is_string(table)) {
		e.table = pool_find(&a->pool, json_string_value(table),
				    json_string_length(table), true);
		if (e.table == TA_NONE)
			return "out of memory";
	}
	if (e.stage == TA_NONE)
		return "out of memory";
	if (a->nev == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 1024;
		struct ta_event *ne = realloc(a->ev, cap * sizeof(*ne));

		if (!ne)
			return "out of memory";
		a->ev = ne;
		a->cap = cap;
	}
	a->ev[a->nev++] = e;
	a->indexed = false;
	return NULL;
}

void trace_analysis_add_line(struct trace_analysis *a, const char *line,
			     size_t len, const char *name, uint64_t lineno)
{
	const char *why = NULL;
	json_error_t err;
	json_t *o;
	size_t i;

	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	for (i = 0; i < len && strchr(" \t", line[i]); i++)
		;
	if (i == len)
		return;
	a->tot.lines++;
	o = json_loadb(line, len, 0, &err);
	if (!o) {
		char msg[200];

		snprintf(msg, sizeof(msg), "not JSON: %s", err.text);
		note_bad(a, name, lineno, msg);
		return;
	}
	if (!json_is_object(o))
		why = "not a JSON object";
	else if (json_object_get(o, "type"))
		add_meta(a, o);
	else
		why = add_event(a, o);
	if (why)
		note_bad(a, name, lineno, why);
	json_decref(o);
}

int trace_analysis_load_stream(struct trace_analysis *a, FILE *f,
			       const char *name)
{
	size_t before = a->nev, cap = 0;
	uint64_t lineno = 0;
	char *line = NULL;
	ssize_t len;

	a->tot.files++;
	while ((len = getline(&line, &cap, f)) >= 0)
		trace_analysis_add_line(a, line, (size_t)len, name, ++lineno);
	free(line);
	if (ferror(f))
		return rs_seterr(-EIO, "%s: read error", name);
	return (int)(a->nev - before > INT32_MAX ? INT32_MAX
						 : a->nev - before);
}

int trace_analysis_load(struct trace_analysis *a, const char *path)
{
	FILE *f;
	int rc;

	if (!strcmp(path, "-"))
		return trace_analysis_load_stream(a, stdin, "<stdin>");
	f = fopen(path, "r");
	if (!f)
		return rs_seterr(-errno, "%s: %s", path, strerror(errno));
	rc = trace_analysis_load_stream(a, f, path);
	fclose(f);
	return rc;
}

/* ---- index -------------------------------------------------------------- */

static int cmp_rank_str(const void *x, const void *y, void *arg)
{
	char **s = arg;

	return strcmp(s[*(const uint32_t *)x], s[*(const uint32_t *)y]);
}

static int cmp_u64(uint64_t x, uint64_t y)
{
	return x < y ? -1 : x > y;
}

static int cmp_order(const void *x, const void *y, void *arg)
{
	const struct trace_analysis *a = arg;
	const struct ta_event *e = &a->ev[*(const uint32_t *)x];
	const struct ta_event *f = &a->ev[*(const uint32_t *)y];
	int c;

	if ((c = cmp_u64(e->trace, f->trace)))
		return c;
	if ((c = cmp_u64(a->rank[a->prefix[e->stage]],
			 a->rank[a->prefix[f->stage]])))
		return c;
	if ((c = cmp_u64(e->start, f->start)))
		return c;
	return cmp_u64(a->rank[e->stage], a->rank[f->stage]);
}

static int index_strings(struct trace_analysis *a)
{
	uint32_t n0 = a->pool.n, *pre, *byname;

	pre = malloc((n0 + 1) * sizeof(*pre));
	if (!pre)
		return -ENOMEM;
	for (uint32_t i = 0; i < n0; i++) {
		const char *dot = strchr(a->pool.s[i], '.');

		pre[i] = dot ? pool_find(&a->pool, a->pool.s[i],
					 (size_t)(dot - a->pool.s[i]), true)
			     : i;
	}
	a->id_all = pool_id(&a->pool, "all");
	a->id_dash = pool_id(&a->pool, "-");
	a->id_client = pool_id(&a->pool, "client");
	a->id_server = pool_id(&a->pool, "server");
	a->id_op = pool_id(&a->pool, "client.op");
	a->id_wait = pool_id(&a->pool, "client.wait");
	a->id_total = pool_id(&a->pool, "server.total");
	a->prefix = malloc(a->pool.n * sizeof(*a->prefix));
	a->rank = malloc(a->pool.n * sizeof(*a->rank));
	byname = malloc(a->pool.n * sizeof(*byname));
	if (!a->prefix || !a->rank || !byname || a->id_all == TA_NONE ||
	    a->id_dash == TA_NONE || a->id_client == TA_NONE ||
	    a->id_server == TA_NONE || a->id_op == TA_NONE ||
	    a->id_wait == TA_NONE || a->id_total == TA_NONE) {
		free(pre);
		free(byname);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < a->pool.n; i++) {
		a->prefix[i] = i < n0 ? pre[i] : i;
		if (a->prefix[i] == TA_NONE)
			a->prefix[i] = i;
		byname[i] = i;
	}
	qsort_r(byname, a->pool.n, sizeof(*byname), cmp_rank_str, a->pool.s);
	for (uint32_t r = 0; r < a->pool.n; r++)
		a->rank[byname[r]] = r;
	free(byname);
	free(pre);
	return 0;
}

static void trace_fold(struct trace_analysis *a, struct ta_trace *t)
{
	t->op = t->wait = t->total = t->cother = t->sother = -1;
	t->client = t->server = false;
	t->latency = 0;
	for (uint32_t k = 0; k < t->n; k++) {
		const struct ta_event *e = &a->ev[a->order[t->first + k]];
		int64_t d = (int64_t)(e->dur > INT64_MAX ? INT64_MAX : e->dur);
		uint32_t side = a->prefix[e->stage];

		if ((uint64_t)d > t->latency)
			t->latency = (uint64_t)d;
		if (e->stage == a->id_op) {
			t->op = d > t->op ? d : t->op;
		} else if (e->stage == a->id_total) {
			t->total = d > t->total ? d : t->total;
		} else if (side == a->id_client && d > t->cother) {
			t->cother = d;
			t->cother_id = e->stage;
		} else if (side == a->id_server && d > t->sother) {
			t->sother = d;
			t->sother_id = e->stage;
		}
		if (e->stage == a->id_wait)
			t->wait = d > t->wait ? d : t->wait;
		t->client |= side == a->id_client;
		t->server |= side == a->id_server;
	}
	if (t->op >= 0)
		t->latency = (uint64_t)t->op;
}

static int index_traces(struct trace_analysis *a)
{
	size_t nt = 0;

	for (size_t i = 0; i < a->nev; i++)
		nt += i == 0 || a->ev[a->order[i]].trace !=
				       a->ev[a->order[i - 1]].trace;
	a->traces = calloc(nt ? nt : 1, sizeof(*a->traces));
	if (!a->traces)
		return -ENOMEM;
	for (size_t i = 0; i < a->nev; i++) {
		struct ta_trace *t;

		if (i == 0 || a->ev[a->order[i]].trace !=
				      a->ev[a->order[i - 1]].trace) {
			t = &a->traces[a->ntraces++];
			t->id = a->ev[a->order[i]].trace;
			t->first = (uint32_t)i;
		}
		a->traces[a->ntraces - 1].n++;
	}
	a->tot.matched = a->tot.client_only = a->tot.server_only = 0;
	for (size_t i = 0; i < a->ntraces; i++) {
		struct ta_trace *t = &a->traces[i];

		trace_fold(a, t);
		a->tot.matched += t->wait >= 0 && t->total >= 0;
		a->tot.client_only += t->client && !t->server;
		a->tot.server_only += t->server && !t->client;
	}
	a->tot.traces = a->ntraces;
	return 0;
}

static int ta_index(struct trace_analysis *a)
{
	int rc;

	if (a->indexed)
		return 0;
	ta_unindex(a);
	if (a->nev > UINT32_MAX)
		return rs_seterr(RS_E_TOOBIG,
				 "trace analysis: too many events");
	rc = index_strings(a);
	if (rc < 0)
		goto fail;
	a->order = malloc((a->nev ? a->nev : 1) * sizeof(*a->order));
	if (!a->order) {
		rc = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < a->nev; i++)
		a->order[i] = (uint32_t)i;
	qsort_r(a->order, a->nev, sizeof(*a->order), cmp_order, a);
	rc = index_traces(a);
	if (rc < 0)
		goto fail;
	a->tot.events = a->nev;
	a->indexed = true;
	return 0;
fail:
	ta_unindex(a);
	return rs_seterr(rc, "trace analysis: out of memory");
}

/* ---- statistics --------------------------------------------------------- */

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* nearest rank: v[ceil(p * n / 100) - 1] */
static double pct(const double *v, uint64_t n, unsigned p)
{
	uint64_t r = (p * n + 99) / 100;

	return v[r ? r - 1 : 0];
}

/* Sorts v in place, then fills s. */
static void stat_of(double *v, size_t n, struct trace_stat *s)
{
	double sum = 0;

	memset(s, 0, sizeof(*s));
	if (n == 0)
		return;
	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	s->count = n;
	s->mean = sum / (double)n;
	s->min = v[0];
	s->p25 = pct(v, n, 25);
	s->p50 = pct(v, n, 50);
	s->p75 = pct(v, n, 75);
	s->p95 = pct(v, n, 95);
	s->p99 = pct(v, n, 99);
	s->max = v[n - 1];
}

static uint32_t group_of(const struct trace_analysis *a,
			 const struct ta_event *e, enum trace_group by)
{
	switch (by) {
	case TRACE_BY_TABLE:
		return e->table == TA_NONE ? a->id_dash : e->table;
	case TRACE_BY_PREFIX:
		return a->prefix[e->stage];
	default:
		return a->id_all;
	}
}

struct ta_cell {
	uint32_t group, stage;
	double dur;
};

static int cmp_cell(const void *x, const void *y, void *arg)
{
	const struct trace_analysis *a = arg;
	const struct ta_cell *c = x, *d = y;
	int r;

	if ((r = cmp_u64(a->rank[c->group], a->rank[d->group])))
		return r;
	return cmp_u64(a->rank[c->stage], a->rank[d->stage]);
}

/* One row per (group, stage), in name order; *rows malloc'd. */
static int build_rows(struct trace_analysis *a, enum trace_group by,
		      struct ta_row **rows, size_t *nrows)
{
	struct ta_cell *c;
	double *v;
	size_t n = 0;
	int rc = ta_index(a);

	*rows = NULL;
	*nrows = 0;
	if (rc < 0)
		return rc;
	c = malloc((a->nev ? a->nev : 1) * sizeof(*c));
	v = malloc((a->nev ? a->nev : 1) * sizeof(*v));
	*rows = malloc((a->nev ? a->nev : 1) * sizeof(**rows));
	if (!c || !v || !*rows) {
		free(c);
		free(v);
		free(*rows);
		*rows = NULL;
		return rs_seterr(-ENOMEM, "trace analysis: out of memory");
	}
	for (size_t i = 0; i < a->nev; i++) {
		c[i].group = group_of(a, &a->ev[i], by);
		c[i].stage = a->ev[i].stage;
		c[i].dur = (double)a->ev[i].dur;
	}
	qsort_r(c, a->nev, sizeof(*c), cmp_cell, a);
	for (size_t i = 0, j; i < a->nev; i = j) {
		for (j = i; j < a->nev && c[j].group == c[i].group &&
			    c[j].stage == c[i].stage; j++)
			v[j - i] = c[j].dur;
		(*rows)[n].group = c[i].group;
		(*rows)[n].stage = c[i].stage;
		stat_of(v, j - i, &(*rows)[n].st);
		n++;
	}
	free(c);
	free(v);
	*nrows = n;
	return 0;
}

void trace_analysis_totals(struct trace_analysis *a, struct trace_totals *t)
{
	ta_index(a);
	*t = a->tot;
	t->events = a->nev;
}

int trace_analysis_stage(struct trace_analysis *a, enum trace_group by,
			 const char *group, const char *stage,
			 struct trace_stat *out)
{
	struct ta_row *rows;
	size_t n;
	int rc = build_rows(a, by, &rows, &n);

	if (rc < 0)
		return rc;
	rc = rs_seterr(RS_E_NOTFOUND, "no events for %s/%s", group, stage);
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(a->pool.s[rows[i].group], group) &&
		    !strcmp(a->pool.s[rows[i].stage], stage)) {
			*out = rows[i].st;
			rc = 0;
			break;
		}
	}
	free(rows);
	return rc;
}

int trace_analysis_network(struct trace_analysis *a, struct trace_stat *net,
			   struct trace_stat *share)
{
	double *nv, *sv;
	size_t nn = 0, ns = 0;
	int rc = ta_index(a);

	if (rc < 0)
		return rc;
	nv = malloc((a->ntraces + 1) * sizeof(*nv));
	sv = malloc((a->ntraces + 1) * sizeof(*sv));
	if (!nv || !sv) {
		free(nv);
		free(sv);
		return rs_seterr(-ENOMEM, "trace analysis: out of memory");
	}
	for (size_t i = 0; i < a->ntraces; i++) {
		const struct ta_trace *t = &a->traces[i];
		double d;

		if (t->wait < 0 || t->total < 0)
			continue;
		d = (double)t->wait - (double)t->total;
		nv[nn++] = d;
		if (t->op > 0)
			sv[ns++] = d / (double)t->op * 100.0;
	}
	stat_of(nv, nn, net);
	if (share)
		stat_of(sv, ns, share);
	free(nv);
	free(sv);
	return nn ? 0 : rs_seterr(RS_E_NOTFOUND, "no matched traces");
}

/* ---- check -------------------------------------------------------------- */

static bool below(int64_t x, int64_t y, uint64_t tol)
{
	return x >= 0 && y >= 0 && (double)x + (double)tol < (double)y;
}

int64_t trace_analysis_check(struct trace_analysis *a, uint64_t tol,
			     FILE *out, struct trace_check *res)
{
	struct trace_check r = {0};
	int rc = ta_index(a);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < a->ntraces; i++) {
		const struct ta_trace *t = &a->traces[i];
		bool applies =
			(t->op >= 0 && (t->cother >= 0 || t->total >= 0)) ||
			(t->wait >= 0 && t->total >= 0) ||
			(t->total >= 0 && t->sother >= 0);
		bool v1 = below(t->op, t->cother, tol);
		bool v2 = below(t->wait, t->total, tol);
		bool v3 = below(t->op, t->total, tol);
		bool v4 = below(t->total, t->sother, tol);

		r.checked += applies;
		r.op_lt_stage += v1;
		r.wait_lt_total += v2;
		r.op_lt_total += v3;
		r.total_lt_stage += v4;
		if (!(v1 || v2 || v3 || v4))
			continue;
		r.violations++;
		if (!out)
			continue;
		fprintf(out, "violation %016" PRIx64 ":", t->id);
		if (v1)
			fprintf(out, " client.op %" PRId64 " < %s %" PRId64,
				t->op, a->pool.s[t->cother_id], t->cother);
		if (v2)
			fprintf(out, " client.wait %" PRId64
				" < server.total %" PRId64, t->wait, t->total);
		if (v3)
			fprintf(out, " client.op %" PRId64
				" < server.total %" PRId64, t->op, t->total);
		if (v4)
			fprintf(out, " server.total %" PRId64 " < %s %" PRId64,
				t->total, a->pool.s[t->sother_id], t->sother);
		fputc('\n', out);
	}
	if (res)
		*res = r;
	return (int64_t)r.violations;
}

/* ---- text report -------------------------------------------------------- */

static void print_stat_row(FILE *out, const char *g, const char *s,
			   const struct trace_stat *st, const char *fmt)
{
	char b[5][32];
	const double v[5] = {st->mean, st->p50, st->p95, st->p99, st->max};

	snprintf(b[0], sizeof(b[0]), "%.1f", v[0]);
	for (int i = 1; i < 5; i++)
		snprintf(b[i], sizeof(b[i]), fmt, v[i]);
	fprintf(out, "%-12s %-16s %9" PRIu64 " %10s %10s %10s %10s %10s\n",
		g, s, st->count, b[0], b[1], b[2], b[3], b[4]);
}

static void print_header(FILE *out, const char *unit)
{
	fprintf(out, "%-12s %-16s %9s %10s %10s %10s %10s %10s  (%s)\n",
		"group", "stage", "count", "mean", "p50", "p95", "p99", "max",
		unit);
}

static int cmp_slow(const void *x, const void *y, void *arg)
{
	const struct ta_trace *t = arg;
	const struct ta_trace *p = &t[*(const uint32_t *)x];
	const struct ta_trace *q = &t[*(const uint32_t *)y];
	int c = cmp_u64(q->latency, p->latency);

	return c ? c : cmp_u64(p->id, q->id);
}

static void print_trace(struct trace_analysis *a, const struct ta_trace *t,
			FILE *out)
{
	uint64_t base = 0;
	uint32_t side = TA_NONE;

	fprintf(out, "  %016" PRIx64 "  %" PRIu64 " us%s\n", t->id, t->latency,
		t->op >= 0 ? "" : " (no client.op)");
	for (uint32_t k = 0; k < t->n; k++) {
		const struct ta_event *e = &a->ev[a->order[t->first + k]];

		if (a->prefix[e->stage] != side) {	/* sorted by start */
			side = a->prefix[e->stage];
			base = e->start;
		}
		fprintf(out, "    %-16s +%-8" PRIu64 " %8" PRIu64
			" us  table=%s batch=%u bytes=%" PRIu64 "\n",
			a->pool.s[e->stage], e->start - base, e->dur,
			e->table == TA_NONE ? "-" : a->pool.s[e->table],
			e->batch, e->bytes);
	}
}

static int print_slowest(struct trace_analysis *a, unsigned n, FILE *out)
{
	uint32_t *idx;

	if (n == 0 || a->ntraces == 0)
		return 0;
	idx = malloc(a->ntraces * sizeof(*idx));
	if (!idx)
		return rs_seterr(-ENOMEM, "trace analysis: out of memory");
	for (size_t i = 0; i < a->ntraces; i++)
		idx[i] = (uint32_t)i;
	qsort_r(idx, a->ntraces, sizeof(*idx), cmp_slow, a->traces);
	if (n > a->ntraces)
		n = (unsigned)a->ntraces;
	fprintf(out, "\nslowest %u traces (by client.op, else longest stage; "
		"offsets from the first event on each side):\n", n);
	for (unsigned i = 0; i < n; i++)
		print_trace(a, &a->traces[idx[i]], out);
	free(idx);
	return 0;
}

static void print_network(struct trace_analysis *a, FILE *out)
{
	struct trace_stat net, share;

	fprintf(out, "\nnetwork = client.wait - server.total: %" PRIu64
		" traces matched by id (%" PRIu64 " client-only, %" PRIu64
		" server-only)\n", a->tot.matched, a->tot.client_only,
		a->tot.server_only);
	if (trace_analysis_network(a, &net, &share) < 0)
		return;
	print_header(out, "us; share in % of client.op");
	print_stat_row(out, "network", "us", &net, "%.0f");
	if (share.count)
		print_stat_row(out, "network", "share%", &share, "%.1f");
}

int trace_analysis_report(struct trace_analysis *a,
			  const struct trace_report_opts *o, FILE *out)
{
	struct ta_row *rows;
	size_t n;
	int rc = build_rows(a, o->by, &rows, &n);

	if (rc < 0)
		return rc;
	fprintf(out, "files %" PRIu64 ", lines %" PRIu64 ", events %" PRIu64
		", traces %" PRIu64 ", malformed lines %" PRIu64
		", events dropped by writers %" PRIu64 "\n", a->tot.files,
		a->tot.lines, (uint64_t)a->nev, a->tot.traces,
		a->tot.malformed, a->tot.dropped);
	for (unsigned i = 0; i < a->nbad; i++)
		fprintf(out, "  malformed: %s\n", a->bad[i]);
	if (a->tot.malformed > a->nbad)
		fprintf(out, "  ... %" PRIu64 " more malformed lines\n",
			a->tot.malformed - a->nbad);
	fputc('\n', out);
	print_header(out, "us");
	for (size_t i = 0; i < n; i++) {
		print_stat_row(out, a->pool.s[rows[i].group],
			       a->pool.s[rows[i].stage], &rows[i].st, "%.0f");
	}
	free(rows);
	print_network(a, out);
	return print_slowest(a, o->slowest, out);
}

/* ---- CSV ---------------------------------------------------------------- */

static void csv_field(FILE *out, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

static void csv_num(FILE *out, double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		fprintf(out, ",%.0f", v);
	else
		fprintf(out, ",%.3f", v);
}

static void csv_row(FILE *out, const char *g, const char *s,
		    const struct trace_stat *st)
{
	csv_field(out, g);
	fputc(',', out);
	csv_field(out, s);
	fprintf(out, ",%" PRIu64, st->count);
	csv_num(out, st->mean);
	csv_num(out, st->min);
	csv_num(out, st->p25);
	csv_num(out, st->p50);
	csv_num(out, st->p75);
	csv_num(out, st->p95);
	csv_num(out, st->p99);
	csv_num(out, st->max);
	fputc('\n', out);
}

int trace_analysis_write_csv(struct trace_analysis *a, enum trace_group by,
			     FILE *out)
{
	struct trace_stat net, share;
	struct ta_row *rows;
	size_t n;
	int rc = build_rows(a, by, &rows, &n);

	if (rc < 0)
		return rc;
	fputs("group,stage,count,mean_us,min_us,p25_us,p50_us,p75_us,p95_us,"
	      "p99_us,max_us\n", out);
	for (size_t i = 0; i < n; i++)
		csv_row(out, a->pool.s[rows[i].group], a->pool.s[rows[i].stage],
			&rows[i].st);
	free(rows);
	if (trace_analysis_network(a, &net, &share) == 0) {
		csv_row(out, "*", "network_us", &net);
		if (share.count)
			csv_row(out, "*", "network_share_pct", &share);
	}
	return ferror(out) ? rs_seterr(-EIO, "CSV: write error") : 0;
}

/* ---- SVG ---------------------------------------------------------------- */

#define SVG_W 960
#define SVG_LABEL 260		/* label column width */
#define SVG_RIGHT 30
#define SVG_TOP 50
#define SVG_ROW 26
#define SVG_AXIS 50

static void xml_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&apos;", out); break;
		default:
			/* XML 1.0 forbids most control characters */
			fputc((unsigned char)*s < 0x20 ? '?' : *s, out);
		}
	}
}

struct svg_axis {
	double lo, hi;		/* log10 bounds */
	double x0, w;
};

static double svg_x(const struct svg_axis *ax, double v)
{
	double l = log10(v < 1 ? 1 : v);

	return ax->x0 + (l - ax->lo) / (ax->hi - ax->lo) * ax->w;
}

static void svg_tick_label(char *b, size_t n, double us)
{
	if (us >= 1e6)
		snprintf(b, n, "%gs", us / 1e6);
	else if (us >= 1e3)
		snprintf(b, n, "%gms", us / 1e3);
	else
		snprintf(b, n, "%gus", us);
}

static void svg_axis_draw(FILE *out, const struct svg_axis *ax, double y0,
			  double y1)
{
	for (int d = (int)ax->lo; d <= (int)ax->hi; d++) {
		double x = ax->x0 + (d - ax->lo) / (ax->hi - ax->lo) * ax->w;
		char b[32];

		svg_tick_label(b, sizeof(b), pow(10, d));
		fprintf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" "
			"x2=\"%.1f\" y2=\"%.1f\"/>\n", x, y0, x, y1);
		fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\">%s"
			"</text>\n", x, y1 + 16, b);
	}
}

static void svg_row(FILE *out, const struct svg_axis *ax, double y,
		    const char *label, const struct trace_stat *s)
{
	double mid = y + SVG_ROW / 2.0, h = SVG_ROW * 0.6;
	double xp25 = svg_x(ax, s->p25), xp75 = svg_x(ax, s->p75);

	fprintf(out, "<g class=\"row\">\n<title>");
	xml_text(out, label);
	fprintf(out, ": n=%" PRIu64 " mean=%.1f min=%.0f p25=%.0f p50=%.0f "
		"p75=%.0f p95=%.0f p99=%.0f max=%.0f us</title>\n", s->count,
		s->mean, s->min, s->p25, s->p50, s->p75, s->p95, s->p99,
		s->max);
	fprintf(out, "<text class=\"label\" x=\"%d\" y=\"%.1f\">",
		SVG_LABEL - 8, mid + 4);
	xml_text(out, label);
	fprintf(out, "</text>\n");
	fprintf(out, "<line class=\"whisker\" x1=\"%.1f\" y1=\"%.1f\" "
		"x2=\"%.1f\" y2=\"%.1f\"/>\n", svg_x(ax, s->min), mid,
		svg_x(ax, s->max), mid);
	fprintf(out, "<rect class=\"box\" x=\"%.1f\" y=\"%.1f\" "
		"width=\"%.1f\" height=\"%.1f\"/>\n", xp25, mid - h / 2,
		xp75 - xp25 < 1 ? 1 : xp75 - xp25, h);
	fprintf(out, "<line class=\"median\" x1=\"%.1f\" y1=\"%.1f\" "
		"x2=\"%.1f\" y2=\"%.1f\"/>\n", svg_x(ax, s->p50), mid - h / 2,
		svg_x(ax, s->p50), mid + h / 2);
	fprintf(out, "<line class=\"p95\" x1=\"%.1f\" y1=\"%.1f\" "
		"x2=\"%.1f\" y2=\"%.1f\"/>\n", svg_x(ax, s->p95), mid - h / 3,
		svg_x(ax, s->p95), mid + h / 3);
	fprintf(out, "<line class=\"p99\" x1=\"%.1f\" y1=\"%.1f\" "
		"x2=\"%.1f\" y2=\"%.1f\"/>\n</g>\n", svg_x(ax, s->p99),
		mid - h / 3, svg_x(ax, s->p99), mid + h / 3);
}

static const char svg_style[] =
	"<style>\n"
	"text { font-family: sans-serif; font-size: 12px; }\n"
	".title { font-size: 15px; font-weight: bold; }\n"
	".label { text-anchor: end; }\n"
	".tick { text-anchor: middle; fill: #555; }\n"
	".grid { stroke: #ddd; }\n"
	".whisker { stroke: #555; }\n"
	".box { fill: #9ecae1; stroke: #3182bd; }\n"
	".median { stroke: #08306b; stroke-width: 2; }\n"
	".p95 { stroke: #e6550d; stroke-width: 2; }\n"
	".p99 { stroke: #a50f15; stroke-width: 2; }\n"
	"</style>\n";

int trace_analysis_write_svg(struct trace_analysis *a, enum trace_group by,
			     FILE *out)
{
	struct svg_axis ax = {0, 1, SVG_LABEL, SVG_W - SVG_LABEL - SVG_RIGHT};
	double lo = INFINITY, hi = 1;
	struct ta_row *rows;
	size_t n;
	int height, rc = build_rows(a, by, &rows, &n);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		lo = fmin(lo, rows[i].st.min < 1 ? 1 : rows[i].st.min);
		hi = fmax(hi, rows[i].st.max);
	}
	if (n) {
		ax.lo = floor(log10(lo));
		ax.hi = ceil(log10(hi));
	}
	if (ax.hi <= ax.lo)
		ax.hi = ax.lo + 1;
	height = SVG_TOP + (int)n * SVG_ROW + SVG_AXIS;
	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\">\n", SVG_W, height, SVG_W,
		height);
	fputs(svg_style, out);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
		"fill=\"white\"/>\n", SVG_W, height);
	fprintf(out, "<text class=\"title\" x=\"10\" y=\"24\">Latency per "
		"stage (us, log scale): whiskers min-max, box p25-p75, "
		"median, p95 and p99 ticks</text>\n");
	svg_axis_draw(out, &ax, SVG_TOP - 6, SVG_TOP + (double)n * SVG_ROW);
	for (size_t i = 0; i < n; i++) {
		char label[512];

		if (by == TRACE_BY_NONE)
			snprintf(label, sizeof(label), "%s",
				 a->pool.s[rows[i].stage]);
		else
			snprintf(label, sizeof(label), "%s / %s",
				 a->pool.s[rows[i].group],
				 a->pool.s[rows[i].stage]);
		svg_row(out, &ax, SVG_TOP + (double)i * SVG_ROW, label,
			&rows[i].st);
	}
	fputs("</svg>\n", out);
	free(rows);
	return ferror(out) ? rs_seterr(-EIO, "SVG: write error") : 0;
}
