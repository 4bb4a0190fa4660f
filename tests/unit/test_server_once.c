/*
 * test_server_once.c - the node's exactly-once completion records
 * (src/server/srv_once.c) without a device: a resent key gets its
 * recorded status, records are per (call, table, key), done_below
 * forgets calls, a replica skips records of calls already declared done,
 * every bound refuses before anything is recorded, and a client evicted
 * while idle cannot have a call applied twice (its resend is refused) nor
 * grow the node's memory with fresh ids.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/srv_internal.h"

static const uint64_t keys[4] = { 11, 12, 13, 11 };

static void lookup(struct srv_once *o, const struct srv_once_tag *t,
		   uint32_t tid, int32_t *st, bool *found)
{
	assert_int_equal(srv_once_lookup(o, t, tid, keys, 4, st, found), 0);
}

static void resend(void **state)
{
	struct srv_once o;
	struct srv_once_tag a = { .client = 7, .seq = 1, .done_below = 1 };
	struct srv_once_tag a2 = { .client = 7, .seq = 2, .done_below = 1 };
	struct srv_once_tag b = { .client = 8, .seq = 1, .done_below = 1 };
	int32_t st[4] = { 0, 1, RS_E_NOTFOUND, 0 };
	bool found[4];
	struct srv_once_counts n;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	lookup(&o, &a, 3, st, found);
	for (int i = 0; i < 4; i++)
		assert_false(found[i]);
	/* key 13 failed: not recorded; key 11 twice: once */
	assert_int_equal(srv_once_add(&o, &a, 3, keys, st, 4), 0);
	memset(st, 0x55, sizeof(st));
	lookup(&o, &a, 3, st, found);
	assert_true(found[0] && found[1] && !found[2] && found[3]);
	assert_int_equal(st[0], 0);
	assert_int_equal(st[1], 1);
	assert_int_equal(st[3], 0);
	/* another table, another call, another client: nothing */
	lookup(&o, &a, 4, st, found);
	assert_false(found[0] || found[1]);
	lookup(&o, &a2, 3, st, found);
	assert_false(found[0] || found[1]);
	lookup(&o, &b, 3, st, found);
	assert_false(found[0] || found[1]);
	srv_once_stats(&o, &n);
	assert_int_equal(n.clients, 1);	/* b recorded nothing: no entry */
	assert_int_equal(n.records, 2);
	assert_int_equal(n.deduplicated, 3);
	/* done_below 2 forgets call 1; a resend of it is refused */
	a2.done_below = 2;
	lookup(&o, &a2, 3, st, found);
	srv_once_stats(&o, &n);
	assert_int_equal(n.records, 0);
	assert_int_equal(srv_once_lookup(&o, &a, 3, keys, 4, st, found),
			 RS_E_INVAL);
	srv_once_fini(&o);
}

/* One call recorded in many pieces (tables interleaved, repeats within
 * and across pieces, keys in any order): every key answers the status
 * its first record gave it, no other key is found, and records count
 * each (table, key) once. A seeded model, as the merge of each piece
 * into the call's sorted entries is what it checks. */
