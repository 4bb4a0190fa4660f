/*
 * test_config.c - the memory node's JSON config: defaults, a full config,
 * sizes with units, and every error message, checked word for word (the
 * messages are the user interface of a config file).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <xxhash.h>

#include "common/rs_internal.h"
#include "server/config.h"

static struct srv_config *parse_ok(const char *json)
{
	struct srv_config *c = NULL;
	int rc = srv_config_parse(&c, json, strlen(json));

	if (rc)
		fail_msg("parse failed %d: %s\n%s", rc, rs_errormsg(), json);
	assert_non_null(c);
	return c;
}

static void expect_defaults(const struct srv_config *c)
{
	assert_string_equal(c->name, "");
	assert_string_equal(c->device, "");
	assert_string_equal(c->listen_addr, "");
	assert_int_equal(c->listen_port, 7471);
	assert_int_equal(c->metrics_port, 0);
	assert_int_equal(c->backend, SRV_BACKEND_DRAM);
	assert_null(c->storage_path);
	assert_true(c->storage_bytes == 256ull << 20);
	assert_true(c->default_capacity == 1ull << 20);
	assert_int_equal(c->workers, 2);
	assert_int_equal(c->spin_us, 50);
	assert_int_equal(c->max_conns_per_peer, 16);
	assert_int_equal(c->keepalive_ms, 5000);
	assert_null(c->trace_path);
	assert_true(c->trace_sample == 0.01);
	assert_int_equal(c->limits.max_message_bytes, 256 << 10);
	assert_int_equal(c->limits.max_batch_keys, 65536);
	assert_int_equal(c->limits.max_dim, 4096);
	assert_int_equal(c->limits.max_tables, 1024);
	assert_int_equal(c->ntables, 0);
	assert_null(c->tables);
	assert_int_equal(proto_limits_validate(&c->limits), 0);
}

static void defaults(void **state)
{
	struct srv_config *c = NULL, d;

	assert_int_equal(srv_config_load(&c, NULL), 0);
	expect_defaults(c);
	srv_config_free(&c);
	assert_null(c);
	srv_config_free(&c); /* NULL is fine */
	srv_config_free(NULL);

	c = parse_ok("{}");
	expect_defaults(c);
	srv_config_free(&c);
	c = parse_ok(" { \"tables\": [] , \"listen\": {}, \"storage\": {},"
		     "\"trace\": {\"path\": null} }\n");
	expect_defaults(c);
	srv_config_free(&c);
	srv_config_defaults(&d);
	expect_defaults(&d);
}

static const char full_json[] =
	"{\n"
	"  \"name\": \"mem-0\",\n"
	"  \"device\": \"rxe0\",\n"
	"  \"listen\": {\"addr\": \"10.0.0.5\", \"port\": 7000},\n"
	"  \"metrics_port\": 9100,\n"
	"  \"storage\": {\"backend\": \"pmem\", \"path\": \"/mnt/pmem0/rs\","
	"               \"size\": \"2 GiB\"},\n"
	"  \"workers\": 4,\n"
	"  \"spin_us\": 0,\n"
	"  \"max_conns_per_peer\": 4,\n"
	"  \"keepalive_ms\": 1000,\n"
	"  \"trace\": {\"path\": \"/tmp/rs.jsonl\", \"sample\": 0.5},\n"
	"  \"max_batch_keys\": 1000,\n"
	"  \"max_message_bytes\": \"1MiB\",\n"
	"  \"max_dim\": 1024,\n"
	"  \"max_tables\": 8,\n"
	"  \"default_capacity\": 5000,\n"
	"  \"tables\": [\n"
	"    {\"name\": \"users\", \"dim\": 64, \"capacity\": 1000000},\n"
	"    {\"name\": \"items\", \"dim\": 128, \"dtype\": \"bf16\","
	"     \"capacity\": 500000,\n"
	"     \"optimizer\": {\"type\": \"adam\", \"lr\": 0.002, \"eps\": 1e-6,"
	"                    \"beta1\": 0.8, \"beta2\": 0.99,"
	"                    \"weight_decay\": 0.1},\n"
	"     \"initializer\": {\"type\": \"normal\", \"std\": 0.05,"
	"                      \"seed\": \"0xffffffffffffffff\"}},\n"
	"    {\"name\": \"ads.v2\", \"dim\": 16, \"dtype\": \"fp16\","
	"     \"capacity\": 1,\n"
	"     \"optimizer\": {\"type\": \"rowwise_adagrad\", \"lr\": 1,"
	"                    \"initial_accumulator\": 0.5,"
	"                    \"decoupled_weight_decay\": true,"
	"                    \"weight_decay\": 0.25},\n"
	"     \"initializer\": {\"type\": \"constant\", \"value\": -2.5}},\n"
	"    {\"name\": \"w\", \"dim\": 1, \"capacity\": 10,\n"
	"     \"optimizer\": {\"type\": \"adamw\"},\n"
	"     \"initializer\": {\"type\": \"uniform\", \"a\": 3,"
	"                      \"seed\": 7}},\n"
	"    {\"name\": \"z\", \"dim\": 2, \"capacity\": 10,\n"
	"     \"optimizer\": {\"type\": \"adagrad\"},\n"
	"     \"initializer\": {\"type\": \"zeros\"}}\n"
	"  ]\n"
	"}\n";

