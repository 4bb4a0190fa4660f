/*
 * test_client_route.c - the client's cluster route (src/client/route.h):
 * placement from a configuration agrees with the nodes' own
 * (memb_replicas of src/coord/membership.c) on 10,000 keys for r = 1..3,
 * ACTIVE members only, the configuration's vnodes; members the client
 * has no slot for; new and moved members get new node slots (and only
 * when no slot is left do they stay without one); the nodes a table
 * create or drop goes to (ACTIVE, then JOINING); bad configurations;
 * only higher epochs are adopted; the ring with caller-given owners
 * places keys like the plain one.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/route.h"
#include "coord/membership.h"
#include "place/ring.h"
#include "recstore/error.h"

#define KEYS 10000

static uint64_t key_at(unsigned i)
{
	return (uint64_t)i * 0x9e3779b97f4a7c15ull ^ (uint64_t)i << 7;
}

/* n members "node-00".."node-<n-1>", addr 10.0.0.<i + 1>:7471, state
 * st[i]. (Ids of 1..3 bytes would make a lopsided ring: XXH3 hashes such
 * short inputs so that the points of names that differ in their last
 * byte coincide for nearby seeds, and ties go to the smaller name.) */
static void members(struct proto_member *m, struct memb_member *mm,
		    size_t n, const uint32_t *st)
{
	for (size_t i = 0; i < n; i++) {
		memset(&m[i], 0, sizeof(m[i]));
		snprintf(m[i].id, sizeof(m[i].id), "node-%02zu", i);
		snprintf(m[i].addr, sizeof(m[i].addr), "10.0.0.%zu:7471",
			 i + 1);
		m[i].state = st[i];
		if (!mm)
			continue;
		memset(&mm[i], 0, sizeof(mm[i]));
		memcpy(mm[i].id, m[i].id, sizeof(mm[i].id));
		memcpy(mm[i].addr, m[i].addr, sizeof(mm[i].addr));
		mm[i].state = (enum memb_state)st[i];
		mm[i].inc = i + 1;
	}
}

static const uint32_t A = PROTO_MEMBER_ACTIVE, J = PROTO_MEMBER_JOINING,
		      D = PROTO_MEMBER_DOWN;

/* The route's replica set of every key equals memb_replicas' (both in
 * member indexes: the client's nodes are the configuration's members). */
static void agrees_with_membership(void **state)
{
	const uint32_t st[] = { A, D, A, A, J, A, D, A, A };
	const size_t n = sizeof(st) / sizeof(st[0]);
	struct proto_member m[sizeof(st) / sizeof(st[0])];
	struct memb_member mm[sizeof(st) / sizeof(st[0])];
	const unsigned vn[] = { 1, 64, 160 };

	(void)state;
	members(m, mm, n, st);
	for (unsigned r = 1; r <= 3; r++)
		for (size_t v = 0; v < sizeof(vn) / sizeof(vn[0]); v++) {
			struct memb_config mc = { .epoch = 7, .r = r,
						  .vnodes = vn[v], .n = n,
						  .m = mm };
			struct cli_config cc = { .epoch = 7, .r = r,
						 .vnodes = vn[v], .n = n,
						 .m = m };
			struct memb_placement *p;
			struct cli_route *rt;
			unsigned got[PROTO_CONFIG_MAX_R], want[MEMB_MAX_R];
			size_t primaries[16] = { 0 };

			assert_int_equal(memb_placement_new(&p, &mc), 0);
			assert_int_equal(cli_route_new(&rt, &cc, m, n), 0);
			assert_int_equal(rt->epoch, 7);
			assert_int_equal(rt->nactive, 6);
			assert_int_equal(rt->nunknown, 0);
			for (size_t i = 0; i < n; i++)
				assert_int_equal(rt->active[i], st[i] == A);
			assert_int_equal(place_ring_points(rt->ring),
					 6 * vn[v]);
			for (unsigned i = 0; i < KEYS; i++) {
				uint64_t k = key_at(i);
				unsigned ng = cli_route_replicas(rt, k, got);
				unsigned nw = memb_replicas(
					p, memb_key_hash(k), want);

				assert_int_equal(ng, r);
				assert_int_equal(ng, nw);
				for (unsigned j = 0; j < ng; j++) {
					assert_int_equal(got[j], want[j]);
					assert_true(rt->active[got[j]]);
				}
				/* the primary is what calls route by */
				assert_int_equal(place_ring_node(rt->ring, k),
						 got[0]);
				primaries[got[0]]++;
			}
			/* every active member is primary of some keys */
			for (size_t i = 0; vn[v] > 1 && i < n; i++)
				assert_true((primaries[i] > 0) ==
					    (st[i] == A));
			cli_route_free(&rt);
			assert_null(rt);
			memb_placement_free(&p);
		}
	assert_int_equal(memb_key_hash(12345), place_ring_key_hash(12345));
}

