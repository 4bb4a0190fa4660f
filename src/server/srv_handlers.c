/*
 * srv_handlers.c - one request, start to finish: decode, check, run,
 * reply (called by a worker for every received message).
 *
 * Decoding. Every message goes through proto_decode() with the node's
 * limits, which checks every length, count and field and never reads out
 * of bounds (src/common/proto.h). What the node does with a message that
 * fails:
 *   - the header is sound (>= 32 bytes, our magic and version, a known
 *     opcode): an error reply to that opcode and request id, with the
 *     decoder's code (RS_E_PROTO malformed, RS_E_TOOBIG over a limit,
 *     RS_E_INVAL out of range) and its message;
 *   - the header is not (too short, foreign magic or version, unknown
 *     opcode): an error reply with request id 0 on opcode HELLO and
 *     RS_E_PROTO: the sender does not speak the protocol, and nothing it
 *     sent can be echoed with confidence. A client library treats a reply
 *     to id 0 as fatal for its connection.
 * Either way the connection stays up (a misbehaving client only hurts
 * itself) and the message is counted (rs_request_errors_total{type="bad"}).
 * Then the role: a request its connection's credentials do not allow
 * (src/common/auth.h, docs/security.md) gets RS_E_PERM before any work.
 * Then semantic checks: unknown table id (RS_E_NOTFOUND), a table
 * generation that is not the current one (RS_E_STALE: the client's
 * directory is old), rows of the wrong dimension (RS_E_DIM), a reply that
 * would not fit the client's receive buffer (RS_E_TOOBIG).
 *
 * Keys. A request that passed the checks always gets a keyed reply with
 * one status per key, in request order: 0 (ok), PROTO_ST_CREATED, or a
 * negative code (RS_E_NOTFOUND, RS_E_FULL, -EIO, ...). Never a silent
 * zero: a GET row of a missing key is zeros WITH status RS_E_NOTFOUND.
 *
 * Updates. Duplicate keys of one batch are summed first (optim_coalesce,
 * first-occurrence order), then each distinct key gets ONE optimizer step
 * in place under the row's write protocol (slab_write_begin / commit:
 * version odd, payload written, checksum, version even), so a one-sided
 * reader never accepts a torn row; every duplicate gets its key's status.
 * With PROTO_KF_CREATE a missing key is first created from the table's
 * initializer (state from optim_init_state) and then updated. A key whose
 * (summed) gradient, or PUT value, holds a NaN or an infinity is refused
 * with RS_E_INVAL and left untouched: one bad element would poison the row
 * and the optimizer state for good. A finite gradient whose step would
 * make a weight or a state value infinite (optim_apply() reports it on the
 * copies slab_write_begin() handed out) is refused the same way with
 * RS_E_OVERFLOW: the write is aborted, row and state stay bit for bit.
 * The same holds for a result (or a PUT value) that is finite in fp32 but
 * would be stored as an infinity in an fp16 or bf16 table.
 * (A key created by that request's PROTO_KF_CREATE keeps its initial row.)
 *
 * Replies. Every reply is built complete in the worker's reply buffer
 * (GET rows land there directly) and only then handed to srv_conn_send(),
 * which sends it at once or parks a copy on the connection (server.c):
 * no worker holds a connection's send slot while it works, and none waits
 * for one peer's credits. A send that fails, or a peer that stops
 * returning credits (parked replies without progress for
 * send_timeout_ms), marks the connection dead.
 *
 * Tracing: when the request's trace id is sampled (trace_wanted) the
 * handler emits server.total (whole request), server.index (key lookups
 * and reads: GET, GET_OR_INIT, DELETE) and server.apply (writes: UPDATE's
 * coalescing and optimizer steps, PUT).
 *
 * Concurrency: runs on any worker; everything it touches is either the
 * worker's own scratch, a referenced table (thread-safe slab calls), or the
 * connection's send path (thread-safe in rv).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/le.h"
#include "server/srv_internal.h"
#include "server/srv_slab_ckpt.h"
#include "trace/trace.h"
#include "value/initializer.h"
#include "value/optimizer.h"
#include "value/row_format.h"
#include "value/slab_evict.h"

struct req {
	struct srv_worker *w;
	struct srv_conn *c;
	struct rs_server *s;
	struct proto_msg m;
	struct proto_hdr rh;	/* reply header: id, trace id, trace flag */
	unsigned rt;		/* enum srv_req_type */
	uint8_t op;
	bool traced;
	bool failed;		/* an error reply was sent */
	bool defer;		/* reply_send keeps the reply (replication) */
	int deferred;		/* its length */
	uint64_t t0_ns;		/* received (CLOCK_MONOTONIC, as trace_now_us) */
	uint64_t tpost_ns;	/* reply handed to the NIC; 0: not yet */
	const char *table;	/* for trace events */
	uint32_t nkeys;
	uint32_t grow_id;	/* grow_gen != 0: the table to grow once the */
	uint64_t grow_gen;	/* request left the write pause (srv_grow.c) */
	bool left;		/* left the write pause early (cluster write) */
	char tname[PROTO_NAME_MAX + 1]; /* table, when it may grow meanwhile */
	struct slab_ev_sink sink; /* cluster writes: keys evicted ... */
	uint32_t evicted_n;	  /* ... (w->evicted[0, evicted_n)) */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned rt_of(uint8_t op)
{
	static const unsigned map[PROTO_OP_COUNT] = {
		[PROTO_OP_HELLO] = SRV_RT_HELLO,
		[PROTO_OP_TABLE_CREATE] = SRV_RT_CREATE,
		[PROTO_OP_TABLE_DROP] = SRV_RT_DROP,
		[PROTO_OP_TABLE_DIR] = SRV_RT_DIR,
		[PROTO_OP_GET] = SRV_RT_GET,
		[PROTO_OP_GET_OR_INIT] = SRV_RT_GET_OR_INIT,
		[PROTO_OP_PUT] = SRV_RT_PUT,
		[PROTO_OP_UPDATE] = SRV_RT_UPDATE,
		[PROTO_OP_DELETE] = SRV_RT_DELETE,
		[PROTO_OP_STATS] = SRV_RT_STATS,
		[PROTO_OP_CKPT] = SRV_RT_CKPT,
		[PROTO_OP_LOAD] = SRV_RT_LOAD,
		[PROTO_OP_CONFIG] = SRV_RT_CONFIG,
		[PROTO_OP_REPL] = SRV_RT_REPL,
		[PROTO_OP_COPY] = SRV_RT_COPY,
		[PROTO_OP_TABLE_GROW] = SRV_RT_GROW,
	};

	return op > 0 && op < PROTO_OP_COUNT ? map[op] : SRV_RT_BAD;
}

/* ---- sending ---- */

/* The worker's reply buffer and its capacity for this conn, or < 0 (the
 * conn is dead). Nothing is reserved: the reply is built first and sent
 * by reply_send() when complete, so no conn's send slot is held while a
 * request is being worked on. */
static int reply_buf(struct req *r, void **buf)
{
	if (atomic_load(&r->c->dead))
		return RS_E_DISCONNECTED;
	*buf = r->w->reply;
	return (int)srv_reply_cap(r->c);
}

static void reply_send(struct req *r, int len)
{
	/* server.total ends here: under Soft-RoCE the kernel transmits the
	 * reply inside the post call, so the client can have it before the
	 * call returns. Time after this point is the NIC's, not the node's. */
	if (r->defer) {	/* sent once the backups acknowledged */
		r->deferred = len;
		return;
	}
	if (!r->tpost_ns)
		r->tpost_ns = now_ns();
	if (srv_conn_send(r->c, r->w->reply, (size_t)len) == 0)
		metrics_counter_add(r->s->m.bytes_served, (uint64_t)len);
}

/* Encode an error reply into the reply buffer. */
static int enc_error(struct req *r, void *buf, int cap, uint8_t op,
		     int code, const char *msg)
{
	int len;

	if (code >= 0)
		code = RS_E_PROTO;
	len = proto_enc_error(buf, (size_t)cap, &r->rh, op, code, msg);
	r->failed = true;
	metrics_counter_add(r->s->m.errors[r->rt], 1);
	return len;
}

/* Send the reply an encoder wrote into buf[0..cap), or an error reply
 * when it failed (len < 0). */
static void reply_encoded(struct req *r, void *buf, int cap, int len)
{
	if (len < 0)
		len = enc_error(r, buf, cap, r->op, len, rs_errormsg());
	reply_send(r, len);
}

/* Send an error reply. */
static void reply_error(struct req *r, uint8_t op, int code, const char *fmt,
			...) __attribute__((format(printf, 4, 5)));