static void full_config(void **state)
{
	struct srv_config *c = parse_ok(full_json);
	const struct proto_table_spec *t = c->tables;

	assert_string_equal(c->name, "mem-0");
	assert_string_equal(c->device, "rxe0");
	assert_string_equal(c->listen_addr, "10.0.0.5");
	assert_int_equal(c->listen_port, 7000);
	assert_int_equal(c->metrics_port, 9100);
	assert_int_equal(c->backend, SRV_BACKEND_PMEM);
	assert_string_equal(c->storage_path, "/mnt/pmem0/rs");
	assert_true(c->storage_bytes == 2ull << 30);
	assert_int_equal(c->workers, 4);
	assert_int_equal(c->spin_us, 0);
	assert_int_equal(c->max_conns_per_peer, 4);
	assert_int_equal(c->keepalive_ms, 1000);
	assert_string_equal(c->trace_path, "/tmp/rs.jsonl");
	assert_true(c->trace_sample == 0.5);
	assert_int_equal(c->limits.max_batch_keys, 1000);
	assert_int_equal(c->limits.max_message_bytes, 1 << 20);
	assert_int_equal(c->limits.max_dim, 1024);
	assert_int_equal(c->limits.max_tables, 8);
	assert_true(c->default_capacity == 5000);
	assert_int_equal(c->ntables, 5);

	/* users: every table default */
	assert_string_equal(t[0].name, "users");
	assert_int_equal(t[0].dim, 64);
	assert_int_equal(t[0].dtype, PROTO_DTYPE_FP32);
	assert_true(t[0].capacity == 1000000);
	assert_int_equal(t[0].optim.kind, OPTIM_SGD);
	assert_float_equal(t[0].optim.lr, 0.01f, 0);
	assert_int_equal(t[0].optim.flags, 0);
	assert_int_equal(t[0].init.kind, INIT_UNIFORM);
	assert_float_equal(t[0].init.a, 0.01f, 0);
	assert_true(t[0].init.seed == XXH3_64bits("users", 5));

	assert_int_equal(t[1].dtype, PROTO_DTYPE_BF16);
	assert_int_equal(t[1].optim.kind, OPTIM_ADAM);
	assert_float_equal(t[1].optim.lr, 0.002f, 0);
	assert_float_equal(t[1].optim.eps, 1e-6f, 0);
	assert_float_equal(t[1].optim.beta1, 0.8f, 0);
	assert_float_equal(t[1].optim.beta2, 0.99f, 0);
	assert_float_equal(t[1].optim.weight_decay, 0.1f, 0);
	assert_int_equal(t[1].optim.flags, 0);
	assert_int_equal(t[1].init.kind, INIT_NORMAL);
	assert_float_equal(t[1].init.std, 0.05f, 0);
	assert_true(t[1].init.seed == UINT64_MAX);

	assert_string_equal(t[2].name, "ads.v2");
	assert_int_equal(t[2].dtype, PROTO_DTYPE_FP16);
	assert_int_equal(t[2].optim.kind, OPTIM_ROWWISE_ADAGRAD);
	assert_float_equal(t[2].optim.lr, 1.0f, 0);
	assert_float_equal(t[2].optim.initial_accumulator, 0.5f, 0);
	assert_int_equal(t[2].optim.flags, OPTIM_F_DECOUPLED);
	assert_int_equal(t[2].init.kind, INIT_CONSTANT);
	assert_float_equal(t[2].init.value, -2.5f, 0);

	/* adamw: Adam with decoupled decay 0.01 */
	assert_int_equal(t[3].optim.kind, OPTIM_ADAM);
	assert_int_equal(t[3].optim.flags, OPTIM_F_DECOUPLED);
	assert_float_equal(t[3].optim.weight_decay, 0.01f, 0);
	assert_float_equal(t[3].optim.lr, 0.001f, 0);
	assert_float_equal(t[3].init.a, 3.0f, 0);
	assert_true(t[3].init.seed == 7);

	assert_int_equal(t[4].optim.kind, OPTIM_ADAGRAD);
	assert_float_equal(t[4].optim.eps, 1e-10f, 0);
	assert_int_equal(t[4].init.kind, INIT_ZEROS);

	for (uint32_t i = 0; i < c->ntables; i++)
		assert_int_equal(proto_table_spec_validate(&t[i], &c->limits),
				 0);
	srv_config_free(&c);
}

