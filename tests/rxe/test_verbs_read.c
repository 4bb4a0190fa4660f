/*
 * test_verbs_read.c - batched one-sided READ over Soft-RoCE: random offsets
 * and sizes (1 B .. 1 MiB) over a 256 MiB registered region compared byte
 * for byte, one call with 4096 READs, chains of different lengths in turn
 * (each posts exactly its own WRs), the asynchronous form with several
 * batches in flight, zero-length and oversized requests, and per-chain
 * status when a chain fails (bad rkey), and caller memory registered with
 * rv_mr_reg. The server is a thread of this
 * process; its region is filled with a known pattern.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "verbs_common.h"

#define REGION (256u << 20)
#define LOCAL (32u << 20)
/* rounds of random READs (each up to LOCAL bytes, compared byte for
 * byte): fewer under TSan, whose memcmp and memset checks make this
 * test 4.6 times slower than the release tree's (52.8 s against 11.5 s
 * in a full run of the test command), for the same paths */
#if defined(__SANITIZE_THREAD__)
#define RANDOM_ROUNDS 4
#else
#define RANDOM_ROUNDS 12
#endif

static struct rv_dev *dev;
static struct vt_srv srv;
static struct rv_conn *conn;
static struct vt_region info;
static struct rv_mr *local;
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* log-uniform in [1, max] */
static uint32_t rnd_size(uint32_t max)
{
	int bits = (int)(rnd() % 21);	/* 2^0 .. 2^20 */
	uint64_t hi = 1ull << bits, v = hi + rnd() % hi;

	return (uint32_t)(v > max ? max : v);
}

static int setup(void **state)
{
	struct rv_dev_caps caps;

	VT_CHECK(rv_dev_open(&dev, vt_dev_name));
	rv_dev_caps(dev, &caps);
	printf("device %s: max_rd_atom %u, max_qp_wr %u, hugepages %d\n",
	       caps.name, caps.max_rd_atom, caps.max_qp_wr, caps.hugepages);
	vt_srv_start(&srv, dev, REGION, 0, NULL);
	printf("region 256 MiB at %#llx rkey %#x, huge pages: %d\n",
	       (unsigned long long)srv.info.addr, srv.info.rkey,
	       srv.region->huge);
	conn = vt_connect(dev, rv_listener_port(srv.l), NULL, &info);
	assert_int_equal(info.len, REGION);
	printf("rd_depth %u chain_max %u\n", rv_conn_rd_depth(conn),
	       rv_conn_chain_max(conn));
	VT_CHECK(rv_mem_alloc(dev, LOCAL, RV_ACC_LOCAL_WRITE, &local));
	return 0;
}

static int teardown(void **state)
{
	rv_conn_close(&conn);
	rv_mr_free(&local);
	vt_srv_stop(&srv);
	rv_dev_close(&dev);
	return 0;
}

static void check_req(const struct rv_read_req *r)
{
	uint64_t off = r->remote - info.addr;
	const uint8_t *src = (const uint8_t *)srv.region->addr + off;

	assert_int_equal(r->status, 0);
	if (memcmp(r->local, src, r->len) != 0)
		fail_msg("READ of %u bytes at offset %llu differs", r->len,
			 (unsigned long long)off);
}

static void random_reads(void **state)
{
	enum { MAXN = 512 };
	struct rv_read_req reqs[MAXN];
	size_t total = 0, nreads = 0;
	double t0 = vt_now();

	for (int round = 0; round < RANDOM_ROUNDS; round++) {
		size_t used = 0;
		int n = 0;

		memset(local->addr, 0xa5, LOCAL);
		while (n < MAXN) {
			uint32_t len = rnd_size(1u << 20);

			if (used + len > LOCAL)
				break;
			reqs[n] = (struct rv_read_req){
				.local = (uint8_t *)local->addr + used,
				.lkey = local->lkey,
				.len = len,
				.remote = info.addr + rnd() % (REGION - len + 1),
				.rkey = info.rkey,
				.status = 1,
			};
			used += len;
			n++;
		}
		VT_CHECK(rv_read_batch(conn, reqs, (size_t)n, 60000));
		for (int i = 0; i < n; i++)
			check_req(&reqs[i]);
		total += used;
		nreads += (size_t)n;
	}
	printf("random: %zu READs, %.1f MiB, %.2f s, all equal\n", nreads,
	       (double)total / (1 << 20), vt_now() - t0);
}

