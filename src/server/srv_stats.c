/*
 * srv_stats.c - the memory node's counters: registered as rs_* metrics
 * (src/trace/metrics.h; Prometheus on config "metrics_port") and returned
 * by the STATS RPC, from the same series, so both report the same numbers.
 *
 * Node series (names in metrics.h):
 *   rs_requests_total{type}          requests handled, per RPC type
 *                                    (type "bad": undecodable messages)
 *   rs_request_errors_total{type}    requests answered with an error reply
 *   rs_request_duration_seconds{type} handling time (decode to reply post)
 *   rs_batch_keys{type}              keys per keyed request (its _sum is
 *                                    the keys asked for, per type)
 *   rs_keys_served_total             keys found or created by GET requests
 *   rs_bytes_served_total            reply bytes sent
 *   rs_update_rows_returned_total    rows UPDATE replies carried back
 *                                    (PROTO_KF_ROWS: clients' row caches)
 *   rs_optimizer_apply_seconds{optimizer} one optimizer step on one row
 *   rs_connections                   clients connected now
 *   rs_rpc_queue_depth               requests being handled now
 *   rs_registered_memory_bytes       bytes registered for REMOTE_READ
 *   rs_cq_spin_seconds_total, rs_cq_blocked_seconds_total,
 *   rs_cq_wakeups_total              adaptive completion waiting (the
 *                                    listener's receive side + every
 *                                    connection's send side)
 *   rs_process_*, rs_build_info      metrics_register_process()
 * Table series: rs_table_rows{table}, rs_table_bytes{table},
 * rs_index_fill_ratio{table} (read when rendered).
 *
 * STATS entries (docs/server.md lists them): node entries carry table_id
 * PROTO_NO_TABLE ("tables", "rows", "requests", "get_keys", ...,
 * "cpu_user_us", "mem_registered", "requests.<type>", "errors.<type>"),
 * table entries the table id ("rows", "capacity", "get_keys", ...).
 *
 * Concurrency: counters are lock-free; callback series take the locks of
 * what they read (conns_lock, tables.lock) while the registry lock is held
 * (lock order: registry -> conns_lock / tables.lock; nothing holding those
 * two calls into the registry).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/netcut.h"
#include "server/srv_internal.h"
#include "trace/trace.h"

static const char *const rt_names[SRV_RT_COUNT] = {
	[SRV_RT_HELLO] = "hello",	 [SRV_RT_CREATE] = "table_create",
	[SRV_RT_DROP] = "table_drop",	 [SRV_RT_DIR] = "table_dir",
	[SRV_RT_GET] = "get",		 [SRV_RT_GET_OR_INIT] = "get_or_init",
	[SRV_RT_PUT] = "put",		 [SRV_RT_UPDATE] = "update",
	[SRV_RT_DELETE] = "delete",	 [SRV_RT_STATS] = "stats",
	[SRV_RT_CKPT] = "checkpoint",	 [SRV_RT_LOAD] = "load",
	[SRV_RT_CONFIG] = "config",	 [SRV_RT_REPL] = "repl",
	[SRV_RT_COPY] = "copy",		 [SRV_RT_GROW] = "table_grow",
	[SRV_RT_BAD] = "bad",
};

const char *srv_req_type_name(unsigned rt)
{
	return rt < SRV_RT_COUNT ? rt_names[rt] : "?";
}

/* ---- callback series ---- */

static void cq_totals(struct rs_server *s, struct rv_stats *sum)
{
	struct rv_stats st;

	memset(sum, 0, sizeof(*sum));
	if (s->l)
		rv_listener_stats(s->l, sum);
	pthread_mutex_lock(&s->conns_lock);
	for (struct srv_conn *c = s->conns; c; c = c->next) {
		/* an undelivered conn's rv_conn is rv's (it frees it if the
		 * conn fails before CONNECTED): not ours to read */
		if (!c->delivered)
			continue;
		rv_conn_stats(c->rc, &st);
		sum->spin_ns += st.spin_ns;
		sum->block_ns += st.block_ns;
		sum->wakeups += st.wakeups;
	}
	sum->spin_ns += s->closed_cq.spin_ns;
	sum->block_ns += s->closed_cq.block_ns;
	sum->wakeups += s->closed_cq.wakeups;
	pthread_mutex_unlock(&s->conns_lock);
}

