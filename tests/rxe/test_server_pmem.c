/*
 * test_server_pmem.c - a file-backed node (storage backend "pmem") keeps
 * every acknowledged row across a crash and a clean restart.
 *
 * The node runs in a child process (this binary re-executed with
 * --child-server POOL) so that it can really crash (SIGKILL). The parent:
 *   1. creates an Adagrad table (uniform initializer), PUTs rows, applies
 *      two UPDATE batches (the second with every key twice: coalesced),
 *      GET_OR_INITs new keys, DELETEs some; after each acknowledgement it
 *      computes the expected rows itself with the same kernels
 *      (optim_apply, init_row) and checks the node's GET against them;
 *   2. SIGKILLs the node and starts a new one on the same pool file: the
 *      table is back (same id and generation, optimizer parameters from
 *      the catalog), every acknowledged row is bit-for-bit what it was,
 *      deleted keys are missing, and one more UPDATE gives the expected
 *      result (the optimizer state survived too);
 *   3. creates a second table, stops the node cleanly (SIGTERM), restarts,
 *      drops the first table, restarts again: exactly the second remains.
 * The pool lives in RS_PMEM_DIR if set (e.g. a DAX mount), else in a
 * temporary directory (a plain file: the same code path minus the cache
 * flushes). On fsdax the node must refuse clearly (EOPNOTSUPP), which this
 * test reports as a skip of the data checks.
 *
 * With RS_PMEM_DEV (a device dax, e.g. /dev/dax0.0 of ci/rxe-vm.sh --pmem)
 * the same steps run a second time on the device, after:
 *   0. the device gets a non-pool header (bytes at offset 0): the node
 *      must refuse to open (never format what it does not know), then
 *      with storage.format it formats the device; the table specs live in
 *      the pool's catalog records (nothing is written next to the device).
 * The device's previous content is destroyed.
 *
 * Migration (file pool): a layout-2 pool as earlier versions left it (a
 * table without a catalog record, its spec in "<pool>.tables.json"): the
 * node serves the table with the file's spec and moves it into the pool;
 * with the file gone, a restart still has the spec. A layout-3 table
 * without a valid record (damage) makes the node refuse to open.
 */
#include <libpmem.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "server/srv_catalog.h"
#include "server_harness.h"
#include "value/initializer.h"
#include "value/optimizer.h"
#include "value/slab_int.h"

#define DIM 16
#define NPUT 300

/* ---- the node process ---- */

static struct rs_server *child_srv;

static void on_term(int sig)
{
	(void)sig;
	if (child_srv)
		rs_server_stop(child_srv);
}

/* A config with storage.format: only the config file has the key. */
static void config_format(struct rs_server_config **cfg, const char *pool)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/rs-pmem-fmt-%d.json",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	f = fopen(path, "w");
	SV_CHECK(f, "cannot write %s", path);
	fprintf(f, "{\"storage\": {\"backend\": \"pmem\", \"path\": \"%s\", "
		"\"size\": \"64MiB\", \"format\": true}}\n", pool);
	fclose(f);
	SV_OK(rs_server_config_load(cfg, path));
	unlink(path);
}

static int child_server(const char *pool, const char *ip, bool format)
{
	struct rs_server_config *cfg;
	char listen[80];
	int ret;

	sv_memlock();
	signal(SIGTERM, on_term);
	if (format) {
		config_format(&cfg, pool);
	} else {
		SV_OK(rs_server_config_new(&cfg));
		SV_OK(rs_server_config_set_storage(cfg, pool, 64ull << 20));
	}
	snprintf(listen, sizeof(listen), "%s:0", ip);
	SV_OK(rs_server_config_set_listen(cfg, listen));
	ret = rs_server_open(&child_srv, cfg);
	rs_server_config_delete(&cfg);
	if (ret) {
		printf("error %d %s\n", ret, rs_errormsg());
		return 3;
	}
	printf("%s\n", rs_server_listen_addr(child_srv));
	fflush(stdout);
	ret = rs_server_run(child_srv);
	rs_server_close(&child_srv);
	return ret ? 1 : 0;
}

/* ---- parent ---- */

struct node {
	pid_t pid;
	char ip[64];
	uint16_t port;
};

static const char *g_pool, *g_ip;
static bool g_format; /* the next node_start formats (storage.format) */