/* Members "node-00".. of states st (members()), their configuration at
 * epoch (r = 2, 32 vnodes) as the nodes and as the client see it, and the
 * client's 4 slots at open: node-00, -01, -02 (at an address it left
 * since) and -05. */
struct slots {
	struct proto_member m[8], known[8];
	struct memb_member mm[8];
	struct memb_config mc;
	struct cli_config cc;
};

static void slots_init(struct slots *f, const uint32_t *st, size_t n,
		       uint64_t epoch)
{
	assert_true(n >= 6 && n <= 8);
	memset(f, 0, sizeof(*f));
	members(f->m, f->mm, n, st);
	f->mc = (struct memb_config){ .epoch = epoch, .r = 2, .vnodes = 32,
				      .n = n, .m = f->mm };
	f->cc = (struct cli_config){ .epoch = epoch, .r = 2, .vnodes = 32,
				     .n = n, .m = f->m };
	f->known[0] = f->m[0];
	f->known[1] = f->m[1];
	f->known[2] = f->m[2];
	snprintf(f->known[2].addr, sizeof(f->known[2].addr),
		 "10.9.9.9:7471");
	f->known[3] = f->m[5];
}

/* Every key's replica set, by id, is memb_replicas' for the route rt over
 * known[0..rt->nknown) (owners from nknown on by rt->unknown; the known
 * ones active, at their member's address); returns the keys whose primary
 * is an owner in [lo, hi). */
static size_t agree_by_id(const struct cli_route *rt,
			  const struct memb_placement *p,
			  const struct proto_member *m,
			  const struct proto_member *known, size_t lo,
			  size_t hi)
{
	unsigned got[PROTO_CONFIG_MAX_R], want[MEMB_MAX_R];
	size_t at = 0;

	for (unsigned i = 0; i < KEYS; i++) {
		uint64_t k = key_at(i);
		unsigned ng = cli_route_replicas(rt, k, got);
		unsigned nw = memb_replicas(p, memb_key_hash(k), want);

		assert_int_equal(ng, nw);
		for (unsigned j = 0; j < ng; j++) {
			const struct proto_member *o = got[j] < rt->nknown
				? &known[got[j]]
				: &rt->unknown[got[j] - rt->nknown];

			assert_string_equal(o->id, m[want[j]].id);
			if (got[j] >= rt->nknown)
				continue;
			assert_true(rt->active[got[j]]);
			assert_string_equal(o->addr, m[want[j]].addr);
		}
		at += got[0] >= lo && got[0] < hi;
	}
	return at;
}

/* A client whose nodes are a subset of the members (it could not give
 * the others slots: cli_route_grow() below). Known ones map to its
 * indexes, an ACTIVE member it does not know (or knows at another
 * address) to owners >= nknown, with a message that says no slot was
 * left; placement still agrees by id. */