#define PIECES 40
#define PIECE_MAX 700
static void many_pieces(void **state)
{
	static uint64_t pk[PIECE_MAX], probe[PIECE_MAX];
	static int32_t pst[PIECE_MAX], got[PIECE_MAX];
	static bool found[PIECE_MAX];
	/* model: status + 1 of (table t, key k), 0: none; keys < 4096 */
	static int32_t model[3][4096];
	struct srv_once o;
	struct srv_once_tag a = { .client = 9, .seq = 1, .done_below = 1 };
	struct srv_once_counts n;
	uint64_t x = 0x9e3779b97f4a7c15ull, records = 0;

	(void)state;
	memset(model, 0, sizeof(model));
	assert_int_equal(srv_once_init(&o), 0);
	for (int p = 0; p < PIECES; p++) {
		uint32_t tid = (uint32_t)(p % 3), m;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		m = 1 + (uint32_t)(x >> 33) % PIECE_MAX;
		for (uint32_t i = 0; i < m; i++) {
			x = x * 6364136223846793005ull +
			    1442695040888963407ull;
			/* a descending run now and then: sorted input too */
			pk[i] = p % 5 == 4 ? 4095 - i % 4096 : (x >> 20) % 4096;
			pst[i] = (x >> 8) % 7 == 0 ? RS_E_NOTFOUND
						   : (int32_t)((x >> 12) % 3);
		}
		assert_int_equal(srv_once_add(&o, &a, tid, pk, pst, m), 0);
		for (uint32_t i = 0; i < m; i++)
			if (pst[i] >= 0 && !model[tid][pk[i]]) {
				model[tid][pk[i]] = pst[i] + 1;
				records++;
			}
	}
	srv_once_stats(&o, &n);
	assert_int_equal(n.records, records);
	for (uint32_t tid = 0; tid < 4; tid++)
		for (uint64_t base = 0; base < 4096; base += PIECE_MAX) {
			uint32_t m = 4096 - base < PIECE_MAX ? 4096 - base
							     : PIECE_MAX;

			for (uint32_t i = 0; i < m; i++)
				probe[i] = base + i;
			assert_int_equal(srv_once_lookup(&o, &a, tid, probe, m,
							 got, found), 0);
			for (uint32_t i = 0; i < m; i++) {
				int32_t want = tid < 3 ? model[tid][base + i]
						       : 0;

				assert_int_equal(found[i], want != 0);
				if (want)
					assert_int_equal(got[i], want - 1);
			}
		}
	srv_once_fini(&o);
}

/* A node gaining ranges gets a forwarded write of call 5 (done_below 3)
 * before its copy source's record of call 2 of the same client: the
 * record is obsolete, skipped, and the copy goes on; a client's own
 * resend of call 2 is still refused. */
static void obsolete(void **state)
{
	struct srv_once o;
	struct srv_once_tag late = { .client = 7, .seq = 5, .done_below = 3 };
	struct srv_once_tag old = { .client = 7, .seq = 2, .done_below = 1 };
	int32_t st[4] = { 0, 0, 0, 0 };
	bool found[4];
	struct srv_once_counts n;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	assert_int_equal(srv_once_record(&o, &late, 3, keys, st, 2), 0);
	assert_int_equal(srv_once_record(&o, &old, 3, keys + 2, st, 1), 0);
	srv_once_stats(&o, &n);
	assert_int_equal(n.obsolete, 1);
	assert_int_equal(n.records, 2);	/* call 5's two keys only */
	/* a primary's own record and a client's lookup of call 2: refused */
	assert_int_equal(srv_once_add(&o, &old, 3, keys + 2, st, 1),
			 RS_E_INVAL);
	assert_int_equal(srv_once_lookup(&o, &old, 3, keys, 4, st, found),
			 RS_E_INVAL);
	/* a current record still lands, and a resend of it is answered */
	assert_int_equal(srv_once_record(&o, &late, 3, keys + 2, st, 1), 0);
	memset(found, 0, sizeof(found));
	assert_int_equal(srv_once_lookup(&o, &late, 3, keys, 4, st, found),
			 0);
	assert_true(found[0] && found[1] && found[2] && found[3]);
	srv_once_stats(&o, &n);
	assert_int_equal(n.obsolete, 1);
	srv_once_fini(&o);
}

/* Every bound refuses a client's request before anything is applied,
 * and only for what it would add; a peer's records past a bound are
 * dropped and counted, never refused. */