static void load_files(void **state)
{
	char path[] = "/tmp/rs_test_config_XXXXXX";
	struct srv_config *c = NULL;
	int fd = mkstemp(path);
	const char bad[] = "{\"tables\": [{\"name\": \"a\", \"dim\": 0}]}";
	const char syntax[] = "{\n  \"workers\": 2,\n  oops\n}";
	char want[256];

	assert_true(fd >= 0);
	assert_int_equal(write(fd, full_json, strlen(full_json)),
			 (ssize_t)strlen(full_json));
	close(fd);
	assert_int_equal(srv_config_load(&c, path), 0);
	assert_int_equal(c->ntables, 5);
	srv_config_free(&c);

	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
	close(fd);
	assert_int_equal(srv_config_load(&c, path), RS_E_INVAL);
	assert_null(c);
	snprintf(want, sizeof(want),
		 "%s: tables[0].dim: must be an integer in [1, 4096]", path);
	assert_string_equal(rs_errormsg(), want);

	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, syntax, strlen(syntax)),
			 (ssize_t)strlen(syntax));
	close(fd);
	assert_int_equal(srv_config_load(&c, path), RS_E_INVAL);
	snprintf(want, sizeof(want), "%s: line 3, column ", path);
	assert_memory_equal(rs_errormsg(), want, strlen(want));

	unlink(path);
	assert_int_equal(srv_config_load(&c, path), -ENOENT);
	snprintf(want, sizeof(want), "%s: No such file or directory", path);
	assert_string_equal(rs_errormsg(), want);
	assert_null(c);
}

static void sizes(void **state)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 },
		{ "123", 123 },
		{ "1B", 1 },
		{ "1k", 1024 },
		{ "2K", 2048 },
		{ "1KiB", 1024 },
		{ "1kb", 1000 },
		{ "3 MiB", 3ull << 20 },
		{ "1M", 1 << 20 },
		{ "5MB", 5000000 },
		{ " 1GiB ", 1ull << 30 },
		{ "1g", 1ull << 30 },
		{ "2GB", 2000000000ull },
		{ "1TiB", 1ull << 40 },
		{ "1t", 1ull << 40 },
		{ "7TB", 7000000000000ull },
		{ "16777215TiB", 16777215ull << 40 },
		{ "18446744073709551615", UINT64_MAX },
	};
	static const char *const bad[] = {
		"", " ", "GiB", "-1", "+1", "1.5GiB", "1 GiBs", "1 XB", "1 2",
		"0x10", "1e3", "1iB",
	};
	uint64_t v;

	for (size_t i = 0; i < RS_ARRAY_SIZE(ok); i++) {
		if (srv_config_parse_size(ok[i].s, &v))
			fail_msg("'%s': %s", ok[i].s, rs_errormsg());
		assert_true(v == ok[i].v);
	}
	for (size_t i = 0; i < RS_ARRAY_SIZE(bad); i++) {
		if (srv_config_parse_size(bad[i], &v) != RS_E_INVAL)
			fail_msg("'%s' accepted", bad[i]);
		assert_non_null(strstr(rs_errormsg(), "is not a size"));
	}
	assert_int_equal(srv_config_parse_size("16777216TiB", &v), RS_E_INVAL);
	assert_string_equal(rs_errormsg(),
			    "'16777216TiB' does not fit 64 bits");
	assert_int_equal(srv_config_parse_size("18446744073709551616", &v),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "does not fit 64 bits"));
}

/* ---- every error, word for word ---------------------------------------- */

#define T(body) "{\"tables\": [{\"name\": \"t\", \"dim\": 4, " \
		"\"capacity\": 10, " body "}]}"
#define OPT(type, rest) T("\"optimizer\": {\"type\": \"" type "\"" rest "}")
#define INI(type, rest) T("\"initializer\": {\"type\": \"" type "\"" rest "}")