static void reply_error(struct req *r, uint8_t op, int code, const char *fmt,
			...)
{
	char msg[PROTO_ERRMSG_MAX + 1];
	va_list ap;
	void *buf;
	int cap, len;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = enc_error(r, buf, cap, op, code, msg);
	if (len > 0)
		reply_send(r, len);
	else
		srv_conn_kill(r->c, len);
}

/* ---- tracing ---- */

/* Record stage of r from start_us for dur_us (a traced request only). */
static void trace_span(const struct req *r, const char *stage,
		       uint64_t start_us, uint64_t dur_us, uint64_t bytes)
{
	struct trace_event ev = {
		.trace_id = r->rh.trace_id,
		.stage = stage,
		.table = r->table,
		.batch = r->nkeys,
		.bytes = bytes,
		.start_us = start_us,
		.dur_us = dur_us,
	};

	if (r->traced)
		trace_emit(&ev);
}

/* Record stage of r from start_us until now. */
static void trace_stage(const struct req *r, const char *stage,
			uint64_t start_us, uint64_t bytes)
{
	uint64_t now;

	if (!r->traced)
		return;
	now = trace_now_us();
	trace_span(r, stage, start_us, now > start_us ? now - start_us : 0,
		   bytes);
}

/* ---- control requests ---- */

static void do_hello(struct req *r)
{
	const struct proto_hello_req *h = &r->m.u.hello_req;
	struct proto_hello_reply rep;
	uint32_t rmax = atomic_load(&r->c->reply_max);
	void *buf;
	int cap, len;

	if (h->recv_bytes >= PROTO_MIN_MESSAGE_BYTES &&
	    (!rmax || h->recv_bytes < rmax))
		atomic_store(&r->c->reply_max, h->recv_bytes);
	if (h->name[0])
		snprintf(r->c->peer, sizeof(r->c->peer), "%s", h->name);
	memset(&rep, 0, sizeof(rep));
	rep.node_id = r->s->node_id;
	rep.dir_generation = atomic_load(&r->s->tables.dir_gen);
	rep.limits = r->s->cfg.limits;
	snprintf(rep.name, sizeof(rep.name), "%s", r->s->cfg.name);
	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = proto_enc_hello_reply(buf, (size_t)cap, &r->rh, &rep);
	reply_encoded(r, buf, cap, len);
}

/*
 * TABLE_CREATE, TABLE_DROP and TABLE_GROW at a cluster member are fenced by
 * the configuration epoch (docs/replication.md, "Tables"): they must name the
 * epoch the node follows (PROTO_F_EPOCH) and the node must hold or be
 * about to hold ranges in it (an ACTIVE or JOINING member), else
 * RS_E_EPOCH (the client refreshes its configuration and redoes the
 * call). The change runs under the read side of the configuration lock
 * taken by the check (srv_repl_enter()), so the node never installs a
 * new configuration between the check and the change. Elsewhere a
 * request naming an epoch is refused, one naming none goes on. false:
 * answered (q released).
 */
static bool table_fence(struct req *r, struct srv_repl_req *q)
{
	struct rs_server *s = r->s;
	int ret;

	memset(q, 0, sizeof(*q));
	if (!s->repl.on) {
		if (!(r->m.hdr.flags & PROTO_F_EPOCH))
			return true;
		reply_error(r, r->op, RS_E_EPOCH, "this node is not a member "
			    "of a cluster: requests name no epoch");
		return false;
	}
	if (!(r->m.hdr.flags & PROTO_F_EPOCH)) {
		reply_error(r, r->op, RS_E_EPOCH, "this node is a member of a "
			    "replicated cluster: a table create, drop or grow "
			    "names the configuration epoch (CONFIG)");
		return false;
	}
	ret = srv_repl_enter(s, q, r->m.hdr.epoch, NULL, 0, true);
	if (ret) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		srv_repl_exit(s, q);
		return false;
	}
	return true;
}

static void do_create(struct req *r)
{
	struct proto_table_info info;
	struct srv_repl_req q;
	void *buf;
	int cap, len, ret;

	r->table = r->m.u.table_create.name;
	if (!table_fence(r, &q))
		return;
	ret = srv_table_create(&r->s->tables, &r->m.u.table_create, &info);
	if (!ret && q.held)
		srv_repl_table_created(r->s, &q, info.spec.name);
	srv_repl_exit(r->s, &q);
	if (ret) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		return;
	}
	srv_log_peer("table '%s' created (id %u, dim %u, %s, capacity "
		     "%" PRIu64 ", %s)", info.spec.name, info.id,
		     info.spec.dim, proto_dtype_name(info.spec.dtype),
		     info.spec.capacity, optim_kind_name(info.spec.optim.kind));
	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = proto_enc_table_create_reply(buf, (size_t)cap, &r->rh, &info);
	reply_encoded(r, buf, cap, len);
}

static void do_drop(struct req *r)
{
	struct srv_repl_req q;
	void *buf;
	int cap, len, ret;

	r->table = r->m.u.table_drop;
	if (!table_fence(r, &q))
		return;
	ret = srv_table_drop(&r->s->tables, r->m.u.table_drop);
	if (!ret && q.cfg)
		srv_repl_table_dropped(r->s, &q, r->m.u.table_drop);
	srv_repl_exit(r->s, &q);
	if (ret) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		return;
	}
	srv_log_peer("table '%s' dropped", r->m.u.table_drop);
	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = proto_enc_table_drop_reply(buf, (size_t)cap, &r->rh);
	reply_send(r, len);
}

static void do_dir(struct req *r)
{
	struct proto_table_info *dir = NULL;
	uint32_t start = r->m.u.list_req.start, written = 0, total;
	uint64_t gen;
	void *buf;
	int n, cap, len;

	/* clients refresh after a growth: free what its grace period kept */
	if (!pthread_mutex_trylock(&r->s->tables.admin)) {
		srv_tables_reap(&r->s->tables, false);
		pthread_mutex_unlock(&r->s->tables.admin);
	}
	n = srv_tables_dir(&r->s->tables, &dir, &gen);
	if (n < 0) {
		reply_error(r, r->op, n, "%s", rs_errormsg());
		return;
	}
	total = (uint32_t)n;
	if (start > total)
		start = total;
	cap = reply_buf(r, &buf);
	if (cap >= 0) {
		len = proto_enc_table_dir_reply(buf, (size_t)cap, &r->rh, gen,
						total, start, dir + start,
						total - start, &written);
		reply_encoded(r, buf, cap, len);
	}
	free(dir);
}

static void do_stats(struct req *r)
{
	struct srv_stat_list l = { 0 };
	uint32_t start = r->m.u.list_req.start, written = 0;
	void *buf;
	int ret, cap, len;

	ret = srv_stats_collect(r->s, &l);
	if (ret < 0) {
		free(l.v);
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		return;
	}
	if (start > l.n)
		start = l.n;
	cap = reply_buf(r, &buf);
	if (cap >= 0) {
		len = proto_enc_stats_reply(buf, (size_t)cap, &r->rh, l.n,
					    start, l.v + start, l.n - start,
					    &written);
		reply_encoded(r, buf, cap, len);
	}
	free(l.v);
}

/* ---- keyed requests ---- */

/* A request that may insert into t, a table that grows: when the keys
 * may pass its fill threshold, answer RS_E_BUSY (the client resends) and
 * grow it once the request left the write pause (srv_handle). */
static bool grow_first(struct req *r, struct srv_table *t)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;

	if (!(r->op == PROTO_OP_PUT || r->op == PROTO_OP_LOAD ||
	      r->op == PROTO_OP_GET_OR_INIT ||
	      (r->op == PROTO_OP_UPDATE && (k->flags & PROTO_KF_CREATE))) ||
	    !srv_grow_due(t, k->n))
		return false;
	r->grow_id = t->id;
	r->grow_gen = t->info.generation;
	return true;
}

static const char grow_busy_msg[] = "the table is full and grows now: retry";

/* The table of a keyed request, checked against the request; NULL after
 * an error reply. The caller srv_table_put()s it. */
