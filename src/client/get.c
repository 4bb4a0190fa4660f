/*
 * get.c - batched GET by one-sided RDMA READ.
 *
 * Every key of a batch runs a small state machine; the batch advances in
 * rounds, and in each round every node with work gets ONE asynchronous
 * READ batch (rv_read_post: chained, selectively signaled, bounded by the
 * QP's outstanding-READ limit, the rest posted as completions come in).
 * All nodes are posted before any is waited for, so nodes work in parallel.
 *
 *   BUCKETS  READ both candidate buckets (two requests, adjacent in one
 *            chain, so one round trip). Each image is validated with
 *            pet_bucket_validate() (version + checksum, the server's own
 *            code): torn -> READ again. Key found -> ROW. Found in neither
 *            -> READ both again and compare versions (pet_confirm_absent:
 *            a cuckoo move may carry a key across the two READs); equal ->
 *            MISSING, else try again.
 *   ROW      READ the row at rows.addr + ref * stride; row_validate()
 *            (version + checksum + key + state + geometry): 0 -> FOUND
 *            (converted to fp32, location cached); torn -> READ again;
 *            stale (tombstone, other key: the slot was reused) -> the
 *            location was wrong: drop it from the cache, back to BUCKETS.
 *   RPC      too many torn/stale retries (cfg torn_retries), a failed
 *            READ, or a table layout this client cannot parse: the key is
 *            served by the GET RPC after the rounds. With RS_F_INIT (a
 *            get-or-init) a key found in neither bucket at its first
 *            READ goes there too, without the second round, and the RPC
 *            is GET_OR_INIT (the primary returns the row or creates it).
 *
 * A location-cache hit starts a key in ROW: a hot key costs one READ; a
 * miss whose bucket image is cached (bcache.h) too. The
 * entry names the node it was READ at and the configuration epoch that
 * placed it there: while that is the call's epoch, the key is not placed
 * on the ring at all (plan()).
 *
 *   PROBE    a key of a table with a row cache (rcache.h) whose entry is
 *            usable here: the cached row is already in the output; READ
 *            the slot's version and checksum words (16 bytes): the
 *            entry's -> FOUND; else -> ROW at that slot (which READs,
 *            validates and re-caches the row, or re-resolves a moved
 *            key). Within a bounded-staleness cache's bound the key is
 *            FOUND at planning, with no READ at all.
 *
 * Buffers: a round places each key's READ destination in the borrowed
 * context's registered buffer; keys that do not fit wait for the next
 * round (so batches of any size work, in buffer-sized waves).
 *
 * Concurrency: everything here is per call (the contexts are borrowed,
 * key state is on the heap of this call); the cache and counters are
 * thread-safe.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "common/le.h"
#include "common/rs_internal.h"
#include "trace/trace.h"

/* (the states that READ come first: state < G_RPC; G_DUP: a later
 * occurrence of a key of the batch, ref its first: fold_dups()) */
enum gstate { G_BUCKETS, G_ROW, G_PROBE, G_RPC, G_DONE, G_DUP };

/* gkey.cached of a row found in a cached bucket image (bcache.h). */
#define KC_IMAGE 3

/* A probe READs the version and checksum words of a cached row. */
#define PROBE_BYTES 16u

/* Bytes of a call's keys, nodes and READ requests kept in the call itself
 * (a one-key get on one node takes about 250). */
#define GCALL_INLINE_BYTES 1024u

/* Multi-node waits poll every node's CQ for this long after the last
 * completion before sleeping on the completion channels. */
#define CLI_SPIN_NS(c) ((uint64_t)(c)->cfg.spin_us * 1000u)

struct gkey {
	uint32_t node;
	uint32_t view;	   /* index into the call's views[] */
	uint8_t state;
	uint8_t cached;	   /* ROW location came from the cache (2: from
			      an entry of another epoch, re-stamped once
			      its row validates; KC_IMAGE: from a cached
			      bucket image) */
	uint8_t have_v1;   /* a first miss round was seen */
	uint8_t inround;
	uint16_t tries;
	uint8_t backup;	   /* READ at a backup: a miss asks the primary */
	uint8_t refail;	   /* its node's READs or connection failed */
	uint32_t ref;
	uint32_t off;	   /* READ destination in the node's buffer */
	struct pet_loc ploc;
	uint64_t v1[2];	   /* BUCKETS: versions of the first miss round;
			      PROBE: the cached row's version, checksum */
};

struct gnode {
	struct cli_conn *cc;
	size_t *keys;	   /* indexes of this node's keys */
	size_t nkeys;
	struct rv_read_req *reqs;
	size_t nreqs;
	struct rv_batch batch;
	bool posted;
};

struct gcall {
	struct rs_client *c;
	const struct cli_key *keys;
	size_t n;
	int *status;
	unsigned flags;
	struct gkey *k;
	struct gnode *nodes;	/* [nn] */
	size_t nn;		/* the client's node count at the start */
	struct rs_table **tabs; /* distinct tables of the batch */
	size_t ntabs, tabs_cap;
	struct cli_tloc *views; /* [ntabs * nn] */
	struct pollfd *pfd;	/* [nn] */
	uint64_t epoch;		/* configuration placed by (0: static) */
	void *block;		/* k, nodes, dup hash, pfd, key lists, reqs:
				 * one malloc, or NULL when block_inline
				 * holds them */
	uint32_t *dslot;	/* [dcap] dup hash: 0 empty, else index + 1 */
	size_t dcap;		/* power of two >= 2n; 0: n < 2 */
	size_t ndup;		/* keys in G_DUP */
	size_t pending;		/* keys in BUCKETS or ROW */
	size_t nrefail;		/* keys with refail set */
	/* cluster mode: nodes to READ elsewhere (avoid[slot] > now), NULL
	 * when none is (client_internal.h) */
	const _Atomic int64_t *avoid;
	int64_t now;
	uint64_t trace_id;
	bool sampled;
	bool spread;		/* keys were placed by replica (r > 1) */
	bool any_rc;		/* a table of the call has a row cache */
	uint32_t rc_looked;	/* keys that consulted a row cache */
	uint32_t rc_served;	/* of those, served by it */
	/* Small calls need no allocation. Last and never cleared as a
	 * whole (gcall_init clears what comes before them; a one-key get
	 * would otherwise zero 1.5 KiB it does not use): each user clears
	 * or fills the part it takes. */
	struct rs_table *tabs_inline[8];
	struct cli_tloc views_inline[4];
	uint64_t block_inline[GCALL_INLINE_BYTES / 8];
};