static void bounds(void **state)
{
	struct srv_once o;
	struct srv_once_tag t = { .client = 9, .done_below = 1 };
	struct srv_once_tag p = { .client = 10, .seq = 1, .done_below = 1 };
	int32_t st[4] = { 0 };
	bool found[4];
	struct srv_once_counts n;
	uint64_t fake;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	for (uint64_t s = 1; s <= SRV_ONCE_MAX_CALLS; s++) {
		t.seq = s;
		lookup(&o, &t, 1, st, found);
		assert_int_equal(srv_once_add(&o, &t, 1, keys, st, 4), 0);
	}
	t.seq = SRV_ONCE_MAX_CALLS + 1;
	assert_int_equal(srv_once_lookup(&o, &t, 1, keys, 4, st, found),
			 RS_E_BUSY);
	/* a resend of a call on record is still answered */
	t.seq = SRV_ONCE_MAX_CALLS;
	lookup(&o, &t, 1, st, found);
	assert_true(found[0] && found[1] && found[2] && found[3]);
	/* the client moves on: its old calls go, new ones fit */
	t.seq = SRV_ONCE_MAX_CALLS + 1;
	t.done_below = SRV_ONCE_MAX_CALLS;
	lookup(&o, &t, 1, st, found);
	/* a lookup that could take the node past three quarters of its
	 * records bound is refused */
	fake = o.max_entries - o.max_entries / 4 - 2 - o.entries;
	o.entries += fake;
	assert_int_equal(srv_once_lookup(&o, &t, 1, keys, 4, st, found),
			 RS_E_BUSY);
	/* a peer's records take the last quarter, then are dropped */
	assert_int_equal(srv_once_record(&o, &p, 1, keys, st, 3), 0);
	o.entries -= fake;
	fake = o.max_entries - 2 - o.entries;
	o.entries += fake;
	p.seq = 2;
	assert_int_equal(srv_once_record(&o, &p, 1, keys, st, 3), 1);
	o.entries -= fake;
	srv_once_stats(&o, &n);
	assert_int_equal(n.dropped, 3);
	assert_int_equal(n.records, 6);
	assert_int_equal(n.busy, 2);
	srv_once_fini(&o);
}

/* A client silent past SRV_ONCE_IDLE_MS is evicted, but it may still
 * resend (its timeout can be longer): a resend of a call the node had
 * records of must be refused, not applied a second time; a fresh call of
 * the same client is taken (issue 27, fault 8). */
static void resend_after_eviction(void **state)
{
	struct srv_once o;
	struct srv_once_tag t = { .client = 7, .seq = 5, .done_below = 4 };
	struct srv_once_tag fresh = { .client = 7, .seq = 6, .done_below = 5 };
	struct srv_once_tag other = { .seq = 1, .done_below = 1 };
	int32_t st[4] = { 0, 1, 0, 0 };
	bool found[4];
	struct srv_once_counts n;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	lookup(&o, &t, 3, st, found);
	assert_int_equal(srv_once_add(&o, &t, 3, keys, st, 4), 0);
	/* a quiet hour later, 1024 new clients make the node evict */
	o.clock_ofs_ms += 3600000u;
	for (other.client = 100; other.client < 100 + 1024; other.client++) {
		lookup(&o, &other, 3, st, found);
		assert_int_equal(srv_once_add(&o, &other, 3, keys, st, 1), 0);
	}
	srv_once_stats(&o, &n);
	assert_true(n.evicted >= 1);
	assert_int_equal(n.forgotten, 1);
	/* the resend: refused, nothing applied */
	assert_int_equal(srv_once_lookup(&o, &t, 3, keys, 4, st, found),
			 RS_E_TIMEOUT);
	assert_non_null(strstr(rs_errormsg(), "forgot"));
	/* a new call of the client: taken, and the old one still refused */
	lookup(&o, &fresh, 3, st, found);
	assert_false(found[0] || found[1] || found[2] || found[3]);
	assert_int_equal(srv_once_lookup(&o, &t, 3, keys, 4, st, found),
			 RS_E_TIMEOUT);
	srv_once_fini(&o);
}

/* A lookup and a record of one key for a fresh call 1 of client id of
 * credential cred: 0 or the lookup's error. */
static int write_as(struct srv_once *o, uint32_t cred, uint64_t id,
		    bool record)
{
	struct srv_once_tag t = { .client = id, .seq = 1, .done_below = 1,
				  .cred = cred };
	int32_t st[1] = { 0 };
	bool found[1];
	int ret = srv_once_lookup(o, &t, 3, keys, 1, st, found);

	if (!ret && record)
		assert_int_equal(srv_once_add(o, &t, 3, keys, st, 1), 0);
	return ret;
}

