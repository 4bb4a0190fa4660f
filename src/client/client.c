/*
 * client.c - opening and closing a client, node information, counters.
 *
 * rs_client_open() copies the config, builds the ring and the location
 * cache, opens the RDMA device, asks the configured nodes for the cluster
 * configuration (cluster.c: epoch 0 keeps the static ring; otherwise the
 * client follows the cluster), and connects one context to every node
 * (cluster mode: every ACTIVE member), so that an unreachable node fails
 * the open, not the first get; that context goes back to the node's pool
 * for later calls. The async worker threads start last.
 *
 * Teardown order (reverse): async workers (they finish queued ops), table
 * handles, node pools (every context was returned: no call may run
 * concurrently with close), cluster state, cache, ring, device, config.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/abi.h"
#include "common/addr.h"
#include "common/rs_internal.h"
#include "trace/trace.h"

static int open_trace(struct rs_client *c)
{
	int ret;

	if (c->cfg.trace_path) {
		ret = trace_open(c->cfg.trace_path, c->cfg.trace_rate);
		if (ret == RS_E_EXISTS)
			return 0; /* the process traces already */
		c->trace_opened = ret == 0;
		return ret;
	}
	ret = trace_open_env();
	c->trace_opened = ret == 1;
	return ret < 0 ? ret : 0;
}

static int nodes_init(struct rs_client *c)
{
	int ret;

	c->nodes = calloc(c->cfg.nnodes, sizeof(*c->nodes));
	if (!c->nodes)
		return rs_seterr(-ENOMEM, "client: out of memory");
	for (; c->nnodes < c->cfg.nnodes; c->nnodes++) {
		struct cli_node *n = &c->nodes[c->nnodes];

		n->idx = (unsigned)c->nnodes;
		n->name = c->cfg.nodes[c->nnodes];
		n->dev = c->dev;
		n->timeout_ms = c->cfg.timeout_ms;
		n->spin_us = c->cfg.spin_us;
		n->key = c->cfg.key;
		ret = rs_addr_parse("node", n->name, 0, false, n->host,
				    sizeof(n->host), &n->port);
		if (!ret)
			ret = cli_pool_init(&n->pool, c->cfg.conns_per_node);
		if (ret)
			return ret;
	}
	return 0;
}

static int nodes_connect(struct rs_client *c)
{
	for (size_t i = 0; i < c->nnodes; i++) {
		struct cli_conn *cc;
		int ret = cli_conn_get(&c->nodes[i], &cc);

		if (ret)
			return ret;
		cli_conn_put(cc);
	}
	return 0;
}

static void tables_free(struct rs_client *c)
{
	while (c->tables) {
		struct rs_table *t = c->tables;

		c->tables = t->next;
		pthread_rwlock_destroy(&t->lock);
		cli_rcache_delete(t->rc);
		free(t->loc);
		free(t);
	}
}

RS_EXPORT void rs_client_close(struct rs_client **cp)
{
	struct rs_client *c;

	if (!cp || !*cp)
		return;
	c = *cp;
	cli_async_stop(c);
	tables_free(c);
	pthread_mutex_destroy(&c->tables_lock);
	for (size_t i = 0; i < c->nnodes; i++)
		cli_pool_destroy(&c->nodes[i].pool);
	cli_cluster_close(c);
	free(c->nodes);
	pthread_rwlock_destroy(&c->route_lock);
	pthread_mutex_destroy(&c->refresh_lock);
	cli_once_destroy(&c->once);
	cli_lcache_delete(&c->cache);
	cli_bcache_delete(&c->bcache);
	place_ring_delete(&c->ring);
	rv_dev_close(&c->dev);
	if (c->trace_opened)
		trace_close();
	cli_config_release(&c->cfg);
	free(c);
	*cp = NULL;
}

