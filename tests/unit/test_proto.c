/*
 * test_proto.c - the wire format: every message round-trips field by
 * field, the byte layout matches docs/protocol.md, encoders never write
 * past their buffer, the split helper is exact, and each decoder check
 * fires with the documented code and a message naming the field. The
 * table spec's hyper-parameters are the rows of common/spec_fields.h,
 * walked in a loop (spec_rows). (Random and mutated input:
 * test_proto_garbage.c.)
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/spec_fields.h"
#include "proto_test_util.h"

static struct corpus corpus;
static uint8_t buf[1 << 21], buf2[1 << 21];

static void decode_ok(const void *msg, size_t len, struct proto_msg *m)
{
	int rc = proto_decode(msg, len, NULL, m);

	if (rc)
		fail_msg("decode: %d %s", rc, rs_errormsg());
}

/* rc, what a decoder or encoder returned, is code, with a message that
 * holds needle */
static void expect_refused(int rc, int code, const char *needle)
{
	if (rc != code)
		fail_msg("'%s': expected %d got %d (%s)", needle, code, rc,
			 rs_errormsg());
	if (!strstr(rs_errormsg(), needle))
		fail_msg("message '%s' lacks '%s'", rs_errormsg(), needle);
}

static void expect_err(const void *msg, size_t len,
		       const struct proto_limits *lim, int code,
		       const char *needle)
{
	struct proto_msg m;

	expect_refused(proto_decode(msg, len, lim, &m), code, needle);
}

/* ---- every message: decode, then re-encode to the same bytes ---------- */

static void corpus_roundtrip(void **state)
{
	struct proto_msg m;

	for (size_t i = 0; i < corpus.n; i++) {
		int len;

		decode_ok(corpus.msg[i], corpus.len[i], &m);
		len = reencode(&m, buf, sizeof(buf));
		if (len != (int)corpus.len[i] ||
		    memcmp(buf, corpus.msg[i], corpus.len[i]))
			fail_msg("%s: re-encoding differs (%d vs %zu)",
				 corpus.name[i], len, corpus.len[i]);
	}
	assert_true(corpus.n >= 25);
}

static void header_fields(void **state)
{
	struct proto_hdr h = { .req_id = 0x0102030405060708ull,
			       .trace_id = 0xa1a2a3a4a5a6a7a8ull,
			       .flags = PROTO_F_TRACE | PROTO_F_REPLY,
			       .status = -5 };
	struct proto_msg m;
	int len = proto_enc_table_drop_req(buf, sizeof(buf), &h, "x");

	assert_int_equal(len, PROTO_HDR_BYTES + 3);
	decode_ok(buf, len, &m);
	assert_int_equal(m.hdr.version, PROTO_VERSION);
	assert_int_equal(m.hdr.opcode, PROTO_OP_TABLE_DROP);
	/* a request: the REPLY flag and the status are not taken from h */
	assert_int_equal(m.hdr.flags, PROTO_F_TRACE);
	assert_int_equal(m.hdr.status, 0);
	assert_true(m.hdr.req_id == h.req_id);
	assert_true(m.hdr.trace_id == h.trace_id);
	assert_int_equal(m.hdr.body_len, 3);
	assert_string_equal(m.u.table_drop, "x");

	h.flags = 0;
	h.status = 0;
	len = proto_enc_table_drop_reply(buf, sizeof(buf), &h);
	assert_int_equal(len, PROTO_HDR_BYTES);
	decode_ok(buf, len, &m);
	assert_int_equal(m.hdr.flags, PROTO_F_REPLY);
	assert_int_equal(m.hdr.status, 0);
	/* NULL header: ids 0 */
	len = proto_enc_table_drop_reply(buf, sizeof(buf), NULL);
	decode_ok(buf, len, &m);
	assert_true(m.hdr.req_id == 0 && m.hdr.trace_id == 0);
}

static void hello_fields(void **state)
{
	struct proto_hello_req q = { .recv_bytes = 65536, .name = "trn" };
	struct proto_hello_reply r = { .node_id = 5, .dir_generation = 6,
				       .limits = { 8192, 100, 64, 3 },
				       .name = "node-a" };
	struct proto_hdr h = hdr_of(9, 0);
	struct proto_msg m;
	int len;

	len = proto_enc_hello_req(buf, sizeof(buf), &h, &q);
	decode_ok(buf, len, &m);
	assert_int_equal(m.u.hello_req.recv_bytes, 65536);
	assert_string_equal(m.u.hello_req.name, "trn");
	len = proto_enc_hello_reply(buf, sizeof(buf), &h, &r);
	decode_ok(buf, len, &m);
	assert_true(m.u.hello_reply.node_id == 5);
	assert_true(m.u.hello_reply.dir_generation == 6);
	assert_memory_equal(&m.u.hello_reply.limits, &r.limits,
			    sizeof(r.limits));
	assert_string_equal(m.u.hello_reply.name, "node-a");

	/* limits out of range in a reply; recv_bytes out of range */
	r.limits.max_dim = 0;
	len = proto_enc_hello_reply(buf, sizeof(buf), &h, &r);
	expect_err(buf, len, NULL, RS_E_INVAL, "HELLO reply: max_dim");
	q.recv_bytes = 100;
	len = proto_enc_hello_req(buf, sizeof(buf), &h, &q);
	expect_err(buf, len, NULL, RS_E_INVAL, "recv_bytes: 100");
	/* encoders refuse names no decoder would accept */
	snprintf(q.name, sizeof(q.name), "a b");
	assert_int_equal(proto_enc_hello_req(buf, sizeof(buf), &h, &q),
			 RS_E_INVAL);
}

/* TABLE_CREATE / TABLE_DROP / TABLE_GROW naming the configuration epoch (header flag
 * EPOCH, the u64 at the end of the body): round trip; absent: epoch 0 and
 * the old encoding; refused: epoch 0, the flag on another opcode or on a
 * reply, a body without the epoch; the encoder refuses epoch 0. */
static void table_epoch(void **state)
{
	struct proto_table_spec s = sample_spec("emb", OPTIM_SGD);
	struct proto_hdr h = hdr_of(1, 1);
	uint64_t key = 5;
	struct proto_keys_req q = { .table_id = 1, .n = 1, .keys = &key };
	struct proto_msg m;
	int plain, len;

	(void)state;
	plain = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	decode_ok(buf, plain, &m);
	assert_int_equal(m.hdr.flags, PROTO_F_TRACE);
	assert_true(m.hdr.epoch == 0);
	h.flags |= PROTO_F_EPOCH;
	h.epoch = 0x1122334455667788ull;
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	assert_int_equal(len, plain + PROTO_EPOCH_BYTES);
	decode_ok(buf, len, &m);
	assert_int_equal(m.hdr.flags, PROTO_F_TRACE | PROTO_F_EPOCH);
	assert_true(m.hdr.epoch == 0x1122334455667788ull);
	assert_string_equal(m.u.table_create.name, "emb");
	/* the epoch last: 0 refused, missing refused */
	memset(buf + len - 8, 0, 8);
	expect_err(buf, len, NULL, RS_E_PROTO, "epoch: 0");
	len = proto_enc_table_drop_req(buf, sizeof(buf), &h, "emb");
	decode_ok(buf, len, &m);
	assert_string_equal(m.u.table_drop, "emb");
	assert_true(m.hdr.epoch == 0x1122334455667788ull);
	buf[24] = (uint8_t)(buf[24] - 8);	/* body_len */
	expect_err(buf, len - 8, NULL, RS_E_PROTO, "truncated at epoch");
	/* TABLE_GROW: the epoch after the name */
	{
		struct proto_table_grow g = { .capacity = 8192 };
		struct proto_hdr h0 = hdr_of(1, 1);

		snprintf(g.name, sizeof(g.name), "emb");
		plain = proto_enc_table_grow_req(buf, sizeof(buf), &h0, &g);
		len = proto_enc_table_grow_req(buf, sizeof(buf), &h, &g);
		assert_int_equal(len, plain + PROTO_EPOCH_BYTES);
		decode_ok(buf, len, &m);
		assert_int_equal(m.hdr.flags, PROTO_F_TRACE | PROTO_F_EPOCH);
		assert_true(m.hdr.epoch == 0x1122334455667788ull);
		assert_string_equal(m.u.table_grow.name, "emb");
		assert_true(m.u.table_grow.capacity == 8192);
		memset(buf + len - 8, 0, 8);
		expect_err(buf, len, NULL, RS_E_PROTO, "epoch: 0");
		h0.flags |= PROTO_F_EPOCH;	/* epoch 0 */
		assert_int_equal(proto_enc_table_grow_req(buf, sizeof(buf),
							  &h0, &g),
				 RS_E_INVAL);
	}
	/* the flag on another request, or on a reply */
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_GET, &q);
	assert_true(len > 0);
	decode_ok(buf, len, &m);
	assert_int_equal(m.hdr.flags & PROTO_F_EPOCH, 0); /* not encoded */
	buf[6] = PROTO_F_EPOCH;
	expect_err(buf, len, NULL, RS_E_PROTO, "only TABLE_CREATE, TABLE_DROP");
	len = proto_enc_table_drop_reply(buf, sizeof(buf), &h);
	buf[6] = PROTO_F_REPLY | PROTO_F_EPOCH;
	expect_err(buf, len, NULL, RS_E_PROTO, "in a reply");
	/* the encoder refuses epoch 0 with the flag */
	h.epoch = 0;
	assert_int_equal(proto_enc_table_drop_req(buf, sizeof(buf), &h, "e"),
			 RS_E_INVAL);
	assert_int_equal(proto_enc_table_create_req(buf, sizeof(buf), &h, &s),
			 RS_E_INVAL);
}

static void table_fields(void **state)
{
	struct proto_table_spec s = sample_spec("emb", OPTIM_ROWWISE_ADAGRAD);
	struct proto_table_info t = sample_info("emb2", 3);
	struct proto_hdr h = hdr_of(1, 0);
	struct proto_msg m;
	int len;

	s.optim.flags = OPTIM_F_DECOUPLED;
	s.dtype = PROTO_DTYPE_BF16;
	s.init = (struct init_params){ .kind = INIT_UNIFORM, .a = 0.5f,
				       .seed = 99 };
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	decode_ok(buf, len, &m);
	assert_memory_equal(&m.u.table_create, &s, sizeof(s));

	len = proto_enc_table_create_reply(buf, sizeof(buf), &h, &t);
	decode_ok(buf, len, &m);
	assert_memory_equal(&m.u.table_info, &t, sizeof(t));

	/* semantic checks of the spec's shape (the hyper-parameters, row by
	 * row: spec_rows) */
	s.dim = 100000;
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	expect_err(buf, len, NULL, RS_E_TOOBIG, "dim: 100000");
	s.dim = 0;
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	expect_err(buf, len, NULL, RS_E_INVAL, "dim: must be >= 1");
	s.dim = 8;
	s.capacity = 0; /* the node's default */
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	decode_ok(buf, len, &m);
	assert_int_equal(m.u.table_create.capacity, 0);
	s.capacity = PROTO_MAX_CAPACITY;
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	decode_ok(buf, len, &m);
	s.capacity = PROTO_MAX_CAPACITY + 1; /* row refs are 32-bit */
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	expect_err(buf, len, NULL, RS_E_TOOBIG, "capacity: 4294967295 rows");
	s.capacity = UINT64_MAX;
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	expect_err(buf, len, NULL, RS_E_TOOBIG, "capacity");
	s.capacity = 1;

	/* eviction: a block after the name, only when asked for */
	{
		size_t plain = (size_t)proto_enc_table_create_req(
			buf, sizeof(buf), &h, &s);

		s.capacity = 1000;
		s.evict = (struct proto_evict){ .policy = PROTO_EVICT_LFU,
						.max_rows = 500, .ttl_s = 60,
						.admit_after = 3 };
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		assert_int_equal((size_t)len, plain + 24);
		assert_int_equal(buf[32 + 7], PROTO_SPEC_F_EVICT);
		decode_ok(buf, len, &m);
		assert_memory_equal(&m.u.table_create, &s, sizeof(s));
		s.evict.max_rows = 1001;
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		expect_err(buf, len, NULL, RS_E_INVAL, "eviction.max_rows");
		s.evict = (struct proto_evict){ .max_rows = 10 };
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		expect_err(buf, len, NULL, RS_E_INVAL, "a cap needs a policy");
		s.evict = (struct proto_evict){ .ttl_s = PROTO_EVICT_TTL_MAX +
							 1 };
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		expect_err(buf, len, NULL, RS_E_INVAL, "eviction.ttl");
		s.evict = (struct proto_evict){ .admit_after = 256 };
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		expect_err(buf, len, NULL, RS_E_INVAL, "eviction.admit_after");
		s.evict = (struct proto_evict){ .policy = 3 };
		assert_int_equal(proto_enc_table_create_req(buf, sizeof(buf),
							    &h, &s),
				 RS_E_INVAL);
		s.evict = (struct proto_evict){ 0 };
		s.capacity = 1;
		/* growth: its own block, after eviction's when both */
		s.grow_log2 = 20;
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		assert_int_equal((size_t)len, plain + 8);
		assert_int_equal(buf[32 + 7], PROTO_SPEC_F_GROW);
		decode_ok(buf, len, &m);
		assert_memory_equal(&m.u.table_create, &s, sizeof(s));
		s.capacity = 1000;
		s.evict = (struct proto_evict){ .ttl_s = 60,
						.admit_after = 2 };
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		assert_int_equal((size_t)len, plain + 32);
		assert_int_equal(buf[32 + 7],
				 PROTO_SPEC_F_EVICT | PROTO_SPEC_F_GROW);
		decode_ok(buf, len, &m);
		assert_memory_equal(&m.u.table_create, &s, sizeof(s));
		s.evict.policy = PROTO_EVICT_LRU;	/* grow or evict */
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		expect_err(buf, len, NULL, RS_E_INVAL, "a table that grows");
		s.evict = (struct proto_evict){ 0 };
		s.capacity = 1;
		s.grow_log2 = 33;
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		expect_err(buf, len, NULL, RS_E_INVAL, "grow_log2: 33 is over 32");
		s.grow_log2 = 0;
		/* identity: its own block, after the others; 0 in it is
		 * refused (an encoder writes no block for 0) */
		s.ident = 0x0123456789abcdefull;
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		assert_int_equal((size_t)len, plain + 8);
		assert_int_equal(buf[32 + 7], PROTO_SPEC_F_IDENT);
		decode_ok(buf, len, &m);
		assert_memory_equal(&m.u.table_create, &s, sizeof(s));
		memset(buf + len - 8, 0, 8);
		expect_err(buf, len, NULL, RS_E_PROTO,
			   "ident: an identity block with identity 0");
		s.ident = 0;
	}

	/* geometry a client could be misled by */
	t.index.nbuckets = 1025;
	len = proto_enc_table_create_reply(buf, sizeof(buf), &h, &t);
	expect_err(buf, len, NULL, RS_E_INVAL, "overflow the");
	t = sample_info("emb2", 3);
	t.index.bucket_bytes = 0;
	len = proto_enc_table_create_reply(buf, sizeof(buf), &h, &t);
	expect_err(buf, len, NULL, RS_E_INVAL, "bucket_bytes");
	t = sample_info("emb2", 3);
	t.rows.row_bytes = 63; /* 16 x fp32 = 64 */
	len = proto_enc_table_create_reply(buf, sizeof(buf), &h, &t);
	expect_err(buf, len, NULL, RS_E_INVAL, "row_bytes 63");
	t = sample_info("emb2", 3);
	t.rows.addr = UINT64_MAX - 10;
	len = proto_enc_table_create_reply(buf, sizeof(buf), &h, &t);
	expect_err(buf, len, NULL, RS_E_INVAL, "wraps");

	/* drop */
	len = proto_enc_table_drop_req(buf, sizeof(buf), &h, "emb");
	decode_ok(buf, len, &m);
	assert_string_equal(m.u.table_drop, "emb");
	assert_int_equal(proto_enc_table_drop_req(buf, sizeof(buf), &h, ""),
			 RS_E_INVAL);
	assert_int_equal(proto_enc_table_drop_req(
				 buf, sizeof(buf), &h,
				 "0123456789012345678901234567890123456789"
				 "012345678901234567890123"),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "longer than 63"));
}

