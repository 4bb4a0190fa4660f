/*
 * test_verbs_logic.c - the pure decisions of src/verbs (rv_logic.h), with no
 * device: READ chain sizing, selective signaling, the credit protocol (a
 * randomized two-endpoint simulation checking that a receiver is never
 * overrun, that traffic never deadlocks and that credit-only messages die
 * out), and the handshake header codec.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "verbs/rv_logic.h"

static void chain_len_respects_bounds(void **state)
{
	for (uint32_t depth = 1; depth <= 24; depth++)
	for (uint32_t inflight = 0; inflight <= depth; inflight++)
	for (uint32_t sq = 0; sq <= 26; sq++)
	for (uint32_t cm = 1; cm <= 10; cm++)
	for (uint32_t rem = 0; rem <= 12; rem++) {
		uint32_t k = rv_chain_len(inflight, depth, sq, cm, rem);

		assert_true(inflight + k <= depth);
		assert_true(k <= sq);
		assert_true(k <= cm);
		assert_true(k <= rem);
		/* nothing in flight: always make progress if possible */
		if (inflight == 0 && rem && sq)
			assert_true(k > 0);
		/* a full chain is never held back */
		if (depth - inflight >= cm && sq >= cm && rem >= cm)
			assert_int_equal(k, cm);
	}
}

static void chain_len_typical(void **state)
{
	/* depth 128, chains of 32: four chains fill the window */
	assert_int_equal(rv_chain_len(0, 128, 1000, 32, 4096), 32);
	assert_int_equal(rv_chain_len(96, 128, 1000, 32, 4096), 32);
	assert_int_equal(rv_chain_len(128, 128, 1000, 32, 4096), 0);
	/* a tail shorter than a chain goes out at once */
	assert_int_equal(rv_chain_len(64, 128, 1000, 32, 5), 5);
	/* 10 free of a 32 chain: wait for more room */
	assert_int_equal(rv_chain_len(118, 128, 1000, 32, 4096), 0);
	/* half a chain free: post it */
	assert_int_equal(rv_chain_len(112, 128, 1000, 32, 4096), 16);
}

/* Any `every` consecutive ops contain a signaled one, so a full ring of
 * at least `every` unretired ops always holds one that will complete. */
static void signaling_never_starves(void **state)
{
	for (uint32_t every = 1; every <= 9; every++) {
		uint64_t last = 0, gap = 0;

		for (uint64_t seq = 1; seq < 1000; seq++) {
			if (rv_signal_due(seq, last, every)) {
				last = seq;
				gap = 0;
			} else {
				gap++;
			}
			assert_true(gap < every);
		}
	}
}

static void imm_roundtrip(void **state)
{
	uint32_t imm = rv_imm_pack(RV_IMM_CREDIT, 12345, false);

	assert_int_equal(rv_imm_type(imm), RV_IMM_CREDIT);
	assert_int_equal(rv_imm_credits(imm), 12345);
	assert_false(rv_imm_ack(imm));
	imm = rv_imm_pack(RV_IMM_DATA, 0, true);
	assert_int_equal(rv_imm_type(imm), RV_IMM_DATA);
	assert_int_equal(rv_imm_credits(imm), 0);
	assert_true(rv_imm_ack(imm));
	imm = rv_imm_pack(RV_IMM_DATA, RV_IMM_CREDIT_MAX, false);
	assert_int_equal(rv_imm_credits(imm), RV_IMM_CREDIT_MAX);
	assert_false(rv_imm_ack(imm));
}

/* ---- credit protocol simulation ----
 *
 * Two endpoints exchange data messages through FIFO "wires". Each app has
 * messages to send, receives into a limited number of posted buffers
 * (asserting that an arrival always finds one: no overrun) and releases
 * them either freely or, in "echo" mode, only after it managed to send a
 * reply for each - the decode-in-place-then-reply pattern that holds
 * buffers while waiting for credits. The run must end with everything
 * sent and received (no deadlock) and with conserved credits.
 */

