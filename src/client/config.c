/*
 * config.c - struct rs_client_config: the client's settings, validated by
 * each setter so that a bad value is refused where it is given, with a
 * message naming it (libpmem2 style), never at first use.
 *
 * Credentials: a key id and its secret (given, or read from a file when
 * set), sent to nodes only as a MAC in the connect request (conn.c,
 * src/common/auth.h). The config owns a copy, zeroed when freed.
 *
 * Ownership: the config owns copies of every string given to it;
 * rs_client_open() copies the config, so the caller may delete it at once.
 * Not thread-safe (a config is built by one thread, then handed over).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/addr.h"
#include "common/defaults.h"
#include "common/log.h"
#include "common/rs_internal.h"
#include "place/ring.h"

RS_EXPORT int rs_client_config_new(struct rs_client_config **out)
{
	struct rs_client_config *cfg;

	if (!out)
		return rs_seterr(RS_E_INVAL, "config: out is NULL");
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		*out = NULL;
		return rs_seterr(-ENOMEM, "config: out of memory");
	}
	cfg->vnodes = PLACE_RING_DEFAULT_VNODES;
	cfg->cache_entries = CLI_DEFAULT_CACHE_ENTRIES;
	cfg->bcache_bytes = CLI_DEFAULT_BCACHE_BYTES;
	cfg->conns_per_node = CLI_DEFAULT_CONNS;
	cfg->torn_retries = CLI_DEFAULT_TORN_RETRIES;
	cfg->timeout_ms = CLI_DEFAULT_TIMEOUT_MS;
	cfg->async_threads = 1;
	cfg->spin_us = RS_SPIN_US_DEFAULT;
	cfg->replica_reads = 1;
	cfg->trace_rate = -1.0;
	*out = cfg;
	return 0;
}

static void clear_nodes(struct rs_client_config *cfg)
{
	for (size_t i = 0; i < cfg->nnodes; i++)
		free(cfg->nodes[i]);
	free(cfg->nodes);
	cfg->nodes = NULL;
	cfg->nnodes = 0;
}

RS_EXPORT void rs_client_config_delete(struct rs_client_config **cfg)
{
	if (!cfg || !*cfg)
		return;
	cli_config_release(*cfg);
	free(*cfg);
	*cfg = NULL;
}

RS_EXPORT int rs_client_config_add_node(struct rs_client_config *cfg,
					const char *node)
{
	char host[CLI_HOST_MAX];
	uint16_t port;
	char **nodes, *copy;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config is NULL");
	/* "host:port" or "[IPv6]:port", a port in 1..65535 */
	ret = rs_addr_parse("node", node, 0, false, host, sizeof(host),
			    &port);
	if (ret)
		return ret;
	for (size_t i = 0; i < cfg->nnodes; i++)
		if (!strcmp(cfg->nodes[i], node))
			return rs_seterr(RS_E_EXISTS, "node '%s' listed twice",
					 node);
	if (cfg->nnodes >= PLACE_RING_MAX_NODES)
		return rs_seterr(RS_E_TOOBIG, "more than %d nodes",
				 PLACE_RING_MAX_NODES);
	copy = strdup(node);
	if (!copy)
		return rs_seterr(-ENOMEM, "config: out of memory");
	nodes = realloc(cfg->nodes, (cfg->nnodes + 1) * sizeof(*nodes));
	if (!nodes) {
		free(copy);
		return rs_seterr(-ENOMEM, "config: out of memory");
	}
	nodes[cfg->nnodes++] = copy;
	cfg->nodes = nodes;
	return 0;
}

RS_EXPORT int rs_client_config_set_nodes(struct rs_client_config *cfg,
					 const char *list)
{
	struct rs_client_config tmp = { 0 };
	char *dup, *tok, *save = NULL;
	int ret = 0;

	if (!cfg || !list)
		return rs_seterr(RS_E_INVAL, "config or node list is NULL");
	dup = strdup(list);
	if (!dup)
		return rs_seterr(-ENOMEM, "config: out of memory");
	for (tok = strtok_r(dup, ", \t\n", &save); tok && !ret;
	     tok = strtok_r(NULL, ", \t\n", &save))
		ret = rs_client_config_add_node(&tmp, tok);
	free(dup);
	if (!ret && tmp.nnodes == 0)
		ret = rs_seterr(RS_E_INVAL, "node list '%s' is empty", list);
	if (ret) {
		clear_nodes(&tmp);
		return ret;
	}
	clear_nodes(cfg);
	cfg->nodes = tmp.nodes;
	cfg->nnodes = tmp.nnodes;
	return 0;
}

static int in_range(const struct rs_client_config *cfg, const char *what,
		    unsigned long long v, unsigned long long lo,
		    unsigned long long hi)
{
	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config is NULL");
	if (v < lo || v > hi)
		return rs_seterr(RS_E_INVAL, "%s: %llu is out of range %llu..%llu",
				 what, v, lo, hi);
	return 0;
}

/* The setters of one number in a range: rs_client_config_set_<name>(cfg, v)
 * checks lo <= v <= hi and stores v in cfg-><field>. */
#define RANGE_SETTER(name, T, field, what, lo, hi)                      \
	RS_EXPORT int rs_client_config_set_##name(                      \
		struct rs_client_config *cfg, T v)                      \
	{                                                               \
		int ret = in_range(cfg, what, (unsigned long long)v,    \
				   lo, hi);                             \
									\
		if (!ret)                                               \
			cfg->field = v;                                 \
		return ret;                                             \
	}

