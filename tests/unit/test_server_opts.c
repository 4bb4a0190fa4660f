/*
 * test_server_opts.c - the memory node's config object and table catalog,
 * without a device: rs_server_config_* setters and loading (messages name
 * the field: the rows' messages), the config a file loads as, the catalog
 * file of layout-2 pools (exact round trip of every spec field, malformed
 * files refused) and the pool's catalog records of specs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "server/srv_catalog.h"
#include "server/srv_internal.h"

static char dir[64];

/* A machine that holds any sane config, so that no test depends on the
 * host's memory or memlock limit (memory_bounds installs its own). */
static const struct srv_machine big = {
	.phys_bytes = 1ull << 40, .avail_bytes = 1ull << 40,
	.memlock_bytes = UINT64_MAX,
};

static int setup(void **state)
{
	(void)state;
	srv_machine_set(&big);
	snprintf(dir, sizeof(dir), "/tmp/rs-opts-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* the listen address through the config's setter: ADDR:PORT or
 * [IPv6]:PORT, no default port, port 0 (any free port) allowed */
static void listen_parsing(void **state)
{
	struct rs_server_config *c = NULL;

	(void)state;
	assert_int_equal(rs_server_config_new(&c), 0);
	assert_int_equal(rs_server_config_set_listen(c, "10.0.0.1:7471"), 0);
	assert_string_equal(c->c.listen_addr, "10.0.0.1");
	assert_int_equal(c->c.listen_port, 7471);
	assert_int_equal(rs_server_config_set_listen(c, "[fe80::1]:0"), 0);
	assert_string_equal(c->c.listen_addr, "fe80::1");
	assert_int_equal(c->c.listen_port, 0);
	assert_int_equal(rs_server_config_set_listen(c, "10.0.0.1"),
			 RS_E_INVAL);
	assert_string_equal(rs_errormsg(),
			    "listen: address '10.0.0.1': expected ADDR:PORT");
	assert_int_equal(rs_server_config_set_listen(c, "10.0.0.1:65536"),
			 RS_E_INVAL);
	assert_int_equal(rs_server_config_set_listen(c, ":80"), RS_E_INVAL);
	assert_int_equal(rs_server_config_set_listen(c, "1.2.3.4:x"),
			 RS_E_INVAL);
	assert_int_equal(rs_server_config_set_listen(c, ""), RS_E_INVAL);
	/* a refused address changes nothing */
	assert_string_equal(c->c.listen_addr, "fe80::1");
	assert_int_equal(c->c.listen_port, 0);
	rs_server_config_delete(&c);
}

static void setters(void **state)
{
	struct rs_server_config *c = NULL;

	(void)state;
	assert_int_equal(rs_server_config_new(&c), 0);
	assert_int_equal(c->c.listen_port, RS_SERVER_DEFAULT_PORT);
	assert_int_equal(c->c.workers, 2);
	assert_null(c->c.storage_path);
	assert_int_equal(rs_server_config_set_workers(c, 0), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "workers"));
	assert_int_equal(rs_server_config_set_workers(c, 257), RS_E_INVAL);
	assert_int_equal(rs_server_config_set_workers(c, 8), 0);
	assert_int_equal(rs_server_config_set_metrics_port(c, 70000),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "metrics_port"));
	assert_int_equal(rs_server_config_set_listen(c, "bad"), RS_E_INVAL);
	assert_int_equal(rs_server_config_set_listen(c, "10.1.2.3:99"), 0);
	assert_string_equal(c->c.listen_addr, "10.1.2.3");
	assert_int_equal(c->c.listen_port, 99);
	assert_int_equal(rs_server_config_set_storage(c, "", 0), RS_E_INVAL);
	assert_int_equal(rs_server_config_set_storage(c, NULL, 1000),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "storage.size"));
	assert_int_equal(rs_server_config_set_storage(c, "/x/pool", 0), 0);
	assert_string_equal(c->c.storage_path, "/x/pool");
	assert_int_equal(rs_server_config_set_storage(c, NULL, 64 << 20), 0);
	assert_null(c->c.storage_path);
	rs_server_config_delete(&c);
	assert_null(c);
	rs_server_config_delete(&c);
	rs_server_config_delete(NULL);
	assert_int_equal(rs_server_config_set_workers(NULL, 2), RS_E_INVAL);
}