static struct srv_table *keyed_table(struct req *r)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;
	struct srv_table *t = srv_table_get(&r->s->tables, k->table_id);

	if (!t) {
		reply_error(r, r->op, RS_E_NOTFOUND, "table id %u: no such "
			    "table on this node (dropped? refresh the "
			    "directory)", k->table_id);
		return NULL;
	}
	r->table = t->spec.name;
	if (k->table_gen && k->table_gen != t->info.generation) {
		reply_error(r, r->op, RS_E_STALE, "table '%s' (id %u): "
			    "generation %016" PRIx64 " is not the current "
			    "%016" PRIx64 " (dropped and recreated; refresh "
			    "the directory)", t->spec.name, k->table_id,
			    k->table_gen, t->info.generation);
		goto put;
	}
	if (k->rows && k->dim != t->spec.dim +
				 (r->op == PROTO_OP_LOAD ? t->state_floats : 0)) {
		reply_error(r, r->op, RS_E_DIM, "table '%s': rows of %u "
			    "floats, the table has %u%s", t->spec.name, k->dim,
			    t->spec.dim + (r->op == PROTO_OP_LOAD ?
					   t->state_floats : 0),
			    r->op == PROTO_OP_LOAD ? " (weights and optimizer "
			    "state)" : "");
		goto put;
	}
	if (RS_UNLIKELY(t->spec.grow_log2) && grow_first(r, t)) {
		reply_error(r, r->op, RS_E_BUSY, "table '%s': %s",
			    t->spec.name, grow_busy_msg);
		goto put;
	}
	return t;
put:
	srv_table_put(t);
	return NULL;
}

/* Wire rows (n x dim in dtype) -> host floats in the worker's scratch. */
static float *rows_to_f32(struct srv_worker *w, const void *wire, uint32_t n,
			  uint32_t dim, uint32_t dtype)
{
	size_t cnt = (size_t)n * dim;
	float *out;

	if (srv_scratch(&w->vals, &w->vals_cap, cnt * sizeof(float) + 1))
		return NULL;
	out = w->vals;
	if (dtype == PROTO_DTYPE_FP32) {
		proto_load_f32(out, wire, cnt);
		return out;
	}
	/* 16-bit elements: load, then widen */
	if (srv_scratch(&w->tmp, &w->tmp_cap, cnt * sizeof(uint16_t) + 2))
		return NULL;
	proto_load_u16(w->tmp, wire, cnt);
	for (size_t i = 0; i < cnt; i++) {
		uint16_t h = ((uint16_t *)w->tmp)[i];

		out[i] = dtype == PROTO_DTYPE_FP16 ? row_f16_to_f32(h)
						   : row_bf16_to_f32(h);
	}
	return out;
}

static int row_scratch(struct srv_worker *w, const struct srv_table *t)
{
	if (srv_scratch(&w->row, &w->row_cap, t->spec.dim * sizeof(float)))
		return -ENOMEM;
	return srv_scratch(&w->state, &w->state_cap,
			   (t->state_floats + 1) * sizeof(float));
}

/* Payload of a fresh row of key, and its optimizer state. */
static void fresh_row(const struct srv_table *t, uint64_t key, float *row,
		      float *state)
{
	init_row(&t->spec.init, key, row, t->spec.dim);
	optim_init_state(&t->spec.optim, state, t->spec.dim);
}

/* One key of GET / GET_OR_INIT into reply slot i. */
static int32_t get_one(struct srv_table *t, struct srv_worker *w, bool init,
		       uint64_t key)
{
	float *row = w->row;
	bool created = false;
	int ret;

	for (int tries = 0; tries < 4; tries++) {
		ret = slab_read(t->st, key, row, NULL);
		if (ret != RS_E_NOTFOUND || !init)
			break;
		fresh_row(t, key, row, w->state);
		if (!tries && !slab_ev_admit(t->st, key)) {
			/* admission: the initializer's row, not stored */
			atomic_fetch_add(&t->cnt.init_served_keys, 1);
			return PROTO_ST_OK;
		}
		ret = slab_get_or_insert(t->st, key, row, w->state, NULL,
					 &created);
		if (ret)
			break;
		/* read back: the stored (rounded) row, or a concurrent
		 * writer's; a concurrent delete makes us go again */
	}
	if (ret)
		return ret;
	return created ? PROTO_ST_CREATED : PROTO_ST_OK;
}

static void do_get(struct req *r)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;
	const bool init = r->op == PROTO_OP_GET_OR_INIT;
	struct proto_reply_writer pw;
	struct srv_table *t;
	uint64_t t1, found = 0, created = 0;
	void *buf;
	int cap, len;

	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	t = srv_table_get(&r->s->tables, k->table_id);
	if (t && init && RS_UNLIKELY(t->spec.grow_log2) &&
	    (!k->table_gen || k->table_gen == t->info.generation) &&
	    grow_first(r, t)) {
		len = enc_error(r, buf, cap, r->op, RS_E_BUSY, grow_busy_msg);
	} else if (t && (!k->table_gen ||
			 k->table_gen == t->info.generation)) {
		r->table = t->spec.name;
		len = proto_keys_reply_begin(buf, (size_t)cap, &r->rh, r->op,
					     k->n, t->spec.dim, t->spec.dtype,
					     &pw);
		if (len < 0) {
			len = enc_error(r, buf, cap, r->op, RS_E_TOOBIG,
					"the reply does not fit the client's "
					"receive buffer: split the batch");
		} else if (row_scratch(r->w, t)) {
			len = enc_error(r, buf, cap, r->op, -ENOMEM,
					"out of memory");
		}
	} else {
		char msg[160];

		snprintf(msg, sizeof(msg), t ? "table id %u: stale generation "
			 "(dropped and recreated; refresh the directory)" :
			 "table id %u: no such table on this node",
			 k->table_id);
		len = enc_error(r, buf, cap, r->op,
				t ? RS_E_STALE : RS_E_NOTFOUND, msg);
	}
	if (r->failed) {
		srv_table_put(t);
		reply_send(r, len);
		return;
	}
	t1 = trace_start_us(r->traced);
	for (uint32_t i = 0; i < k->n; i++) {
		int32_t st = get_one(t, r->w, init, proto_key_at(k->keys, i));

		if (st >= 0) {
			row_payload_from_f32(&t->rgeom, r->w->row,
					     pw.rows + i * pw.row_bytes);
			proto_reply_set(&pw, i, st);
			found++;
			created += st == PROTO_ST_CREATED;
		} else {
			proto_reply_fail(&pw, i, st);
		}
	}
	trace_stage(r, "server.index", t1, (uint64_t)len);
	if (init) {
		atomic_fetch_add(&t->cnt.get_or_init_keys, k->n);
		atomic_fetch_add(&t->cnt.created_keys, created);
	} else {
		atomic_fetch_add(&t->cnt.get_keys, k->n);
	}
	atomic_fetch_add(&t->cnt.missing_keys, k->n - found);
	metrics_counter_add(r->s->m.keys_served, found);
	srv_table_put(t);
	reply_send(r, len);
}

/* Send n statuses of a PUT / UPDATE / DELETE. */
static void reply_statuses(struct req *r, const int32_t *st, uint32_t n)
{
	struct proto_keys_reply rep = { .n = n, .status = st };
	void *buf;
	int cap, len;

	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = proto_enc_keys_reply(buf, (size_t)cap, &r->rh, r->op, &rep);
	reply_encoded(r, buf, cap, len);
}

/* Check that n statuses fit the client's buffer before doing the work. */
static bool statuses_fit(struct req *r, uint32_t n)
{
	size_t need = proto_keys_reply_bytes(r->op, n, 0, 0);
	uint32_t cap = srv_reply_cap(r->c);

	if (need <= cap)
		return true;
	reply_error(r, r->op, RS_E_TOOBIG, "the reply to %u keys needs %zu "
		    "bytes, the client receives %u: split the batch", n, need,
		    cap);
	return false;
}

/* Gradients and values must be finite: a NaN or infinity would poison
 * the row (and, through Adagrad / Adam state, every later step).
 * Every element finite: its exponent bits not all ones. Two floats per
 * 64-bit word, no branch per element: adding 1 to an exponent field of
 * all ones carries into its float's sign bit (and no further), so a
 * sign bit in the sum's OR marks a NaN or an infinity. A branch per
 * float cost about 3 instructions per element, on every gradient and
 * every replicated row. */
static bool all_finite(const float *v, uint32_t n)
{
	const uint64_t exp = 0x7f8000007f800000ull, one = 0x0080000000800000ull;
	uint64_t acc0 = 0, acc1 = 0, w0, w1;
	uint32_t i = 0, b;

	for (; i + 4 <= n; i += 4) {
		memcpy(&w0, &v[i], 8);
		memcpy(&w1, &v[i + 2], 8);
		acc0 |= (w0 & exp) + one;
		acc1 |= (w1 & exp) + one;
	}
	for (; i < n; i++) {
		memcpy(&b, &v[i], 4);
		acc0 |= (uint64_t)((b & 0x7f800000u) + 0x00800000u);
	}
	return !((acc0 | acc1) & 0x8000000080000000ull);
}

