/*
 * test_client_config.c - the client config refuses bad values at the
 * setter (with a message), keeps good ones, and parses node lists; table
 * specs get sane defaults. No device needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
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
	assert_string_not_equal(rs_errormsg(), "");
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

static void specs(void **state)
{
	struct rs_table_spec s;

	assert_int_equal(rs_table_spec_init(&s, "ads", 128), 0);
	assert_string_equal(s.name, "ads");
	assert_int_equal(s.dtype, RS_DTYPE_FP32);
	assert_int_equal(s.optim.kind, RS_OPT_SGD);
	assert_true(s.optim.lr > 0);
	assert_true(s.capacity > 0);
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
		cmocka_unit_test(open_refuses),
		cmocka_unit_test(specs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