static const struct {
	const char *json;
	const char *msg;
} errors[] = {
	/* document and top level */
	{ "[]", "config: must be a JSON object" },
	{ "{\"worker\": 2}",
	  "worker: unknown field (did you mean 'workers'?)" },
	{ "{\"zzzzzzzz\": 2}", "zzzzzzzz: unknown field" },
	{ "{\"workers\": 0}", "workers: must be an integer in [1, 256]" },
	{ "{\"workers\": 257}", "workers: must be an integer in [1, 256]" },
	{ "{\"workers\": 1.5}", "workers: must be an integer in [1, 256]" },
	{ "{\"workers\": \"2\"}", "workers: must be an integer in [1, 256]" },
	{ "{\"workers\": null}", "workers: must be an integer in [1, 256]" },
	{ "{\"spin_us\": -1}", "spin_us: must be an integer in [0, 1000000]" },
	{ "{\"keepalive_ms\": 3600001}",
	  "keepalive_ms: must be an integer in [0, 3600000]" },
	{ "{\"max_conns_per_peer\": -2}",
	  "max_conns_per_peer: must be an integer in [0, 65535]" },
	{ "{\"metrics_port\": 65536}",
	  "metrics_port: must be an integer in [0, 65535]" },
	{ "{\"max_batch_keys\": 0}",
	  "max_batch_keys: must be an integer in [1, 16777216]" },
	{ "{\"max_message_bytes\": 100}",
	  "max_message_bytes: 100 bytes is outside [4096, 268435456]" },
	{ "{\"max_message_bytes\": \"1GiB\"}",
	  "max_message_bytes: 1073741824 bytes is outside [4096, "
	  "268435456]" },
	{ "{\"max_message_bytes\": \"lots\"}",
	  "max_message_bytes: 'lots' is not a size (an integer with an "
	  "optional unit: B, K, KiB, KB, M, MiB, MB, G, GiB, GB, T, TiB, "
	  "TB)" },
	{ "{\"max_dim\": 65537}", "max_dim: must be an integer in [1, 65536]" },
	{ "{\"max_tables\": 0}",
	  "max_tables: must be an integer in [1, 65536]" },
	{ "{\"default_capacity\": 0}",
	  "default_capacity: must be an integer in [1, 4294967294]" },
	{ "{\"default_capacity\": 4294967295}",
	  "default_capacity: must be an integer in [1, 4294967294]" },
	{ "{\"default_capacty\": 10}",
	  "default_capacty: unknown field (did you mean 'default_capacity'?)" },
	{ "{\"name\": \"a b\"}",
	  "name: 'a b' is not a node name (up to 63 of [A-Za-z0-9_.-])" },
	{ "{\"name\": 1}", "name: must be a string" },
	{ "{\"name\": \"0123456789012345678901234567890123456789"
	  "0123456789012345678901234\"}",
	  "name: longer than 63 bytes" },
	{ "{\"device\": \"0123456789012345678901234567890123456789"
	  "0123456789012345678901234\"}",
	  "device: longer than 63 bytes" },
	/* listen */
	{ "{\"listen\": 5}", "listen: must be an object" },
	{ "{\"listen\": {\"adr\": \"x\"}}",
	  "listen.adr: unknown field (did you mean 'addr'?)" },
	{ "{\"listen\": {\"addr\": 7}}", "listen.addr: must be a string" },
	{ "{\"listen\": {\"port\": 65536}}",
	  "listen.port: must be an integer in [0, 65535]" },
	{ "{\"listen\": {\"port\": -1}}",
	  "listen.port: must be an integer in [0, 65535]" },
	/* storage */
	{ "{\"storage\": []}", "storage: must be an object" },
	{ "{\"storage\": {\"sise\": 1}}",
	  "storage.sise: unknown field (did you mean 'size'?)" },
	{ "{\"storage\": {\"backend\": \"ssd\"}}",
	  "storage.backend: unknown backend 'ssd' (expected dram or pmem)" },
	{ "{\"storage\": {\"backend\": 1}}",
	  "storage.backend: must be a string" },
	{ "{\"storage\": {\"backend\": \"pmem\"}}",
	  "storage.path: required with backend pmem" },
	{ "{\"storage\": {\"backend\": \"pmem\", \"path\": null}}",
	  "storage.path: required with backend pmem" },
	{ "{\"storage\": {\"path\": \"/x\"}}",
	  "storage.path: only used with backend pmem" },
	{ "{\"storage\": {\"backend\": \"pmem\", \"path\": \"\"}}",
	  "storage.path: must not be empty (use null for none)" },
	{ "{\"storage\": {\"path\": 5}}",
	  "storage.path: must be a string or null" },
	{ "{\"storage\": {\"size\": 1000}}",
	  "storage.size: 1000 bytes is outside [1048576, "
	  "18446744073709551615]" },
	{ "{\"storage\": {\"size\": true}}",
	  "storage.size: must be a byte count or a string like \"1GiB\"" },
	{ "{\"storage\": {\"size\": -5}}",
	  "storage.size: must be a byte count or a string like \"1GiB\"" },
	{ "{\"storage\": {\"size\": \"99999999 TiB\"}}",
	  "storage.size: '99999999 TiB' does not fit 64 bits" },
	/* trace */
	{ "{\"trace\": {\"sample\": 2}}",
	  "trace.sample: must be a number in [0, 1]" },
	{ "{\"trace\": {\"sample\": -0.1}}",
	  "trace.sample: must be a number in [0, 1]" },
	{ "{\"trace\": {\"sample\": \"1\"}}",
	  "trace.sample: must be a number in [0, 1]" },
	{ "{\"trace\": {\"path\": 3}}",
	  "trace.path: must be a string or null" },
	{ "{\"trace\": {\"file\": \"x\"}}", "trace.file: unknown field" },
	/* tables */
	{ "{\"tables\": {}}", "tables: must be an array" },
	{ "{\"tables\": [1]}", "tables[0]: must be an object" },
	{ "{\"tables\": [{}]}", "tables[0].name: required" },
	{ "{\"tables\": [{\"name\": \"x y\"}]}",
	  "tables[0].name: 'x y' is not a table name (1 to 63 of "
	  "[A-Za-z0-9_.-])" },
	{ "{\"tables\": [{\"name\": \"\"}]}",
	  "tables[0].name: '' is not a table name (1 to 63 of "
	  "[A-Za-z0-9_.-])" },
	{ "{\"tables\": [{\"name\": \"t\"}]}", "tables[0].dim: required" },
	{ "{\"tables\": [{\"name\": \"t\", \"dim\": 0}]}",
	  "tables[0].dim: must be an integer in [1, 4096]" },
	{ "{\"tables\": [{\"name\": \"t\", \"dim\": 4097}]}",
	  "tables[0].dim: must be an integer in [1, 4096]" },
	{ "{\"tables\": [{\"name\": \"t\", \"dim\": 4, \"dtype\": \"fp64\"}]}",
	  "tables[0].dtype: unknown dtype 'fp64' (expected fp32, fp16 or "
	  "bf16)" },
	{ "{\"tables\": [{\"name\": \"t\", \"dim\": 4}]}",
	  "tables[0].capacity: required (rows)" },
	{ T("\"capacity\": 0"), "duplicate object key" },
	{ "{\"tables\": [{\"name\": \"t\", \"dim\": 4, \"capacity\": 0}]}",
	  "tables[0].capacity: must be an integer in [1, 4294967294]" },
	{ "{\"tables\": [{\"name\": \"t\", \"dim\": 4, "
	  "\"capacity\": 4294967295}]}",
	  "tables[0].capacity: must be an integer in [1, 4294967294]" },
	{ T("\"optimzer\": {}"),
	  "tables[0].optimzer: unknown field (did you mean 'optimizer'?)" },
	{ "{\"tables\": [{\"name\": \"a\", \"dim\": 4, \"capacity\": 1},"
	  " {\"name\": \"a\", \"dim\": 4, \"capacity\": 1}]}",
	  "tables[1].name: duplicate table 'a' (also tables[0])" },
	{ "{\"max_tables\": 1, \"tables\": ["
	  "{\"name\": \"a\", \"dim\": 4, \"capacity\": 1},"
	  "{\"name\": \"b\", \"dim\": 4, \"capacity\": 1}]}",
	  "tables: 2 tables, over max_tables 1" },
	{ "{\"max_message_bytes\": 4096, \"tables\": ["
	  "{\"name\": \"big\", \"dim\": 2000, \"capacity\": 1}]}",
	  "tables[0].dim: a row of 2000 elements does not fit one message of "
	  "max_message_bytes 4096" },
	{ "{\"tables\": [{\"name\": \"a\", \"dim\": 128, "
	  "\"capacity\": 1000000000}]}",
	  "tables: the rows alone need at least 512000000000 bytes, "
	  "storage.size is 268435456" },
	/* optimizer */
	{ T("\"optimizer\": \"adam\""),
	  "tables[0].optimizer: must be an object" },
	{ T("\"optimizer\": {\"lr\": 0.1}"),
	  "tables[0].optimizer.type: required (sgd, adagrad, "
	  "rowwise_adagrad, adam or adamw)" },
	{ OPT("rmsprop", ""),
	  "tables[0].optimizer.type: unknown optimizer 'rmsprop' (expected "
	  "sgd, adagrad, rowwise_adagrad, adam or adamw)" },
	{ OPT("sgd", ", \"beta1\": 0.9"),
	  "tables[0].optimizer.beta1: not used by optimizer 'sgd'" },
	{ OPT("sgd", ", \"eps\": 1e-8"),
	  "tables[0].optimizer.eps: not used by optimizer 'sgd'" },
	{ OPT("adam", ", \"initial_accumulator\": 0.1"),
	  "tables[0].optimizer.initial_accumulator: not used by optimizer "
	  "'adam'" },
	{ OPT("adagrad", ", \"beta2\": 0.9"),
	  "tables[0].optimizer.beta2: not used by optimizer 'adagrad'" },
	{ OPT("adam", ", \"lrr\": 0.1"),
	  "tables[0].optimizer.lrr: unknown field (did you mean 'lr'?)" },
	{ OPT("sgd", ", \"lr\": 0"),
	  "tables[0].optimizer.lr: must be a finite number > 0" },
	{ OPT("sgd", ", \"lr\": 1e39"),
	  "tables[0].optimizer.lr: must be a finite number > 0" },
	{ OPT("sgd", ", \"lr\": \"0.1\""),
	  "tables[0].optimizer.lr: must be a number" },
	{ OPT("adam", ", \"eps\": -1"),
	  "tables[0].optimizer.eps: must be a finite number > 0" },
	{ OPT("adam", ", \"beta1\": 1"),
	  "tables[0].optimizer.beta1: must be in [0, 1)" },
	{ OPT("adam", ", \"beta2\": -0.5"),
	  "tables[0].optimizer.beta2: must be in [0, 1)" },
	{ OPT("adagrad", ", \"weight_decay\": -1"),
	  "tables[0].optimizer.weight_decay: must be a finite number >= 0" },
	{ OPT("rowwise_adagrad", ", \"initial_accumulator\": -1"),
	  "tables[0].optimizer.initial_accumulator: must be a finite number "
	  ">= 0" },
	{ OPT("adamw", ", \"decoupled_weight_decay\": \"yes\""),
	  "tables[0].optimizer.decoupled_weight_decay: must be true or "
	  "false" },
	{ OPT("", ""),
	  "tables[0].optimizer.type: unknown optimizer '' (expected sgd, "
	  "adagrad, rowwise_adagrad, adam or adamw)" },
	/* initializer */
	{ T("\"initializer\": 0"), "tables[0].initializer: must be an object" },
	{ T("\"initializer\": {\"seed\": 1}"),
	  "tables[0].initializer.type: required (zeros, constant, uniform or "
	  "normal)" },
	{ INI("xavier", ""),
	  "tables[0].initializer.type: unknown initializer 'xavier' (expected "
	  "zeros, constant, uniform or normal)" },
	{ INI("uniform", ", \"std\": 1"),
	  "tables[0].initializer.std: not used by initializer 'uniform'" },
	{ INI("zeros", ", \"seed\": 1"),
	  "tables[0].initializer.seed: not used by initializer 'zeros'" },
	{ INI("normal", ", \"value\": 1"),
	  "tables[0].initializer.value: not used by initializer 'normal'" },
	{ INI("constant", ""),
	  "tables[0].initializer.value: required by initializer 'constant'" },
	{ INI("uniform", ", \"a\": -1"),
	  "tables[0].initializer.a: must be a finite number >= 0" },
	{ INI("normal", ", \"std\": 1e300"),
	  "tables[0].initializer.std: must be a finite number >= 0" },
	{ INI("uniform", ", \"seeed\": 1"),
	  "tables[0].initializer.seeed: unknown field (did you mean "
	  "'seed'?)" },
	{ INI("uniform", ", \"seed\": -1"),
	  "tables[0].initializer.seed: must be an integer >= 0 or a string "
	  "(decimal or 0x hex)" },
	{ INI("uniform", ", \"seed\": 1.5"),
	  "tables[0].initializer.seed: must be an integer >= 0 or a string "
	  "(decimal or 0x hex)" },
	{ INI("uniform", ", \"seed\": \"0xZZ\""),
	  "tables[0].initializer.seed: '0xZZ' is not a 64-bit unsigned "
	  "integer (decimal or 0x hex)" },
	{ INI("uniform", ", \"seed\": \" 5\""),
	  "tables[0].initializer.seed: ' 5' is not a 64-bit unsigned integer "
	  "(decimal or 0x hex)" },
	{ INI("uniform", ", \"seed\": \"-1\""),
	  "tables[0].initializer.seed: '-1' is not a 64-bit unsigned integer "
	  "(decimal or 0x hex)" },
	{ INI("uniform", ", \"seed\": \"\""),
	  "tables[0].initializer.seed: '' is not a 64-bit unsigned integer "
	  "(decimal or 0x hex)" },
	{ INI("uniform", ", \"seed\": \"0x\""),
	  "tables[0].initializer.seed: '0x' is not a 64-bit unsigned integer "
	  "(decimal or 0x hex)" },
	{ INI("uniform", ", \"seed\": \"18446744073709551616\""),
	  "tables[0].initializer.seed: '18446744073709551616' is not a "
	  "64-bit unsigned integer (decimal or 0x hex)" },
	{ INI("uniform", ", \"seed\": \"12abc\""),
	  "tables[0].initializer.seed: '12abc' is not a 64-bit unsigned "
	  "integer (decimal or 0x hex)" },
	/* credentials */
	{ "{\"auth\": []}", "auth: must be an object" },
	{ "{\"auth\": {\"key\": []}}",
	  "auth.key: unknown field (did you mean 'keys'?)" },
	{ "{\"auth\": {\"keys\": {}}}", "auth.keys: must be an array" },
	{ "{\"auth\": {\"max_skew_s\": 3601}}",
	  "auth.max_skew_s: must be an integer in [0, 3600]" },
	{ "{\"auth\": {\"keys\": [{\"role\": \"read\", "
	  "\"secret\": \"0123456789abcdef\"}]}}",
	  "auth.keys[0].id: required (1..4294967295)" },
	{ "{\"auth\": {\"keys\": [{\"id\": 0, \"role\": \"read\", "
	  "\"secret\": \"0123456789abcdef\"}]}}",
	  "auth.keys[0].id: must be an integer in [1, 4294967295]" },
	{ "{\"auth\": {\"keys\": [{\"id\": 1, \"role\": \"root\", "
	  "\"secret\": \"0123456789abcdef\"}]}}",
	  "auth.keys[0].role: required: read, data or admin" },
	{ "{\"auth\": {\"keys\": [{\"id\": 1, \"role\": \"read\"}]}}",
	  "auth.keys[0]: give exactly one of secret and secret_file" },
	{ "{\"auth\": {\"keys\": [{\"id\": 1, \"role\": \"read\", "
	  "\"secret\": \"0123456789abcdef\", \"secret_file\": \"/x\"}]}}",
	  "auth.keys[0]: give exactly one of secret and secret_file" },
	{ "{\"auth\": {\"keys\": [{\"id\": 1, \"role\": \"read\", "
	  "\"secret\": \"short\"}]}}",
	  "auth.keys[0].secret: must be 16 to 256 bytes" },
	{ "{\"auth\": {\"keys\": [{\"id\": 1, \"role\": \"read\", "
	  "\"secret\": \"0123456789abcdef\"}, {\"id\": 1, \"role\": "
	  "\"data\", \"secret\": \"0123456789abcdef\"}]}}",
	  "auth.keys[1].id: key id 1 also in keys[0]" },
	{ "{\"auth\": {\"keys\": [{\"id\": 1, \"role\": \"read\", "
	  "\"secrte\": \"0123456789abcdef\"}]}}",
	  "auth.keys[0].secrte: unknown field (did you mean 'secret'?)" },
	/* coord */
	{ "{\"name\": \"a\", \"coord\": {\"cluster\": \"c\"}}",
	  "coord.endpoints: required (the etcd URLs)" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"http://e:1\"]}}",
	  "coord.cluster: required" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [], "
	  "\"cluster\": \"c\"}}",
	  "coord.endpoints: must be an array of 1..8 URLs" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"e:1\"], "
	  "\"cluster\": \"c\"}}",
	  "coord.endpoints: [0]: must be an http:// or https:// URL of up to "
	  "255 bytes without ','" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"http://e:1\"], "
	  "\"cluster\": \"c/d\"}}",
	  "coord.cluster: 'c/d' is not a name (up to 63 of [A-Za-z0-9_.-])" },
	{ "{\"coord\": {\"endpoints\": [\"http://e:1\"], \"cluster\": "
	  "\"c\"}}",
	  "coord.id: required when the node has no \"name\"" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"http://e:1\"], "
	  "\"cluster\": \"c\", \"lease_ms\": 1000}}",
	  "coord.lease_ms: must be an integer in [2000, 600000]" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"http://e:1\"], "
	  "\"cluster\": \"c\", \"replicas\": 6}}",
	  "coord.replicas: must be an integer in [1, 5]" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"http://e:1\"], "
	  "\"cluster\": \"c\", \"leas_ms\": 1}}",
	  "coord.leas_ms: unknown field (did you mean 'lease_ms'?)" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"https://e:1\"], "
	  "\"cluster\": \"c\", \"user\": \"u\"}}",
	  "coord.password_file: required with user" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"https://e:1\"], "
	  "\"cluster\": \"c\", \"password_file\": \"/p\"}}",
	  "coord.user: required with password_file" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"https://e:1\"], "
	  "\"cluster\": \"c\", \"tls\": {\"cert_file\": \"/c\"}}}",
	  "coord.tls.key_file: required with cert_file" },
	{ "{\"name\": \"a\", \"coord\": {\"endpoints\": [\"https://e:1\"], "
	  "\"cluster\": \"c\", \"tls\": {\"ca\": \"/c\"}}}",
	  "coord.tls.ca: unknown field" },
};