/* One optimizer step with op (the table's parameters, or a copy with the
 * request's lr) on key with gradient g; status. */
static int32_t update_one(struct req *r, struct srv_table *t,
			  const struct optim_params *op, uint64_t key,
			  const float *g, bool create, struct proto_image *im,
			  uint8_t *row)
{
	struct srv_worker *w = r->w;
	struct slab_wr wr = { .val = w->row,
			      .state = t->state_floats ? w->state : NULL };
	bool created = false;
	uint64_t a0;
	int ret;

	if (!all_finite(g, t->spec.dim))
		return RS_E_INVAL;
	ret = slab_write_begin(t->st, key, &wr);
	if (ret == RS_E_NOTFOUND && create && !slab_ev_admit(t->st, key)) {
		/* admission: a sighting; the gradient is not applied */
		atomic_fetch_add(&t->cnt.unadmitted_updates, 1);
		return PROTO_ST_OK;
	}
	for (int tries = 0; ret == RS_E_NOTFOUND && create && tries < 4;
	     tries++) {
		fresh_row(t, key, w->row, w->state);
		ret = slab_insert(t->st, key, w->row, w->state, NULL);
		if (ret == 0)
			created = true;
		else if (ret != RS_E_EXISTS)
			return ret;
		ret = slab_write_begin(t->st, key, &wr);
	}
	if (ret)
		return ret;
	a0 = now_ns();
	ret = optim_apply(op, wr.val, wr.state, g, t->spec.dim);
	if (!ret && !row_f32_fits(&t->rgeom, wr.val))
		ret = RS_E_OVERFLOW; /* finite in fp32, not in fp16/bf16 */
	if (ret) {
		slab_write_abort(&wr);
		return ret;
	}
	metrics_histogram_observe(r->s->m.apply[t->spec.optim.kind & 3],
				  now_ns() - a0);
	ret = slab_write_commit(&wr);
	if (ret)
		return ret;
	if (im) {
		/* the row as published: what a READ of the slot returns */
		im->version = wr.new_version;
		im->checksum = wr.new_csum;
		im->slot = wr.row;
		row_payload_from_f32(&t->rgeom, wr.val, row);
	}
	return created ? PROTO_ST_CREATED : PROTO_ST_OK;
}

/* Room for m images and rows of t (PROTO_KF_ROWS); NULL: no memory. */
static struct proto_image *images_scratch(struct srv_worker *w,
					  const struct srv_table *t,
					  uint32_t m, uint8_t **rows)
{
	size_t ib = (size_t)m * sizeof(struct proto_image);

	if (srv_scratch(&w->images, &w->images_cap,
			ib + (size_t)m * t->rgeom.payload_bytes + 8))
		return NULL;
	memset(w->images, 0, ib);
	*rows = (uint8_t *)w->images + ib;
	return w->images;
}

/* The reply to an UPDATE with PROTO_KF_ROWS: key i gets the status, image
 * and row of its distinct key idx[i]; a key without an image (failed,
 * not admitted) gets zeros. */
static void reply_images(struct req *r, const struct srv_table *t,
			 const int32_t *st, uint32_t n, const uint32_t *idx,
			 const struct proto_image *im, const uint8_t *rows)
{
	const size_t rb = t->rgeom.payload_bytes;
	struct proto_reply_writer pw;
	uint64_t rows_out = 0;
	void *buf;
	int cap, len;

	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = proto_images_reply_begin(buf, (size_t)cap, &r->rh, n,
				       t->spec.dim, t->spec.dtype, &pw);
	if (len < 0) {	/* the client sized it: a hostile or broken one */
		len = enc_error(r, buf, cap, r->op, RS_E_TOOBIG, "the rows do "
				"not fit the client's receive buffer: split "
				"the batch");
		reply_encoded(r, buf, cap, len);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct proto_image *e = &im[idx[i]];

		if (st[i] < 0 || !e->version) {
			proto_reply_fail(&pw, i, st[i]);
			continue;
		}
		proto_reply_set(&pw, i, st[i]);
		proto_image_set(&pw, i, e);
		memcpy(pw.rows + i * rb, rows + idx[i] * rb, rb);
		rows_out++;
	}
	metrics_counter_add(r->s->m.update_rows, rows_out);
	reply_encoded(r, buf, cap, len);
}

static void do_update(struct req *r, struct srv_table *t)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;
	struct srv_worker *w = r->w;
	const bool create = k->flags & PROTO_KF_CREATE;
	const struct optim_params *op = &t->spec.optim;
	struct optim_params lr_op;
	uint32_t n = k->n, m, dim = t->spec.dim;
	struct proto_image *im = NULL;
	uint8_t *irows = NULL;
	int32_t *st, *out;
	uint64_t *keys, t1;
	uint32_t *idx;
	float *g;

	if (srv_scratch(&w->keys, &w->keys_cap, (size_t)n * 8 + 8) ||
	    srv_scratch(&w->idx_map, &w->idx_cap, (size_t)n * 4 + 4) ||
	    srv_scratch(&w->coalesce, &w->coalesce_cap,
			optim_coalesce_scratch_size(n)) ||
	    row_scratch(w, t) ||
	    !(g = rows_to_f32(w, k->rows, n, dim, k->dtype)) ||
	    srv_scratch(&w->status, &w->status_cap, (size_t)n * 8 + 8)) {
		reply_error(r, r->op, -ENOMEM, "out of memory");
		return;
	}
	if ((k->flags & PROTO_KF_ROWS) &&
	    proto_images_reply_bytes(n, dim, t->spec.dtype) >
		    srv_reply_cap(r->c)) {
		reply_error(r, r->op, RS_E_TOOBIG, "the rows of %u keys do "
			    "not fit the client's receive buffer (%u bytes): "
			    "split the batch", n, srv_reply_cap(r->c));
		return;
	}
	if (k->flags & PROTO_KF_LR) {
		/* this request's learning rate (proto_decode() checked it is
		 * finite and >= 0); the table's lr is unchanged */
		lr_op = *op;
		lr_op.lr = k->lr;
		op = &lr_op;
	}
	keys = w->keys;
	idx = w->idx_map;
	st = w->status;
	out = st + n;
	proto_load_u64(keys, k->keys, n);
	t1 = trace_start_us(r->traced);
	m = optim_coalesce(keys, g, n, dim, keys, g, idx, w->coalesce);
	if ((k->flags & PROTO_KF_ROWS) &&
	    !(im = images_scratch(w, t, m, &irows))) {
		reply_error(r, r->op, -ENOMEM, "out of memory");
		return;
	}
	for (uint32_t j = 0; j < m; j++)
		st[j] = update_one(r, t, op, keys[j], g + (size_t)j * dim,
				   create, im ? &im[j] : NULL,
				   im ? irows + (size_t)j *
						    t->rgeom.payload_bytes
				      : NULL);
	for (uint32_t i = 0; i < n; i++)
		out[i] = st[idx[i]];
	trace_stage(r, "server.apply", t1, (uint64_t)n * dim * 4);
	atomic_fetch_add(&t->cnt.update_keys, n);
	if (im)
		reply_images(r, t, out, n, idx, im, irows);
	else
		reply_statuses(r, out, n);
}

static void do_put(struct req *r, struct srv_table *t)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;
	struct srv_worker *w = r->w;
	uint32_t n = k->n, dim = t->spec.dim;
	bool state_ready = false;
	uint64_t t1;
	int32_t *st;
	float *v;

	if (row_scratch(w, t) ||
	    !(v = rows_to_f32(w, k->rows, n, dim, k->dtype)) ||
	    srv_scratch(&w->status, &w->status_cap, (size_t)n * 4 + 4)) {
		reply_error(r, r->op, -ENOMEM, "out of memory");
		return;
	}
	st = w->status;
	t1 = trace_start_us(r->traced);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t key = proto_key_at(k->keys, i);
		const float *row = v + (size_t)i * dim;
		bool created = false;
		int ret;

		if (!all_finite(row, dim)) {
			st[i] = RS_E_INVAL;
			continue;
		}
		if (!row_f32_fits(&t->rgeom, row)) { /* fp16/bf16 range */
			st[i] = RS_E_OVERFLOW;
			continue;
		}
		if (!state_ready) {
			optim_init_state(&t->spec.optim, w->state, dim);
			state_ready = true;
		}
		ret = slab_insert(t->st, key, row, w->state, NULL);
		if (ret == 0)
			created = true;
		else if (ret == RS_E_EXISTS)
			ret = slab_put(t->st, key, row, &created);
		st[i] = ret ? ret : created ? PROTO_ST_CREATED : PROTO_ST_OK;
	}
	trace_stage(r, "server.apply", t1, (uint64_t)n * dim * 4);
	atomic_fetch_add(&t->cnt.put_keys, n);
	reply_statuses(r, st, n);
}

