/*
 * repl_grow_driver.c - the workload of test_repl_grow.sh (not a test of
 * its own): tables that grow on the members of a replicated cluster
 * (docs/replication.md, "Tables that grow").
 *
 *   repl_grow_driver init SEEDS
 *       create table "gt" (dim 4, Adagrad: rows with optimizer state;
 *       capacity CAP per node, max_capacity MAXCAP) and put BASE keys,
 *       row i = {i, i, i, i}
 *   repl_grow_driver stream SEEDS W OUT
 *       writer W of WRITERS: insert its share of the NEW keys, a batch at
 *       a time (PUT, then one UPDATE of the batch: the state moves); OUT
 *       gets the keys whose PUT was acknowledged and a summary. OUT.ready
 *       after the first acknowledged batch.
 *   repl_grow_driver read SEEDS STOPFILE OUT
 *       until STOPFILE exists: get the BASE keys (READ and RPC in turn);
 *       each must be found with its row exactly (no reader ever takes a
 *       row of another table's extent or generation).
 *   repl_grow_driver check SEEDS CKROOT ADDR... -- OUT...
 *       every acknowledged key and every BASE key is found through the
 *       cluster (BASE rows exact); each node at ADDR dumps the table with
 *       its state (FREEZE and DUMP naming the epoch, the DUMP of every row
 *       the node holds: PROTO_CKF_HELD, to CKROOT/gI/p; THAW); every key is
 *       on exactly R nodes, and its copies are bit-identical (row and
 *       optimizer state).
 *
 * SEEDS: addr:port,addr:port. Exit 0, or 1 with a message.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "client/client_internal.h"
#include "common/addr.h"
#include "common/rs_internal.h"
#include "recstore/client.h"

#define TABLE "gt"
#define DIM 4
#define CAP 1024u	/* per node at creation */
#define MAXCAP 4096u	/* what it may grow to by itself */
#define BASE 256u	/* keys put by init, read throughout */
#define NEW 2560u	/* keys the writers insert: ~1900 per node, r 2 of 3 */
#define WRITERS 2
#define BATCH 64u
#define R 2
#define MAXNODES 8
#define NKEYS (BASE + NEW)

#define DRIVER_NAME "repl_grow_driver"
#define DRIVER_TABLE TABLE
#define DRIVER_TIMEOUT_MS 30000
#include "cluster_driver.h"

static uint64_t key_of(uint32_t i)
{
	return 0xd1b54a32d192ed03ull * (uint64_t)(i + 1) + 11u;
}

static int do_init(const char *seeds)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	static float rows[BASE * DIM];
	static uint64_t keys[BASE];
	int st[BASE], ret;

	rs_table_spec_init(&spec, TABLE, DIM);
	spec.capacity = CAP;
	spec.max_capacity = MAXCAP;
	spec.optim.kind = RS_OPT_ADAGRAD;
	spec.optim.lr = 0.5f;
	ret = rs_table_create(c, &spec);
	if (ret)
		die("create: %s (%s)", rs_strerror(ret), rs_errormsg());
	for (uint32_t i = 0; i < BASE; i++) {
		keys[i] = key_of(i);
		for (int j = 0; j < DIM; j++)
			rows[i * DIM + j] = (float)i;
	}
	ret = rs_put(open_table(c), keys, BASE, rows, st, 0);
	if (ret < 0)
		die("put: %s (%s)", rs_strerror(ret), rs_errormsg());
	for (uint32_t i = 0; i < BASE; i++)
		if (st[i] < 0)
			die("put key %u: %s", i, rs_strerror(st[i]));
	rs_client_close(&c);
	printf("init: table '%s' (%u rows per node, up to %u), %u keys\n",
	       TABLE, CAP, MAXCAP, BASE);
	return 0;
}

static int do_stream(const char *seeds, int w, const char *out)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static float rows[BATCH * DIM], g[BATCH * DIM];
	uint64_t keys[BATCH];
	uint32_t idx[BATCH], acked = 0, failed = 0, batches = 0;
	int st[BATCH], lasterr = 0;
	FILE *f = fopen(out, "w");

	if (!f)
		die("%s: cannot write", out);
	for (uint32_t i = 0; i < BATCH * DIM; i++)
		g[i] = -1.0f;
	for (uint32_t next = BASE + (uint32_t)w; next < NKEYS;) {
		uint32_t n = 0;
		int ret;

		for (; n < BATCH && next < NKEYS; next += WRITERS, n++) {
			idx[n] = next;
			keys[n] = key_of(next);
			for (int j = 0; j < DIM; j++)
				rows[n * DIM + j] = (float)next;
		}
		ret = rs_put(t, keys, n, rows, st, 0);
		for (uint32_t i = 0; i < n; i++) {
			if (ret >= 0 && st[i] >= 0) {
				fprintf(f, "%u\n", idx[i]);
				acked++;
			} else {
				failed++;
				lasterr = ret < 0 ? ret : st[i];
			}
		}
		/* the optimizer state of the batch moves (on the primaries,
		 * shipped to the backups) */
		ret = rs_update(t, keys, n, g, st, 0);
		if (ret < 0)
			lasterr = ret;
		if (++batches == 1)
			cd_ready(out);
	}
	fclose(f);
	{
		struct rs_client_stats cs = { .struct_size = sizeof(cs) };

		rs_client_get_stats(c, &cs);
		printf("stream %d: %u batches, %u keys acknowledged, %u "
		       "failed (last error: %s), %" PRIu64 " configuration "
		       "refreshes\n", w, batches, acked, failed,
		       failed ? rs_strerror(lasterr) : "none",
		       (uint64_t)cs.config_refreshes);
	}
	rs_client_close(&c);
	return failed ? 1 : 0;
}