static void auth_section(void **state)
{
	struct srv_config *c;

	(void)state;
	c = parse_ok("{}");
	assert_int_equal(c->nkeys, 0);
	assert_int_equal(c->auth_skew_s, 60);
	srv_config_free(&c);
	c = parse_ok("{\"auth\": {\"max_skew_s\": 5, \"keys\": ["
		     "{\"id\": 9, \"role\": \"admin\", \"secret_file\": "
		     "\"/etc/k\"}, {\"id\": 4294967295, \"role\": \"read\", "
		     "\"secret\": \"0123456789abcdef\"}]}}");
	assert_int_equal(c->auth_skew_s, 5);
	assert_int_equal(c->nkeys, 2);
	assert_int_equal(c->keys[0].id, 9);
	assert_int_equal(c->keys[0].role, 3);
	assert_string_equal(c->keys[0].secret_file, "/etc/k");
	assert_null(c->keys[0].secret);
	assert_int_equal(c->keys[1].id, 4294967295u);
	assert_int_equal(c->keys[1].role, 1);
	assert_string_equal(c->keys[1].secret, "0123456789abcdef");
	srv_config_free(&c);
}

static void coord_section(void **state)
{
	struct srv_config *c;

	(void)state;
	c = parse_ok("{}");
	assert_null(c->coord_endpoints);
	srv_config_free(&c);
	c = parse_ok("{\"coord\": {\"endpoints\": [\"http://10.0.0.1:2379\", "
		     "\"https://e2:2379/\"], \"cluster\": \"prod\", \"id\": "
		     "\"m-1\", \"lease_ms\": 2500, \"replicas\": 2, "
		     "\"decide\": false}}");
	assert_string_equal(c->coord_endpoints,
			    "http://10.0.0.1:2379,https://e2:2379/");
	assert_string_equal(c->coord_cluster, "prod");
	assert_string_equal(c->coord_id, "m-1");
	assert_int_equal(c->coord_lease_ms, 2500);
	assert_int_equal(c->coord_replicas, 2);
	assert_int_equal(c->coord_decide, 0);
	srv_config_free(&c);
	/* the id defaults to the node's name (applied in srv_config_load.c);
	 * defaults of the rest */
	c = parse_ok("{\"name\": \"n\", \"coord\": {\"endpoints\": "
		     "[\"http://e:1\"], \"cluster\": \"c\"}}");
	assert_string_equal(c->coord_id, "");
	assert_int_equal(c->coord_lease_ms, 5000);
	assert_int_equal(c->coord_replicas, 3);
	assert_int_equal(c->coord_decide, 1);
	assert_null(c->coord_sec.ca_file);
	assert_null(c->coord_sec.user);
	srv_config_free(&c);
	/* etcd over https: the CA, a client certificate, a user */
	c = parse_ok("{\"name\": \"n\", \"coord\": {\"endpoints\": "
		     "[\"https://e:1\"], \"cluster\": \"c\", \"user\": \"rs\", "
		     "\"password_file\": \"/etc/rs/etcd.pw\", \"tls\": "
		     "{\"ca_file\": \"/etc/rs/ca.crt\", \"cert_file\": "
		     "\"/etc/rs/n.crt\", \"key_file\": \"/etc/rs/n.key\"}}}");
	assert_string_equal(c->coord_sec.user, "rs");
	assert_string_equal(c->coord_sec.password_file, "/etc/rs/etcd.pw");
	assert_string_equal(c->coord_sec.ca_file, "/etc/rs/ca.crt");
	assert_string_equal(c->coord_sec.cert_file, "/etc/rs/n.crt");
	assert_string_equal(c->coord_sec.key_file, "/etc/rs/n.key");
	srv_config_free(&c);
}