static int write_one(struct srv_once *o, uint64_t id, bool record)
{
	return write_as(o, 0, id, record);
}

/* Forgotten clients are bounded: past the bound an idle client with
 * records stays (new clients get RS_E_BUSY once the table is full)
 * rather than be forgotten early; forgotten ones go SRV_ONCE_FORGET_MS
 * after they were last heard of; a client with nothing a resend could
 * apply twice leaves no trace; fresh ids never grow either count past
 * its bound. One bucket (no credentials): clients' requests may fill
 * three quarters of the table of clients, six of eight. */
static void forgotten_bounded(void **state)
{
	struct srv_once o;
	struct srv_once_counts n;
	unsigned answered = 0, refused = 0;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	o.max_clients = 8;
	o.max_forgot = 4;
	srv_once_one_bucket(&o);
	for (uint64_t id = 1; id <= 6; id++)
		assert_int_equal(write_one(&o, id, true), 0);
	o.clock_ofs_ms += SRV_ONCE_IDLE_MS;
	/* the table is full: four are forgotten, two stay */
	for (uint64_t id = 100; id < 104; id++)
		assert_int_equal(write_one(&o, id, true), 0);
	srv_once_stats(&o, &n);
	assert_int_equal(n.forgotten, 4);
	assert_int_equal(n.clients, 6);
	assert_int_equal(write_one(&o, 104, true), RS_E_BUSY);
	/* 100..103 declare their call done: nothing left to resend */
	for (uint64_t id = 100; id < 104; id++) {
		struct srv_once_tag t = { .client = id, .seq = 2,
					  .done_below = 2 };
		int32_t st[4];
		bool found[4];

		lookup(&o, &t, 3, st, found);
	}
	for (uint64_t id = 1; id <= 6; id++) {
		struct srv_once_tag t = { .client = id, .seq = 1,
					  .done_below = 1 };
		int32_t st[1];
		bool found[1] = { false };
		int ret = srv_once_lookup(&o, &t, 3, keys, 1, st, found);

		answered += !ret && found[0];
		refused += ret == RS_E_TIMEOUT;
	}
	assert_int_equal(answered, 2);	/* kept: answered from the record */
	assert_int_equal(refused, 4);	/* forgotten: refused, not applied */
	/* four hours on: the forgotten go, 100..103 (no records) are
	 * dropped, the two kept are forgotten (or kept, if the pass met
	 * them before the forgotten ones left) */
	o.clock_ofs_ms += SRV_ONCE_FORGET_MS;
	assert_int_equal(write_one(&o, 105, true), 0);
	srv_once_stats(&o, &n);
	assert_int_equal(n.forgotten + n.clients, 3);
	assert_int_equal(n.records, n.clients);
	/* a peer cycling fresh ids, each with a record */
	for (uint64_t id = 1000; id < 1400; id++) {
		int ret = write_one(&o, id, true);

		assert_true(ret == 0 || ret == RS_E_BUSY);
		if (id % 16 == 0)
			o.clock_ofs_ms += SRV_ONCE_IDLE_MS;
		if (id % 64 == 0)
			o.clock_ofs_ms += SRV_ONCE_FORGET_MS;
		srv_once_stats(&o, &n);
		assert_true(n.forgotten <= 4 && n.clients <= 6);
	}
	srv_once_fini(&o);
}

/* Issue 27, fault 5: a data-role key must not stall the writes of others
 * through the exactly-once table. */

/* A write that records nothing leaves nothing behind: 65,536 one-key
 * DELETEs of missing keys with fresh ids, then other clients' writes
 * are still taken; a live client's calls that record nothing do not
 * count against its calls in flight. */