static void dir_pagination(void **state)
{
	enum { N = 40 };
	static struct proto_table_info t[N], got;
	struct proto_hdr h = hdr_of(1, 0);
	struct proto_list_req lr = { .start = 17 };
	struct proto_limits lim;
	struct proto_msg m;
	uint32_t start = 0, w, seen = 0;
	char name[16];
	int len;

	len = proto_enc_list_req(buf, sizeof(buf), &h, PROTO_OP_TABLE_DIR,
				 &lr);
	decode_ok(buf, len, &m);
	assert_int_equal(m.u.list_req.start, 17);
	assert_int_equal(proto_enc_list_req(buf, sizeof(buf), &h,
					    PROTO_OP_GET, &lr),
			 RS_E_INVAL);

	for (uint32_t i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "tab%u", i);
		t[i] = sample_info(name, i);
	}
	/* a 4 KiB buffer holds some entries; page through all of them */
	while (start < N) {
		len = proto_enc_table_dir_reply(buf, 4096, &h, 77, N, start,
						t + start, N - start, &w);
		assert_true(len > 0 && len <= 4096);
		assert_true(w >= 1 && w < N);
		decode_ok(buf, len, &m);
		assert_true(m.u.table_dir.generation == 77);
		assert_int_equal(m.u.table_dir.total, N);
		assert_int_equal(m.u.table_dir.start, start);
		assert_int_equal(m.u.table_dir.n, w);
		while (proto_table_dir_next(&m.u.table_dir, &got)) {
			assert_memory_equal(&got, &t[seen], sizeof(got));
			seen++;
		}
		start += w;
	}
	assert_int_equal(seen, N);
	assert_int_equal(proto_table_dir_next(&m.u.table_dir, &got), 0);

	/* not even one entry fits */
	assert_int_equal(proto_enc_table_dir_reply(buf, 100, &h, 1, N, 0, t,
						   N, &w),
			 RS_E_TOOBIG);
	assert_int_equal(w, 0);
	/* more entries than total; total over the decoder's limit */
	assert_int_equal(proto_enc_table_dir_reply(buf, sizeof(buf), &h, 1, 2,
						   1, t, 2, &w),
			 RS_E_INVAL);
	len = proto_enc_table_dir_reply(buf, sizeof(buf), &h, 1, N, 0, t, 2,
					&w);
	proto_limits_default(&lim);
	lim.max_tables = N - 1;
	expect_err(buf, len, &lim, RS_E_TOOBIG, "total: 40 tables");
}

static void stats_pagination(void **state)
{
	enum { N = 300 };
	static struct proto_stat s[N];
	struct proto_stat got;
	struct proto_hdr h = hdr_of(1, 0);
	struct proto_msg m;
	uint32_t start = 0, w, seen = 0;
	int len;

	for (uint32_t i = 0; i < N; i++) {
		s[i].table_id = i % 3 ? i / 3 : PROTO_NO_TABLE;
		snprintf(s[i].key, sizeof(s[i].key), "counter.%u", i);
		s[i].value = (uint64_t)i * 0x100000001ull;
	}
	while (start < N) {
		len = proto_enc_stats_reply(buf, 4096, &h, N, start, s + start,
					    N - start, &w);
		assert_true(len > 0 && len <= 4096 && w >= 1);
		decode_ok(buf, len, &m);
		assert_int_equal(m.u.stats.total, N);
		assert_int_equal(m.u.stats.start, start);
		while (proto_stats_next(&m.u.stats, &got)) {
			assert_int_equal(got.table_id, s[seen].table_id);
			assert_string_equal(got.key, s[seen].key);
			assert_true(got.value == s[seen].value);
			seen++;
		}
		start += w;
	}
	assert_int_equal(seen, N);
	snprintf(s[0].key, sizeof(s[0].key), "bad key");
	assert_int_equal(proto_enc_stats_reply(buf, sizeof(buf), &h, 1, 0, s,
					       1, &w),
			 RS_E_INVAL);
}

static void keyed_requests(void **state)
{
	uint64_t keys[5] = { 1, 2, 3, UINT64_MAX, 0 }, k2[5];
	float rows[5 * 3], r2[5 * 3];
	uint16_t half[5 * 3], h2[5 * 3];
	struct proto_hdr h = hdr_of(1, 0);
	struct proto_keys_req q = { .table_id = 9, .table_gen = 77, .n = 5,
				    .keys = keys };
	struct proto_msg m;
	int len;

	for (int i = 0; i < 15; i++) {
		rows[i] = (float)i * 0.5f - 3.0f;
		half[i] = (uint16_t)(0x3c00 + i);
	}
	for (uint32_t op = PROTO_OP_GET; op <= PROTO_OP_DELETE; op++) {
		const int has_rows = op == PROTO_OP_PUT ||
				     op == PROTO_OP_UPDATE;

		q.dim = has_rows ? 3 : 0;
		q.dtype = has_rows ? PROTO_DTYPE_FP32 : 0;
		q.rows = has_rows ? rows : NULL;
		q.flags = op == PROTO_OP_UPDATE ? PROTO_KF_CREATE : 0;
		len = proto_enc_keys_req(buf, sizeof(buf), &h, op, &q);
		assert_int_equal(len, (int)proto_keys_req_bytes(
					      op, 5, 3, PROTO_DTYPE_FP32));
		decode_ok(buf, len, &m);
		assert_int_equal(m.hdr.opcode, op);
		assert_int_equal(m.u.keys_req.table_id, 9);
		assert_true(m.u.keys_req.table_gen == 77);
		assert_int_equal(m.u.keys_req.flags, q.flags);
		assert_int_equal(m.u.keys_req.n, 5);
		assert_int_equal(m.u.keys_req.dim, q.dim);
		proto_load_u64(k2, m.u.keys_req.keys, 5);
		assert_memory_equal(k2, keys, sizeof(keys));
		assert_true(proto_key_at(m.u.keys_req.keys, 3) == UINT64_MAX);
		if (has_rows) {
			proto_load_f32(r2, m.u.keys_req.rows, 15);
			assert_memory_equal(r2, rows, sizeof(rows));
		} else {
			assert_null(m.u.keys_req.rows);
		}
	}
	/* fp16 / bf16 rows travel as raw 16-bit patterns */
	q = (struct proto_keys_req){ .n = 5, .dim = 3,
				     .dtype = PROTO_DTYPE_BF16, .keys = keys,
				     .rows = half };
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_PUT, &q);
	decode_ok(buf, len, &m);
	assert_int_equal(m.u.keys_req.dtype, PROTO_DTYPE_BF16);
	proto_load_u16(h2, m.u.keys_req.rows, 15);
	assert_memory_equal(h2, half, sizeof(half));

	/* a per-request lr: on the wire at body offset 28 with the flag */
	q = (struct proto_keys_req){ .n = 5, .dim = 3, .flags = PROTO_KF_LR,
				     .lr = 0.125f, .dtype = PROTO_DTYPE_FP32,
				     .keys = keys, .rows = rows };
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_UPDATE, &q);
	assert_int_equal(len, (int)proto_keys_req_bytes(PROTO_OP_UPDATE, 5, 3,
							PROTO_DTYPE_FP32));
	assert_int_equal(buf[32 + 28 + 3], 0x3e); /* 0.125f = 0x3e000000 */
	decode_ok(buf, len, &m);
	assert_int_equal(m.u.keys_req.flags, PROTO_KF_LR);
	assert_true(m.u.keys_req.lr == 0.125f);
	q.lr = 0.0f; /* 0 is a valid step (warm-up) */
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_UPDATE, &q);
	decode_ok(buf, len, &m);
	assert_true(m.u.keys_req.lr == 0.0f);
	for (int i = 0; i < 3; i++) {
		q.lr = (const float[]){ -1.0f, NAN, INFINITY }[i];
		assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
						    PROTO_OP_UPDATE, &q),
				 RS_E_INVAL);
	}
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_PUT, &q), RS_E_INVAL);
	/* without the flag the lr field is not sent */
	q.flags = 0;
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_UPDATE, &q);
	assert_int_equal(buf[32 + 28 + 3], 0);
	decode_ok(buf, len, &m);
	q = (struct proto_keys_req){ .n = 5, .dim = 3,
				     .dtype = PROTO_DTYPE_BF16, .keys = keys,
				     .rows = half };

	/* encoder refusals */
	q.flags = PROTO_KF_CREATE; /* only UPDATE may create */
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_PUT, &q),
			 RS_E_INVAL);
	q.flags = 0;
	q.dim = 0;
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_PUT, &q),
			 RS_E_INVAL);
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_STATS, &q),
			 RS_E_INVAL);
}

static void keyed_replies(void **state)
{
	const int32_t st[5] = { 0, 1, RS_E_NOTFOUND, -ENOMEM, 0 };
	int32_t st2[5];
	float rows[5 * 2] = { 1, 2, 0, 0, 0, 0, 7, 8, 9, 10 }, r2[10];
	struct proto_hdr h = hdr_of(3, 1);
	struct proto_keys_reply r = { .n = 5, .dim = 2,
				      .dtype = PROTO_DTYPE_FP32, .status = st,
				      .rows = rows };
	struct proto_reply_writer w;
	struct proto_msg m;
	int len;

	len = proto_enc_keys_reply(buf, sizeof(buf), &h, PROTO_OP_GET_OR_INIT,
				   &r);
	assert_int_equal(len, (int)proto_keys_reply_bytes(
				      PROTO_OP_GET_OR_INIT, 5, 2,
				      PROTO_DTYPE_FP32));
	decode_ok(buf, len, &m);
	assert_int_equal(m.u.keys_reply.n, 5);
	proto_load_i32(st2, m.u.keys_reply.status, 5);
	assert_memory_equal(st2, st, sizeof(st));
	assert_int_equal(proto_status_at(m.u.keys_reply.status, 3), -ENOMEM);
	proto_load_f32(r2, m.u.keys_reply.rows, 10);
	assert_memory_equal(r2, rows, sizeof(rows));
	/* rows of an odd count start 8-aligned in the message */
	assert_int_equal(((const uint8_t *)m.u.keys_reply.rows - buf) % 8, 0);
	assert_int_equal(((const uint8_t *)m.u.keys_reply.status - buf) % 8,
			 0);

	/* CREATED is not a GET or DELETE status */
	len = proto_enc_keys_reply(buf, sizeof(buf), &h, PROTO_OP_GET, &r);
	expect_err(buf, len, NULL, RS_E_PROTO, "status[1]: 1 is not a GET");
	r = (struct proto_keys_reply){ .n = 5, .status = st };
	len = proto_enc_keys_reply(buf, sizeof(buf), &h, PROTO_OP_DELETE, &r);
	expect_err(buf, len, NULL, RS_E_PROTO, "DELETE key status");
	len = proto_enc_keys_reply(buf, sizeof(buf), &h, PROTO_OP_UPDATE, &r);
	decode_ok(buf, len, &m);
	assert_null(m.u.keys_reply.rows);

	/* zero-copy writer: set / fail every key */
	memset(buf, 0xee, 4096);
	len = proto_keys_reply_begin(buf, sizeof(buf), &h, PROTO_OP_GET, 3, 2,
				     PROTO_DTYPE_FP32, &w);
	assert_int_equal(len, (int)proto_keys_reply_bytes(PROTO_OP_GET, 3, 2,
							  PROTO_DTYPE_FP32));
	assert_int_equal(w.row_bytes, 8);
	assert_int_equal(w.n, 3);
	proto_store_f32(w.rows, rows, 2);
	proto_reply_set(&w, 0, 0);
	proto_reply_fail(&w, 1, RS_E_NOTFOUND);
	proto_store_f32(w.rows + 2 * w.row_bytes, rows + 6, 2);
	proto_reply_set(&w, 2, 0);
	decode_ok(buf, len, &m);
	proto_load_f32(r2, m.u.keys_reply.rows, 6);
	assert_true(r2[0] == 1 && r2[1] == 2 && r2[2] == 0 && r2[3] == 0 &&
		    r2[4] == 7 && r2[5] == 8);
	assert_int_equal(proto_status_at(m.u.keys_reply.status, 1),
			 RS_E_NOTFOUND);
	/* writer without rows; too small a buffer */
	len = proto_keys_reply_begin(buf, sizeof(buf), &h, PROTO_OP_PUT, 1, 0,
				     0, &w);
	assert_null(w.rows);
	proto_reply_fail(&w, 0, RS_E_FULL);
	decode_ok(buf, len, &m);
	assert_int_equal(proto_keys_reply_begin(buf, 100, &h, PROTO_OP_GET,
						10, 2, PROTO_DTYPE_FP32, &w),
			 RS_E_TOOBIG);
	assert_null(w.status);
}

/* An UPDATE with PROTO_KF_ROWS and its images reply: statuses, images and
 * rows round-trip; a failed key has zeros; the form is refused on other
 * ops, a non-zero reserved word and a short body are refused; sizes. */
static void images_replies(void **state)
{
	struct proto_hdr h = hdr_of(9, 0);
	struct proto_reply_writer w;
	struct proto_image im = { .version = 6, .checksum = 0xabcdef,
				  .slot = 77 }, got;
	struct proto_keys_req kr = { .table_id = 1, .n = 1, .dim = 2,
				     .dtype = PROTO_DTYPE_FP32,
				     .flags = PROTO_KF_ROWS };
	const uint64_t key = 5;
	const float g[2] = { 1, 2 };
	struct proto_msg m;
	uint16_t half[2] = { 0x3c00, 0x4000 };
	int len;

	(void)state;
	kr.keys = &key;
	kr.rows = g;
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_UPDATE, &kr);
	decode_ok(buf, len, &m);
	assert_int_equal(m.u.keys_req.flags, PROTO_KF_ROWS);
	/* only an UPDATE asks for rows */
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_PUT, &kr);
	assert_true(len < 0);

	len = proto_images_reply_begin(buf, sizeof(buf), &h, 3, 2,
				       PROTO_DTYPE_FP16, &w);
	assert_int_equal(len, (int)proto_images_reply_bytes(3, 2,
							    PROTO_DTYPE_FP16));
	assert_int_equal(len, 32 + 16 + 16 + 3 * 24 + 3 * 4);
	proto_reply_set(&w, 0, PROTO_ST_CREATED);
	proto_image_set(&w, 0, &im);
	memcpy(w.rows, half, 4);
	proto_reply_fail(&w, 1, RS_E_NOTFOUND);
	proto_reply_set(&w, 2, PROTO_ST_OK);
	im.version = 8;
	proto_image_set(&w, 2, &im);
	memcpy(w.rows + 2 * w.row_bytes, half, 4);
	decode_ok(buf, len, &m);
	assert_non_null(m.u.keys_reply.images);
	assert_int_equal(m.u.keys_reply.dim, 2);
	assert_int_equal(m.u.keys_reply.dtype, PROTO_DTYPE_FP16);
	proto_image_at(m.u.keys_reply.images, 0, &got);
	assert_int_equal(got.version, 6);
	assert_int_equal(got.checksum, 0xabcdef);
	assert_int_equal(got.slot, 77);
	proto_image_at(m.u.keys_reply.images, 1, &got);
	assert_int_equal(got.version, 0);
	proto_image_at(m.u.keys_reply.images, 2, &got);
	assert_int_equal(got.version, 8);
	assert_memory_equal((const uint8_t *)m.u.keys_reply.rows + 8, half, 4);
	assert_int_equal(proto_status_at(m.u.keys_reply.status, 1),
			 RS_E_NOTFOUND);
	/* the images form belongs to UPDATE replies */
	buf[5] = PROTO_OP_PUT;
	expect_err(buf, len, NULL, RS_E_PROTO, "form: 1");
	buf[5] = PROTO_OP_UPDATE;
	/* an image's reserved word */
	buf[32 + 16 + 16 + 24 + 20] = 1;
	expect_err(buf, len, NULL, RS_E_PROTO, "images[1]: reserved");
	buf[32 + 16 + 16 + 24 + 20] = 0;
	/* unknown form */
	buf[32 + 9] = 2;
	expect_err(buf, len, NULL, RS_E_PROTO, "form: 2");
	buf[32 + 9] = 1;
	/* cut short */
	expect_err(buf, (size_t)len - 4, NULL, RS_E_PROTO, "body bytes");
	decode_ok(buf, len, &m);
	/* sizing */
	assert_int_equal(proto_images_per_msg(2, PROTO_DTYPE_FP16,
					      (size_t)len), 3);
	assert_int_equal(proto_images_per_msg(2, PROTO_DTYPE_FP16,
					      (size_t)len - 1), 2);
	assert_int_equal(proto_images_per_msg(2, PROTO_DTYPE_FP16, 60),
			 RS_E_TOOBIG);
	assert_int_equal(proto_images_per_msg(0, PROTO_DTYPE_FP16, 4096),
			 RS_E_INVAL);
	assert_int_equal(proto_images_reply_bytes(1, 0, PROTO_DTYPE_FP32), 0);
	assert_int_equal(proto_images_reply_begin(buf, 100, &h, 10, 2,
						  PROTO_DTYPE_FP32, &w),
			 RS_E_TOOBIG);
	assert_null(w.images);
}