static void unknown_members(void **state)
{
	static const uint32_t st[] = { A, A, A, A, A, D };
	struct slots f;
	struct proto_member *m = f.m, *known = f.known;
	struct memb_placement *p;
	struct cli_route *rt;

	(void)state;
	slots_init(&f, st, sizeof(st) / sizeof(st[0]), 9);
	assert_int_equal(memb_placement_new(&p, &f.mc), 0);
	assert_int_equal(cli_route_new(&rt, &f.cc, known, 4), 0);
	assert_int_equal(rt->nactive, 2); /* node-00, node-01 */
	assert_true(rt->active[0] && rt->active[1]);
	assert_false(rt->active[2] || rt->active[3]);
	assert_int_equal(rt->nunknown, 3); /* node-02 (moved), -03, -04 */
	assert_true(agree_by_id(rt, p, m, known, 4, SIZE_MAX) > KEYS / 4);
	assert_int_equal(cli_route_unknown(rt, 4), RS_E_UNSUPPORTED);
	assert_non_null(strstr(rs_errormsg(), "node-02"));
	assert_non_null(strstr(rs_errormsg(), "has no node slot"));
	assert_non_null(strstr(rs_errormsg(), "reopen the client"));
	assert_int_equal(cli_route_unknown(rt, 6), RS_E_UNSUPPORTED);
	assert_non_null(strstr(rs_errormsg(), "node-04"));
	assert_int_equal(cli_route_unknown(rt, 7), RS_E_UNSUPPORTED);
	cli_route_free(&rt);
	memb_placement_free(&p);
}

/* A configuration newer than the client's slots: each ACTIVE or JOINING
 * member that no slot is (same id at the same address) gets the next
 * slot, in the configuration's order: one that joined, and one that moved
 * (its old slot stays, not active); DOWN members get none; growing
 * again changes nothing; a member that moves back to its old address is
 * its old slot again; when the slots run out the rest stay without one
 * (owners >= nknown, RS_E_UNSUPPORTED). */
static void new_members_get_slots(void **state)
{
	static const uint32_t st[] = { A, A, A, A, A, D, J };
	struct slots f;
	struct proto_member *m = f.m, *known = f.known;
	struct memb_member *mm = f.mm;
	struct memb_config *mc = &f.mc;
	struct cli_config *cc = &f.cc;
	struct memb_placement *p;
	struct cli_route *rt;
	size_t nk;

	(void)state;
	slots_init(&f, st, sizeof(st) / sizeof(st[0]), 11);
	assert_int_equal(cli_route_find(known, 4, &m[0]), 0);
	assert_int_equal(cli_route_find(known, 4, &m[2]), 4); /* moved */
	assert_int_equal(cli_route_find(known, 4, &m[3]), 4); /* joined */

	nk = cli_route_grow(cc, known, 4, 8);
	assert_int_equal(nk, 8);
	assert_string_equal(known[4].id, "node-02"); /* its new address */
	assert_string_equal(known[4].addr, m[2].addr);
	assert_string_equal(known[5].id, "node-03");
	assert_string_equal(known[6].id, "node-04");
	assert_string_equal(known[7].id, "node-06"); /* JOINING */
	/* the old slot is untouched */
	assert_string_equal(known[2].id, "node-02");
	assert_string_equal(known[2].addr, "10.9.9.9:7471");
	assert_int_equal(cli_route_find(known, nk, &m[2]), 4);
	assert_int_equal(cli_route_find(known, nk, &known[2]), 2);
	/* nothing new: nothing added (node-05 DOWN) */
	assert_int_equal(cli_route_grow(cc, known, nk, 8), nk);

	assert_int_equal(memb_placement_new(&p, mc), 0);
	assert_int_equal(cli_route_new(&rt, cc, known, nk), 0);
	assert_int_equal(rt->nknown, 8);
	assert_int_equal(rt->nunknown, 0);
	assert_int_equal(rt->nactive, 5);
	assert_true(rt->active[0] && rt->active[1]);
	assert_false(rt->active[2] || rt->active[3] || rt->active[7]);
	assert_true(rt->active[4] && rt->active[5] && rt->active[6]);
	assert_true(rt->joining[7]);
	assert_int_equal(rt->njunknown, 0);
	/* the new slots are primaries of their share, the old one of none */
	assert_true(agree_by_id(rt, p, m, known, 4, 5) > KEYS / 10);
	assert_true(agree_by_id(rt, p, m, known, 5, 6) > KEYS / 10);
	assert_int_equal(agree_by_id(rt, p, m, known, 2, 3), 0);
	cli_route_free(&rt);
	memb_placement_free(&p);

	/* node-02 restarts at the address of its first slot */
	snprintf(m[2].addr, sizeof(m[2].addr), "10.9.9.9:7471");
	memcpy(mm[2].addr, m[2].addr, sizeof(mm[2].addr));
	mc->epoch = cc->epoch = 12;
	assert_int_equal(cli_route_grow(cc, known, nk, 8), nk);
	assert_int_equal(memb_placement_new(&p, mc), 0);
	assert_int_equal(cli_route_new(&rt, cc, known, nk), 0);
	assert_int_equal(rt->nunknown, 0);
	assert_true(rt->active[2]);
	assert_false(rt->active[4]);
	assert_true(agree_by_id(rt, p, m, known, 2, 3) > KEYS / 10);
	assert_int_equal(agree_by_id(rt, p, m, known, 4, 5), 0);
	cli_route_free(&rt);
	memb_placement_free(&p);
}