static double rd_cq_spin(void *arg)
{
	struct rv_stats st;

	cq_totals(arg, &st);
	return (double)st.spin_ns / 1e9;
}

static double rd_cq_block(void *arg)
{
	struct rv_stats st;

	cq_totals(arg, &st);
	return (double)st.block_ns / 1e9;
}

static double rd_cq_wakeups(void *arg)
{
	struct rv_stats st;

	cq_totals(arg, &st);
	return (double)st.wakeups;
}

/* rv_listener_counters() fields, by the event label they are exported as
 * (metric rs_transport_events_total{event}, STATS "transport.<event>"). */
static const struct {
	const char *event;
	size_t off;
} transport_events[SRV_TRANSPORT_COUNT] = {
#define TR(ev, field) { ev, offsetof(struct rv_listener_counters, field) }
	TR("rejected_malformed", rej_malformed),
	TR("rejected_limits", rej_limits),
	TR("rejected_full", rej_full),
	TR("rejected_per_peer", rej_per_peer),
	TR("rejected_refused", rej_refused),
	TR("rejected_resources", rej_resources),
	TR("credit_overrun", credit_overruns),
	TR("protocol_error", proto_errors),
	TR("oversize", oversize),
	TR("keepalive_failure", ka_failures),
#undef TR
};

static uint64_t transport_value(struct rs_server *s, unsigned which)
{
	struct rv_listener_counters c;

	if (!s->l)
		return 0;
	rv_listener_counters(s->l, &c);
	return *(const uint64_t *)((const char *)&c +
				   transport_events[which].off);
}

static double rd_transport(void *arg)
{
	const struct srv_transport_arg *a = arg;

	return (double)transport_value(a->s, a->which);
}

static double rd_conns(void *arg)
{
	struct rs_server *s = arg;
	unsigned n;

	pthread_mutex_lock(&s->conns_lock);
	n = s->nconns;
	pthread_mutex_unlock(&s->conns_lock);
	return n;
}

static double rd_inflight(void *arg)
{
	return atomic_load(&((struct rs_server *)arg)->inflight);
}

static double rd_registered(void *arg)
{
	return (double)atomic_load(
		&((struct rs_server *)arg)->tables.registered_bytes);
}

static double rd_table_rows(void *arg)
{
	struct slab_table_stats st;

	slab_table_stats(((struct srv_table *)arg)->st, &st);
	return (double)st.live;
}

static double rd_table_bytes(void *arg)
{
	const struct srv_table *t = arg;

	return t->mr ? (double)t->mr->len : 0;
}

static double rd_table_fill(void *arg)
{
	struct slab_table_stats st;

	slab_table_stats(((struct srv_table *)arg)->st, &st);
	return st.index.fill;
}

static double rd_table_ev_cap(void *arg)
{
	struct srv_evict_counts e;

	srv_evict_counts(arg, &e);
	return (double)e.evicted_capacity;
}

static double rd_table_ev_ttl(void *arg)
{
	struct srv_evict_counts e;

	srv_evict_counts(arg, &e);
	return (double)e.evicted_ttl;
}

/* ---- set-up ---- */

#define TRY(expr)                                                      \
	do {                                                           \
		int try_ret_ = (expr);                                 \
		if (try_ret_ < 0)                                      \
			return try_ret_;                               \
	} while (0)

static int register_types(struct rs_server *s)
{
	struct srv_metrics *m = &s->m;

	for (unsigned i = 0; i < SRV_RT_COUNT; i++) {
		TRY(metrics_counter(m->reg, &m->requests[i], RS_M_REQUESTS,
				    "RPC requests handled by the node", 1,
				    "type", rt_names[i], NULL));
		TRY(metrics_counter(m->reg, &m->errors[i],
				    RS_M_REQUEST_ERRORS,
				    "RPC requests answered with an error", 1,
				    "type", rt_names[i], NULL));
		TRY(metrics_histogram(m->reg, &m->duration[i],
				      RS_M_REQUEST_DURATION,
				      "Time to handle one RPC request",
				      METRICS_BUCKETS_NS, "type",
				      rt_names[i], NULL));
		TRY(metrics_histogram(m->reg, &m->batch[i], RS_M_BATCH_KEYS,
				      "Keys per keyed RPC request",
				      METRICS_BUCKETS_COUNT, "type",
				      rt_names[i], NULL));
	}
	for (unsigned k = 0; k < 4; k++)
		TRY(metrics_histogram(m->reg, &m->apply[k],
				      RS_M_OPTIMIZER_APPLY,
				      "One optimizer step on one row",
				      METRICS_BUCKETS_NS, "optimizer",
				      optim_kind_name(k), NULL));
	return 0;
}