static void error_replies(void **state)
{
	struct proto_hdr h = hdr_of(8, 0);
	struct proto_msg m;
	char big[2000];
	int len;

	len = proto_enc_error(buf, sizeof(buf), &h, PROTO_OP_GET, RS_E_STALE,
			      "table 3: generation 5 != 6\n\x01");
	decode_ok(buf, len, &m);
	assert_int_equal(m.hdr.status, RS_E_STALE);
	assert_int_equal(m.hdr.opcode, PROTO_OP_GET);
	assert_string_equal(m.u.error.msg, "table 3: generation 5 != 6??");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	len = proto_enc_error(buf, sizeof(buf), &h, PROTO_OP_HELLO, -EIO, big);
	assert_int_equal(len, PROTO_HDR_BYTES + 2 + PROTO_ERRMSG_MAX);
	decode_ok(buf, len, &m);
	assert_int_equal(strlen(m.u.error.msg), PROTO_ERRMSG_MAX);
	assert_int_equal(proto_enc_error(buf, sizeof(buf), &h, PROTO_OP_GET, 0,
					 "x"),
			 RS_E_INVAL);
	assert_int_equal(proto_enc_error(buf, sizeof(buf), &h, 0, -1, "x"),
			 RS_E_INVAL);
}

/* ---- byte layout (docs/protocol.md) ----------------------------------- */

static void wire_layout(void **state)
{
	const uint64_t keys[2] = { 0x0807060504030201ull, 5 };
	struct proto_hdr h = { .req_id = 0x1122334455667788ull,
			       .trace_id = 0x99, .flags = PROTO_F_TRACE };
	struct proto_keys_req q = { .table_id = 0xaabbccdd, .table_gen = 3,
				    .n = 2, .keys = keys };
	static const uint8_t head[] = {
		'R', 'S', 'P', '1', 1, PROTO_OP_GET, 2, 0,	/* 0 */
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* 8 */
		0x99, 0, 0, 0, 0, 0, 0, 0,			/* 16 */
		48, 0, 0, 0, 0, 0, 0, 0,			/* 24 */
		0xdd, 0xcc, 0xbb, 0xaa, 0, 0, 0, 0,		/* 32 */
		3, 0, 0, 0, 0, 0, 0, 0,				/* 40 */
		2, 0, 0, 0, 0, 0, 0, 0,				/* 48 */
		0, 0, 0, 0, 0, 0, 0, 0,				/* 56 */
		1, 2, 3, 4, 5, 6, 7, 8,				/* 64 */
		5, 0, 0, 0, 0, 0, 0, 0,				/* 72 */
	};
	int len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_GET, &q);

	assert_int_equal(len, sizeof(head));
	assert_memory_equal(buf, head, sizeof(head));
	assert_int_equal(PROTO_MAGIC, 'R' | 'S' << 8 | 'P' << 16 | '1' << 24);
}

/* ---- sizes and the split helper ---------------------------------------- */

/* n from the helper fits both directions and n + 1 does not */
static void check_split(uint32_t op, uint32_t dim, uint32_t dt, size_t rq,
			size_t rp)
{
	int n = proto_keys_per_msg(op, dim, dt, rq, rp, 1 << 20);

	if (n < 0) {
		assert_int_equal(n, RS_E_TOOBIG);
		assert_true(proto_keys_req_bytes(op, 1, dim, dt) > rq ||
			    proto_keys_reply_bytes(op, 1, dim, dt) > rp);
		return;
	}
	assert_true(proto_keys_req_bytes(op, n, dim, dt) <= rq);
	assert_true(proto_keys_reply_bytes(op, n, dim, dt) <= rp);
	assert_true(proto_keys_req_bytes(op, n + 1, dim, dt) > rq ||
		    proto_keys_reply_bytes(op, n + 1, dim, dt) > rp);
}

static void split_helper(void **state)
{
	static const uint32_t dims[] = { 1, 7, 64, 128, 1000, 1100 };
	static const size_t caps[] = { 4096, 65536, 1 << 20 };

	for (uint32_t op = PROTO_OP_GET; op <= PROTO_OP_DELETE; op++)
		for (size_t d = 0; d < RS_ARRAY_SIZE(dims); d++)
			for (size_t c = 0; c < 9; c++)
				for (uint32_t dt = 0; dt < PROTO_DTYPE_COUNT;
				     dt++)
					check_split(op, dims[d], dt,
						    caps[c % 3], caps[c / 3]);
	/* the max_keys cap */
	assert_int_equal(proto_keys_per_msg(PROTO_OP_GET, 8, 0, 1 << 20,
					    1 << 20, 100),
			 100);
	/* GET of dim 1000 fp32: reply rows dominate */
	assert_int_equal(proto_keys_per_msg(PROTO_OP_GET, 1000, 0, 1 << 20,
					    4096, 1000),
			 1);
	assert_int_equal(proto_keys_per_msg(PROTO_OP_GET, 2000, 0, 1 << 20,
					    4096, 1000),
			 RS_E_TOOBIG);
	assert_non_null(strstr(rs_errormsg(), "2000 x fp32"));
	assert_int_equal(proto_keys_per_msg(PROTO_OP_HELLO, 8, 0, 4096, 4096,
					    1),
			 RS_E_INVAL);
	assert_int_equal(proto_keys_per_msg(PROTO_OP_PUT, 0, 0, 4096, 4096, 1),
			 RS_E_INVAL);
	assert_int_equal(proto_keys_req_bytes(PROTO_OP_STATS, 1, 1, 0), 0);
	assert_int_equal(proto_keys_req_bytes(PROTO_OP_PUT, 1, 1, 9), 0);
	/* the documented sizes */
	assert_int_equal(proto_keys_req_bytes(PROTO_OP_GET, 10, 0, 0),
			 64 + 80);
	assert_int_equal(proto_keys_reply_bytes(PROTO_OP_GET, 3, 4, 1),
			 48 + 12 + 4 + 3 * 8);
}

/* ---- encoders stay inside their buffer ---------------------------------- */

static void encoders_respect_cap(void **state)
{
	struct proto_msg m;

	for (size_t i = 0; i < corpus.n; i++) {
		const size_t len = corpus.len[i];

		decode_ok(corpus.msg[i], len, &m);
		for (size_t cap = 0; cap < len; cap += 1 + cap / 8) {
			int rc;

			memset(buf2, 0x5a, len + 64);
			rc = reencode(&m, buf2, cap);
			if (rc != RS_E_TOOBIG)
				fail_msg("%s cap %zu: %d", corpus.name[i], cap,
					 rc);
			for (size_t b = cap; b < len + 64; b++)
				if (buf2[b] != 0x5a)
					fail_msg("%s cap %zu: byte %zu written",
						 corpus.name[i], cap, b);
		}
		assert_int_equal(reencode(&m, buf2, len), (int)len);
	}
}

/* ---- decoder checks, one by one ---------------------------------------- */

static size_t copy_seed(const char *name)
{
	for (size_t i = 0; i < corpus.n; i++)
		if (strcmp(corpus.name[i], name) == 0) {
			memcpy(buf, corpus.msg[i], corpus.len[i]);
			return corpus.len[i];
		}
	fail_msg("no seed %s", name);
	return 0;
}

/* v little-endian into width bytes of buf at off */
static void put_le(size_t off, uint64_t v, size_t width)
{
	for (size_t i = 0; i < width; i++)
		buf[off + i] = (uint8_t)(v >> (8 * i));
}

/* msg cut after `body` bytes of its body, the header saying so: the
 * decoder must refuse it with RS_E_PROTO and needle */
static void expect_cut(const uint8_t *msg, size_t body, const char *needle)
{
	memmove(buf, msg, PROTO_HDR_BYTES + body);
	put_le(24, (uint32_t)body, 4);
	expect_err(buf, PROTO_HDR_BYTES + body, NULL, RS_E_PROTO, needle);
}

/* one field of a message changed, and what the decoder must say about it
 * (code 0: the message still decodes) */
struct patch {
	size_t off;
	int width; /* bytes */
	uint32_t v;
	int code;
	const char *needle;
};

/* each of p[0..n) applied alone to a copy of msg[0..len) in buf */
static void expect_patches(const uint8_t *msg, size_t len,
			   const struct patch *p, size_t n)
{
	struct proto_msg m;

	for (size_t i = 0; i < n; i++) {
		memcpy(buf, msg, len);
		put_le(p[i].off, p[i].v, p[i].width);
		if (p[i].code)
			expect_err(buf, len, NULL, p[i].code, p[i].needle);
		else
			decode_ok(buf, len, &m);
	}
}

/* one field of a seed changed, and what the decoder must say about it */
struct mutation {
	const char *seed;
	size_t off;
	int width; /* 1: a byte, 4: a u32 */
	uint32_t v;
	int code;
	const char *needle;
};

static const struct mutation mutations[] = {
	/* header */
	{ "get_req", 0, 1, 'X', RS_E_PROTO, "bad magic" },
	{ "get_req", 4, 1, 2, RS_E_PROTO, "unsupported protocol version 2" },
	{ "get_req", 5, 1, 0, RS_E_PROTO, "unknown opcode 0" },
	{ "get_req", 5, 1, PROTO_OP_COUNT, RS_E_PROTO, "unknown opcode 17" },
	{ "get_req", 6, 1, 0x10, RS_E_PROTO, "unknown header flags 0x10" },
	{ "get_req", 6, 1, 0x8, RS_E_PROTO, "header flag from: only REPL" },
	{ "get_req", 6, 1, 0x4, RS_E_PROTO, "only TABLE_CREATE, TABLE_DROP and TABLE_GROW" },
	{ "get_req", 24, 4, 1000, RS_E_PROTO, "header says 1000 body bytes" },
	{ "get_req", 28, 4, 5, RS_E_PROTO, "status 5 (must be 0)" },
	{ "update_reply", 28, 4, 5, RS_E_PROTO, "status 5 (must be <= 0)" },
	/* keyed request body; n lies: one key more than present */
	{ "get_req", 48, 4, 8, RS_E_PROTO, "8 keys need 64 bytes" },
	{ "get_req", 48, 4, 0xffffffff, RS_E_TOOBIG, "n: 4294967295" },
	/* GET carries no rows: dtype must be 0 */
	{ "get_req", 56, 1, 1, RS_E_PROTO, "must be 0 (no rows)" },
	{ "get_req", 59, 1, 1, RS_E_PROTO, "reserved byte 2 is 0x01" },
	{ "get_req", 60, 1, 1, RS_E_PROTO,
	  "lr (without the LR flag): reserved byte 0 is 0x01" },
	{ "update_req_bf16", 63, 1, 0x3f, RS_E_PROTO,
	  "lr (without the LR flag): reserved byte 3 is 0x3f" },
	/* CREATE or LR on a GET */
	{ "get_req", 36, 4, 1, RS_E_PROTO, "flags: unknown bits 0x1" },
	{ "get_req", 36, 4, 2, RS_E_PROTO, "flags: unknown bits 0x2" },
	{ "update_req_lr", 36, 4, 0x22, RS_E_PROTO, "flags: unknown bits 0x20" },
	/* EPOCH: an epoch must follow (here the first key, 0, is read as
	 * one); not on LOAD; without the flag, the epoch's 8 bytes are
	 * one key too many */
	{ "update_req_lr", 36, 4, 6, RS_E_PROTO,
	  "epoch: 0 with the EPOCH flag" },
	{ "get_req_epoch", 64, 4, 0, RS_E_PROTO,
	  "GET request: epoch: 0 with the EPOCH flag" },
	{ "get_req_epoch", 36, 4, 0, RS_E_PROTO,
	  "7 keys need 56 bytes after the fixed part, 64 present" },
	{ "get_req_epoch", 48, 4, 8, RS_E_PROTO, "8 keys need 64 bytes" },
	{ "get_req_epoch", 36, 4, 5, RS_E_PROTO, "flags: unknown bits 0x1" },
	{ "load_req", 36, 4, PROTO_KF_ONCE, RS_E_PROTO,
	  "LOAD request: flags: unknown bits 0x8" },
	/* ONCE: client, seq, done_below follow (here the first key, 0, is
	 * read as the client); not on GET nor LOAD; without the flag, the
	 * 24 bytes are three keys too many */
	{ "update_req_lr", 36, 4, PROTO_KF_LR | PROTO_KF_ONCE, RS_E_PROTO,
	  "UPDATE request: client: must not be 0 (with the ONCE flag)" },
	{ "get_req", 36, 4, PROTO_KF_ONCE, RS_E_PROTO,
	  "GET request: flags: unknown bits 0x8" },
	{ "get_req_epoch", 36, 4, PROTO_KF_EPOCH | PROTO_KF_ONCE, RS_E_PROTO,
	  "GET request: flags: unknown bits 0x8" },
	{ "load_req", 36, 4, PROTO_KF_ONCE, RS_E_PROTO,
	  "LOAD request: flags: unknown bits 0x8" },
	{ "get_or_init_req_once", 72, 4, 0, RS_E_PROTO,
	  "GET_OR_INIT request: seq: must be >= 1 (with the ONCE flag)" },
	{ "get_or_init_req_once", 72, 4, 4, RS_E_PROTO,
	  "done_below: 5 is over seq 4 (with the ONCE flag)" },
	{ "get_or_init_req_once", 80, 4, 6, RS_E_PROTO,
	  "done_below: 6 is over seq 5" },
	{ "get_or_init_req_once", 80, 4, 0, 0, NULL },
	{ "get_or_init_req_once", 36, 4, 0, RS_E_PROTO,
	  "7 keys need 56 bytes after the fixed part, 80 present" },
	{ "get_or_init_req_once", 48, 4, 10, RS_E_PROTO,
	  "10 keys need 80 bytes after the fixed part, 56 present" },
	{ "delete_req_epoch_once", 80, 4, 0, RS_E_PROTO,
	  "DELETE request: seq: must be >= 1" },
	{ "delete_req_epoch_once", 88, 4, 2, RS_E_PROTO,
	  "done_below: 2 is over seq 1" },
	{ "delete_req_epoch_once", 64, 4, 0, RS_E_PROTO,
	  "epoch: 0 with the EPOCH flag" },
	/* ONCE alone: the epoch (3) is read as the client, its client as
	 * the seq, its seq (1) as done_below, and its done_below is a key */
	{ "delete_req_epoch_once", 36, 4, PROTO_KF_ONCE, RS_E_PROTO,
	  "0 keys need 0 bytes after the fixed part, 8 present" },
	{ "update_req_epoch_once", 36, 4, PROTO_KF_CREATE | PROTO_KF_LR |
					  PROTO_KF_EPOCH, RS_E_PROTO,
	  "2 keys and rows need 28 bytes after the fixed part, 52 present" },
	/* CONFIG request: empty body */
	{ "config_req", 24, 4, 1, RS_E_PROTO, "header says 1 body bytes" },
	/* a per-request lr must be finite and >= 0 */
	{ "update_req_lr", 60, 4, 0x7fc00000, RS_E_INVAL,
	  "lr: nan is not a finite number >= 0" },
	{ "update_req_lr", 60, 4, 0x7f800000, RS_E_INVAL, "lr: inf is not" },
	{ "update_req_lr", 60, 4, 0xff800000, RS_E_INVAL, "lr: -inf is not" },
	{ "update_req_lr", 60, 4, 0xbe800000, RS_E_INVAL, "lr: -0.25 is not" },
	{ "update_req_lr", 60, 4, 0x00000001, 0, NULL }, /* denormal: ok */
	{ "put_req", 56, 1, 7, RS_E_PROTO, "dtype: unknown value 7" },
	{ "put_req", 52, 4, 0, RS_E_PROTO, "dim: must be >= 1" },
	{ "put_req", 52, 4, 5000, RS_E_TOOBIG, "dim: 5000 is over" },
	/* strings; 'a' makes a u16 length of 0x6102 */
	{ "drop_req", 33, 1, 'a', RS_E_PROTO, "name: length 24834 over" },
	{ "drop_req", 34, 1, ' ', RS_E_INVAL, "name: byte 0x20 at 0" },
	{ "drop_req", 32, 1, 0, RS_E_INVAL, "name: must not be empty" },
	{ "drop_req", 32, 1, 3, RS_E_PROTO, "truncated at name" },
	/* table spec enums; optimizer flags */
	{ "create_req", 32 + 5, 1, OPTIM_KIND_COUNT, RS_E_PROTO,
	  "optimizer.type: unknown" },
	{ "create_req", 32 + 6, 1, 9, RS_E_PROTO, "initializer.type: unknown" },
	{ "create_req", 32 + 7, 1, 8, RS_E_PROTO, "spec flags: unknown bits" },
	{ "create_req", 32 + 7, 1, 1, RS_E_PROTO,
	  "truncated at eviction.policy" },
	{ "create_req", 32 + 7, 1, 2, RS_E_PROTO, "truncated at grow_log2" },
	/* TABLE_GROW: capacity bounded, a name */
	{ "grow_req", 32 + 4, 4, 1, RS_E_TOOBIG, "capacity: 4294971392 rows "
	  "is over the limit" },
	{ "grow_req", 32 + 8, 1, 3, RS_E_PROTO, "truncated at name" },
	/* lists: n beyond total; n 5 of total 9 from 2: only 4 present */
	{ "dir_reply", 32 + 16, 4, 4, RS_E_PROTO, "exceed total 3" },
	{ "stats_reply", 32 + 8, 4, 5, RS_E_PROTO,
	  "truncated at stat.table_id" },
	/* CKPT: phase, flags, freeze timeout, names only with DUMP */
	{ "ckpt_freeze_req", 32, 4, 9, RS_E_PROTO, "phase: unknown value 9" },
	{ "ckpt_freeze_req", 36, 4, 0x10, RS_E_PROTO, "flags: unknown bits 0x10" },
	{ "ckpt_freeze_req", 36, 4, 8, RS_E_PROTO, "every held row is a DUMP" },
	/* INCR: a base id follows (absent here), only on a DUMP with state */
	{ "ckpt_freeze_req", 36, 4, 3, RS_E_PROTO, "truncated at base" },
	{ "ckpt_incr_req", 36, 4, 2, RS_E_PROTO, "an incremental part is a "
	  "DUMP with optimizer state" },
	{ "ckpt_incr_req", 32, 4, 1, RS_E_PROTO, "an incremental part is" },
	{ "ckpt_freeze_req", 40, 4, 0, RS_E_INVAL, "timeout_ms: 0 is not" },
	{ "ckpt_freeze_req", 40, 4, 600001, RS_E_INVAL, "timeout_ms: 600001" },
	{ "ckpt_thaw_req", 32, 4, 2, RS_E_INVAL, "DUMP needs a table" },
	{ "ckpt_dump_req", 32, 4, 3, RS_E_PROTO, "names are for DUMP only" },
	{ "ckpt_dump_req", 52, 4, 1, RS_E_PROTO, "reserved" },
	/* LOAD rows are fp32, of at most 3 * max_dim + 1 */
	{ "load_req", 56, 1, 1, RS_E_PROTO, "LOAD rows are fp32" },
	{ "load_req", 52, 4, 3 * PROTO_DEFAULT_DIM + 2, RS_E_TOOBIG,
	  "over the limit 12289" },
	/* max_message_bytes under the minimum */
	{ "hello_reply", 32 + 16, 4, 1000, RS_E_INVAL,
	  "max_message_bytes: 1000" },
};

