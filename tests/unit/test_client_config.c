/*
 * test_client_config.c - the client config refuses bad values at the
 * setter (with a message), keeps good ones, and parses node lists; table
 * specs get sane defaults. No device needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "client/client_internal.h"
#include "recstore/client.h"

static void nodes(void **state)
{
	struct rs_client_config *cfg;

	assert_int_equal(rs_client_config_new(&cfg), 0);
	assert_int_equal(rs_client_config_add_node(cfg, "10.0.0.1:7471"), 0);
	assert_int_equal(rs_client_config_add_node(cfg, "10.0.0.1:7471"),
			 RS_E_EXISTS);
	assert_int_equal(rs_client_config_add_node(cfg, "10.0.0.1"),
			 RS_E_INVAL);
	assert_string_equal(rs_errormsg(),
			    "node: address '10.0.0.1': expected ADDR:PORT");
	assert_int_equal(rs_client_config_add_node(cfg, ":7471"), RS_E_INVAL);
	assert_int_equal(rs_client_config_add_node(cfg, "h:0"), RS_E_INVAL);
	assert_int_equal(rs_client_config_add_node(cfg, "h:65536"),
			 RS_E_INVAL);
	assert_int_equal(rs_client_config_add_node(cfg, "h:12x"), RS_E_INVAL);
	assert_int_equal(cfg->nnodes, 1);
	assert_int_equal(rs_client_config_set_nodes(cfg, "a:1, b:2 c:3"), 0);
	assert_int_equal(cfg->nnodes, 3);
	assert_string_equal(cfg->nodes[2], "c:3");
	/* a bad list leaves the old one */
	assert_int_equal(rs_client_config_set_nodes(cfg, "a:1,bad"),
			 RS_E_INVAL);
	assert_int_equal(rs_client_config_set_nodes(cfg, " , "), RS_E_INVAL);
	assert_int_equal(cfg->nnodes, 3);
	rs_client_config_delete(&cfg);
	assert_null(cfg);
	rs_client_config_delete(NULL);
}

static void ranges(void **state)
{
	struct rs_client_config *cfg;

	assert_int_equal(rs_client_config_new(&cfg), 0);
	assert_int_equal(cfg->vnodes, 160);
	assert_int_equal(rs_client_config_set_vnodes(cfg, 0), RS_E_INVAL);
	assert_int_equal(rs_client_config_set_vnodes(cfg, 5000), RS_E_INVAL);
	assert_int_equal(rs_client_config_set_vnodes(cfg, 64), 0);
	assert_int_equal(cfg->vnodes, 64);
	assert_int_equal(rs_client_config_set_cache_entries(cfg, 0), 0);
	assert_int_equal(rs_client_config_set_conns_per_node(cfg, 0),
			 RS_E_INVAL);
	assert_int_equal(rs_client_config_set_conns_per_node(cfg, 4), 0);
	assert_int_equal(rs_client_config_set_torn_retries(cfg, 1001),
			 RS_E_INVAL);
	assert_int_equal(rs_client_config_set_timeout_ms(cfg, 0), RS_E_INVAL);
	assert_int_equal(rs_client_config_set_rpc_reads(cfg, 2), RS_E_INVAL);
	assert_int_equal(rs_client_config_set_rpc_reads(cfg, 1), 0);
	assert_int_equal(rs_client_config_set_async_threads(cfg, 65),
			 RS_E_INVAL);
	assert_int_equal(rs_client_config_set_trace(cfg, "x.jsonl", 1.5),
			 RS_E_INVAL);
	assert_int_equal(rs_client_config_set_trace(cfg, "", 0.5),
			 RS_E_INVAL);
	assert_int_equal(rs_client_config_set_trace(cfg, "x.jsonl", 0.5), 0);
	assert_int_equal(rs_client_config_set_device(cfg, "rxe0"), 0);
	assert_int_equal(rs_client_config_set_device(cfg, NULL), 0);
	assert_null(cfg->device);
	assert_int_equal(rs_client_config_set_vnodes(NULL, 1), RS_E_INVAL);
	rs_client_config_delete(&cfg);
}

/* Each unsigned setter stores into its own field, and a refused value
 * leaves the field as it was, with a message naming the setting. */