static void load_maps_the_file(void **state)
{
	struct rs_server_config *c = NULL;
	char path[128];

	(void)state;
	snprintf(path, sizeof(path), "%s/node.json", dir);
	write_file(path,
		   "{\"name\": \"mem-0\", \"listen\": {\"addr\": \"10.0.0.5\","
		   " \"port\": 7000}, \"metrics_port\": 9100, \"workers\": 3,"
		   " \"spin_us\": 20, \"max_conns_per_peer\": 3,"
		   " \"keepalive_ms\": 700, \"storage\": {\"backend\": \"pmem\","
		   " \"path\": \"/mnt/pmem/pool\", \"size\": \"64MiB\"},"
		   " \"tables\": [{\"name\": \"a\", \"dim\": 8, \"capacity\":"
		   " 100, \"optimizer\": {\"type\": \"adagrad\", \"lr\":"
		   " 0.5}}]}");
	assert_int_equal(rs_server_config_load(&c, path), 0);
	assert_string_equal(c->c.name, "mem-0");
	assert_string_equal(c->c.listen_addr, "10.0.0.5");
	assert_int_equal(c->c.listen_port, 7000);
	assert_int_equal(c->c.metrics_port, 9100);
	assert_int_equal(c->c.workers, 3);
	assert_int_equal(c->c.spin_us, 20);
	assert_int_equal(c->c.max_conns_per_peer, 3);
	assert_int_equal(c->c.keepalive_ms, 700);
	assert_string_equal(c->c.storage_path, "/mnt/pmem/pool");
	assert_true(c->c.storage_bytes == 64ull << 20);
	assert_int_equal(c->c.ntables, 1);
	assert_string_equal(c->c.tables[0].name, "a");
	assert_int_equal(c->c.tables[0].optim.kind, OPTIM_ADAGRAD);
	assert_true(c->c.tables[0].optim.lr == 0.5f);
	/* the library-only knobs keep their defaults */
	assert_int_equal(c->c.credits, 16);
	assert_int_equal(srv_config_slab_flags(&c->c) & SLAB_F_FORMAT, 0);
	rs_server_config_delete(&c);

	/* storage.format: the pool may be formatted over foreign content */
	write_file(path, "{\"storage\": {\"backend\": \"pmem\", \"path\":"
			 " \"/dev/dax0.0\", \"format\": true}}");
	assert_int_equal(rs_server_config_load(&c, path), 0);
	assert_true(srv_config_slab_flags(&c->c) & SLAB_F_FORMAT);
	assert_true(srv_config_slab_flags(&c->c) & SLAB_F_HUGEPAGES);
	rs_server_config_delete(&c);
	write_file(path, "{\"storage\": {\"format\": \"yes\"}}");
	assert_int_equal(rs_server_config_load(&c, path), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "format"));

	write_file(path, "{\"tables\": [{\"name\": \"a\", \"dim\": 8,"
			 " \"capacity\": 10}, {\"name\": \"a\", \"dim\": 4,"
			 " \"capacity\": 10}]}");
	assert_int_equal(rs_server_config_load(&c, path), RS_E_INVAL);
	assert_null(c);
	assert_non_null(strstr(rs_errormsg(), "tables[1]"));
	/* max_capacity: a power of two above capacity, as grow_log2 */
	write_file(path, "{\"tables\": [{\"name\": \"a\", \"dim\": 8,"
			 " \"capacity\": 1000, \"max_capacity\": 65536}]}");
	assert_int_equal(rs_server_config_load(&c, path), 0);
	assert_int_equal(c->c.tables[0].grow_log2, 16);
	rs_server_config_delete(&c);
	write_file(path, "{\"tables\": [{\"name\": \"a\", \"dim\": 8,"
			 " \"capacity\": 1000, \"max_capacity\": 3000}]}");
	assert_int_equal(rs_server_config_load(&c, path), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "max_capacity"));
	write_file(path, "{\"tables\": [{\"name\": \"a\", \"dim\": 8,"
			 " \"capacity\": 1000, \"max_capacity\": 512}]}");
	assert_int_equal(rs_server_config_load(&c, path), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "above capacity"));
	write_file(path, "{\"workers\": 0}");
	assert_int_equal(rs_server_config_load(&c, path), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "workers"));
	assert_non_null(strstr(rs_errormsg(), "node.json"));
	assert_true(rs_server_config_load(&c, "/nonexistent/x.json") < 0);
	assert_int_equal(rs_server_config_load(NULL, path), RS_E_INVAL);
	/* NULL path: the defaults, like rs_server_config_new() */
	assert_int_equal(rs_server_config_load(&c, NULL), 0);
	assert_int_equal(c->c.listen_port, RS_SERVER_DEFAULT_PORT);
	rs_server_config_delete(&c);
}