static void gcall_init(struct gcall *g, struct rs_client *c,
		       const struct cli_key *keys, size_t n, int *status,
		       unsigned flags)
{
	memset(g, 0, offsetof(struct gcall, tabs_inline));
	g->c = c;
	g->keys = keys;
	g->n = n;
	g->status = status;
	g->flags = flags;
	g->nn = cli_nnodes(c);
}

static struct cli_tloc *view_of(struct gcall *g, const struct gkey *k)
{
	return &g->views[k->view];
}

static int collect_tables(struct gcall *g)
{
	size_t nn = g->nn;
	struct rs_table *last = NULL;
	size_t lastidx = 0;

	g->tabs = g->tabs_inline;
	g->tabs_cap = RS_ARRAY_SIZE(g->tabs_inline);
	for (size_t i = 0; i < g->n; i++) {
		struct rs_table *t = g->keys[i].t;
		size_t j;

		if (t == last) {
			g->k[i].view = (uint32_t)(lastidx * nn);
			continue;
		}
		for (j = 0; j < g->ntabs && g->tabs[j] != t; j++)
			;
		if (j == g->ntabs) {
			if (g->ntabs == g->tabs_cap) {
				size_t cap = 2 * g->tabs_cap;
				struct rs_table **grown = malloc(
					cap * sizeof(*grown));

				if (!grown)
					return rs_seterr(-ENOMEM, "get: memory");
				memcpy(grown, g->tabs,
				       g->ntabs * sizeof(*grown));
				if (g->tabs != g->tabs_inline)
					free(g->tabs);
				g->tabs = grown;
				g->tabs_cap = cap;
			}
			g->tabs[g->ntabs++] = t;
			g->any_rc |= t->rc != NULL;
		}
		last = t;
		lastidx = j;
		g->k[i].view = (uint32_t)(j * nn);
	}
	if (g->ntabs * nn <= RS_ARRAY_SIZE(g->views_inline))
		g->views = g->views_inline;
	else
		g->views = calloc(g->ntabs * nn, sizeof(*g->views));
	if (!g->views)
		return rs_seterr(-ENOMEM, "get: out of memory");
	for (size_t j = 0; j < g->ntabs; j++)
		for (size_t nd = 0; nd < nn; nd++)
			cli_table_loc(g->tabs[j], (unsigned)nd,
				      &g->views[j * nn + nd]);
	return 0;
}

/* The node key i is READ at: its primary on the ring, or with replica
 * reads (rt) the replica cli_route_reader_avoid() picks (CLI_ROUTE_NONE:
 * every replica it may READ at failed lately). */
static uint32_t place(struct gcall *g, size_t i, const struct place_ring *ring,
		      const struct cli_route *rt, unsigned *primary_out)
{
	struct rs_client *c = g->c;
	unsigned node, primary;
	bool moved;

	if (!rt)
		return *primary_out = place_ring_node(ring, g->keys[i].key);
	node = cli_route_reader_avoid(rt, g->keys[i].key, c->client_id,
				      c->ready, g->nn, &primary, g->avoid,
				      g->now, &moved);
	*primary_out = primary;
	if (moved)
		CLI_INC(c, diverted_keys, 1);
	if (node != primary && node != CLI_ROUTE_NONE) {
		g->k[i].backup = 1;
		CLI_INC(c, backup_keys, 1);
	}
	return node;
}

/*
 * Key i of a table with a row cache: 0 if its cache has no entry for it
 * here; else its row is in the output already and either it is done (a
 * copy within the staleness bound: 1) or it READs its version and
 * checksum words (PROBE: 2). An entry seen at the key's primary serves a
 * key placed at a backup too (the update replies that refresh entries
 * come from primaries). base: the key's view of node 0.
 */
RS_COLD static int row_cached(struct gcall *g, size_t i,
			      struct cli_rcache *rc, uint32_t base,
			      unsigned primary)
{
	struct gkey *k = &g->k[i];
	struct cli_rentry e;
	const struct cli_tloc *v;
	uint32_t max_stale = cli_rcache_max_stale(rc);

	g->rc_looked++;
	if (cli_rcache_dim(rc) != g->views[base + k->node].rgeom.dim ||
	    !cli_rcache_get(rc, g->keys[i].key, &e, g->keys[i].out))
		return 0;
	if (e.node != k->node && (e.node != primary || e.node >= g->nn))
		return 0;
	v = &g->views[base + e.node];
	if (e.uid != v->uid || !v->onesided || e.slot >= v->rgeom.nrows)
		return 0;
	if (max_stale != CLI_RCACHE_EXACT &&
	    (uint32_t)(atomic_load_explicit(&g->c->step,
					    memory_order_relaxed) -
		       e.stamp) <= max_stale) {
		g->rc_served++;
		CLI_INC(g->c, rc_hits, 1);
		CLI_INC(g->c, rc_stale_hits, 1);
		CLI_INC(g->c, rc_bytes_saved, v->rgeom.stride);
		return 1;
	}
	k->node = e.node;
	k->backup = e.node != primary ? k->backup : 0;
	k->state = G_PROBE;
	k->ref = e.slot;
	k->v1[0] = e.version;
	k->v1[1] = e.csum;
	return 2;
}