RANGE_SETTER(vnodes, unsigned, vnodes, "vnodes", 1, PLACE_RING_MAX_VNODES)
RANGE_SETTER(cache_entries, size_t, cache_entries, "cache entries", 0,
	     (size_t)1 << 32)
RANGE_SETTER(bucket_cache_bytes, size_t, bcache_bytes, "bucket cache bytes",
	     0, (size_t)64 << 30)
RANGE_SETTER(conns_per_node, unsigned, conns_per_node,
	     "connections per node", 1, CLI_MAX_CONNS)
RANGE_SETTER(torn_retries, unsigned, torn_retries, "torn retries", 0, 1000)
RANGE_SETTER(timeout_ms, unsigned, timeout_ms, "timeout ms", 1,
	     RS_TIMEOUT_MAX_MS)
RANGE_SETTER(rpc_reads, int, rpc_reads, "rpc reads", 0, 1)
RANGE_SETTER(replica_reads, int, replica_reads, "replica reads", 0, 1)
RANGE_SETTER(async_threads, unsigned, async_threads, "async threads", 0, 64)
RANGE_SETTER(spin_us, unsigned, spin_us, "spin us", 0, RS_SPIN_US_MAX)

RS_EXPORT int rs_client_config_set_trace(struct rs_client_config *cfg,
					 const char *path, double rate)
{
	char *copy = NULL;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config is NULL");
	if (!(rate >= 0.0 && rate <= 1.0))
		return rs_seterr(RS_E_INVAL, "trace rate %g: not in [0, 1]",
				 rate);
	if (path) {
		if (!*path)
			return rs_seterr(RS_E_INVAL, "trace path is empty");
		copy = strdup(path);
		if (!copy)
			return rs_seterr(-ENOMEM, "config: out of memory");
	}
	free(cfg->trace_path);
	cfg->trace_path = copy;
	cfg->trace_rate = rate;
	return 0;
}

RS_EXPORT int rs_client_config_set_device(struct rs_client_config *cfg,
					  const char *dev)
{
	char *copy = NULL;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config is NULL");
	if (dev && *dev) {
		if (strlen(dev) >= CLI_HOST_MAX)
			return rs_seterr(RS_E_INVAL, "device '%s': too long",
					 dev);
		copy = strdup(dev);
		if (!copy)
			return rs_seterr(-ENOMEM, "config: out of memory");
	}
	free(cfg->device);
	cfg->device = copy;
	return 0;
}

static void key_free(struct auth_key **k)
{
	if (*k) {
		auth_key_wipe(*k);
		free(*k);
	}
	*k = NULL;
}

RS_EXPORT int rs_client_config_set_credentials(struct rs_client_config *cfg,
					       uint32_t key_id,
					       const void *secret, size_t len)
{
	struct auth_key *k;
	int ret;

	if (!cfg)
		return rs_seterr(RS_E_INVAL, "config is NULL");
	if (!secret) {
		key_free(&cfg->key);
		return 0;
	}
	if ((ret = auth_init()))
		return ret;
	k = calloc(1, sizeof(*k));
	if (!k)
		return rs_seterr(-ENOMEM, "config: out of memory");
	ret = auth_key_init(k, key_id, AUTH_ROLE_NONE, secret, len);
	if (ret) {
		free(k);
		return ret;
	}
	key_free(&cfg->key);
	cfg->key = k;
	return 0;
}

RS_EXPORT int rs_client_config_set_credentials_file(
	struct rs_client_config *cfg, uint32_t key_id, const char *path)
{
	uint8_t secret[AUTH_SECRET_MAX];
	size_t len;
	bool world;
	int ret;

	if (!cfg || !path || !*path)
		return rs_seterr(RS_E_INVAL, "config or secret file is NULL");
	ret = auth_init();
	if (!ret)
		ret = auth_secret_file(path, secret, &len, &world);
	if (ret)
		return ret;
	if (world)
		rs_log(RS_LOG_WARNING, "warning: secret file %s may be read "
		       "by other users (chmod 600 it)", path);
	ret = rs_client_config_set_credentials(cfg, key_id, secret, len);
	sodium_memzero(secret, sizeof(secret));
	return ret;
}

int cli_config_copy(struct rs_client_config *dst,
		    const struct rs_client_config *src)
{
	*dst = *src;
	dst->nodes = NULL;
	dst->nnodes = 0;
	dst->trace_path = NULL;
	dst->device = NULL;
	dst->key = NULL;
	if (src->key) {
		dst->key = malloc(sizeof(*dst->key));
		if (!dst->key)
			goto fail;
		*dst->key = *src->key;
	}
	if (src->trace_path) {
		dst->trace_path = strdup(src->trace_path);
		if (!dst->trace_path)
			goto fail;
	}
	if (src->device) {
		dst->device = strdup(src->device);
		if (!dst->device)
			goto fail;
	}
	for (size_t i = 0; i < src->nnodes; i++)
		if (rs_client_config_add_node(dst, src->nodes[i]))
			goto fail;
	return 0;
fail:
	cli_config_release(dst);
	return rs_seterr(-ENOMEM, "config: out of memory");
}

void cli_config_release(struct rs_client_config *cfg)
{
	clear_nodes(cfg);
	free(cfg->trace_path);
	free(cfg->device);
	cfg->trace_path = NULL;
	cfg->device = NULL;
	key_free(&cfg->key);
}
