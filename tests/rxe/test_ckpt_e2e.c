/*
 * test_ckpt_e2e.c - a checkpoint of a running two-node store, restored
 * onto a one-node store (docs/checkpoint.md), over rxe.
 *
 * Two tables: "count" (SGD, lr 1, rows start at 0, every update has
 * gradient -1, so a row counts the updates applied to it) and "ada"
 * (Adagrad: rows and optimizer state to carry). An updater thread sends
 * rounds of updates of every key of both tables (a round is acknowledged
 * when every batch of it returned, all statuses checked), while a reader
 * thread reads "count" one-sidedly. The checkpoint is taken meanwhile:
 *   - its "count" rows all lie in [rounds acknowledged before it began,
 *     rounds acknowledged after it ended + 1]: one point of the stream;
 *   - the updater never saw an error: the writes it sent during the
 *     pause were answered RS_E_BUSY and retried by the client library,
 *     and the nodes' STATS say such replies happened (the pause was hit;
 *     the checkpoint is repeated, at most 5 times, until it is);
 *   - the reader never saw an error (reads do not pause);
 * then it is restored onto a one-node store and checkpointed there
 * again: both checkpoints hold the same records, bit for bit (rows and
 * optimizer state); a damaged part is refused by restore before anything
 * is written, with the file's name.
 */
#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "client/client_internal.h"
#include "ckpt_nodes.h"
#include "stats.h"

#define NKEYS 6000
#define DIM 8
#define BATCH 1000

static char root[64];	/* the nodes' checkpoint_dir */
static atomic_int stop;
static atomic_ulong rounds, reads;
static atomic_int upd_errors, read_errors;
static uint64_t keys[NKEYS];

struct tabs {
	struct rs_table *count, *ada;
};