static int do_read(const char *seeds, const char *stop, const char *out)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static float row[BASE * DIM];
	static uint64_t keys[BASE];
	uint64_t reads = 0, failed = 0, wrong = 0;
	int st[BASE];
	FILE *f;

	for (uint32_t i = 0; i < BASE; i++)
		keys[i] = key_of(i);
	while (access(stop, F_OK) != 0) {
		int ret = rs_get(t, keys, BASE, row, st,
				 reads & 1 ? RS_F_RPC : 0);
		bool all = ret >= 0;

		reads++;
		for (uint32_t i = 0; all && i < BASE; i++) {
			if (st[i] != RS_KEY_FOUND) {
				all = false;
				break;
			}
			for (int j = 0; j < DIM; j++)
				if (row[i * DIM + j] != (float)i) {
					if (!wrong++)
						fprintf(stderr, "key %u: "
							"element %d is %g\n",
							i, j,
							row[i * DIM + j]);
					break;
				}
		}
		failed += !all;
		if (reads == 3)
			cd_ready(out);
	}
	if (!(f = fopen(out, "w")))
		die("%s: cannot write", out);
	fprintf(f, "reads %" PRIu64 " failed %" PRIu64 " wrong %" PRIu64 "\n",
		reads, failed, wrong);
	fclose(f);
	printf("read: %" PRIu64 " gets of %u keys, %" PRIu64 " failed, %"
	       PRIu64 " wrong rows\n", reads, BASE, failed, wrong);
	rs_client_close(&c);
	return wrong ? 1 : 0;
}

/* One CKPT phase straight to the node at addr. */
static void raw_ckpt(struct rs_client *c, const char *addr,
		     const struct proto_ckpt_req *q)
{
	struct cli_node n;
	struct cli_conn *cc;
	struct proto_hdr h;
	struct proto_msg m;
	struct rv_msg raw;
	int len;

	memset(&n, 0, sizeof(n));
	n.name = (char *)addr;
	n.dev = c->dev;
	n.timeout_ms = 30000;
	if (rs_addr_parse("node", addr, 0, false, n.host, sizeof(n.host),
			  &n.port) ||
	    cli_pool_init(&n.pool, 1))
		die("%s: bad address", addr);
	if (cli_conn_get(&n, &cc))
		die("%s: connect: %s", addr, rs_errormsg());
	cli_hdr_init(&h, 0, false);
	len = proto_enc_ckpt_req(cc->msg, cc->msg_max, &h, q);
	if (len < 0 || cli_wire_call(cc, (size_t)len, &raw, &m))
		die("%s: CKPT phase %u: %s", addr, q->phase, rs_errormsg());
	rv_msg_release(&raw);
	cli_conn_put(cc);
	cli_pool_destroy(&n.pool);
}

struct copy {
	int holders;
	uint32_t sf;
	float v[DIM + 3 * DIM + 1];	/* row and state */
};