static int register_node(struct rs_server *s)
{
	struct srv_metrics *m = &s->m;

	TRY(metrics_counter(m->reg, &m->keys_served, RS_M_KEYS_SERVED,
			    "Keys found or created by GET RPCs", 1, NULL));
	TRY(metrics_counter(m->reg, &m->bytes_served, RS_M_BYTES_SERVED,
			    "Reply bytes sent", 1, NULL));
	TRY(metrics_counter(m->reg, &m->update_rows, RS_M_UPDATE_ROWS,
			    "Rows returned by UPDATE replies for clients' row "
			    "caches", 1, NULL));
	TRY(metrics_gauge_fn(m->reg, &m->conns, RS_M_CONNECTIONS,
			     "Client connections", rd_conns, s, NULL));
	TRY(metrics_counter(m->reg, &m->cut[SRV_CUT_NO_CREDIT],
			    RS_M_CONNS_CUT, "Connections cut off for breaking "
			    "the protocol", 1, "reason", "no_credit", NULL));
	TRY(metrics_counter(m->reg, &m->cut[SRV_CUT_OVERRUN], RS_M_CONNS_CUT,
			    "Connections cut off for breaking the protocol", 1,
			    "reason", "overrun", NULL));
	TRY(metrics_gauge_fn(m->reg, &m->queue_depth, RS_M_RPC_QUEUE_DEPTH,
			     "RPC requests being handled", rd_inflight, s,
			     NULL));
	TRY(metrics_gauge_fn(m->reg, &m->registered, RS_M_REGISTERED_BYTES,
			     "Bytes registered for one-sided READ",
			     rd_registered, s, NULL));
	TRY(metrics_counter_fn(m->reg, &m->cq_spin, RS_M_CQ_SPIN,
			       "Time spent polling completion queues",
			       rd_cq_spin, s, NULL));
	TRY(metrics_counter_fn(m->reg, &m->cq_block, RS_M_CQ_BLOCKED,
			       "Time spent blocked on completion channels",
			       rd_cq_block, s, NULL));
	TRY(metrics_counter_fn(m->reg, &m->cq_wakeups, RS_M_CQ_WAKEUPS,
			       "Wake-ups from completion channels",
			       rd_cq_wakeups, s, NULL));
	for (unsigned i = 0; i < SRV_TRANSPORT_COUNT; i++) {
		m->transport_arg[i].s = s;
		m->transport_arg[i].which = i;
		TRY(metrics_counter_fn(m->reg, &m->transport[i],
				       RS_M_TRANSPORT_EVENTS,
				       "Connection requests refused and "
				       "connections failed by the transport",
				       rd_transport, &m->transport_arg[i],
				       "event", transport_events[i].event,
				       NULL));
	}
	return metrics_register_process(m->reg);
}

/* ---- replication series (cluster members only) ---- */

enum { RM_EPOCH, RM_QUEUED, RM_TO_COPY, RM_COPIED, RM_FAILED, RM_HELD,
       RM_FREED, RM_REGRESSED, RM_EVDEL_RESENT, RM_EVDEL_PENDING, RM_EVDEL_DROPPED,
       RM_COUNT };
_Static_assert(RM_COUNT == SRV_REPL_METRICS, "one slot per series");

static double rd_repl(void *arg)
{
	const struct srv_repl_metric *a = arg;
	struct srv_repl_stats rs;
	struct srv_evr_counts ec;
	const uint64_t *v[RM_COUNT] = { &rs.epoch, &rs.queued, &rs.gained,
					&rs.copied_rows, &rs.failed_writes,
					&rs.held, &rs.freed_rows,
					&rs.regressed, &ec.resent,
					&ec.pending, &ec.dropped };

	if (a->which >= RM_EVDEL_RESENT) {
		srv_evr_counts(a->s, &ec);
		return (double)*v[a->which];
	}
	srv_repl_stats(a->s, &rs);
	return (double)*v[a->which];
}