static void *updater(void *arg)
{
	struct tabs *t = arg;
	static float minus1[BATCH * DIM], g[BATCH * DIM];
	static int st[BATCH];

	for (size_t i = 0; i < BATCH * DIM; i++)
		minus1[i] = -1.0f;
	for (unsigned long r = 0; !atomic_load(&stop); r++) {
		for (size_t b = 0; b < NKEYS; b += BATCH) {
			for (size_t i = 0; i < BATCH * DIM; i++)
				g[i] = (float)((b + i + r) % 13) * 0.01f -
				       0.05f;
			/* the number of keys found: all of them */
			if (rs_update(t->count, keys + b, BATCH, minus1, st,
				      0) != BATCH ||
			    rs_update(t->ada, keys + b, BATCH, g, st, 0) !=
				    BATCH) {
				fprintf(stderr, "updater: %s (status %d)\n",
					rs_errormsg(), st[0]);
				atomic_fetch_add(&upd_errors, 1);
				return NULL;
			}
		}
		atomic_store(&rounds, r + 1);
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct tabs *t = arg;
	static float out[BATCH * DIM];
	static int st[BATCH];

	while (!atomic_load(&stop)) {
		if (rs_get(t->count, keys, BATCH, out, st, 0) != BATCH) {
			atomic_fetch_add(&read_errors, 1);
			fprintf(stderr, "reader: %s\n", rs_errormsg());
			return NULL;
		}
		atomic_fetch_add(&reads, 1);
	}
	return NULL;
}

static uint64_t stat_sum(struct rs_client *c, const char *key)
{
	struct tl_stat w[] = { { NULL, key, 0, 0 }, { 0 } };

	H_OK(tl_stats_sum(c, w, NULL));
	return w[0].v;
}

/* every record of a checkpoint's table, by key: payload + state bytes */
struct rec_set {
	uint64_t key[NKEYS];
	uint8_t data[NKEYS][DIM * 4 * 2 + 4];
	size_t len;
	size_t n;
};

static void add_record(void *arg, const struct ckpt_part_desc *d,
		       const struct ckpt_record *rec)
{
	struct rec_set *out = arg;
	size_t k = rec->key - 1000;

	out->len = DIM * 4 + d->state_floats * 4;
	H_CHECK(k < NKEYS && rec->kind == CKPT_REC_ROW,
		"record of key %" PRIu64, rec->key);
	out->key[k] = rec->key;
	memcpy(out->data[k], rec->payload, DIM * 4);
	memcpy(out->data[k] + DIM * 4, rec->state, d->state_floats * 4);
	out->n++;
}

static void records_of(const char *dir, const char *table,
		       struct rec_set *out)
{
	memset(out, 0, sizeof(*out));
	ckpt_each_record(dir, table, add_record, out);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static atomic_int progress_done;

static void on_progress(void *arg, const struct rs_ckpt_progress *p)
{
	(void)arg;
	if (p->struct_size >= sizeof(*p) && !strcmp(p->phase, "done"))
		atomic_fetch_add(&progress_done, 1);
}

int main(void)
{
	const char *ip = getenv("RS_RDMA_IP");
	struct sv_node a, b, c1;
	struct rs_client *cl, *adm, *cl1;
	struct tabs t;
	struct rs_ckpt_opts o = RS_CKPT_OPTS_INIT;
	struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;
	static struct rec_set x, y;
	char nodes[600], path[256], path2[256], bad[256];
	pthread_t up, rd;
	unsigned long r0 = 0, r1 = 0;
	uint64_t busy = 0;
	int attempt;

	if (!ckpt_test_begin(root, sizeof(root), "rs-ckpt-e2e"))
		return 77;
	ckpt_node_start(&a, ip, root);
	ckpt_node_start(&b, ip, root);
	snprintf(nodes, sizeof(nodes), "%s,%s", a.addr, b.addr);
	cl = sv_client(nodes, 60000);
	adm = sv_client(nodes, 60000);
	{
		struct rs_table_spec sp = RS_TABLE_SPEC_INIT;

		H_OK(rs_table_spec_init(&sp, "count", DIM));
		H_OK(rs_table_spec_set_optimizer(&sp, "sgd"));
		sp.optim.lr = 1.0f;	/* a row counts its updates */
		sp.capacity = 16384;
		H_OK(rs_table_create(cl, &sp));
		H_OK(rs_table_open(cl, "count", &t.count));
	}
	t.ada = h_table(cl, "ada", DIM, "adagrad", RS_DTYPE_FP32, 16384);
	{
		static float zero[BATCH * DIM];
		static int st[BATCH];

		for (size_t i = 0; i < NKEYS; i++)
			keys[i] = 1000 + i;
		for (size_t b0 = 0; b0 < NKEYS; b0 += BATCH) {
			H_OK(rs_put(t.count, keys + b0, BATCH, zero, st, 0));
			H_OK(rs_put(t.ada, keys + b0, BATCH, zero, st, 0));
		}
	}
	H_CHECK(!pthread_create(&up, NULL, updater, &t), "thread");
	H_CHECK(!pthread_create(&rd, NULL, reader, &t), "thread");
	while (atomic_load(&rounds) < 2)
		usleep(10000);

	for (attempt = 1; attempt <= 5 && !busy; attempt++) {
		double t0;

		snprintf(path, sizeof(path), "%s/c%d", root, attempt);
		r0 = atomic_load(&rounds);
		t0 = now_s();
		H_OK(rs_checkpoint(adm, path, &o, &rep));
		r1 = atomic_load(&rounds);
		busy = stat_sum(adm, "checkpoint.busy_replies");
		printf("checkpoint %d: %" PRIu64 " rows, %" PRIu64 " bytes in "
		       "%.2f s, writes paused %.3f s; rounds %lu..%lu; busy "
		       "replies so far %" PRIu64 "\n", attempt, rep.rows,
		       rep.bytes, now_s() - t0, (double)rep.paused_us / 1e6,
		       r0, r1, busy);
		H_CHECK(rep.rows == 2 * NKEYS, "%" PRIu64 " rows", rep.rows);
		H_OK(rs_ckpt_verify(path, NULL));
		records_of(path, "count", &x);
		H_CHECK(x.n == NKEYS, "%zu count records", x.n);
		for (size_t k = 0; k < NKEYS; k++) {
			float v;

			memcpy(&v, x.data[k], 4);
			H_CHECK(v >= (float)r0 && v <= (float)(r1 + 1),
				"key %zu counts %g updates, outside [%lu, %lu]:"
				" not one point of the stream", k, (double)v,
				r0, r1 + 1);
		}
	}
	H_CHECK(busy > 0, "no write met the pause in 5 checkpoints");
	while (atomic_load(&rounds) < r1 + 1)
		usleep(10000);
	atomic_store(&stop, 1);
	pthread_join(up, NULL);
	pthread_join(rd, NULL);
	H_CHECK(!atomic_load(&upd_errors), "the updater saw errors");
	H_CHECK(!atomic_load(&read_errors), "the reader saw errors");
	printf("updater: %lu rounds, reader: %lu batches, no errors\n",
	       (unsigned long)atomic_load(&rounds),
	       (unsigned long)atomic_load(&reads));

	/* restore onto one node, checkpoint it again: the same records */
	ckpt_node_start(&c1, ip, root);
	cl1 = sv_client(c1.addr, 60000);
	H_OK(rs_restore(cl1, path, &o, &rep));
	printf("restored onto 1 node: %" PRIu64 " rows in %.2f s\n",
	       rep.rows, (double)rep.elapsed_us / 1e6);
	H_CHECK(rep.rows == 2 * NKEYS, "restored %" PRIu64 " rows", rep.rows);
	snprintf(path2, sizeof(path2), "%s/again", root);
	H_OK(rs_checkpoint(cl1, path2, &o, &rep));
	for (int k = 0; k < 2; k++) {
		const char *tn = k ? "ada" : "count";

		records_of(path, tn, &x);
		records_of(path2, tn, &y);
		H_CHECK(x.n == NKEYS && y.n == NKEYS && x.len == y.len,
			"%s: %zu / %zu records", tn, x.n, y.n);
		for (size_t i = 0; i < NKEYS; i++)
			H_CHECK(!memcmp(x.data[i], y.data[i], x.len),
				"%s: key %zu differs after restore", tn, i);
		printf("%s: %d keys equal bit for bit (rows%s)\n", tn, NKEYS,
		       x.len > DIM * 4 ? " and optimizer state" : "");
	}

	/* an export of "ada" (rows only), read back without a store: the
	 * rows the store serves */
	{
		static const char *const only[] = { "ada" };
		struct rs_ckpt_opts eo = RS_CKPT_OPTS_INIT;
		struct rs_table_spec sp = RS_TABLE_SPEC_INIT;
		struct rs_ckpt_reader *rr;
		struct rs_table *ta;
		static uint64_t ek[NKEYS];
		static float er[NKEYS * DIM], got[NKEYS * DIM];
		static int est[NKEYS];
		uint32_t sf = 1;
		size_t n = 0;
		int got_n;

		eo.flags = RS_CKPT_EXPORT;
		eo.tables = only;
		eo.ntables = 1;
		eo.progress = on_progress;
		snprintf(path2, sizeof(path2), "%s/export", root);
		H_OK(rs_checkpoint(cl1, path2, &eo, &rep));
		H_CHECK(!rep.with_state && rep.tables == 1 &&
			rep.rows == NKEYS, "export: %u tables, %" PRIu64
			" rows", rep.tables, rep.rows);
		H_CHECK(atomic_load(&progress_done) == 1, "progress: %d "
			"\"done\" calls", atomic_load(&progress_done));
		H_OK(rs_ckpt_reader_open(&rr, path2));
		H_CHECK(rs_ckpt_reader_table_count(rr) == 1, "tables");
		H_OK(rs_ckpt_reader_table(rr, 0, &sp, &sf));
		H_CHECK(!strcmp(sp.name, "ada") && sp.dim == DIM && sf == 0,
			"export spec");
		while ((got_n = rs_ckpt_reader_read(rr, 0, ek + n,
						     er + n * DIM, NULL,
						     n + 1000 <= NKEYS
							     ? 1000
							     : NKEYS - n)) > 0)
			n += (size_t)got_n;
		H_CHECK(got_n == 0 && n == NKEYS, "read %zu rows (%d)", n,
			got_n);
		rs_ckpt_reader_close(&rr);
		H_OK(rs_table_open(cl1, "ada", &ta));
		H_CHECK(rs_get(ta, ek, NKEYS, got, est, 0) == NKEYS, "get");
		H_CHECK(!memcmp(er, got, sizeof(er)), "exported rows differ "
			"from the store's");
		printf("export of ada: %zu rows read back, equal to the "
		       "store's\n", n);
	}

	/* a damaged part: restore refuses it before writing anything */
	{
		char cmd[3 * PATH_MAX];
		struct rs_table_spec sp = RS_TABLE_SPEC_INIT;
		struct rs_client *cl2;

		snprintf(bad, sizeof(bad), "%s/bad", root);
		snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", path, bad);
		H_CHECK(!system(cmd), "cp");
		snprintf(cmd, sizeof(cmd), "%s/ada-n1.rsck", bad);
		ckpt_flip_byte(cmd);
		H_OK(rs_table_drop(cl1, "count"));
		H_CHECK(rs_restore(cl1, bad, &o, &rep) == RS_E_CORRUPT,
			"restore took a damaged checkpoint");
		printf("damaged: %s\n", rs_errormsg());
		H_CHECK(strstr(rs_errormsg(), "ada-n1.rsck"), "no file name");
		cl2 = sv_client(c1.addr, 60000);
		H_CHECK(rs_table_get_spec(cl2, "count", &sp) == RS_E_NOTFOUND,
			"restore wrote before verifying");
		rs_client_close(&cl2);
	}
	rs_client_close(&cl1);
	rs_client_close(&cl);
	rs_client_close(&adm);
	ckpt_test_end((struct sv_node *const[]){ &c1, &a, &b }, 3, root);
	return 0;
}