static void every_error(void **state)
{
	for (size_t i = 0; i < RS_ARRAY_SIZE(errors); i++) {
		struct srv_config *c = (void *)1;
		int rc = srv_config_parse(&c, errors[i].json,
					  strlen(errors[i].json));

		if (rc != RS_E_INVAL)
			fail_msg("#%zu accepted (%d): %s", i, rc,
				 errors[i].json);
		assert_null(c);
		if (!strstr(rs_errormsg(), errors[i].msg))
			fail_msg("#%zu: got '%s'\nwant '%s'", i, rs_errormsg(),
				 errors[i].msg);
		/* exact, except for jansson's own syntax messages */
		if (strncmp(rs_errormsg(), "line ", 5))
			assert_string_equal(rs_errormsg(), errors[i].msg);
	}
}

/* the message of the brief: the third table's learning rate */
static void error_names_the_path(void **state)
{
	const char *json =
		"{\"tables\": ["
		"{\"name\": \"a\", \"dim\": 1, \"capacity\": 1},"
		"{\"name\": \"b\", \"dim\": 1, \"capacity\": 1},"
		"{\"name\": \"c\", \"dim\": 1, \"capacity\": 1,"
		" \"optimizer\": {\"type\": \"adagrad\", \"lr\": -0.5}}]}";
	struct srv_config *c;

	assert_int_equal(srv_config_parse(&c, json, strlen(json)), RS_E_INVAL);
	assert_string_equal(rs_errormsg(),
			    "tables[2].optimizer.lr: must be a finite number "
			    "> 0");
}

