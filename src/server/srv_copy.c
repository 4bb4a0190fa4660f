/*
 * srv_copy.c - copying ranges to a node that gains them (docs/replication.md,
 * "Copying ranges").
 *
 * A node gains a key-hash range when a configuration puts it in the
 * range's target replica set (the ring over ACTIVE and JOINING members)
 * or its active one (the ring over serving members: replica reads go
 * there) and the node did not hold the range completely before: a joining
 * node gains all its ranges, a survivor of a failure the ones it is
 * appended to as the new tail of a replica set, and a survivor whose copy
 * was cut short by a join also the ranges the joiner is to take from it. From the moment the node adopts that
 * configuration the range's primary forwards every write of the range to
 * it (srv_repl_record); what it still lacks is the rows written before.
 * The adopting thread asks the primary for them (COPY): the primary walks
 * its rows of each table a batch at a time and, under `order`, queues the
 * range's rows to the node as REPL records in the same queue as the
 * forwarded writes, so a row copied and a later write of the same key
 * arrive in the order they happened. Records are whole rows and state,
 * so the node ends with the primary's rows bit for bit.
 *
 * What the node held of a gained range from an earlier time (it left the
 * range and comes back, or a key deleted meanwhile) is removed when the
 * configuration is adopted, under the configuration's write lock: no
 * write of the new epoch has reached the node yet, and none of an older
 * one will be applied any more (the fence).
 *
 * The node knows what it holds relative to the configuration before:
 * `have`, the ranges it held completely in the epoch it adopted last.
 * Adopting the next one it keeps those it is still in a replica set of
 * (it received every write of them), whether or not the copy of the
 * epoch before finished, and gains the others of its target sets. When
 * the new epoch is not the next one after `have` (the node missed a
 * configuration, or never held anything), it copies all its ranges but
 * those it is the primary of.
 *
 * When every gained range is in, the node holds every range it serves
 * completely: it publishes the epoch in its registration (synced), the
 * decider makes a JOINING node ACTIVE in the next configuration, and
 * counts the node as a sure holder of its ranges when another member's
 * lease lapses (test_copy_plan).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/le.h"
#include "server/srv_repl_int.h"
#include "value/slab.h"

#define COPY_BATCH 2048u	/* rows per COPY request */
#define COPY_RETRY_MS 1000u
#define COPY_WAIT_MS (4u * SRV_REPL_TIMEOUT_MS + 2000u)

/* ---- ranges ---- */

struct srv_ranges {
	struct srv_gain *v;	/* (lo, hi], lo < hi, sorted by lo */
	size_t n;
	bool low;		/* also [0, low_hi] (a range that wraps) */
	uint64_t low_hi;
};

static bool ranges_has(const struct srv_ranges *r, uint64_t h)
{
	size_t a = 0, b = r->n;

	if (r->low && h <= r->low_hi)
		return true;
	while (a < b) {		/* the last range with lo < h */
		size_t m = a + (b - a) / 2;

		if (r->v[m].lo < h)
			a = m + 1;
		else
			b = m;
	}
	return a && h <= r->v[a - 1].hi;
}