/* Credentials from the file (inline and secret_file) and the setters. */
static void load_keys(void **state)
{
	struct rs_server_config *c = NULL, *d = NULL;
	struct srv_config copy;
	char path[128], key[128], json[512];

	(void)state;
	snprintf(key, sizeof(key), "%s/read.key", dir);
	write_file(key, "reader-secret-0123456789\n");
	assert_int_equal(chmod(key, 0600), 0);
	snprintf(path, sizeof(path), "%s/node.json", dir);
	snprintf(json, sizeof(json),
		 "{\"auth\": {\"max_skew_s\": 30, \"keys\": ["
		 "{\"id\": 1, \"role\": \"admin\", \"secret\": "
		 "\"admin-secret-0123456789\"}, {\"id\": 3, \"role\": "
		 "\"read\", \"secret_file\": \"%s\"}]}}", key);
	write_file(path, json);
	assert_int_equal(rs_server_config_load(&c, path), 0);
	assert_int_equal(c->c.auth_skew_s, 30);
	/* the file's keys became credentials (no second list of them) */
	assert_int_equal(c->c.nkeys, 0);
	assert_null(c->c.keys);
	assert_int_equal(c->c.ncreds, 2);
	assert_int_equal(c->c.creds[0].id, 1);
	assert_int_equal(c->c.creds[0].role, AUTH_ROLE_ADMIN);
	assert_int_equal(c->c.creds[1].id, 3);
	assert_int_equal(c->c.creds[1].role, AUTH_ROLE_READ);
	assert_int_equal(c->c.creds[1].len, strlen("reader-secret-0123456789"));
	assert_memory_equal(c->c.creds[1].secret, "reader-secret-0123456789",
			    c->c.creds[1].len);
	assert_int_equal(srv_config_copy(&copy, &c->c), 0);
	assert_ptr_not_equal(copy.creds, c->c.creds);
	assert_int_equal(copy.ncreds, 2);
	srv_config_clear(&copy);
	/* setters: same checks */
	assert_int_equal(rs_server_config_add_key(c, 1, "data",
			 "another-secret-0123", 19), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "given twice"));
	assert_int_equal(rs_server_config_add_key(c, 2, "root",
			 "another-secret-0123", 19), RS_E_INVAL);
	assert_int_equal(rs_server_config_add_key(c, 2, "data", "short", 5),
			 RS_E_INVAL);
	assert_int_equal(rs_server_config_add_key(c, 2, "data",
			 "another-secret-0123", 19), 0);
	assert_int_equal(c->c.ncreds, 3);
	assert_int_equal(rs_server_config_set_auth_skew(c, 3601), RS_E_INVAL);
	assert_int_equal(rs_server_config_set_auth_skew(c, 0), 0);
	rs_server_config_delete(&c);
	/* a missing secret file names the field */
	unlink(key);
	assert_int_equal(rs_server_config_load(&c, path), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "auth.keys[1].secret_file"));
	assert_null(c);
	assert_int_equal(rs_server_config_new(&d), 0);
	assert_int_equal(rs_server_config_add_key_file(d, 4, "read", key),
			 RS_E_INVAL);
	assert_int_equal(d->c.ncreds, 0);
	rs_server_config_delete(&d);
}