static int register_repl(struct rs_server *s)
{
	static struct {
		const char *name, *help;
		bool counter;
	} const d[RM_COUNT] = {
		[RM_EPOCH] = { RS_M_REPL_EPOCH, "Configuration epoch the node "
			       "follows (a failover or a join raises it)",
			       false },
		[RM_QUEUED] = { RS_M_REPL_QUEUED, "Records waiting for a "
				"backup's acknowledgement (replication lag)",
				false },
		[RM_TO_COPY] = { RS_M_REPL_TO_COPY, "Key ranges this node "
				 "still has to copy in", false },
		[RM_COPIED] = { RS_M_REPL_COPIED, "Rows copied into this node "
				"(joining, re-replication)", true },
		[RM_FAILED] = { RS_M_REPL_FAILED, "Writes failed because a "
				"backup did not take them", true },
		[RM_HELD] = { RS_M_REPL_HELD, "Writes refused while the read "
			      "lease of a new primary ran", true },
		[RM_FREED] = { RS_M_REPL_FREED, "Rows of key ranges this node "
			       "no longer holds, freed", true },
		[RM_REGRESSED] = { RS_M_REPL_REGRESSED, "The configuration "
				   "epoch the coordination store went back "
				   "to (restored from an older snapshot): "
				   "failover stops until recstore-ctl "
				   "recover; 0: none", false },
		[RM_EVDEL_RESENT] = { RS_M_REPL_EVDEL_RESENT, "Deletions "
				      "of expired or evicted rows sent to "
				      "the backups again after a failed "
				      "REPL", true },
		[RM_EVDEL_PENDING] = { RS_M_REPL_EVDEL_PENDING, "Deletions "
				       "of expired or evicted rows a backup "
				       "did not take yet, to be resent",
				       false },
		[RM_EVDEL_DROPPED] = { RS_M_REPL_EVDEL_DROPPED, "Deletions "
				       "of expired or evicted rows not kept "
				       "for a resend (the list was full)",
				       true },
	};
	struct srv_metrics *m = &s->m;
	int ret = 0;

	for (unsigned i = 0; !ret && i < RM_COUNT; i++) {
		m->repl_arg[i] = (struct srv_repl_metric){ s, i };
		ret = d[i].counter
			? metrics_counter_fn(m->reg, &m->repl_c[i], d[i].name,
					     d[i].help, rd_repl,
					     &m->repl_arg[i], NULL)
			: metrics_gauge_fn(m->reg, &m->repl_g[i], d[i].name,
					   d[i].help, rd_repl, &m->repl_arg[i],
					   NULL);
	}
	return ret;
}

int srv_metrics_init(struct rs_server *s)
{
	struct srv_metrics *m = &s->m;
	int ret;

	ret = metrics_registry_new(&m->reg);
	if (ret)
		return ret;
	ret = register_types(s);
	if (!ret)
		ret = register_node(s);
	if (!ret && s->cfg.coord_endpoints)
		ret = register_repl(s);
	if (ret)
		return srv_err(ret, "metrics: %s", rs_errormsg());
	return 0;
}

int srv_metrics_serve(struct rs_server *s)
{
	const char *addr = s->cfg.metrics_addr[0] ? s->cfg.metrics_addr : NULL;
	int ret;

	if (!s->cfg.metrics_port)
		return 0;
	ret = metrics_http_start(s->m.reg, addr, (uint16_t)s->cfg.metrics_port,
				 &s->m.http);
	if (ret)
		return srv_err(ret, "metrics_port %u: %s", s->cfg.metrics_port,
				 rs_errormsg());
	return 0;
}

void srv_metrics_fini(struct rs_server *s)
{
	metrics_http_stop(&s->m.http);
	metrics_registry_delete(&s->m.reg);
}