static void unsigned_setters(void **state)
{
	static const struct {
		int (*set)(struct rs_client_config *, unsigned);
		size_t off;
		unsigned good, bad;
		const char *msg;
	} cases[] = {
		{ rs_client_config_set_vnodes,
		  offsetof(struct rs_client_config, vnodes), 4096, 4097,
		  "vnodes: 4097 is out of range 1..4096" },
		{ rs_client_config_set_conns_per_node,
		  offsetof(struct rs_client_config, conns_per_node), 3, 0,
		  "connections per node: 0 is out of range 1..256" },
		{ rs_client_config_set_torn_retries,
		  offsetof(struct rs_client_config, torn_retries), 1000, 1001,
		  "torn retries: 1001 is out of range 0..1000" },
		{ rs_client_config_set_timeout_ms,
		  offsetof(struct rs_client_config, timeout_ms), 3600000,
		  3600001, "timeout ms: 3600001 is out of range 1..3600000" },
		{ rs_client_config_set_async_threads,
		  offsetof(struct rs_client_config, async_threads), 0, 65,
		  "async threads: 65 is out of range 0..64" },
		{ rs_client_config_set_spin_us,
		  offsetof(struct rs_client_config, spin_us), 1000000, 1000001,
		  "spin us: 1000001 is out of range 0..1000000" },
	};
	enum { N = sizeof(cases) / sizeof(cases[0]) };
	struct rs_client_config *cfg;
	unsigned want[N];

	assert_int_equal(rs_client_config_new(&cfg), 0);
	for (size_t i = 0; i < N; i++)
		want[i] = *(unsigned *)((char *)cfg + cases[i].off);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(cases[i].set(cfg, cases[i].bad), RS_E_INVAL);
		assert_string_equal(rs_errormsg(), cases[i].msg);
		assert_int_equal(cases[i].set(NULL, cases[i].good),
				 RS_E_INVAL);
		assert_string_equal(rs_errormsg(), "config is NULL");
		for (size_t j = 0; j < N; j++)
			assert_int_equal(*(unsigned *)((char *)cfg +
						      cases[j].off), want[j]);
		assert_int_equal(cases[i].set(cfg, cases[i].good), 0);
		want[i] = cases[i].good;
		for (size_t j = 0; j < N; j++)
			assert_int_equal(*(unsigned *)((char *)cfg +
						      cases[j].off), want[j]);
	}
	rs_client_config_delete(&cfg);
}

static void open_refuses(void **state)
{
	struct rs_client_config *cfg;
	struct rs_client *c = (struct rs_client *)1;

	assert_int_equal(rs_client_config_new(&cfg), 0);
	assert_int_equal(rs_client_open(&c, cfg), RS_E_INVAL); /* no node */
	assert_null(c);
	rs_client_config_delete(&cfg);
	rs_client_close(NULL);
	rs_client_close(&c);
}

static void credentials(void **state)
{
	struct rs_client_config *cfg, copy;
	char path[] = "/tmp/rs-cred-XXXXXX";
	int fd;

	(void)state;
	assert_int_equal(rs_client_config_new(&cfg), 0);
	assert_null(cfg->key);
	assert_int_equal(rs_client_config_set_credentials(cfg, 0,
			 "0123456789abcdef", 16), RS_E_INVAL);
	assert_int_equal(rs_client_config_set_credentials(cfg, 5, "short", 5),
			 RS_E_INVAL);
	assert_null(cfg->key);
	assert_int_equal(rs_client_config_set_credentials(cfg, 5,
			 "0123456789abcdef", 16), 0);
	assert_non_null(cfg->key);
	assert_int_equal(cfg->key->id, 5);
	/* the copy rs_client_open makes owns its own key */
	assert_int_equal(cli_config_copy(&copy, cfg), 0);
	assert_ptr_not_equal(copy.key, cfg->key);
	assert_memory_equal(copy.key->secret, "0123456789abcdef", 16);
	cli_config_release(&copy);
	assert_null(copy.key);
	/* from a file, one trailing newline dropped */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "fedcba9876543210XY\n", 19), 19);
	close(fd);
	assert_int_equal(rs_client_config_set_credentials_file(cfg, 6, path),
			 0);
	assert_int_equal(cfg->key->id, 6);
	assert_int_equal(cfg->key->len, 18);
	unlink(path);
	assert_true(rs_client_config_set_credentials_file(cfg, 6, path) < 0);
	assert_int_equal(cfg->key->id, 6);	/* kept on failure */
	/* NULL secret: none */
	assert_int_equal(rs_client_config_set_credentials(cfg, 0, NULL, 0), 0);
	assert_null(cfg->key);
	rs_client_config_delete(&cfg);
}

static void specs(void **state)
{
	struct rs_table_spec s = RS_TABLE_SPEC_INIT;

	assert_int_equal(rs_table_spec_init(&s, "ads", 128), 0);
	assert_string_equal(s.name, "ads");
	assert_int_equal(s.dtype, RS_DTYPE_FP32);
	assert_int_equal(s.optim.kind, RS_OPT_SGD);
	assert_true(s.optim.lr > 0);
	assert_int_equal(s.capacity, 0); /* the node's default */
	assert_int_equal(rs_table_spec_set_optimizer(&s, "adam"), 0);
	assert_int_equal(s.optim.kind, RS_OPT_ADAM);
	assert_true(s.optim.beta1 > 0);
	assert_int_not_equal(rs_table_spec_set_optimizer(&s, "lion"), 0);
	assert_int_equal(rs_table_spec_init(&s, "bad name", 8), RS_E_INVAL);
	assert_int_equal(rs_table_spec_init(&s, "t", 0), RS_E_INVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nodes),
		cmocka_unit_test(ranges),
		cmocka_unit_test(unsigned_setters),
		cmocka_unit_test(open_refuses),
		cmocka_unit_test(specs),
		cmocka_unit_test(credentials),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