/* A setter, the file and srv_config_validate() refuse a field with the
 * same message: the row's (the setters are rs_server_config_set() of
 * their row; validate runs the rows' checks over the values). */
static void setter_and_validate_agree(void **state)
{
	static const char *const workers = "workers: must be an integer in "
					   "[1, 256]";
	static const char *const skew = "auth.max_skew_s: must be an integer "
					"in [0, 3600]";
	static const char *const size = "storage.size: 4096 bytes is outside "
					"[1048576, 18446744073709551615]";
	struct rs_server_config *c = NULL;
	struct srv_config o, *f = NULL;
	const char *json;

	(void)state;
	assert_int_equal(rs_server_config_new(&c), 0);
	assert_int_equal(rs_server_config_set_workers(c, 0), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), workers);
	json = "{\"workers\": 0}";
	assert_int_equal(srv_config_parse(&f, json, strlen(json)), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), workers);
	assert_int_equal(rs_server_config_set_metrics_port(c, 70000),
			 RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "metrics_port: must be an integer "
			    "in [0, 65535]");
	assert_int_equal(rs_server_config_set_auth_skew(c, 3601), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), skew);
	assert_int_equal(rs_server_config_set_storage(c, "/p", 4096),
			 RS_E_INVAL);
	assert_string_equal(rs_errormsg(), size);
	assert_null(c->c.storage_path);
	assert_int_equal(rs_server_config_set_storage(c, "", 64 << 20),
			 RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "storage.path: must not be empty "
			    "(use null for none)");
	assert_true(c->c.storage_bytes == 256ull << 20); /* unchanged */
	assert_int_equal(rs_server_config_set_listen(c, "10.0.0.1:7"), 0);
	assert_int_equal(c->c.listen_port, 7);
	assert_int_equal(srv_config_validate(&c->c), 0);

	o = c->c;
	o.workers = 0;
	assert_int_equal(srv_config_validate(&o), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), workers);
	o = c->c;
	o.auth_skew_s = 3601;
	assert_int_equal(srv_config_validate(&o), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), skew);
	o = c->c;
	o.storage_bytes = 4096;
	assert_int_equal(srv_config_validate(&o), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), size);
	/* size 0 asks the setter for the default */
	assert_int_equal(rs_server_config_set_storage(c, NULL, 1 << 20), 0);
	assert_int_equal(rs_server_config_set_storage(c, NULL, 0), 0);
	assert_true(c->c.storage_bytes == 256ull << 20);
	rs_server_config_delete(&c);
}

/* The worst case (receive buffers, send rings, parked replies, worker
 * scratch, pool) is held against the machine's memory and memlock limit;
 * the message says what the config needs and what the machine has. */
