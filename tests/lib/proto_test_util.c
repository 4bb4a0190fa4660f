/*
 * proto_test_util.c - the bodies of the helpers declared in
 * proto_test_util.h, which says what they are for.
 */
#include "proto_test_util.h"

struct proto_hdr hdr_of(uint64_t req_id, int traced)
{
	return (struct proto_hdr){
		.req_id = req_id,
		.trace_id = traced ? 0x1122334455667788ull : 0,
		.flags = traced ? PROTO_F_TRACE : 0,
	};
}

struct proto_table_spec sample_spec(const char *name, uint32_t kind)
{
	struct proto_table_spec s;

	memset(&s, 0, sizeof(s));
	snprintf(s.name, sizeof(s.name), "%s", name);
	s.dim = 16;
	s.dtype = PROTO_DTYPE_FP32;
	s.capacity = 1000000;
	optim_params_default(&s.optim, kind);
	s.optim.weight_decay = 0.25f;
	init_params_default(&s.init, INIT_NORMAL);
	s.init.std = 0.02f;
	s.init.seed = 0xdeadbeefcafef00dull;
	return s;
}

struct proto_table_info sample_info(const char *name, uint32_t id)
{
	struct proto_table_info t;

	memset(&t, 0, sizeof(t));
	t.id = id;
	t.generation = 1000 + id;
	t.spec = sample_spec(name, id % OPTIM_KIND_COUNT);
	t.index = (struct proto_index_geom){
		.addr = 0x7f0000000000ull + id * 0x100000ull,
		.bytes = 128 + 1024 * 128,
		.rkey = 0x1234 + id,
		.layout = 1,
		.nbuckets = 1024,
		.bucket_bytes = 128,
		.buckets_off = 128,
		.slots = 8,
		.seed1 = 0x0123456789abcdefull,
		.seed2 = 0xfedcba9876543210ull,
	};
	t.rows = (struct proto_rows_region){
		.addr = 0x7e0000000000ull,
		.bytes = 1000000ull * 80,
		.rkey = 0x5678,
		.layout = 1,
		.row_bytes = 80,
	};
	return t;
}

static void corpus_add(struct corpus *c, const char *name, int len)
{
	if (len <= 0) {
		fprintf(stderr, "corpus %s: %d %s\n", name, len,
			rs_errormsg());
		abort();
	}
	c->len[c->n] = (size_t)len;
	c->name[c->n] = name;
	c->n++;
}