static int node_start(struct node *n)
{
	char line[1024], *colon;
	int fds[2];
	FILE *f;

	if (pipe(fds))
		sv_die("pipe");
	n->pid = fork();
	if (n->pid < 0)
		sv_die("fork");
	if (n->pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl("/proc/self/exe", "test_server_pmem",
		      g_format ? "--child-format" : "--child-server", g_pool,
		      g_ip, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (!fgets(line, sizeof(line), f))
		sv_die("node said nothing");
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	if (!strncmp(line, "error ", 6)) {
		int code = atoi(line + 6);

		waitpid(n->pid, NULL, 0);
		printf("node refused to open: %s\n", line);
		return code ? code : -1;
	}
	colon = strrchr(line, ':');
	SV_CHECK(colon, "bad address line: %s", line);
	*colon = '\0';
	snprintf(n->ip, sizeof(n->ip), "%.63s", line);
	n->port = (uint16_t)atoi(colon + 1);
	return 0;
}

static void node_end(struct node *n, int sig)
{
	int status;

	kill(n->pid, sig);
	waitpid(n->pid, &status, 0);
	if (sig == SIGKILL)
		SV_CHECK(WIFSIGNALED(status), "node was not killed");
	else
		SV_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			 "node exit status %d", status);
}

/* The node's directory entry for name; 0 or RS_E_NOTFOUND. */
static int dir_find(struct sv_cli *k, const char *name,
		    struct proto_table_info *out, uint32_t *ntables)
{
	struct proto_list_req lr = { 0 };
	struct proto_table_info info;
	struct proto_hdr h;
	struct proto_msg m;
	struct rv_msg raw;
	int len, ret = RS_E_NOTFOUND;

	sv_hdr(k, &h);
	len = proto_enc_list_req(k->buf, k->cap, &h, PROTO_OP_TABLE_DIR, &lr);
	SV_OK(len);
	SV_OK(sv_call_raw(k, (size_t)len, &m, &raw));
	SV_CHECK(m.u.table_dir.n == m.u.table_dir.total, "paged directory");
	*ntables = m.u.table_dir.total;
	while (proto_table_dir_next(&m.u.table_dir, &info))
		if (!strcmp(info.spec.name, name)) {
			*out = info;
			ret = 0;
		}
	rv_msg_release(&raw);
	return ret;
}

/* Expected state of the table, kept by the test. */
struct model {
	struct proto_table_spec spec;
	uint64_t keys[NPUT + 100];
	float rows[NPUT + 100][DIM];
	float state[NPUT + 100][DIM];
	bool live[NPUT + 100];
	unsigned n;
};

static int model_slot(struct model *mo, uint64_t key)
{
	for (unsigned i = 0; i < mo->n; i++)
		if (mo->keys[i] == key)
			return (int)i;
	mo->keys[mo->n] = key;
	return (int)mo->n++;
}

static void model_put(struct model *mo, uint64_t key, const float *v)
{
	int i = model_slot(mo, key);

	memcpy(mo->rows[i], v, sizeof(mo->rows[i]));
	optim_init_state(&mo->spec.optim, mo->state[i], DIM);
	mo->live[i] = true;
}

static void model_update(struct model *mo, uint64_t key, const float *g)
{
	int i = model_slot(mo, key);

	SV_CHECK(mo->live[i], "model: update of a missing key");
	SV_OK(optim_apply(&mo->spec.optim, mo->rows[i], mo->state[i], g,
			  DIM));
}

/* Every key of the model, read back from the node, must match. */
static void check_all(struct sv_cli *k, const struct proto_table_info *t,
		      struct model *mo, const char *when)
{
	static float out[(NPUT + 100) * DIM];
	static int32_t st[NPUT + 100];
	unsigned live = 0;

	SV_OK(sv_keys(k, PROTO_OP_GET, t, mo->keys, mo->n, NULL, 0, st, out));
	for (unsigned i = 0; i < mo->n; i++) {
		if (!mo->live[i]) {
			SV_CHECK(st[i] == RS_E_NOTFOUND, "%s: deleted key "
				 "%llu: status %d", when,
				 (unsigned long long)mo->keys[i], st[i]);
			continue;
		}
		SV_CHECK(st[i] == 0, "%s: key %llu: status %d", when,
			 (unsigned long long)mo->keys[i], st[i]);
		SV_CHECK(!memcmp(&out[i * DIM], mo->rows[i], DIM * 4),
			 "%s: key %llu: row differs (%g vs %g)", when,
			 (unsigned long long)mo->keys[i], out[i * DIM],
			 mo->rows[i][0]);
		live++;
	}
	printf("%s: %u rows bit-for-bit as acknowledged, %u deleted keys "
	       "missing\n", when, live, mo->n - live);
}

static void grads(uint64_t key, int round, float *g)
{
	for (int j = 0; j < DIM; j++)
		g[j] = 0.01f * (float)((int)(key % 13) - 6 + j) +
		       0.1f * (float)round;
}

/* The workload of step 1; updates m as the node acknowledges. */
static void workload(struct sv_cli *k, const struct proto_table_info *t,
		     struct model *mo)
{
	static uint64_t keys[NPUT];
	static float v[NPUT * DIM], g[NPUT * DIM], sum[DIM];
	int32_t st[NPUT];

	for (unsigned i = 0; i < NPUT; i++) {
		keys[i] = 1000003ull * i + 17;
		for (int j = 0; j < DIM; j++)
			v[i * DIM + j] = (float)i / 7.0f - (float)j;
	}
	SV_OK(sv_keys(k, PROTO_OP_PUT, t, keys, NPUT, v, 0, st, NULL));
	for (unsigned i = 0; i < NPUT; i++) {
		SV_CHECK(st[i] == PROTO_ST_CREATED, "put: status %d", st[i]);
		model_put(mo, keys[i], &v[i * DIM]);
	}
	/* update 1: keys 0..99 once */
	for (unsigned i = 0; i < 100; i++)
		grads(keys[i], 1, &g[i * DIM]);
	SV_OK(sv_keys(k, PROTO_OP_UPDATE, t, keys, 100, g, 0, st, NULL));
	for (unsigned i = 0; i < 100; i++) {
		SV_CHECK(st[i] == 0, "update: status %d", st[i]);
		model_update(mo, keys[i], &g[i * DIM]);
	}
	/* update 2: keys 0..49 twice in one batch: one step with the sum */
	for (unsigned i = 0; i < 100; i++) {
		keys[NPUT - 100 + i] = keys[i % 50];
		grads(keys[i % 50], 2 + (int)(i / 50), &g[i * DIM]);
	}
	SV_OK(sv_keys(k, PROTO_OP_UPDATE, t, &keys[NPUT - 100], 100, g, 0,
		      st, NULL));
	for (unsigned i = 0; i < 50; i++) {
		for (int j = 0; j < DIM; j++)
			sum[j] = g[i * DIM + j] + g[(i + 50) * DIM + j];
		SV_CHECK(st[i] == 0 && st[i + 50] == 0, "update 2: status");
		model_update(mo, keys[i], sum);
	}
	for (unsigned i = 0; i < 100; i++) /* restore keys[200..299] */
		keys[NPUT - 100 + i] = 1000003ull * (NPUT - 100 + i) + 17;
	/* get-or-init 50 new keys (uniform initializer) */
	{
		uint64_t nk[50];
		static float out[50 * DIM], row[DIM];

		for (unsigned i = 0; i < 50; i++)
			nk[i] = 777000 + i;
		SV_OK(sv_keys(k, PROTO_OP_GET_OR_INIT, t, nk, 50, NULL, 0, st,
			      out));
		for (unsigned i = 0; i < 50; i++) {
			SV_CHECK(st[i] == PROTO_ST_CREATED, "get_or_init: %d",
				 st[i]);
			init_row(&mo->spec.init, nk[i], row, DIM);
			SV_CHECK(!memcmp(row, &out[i * DIM], sizeof(row)),
				 "initializer row differs");
			model_put(mo, nk[i], row);
		}
	}
	/* delete keys 200..249 */
	SV_OK(sv_keys(k, PROTO_OP_DELETE, t, &keys[200], 50, NULL, 0, st,
		      NULL));
	for (unsigned i = 200; i < 250; i++) {
		SV_CHECK(st[i - 200] == 0, "delete: status %d", st[i - 200]);
		mo->live[model_slot(mo, keys[i])] = false;
	}
}

/* Step 0 on a device: a header that is no pool is refused, then the
 * device is formatted on request. */
static void device_format(struct node *n)
{
	size_t len = 0;
	int is_pmem = 0, ret;
	char *p = pmem_map_file(g_pool, 0, 0, 0, &len, &is_pmem);

	SV_CHECK(p, "map %s: %s", g_pool, pmem_errormsg());
	SV_CHECK(is_pmem, "%s: pmem_is_pmem is false on a device dax", g_pool);
	printf("device %s: %zu MiB\n", g_pool, len >> 20);
	memcpy(p, "not a recstore pool", 20);
	pmem_persist(p, 20);
	pmem_unmap(p, len);
	ret = node_start(n);
	SV_CHECK(ret == RS_E_CORRUPT, "a device holding no pool was opened "
		 "(%d)", ret);
	printf("non-blank device without a pool refused\n");
	g_format = true;
	SV_OK(node_start(n));
	g_format = false;
	node_end(n, SIGTERM);
	p = pmem_map_file(g_pool, 0, 0, 0, &len, &is_pmem);
	SV_CHECK(p && !memcmp(p, "RSSLAB01", 8), "device not formatted");
	pmem_unmap(p, len);
	printf("device formatted (storage.format)\n");
}

/* Make a pool at g_pool holding an empty table of spec s without a
 * catalog record; layout2: as earlier versions did, with s in the JSON
 * catalog file next to it. */
static void legacy_pool(const struct proto_table_spec *s, bool layout2)
{
	struct slab_store_cfg sc = {.path = g_pool, .size = 64ull << 20,
				    .flags = SLAB_F_SPARSE};
	struct slab_table_cfg tc = {
		.name = s->name, .dim = s->dim,
		.dtype = row_dtype_from_proto(s->dtype),
		.capacity = s->capacity,
		.state_floats = (uint32_t)optim_state_floats(s->optim.kind,
							     s->dim)};
	struct slab_store *st;
	char file[700];
	json_t *root;

	SV_OK(slab_store_open(&st, &sc));
	SV_OK(slab_table_create(st, &tc, NULL));
	if (!layout2) {
		slab_store_close(&st);
		return;
	}
	st->sb->layout_version = 2;
	st->sb->checksum = XXH3_64bits(st->sb,
				       offsetof(struct slab_super, checksum));
	slab_persist(st, st->sb, SLAB_SB_BYTES);
	slab_store_close(&st);
	snprintf(file, sizeof(file), "%s.tables.json", g_pool);
	root = json_pack("{s:s, s:i, s:[{s:s, s:o}]}", "format",
			 "recstore-tables", "version", 1, "tables", "uid", "",
			 "spec", srv_spec_to_json(s));
	SV_CHECK(root && !json_dump_file(root, file, JSON_REAL_PRECISION(9)),
		 "cannot write %s", file);
	json_decref(root);
}

/* The layout-2 migration: the JSON file's spec moves into the pool. */
static void migration(void)
{
	struct proto_table_spec s;
	struct proto_table_info t;
	char file[700];
	struct node n;
	struct sv_cli k;
	uint32_t ntab;

	sv_spec(&s, "old", 4, OPTIM_ADAM);
	s.capacity = 500;
	s.optim.lr = 0.1f / 3.0f;
	s.optim.beta1 = 0.8f;
	init_params_default(&s.init, INIT_NORMAL);
	s.init.std = 0.3f;
	s.init.seed = 0xabcdef;
	legacy_pool(&s, true);
	snprintf(file, sizeof(file), "%s.tables.json", g_pool);
	for (int round = 0; round < 2; round++) {
		SV_OK(node_start(&n));
		sv_cli_open(&k, n.ip, n.port);
		SV_OK(dir_find(&k, "old", &t, &ntab));
		SV_CHECK(ntab == 1 && !memcmp(&t.spec.optim, &s.optim,
					      sizeof(s.optim)) &&
				 !memcmp(&t.spec.init, &s.init,
					 sizeof(s.init)),
			 "round %d: the layout-2 table's spec is not the "
			 "catalog file's", round);
		sv_cli_close(&k);
		node_end(&n, round ? SIGTERM : SIGKILL);
		unlink(file); /* from now on only the pool has it */
	}
	printf("layout-2 pool: the catalog file's spec moved into the "
	       "pool\n");
	unlink(g_pool);
	/* layout 3: a table without its record is damage, never served
	 * with parameters nobody gave it */
	legacy_pool(&s, false);
	SV_CHECK(node_start(&n) == RS_E_CORRUPT, "a layout-3 table without "
		 "a catalog record was served");
	printf("layout-3 table without a catalog record: node refused\n");
	unlink(g_pool);
}

/* Steps 1 to 3 on the pool at g_pool; 77 if it cannot be registered. */
static int run(void)
{
	static struct model mo;
	struct proto_table_spec qs;
	struct proto_table_info t, t2, q;
	struct node n;
	struct sv_cli k;
	uint64_t keys[10];
	float g[10 * DIM];
	int32_t st[10];
	uint32_t ntab;
	int ret;

	memset(&mo, 0, sizeof(mo));
	ret = node_start(&n);
	if (ret == -EOPNOTSUPP || ret == -EINVAL) {
		printf("skip: the pool's file system cannot be registered "
		       "for RDMA (fsdax?): the node said so clearly\n");
		return 77;
	}
	SV_OK(ret);
	sv_cli_open(&k, n.ip, n.port);
	sv_spec(&mo.spec, "p", DIM, OPTIM_ADAGRAD);
	mo.spec.optim.lr = 0.1f;
	mo.spec.optim.initial_accumulator = 0.25f;
	mo.spec.capacity = 2000;
	init_params_default(&mo.spec.init, INIT_UNIFORM);
	mo.spec.init.a = 0.5f;
	mo.spec.init.seed = 7;
	SV_OK(sv_create(&k, &mo.spec, &t));
	workload(&k, &t, &mo);
	check_all(&k, &t, &mo, "before the crash");
	sv_cli_close(&k);

	node_end(&n, SIGKILL);
	printf("node killed (SIGKILL); restarting on the same pool\n");
	SV_OK(node_start(&n));
	sv_cli_open(&k, n.ip, n.port);
	SV_OK(dir_find(&k, "p", &t2, &ntab));
	SV_CHECK(t2.id == t.id && t2.generation == t.generation,
		 "table id/generation changed: %u/%llx -> %u/%llx", t.id,
		 (unsigned long long)t.generation, t2.id,
		 (unsigned long long)t2.generation);
	SV_CHECK(t2.spec.optim.kind == OPTIM_ADAGRAD &&
			 t2.spec.optim.lr == 0.1f &&
			 t2.spec.optim.initial_accumulator == 0.25f &&
			 t2.spec.init.kind == INIT_UNIFORM &&
			 t2.spec.init.seed == 7,
		 "table spec not restored");
	check_all(&k, &t2, &mo, "after the crash");
	for (unsigned i = 0; i < 10; i++) {
		keys[i] = mo.keys[i];
		grads(keys[i], 9, &g[i * DIM]);
	}
	SV_OK(sv_keys(&k, PROTO_OP_UPDATE, &t2, keys, 10, g, 0, st, NULL));
	for (unsigned i = 0; i < 10; i++)
		model_update(&mo, keys[i], &g[i * DIM]);
	check_all(&k, &t2, &mo, "update after the crash (optimizer state)");

	sv_spec(&qs, "q", 8, OPTIM_SGD);
	SV_OK(sv_create(&k, &qs, &q));
	sv_cli_close(&k);
	node_end(&n, SIGTERM);
	SV_OK(node_start(&n));
	sv_cli_open(&k, n.ip, n.port);
	SV_OK(dir_find(&k, "q", &q, &ntab));
	SV_CHECK(ntab == 2, "%u tables after a clean restart", ntab);
	check_all(&k, &t2, &mo, "after a clean restart");
	SV_OK(sv_drop(&k, "p"));
	sv_cli_close(&k);
	node_end(&n, SIGTERM);
	SV_OK(node_start(&n));
	sv_cli_open(&k, n.ip, n.port);
	SV_CHECK(dir_find(&k, "p", &t2, &ntab) == RS_E_NOTFOUND && ntab == 1,
		 "dropped table came back (%u tables)", ntab);
	SV_OK(dir_find(&k, "q", &q, &ntab));
	printf("drop survives a restart: 1 table left\n");
	sv_cli_close(&k);
	node_end(&n, SIGTERM);
	return 0;
}

int main(int argc, char **argv)
{
	char dir[512], pool[600];
	const char *base = getenv("RS_PMEM_DIR");
	const char *dev = getenv("RS_PMEM_DEV");
	int ret;

	if (argc == 4 && !strcmp(argv[1], "--child-server"))
		return child_server(argv[2], argv[3], false);
	if (argc == 4 && !strcmp(argv[1], "--child-format"))
		return child_server(argv[2], argv[3], true);
	g_ip = sv_ip();
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	sv_memlock();
	snprintf(dir, sizeof(dir), "%s/rs-pmem-XXXXXX",
		 base ? base : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		sv_die("mkdtemp %s", dir);
	snprintf(pool, sizeof(pool), "%s/pool", dir);
	g_pool = pool;
	printf("pool file %s\n", pool);
	ret = run();
	if (!ret) {
		unlink(pool);
		migration();
	}
	snprintf(pool, sizeof(pool), "rm -rf '%s'", dir);
	if (system(pool))
		printf("warning: could not remove %s\n", dir);
	if (ret)
		return ret;
	if (dev && *dev) {
		struct node n;

		g_pool = dev;
		printf("\n--- device dax %s ---\n", dev);
		device_format(&n);
		SV_OK(run());
	} else {
		printf("RS_PMEM_DEV not set: no device dax run\n");
	}
	printf("ok\n");
	return 0;
}