RS_EXPORT int rs_client_open(struct rs_client **out,
			     const struct rs_client_config *cfg)
{
	struct rs_client *c;
	int ret;

	if (!out || !cfg)
		return rs_seterr(RS_E_INVAL, "client: NULL argument");
	*out = NULL;
	if (cfg->nnodes == 0)
		return rs_seterr(RS_E_INVAL, "client: no memory node given");
	c = calloc(1, sizeof(*c));
	if (!c)
		return rs_seterr(-ENOMEM, "client: out of memory");
	if (pthread_mutex_init(&c->tables_lock, NULL)) {
		free(c);
		return rs_seterr(-ENOMEM, "client: mutex");
	}
	if (pthread_rwlock_init(&c->route_lock, NULL) ||
	    pthread_mutex_init(&c->refresh_lock, NULL) ||
	    cli_once_init(&c->once)) {
		/* neither allocates on Linux: nothing else to undo */
		pthread_mutex_destroy(&c->tables_lock);
		free(c);
		return rs_seterr(-ENOMEM, "client: lock");
	}
	atomic_init(&c->next_uid, 1);
	ret = cli_config_copy(&c->cfg, cfg);
	if (ret)
		goto close_client;
	ret = place_ring_new(&c->ring, (const char *const *)c->cfg.nodes,
			     c->cfg.nnodes, c->cfg.vnodes);
	if (!ret)
		ret = cli_lcache_new(&c->cache, c->cfg.cache_entries);
	if (!ret)
		ret = cli_bcache_new(&c->bcache, c->cfg.bcache_bytes);
	if (!ret)
		ret = open_trace(c);
	if (!ret)
		ret = rv_dev_open(&c->dev, c->cfg.device);
	if (!ret)
		ret = nodes_init(c);
	if (!ret)
		ret = cli_cluster_open(c);
	if (!ret && !c->cluster)
		ret = nodes_connect(c);
	if (!ret)
		ret = cli_async_start(c, c->cfg.async_threads);
	if (ret)
		goto close_client;
	*out = c;
	return 0;

close_client:
	{
		char msg[512];

		/* keep the first failure's message through teardown */
		strncpy(msg, rs_errormsg(), sizeof(msg) - 1);
		msg[sizeof(msg) - 1] = '\0';
		rs_client_close(&c);
		return rs_seterr(ret, "%s", msg);
	}
}

RS_EXPORT unsigned rs_client_node_count(const struct rs_client *c)
{
	return c ? (unsigned)cli_nnodes(c) : 0;
}

RS_EXPORT const char *rs_client_node_name(const struct rs_client *c,
					  unsigned i)
{
	return c && i < cli_nnodes(c) ? c->nodes[i].name : NULL;
}

RS_EXPORT unsigned rs_client_key_node(const struct rs_client *c, uint64_t key)
{
	struct rs_client *w = (struct rs_client *)c; /* the route lock */
	unsigned node;

	if (!c->cluster)
		return place_ring_node(c->ring, key);
	node = place_ring_node(cli_route_hold(w)->ring, key);
	cli_route_drop(w);
	return node;
}

#define LOAD(f) atomic_load_explicit(&c->cnt.f, memory_order_relaxed)

static struct rs_rpc_count op_count(const struct rs_client *c, uint32_t op)
{
	return (struct rs_rpc_count){
		.requests = LOAD(op_rpcs[op - PROTO_OP_GET]),
		.keys = LOAD(op_keys[op - PROTO_OP_GET]),
	};
}

/* 0.2, 0.4 (cluster), 0.4 (replica reads), waits cut, diverted reads,
 * 0.6 row caches, 0.9 bucket images */
static const uint32_t cstats_sizes[] = { 176, 200, 216, 224, 232, 320, 352 };
_Static_assert(sizeof(struct rs_client_stats) == 352,
	       "append to cstats_sizes");
static const struct rs_abi_type cstats_abi = {
	"struct rs_client_stats", cstats_sizes, RS_ARRAY_SIZE(cstats_sizes)
};