static void decode_checks(void **state)
{
	struct proto_limits lim;
	size_t len;

	for (size_t i = 0; i < RS_ARRAY_SIZE(mutations); i++) {
		const struct mutation *x = &mutations[i];

		len = copy_seed(x->seed);
		put_le(x->off, x->v, x->width);
		if (x->code) {
			expect_err(buf, len, NULL, x->code, x->needle);
		} else {
			struct proto_msg m;

			decode_ok(buf, len, &m);
		}
	}

	/* what a single field cannot say: length, limits, trailing bytes */
	len = copy_seed("get_req");
	expect_err(buf, 31, NULL, RS_E_PROTO, "shorter than the 32-byte");
	proto_limits_default(&lim);
	lim.max_message_bytes = 100;
	expect_err(buf, len, &lim, RS_E_TOOBIG, "over the limit 100");
	proto_limits_default(&lim);
	lim.max_batch_keys = 6;
	expect_err(buf, len, &lim, RS_E_TOOBIG, "n: 7 keys, over the limit 6");
	len = copy_seed("put_req");
	put_le(24, (uint32_t)(len - 32 + 1), 4);
	buf[len] = 0;
	expect_err(buf, len + 1, NULL, RS_E_PROTO, "need 168 bytes");
	len = copy_seed("drop_reply");
	put_le(24, 1, 4);
	expect_err(buf, len + 1, NULL, RS_E_PROTO, "1 trailing bytes");
	/* a DUMP's directory and file become path components: no dot
	 * first ("..", hidden files), which the name alphabet allows */
	{
		struct proto_ckpt_req q = { .phase = PROTO_CKPT_DUMP };
		struct proto_hdr h = { .req_id = 1 };
		int n;

		snprintf(q.dir, sizeof(q.dir), "..");
		snprintf(q.table, sizeof(q.table), "t");
		snprintf(q.file, sizeof(q.file), "p.rsck");
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		assert_true(n > 0);
		expect_err(buf, (size_t)n, NULL, RS_E_INVAL,
			   "do not start with a dot");
		snprintf(q.dir, sizeof(q.dir), "c1");
		snprintf(q.file, sizeof(q.file), ".p");
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		expect_err(buf, (size_t)n, NULL, RS_E_INVAL,
			   "do not start with a dot");
		snprintf(q.dir, sizeof(q.dir), "a/b");
		assert_int_equal(proto_enc_ckpt_req(buf, sizeof(buf), &h, &q),
				 RS_E_INVAL);
	}
	/* a cluster's FREEZE and DUMP name the configuration epoch */
	{
		struct proto_ckpt_req q = { .phase = PROTO_CKPT_DUMP,
					    .flags = PROTO_CKF_STATE |
						     PROTO_CKF_INCR |
						     PROTO_CKF_EPOCH,
					    .epoch = 0x123456789aull };
		struct proto_hdr h = { .req_id = 1 };
		struct proto_msg m;
		int n;

		q.base[3] = 7;
		snprintf(q.dir, sizeof(q.dir), "c1");
		snprintf(q.table, sizeof(q.table), "t");
		snprintf(q.file, sizeof(q.file), "p.rsck");
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		assert_true(n > 0);
		decode_ok(buf, (size_t)n, &m);
		assert_int_equal(m.u.ckpt_req.epoch, 0x123456789aull);
		assert_int_equal(m.u.ckpt_req.base[3], 7);
		assert_string_equal(m.u.ckpt_req.file, "p.rsck");
		q.epoch = 0;
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		expect_err(buf, (size_t)n, NULL, RS_E_PROTO,
			   "an epoch (>= 1) is for FREEZE and DUMP");
		q = (struct proto_ckpt_req){ .phase = PROTO_CKPT_THAW,
					     .flags = PROTO_CKF_EPOCH,
					     .epoch = 3 };
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		expect_err(buf, (size_t)n, NULL, RS_E_PROTO,
			   "an epoch (>= 1) is for FREEZE and DUMP");
		q.phase = PROTO_CKPT_FREEZE;
		q.timeout_ms = 10;
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		decode_ok(buf, (size_t)n, &m);
		assert_int_equal(m.u.ckpt_req.epoch, 3);
		/* every held row: a DUMP of an epoch, not an increment */
		q.flags = PROTO_CKF_EPOCH | PROTO_CKF_HELD;
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		expect_err(buf, (size_t)n, NULL, RS_E_PROTO,
			   "every held row is a DUMP");
		q.phase = PROTO_CKPT_DUMP;
		snprintf(q.dir, sizeof(q.dir), "c1");
		snprintf(q.table, sizeof(q.table), "t");
		snprintf(q.file, sizeof(q.file), "p.rsck");
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		decode_ok(buf, (size_t)n, &m);
		assert_int_equal(m.u.ckpt_req.flags,
				 PROTO_CKF_EPOCH | PROTO_CKF_HELD);
		q.flags = PROTO_CKF_HELD;
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		expect_err(buf, (size_t)n, NULL, RS_E_PROTO,
			   "every held row is a DUMP");
		q.flags = PROTO_CKF_EPOCH | PROTO_CKF_HELD | PROTO_CKF_STATE |
			  PROTO_CKF_INCR;
		n = proto_enc_ckpt_req(buf, sizeof(buf), &h, &q);
		expect_err(buf, (size_t)n, NULL, RS_E_PROTO,
			   "every held row is a DUMP");
	}
}

/* ---- the spec's hyper-parameters: the rows of spec_fields.h ------------ */

/*
 * A row of SPEC_OPTIM_PARAMS or SPEC_INIT_PARAMS as the wire carries it:
 * the decoder's name for it, its member and its width. The rows fill the
 * spec's body in order from offset 16 to the name at 64 (docs/protocol.md),
 * so each row's offset follows from the rows before it; spec_layout()
 * pins that order to the bytes.
 */
struct wire_row {
	const char *name;
	size_t member; /* in struct proto_table_spec */
	size_t width;
	int type;      /* enum spec_type */
	float lo, hi;
	int lo_open, hi_open;
};

#define WIRE_ROW(grp, label, n, type, lo, lo_open, hi, hi_open, ...)   \
	{ label #n, offsetof(struct proto_table_spec, grp.n),             \
	  sizeof(((struct proto_table_spec *)0)->grp.n), SPEC_T_##type,   \
	  lo, hi, lo_open, hi_open },
#define WIRE_OPTIM(A, ...) WIRE_ROW(optim, "optimizer.", __VA_ARGS__)
#define WIRE_INIT(A, ...) WIRE_ROW(init, "initializer.", __VA_ARGS__)

static const struct wire_row wire_rows[] = {
	SPEC_OPTIM_PARAMS(WIRE_OPTIM, 0)
	SPEC_INIT_PARAMS(WIRE_INIT, 0)
};

#define ROWS_AT 16  /* the optimizer's flags */
#define ROWS_END 64 /* the table name */

/* The messages that carry a spec, and where it starts in their body. */
enum { IN_CREATE_REQ, IN_CREATE_REPLY, IN_DIR_REPLY, IN_COUNT };
static const size_t spec_at[IN_COUNT] = { 0, 112, 24 + 112 };

/* The message `in` around sample_info()'s spec, named "emb". */
static int enc_carrier(int in, uint8_t *out, size_t cap)
{
	struct proto_table_info t = sample_info("emb", 3);
	struct proto_hdr h = hdr_of(1, 0);
	uint32_t w;

	if (in == IN_CREATE_REQ)
		return proto_enc_table_create_req(out, cap, &h, &t.spec);
	if (in == IN_CREATE_REPLY)
		return proto_enc_table_create_reply(out, cap, &h, &t);
	return proto_enc_table_dir_reply(out, cap, &h, 1, 1, 0, &t, 1, &w);
}

/* The spec in a decoded message `in` (a directory's only entry). */
static struct proto_table_spec spec_of(int in, struct proto_msg *m)
{
	struct proto_table_info t;

	if (in == IN_CREATE_REQ)
		return m->u.table_create;
	if (in == IN_CREATE_REPLY)
		return m->u.table_info.spec;
	assert_int_equal(proto_table_dir_next(&m->u.table_dir, &t), 1);
	return t.spec;
}