void corpus_build(struct corpus *c)
{
	static const uint64_t keys[7] = { 0, 1, 42, UINT64_MAX, 7, 7,
					  0x8000000000000000ull };
	static const float rows[7 * 4] = { 1, -2, 3.5f, -0.0f, 5, 6, 7, 8,
					   9, 10, 11, 12 };
	static const uint16_t halves[7 * 3] = { 0x3c00, 0xbc00, 0x7bff, 1, 2,
						3 };
	static const int32_t st[7] = { 0, RS_E_NOTFOUND, 0, RS_E_FULL, 1,
				       -12, 0 };
	struct proto_hello_req hq = { .recv_bytes = 1 << 20 };
	struct proto_hello_reply hr = { .node_id = 77, .dir_generation = 9 };
	struct proto_table_spec spec = sample_spec("ads.user_id", OPTIM_ADAM);
	struct proto_table_info tabs[3] = { sample_info("t0", 0),
					    sample_info("t-1", 1),
					    sample_info("T_2.x", 2) };
	struct proto_stat stats[4] = {
		{ PROTO_NO_TABLE, "uptime_s", 12345 },
		{ 0, "gets", 1ull << 40 },
		{ 1, "rows", 0 },
		{ 2, "updates.coalesced", UINT64_MAX },
	};
	struct proto_list_req lr = { .start = 0 };
	struct proto_keys_req kq;
	struct proto_keys_reply kr;
	struct proto_hdr h;
	uint32_t w;

	c->n = 0;
	snprintf(hq.name, sizeof(hq.name), "trainer-3");
	proto_limits_default(&hr.limits);
	snprintf(hr.name, sizeof(hr.name), "mem0");
	h = hdr_of(1, 0);
#define SLOT c->msg[c->n], SEED_CAP
	corpus_add(c, "hello_req", proto_enc_hello_req(SLOT, &h, &hq));
	hq.name[0] = '\0';
	corpus_add(c, "hello_req_anon", proto_enc_hello_req(SLOT, &h, &hq));
	corpus_add(c, "hello_reply", proto_enc_hello_reply(SLOT, &h, &hr));
	h = hdr_of(2, 1);
	corpus_add(c, "create_req",
		   proto_enc_table_create_req(SLOT, &h, &spec));
	corpus_add(c, "create_reply",
		   proto_enc_table_create_reply(SLOT, &h, &tabs[1]));
	corpus_add(c, "drop_req", proto_enc_table_drop_req(SLOT, &h, "t0"));
	h.flags |= PROTO_F_EPOCH;
	h.epoch = 7;
	corpus_add(c, "create_req_epoch",
		   proto_enc_table_create_req(SLOT, &h, &spec));
	corpus_add(c, "drop_req_epoch",
		   proto_enc_table_drop_req(SLOT, &h, "t0"));
	h.flags &= (uint16_t)~PROTO_F_EPOCH;
	h.epoch = 0;
	corpus_add(c, "drop_reply", proto_enc_table_drop_reply(SLOT, &h));
	{
		struct proto_table_grow gq = { .capacity = 4096 };

		snprintf(gq.name, sizeof(gq.name), "t0");
		corpus_add(c, "grow_req",
			   proto_enc_table_grow_req(SLOT, &h, &gq));
		gq.capacity = 0;
		corpus_add(c, "grow_req_double",
			   proto_enc_table_grow_req(SLOT, &h, &gq));
	}
	corpus_add(c, "grow_reply",
		   proto_enc_table_grow_reply(SLOT, &h, &tabs[1]));
	corpus_add(c, "dir_req",
		   proto_enc_list_req(SLOT, &h, PROTO_OP_TABLE_DIR, &lr));
	corpus_add(c, "dir_reply",
		   proto_enc_table_dir_reply(SLOT, &h, 5, 3, 0, tabs, 3, &w));
	corpus_add(c, "dir_reply_empty",
		   proto_enc_table_dir_reply(SLOT, &h, 5, 0, 0, tabs, 0, &w));
	lr.start = 2;
	corpus_add(c, "stats_req",
		   proto_enc_list_req(SLOT, &h, PROTO_OP_STATS, &lr));
	corpus_add(c, "stats_reply",
		   proto_enc_stats_reply(SLOT, &h, 9, 2, stats, 4, &w));

	h = hdr_of(3, 0);
	kq = (struct proto_keys_req){ .table_id = 4, .table_gen = 1004,
				      .n = 7, .keys = keys };
	corpus_add(c, "get_req",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_GET, &kq));
	corpus_add(c, "delete_req",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_DELETE, &kq));
	kq.n = 0;
	corpus_add(c, "get_or_init_req_empty",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_GET_OR_INIT, &kq));
	kq = (struct proto_keys_req){ .table_id = 1, .n = 7, .dim = 4,
				      .dtype = PROTO_DTYPE_FP32, .keys = keys,
				      .rows = rows };
	corpus_add(c, "put_req",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_PUT, &kq));
	kq = (struct proto_keys_req){ .table_id = 2, .flags = PROTO_KF_CREATE,
				      .n = 7, .dim = 3,
				      .dtype = PROTO_DTYPE_FP16, .keys = keys,
				      .rows = halves };
	corpus_add(c, "update_req_fp16",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_UPDATE, &kq));
	kq.dtype = PROTO_DTYPE_BF16, kq.flags = 0, kq.n = 2;
	corpus_add(c, "update_req_bf16",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_UPDATE, &kq));
	/* a per-request learning rate (a schedule's step) */
	kq = (struct proto_keys_req){ .table_id = 3, .flags = PROTO_KF_LR,
				      .lr = 0.25f, .n = 7, .dim = 4,
				      .dtype = PROTO_DTYPE_FP32, .keys = keys,
				      .rows = rows };
	corpus_add(c, "update_req_lr",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_UPDATE, &kq));

	h = hdr_of(4, 1);
	kr = (struct proto_keys_reply){ .n = 7, .dim = 4,
					.dtype = PROTO_DTYPE_FP32,
					.status = st, .rows = rows };
	corpus_add(c, "get_or_init_reply",
		   proto_enc_keys_reply(SLOT, &h, PROTO_OP_GET_OR_INIT, &kr));
	kr = (struct proto_keys_reply){ .n = 2, .dim = 3,
					.dtype = PROTO_DTYPE_BF16,
					.status = st, .rows = halves };
	corpus_add(c, "get_reply_bf16",
		   proto_enc_keys_reply(SLOT, &h, PROTO_OP_GET, &kr));
	kr = (struct proto_keys_reply){ .n = 7, .status = st };
	corpus_add(c, "update_reply",
		   proto_enc_keys_reply(SLOT, &h, PROTO_OP_UPDATE, &kr));
	{
		/* the rows an UPDATE with PROTO_KF_ROWS gets back */
		static uint8_t im[7 * PROTO_IMAGE_BYTES];

		for (unsigned i = 0; i < 7; i++) {
			im[i * PROTO_IMAGE_BYTES] = (uint8_t)(2 * i + 2);
			im[i * PROTO_IMAGE_BYTES + 8] = (uint8_t)(0x40 + i);
			im[i * PROTO_IMAGE_BYTES + 16] = (uint8_t)i;
		}
		kr = (struct proto_keys_reply){ .n = 7, .dim = 4,
						.dtype = PROTO_DTYPE_FP32,
						.status = st, .rows = rows,
						.images = im };
		corpus_add(c, "update_images_reply",
			   proto_enc_keys_reply(SLOT, &h, PROTO_OP_UPDATE,
						&kr));
		kr.images = NULL;
	}
	kr.n = 4;
	corpus_add(c, "delete_reply",
		   proto_enc_keys_reply(SLOT, &h, PROTO_OP_DELETE, &kr));
	kr.n = 3;
	corpus_add(c, "put_reply",
		   proto_enc_keys_reply(SLOT, &h, PROTO_OP_PUT, &kr));
	{
		struct proto_ckpt_req cq = { .phase = PROTO_CKPT_FREEZE,
					     .timeout_ms = 30000 };
		struct proto_ckpt_reply cr = { .rows = 1000, .deleted = 3,
					       .raw_bytes = 77777,
					       .bytes = 12345,
					       .xxh64 = 0x0123456789abcdefull,
					       .paused_us = 4242 };
		static const float lrows[7 * 9] = { 1, 2, 3, 0.5f, 0.25f };

		memset(cq.id, 0xa5, sizeof(cq.id));
		corpus_add(c, "ckpt_freeze_req",
			   proto_enc_ckpt_req(SLOT, &h, &cq));
		cq = (struct proto_ckpt_req){ .phase = PROTO_CKPT_DUMP,
					      .flags = PROTO_CKF_STATE,
					      .table_idx = 2, .part_idx = 1 };
		snprintf(cq.dir, sizeof(cq.dir), "ckpt-2026.12.03");
		snprintf(cq.table, sizeof(cq.table), "ads.user_id");
		snprintf(cq.file, sizeof(cq.file), "t2-n1.rsck");
		corpus_add(c, "ckpt_dump_req",
			   proto_enc_ckpt_req(SLOT, &h, &cq));
		/* an incremental part: the base's id follows the id */
		cq.flags = PROTO_CKF_STATE | PROTO_CKF_INCR;
		memset(cq.id, 0x5a, sizeof(cq.id));
		memset(cq.base, 0xc3, sizeof(cq.base));
		corpus_add(c, "ckpt_incr_req",
			   proto_enc_ckpt_req(SLOT, &h, &cq));
		cq = (struct proto_ckpt_req){ .phase = PROTO_CKPT_THAW };
		corpus_add(c, "ckpt_thaw_req",
			   proto_enc_ckpt_req(SLOT, &h, &cq));
		corpus_add(c, "ckpt_reply",
			   proto_enc_ckpt_reply(SLOT, &h, &cr));
		/* LOAD: dim 4 weights + Adagrad's 4 state floats + 1 */
		kq = (struct proto_keys_req){ .table_id = 1, .n = 7, .dim = 9,
					      .dtype = PROTO_DTYPE_FP32,
					      .keys = keys, .rows = lrows };
		corpus_add(c, "load_req",
			   proto_enc_keys_req(SLOT, &h, PROTO_OP_LOAD, &kq));
		kr = (struct proto_keys_reply){ .n = 7, .status = st };
		corpus_add(c, "load_reply",
			   proto_enc_keys_reply(SLOT, &h, PROTO_OP_LOAD,
						&kr));
	}
	/* keyed requests with the configuration epoch */
	h = hdr_of(5, 0);
	kq = (struct proto_keys_req){ .table_id = 4, .table_gen = 1004,
				      .flags = PROTO_KF_EPOCH, .epoch = 7,
				      .n = 7, .keys = keys };
	corpus_add(c, "get_req_epoch",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_GET, &kq));
	kq.n = 0;
	kq.epoch = UINT64_MAX;
	corpus_add(c, "delete_req_epoch_empty",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_DELETE, &kq));
	kq = (struct proto_keys_req){ .table_id = 3,
				      .flags = PROTO_KF_CREATE | PROTO_KF_LR |
					       PROTO_KF_EPOCH,
				      .lr = 0.5f, .epoch = 1, .n = 7, .dim = 4,
				      .dtype = PROTO_DTYPE_FP32, .keys = keys,
				      .rows = rows };
	corpus_add(c, "update_req_epoch",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_UPDATE, &kq));
	/* exactly once: client, seq and done_below after the fixed part
	 * (after the epoch with both flags) */
	kq = (struct proto_keys_req){ .table_id = 4, .flags = PROTO_KF_ONCE,
				      .client = 0x0123456789abcdefull,
				      .seq = 5, .done_below = 5, .n = 7,
				      .keys = keys };
	corpus_add(c, "get_or_init_req_once",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_GET_OR_INIT, &kq));
	kq = (struct proto_keys_req){ .table_id = 1, .flags = PROTO_KF_ONCE,
				      .client = 1, .seq = UINT64_MAX,
				      .done_below = 1, .n = 7, .dim = 4,
				      .dtype = PROTO_DTYPE_FP32, .keys = keys,
				      .rows = rows };
	corpus_add(c, "put_req_once",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_PUT, &kq));
	kq = (struct proto_keys_req){ .table_id = 4,
				      .flags = PROTO_KF_EPOCH | PROTO_KF_ONCE,
				      .epoch = 3, .client = UINT64_MAX,
				      .seq = 1, .n = 0, .keys = keys };
	corpus_add(c, "delete_req_epoch_once",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_DELETE, &kq));
	kq = (struct proto_keys_req){ .table_id = 3,
				      .flags = PROTO_KF_CREATE | PROTO_KF_LR |
					       PROTO_KF_EPOCH | PROTO_KF_ONCE,
				      .lr = 0.5f, .epoch = 2, .client = 77,
				      .seq = 1000, .done_below = 998, .n = 2,
				      .dim = 3, .dtype = PROTO_DTYPE_BF16,
				      .keys = keys, .rows = halves };
	corpus_add(c, "update_req_epoch_once",
		   proto_enc_keys_req(SLOT, &h, PROTO_OP_UPDATE, &kq));
	/* CONFIG: not in a cluster, and three members */
	{
		static const struct proto_member mem[3] = {
			{ PROTO_MEMBER_ACTIVE, "mem-0", "10.0.0.5:7471" },
			{ PROTO_MEMBER_DOWN, "mem-1", "[fe80::1]:7471" },
			{ PROTO_MEMBER_JOINING, "mem.2_x", "h:1" },
		};
		struct proto_config cf = { .self = PROTO_CONFIG_NO_SELF };

		corpus_add(c, "config_req", proto_enc_config_req(SLOT, &h));
		corpus_add(c, "config_reply_none",
			   proto_enc_config_reply(SLOT, &h, &cf, NULL));
		cf = (struct proto_config){ .epoch = 9, .r = 3, .vnodes = 160,
					    .n = 3, .self = 1 };
		corpus_add(c, "config_reply",
			   proto_enc_config_reply(SLOT, &h, &cf, mem));
	}
	/* REPL: rows and a deletion (its row is not read: zeros on the
	 * wire); the name's 13 string bytes take 3 bytes of padding, the 7
	 * statuses 4, the 7 kinds 1. Some records carry the exactly-once
	 * call that wrote them, the others none (client 0). */
	{
		static const uint8_t kinds[7] = { 0, 1, 0, 0, 1, 1, 0 };
		static const float rrows[7 * 5] = { 1, 2, 3, 4, 5, 9, 9, 9, 9,
						    9, -1, 0.5f, 0, 0, 1e30f };
		static const uint64_t cl[7] = { 0, 77, 0, UINT64_MAX, 5, 0,
						1 };
		static const uint64_t sq[7] = { 0, 3, 0, 1, UINT64_MAX, 0,
						9 };
		static const uint64_t db[7] = { 0, 3, 0, 0, 7, 0, 1 };
		static const int32_t rst[7] = { 0, 0, 0, PROTO_ST_CREATED, 0,
						0, PROTO_ST_CREATED };
		static const uint32_t rcr[7] = { 0, 2, 0, 0, UINT32_MAX, 0,
						 1 };
		struct proto_repl_req rq = { .epoch = 9, .n = 7, .width = 5,
					     .keys = keys, .clients = cl,
					     .seqs = sq, .done_below = db,
					     .statuses = rst, .creds = rcr,
					     .kinds = kinds, .rows = rrows };

		snprintf(rq.table, sizeof(rq.table), "ads.user_id");
		corpus_add(c, "repl_req", proto_enc_repl_req(SLOT, &h, &rq));
		/* no exactly-once records: NULL arrays, zeros on the wire */
		rq.clients = rq.seqs = rq.done_below = rq.statuses = NULL;
		rq.creds = NULL;
		rq.n = 3;
		corpus_add(c, "repl_req_plain",
			   proto_enc_repl_req(SLOT, &h, &rq));
		rq.n = 0;
		rq.width = 1;
		snprintf(rq.table, sizeof(rq.table), "t");
		corpus_add(c, "repl_req_empty",
			   proto_enc_repl_req(SLOT, &h, &rq));
		kr = (struct proto_keys_reply){ .n = 7, .status = st };
		corpus_add(c, "repl_reply",
			   proto_enc_keys_reply(SLOT, &h, PROTO_OP_REPL,
						&kr));
	}
	/* COPY: two ranges, one of them wrapping past 2^64 - 1 */
	{
		static const uint64_t rg[4] = { 100, 5000, UINT64_MAX - 9, 7 };
		struct proto_copy_req cq = { .epoch = 4, .inc = 0xfeedu,
					     .cursor = 12, .max = 2048,
					     .nranges = 2, .ranges = rg };
		struct proto_copy_reply cr = { .cursor = 4096, .copied = 33,
					       .done = 1 };

		snprintf(cq.id, sizeof(cq.id), "mem-2");
		snprintf(cq.table, sizeof(cq.table), "ads.user_id");
		corpus_add(c, "copy_req", proto_enc_copy_req(SLOT, &h, &cq));
		corpus_add(c, "copy_reply",
			   proto_enc_copy_reply(SLOT, &h, &cr));
	}
	corpus_add(c, "error_reply",
		   proto_enc_error(SLOT, &h, PROTO_OP_UPDATE, RS_E_NOTFOUND,
				   "table 7 not found"));
	corpus_add(c, "error_reply_empty",
		   proto_enc_error(SLOT, &h, PROTO_OP_HELLO, -EPROTO, ""));