/* The nodes a table create or drop goes to: the ACTIVE members' slots in
 * slot order, then the JOINING ones'; not a DOWN member nor the old slot
 * of one that moved; a member without a slot (ACTIVE or JOINING) makes
 * it fail, since the change could not reach it. */
static void table_nodes(void **state)
{
	static const uint32_t st[] = { A, J, A, D, A, J, A };
	const size_t n = sizeof(st) / sizeof(st[0]);
	struct proto_member m[7], known[7];
	struct cli_config cc = { .epoch = 9, .r = 2, .vnodes = 32, .n = n,
				 .m = m };
	unsigned got[8];
	struct cli_route *rt;
	size_t nk;

	(void)state;
	members(m, NULL, n, st);
	/* every member known but node-05 (JOINING, without a slot) */
	for (size_t i = 0; i < 5; i++)
		known[i] = m[i];
	known[5] = m[6];
	assert_int_equal(cli_route_new(&rt, &cc, known, 6), 0);
	assert_int_equal(rt->njunknown, 1);
	assert_int_equal(cli_route_table_nodes(rt, got, 8),
			 RS_E_UNSUPPORTED);
	assert_non_null(strstr(rs_errormsg(), "without a node slot"));
	cli_route_free(&rt);
	/* node-05 gets its slot (after node-06's) */
	nk = cli_route_grow(&cc, known, 6, 7);
	assert_int_equal(nk, 7);
	assert_string_equal(known[6].id, "node-05");
	assert_int_equal(cli_route_new(&rt, &cc, known, nk), 0);
	assert_int_equal(cli_route_table_nodes(rt, NULL, 0), 6);
	assert_int_equal(cli_route_table_nodes(rt, got, 8), 6);
	/* slots: 0 A, 1 J, 2 A, 3 D, 4 A, 5 node-06 A, 6 node-05 J */
	assert_int_equal(got[0], 0);
	assert_int_equal(got[1], 2);
	assert_int_equal(got[2], 4);
	assert_int_equal(got[3], 5);
	assert_int_equal(got[4], 1);
	assert_int_equal(got[5], 6);
	/* a short buffer: the count, the first ones */
	memset(got, 0xff, sizeof(got));
	assert_int_equal(cli_route_table_nodes(rt, got, 2), 6);
	assert_int_equal(got[1], 2);
	assert_int_equal(got[2], 0xffffffffu);
	cli_route_free(&rt);
	/* an ACTIVE member without a slot fails it too */
	assert_int_equal(cli_route_new(&rt, &cc, known, 4), 0);
	assert_true(rt->nunknown > 0);
	assert_int_equal(cli_route_table_nodes(rt, got, 8),
			 RS_E_UNSUPPORTED);
	cli_route_free(&rt);
}

/* One slot left for three members without one: the first (in the
 * configuration's order) takes it, the others stay without a slot and
 * their keys fail with a message that says so. A configuration the
 * route refuses takes no slot. */