static uint64_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* v into a member of `width` bytes, in host order (put_le() is the
 * wire's) */
static void put_member(void *p, uint64_t v, size_t width)
{
	uint32_t u = (uint32_t)v;

	memcpy(p, width == 8 ? (void *)&v : (void *)&u, width);
}

/*
 * Values of row r as wire bits: ok[] decode, bad[] are refused. An f32's
 * range from both sides of each bound (the last value in, the first out;
 * an infinite bound's last is +-FLT_MAX), inf and NaN; for the flags
 * every known bit, and each unknown bit alone; a seed takes anything.
 */
static void row_values(const struct wire_row *r, uint64_t *ok, size_t *nok,
		       uint64_t *bad, size_t *nbad)
{
	const float lo = r->lo, hi = r->hi;

	*nok = *nbad = 0;
	if (r->type == SPEC_T_u64) {
		ok[(*nok)++] = 0;
		ok[(*nok)++] = UINT64_MAX;
		ok[(*nok)++] = 0x0123456789abcdefull;
		return;
	}
	if (r->type == SPEC_T_u32) {
		ok[(*nok)++] = 0;
		ok[(*nok)++] = (uint32_t)hi;
		for (int b = 0; b < 32; b++)
			if (!((uint32_t)hi & 1u << b))
				bad[(*nbad)++] = 1u << b;
		return;
	}
	ok[(*nok)++] = fbits(isinf(lo) ? -FLT_MAX :
			     r->lo_open ? nextafterf(lo, INFINITY) : lo);
	ok[(*nok)++] = fbits(isinf(hi) ? FLT_MAX :
			     r->hi_open ? nextafterf(hi, -INFINITY) : hi);
	if (isfinite(lo))
		bad[(*nbad)++] = fbits(r->lo_open ? lo
						  : nextafterf(lo, -INFINITY));
	if (isfinite(hi))
		bad[(*nbad)++] = fbits(r->hi_open ? hi
						  : nextafterf(hi, INFINITY));
	bad[(*nbad)++] = fbits(INFINITY);
	bad[(*nbad)++] = fbits(-INFINITY);
	bad[(*nbad)++] = fbits(NAN);
}

/* A message that carries a spec: its bytes, what the decoder calls it,
 * the spec it decodes to */
struct carrier {
	int in;
	char what[32];
	uint8_t msg[1024];
	size_t len;
	struct proto_table_spec base;
};

/* Row r at body offset `off` of c: each ok value decodes into r's member
 * alone and encodes back to the same bytes, each bad one is refused
 * naming r, and the body cut inside r is refused as truncated at r. */
static void check_row(const struct wire_row *r, size_t off,
		      const struct carrier *c)
{
	const uint8_t *msg = c->msg;
	const size_t len = c->len;
	const char *what = c->what;
	uint64_t ok[3], bad[32];
	size_t nok, nbad;
	struct proto_table_spec want, got;
	struct proto_msg m;
	char needle[160];

	row_values(r, ok, &nok, bad, &nbad);
	for (size_t i = 0; i < nok; i++) {
		memcpy(buf, msg, len);
		put_le(PROTO_HDR_BYTES + off, ok[i], r->width);
		decode_ok(buf, len, &m);
		if (reencode(&m, buf2, sizeof(buf2)) != (int)len ||
		    memcmp(buf2, buf, len))
			fail_msg("%s %s 0x%llx: re-encoding differs", what,
				 r->name, (unsigned long long)ok[i]);
		want = c->base;
		put_member((uint8_t *)&want + r->member, ok[i], r->width);
		got = spec_of(c->in, &m);
		if (memcmp(&got, &want, sizeof(got)))
			fail_msg("%s %s 0x%llx: decoded spec differs", what,
				 r->name, (unsigned long long)ok[i]);
	}
	for (size_t i = 0; i < nbad; i++) {
		memcpy(buf, msg, len);
		put_le(PROTO_HDR_BYTES + off, bad[i], r->width);
		if (proto_decode(buf, len, NULL, &m) == 0)
			fail_msg("%s %s 0x%llx: accepted", what, r->name,
				 (unsigned long long)bad[i]);
		if (r->type == SPEC_T_u32)
			snprintf(needle, sizeof(needle), "%s: table 'emb': %s: "
				 "unknown bits 0x%llx", what, r->name,
				 (unsigned long long)bad[i]);
		else
			snprintf(needle, sizeof(needle),
				 "%s: table 'emb': %s: must be", what, r->name);
		expect_err(buf, len, NULL, RS_E_INVAL, needle);
	}
	for (size_t k = 0; k < r->width; k++) {
		snprintf(needle, sizeof(needle), "%s: truncated at %s (offset "
			 "%zu needs %zu bytes, %zu left)", what, r->name, off,
			 r->width, k);
		expect_cut(msg, off + k, needle);
	}
}

/* Every row in every message that carries a spec. */
static void spec_rows(void **state)
{
	static struct carrier c;
	struct proto_msg m;

	(void)state;
	assert_int_equal(RS_ARRAY_SIZE(wire_rows), spec_nfields);
	for (int in = 0; in < IN_COUNT; in++) {
		const int len = enc_carrier(in, c.msg, sizeof(c.msg));
		size_t off = spec_at[in] + ROWS_AT;

		assert_true(len > 0);
		c.in = in;
		c.len = (size_t)len;
		decode_ok(c.msg, c.len, &m);
		snprintf(c.what, sizeof(c.what), "%s %s",
			 proto_op_name(m.hdr.opcode),
			 in == IN_CREATE_REQ ? "request" : "reply");
		c.base = spec_of(in, &m);
		for (size_t i = 0; i < RS_ARRAY_SIZE(wire_rows); i++) {
			check_row(&wire_rows[i], off, &c);
			off += wire_rows[i].width;
		}
		assert_int_equal(off, spec_at[in] + ROWS_END);
	}
}

/* The fixed part of a spec byte for byte (docs/protocol.md, "Table
 * spec"): a value per row, so that rows reordered or resized change the
 * wire and fail here. */
static void spec_layout(void **state)
{
	static const uint8_t want[ROWS_END] = {
		8, 0, 0, 0, PROTO_DTYPE_FP16, OPTIM_ADAM, INIT_NORMAL, 0,
		1, 2, 3, 4, 0, 0, 0, 0,			   /* capacity */
		1, 0, 0, 0, 0, 0, 0, 0x3f,		   /* flags, lr */
		0, 0, 0x80, 0x3e, 0, 0, 0x40, 0x3f,	   /* eps, beta1 */
		0, 0, 0x60, 0x3f, 0, 0, 0, 0x3e,	   /* beta2, wd */
		0, 0, 0, 0x40, 0, 0, 0x40, 0x40,	   /* acc, value */
		0, 0, 0xc0, 0x3f, 0, 0, 0xa0, 0x3f,	   /* a, std */
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, /* seed */
	};
	struct proto_table_spec s;
	struct proto_hdr h = hdr_of(1, 0);
	struct proto_msg m;
	int len;

	(void)state;
	memset(&s, 0, sizeof(s)); /* padding too: compared whole below */
	snprintf(s.name, sizeof(s.name), "ab");
	s.dim = 8;
	s.dtype = PROTO_DTYPE_FP16;
	s.capacity = 0x04030201;
	s.optim = (struct optim_params){ OPTIM_ADAM, OPTIM_F_DECOUPLED, 0.5f,
					 0.25f, 0.75f, 0.875f, 0.125f, 2.0f };
	s.init = (struct init_params){ INIT_NORMAL, 3.0f, 1.5f, 1.25f,
				       0x1112131415161718ull };
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	assert_int_equal(len, PROTO_HDR_BYTES + ROWS_END + 2 + 2);
	assert_memory_equal(buf + PROTO_HDR_BYTES, want, sizeof(want));
	assert_memory_equal(buf + PROTO_HDR_BYTES + ROWS_END, "\2\0ab", 4);
	decode_ok(buf, (size_t)len, &m);
	assert_memory_equal(&m.u.table_create, &s, sizeof(s));
}

static void names_limits_dtypes(void **state)
{
	struct proto_limits lim;
	struct proto_table_spec s = sample_spec("ok", OPTIM_SGD);

	assert_int_equal(proto_name_check("n", "a.B-c_9", 7), 0);
	assert_int_equal(proto_name_check("n", "a/b", 3), RS_E_INVAL);
	assert_string_equal(rs_errormsg(),
			    "n: byte 0x2f at 1 is not one of [A-Za-z0-9_.-]");
	assert_int_equal(proto_name_check("n", "x", 0), RS_E_INVAL);
	for (uint32_t d = 0; d < PROTO_DTYPE_COUNT; d++)
		assert_int_equal(proto_dtype_parse(proto_dtype_name(d)), d);
	assert_int_equal(proto_dtype_parse("fp64"), RS_E_INVAL);
	assert_null(proto_dtype_name(3));
	assert_int_equal(proto_dtype_size(PROTO_DTYPE_FP16), 2);
	assert_int_equal(proto_dtype_size(9), 0);
	assert_string_equal(proto_op_name(PROTO_OP_GET_OR_INIT),
			    "GET_OR_INIT");
	assert_string_equal(proto_op_name(0), "?");
	assert_string_equal(proto_op_name(200), "?");

	proto_limits_default(&lim);
	assert_int_equal(proto_limits_validate(&lim), 0);
	assert_int_equal(lim.max_message_bytes, 1 << 20);
	lim.max_message_bytes = 4095;
	assert_int_equal(proto_limits_validate(&lim), RS_E_INVAL);
	proto_limits_default(&lim);
	lim.max_batch_keys = PROTO_MAX_BATCH_KEYS + 1;
	assert_int_equal(proto_limits_validate(&lim), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "max_batch_keys"));

	assert_int_equal(proto_table_spec_validate(&s, NULL), 0);
	s.name[0] = '\0';
	assert_int_equal(proto_table_spec_validate(&s, NULL), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "name: must not be empty");
	s = sample_spec("ok", OPTIM_SGD);
	s.dtype = 3;
	assert_int_equal(proto_table_spec_validate(&s, NULL), RS_E_INVAL);
	s = sample_spec("ok", OPTIM_ADAM);
	s.optim.beta2 = 1.0f;
	assert_int_equal(proto_table_spec_validate(&s, NULL), RS_E_INVAL);
	assert_string_equal(rs_errormsg(),
			    "optimizer.beta2: must be in [0, 1)");
}

/* ---- replication: the EPOCH flag, CONFIG, REPL -------------------------- */

static void keyed_epoch(void **state)
{
	uint64_t keys[5] = { 1, 2, 3, UINT64_MAX, 0 }, k2[5];
	float rows[5 * 3], r2[5 * 3];
	struct proto_hdr h = hdr_of(1, 0);
	struct proto_keys_req q;
	struct proto_msg m;
	int len, plain;

	for (int i = 0; i < 15; i++)
		rows[i] = (float)i - 7.0f;
	for (uint32_t op = PROTO_OP_GET; op <= PROTO_OP_DELETE; op++) {
		const int has_rows = op == PROTO_OP_PUT ||
				     op == PROTO_OP_UPDATE;

		for (uint32_t n = 0; n <= 5; n += 5) {
			q = (struct proto_keys_req){
				.table_id = 9, .table_gen = 77, .n = n,
				.flags = PROTO_KF_EPOCH,
				.epoch = 0x0102030405060708ull,
				.dim = has_rows ? 3 : 0,
				.dtype = has_rows ? PROTO_DTYPE_FP32 : 0,
				.keys = keys, .rows = has_rows ? rows : NULL
			};
			len = proto_enc_keys_req(buf, sizeof(buf), &h, op, &q);
			/* exactly PROTO_EPOCH_BYTES more than without */
			assert_int_equal(len, (int)(proto_keys_req_bytes(
						       op, n, 3,
						       PROTO_DTYPE_FP32) +
					      PROTO_EPOCH_BYTES));
			/* the epoch at body offset 32, the keys at 40 */
			assert_int_equal(buf[32 + 32], 0x08);
			assert_int_equal(buf[32 + 39], 0x01);
			if (n)
				assert_int_equal(buf[32 + 40], 1);
			decode_ok(buf, len, &m);
			assert_int_equal(m.hdr.opcode, op);
			assert_int_equal(m.u.keys_req.flags, PROTO_KF_EPOCH);
			assert_true(m.u.keys_req.epoch == q.epoch);
			assert_int_equal(m.u.keys_req.n, n);
			assert_int_equal(((const uint8_t *)m.u.keys_req.keys -
					  buf) % 8, 0);
			proto_load_u64(k2, m.u.keys_req.keys, n);
			assert_memory_equal(k2, keys, n * sizeof(keys[0]));
			if (has_rows) {
				proto_load_f32(r2, m.u.keys_req.rows, 3 * n);
				assert_memory_equal(r2, rows,
						    3 * n * sizeof(rows[0]));
			} else {
				assert_null(m.u.keys_req.rows);
			}
			/* the same request without the flag: the epoch is
			 * not sent, and decodes as 0 */
			q.flags = 0;
			plain = proto_enc_keys_req(buf, sizeof(buf), &h, op,
						   &q);
			assert_int_equal(plain, len - (int)PROTO_EPOCH_BYTES);
			decode_ok(buf, plain, &m);
			assert_true(m.u.keys_req.epoch == 0);
			/* the encoder refuses epoch 0 with the flag */
			q.flags = PROTO_KF_EPOCH;
			q.epoch = 0;
			assert_int_equal(proto_enc_keys_req(buf, sizeof(buf),
							    &h, op, &q),
					 RS_E_INVAL);
			assert_non_null(strstr(rs_errormsg(), "epoch 0"));
		}
	}
	/* UPDATE with every flag: lr at 28, epoch at 32 */
	q = (struct proto_keys_req){ .n = 5, .dim = 3,
				     .flags = PROTO_KF_CREATE | PROTO_KF_LR |
					      PROTO_KF_EPOCH,
				     .lr = 0.125f, .epoch = 1,
				     .dtype = PROTO_DTYPE_FP32, .keys = keys,
				     .rows = rows };
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_UPDATE, &q);
	assert_int_equal(buf[32 + 28 + 3], 0x3e);
	assert_int_equal(buf[32 + 32], 1);
	decode_ok(buf, len, &m);
	assert_true(m.u.keys_req.lr == 0.125f && m.u.keys_req.epoch == 1);
	assert_int_equal(m.u.keys_req.flags, q.flags);
	/* on LOAD too (a restore into a cluster), not ONCE */
	q = (struct proto_keys_req){ .n = 1, .dim = 3, .flags = PROTO_KF_EPOCH,
				     .epoch = 3, .keys = keys, .rows = rows };
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_LOAD, &q);
	assert_true(len > 0);
	decode_ok(buf, len, &m);
	assert_int_equal(m.u.keys_req.epoch, 3);
	q.flags |= PROTO_KF_ONCE;
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_LOAD, &q),
			 RS_E_INVAL);
	/* an epoch 0 on the wire; a request cut in the epoch */
	q = (struct proto_keys_req){ .n = 0, .flags = PROTO_KF_EPOCH,
				     .epoch = 5, .keys = keys };
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_GET, &q);
	assert_int_equal(len, 32 + 40);
	buf[32 + 32] = 0;
	expect_err(buf, len, NULL, RS_E_PROTO,
		   "GET request: epoch: 0 with the EPOCH flag");
	buf[24] = 36;
	expect_err(buf, 32 + 36, NULL, RS_E_PROTO, "truncated at epoch");
}

/* the exactly-once fields: each allowed op, ONCE alone and after EPOCH */
static void keyed_once(void **state)
{
	static const uint32_t ops[] = { PROTO_OP_GET_OR_INIT, PROTO_OP_PUT,
					PROTO_OP_UPDATE, PROTO_OP_DELETE };
	static const struct {
		uint64_t client, seq, done_below;
		const char *needle;
	} bad[3] = {
		{ 0, 2, 1, "client: must not be 0" },
		{ 1, 0, 0, "seq: must be >= 1" },
		{ 1, 4, 5, "done_below: 5 is over seq 4" },
	};
	uint64_t keys[5] = { 1, 2, 3, UINT64_MAX, 0 }, k2[5];
	float rows[5 * 3], r2[5 * 3];
	struct proto_hdr h = hdr_of(1, 0);
	struct proto_keys_req q;
	struct proto_msg m;
	int len, plain;

	for (int i = 0; i < 15; i++)
		rows[i] = (float)i * 0.5f - 3.0f;
	for (size_t o = 0; o < RS_ARRAY_SIZE(ops); o++)
		for (int ep = 0; ep < 2; ep++)
			for (uint32_t n = 0; n <= 5; n += 5) {
				const uint32_t op = ops[o];
				const int has_rows = op == PROTO_OP_PUT ||
						     op == PROTO_OP_UPDATE;
				const size_t at = 32 + 32 + (ep ? 8 : 0);

				q = (struct proto_keys_req){
					.table_id = 9, .table_gen = 77, .n = n,
					.flags = PROTO_KF_ONCE |
						 (ep ? PROTO_KF_EPOCH : 0),
					.epoch = ep ? 0x0102030405060708ull : 0,
					.client = 0x1112131415161718ull,
					.seq = 0x2122232425262728ull,
					.done_below = 0x2122232425262727ull,
					.dim = has_rows ? 3 : 0,
					.dtype = has_rows ? PROTO_DTYPE_FP32
							  : 0,
					.keys = keys,
					.rows = has_rows ? rows : NULL
				};
				len = proto_enc_keys_req(buf, sizeof(buf), &h,
							 op, &q);
				assert_int_equal(len, (int)(proto_keys_req_bytes(
							       op, n, 3,
							       PROTO_DTYPE_FP32) +
						      (ep ? PROTO_EPOCH_BYTES
							  : 0) +
						      PROTO_ONCE_BYTES));
				/* client, seq, done_below at body offset 32
				 * (40 after the epoch), the keys after them */
				if (ep)
					assert_int_equal(buf[32 + 32], 0x08);
				assert_int_equal(buf[at], 0x18);
				assert_int_equal(buf[at + 7], 0x11);
				assert_int_equal(buf[at + 8], 0x28);
				assert_int_equal(buf[at + 16], 0x27);
				assert_int_equal(buf[at + 23], 0x21);
				if (n)
					assert_int_equal(buf[at + 24], 1);
				decode_ok(buf, len, &m);
				assert_int_equal(m.hdr.opcode, op);
				assert_int_equal(m.u.keys_req.flags, q.flags);
				assert_true(m.u.keys_req.epoch == q.epoch);
				assert_true(m.u.keys_req.client == q.client);
				assert_true(m.u.keys_req.seq == q.seq);
				assert_true(m.u.keys_req.done_below ==
					    q.done_below);
				assert_int_equal(m.u.keys_req.n, n);
				assert_int_equal((const uint8_t *)
							 m.u.keys_req.keys -
						 buf, (int)at + 24);
				proto_load_u64(k2, m.u.keys_req.keys, n);
				assert_memory_equal(k2, keys,
						    n * sizeof(keys[0]));
				if (has_rows) {
					proto_load_f32(r2, m.u.keys_req.rows,
						       3 * n);
					assert_memory_equal(
						r2, rows,
						3 * n * sizeof(rows[0]));
					assert_int_equal(
						((const uint8_t *)
							 m.u.keys_req.rows -
						 buf) % 8, 0);
				} else {
					assert_null(m.u.keys_req.rows);
				}
				/* without the flag the encoder ignores the
				 * fields: not sent, decoded as 0 */
				q.flags &= ~PROTO_KF_ONCE;
				plain = proto_enc_keys_req(buf, sizeof(buf),
							   &h, op, &q);
				assert_int_equal(plain,
						 len - (int)PROTO_ONCE_BYTES);
				decode_ok(buf, plain, &m);
				assert_true(m.u.keys_req.client == 0 &&
					    m.u.keys_req.seq == 0 &&
					    m.u.keys_req.done_below == 0);
				/* the encoder refuses what no decoder
				 * accepts */
				q.flags |= PROTO_KF_ONCE;
				for (size_t b = 0; b < 3; b++) {
					q.client = bad[b].client;
					q.seq = bad[b].seq;
					q.done_below = bad[b].done_below;
					expect_refused(proto_enc_keys_req(
							       buf, sizeof(buf),
							       &h, op, &q),
						       RS_E_INVAL,
						       bad[b].needle);
				}
				q.done_below = 4; /* equal to seq: fine */
				assert_true(proto_enc_keys_req(buf, sizeof(buf),
							       &h, op, &q) > 0);
			}
	/* not on GET nor LOAD */
	q = (struct proto_keys_req){ .n = 1, .flags = PROTO_KF_ONCE,
				     .client = 1, .seq = 1, .keys = keys };
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_GET,
					    &q),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "GET request: flags 0x8"));
	q.dim = 3;
	q.rows = rows;
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_LOAD, &q),
			 RS_E_INVAL);
	/* on the wire: a client 0; a request cut in each field */
	q = (struct proto_keys_req){ .n = 0, .flags = PROTO_KF_EPOCH |
							 PROTO_KF_ONCE,
				     .epoch = 5, .client = 9, .seq = 2,
				     .done_below = 1, .keys = keys };
	len = proto_enc_keys_req(buf, sizeof(buf), &h, PROTO_OP_DELETE, &q);
	assert_int_equal(len, 32 + 32 + 8 + 24);
	memcpy(buf2, buf, (size_t)len);
	buf[32 + 40] = 0;
	expect_err(buf, len, NULL, RS_E_PROTO,
		   "DELETE request: client: must not be 0 (with the ONCE "
		   "flag)");
	expect_cut(buf2, 44, "truncated at client");
	expect_cut(buf2, 52, "truncated at seq");
	expect_cut(buf2, 60, "truncated at done_below");
	expect_cut(buf2, 63, "truncated at done_below (offset 56 needs 8 "
		   "bytes, 7 left)");
}