void srv_metrics_table_add(struct rs_server *s, struct srv_table *t)
{
	struct metrics_registry *r = s->m.reg;

	if (!r)
		return;
	if (metrics_gauge_fn(r, &t->m_rows, RS_M_TABLE_ROWS,
			     "Live rows of a table", rd_table_rows, t, "table",
			     t->spec.name, NULL) ||
	    metrics_gauge_fn(r, &t->m_bytes, RS_M_TABLE_BYTES,
			     "Bytes of a table registered for READ",
			     rd_table_bytes, t, "table", t->spec.name, NULL) ||
	    metrics_gauge_fn(r, &t->m_fill, RS_M_INDEX_FILL,
			     "Occupied share of a table's index slots",
			     rd_table_fill, t, "table", t->spec.name, NULL) ||
	    (proto_evict_active(&t->spec.evict) &&
	     (metrics_gauge_fn(r, &t->m_ev_cap, RS_M_TABLE_EVICTIONS,
			       "Rows a table evicted, by cause",
			       rd_table_ev_cap, t, "table", t->spec.name,
			       "cause", "capacity", NULL) ||
	      metrics_gauge_fn(r, &t->m_ev_ttl, RS_M_TABLE_EVICTIONS,
			       "Rows a table evicted, by cause",
			       rd_table_ev_ttl, t, "table", t->spec.name,
			       "cause", "ttl", NULL))))
		srv_warn_peer("warning: metrics of table '%s': %s",
			     t->spec.name, rs_errormsg());
}

void srv_metrics_table_remove(struct rs_server *s, struct srv_table *t)
{
	struct metrics_registry *r = s->m.reg;

	if (!r)
		return;
	metrics_gauge_remove(r, &t->m_rows);
	metrics_gauge_remove(r, &t->m_bytes);
	metrics_gauge_remove(r, &t->m_fill);
	if (t->m_ev_cap)
		metrics_gauge_remove(r, &t->m_ev_cap);
	if (t->m_ev_ttl)
		metrics_gauge_remove(r, &t->m_ev_ttl);
}

/* ---- STATS ---- */

static int add(struct srv_stat_list *l, uint32_t table, const char *key,
	       uint64_t v)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 64;
		struct proto_stat *g = rs_realloc(l->v, cap * sizeof(*g));

		if (!g)
			return rs_seterr(-ENOMEM, "stats: out of memory");
		l->v = g;
		l->cap = cap;
	}
	l->v[l->n].table_id = table;
	snprintf(l->v[l->n].key, sizeof(l->v[l->n].key), "%s", key);
	l->v[l->n].value = v;
	l->n++;
	return 0;
}