struct smsg {
	int type;
	int32_t credits;
	bool ack;
};

struct ep {
	int32_t credits, owed, thresh, token;
	bool ack_pending;
	int32_t posted;		/* data buffers posted for the peer */
	int32_t ctrl_posted;	/* the control buffer */
	int32_t held;		/* data messages the app holds */
	int32_t to_send;	/* data messages the app still wants to send */
	bool echo;		/* release only after replying */
	int32_t replies;	/* echo: replies owed for held messages */
	long ctrl_sent, data_sent, data_got;
	struct smsg q[512];	/* in flight toward this endpoint */
	int qh, qn;
};

static void push(struct ep *to, struct smsg m)
{
	assert_true(to->qn < 512);
	to->q[(to->qh + to->qn++) % 512] = m;
}

static void maybe_ctrl(struct ep *me, struct ep *peer)
{
	if (!rv_credit_ctrl_due(me->owed, me->token, me->thresh))
		return;
	me->token = 0;
	push(peer, (struct smsg){ RV_IMM_CREDIT, me->owed, me->ack_pending });
	me->owed = 0;
	me->ack_pending = false;
	me->ctrl_sent++;
}

static bool send_data(struct ep *me, struct ep *peer)
{
	bool reply = me->echo && me->replies > 0;

	if ((!me->to_send && !reply) || !rv_credit_data_ok(me->credits))
		return false;
	me->credits--;
	push(peer, (struct smsg){ RV_IMM_DATA, me->owed, me->ack_pending });
	me->owed = 0;
	me->ack_pending = false;
	if (reply)
		me->replies--;
	else
		me->to_send--;
	me->data_sent++;
	return true;
}

static bool deliver(struct ep *me, struct ep *peer)
{
	struct smsg m;

	if (!me->qn)
		return false;
	m = me->q[me->qh];
	me->qh = (me->qh + 1) % 512;
	me->qn--;
	me->credits += m.credits;
	if (m.ack)
		me->token = 1;
	if (m.type == RV_IMM_CREDIT) {
		assert_int_equal(me->ctrl_posted, 1);	/* never overrun */
		me->ack_pending = true;			/* re-posted at once */
	} else {
		assert_true(me->posted > 0);		/* never overrun */
		me->posted--;
		me->held++;
		me->data_got++;
		if (me->echo)
			me->replies++;
	}
	maybe_ctrl(me, peer);
	return true;
}

static bool release(struct ep *me, struct ep *peer)
{
	/* echo: a held message goes only once its reply went out */
	if (!me->held || (me->echo && me->held <= me->replies))
		return false;
	me->held--;
	me->posted++;
	me->owed++;
	maybe_ctrl(me, peer);
	return true;
}

static void sim_init(struct ep *e, int32_t slots, int32_t to_send, bool echo)
{
	memset(e, 0, sizeof(*e));
	e->credits = slots - 1;	/* the peer keeps slots - 1 data buffers */
	e->posted = slots - 1;
	e->ctrl_posted = 1;
	e->token = 1;
	e->thresh = rv_credit_thresh((uint32_t)slots);
	e->to_send = to_send;
	e->echo = echo;
}

