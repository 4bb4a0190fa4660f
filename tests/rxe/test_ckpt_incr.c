/*
 * test_ckpt_incr.c - incremental checkpoints (docs/checkpoint.md) of a
 * two-node store, a chain of them restored onto one node, over rxe.
 *
 * A full checkpoint of an Adagrad table; then updates, deletions, new
 * keys, a key deleted and inserted again, a key inserted and deleted:
 * the increment on the full checkpoint holds exactly the keys changed
 * (rows) and deleted (records), counted. More updates; a second
 * increment on the first holds only those; a full checkpoint right after
 * it (no write between) is the reference. An increment on the first full
 * checkpoint is then refused by the nodes (their changes are relative to
 * the latest). The chain full -> inc1 -> inc2 restored onto one node and
 * checkpointed there again equals the reference bit for bit (rows and
 * optimizer state, the same keys). A damaged part of inc1 is found by
 * verifying inc2 and refuses its restore, naming the file; a missing
 * base refuses it naming the directory.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "client/client_internal.h"
#include "ckpt_nodes.h"

#define NKEYS 4000
#define DIM 8
#define KEY0 1000
#define NEW0 100000
#define MAXREC 8192

static char root[64];

/* the records of a checkpoint (one link), sorted by key */
struct rec {
	uint64_t key;
	unsigned kind;
	uint8_t data[DIM * 4 * 2];
};

struct rec_set {
	struct rec r[MAXREC];
	size_t n, rows, deleted;
};

static int cmp_rec(const void *a, const void *b)
{
	uint64_t x = ((const struct rec *)a)->key;
	uint64_t y = ((const struct rec *)b)->key;

	return x < y ? -1 : x > y;
}

static void add_record(void *arg, const struct ckpt_part_desc *d,
		       const struct ckpt_record *rec)
{
	struct rec_set *out = arg;
	struct rec *o = &out->r[out->n++];

	H_CHECK(out->n < MAXREC, "too many records");
	o->key = rec->key;
	o->kind = rec->kind;
	if (rec->kind == CKPT_REC_DELETED) {
		out->deleted++;
		return;
	}
	out->rows++;
	memcpy(o->data, rec->payload, DIM * 4);
	memcpy(o->data + DIM * 4, rec->state, d->state_floats * 4);
}

static void records_of(const char *dir, struct rec_set *out)
{
	memset(out, 0, sizeof(*out));
	ckpt_each_record(dir, NULL, add_record, out);
	qsort(out->r, out->n, sizeof(out->r[0]), cmp_rec);
}

static bool has(const struct rec_set *s, uint64_t key, unsigned kind)
{
	struct rec k = { .key = key };
	const struct rec *f = bsearch(&k, s->r, s->n, sizeof(k), cmp_rec);

	return f && f->kind == kind;
}

static void update(struct rs_table *t, uint64_t first, size_t n, float g)
{
	static uint64_t k[NKEYS];
	static float grad[NKEYS * DIM];
	static int st[NKEYS];

	for (size_t i = 0; i < n; i++)
		k[i] = first + i;
	for (size_t i = 0; i < n * DIM; i++)
		grad[i] = g + (float)(i % 7) * 0.01f;
	H_CHECK(rs_update(t, k, n, grad, st, 0) == (int)n, "update: %s",
		rs_errormsg());
}

/* keys first .. first + n - 1: put (rows of their key) or deleted */
static void put_or_delete(struct rs_table *t, uint64_t first, size_t n,
			  bool put)
{
	static uint64_t k[NKEYS];
	static float v[NKEYS * DIM];
	static int st[NKEYS];

	for (size_t i = 0; i < n; i++)
		k[i] = first + i;
	for (size_t i = 0; put && i < n * DIM; i++)
		v[i] = (float)(first + i) * 0.001f;
	H_OK(put ? rs_put(t, k, n, v, st, 0) : rs_delete(t, k, n, st, 0));
}

#define put(t, first, n) put_or_delete(t, first, n, true)
#define del(t, first, n) put_or_delete(t, first, n, false)

static void verify_counts(const char *dir, uint64_t rows, uint64_t deleted)
{
	struct ckpt_manifest *m;
	struct ckpt_verify_stats st;

	H_OK(ckpt_verify(dir, &st));
	H_OK(ckpt_manifest_load(dir, &m));
	printf("%s: %s, %" PRIu64 " rows, %" PRIu64 " deletions\n", dir,
	       m->kind == CKPT_INCREMENTAL ? "incremental" : "full", st.rows,
	       st.deleted);
	H_CHECK(st.rows == rows && st.deleted == deleted, "%s: %" PRIu64
		" rows and %" PRIu64 " deletions, expected %" PRIu64 " and %"
		PRIu64, dir, st.rows, st.deleted, rows, deleted);
	ckpt_manifest_free(m);
}