/* The row caches' counters: the client's, and each table cache's own
 * (the table list only grows; the handles live until close). */
static void row_cache_stats(const struct rs_client *c,
			    struct rs_client_stats *f)
{
	struct rs_client *cm = (struct rs_client *)c;

	f->row_cache_hits = LOAD(rc_hits);
	f->row_cache_stale_hits = LOAD(rc_stale_hits);
	f->row_cache_probes = LOAD(rc_probes);
	f->row_cache_probe_misses = LOAD(rc_probe_misses);
	f->row_cache_fills = LOAD(rc_fills);
	f->row_cache_update_rows = LOAD(rc_update_rows);
	f->row_cache_bytes_saved = LOAD(rc_bytes_saved);
	pthread_mutex_lock(&cm->tables_lock);
	for (const struct rs_table *t = c->tables; t; t = t->next) {
		struct cli_rcache_stats rs;

		cli_rcache_get_stats(t->rc, &rs);
		f->row_cache_evictions += rs.evictions;
		f->row_cache_rejects += rs.rejects;
		f->row_cache_invalidations += rs.invalidations;
		f->row_cache_bytes += rs.bytes;
	}
	pthread_mutex_unlock(&cm->tables_lock);
}

RS_EXPORT int rs_client_get_stats(const struct rs_client *c,
				  struct rs_client_stats *out)
{
	struct cli_lcache_stats cs;
	struct cli_bcache_stats bs;
	struct rs_client_stats f;
	int ret = rs_abi_check(&cstats_abi, out);

	if (ret)
		return ret;
	memset(&f, 0, sizeof(f));
	if (!c) {
		rs_abi_out(out, &f, sizeof(f));
		return rs_seterr(RS_E_INVAL, "client stats: NULL client");
	}
	f.get_keys = LOAD(get_keys);
	f.onesided_keys = LOAD(onesided_keys);
	f.rpc_keys = LOAD(rpc_keys);
	f.rpc_fallbacks = LOAD(rpc_fallbacks);
	f.torn_retries = LOAD(torn_retries);
	f.stale_locations = LOAD(stale_locations);
	f.reads_posted = LOAD(reads_posted);
	f.dir_refreshes = LOAD(dir_refreshes);
	f.config_refreshes = LOAD(config_refreshes);
	f.epoch_retries = LOAD(epoch_retries);
	f.lease_rpc_reads = LOAD(lease_rpc_reads);
	f.backup_keys = LOAD(backup_keys);
	f.backup_misses = LOAD(backup_misses);
	f.config_waits_cut = LOAD(config_waits_cut);
	f.diverted_keys = LOAD(diverted_keys);
	f.rpc_get = op_count(c, PROTO_OP_GET);
	f.rpc_get_or_init = op_count(c, PROTO_OP_GET_OR_INIT);
	f.rpc_put = op_count(c, PROTO_OP_PUT);
	f.rpc_update = op_count(c, PROTO_OP_UPDATE);
	f.rpc_delete = op_count(c, PROTO_OP_DELETE);
	f.rpcs = f.rpc_get.requests + f.rpc_get_or_init.requests +
		 f.rpc_put.requests + f.rpc_update.requests +
		 f.rpc_delete.requests;
	cli_lcache_get_stats(c->cache, &cs);
	f.cache_hits = cs.hits;
	f.cache_misses = cs.misses;
	row_cache_stats(c, &f);
	cli_bcache_get_stats(c->bcache, &bs);
	f.bucket_cache_hits = LOAD(bc_hits);
	f.bucket_cache_stale = LOAD(bc_stale);
	f.bucket_cache_fills = bs.fills;
	f.bucket_cache_capacity = bs.capacity;
	rs_abi_out(out, &f, sizeof(f));
	return 0;
}

RS_EXPORT uint64_t rs_client_step(struct rs_client *c)
{
	return c ? atomic_fetch_add_explicit(&c->step, 1,
					     memory_order_relaxed) + 1
		 : 0;
}