/* members i of a large configuration: 63-byte ids, 127-byte addresses */
static void big_member(struct proto_member *m, uint32_t i)
{
	memset(m, 0, sizeof(*m));
	m->state = i % 3;
	snprintf(m->id, sizeof(m->id), "%063u", i);
	memset(m->addr, 'a' + i % 26, PROTO_ADDR_MAX);
	snprintf(m->addr, 12, "%010u", i);
	m->addr[10] = ':';
}

static void config_roundtrip(void **state)
{
	static const struct proto_member mem[3] = {
		{ PROTO_MEMBER_ACTIVE, "a", "10.0.0.5:7471" },
		{ PROTO_MEMBER_JOINING, "b-2", "x" },
		{ PROTO_MEMBER_DOWN, "b.3", "[::1]:1" },
	};
	static struct proto_member big[PROTO_CONFIG_MAX_MEMBERS + 1];
	struct proto_config c = { .self = PROTO_CONFIG_NO_SELF };
	struct proto_hdr h = hdr_of(4, 1);
	struct proto_member got;
	struct proto_msg m;
	uint32_t i;
	int len;

	/* the request */
	len = proto_enc_config_req(buf, sizeof(buf), &h);
	assert_int_equal(len, PROTO_HDR_BYTES);
	decode_ok(buf, len, &m);
	assert_int_equal(m.hdr.opcode, PROTO_OP_CONFIG);
	assert_int_equal(m.hdr.flags, PROTO_F_TRACE);
	assert_string_equal(proto_op_name(PROTO_OP_CONFIG), "CONFIG");
	assert_string_equal(proto_op_name(PROTO_OP_REPL), "REPL");
	assert_string_equal(proto_op_name(PROTO_OP_COUNT), "?");

	/* not in a cluster */
	len = proto_enc_config_reply(buf, sizeof(buf), &h, &c, NULL);
	assert_int_equal(len, PROTO_HDR_BYTES + 24 + 16);
	decode_ok(buf, len, &m);
	assert_true(m.u.config.epoch == 0);
	assert_int_equal(m.u.config.age_ms, PROTO_CONFIG_AGE_NONE);
	assert_int_equal(m.u.config.lease_ms, 0);
	assert_int_equal(m.u.config.n, 0);
	assert_int_equal(m.u.config.self, PROTO_CONFIG_NO_SELF);
	assert_int_equal(proto_config_next(&m.u.config, &got), 0);

	/* three members, the layout of docs/protocol.md */
	c = (struct proto_config){ .epoch = 0x1122334455667788ull, .r = 2,
				   .vnodes = 160, .n = 3, .self = 2,
				   .age_ms = 1234, .lease_ms = 2000,
				   .ready = 0x1122334455667787ull };
	len = proto_enc_config_reply(buf, sizeof(buf), &h, &c, mem);
	assert_int_equal(len, 32 + 24 + (6 + 1 + 13) + (6 + 3 + 1) +
				      (6 + 3 + 7) + 16);
	/* the read lease and ready after the members */
	assert_int_equal(buf[len - 16], 1234 & 0xff);
	assert_int_equal(buf[len - 12], 2000 & 0xff);
	assert_int_equal(buf[len - 8], 0x87);
	assert_int_equal(buf[32], 0x88);
	assert_int_equal(buf[32 + 8], 2);
	assert_int_equal(buf[32 + 12], 160);
	assert_int_equal(buf[32 + 16], 3);
	assert_int_equal(buf[32 + 20], 2);
	assert_int_equal(buf[32 + 24], PROTO_MEMBER_ACTIVE);
	assert_int_equal(buf[32 + 26], 1); /* id length */
	assert_int_equal(buf[32 + 28], 'a');
	assert_int_equal(buf[32 + 29], 13); /* addr length */
	assert_int_equal(buf[32 + 44], PROTO_MEMBER_JOINING);
	decode_ok(buf, len, &m);
	assert_true(m.u.config.epoch == c.epoch);
	assert_int_equal(m.u.config.r, 2);
	assert_int_equal(m.u.config.vnodes, 160);
	assert_int_equal(m.u.config.n, 3);
	assert_int_equal(m.u.config.self, 2);
	assert_int_equal(m.u.config.age_ms, 1234);
	assert_int_equal(m.u.config.lease_ms, 2000);
	assert_true(m.u.config.ready == c.ready);
	for (i = 0; proto_config_next(&m.u.config, &got); i++) {
		assert_true(i < 3);
		assert_int_equal(got.state, mem[i].state);
		assert_string_equal(got.id, mem[i].id);
		assert_string_equal(got.addr, mem[i].addr);
	}
	assert_int_equal(i, 3);
	c.self = PROTO_CONFIG_NO_SELF;
	expect_refused(proto_enc_config_reply(buf, sizeof(buf), &h, &c, mem),
		       RS_E_INVAL, "ready: epoch 1234605616436508551 from a "
		       "node that is no member");
	c.ready = 0;
	len = proto_enc_config_reply(buf, sizeof(buf), &h, &c, mem);
	decode_ok(buf, len, &m);
	assert_int_equal(m.u.config.self, PROTO_CONFIG_NO_SELF);

	/* the largest: 1024 members of the longest ids and addresses */
	for (i = 0; i <= PROTO_CONFIG_MAX_MEMBERS; i++)
		big_member(&big[i], i);
	c = (struct proto_config){ .epoch = 5, .r = PROTO_CONFIG_MAX_R,
				   .vnodes = PROTO_CONFIG_MAX_VNODES,
				   .n = PROTO_CONFIG_MAX_MEMBERS, .self = 1023 };
	len = proto_enc_config_reply(buf, sizeof(buf), &h, &c, big);
	assert_int_equal(len, 32 + 24 + 1024 * (6 + 63 + 127) + 16);
	decode_ok(buf, len, &m);
	for (i = 0; proto_config_next(&m.u.config, &got); i++)
		assert_memory_equal(&got, &big[i], sizeof(got));
	assert_int_equal(i, PROTO_CONFIG_MAX_MEMBERS);
	/* all or nothing: a 4 KiB buffer, nothing written past it */
	memset(buf2, 0x5a, 8192);
	assert_int_equal(proto_enc_config_reply(buf2, 4096, &h, &c, big),
			 RS_E_TOOBIG);
	for (i = 4096; i < 8192; i++)
		assert_int_equal(buf2[i], 0x5a);
	/* one member more than a configuration has */
	c.n = PROTO_CONFIG_MAX_MEMBERS + 1;
	expect_refused(proto_enc_config_reply(buf, sizeof(buf), &h, &c, big),
		       RS_E_INVAL, "n: 1025 members");
}

static void config_refusals(void **state)
{
	static const struct proto_member mem[3] = {
		{ PROTO_MEMBER_ACTIVE, "mem-0", "10.0.0.5:7471" },
		{ PROTO_MEMBER_DOWN, "mem-1", "[fe80::1]:7471" },
		{ PROTO_MEMBER_JOINING, "mem.2_x", "h:1" },
	};
	/* offsets in the message: fixed part at 32; member 0 at 56 (id
	 * at 60, addr length at 65, addr at 67), member 1 at 80 (id at 84),
	 * member 2 at 105, age_ms at 121, lease_ms at 125, ready at 129,
	 * the end at 137 */
	static const struct patch bad[] = {
		{ 32, 4, 0, RS_E_PROTO, "epoch 0 (no cluster): r 3" },
		{ 40, 4, 0, RS_E_INVAL, "CONFIG reply: r: 0 is not in [1, 5]" },
		{ 40, 4, 6, RS_E_INVAL, "r: 6 is not in [1, 5]" },
		{ 44, 4, 0, RS_E_INVAL, "vnodes: 0 is not in [1, 4096]" },
		{ 44, 4, 4097, RS_E_INVAL, "vnodes: 4097" },
		{ 48, 4, 1025, RS_E_TOOBIG, "n: 1025 members, over the limit" },
		{ 48, 4, 2, RS_E_INVAL, "lease_ms: 778921325 is over" },
		{ 48, 4, 4, RS_E_INVAL, "members[3].id: must not be empty" },
		{ 52, 4, 3, RS_E_PROTO, "self: 3 is neither a member index" },
		{ 52, 4, 0xfffffffe, RS_E_PROTO, "self: 4294967294" },
		{ 56, 1, 3, RS_E_PROTO, "members[0].state: unknown value 3" },
		{ 57, 1, 1, RS_E_PROTO, "members[0] reserved: reserved byte 0" },
		{ 60, 1, ' ', RS_E_INVAL, "members[0].id: byte 0x20 at 0" },
		{ 58, 2, 0, RS_E_INVAL, "members[0].id: must not be empty" },
		{ 58, 2, 64, RS_E_PROTO, "members[0].id: length 64 over" },
		{ 64, 1, '5', RS_E_PROTO,
		  "members[1].id: 'mem-1' after 'mem-5': members are sorted" },
		{ 88, 1, '0', RS_E_PROTO, "members[1].id: 'mem-0' after 'mem-0'" },
		{ 65, 2, 0, RS_E_INVAL, "members[0].addr: must not be empty" },
		{ 65, 2, 128, RS_E_PROTO,
		  "members[0].addr: length 128 over the limit 127" },
		{ 67, 1, ' ', RS_E_INVAL, "members[0].addr: byte 0x20 at 0 is "
					  "not printable ASCII" },
		{ 70, 1, 0x0a, RS_E_INVAL, "members[0].addr: byte 0x0a at 3" },
		{ 79, 1, 0x7f, RS_E_INVAL, "members[0].addr: byte 0x7f at 12" },
		{ 79, 1, 0x80, RS_E_INVAL, "members[0].addr: byte 0x80 at 12" },
		{ 105, 1, 0xff, RS_E_PROTO, "members[2].state: unknown value" },
		{ 121, 4, 7, 0, NULL },	/* any age */
		{ 125, 4, PROTO_CONFIG_MAX_LEASE_MS + 1, RS_E_INVAL,
		  "lease_ms: 600001 is over the limit 600000" },
		{ 129, 4, 9, 0, NULL },	/* ready in the epoch */
		{ 129, 4, 10, RS_E_PROTO, "ready: epoch 10 is past the "
					  "configuration's 9" },
	};
	struct proto_config c = { .epoch = 9, .r = 3, .vnodes = 160, .n = 3,
				  .self = 1 };
	struct proto_hdr h = hdr_of(4, 0);
	struct proto_member e[3];
	int len, len0;

	len0 = proto_enc_config_reply(buf2, sizeof(buf2), &h, &c, mem);
	assert_int_equal(len0, 137);
	expect_patches(buf2, (size_t)len0, bad, RS_ARRAY_SIZE(bad));
	/* epoch 0 with anything but r 0, vnodes 0, n 0, self none */
	c = (struct proto_config){ .self = PROTO_CONFIG_NO_SELF };
	len = proto_enc_config_reply(buf, sizeof(buf), &h, &c, NULL);
	put_le(32 + 8, 1, 4);
	expect_err(buf, len, NULL, RS_E_PROTO, "epoch 0 (no cluster): r 1");
	len = proto_enc_config_reply(buf, sizeof(buf), &h, &c, NULL);
	put_le(32 + 20, 0, 4);
	expect_err(buf, len, NULL, RS_E_PROTO, "self 0x0 must be");
	len = proto_enc_config_reply(buf, sizeof(buf), &h, &c, NULL);
	put_le(len - 12, 5, 4);
	expect_err(buf, len, NULL, RS_E_PROTO, "epoch 0 (no cluster): age_ms "
		   "0xffffffff, lease_ms 5 must be");
	len = proto_enc_config_reply(buf, sizeof(buf), &h, &c, NULL);
	put_le(len - 8, 1, 4);
	expect_err(buf, len, NULL, RS_E_PROTO, "ready: epoch 1 is past the "
		   "configuration's 0");
	/* a truncated entry; no read lease; a trailing byte */
	expect_cut(buf2, (size_t)len0 - 17 - 32,
		   "truncated at members[2].addr");
	expect_cut(buf2, (size_t)len0 - 12 - 32, "truncated at lease_ms");
	expect_cut(buf2, (size_t)len0 - 4 - 32, "truncated at ready");
	/* ready from a node that is no member */
	memcpy(buf, buf2, (size_t)len0);
	put_le(32 + 20, PROTO_CONFIG_NO_SELF, 4);
	put_le(129, 9, 4);
	expect_err(buf, (size_t)len0, NULL, RS_E_PROTO, "ready: epoch 9 from "
		   "a node that is no member");
	memcpy(buf, buf2, (size_t)len0);
	put_le(24, (uint32_t)(len0 + 1 - 32), 4);
	buf[len0] = 0;
	expect_err(buf, (size_t)len0 + 1, NULL, RS_E_PROTO,
		   "1 trailing bytes after offset 105");
	/* a CONFIG request has an empty body */
	len = proto_enc_config_req(buf, sizeof(buf), &h);
	put_le(24, 1, 4);
	buf[len] = 0;
	expect_err(buf, (size_t)len + 1, NULL, RS_E_PROTO,
		   "CONFIG request: 1 trailing bytes");

	/* the encoder refuses what no decoder accepts */
	c = (struct proto_config){ .epoch = 9, .r = 3, .vnodes = 160, .n = 3,
				   .self = 1 };
	memcpy(e, mem, sizeof(e));
#define ENC_REFUSES(needle)                                              \
	do {                                                             \
		expect_refused(proto_enc_config_reply(buf, sizeof(buf), &h, \
						      &c, e),            \
			       RS_E_INVAL, needle);                      \
		c = (struct proto_config){ .epoch = 9, .r = 3,           \
					   .vnodes = 160, .n = 3,        \
					   .self = 1 };                  \
		memcpy(e, mem, sizeof(e));                               \
	} while (0)
	c.r = 0;
	ENC_REFUSES("r: 0 is not");
	c.r = 6;
	ENC_REFUSES("r: 6 is not");
	c.vnodes = 0;
	ENC_REFUSES("vnodes: 0");
	c.self = 3;
	ENC_REFUSES("self: 3");
	c.epoch = 0;
	ENC_REFUSES("epoch 0 (no cluster)");
	e[1].state = 3;
	ENC_REFUSES("members[1].state: unknown value 3");
	snprintf(e[2].id, sizeof(e[2].id), "mem-1");
	ENC_REFUSES("members[2].id: 'mem-1' after 'mem-1'");
	snprintf(e[0].id, sizeof(e[0].id), "z");
	ENC_REFUSES("members[1].id: 'mem-1' after 'z'");
	snprintf(e[0].id, sizeof(e[0].id), "a/b");
	ENC_REFUSES("members[0].id: byte 0x2f at 1");
	e[0].addr[0] = '\0';
	ENC_REFUSES("members[0].addr: must not be empty");
	snprintf(e[0].addr, sizeof(e[0].addr), "a b");
	ENC_REFUSES("members[0].addr: byte 0x20 at 1");
	memset(e[0].addr, 'a', sizeof(e[0].addr)); /* no NUL */
	ENC_REFUSES("members[0].addr: longer than 127 bytes");
#undef ENC_REFUSES
	/* a cap under the fixed part */
	assert_int_equal(proto_enc_config_reply(buf, 40, &h, &c, e),
			 RS_E_TOOBIG);
	assert_int_equal(proto_enc_config_req(buf, 31, &h), RS_E_TOOBIG);
}