int main(void)
{
	const char *ip = getenv("RS_RDMA_IP");
	struct sv_node a, b, c1;
	struct rs_client *cl, *cl1;
	struct rs_table *t;
	struct rs_ckpt_opts o = RS_CKPT_OPTS_INIT, io = RS_CKPT_OPTS_INIT;
	struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;
	static struct rec_set x, y;
	char nodes[600], full[256], inc1[256], inc2[256], ref[256], again[256];
	char path[PATH_MAX + 64];
	int rc;

	if (!ckpt_test_begin(root, sizeof(root), "rs-incr"))
		return 77;
	snprintf(full, sizeof(full), "%s/full", root);
	snprintf(inc1, sizeof(inc1), "%s/inc1", root);
	snprintf(inc2, sizeof(inc2), "%s/inc2", root);
	snprintf(ref, sizeof(ref), "%s/ref", root);
	snprintf(again, sizeof(again), "%s/again", root);
	ckpt_node_start(&a, ip, root);
	ckpt_node_start(&b, ip, root);
	snprintf(nodes, sizeof(nodes), "%s,%s", a.addr, b.addr);
	cl = sv_client(nodes, 60000);
	t = h_table(cl, "ada", DIM, "adagrad", RS_DTYPE_FP32, 16384);
	put(t, KEY0, NKEYS);
	update(t, KEY0, NKEYS, 0.1f);

	/* an increment needs a base the nodes took */
	H_OK(rs_checkpoint(cl, full, &o, &rep));
	verify_counts(full, NKEYS, 0);

	/* changes: 500 updated, 200 deleted, 300 new, 1 deleted and put
	 * again (a row), 1 new and deleted (a deletion) */
	update(t, KEY0, 500, -0.2f);
	del(t, KEY0 + 500, 200);
	put(t, NEW0, 300);
	del(t, KEY0 + 800, 1);
	put(t, KEY0 + 800, 1);
	put(t, NEW0 + 300, 1);
	del(t, NEW0 + 300, 1);
	io.base = full;
	H_OK(rs_checkpoint(cl, inc1, &io, &rep));
	printf("increment 1: %" PRIu64 " rows, %" PRIu64 " bytes in %.3f s\n",
	       rep.rows, rep.bytes, (double)rep.elapsed_us / 1e6);
	verify_counts(inc1, 500 + 300 + 1, 200 + 1);
	records_of(inc1, &x);
	for (uint64_t k = 0; k < 500; k++)
		H_CHECK(has(&x, KEY0 + k, CKPT_REC_ROW), "updated key");
	for (uint64_t k = 500; k < 700; k++)
		H_CHECK(has(&x, KEY0 + k, CKPT_REC_DELETED), "deleted key");
	for (uint64_t k = 0; k < 300; k++)
		H_CHECK(has(&x, NEW0 + k, CKPT_REC_ROW), "new key");
	H_CHECK(has(&x, KEY0 + 800, CKPT_REC_ROW), "key put again");
	H_CHECK(has(&x, NEW0 + 300, CKPT_REC_DELETED), "new key deleted");

	/* more updates; the second increment holds only them */
	update(t, KEY0 + 1000, 100, 0.3f);
	io.base = inc1;
	H_OK(rs_checkpoint(cl, inc2, &io, &rep));
	verify_counts(inc2, 100, 0);
	H_OK(rs_ckpt_verify(inc2, &rep));
	/* the reference: a full checkpoint at the same point */
	H_OK(rs_checkpoint(cl, ref, &o, &rep));
	verify_counts(ref, NKEYS - 200 + 300, 0);

	/* the nodes' changes are relative to ref now, not to full */
	snprintf(path, sizeof(path), "%s/stale", root);
	io.base = full;
	rc = rs_checkpoint(cl, path, &io, &rep);
	printf("increment on an older base: %s\n", rs_errormsg());
	H_CHECK(rc == RS_E_STALE && strstr(rs_errormsg(), "another "
					   "checkpoint"), "rc %d", rc);

	/* the chain onto one node, checkpointed again: the reference */
	ckpt_node_start(&c1, ip, root);
	cl1 = sv_client(c1.addr, 60000);
	H_OK(rs_restore(cl1, inc2, &o, &rep));
	printf("restored the chain onto 1 node: %" PRIu64 " rows in %.2f s\n",
	       rep.rows, (double)rep.elapsed_us / 1e6);
	H_CHECK(rep.rows == NKEYS + 801 + 100, "restored %" PRIu64 " rows",
		rep.rows);
	H_OK(rs_checkpoint(cl1, again, &o, &rep));
	records_of(ref, &x);
	records_of(again, &y);
	H_CHECK(x.n == y.n && x.n == NKEYS + 100, "%zu / %zu records", x.n,
		y.n);
	for (size_t i = 0; i < x.n; i++)
		H_CHECK(x.r[i].key == y.r[i].key &&
			!memcmp(x.r[i].data, y.r[i].data, sizeof(x.r[i].data)),
			"key %" PRIu64 " differs after restore", x.r[i].key);
	printf("chain restored: %zu keys equal bit for bit (rows and "
	       "optimizer state) to a full checkpoint\n", x.n);

	/* a damaged part of inc1: verifying or restoring inc2 refuses it */
	snprintf(path, sizeof(path), "%s/ada-n1.rsck", inc1);
	ckpt_flip_byte(path);
	rc = rs_ckpt_verify(inc2, NULL);
	printf("damaged base: %s\n", rs_errormsg());
	H_CHECK(rc == RS_E_CORRUPT && strstr(rs_errormsg(), "inc1/ada-n1.rsck"),
		"verify: rc %d", rc);
	H_OK(rs_table_drop(cl1, "ada"));
	rc = rs_restore(cl1, inc2, &o, &rep);
	H_CHECK(rc == RS_E_CORRUPT && strstr(rs_errormsg(), "ada-n1.rsck"),
		"restore took a damaged chain: rc %d", rc);
	{
		struct rs_table_spec sp = RS_TABLE_SPEC_INIT;

		H_CHECK(rs_table_get_spec(cl1, "ada", &sp) == RS_E_NOTFOUND,
			"restore wrote before verifying");
	}
	/* a missing base */
	snprintf(path, sizeof(path), "%s/gone", root);
	H_CHECK(!rename(full, path), "rename");
	rc = rs_restore(cl1, inc2, &o, &rep);
	printf("missing base: %s\n", rs_errormsg());
	H_CHECK(rc == -ENOENT && strstr(rs_errormsg(), "/full"), "rc %d", rc);

	rs_client_close(&cl1);
	rs_client_close(&cl);
	ckpt_test_end((struct sv_node *const[]){ &c1, &a, &b }, 3, root);
	return 0;
}