static void memory_bounds(void **state)
{
	struct srv_machine m = { .phys_bytes = 8ull << 30,
				 .avail_bytes = 2ull << 30,
				 .memlock_bytes = UINT64_MAX };
	struct rs_server_config *c = NULL;
	struct srv_mem_budget b;
	struct srv_config o;

	(void)state;
	assert_int_equal(rs_server_config_new(&c), 0);
	o = c->c;
	o.limits.max_message_bytes = 1u << 20;
	o.credits = 64;
	o.max_conns = 1024;
	o.storage_bytes = 64ull << 20;
	o.workers = 4;
	srv_config_budget(&o, &b);
	assert_int_equal(b.recv, (1ull << 20) * 65 * 1024);
	assert_int_equal(b.send, (1ull << 20) * 64 * 1024);
	assert_int_equal(b.parked, (1ull << 20) * 65 * 1024);
	assert_int_equal(b.scratch, 4ull * 7 * (1ull << 20));
	assert_int_equal(b.registered, b.recv + b.send + b.pool);
	assert_int_equal(b.total, b.registered + b.parked + b.scratch);
	/* a cluster member's workers also hold the keys a write evicted:
	 * 4 per key and 64, the batch bounded by max_batch_keys ... */
	o.coord_endpoints = (char *)"http://127.0.0.1:2379";
	o.limits.max_batch_keys = 4096;
	srv_config_budget(&o, &b);
	assert_int_equal(b.scratch,
			 4ull * (7 * (1ull << 20) + 8 * (4 * 4096 + 64)));
	assert_int_equal(b.total, b.registered + b.parked + b.scratch);
	/* ... and by the keys a message can carry */
	o.limits.max_batch_keys = 1u << 20;
	srv_config_budget(&o, &b);
	assert_int_equal(b.scratch, 4ull * (7 * (1ull << 20) +
					    8 * (4 * (1ull << 17) + 64)));
	o.coord_endpoints = NULL;
	o.limits.max_batch_keys = c->c.limits.max_batch_keys;
	srv_config_budget(&o, &b);

	/* 194 GiB worst case on a 2 GiB machine */
	assert_int_equal(srv_config_check_memory(&o, &m), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "may need 198748 MiB"));
	assert_non_null(strstr(rs_errormsg(), "has 2048 MiB available"));
	/* and through validate, with the machine installed */
	srv_machine_set(&m);
	assert_int_equal(srv_config_validate(&o), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "has 2048 MiB available"));
	/* fits: 8 connections (1644 MiB) */
	o.max_conns = 8;
	assert_int_equal(srv_config_validate(&o), 0);
	/* MemAvailable unknown: the physical memory counts */
	m.avail_bytes = 0;
	srv_machine_set(&m);
	o.max_conns = 40;	/* 7852 MiB */
	assert_int_equal(srv_config_validate(&o), 0);
	o.max_conns = 42;	/* 8240 MiB */
	assert_int_equal(srv_config_validate(&o), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "has 8192 MiB available"));
	/* registered memory against RLIMIT_MEMLOCK */
	o.max_conns = 8;
	m.memlock_bytes = 64ull << 20;
	srv_machine_set(&m);
	assert_int_equal(srv_config_validate(&o), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "RLIMIT_MEMLOCK allows 64 MiB"));
	/* the defaults fit a 4 GiB machine with memlock unlimited */
	m.avail_bytes = 4ull << 30;
	m.memlock_bytes = UINT64_MAX;
	srv_machine_set(&m);
	assert_int_equal(srv_config_validate(&c->c), 0);
	srv_machine_set(&big);
	rs_server_config_delete(&c);
}

/* The options own copies of the file's strings and tables. */
static void load_copies_strings(void **state)
{
	struct rs_server_config *c = NULL;
	char path[128];

	(void)state;
	snprintf(path, sizeof(path), "%s/trace.json", dir);
	write_file(path, "{\"trace\": {\"path\": \"/t/x.jsonl\","
			 " \"sample\": 0.25}, \"tables\": [{\"name\": \"a\","
			 " \"dim\": 8, \"capacity\": 10}, {\"name\": \"b\","
			 " \"dim\": 4, \"capacity\": 10}]}");
	assert_int_equal(rs_server_config_load(&c, path), 0);
	assert_null(c->c.storage_path);
	assert_string_equal(c->c.trace_path, "/t/x.jsonl");
	assert_true(c->c.trace_sample == 0.25);
	assert_int_equal(c->c.ntables, 2);
	assert_string_equal(c->c.tables[1].name, "b");
	assert_int_equal(c->c.tables[1].dim, 4);
	rs_server_config_delete(&c);
}