static int gain_cmp(const void *a, const void *b)
{
	const struct srv_gain *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Split wrapping ranges and sort (r->v may be NULL when r->n is 0). */
static void ranges_norm(struct srv_ranges *r)
{
	size_t n = r->n;

	for (size_t i = 0; i < n; i++)
		if (r->v[i].lo >= r->v[i].hi) {
			if (!r->low || r->v[i].hi > r->low_hi)
				r->low_hi = r->v[i].hi;
			r->low = true;
			r->v[i].hi = UINT64_MAX;
		}
	if (n > 1)
		qsort(r->v, n, sizeof(*r->v), gain_cmp);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Append the end points of p's ranges to pts. */
static void add_points(const struct memb_placement *p, uint64_t *pts,
		       size_t *n)
{
	unsigned set[MEMB_MAX_R];
	uint64_t a, b;

	for (size_t i = 0; p && i < memb_ranges(p); i++) {
		memb_range(p, i, &a, &b, set);
		pts[(*n)++] = b;
	}
}

/* ---- planning (adopting thread, configuration write lock held) ---- */

static void ranges_free(struct srv_ranges **r)
{
	if (*r)
		free((*r)->v);
	free(*r);
	*r = NULL;
}

static int gain_add(struct srv_gain **v, size_t *n, size_t *cap, uint64_t lo,
		    uint64_t hi, unsigned src)
{
	struct srv_gain *last = *n ? &(*v)[*n - 1] : NULL;

	if (last && last->hi == lo && last->src == src) {
		last->hi = hi;
		return 0;
	}
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		void *a = rs_realloc(*v, (nc + 1) * sizeof(**v));

		if (!a)
			return rs_seterr(-ENOMEM, "copy: out of memory");
		*v = a;
		*cap = nc;
	}
	(*v)[(*n)++] = (struct srv_gain){ lo, hi, src };
	return 0;
}

/* A new, empty set of ranges (NULL when out of memory). */
static struct srv_ranges *ranges_new(void)
{
	return rs_calloc(1, sizeof(struct srv_ranges));
}

/* The ranges g serves at this node, into *out: those of its replica sets
 * in g's active ring (as an ACTIVE or LEAVING member) and in its target
 * ring (as an ACTIVE or JOINING one). */
static int ranges_served(const struct srv_cfg *g, struct srv_ranges **out)
{
	const struct memb_placement *t = srv_cfg_target(g);
	struct srv_ranges *r = ranges_new();
	size_t n = 0, cap = 0;
	uint64_t *pts;
	int ret = 0;

	pts = rs_malloc((memb_ranges(t) + memb_ranges(g->pl) + 1) *
			sizeof(*pts));
	if (!r || !pts) {
		free(pts);
		ranges_free(&r);
		return rs_seterr(-ENOMEM, "copy: out of memory");
	}
	add_points(t, pts, &n);
	add_points(g->pl, pts, &n);
	qsort(pts, n, sizeof(*pts), u64_cmp);
	for (size_t i = 0; !ret && i < n; i++) {
		uint64_t lo = pts[i ? i - 1 : n - 1], hi = pts[i];

		if ((i && lo == hi) || !(memb_in_set(t, hi, g->tself) ||
					 memb_in_set(g->pl, hi, g->self)))
			continue;
		ret = gain_add(&r->v, &r->n, &cap, lo, hi, 0);
	}
	free(pts);
	if (ret) {
		ranges_free(&r);
		return ret;
	}
	ranges_norm(r);
	*out = r;
	return 0;
}

/*
 * The ranges the node holds completely once it has all of g's: those it
 * serves in g, in its target sets and in its active sets. A member in an
 * active set of a range but not in its target set (a joiner takes its
 * place, or it leaves) keeps receiving every write of the range and
 * takes replica reads of it until the configuration after. Ready for
 * reads, and synced for the decider.
 */
static void have_set(struct srv_repl *rp, const struct srv_cfg *g)
{
	ranges_free(&rp->have);
	rp->have_epoch = 0;
	if (g->tself < 0) {
		atomic_store(&rp->synced, 0);
		return;
	}
	if (ranges_served(g, &rp->have))
		return;		/* out of memory: the next epoch copies all */
	rp->have_epoch = g->c.epoch;
	if (g->self >= 0)
		atomic_store(&rp->ready, g->c.epoch);
	/* what the decider waits for to make a joining node active, while
	 * a member leaves to let it go (docs/replication.md, "Removing a
	 * node"), and, when a member's lease lapses, to know whether
	 * another member holds its ranges ("The last complete holder") */
	atomic_store(&rp->synced, g->c.epoch);
}

/* Append r's end points to pts. */
static void add_range_points(const struct srv_ranges *r, uint64_t *pts,
			     size_t *n)
{
	for (size_t i = 0; r && i < r->n; i++) {
		pts[(*n)++] = r->v[i].lo;
		pts[(*n)++] = r->v[i].hi;
	}
	if (r && r->low)
		pts[(*n)++] = r->low_hi;
}

/* What plan_ranges found besides the ranges to copy. */
struct plan {
	const struct srv_ranges *have;	/* held completely (NULL: unknown) */
	struct srv_ranges *keep;	/* of those, still held in g: in a
					   replica set of g's active or
					   target ring (NULL: not wanted) */
	size_t keep_cap;
	uint64_t unheld;		/* ranges of g's target ring the node
					   leads without holding them */
};

/* One elementary range (lo, hi] of plan_ranges: what the node keeps of
 * it, and whether it gains it (0), or the error. */
static int plan_one(const struct srv_cfg *g, struct plan *pl, uint64_t lo,
		    uint64_t hi, struct srv_gain **v, size_t *nv, size_t *cap)
{
	const struct memb_placement *t = srv_cfg_target(g);
	bool held = pl->have && ranges_has(pl->have, hi);
	/* served here: in a target set, or in an active set (replica reads
	 * come here, and it may be all that is left of the range when the
	 * other members fail) */
	bool served = memb_in_set(t, hi, g->tself) || memb_in_set(g->pl, hi, g->self);
	unsigned set[MEMB_MAX_R], cnt;
	int ret = 0;

	if (pl->keep && held && served)
		ret = gain_add(&pl->keep->v, &pl->keep->n, &pl->keep_cap, lo,
			       hi, 0);
	if (ret || !served || held)
		return ret;
	cnt = memb_replicas(g->pl, hi, set);
	if (cnt && (int)set[0] != g->self)
		return gain_add(v, nv, cap, lo, hi, set[0]);
	/* no one else holds it: nothing to copy. With what it held known,
	 * a range it leads and lacks lost its other holders while it
	 * copied it */
	pl->unheld += pl->have && cnt;
	return 0;
}

/*
 * The elementary ranges this node serves in g (in a replica set of g's
 * target or active ring) that another member leads (their source), less those it holds completely
 * (pl->have; NULL: none known), into *v / *nv (appended; room for one
 * more, ranges_norm); what it keeps of pl->have into pl->keep.
 */
static int plan_ranges(const struct srv_cfg *g, struct plan *pl,
		       struct srv_gain **v, size_t *nv)
{
	const struct memb_placement *t = srv_cfg_target(g);
	size_t n = 0, cap = *nv;
	uint64_t *pts;
	int ret = 0;

	pts = rs_malloc((memb_ranges(t) + memb_ranges(g->pl) + 1 +
		      (pl->have ? 2 * pl->have->n + 1 : 0)) * sizeof(*pts));
	if (!pts)
		return rs_seterr(-ENOMEM, "copy: out of memory");
	add_points(t, pts, &n);
	add_points(g->pl, pts, &n);
	add_range_points(pl->have, pts, &n);
	qsort(pts, n, sizeof(*pts), u64_cmp);
	for (size_t i = 0; !ret && i < n; i++) {
		uint64_t lo = pts[i ? i - 1 : n - 1], hi = pts[i];

		if (i && lo == hi)
			continue;
		ret = plan_one(g, pl, lo, hi, v, nv, &cap);
	}
	free(pts);
	return ret;
}

/*
 * Room for one more element of sz bytes in the array a of n elements and
 * *cap slots: a itself while n < *cap, else a realloc'd to twice *cap slots
 * (first when *cap is 0), *cap updated; NULL (a left as it was) when out of
 * memory.
 */
static void *room_for_one(void *a, size_t n, size_t *cap, size_t first,
			  size_t sz)
{
	size_t nc;

	if (n < *cap)
		return a;
	nc = *cap ? 2 * *cap : first;
	a = rs_realloc(a, nc * sz);
	if (a)
		*cap = nc;
	return a;
}

struct purge {
	struct srv_ranges r;
	struct slab_table *st;
	uint64_t *keys;
	size_t n, cap;
};

static int purge_collect(void *arg, uint64_t key, uint32_t row)
{
	struct purge *p = arg;
	void *v;

	(void)row;
	if (!ranges_has(&p->r, memb_key_hash(key)))
		return 0;
	v = room_for_one(p->keys, p->n, &p->cap, 1024, sizeof(*p->keys));
	if (!v)
		return -ENOMEM;
	p->keys = v;
	p->keys[p->n++] = key;
	return 0;
}

/*
 * Before the first row of a gained range goes: a client may still READ
 * this node by an earlier configuration in which it served that range
 * (it was paused or cut off, then came back; docs/replication.md, "Read
 * leases"), and a READ that finds no row says the key does not exist.
 * Such a lease was vouched for before the next configuration was written,
 * so it ends within the lease after this node adopted that one: the
 * configuration it followed until now (old), or, when it skipped epochs
 * and served in old, this one (now). Wait out what is left of that
 * (at most the lease). Found by the nemesis (a paused node's rejoin; 28
 * keys answered missing to a reader).
 */
static void purge_wait(struct rs_server *s, const struct srv_cfg *g)
{
	const struct srv_repl *rp = &s->repl;
	const struct srv_cfg *old = rp->cur;	/* until adopt() replaces it */
	uint64_t now = rs_mono_ms(), until;

	if (!old || !rp->lease_ms)
		return;
	until = old->adopted_ms + rp->lease_ms;
	if (old->self >= 0 && old->c.epoch + 1 != g->c.epoch)
		until = now + rp->lease_ms;
	if (until <= now)
		return;
	if (until - now > rp->lease_ms)
		until = now + rp->lease_ms;
	srv_log("repl: epoch %" PRIu64 ": rows held earlier go in %" PRIu64
		" ms, once read leases of earlier epochs have run out",
		g->c.epoch, until - now);
	while ((now = rs_mono_ms()) < until)
		usleep((useconds_t)((until - now) * 1000));
}

/* Remove every row of the gained ranges from every table. */
static int purge_gained(struct rs_server *s, const struct srv_cfg *g)
{
	struct purge p = { 0 };
	uint64_t removed = 0;
	bool waited = false;
	int ret = 0;

	p.r.v = rs_malloc((g->ngain + 1) * sizeof(*p.r.v));
	if (!p.r.v)
		return rs_seterr(-ENOMEM, "copy: out of memory");
	memcpy(p.r.v, g->gain, g->ngain * sizeof(*p.r.v));
	p.r.n = g->ngain;
	ranges_norm(&p.r);
	for (unsigned id = 0; !ret && id < SLAB_MAX_TABLES; id++) {
		struct srv_table *t = srv_table_get(&s->tables, id);

		if (!t)
			continue;
		p.n = 0;
		ret = slab_iterate(t->st, purge_collect, &p);
		if (!ret && p.n && !waited) {
			purge_wait(s, g);
			waited = true;
		}
		for (size_t i = 0; !ret && i < p.n; i++)
			removed += slab_delete(t->st, p.keys[i]) == 0;
		srv_table_put(t);
	}
	free(p.keys);
	free(p.r.v);
	if (ret)
		return rs_seterr(ret, "copy: out of memory");
	if (removed)
		srv_log("repl: epoch %" PRIu64 ": %" PRIu64 " rows of ranges "
			"this node held earlier removed before copying them "
			"again", g->c.epoch, removed);
	return 0;
}

int srv_copy_plan(struct rs_server *s, struct srv_cfg *g)
{
	struct srv_repl *rp = &s->repl;
	const struct memb_member *me;
	struct plan pl = { 0 };
	bool fresh;
	int ret;

	atomic_store(&rp->ready, 0);	/* until it holds g's ranges */
	if (g->tself < 0) {
		have_set(rp, g);	/* holds nothing of this epoch */
		return 0;
	}
	me = &g->c.m[g->tself];
	/* active in the epoch that made it so, with nothing before: the
	 * first configuration, or one that activates new nodes at once */
	fresh = !rp->have && me->state == MEMB_ACTIVE &&
		me->since == g->c.epoch;
	if (fresh) {
		have_set(rp, g);
		return 0;
	}
	if (rp->have && rp->have_epoch + 1 == g->c.epoch) {
		pl.have = rp->have;
		if (!(pl.keep = ranges_new()))
			return rs_seterr(-ENOMEM, "copy: out of memory");
	}
	ret = plan_ranges(g, &pl, &g->gain, &g->ngain);
	if (ret) {
		ranges_free(&pl.keep);
		return ret;
	}
	/* what it holds of g's ranges before it copies: kept from the
	 * epoch before, whether or not that epoch's copy finished (after a
	 * skipped epoch, nothing known: have stays behind, and the next
	 * epoch copies all too) */
	if (pl.keep) {
		ranges_free(&rp->have);
		ranges_norm(pl.keep);
		rp->have = pl.keep;
		rp->have_epoch = g->c.epoch;
	}
	if (pl.unheld) {
		atomic_fetch_add(&rp->unheld_ranges, pl.unheld);
		srv_warn("repl: epoch %" PRIu64 ": this node leads %" PRIu64
			 " range%s it does not hold completely: every other "
			 "member that held them failed before its copy of them "
			 "finished, and keys written there before may be "
			 "missing", g->c.epoch, pl.unheld,
			 pl.unheld == 1 ? "" : "s");
	}
	if (g->ngain)
		ret = purge_gained(s, g);
	if (!ret && !g->ngain)
		have_set(rp, g);
	return ret;
}

void srv_copy_fini(struct rs_server *s)
{
	ranges_free(&s->repl.have);
}

/* ---- the primary's side: COPY ---- */

struct scan {
	const struct srv_cfg *g;
	struct srv_ranges r;
	unsigned to;
	uint64_t *keys;
	uint32_t n, max;
};

static bool copies_key(const struct scan *c, uint64_t key);

static int scan_key(void *arg, uint64_t key, uint32_t row)
{
	struct scan *c = arg;
	(void)row;
	if (!copies_key(c, key))
		return 0;
	c->keys[c->n++] = key;
	return c->n == c->max;
}

/* The member asking: id and incarnation of a non-DOWN member with a
 * peer (not this node). */
static int requester(const struct srv_cfg *g, const struct proto_copy_req *m,
		     unsigned *out)
{
	for (size_t i = 0; i < g->c.n; i++)
		if (!strcmp(g->c.m[i].id, m->id) && g->c.m[i].inc == m->inc &&
		    g->peer[i]) {
			*out = (unsigned)i;
			return 0;
		}
	return rs_seterr(RS_E_EPOCH, "COPY: '%s' (incarnation %016" PRIx64
			 ") is not a member in epoch %" PRIu64, m->id, m->inc,
			 g->c.epoch);
}

/* The exactly-once records of the keys copied: each goes with the key's
 * row as it is now (or its deletion), so that a resend of a call the
 * primary applied before the copy is recognised where it lands next. */
struct done_rec {
	struct srv_once_tag tag;
	uint64_t key;
	int32_t st;
};

struct dones {
	const struct scan *c;
	struct done_rec *v;
	size_t n, cap;
};

static bool copies_key(const struct scan *c, uint64_t key)
{
	uint64_t h = memb_key_hash(key);
	unsigned set[MEMB_MAX_R];

	return ranges_has(&c->r, h) && memb_replicas(c->g->pl, h, set) &&
	       (int)set[0] == c->g->self && srv_repl_forwards_to(c->g, h,
								 c->to);
}

static int done_collect(void *arg, const struct srv_once_tag *tag,
			uint64_t key, int32_t st)
{
	struct dones *d = arg;
	void *v;

	if (!copies_key(d->c, key))
		return 0;
	v = room_for_one(d->v, d->n, &d->cap, 256, sizeof(*d->v));
	if (!v)
		return -ENOMEM;
	d->v = v;
	d->v[d->n++] = (struct done_rec){ *tag, key, st };
	return 0;
}

/* Queue the rows of c->keys to c->to (order held). */
/* key's row and state into buf (width floats): 0, or 1 when absent */
static int read_row(struct srv_table *t, uint64_t key, float *buf,
		    uint32_t width)
{
	if (!slab_read_record(t->st, key, buf))
		return 0;
	memset(buf, 0, (size_t)width * sizeof(float));
	return 1;
}

static int queue_rows(struct rs_server *s, struct srv_repl_req *q,
		      struct srv_table *t, const struct scan *c,
		      const struct dones *d, uint64_t *copied)
{
	uint32_t width = t->spec.dim + t->state_floats;
	float *buf = rs_malloc((size_t)width * sizeof(float));
	int ret = 0;

	if (!buf)
		return rs_seterr(-ENOMEM, "COPY: out of memory");
	for (uint32_t i = 0; !ret && i < c->n; i++) {
		if (read_row(t, c->keys[i], buf, width))
			continue;	/* deleted since: that went ahead */
		ret = srv_repl_append(q, c->to, &t->spec, width,
				      c->keys[i], PROTO_REPL_ROW, buf, NULL, 0);
		*copied += !ret;
	}
	for (size_t i = 0; !ret && d && i < d->n; i++) {
		bool gone = read_row(t, d->v[i].key, buf, width);

		ret = srv_repl_append(q, c->to, &t->spec, width,
				      d->v[i].key, gone ? PROTO_REPL_DELETED
							: PROTO_REPL_ROW,
				      buf, &d->v[i].tag, d->v[i].st);
	}
	free(buf);
	(void)s;
	return ret ? rs_seterr(ret, "COPY: out of memory") : 0;
}

int srv_copy_serve(struct rs_server *s, const struct proto_copy_req *m,
		   struct proto_copy_reply *out)
{
	struct srv_repl *rp = &s->repl;
	struct srv_repl_req q;
	struct srv_table *t = NULL;
	struct scan c = { 0 };
	struct dones d = { .c = &c };
	const struct srv_cfg *g;
	uint64_t cursor = m->cursor;
	int ret;

	memset(out, 0, sizeof(*out));
	memset(&q, 0, sizeof(q));
	if (!rp->on)
		return rs_seterr(RS_E_EPOCH, "COPY: this node is not a member "
				 "of a cluster");
	if (pthread_rwlock_tryrdlock(&rp->lock))
		return rs_seterr(RS_E_EPOCH, "COPY: the node is adopting a "
				 "new configuration: retry");
	q.held = true;
	q.cfg = rp->cur;
	g = q.cfg;
	if (!g || g->self < 0 || g->c.epoch != m->epoch) {
		ret = rs_seterr(RS_E_EPOCH, "COPY: epoch %" PRIu64 ": this "
				"node is an active member of epoch %" PRIu64,
				m->epoch, g && g->self >= 0 ? g->c.epoch : 0);
		goto out;
	}
	if ((ret = requester(g, m, &c.to)))
		goto out;
	if (!(t = srv_table_get_name(&s->tables, m->table))) {
		ret = rs_seterr(RS_E_NOTFOUND, "COPY: table '%s': no such "
				"table on this node", m->table);
		goto out;
	}
	c.g = g;
	c.max = m->max;
	c.r.v = rs_malloc(((size_t)m->nranges + 1) * sizeof(*c.r.v));
	c.keys = rs_malloc((size_t)m->max * sizeof(*c.keys));
	if (!c.r.v || !c.keys) {
		ret = rs_seterr(-ENOMEM, "COPY: out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < m->nranges; i++) {
		c.r.v[i].lo = proto_key_at(m->ranges, 2 * i);
		c.r.v[i].hi = proto_key_at(m->ranges, 2 * i + 1);
	}
	c.r.n = m->nranges;
	ranges_norm(&c.r);
	if (!(q.slot = srv_wait_reserve(s))) {
		ret = rs_seterr(RS_E_BUSY, "COPY: %u requests of this node "
				"wait for their backups: retry", SRV_WAITS_MAX);
		goto out;
	}
	out->done = slab_iterate_from(t->st, &cursor, scan_key, &c) == 0;
	out->cursor = cursor;
	pthread_mutex_lock(&rp->order);
	/* with the last rows, the exactly-once records of the ranges (taken
	 * under `order`: none is added meanwhile, a later one is forwarded) */
	if (out->done && srv_once_each(&rp->once, t->id, done_collect, &d))
		ret = rs_seterr(-ENOMEM, "COPY: out of memory");
	else
		ret = queue_rows(s, &q, t, &c, out->done ? &d : NULL,
				 &out->copied);
	pthread_mutex_unlock(&rp->order);
	/* the rows are queued: the table may grow while the requester
	 * takes them (srv_grow.c waits for the references to its table) */
	srv_table_put(t);
	t = NULL;
	if (!ret && srv_repl_pending(&q))
		ret = srv_repl_wait(s, &q);
out:
	free(d.v);
	free(c.keys);
	free(c.r.v);
	if (t)
		srv_table_put(t);
	srv_repl_exit(s, &q);
	return ret;
}

/* ---- the gaining node's side (adopting thread) ---- */

static bool newer_waits(struct srv_repl *rp)
{
	bool w;

	pthread_mutex_lock(&rp->plock);
	w = rp->npending || rp->pstop;
	pthread_mutex_unlock(&rp->plock);
	return w;
}

/*
 * Tables. Clients create and drop tables in one configuration epoch at
 * every ACTIVE and JOINING member of it, a joining node last (the
 * fence: srv_handlers.c, table_fence()). A joining node still has to
 * learn the tables created before it adopted the epoch that added it,
 * and forget those dropped before: the copy runs in rounds, each
 * fetching the sources' directories again, creating here the tables it
 * lacks and copying the tables not copied yet, until a round finds none
 * (a source answered COPY in the new epoch, so every create it took
 * before it adopted that epoch is in its next directory). A table the
 * node creates from a directory has none of its rows here, of any range:
 * it is copied over all the ranges another member leads (`all`), not only
 * the gained ones; so is a table a client created here while the node
 * was joining (`direct`: writes of it at the other members before the
 * create reached this node were not forwarded here). A joining node also
 * drops, after its last round, the tables no source has any more: one a
 * round created from a directory fetched before the sources took a drop
 * that reached this node after them is copied in that round, so another
 * round follows, whose directories no longer have it. A REPL naming a
 * table the node lacks at a joining node sets `tables_missing`, which
 * makes the copy start its next round at once and, once the copy is
 * done, makes the adopting thread run one (srv_copy_tables): the
 * forwarded writes of the table fail (they are resent) until it exists
 * here. An active member creates no table from a directory: every create
 * and drop of the epochs it was a member of reached it (the fence), and
 * one that took a drop before another member would otherwise create the
 * table again from that member's directory; it copies only the tables it
 * has.
 */
#define COPY_MAX_DIR SRV_TNAMES_MAX /* a source's tables, at most */

static bool tn_has(const struct srv_tnames *t, const char *name)
{
	for (unsigned i = 0; i < t->n; i++)
		if (!strcmp(t->v[i], name))
			return true;
	return false;
}

static void tn_add(struct srv_tnames *t, const char *name)
{
	if (!tn_has(t, name) && t->n < COPY_MAX_DIR)
		snprintf(t->v[t->n++], sizeof(t->v[0]), "%s", name);
}

static void tn_del(struct srv_tnames *t, const char *name)
{
	for (unsigned i = 0; i < t->n; i++)
		if (!strcmp(t->v[i], name)) {
			memmove(t->v[i], t->v[t->n - 1], sizeof(t->v[0]));
			t->n--;
			return;
		}
}

/* One run of the copy (the adopting thread's). */
struct crun {
	struct rs_server *s;
	const struct srv_cfg *g;
	const struct srv_gain *gain;	/* the gained ranges */
	size_t ngain;
	struct srv_gain *all;		/* every range another member leads */
	size_t nall;
	struct srv_tnames done;		/* tables copied in this run */
	struct srv_tnames seen;		/* in this round's directories */
	struct cli_node **nodes;	/* [c.n]: the sources called */
	unsigned ndirs;			/* fetched in this round */
	bool hold;			/* the test hook applies */
	uint64_t rows;
};

static bool src_first(const struct srv_gain *v, size_t n, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (v[j].src == v[i].src)
			return false;
	return true;
}

/* Member src as a node to call: one connection per source for the run. */
static struct cli_node *src_node(struct crun *r, unsigned src)
{
	const struct srv_peer *p = r->g->peer[src];
	struct cli_node *n;

	if (!r->nodes &&
	    !(r->nodes = rs_calloc(r->g->c.n, sizeof(*r->nodes)))) {
		rs_seterr(-ENOMEM, "copy: out of memory");
		return NULL;
	}
	if (r->nodes[src])
		return r->nodes[src];
	if (!(n = rs_calloc(1, sizeof(*n)))) {
		rs_seterr(-ENOMEM, "copy: out of memory");
		return NULL;
	}
	n->name = (char *)p->id;
	n->dev = r->s->dev;
	n->timeout_ms = SRV_REPL_TIMEOUT_MS;
	n->key = p->node.key;
	memcpy(n->host, p->node.host, sizeof(n->host));
	n->port = p->node.port;
	if (cli_pool_init(&n->pool, 1)) {
		free(n);
		rs_seterr(-ENOMEM, "copy: out of memory");
		return NULL;
	}
	r->nodes[src] = n;
	return n;
}

/* Member src's directory: its names into r->seen, the tables this node
 * lacks created here (and noted in rp->fresh: their rows are to copy). */
static int dir_from(struct crun *r, unsigned src)
{
	struct rs_server *s = r->s;
	struct srv_repl *rp = &s->repl;
	struct proto_table_info *dir = NULL;
	struct cli_node *n = src_node(r, src);
	uint32_t count = 0;
	uint64_t gen;
	int ret;

	if (!n)
		return -ENOMEM;
	ret = cli_wire_dir(n, &dir, &count, &gen);
	if (!ret && count > COPY_MAX_DIR)
		ret = rs_seterr(RS_E_PROTO, "directory of %u tables", count);
	for (uint32_t i = 0; !ret && i < count; i++) {
		const struct proto_table_spec *sp = &dir[i].spec;
		struct srv_table *t = srv_table_get_name(&s->tables, sp->name);
		struct proto_table_info info;

		if (t) {
			uint64_t here = t->spec.ident;

			tn_add(&r->seen, sp->name);
			srv_table_put(t);
			/* a joiner's table that a client created while the
			 * members had one already: the members' goes on */
			if (r->g->self >= 0 || !here || !sp->ident ||
			    here == sp->ident || srv_table_drop(&s->tables,
								sp->name))
				continue;
			srv_log("repl: table '%s' was another here (identity "
				"%016" PRIx64 ", '%s' has %016" PRIx64 "): "
				"dropped, created as there", sp->name, here,
				n->name, sp->ident);
		}
		/* an active member: a drop or create in progress, which
		 * the client's call completes here (see "Tables") */
		if (r->g->self >= 0)
			continue;
		tn_add(&r->seen, sp->name);
		ret = srv_table_create(&s->tables, sp, &info);
		if (ret == RS_E_EXISTS) {	/* created meanwhile */
			ret = 0;
		} else if (!ret) {
			tn_add(&rp->fresh, sp->name);
			tn_del(&r->done, sp->name); /* dropped, created again */
			atomic_fetch_add(&rp->tables_created, 1);
			srv_log("repl: table '%s' created as on '%s' (copying "
				"its ranges)", sp->name, n->name);
		}
	}
	r->ndirs += !ret;
	free(dir);
	return ret;
}

/* One COPY call: 0 and *rep, or the error. */
static int copy_call(struct cli_node *n, const struct proto_copy_req *m,
		     struct proto_copy_reply *rep)
{
	struct cli_conn *cc;
	struct proto_msg r;
	struct proto_hdr h;
	struct rv_msg raw;
	int len, ret;

	if ((ret = cli_conn_get(n, &cc)))
		return ret;
	cli_hdr_init(&h, 0, false);
	len = proto_enc_copy_req(cc->msg, cc->msg_max, &h, m);
	if (len < 0) {
		cli_conn_put(cc);
		return len;
	}
	cc->recv_timeout_ms = COPY_WAIT_MS;
	ret = cli_wire_call(cc, (size_t)len, &raw, &r);
	cc->recv_timeout_ms = 0;
	if (!ret) {
		*rep = r.u.copy_reply;
		rv_msg_release(&raw);
		if (rep->cursor < m->cursor)
			ret = rs_seterr(RS_E_PROTO, "COPY reply: cursor %"
					PRIu64 " went back from %" PRIu64,
					rep->cursor, m->cursor);
	}
	if (ret && cli_conn_error(ret))
		cli_conn_fail(cc, ret);
	cli_conn_put(cc);
	return ret;
}

/* Copy table `name` over the ranges of v whose source is src: 0, 1
 * when a REPL named a missing table meanwhile (the round ends early), or
 * the error. A table the source no longer has was dropped there: done. */
static int copy_table(struct crun *r, const char *name,
		      const struct srv_gain *v, size_t nv, unsigned src)
{
	struct srv_repl *rp = &r->s->repl;
	struct proto_copy_req m = { .epoch = r->g->c.epoch, .inc = rp->inc,
				    .max = COPY_BATCH };
	struct cli_node *n = src_node(r, src);
	uint64_t *rg;
	size_t gi = 0;
	int ret = 0;

	if (!n)
		return -ENOMEM;
	if (!(rg = rs_malloc(2 * PROTO_COPY_MAX_RANGES * sizeof(*rg))))
		return rs_seterr(-ENOMEM, "copy: out of memory");
	snprintf(m.id, sizeof(m.id), "%s", srv_config_member_id(&r->s->cfg));
	snprintf(m.table, sizeof(m.table), "%s", name);
	while (!ret && gi < nv) {
		struct proto_copy_reply rep = { 0 };

		m.nranges = 0;
		for (; gi < nv && m.nranges < PROTO_COPY_MAX_RANGES; gi++)
			if (v[gi].src == src) {
				rg[2 * m.nranges] = v[gi].lo;
				rg[2 * m.nranges++ + 1] = v[gi].hi;
			}
		if (!m.nranges)
			break;
		m.ranges = rg;
		m.cursor = 0;
		do {
			if (newer_waits(rp))
				ret = RS_E_EPOCH;
			else if (r->g->self < 0 &&
				 atomic_load(&rp->tables_missing))
				ret = 1;
			else
				ret = copy_call(n, &m, &rep);
			m.cursor = rep.cursor;
			r->rows += rep.copied;
		} while (!ret && !rep.done);
	}
	if (ret == RS_E_NOTFOUND)
		ret = 0;	/* dropped there; the next round drops it here */
	free(rg);
	return ret;
}

/* One round: the directories, then every table not copied yet. 0 and
 * *copied (tables copied), 1 (cut short: see copy_table), or the error. */
static int copy_round(struct crun *r, unsigned *copied)
{
	struct srv_repl *rp = &r->s->repl;
	struct srv_tnames *fresh = &rp->fresh;
	bool wide;
	int ret = 0;

	pthread_mutex_lock(&rp->plock);
	for (unsigned i = 0; i < rp->direct.n; i++) {
		tn_add(fresh, rp->direct.v[i]);
		tn_del(&r->done, rp->direct.v[i]);
	}
	rp->direct.n = 0;
	pthread_mutex_unlock(&rp->plock);
	wide = (atomic_exchange(&rp->tables_missing, false) &&
		r->g->self < 0) || fresh->n;

	*copied = 0;
	r->seen.n = 0;
	r->ndirs = 0;
	/* the directories: the sources of the gained ranges, and of all
	 * ranges when a table may be missing here */
	for (size_t i = 0; !ret && i < r->ngain; i++)
		if (src_first(r->gain, r->ngain, i))
			ret = dir_from(r, r->gain[i].src);
	for (size_t i = 0; !ret && wide && i < r->nall; i++)
		if (src_first(r->all, r->nall, i)) {
			bool asked = false;

			for (size_t j = 0; j < r->ngain && !asked; j++)
				asked = r->gain[j].src == r->all[i].src;
			if (!asked)
				ret = dir_from(r, r->all[i].src);
		}
	for (unsigned ti = 0; !ret && ti < r->seen.n; ti++) {
		const char *name = r->seen.v[ti];
		bool isfresh = tn_has(fresh, name);
		const struct srv_gain *v = isfresh ? r->all : r->gain;
		size_t nv = isfresh ? r->nall : r->ngain;

		if (tn_has(&r->done, name))
			continue;
		for (size_t i = 0; !ret && i < nv; i++)
			if (src_first(v, nv, i))
				ret = copy_table(r, name, v, nv, v[i].src);
		if (ret)
			break;
		tn_add(&r->done, name);
		tn_del(fresh, name);
		++*copied;
	}
	return ret;
}

void srv_repl_table_created(struct rs_server *s, const struct srv_repl_req *q,
			    const char *name)
{
	struct srv_repl *rp = &s->repl;

	if (!q->cfg || q->cfg->self >= 0 || q->cfg->tself < 0)
		return;	/* not joining: nothing to copy in */
	pthread_mutex_lock(&rp->plock);
	tn_add(&rp->direct, name);
	pthread_mutex_unlock(&rp->plock);
	srv_repl_table_missing(s);	/* a wide round, now */
}

/* A joining node: drop the tables no source has (dropped while it
 * copied; no client drops them here). */
static void drop_gone(struct crun *r)
{
	struct rs_server *s = r->s;

	if (r->g->self >= 0 || !r->ndirs)
		return;	/* (an active one gets the drops; no directory) */
	for (unsigned id = 0; id < SLAB_MAX_TABLES; id++) {
		struct srv_table *t = srv_table_get(&s->tables, id);
		char name[PROTO_NAME_MAX + 1];

		if (!t)
			continue;
		snprintf(name, sizeof(name), "%s", t->spec.name);
		srv_table_put(t);
		if (tn_has(&r->seen, name) || srv_table_drop(&s->tables, name))
			continue;
		atomic_fetch_add(&s->repl.tables_dropped, 1);
		srv_log("repl: table '%s' dropped: no member it copies from "
			"has it any more", name);
	}
}

/* The test hooks RS_TEST_COPY_HOLD=FILE and RS_TEST_COPY_HOLD_FIRST=FILE:
 * after each round (before the first one) the copy waits while FILE
 * exists: 1 when it stopped waiting for a round (a REPL named a missing
 * table), RS_E_EPOCH when a configuration arrived meanwhile (the copy is
 * cut short, as one that takes longer than its epoch is), else 0. */
static int test_hold(struct crun *r, const char *hook)
{
	struct srv_repl *rp = &r->s->repl;
	const char *f = getenv(hook);
	bool said = false;

	if (!r->hold || !f || !*f)
		return 0;
	while (!access(f, F_OK)) {
		if (newer_waits(rp))
			return RS_E_EPOCH;
		if (atomic_load(&rp->tables_missing))
			return 1;
		if (!said)
			srv_log("repl: copy held while %s exists", f);
		said = true;
		usleep(50000);
	}
	return 0;
}

/* Rounds until one copies no table (0), or the error. */
static int copy_rounds(struct crun *r)
{
	struct plan pl = { 0 };
	unsigned copied;
	bool first = true;
	int ret, held;

	if ((ret = plan_ranges(r->g, &pl, &r->all, &r->nall)))
		return ret;
	if ((held = test_hold(r, "RS_TEST_COPY_HOLD_FIRST")) < 0 || held > 1)
		return held;
	for (;;) {
		ret = copy_round(r, &copied);
		if (ret < 0 || ret > 1)
			return ret;
		if ((held = test_hold(r, "RS_TEST_COPY_HOLD")) == 1)
			continue;
		if (held)
			return held;
		if (!ret && !copied && !first)
			break;
		first = false;
	}
	drop_gone(r);
	return 0;
}

static void crun_fini(struct crun *r)
{
	for (size_t i = 0; r->nodes && i < r->g->c.n; i++)
		if (r->nodes[i]) {
			cli_pool_destroy(&r->nodes[i]->pool);
			free(r->nodes[i]);
		}
	free(r->nodes);
	free(r->all);
}

/* Wait up to COPY_RETRY_MS or until a configuration is handed over. */
static void retry_wait(struct srv_repl *rp)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += COPY_RETRY_MS / 1000u;
	pthread_mutex_lock(&rp->plock);
	if (!rp->npending && !rp->pstop)
		pthread_cond_timedwait(&rp->pcv, &rp->plock, &dl);
	pthread_mutex_unlock(&rp->plock);
}

void srv_copy_run(struct rs_server *s)
{
	struct srv_repl *rp = &s->repl;
	struct srv_cfg *g = rp->cur;	/* only this thread replaces it */
	uint64_t t0 = rs_mono_ms(), rows = 0, logged = 0;
	uint64_t applied0 = atomic_load(&rp->applied), applied;
	unsigned attempt = 0;

	if (!g || !g->ngain)
		return;
	for (;;) {
		struct crun *r = rs_calloc(1, sizeof(*r));
		int ret = -ENOMEM;

		if (r) {
			*r = (struct crun){ .s = s, .g = g, .gain = g->gain,
					    .ngain = g->ngain, .hold = true };
			ret = copy_rounds(r);
			rows = r->rows;
			crun_fini(r);
			free(r);
		}
		if (!ret)
			break;
		if (newer_waits(rp))
			return;	/* the next configuration plans again */
		atomic_fetch_add(&rp->copy_failures, 1);
		if (!attempt++ || rs_mono_ms() - logged >= 60000u) {
			srv_warn("repl: epoch %" PRIu64 ": copying ranges in "
				"failed (%s; %s), retrying every %u ms",
				g->c.epoch, rs_errormsg(), rs_strerror(ret),
				COPY_RETRY_MS);
			logged = rs_mono_ms();
		}
		retry_wait(rp);
		rows = 0;
	}
	atomic_fetch_add(&rp->copied_rows, rows);
	atomic_fetch_add(&rp->copies_done, 1);
	pthread_rwlock_wrlock(&rp->lock);
	have_set(rp, g);
	g->ngain = 0;
	pthread_rwlock_unlock(&rp->lock);
	/* every record applied meanwhile that was not a copied row was a
	 * write forwarded while the copy ran */
	applied = atomic_load(&rp->applied) - applied0;
	srv_log("repl: epoch %" PRIu64 ": ranges copied in: %" PRIu64 " rows "
		"in %.1f s, %" PRIu64 " forwarded writes applied meanwhile",
		g->c.epoch, rows, (double)(rs_mono_ms() - t0) / 1e3,
		applied > rows ? applied - rows : 0);
}

void srv_copy_tables(struct rs_server *s)
{
	struct srv_repl *rp = &s->repl;
	const struct srv_cfg *g = rp->cur;	/* this thread's */
	struct crun *r;
	int ret = -ENOMEM;

	if (!g || g->tself < 0 || g->self >= 0) {
		/* an active member takes creates from the clients; one that
		 * took a drop before another member could otherwise create
		 * the table again from that member's directory */
		atomic_store(&rp->tables_missing, false);
		return;
	}
	if ((r = rs_calloc(1, sizeof(*r)))) {
		*r = (struct crun){ .s = s, .g = g };
		atomic_store(&rp->tables_missing, true); /* a wide round */
		ret = copy_rounds(r);
		atomic_fetch_add(&rp->copied_rows, r->rows);
		crun_fini(r);
		free(r);
	}
	if (ret && !newer_waits(rp)) {
		/* the next REPL of the table asks again; not before a while */
		atomic_fetch_add(&rp->copy_failures, 1);
		srv_warn_peer("repl: epoch %" PRIu64 ": tables missing here: "
			     "copying them failed (%s; %s)", g->c.epoch,
			     rs_errormsg(), rs_strerror(ret));
		retry_wait(rp);
	}
}