static void credit_sim_run(uint32_t seed, int32_t slots, int32_t na,
			   int32_t nb, bool b_echoes)
{
	struct ep a, b;
	struct ep *e[2] = { &a, &b };
	long steps = 0;

	srand(seed);
	sim_init(&a, slots, na, false);
	sim_init(&b, slots, nb, b_echoes);
	for (;;) {
		bool any = false;

		for (int t = 0; t < 8; t++) {
			int who = rand() & 1;
			struct ep *me = e[who], *peer = e[!who];

			switch (rand() % 3) {
			case 0:
				any |= send_data(me, peer);
				break;
			case 1:
				any |= deliver(me, peer);
				break;
			default:
				if (rand() % 3 == 0)
					any |= release(me, peer);
				break;
			}
		}
		if (!any) {
			/* no random action fired: try every possible one */
			for (int w = 0; w < 2; w++) {
				any |= deliver(e[w], e[!w]);
				any |= release(e[w], e[!w]);
				any |= send_data(e[w], e[!w]);
			}
		}
		if (!any)
			break;
		assert_true(++steps < 10000000);
	}
	/* everything wanted was sent and received: no deadlock */
	assert_int_equal(a.to_send, 0);
	assert_int_equal(b.to_send, 0);
	assert_int_equal(b.replies, 0);
	assert_int_equal(b.data_got, na);
	assert_int_equal(a.data_got, nb + (b_echoes ? na : 0));
	assert_int_equal(a.qn + b.qn, 0);
	assert_int_equal(a.held + b.held, 0);
	/* at most one credit message per data message received */
	assert_true(a.ctrl_sent <= b.data_sent + 1);
	assert_true(b.ctrl_sent <= a.data_sent + 1);
	/* conservation of data credits in each direction */
	assert_int_equal(a.credits + b.owed, slots - 1);
	assert_int_equal(b.credits + a.owed, slots - 1);
}

static void credits_safe_and_live(void **state)
{
	for (uint32_t seed = 1; seed <= 300; seed++) {
		int32_t slots = 4 + (int32_t)(seed % 13);

		credit_sim_run(seed, slots, 500, 0, false);	/* one way */
		credit_sim_run(seed, slots, 0, 300, false);	/* the other */
		credit_sim_run(seed, slots, 400, 400, false);	/* both */
		credit_sim_run(seed, slots, 7, 3, false);
		credit_sim_run(seed, slots, 500, 0, true);	/* echo */
		credit_sim_run(seed, slots, 300, 200, true);
	}
}

/* ---- handshake header ---- */

static void hello_roundtrip(void **state)
{
	uint8_t buf[64], user[44];
	struct rv_hello h = { .slots = 17, .rd_depth = 128,
			      .msg_max = 65536 }, g;
	int n;

	for (size_t i = 0; i < sizeof(user); i++)
		user[i] = (uint8_t)(i * 7);
	n = rv_hello_pack(buf, sizeof(buf), &h, user, sizeof(user));
	assert_int_equal(n, RV_HELLO_LEN + 44);
	assert_int_equal(rv_hello_unpack(buf, (size_t)n, &g), 0);
	assert_int_equal(g.slots, 17);
	assert_int_equal(g.rd_depth, 128);
	assert_int_equal(g.msg_max, 65536);
	assert_int_equal(g.user_len, 44);
	assert_memory_equal(g.user, user, 44);
	/* transports pad private data: trailing zeros are fine */
	memset(buf + n, 0, sizeof(buf) - (size_t)n);
	assert_int_equal(rv_hello_unpack(buf, sizeof(buf), &g), 0);
	assert_int_equal(g.user_len, 44);
	/* no room */
	assert_int_equal(rv_hello_pack(buf, 20, &h, user, 44), -1);
}

static void hello_rejects_garbage(void **state)
{
	uint8_t buf[64];
	struct rv_hello h = { .slots = 5, .rd_depth = 1, .msg_max = 1 }, g;
	int n = rv_hello_pack(buf, sizeof(buf), &h, "ab", 2);

	assert_int_equal(rv_hello_unpack(NULL, 0, &g), -1);
	assert_int_equal(rv_hello_unpack(buf, RV_HELLO_LEN - 1, &g), -1);
	assert_int_equal(rv_hello_unpack(buf, (size_t)n - 1, &g), -1);
	buf[0] ^= 1;
	assert_int_equal(rv_hello_unpack(buf, (size_t)n, &g), -1);
	buf[0] ^= 1;
	buf[2] = 9;
	assert_int_equal(rv_hello_unpack(buf, (size_t)n, &g), -1);
	h.slots = 3;	/* below the protocol minimum */
	n = rv_hello_pack(buf, sizeof(buf), &h, NULL, 0);
	assert_int_equal(rv_hello_unpack(buf, (size_t)n, &g), -1);
	h.slots = 4;
	h.rd_depth = 0;
	n = rv_hello_pack(buf, sizeof(buf), &h, NULL, 0);
	assert_int_equal(rv_hello_unpack(buf, (size_t)n, &g), -1);
	/* random bytes never crash and never claim more than given */
	srand(7);
	for (int i = 0; i < 100000; i++) {
		size_t len = (size_t)(rand() % 64);

		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rand();
		if (i & 1) {	/* often a valid prefix */
			buf[0] = 0x52;
			buf[1] = 0x56;
			buf[2] = 1;
		}
		if (rv_hello_unpack(buf, len, &g) == 0)
			assert_true(RV_HELLO_LEN + (size_t)g.user_len <= len);
	}
}