static void config_copy_is_deep(void **state)
{
	struct rs_server_config *c = NULL;
	struct srv_config o;

	(void)state;
	assert_int_equal(rs_server_config_new(&c), 0);
	assert_int_equal(rs_server_config_set_storage(c, "/p", 0), 0);
	assert_int_equal(srv_config_to_node(c, &o), 0);
	assert_ptr_not_equal(o.storage_path, c->c.storage_path);
	assert_string_equal(o.storage_path, "/p");
	rs_server_config_delete(&c);
	assert_string_equal(o.storage_path, "/p");
	srv_config_clear(&o);
	assert_int_equal(srv_config_to_node(NULL, &o), RS_E_INVAL);
}

static void spec_fill(struct proto_table_spec *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->dim = 24;
	s->dtype = PROTO_DTYPE_BF16;
	s->capacity = 123457;
	optim_params_default(&s->optim, OPTIM_ADAM);
	s->optim.flags = OPTIM_F_DECOUPLED;
	s->optim.lr = 0.1f / 3.0f; /* not exact in decimal */
	s->optim.weight_decay = 1e-7f;
	init_params_default(&s->init, INIT_NORMAL);
	s->init.std = 0.3f;
	s->init.seed = 0xfedcba9876543210ull;
}

/* Write a layout-2 JSON catalog file the way earlier versions did. */
static void legacy_catalog_write(const char *file,
				 const struct proto_table_spec *s,
				 const uint64_t *uid, unsigned n)
{
	json_t *tabs = json_array();
	json_t *root = json_pack("{s:s, s:i, s:o}", "format",
				 "recstore-tables", "version", 1, "tables",
				 tabs);

	for (unsigned i = 0; i < n; i++) {
		char u[24] = "";

		if (uid[i])
			snprintf(u, sizeof(u), "%016llx",
				 (unsigned long long)uid[i]);
		json_array_append_new(tabs, json_pack("{s:s, s:o}", "uid", u,
						      "spec",
						      srv_spec_to_json(&s[i])));
	}
	assert_int_equal(json_dump_file(root, file,
					JSON_INDENT(1) |
						JSON_REAL_PRECISION(9)),
			 0);
	json_decref(root);
}

static void catalog_round_trip(void **state)
{
	static struct srv_catalog a;
	struct proto_table_spec s[2];
	uint64_t uid[2] = { 0x1234, 0 };
	char pool[128], file[160];

	(void)state;
	snprintf(pool, sizeof(pool), "%s/pool", dir);
	snprintf(file, sizeof(file), "%s.tables.json", pool);
	srv_catalog_init(&a, pool);
	assert_int_equal(srv_catalog_load(&a), 0); /* no file: empty */
	assert_int_equal(a.n, 0);
	spec_fill(&s[0], "one");
	spec_fill(&s[1], "two");
	s[1].dtype = PROTO_DTYPE_FP32;
	optim_params_default(&s[1].optim, OPTIM_ROWWISE_ADAGRAD);
	init_params_default(&s[1].init, INIT_CONSTANT);
	s[1].init.value = -2.5f;
	s[1].grow_log2 = 20; /* a table that grows: kept by the catalog */
	legacy_catalog_write(file, s, uid, 2);

	assert_int_equal(srv_catalog_load(&a), 0);
	assert_int_equal(a.n, 2);
	assert_int_equal(srv_catalog_find(&a, "one"), 0);
	assert_int_equal(srv_catalog_find(&a, "three"), -1);
	assert_memory_equal(&a.ent[0].spec, &s[0], sizeof(s[0]));
	assert_true(a.ent[0].uid == 0x1234);
	assert_memory_equal(&a.ent[1].spec, &s[1], sizeof(s[1]));
	assert_true(a.ent[1].uid == 0);
	unlink(file);

	/* a DRAM node has no catalog */
	srv_catalog_init(&a, NULL);
	assert_int_equal(srv_catalog_load(&a), 0);
}

/* The pool's catalog record of a spec: exact round trip of every field,
 * the longest name and widest numbers fit, anything else refused. */