static void slots_run_out(void **state)
{
	const uint32_t st[] = { A, A, A, A, A };
	const size_t n = sizeof(st) / sizeof(st[0]);
	struct proto_member m[5], known[5];
	struct cli_config cc = { .epoch = 3, .r = 1, .vnodes = 32, .n = n,
				 .m = m };
	struct cli_config bad = cc;
	struct cli_route *rt;
	unsigned got[PROTO_CONFIG_MAX_R];
	size_t nk, none = 0;

	(void)state;
	members(m, NULL, n, st);
	known[0] = m[0];
	known[1] = m[1];
	/* a configuration the route refuses gives no slots */
	bad.r = 0;
	assert_int_equal(cli_route_grow(&bad, known, 2, 3), 2);
	nk = cli_route_grow(&cc, known, 2, 3);
	assert_int_equal(nk, 3);
	assert_string_equal(known[2].id, "node-02");
	assert_int_equal(cli_route_new(&rt, &cc, known, nk), 0);
	assert_int_equal(rt->nactive, 3);
	assert_int_equal(rt->nunknown, 2);
	assert_string_equal(rt->unknown[0].id, "node-03");
	for (unsigned i = 0; i < KEYS; i++) {
		cli_route_replicas(rt, key_at(i), got);
		none += got[0] >= nk;
	}
	assert_true(none > KEYS / 4);
	assert_int_equal(cli_route_unknown(rt, 3), RS_E_UNSUPPORTED);
	assert_non_null(strstr(rs_errormsg(), "node-03"));
	assert_non_null(strstr(rs_errormsg(), "all 3 are taken"));
	cli_route_free(&rt);
}

static void bad_configurations(void **state)
{
	const uint32_t st[] = { A, A, A };
	struct proto_member m[3];
	struct cli_config ok = { .epoch = 3, .r = 2, .vnodes = 8, .n = 3,
				 .m = m };
	struct cli_config c;
	struct cli_route *rt;

	(void)state;
	members(m, NULL, 3, st);
	assert_int_equal(cli_route_new(&rt, &ok, m, 3), 0);
	cli_route_free(&rt);
	cli_route_free(&rt); /* accepts NULL */
	cli_route_free(NULL);

	c = ok;
	c.epoch = 0;
	assert_int_equal(cli_route_new(&rt, &c, m, 3), RS_E_PROTO);
	assert_null(rt);
	c = ok;
	c.r = 0;
	assert_int_equal(cli_route_new(&rt, &c, m, 3), RS_E_PROTO);
	c.r = PROTO_CONFIG_MAX_R + 1;
	assert_int_equal(cli_route_new(&rt, &c, m, 3), RS_E_PROTO);
	c = ok;
	c.vnodes = 0;
	assert_int_equal(cli_route_new(&rt, &c, m, 3), RS_E_PROTO);
	c.vnodes = PLACE_RING_MAX_VNODES + 1;
	assert_int_equal(cli_route_new(&rt, &c, m, 3), RS_E_PROTO);
	c = ok;
	c.n = PROTO_CONFIG_MAX_MEMBERS + 1;
	assert_int_equal(cli_route_new(&rt, &c, m, 3), RS_E_PROTO);
	/* ids out of order, and twice */
	memcpy(m[1].id, "node-09", 8);
	assert_int_equal(cli_route_new(&rt, &ok, m, 3), RS_E_PROTO);
	assert_non_null(strstr(rs_errormsg(), "sorted"));
	memcpy(m[1].id, "node-00", 8);
	assert_int_equal(cli_route_new(&rt, &ok, m, 3), RS_E_PROTO);
	memcpy(m[1].id, "node-01", 8);
	/* nobody active */
	for (int i = 0; i < 3; i++)
		m[i].state = PROTO_MEMBER_DOWN;
	assert_int_equal(cli_route_new(&rt, &ok, m, 3), RS_E_PROTO);
	assert_non_null(strstr(rs_errormsg(), "no active member"));
	assert_null(rt);
	/* fewer active members than r: sets of all of them */
	m[1].state = PROTO_MEMBER_ACTIVE;
	assert_int_equal(cli_route_new(&rt, &ok, m, 3), 0);
	{
		unsigned out[PROTO_CONFIG_MAX_R];

		assert_int_equal(cli_route_replicas(rt, 42, out), 1);
		assert_int_equal(out[0], 1);
	}
	cli_route_free(&rt);
}

static struct cli_config cfg_of(uint64_t epoch)
{
	struct cli_config c = { .epoch = epoch, .r = 1, .vnodes = 1, .n = 1 };

	c.m = calloc(1, sizeof(*c.m));
	assert_non_null(c.m);
	snprintf(c.m[0].id, sizeof(c.m[0].id), "e%llu",
		 (unsigned long long)epoch);
	return c;
}