/* Dump node addr's table with its state and add its rows to copies. */
static void dump_node(struct rs_client *c, const char *addr, int ni,
		      const char *root, struct copy *copies, int *bad)
{
	struct proto_ckpt_req q = { .timeout_ms = 30000 };
	struct ckpt_reader *rd;
	struct ckpt_record rec;
	char path[1024];
	uint64_t rows = 0;
	int ret;

	/* a member's dump names its epoch; HELD: every row it holds, the
	 * backup copies too, not only the keys it leads */
	q.epoch = atomic_load(&c->epoch);
	q.flags = PROTO_CKF_EPOCH;
	q.phase = PROTO_CKPT_FREEZE;
	raw_ckpt(c, addr, &q);
	q.phase = PROTO_CKPT_DUMP;
	q.flags = PROTO_CKF_EPOCH | PROTO_CKF_HELD | PROTO_CKF_STATE;
	q.id[0] = (uint8_t)(ni + 1);
	snprintf(q.dir, sizeof(q.dir), "g%d", ni);
	snprintf(q.table, sizeof(q.table), "%s", TABLE);
	snprintf(q.file, sizeof(q.file), "p");
	raw_ckpt(c, addr, &q);
	memset(&q, 0, sizeof(q));
	q.phase = PROTO_CKPT_THAW;
	raw_ckpt(c, addr, &q);
	snprintf(path, sizeof(path), "%s/g%d/p", root, ni);
	if (ckpt_part_open(&rd, path, NULL))
		die("%s: %s", path, rs_errormsg());
	if (ckpt_part_desc_of(rd)->dim != DIM ||
	    ckpt_part_desc_of(rd)->state_floats > 3 * DIM + 1)
		die("%s: unexpected geometry", path);
	while ((ret = ckpt_part_next(rd, &rec)) == 1) {
		uint32_t sf = ckpt_part_desc_of(rd)->state_floats;
		float v[DIM + 3 * DIM + 1];
		uint32_t i;

		if (rec.kind != CKPT_REC_ROW)
			continue;
		rows++;
		for (i = 0; i < NKEYS && key_of(i) != rec.key; i++)
			;
		if (i == NKEYS) {
			printf("%s: key %016" PRIx64 " was never written\n",
			       addr, rec.key);
			++*bad;
			continue;
		}
		memcpy(v, rec.payload, DIM * sizeof(float));
		memcpy(v + DIM, rec.state, sf * sizeof(float));
		if (copies[i].holders &&
		    (copies[i].sf != sf ||
		     memcmp(copies[i].v, v, (DIM + sf) * sizeof(float)))) {
			printf("key %u: the copy on %s differs (row %g, the "
			       "other %g)\n", i, addr, v[0], copies[i].v[0]);
			++*bad;
		}
		copies[i].holders++;
		copies[i].sf = sf;
		memcpy(copies[i].v, v, (DIM + sf) * sizeof(float));
	}
	if (ret < 0)
		die("%s: %s", path, rs_errormsg());
	ckpt_part_close(rd);
	printf("node %s: %" PRIu64 " rows with state\n", addr, rows);
}

static int do_check(const char *seeds, const char *root, int nadr,
		    char **adr, int nout, char **outs)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static bool want[NKEYS];
	static struct copy copies[NKEYS];
	static uint64_t keys[NKEYS];
	static float row[NKEYS * DIM];
	static int st[NKEYS];
	uint32_t n = 0, acked = 0;
	int bad = 0;

	for (uint32_t i = 0; i < BASE; i++)
		want[i] = true;
	for (int o = 0; o < nout; o++) {
		FILE *f = fopen(outs[o], "r");
		unsigned i;

		if (!f)
			die("%s: cannot read", outs[o]);
		while (fscanf(f, "%u", &i) == 1)
			if (i < NKEYS && !want[i]) {
				want[i] = true;
				acked++;
			}
		fclose(f);
	}
	for (uint32_t i = 0; i < NKEYS; i++)
		if (want[i])
			keys[n++] = key_of(i);
	for (int pass = 0; pass < 2; pass++) {
		if (rs_get(t, keys, n, row, st, pass ? RS_F_RPC : 0) < 0)
			die("get: %s", rs_errormsg());
		for (uint32_t k = 0; k < n; k++) {
			if (st[k] != RS_KEY_FOUND) {
				printf("key %016" PRIx64 ": acknowledged, "
				       "not found (status %d): LOST\n",
				       keys[k], st[k]);
				bad++;
			} else if (k < BASE && row[k * DIM] != (float)k) {
				printf("key %u: row %g\n", k, row[k * DIM]);
				bad++;
			}
		}
	}
	for (int a = 0; a < nadr; a++)
		dump_node(c, adr[a], a, root, copies, &bad);
	for (uint32_t i = 0; i < NKEYS; i++)
		if (want[i] && copies[i].holders != R) {
			printf("key %u: on %d nodes, not %d\n", i,
			       copies[i].holders, R);
			bad++;
		}
	printf("check: %u base keys and %u acknowledged inserts found; "
	       "every copy on %d nodes bit-identical (rows and state); %d "
	       "problems\n", BASE, acked, R, bad);
	rs_client_close(&c);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "init"))
		return do_init(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "stream"))
		return do_stream(argv[2], atoi(argv[3]) % WRITERS, argv[4]);
	if (argc == 5 && !strcmp(argv[1], "read"))
		return do_read(argv[2], argv[3], argv[4]);
	if (argc >= 6 && !strcmp(argv[1], "check")) {
		int sep = 4;

		while (sep < argc && strcmp(argv[sep], "--"))
			sep++;
		if (sep == argc || sep - 4 > MAXNODES)
			die("check: ADDR... -- OUT...");
		return do_check(argv[2], argv[3], sep - 4, argv + 4,
				argc - sep - 1, argv + sep + 1);
	}
	fprintf(stderr, "usage: repl_grow_driver init|stream|read|check ...\n");
	return 2;
}