/* Key i as a location-cache hit at node `node`: one row READ there. */
static void plan_row(struct gcall *g, size_t i, unsigned node,
		     const struct cli_loc *loc, uint8_t cached)
{
	struct gkey *k = &g->k[i];

	k->node = node;
	k->state = G_ROW;
	k->cached = cached;
	k->ref = (uint32_t)loc->addr;
	g->nodes[node].nkeys++;
	g->pending++;
}

/* Key i missed the location cache: if the cached image of one of its
 * candidate buckets (k->ploc) holds it, READ its row at once, one round
 * trip (on_row() checks the row is the key's). */
static bool image_row(struct gcall *g, size_t i, const struct cli_tloc *v)
{
	struct gkey *k = &g->k[i];
	const uint64_t gen = cli_bcache_gen(&v->geom);
	uint32_t ref;

	for (int b = 0; b < 2; b++)
		if (cli_bcache_find(g->c->bcache, v->uid, gen, k->ploc.b[b],
				    g->keys[i].key, k->ploc.tag, &ref) == 1 &&
		    ref < v->rgeom.nrows) {
			k->ref = ref;
			k->cached = KC_IMAGE;
			k->state = G_ROW;
			return true;
		}
	return false;
}

/*
 * Place keys on nodes (by ring, or rt: see place()), consult the cache,
 * group per node. Keys of use_rpc calls are not placed: the RPC path
 * places them. A location-cache entry placed by this call's
 * configuration (its epoch, not by a replica choice: rt NULL) names the
 * key's node already: the key is not placed on the ring. Any other entry
 * is used only where the key is placed now (as it was before entries
 * knew their node), and one of another epoch is re-stamped by on_row().
 * Keys of tables with a row cache consult that first (row_cached()),
 * then the location cache, after placement. A key the location cache
 * does not place looks in the images of its buckets (image_row()).
 */
static int plan(struct gcall *g, bool use_rpc, const struct place_ring *ring,
		const struct cli_route *rt, size_t *keyidx,
		struct rv_read_req *reqs)
{
	struct rs_client *c = g->c;
	const bool lcache = c->cache && !(g->flags & RS_F_NOCACHE);
	const bool images = c->bcache && !(g->flags & RS_F_NOCACHE);

	for (size_t i = 0; i < g->n; i++) {
		struct gkey *k = &g->k[i];
		struct cli_rcache *rc;
		struct cli_tloc *v;
		struct cli_loc loc;
		unsigned primary;
		bool lc = false;
		int hit;

		g->status[i] = RS_KEY_MISSING;
		if (RS_UNLIKELY(k->state == G_DUP))
			continue;
		if (use_rpc) {
			k->state = G_RPC;
			continue;
		}
		rc = RS_UNLIKELY(g->any_rc) ? g->keys[i].t->rc : NULL;
		if (lcache && !rc) {
			lc = cli_lcache_get(c->cache, g->keys[i].t->luid,
					    g->keys[i].key, &loc);
			v = lc && loc.node < g->nn
				    ? &g->views[k->view + loc.node] : NULL;
			if (v && v->onesided &&
			    cli_loc_here(&loc, g->epoch, !rt, g->nn, v->uid,
					 v->rgeom.nrows)) {
				k->view += loc.node;
				plan_row(g, i, loc.node, &loc, 1);
				continue;
			}
		}
		k->node = place(g, i, ring, rt, &primary);
		if (k->node == CLI_ROUTE_NONE) {
			k->state = G_RPC;
			continue;
		}
		if (rc && !(g->flags & RS_F_NOCACHE) &&
		    (hit = row_cached(g, i, rc, k->view, primary))) {
			k->view += k->node;
			if (hit == 1) {
				k->state = G_DONE;
				g->status[i] = RS_KEY_FOUND;
				continue;
			}
			g->nodes[k->node].nkeys++;
			g->pending++;
			continue;
		}
		k->view += k->node;
		v = view_of(g, k);
		if (!v->onesided) {
			k->state = G_RPC;
			continue;
		}
		if (lcache && rc)
			lc = cli_lcache_get(c->cache, g->keys[i].t->luid,
					    g->keys[i].key, &loc);
		if (lc && (hit = cli_loc_at(&loc, k->node, g->epoch, !rt,
					    v->uid, v->rgeom.nrows))) {
			plan_row(g, i, k->node, &loc, (uint8_t)hit);
		} else {
			g->nodes[k->node].nkeys++;
			g->pending++;
			pet_locate(&v->geom, g->keys[i].key, &k->ploc);
			if (!images || !image_row(g, i, v))
				k->state = G_BUCKETS;
		}
	}
	/* Carve each node's key list and READ requests out of the block. */
	for (size_t nd = 0; nd < g->nn; nd++) {
		struct gnode *gn = &g->nodes[nd];

		gn->keys = keyidx;
		gn->reqs = reqs;
		keyidx += gn->nkeys;
		reqs += 2 * gn->nkeys;
		gn->nkeys = 0;
	}
	for (size_t i = 0; i < g->n; i++) {
		struct gnode *gn;

		if (g->k[i].state >= G_RPC)
			continue;
		gn = &g->nodes[g->k[i].node];
		gn->keys[gn->nkeys++] = i;
	}
	return 0;
}