static void do_delete(struct req *r, struct srv_table *t)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;
	struct srv_worker *w = r->w;
	uint64_t t1;
	int32_t *st;

	if (srv_scratch(&w->status, &w->status_cap, (size_t)k->n * 4 + 4)) {
		reply_error(r, r->op, -ENOMEM, "out of memory");
		return;
	}
	st = w->status;
	t1 = trace_start_us(r->traced);
	for (uint32_t i = 0; i < k->n; i++) {
		int ret = slab_delete(t->st, proto_key_at(k->keys, i));

		st[i] = ret ? ret : PROTO_ST_OK;
	}
	trace_stage(r, "server.index", t1, (uint64_t)k->n * 8);
	atomic_fetch_add(&t->cnt.delete_keys, k->n);
	reply_statuses(r, st, k->n);
}

/* LOAD: rows of dim weights and the optimizer state, set as they are
 * (a restore): inserted, or overwriting the key's row and state. */
static void do_load(struct req *r, struct srv_table *t)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;
	struct srv_worker *w = r->w;
	uint32_t n = k->n, dim = t->spec.dim, width = k->dim;
	int32_t *st;
	float *v;

	if (!(v = rows_to_f32(w, k->rows, n, width, PROTO_DTYPE_FP32)) ||
	    srv_scratch(&w->status, &w->status_cap, (size_t)n * 4 + 4) ||
	    row_scratch(w, t)) {
		reply_error(r, r->op, -ENOMEM, "out of memory");
		return;
	}
	st = w->status;
	for (uint32_t i = 0; i < n; i++) {
		const float *row = v + (size_t)i * width;
		bool created;
		int ret;

		if (!all_finite(row, width)) {
			st[i] = RS_E_INVAL;
			continue;
		}
		if (!row_f32_fits(&t->rgeom, row)) {
			st[i] = RS_E_OVERFLOW;
			continue;
		}
		ret = slab_load_row(t->st, proto_key_at(k->keys, i), row,
				    width > dim ? row + dim : NULL, w->row,
				    w->state, &created);
		st[i] = ret ? ret : created ? PROTO_ST_CREATED : PROTO_ST_OK;
	}
	atomic_fetch_add(&t->cnt.put_keys, n);
	reply_statuses(r, st, n);
}

static void do_ckpt(struct req *r)
{
	const struct proto_ckpt_req *q = &r->m.u.ckpt_req;
	struct proto_ckpt_reply rep = { 0 };
	void *buf;
	int cap, len, ret = 0;

	switch (q->phase) {
	case PROTO_CKPT_FREEZE:
		ret = srv_ckpt_freeze(r->s, q->timeout_ms,
				      q->flags & PROTO_CKF_EPOCH ? q->epoch : 0);
		break;
	case PROTO_CKPT_DUMP:
		r->table = q->table;
		ret = srv_ckpt_dump(r->s, q, &rep);
		break;
	default:
		rep.paused_us = srv_ckpt_thaw(r->s);
		break;
	}
	if (ret) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		return;
	}
	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = proto_enc_ckpt_reply(buf, (size_t)cap, &r->rh, &rep);
	reply_send(r, len);
}

static void do_keyed_body(struct req *r)
{
	struct srv_table *t;

	if (r->op == PROTO_OP_GET || r->op == PROTO_OP_GET_OR_INIT) {
		do_get(r);
		return;
	}
	if (!statuses_fit(r, r->nkeys))
		return;
	t = keyed_table(r);
	if (!t)
		return;
	switch (r->op) {
	case PROTO_OP_UPDATE:
		do_update(r, t);
		break;
	case PROTO_OP_PUT:
		do_put(r, t);
		break;
	case PROTO_OP_LOAD:
		do_load(r, t);
		break;
	default:
		do_delete(r, t);
		break;
	}
	srv_table_put(t);
}

/* ---- replication (srv_repl.c) ---- */

/* Status i of the keyed reply built in the worker's reply buffer. */
static uint8_t *reply_status_at(struct req *r, uint32_t i)
{
	return (uint8_t *)r->w->reply + PROTO_HDR_BYTES + 16 + 4 * (size_t)i;
}

/* Does key i's outcome change the row (what the backups must get)? */
static bool changed_row(uint8_t op, int32_t st)
{
	if (op == PROTO_OP_GET_OR_INIT)
		return st == PROTO_ST_CREATED;
	return st >= 0;
}

/* Queue the results of the write in the reply buffer for the backups:
 * each changed key's row and state as they are now (s->repl.order held,
 * so no other replicated write has touched them since). */
static int repl_capture(struct req *r, struct srv_repl_req *q,
			const struct srv_once_tag *tag)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;
	struct srv_worker *w = r->w;
	struct srv_table *t = srv_table_get(&r->s->tables, k->table_id);
	uint32_t width;
	float *buf;
	int ret = 0;

	if (!t)
		return RS_E_NOTFOUND;
	width = t->spec.dim + t->state_floats;
	if (srv_scratch(&w->tmp, &w->tmp_cap, (size_t)width * 4 + 4)) {
		srv_table_put(t);
		return -ENOMEM;
	}
	buf = w->tmp;
	memset(buf, 0, (size_t)width * 4);
	/* rows this write evicted to make room: deleted on the backups
	 * first (docs/eviction.md) */
	for (uint32_t i = 0; !ret && i < r->evicted_n; i++) {
		uint64_t key = ((const uint64_t *)w->evicted)[i];
		uint32_t row;

		if (slab_lookup(t->st, key, &row) == RS_E_NOTFOUND)
			ret = srv_repl_record(r->s, q, &t->spec, width,
					      key, true, buf, NULL,
					      PROTO_ST_OK);
	}
	for (uint32_t i = 0; !ret && i < k->n; i++) {
		int32_t st = (int32_t)le_ld32(reply_status_at(r, i));
		uint64_t key = proto_key_at(k->keys, i);
		bool del = r->op == PROTO_OP_DELETE;
		unsigned to[SRV_REPL_MAX_TO], nto;

		/* nothing to read for a key without a backup (r = 1) */
		if (!changed_row(r->op, st) ||
		    !(nto = srv_repl_targets(q, key, to)))
			continue;
		/* a key absent now (deleted, evicted by a later key of the
		 * batch, or not admitted) is a deletion on the backups */
		if (del || slab_read_record(t->st, key, buf)) {
			del = true;
			memset(buf, 0, (size_t)width * 4);
		}
		ret = srv_repl_record_to(q, to, nto, &t->spec, width, key,
					 del, buf, tag, st);
	}
	srv_table_put(t);
	return ret;
}

/* The backups did not take the write: every changed key fails with
 * RS_E_EPOCH (the client refreshes its configuration and retries), or
 * with RS_E_BUSY (a backup's table grows: the client resends after a
 * backoff) or RS_E_FULL (a backup has no room for the row: its table is
 * at its limit or cannot grow) when that is why. */
static void repl_fail_keys(struct req *r, int why)
{
	const uint32_t code = (uint32_t)(why == RS_E_BUSY || why == RS_E_FULL
						 ? why : RS_E_EPOCH);
	const struct proto_keys_req *k = &r->m.u.keys_req;
	size_t row_bytes = 0, rows_off;

	if (r->op == PROTO_OP_GET_OR_INIT) {
		const uint8_t *b = (uint8_t *)r->w->reply + PROTO_HDR_BYTES;

		row_bytes = (size_t)le_ld32(b + 4) * proto_dtype_size(b[8]);
	}
	rows_off = PROTO_HDR_BYTES + 16 + 4 * (size_t)k->n + (k->n & 1) * 4;
	for (uint32_t i = 0; i < k->n; i++) {
		uint8_t *sp = reply_status_at(r, i);

		if (!changed_row(r->op, (int32_t)le_ld32(sp)))
			continue;
		le_st32(sp, code);
		if (row_bytes)
			memset((uint8_t *)r->w->reply + rows_off +
				       i * row_bytes, 0, row_bytes);
	}
}

/* Exactly-once applies to the writes that are not idempotent or whose
 * late resend could undo a newer write: UPDATE, PUT, DELETE (a resent
 * GET_OR_INIT finds its row and returns it). */
static bool once_applies(const struct req *r)
{
	return (r->m.u.keys_req.flags & PROTO_KF_ONCE) &&
	       (r->op == PROTO_OP_UPDATE || r->op == PROTO_OP_PUT ||
		r->op == PROTO_OP_DELETE);
}