static void batch_4096(void **state)
{
	static struct rv_read_req reqs[4096];
	struct rv_stats st0, st1;
	double t0;

	rv_conn_stats(conn, &st0);
	for (int i = 0; i < 4096; i++) {
		uint32_t len = 1 + (uint32_t)(rnd() % 4096);

		reqs[i] = (struct rv_read_req){
			.local = (uint8_t *)local->addr + (size_t)i * 4096,
			.lkey = local->lkey,
			.len = len,
			.remote = info.addr + rnd() % (REGION - len + 1),
			.rkey = info.rkey,
			.status = 1,
		};
	}
	t0 = vt_now();
	VT_CHECK(rv_read_batch(conn, reqs, 4096, 60000));
	rv_conn_stats(conn, &st1);
	for (int i = 0; i < 4096; i++)
		check_req(&reqs[i]);
	printf("4096 READs in one call: %.3f s, %llu doorbells\n",
	       vt_now() - t0, (unsigned long long)(st1.chains - st0.chains));
	assert_true(st1.reads - st0.reads == 4096);
	assert_true(st1.chains - st0.chains <=
		    4096 / rv_conn_chain_max(conn) + 64);
}

/*
 * Chains of different lengths one after another on one conn: the WRs
 * are set up once and a chain writes only what changes (rv_read.c), so a
 * short chain after a long one must post exactly its own WRs. Each
 * batch READs into its own area; the areas of the batch before it are
 * poisoned first and must stay so (a WR left linked from the longer
 * chain would READ into them again).
 */
static void chain_lengths(void **state)
{
	enum { AREA = 1u << 20, LEN = 512 };
	static struct rv_read_req reqs[256];
	uint32_t cm = rv_conn_chain_max(conn);
	uint32_t lens[] = { cm + 3, 1, cm, 2, 2 * cm + 1, 1 };
	uint8_t *prev = NULL;

	for (size_t b = 0; b < sizeof(lens) / sizeof(lens[0]); b++) {
		uint32_t n = lens[b] < 256 ? lens[b] : 256;
		uint8_t *area = (uint8_t *)local->addr + (b % 2) * AREA;
		struct rv_stats st0, st1;

		if (prev)
			memset(prev, 0x5a, AREA);
		rv_conn_stats(conn, &st0);
		for (uint32_t i = 0; i < n; i++)
			reqs[i] = (struct rv_read_req){
				.local = area + (size_t)i * LEN,
				.lkey = local->lkey,
				.len = LEN,
				.remote = info.addr + rnd() % (REGION - LEN + 1),
				.rkey = info.rkey,
				.status = 1,
			};
		VT_CHECK(rv_read_batch(conn, reqs, n, 60000));
		rv_conn_stats(conn, &st1);
		for (uint32_t i = 0; i < n; i++)
			check_req(&reqs[i]);
		assert_true(st1.reads - st0.reads == n);
		for (size_t i = 0; prev && i < AREA; i++)
			if (prev[i] != 0x5a)
				fail_msg("batch %zu of %u READs wrote the area "
					 "of the batch before it (byte %zu)",
					 b, n, i);
		prev = area;
	}
	printf("chains of %u, 1, %u, 2, %u, 1 READs: exactly their own\n",
	       cm + 3, cm, 2 * cm + 1);
}

static void async_batches(void **state)
{
	enum { NB = 6, PER = 300 };
	static struct rv_read_req reqs[NB][PER];
	struct rv_batch b[NB];
	size_t off = 0;

	for (int k = 0; k < NB; k++) {
		for (int i = 0; i < PER; i++, off += 512) {
			reqs[k][i] = (struct rv_read_req){
				.local = (uint8_t *)local->addr + off,
				.lkey = local->lkey,
				.len = 512,
				.remote = info.addr + rnd() % (REGION - 512),
				.rkey = info.rkey,
			};
		}
		VT_CHECK(rv_read_post(conn, &b[k], reqs[k], PER));
	}
	/* overlap: the caller could compute here; then collect in order */
	for (int k = NB - 1; k >= 0; k--)
		VT_CHECK(rv_batch_wait(conn, &b[k], 30000));
	for (int k = 0; k < NB; k++) {
		assert_true(rv_batch_done(&b[k]));
		for (int i = 0; i < PER; i++)
			check_req(&reqs[k][i]);
	}
}

static void edge_lengths(void **state)
{
	struct rv_read_req r[3] = {
		{ .local = local->addr, .lkey = local->lkey, .len = 0,
		  .remote = info.addr, .rkey = info.rkey, .status = 1 },
		{ .local = local->addr, .lkey = local->lkey, .len = 1,
		  .remote = info.addr + REGION - 1, .rkey = info.rkey,
		  .status = 1 },
		{ .local = local->addr, .lkey = local->lkey,
		  .len = 0xffffffffu, .remote = info.addr, .rkey = info.rkey,
		  .status = 1 },
	};

	assert_int_equal(rv_read_batch(conn, r, 3, 10000), RS_E_TOOBIG);
	assert_int_equal(r[0].status, 0);
	assert_int_equal(r[1].status, 0);
	assert_int_equal(r[2].status, RS_E_TOOBIG);
	assert_int_equal(((uint8_t *)local->addr)[0], vt_byte(REGION - 1));
	assert_int_equal(rv_conn_status(conn), 0);	/* conn unharmed */
	assert_int_equal(rv_read_batch(conn, NULL, 0, 100), 0);
}