/*
 * Cluster mode: READ at the primary of the current route (held while keys
 * are placed), or with replica reads (r > 1) at the replica
 * cli_route_reader() picks; a key missing there is confirmed by the
 * primary (GET RPC): a backup that missed its write cannot make a key
 * vanish. When the route has nodes beyond the call's arrays (the
 * client added nodes since the call began), or ACTIVE members without a
 * node slot, the whole call goes to the RPC path, which sizes its arrays
 * by the route (and fails exactly the keys of members without a slot).
 * A node whose READs or connection fail is avoided for CLI_AVOID_MS
 * (cli_node_avoid()): its keys are READ at another replica that may serve
 * them, in this call too (the second pass, cli_get()), and only keys
 * without one go to the GET RPC at the primary, which refreshes the
 * configuration and asks the new primary.
 */
static int plan_cluster(struct gcall *g, bool use_rpc, size_t *keyidx,
			struct rv_read_req *reqs)
{
	struct rs_client *c = g->c;
	int64_t until = atomic_load_explicit(&c->avoid_max,
					     memory_order_relaxed);
	const struct cli_route *rt;
	int ret;

	if (until) {
		g->now = (int64_t)rs_mono_ms();
		if (g->now < until)
			g->avoid = c->avoid;
		else	/* all expired: later gets skip the clock */
			atomic_compare_exchange_strong(&c->avoid_max, &until,
						       0);
	}
	rt = cli_route_hold(g->c);
	g->spread = c->cfg.replica_reads && rt->r > 1;
	g->epoch = rt->epoch;
	ret = plan(g, use_rpc || rt->nunknown || rt->nknown > g->nn,
		       rt->ring, g->spread ? rt : NULL, keyidx, reqs);

	cli_route_drop(g->c);
	return ret;
}

static void add_req(struct gnode *gn, uint8_t *base, uint32_t off,
		    uint32_t len, uint64_t remote, uint32_t rkey)
{
	struct rv_read_req *r = &gn->reqs[gn->nreqs++];

	r->local = base + off;
	r->lkey = gn->cc->buf->lkey;
	r->len = len;
	r->remote = remote;
	r->rkey = rkey;
	r->status = 0;
}

/* Build and post one node's READs for this round. */
static int post_node(struct gcall *g, struct gnode *gn)
{
	uint8_t *base = gn->cc->buf->addr;
	uint32_t off = 0;
	int ret;

	gn->nreqs = 0;
	gn->posted = false;
	for (size_t j = 0; j < gn->nkeys; j++) {
		struct gkey *k = &g->k[gn->keys[j]];
		struct cli_tloc *v = view_of(g, k);
		uint32_t need;

		k->inround = 0;
		if (k->state >= G_RPC)
			continue;
		need = k->state == G_ROW       ? v->rgeom.stride
		       : k->state == G_BUCKETS ? 2 * PET_BUCKET_BYTES
					       : PROBE_BYTES;
		if (off + need > gn->cc->buf->len)
			continue; /* next round */
		k->inround = 1;
		k->off = off;
		if (k->state == G_BUCKETS) {
			for (int b = 0; b < 2; b++)
				add_req(gn, base, off + b * PET_BUCKET_BYTES,
					PET_BUCKET_BYTES,
					v->info.index.addr +
						pet_bucket_off(&v->geom,
							       k->ploc.b[b]),
					v->info.index.rkey);
		} else {
			add_req(gn, base, off, need,
				v->info.rows.addr +
					row_off(&v->rgeom, k->ref),
				v->info.rows.rkey);
		}
		off += need;
	}
	if (!gn->nreqs)
		return 0;
	CLI_INC(g->c, reads_posted, gn->nreqs);
	ret = rv_read_post(gn->cc->rc, &gn->batch, gn->reqs, gn->nreqs);
	gn->posted = ret == 0;
	return ret;
}

static void refail(struct gcall *g, struct gkey *k)
{
	if (!k->refail) {
		k->refail = 1;
		g->nrefail++;
	}
}

/* A key gives up on READs: serve it by RPC. */
static void to_rpc(struct gcall *g, struct gkey *k)
{
	k->state = G_RPC;
	g->pending--;
	CLI_INC(g->c, rpc_fallbacks, 1);
}

static void retry(struct gcall *g, struct gkey *k)
{
	CLI_INC(g->c, torn_retries, 1);
	if (++k->tries > g->c->cfg.torn_retries)
		to_rpc(g, k);
}

