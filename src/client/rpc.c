/*
 * rpc.c - keyed RPCs (GET, GET_OR_INIT, PUT, UPDATE, DELETE) for batches
 * whose keys may span tables and nodes.
 *
 * 1. Fold duplicates: every distinct (table, key) is sent once. UPDATE sums
 *    the gradients of a key's occurrences in batch order (the node applies
 *    ONE optimizer step per key and batch, ARCHITECTURE.md), PUT keeps the
 *    last row, gets copy the one answer to every occurrence. Folding on the
 *    client also keeps a key's occurrences out of different messages, which
 *    different server workers might apply in either order.
 * 2. Group the distinct keys by node, and by table within a node.
 * 3. Per node: cut the keys into messages no larger than the node accepts
 *    and whose replies fit our receive buffers (proto_keys_per_msg), keep
 *    up to CLI_RPC_WINDOW requests in flight, and read replies in order
 *    (one context per node, borrowed in node order). Every node gets its
 *    first window before any reply is awaited, so nodes work in parallel.
 * 4. A whole-request error that says the table changed (RS_E_STALE,
 *    RS_E_NOTFOUND) refreshes that table's directory and resends the
 *    affected keys once. One that says the node pauses writes for a
 *    checkpoint (RS_E_BUSY) resends them after a backoff (1 ms, doubling
 *    to 64 ms) until they are taken or the client's timeout passes; so
 *    does a per-key RS_E_BUSY (in a cluster: a backup of the key grows
 *    a table).
 * 5. Cluster mode (cluster.c): every request goes to the keys' primary
 *    with PROTO_KF_EPOCH and the epoch the keys were mapped by. A
 *    refusal of the epoch (RS_E_EPOCH, whole-request or per key) or a
 *    node's connection failing refreshes the configuration (one CONFIG
 *    round for all threads) and resends the affected keys to their
 *    primaries in the newest route, with the RS_E_BUSY backoff, until
 *    they are taken or the client's timeout passes; then they keep the
 *    last error. A primary that joined (or moved) after the client
 *    opened is a node slot like the others (cluster.c): the call's
 *    per-node arrays grow when a newer route has more nodes (remap), and
 *    a node whose view of a table the handle lacks is treated like a
 *    stale table (skip_invalid: refresh, resend). Only a member left
 *    without a slot (all CLI_MAX_NODES taken) fails its keys, with
 *    RS_E_UNSUPPORTED.
 * 6. Exactly once (cluster mode; GET_OR_INIT, PUT, UPDATE, DELETE): the
 *    call takes the client's next sequence when it starts (once.h) and
 *    keeps it until it returns. Every message of the call, and every
 *    resend of its keys (stale tables, RS_E_BUSY, the epoch, a failed
 *    node: whatever the node and the message), carries PROTO_KF_ONCE
 *    with the client's id, that sequence and done_below, refreshed each
 *    resend round. The node keeps per (client, sequence, table, key) the
 *    status it returned and answers a resent key with it instead of
 *    applying it again, so regrouping keys into other messages or sending
 *    them to another node is harmless.
 *
 * Gradients and PUT rows travel as fp32 whatever the table stores (the
 * node converts); GET replies come in the table's dtype and are converted
 * here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "common/rs_internal.h"
#include "trace/trace.h"
#include "value/optimizer.h"

struct ukey {
	size_t first;	     /* representative index into keys[] */
	uint32_t node;
	uint32_t tab;	     /* index into call's tabs[] */
	const float *row;    /* PUT/UPDATE payload */
	int status;
	bool sent_stale;     /* stale, busy, epoch or a failed node: resend */
};

struct rmsg {
	size_t start, count; /* range of the node's order[] */
	uint64_t req_id;     /* 0: slot free */
};

struct rnode {
	struct cli_conn *cc;
	size_t *order;	     /* ukey indexes, grouped by table */
	size_t n, next;
	struct rmsg win[CLI_RPC_WINDOW]; /* requests awaiting replies */
	unsigned inflight;
	uint64_t *kbuf;
	float *rbuf;
	size_t kpm_cap;	     /* keys kbuf holds */
	size_t rcap;	     /* floats rbuf holds */
	int err;
};