static void catalog_record_round_trip(void **state)
{
	struct proto_table_spec s, back;
	char rec[SLAB_CATALOG_MAX];
	int len;

	(void)state;
	spec_fill(&s, "one");
	len = srv_spec_encode(&s, rec, sizeof(rec));
	assert_true(len > 0 && len < (int)sizeof(rec));
	assert_int_equal(srv_spec_decode(rec, (size_t)len, &back), 0);
	assert_memory_equal(&back, &s, sizeof(s));

	memset(s.name, 'n', PROTO_NAME_MAX); /* the worst case */
	s.name[PROTO_NAME_MAX] = '\0';
	s.capacity = PROTO_MAX_CAPACITY;
	s.dim = PROTO_MAX_DIM;
	s.optim.lr = -1.17549435e-38f;
	s.optim.eps = -3.40282347e38f;
	s.optim.beta1 = -1.4e-45f;
	s.optim.beta2 = -0.1f / 3.0f;
	s.optim.weight_decay = -1.17549435e-38f;
	s.optim.initial_accumulator = -3.40282347e38f;
	s.optim.flags = UINT32_MAX;
	s.init.value = -1.4e-45f;
	s.init.a = -1.17549435e-38f;
	s.init.std = -3.40282347e38f;
	s.init.seed = UINT64_MAX;
	len = srv_spec_encode(&s, rec, sizeof(rec));
	assert_true(len > 0 && len <= (int)sizeof(rec));
	/* (negative rates and unknown flags: no node serves them) */
	assert_int_equal(srv_spec_decode(rec, (size_t)len, &back), -1);
	/* the widest that are valid */
	s.optim.lr = 1.17549435e-38f;
	s.optim.eps = 3.40282347e38f;
	s.optim.beta1 = 1.4e-45f;
	s.optim.beta2 = 0.1f / 3.0f;
	s.optim.weight_decay = 1.17549435e-38f;
	s.optim.initial_accumulator = 3.40282347e38f;
	s.optim.flags = OPTIM_F_ALL;
	s.init.a = 1.17549435e-38f;
	s.init.std = 3.40282347e38f;
	s.ident = UINT64_MAX;	/* the table's identity, kept */
	len = srv_spec_encode(&s, rec, sizeof(rec));
	assert_true(len > 0 && len <= (int)sizeof(rec));
	assert_int_equal(srv_spec_decode(rec, (size_t)len, &back), 0);
	assert_memory_equal(&back, &s, sizeof(s));
	/* an identity of 0 or not hex is no record a node wrote */
	{
		char *id;

		assert_true(len < (int)sizeof(rec));
		rec[len] = '\0';
		id = strstr(rec, "\"ident\":\"ffffffffffffffff\"");

		assert_non_null(id);
		id += 9;
		memset(id, '0', 16);
		assert_int_equal(srv_spec_decode(rec, (size_t)len, &back), -1);
		id[3] = 'x';
		assert_int_equal(srv_spec_decode(rec, (size_t)len, &back), -1);
		memcpy(id, "000000000000001d", 16);
		assert_int_equal(srv_spec_decode(rec, (size_t)len, &back), 0);
		assert_true(back.ident == 0x1d);
	}

	/* too small a buffer: refused, not cut */
	assert_int_equal(srv_spec_encode(&s, rec, 64), RS_E_INVAL);
	/* a cut record, garbage, a JSON value that is no spec */
	len = srv_spec_encode(&s, rec, sizeof(rec));
	assert_int_equal(srv_spec_decode(rec, (size_t)len - 1, &back), -1);
	assert_int_equal(srv_spec_decode("\xff\x00garbage", 9, &back), -1);
	assert_int_equal(srv_spec_decode("{\"name\": \"x\"}", 13, &back),
			 -1);
	assert_int_equal(srv_spec_decode("", 0, &back), -1);
}

/* Found by tests/fuzz/fuzz_catalog: a number past the float range read
 * as an infinite learning rate, and a record that a node would never
 * have written (a bad name, a capacity over the limit) was served. A
 * record or catalog file entry is checked as a TABLE_CREATE is. */
