/*
 * test_proto.c - the wire format: every message round-trips field by
 * field, the byte layout matches docs/protocol.md, encoders never write
 * past their buffer, the split helper is exact, and each decoder check
 * fires with the documented code and a message naming the field.
 * (Random and mutated input: test_proto_garbage.c.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proto_test_util.h"

static struct corpus corpus;
static uint8_t buf[1 << 21], buf2[1 << 21];

static void decode_ok(const void *msg, size_t len, struct proto_msg *m)
{
	int rc = proto_decode(msg, len, NULL, m);

	if (rc)
		fail_msg("decode: %d %s", rc, rs_errormsg());
}

static void expect_err(const void *msg, size_t len,
		       const struct proto_limits *lim, int code,
		       const char *needle)
{
	struct proto_msg m;
	int rc = proto_decode(msg, len, lim, &m);

	if (rc != code)
		fail_msg("'%s': expected %d got %d (%s)", needle, code, rc,
			 rs_errormsg());
	if (!strstr(rs_errormsg(), needle))
		fail_msg("message '%s' lacks '%s'", rs_errormsg(), needle);
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

	/* semantic checks of the spec, prefixed with the message */
	s.optim.lr = 0;
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	expect_err(buf, len, NULL, RS_E_INVAL,
		   "TABLE_CREATE request: table 'emb': optimizer.lr: must be");
	s.optim.lr = 0.1f;
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
	s.init.a = -1;
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	expect_err(buf, len, NULL, RS_E_INVAL, "initializer.a");

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
	q.lr = -1.0f;
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_UPDATE, &q), RS_E_INVAL);
	q.lr = __builtin_nanf("");
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_UPDATE, &q), RS_E_INVAL);
	q.lr = __builtin_inff();
	assert_int_equal(proto_enc_keys_req(buf, sizeof(buf), &h,
					    PROTO_OP_UPDATE, &q), RS_E_INVAL);
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
static void put_le(size_t off, uint32_t v, int width)
{
	for (int i = 0; i < width; i++)
		buf[off + i] = (uint8_t)(v >> (8 * i));
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
	{ "get_req", 5, 1, PROTO_OP_COUNT, RS_E_PROTO, "unknown opcode 13" },
	{ "get_req", 6, 1, 0x4, RS_E_PROTO, "unknown header flags 0x4" },
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
	{ "update_req_lr", 36, 4, 6, RS_E_PROTO, "flags: unknown bits 0x4" },
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
	{ "create_req", 32 + 7, 1, 1, RS_E_PROTO, "spec reserved" },
	{ "create_req", 32 + 16, 4, 0x80, RS_E_INVAL, "optimizer.flags" },
	/* lists: n beyond total; n 5 of total 9 from 2: only 4 present */
	{ "dir_reply", 32 + 16, 4, 4, RS_E_PROTO, "exceed total 3" },
	{ "stats_reply", 32 + 8, 4, 5, RS_E_PROTO,
	  "truncated at stat.table_id" },
	/* CKPT: phase, flags, freeze timeout, names only with DUMP */
	{ "ckpt_freeze_req", 32, 4, 9, RS_E_PROTO, "phase: unknown value 9" },
	{ "ckpt_freeze_req", 36, 4, 2, RS_E_PROTO, "flags: unknown bits 0x2" },
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
		cmocka_unit_test(dir_pagination),
		cmocka_unit_test(stats_pagination),
		cmocka_unit_test(keyed_requests),
		cmocka_unit_test(keyed_replies),
		cmocka_unit_test(error_replies),
		cmocka_unit_test(wire_layout),
		cmocka_unit_test(split_helper),
		cmocka_unit_test(encoders_respect_cap),
		cmocka_unit_test(decode_checks),
		cmocka_unit_test(names_limits_dtypes),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