static void on_buckets(struct gcall *g, size_t i, const uint8_t *img)
{
	struct gkey *k = &g->k[i];
	uint64_t key = g->keys[i].key, v[2];
	uint32_t ref;

	const uint64_t inc = view_of(g, k)->geom.incarnation;

	if (pet_bucket_validate(img, k->ploc.b[0], inc) ||
	    pet_bucket_validate(img + PET_BUCKET_BYTES, k->ploc.b[1], inc)) {
		retry(g, k);
		return;
	}
	if (g->c->bcache && !(g->flags & RS_F_NOCACHE)) {
		const struct cli_tloc *vw = view_of(g, k);
		const uint64_t gen = cli_bcache_gen(&vw->geom);

		for (int b = 0; b < 2; b++)
			cli_bcache_put(g->c->bcache, vw->uid, gen,
				       k->ploc.b[b],
				       img + b * PET_BUCKET_BYTES);
	}
	if (!pet_bucket_find(img, key, k->ploc.tag, &ref) ||
	    !pet_bucket_find(img + PET_BUCKET_BYTES, key, k->ploc.tag, &ref)) {
		if (ref >= view_of(g, k)->rgeom.nrows) {
			retry(g, k); /* cannot be: treat as torn */
			return;
		}
		k->ref = ref;
		k->cached = 0;
		k->state = G_ROW;
		return;
	}
	if (!k->have_v1 && (g->flags & RS_F_INIT)) {
		/* get-or-init: the primary's GET_OR_INIT answers it (the
		 * row, if a move hid the key from this round; else a new
		 * one), so no second round proves it absent */
		k->state = G_RPC;
		g->pending--;
		return;
	}
	v[0] = pet_bucket_version(img);
	v[1] = pet_bucket_version(img + PET_BUCKET_BYTES);
	if (k->have_v1 && pet_confirm_absent(k->v1, v) && k->backup) {
		CLI_INC(g->c, backup_misses, 1);
		to_rpc(g, k);
		return;
	}
	if (k->have_v1 && pet_confirm_absent(k->v1, v)) {
		k->state = G_DONE;
		g->pending--;
		g->status[i] = RS_KEY_MISSING;
		return;
	}
	if (k->have_v1)
		retry(g, k);
	k->v1[0] = v[0];
	k->v1[1] = v[1];
	k->have_v1 = 1;
}

/* Offer a row READ and accepted to its table's row cache. */
RS_COLD static void row_fill(struct gcall *g, struct cli_rcache *rc,
			     const struct gkey *k, const struct cli_tloc *v,
			     uint64_t key, const uint8_t *img,
			     uint64_t version)
{
	struct cli_rentry e = {
		.version = version,
		.csum = le_ld64(img + 8 * ROW_W_CSUM),
		.slot = k->ref, .node = k->node, .uid = v->uid,
		.stamp = (uint32_t)atomic_load_explicit(&g->c->step,
							memory_order_relaxed)
	};

	cli_rcache_put(rc, key, &e, g->keys[k - g->k].out, false);
	CLI_INC(g->c, rc_fills, 1);
}

/* The version and checksum words of a cached row: the same as the
 * cache's -> the copy (already in the output) is current; else READ the
 * row (same slot: the row handles a moved key). */
RS_COLD static void on_probe(struct gcall *g, size_t i,
			     const uint8_t *img)
{
	struct gkey *k = &g->k[i];

	CLI_INC(g->c, rc_probes, 1);
	if (le_ld64(img) == k->v1[0] && le_ld64(img + 8) == k->v1[1]) {
		g->status[i] = RS_KEY_FOUND;
		k->state = G_DONE;
		g->pending--;
		CLI_INC(g->c, onesided_keys, 1);
		g->rc_served++;
		CLI_INC(g->c, rc_hits, 1);
		CLI_INC(g->c, rc_bytes_saved,
			view_of(g, k)->rgeom.stride - PROBE_BYTES);
		return;
	}
	CLI_INC(g->c, rc_probe_misses, 1);
	k->state = G_ROW;
	k->cached = 1;
}

static void on_row(struct gcall *g, size_t i, const uint8_t *img)
{
	struct gkey *k = &g->k[i];
	struct cli_tloc *v = view_of(g, k);
	uint64_t key = g->keys[i].key, version;
	int ret = row_validate(img, &v->rgeom, k->ref, key, &version);

	if (ret == 0) {
		struct cli_rcache *rc = RS_UNLIKELY(g->any_rc) ? g->keys[i].t->rc
							      : NULL;

		row_payload_to_f32(&v->rgeom, row_payload(img),
				   g->keys[i].out);
		g->status[i] = RS_KEY_FOUND;
		k->state = G_DONE;
		g->pending--;
		CLI_INC(g->c, onesided_keys, 1);
		if (k->cached == KC_IMAGE)
			CLI_INC(g->c, bc_hits, 1);
		if (rc && !(g->flags & RS_F_NOCACHE) &&
		    cli_rcache_dim(rc) == v->rgeom.dim)
			row_fill(g, rc, k, v, key, img, version);
		if (k->cached != 1 && !(g->flags & RS_F_NOCACHE)) {
			struct cli_loc loc = {
				.addr = k->ref, .version = (uint32_t)version,
				.len = v->rgeom.stride, .node = k->node,
				.uid = v->uid,
				.epoch = g->spread ? CLI_LOC_NO_EPOCH : g->epoch
			};

			cli_lcache_put(g->c->cache, g->keys[i].t->luid, key,
				       &loc);
		}
		return;
	}
	if (ret == RS_E_STALE && RS_UNLIKELY(g->any_rc) && g->keys[i].t->rc)
		cli_rcache_drop(g->keys[i].t->rc, key, 0);
	if (ret == RS_E_STALE && k->cached == KC_IMAGE) {
		/* An image named a row that is no longer this key's: drop
		 * both images, READ the buckets. */
		const uint64_t gen = cli_bcache_gen(&v->geom);

		CLI_INC(g->c, bc_stale, 1);
		for (int b = 0; b < 2; b++)
			cli_bcache_drop(g->c->bcache, v->uid, gen,
					k->ploc.b[b]);
		k->cached = 0;
		k->have_v1 = 0;
		k->state = G_BUCKETS;
		return;
	}
	if (ret == RS_E_STALE && k->cached) {
		/* The cached location is no longer this key's row. */
		CLI_INC(g->c, stale_locations, 1);
		cli_lcache_invalidate(g->c->cache, g->keys[i].t->luid, key,
				      k->ref);
		k->cached = 0;
		k->have_v1 = 0;
		k->state = G_BUCKETS;
		pet_locate(&v->geom, key, &k->ploc);
		return;
	}
	if (ret == RS_E_STALE) {
		/* Moved between our bucket and row READs: resolve again. */
		k->have_v1 = 0;
		k->state = G_BUCKETS;
		pet_locate(&v->geom, key, &k->ploc);
	}
	retry(g, k);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Wait for the rounds of several nodes at once. Waiting on one node's
 * batch would leave the others' queued READs unposted (rv posts the rest
 * of a batch as completions are polled), so every node's CQ is driven
 * here: poll all for cfg spin_us after the last completion, then arm all
 * completion channels (poll, re-arm, poll) and sleep in poll(2) on their
 * fds. Returns 0 when every batch is done, RS_E_TIMEOUT otherwise.
 */