/* Answers of a refresh round: the highest epoch is kept, and it replaces
 * the client's only when higher (a client never goes back). */
static void only_higher_epochs(void **state)
{
	const uint64_t answers[] = { 5, 7, 6, 7, 3, 0 };
	struct cli_config best = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
		struct cli_config got = cfg_of(answers[i]);

		cli_config_keep_higher(&best, &got);
		assert_null(got.m);
	}
	assert_int_equal(best.epoch, 7);
	assert_string_equal(best.m[0].id, "e7");
	assert_true(cli_route_newer(6, best.epoch));
	assert_false(cli_route_newer(7, best.epoch));
	assert_false(cli_route_newer(8, best.epoch));
	assert_false(cli_route_newer(1, 0));
	cli_config_free(&best);
	assert_null(best.m);
	assert_int_equal(best.epoch, 0);
}

/* Owners given by the caller: the same placement by name. */
static void ring_owners(void **state)
{
	const char *names[] = { "a", "b", "c", "d" };
	const unsigned owner[] = { 40, 7, 12, 3 };
	const unsigned twice[] = { 1, 2, 1, 3 };
	struct place_ring *plain, *owned;
	unsigned sp[4], so[4];

	(void)state;
	assert_int_equal(place_ring_new(&plain, names, 4, 50), 0);
	assert_int_equal(place_ring_new_owned(&owned, names, owner, 4, 50), 0);
	for (unsigned i = 0; i < KEYS; i++) {
		uint64_t k = key_at(i), h = place_ring_key_hash(k);
		unsigned n1 = place_ring_successors(plain, h, sp, 4);
		unsigned n2 = place_ring_successors(owned, h, so, 4);

		assert_int_equal(n1, 4);
		assert_int_equal(n2, 4);
		for (unsigned j = 0; j < 4; j++)
			assert_int_equal(so[j], owner[sp[j]]);
		assert_int_equal(place_ring_node(owned, k),
				 owner[place_ring_node(plain, k)]);
	}
	place_ring_delete(&plain);
	place_ring_delete(&owned);
	assert_int_equal(place_ring_new_owned(&owned, names, twice, 4, 50),
			 RS_E_INVAL);
	assert_null(owned);
}

/* Replica reads: the reader is a member of the key's set, the same for
 * one client (salt) every time, spread over the set's replicas, and the
 * primary whenever the chosen replica is not ready in the route's epoch
 * or has no slot in the call's arrays. */
static void reader_choice(void **state)
{
	const uint32_t st[] = { A, A, A };
	struct proto_member m[3];
	struct cli_config cc = { .epoch = 4, .r = 2, .vnodes = 64, .n = 3,
				 .m = m };
	_Atomic uint64_t ready[3];
	struct cli_route *rt;
	unsigned set[PROTO_CONFIG_MAX_R], prim, got, n;
	size_t at_backup = 0, other_salt = 0, keys = 3000;

	(void)state;
	members(m, NULL, 3, st);
	assert_int_equal(cli_route_new(&rt, &cc, m, 3), 0);
	for (int i = 0; i < 3; i++)
		atomic_init(&ready[i], 4);
	for (unsigned i = 0; i < keys; i++) {
		uint64_t k = key_at(i);

		n = cli_route_replicas(rt, k, set);
		assert_int_equal(n, 2);
		got = cli_route_reader(rt, k, 77, ready, 3, &prim);
		assert_int_equal(prim, set[0]);
		assert_true(got == set[0] || got == set[1]);
		assert_int_equal(cli_route_reader(rt, k, 77, ready, 3, &prim),
				 got);
		at_backup += got != set[0];
		other_salt += cli_route_reader(rt, k, 78, ready, 3, &prim) !=
			      got;
	}
	/* half the keys at each replica, within a few percent */
	assert_true(at_backup > keys * 45 / 100 && at_backup < keys * 55 / 100);
	assert_true(other_salt > keys * 40 / 100);
	for (unsigned i = 0; i < keys; i++) {
		uint64_t k = key_at(i);

		n = cli_route_replicas(rt, k, set);
		/* a backup ready in another epoch, or beyond the arrays */
		atomic_store(&ready[set[1]], 3);
		assert_int_equal(cli_route_reader(rt, k, 77, ready, 3, &prim),
				 set[0]);
		atomic_store(&ready[set[1]], 4);
		assert_int_equal(cli_route_reader(rt, k, 77, ready, set[1],
						  &prim), set[0]);
	}
	cli_route_free(&rt);
	/* r = 1: always the primary */
	cc.r = 1;
	assert_int_equal(cli_route_new(&rt, &cc, m, 3), 0);
	for (unsigned i = 0; i < 100; i++) {
		got = cli_route_reader(rt, key_at(i), 77, ready, 3, &prim);
		assert_int_equal(got, prim);
		assert_int_equal(got, place_ring_node(rt->ring, key_at(i)));
	}
	cli_route_free(&rt);
}