static void reject_roundtrip(void **state)
{
	uint8_t buf[148];	/* IB CM pads a REJ's private data */
	unsigned why;
	uint32_t lim;

	memset(buf, 0, sizeof(buf));
	assert_int_equal(rv_reject_pack(buf, RV_REJECT_LEN - 1,
					RV_REJ_PEER_LIMIT, 16), -1);
	assert_int_equal(rv_reject_pack(buf, sizeof(buf), RV_REJ_PEER_LIMIT,
					16), RV_REJECT_LEN);
	assert_int_equal(rv_reject_unpack(buf, sizeof(buf), &why, &lim), 0);
	assert_int_equal(why, RV_REJ_PEER_LIMIT);
	assert_int_equal(lim, 16);
	assert_string_equal(rv_reject_str(why),
			    "too many connections from this address");
	assert_int_equal(rv_reject_unpack(buf, RV_REJECT_LEN - 1, &why, &lim),
			 -1);
	assert_int_equal(rv_reject_unpack(NULL, 0, &why, &lim), -1);
	buf[3] = 0;		/* a hello, not a reject */
	assert_int_equal(rv_reject_unpack(buf, sizeof(buf), &why, &lim), -1);
	rv_reject_pack(buf, sizeof(buf), RV_REJ_MAX_, 0);
	assert_int_equal(rv_reject_unpack(buf, sizeof(buf), &why, &lim), -1);
	for (unsigned r = RV_REJ_MALFORMED; r < RV_REJ_MAX_; r++)
		assert_string_not_equal(rv_reject_str(r), "unknown reason");
}

/* Credits from the wire never take a sender above its grant, whatever the
 * peer claims (the 23-bit field would wrap a signed counter). */
static void credit_returns_bounded(void **state)
{
	assert_true(rv_credit_return_ok(0, 15, 15));
	assert_true(rv_credit_return_ok(10, 5, 15));
	assert_true(rv_credit_return_ok(15, 0, 15));
	assert_false(rv_credit_return_ok(10, 6, 15));
	assert_false(rv_credit_return_ok(0, RV_IMM_CREDIT_MAX, 15));
	assert_false(rv_credit_return_ok(INT32_MAX, RV_IMM_CREDIT_MAX,
					 RV_SLOTS_MAX));
	assert_false(rv_credit_return_ok(-1, 0, 15));
	/* a receiver sharing its buffers: held + owed within the grant */
	assert_true(rv_credit_rx_ok(15, 0, 15));
	assert_true(rv_credit_rx_ok(5, 10, 15));
	assert_false(rv_credit_rx_ok(16, 0, 15));
	assert_false(rv_credit_rx_ok(8, 8, 15));
	assert_false(rv_credit_rx_ok(-1, 0, 15));
	assert_false(rv_credit_rx_ok(1, INT32_MAX, 15));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chain_len_respects_bounds),
		cmocka_unit_test(chain_len_typical),
		cmocka_unit_test(signaling_never_starves),
		cmocka_unit_test(imm_roundtrip),
		cmocka_unit_test(credits_safe_and_live),
		cmocka_unit_test(hello_roundtrip),
		cmocka_unit_test(hello_rejects_garbage),
		cmocka_unit_test(reject_roundtrip),
		cmocka_unit_test(credit_returns_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