struct rcall {
	struct rs_client *c;
	uint32_t op;
	const struct cli_key *keys;
	const float *const *in;
	int *status;
	struct ukey *u;
	size_t nu;
	size_t *urep;	     /* listed index -> ukey */
	float *sums;	     /* UPDATE: summed gradients of duplicates */
	struct rs_table **tabs;
	size_t ntabs;
	struct cli_tloc *views; /* [ntabs * nn] */
	struct rnode *nodes;	/* [nn] */
	size_t nn;	     /* nodes the call maps to: the client's count
			      * (static) or its route's nknown (cluster) */
	uint64_t trace_id;
	struct cli_keyed_opts ko;
	const struct place_ring *ring; /* keys -> nodes (fold) */
	uint64_t epoch;	     /* cluster mode: the route's; 0: static */
	struct cli_once_slot once; /* seq != 0: an exactly-once write */
	uint64_t done_below; /* with once.seq: as last read */
	size_t avoid;	     /* cluster mode: a node that failed (ask last) */
	bool sampled;
	bool stale;
	bool busy;	     /* a node paused writes: resend after a wait */
	bool reroute;	     /* cluster mode: refresh the route, resend */
	float *crow;	     /* a row for a row cache (dim floats) */
	size_t crow_cap;
};

static bool has_rows_in(uint32_t op)
{
	return op == PROTO_OP_PUT || op == PROTO_OP_UPDATE ||
	       op == PROTO_OP_LOAD;
}

/* Floats per request row: the table's dim; LOAD adds the optimizer
 * state. */
static uint32_t in_width(const struct rcall *r, const struct cli_tloc *v)
{
	uint32_t dim = v->info.spec.dim;

	return r->op == PROTO_OP_LOAD
		       ? dim + (uint32_t)optim_state_floats(
				       v->info.spec.optim.kind, dim)
		       : dim;
}

/* Cluster mode: the request carries the epoch (PROTO_KF_EPOCH), every
 * keyed request: a restore's LOAD goes to the keys' primaries, which
 * replicate it like any write. */
static bool tags_epoch(const struct rcall *r)
{
	return r->epoch != 0;
}

/* Cluster mode: the writes that are applied exactly once (PROTO_KF_ONCE;
 * never without the epoch). */
static bool once_op(uint32_t op)
{
	return op == PROTO_OP_GET_OR_INIT || op == PROTO_OP_PUT ||
	       op == PROTO_OP_UPDATE || op == PROTO_OP_DELETE;
}

/* Bytes a request carries after its fixed part: the epoch, then the
 * call's identity (exactly once). */
static size_t req_extra(const struct rcall *r)
{
	if (!tags_epoch(r))
		return 0;
	return PROTO_EPOCH_BYTES + (r->once.seq ? PROTO_ONCE_BYTES : 0);
}

/* Before a resend round: the lowest call in flight may have moved up
 * (the node forgets records below it sooner). */
static void once_refresh(struct rcall *r)
{
	if (r->once.seq)
		r->done_below = cli_once_done_below(&r->c->once);
}

static bool has_rows_out(uint32_t op)
{
	return op == PROTO_OP_GET || op == PROTO_OP_GET_OR_INIT;
}

/* An UPDATE of a table with a row cache asks for the new rows
 * (PROTO_KF_ROWS): they refresh the cache without a READ. */