static void syntax_errors(void **state)
{
	static const char *const bad[] = {
		"", "{", "{\"a\": }", "{\"workers\": 1, \"workers\": 2}",
		"{\"w\": 1e999}", "{\"w\": 99999999999999999999}",
		"{\"w\": \"\\u0000\"}", "{} {}", "nul",
	};
	struct srv_config *c;

	for (size_t i = 0; i < RS_ARRAY_SIZE(bad); i++) {
		assert_int_equal(srv_config_parse(&c, bad[i], strlen(bad[i])),
				 RS_E_INVAL);
		assert_null(c);
		if (strncmp(rs_errormsg(), "line ", 5))
			fail_msg("'%s': %s", bad[i], rs_errormsg());
	}
	/* not NUL-terminated: only len bytes are read */
	assert_int_equal(srv_config_parse(&c, "{}garbage", 2), 0);
	srv_config_free(&c);
}

static void partial_objects_keep_defaults(void **state)
{
	struct srv_config *c = parse_ok(
		"{\"listen\": {\"port\": 0}, \"storage\": {\"size\": 4194304},"
		" \"trace\": {\"sample\": 0}}");

	assert_string_equal(c->listen_addr, "");
	assert_int_equal(c->listen_port, 0);
	assert_int_equal(c->backend, SRV_BACKEND_DRAM);
	assert_true(c->storage_bytes == 4 << 20);
	assert_null(c->trace_path);
	assert_true(c->trace_sample == 0.0);
	srv_config_free(&c);

	/* an initializer without a seed still gets the name's seed */
	c = parse_ok(INI("normal", ""));
	assert_true(c->tables[0].init.seed == XXH3_64bits("t", 1));
	assert_float_equal(c->tables[0].init.std, 0.01f, 0);
	srv_config_free(&c);
	c = parse_ok(INI("uniform", ", \"seed\": 0"));
	assert_true(c->tables[0].init.seed == 0);
	srv_config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults),
		cmocka_unit_test(full_config),
		cmocka_unit_test(load_files),
		cmocka_unit_test(sizes),
		cmocka_unit_test(auth_section),
		cmocka_unit_test(coord_section),
		cmocka_unit_test(every_error),
		cmocka_unit_test(error_names_the_path),
		cmocka_unit_test(syntax_errors),
		cmocka_unit_test(partial_objects_keep_defaults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