static int wait_nodes(struct gcall *g)
{
	size_t nn = g->nn;
	uint64_t last = now_ns();

	for (;;) {
		size_t busy = 0, np = 0;
		bool progressed = false, work = false;
		int r;

		for (size_t nd = 0; nd < nn; nd++) {
			struct gnode *gn = &g->nodes[nd];

			if (!gn->posted || rv_batch_done(&gn->batch))
				continue;
			if (rv_conn_progress(gn->cc->rc) > 0)
				progressed = true;
			busy += !rv_batch_done(&gn->batch);
		}
		if (!busy)
			return 0;
		if (progressed || now_ns() - last < CLI_SPIN_NS(g->c)) {
			if (progressed)
				last = now_ns();
			continue;
		}
		for (size_t nd = 0; nd < nn; nd++) {
			struct gnode *gn = &g->nodes[nd];

			if (!gn->posted || rv_batch_done(&gn->batch))
				continue;
			if (rv_conn_arm(gn->cc->rc) != 0)
				work = true;
			g->pfd[np].fd = rv_conn_fd(gn->cc->rc);
			g->pfd[np].events = POLLIN;
			np++;
		}
		if (!work) {
			r = poll(g->pfd, np, (int)g->c->cfg.timeout_ms);
			if (r == 0)
				return RS_E_TIMEOUT;
		}
		last = now_ns();
	}
}

/* Collect one node's round (waited for already, or wait for it here if
 * it is the only node) and advance its keys. */
static int finish_node(struct gcall *g, struct gnode *gn, bool waited)
{
	uint8_t *base;
	int ret;

	if (!gn->nkeys || !gn->posted)
		return 0;
	base = gn->cc->buf->addr;
	if (!waited || rv_batch_done(&gn->batch))
		ret = rv_batch_wait(gn->cc->rc, &gn->batch,
				    waited ? 0 : (int)g->c->cfg.timeout_ms);
	else
		ret = rs_seterr(RS_E_TIMEOUT, "node %s: READs timed out",
				gn->cc->node->name);
	/* A batch still pending here belongs to a context failed below:
	 * closing it (cli_conn_put) completes the batch while reqs live. */
	gn->posted = false;
	if (ret) {
		/* The QP is unusable (e.g. a region went away with its
		 * table): these keys go to the RPC, which reconnects. */
		cli_conn_fail(gn->cc, ret);
		cli_node_avoid(g->c, (size_t)(gn - g->nodes));
		for (size_t j = 0; j < gn->nkeys; j++) {
			struct gkey *k = &g->k[gn->keys[j]];

			if (k->state == G_BUCKETS || k->state == G_ROW ||
			    k->state == G_PROBE) {
				to_rpc(g, k);
				refail(g, k);
			}
		}
		return 0;
	}
	for (size_t j = 0; j < gn->nkeys; j++) {
		size_t i = gn->keys[j];
		struct gkey *k = &g->k[i];

		if (!k->inround)
			continue;
		if (k->state == G_ROW)
			on_row(g, i, base + k->off);
		else if (k->state == G_BUCKETS)
			on_buckets(g, i, base + k->off);
		else if (k->state == G_PROBE)
			on_probe(g, i, base + k->off);
	}
	return 0;
}

static int rounds(struct gcall *g)
{
	struct rs_client *c = g->c;
	int ret = 0;

	/* Borrow in node order (see conn.h: no waiting cycles). A node we
	 * cannot reach sends its keys to the RPC path, which reports them. */
	for (size_t nd = 0; nd < g->nn; nd++) {
		struct gnode *gn = &g->nodes[nd];

		if (!gn->nkeys || !cli_conn_get(&c->nodes[nd], &gn->cc))
			continue;
		cli_node_avoid(c, nd);
		for (size_t j = 0; j < gn->nkeys; j++) {
			g->k[gn->keys[j]].state = G_RPC;
			refail(g, &g->k[gn->keys[j]]);
			g->pending--;
		}
		gn->nkeys = 0;
	}
	while (!ret && g->pending) {
		size_t nposted;
		struct trace_event ev = { .trace_id = g->trace_id,
					  .stage = "client.build",
					  .batch = (uint32_t)g->pending,
					  .start_us = trace_start_us(g->sampled) };

		for (size_t nd = 0; nd < g->nn && !ret; nd++)
			if (g->nodes[nd].nkeys && !g->nodes[nd].cc->failed)
				ret = post_node(g, &g->nodes[nd]);
		if (g->sampled) {
			trace_end(&ev);
			ev.stage = "client.wait";
			ev.start_us = trace_now_us();
		}
		nposted = 0;
		for (size_t nd = 0; nd < g->nn; nd++)
			nposted += g->nodes[nd].posted;
		if (!ret && nposted > 1)
			(void)wait_nodes(g); /* a timeout shows per node */
		for (size_t nd = 0; nd < g->nn && !ret; nd++)
			ret = finish_node(g, &g->nodes[nd], nposted > 1);
		if (g->sampled)
			trace_end(&ev);
	}
	if (ret) {
		/* Posting failed: the contexts are closed on return, which
		 * completes whatever they still had in flight. */
		for (size_t nd = 0; nd < g->nn; nd++)
			if (g->nodes[nd].posted) {
				cli_conn_fail(g->nodes[nd].cc, ret);
				g->nodes[nd].posted = false;
			}
	}
	for (size_t nd = 0; nd < g->nn; nd++) {
		cli_conn_put(g->nodes[nd].cc);
		g->nodes[nd].cc = NULL;
	}
	return ret;
}