#undef SLOT
}

int reencode(const struct proto_msg *m, uint8_t *buf, size_t cap)
{
	static uint64_t keys[PROTO_MAX_BATCH_KEYS / 64];
	static uint64_t clients[PROTO_MAX_BATCH_KEYS / 64];
	static uint64_t seqs[PROTO_MAX_BATCH_KEYS / 64];
	static uint64_t done[PROTO_MAX_BATCH_KEYS / 64];
	static int32_t st[PROTO_MAX_BATCH_KEYS / 64];
	static uint32_t creds[PROTO_MAX_BATCH_KEYS / 64];
	static uint8_t rows[4 << 20];
	static struct proto_table_info tabs[256];
	static struct proto_stat stats[4096];
	static struct proto_member members[PROTO_CONFIG_MAX_MEMBERS];
	static uint8_t kinds[PROTO_MAX_BATCH_KEYS / 64];
	const struct proto_hdr *h = &m->hdr;
	const uint32_t op = h->opcode;
	struct proto_table_dir d;
	struct proto_stats s;
	struct proto_config cf;
	uint32_t w, n = 0;
	size_t nel;
	int rc;

	if (h->flags & PROTO_F_REPLY && h->status < 0)
		return proto_enc_error(buf, cap, h, op, h->status,
				       m->u.error.msg);
	if (!(h->flags & PROTO_F_REPLY)) {
		switch (op) {
		case PROTO_OP_HELLO:
			return proto_enc_hello_req(buf, cap, h,
						   &m->u.hello_req);
		case PROTO_OP_TABLE_CREATE:
			return proto_enc_table_create_req(buf, cap, h,
							  &m->u.table_create);
		case PROTO_OP_TABLE_DROP:
			return proto_enc_table_drop_req(buf, cap, h,
							m->u.table_drop);
		case PROTO_OP_TABLE_GROW:
			return proto_enc_table_grow_req(buf, cap, h,
							&m->u.table_grow);
		case PROTO_OP_TABLE_DIR:
		case PROTO_OP_STATS:
			return proto_enc_list_req(buf, cap, h, op,
						  &m->u.list_req);
		case PROTO_OP_CKPT:
			return proto_enc_ckpt_req(buf, cap, h,
						  &m->u.ckpt_req);
		case PROTO_OP_CONFIG:
			return proto_enc_config_req(buf, cap, h);
		case PROTO_OP_REPL: {
			struct proto_repl_req q = m->u.repl_req;

			if (q.n > RS_ARRAY_SIZE(keys))
				return -1;
			nel = (size_t)q.n * q.width;
			if (nel * 4 > sizeof(rows))
				return -1;
			proto_load_u64(keys, q.keys, q.n);
			proto_load_u64(clients, q.clients, q.n);
			proto_load_u64(seqs, q.seqs, q.n);
			proto_load_u64(done, q.done_below, q.n);
			proto_load_i32(st, q.statuses, q.n);
			for (uint32_t i = 0; i < q.n; i++)
				creds[i] = proto_u32_at(q.creds, i);
			if (q.n)
				memcpy(kinds, q.kinds, q.n);
			proto_load_f32((float *)rows, q.rows, nel);
			q.keys = keys;
			q.clients = clients;
			q.seqs = seqs;
			q.done_below = done;
			q.statuses = st;
			q.creds = creds;
			q.kinds = kinds;
			q.rows = rows;
			return proto_enc_repl_req(buf, cap, h, &q);
		}
		case PROTO_OP_COPY: {
			struct proto_copy_req q = m->u.copy_req;

			proto_load_u64(keys, q.ranges, 2 * q.nranges);
			q.ranges = keys;
			return proto_enc_copy_req(buf, cap, h, &q);
		}
		default: {
			struct proto_keys_req q = m->u.keys_req;

			if (q.n > RS_ARRAY_SIZE(keys))
				return -1;
			proto_load_u64(keys, q.keys, q.n);
			nel = (size_t)q.n * q.dim;
			if (nel * 4 > sizeof(rows))
				return -1;
			if (q.dtype == PROTO_DTYPE_FP32)
				proto_load_f32((float *)rows, q.rows, nel);
			else
				proto_load_u16((uint16_t *)rows, q.rows, nel);
			q.keys = keys;
			q.rows = rows;
			return proto_enc_keys_req(buf, cap, h, op, &q);
		}
		}
	}
	switch (op) {
	case PROTO_OP_HELLO:
		return proto_enc_hello_reply(buf, cap, h, &m->u.hello_reply);
	case PROTO_OP_TABLE_CREATE:
		return proto_enc_table_create_reply(buf, cap, h,
						    &m->u.table_info);
	case PROTO_OP_TABLE_GROW:
		return proto_enc_table_grow_reply(buf, cap, h,
						  &m->u.table_info);
	case PROTO_OP_TABLE_DROP:
		return proto_enc_table_drop_reply(buf, cap, h);
	case PROTO_OP_TABLE_DIR:
		d = m->u.table_dir;
		while (n < RS_ARRAY_SIZE(tabs) &&
		       proto_table_dir_next(&d, &tabs[n]))
			n++;
		if (n != d.n)
			return -1;
		rc = proto_enc_table_dir_reply(buf, cap, h, d.generation,
					       d.total, d.start, tabs, n, &w);
		return rc < 0 || w == n ? rc : RS_E_TOOBIG; /* partial */
	case PROTO_OP_STATS:
		s = m->u.stats;
		while (n < RS_ARRAY_SIZE(stats) &&
		       proto_stats_next(&s, &stats[n]))
			n++;
		if (n != s.n)
			return -1;
		rc = proto_enc_stats_reply(buf, cap, h, s.total, s.start,
					   stats, n, &w);
		return rc < 0 || w == n ? rc : RS_E_TOOBIG; /* partial */
	case PROTO_OP_CKPT:
		return proto_enc_ckpt_reply(buf, cap, h, &m->u.ckpt_reply);
	case PROTO_OP_CONFIG:
		cf = m->u.config;
		while (n < RS_ARRAY_SIZE(members) &&
		       proto_config_next(&cf, &members[n]))
			n++;
		if (n != cf.n)
			return -1;
		return proto_enc_config_reply(buf, cap, h, &cf, members);
	case PROTO_OP_COPY:
		return proto_enc_copy_reply(buf, cap, h, &m->u.copy_reply);
	default: {
		struct proto_keys_reply r = m->u.keys_reply;

		if (r.n > RS_ARRAY_SIZE(st))
			return -1;
		proto_load_i32(st, r.status, r.n);
		nel = (size_t)r.n * r.dim;
		if (nel * 4 > sizeof(rows))
			return -1;
		if (r.dtype == PROTO_DTYPE_FP32)
			proto_load_f32((float *)rows, r.rows, nel);
		else
			proto_load_u16((uint16_t *)rows, r.rows, nel);
		r.status = st;
		r.rows = rows;
		/* r.images: the decoded wire images, re-encoded as they are */
		return proto_enc_keys_reply(buf, cap, h, op, &r);
	}
	}
}