static void catalog_refuses_out_of_range(void **state)
{
	static const char *const bad[] = {
		"\"lr\":1e300", "\"lr\":-0.5", "\"beta1\":1.5",
		"\"std\":-1e300", "\"value\":1e39", "\"flags\":4096",
	};
	static struct srv_catalog c;
	struct proto_table_spec s, back;
	char rec[SLAB_CATALOG_MAX], text[2048];
	int len;

	(void)state;
	spec_fill(&s, "one");
	len = srv_spec_encode(&s, rec, sizeof(rec) - 1);
	assert_true(len > 0);
	rec[len] = '\0';
	assert_int_equal(srv_spec_decode(rec, (size_t)len, &back), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char key[32];
		const char *at, *end;

		/* rec with the member that bad[i] names replaced */
		snprintf(key, sizeof(key), "%.*s", (int)(strchr(bad[i], ':') -
							bad[i] + 1), bad[i]);
		at = strstr(rec, key);
		assert_non_null(at);
		end = at + strcspn(at, ",}");
		snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - rec), rec,
			 bad[i], end);
		assert_int_equal(srv_spec_decode(text, strlen(text), &back),
				 -1);
	}
	snprintf(text, sizeof(text), "%s", rec);
	memcpy(strstr(text, "\"one\""), "\"o/e\"", 5);
	assert_int_equal(srv_spec_decode(text, strlen(text), &back), -1);
	s.capacity = PROTO_MAX_CAPACITY + 1;
	len = srv_spec_encode(&s, rec, sizeof(rec));
	assert_int_equal(srv_spec_decode(rec, (size_t)len, &back), -1);

	/* and the same in a catalog file, read from memory */
	snprintf(text, sizeof(text), "{\"tables\": [{\"uid\": \"\", "
		 "\"spec\": %.*s}]}", len, rec);
	srv_catalog_init(&c, NULL);
	assert_int_equal(srv_catalog_parse(&c, text, strlen(text)),
			 RS_E_CORRUPT);
	assert_non_null(strstr(rs_errormsg(), "entry 0 is malformed"));
	s.capacity = 100;
	len = srv_spec_encode(&s, rec, sizeof(rec));
	snprintf(text, sizeof(text), "{\"tables\": [{\"uid\": \"\", "
		 "\"spec\": %.*s}]}", len, rec);
	assert_int_equal(srv_catalog_parse(&c, text, strlen(text)), 0);
	assert_int_equal(c.n, 1);
	assert_memory_equal(&c.ent[0].spec, &s, sizeof(s));
}

static void catalog_refuses_garbage(void **state)
{
	static struct srv_catalog c;
	char pool[128], file[160];

	(void)state;
	snprintf(pool, sizeof(pool), "%s/bad", dir);
	snprintf(file, sizeof(file), "%s.tables.json", pool);
	srv_catalog_init(&c, pool);
	write_file(file, "{not json");
	assert_int_equal(srv_catalog_load(&c), RS_E_CORRUPT);
	assert_non_null(strstr(rs_errormsg(), file));
	write_file(file, "{\"format\": \"recstore-tables\"}");
	assert_int_equal(srv_catalog_load(&c), RS_E_CORRUPT);
	write_file(file, "{\"tables\": [{\"uid\": \"zz\", \"spec\": {}}]}");
	assert_int_equal(srv_catalog_load(&c), RS_E_CORRUPT);
	assert_non_null(strstr(rs_errormsg(), "entry 0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(listen_parsing),
		cmocka_unit_test(setters),
		cmocka_unit_test(load_maps_the_file),
		cmocka_unit_test(load_keys),
		cmocka_unit_test(setter_and_validate_agree),
		cmocka_unit_test(memory_bounds),
		cmocka_unit_test(load_copies_strings),
		cmocka_unit_test(config_copy_is_deep),
		cmocka_unit_test(catalog_round_trip),
		cmocka_unit_test(catalog_record_round_trip),
		cmocka_unit_test(catalog_refuses_out_of_range),
		cmocka_unit_test(catalog_refuses_garbage),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