static void gcall_free(struct gcall *g)
{
	if (g->tabs != g->tabs_inline)
		free(g->tabs);
	if (g->views != g->views_inline)
		free(g->views);
	free(g->block);
}

/*
 * One allocation for everything sized by n and the node count. Only the
 * key states, the nodes and the dup hash start zeroed: the pollfds, key
 * lists and READ requests after them are written before they are read
 * (add_req() fills every field of a request).
 */
static int gcall_alloc(struct gcall *g, size_t **keyidx,
		       struct rv_read_req **reqs)
{
	size_t nn = g->nn, n = g->n;
	size_t dcap = 0;
	size_t off_nodes = n * sizeof(struct gkey);
	size_t off_dup = off_nodes + nn * sizeof(struct gnode);
	size_t off_pfd, off_idx, off_reqs, total;
	uint8_t *b;

	if (n > 1)
		for (dcap = 4; dcap < 2 * n; dcap <<= 1)
			;
	off_pfd = (off_dup + dcap * sizeof(uint32_t) + 7) & ~(size_t)7;
	off_idx = off_pfd + nn * sizeof(struct pollfd);
	off_reqs = (off_idx + n * sizeof(size_t) + 7) & ~(size_t)7;
	total = off_reqs + 2 * n * sizeof(struct rv_read_req);
	if (total <= sizeof(g->block_inline)) {
		b = (uint8_t *)g->block_inline;
	} else {
		b = malloc(total);
		if (!b)
			return rs_seterr(-ENOMEM, "get: out of memory");
		g->block = b;
	}
	memset(b, 0, off_pfd);
	g->k = (struct gkey *)b;
	g->nodes = (struct gnode *)(b + off_nodes);
	g->dslot = (uint32_t *)(b + off_dup);
	g->dcap = dcap;
	g->pfd = (struct pollfd *)(b + off_pfd);
	*keyidx = (size_t *)(b + off_idx);
	*reqs = (struct rv_read_req *)(b + off_reqs);
	return 0;
}

/* A (table, key) pair's home in the dup hash (Fibonacci hashing of the
 * key with its high half folded in, and the handle). */
