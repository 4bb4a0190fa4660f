/*
 * client_harness.c - the bodies of the helpers declared in
 * client_harness.h, which says what they are for.
 */
#include "client_harness.h"

/* The node addresses: RS_RDMA_IP then RS_RDMA_IPS (exit 77 without
 * them); how many into addrs[H_MAX_NODES]. */
static unsigned h_addresses(char (*addrs)[48])
{
	const char *ip = sv_ip(), *ips = getenv("RS_RDMA_IPS");
	char buf[512], *tok, *save = NULL;
	unsigned have = 0;

	snprintf(addrs[have++], sizeof(addrs[0]), "%s", ip);
	snprintf(buf, sizeof(buf), "%s", ips ? ips : "");
	for (tok = strtok_r(buf, " ,", &save); tok && have < H_MAX_NODES;
	     tok = strtok_r(NULL, " ,", &save))
		snprintf(addrs[have++], sizeof(addrs[0]), "%s", tok);
	return have;
}

void h_start(struct harness *h, unsigned want)
{
	char addrs[H_MAX_NODES][48];
	unsigned have;

	memset(h, 0, sizeof(*h));
	have = h_addresses(addrs);
	sv_memlock();
	if (have < want) {
		fprintf(stderr, "skip: %u node addresses, need %u\n", have,
			want);
		exit(77);
	}
	for (unsigned i = 0; i < want; i++) {
		size_t used = strlen(h->list);

		if (strlen(addrs[i]) > 40)
			h_die("address %s too long", addrs[i]);
		sv_node_start(&h->node[i], addrs[i], NULL);
		snprintf(h->list + used, sizeof(h->list) - used, "%s%s",
			 i ? "," : "", h->node[i].addr);
		h->n++;
	}
}

void h_stop(struct harness *h)
{
	for (unsigned i = 0; i < h->n; i++)
		sv_node_close(&h->node[i]);
	h->n = 0;
}

struct rs_client *h_client_conns(struct harness *h, int node,
				 size_t cache, unsigned async,
				 unsigned conns)
{
	struct rs_client_config *cfg;
	struct rs_client *c;

	H_OK(rs_client_config_new(&cfg));
	H_OK(rs_client_config_set_nodes(cfg, node < 0 ? h->list
						      : h->node[node].addr));
	H_OK(rs_client_config_set_cache_entries(cfg, cache));
	H_OK(rs_client_config_set_async_threads(cfg, async));
	H_OK(rs_client_config_set_timeout_ms(cfg, 60000));
	if (conns)
		H_OK(rs_client_config_set_conns_per_node(cfg, conns));
	H_OK(rs_client_open(&c, cfg));
	rs_client_config_delete(&cfg);
	return c;
}

struct rs_client *h_client_opts(struct harness *h, int node,
				size_t cache, unsigned async)
{
	return h_client_conns(h, node, cache, async, 0);
}

struct rs_client *h_client(struct harness *h)
{
	return h_client_opts(h, -1, 1u << 16, 1);
}

struct rs_table *h_table(struct rs_client *c, const char *name,
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

float h_val(uint64_t key, unsigned e, unsigned gen)
{
	return (float)((key * 7 + e * 3 + gen * 1000) % 4096) / 16.0f;
}

void h_fill(float *rows, const uint64_t *keys, size_t n, unsigned dim,
	    unsigned gen)
{
	for (size_t i = 0; i < n; i++)
		for (unsigned e = 0; e < dim; e++)
			rows[i * dim + e] = h_val(keys[i], e, gen);
}

void h_expect_rows(const float *rows, const int *st, const uint64_t *keys,
		   size_t n, unsigned dim, unsigned gen, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		H_CHECK(st[i] == RS_KEY_FOUND, "%s: key %llu status %d", what,
			(unsigned long long)keys[i], st[i]);
		for (unsigned e = 0; e < dim; e++)
			H_CHECK(rows[i * dim + e] == h_val(keys[i], e, gen),
				"%s: key %llu elem %u: %g != %g", what,
				(unsigned long long)keys[i], e,
				rows[i * dim + e], h_val(keys[i], e, gen));
	}
}

struct rs_client_stats h_stats(struct rs_client *c)
{
	struct rs_client_stats s = RS_CLIENT_STATS_INIT;

	H_OK(rs_client_get_stats(c, &s));
	return s;
}
