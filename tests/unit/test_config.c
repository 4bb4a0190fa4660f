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
#include "server/srv_internal.h"

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
	/* the id defaults to the node's name (srv_config_member_id());
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

/* ---- the table of single-valued settings (config.h) ---- */

/* the row's field of c as text, to compare configs whatever the kind */
static void row_text(const struct srv_config_row *r,
		     const struct srv_config *c, char *buf, size_t cap)
{
	const void *p = (const char *)c + r->off;
	const char *s;

	switch (r->kind) {
	case SRV_CK_UINT:
	case SRV_CK_SIZE:
		snprintf(buf, cap, "%llu", (unsigned long long)(
			r->width == 2 ? *(const uint16_t *)p :
			r->width == 4 ? *(const uint32_t *)p :
					*(const uint64_t *)p));
		break;
	case SRV_CK_BOOL:
		snprintf(buf, cap, "%d", *(const int *)p);
		break;
	case SRV_CK_ENUM:
		snprintf(buf, cap, "%u", *(const uint32_t *)p);
		break;
	case SRV_CK_FLOAT:
		snprintf(buf, cap, "%.17g", *(const double *)p);
		break;
	case SRV_CK_STR:
		snprintf(buf, cap, "'%s'", (const char *)p);
		break;
	default:
		s = *(char *const *)p;
		snprintf(buf, cap, s ? "'%s'" : "null", s);
		break;
	}
}

/* the value a row's default stands for, as row_text() prints it */
static void default_text(const struct srv_config_row *r, char *buf,
			 size_t cap)
{
	if (r->kind == SRV_CK_UINT || r->kind == SRV_CK_SIZE)
		snprintf(buf, cap, "%llu", (unsigned long long)r->def);
	else if (r->kind == SRV_CK_BOOL || r->kind == SRV_CK_ENUM)
		snprintf(buf, cap, "%d", (int)r->def);
	else if (r->kind == SRV_CK_FLOAT)
		snprintf(buf, cap, "%.17g", r->fdef);
	else
		snprintf(buf, cap, r->kind == SRV_CK_STR ? "''" : "null");
}

struct trial {
	char value[300];	/* as rs_server_config_set() takes it */
	int null;		/* value NULL, JSON null */
	int quote;		/* a JSON string */
	int ok;
};