/* Reads away from failed nodes: a key whose usual replica is avoided is
 * READ at the other one of its set when that one may be READ (the
 * primary, or a backup ready in the epoch), else nowhere (CLI_ROUTE_NONE:
 * the RPC); an avoidance that has run out (<= now) changes nothing. */
static void reader_avoid(void **state)
{
	const uint32_t st[] = { A, A, A };
	struct proto_member m[3];
	struct cli_config cc = { .epoch = 4, .r = 2, .vnodes = 64, .n = 3,
				 .m = m };
	_Atomic uint64_t ready[3];
	_Atomic int64_t avoid[3];
	struct cli_route *rt;
	unsigned set[PROTO_CONFIG_MAX_R], prim, usual, got;
	size_t moved_keys = 0;
	bool moved;

	(void)state;
	members(m, NULL, 3, st);
	assert_int_equal(cli_route_new(&rt, &cc, m, 3), 0);
	for (int i = 0; i < 3; i++) {
		atomic_init(&ready[i], 4);
		atomic_init(&avoid[i], 0);
	}
	atomic_store(&avoid[1], 1000);	/* node 1 failed; now is 500 */
	for (unsigned i = 0; i < 3000; i++) {
		uint64_t k = key_at(i);

		cli_route_replicas(rt, k, set);
		usual = cli_route_reader(rt, k, 77, ready, 3, &prim);
		got = cli_route_reader_avoid(rt, k, 77, ready, 3, &prim, avoid,
					     500, &moved);
		if (usual != 1) {
			assert_int_equal(got, usual);
			assert_false(moved);
			continue;
		}
		/* the other member of the set, whichever it is */
		assert_true(moved);
		assert_int_equal(got, set[0] == 1 ? set[1] : set[0]);
		moved_keys++;
		/* run out: the usual one again */
		assert_int_equal(cli_route_reader_avoid(rt, k, 77, ready, 3,
							&prim, avoid, 1000,
							&moved), 1);
		assert_false(moved);
		/* the other one is a backup not ready: none (the RPC) */
		if (set[0] == 1) {
			atomic_store(&ready[set[1]], 3);
			assert_int_equal(cli_route_reader_avoid(rt, k, 77,
								ready, 3, &prim,
								avoid, 500,
								&moved),
					 CLI_ROUTE_NONE);
			atomic_store(&ready[set[1]], 4);
		}
		/* both avoided: none */
		atomic_store(&avoid[got], 1000);
		assert_int_equal(cli_route_reader_avoid(rt, k, 77, ready, 3,
							&prim, avoid, 500,
							&moved),
				 CLI_ROUTE_NONE);
		atomic_store(&avoid[got], 0);
	}
	/* about a third of the keys are READ at node 1 usually */
	assert_true(moved_keys > 3000 / 5 && moved_keys < 3000 / 2);
	cli_route_free(&rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(agrees_with_membership),
		cmocka_unit_test(unknown_members),
		cmocka_unit_test(new_members_get_slots),
		cmocka_unit_test(slots_run_out),
		cmocka_unit_test(table_nodes),
		cmocka_unit_test(bad_configurations),
		cmocka_unit_test(only_higher_epochs),
		cmocka_unit_test(ring_owners),
		cmocka_unit_test(reader_choice),
		cmocka_unit_test(reader_avoid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