/* The write of an exactly-once call (s->repl.order held): keys the call
 * already applied here (a resend) get their recorded status and are not
 * applied again; the others run as usual and are recorded. The reply
 * (deferred) holds every key's status in request order. */
static void once_body(struct req *r, const struct srv_once_tag *tag)
{
	struct proto_keys_req *k = &r->m.u.keys_req;
	const struct proto_keys_req orig = *k;
	struct srv_worker *w = r->w;
	struct rs_server *s = r->s;
	struct srv_table *t = srv_table_get(&s->tables, k->table_id);
	size_t row_bytes = k->rows ? (size_t)k->dim *
					     proto_dtype_size(k->dtype) : 0;
	uint32_t n = k->n, m = 0, j = 0, tid;
	uint64_t *keys;
	int32_t *st;
	bool *found;
	uint8_t *fk, *fr;
	int ret;

	if (!t || (k->table_gen && k->table_gen != t->info.generation)) {
		srv_table_put(t);	/* the body answers the error */
		do_keyed_body(r);
		return;
	}
	tid = t->id;
	srv_table_put(t);
	if (srv_scratch(&w->once, &w->once_cap,
			(size_t)n * (8 + 4 + 1 + 8 + row_bytes) + 64)) {
		reply_error(r, r->op, -ENOMEM, "out of memory");
		return;
	}
	keys = w->once;
	st = (int32_t *)(keys + n);
	fk = (uint8_t *)(st + n) + (n & 1) * 4;	/* 8-aligned */
	fr = fk + 8 * (size_t)n;
	found = (bool *)(fr + row_bytes * n);
	proto_load_u64(keys, k->keys, n);
	ret = srv_once_lookup(&s->repl.once, tag, tid, keys, n, st, found);
	if (ret) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (found[i])
			continue;
		memcpy(fk + 8 * (size_t)m, (const uint8_t *)k->keys + 8 * i,
		       8);
		if (row_bytes)
			memcpy(fr + row_bytes * m,
			       (const uint8_t *)k->rows + row_bytes * i,
			       row_bytes);
		m++;
	}
	if (m == n) {
		do_keyed_body(r);	/* nothing of it was applied before */
	} else if (m) {
		k->keys = fk;
		k->rows = row_bytes ? fr : NULL;
		k->n = m;
		do_keyed_body(r);
		*k = orig;
	}
	if (r->failed)
		return;
	for (uint32_t i = 0; i < n; i++)
		if (!found[i])
			st[i] = r->deferred > 0 ? (int32_t)le_ld32(
				reply_status_at(r, j++)) : RS_E_DISCONNECTED;
	if (m != n) {
		r->deferred = 0;
		reply_statuses(r, st, n);	/* deferred: every key */
	}
	ret = srv_once_add(&s->repl.once, tag, tid, keys, st, n);
	if (ret)	/* out of memory only: the bounds were checked */
		srv_warn_peer("exactly-once: %s: resends of this call may be "
			     "applied again", rs_errormsg());
}

/* Collect the keys the write evicts (at most 4 per key of the batch and
 * a margin: an insert evicts one victim, a few if others race for them;
 * past that the write fails rather than leave a backup with a row the
 * primary dropped). */
static int evicted_sink_begin(struct req *r, struct srv_repl_req *q)
{
	struct srv_worker *w = r->w;
	uint32_t cap = SRV_EVICTED_PER_KEY * r->m.u.keys_req.n +
		       SRV_EVICTED_SPARE;

	r->evicted_n = 0;
	if (srv_scratch(&w->evicted, &w->evicted_cap, (size_t)cap * 8))
		return -ENOMEM;
	r->sink = (struct slab_ev_sink){ .keys = w->evicted, .cap = cap,
					 .accept = srv_repl_is_primary,
					 .arg = q };
	slab_ev_sink_set(&r->sink);
	return 0;
}

static int evicted_sink_end(struct req *r)
{
	slab_ev_sink_set(NULL);
	r->evicted_n = r->sink.n;
	if (r->sink.overflow)
		return rs_seterr(RS_E_EPOCH, "this write evicted more rows "
				 "than can be shipped to the backups");
	return 0;
}

/* A keyed request in a cluster (or naming an epoch). */
static void do_keyed_cluster(struct req *r)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;
	const bool write = r->op != PROTO_OP_GET;
	struct rs_server *s = r->s;
	struct srv_once_tag tag = { 0 };
	struct srv_repl_req q;
	int ret;

	if (!s->repl.on) {
		reply_error(r, r->op, RS_E_EPOCH, "this node is not a member "
			    "of a cluster: requests name no epoch");
		return;
	}
	if (!(k->flags & PROTO_KF_EPOCH)) {
		if (write) {
			reply_error(r, r->op, RS_E_EPOCH, "this node is a "
				    "member of a replicated cluster: a write "
				    "names the configuration epoch (CONFIG)");
			return;
		}
		do_keyed_body(r);	/* an inspection read, unfenced */
		return;
	}
	ret = srv_repl_enter(s, &q, k->epoch, k->keys, k->n, false);
	if (ret) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		srv_repl_exit(s, &q);
		return;
	}
	if (!write) {
		do_keyed_body(r);
		srv_repl_exit(s, &q);
		return;
	}
	if ((ret = srv_repl_hold(s, &q, k->keys, k->n))) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		srv_repl_exit(s, &q);
		return;
	}
	if (!(q.slot = srv_wait_reserve(s))) {
		reply_error(r, r->op, RS_E_BUSY, "%u requests of this node "
			    "wait for their backups: retry", SRV_WAITS_MAX);
		srv_repl_exit(s, &q);
		return;
	}
	r->defer = true;
	tag.client = k->client;
	tag.seq = k->seq;
	tag.done_below = k->done_below;
	tag.cred = r->c->key;
	pthread_mutex_lock(&s->repl.order);
	ret = evicted_sink_begin(r, &q);
	if (ret) {
		pthread_mutex_unlock(&s->repl.order);
		r->defer = false;
		reply_error(r, r->op, ret, "out of memory");
		srv_repl_exit(s, &q);
		return;
	}
	if (once_applies(r))
		once_body(r, &tag);
	else
		do_keyed_body(r);
	ret = evicted_sink_end(r);
	if (!ret)
		ret = r->deferred > 0 && !r->failed ? repl_capture(r, &q, &tag)
						    : 0;
	pthread_mutex_unlock(&s->repl.order);
	if (!ret && srv_repl_pending(&q)) {
		/* applied and queued: out of the write pause before the wait,
		 * so a growth here never waits for a backup that grows too
		 * (srv_grow.c); the table's name outlives its wrapper */
		if (r->table) {
			snprintf(r->tname, sizeof(r->tname), "%s", r->table);
			r->table = r->tname;
		}
		srv_write_leave(s);
		r->left = true;
		ret = srv_repl_wait(s, &q);
	}
	r->defer = false;
	/* rows this write evicted are gone here whatever its backups did:
	 * their deletions are sent again until the backups have them (the
	 * client resends its own keys, nobody else these) */
	if (ret && r->evicted_n)
		srv_evr_add(s, k->table_id, r->w->evicted, r->evicted_n);
	if (ret && r->deferred > 0 && !r->failed)
		repl_fail_keys(r, ret);
	if (r->deferred > 0)
		reply_send(r, r->deferred);
	srv_repl_exit(s, &q);
}

static void do_keyed(struct req *r)
{
	const struct proto_keys_req *k = &r->m.u.keys_req;

	r->nkeys = k->n;
	metrics_histogram_observe(r->s->m.batch[r->rt], r->nkeys);
	if (RS_UNLIKELY(r->s->repl.on || (k->flags & PROTO_KF_EPOCH)))
		do_keyed_cluster(r);
	else
		do_keyed_body(r);
}

/* CONFIG: the configuration this node follows. */
static void do_config(struct req *r)
{
	void *buf;
	int cap, len;

	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = srv_repl_config(r->s, buf, (size_t)cap, &r->rh);
	reply_encoded(r, buf, cap, len);
}

/* COPY: the rows asked for go to the requester (srv_copy.c). */
static void do_copy(struct req *r)
{
	struct proto_copy_reply rep;
	void *buf;
	int cap, len, ret;

	r->table = r->m.u.copy_req.table;
	ret = srv_copy_serve(r->s, &r->m.u.copy_req, &rep);
	if (ret) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		return;
	}
	r->nkeys = (uint32_t)rep.copied;
	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = proto_enc_copy_reply(buf, (size_t)cap, &r->rh, &rep);
	reply_encoded(r, buf, cap, len);
}