static size_t dup_hash(const struct cli_key *k, size_t mask)
{
	uint64_t x = k->key ^ (k->key >> 32) ^ ((uint64_t)k->t->luid << 40);

	return (size_t)((x * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

/*
 * Fold the batch's duplicate keys: every later occurrence of a (table,
 * key) is G_DUP with ref its first occurrence, which alone is READ (or
 * sent by RPC); dups_out() gives each occurrence the first's status and
 * row. One linear-probing insert per key into a table of at least 2n
 * slots (half full at most), so a batch without duplicates pays a hash
 * and about one probe per key.
 */
static void fold_dups(struct gcall *g)
{
	size_t mask = g->dcap - 1;

	for (size_t i = 0; i < g->n; i++) {
		const struct cli_key *k = &g->keys[i];
		size_t h = dup_hash(k, mask);
		uint32_t s;

		while ((s = g->dslot[h])) {
			const struct cli_key *o = &g->keys[s - 1];

			if (o->key == k->key && o->t == k->t)
				break;
			h = (h + 1) & mask;
		}
		if (!s) {
			g->dslot[h] = (uint32_t)i + 1;
			continue;
		}
		g->k[i].state = G_DUP;
		g->k[i].ref = s - 1;
		g->ndup++;
	}
}

/* Each later occurrence of a key: its first's status, and its row when
 * found (as the RPC path does for the keys it folds). */
static void dups_out(struct gcall *g)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct gkey *k = &g->k[i];

		if (k->state != G_DUP)
			continue;
		g->status[i] = g->status[k->ref];
		if (g->status[i] > 0)
			memcpy(g->keys[i].out, g->keys[k->ref].out,
			       g->keys[i].t->dim * sizeof(float));
	}
}

static int get_pass(struct rs_client *c, const struct cli_key *keys,
		    size_t n, int *status, unsigned flags, bool second);

/* A sampled call that consulted row caches: stage client.rowcache, its
 * batch the keys they served (stale copies and probes that matched). */
RS_COLD static void trace_rowcache(const struct gcall *g,
				   uint64_t start_us)
{
	struct trace_event ev = { .trace_id = g->trace_id,
				  .stage = "client.rowcache",
				  .table = g->keys[0].t->name,
				  .batch = g->rc_served,
				  .start_us = start_us };

	trace_end(&ev);
}

/* The keys whose node failed in this pass (cluster mode, replica reads,
 * r > 1):
 * one more pass READs them where cli_route_reader_avoid() now places them
 * (another replica; the rest go to the RPC there). Done keys leave the
 * RPC selection; their status is the second pass's. */
static int reread(struct gcall *g)
{
	struct cli_key *sub;
	size_t m = 0, j = 0;
	int *st, ret;

	if (!(sub = malloc(g->nrefail * (sizeof(*sub) + sizeof(*st)))))
		return rs_seterr(-ENOMEM, "get: out of memory");
	st = (int *)(sub + g->nrefail);
	for (size_t i = 0; i < g->n; i++)
		if (g->k[i].refail && g->k[i].state == G_RPC)
			sub[m++] = g->keys[i];
	ret = m ? get_pass(g->c, sub, m, st, g->flags, true) : 0;
	for (size_t i = 0; ret >= 0 && i < g->n; i++)
		if (g->k[i].refail && g->k[i].state == G_RPC) {
			g->status[i] = st[j++];
			g->k[i].state = G_DONE;
		}
	free(sub);
	return ret < 0 ? ret : 0;
}

void (*cli_test_reads_done)(struct rs_client *c);

/* The lease ran out while the call's READs were in flight (a READ at a
 * killed node fails only after the transport's retries, which may take
 * longer than the lease has left). One CONFIG round (cli_cluster_can_read):
 * true if a node vouches anew for the epoch the keys were placed by. Then
 * every READ of the call is good: it completed before now, and now is
 * before the renewed lease's end, which is all a READ needs (the lease's
 * argument in docs/replication.md bounds the READ's time, not the time
 * the vouch was asked). A new epoch adopted by the round: false. */
RS_COLD static bool lease_renewed(struct gcall *g)
{
	return cli_cluster_can_read(g->c) &&
	       atomic_load(&g->c->epoch) == g->epoch;
}

int cli_get(struct rs_client *c, const struct cli_key *keys, size_t n,
	    int *status, unsigned flags)
{
	return get_pass(c, keys, n, status, flags, false);
}

static int get_pass(struct rs_client *c, const struct cli_key *keys,
		    size_t n, int *status, unsigned flags, bool second)
{
	struct gcall g;
	bool use_rpc = (flags & RS_F_RPC) || c->cfg.rpc_reads;

	gcall_init(&g, c, keys, n, status, flags);

	/* cluster mode: READ only under the read lease */
	if (c->cluster && !use_rpc && !cli_cluster_can_read(c)) {
		use_rpc = true;
		if (!second)
			CLI_INC(c, lease_rpc_reads, 1);
	}
	struct trace_event ev = { .stage = "client.op", .batch = (uint32_t)n };
	size_t *sel = NULL, m = 0, *keyidx = NULL;
	struct rv_read_req *reqs = NULL;
	int ret, found = 0;

	g.trace_id = trace_new_id();
	g.sampled = trace_sampled(g.trace_id);
	ev.trace_id = g.trace_id;
	ev.start_us = trace_start_us(g.sampled);
	if (!second)
		CLI_INC(c, get_keys, n);
	ret = gcall_alloc(&g, &keyidx, &reqs);
	if (!ret && g.dcap)
		fold_dups(&g);
	if (!ret)
		ret = collect_tables(&g);
	if (!ret)
		ret = c->cluster ? plan_cluster(&g, use_rpc, keyidx, reqs)
				 : plan(&g, use_rpc, c->ring, NULL, keyidx,
					reqs);
	if (!ret)
		ret = rounds(&g);
	if (g.sampled && g.rc_looked)
		trace_rowcache(&g, ev.start_us);
	/* The lease must still hold once the READs completed, not only when
	 * the call began: a call that waited past it (for a connection to a
	 * stopped node) may have READ a node that left the key's replica set
	 * meanwhile and removed its rows or stopped moving them. Such a
	 * node removes nothing before the lease's end (docs/replication.md,
	 * "Read leases"), so a READ completed before it is good. So is one
	 * completed before a CONFIG sent afterwards was vouched for in the
	 * call's epoch (lease_renewed()). Otherwise every key goes to the
	 * GET RPC, fenced by epoch. */
	if (!ret && c->cluster && !use_rpc) {
		if (RS_UNLIKELY(cli_test_reads_done != NULL))
			cli_test_reads_done(c);
		if (RS_UNLIKELY((int64_t)rs_mono_ms() >=
				atomic_load(&c->read_until)) &&
		    !lease_renewed(&g)) {
			for (size_t i = 0; i < n; i++)
				if (g.k[i].state != G_DUP) /* dups_out() */
					g.k[i].state = G_RPC;
			g.nrefail = 0;
			CLI_INC(c, lease_rpc_reads, 1);
		}
	}
	/* with other replicas to READ at (r > 1: without, the second pass
	 * would only wait for the failed node again) */
	if (!ret && RS_UNLIKELY(g.nrefail) && !second && g.spread)
		ret = reread(&g);
	if (ret)
		goto out;
	for (size_t i = 0; i < n; i++)
		m += g.k[i].state == G_RPC;
	if (m) {
		sel = malloc(m * sizeof(*sel));
		if (!sel) {
			ret = rs_seterr(-ENOMEM, "get: out of memory");
			goto out;
		}
		m = 0;
		for (size_t i = 0; i < n; i++)
			if (g.k[i].state == G_RPC)
				sel[m++] = i;
		ret = cli_rpc(c, (flags & RS_F_INIT) ? PROTO_OP_GET_OR_INIT
						     : PROTO_OP_GET,
			      keys, NULL, sel, m, status, g.trace_id,
			      g.sampled, NULL);
		if (ret < 0)
			goto out;
	}
	if (g.ndup)
		dups_out(&g);
	for (size_t i = 0; i < n; i++)
		found += status[i] == RS_KEY_FOUND ||
			 status[i] == RS_KEY_CREATED;
	ret = found;
out:
	if (g.sampled) {
		if (n)
			ev.table = keys[0].t->name;
		trace_end(&ev);
	}
	free(sel);
	gcall_free(&g);
	return ret;
}