/* A bad rkey fails its chain; earlier chains keep status 0; later requests
 * get the conn's failure; the conn is dead afterwards. */
static void failing_chain(void **state)
{
	enum { N = 200, BAD = 64 };
	struct rv_conn_attr a;
	struct rv_read_req reqs[N];
	struct vt_region inf;
	struct rv_conn *c;
	uint32_t cm;
	int ret;

	rv_conn_attr_init(&a);
	a.rd_depth = 16;
	a.chain_max = 8;
	c = vt_connect(dev, rv_listener_port(srv.l), &a, &inf);
	cm = rv_conn_chain_max(c);
	assert_int_equal(cm, 8);
	for (int i = 0; i < N; i++)
		reqs[i] = (struct rv_read_req){
			.local = (uint8_t *)local->addr + (size_t)i * 64,
			.lkey = local->lkey, .len = 64,
			.remote = inf.addr + (uint64_t)i * 64,
			.rkey = i == BAD ? inf.rkey ^ 0x5a5a00 : inf.rkey,
			.status = 1,
		};
	ret = rv_read_batch(c, reqs, N, 20000);
	printf("bad rkey: batch returned %d (%s): %s\n", ret,
	       rs_strerror(ret), rs_errormsg());
	assert_int_equal(ret, RS_E_VERBS);
	for (int i = 0; i < BAD / 8 * 8; i++)
		check_req(&reqs[i]);
	for (int i = BAD / 8 * 8; i < BAD / 8 * 8 + 8; i++)
		assert_int_equal(reqs[i].status, RS_E_VERBS);
	for (int i = BAD / 8 * 8 + 8; i < N; i++)
		assert_true(reqs[i].status == RS_E_VERBS ||
			    reqs[i].status == RS_E_DISCONNECTED);
	/* dead: later operations fail at once */
	assert_int_equal(rv_read_batch(c, reqs, 1, 1000), RS_E_VERBS);
	assert_int_equal(rv_msg_send(c, "x", 1, 1000), RS_E_VERBS);
	rv_conn_close(&c);
	assert_null(c);
	/* the main conn is unaffected */
	reqs[0].rkey = info.rkey;
	reqs[0].remote = info.addr + 12345;
	VT_CHECK(rv_read_batch(conn, reqs, 1, 10000));
	check_req(&reqs[0]);
}

/* Caller memory (as a PMEM mapping would be) registered with rv_mr_reg. */
static void caller_memory(void **state)
{
	enum { LEN = 3u << 20 };
	uint8_t *mem = aligned_alloc(4096, LEN);
	struct rv_read_req r[3];
	struct rv_mr *mr;

	assert_non_null(mem);
	for (size_t i = 0; i < LEN; i++)
		mem[i] = (uint8_t)(i * 13 + 5);
	assert_int_equal(rv_mr_reg(dev, NULL, 1, 0, &mr), RS_E_INVAL);
	assert_int_equal(rv_mr_reg(dev, mem, LEN, 1u << 9, &mr), RS_E_INVAL);
	VT_CHECK(rv_mr_reg(dev, mem, LEN, RV_ACC_REMOTE_READ, &mr));
	assert_ptr_equal(mr->addr, mem);
	for (int i = 0; i < 3; i++)
		r[i] = (struct rv_read_req){
			.local = (uint8_t *)local->addr + (size_t)i * (1 << 20),
			.lkey = local->lkey, .len = 1 << 20,
			.remote = (uintptr_t)mem + (uint64_t)i * (1 << 20) + 7,
			.rkey = mr->rkey,
		};
	r[2].len -= 7;
	VT_CHECK(rv_read_batch(conn, r, 3, 30000));
	for (int i = 0; i < 3; i++)
		assert_memory_equal(r[i].local,
				    mem + (size_t)i * (1 << 20) + 7, r[i].len);
	rv_mr_free(&mr);
	assert_null(mr);
	assert_non_null(mem);	/* still the caller's */
	free(mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(random_reads),
		cmocka_unit_test(batch_4096),
		cmocka_unit_test(chain_lengths),
		cmocka_unit_test(async_batches),
		cmocka_unit_test(edge_lengths),
		cmocka_unit_test(caller_memory),
		cmocka_unit_test(failing_chain),
	};

	vt_env();
	return cmocka_run_group_tests(tests, setup, teardown);
}