static void lookup_records_nothing(void **state)
{
	struct srv_once o;
	struct srv_once_tag t = { .seq = 1, .done_below = 1, .cred = 2 };
	int32_t st[1] = { RS_E_NOTFOUND };
	bool found[1];
	struct srv_once_counts n;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	for (t.client = 1; t.client <= SRV_ONCE_MAX_CLIENTS; t.client++) {
		assert_int_equal(srv_once_lookup(&o, &t, 3, keys, 1, st,
						 found), 0);
		assert_int_equal(srv_once_add(&o, &t, 3, keys, st, 1), 0);
	}
	assert_int_equal(write_as(&o, 3, 1u << 20, true), 0);
	assert_int_equal(write_as(&o, 2, (1u << 20) + 1, true), 0);
	srv_once_stats(&o, &n);
	assert_int_equal(n.clients, 2);
	assert_int_equal(n.records, 2);
	t = (struct srv_once_tag){ .client = 1u << 20, .done_below = 1,
				   .cred = 3 };
	for (t.seq = 2; t.seq < 2 + 2 * SRV_ONCE_MAX_CALLS; t.seq++)
		assert_int_equal(srv_once_lookup(&o, &t, 3, keys, 1, st,
						 found), 0);
	srv_once_fini(&o);
}

#define BIG 65536u
static uint64_t big[BIG];
static int32_t big_st[BIG];
static bool big_found[BIG];

/* A call of BIG keys (recorded when the lookup takes it): 0 or the
 * lookup's error. */
static int write_big(struct srv_once *o, const struct srv_once_tag *t)
{
	int ret = srv_once_lookup(o, t, 3, big, BIG, big_st, big_found);

	if (!ret) {
		memset(big_st, 0, sizeof(big_st));
		assert_int_equal(srv_once_add(o, t, 3, big, big_st, BIG), 0);
	}
	return ret;
}

/* Records never released by done_below: their credential gets RS_E_BUSY
 * at its share, well below the node's bound; another credential's writes
 * are still taken, and so are the records peers send, the flooding
 * credential's too up to twice its share (past it they are dropped and
 * counted: a REPL never fails for them). */
static void records_per_credential(void **state)
{
	struct srv_once o;
	struct srv_once_tag t = { .client = 7, .done_below = 1, .cred = 1 };
	struct srv_once_tag peer = { .client = 9, .seq = 1, .done_below = 1,
				     .cred = 2 };
	int32_t st[4] = { 0 };
	struct srv_once_counts n;
	uint64_t calls = 0;
	int ret = 0;

	(void)state;
	for (uint32_t i = 0; i < BIG; i++)
		big[i] = 1000 + i;
	assert_int_equal(srv_once_init(&o), 0);
	for (t.seq = 1; !ret; t.seq++)
		calls += !(ret = write_big(&o, &t));
	assert_int_equal(ret, RS_E_BUSY);
	assert_int_equal(write_as(&o, 2, 8, true), 0);
	assert_int_equal(srv_once_record(&o, &peer, 3, keys, st, 3), 0);
	assert_true(calls * BIG <= SRV_ONCE_MAX_ENTRIES / SRV_ONCE_SHARE_DIV);
	t.seq--;
	assert_int_equal(write_big(&o, &t), RS_E_BUSY);
	assert_non_null(strstr(rs_errormsg(), "key 1"));
	/* the flooding credential's records from peers */
	t.client = 10;
	ret = 0;
	for (t.seq = 1; t.seq <= 2 * SRV_ONCE_MAX_ENTRIES / BIG &&
			ret == 0; t.seq++) {
		memset(big_st, 0, sizeof(big_st));
		ret = srv_once_record(&o, &t, 3, big, big_st, BIG);
		assert_true(ret == 0 || ret == 1);
	}
	assert_int_equal(ret, 1);	/* dropped, not an error */
	srv_once_stats(&o, &n);
	assert_true(n.dropped > 0);
	assert_true(n.records <= 2 * SRV_ONCE_MAX_ENTRIES /
					  SRV_ONCE_SHARE_DIV + 8);
	/* the other credential's and its peers' records still land */
	peer.seq = 2;
	assert_int_equal(srv_once_record(&o, &peer, 3, keys, st, 3), 0);
	assert_int_equal(write_as(&o, 2, 11, true), 0);
	srv_once_fini(&o);
}

/* Fresh ids with records: their credential gets RS_E_BUSY at its share
 * of the table of clients, another credential's new clients are taken. */