static void add(struct trial *t, size_t *n, int ok, int quote,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add(struct trial *t, size_t *n, int ok, int quote,
		const char *fmt, ...)
{
	va_list ap;

	memset(&t[*n], 0, sizeof(t[*n]));
	va_start(ap, fmt);
	vsnprintf(t[*n].value, sizeof(t[*n].value), fmt, ap);
	va_end(ap);
	t[*n].quote = quote;
	t[(*n)++].ok = ok;
}

static void add_null(struct trial *t, size_t *n)
{
	add(t, n, 1, 0, "null");
	t[*n - 1].null = 1;
}

/* the bounds of a row and one step past each */
static size_t trials(const struct srv_config_row *r, struct trial *t)
{
	unsigned long long lo = r->lo, hi = r->hi;
	int q = r->kind == SRV_CK_SIZE; /* a size may be a string */
	size_t n = 0;

	switch (r->kind) {
	case SRV_CK_UINT:
	case SRV_CK_SIZE:
		add(t, &n, 1, q, "%llu", lo);
		add(t, &n, 1, q, "%llu", hi);
		if (lo)
			add(t, &n, 0, q, "%llu", lo - 1);
		if (hi < UINT64_MAX)
			add(t, &n, 0, q, "%llu", hi + 1);
		add(t, &n, 0, 1, "x");
		break;
	case SRV_CK_BOOL:
		add(t, &n, 1, 0, "true");
		add(t, &n, 1, 0, "false");
		add(t, &n, 0, 1, "yes");
		break;
	case SRV_CK_STR:
		/* a name row: from one byte, and not any byte */
		add(t, &n, 1, 1, "%s", r->what ? "a" : "");
		add(t, &n, 1, 1, "%0*d", (int)r->width - 1, 0);
		add(t, &n, 0, 1, "%0*d", (int)r->width, 0);
		if (r->what)
			add(t, &n, 0, 1, "a/b");
		break;
	case SRV_CK_PATH:
		add(t, &n, 1, 1, "/x/y");
		add_null(t, &n);
		add(t, &n, 0, 1, "%s", "");
		break;
	case SRV_CK_TEXT:
		add(t, &n, 1, 1, "%0*d", (int)lo, 0);
		add(t, &n, 1, 1, "%0*d", (int)hi, 0);
		add(t, &n, 0, 1, "%0*d", (int)hi + 1, 0);
		if (lo)
			add(t, &n, 0, 1, "%.*s", (int)lo - 1, "0000");
		add_null(t, &n);
		break;
	case SRV_CK_ENUM:
		for (size_t i = 0; r->names[i]; i++)
			add(t, &n, 1, 1, "%s", r->names[i]);
		add(t, &n, 0, 1, "nope");
		break;
	case SRV_CK_FLOAT:
		add(t, &n, 1, 0, "%.17g", r->flo);
		add(t, &n, 1, 0, "%.17g", r->fhi);
		add(t, &n, 0, 0, "%.17g", r->flo - 0.5);
		add(t, &n, 0, 0, "%.17g", r->fhi + 0.5);
		add(t, &n, 0, 1, "x");
		break;
	}
	return n;
}

/* what a row needs beside it in its object to be valid alone */
static const char *sibling(const char *path, const struct trial *t)
{
	static const struct {
		const char *path, *need;
	} pairs[] = {
		{ "storage.path", "\"backend\": \"pmem\", " },
		{ "coord.user", "\"password_file\": \"/p\", " },
		{ "coord.password_file", "\"user\": \"u\", " },
		{ "coord.tls.cert_file", "\"key_file\": \"/k\", " },
		{ "coord.tls.key_file", "\"cert_file\": \"/c\", " },
	};

	if (!strcmp(path, "storage.backend") && !strcmp(t->value, "pmem"))
		return "\"path\": \"/p\", ";
	for (size_t i = 0; !t->null && i < RS_ARRAY_SIZE(pairs); i++)
		if (!strcmp(path, pairs[i].path))
			return pairs[i].need;
	return "";
}

/* a file that sets the row to the trial's value and nothing else that
 * could be refused (coord needs its endpoints, cluster and a name) */
static void row_json(const struct srv_config_row *r, const struct trial *t,
		     char *buf, size_t cap)
{
	char part[3][64], val[320];
	const char *coord = !strncmp(r->path, "coord.", 6) ?
		"\"endpoints\": [\"http://e:1\"], " : "";
	const char *cluster = *coord && strcmp(r->path, "coord.cluster") ?
		"\"cluster\": \"c\", " : "";
	int n = sscanf(r->path, "%63[^.].%63[^.].%63s", part[0], part[1],
		       part[2]);

	snprintf(val, sizeof(val), t->quote ? "\"%s\"" : "%s", t->value);
	if (n == 1)
		snprintf(buf, cap, "{\"%s\": %s}", part[0], val);
	else if (n == 2)
		snprintf(buf, cap, "{%s\"%s\": {%s%s%s\"%s\": %s}}",
			 *coord ? "\"name\": \"n\", " : "", part[0], coord,
			 cluster, sibling(r->path, t), part[1], val);
	else
		snprintf(buf, cap, "{\"name\": \"n\", \"%s\": {%s%s\"%s\": "
			 "{%s\"%s\": %s}}}", part[0], coord, cluster, part[1],
			 sibling(r->path, t), part[2], val);
}

/* a copy of the config inside a public one, to free with
 * srv_config_free() */
static struct srv_config *copy_of(const struct rs_server_config *cfg)
{
	struct srv_config *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	assert_int_equal(srv_config_copy(c, &cfg->c), 0);
	return c;
}

/* a new public config with a trial set by rs_server_config_set() */
static int set_new(const struct srv_config_row *r, const struct trial *t,
		   struct rs_server_config **cfg)
{
	assert_int_equal(rs_server_config_new(cfg), 0);
	/* pmem is a pool file: the path comes first */
	if (!strcmp(r->path, "storage.backend") && !strcmp(t->value, "pmem"))
		assert_int_equal(rs_server_config_set(*cfg, "storage.path",
						      "/p"), 0);
	return rs_server_config_set(*cfg, r->path, t->null ? NULL : t->value);
}

/* rs_server_config_set() of a trial on a new config; a copy of it */
static int set_one(const struct srv_config_row *r, const struct trial *t,
		   struct srv_config **view)
{
	struct rs_server_config *cfg;
	int rc = set_new(r, t, &cfg);

	*view = copy_of(cfg);
	rs_server_config_delete(&cfg);
	return rc;
}

static int starts_with_path(const char *msg, const char *path)
{
	return !strncmp(msg, path, strlen(path)) &&
	       !strncmp(msg + strlen(path), ": ", 2);
}

/* one trial through a file and through the setter: both accept it with
 * the same value, or both refuse it with the same message, which names
 * the row, and the setter leaves the default */
static void check_trial(const struct srv_config_row *r, const struct trial *t)
{
	struct srv_config *j = NULL, *s = NULL;
	char json[1024], a[320], b[320], msg[512];
	int rc;

	row_json(r, t, json, sizeof(json));
	rc = srv_config_parse(&j, json, strlen(json));
	snprintf(msg, sizeof(msg), "%s", rs_errormsg());
	if (t->ok && rc)
		fail_msg("%s: refused %s: %s", r->path, json, msg);
	if (!t->ok && (rc != RS_E_INVAL || !starts_with_path(msg, r->path)))
		fail_msg("%s: %s gave %d '%s'", r->path, json, rc, msg);
	rc = set_one(r, t, &s);
	if (t->ok) {
		if (rc)
			fail_msg("%s: set '%s' refused: %s", r->path,
				 t->value, rs_errormsg());
		row_text(r, j, a, sizeof(a));
		row_text(r, s, b, sizeof(b));
		if (strcmp(a, b))
			fail_msg("%s = '%s': file %s, set %s", r->path,
				 t->value, a, b);
	} else {
		if (rc != RS_E_INVAL || strcmp(rs_errormsg(), msg))
			fail_msg("%s: set '%s' gave %d '%s', the file '%s'",
				 r->path, t->value, rc, rs_errormsg(), msg);
		default_text(r, a, sizeof(a));
		row_text(r, s, b, sizeof(b));
		if (strcmp(a, b))
			fail_msg("%s: refused '%s' but now %s", r->path,
				 t->value, b);
	}
	srv_config_free(&j);
	srv_config_free(&s);
}

static void every_row(void **state)
{
	struct srv_config d, *v = NULL;
	struct rs_server_config *cfg;
	struct trial t[16];
	char a[320], b[320];

	(void)state;
	srv_config_defaults(&d);
	expect_defaults(&d);
	assert_int_equal(rs_server_config_new(&cfg), 0);
	v = copy_of(cfg);
	rs_server_config_delete(&cfg);
	for (size_t i = 0; i < srv_config_nrows; i++) {
		const struct srv_config_row *r = &srv_config_rows[i];

		assert_ptr_equal(srv_config_row(r->path), r);
		if (r->kind == SRV_CK_UINT || r->kind == SRV_CK_SIZE)
			assert_true(r->width == 2 || r->width == 4 ||
				    r->width == 8);
		/* the default: the table's, defaults() and a new config */
		default_text(r, a, sizeof(a));
		row_text(r, &d, b, sizeof(b));
		if (strcmp(a, b))
			fail_msg("%s: default %s, defaults() %s", r->path, a, b);
		row_text(r, v, b, sizeof(b));
		if (strcmp(a, b))
			fail_msg("%s: default %s, a new config %s", r->path, a,
				 b);
		for (size_t k = 0, n = trials(r, t); k < n; k++)
			check_trial(r, &t[k]);
	}
	srv_config_free(&v);
}

static void set_by_name(void **state)
{
	struct rs_server_config *cfg;

	(void)state;
	assert_int_equal(rs_server_config_new(&cfg), 0);
	assert_int_equal(rs_server_config_set(cfg, "worker", "3"), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "worker: unknown field (did you "
			    "mean 'workers'?)");
	assert_int_equal(rs_server_config_set(cfg, "storage.sise", "1G"),
			 RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "storage.sise: unknown field (did "
			    "you mean 'storage.size'?)");
	assert_int_equal(rs_server_config_set(cfg, "nothing.like.it", "1"),
			 RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "nothing.like.it: unknown field");
	assert_int_equal(rs_server_config_set(cfg, "tables", "[]"),
			 RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "tables: not a single setting (the "
			    "file's section, or a setter of its own)");
	assert_int_equal(rs_server_config_set(cfg, NULL, "1"), RS_E_INVAL);
	assert_int_equal(rs_server_config_set(NULL, "workers", "1"),
			 RS_E_INVAL);

	/* the config a node runs with */
	assert_int_equal(rs_server_config_set(cfg, "workers", "7"), 0);
	assert_int_equal(cfg->c.workers, 7);
	assert_int_equal(rs_server_config_set(cfg, "max_message_bytes",
					      "1 MiB"), 0);
	assert_int_equal(cfg->c.limits.max_message_bytes, 1 << 20);
	assert_int_equal(rs_server_config_set(cfg, "storage.format", "true"),
			 0);
	assert_true(srv_config_slab_flags(&cfg->c) & SLAB_F_FORMAT);
	assert_true(srv_config_slab_flags(&cfg->c) & SLAB_F_HUGEPAGES);

	/* a pool file is the pmem backend; dram drops it */
	assert_int_equal(rs_server_config_set(cfg, "storage.backend", "pmem"),
			 RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "storage.backend: backend pmem "
			    "needs a pool file: set storage.path instead");
	assert_int_equal(rs_server_config_set(cfg, "storage.path", "/p"), 0);
	assert_string_equal(cfg->c.storage_path, "/p");
	assert_int_equal(rs_server_config_set(cfg, "storage.backend", "pmem"),
			 0);
	assert_string_equal(cfg->c.storage_path, "/p");
	assert_int_equal(rs_server_config_set(cfg, "storage.backend", "dram"),
			 0);
	assert_null(cfg->c.storage_path);
	/* null clears a path that was set: DRAM again, no trace */
	assert_int_equal(rs_server_config_set(cfg, "storage.path", "/p"), 0);
	assert_int_equal(rs_server_config_set(cfg, "storage.path", NULL), 0);
	assert_null(cfg->c.storage_path);
	assert_int_equal(cfg->c.backend, SRV_BACKEND_DRAM);
	assert_int_equal(rs_server_config_set(cfg, "trace.path", "/t"), 0);
	assert_int_equal(rs_server_config_set(cfg, "trace.path", NULL), 0);
	assert_null(cfg->c.trace_path);

	/* the member id follows the name unless set, as in the file */
	assert_int_equal(rs_server_config_set(cfg, "name", "n1"), 0);
	assert_string_equal(srv_config_member_id(&cfg->c), "n1");
	assert_int_equal(rs_server_config_set(cfg, "name", "bad name"),
			 RS_E_INVAL);
	assert_string_equal(cfg->c.name, "n1");
	assert_int_equal(rs_server_config_set(cfg, "coord.id", "m1"), 0);
	assert_int_equal(rs_server_config_set(cfg, "name", "n2"), 0);
	assert_string_equal(srv_config_member_id(&cfg->c), "m1");
	assert_string_equal(cfg->c.name, "n2");

	/* settings made otherwise survive */
	assert_int_equal(rs_server_config_add_key(cfg, 5, "read",
						  "0123456789abcdef", 16), 0);
	assert_int_equal(rs_server_config_set(cfg, "auth.max_skew_s", "9"),
			 0);
	assert_int_equal(cfg->c.ncreds, 1);
	assert_int_equal(cfg->c.auth_skew_s, 9);
	rs_server_config_delete(&cfg);
}

/* One object: every row set through the public config is the value the
 * node runs on (the config rs_server_open() validates and copies) and
 * the value the file gives; at least one value other than the default
 * per row makes it through. */
static void one_object(void **state)
{
	static const struct srv_machine big = {
		.phys_bytes = 1ull << 40, .avail_bytes = 1ull << 40,
		.memlock_bytes = UINT64_MAX,
	};
	struct srv_config node, *j = NULL;
	struct rs_server_config *cfg;
	char def[320], set[320], run[320], file[320], json[1024];
	struct trial t[16];
	size_t seen;

	(void)state;
	srv_machine_set(&big);
	for (size_t i = 0; i < srv_config_nrows; i++) {
		const struct srv_config_row *r = &srv_config_rows[i];

		default_text(r, def, sizeof(def));
		seen = 0;
		for (size_t k = 0, n = trials(r, t); k < n; k++) {
			if (!t[k].ok)
				continue;
			assert_int_equal(set_new(r, &t[k], &cfg), 0);
			row_text(r, &cfg->c, set, sizeof(set));
			if (!strcmp(set, def) ||
			    srv_config_to_node(cfg, &node)) {
				rs_server_config_delete(&cfg);
				continue;
			}
			row_text(r, &node, run, sizeof(run));
			row_json(r, &t[k], json, sizeof(json));
			assert_int_equal(srv_config_parse(&j, json,
							  strlen(json)), 0);
			row_text(r, j, file, sizeof(file));
			if (strcmp(set, run) || strcmp(set, file))
				fail_msg("%s = '%s': set %s, node %s, file %s",
					 r->path, t[k].value, set, run, file);
			srv_config_free(&j);
			srv_config_clear(&node);
			rs_server_config_delete(&cfg);
			seen++;
		}
		if (!seen)
			fail_msg("%s: no value but the default reaches a node",
				 r->path);
	}
	srv_machine_set(NULL);
}

/* The keys the parser accepts are the table's rows and the structured
 * sections, so that neither can grow without the other. */
static void keys_are_rows(void **state)
{
	const char *const sec[] = { "", "listen", "storage", "trace", "auth",
				    "coord", "coord.tls" };
	const char *const *keys;
	char path[128];
	size_t nkeys = 0, nstruct = 0;

	(void)state;
	for (size_t i = 0; i < RS_ARRAY_SIZE(sec); i++) {
		assert_non_null(keys = srv_config_keys(sec[i]));
		for (; *keys; keys++, nkeys++) {
			snprintf(path, sizeof(path), "%s%s%s", sec[i],
				 *sec[i] ? "." : "", *keys);
			if (srv_config_row(path))
				continue;
			for (size_t k = 0; srv_config_structured[k]; k++)
				if (!strcmp(path, srv_config_structured[k]))
					path[0] = '\0';
			if (path[0])
				fail_msg("%s: accepted by the parser, neither a "
					 "row nor structured", path);
		}
	}
	while (srv_config_structured[nstruct])
		nstruct++;
	/* every row and structured path is a key of its section's object:
	 * as many keys as both (the array elements of auth.keys[] are not
	 * sections) */
	for (size_t i = 0; i < srv_config_nrows; i++) {
		const char *p = srv_config_rows[i].path;
		const char *dot = strrchr(p, '.');

		snprintf(path, sizeof(path), "%.*s", dot ? (int)(dot - p) : 0,
			 p);
		keys = srv_config_keys(path);
		assert_non_null(keys);
		while (*keys && strcmp(*keys, dot ? dot + 1 : p))
			keys++;
		if (!*keys)
			fail_msg("%s: a row the parser does not accept", p);
	}
	assert_int_equal(nkeys, srv_config_nrows + nstruct);
	assert_null(srv_config_keys("tables"));
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
		cmocka_unit_test(every_row),
		cmocka_unit_test(set_by_name),
		cmocka_unit_test(keys_are_rows),
		cmocka_unit_test(one_object),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