static bool wants_images(const struct rcall *r, uint32_t tab)
{
	return r->op == PROTO_OP_UPDATE && r->tabs[tab]->rc;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static size_t tab_index(struct rcall *r, struct rs_table *t)
{
	size_t j;

	for (j = 0; j < r->ntabs; j++)
		if (r->tabs[j] == t)
			return j;
	r->tabs[r->ntabs] = t;
	return r->ntabs++;
}

/* Step 1: distinct keys (open addressing over listed indexes). */
static int fold(struct rcall *r, const size_t *sel, size_t m)
{
	size_t cap = 16, *slot;
	uint32_t dim = 0;

	while (cap < 2 * m)
		cap <<= 1;
	slot = malloc(cap * sizeof(*slot));
	r->u = calloc(m ? m : 1, sizeof(*r->u));
	r->urep = malloc((m ? m : 1) * sizeof(*r->urep));
	r->tabs = malloc((m ? m : 1) * sizeof(*r->tabs));
	if (!slot || !r->u || !r->urep || !r->tabs) {
		free(slot);
		return rs_seterr(-ENOMEM, "rpc: out of memory");
	}
	memset(slot, 0xff, cap * sizeof(*slot));
	for (size_t j = 0; j < m; j++) {
		size_t i = sel ? sel[j] : j;
		const struct cli_key *k = &r->keys[i];
		size_t h = mix(k->key ^ (uintptr_t)k->t) & (cap - 1);

		while (slot[h] != SIZE_MAX) {
			const struct cli_key *o = &r->keys[r->u[slot[h]].first];

			if (o->key == k->key && o->t == k->t)
				break;
			h = (h + 1) & (cap - 1);
		}
		if (slot[h] == SIZE_MAX) {
			struct ukey *u = &r->u[r->nu];

			slot[h] = r->nu++;
			u->first = i;
			u->node = place_ring_node(r->ring, k->key);
			u->tab = (uint32_t)tab_index(r, k->t);
			u->row = r->in ? r->in[i] : NULL;
		} else if (r->op == PROTO_OP_PUT) {
			r->u[slot[h]].row = r->in[i]; /* last row wins */
		} else if (r->op == PROTO_OP_UPDATE) {
			r->u[slot[h]].row = NULL; /* summed below */
		}
		r->urep[j] = slot[h];
	}
	free(slot);
	if (r->op != PROTO_OP_UPDATE)
		return 0;
	/* Sum the gradients of duplicated keys in batch order. */
	for (size_t j = 0; j < r->nu; j++)
		if (!r->u[j].row && r->tabs[r->u[j].tab]->dim > dim)
			dim = r->tabs[r->u[j].tab]->dim;
	if (!dim)
		return 0;
	r->sums = calloc(r->nu, (size_t)dim * sizeof(float));
	if (!r->sums)
		return rs_seterr(-ENOMEM, "rpc: out of memory");
	for (size_t j = 0; j < m; j++) {
		struct ukey *u = &r->u[r->urep[j]];
		size_t i = sel ? sel[j] : j;
		uint32_t d = r->tabs[u->tab]->dim;
		float *s = r->sums + r->urep[j] * dim;

		if (u->row && u->row != s)
			continue; /* not duplicated */
		for (uint32_t e = 0; e < d; e++)
			s[e] += r->in[i][e];
		u->row = s;
	}
	return 0;
}

/* Cluster mode: fold under the route (held only while keys are mapped;
 * its node count is the call's); keys whose primary has no node slot
 * fail here, the others are marked to be grouped (group(r, true)). */
static int fold_cluster(struct rcall *r, const size_t *sel, size_t m)
{
	const struct cli_route *rt = cli_route_hold(r->c);
	int ret;

	r->ring = rt->ring;
	r->epoch = rt->epoch;
	r->nn = rt->nknown;
	ret = fold(r, sel, m);
	for (size_t j = 0; !ret && j < r->nu; j++) {
		struct ukey *u = &r->u[j];

		u->sent_stale = u->node < rt->nknown;
		if (!u->sent_stale) {
			u->status = cli_route_unknown(rt, u->node);
			u->node = 0; /* never grouped */
		}
	}
	r->ring = NULL;
	cli_route_drop(r->c);
	return ret;
}

/* The per-node state for nn nodes (more than before: a newer route has
 * nodes the call did not know; the new ones start empty). */
static int rnodes_size(struct rcall *r, size_t nn)
{
	struct rnode *grown;

	if (r->nodes && nn <= r->nn)
		return 0;
	grown = realloc(r->nodes, (nn ? nn : 1) * sizeof(*grown));
	if (!grown)
		return rs_seterr(-ENOMEM, "rpc: out of memory");
	if (r->nodes)
		memset(grown + r->nn, 0, (nn - r->nn) * sizeof(*grown));
	else
		memset(grown, 0, (nn ? nn : 1) * sizeof(*grown));
	r->nodes = grown;
	r->nn = nn;
	return 0;
}

static int snapshot_views(struct rcall *r)
{
	size_t nn = r->nn;

	free(r->views);
	r->views = calloc(r->ntabs * nn, sizeof(*r->views));
	if (!r->views)
		return rs_seterr(-ENOMEM, "rpc: out of memory");
	for (size_t j = 0; j < r->ntabs; j++)
		for (size_t nd = 0; nd < nn; nd++)
			cli_table_loc(r->tabs[j], (unsigned)nd,
				      &r->views[j * nn + nd]);
	return 0;
}

static const struct cli_tloc *uview(const struct rcall *r,
				    const struct ukey *u)
{
	return &r->views[u->tab * r->nn + u->node];
}

/* Step 2: per node, the keys to send, grouped by table. */
static int group(struct rcall *r, bool only_stale)
{
	size_t nn = r->nn;

	for (size_t nd = 0; nd < nn; nd++) {
		free(r->nodes[nd].order);
		memset(&r->nodes[nd], 0, offsetof(struct rnode, kbuf));
	}
	for (size_t j = 0; j < r->nu; j++)
		if (!only_stale || r->u[j].sent_stale)
			r->nodes[r->u[j].node].n++;
	for (size_t nd = 0; nd < nn; nd++) {
		struct rnode *rn = &r->nodes[nd];

		if (!rn->n)
			continue;
		rn->order = malloc(rn->n * sizeof(size_t));
		if (!rn->order)
			return rs_seterr(-ENOMEM, "rpc: out of memory");
		rn->n = 0;
	}
	for (size_t t = 0; t < r->ntabs; t++)
		for (size_t j = 0; j < r->nu; j++) {
			struct ukey *u = &r->u[j];

			if (u->tab != t || (only_stale && !u->sent_stale))
				continue;
			u->sent_stale = false;
			r->nodes[u->node].order[r->nodes[u->node].n++] = j;
		}
	return 0;
}

static uint32_t req_dtype(const struct rcall *r, const struct cli_tloc *v)
{
	return has_rows_in(r->op) ? PROTO_DTYPE_FP32 : v->info.spec.dtype;
}

/* Keys per message for table view v on context cc. */
static int keys_per_msg(struct rcall *r, struct rnode *rn,
			const struct cli_tloc *v, bool images)
{
	uint32_t dim = has_rows_in(r->op) ? in_width(r, v) : v->info.spec.dim;
	/* the epoch (PROTO_KF_EPOCH) and the call's identity
	 * (PROTO_KF_ONCE) travel after the fixed part */
	size_t req_max = rn->cc->msg_max - req_extra(r);
	int kpm = proto_keys_per_msg(r->op, dim, req_dtype(r, v),
				     req_max, CLI_MSG_MAX,
				     rn->cc->max_batch_keys ?
					     rn->cc->max_batch_keys :
					     PROTO_DEFAULT_BATCH_KEYS);

	if (kpm > 0 && images) {
		int ipm = proto_images_per_msg(v->info.spec.dim,
					       v->info.spec.dtype, CLI_MSG_MAX);

		kpm = ipm < kpm ? ipm : kpm;
	}
	if (kpm <= 0)
		return kpm < 0 ? kpm : RS_E_TOOBIG;
	if ((size_t)kpm > rn->kpm_cap) {
		uint64_t *kb = realloc(rn->kbuf, (size_t)kpm * sizeof(*kb));

		if (!kb)
			return rs_seterr(-ENOMEM, "rpc: out of memory");
		rn->kbuf = kb;
		rn->kpm_cap = (size_t)kpm;
	}
	if (has_rows_in(r->op) && (size_t)kpm * dim > rn->rcap) {
		float *rb = realloc(rn->rbuf, (size_t)kpm * dim *
						      sizeof(float));

		if (!rb)
			return rs_seterr(-ENOMEM, "rpc: out of memory");
		rn->rbuf = rb;
		rn->rcap = (size_t)kpm * dim;
	}
	return kpm;
}

/* The call's view of node rn's next table is not valid: the handle was
 * refreshed before the node took part (a member that became ACTIVE, or
 * that the client added since: client_internal.h), or the table is gone.
 * Its keys there wait, like those of a stale-table refusal, for the
 * handle's refresh and one resend (resend_stale); still missing then,
 * they keep RS_E_NOTFOUND. */
static int skip_invalid(struct rcall *r, struct rnode *rn, uint32_t tab)
{
	int code = rs_seterr(RS_E_NOTFOUND, "table '%s' missing on node %s",
			     r->tabs[tab]->name, rn->cc->node->name);

	while (rn->next < rn->n && r->u[rn->order[rn->next]].tab == tab) {
		struct ukey *u = &r->u[rn->order[rn->next++]];

		u->status = code;
		u->sent_stale = true;
	}
	r->stale = true;
	return 0;
}

/* Send the next message of node rn (keys of one table). */
static int send_next(struct rcall *r, struct rnode *rn)
{
	const struct ukey *u0 = &r->u[rn->order[rn->next]];
	const struct cli_tloc *v = uview(r, u0);
	struct proto_keys_req kr = { 0 };
	struct proto_hdr h;
	struct rmsg *msg;
	size_t cnt = 0;
	uint32_t width;
	int kpm, len;

	if (!v->valid)
		return skip_invalid(r, rn, u0->tab);
	kpm = keys_per_msg(r, rn, v, wants_images(r, u0->tab));
	if (kpm < 0)
		return kpm;
	width = has_rows_in(r->op) ? in_width(r, v) : 0;
	while (rn->next + cnt < rn->n && cnt < (size_t)kpm) {
		const struct ukey *u = &r->u[rn->order[rn->next + cnt]];

		if (u->tab != u0->tab)
			break;
		rn->kbuf[cnt] = r->keys[u->first].key;
		if (width)
			memcpy(rn->rbuf + cnt * width, u->row,
			       width * sizeof(float));
		cnt++;
	}
	kr.table_id = v->info.id;
	kr.table_gen = v->info.generation;
	kr.flags = r->ko.kflags | (wants_images(r, u0->tab) ? PROTO_KF_ROWS
							      : 0);
	kr.lr = r->ko.lr;
	if (tags_epoch(r)) {
		kr.flags |= PROTO_KF_EPOCH;
		kr.epoch = r->epoch;
		if (r->once.seq) {
			kr.flags |= PROTO_KF_ONCE;
			kr.client = r->c->client_id;
			kr.seq = r->once.seq;
			kr.done_below = r->done_below;
		}
	}
	kr.n = (uint32_t)cnt;
	kr.keys = rn->kbuf;
	if (width) {
		kr.dim = width;
		kr.dtype = PROTO_DTYPE_FP32;
		kr.rows = rn->rbuf;
	}
	cli_hdr_init(&h, r->trace_id, r->sampled);
	len = proto_enc_keys_req(rn->cc->msg, rn->cc->msg_max, &h, r->op, &kr);
	if (len < 0)
		return len;
	for (msg = rn->win; msg->req_id; msg++)
		;
	msg->start = rn->next;
	msg->count = cnt;
	msg->req_id = h.req_id;
	rn->next += cnt;
	rn->inflight++;
	if (r->op <= PROTO_OP_DELETE) {	/* LOAD: an admin tool's */
		CLI_INC(r->c, op_rpcs[r->op - PROTO_OP_GET], 1);
		CLI_INC(r->c, op_keys[r->op - PROTO_OP_GET], cnt);
	}
	return cli_conn_send(rn->cc, rn->cc->msg, (size_t)len);
}

static int map_status(uint32_t op, int32_t st)
{
	if (st == PROTO_ST_CREATED)
		return RS_KEY_CREATED;
	if (st == PROTO_ST_OK)
		return RS_KEY_FOUND;
	if (st == RS_E_NOTFOUND)
		return RS_KEY_MISSING;
	return st < 0 ? st : RS_E_PROTO;
}

/* (forced into the reply loop: once row_cache_note() became its second
 * caller the compiler called it per key, 12 instructions per key more on
 * the RPC get; docs/benchmarks.md) */
static inline __attribute__((always_inline)) void
row_out(const struct cli_tloc *v, const uint8_t *wire, uint32_t dtype,
	float *out)
{
	uint32_t dim = v->info.spec.dim;

	if (dtype == PROTO_DTYPE_FP32) {
		proto_load_f32(out, wire, dim);
		return;
	}
	for (uint32_t e = 0; e < dim; e++) {
		uint16_t h = (uint16_t)(wire[2 * e] | wire[2 * e + 1] << 8);

		out[e] = dtype == PROTO_DTYPE_FP16 ? row_f16_to_f32(h)
						   : row_bf16_to_f32(h);
	}
}

/*
 * A write's outcome for key u of a table with a row cache: the row an
 * UPDATE reply carries (PROTO_KF_ROWS) refreshes or enters the cache;
 * any other outcome of a write (no row: failed, not admitted, a resend
 * answered from the node's record, a node that ignores the flag; a PUT,
 * a DELETE) drops the entry, which the next get then READs. GET_OR_INIT
 * changes no row that exists.
 */
RS_COLD static void row_cache_note(struct rcall *r,
				   const struct rnode *rn,
				   const struct ukey *u,
				   const struct proto_keys_reply *rep,
				   uint32_t j, int32_t st)
{
	struct cli_rcache *rc = r->tabs[u->tab]->rc;
	const struct cli_tloc *v = uview(r, u);
	uint64_t key = r->keys[u->first].key;
	uint32_t dim = v->info.spec.dim;
	struct proto_image im = { 0 };
	struct cli_rentry e;

	if (r->op == PROTO_OP_GET_OR_INIT)
		return;
	if (r->op == PROTO_OP_UPDATE && rep->images && st >= 0)
		proto_image_at(rep->images, j, &im);
	if (!im.version || rep->dim != dim || cli_rcache_dim(rc) != dim ||
	    rep->dtype != v->info.spec.dtype || im.slot >= v->rgeom.nrows) {
		cli_rcache_drop(rc, key, 0);
		return;
	}
	if (r->crow_cap < dim) {
		float *b = realloc(r->crow, dim * sizeof(float));

		if (!b) {
			cli_rcache_drop(rc, key, 0);
			return;
		}
		r->crow = b;
		r->crow_cap = dim;
	}
	row_out(v, (const uint8_t *)rep->rows +
			   (size_t)j * dim * proto_dtype_size(rep->dtype),
		rep->dtype, r->crow);
	e = (struct cli_rentry){
		.version = im.version, .csum = im.checksum, .slot = im.slot,
		.node = (uint32_t)(rn - r->nodes), .uid = v->uid,
		.stamp = (uint32_t)atomic_load_explicit(&r->c->step,
							memory_order_relaxed)
	};
	cli_rcache_put(rc, key, &e, r->crow, false);
	CLI_INC(r->c, rc_update_rows, 1);
	CLI_INC(r->c, rc_fills, 1);
}

/* Receive the next reply of node rn (any of its requests in flight: node
 * workers may answer them out of order) and record its outcomes. */
static int recv_one(struct rcall *r, struct rnode *rn)
{
	struct rmsg *msg = NULL;
	struct proto_msg m;
	struct rv_msg raw;
	bool note;
	int ret;

	ret = cli_wire_recv(rn->cc, (uint8_t)r->op, 0, &raw, &m);
	if (rn->cc->failed)
		return ret;
	for (unsigned w = 0; w < CLI_RPC_WINDOW; w++)
		if (rn->win[w].req_id && rn->win[w].req_id == m.hdr.req_id)
			msg = &rn->win[w];
	if (!msg) {
		if (!ret)
			rv_msg_release(&raw);
		return cli_conn_fail(rn->cc, rs_seterr(RS_E_PROTO,
				     "node %s: reply to unknown request %llu",
				     rn->cc->node->name,
				     (unsigned long long)m.hdr.req_id));
	}
	msg->req_id = 0;
	rn->inflight--;
	if (ret) {
		/* whole-request error reply: these keys failed */
		bool stale = ret == RS_E_STALE || ret == RS_E_NOTFOUND;
		bool busy = ret == RS_E_BUSY;
		bool epoch = ret == RS_E_EPOCH && r->epoch;

		for (size_t j = 0; j < msg->count; j++) {
			struct ukey *u = &r->u[rn->order[msg->start + j]];

			u->status = ret;
			u->sent_stale = stale || busy || epoch;
			if (RS_UNLIKELY(r->tabs[u->tab]->rc))
				cli_rcache_drop(r->tabs[u->tab]->rc,
						r->keys[u->first].key, 0);
		}
		r->stale |= stale;
		r->busy |= busy;
		r->reroute |= epoch;
		return 0;
	}
	if (m.u.keys_reply.n != msg->count ||
	    (has_rows_out(r->op) && m.u.keys_reply.n &&
	     !m.u.keys_reply.rows)) {
		rv_msg_release(&raw);
		return cli_conn_fail(rn->cc, rs_seterr(RS_E_PROTO,
				     "node %s: %u statuses for %zu keys",
				     rn->cc->node->name, m.u.keys_reply.n,
				     msg->count));
	}
	/* a message's keys are of one table */
	note = msg->count && r->op != PROTO_OP_GET &&
	       r->tabs[r->u[rn->order[msg->start]].tab]->rc;
	for (size_t j = 0; j < msg->count; j++) {
		struct ukey *u = &r->u[rn->order[msg->start + j]];
		int32_t st = proto_status_at(m.u.keys_reply.status,
					     (uint32_t)j);

		u->status = map_status(r->op, st);
		if (RS_UNLIKELY(note))
			row_cache_note(r, rn, u, &m.u.keys_reply, (uint32_t)j,
				       st);
		if (st < 0) {
			if (st == RS_E_EPOCH && r->epoch) {
				/* not its primary in our epoch: re-route */
				u->sent_stale = true;
				r->reroute = true;
			} else if (st == RS_E_BUSY) {
				/* a backup of the key grows a table */
				u->sent_stale = true;
				r->busy = true;
			}
			continue;
		}
		if (has_rows_out(r->op)) {
			const struct cli_tloc *v = uview(r, u);
			uint32_t dt = m.u.keys_reply.dtype;
			size_t rb = (size_t)m.u.keys_reply.dim *
				    proto_dtype_size(dt);

			if (m.u.keys_reply.dim != v->info.spec.dim) {
				u->status = RS_E_DIM;
				continue;
			}
			row_out(v, (const uint8_t *)m.u.keys_reply.rows +
					   j * rb, dt, r->keys[u->first].out);
		}
	}
	rv_msg_release(&raw);
	return 0;
}

/* Fail every key of node rn that has no outcome yet; in cluster mode, a
 * broken connection makes them go to their primary in a newer route. */
static void fail_node(struct rcall *r, struct rnode *rn, int code)
{
	bool reroute = r->epoch && cli_conn_error(code);

	for (size_t j = 0; j < rn->n; j++) {
		struct ukey *u = &r->u[rn->order[j]];

		if (j >= rn->next || u->status == 0) {
			u->status = code;
			u->sent_stale |= reroute;
		}
	}
	rn->err = code;
	if (reroute) {
		r->reroute = true;
		r->avoid = (size_t)(rn - r->nodes);
	}
}

/* Step 3: all nodes, pipelined. */
static void exchange(struct rcall *r)
{
	size_t nn = r->nn;
	bool busy = true;

	for (size_t nd = 0; nd < nn; nd++) {
		struct rnode *rn = &r->nodes[nd];
		int ret;

		if (!rn->n)
			continue;
		for (size_t j = 0; j < rn->n; j++)
			r->u[rn->order[j]].status = 0;
		ret = cli_conn_get(&r->c->nodes[nd], &rn->cc);
		if (ret)
			fail_node(r, rn, ret);
	}
	while (busy) {
		busy = false;
		for (size_t nd = 0; nd < nn; nd++) {
			struct rnode *rn = &r->nodes[nd];
			int ret = 0;

			if (!rn->n || rn->err)
				continue;
			while (!ret && rn->next < rn->n &&
			       rn->inflight < CLI_RPC_WINDOW)
				ret = send_next(r, rn);
			if (!ret && rn->inflight)
				ret = recv_one(r, rn);
			if (ret) {
				fail_node(r, rn, ret);
				cli_conn_fail(rn->cc, ret);
				continue;
			}
			busy |= rn->inflight || rn->next < rn->n;
		}
	}
	for (size_t nd = 0; nd < nn; nd++) {
		cli_conn_put(r->nodes[nd].cc);
		r->nodes[nd].cc = NULL;
	}
}

/* Keys refused as stale: refresh their tables and resend them once. */
static int resend_stale(struct rcall *r)
{
	int ret;

	for (size_t t = 0; t < r->ntabs; t++)
		(void)cli_table_refresh(r->tabs[t]);
	r->stale = false;
	ret = snapshot_views(r);
	if (!ret)
		ret = group(r, true);
	if (ret)
		return ret;
	once_refresh(r);
	exchange(r);
	return 0;
}

/* Cluster mode: the keys to resend onto the newest route (a primary
 * without a node slot fails its keys here); the call's per-node state
 * grows to the route's nodes. */
static int remap(struct rcall *r)
{
	struct rs_client *c = r->c;
	const struct cli_route *rt = cli_route_hold(c);
	size_t n = 0;
	int ret;

	r->epoch = rt->epoch;
	ret = rnodes_size(r, rt->nknown);
	if (ret) {
		cli_route_drop(c);
		return ret;
	}
	for (size_t j = 0; j < r->nu; j++) {
		struct ukey *u = &r->u[j];
		unsigned node;

		if (!u->sent_stale)
			continue;
		node = place_ring_node(rt->ring, r->keys[u->first].key);
		if (node >= rt->nknown) {
			u->status = cli_route_unknown(rt, node);
			u->sent_stale = false;
			continue;
		}
		u->node = node;
		n++;
	}
	cli_route_drop(c);
	CLI_INC(c, epoch_retries, n);
	return 0;
}

/* Cluster mode: refresh the route, move the keys to resend onto it, and
 * refresh the tables a new primary has no view of yet (a member that was
 * not ACTIVE when the handle was refreshed). */
static int reroute(struct rcall *r)
{
	bool *refresh;
	bool any = false;
	int ret;

	(void)cli_cluster_refresh(r->c, r->epoch, r->avoid);
	r->avoid = SIZE_MAX;
	ret = remap(r);
	if (!ret)
		ret = snapshot_views(r);
	if (ret)
		return ret;
	refresh = calloc(r->ntabs ? r->ntabs : 1, sizeof(*refresh));
	if (!refresh)
		return rs_seterr(-ENOMEM, "rpc: out of memory");
	for (size_t j = 0; j < r->nu; j++)
		if (r->u[j].sent_stale && !uview(r, &r->u[j])->valid)
			any = refresh[r->u[j].tab] = true;
	for (size_t t = 0; any && t < r->ntabs; t++)
		if (refresh[t])
			(void)cli_table_refresh(r->tabs[t]);
	free(refresh);
	return any ? snapshot_views(r) : 0;
}

/* Keys refused because writes paused (RS_E_BUSY) or, in cluster mode,
 * because of the epoch or a failed node: resend them after a backoff
 * (1 ms, doubling to 64 ms) until they are taken or the client's timeout
 * passes; then they keep the last error. */
static int resend(struct rcall *r)
{
	int64_t deadline = (int64_t)rs_mono_ms() + r->c->cfg.timeout_ms;
	useconds_t wait_us = 1000;
	int ret;

	while ((r->busy || r->reroute) && (int64_t)rs_mono_ms() < deadline) {
		usleep(wait_us);
		if (wait_us < 64000)
			wait_us *= 2;
		if (r->reroute && (ret = reroute(r)))
			return ret;
		r->busy = false;
		r->reroute = false;
		ret = group(r, true);
		if (ret)
			return ret;
		once_refresh(r);
		exchange(r);
		if (r->stale && (ret = resend_stale(r)))
			return ret;
	}
	return 0;
}

static void rcall_free(struct rcall *r)
{
	if (r->nodes)
		for (size_t nd = 0; nd < r->nn; nd++) {
			free(r->nodes[nd].order);
			free(r->nodes[nd].kbuf);
			free(r->nodes[nd].rbuf);
		}
	free(r->nodes);
	free(r->u);
	free(r->urep);
	free(r->sums);
	free(r->tabs);
	free(r->views);
	free(r->crow);
}

int cli_rpc(struct rs_client *c, uint32_t op, const struct cli_key *keys,
	    const float *const *in, const size_t *sel, size_t m, int *status,
	    uint64_t trace_id, bool sampled, const struct cli_keyed_opts *ko)
{
	struct rcall r = { .c = c, .op = op, .keys = keys, .in = in,
			   .status = status, .trace_id = trace_id,
			   .sampled = sampled, .ring = c->ring,
			   .nn = c->nnodes, .avoid = SIZE_MAX };
	int ret;

	struct trace_event ev = { .trace_id = trace_id, .stage = "client.build",
				  .batch = (uint32_t)m,
				  .start_us = trace_start_us(sampled) };

	if (ko)
		r.ko = *ko;

	if (c->cluster) {
		/* exactly once: the call's sequence, until it returns */
		if (once_op(op))
			cli_once_enter(&c->once, &r.once, &r.done_below);
		ret = fold_cluster(&r, sel, m);
	} else {
		ret = fold(&r, sel, m);
	}
	if (!ret)
		ret = rnodes_size(&r, r.nn);
	if (!ret)
		ret = snapshot_views(&r);
	if (!ret)
		ret = group(&r, r.epoch != 0);
	if (ret)
		goto out;
	if (sampled) {
		trace_end(&ev);
		ev.stage = "client.wait"; /* requests out, replies in */
		ev.start_us = trace_now_us();
	}
	exchange(&r);
	if (sampled)
		trace_end(&ev);
	/* The table changed under us: refresh and resend once. */
	if (r.stale && (ret = resend_stale(&r)))
		goto out;
	/* Writes paused on some node (a checkpoint), or the configuration
	 * moved: wait and resend, until the client's timeout. */
	if ((r.busy || r.reroute) && (ret = resend(&r)))
		goto out;
	CLI_INC(c, rpc_keys, op == PROTO_OP_GET ? m : 0);
	/* Step 5: outcomes to every occurrence. */
	for (size_t j = 0; j < m; j++) {
		size_t i = sel ? sel[j] : j;
		const struct ukey *u = &r.u[r.urep[j]];

		status[i] = u->status;
		if (has_rows_out(op) && i != u->first && u->status > 0)
			memcpy(keys[i].out, keys[u->first].out,
			       keys[i].t->dim * sizeof(float));
	}
out:
	rcall_free(&r);
	/* no message of the call can be sent any more */
	if (r.once.seq)
		cli_once_leave(&c->once, &r.once);
	return ret;
}