static uint64_t hist_sum(const struct metrics_histogram *h)
{
	double v = metrics_histogram_sum(h);

	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

static int node_stats(struct rs_server *s, struct srv_stat_list *l,
		      uint64_t tables, uint64_t rows, uint64_t capacity)
{
	const uint32_t N = PROTO_NO_TABLE;
	struct srv_metrics *m = &s->m;
	uint64_t req = 0, err = 0, nconns, conns_total;
	struct rusage ru;
	struct rv_stats cq;
	struct slab_store_info si;
	char key[PROTO_NAME_MAX + 1];

	for (unsigned i = 0; i < SRV_RT_COUNT; i++) {
		req += metrics_counter_value(m->requests[i]);
		err += metrics_counter_value(m->errors[i]);
	}
	getrusage(RUSAGE_SELF, &ru);
	cq_totals(s, &cq);
	TRY(add(l, N, "tables", tables));
	TRY(add(l, N, "rows", rows));
	TRY(add(l, N, "capacity", capacity));
	TRY(add(l, N, "requests", req));
	TRY(add(l, N, "request_errors", err));
	TRY(add(l, N, "bad_messages",
		metrics_counter_value(m->requests[SRV_RT_BAD])));
	TRY(add(l, N, "get_keys", hist_sum(m->batch[SRV_RT_GET])));
	TRY(add(l, N, "get_or_init_keys",
		hist_sum(m->batch[SRV_RT_GET_OR_INIT])));
	TRY(add(l, N, "put_keys", hist_sum(m->batch[SRV_RT_PUT])));
	TRY(add(l, N, "update_keys", hist_sum(m->batch[SRV_RT_UPDATE])));
	TRY(add(l, N, "delete_keys", hist_sum(m->batch[SRV_RT_DELETE])));
	TRY(add(l, N, "keys_served", metrics_counter_value(m->keys_served)));
	TRY(add(l, N, "bytes_served",
		metrics_counter_value(m->bytes_served)));
	TRY(add(l, N, "update_rows_returned",
		metrics_counter_value(m->update_rows)));
	pthread_mutex_lock(&s->conns_lock);	/* both change under it */
	nconns = s->nconns;
	conns_total = s->conns_total;
	pthread_mutex_unlock(&s->conns_lock);
	TRY(add(l, N, "connections", nconns));
	TRY(add(l, N, "connections_total", conns_total));
	TRY(add(l, N, "requests_deferred", atomic_load(&s->deferred)));
	TRY(add(l, N, "checkpoint.pauses", atomic_load(&s->ckpt.pauses)));
	TRY(add(l, N, "checkpoint.paused_us",
		atomic_load(&s->ckpt.paused_us)));
	TRY(add(l, N, "checkpoint.busy_replies",
		atomic_load(&s->ckpt.busy)));
	TRY(add(l, N, "grow.count", atomic_load(&s->tables.grows)));
	TRY(add(l, N, "grow.rows", atomic_load(&s->tables.grow_rows)));
	TRY(add(l, N, "grow.us", atomic_load(&s->tables.grow_us)));
	TRY(add(l, N, "grow.failures",
		atomic_load(&s->tables.grow_refusals)));
	if (rs_netcut_enabled())	/* the test hook cut links (netcut.h) */
		TRY(add(l, N, "test.net_cuts", rs_netcut_count()));
	if (s->repl.on) {
		struct srv_repl_stats rs;

		srv_repl_stats(s, &rs);
		TRY(add(l, N, "repl.epoch", rs.epoch));
		TRY(add(l, N, "repl.active", rs.active));
		TRY(add(l, N, "repl.forwarded_writes", rs.forwarded_writes));
		TRY(add(l, N, "repl.failed_writes", rs.failed_writes));
		TRY(add(l, N, "repl.refused", rs.refused));
		TRY(add(l, N, "repl.applied_records", rs.applied));
		TRY(add(l, N, "repl.chunks_shipped", rs.chunks_shipped));
		TRY(add(l, N, "repl.chunks_failed", rs.chunks_failed));
		TRY(add(l, N, "repl.parallel_repls", rs.parallel));
		TRY(add(l, N, "repl.busy_repls", rs.busy_repls));
		TRY(add(l, N, "repl.busy_writes", rs.busy_writes));
		TRY(add(l, N, "repl.configs_while_adopting",
			rs.configs_adopting));
		TRY(add(l, N, "repl.repls_all_waiting", rs.repls_all_waiting));
		TRY(add(l, N, "repl.stale_repls", rs.stale_repls));
		TRY(add(l, N, "repl.foreign_repls", rs.foreign_repls));
		TRY(add(l, N, "repl.other_table_repls",
			rs.other_table_repls));
		TRY(add(l, N, "repl.recaptured_records", rs.recaptured));
		TRY(add(l, N, "repl.dropped_records", rs.dropped_records));
		TRY(add(l, N, "repl.queued_records", rs.queued));
		TRY(add(l, N, "repl.synced_epoch", rs.synced));
		TRY(add(l, N, "repl.ranges_to_copy", rs.gained));
		TRY(add(l, N, "repl.copied_rows", rs.copied_rows));
		TRY(add(l, N, "repl.copies_done", rs.copies_done));
		TRY(add(l, N, "repl.copy_failures", rs.copy_failures));
		TRY(add(l, N, "repl.unheld_ranges", rs.unheld_ranges));
		TRY(add(l, N, "repl.store_regressed", rs.regressed));
		TRY(add(l, N, "repl.tables_created", rs.tables_created));
		TRY(add(l, N, "repl.tables_dropped", rs.tables_dropped));
		TRY(add(l, N, "repl.freed_rows", rs.freed_rows));
		TRY(add(l, N, "repl.held_writes", rs.held));
		{
			struct srv_evr_counts ec;

			srv_evr_counts(s, &ec);
			TRY(add(l, N, "repl.evict_deletions_pending",
				ec.pending));
			TRY(add(l, N, "repl.evict_deletions_resent",
				ec.resent));
			TRY(add(l, N, "repl.evict_deletions_dropped",
				ec.dropped));
			TRY(add(l, N, "repl.evict_deletions_abandoned",
				ec.abandoned));
			TRY(add(l, N, "repl.evict_resend_failures",
				ec.failed_rounds));
		}
		{
			struct srv_once_counts oc;

			srv_once_stats(&s->repl.once, &oc);
			TRY(add(l, N, "once.clients", oc.clients));
			TRY(add(l, N, "once.records", oc.records));
			TRY(add(l, N, "once.deduplicated_keys",
				oc.deduplicated));
			TRY(add(l, N, "once.evicted_clients", oc.evicted));
			TRY(add(l, N, "once.obsolete_records", oc.obsolete));
			TRY(add(l, N, "once.forgotten_clients", oc.forgotten));
			TRY(add(l, N, "once.refused_resends", oc.refused));
			TRY(add(l, N, "once.credentials", oc.creds));
			TRY(add(l, N, "once.busy_requests", oc.busy));
			TRY(add(l, N, "once.dropped_records", oc.dropped));
			TRY(add(l, N, "once.refused_ahead", oc.ahead));
		}
	}
#ifdef RS_DEBUG_LOCKS
	TRY(add(l, N, "debug.dead_releases", atomic_load(&s->dead_releases)));
#endif
	TRY(add(l, N, "connections_cut",
		metrics_counter_value(m->cut[SRV_CUT_NO_CREDIT]) +
			metrics_counter_value(m->cut[SRV_CUT_OVERRUN])));
	for (unsigned i = 0; i < SRV_TRANSPORT_COUNT; i++) {
		snprintf(key, sizeof(key), "transport.%s",
			 transport_events[i].event);
		TRY(add(l, N, key, transport_value(s, i)));
	}
	TRY(add(l, N, "auth_accepted", atomic_load(&s->auth.accepted)));
	TRY(add(l, N, "auth_refused", srv_auth_refused(s)));
	TRY(add(l, N, "workers", s->nworkers));
	TRY(add(l, N, "workers_waiting", atomic_load(&s->waiting)));
	TRY(add(l, N, "spare_workers_started",
		atomic_load(&s->spares_started)));
	TRY(add(l, N, "waits_refused", atomic_load(&s->waits_refused)));
	TRY(add(l, N, "mem_registered",
		atomic_load(&s->tables.registered_bytes)));
	TRY(add(l, N, "cpu_user_us", (uint64_t)ru.ru_utime.tv_sec * 1000000 +
					     (uint64_t)ru.ru_utime.tv_usec));
	TRY(add(l, N, "cpu_sys_us", (uint64_t)ru.ru_stime.tv_sec * 1000000 +
					    (uint64_t)ru.ru_stime.tv_usec));
	TRY(add(l, N, "max_rss_kb", (uint64_t)ru.ru_maxrss));
	TRY(add(l, N, "cq_spin_us", cq.spin_ns / 1000));
	TRY(add(l, N, "cq_block_us", cq.block_ns / 1000));
	TRY(add(l, N, "cq_wakeups", cq.wakeups));
	TRY(add(l, N, "dir_generation", atomic_load(&s->tables.dir_gen)));
	slab_store_info(s->tables.store, &si);
	TRY(add(l, N, "storage_bytes", si.len));
	TRY(add(l, N, "storage_free_bytes", si.free_total));
	TRY(add(l, N, "storage_free_extent", si.free_bytes));
	TRY(add(l, N, "numa_node", (uint64_t)(int64_t)s->numa.node));
	for (unsigned i = 0; i < SRV_RT_COUNT; i++) {
		snprintf(key, sizeof(key), "requests.%s", rt_names[i]);
		TRY(add(l, N, key, metrics_counter_value(m->requests[i])));
		snprintf(key, sizeof(key), "errors.%s", rt_names[i]);
		TRY(add(l, N, key, metrics_counter_value(m->errors[i])));
	}
	return 0;
}

/* Eviction and admission of a table (docs/eviction.md); *sum adds up
 * the node's. Only for tables with eviction state, plus the admission
 * counters, which are 0 elsewhere. */
static int evict_stats(struct srv_table *t, struct srv_stat_list *l,
		       struct srv_evict_counts *sum)
{
	struct srv_evict_counts e;
	uint32_t id = t->id;

	srv_evict_counts(t, &e);
	sum->evicted_capacity += e.evicted_capacity;
	sum->evicted_ttl += e.evicted_ttl;
	sum->admitted += e.admitted;
	sum->not_admitted += e.not_admitted;
	sum->init_served += e.init_served;
	sum->unadmitted += e.unadmitted;
	if (!e.on)
		return 0;
	TRY(add(l, id, "evict.policy", e.policy));
	TRY(add(l, id, "evict.max_rows", e.max_rows));
	TRY(add(l, id, "evict.ttl_s", e.ttl_s));
	TRY(add(l, id, "evict.admit_after", e.admit_k));
	TRY(add(l, id, "evictions.capacity", e.evicted_capacity));
	TRY(add(l, id, "evictions.ttl", e.evicted_ttl));
	TRY(add(l, id, "evict.over_cap_inserts", e.over_cap));
	TRY(add(l, id, "admission.admitted", e.admitted));
	TRY(add(l, id, "admission.not_admitted", e.not_admitted));
	TRY(add(l, id, "admission.init_served_keys", e.init_served));
	TRY(add(l, id, "admission.unadmitted_updates", e.unadmitted));
	return 0;
}

static int table_stats(struct srv_table *t, struct srv_stat_list *l,
		       uint64_t *rows, uint64_t *capacity,
		       struct srv_evict_counts *ev)
{
	const struct srv_table_counters *c = &t->cnt;
	struct slab_table_stats st;
	uint32_t id = t->id;

	slab_table_stats(t->st, &st);
	*rows += st.live;
	*capacity += st.capacity;
	TRY(add(l, id, "rows", st.live));
	TRY(add(l, id, "capacity", st.capacity));
	TRY(add(l, id, "bytes", t->mr ? t->mr->len : 0));
	TRY(add(l, id, "index_fill_ppm",
		(uint64_t)(st.index.fill * 1e6 + 0.5)));
	TRY(add(l, id, "get_keys", atomic_load(&c->get_keys)));
	TRY(add(l, id, "get_or_init_keys", atomic_load(&c->get_or_init_keys)));
	TRY(add(l, id, "put_keys", atomic_load(&c->put_keys)));
	TRY(add(l, id, "update_keys", atomic_load(&c->update_keys)));
	TRY(add(l, id, "delete_keys", atomic_load(&c->delete_keys)));
	TRY(add(l, id, "created_keys", atomic_load(&c->created_keys)));
	TRY(add(l, id, "missing_keys", atomic_load(&c->missing_keys)));
	TRY(add(l, id, "inserts", st.inserts));
	TRY(add(l, id, "deletes", st.deletes));
	TRY(add(l, id, "updates", st.updates));
	TRY(add(l, id, "read_retries", st.read_retries));
	TRY(add(l, id, "index_displacements", st.index.displacements));
	TRY(add(l, id, "index_full_refusals", st.index.full_refusals));
	return evict_stats(t, l, ev);
}

/* The node's sums of evict_stats(). */
static int evict_node_stats(struct srv_stat_list *l,
			    const struct srv_evict_counts *e)
{
	const uint32_t N = PROTO_NO_TABLE;

	TRY(add(l, N, "evictions.capacity", e->evicted_capacity));
	TRY(add(l, N, "evictions.ttl", e->evicted_ttl));
	TRY(add(l, N, "admission.admitted", e->admitted));
	TRY(add(l, N, "admission.not_admitted", e->not_admitted));
	TRY(add(l, N, "admission.init_served_keys", e->init_served));
	TRY(add(l, N, "admission.unadmitted_updates", e->unadmitted));
	return 0;
}

int srv_stats_collect(struct rs_server *s, struct srv_stat_list *l)
{
	struct srv_stat_list tl = { 0 };
	struct srv_evict_counts ev = { 0 };
	uint64_t rows = 0, capacity = 0, ntables = 0;
	int ret = 0;

	/* tables first (they give the node's sums), then the node's own
	 * entries in front */
	for (uint32_t id = 0; id < SLAB_MAX_TABLES && !ret; id++) {
		struct srv_table *t = srv_table_get(&s->tables, id);

		if (!t)
			continue;
		ntables++;
		ret = table_stats(t, &tl, &rows, &capacity, &ev);
		srv_table_put(t);
	}
	if (!ret)
		ret = node_stats(s, l, ntables, rows, capacity);
	if (!ret)
		ret = evict_node_stats(l, &ev);
	for (uint32_t i = 0; !ret && i < tl.n; i++)
		ret = add(l, tl.v[i].table_id, tl.v[i].key, tl.v[i].value);
	free(tl.v);
	return ret < 0 ? ret : (int)l->n;
}