/* The completions a REPL carries, recorded as this node's own: runs of
 * records of one call go in one batch. Out of memory fails the whole
 * REPL, and so the write at its primary; records over a bound are
 * dropped (srv_once.c), never failing the other clients' writes the
 * REPL carries. */
static int repl_record_once(struct req *r, const struct proto_repl_req *m,
			    uint32_t tid, const int32_t *applied)
{
	struct srv_worker *w = r->w;
	uint64_t *keys;
	int32_t *st;
	uint32_t i = 0;
	int ret = 0;

	if (srv_scratch(&w->once, &w->once_cap, (size_t)m->n * 12 + 16)) {
		reply_error(r, r->op, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	keys = w->once;
	st = (int32_t *)(keys + m->n);
	while (ret >= 0 && i < m->n) {
		struct srv_once_tag tag = {
			.client = proto_key_at(m->clients, i),
			.seq = proto_key_at(m->seqs, i),
			.done_below = proto_key_at(m->done_below, i),
			.cred = proto_u32_at(m->creds, i),
		};
		uint32_t j = i, cnt = 0;

		for (; j < m->n && proto_key_at(m->clients, j) == tag.client &&
		       proto_key_at(m->seqs, j) == tag.seq &&
		       proto_u32_at(m->creds, j) == tag.cred; j++) {
			if (!tag.client || applied[j] < 0)
				continue;
			keys[cnt] = proto_key_at(m->keys, j);
			st[cnt++] = proto_status_at(m->statuses, j);
		}
		if (cnt)
			ret = srv_once_record(&r->s->repl.once, &tag, tid,
					      keys, st, cnt);
		if (ret > 0)	/* RATE-LIMITED */
			srv_log_peer("exactly-once: %u records of client "
				     "%016" PRIx64 " (key %u) from a peer "
				     "not kept: its key holds twice its "
				     "share here, or the node its bound; "
				     "after a failover to this node a "
				     "resend of its call %" PRIu64 " may "
				     "be applied again", cnt, tag.client,
				     tag.cred, tag.seq);
		i = j;
	}
	if (ret < 0)
		reply_error(r, r->op, ret, "%s", rs_errormsg());
	return ret < 0 ? ret : 0;
}

/* How many ROW records of m name a key t does not hold (inserts). */
static uint32_t repl_inserts(struct srv_table *t,
			     const struct proto_repl_req *m)
{
	const uint8_t *kinds = m->kinds;
	uint32_t n = 0, row;

	for (uint32_t i = 0; i < m->n; i++)
		n += kinds[i] == PROTO_REPL_ROW &&
		     slab_lookup(t->st, proto_key_at(m->keys, i), &row) ==
			     RS_E_NOTFOUND;
	return n;
}

/* The test hook RS_TEST_REPL_HOLD=FILE: the first REPL that arrives
 * while FILE exists waits, before it is checked, until FILE is removed
 * (at most 20 s): its sender times out, sends the next REPL on a new
 * connection, and the held one comes after it (test_repl_fire, steps
 * 3 and 4). Then FILE.done says it went on; FILE made again holds the
 * next. */
static void repl_test_hold(void)
{
	static atomic_bool taken;
	static _Atomic int set;	/* 0: not looked at, 1: no, 2: yes */
	const char *f;
	char done[4200];

	if (RS_LIKELY(atomic_load_explicit(&set, memory_order_relaxed) == 1))
		return;
	f = getenv("RS_TEST_REPL_HOLD");
	atomic_store(&set, f && *f ? 2 : 1);
	if (!f || !*f || access(f, F_OK) || atomic_exchange(&taken, true))
		return;
	srv_log("repl: test hold: a REPL waits while %s exists", f);
	for (unsigned i = 0; i < 400 && !access(f, F_OK); i++)
		usleep(50000);
	srv_log("repl: test hold: the REPL goes on");
	snprintf(done, sizeof(done), "%s.done", f);
	close(open(done, O_CREAT | O_WRONLY, 0644));
	atomic_store(&taken, false);	/* FILE again: the next one waits */
}

/* The test hook RS_TEST_REPL_REFUSE_DELETES=FILE: while FILE exists a
 * REPL that carries a deletion is refused whole (RS_E_TIMEOUT), as by a
 * backup that did not take it in time; test_repl_ttl_resend makes the
 * primaries' expiries fail so with it. */
static const char *repl_refuse_file;
static pthread_once_t repl_refuse_once = PTHREAD_ONCE_INIT;

static void repl_refuse_read(void)
{
	repl_refuse_file = getenv("RS_TEST_REPL_REFUSE_DELETES");
}

static bool repl_test_refuse(const struct proto_repl_req *m)
{
	const char *f;

	pthread_once(&repl_refuse_once, repl_refuse_read);
	f = repl_refuse_file;
	if (!f || !*f || access(f, F_OK))
		return false;
	for (uint32_t i = 0; i < m->n; i++)
		if (((const uint8_t *)m->kinds)[i] == PROTO_REPL_DELETED)
			return true;
	return false;
}

/* REPL: a primary's rows and deletions for this node as their backup.
 * While a table of the node grows the whole REPL is answered RS_E_BUSY
 * (its sender resends it); one whose inserts would pass the fill
 * threshold of a table that grows starts the growth (srv_grow.c). */
static void do_repl(struct req *r)
{
	const struct proto_repl_req *m = &r->m.u.repl_req;
	struct srv_worker *w = r->w;
	struct rs_server *s = r->s;
	struct srv_repl_req q;
	struct srv_table *t = NULL;
	struct srv_from *from = NULL;
	bool entered = false, applied = false;
	uint32_t ins;
	int32_t *st;
	float *v;
	int ret;

	r->nkeys = m->n;
	r->table = m->table;
	if (!s->repl.on) {
		reply_error(r, r->op, RS_E_EPOCH, "this node is not a member "
			    "of a cluster");
		return;
	}
	if (!m->from_inc) {
		reply_error(r, r->op, RS_E_PROTO, "REPL without its sender "
			    "(header flag from): a node of an older build");
		return;
	}
	repl_test_hold();
	ret = srv_repl_enter(s, &q, m->epoch, m->keys, m->n, true);
	if (!ret)	/* from the keys' primary, in its order */
		ret = srv_repl_from_begin(s, &q, m->from_inc, m->from_seq,
					  &from);
	if (ret) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		goto out;
	}
	if (RS_UNLIKELY(repl_test_refuse(m))) {
		reply_error(r, r->op, RS_E_TIMEOUT, "deletions refused (test "
			    "hook RS_TEST_REPL_REFUSE_DELETES)");
		goto out;
	}
	if (!statuses_fit(r, m->n))
		goto out;
	if (!(t = srv_table_get_name(&s->tables, m->table))) {
		srv_repl_table_missing(s); /* a create it missed: fetch it */
		reply_error(r, r->op, RS_E_NOTFOUND, "table '%s': no such "
			    "table on this node", m->table);
		goto out;
	}
	if (m->table_ident && t->spec.ident &&
	    m->table_ident != t->spec.ident) {
		/* sent for a table dropped since, or one this node created
		 * from a client while it joined: a joiner takes its members'
		 * (srv_copy.c, dir_from) */
		atomic_fetch_add(&s->repl.other_table_repls, 1);
		srv_repl_table_missing(s);	/* (an active node: nothing) */
		reply_error(r, r->op, RS_E_STALE, "table '%s': the REPL is "
			    "for the table of identity %016" PRIx64 ", this "
			    "node's is %016" PRIx64 " (dropped and created "
			    "again)", m->table, m->table_ident, t->spec.ident);
		goto out;
	}
	if (m->width != t->spec.dim + t->state_floats) {
		reply_error(r, r->op, RS_E_DIM, "table '%s': records of %u "
			    "floats, the table has %u weights and %u state",
			    m->table, m->width, t->spec.dim, t->state_floats);
		goto out;
	}
	if (!(entered = srv_grow_enter(s))) {
		reply_error(r, r->op, RS_E_BUSY, "writes are paused for a "
			    "table's growth: retry");
		goto out;
	}
	if (t->spec.grow_log2 && (ins = repl_inserts(t, m)) &&
	    srv_grow_due(t, ins)) {
		r->nkeys = ins;
		r->grow_id = t->id;
		r->grow_gen = t->info.generation;
		reply_error(r, r->op, RS_E_BUSY, "%s", grow_busy_msg);
		goto out;
	}
	if (!(v = rows_to_f32(w, m->rows, m->n, m->width, PROTO_DTYPE_FP32)) ||
	    srv_scratch(&w->status, &w->status_cap, (size_t)m->n * 4 + 4) ||
	    row_scratch(w, t)) {
		reply_error(r, r->op, -ENOMEM, "out of memory");
		goto out;
	}
	st = w->status;
	slab_ev_replica_mode(true); /* the primary decided the evictions */
	for (uint32_t i = 0; i < m->n; i++) {
		const uint8_t *kinds = m->kinds;
		const float *row = v + (size_t)i * m->width;
		uint64_t key = proto_key_at(m->keys, i);
		bool created = false;

		if (kinds[i] == PROTO_REPL_DELETED) {
			ret = slab_delete(t->st, key);
		} else if (!all_finite(row, m->width)) {
			ret = RS_E_INVAL;
		} else if (!row_f32_fits(&t->rgeom, row)) {
			ret = RS_E_OVERFLOW;
		} else {
			ret = slab_load_row(t->st, key, row,
					    t->state_floats ? row + t->spec.dim
							    : NULL,
					    w->row, w->state, &created);
		}
		st[i] = ret ? ret : created ? PROTO_ST_CREATED : PROTO_ST_OK;
	}
	slab_ev_replica_mode(false);
	applied = true;
	if (repl_record_once(r, m, t->id, st))
		goto out;
	atomic_fetch_add(&s->repl.applied, m->n);
	/* received although every worker waits for its own backups: the
	 * cross wait of two nodes that srv_wait_begin() resolves */
	if (atomic_load(&s->waiting) >= s->cfg.workers)
		atomic_fetch_add(&s->repl.repls_all_waiting, 1);
	reply_statuses(r, st, m->n);
out:
	srv_repl_from_done(from, m->from_seq, applied);
	if (entered)
		srv_write_leave(s);
	if (t)
		srv_table_put(t);
	srv_repl_exit(s, &q);
}

/* ---- entry ---- */

/* A message that did not decode: see the head comment. */
static void reply_undecodable(struct req *r, const void *msg, size_t len,
			      int code)
{
	const uint8_t *p = msg;
	char err[PROTO_ERRMSG_MAX + 1];
	bool sound = len >= PROTO_HDR_BYTES && le_ld32(p) == PROTO_MAGIC &&
		     p[4] == PROTO_VERSION && p[5] > 0 &&
		     p[5] < PROTO_OP_COUNT;

	snprintf(err, sizeof(err), "%s", rs_errormsg());
	srv_log_peer("connection %" PRIu64 "%s%s: bad message of %zu bytes: "
		     "%s", r->c->id, r->c->peer[0] ? " from " : "", r->c->peer,
		     len, err);
	r->rt = SRV_RT_BAD;
	metrics_counter_add(r->s->m.requests[SRV_RT_BAD], 1);
	if (sound) {
		r->rh.req_id = r->m.hdr.req_id;
		r->rh.trace_id = r->m.hdr.trace_id;
		r->rh.flags = r->m.hdr.flags & PROTO_F_TRACE;
		reply_error(r, p[5], code, "%s", err);
	} else {
		memset(&r->rh, 0, sizeof(r->rh));
		reply_error(r, PROTO_OP_HELLO, RS_E_PROTO, "%s", err);
	}
}

/* The automatic growth a request asked for (grow_first). */
static void grow_now(struct req *r)
{
	struct srv_table *t = srv_table_get(&r->s->tables, r->grow_id);
	char name[PROTO_NAME_MAX + 1];

	if (!t)
		return;
	memcpy(name, t->spec.name, sizeof(name));
	srv_table_put(t);
	if (srv_table_grow(&r->s->tables, name, r->nkeys, r->grow_gen, NULL))
		srv_warn_peer("table '%s': automatic growth: %s", name,
			     rs_errormsg());
}

/* TABLE_GROW: grow a table by command (admin). At a cluster member it is
 * fenced like a create (table_fence()), and the growth runs with the read
 * side of the configuration lock held: a joiner that reads this node's
 * directory in a later epoch sees the grown capacity, and one that a
 * client's call missed is in the epoch the client redoes it in. A new
 * configuration is adopted after the growth (which pauses the node's
 * writes anyway). */
static void do_grow(struct req *r)
{
	const struct proto_table_grow *g = &r->m.u.table_grow;
	struct proto_table_info info;
	struct srv_repl_req q;
	void *buf;
	int cap, len, ret;

	r->table = g->name;
	if (!table_fence(r, &q))
		return;
	ret = srv_table_grow(&r->s->tables, g->name, g->capacity, 0, &info);
	srv_repl_exit(r->s, &q);
	if (ret) {
		reply_error(r, r->op, ret, "%s", rs_errormsg());
		return;
	}
	cap = reply_buf(r, &buf);
	if (cap < 0)
		return;
	len = proto_enc_table_grow_reply(buf, (size_t)cap, &r->rh, &info);
	reply_encoded(r, buf, cap, len);
}

/* Requests that change rows or tables: paused by a checkpoint. */
static bool is_write(uint8_t op)
{
	return op == PROTO_OP_PUT || op == PROTO_OP_UPDATE ||
	       op == PROTO_OP_DELETE || op == PROTO_OP_GET_OR_INIT ||
	       op == PROTO_OP_LOAD || op == PROTO_OP_TABLE_CREATE ||
	       op == PROTO_OP_TABLE_DROP;
}

void srv_handle(struct srv_worker *w, struct srv_conn *c, const void *msg,
		size_t len)
{
	struct rs_server *s = w->srv;
	struct req r;
	uint64_t end_ns;
	bool writes;
	int ret;

	memset(&r, 0, sizeof(r));
	r.w = w;
	r.c = c;
	r.s = s;
	r.t0_ns = now_ns();
	ret = proto_decode(msg, len, &s->cfg.limits, &r.m);
	if (ret) {
		reply_undecodable(&r, msg, len, ret);
		return;
	}
	r.op = r.m.hdr.opcode;
	r.rt = rt_of(r.op);
	r.rh.req_id = r.m.hdr.req_id;
	r.rh.trace_id = r.m.hdr.trace_id;
	r.rh.flags = r.m.hdr.flags & PROTO_F_TRACE;
	r.traced = r.m.hdr.trace_id &&
		   trace_wanted(r.m.hdr.trace_id,
				r.m.hdr.flags & PROTO_F_TRACE);
	metrics_counter_add(s->m.requests[r.rt], 1);
	if (r.m.hdr.flags & PROTO_F_REPLY) {
		reply_error(&r, r.op, RS_E_PROTO, "%s: a reply sent to the "
			    "node", proto_op_name(r.op));
		return;
	}
	if (RS_UNLIKELY(!auth_role_allows(c->role, r.op))) {
		reply_error(&r, r.op, RS_E_PERM, "needs role '%s', this "
			    "connection's credentials are '%s'",
			    auth_role_name(auth_role_needed(r.op)),
			    auth_role_name(c->role));
		return;
	}
	writes = is_write(r.op);
	if (writes && !srv_write_enter(s)) {
		reply_error(&r, r.op, RS_E_BUSY, "writes are paused for %s: "
			    "retry", atomic_load(&s->ckpt.frozen) &
			    SRV_FROZEN_GROW ? "a table's growth" :
			    "a checkpoint");
		return;
	}
	switch (r.op) {
	case PROTO_OP_HELLO:
		do_hello(&r);
		break;
	case PROTO_OP_TABLE_CREATE:
		do_create(&r);
		break;
	case PROTO_OP_TABLE_DROP:
		do_drop(&r);
		break;
	case PROTO_OP_TABLE_DIR:
		do_dir(&r);
		break;
	case PROTO_OP_STATS:
		do_stats(&r);
		break;
	case PROTO_OP_CKPT:
		do_ckpt(&r);
		break;
	case PROTO_OP_CONFIG:
		do_config(&r);
		break;
	case PROTO_OP_REPL:
		do_repl(&r);
		break;
	case PROTO_OP_COPY:
		do_copy(&r);
		break;
	case PROTO_OP_TABLE_GROW:
		do_grow(&r);
		break;
	default:
		do_keyed(&r);
		break;
	}
	if (writes && !r.left)
		srv_write_leave(s);
	if (RS_UNLIKELY(r.grow_gen))
		grow_now(&r);
	end_ns = r.tpost_ns ? r.tpost_ns : now_ns();
	metrics_histogram_observe(s->m.duration[r.rt], end_ns - r.t0_ns);
	trace_span(&r, "server.total", r.t0_ns / 1000u,
		   (end_ns - r.t0_ns) / 1000u, len);
}