static void repl_roundtrip(void **state)
{
	static uint64_t keys[9], k2[9], cl[9], sq[9], db[9], c2[9], s2[9],
		d2[9];
	static float rows[9 * 4], r2[9 * 4];
	static int32_t est[9], t2[9];
	static uint32_t ecr[9];
	uint8_t kinds[9];
	struct proto_hdr h = hdr_of(6, 0);
	struct proto_repl_req q;
	struct proto_msg m;
	const uint8_t *wk;
	int len;

	/* mixed records: every third without an exactly-once call (client
	 * 0), the others with one (statuses 0 and CREATED) */
	for (uint32_t i = 0; i < 9; i++) {
		keys[i] = 0x0101010101010101ull * i + 3;
		kinds[i] = i % 3 == 1 ? PROTO_REPL_DELETED : PROTO_REPL_ROW;
		for (uint32_t j = 0; j < 4; j++)
			rows[i * 4 + j] = (float)(i * 10 + j) - 0.5f;
		cl[i] = i % 3 == 2 ? 0 : 0xc000000000000000ull + i;
		sq[i] = cl[i] ? 0x100000000ull * i + 1 : 0;
		db[i] = cl[i] ? sq[i] - (i & 1) : 0;
		est[i] = cl[i] && i % 3 == 0 ? PROTO_ST_CREATED : 0;
		ecr[i] = cl[i] ? 0x80000000u + i : 0;
	}
	/* name lengths 1..9 cover every padding of the name, n 0..9 every
	 * padding of the kinds */
	for (size_t nl = 1; nl <= 9; nl++)
		for (uint32_t n = 0; n <= 9; n++) {
			const size_t ko = 32 + 16 + (2 + nl + 7) / 8 * 8;

			q = (struct proto_repl_req){ .epoch = 1000 + n, .n = n,
						     .width = 4, .keys = keys,
						     .clients = cl, .seqs = sq,
						     .done_below = db,
						     .statuses = est,
						     .creds = ecr,
						     .kinds = kinds,
						     .rows = rows,
						     .from_inc = 0xabc0 + n,
						     .from_seq = 5 + nl,
						     .table_ident = n ? 0x1d + n
								      : 0 };
			memset(q.table, 'a' + (int)n, nl);
			len = proto_enc_repl_req(buf, sizeof(buf), &h, &q);
			assert_int_equal(len,
					 (int)proto_repl_req_bytes(n, 4, nl));
			assert_int_equal(len % 8, 0);
			decode_ok(buf, len, &m);
			assert_int_equal(m.hdr.opcode, PROTO_OP_REPL);
			assert_true(m.u.repl_req.epoch == 1000 + n);
			assert_int_equal(m.u.repl_req.n, n);
			assert_int_equal(m.u.repl_req.width, 4);
			assert_true(m.hdr.flags & PROTO_F_FROM);
			assert_true(m.u.repl_req.from_inc == 0xabc0 + n);
			assert_true(m.u.repl_req.from_seq == 5 + nl);
			assert_true(m.u.repl_req.table_ident ==
				    q.table_ident);
			assert_string_equal(m.u.repl_req.table, q.table);
			/* bulk arrays 8-aligned in the message */
			assert_int_equal(((const uint8_t *)m.u.repl_req.keys -
					  buf) % 8, 0);
			assert_int_equal(((const uint8_t *)m.u.repl_req.rows -
					  buf) % 8, 0);
			assert_int_equal((const uint8_t *)m.u.repl_req.keys -
						 buf, (int)ko);
			/* keys, clients, seqs, done_below, statuses, creds,
			 * kinds back to back (kinds padded to 8) */
			assert_int_equal((const uint8_t *)m.u.repl_req.clients -
						 buf, (int)(ko + 8 * n));
			assert_int_equal((const uint8_t *)m.u.repl_req.seqs -
						 buf, (int)(ko + 16 * n));
			assert_int_equal((const uint8_t *)
						 m.u.repl_req.done_below - buf,
					 (int)(ko + 24 * n));
			assert_int_equal((const uint8_t *)m.u.repl_req.statuses -
						 buf, (int)(ko + 32 * n));
			assert_int_equal((const uint8_t *)m.u.repl_req.creds -
						 buf, (int)(ko + 36 * n));
			assert_int_equal((const uint8_t *)m.u.repl_req.kinds -
						 buf, (int)(ko + 40 * n));
			proto_load_u64(k2, m.u.repl_req.keys, n);
			assert_memory_equal(k2, keys, n * sizeof(keys[0]));
			proto_load_u64(c2, m.u.repl_req.clients, n);
			assert_memory_equal(c2, cl, n * sizeof(cl[0]));
			proto_load_u64(s2, m.u.repl_req.seqs, n);
			assert_memory_equal(s2, sq, n * sizeof(sq[0]));
			proto_load_u64(d2, m.u.repl_req.done_below, n);
			assert_memory_equal(d2, db, n * sizeof(db[0]));
			proto_load_i32(t2, m.u.repl_req.statuses, n);
			assert_memory_equal(t2, est, n * sizeof(est[0]));
			for (uint32_t i = 0; i < n; i++)
				assert_int_equal(proto_u32_at(
							 m.u.repl_req.creds, i),
						 ecr[i]);
			wk = m.u.repl_req.kinds;
			proto_load_f32(r2, m.u.repl_req.rows, 4 * n);
			for (uint32_t i = 0; i < n; i++) {
				assert_int_equal(wk[i], kinds[i]);
				for (uint32_t j = 0; j < 4; j++)
					assert_true(r2[i * 4 + j] ==
						    (kinds[i] ? 0.0f
							      : rows[i * 4 + j]));
			}
		}
	/* the REPL reply is a keyed reply: statuses only */
	{
		const int32_t st[3] = { 0, PROTO_ST_CREATED, RS_E_NOTFOUND };
		struct proto_keys_reply r = { .n = 3, .status = st };
		struct proto_reply_writer w;
		int32_t sr[3];

		len = proto_enc_keys_reply(buf, sizeof(buf), &h, PROTO_OP_REPL,
					   &r);
		assert_int_equal(len, (int)proto_keys_reply_bytes(
					      PROTO_OP_REPL, 3, 0, 0));
		assert_int_equal(len, 32 + 16 + 16);
		decode_ok(buf, len, &m);
		assert_true(m.hdr.flags & PROTO_F_REPLY);
		assert_int_equal(m.u.keys_reply.n, 3);
		assert_null(m.u.keys_reply.rows);
		proto_load_i32(sr, m.u.keys_reply.status, 3);
		assert_memory_equal(sr, st, sizeof(st));
		len = proto_keys_reply_begin(buf, sizeof(buf), &h,
					     PROTO_OP_REPL, 2, 0, 0, &w);
		assert_null(w.rows);
		proto_reply_set(&w, 0, PROTO_ST_CREATED);
		proto_reply_fail(&w, 1, RS_E_FULL);
		decode_ok(buf, len, &m);
		/* a status above CREATED is no REPL status */
		put_le(32 + 16, 2, 4);
		expect_err(buf, len, NULL, RS_E_PROTO,
			   "status[0]: 2 is not a REPL key status");
	}
	/* REPL has no keyed request */
	assert_int_equal(proto_keys_req_bytes(PROTO_OP_REPL, 1, 0, 0), 0);
	assert_int_equal(proto_keys_per_msg(PROTO_OP_REPL, 4, 0, 4096, 4096,
					    10),
			 RS_E_INVAL);
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_REPL,
					    &(struct proto_keys_req){
						    .n = 1, .keys = keys }),
			 RS_E_INVAL);
	assert_int_equal(proto_enc_keys_reply(buf, sizeof(buf), &h,
					      PROTO_OP_CONFIG,
					      &(struct proto_keys_reply){
						      .n = 0 }),
			 RS_E_INVAL);
	/* sizes (with the sender, as nodes send them): values no message
	 * carries are 0 */
	assert_int_equal(proto_repl_req_bytes(2, 3, 2),
			 32 + 16 + 8 + 4 * 16 + 8 + 8 + 8 + 24 + 24);
	assert_int_equal(proto_repl_req_bytes(3, 1, 2),
			 32 + 16 + 8 + 4 * 24 + 12 + 12 + 8 + 12 + 24);
	assert_int_equal(proto_repl_req_bytes(0, 1, 6), 32 + 16 + 8 + 24);
	assert_int_equal(proto_repl_req_bytes(1, 0, 1), 0);
	assert_int_equal(proto_repl_req_bytes(1, 3 * PROTO_MAX_DIM + 2, 1), 0);
	assert_int_equal(proto_repl_req_bytes(PROTO_MAX_BATCH_KEYS + 1, 1, 1),
			 0);
	assert_int_equal(proto_repl_req_bytes(1, 1, 0), 0);
	assert_int_equal(proto_repl_req_bytes(1, 1, 64), 0);
	assert_true(proto_repl_req_bytes(PROTO_MAX_BATCH_KEYS,
					 3 * PROTO_MAX_DIM + 1, 63) >
		    (size_t)4 * PROTO_MAX_BATCH_KEYS * 3 * PROTO_MAX_DIM);
}