static void clients_per_credential(void **state)
{
	struct srv_once o;
	unsigned taken = 0;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	for (uint64_t id = 1; id <= SRV_ONCE_MAX_CLIENTS; id++) {
		int ret = write_as(&o, 1, id, true);

		assert_true(ret == 0 || ret == RS_E_BUSY);
		taken += !ret;
	}
	assert_int_equal(write_as(&o, 2, 1ull << 40, true), 0);
	assert_int_equal(taken, SRV_ONCE_MAX_CLIENTS / SRV_ONCE_SHARE_DIV);
	srv_once_fini(&o);
}

struct seen {
	unsigned n, creds_ok;
};

static int each_cred(void *arg, const struct srv_once_tag *tag,
		     uint64_t key, int32_t st)
{
	struct seen *s = arg;

	(void)key;
	(void)st;
	s->n++;
	s->creds_ok += tag->client == 7 && tag->cred == 2;
	return 0;
}

/* Client ids travel in clear: another credential naming a client's id
 * with done_below near 2^64 touches nothing of the client's and sees
 * none of its records (each credential has its own ids, on every node:
 * records carry their credential); the client's own credential may not
 * jump its seq past the window either. */
static void tags_per_credential(void **state)
{
	struct srv_once o;
	struct srv_once_tag v = { .client = 7, .seq = 1, .done_below = 1,
				  .cred = 2 };
	struct srv_once_tag v2 = { .client = 7, .seq = 2, .done_below = 1,
				   .cred = 2 };
	struct srv_once_tag forged = { .client = 7, .seq = UINT64_MAX,
				       .done_below = UINT64_MAX, .cred = 1 };
	struct srv_once_tag other = { .client = 7, .seq = 1, .done_below = 1,
				      .cred = 1 };
	int32_t st[4] = { 0, 1, 0, 0 }, nf[1] = { RS_E_NOTFOUND };
	bool found[4];
	struct seen seen = { 0 };

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	/* v's call 1 reached this node as a backup (REPL) */
	assert_int_equal(srv_once_record(&o, &v, 3, keys, st, 4), 0);
	/* a DELETE of a missing key under another credential */
	assert_int_equal(srv_once_lookup(&o, &forged, 3, keys, 1, nf, found),
			 0);
	assert_false(found[0]);
	assert_int_equal(srv_once_add(&o, &forged, 3, keys, nf, 1), 0);
	/* v's resend after a failover is answered from its records */
	memset(found, 0, sizeof(found));
	lookup(&o, &v, 3, st, found);
	assert_true(found[0] && found[1] && found[2] && found[3]);
	assert_int_equal(st[1], 1);
	lookup(&o, &v2, 3, st, found);
	assert_false(found[0]);
	/* the same id under the other credential is another client */
	lookup(&o, &other, 3, st, found);
	assert_false(found[0] || found[1] || found[2]);
	/* its own credential: a seq too far ahead is refused, changes
	 * nothing */
	v2.seq = 2 + SRV_ONCE_SEQ_WINDOW + 1;
	v2.done_below = v2.seq;
	assert_int_equal(srv_once_lookup(&o, &v2, 3, keys, 4, st, found),
			 RS_E_INVAL);
	memset(found, 0, sizeof(found));
	lookup(&o, &v, 3, st, found);
	assert_true(found[0] && found[1]);
	/* COPY sends records with their credential */
	assert_int_equal(srv_once_each(&o, 3, each_cred, &seen), 0);
	assert_int_equal(seen.n, 3);
	assert_int_equal(seen.creds_ok, 3);
	srv_once_fini(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(resend),
		cmocka_unit_test(many_pieces),
		cmocka_unit_test(obsolete),
		cmocka_unit_test(bounds),
		cmocka_unit_test(resend_after_eviction),
		cmocka_unit_test(forgotten_bounded),
		cmocka_unit_test(lookup_records_nothing),
		cmocka_unit_test(records_per_credential),
		cmocka_unit_test(clients_per_credential),
		cmocka_unit_test(tags_per_credential),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
