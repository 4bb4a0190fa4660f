/*
 * client_harness.h - shared set-up of the client rxe tests: memory nodes
 * run IN-PROCESS (include/recstore/server.h), one per address: RS_RDMA_IP
 * and, for tests that want several nodes, the addresses in RS_RDMA_IPS
 * (all on the one rxe device; rxe loops the traffic back). Each node
 * listens on port 0 (a free port) and runs rs_server_run() in a thread.
 *
 * A test calls h_start(&h, want_nodes): it exits 77 (skip) when there is
 * no RDMA device (RS_RDMA_DEV unset) or fewer addresses than wanted.
 * Helpers abort the test (exit 1) with a message on any unexpected error,
 * so the test bodies stay about what they check.
 */
#ifndef CLIENT_HARNESS_H
#define CLIENT_HARNESS_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "recstore/client.h"
#include "recstore/server.h"
#include "harness_check.h"

#define H_MAX_NODES 5

struct harness {
	unsigned n;
	struct rs_server *srv[H_MAX_NODES];
	pthread_t th[H_MAX_NODES];
	char addr[H_MAX_NODES][256];
	char list[H_MAX_NODES * 260];
};

#define h_die hc_die
#define H_OK HC_OK
#define H_CHECK HC_CHECK

static void *h_run(void *arg)
{
	int ret = rs_server_run(arg);

	if (ret < 0)
		fprintf(stderr, "harness: node failed: %s (%s)\n",
			rs_strerror(ret), rs_errormsg());
	return NULL;
}

/* Start `want` nodes (exit 77 if the environment cannot give them). */
static inline void h_start(struct harness *h, unsigned want)
{
	const char *dev = getenv("RS_RDMA_DEV"), *ip = getenv("RS_RDMA_IP");
	const char *ips = getenv("RS_RDMA_IPS");
	char addrs[H_MAX_NODES][48], buf[512], *tok, *save = NULL;
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	unsigned have = 0;

	memset(h, 0, sizeof(*h));
	if (!dev || !*dev || !ip || !*ip) {
		fprintf(stderr, "skip: RS_RDMA_DEV/RS_RDMA_IP not set\n");
		exit(77);
	}
	setrlimit(RLIMIT_MEMLOCK, &rl);
	snprintf(addrs[have++], sizeof(addrs[0]), "%s", ip);
	snprintf(buf, sizeof(buf), "%s", ips ? ips : "");
	for (tok = strtok_r(buf, " ,", &save); tok && have < H_MAX_NODES;
	     tok = strtok_r(NULL, " ,", &save))
		snprintf(addrs[have++], sizeof(addrs[0]), "%s", tok);
	if (have < want) {
		fprintf(stderr, "skip: %u node addresses, need %u\n", have,
			want);
		exit(77);
	}
	for (unsigned i = 0; i < want; i++) {
		struct rs_server_config *cfg;
		char listen[64];

		if (strlen(addrs[i]) > 40)
			h_die("address %s too long", addrs[i]);

		snprintf(listen, sizeof(listen), "%.40s:0", addrs[i]);
		H_OK(rs_server_config_new(&cfg));
		H_OK(rs_server_config_set_listen(cfg, listen));
		H_OK(rs_server_config_set_workers(cfg, 2));
		H_OK(rs_server_open(&h->srv[i], cfg));
		rs_server_config_delete(&cfg);
		const char *la = rs_server_listen_addr(h->srv[i]);
		size_t used = strlen(h->list);

		if (strlen(la) >= sizeof(h->addr[i]))
			h_die("listen address too long");
		memcpy(h->addr[i], la, strlen(la) + 1);
		if (pthread_create(&h->th[i], NULL, h_run, h->srv[i]))
			h_die("pthread_create");
		snprintf(h->list + used, sizeof(h->list) - used, "%s%s",
			 i ? "," : "", la);
		h->n++;
	}
}

static inline void h_stop(struct harness *h)
{
	for (unsigned i = 0; i < h->n; i++) {
		rs_server_stop(h->srv[i]);
		pthread_join(h->th[i], NULL);
		rs_server_close(&h->srv[i]);
	}
	h->n = 0;
}

/* A client of the harness' nodes (or of one node, node >= 0). */
static inline struct rs_client *h_client_conns(struct harness *h, int node,
					       size_t cache, unsigned async,
					       unsigned conns)
{
	struct rs_client_config *cfg;
	struct rs_client *c;

	H_OK(rs_client_config_new(&cfg));
	H_OK(rs_client_config_set_nodes(cfg, node < 0 ? h->list
						      : h->addr[node]));
	H_OK(rs_client_config_set_cache_entries(cfg, cache));
	H_OK(rs_client_config_set_async_threads(cfg, async));
	H_OK(rs_client_config_set_timeout_ms(cfg, 60000));
	if (conns)
		H_OK(rs_client_config_set_conns_per_node(cfg, conns));
	H_OK(rs_client_open(&c, cfg));
	rs_client_config_delete(&cfg);
	return c;
}

static inline struct rs_client *h_client_opts(struct harness *h, int node,
					      size_t cache, unsigned async)
{
	return h_client_conns(h, node, cache, async, 0);
}

static inline struct rs_client *h_client(struct harness *h)
{
	return h_client_opts(h, -1, 1u << 16, 1);
}

/* Create (or re-create) a table with an optimizer and open it. */
static inline struct rs_table *h_table(struct rs_client *c, const char *name,
				       uint32_t dim, const char *optim,
				       uint32_t dtype, uint64_t cap)
{
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	struct rs_table *t;
	int ret;

	H_OK(rs_table_spec_init(&spec, name, dim));
	H_OK(rs_table_spec_set_optimizer(&spec, optim));
	spec.dtype = dtype;
	spec.capacity = cap;
	ret = rs_table_create(c, &spec);
	if (ret != RS_E_EXISTS)
		H_OK(ret);
	H_OK(rs_table_open(c, name, &t));
	return t;
}

#endif