static void repl_refusals(void **state)
{
	static const uint64_t keys[3] = { 5, 6, 7 };
	static const uint8_t kinds[3] = { PROTO_REPL_ROW, PROTO_REPL_DELETED,
					  PROTO_REPL_ROW };
	static const float rows[3 * 2] = { 1, 2, 3, 4, 5, 6 };
	/* record 0 and 2 written by exactly-once calls, record 1 not */
	static const uint64_t cl[3] = { 5, 0, 6 }, sq[3] = { 2, 0, 1 },
			      db[3] = { 1, 0, 0 };
	static const int32_t st[3] = { PROTO_ST_CREATED, 0, 0 };
	static const uint32_t cr[3] = { 4, 0, 0xffffffffu };
	/* name "ab": epoch 32, n 40, width 44, name 48, padding 52..55,
	 * keys 56, clients 80, seqs 104, done_below 128, statuses 152,
	 * creds 164, kinds 176, padding 179..183, rows 184 (row 1 at 192),
	 * from_inc 208, from_seq 216, table_ident 224, end 232 */
	static const struct patch bad[] = {
		{ 32, 4, 0, RS_E_PROTO, "REPL request: epoch: must be >= 1" },
		{ 40, 4, 4, RS_E_PROTO,
		  "4 records of width 2 and the sender need 224 bytes after "
		  "the table name, 176 present" },
		{ 40, 4, PROTO_DEFAULT_BATCH_KEYS + 1, RS_E_TOOBIG,
		  "n: 65537 records, over the limit 65536" },
		{ 44, 4, 0, RS_E_PROTO, "width: must be >= 1" },
		{ 44, 4, 3, RS_E_PROTO,
		  "3 records of width 3 and the sender need 188 bytes" },
		{ 44, 4, 3 * PROTO_DEFAULT_DIM + 2, RS_E_TOOBIG,
		  "width: 12290 is over the limit 12289" },
		{ 48, 2, 1, RS_E_PROTO,
		  "table padding: reserved byte 0 is 0x62" },
		{ 48, 2, 0, RS_E_INVAL, "table: must not be empty" },
		{ 50, 1, '/', RS_E_INVAL, "table: byte 0x2f at 0" },
		{ 52, 1, 1, RS_E_PROTO, "table padding: reserved byte 0" },
		{ 55, 1, 0x80, RS_E_PROTO, "table padding: reserved byte 3" },
		/* client 0 with a seq, done_below or status */
		{ 80, 4, 0, RS_E_PROTO,
		  "REPL request: seqs[0] 2, done_below[0] 1, statuses[0] 1: "
		  "must be 0 when clients[0] is 0" },
		{ 112, 4, 1, RS_E_PROTO,
		  "seqs[1] 1, done_below[1] 0, statuses[1] 0: must be 0 when "
		  "clients[1] is 0" },
		{ 140, 4, 0x10, RS_E_PROTO,
		  "done_below[1] 68719476736, statuses[1] 0: must be 0" },
		{ 156, 4, 1, RS_E_PROTO, "statuses[1] 1: must be 0 when" },
		{ 156, 4, 0xffffffff, RS_E_PROTO, "statuses[1] -1: must be 0" },
		/* a client: seq >= 1, done_below <= seq, status 0 or 1 */
		{ 88, 4, 9, RS_E_PROTO, "seqs[1]: must be >= 1" },
		{ 104, 4, 0, RS_E_PROTO, "REPL request: seqs[0]: must be >= 1" },
		{ 128, 4, 3, RS_E_PROTO, "done_below[0]: 3 is over seqs[0] 2" },
		{ 148, 1, 1, RS_E_PROTO,
		  "done_below[2]: 4294967296 is over seqs[2] 1" },
		{ 152, 4, 2, RS_E_PROTO,
		  "statuses[0]: 2 is not 0 or 1 (created)" },
		{ 160, 4, 0xffffffff, RS_E_PROTO,
		  "statuses[2]: -1 is not 0 or 1" },
		{ 160, 4, (uint32_t)RS_E_NOTFOUND, RS_E_PROTO,
		  "statuses[2]: -10002 is not 0 or 1" },
		/* a credential only with a client */
		{ 168, 4, 1, RS_E_PROTO,
		  "REPL request: creds[1] 1: must be 0 when clients[1] is 0" },
		{ 171, 1, 0x80, RS_E_PROTO, "creds[1] 2147483648: must be 0" },
		{ 176, 1, 2, RS_E_PROTO, "kinds[0]: unknown value 2" },
		{ 178, 1, 0xff, RS_E_PROTO, "kinds[2]: unknown value 255" },
		{ 179, 1, 1, RS_E_PROTO, "kinds padding: reserved byte 0" },
		{ 183, 1, 1, RS_E_PROTO, "kinds padding: reserved byte 4" },
		{ 193, 1, 1, RS_E_PROTO, "rows[1]: a deleted record's row must "
					 "be zero bytes (byte 1 is 0x01)" },
		{ 199, 1, 0x80, RS_E_PROTO, "rows[1]: a deleted" }, /* -0.0f */
		/* the sender: incarnation and number >= 1 */
		{ 208, 4, 0, RS_E_PROTO, "from_inc 0, from_seq 3: must be" },
		{ 216, 4, 0, RS_E_PROTO, "from_inc 119, from_seq 0: must be" },
		{ 220, 4, 9, 0, NULL },	/* any number but 0 */
		{ 224, 4, 0x1d, 0, NULL }, /* the table's identity: any */
		/* what a record may be */
		{ 177, 1, 0, 0, NULL }, /* a row, then: its values are free */
		{ 184, 4, 0xffffffff, 0, NULL },
		{ 164, 4, 0, 0, NULL },	 /* any credential with a client */
		{ 172, 4, 7, 0, NULL },
		{ 128, 4, 2, 0, NULL },	 /* done_below == seq */
		{ 152, 4, 0, 0, NULL },	 /* status 0 */
		{ 160, 4, 1, 0, NULL },	 /* status CREATED */
		{ 84, 4, 0xffffffff, 0, NULL }, /* any client but 0 */
		{ 108, 4, 0xffffffff, 0, NULL }, /* any seq but 0 */
	};
	struct proto_repl_req q = { .epoch = 9, .n = 3, .width = 2,
				    .table = "ab", .keys = keys,
				    .clients = cl, .seqs = sq,
				    .done_below = db, .statuses = st,
				    .creds = cr, .kinds = kinds,
				    .rows = rows, .from_inc = 0x77,
				    .from_seq = 3 };
	struct proto_hdr h = hdr_of(6, 0);
	struct proto_limits lim;
	struct proto_msg m;
	uint8_t k2[3];
	int len, len0;

	/* without a sender: no flag, no trailer (a node refuses it) */
	q.from_inc = 0;
	len = proto_enc_repl_req(buf2, sizeof(buf2), &h, &q);
	assert_int_equal(len, 208);
	assert_int_equal(buf2[6] & PROTO_F_FROM, 0);
	decode_ok(buf2, (size_t)len, &m);
	assert_true(m.u.repl_req.from_inc == 0 && m.u.repl_req.from_seq == 0);
	q.from_seq = 0;
	q.from_inc = 0x77;
	expect_refused(proto_enc_repl_req(buf2, sizeof(buf2), &h, &q),
		       RS_E_INVAL, "a sender (from_inc) without a sequence");
	q.from_seq = 3;
	len0 = proto_enc_repl_req(buf2, sizeof(buf2), &h, &q);
	assert_int_equal(len0, 232);
	assert_int_equal(buf2[6] & PROTO_F_FROM, PROTO_F_FROM);
	assert_int_equal(len0, (int)proto_repl_req_bytes(3, 2, 2));
	expect_patches(buf2, (size_t)len0, bad, RS_ARRAY_SIZE(bad));
	/* limits: n over max_batch_keys, width over 3 * max_dim + 1 */
	proto_limits_default(&lim);
	lim.max_batch_keys = 2;
	expect_err(buf2, (size_t)len0, &lim, RS_E_TOOBIG,
		   "n: 3 records, over the limit 2");
	proto_limits_default(&lim);
	lim.max_dim = 1;
	decode_ok(buf2, (size_t)len0, &m); /* width 2 <= 3 * 1 + 1 */
	memcpy(buf, buf2, (size_t)len0);
	put_le(44, 5, 4);
	expect_err(buf, (size_t)len0, &lim, RS_E_TOOBIG,
		   "width: 5 is over the limit 4");
	/* truncated; trailing */
	expect_cut(buf2, (size_t)len0 - 1 - 32,
		   "need 176 bytes after the table name, 175 present");
	expect_cut(buf2, 20, "truncated at table padding");
	memcpy(buf, buf2, (size_t)len0);
	put_le(24, (uint32_t)(len0 + 1 - 32), 4);
	buf[len0] = 0;
	expect_err(buf, (size_t)len0 + 1, NULL, RS_E_PROTO,
		   "need 176 bytes after the table name, 177 present");

	/* a deleted record's row is not read: zeros on the wire */
	len = proto_enc_repl_req(buf, sizeof(buf), &h, &q);
	decode_ok(buf, len, &m);
	for (int b = 0; b < 8; b++)
		assert_int_equal(((const uint8_t *)m.u.repl_req.rows)[8 + b], 0);
	memcpy(k2, m.u.repl_req.kinds, 3);
	assert_memory_equal(k2, kinds, 3);

#define REPL_REFUSES(q, code, needle)                                      \
	expect_refused(proto_enc_repl_req(buf, sizeof(buf), &h, q), code, \
		       needle)
	/* NULL arrays: all zero (a sender without exactly-once records),
	 * byte for byte what zero arrays give */
	{
		static const uint64_t z64[3];
		static const int32_t z32[3];
		static const uint32_t zu32[3];
		struct proto_repl_req z = q;

		z.clients = z.seqs = z.done_below = z.statuses = NULL;
		z.creds = NULL;
		len = proto_enc_repl_req(buf, sizeof(buf), &h, &z);
		assert_int_equal(len, len0);
		decode_ok(buf, len, &m);
		for (uint32_t i = 0; i < 3; i++) {
			assert_true(proto_key_at(m.u.repl_req.clients, i) == 0);
			assert_true(proto_key_at(m.u.repl_req.seqs, i) == 0);
			assert_true(proto_key_at(m.u.repl_req.done_below, i) ==
				    0);
			assert_int_equal(proto_status_at(m.u.repl_req.statuses,
							 i), 0);
			assert_int_equal(proto_u32_at(m.u.repl_req.creds, i),
					 0);
		}
		for (int b = 80; b < 176; b++)
			assert_int_equal(buf[b], 0);
		z.clients = z.seqs = z.done_below = z64;
		z.statuses = z32;
		z.creds = zu32;
		assert_int_equal(proto_enc_repl_req(buf2, sizeof(buf2), &h,
						    &z),
				 len);
		assert_memory_equal(buf, buf2, (size_t)len);
		/* one array given, the others NULL */
		z.clients = z.done_below = NULL;
		z.statuses = NULL;
		z.seqs = sq;
		REPL_REFUSES(&z, RS_E_INVAL,
			     "REPL request: seqs[0] 2, done_below[0] 0, "
			     "statuses[0] 0: must be 0 when clients[0] is 0");
		z.seqs = NULL;
		z.clients = cl;
		REPL_REFUSES(&z, RS_E_INVAL,
			     "REPL request: seqs[0]: must be >= 1");
	}

	/* the encoder refuses what no decoder accepts */
	{
		struct proto_repl_req z = q;
		const uint64_t s1[3] = { 2, 0, 0 }, d3[3] = { 3, 0, 0 };
		const int32_t t2[3] = { 0, 0, 2 }, tn[3] = { -1, 0, 0 };
		const int32_t t1[3] = { 0, 1, 0 };

		z.seqs = s1; /* record 2: a client, seq 0 */
		REPL_REFUSES(&z, RS_E_INVAL, "seqs[2]: must be >= 1");
		z.seqs = sq;
		z.done_below = d3;
		REPL_REFUSES(&z, RS_E_INVAL,
			     "done_below[0]: 3 is over seqs[0] 2");
		z.done_below = db;
		z.statuses = t2;
		REPL_REFUSES(&z, RS_E_INVAL, "statuses[2]: 2 is not");
		z.statuses = tn;
		REPL_REFUSES(&z, RS_E_INVAL, "statuses[0]: -1 is not");
		z.statuses = t1; /* record 1 has no client */
		REPL_REFUSES(&z, RS_E_INVAL,
			     "statuses[1] 1: must be 0 when clients[1] is 0");
		z.statuses = st;
		z.creds = (const uint32_t[3]){ 0, 9, 0 };
		REPL_REFUSES(&z, RS_E_INVAL,
			     "creds[1] 9: must be 0 when clients[1] is 0");
	}
	q.epoch = 0;
	REPL_REFUSES(&q, RS_E_INVAL, "epoch: must be >= 1");
	q.epoch = 9;
	q.width = 0;
	REPL_REFUSES(&q, RS_E_INVAL, "REPL request: width 0 is not in [1, ");
	q.width = 3 * PROTO_MAX_DIM + 2;
	REPL_REFUSES(&q, RS_E_INVAL, "width 196610 is not in [1, 196609]");
	q.width = 2;
	q.n = PROTO_MAX_BATCH_KEYS + 1;
	REPL_REFUSES(&q, RS_E_TOOBIG, "16777217 records, over the limit");
	q.n = 3;
	q.kinds = (const uint8_t[3]){ 0, 2, 0 };
	REPL_REFUSES(&q, RS_E_INVAL, "kinds[1]: unknown value 2");
	q.kinds = kinds;
	snprintf(q.table, sizeof(q.table), "a b");
	REPL_REFUSES(&q, RS_E_INVAL, "REPL request: table: byte");
	q.table[0] = '\0';
	REPL_REFUSES(&q, RS_E_INVAL, "REPL request: table: must not be empty");
#undef REPL_REFUSES
	/* too small a buffer: nothing past it written */
	snprintf(q.table, sizeof(q.table), "ab");
	memset(buf, 0x5a, 256);
	assert_int_equal(proto_enc_repl_req(buf, 100, &h, &q), RS_E_TOOBIG);
	for (int b = 100; b < 256; b++)
		assert_int_equal(buf[b], 0x5a);
	assert_int_equal(proto_enc_repl_req(buf, 231, &h, &q), RS_E_TOOBIG);
	assert_int_equal(buf[231], 0x5a);
	assert_int_equal(proto_enc_repl_req(buf, 232, &h, &q), 232);
}

/* COPY: a request names the requester, the table, where to go on and
 * the hash ranges; the reply where the scan stopped. */
static void copy_messages(void **state)
{
	static const uint64_t rg[4] = { 10, 20, UINT64_MAX - 1, 3 };
	struct proto_copy_req q = { .epoch = 4, .inc = 0xabcdef0123ull,
				    .cursor = 99, .max = 2048, .nranges = 2,
				    .ranges = rg };
	struct proto_copy_reply r = { .cursor = 4096, .copied = 17, .done = 1 };
	struct proto_hdr h = { .req_id = 3 };
	/* id "mem-2", table "tb": epoch 32, inc 40, cursor 48, max 56,
	 * nranges 60, id 64 (length) 66..70, table 71 73..74, padding
	 * 75..79, ranges 80..111 */
	static const struct patch bad[] = {
		{ 32, 4, 0, RS_E_PROTO, "COPY request: epoch: must be >= 1" },
		{ 56, 4, 0, RS_E_INVAL, "max: 0 is not in [1, 65536]" },
		{ 56, 4, 65537, RS_E_INVAL, "max: 65537 is not in" },
		{ 60, 4, 0, RS_E_TOOBIG, "nranges: 0 is not in [1, 1024]" },
		{ 60, 4, 1025, RS_E_TOOBIG, "nranges: 1025 is not in" },
		{ 60, 4, 3, RS_E_PROTO, "ranges" },
		{ 60, 4, 1, RS_E_PROTO, "16 trailing bytes" },
		{ 66, 1, '/', RS_E_INVAL, "id: byte 0x2f at 0" },
		{ 64, 2, 0, RS_E_INVAL, "id: must not be empty" },
		{ 75, 1, 1, RS_E_PROTO, "names padding: reserved byte 0" },
		{ 80, 4, 7, 0, NULL },	/* any range is well-formed */
	};
	static const struct patch bad_reply[] = {
		{ 48, 4, 2, RS_E_PROTO, "COPY reply: done: 2 is not 0 or 1" },
		{ 52, 4, 1, RS_E_PROTO, "reserved" },
	};
	uint8_t req[256], rep[256];
	struct proto_msg m;
	int len, rlen;

	(void)state;
	snprintf(q.id, sizeof(q.id), "mem-2");
	snprintf(q.table, sizeof(q.table), "tb");
	len = proto_enc_copy_req(req, sizeof(req), &h, &q);
	assert_int_equal(len, 112);
	decode_ok(req, (size_t)len, &m);
	assert_int_equal(m.hdr.opcode, PROTO_OP_COPY);
	assert_string_equal(proto_op_name(PROTO_OP_COPY), "COPY");
	assert_true(m.u.copy_req.epoch == 4 &&
		    m.u.copy_req.inc == 0xabcdef0123ull &&
		    m.u.copy_req.cursor == 99 && m.u.copy_req.max == 2048 &&
		    m.u.copy_req.nranges == 2);
	assert_string_equal(m.u.copy_req.id, "mem-2");
	assert_string_equal(m.u.copy_req.table, "tb");
	for (int i = 0; i < 4; i++)
		assert_true(proto_key_at(m.u.copy_req.ranges, i) == rg[i]);
	expect_patches(req, (size_t)len, bad, RS_ARRAY_SIZE(bad));
	rlen = proto_enc_copy_reply(rep, sizeof(rep), &h, &r);
	assert_int_equal(rlen, 56);
	decode_ok(rep, (size_t)rlen, &m);
	assert_true(m.u.copy_reply.cursor == 4096 &&
		    m.u.copy_reply.copied == 17 && m.u.copy_reply.done == 1);
	expect_patches(rep, (size_t)rlen, bad_reply, RS_ARRAY_SIZE(bad_reply));
	/* the encoder refuses what the decoder would */
#define COPY_REFUSES(needle)                                              \
	expect_refused(proto_enc_copy_req(req, sizeof(req), &h, &q),      \
		       RS_E_INVAL, needle)
	q.epoch = 0;
	COPY_REFUSES("COPY request: epoch 0 (>= 1)");
	q.epoch = 4;
	q.nranges = 0;
	COPY_REFUSES("nranges 0 (1..1024)");
	q.nranges = PROTO_COPY_MAX_RANGES + 1;
	COPY_REFUSES("nranges 1025");
	q.nranges = 2;
	q.max = 0;
	COPY_REFUSES("max 0 (1..65536)");
	q.max = 1;
	q.id[0] = 0;
	COPY_REFUSES("COPY request: id: must not be empty");
#undef COPY_REFUSES
	snprintf(q.id, sizeof(q.id), "mem-2");
	/* a buffer too small: refused, nothing written past it */
	memset(req, 0x5a, sizeof(req));
	assert_int_equal(proto_enc_copy_req(req, 111, &h, &q), RS_E_TOOBIG);
	assert_int_equal(req[111], 0x5a);
}

static int setup(void **state)
{
	corpus_build(&corpus);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(corpus_roundtrip),
		cmocka_unit_test(header_fields),
		cmocka_unit_test(hello_fields),
		cmocka_unit_test(table_fields),
		cmocka_unit_test(table_epoch),
		cmocka_unit_test(spec_layout),
		cmocka_unit_test(spec_rows),
		cmocka_unit_test(dir_pagination),
		cmocka_unit_test(stats_pagination),
		cmocka_unit_test(keyed_requests),
		cmocka_unit_test(keyed_replies),
		cmocka_unit_test(images_replies),
		cmocka_unit_test(error_replies),
		cmocka_unit_test(wire_layout),
		cmocka_unit_test(split_helper),
		cmocka_unit_test(encoders_respect_cap),
		cmocka_unit_test(decode_checks),
		cmocka_unit_test(names_limits_dtypes),
		cmocka_unit_test(keyed_epoch),
		cmocka_unit_test(keyed_once),
		cmocka_unit_test(config_roundtrip),
		cmocka_unit_test(config_refusals),
		cmocka_unit_test(repl_roundtrip),
		cmocka_unit_test(repl_refusals),
		cmocka_unit_test(copy_messages),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
