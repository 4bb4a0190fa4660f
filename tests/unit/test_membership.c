/*
 * test_membership.c - configuration records, the reconfigure step,
 * placement (replica sets on the ring), decisions against the in-memory
 * store and the node's agent under a fake clock (src/coord/membership.h).
 *
 * balance_1000 prints the placement figures docs/replication.md quotes:
 * keys per node for 1000 nodes, and the keys that move on join, leave and
 * failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <math.h>

#include "coord/membership.h"
#include "recstore/error.h"

static const struct memb_policy pol3 = { .r = 3, .vnodes = 160,
					 .activate_joiners = true };

static struct memb_reg reg(const char *id, uint64_t inc)
{
	struct memb_reg g;

	memset(&g, 0, sizeof(g));
	snprintf(g.id, sizeof(g.id), "%s", id);
	snprintf(g.addr, sizeof(g.addr), "10.0.0.1:%u",
		 7000u + (unsigned)(inc % 1000));
	g.inc = inc;
	return g;
}

/* regs n0..n(k-1), incarnation i + 1 */
static struct memb_reg *regs_n(size_t k)
{
	struct memb_reg *g = calloc(k, sizeof(*g));
	char id[32];

	for (size_t i = 0; i < k; i++) {
		snprintf(id, sizeof(id), "n%04zu", i);
		g[i] = reg(id, i + 1);
	}
	return g;
}

static const struct memb_member *find(const struct memb_config *c,
				      const char *id)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->m[i].id, id))
			return &c->m[i];
	return NULL;
}

static void boot(struct memb_config *c, size_t k, const struct memb_policy *p)
{
	struct memb_config none = { 0 };
	struct memb_reg *g = regs_n(k);

	assert_int_equal(memb_reconfigure(&none, g, k, p, c), 1);
	assert_int_equal(c->epoch, 1);
	free(g);
}

/* ---- records ---- */

static void config_roundtrip(void **state)
{
	struct memb_config c, d;
	char *j, *j2;
	size_t len, len2;

	boot(&c, 4, &pol3);
	c.m[2].state = MEMB_DOWN;
	c.m[2].inc = 0xfedcba9876543210ull;
	assert_int_equal(memb_config_format(&c, &j, &len), 0);
	assert_int_equal(memb_config_parse(j, len, &d), 0);
	assert_int_equal(d.epoch, 1);
	assert_int_equal(d.r, 3);
	assert_int_equal(d.vnodes, 160);
	assert_int_equal(d.n, 4);
	assert_int_equal(d.m[2].state, MEMB_DOWN);
	assert_true(d.m[2].inc == 0xfedcba9876543210ull);
	assert_string_equal(d.m[3].addr, c.m[3].addr);
	assert_int_equal(memb_config_format(&d, &j2, &len2), 0);
	assert_string_equal(j, j2);
	free(j);
	free(j2);
	memb_config_free(&c);
	memb_config_free(&d);
}

static void config_rejects(void **state)
{
	static const char *const bad[] = {
		"",
		"[]",
		"{\"epoch\":1,\"r\":1,\"vnodes\":1,\"placement\":\"ring-xxh3-v1\"}",
		"{\"epoch\":0,\"r\":1,\"vnodes\":1,\"placement\":\"ring-xxh3-v1\","
		"\"members\":[]}",
		"{\"epoch\":1,\"r\":6,\"vnodes\":1,\"placement\":\"ring-xxh3-v1\","
		"\"members\":[]}",
		"{\"epoch\":1,\"r\":1,\"vnodes\":1,\"placement\":\"other\","
		"\"members\":[]}",
		"{\"epoch\":1,\"r\":1,\"vnodes\":1,\"placement\":\"ring-xxh3-v1\","
		"\"members\":[],\"x\":1}",
		/* since after epoch */
		"{\"epoch\":1,\"r\":1,\"vnodes\":1,\"placement\":\"ring-xxh3-v1\","
		"\"members\":[{\"id\":\"a\",\"addr\":\"x\",\"inc\":"
		"\"0000000000000001\",\"state\":\"active\",\"since\":2}]}",
		/* unknown state */
		"{\"epoch\":1,\"r\":1,\"vnodes\":1,\"placement\":\"ring-xxh3-v1\","
		"\"members\":[{\"id\":\"a\",\"addr\":\"x\",\"inc\":"
		"\"0000000000000001\",\"state\":\"up\",\"since\":1}]}",
		/* ids out of order */
		"{\"epoch\":1,\"r\":1,\"vnodes\":1,\"placement\":\"ring-xxh3-v1\","
		"\"members\":[{\"id\":\"b\",\"addr\":\"x\",\"inc\":"
		"\"0000000000000001\",\"state\":\"active\",\"since\":1},"
		"{\"id\":\"a\",\"addr\":\"x\",\"inc\":\"0000000000000001\","
		"\"state\":\"active\",\"since\":1}]}",
		/* a bad id */
		"{\"epoch\":1,\"r\":1,\"vnodes\":1,\"placement\":\"ring-xxh3-v1\","
		"\"members\":[{\"id\":\"a/b\",\"addr\":\"x\",\"inc\":"
		"\"0000000000000001\",\"state\":\"active\",\"since\":1}]}",
		/* inc not hex */
		"{\"epoch\":1,\"r\":1,\"vnodes\":1,\"placement\":\"ring-xxh3-v1\","
		"\"members\":[{\"id\":\"a\",\"addr\":\"x\",\"inc\":"
		"\"000000000000000g\",\"state\":\"active\",\"since\":1}]}",
	};
	struct memb_config c;
	struct memb_reg g;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(memb_config_parse(bad[i], strlen(bad[i]), &c),
				 RS_E_CORRUPT);
		assert_int_equal(c.n, 0);
		assert_null(c.m);
	}
	assert_int_equal(memb_reg_parse("a", "{\"addr\":\"x\"}", 12, &g),
			 RS_E_CORRUPT);
	assert_int_equal(memb_reg_parse("a/b", "{}", 2, &g), RS_E_INVAL);
}

/* A JOINING member becomes ACTIVE once its registration (same
 * incarnation) says it copied its ranges in the current epoch: an older
 * epoch, or another incarnation's, does not count. */
static void synced_activates(void **state)
{
	struct memb_reg g[3] = { reg("a", 1), reg("b", 2), reg("c", 3) };
	struct memb_policy nojoin = pol3;
	struct memb_config none = { 0 }, e1, e2, e3, e4;
	struct memb_reg back;
	char *v;
	size_t len;

	(void)state;
	nojoin.activate_joiners = false;
	assert_int_equal(memb_reconfigure(&none, g, 2, &nojoin, &e1), 1);
	/* c registers: joining in epoch 2 */
	assert_int_equal(memb_reconfigure(&e1, g, 3, &nojoin, &e2), 1);
	assert_int_equal(e2.m[2].state, MEMB_JOINING);
	/* synced in epoch 1 (before it was a member): nothing changes */
	g[2].synced = 1;
	assert_int_equal(memb_reconfigure(&e2, g, 3, &nojoin, &e3), 0);
	assert_int_equal(e3.m[2].state, MEMB_JOINING);
	memb_config_free(&e3);
	/* synced in epoch 2: active in epoch 3 */
	g[2].synced = 2;
	assert_int_equal(memb_reconfigure(&e2, g, 3, &nojoin, &e3), 1);
	assert_int_equal(e3.epoch, 3);
	assert_int_equal(e3.m[2].state, MEMB_ACTIVE);
	assert_int_equal(e3.m[2].since, 3);
	/* a restarted c (new incarnation) with a stale flag joins anew */
	g[2].inc = 33;
	assert_int_equal(memb_reconfigure(&e3, g, 3, &nojoin, &e4), 1);
	assert_int_equal(e4.m[2].state, MEMB_JOINING);
	assert_true(e4.m[2].inc == 33);
	/* the flag travels in the registration; absent means 0 */
	assert_int_equal(memb_reg_format(&g[2], &v, &len), 0);
	assert_non_null(strstr(v, "\"synced\":2"));
	assert_int_equal(memb_reg_parse("c", v, len, &back), 0);
	assert_true(back.synced == 2 && back.inc == 33);
	free(v);
	assert_int_equal(memb_reg_format(&g[0], &v, &len), 0);
	assert_null(strstr(v, "synced"));
	free(v);
	assert_int_equal(memb_reg_parse("c", "{\"addr\":\"x\",\"inc\":"
					"\"0000000000000001\",\"synced\":-1}",
					49, &back), RS_E_CORRUPT);
	memb_config_free(&e1);
	memb_config_free(&e2);
	memb_config_free(&e3);
	memb_config_free(&e4);
}

/* ---- reconfigure ---- */

static void first_config(void **state)
{
	struct memb_reg g[3] = { reg("c", 3), reg("a", 1), reg("b", 2) };
	struct memb_reg h[3] = { reg("b", 2), reg("c", 3), reg("a", 1) };
	struct memb_config none = { 0 }, x, y;
	struct memb_policy nojoin = pol3;
	char *jx, *jy;
	size_t lx, ly;

	nojoin.activate_joiners = false;
	assert_int_equal(memb_reconfigure(&none, g, 3, &nojoin, &x), 1);
	assert_int_equal(memb_reconfigure(&none, h, 3, &nojoin, &y), 1);
	/* the order of registrations does not matter */
	assert_int_equal(memb_config_format(&x, &jx, &lx), 0);
	assert_int_equal(memb_config_format(&y, &jy, &ly), 0);
	assert_string_equal(jx, jy);
	assert_int_equal(x.epoch, 1);
	assert_int_equal(x.n, 3);
	assert_string_equal(x.m[0].id, "a");
	assert_string_equal(x.m[2].id, "c");
	/* a first configuration activates everyone, whatever the policy */
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(x.m[i].state, MEMB_ACTIVE);
		assert_int_equal(x.m[i].since, 1);
	}
	/* the same registrations again: no change, no new epoch */
	memb_config_free(&y);
	assert_int_equal(memb_reconfigure(&x, h, 3, &nojoin, &y), 0);
	assert_int_equal(y.epoch, 1);
	free(jy);
	assert_int_equal(memb_config_format(&y, &jy, &ly), 0);
	assert_string_equal(jx, jy);
	/* nobody registered and no configuration: nothing to write */
	memb_config_free(&y);
	assert_int_equal(memb_reconfigure(&none, NULL, 0, &nojoin, &y), 0);
	assert_int_equal(y.epoch, 0);
	memb_config_free(&y);
	/* bad input */
	g[1] = reg("c", 9);
	assert_int_equal(memb_reconfigure(&x, g, 3, &nojoin, &y), RS_E_INVAL);
	nojoin.r = 0;
	assert_int_equal(memb_reconfigure(&none, h, 3, &nojoin, &y),
			 RS_E_INVAL);
	free(jx);
	free(jy);
	memb_config_free(&x);
	memb_config_free(&y);
}

/* The replica sets of many sampled keys under two configurations. */
#define SAMPLES 20000

static void replica_sets(const struct memb_config *c, unsigned (*sets)[8],
			 unsigned *nsets, unsigned r_override)
{
	struct memb_placement *p;
	struct memb_config v;

	assert_int_equal(memb_config_copy(&v, c), 0);
	if (r_override)
		v.r = r_override;
	assert_int_equal(memb_placement_new(&p, &v), 0);
	for (uint64_t k = 0; k < SAMPLES; k++)
		nsets[k] = memb_replicas(p, memb_key_hash(k * 7919 + 13),
					 sets[k]);
	memb_placement_free(&p);
	memb_config_free(&v);
}

static void fail_over_r(unsigned r)
{
	struct memb_policy p = pol3;
	struct memb_config a, b;
	struct memb_reg *g = regs_n(5);
	unsigned (*before)[8] = calloc(SAMPLES, sizeof(*before));
	unsigned (*after)[8] = calloc(SAMPLES, sizeof(*after));
	unsigned *nb = calloc(SAMPLES, sizeof(*nb));
	unsigned *na = calloc(SAMPLES, sizeof(*na));
	unsigned dead, moved = 0, promoted = 0;

	p.r = r;
	boot(&a, 5, &p);
	/* n0002 dies: its registration is gone */
	g[2] = g[4];
	assert_int_equal(memb_reconfigure(&a, g, 4, &p, &b), 1);
	assert_int_equal(b.epoch, 2);
	dead = 2;
	assert_int_equal(b.m[dead].state, MEMB_DOWN);
	assert_int_equal(b.m[dead].since, 2);
	for (size_t i = 0; i < 5; i++)
		if (i != dead) {
			assert_int_equal(b.m[i].state, MEMB_ACTIVE);
			assert_int_equal(b.m[i].since, 1);
		}
	/* old successor lists one longer: the new list is the old one
	 * without the dead node, the next successor moving up */
	replica_sets(&a, before, nb, r + 1);
	replica_sets(&b, after, na, 0);
	for (size_t k = 0; k < SAMPLES; k++) {
		unsigned want[8], nw = 0;

		for (unsigned i = 0; i < nb[k] && nw < r; i++)
			if (before[k][i] != dead)
				want[nw++] = before[k][i];
		assert_int_equal(na[k], nw);
		assert_int_equal(na[k], r < 4 ? r : 4);
		assert_memory_equal(after[k], want, nw * sizeof(unsigned));
		for (unsigned i = 0; i < na[k]; i++)
			assert_int_not_equal(after[k][i], dead);
		if (before[k][0] == dead) {
			promoted++;
			assert_int_equal(after[k][0], before[k][1]);
		}
		for (unsigned i = 0; i < r; i++)
			if (before[k][i] == dead)
				moved++;
	}
	/* about a fifth of the keys had the dead node as primary */
	assert_true(promoted > SAMPLES / 10 && promoted < SAMPLES * 3 / 10);
	assert_true(moved > 0);
	free(before);
	free(after);
	free(nb);
	free(na);
	free(g);
	memb_config_free(&a);
	memb_config_free(&b);
}

/* A key's replica set stays (memb_set_kept) exactly when the member was
 * its primary and no member of the set left it: the same configuration
 * again, one where a member died, one where a member restarted (same id,
 * another incarnation: another member). */
static void set_kept(void **state)
{
	struct memb_policy p = pol3;
	struct memb_config a, b, c;
	struct memb_placement *pa, *pb, *pc;
	struct memb_reg *g = regs_n(5);
	int *same, *died, *restarted;
	size_t kept = 0;

	(void)state;
	p.r = 2;
	boot(&a, 5, &p);
	g[2] = g[4];	/* n0002 dies */
	assert_int_equal(memb_reconfigure(&a, g, 4, &p, &b), 1);
	assert_int_equal(memb_config_copy(&c, &a), 0);
	c.m[1].inc += 100;	/* n0001 restarted */
	assert_int_equal(memb_placement_new(&pa, &a), 0);
	assert_int_equal(memb_placement_new(&pb, &b), 0);
	assert_int_equal(memb_placement_new(&pc, &c), 0);
	assert_int_equal(memb_member_map(&a, &a, &same), 0);
	assert_int_equal(memb_member_map(&a, &b, &died), 0);
	assert_int_equal(memb_member_map(&a, &c, &restarted), 0);
	assert_int_equal(died[2], -1);
	assert_int_equal(restarted[1], -1);
	assert_int_equal(same[3], 3);
	for (uint64_t k = 0; k < SAMPLES; k++) {
		uint64_t h = memb_key_hash(k * 7919 + 13);
		unsigned set[MEMB_MAX_R], n = memb_replicas(pa, h, set);
		bool has2 = false, has1 = false;

		for (unsigned i = 0; i < n; i++) {
			has2 |= set[i] == 2;
			has1 |= set[i] == 1;
		}
		for (int self = 0; self < 5; self++) {
			bool prim = (int)set[0] == self;

			assert_int_equal(memb_set_kept(pa, same, self, pa, h),
					 prim);
			assert_int_equal(memb_set_kept(pa, died, self, pb, h),
					 prim && !has2);
			assert_int_equal(memb_set_kept(pa, restarted, self, pc,
						       h), prim && !has1);
			kept += memb_set_kept(pa, died, self, pb, h);
		}
	}
	/* the keys the dead node backed up or led are not kept; the rest */
	assert_true(kept > SAMPLES / 2 && kept < SAMPLES);
	free(same);
	free(died);
	free(restarted);
	memb_placement_free(&pa);
	memb_placement_free(&pb);
	memb_placement_free(&pc);
	memb_config_free(&a);
	memb_config_free(&b);
	memb_config_free(&c);
	free(g);
}

static void fail_over(void **state)
{
	for (unsigned r = 1; r <= 3; r++)
		fail_over_r(r);
}

static void join_r(unsigned r, bool activate)
{
	struct memb_policy p = pol3;
	struct memb_config a, b;
	struct memb_reg *g = regs_n(5);
	unsigned (*before)[8] = calloc(SAMPLES, sizeof(*before));
	unsigned (*after)[8] = calloc(SAMPLES, sizeof(*after));
	unsigned *nb = calloc(SAMPLES, sizeof(*nb));
	unsigned *na = calloc(SAMPLES, sizeof(*na));
	unsigned primary_new = 0;
	unsigned newi = 4; /* index of n0004 in b */

	p.r = r;
	p.activate_joiners = activate;
	boot(&a, 4, &p);
	assert_int_equal(memb_reconfigure(&a, g, 5, &p, &b), 1);
	assert_int_equal(b.epoch, 2);
	assert_int_equal(b.n, 5);
	assert_int_equal(b.m[newi].state, activate ? MEMB_ACTIVE :
						     MEMB_JOINING);
	assert_int_equal(b.m[newi].since, 2);
	replica_sets(&a, before, nb, 0);
	replica_sets(&b, after, na, 0);
	for (size_t k = 0; k < SAMPLES; k++) {
		unsigned rest[8], nr = 0;

		if (!activate) { /* a joining node is in no replica set */
			assert_int_equal(na[k], nb[k]);
			assert_memory_equal(after[k], before[k],
					    nb[k] * sizeof(unsigned));
			continue;
		}
		/* the new list without the new node is a prefix of the old */
		for (unsigned i = 0; i < na[k]; i++)
			if (after[k][i] != newi)
				rest[nr++] = after[k][i];
		assert_true(nr == na[k] || nr == na[k] - 1);
		assert_memory_equal(rest, before[k], nr * sizeof(unsigned));
		primary_new += after[k][0] == newi;
	}
	if (activate) /* about a fifth of the keys now start at the new node */
		assert_true(primary_new > SAMPLES / 10 &&
			    primary_new < SAMPLES * 3 / 10);
	free(before);
	free(after);
	free(nb);
	free(na);
	free(g);
	memb_config_free(&a);
	memb_config_free(&b);
}

static void join(void **state)
{
	for (unsigned r = 1; r <= 3; r++) {
		join_r(r, true);
		join_r(r, false);
	}
}

static void leave_rejoin_restart(void **state)
{
	struct memb_config a, b, c, d, e;
	struct memb_reg *g = regs_n(3);

	boot(&a, 3, &pol3);
	/* n0001 leaves */
	g[1] = g[2];
	assert_int_equal(memb_reconfigure(&a, g, 2, &pol3, &b), 1);
	assert_int_equal(find(&b, "n0001")->state, MEMB_DOWN);
	/* still gone: no change */
	assert_int_equal(memb_reconfigure(&b, g, 2, &pol3, &c), 0);
	assert_int_equal(c.epoch, 2);
	memb_config_free(&c);
	/* it comes back (the same process after an outage): it joins anew,
	 * at another address */
	free(g);
	g = regs_n(3);
	snprintf(g[1].addr, sizeof(g[1].addr), "10.0.0.9:1");
	assert_int_equal(memb_reconfigure(&b, g, 3, &pol3, &c), 1);
	assert_int_equal(c.epoch, 3);
	assert_int_equal(find(&c, "n0001")->state, MEMB_ACTIVE);
	assert_int_equal(find(&c, "n0001")->since, 3);
	assert_string_equal(find(&c, "n0001")->addr, "10.0.0.9:1");
	assert_int_equal(find(&c, "n0000")->since, 1);
	/* n0002 restarts fast (new incarnation, lease never lapsed): its
	 * memory is empty, so it is a new member, not the old one */
	g[2].inc = 777;
	assert_int_equal(memb_reconfigure(&c, g, 3, &pol3, &d), 1);
	assert_int_equal(d.epoch, 4);
	assert_int_equal(find(&d, "n0002")->since, 4);
	assert_true(find(&d, "n0002")->inc == 777);
	/* only an address change: same member, new epoch */
	snprintf(g[0].addr, sizeof(g[0].addr), "10.0.0.8:2");
	assert_int_equal(memb_reconfigure(&d, g, 3, &pol3, &e), 1);
	assert_int_equal(find(&e, "n0000")->since, 1);
	assert_int_equal(find(&e, "n0000")->state, MEMB_ACTIVE);
	free(g);
	memb_config_free(&a);
	memb_config_free(&b);
	memb_config_free(&c);
	memb_config_free(&d);
	memb_config_free(&e);
}

/* ---- the last complete holder (docs/replication.md) ---- */

struct kept_log {
	char id[8][MEMB_ID_MAX + 1];
	size_t ranges[8];
	size_t n;
};

static void kept_cb(void *arg, const struct memb_member *m, size_t ranges)
{
	struct kept_log *k = arg;

	assert_true(k->n < 8);
	snprintf(k->id[k->n], sizeof(k->id[0]), "%s", m->id);
	k->ranges[k->n++] = ranges;
}

/* Ranges of c's active ring whose replica set is exactly {a, b}. */
static size_t ranges_of_pair(const struct memb_config *c, const char *a,
			     const char *b)
{
	struct memb_placement *p;
	unsigned set[MEMB_MAX_R];
	size_t k = 0;

	assert_int_equal(memb_placement_new(&p, c), 0);
	for (size_t i = 0; i < memb_ranges(p); i++) {
		uint64_t lo, hi;
		unsigned n = memb_range(p, i, &lo, &hi, set);
		bool ha = false, hb = false;

		for (unsigned j = 0; j < n; j++) {
			ha |= !strcmp(c->m[set[j]].id, a);
			hb |= !strcmp(c->m[set[j]].id, b);
		}
		k += n == 2 && ha && hb;
	}
	memb_placement_free(&p);
	return k;
}

/* Two of three members (r 2) lose their registrations at once: without
 * the rule both go down, and the ranges only they held would be led by a
 * member that never had them; with it, both stay (their keys unavailable)
 * until they come back, are forgotten, or a sure member holds each range. */
static void last_holder(void **state)
{
	struct memb_policy p = { .r = 2, .vnodes = 160,
				 .activate_joiners = true };
	struct memb_config a, b, c;
	struct memb_reg *g = regs_n(3), only[2];
	struct kept_log k = { 0 };
	struct memb_ref fg;

	boot(&a, 3, &p);
	for (size_t i = 0; i < 3; i++)
		g[i].synced = 1;
	assert_true(ranges_of_pair(&a, "n0000", "n0001") > 0);
	/* the rule off: both down at once, whatever they held */
	only[0] = g[2];
	assert_int_equal(memb_reconfigure(&a, only, 1, &p, &b), 1);
	assert_int_equal(find(&b, "n0000")->state, MEMB_DOWN);
	assert_int_equal(find(&b, "n0001")->state, MEMB_DOWN);
	memb_config_free(&b);
	/* on: both kept, nothing changes, both reported */
	p.keep_last = true;
	p.on_kept = kept_cb;
	p.kept_arg = &k;
	assert_int_equal(memb_reconfigure(&a, only, 1, &p, &b), 0);
	assert_int_equal(b.epoch, 1);
	assert_int_equal(find(&b, "n0000")->state, MEMB_ACTIVE);
	assert_int_equal(find(&b, "n0001")->state, MEMB_ACTIVE);
	memb_config_free(&b);
	assert_int_equal(k.n, 2);
	assert_string_equal(k.id[0], "n0000");
	assert_string_equal(k.id[1], "n0001");
	assert_int_equal(k.ranges[0], ranges_of_pair(&a, "n0000", "n0001"));
	assert_int_equal(k.ranges[1], k.ranges[0]);
	/* one gone, the others synced in the epoch: down as before */
	k.n = 0;
	only[0] = g[1];
	only[1] = g[2];
	assert_int_equal(memb_reconfigure(&a, only, 2, &p, &b), 1);
	assert_int_equal(find(&b, "n0000")->state, MEMB_DOWN);
	assert_int_equal(k.n, 0);
	memb_config_free(&b);
	/* ... but not while a member of its sets has not synced the epoch */
	only[0].synced = 0;
	assert_int_equal(memb_reconfigure(&a, only, 2, &p, &b), 0);
	assert_int_equal(find(&b, "n0000")->state, MEMB_ACTIVE);
	assert_int_equal(k.n, 1);
	memb_config_free(&b);
	/* forgotten (its incarnation): down; another incarnation named:
	 * still kept */
	snprintf(fg.id, sizeof(fg.id), "n0000");
	fg.inc = 2;
	p.forget = &fg;
	p.nforget = 1;
	assert_int_equal(memb_reconfigure(&a, only, 2, &p, &b), 0);
	memb_config_free(&b);
	fg.inc = 1;
	assert_int_equal(memb_reconfigure(&a, only, 2, &p, &b), 1);
	assert_int_equal(find(&b, "n0000")->state, MEMB_DOWN);
	memb_config_free(&b);
	p.nforget = 0;
	/* back with another incarnation (restarted, its memory empty):
	 * nothing to keep, it joins anew; n0001, gone too, is now the
	 * last holder of the ranges the two shared */
	only[0] = g[0];
	only[0].inc = 99;
	only[1] = g[2];
	assert_int_equal(memb_reconfigure(&a, only, 2, &p, &b), 1);
	assert_true(find(&b, "n0000")->inc == 99);
	assert_int_equal(find(&b, "n0000")->since, 2);
	assert_int_equal(find(&b, "n0001")->state, MEMB_ACTIVE);
	assert_int_equal(find(&b, "n0001")->since, 1);
	memb_config_free(&b);
	/* a failure, then a second one before the survivor synced the new
	 * epoch: kept until it did */
	only[0] = g[1];
	only[1] = g[2];
	assert_int_equal(memb_reconfigure(&a, only, 2, &p, &b), 1);
	assert_int_equal(b.epoch, 2);
	only[0] = g[2];		/* n0001 gone, n0002 synced 1 only */
	k.n = 0;
	assert_int_equal(memb_reconfigure(&b, only, 1, &p, &c), 0);
	assert_int_equal(find(&c, "n0001")->state, MEMB_ACTIVE);
	assert_int_equal(k.n, 1);
	memb_config_free(&c);
	only[0].synced = 2;
	assert_int_equal(memb_reconfigure(&b, only, 1, &p, &c), 1);
	assert_int_equal(find(&c, "n0001")->state, MEMB_DOWN);
	memb_config_free(&c);
	memb_config_free(&b);
	/* r 1: every member is the only holder of its ranges */
	memb_config_free(&a);
	p.r = 1;
	boot(&a, 3, &p);
	only[0] = g[1];
	only[1] = g[2];
	only[0].synced = only[1].synced = 1;
	assert_int_equal(memb_reconfigure(&a, only, 2, &p, &b), 0);
	memb_config_free(&b);
	free(g);
	memb_config_free(&a);
}

static void fewer_than_r(void **state)
{
	struct memb_config a, b;
	struct memb_placement *p;
	struct memb_reg *g = regs_n(2);
	unsigned out[MEMB_MAX_R];

	boot(&a, 2, &pol3);
	assert_int_equal(memb_placement_new(&p, &a), 0);
	for (uint64_t k = 0; k < 1000; k++) {
		assert_int_equal(memb_replicas(p, memb_key_hash(k), out), 2);
		assert_int_not_equal(out[0], out[1]);
	}
	assert_int_equal(memb_ranges(p), 2 * 160);
	memb_placement_free(&p);
	/* both gone: every replica set is empty */
	assert_int_equal(memb_reconfigure(&a, g, 0, &pol3, &b), 1);
	assert_int_equal(memb_placement_new(&p, &b), 0);
	assert_int_equal(memb_replicas(p, 42, out), 0);
	assert_int_equal(memb_ranges(p), 0);
	memb_placement_free(&p);
	free(g);
	memb_config_free(&a);
	memb_config_free(&b);
}

static void capacity(void **state)
{
	struct memb_config a, b, c;
	struct memb_reg *g = regs_n(MEMB_MAX_NODES + 10);
	struct memb_reg *h = regs_n(MEMB_MAX_NODES + 10);

	/* more registrations than members fit: the highest ids wait */
	boot(&a, MEMB_MAX_NODES, &pol3);
	assert_int_equal(memb_reconfigure(&a, g, MEMB_MAX_NODES + 10, &pol3,
					  &b), 0);
	/* 5 die: room for the first 5 newcomers, in id order, after the
	 * dead are forgotten */
	memmove(&h[0], &h[5], (MEMB_MAX_NODES + 5) * sizeof(*h));
	assert_int_equal(memb_reconfigure(&a, h, MEMB_MAX_NODES + 5, &pol3,
					  &c), 1);
	assert_int_equal(c.n, MEMB_MAX_NODES);
	assert_null(find(&c, "n0000"));
	assert_non_null(find(&c, "n1028"));
	assert_null(find(&c, "n1029"));
	free(g);
	free(h);
	memb_config_free(&a);
	memb_config_free(&b);
	memb_config_free(&c);
}

/* ---- against the store ---- */

static void put_reg(struct coord *c, const struct memb_reg *g, int64_t lease)
{
	char key[COORD_KEY_MAX + 1], *v;
	size_t len;

	assert_int_equal(memb_key(key, "c1", "nodes/"), 0);
	strcat(key, g->id);
	assert_int_equal(memb_reg_format(g, &v, &len), 0);
	assert_int_equal(coord_put(c, key, v, len, lease, NULL), 0);
	free(v);
}

static void cas_two_deciders(void **state)
{
	struct coord *c;
	struct memb_config cur, na, nb, got;
	struct memb_reg *g = regs_n(3), *live;
	char key[COORD_KEY_MAX + 1], *ja, *jb;
	size_t nlive, la, lb;
	int64_t mod, mod2;
	uint64_t epoch;

	assert_int_equal(coord_mem_new(&c), 0);
	for (int i = 0; i < 3; i++)
		put_reg(c, &g[i], 0);
	assert_int_equal(memb_decide(c, "c1", &pol3, &epoch), 1);
	assert_int_equal(epoch, 1);
	/* n0003 registers; two deciders read the same state */
	g = realloc(g, 4 * sizeof(*g));
	g[3] = reg("n0003", 4);
	put_reg(c, &g[3], 0);
	assert_int_equal(memb_read_config(c, "c1", &cur, &mod, NULL), 0);
	assert_int_equal(memb_read_regs(c, "c1", &live, &nlive, NULL), 0);
	assert_int_equal(nlive, 4);
	assert_int_equal(memb_reconfigure(&cur, live, nlive, &pol3, &na), 1);
	assert_int_equal(memb_reconfigure(&cur, live, nlive, &pol3, &nb), 1);
	assert_int_equal(memb_key(key, "c1", "config"), 0);
	assert_int_equal(memb_config_format(&na, &ja, &la), 0);
	assert_int_equal(memb_config_format(&nb, &jb, &lb), 0);
	/* exactly one wins */
	assert_int_equal(coord_cas(c, key, mod, ja, la, 0, NULL), 1);
	assert_int_equal(coord_cas(c, key, mod, jb, lb, 0, NULL), 0);
	/* the loser decides again: nothing left to change */
	assert_int_equal(memb_decide(c, "c1", &pol3, &epoch), 0);
	assert_int_equal(memb_read_config(c, "c1", &got, &mod2, NULL), 0);
	assert_int_equal(got.epoch, 2);
	assert_true(mod2 > mod);
	assert_int_equal(got.n, 4);
	/* a corrupt configuration is not overwritten */
	assert_int_equal(coord_put(c, key, "{}", 2, 0, NULL), 0);
	assert_int_equal(memb_decide(c, "c1", &pol3, &epoch), RS_E_CORRUPT);
	free(ja);
	free(jb);
	free(live);
	free(g);
	memb_config_free(&cur);
	memb_config_free(&na);
	memb_config_free(&nb);
	memb_config_free(&got);
	coord_close(&c);
}

/* ---- drain (docs/replication.md, "Removing a node") ---- */

static const struct memb_policy pol2 = { .r = 2, .vnodes = 160 };

/* One step that must change (1) or not (0); *cur becomes the result. */
static void step(struct memb_config *cur, const struct memb_reg *g, size_t n,
		 int want)
{
	struct memb_config nx;

	assert_int_equal(memb_reconfigure(cur, g, n, &pol2, &nx), want);
	memb_config_free(cur);
	*cur = nx;
}

static void sync_all(struct memb_reg *g, size_t n, uint64_t epoch)
{
	for (size_t i = 0; i < n; i++)
		g[i].synced = epoch;
}

static void drain_steps(void **state)
{
	struct memb_reg *g = regs_n(5);
	struct memb_config c;

	(void)state;
	boot(&c, 4, &pol2);
	/* n0001 asked to drain: LEAVING, the others stay */
	g[1].drain = true;
	step(&c, g, 4, 1);
	assert_int_equal(c.epoch, 2);
	assert_int_equal(find(&c, "n0001")->state, MEMB_LEAVING);
	assert_int_equal(find(&c, "n0001")->since, 2);
	assert_string_equal(memb_state_name(MEMB_LEAVING), "leaving");
	/* until every ACTIVE member synced in epoch 2, nothing moves */
	step(&c, g, 4, 0);
	g[0].synced = g[2].synced = 2;
	step(&c, g, 4, 0);
	g[3].synced = 1;	/* an older epoch does not count */
	step(&c, g, 4, 0);
	assert_int_equal(find(&c, "n0001")->state, MEMB_LEAVING);
	/* the leaver's own flag is not needed */
	g[3].synced = 2;
	step(&c, g, 4, 1);
	assert_int_equal(c.epoch, 3);
	assert_int_equal(find(&c, "n0001")->state, MEMB_DOWN);
	assert_int_equal(find(&c, "n0001")->since, 3);
	/* still registered with the request: it stays out */
	step(&c, g, 4, 0);
	/* restarted under the same id (another incarnation): joins */
	g[1].inc = 77;
	g[1].drain = false;
	step(&c, g, 4, 1);
	assert_int_equal(find(&c, "n0001")->state, MEMB_JOINING);
	/* a node that is not a member and is asked to drain never joins */
	g[4].drain = true;
	step(&c, g, 5, 0);
	assert_null(find(&c, "n0004"));
	/* a LEAVING member whose registration goes is DOWN at once */
	g[2].drain = true;
	step(&c, g, 4, 1);
	assert_int_equal(find(&c, "n0002")->state, MEMB_LEAVING);
	g[2] = g[3];
	step(&c, g, 3, 1);
	assert_int_equal(find(&c, "n0002")->state, MEMB_DOWN);
	memb_config_free(&c);
	free(g);
}

static void drain_cancel_and_last(void **state)
{
	struct memb_reg *g = regs_n(3);
	struct memb_config c;

	(void)state;
	boot(&c, 2, &pol2);
	/* both asked: the last ACTIVE member without a request is kept,
	 * so neither leaves */
	g[0].drain = g[1].drain = true;
	step(&c, g, 2, 0);
	assert_int_equal(find(&c, "n0000")->state, MEMB_ACTIVE);
	/* one asked: it leaves; cancelled: ACTIVE again */
	g[0].drain = false;
	step(&c, g, 2, 1);
	assert_int_equal(find(&c, "n0001")->state, MEMB_LEAVING);
	g[1].drain = false;
	step(&c, g, 2, 1);
	assert_int_equal(find(&c, "n0001")->state, MEMB_ACTIVE);
	assert_int_equal(c.epoch, 3);
	/* a joiner that has not copied its ranges holds the leaver back;
	 * once it synced, it becomes ACTIVE and the leaver DOWN together */
	g[1].drain = true;
	step(&c, g, 2, 1);	/* epoch 4: n0001 leaving */
	step(&c, g, 3, 1);	/* epoch 5: n0002 joining */
	assert_int_equal(find(&c, "n0002")->state, MEMB_JOINING);
	sync_all(g, 2, 5);
	step(&c, g, 3, 0);
	g[2].synced = 5;
	step(&c, g, 3, 1);
	assert_int_equal(c.epoch, 6);
	assert_int_equal(find(&c, "n0002")->state, MEMB_ACTIVE);
	assert_int_equal(find(&c, "n0001")->state, MEMB_DOWN);
	memb_config_free(&c);
	free(g);
}

/* A LEAVING member serves (active ring) but is out of the target ring,
 * whose sets are the active ones without it, the next member appended. */
static void drain_rings(void **state)
{
	struct memb_reg *g = regs_n(5);
	struct memb_placement *act, *tgt, *before;
	struct memb_config c, c0;
	unsigned a[MEMB_MAX_R], t[MEMB_MAX_R], na, nt, gained = 0;
	int *map;

	(void)state;
	boot(&c, 5, &pol2);
	assert_int_equal(memb_config_copy(&c0, &c), 0);
	g[3].drain = true;
	step(&c, g, 5, 1);
	assert_int_equal(memb_placement_new(&act, &c), 0);
	assert_int_equal(memb_placement_target(&tgt, &c), 0);
	assert_int_equal(memb_placement_new(&before, &c0), 0);
	for (uint64_t k = 0; k < SAMPLES; k++) {
		uint64_t h = memb_key_hash(k * 7919 + 13);
		unsigned b[MEMB_MAX_R], nb = memb_replicas(before, h, b), w = 0;

		na = memb_replicas(act, h, a);
		nt = memb_replicas(tgt, h, t);
		/* the active ring is the one before the drain */
		assert_int_equal(na, nb);
		assert_memory_equal(a, b, na * sizeof(*a));
		assert_int_equal(nt, 2);
		for (unsigned i = 0; i < nt; i++)
			assert_int_not_equal(t[i], 3);
		/* without the leaver, the target set keeps the order */
		for (unsigned i = 0; i < na; i++)
			if (a[i] != 3) {
				assert_int_equal(t[w], a[i]);
				w++;
			}
		gained += w < nt;
	}
	assert_true(gained > SAMPLES / 5 && gained < SAMPLES * 3 / 5);
	/* the leaver still maps to itself: no key's set lost a member */
	assert_int_equal(memb_member_map(&c0, &c, &map), 0);
	assert_int_equal(map[3], 3);
	free(map);
	memb_placement_free(&act);
	memb_placement_free(&tgt);
	memb_placement_free(&before);
	memb_config_free(&c0);
	memb_config_free(&c);
	free(g);
}

/* Members of c in the rings: serving (active ring) and targeted. */
static void ring_sizes(const struct memb_config *c, unsigned *act,
		       unsigned *tgt)
{
	*act = *tgt = 0;
	for (size_t i = 0; i < c->n; i++) {
		*act += memb_serves(c->m[i].state);
		*tgt += memb_targeted(c->m[i].state);
	}
}

/*
 * Check c's rings over sampled keys: every active set has min(r, serving
 * members) members, at least one (no range without a replica); every
 * target set min(r, targeted members), none of them LEAVING; and, when
 * prev_tgt is given (leavers went down in this step), every active set
 * is the target set of the epoch before (members that hold it
 * completely), as ids.
 */
static void check_rings(const struct memb_config *c,
			const struct memb_config *prev,
			const struct memb_placement *prev_tgt)
{
	struct memb_placement *act, *tgt;
	unsigned nact, ntgt;

	ring_sizes(c, &nact, &ntgt);
	assert_true(nact > 0);
	assert_int_equal(memb_placement_new(&act, c), 0);
	assert_int_equal(memb_placement_target(&tgt, c), 0);
	for (uint64_t k = 0; k < SAMPLES / 10; k++) {
		uint64_t h = memb_key_hash(k * 7919 + 13);
		unsigned a[MEMB_MAX_R], t[MEMB_MAX_R], p[MEMB_MAX_R];
		unsigned na = memb_replicas(act, h, a);
		unsigned nt = ntgt ? memb_replicas(tgt, h, t) : 0;

		assert_int_equal(na, nact < c->r ? nact : c->r);
		assert_int_equal(nt, ntgt < c->r ? ntgt : c->r);
		for (unsigned i = 0; i < nt; i++)
			assert_int_not_equal(c->m[t[i]].state, MEMB_LEAVING);
		if (!prev_tgt)
			continue;
		assert_int_equal(memb_replicas(prev_tgt, h, p), na);
		for (unsigned i = 0; i < na; i++)
			assert_string_equal(c->m[a[i]].id, prev->m[p[i]].id);
	}
	memb_placement_free(&act);
	memb_placement_free(&tgt);
}

/* step() that also checks the rings; `ends`: leavers go down in it. */
static void step_checked(struct memb_config *c, const struct memb_reg *g,
			 size_t n, int want, bool ends)
{
	struct memb_placement *before = NULL;
	struct memb_config prev;

	assert_int_equal(memb_config_copy(&prev, c), 0);
	if (ends)
		assert_int_equal(memb_placement_target(&before, &prev), 0);
	step(c, g, n, want);
	check_rings(c, &prev, before);
	memb_placement_free(&before);
	memb_config_free(&prev);
}

/* Several members drained at once and one after the other: each leaves
 * only when every targeted member synced the current epoch, r is kept
 * while enough members stay, no range is ever without a replica, and
 * leavers that go down hand over to the target ring of the epoch before. */
static void drain_several(void **state)
{
	struct memb_reg *g = regs_n(6);
	struct memb_config c;

	(void)state;
	boot(&c, 6, &pol2);
	/* two in the same epoch */
	g[1].drain = g[3].drain = true;
	step_checked(&c, g, 6, 1, false);
	assert_int_equal(find(&c, "n0001")->state, MEMB_LEAVING);
	assert_int_equal(find(&c, "n0003")->state, MEMB_LEAVING);
	sync_all(g, 6, 2);
	g[4].synced = 1;	/* one member has not copied yet */
	step_checked(&c, g, 6, 0, false);
	g[4].synced = 2;
	step_checked(&c, g, 6, 1, true);	/* epoch 3: both down */
	assert_int_equal(c.epoch, 3);
	assert_int_equal(find(&c, "n0001")->state, MEMB_DOWN);
	assert_int_equal(find(&c, "n0003")->state, MEMB_DOWN);
	/* one after the other: the second asks while the first leaves;
	 * the synced epoch of the first does not end the second */
	g[0].drain = true;
	step_checked(&c, g, 6, 1, false);	/* 4: n0000 leaving */
	sync_all(g, 6, 4);
	g[2].drain = true;
	/* the first hands over and the second starts in one step: the new
	 * active ring is the target ring of epoch 4 (n0002 still in it) */
	step_checked(&c, g, 6, 1, true);	/* 5 */
	assert_int_equal(find(&c, "n0000")->state, MEMB_DOWN);
	assert_int_equal(find(&c, "n0002")->state, MEMB_LEAVING);
	step_checked(&c, g, 6, 0, false);	/* synced 4 is not 5 */
	sync_all(g, 6, 5);
	step_checked(&c, g, 6, 1, true);	/* 6: n0002 down */
	assert_int_equal(find(&c, "n0002")->state, MEMB_DOWN);
	/* two left, r 2: the last member not asked to drain is kept, so
	 * with both asked neither leaves */
	g[4].drain = g[5].drain = true;
	step_checked(&c, g, 6, 0, false);
	/* one asked and the other dies: the leaver keeps serving (the only
	 * replica left) and does not go down while no member stays */
	g[4].drain = false;
	step_checked(&c, g, 6, 1, false);	/* 7: n0005 leaving */
	assert_int_equal(find(&c, "n0005")->state, MEMB_LEAVING);
	g[4] = g[5];				/* n0004's registration goes */
	sync_all(g, 5, 7);
	step_checked(&c, g, 5, 1, false);	/* 8: n0004 down */
	assert_int_equal(find(&c, "n0004")->state, MEMB_DOWN);
	assert_int_equal(find(&c, "n0005")->state, MEMB_LEAVING);
	sync_all(g, 5, 8);
	step_checked(&c, g, 5, 0, false);
	memb_config_free(&c);
	free(g);
}

/* What a node keeps (the sweep of srv_sweep.c frees the rest): the keys
 * of which it is in the active or the target set; a leaving member its
 * active ranges, a joining one its target ranges, a member down (or
 * none) nothing; every member of a key's sets keeps it. */
static void keeps(void **state)
{
	struct memb_reg *g = regs_n(5);
	struct memb_placement *act, *tgt;
	struct memb_config c;
	unsigned kept[5] = { 0 }, freed = 0;

	(void)state;
	boot(&c, 4, &pol2);
	g[1].drain = true;
	step(&c, g, 4, 1);			/* n0001 leaving */
	step(&c, g, 5, 1);			/* n0004 joining */
	g[3] = g[4];				/* n0003 dies */
	step(&c, g, 4, 1);
	assert_int_equal(find(&c, "n0001")->state, MEMB_LEAVING);
	assert_int_equal(find(&c, "n0004")->state, MEMB_JOINING);
	assert_int_equal(find(&c, "n0003")->state, MEMB_DOWN);
	assert_int_equal(memb_placement_new(&act, &c), 0);
	assert_int_equal(memb_placement_target(&tgt, &c), 0);
	for (uint64_t k = 0; k < SAMPLES / 4; k++) {
		uint64_t h = memb_key_hash(k * 7919 + 13);
		unsigned a[MEMB_MAX_R], t[MEMB_MAX_R];
		unsigned na = memb_replicas(act, h, a);
		unsigned nt = memb_replicas(tgt, h, t);

		for (int me = 0; me < (int)c.n; me++) {
			bool in = false;

			for (unsigned i = 0; i < na; i++)
				in |= (int)a[i] == me;
			for (unsigned i = 0; i < nt; i++)
				in |= (int)t[i] == me;
			assert_int_equal(memb_keeps(act, tgt, h, me), in);
			kept[me] += in;
			freed += !in;
		}
		assert_false(memb_keeps(act, tgt, h, -1));
		/* without a target ring: the active sets only */
		assert_int_equal(memb_keeps(act, NULL, h, (int)a[0]), true);
	}
	/* the down member keeps nothing; the leaver and the joiner keep
	 * some, not all; members of every set keep the key */
	assert_int_equal(kept[3], 0);
	assert_true(kept[1] > 0 && kept[1] < SAMPLES / 4);
	assert_true(kept[4] > 0 && kept[4] < SAMPLES / 4);
	assert_true(freed > 0);
	memb_placement_free(&act);
	memb_placement_free(&tgt);
	memb_config_free(&c);
	free(g);
}

/* Registration i's drain flag as memb_read_regs() sees it (of n). */
static bool drain_flag(struct coord *c, size_t n, size_t i)
{
	struct memb_reg *live;
	size_t nlive;
	bool v;

	assert_int_equal(memb_read_regs(c, "c1", &live, &nlive, NULL), 0);
	assert_int_equal(nlive, n);
	v = live[i].drain;
	free(live);
	return v;
}

/* One decision that changes the configuration; id's state after it. */
static enum memb_state decided(struct coord *c, const char *id)
{
	struct memb_config got;
	enum memb_state st;
	uint64_t epoch;
	int64_t mod;

	assert_int_equal(memb_decide(c, "c1", &pol2, &epoch), 1);
	assert_int_equal(memb_read_config(c, "c1", &got, &mod, NULL), 0);
	st = find(&got, id)->state;
	memb_config_free(&got);
	return st;
}

/* The request through the store: refused for what cannot be drained,
 * seen by memb_read_regs() for the incarnation it names, withdrawn. */
static void drain_request(void **state)
{
	struct memb_reg *g = regs_n(3);
	char key[COORD_KEY_MAX + 1];
	struct coord_kvs kv;
	struct coord *c;

	(void)state;
	assert_int_equal(coord_mem_new(&c), 0);
	for (int i = 0; i < 3; i++)
		put_reg(c, &g[i], 0);
	assert_int_equal(memb_drain_request(c, "c1", "n0000", false, false),
			 RS_E_INVAL);	/* no configuration yet */
	assert_int_equal(decided(c, "n0000"), MEMB_ACTIVE);
	assert_int_equal(memb_drain_request(c, "c1", "n0009", false, false),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "not an active member"));
	assert_int_equal(memb_drain_request(c, "c1", "bad id", false, false),
			 RS_E_INVAL);
	assert_int_equal(memb_drain_request(c, "c1", "n0001", false, false),
			 0);
	/* asked twice: no error, one request */
	assert_int_equal(memb_drain_request(c, "c1", "n0001", false, false),
			 0);
	/* r = 2: without n0001 and n0000 one member would hold copies */
	assert_int_equal(memb_drain_request(c, "c1", "n0000", false, false),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "fewer than r = 2"));
	assert_false(drain_flag(c, 3, 0));
	/* forced, it is taken; the last member not being drained never is */
	assert_int_equal(memb_drain_request(c, "c1", "n0000", false, true),
			 0);
	assert_int_equal(memb_drain_request(c, "c1", "n0002", false, true),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "last active member"));
	assert_true(drain_flag(c, 3, 0));
	assert_true(drain_flag(c, 3, 1));
	assert_false(drain_flag(c, 3, 2));
	assert_int_equal(memb_drain_request(c, "c1", "n0000", true, false), 0);
	assert_false(drain_flag(c, 3, 0));
	assert_int_equal(decided(c, "n0001"), MEMB_LEAVING);
	/* a restart (another incarnation) is not drained by the request */
	g[1].inc = 99;
	put_reg(c, &g[1], 0);
	assert_false(drain_flag(c, 3, 1));
	/* withdrawn: nothing is left of the requests */
	g[1].inc = 2;
	put_reg(c, &g[1], 0);
	assert_int_equal(memb_drain_request(c, "c1", "n0001", true, false), 0);
	assert_int_equal(memb_drain_request(c, "c1", "n0001", true, false), 0);
	assert_false(drain_flag(c, 3, 1));
	assert_int_equal(decided(c, "n0001"), MEMB_ACTIVE);
	assert_int_equal(memb_key(key, "c1", "drains"), 0);
	assert_int_equal(coord_range(c, key, false, &kv), 0);
	assert_int_equal(kv.n, 0);
	coord_kvs_free(&kv);
	/* garbage in the key drains nothing and is replaced */
	assert_int_equal(coord_put(c, key, "[1,", 3, 0, NULL), 0);
	assert_false(drain_flag(c, 3, 1));
	assert_int_equal(memb_drain_request(c, "c1", "n0001", false, false),
			 0);
	assert_true(drain_flag(c, 3, 1));
	free(g);
	coord_close(&c);
}

/* A store that runs another drain request just before the first
 * compare-and-swap on the drains key: the race of two operators. */
struct racing {
	struct coord base;
	struct coord *in;
	const char *other;	/* the id the other operator drains */
	bool force;		/* and whether it forces */
	int raced, other_ret;
};

static int rc_range(struct coord *c, const char *k, bool p,
		    struct coord_kvs *o)
{
	return coord_range(((struct racing *)c)->in, k, p, o);
}

static int rc_put(struct coord *c, const char *k, const void *v, size_t n,
		  int64_t l, int64_t *rev)
{
	return coord_put(((struct racing *)c)->in, k, v, n, l, rev);
}

static int rc_del(struct coord *c, const char *k, bool p, int64_t *rev)
{
	return coord_del(((struct racing *)c)->in, k, p, rev);
}

static int rc_cas(struct coord *c, const char *k, int64_t e, const void *v,
		  size_t n, int64_t l, int64_t *rev)
{
	struct racing *r = (struct racing *)c;
	size_t kl = strlen(k);

	if (!r->raced++ && kl > 7 && !strcmp(k + kl - 7, "/drains"))
		r->other_ret = memb_drain_request(r->in, "c1", r->other,
						  false, r->force);
	return coord_cas(r->in, k, e, v, n, l, rev);
}

static void rc_destroy(struct coord *c)
{
	(void)c;
}

static const struct coord_ops racing_ops = {
	.name = "racing", .range = rc_range, .put = rc_put, .del = rc_del,
	.cas = rc_cas, .destroy = rc_destroy,
};

/* Two operators drain one member each of three (r = 2) at the same time:
 * each alone passes the floor; the compare-and-swap makes the second one
 * decide again, see the first, and be refused. */
static void drain_request_race(void **state)
{
	struct memb_reg *g = regs_n(3);
	struct racing r = { .base.ops = &racing_ops, .other = "n0000" };
	struct coord *c = &r.base;

	(void)state;
	assert_int_equal(coord_mem_new(&r.in), 0);
	for (int i = 0; i < 3; i++)
		put_reg(r.in, &g[i], 0);
	assert_int_equal(decided(r.in, "n0000"), MEMB_ACTIVE);
	assert_int_equal(memb_drain_request(c, "c1", "n0001", false, false),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "fewer than r = 2"));
	/* the other request landed in the race; the redo saw it and was
	 * refused before a second compare-and-swap */
	assert_int_equal(r.raced, 1);
	assert_int_equal(r.other_ret, 0);
	assert_true(drain_flag(r.in, 3, 0));
	assert_false(drain_flag(r.in, 3, 1));
	/* a withdrawal races a forced request: the request lands first,
	 * the withdrawal is redone and keeps it */
	r.raced = 0;
	r.other = "n0001";
	r.force = true;
	assert_int_equal(memb_drain_request(c, "c1", "n0000", true, false), 0);
	assert_true(r.raced >= 2);
	assert_int_equal(r.other_ret, 0);
	assert_false(drain_flag(r.in, 3, 0));
	assert_true(drain_flag(r.in, 3, 1));
	coord_close(&r.in);
	free(g);
}

static atomic_uint log_lines; /* the agent thread counts, the test reads */

static void count_log(void *arg, const char *line)
{
	log_lines++;
	if (getenv("RS_TEST_VERBOSE"))
		fprintf(stderr, "agent %s: %s\n", (const char *)arg, line);
}

static struct memb_agent *agent(struct coord *c, const char *id)
{
	struct memb_agent_opts o = {
		.cluster = "c1", .id = id, .addr = "10.0.0.1:7471",
		.lease_s = 3, .decide = true, .policy = pol3,
		.log = count_log, .log_arg = (void *)id,
	};
	struct memb_agent *a;

	assert_int_equal(memb_agent_new(&a, c, &o), 0);
	return a;
}

static void config_of(struct coord *c, struct memb_config *out)
{
	int64_t mod;

	assert_int_equal(memb_read_config(c, "c1", out, &mod, NULL), 0);
}

static void agents_fake_clock(void **state)
{
	struct coord *ca, *cb;
	struct memb_agent *a, *b;
	struct memb_config cfg;
	int64_t t = 0;

	/* two agents on one store: the fake clock moves both */
	assert_int_equal(coord_mem_new(&ca), 0);
	cb = ca;
	a = agent(ca, "na");
	b = agent(cb, "nb");
	assert_int_equal(memb_agent_tick(a, t), 0);
	assert_true(memb_agent_is_decider(a));
	assert_int_equal(memb_agent_epoch(a), 1);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_false(memb_agent_is_decider(b));
	assert_int_equal(memb_agent_tick(a, t), 0); /* sees nb */
	assert_int_equal(memb_agent_epoch(a), 2);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_int_equal(memb_agent_epoch(b), 2);
	config_of(ca, &cfg);
	assert_int_equal(cfg.n, 2);
	assert_int_equal(find(&cfg, "nb")->state, MEMB_ACTIVE);
	memb_config_free(&cfg);

	/* both alive through many keepalive periods: nothing changes */
	for (int i = 0; i < 10; i++) {
		t += 1000;
		coord_mem_advance(ca, 1000);
		assert_int_equal(memb_agent_tick(a, t), 0);
		assert_int_equal(memb_agent_tick(b, t), 0);
	}
	assert_int_equal(memb_agent_epoch(a), 2);

	/* nb stops (SIGKILL: no revoke); after its TTL the decider acts */
	t += 1000;
	coord_mem_advance(ca, 1000);
	assert_int_equal(memb_agent_tick(a, t), 0);
	t += 1000;
	coord_mem_advance(ca, 1000);
	assert_int_equal(memb_agent_tick(a, t), 0);
	assert_int_equal(memb_agent_epoch(a), 2); /* 2 s: not yet */
	t += 1000;
	coord_mem_advance(ca, 1000);
	assert_int_equal(memb_agent_tick(a, t), 0);
	assert_int_equal(memb_agent_epoch(a), 3);
	config_of(ca, &cfg);
	assert_int_equal(find(&cfg, "nb")->state, MEMB_DOWN);
	assert_int_equal(find(&cfg, "na")->state, MEMB_ACTIVE);
	memb_config_free(&cfg);

	/* now the decider stops; nb comes back: its lease is gone, so it
	 * registers again, takes the free decider key once na's lease has
	 * expired, and writes na down and itself active */
	t += 1000;
	coord_mem_advance(ca, 1000);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_false(memb_agent_is_decider(b));
	t += 3000;
	coord_mem_advance(ca, 3000);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_true(memb_agent_is_decider(b));
	assert_int_equal(memb_agent_epoch(b), 4);
	config_of(ca, &cfg);
	assert_int_equal(find(&cfg, "na")->state, MEMB_DOWN);
	assert_int_equal(find(&cfg, "nb")->state, MEMB_ACTIVE);
	assert_int_equal(find(&cfg, "nb")->since, 4);
	memb_config_free(&cfg);

	/* an outage: ticks fail, nothing is written; after it the lease
	 * has expired and the node registers again */
	coord_mem_set_down(ca, true);
	t += 1000;
	assert_int_equal(memb_agent_tick(b, t), -ECONNREFUSED);
	coord_mem_advance(ca, 5000);
	t += 5000;
	coord_mem_set_down(ca, false);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_true(memb_agent_is_decider(b));
	/* it was down and back: epoch 5 (down) is never written because
	 * nobody decided in between; the returning node is the same
	 * incarnation, so it stays active */
	config_of(ca, &cfg);
	assert_int_equal(find(&cfg, "nb")->state, MEMB_ACTIVE);
	memb_config_free(&cfg);

	memb_agent_free(&a);
	memb_agent_free(&b); /* revokes: nb's registration goes */
	{
		struct memb_reg *live;
		size_t n;

		assert_int_equal(memb_read_regs(ca, "c1", &live, &n, NULL), 0);
		assert_int_equal(n, 0);
		free(live);
	}
	coord_close(&ca);
}

/* ---- the last complete holder, as the decider's agent runs it ---- */

static unsigned kept_lines, forgot_lines;

static void kept_log(void *arg, const char *line)
{
	kept_lines += strstr(line, "kept in the configuration") != NULL;
	forgot_lines += strstr(line, "put down after") != NULL;
	count_log(arg, line);
}

struct node3 {
	struct memb_agent *a[3];
	_Atomic uint64_t synced[3];
	int64_t t;
};

/* Three agents (na deciding, r 2, keep_last), all active and synced. */
static void node3_start(struct node3 *n, struct coord *c, int64_t keep_s)
{
	static const char *ids[3] = { "na", "nb", "nc" };
	struct memb_policy p = { .r = 2, .vnodes = 160,
				 .activate_joiners = true,
				 .first_members = 3, .keep_last = true };

	memset(n, 0, sizeof(*n));
	for (int i = 0; i < 3; i++) {
		struct memb_agent_opts o = {
			.cluster = "c1", .id = ids[i],
			.addr = "10.0.0.1:7471", .lease_s = 3,
			.decide = i == 0, .policy = p, .keep_s = keep_s,
			.log = kept_log, .log_arg = (void *)ids[i],
			.synced = &n->synced[i],
		};

		assert_int_equal(memb_agent_new(&n->a[i], c, &o), 0);
	}
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 3; i++) {
			n->synced[i] = memb_agent_epoch(n->a[i]);
			assert_int_equal(memb_agent_tick(n->a[i], n->t), 0);
		}
	for (int i = 0; i < 3; i++)
		assert_int_equal(memb_agent_epoch(n->a[i]), 1);
}

/* Only na ticks, for ms. */
static void node3_alone(struct node3 *n, struct coord *c, int64_t ms)
{
	for (int64_t k = 0; k < ms; k += 1000) {
		n->t += 1000;
		coord_mem_advance(c, 1000);
		assert_int_equal(memb_agent_tick(n->a[0], n->t), 0);
	}
}

static void node3_free(struct node3 *n)
{
	for (int i = 0; i < 3; i++)
		memb_agent_free(&n->a[i]);
}

/* nb and nc stop together (r 2: the ranges they share have no other
 * holder): the decider keeps both and says so once each; after keep_s
 * they go down, said once each. */
static void agent_keeps_last(void **state)
{
	struct memb_config cfg;
	struct coord *c;
	struct node3 n;

	kept_lines = forgot_lines = 0;
	assert_int_equal(coord_mem_new(&c), 0);
	node3_start(&n, c, 10);
	node3_alone(&n, c, 8000);
	assert_int_equal(memb_agent_epoch(n.a[0]), 1);
	assert_int_equal(kept_lines, 2);
	assert_int_equal(forgot_lines, 0);
	config_of(c, &cfg);
	assert_int_equal(find(&cfg, "nb")->state, MEMB_ACTIVE);
	assert_int_equal(find(&cfg, "nc")->state, MEMB_ACTIVE);
	memb_config_free(&cfg);
	/* nb comes back (the same process, registered again with what it
	 * holds): it was never put down, and nc, alone gone now, goes down:
	 * na and nb hold all it held */
	n.t += 1000;
	coord_mem_advance(c, 1000);
	assert_int_equal(memb_agent_tick(n.a[1], n.t), 0);
	assert_int_equal(memb_agent_tick(n.a[0], n.t), 0);
	assert_int_equal(memb_agent_epoch(n.a[0]), 2);
	config_of(c, &cfg);
	assert_int_equal(find(&cfg, "nc")->state, MEMB_DOWN);
	assert_int_equal(find(&cfg, "nb")->state, MEMB_ACTIVE);
	memb_config_free(&cfg);
	assert_int_equal(forgot_lines, 0);
	node3_free(&n);
	coord_close(&c);

	/* both gone for good: down after keep_s (10 s), said once each */
	kept_lines = forgot_lines = 0;
	assert_int_equal(coord_mem_new(&c), 0);
	node3_start(&n, c, 10);
	node3_alone(&n, c, 12000);
	assert_int_equal(memb_agent_epoch(n.a[0]), 1);
	assert_int_equal(kept_lines, 2);
	node3_alone(&n, c, 5000);
	assert_int_equal(memb_agent_epoch(n.a[0]), 2);
	assert_int_equal(forgot_lines, 2);
	node3_alone(&n, c, 5000);
	assert_int_equal(forgot_lines, 2);
	assert_int_equal(kept_lines, 2);
	config_of(c, &cfg);
	assert_int_equal(find(&cfg, "nb")->state, MEMB_DOWN);
	assert_int_equal(find(&cfg, "nc")->state, MEMB_DOWN);
	memb_config_free(&cfg);
	node3_free(&n);
	coord_close(&c);

	/* no timeout: kept until an operator drains it by force (refused
	 * without); the other stays kept */
	kept_lines = forgot_lines = 0;
	assert_int_equal(coord_mem_new(&c), 0);
	node3_start(&n, c, 0);
	node3_alone(&n, c, 60000);
	assert_int_equal(memb_agent_epoch(n.a[0]), 1);
	assert_int_equal(kept_lines, 2);
	assert_int_equal(memb_drain_request(c, "c1", "nb", false, false),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "--force"));
	assert_int_equal(memb_drain_request(c, "c1", "nb", false, true), 0);
	node3_alone(&n, c, 1000);
	assert_int_equal(memb_agent_epoch(n.a[0]), 2);
	config_of(c, &cfg);
	assert_int_equal(find(&cfg, "nb")->state, MEMB_DOWN);
	assert_int_equal(find(&cfg, "nc")->state, MEMB_ACTIVE);
	memb_config_free(&cfg);
	assert_int_equal(forgot_lines, 0);
	node3_free(&n);
	coord_close(&c);
}

/* The JSON of key what of cluster c1 (malloc'ed; NULL: absent). */
static char *raw_get(struct coord *c, const char *what, size_t *len)
{
	char key[COORD_KEY_MAX + 1];
	struct coord_kvs r;
	char *v = NULL;

	assert_int_equal(memb_key(key, "c1", what), 0);
	assert_int_equal(coord_range(c, key, false, &r), 0);
	if (r.n == 1) {
		v = malloc(r.kv[0].value_len + 1);
		assert_non_null(v);
		memcpy(v, r.kv[0].value, r.kv[0].value_len + 1);
		*len = r.kv[0].value_len;
	}
	coord_kvs_free(&r);
	return v;
}

static void raw_put(struct coord *c, const char *what, const char *v,
		    size_t len)
{
	char key[COORD_KEY_MAX + 1];

	assert_int_equal(memb_key(key, "c1", what), 0);
	assert_int_equal(coord_put(c, key, v, len, 0, NULL), 0);
}

static uint64_t reg_seen(struct coord *c, const char *id)
{
	struct memb_reg *live;
	uint64_t seen = UINT64_MAX;
	size_t n;

	assert_int_equal(memb_read_regs(c, "c1", &live, &n, NULL), 0);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(live[i].id, id))
			seen = live[i].seen;
	free(live);
	return seen;
}

/* ---- drains of a member whose registration is gone ---- */

static const struct memb_policy polk = { .r = 2, .vnodes = 160,
					 .activate_joiners = true,
					 .keep_last = true };

static void del_reg(struct coord *c, const char *id)
{
	char key[COORD_KEY_MAX + 1];

	assert_int_equal(memb_key(key, "c1", "nodes/"), 0);
	strcat(key, id);
	assert_int_equal(coord_del(c, key, false, NULL), 1);
}

/* One decision with keep_last (the kept reported into k): want 1 (a
 * configuration written) or 0 (nothing changed); id's state after it.
 * A failure names the caller's line. */
#define decided_keep(c, id, want, k) \
	decided_keep_at(c, id, want, k, __FILE__, __LINE__)
static enum memb_state decided_keep_at(struct coord *c, const char *id,
				       int want, struct kept_log *k,
				       const char *file, int line)
{
	struct memb_policy p = polk;
	struct memb_config got;
	enum memb_state st;
	uint64_t epoch;
	int64_t mod;

	p.on_kept = kept_cb;
	p.kept_arg = k;
	_assert_int_equal(memb_decide(c, "c1", &p, &epoch), want, file, line);
	assert_int_equal(memb_read_config(c, "c1", &got, &mod, NULL), 0);
	st = find(&got, id)->state;
	memb_config_free(&got);
	return st;
}

static void assert_drains(struct coord *c, const char *want)
{
	size_t len;
	char *v = raw_get(c, "drains", &len);

	assert_non_null(v);
	assert_string_equal(v, want);
	free(v);
}

/* Three members (r 2, keep_last), synced in epoch 1; n0001 drained the
 * ordinary way (LEAVING in epoch 2), then its lease lapses before the
 * others copied its ranges (none synced 2): kept. */
static struct memb_reg *leaving_lapsed(struct coord *c, struct kept_log *k)
{
	struct memb_reg *g = regs_n(3);

	for (int i = 0; i < 3; i++)
		put_reg(c, &g[i], 0);
	assert_int_equal(decided_keep(c, "n0001", 1, k), MEMB_ACTIVE);
	sync_all(g, 3, 1);
	for (int i = 0; i < 3; i++)
		put_reg(c, &g[i], 0);
	assert_int_equal(memb_drain_request(c, "c1", "n0001", false, false),
			 0);
	assert_int_equal(decided_keep(c, "n0001", 1, k), MEMB_LEAVING);
	/* an ordinary drain: the value is the incarnation, as before */
	assert_drains(c, "{\"n0001\":\"0000000000000002\"}");
	del_reg(c, "n0001");
	k->n = 0;
	assert_int_equal(decided_keep(c, "n0001", 0, k), MEMB_LEAVING);
	assert_int_equal(k->n, 1);
	assert_string_equal(k->id[0], "n0001");
	assert_true(k->ranges[0] > 0);
	return g;
}

/* A member leaving by an ordinary drain whose lease lapses mid-drain
 * (paused, or etcd slow) may be the last complete holder of a range: its
 * drain request is no "forget", it is kept like any lapsed member until
 * the others synced (then down, nothing lost) or an operator forces. */
static void drain_lapsed_kept(void **state)
{
	struct kept_log k = { 0 };
	struct memb_reg *g;
	struct coord *c;

	(void)state;
	assert_int_equal(coord_mem_new(&c), 0);
	g = leaving_lapsed(c, &k);
	/* kept at every decision, not only the first */
	assert_int_equal(decided_keep(c, "n0001", 0, &k), MEMB_LEAVING);
	/* asking again without --force: refused, it is gone */
	assert_int_equal(memb_drain_request(c, "c1", "n0001", false, false),
			 RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "--force"));
	assert_drains(c, "{\"n0001\":\"0000000000000002\"}");
	/* the others finish copying its ranges: down, the drain's end */
	g[0].synced = g[2].synced = 2;
	put_reg(c, &g[0], 0);
	put_reg(c, &g[2], 0);
	assert_int_equal(decided_keep(c, "n0001", 1, &k), MEMB_DOWN);
	free(g);
	coord_close(&c);
}

/* What drain --force of a member whose registration is gone writes (the
 * marker, {"inc": ..., "gone": true}) puts it down at the next decision,
 * even as the last complete holder; nothing else does. */
static void drain_gone_forced(void **state)
{
	struct kept_log k = { 0 };
	struct memb_reg *g;
	struct coord *c;

	(void)state;
	/* the leaving member of drain_lapsed_kept: --force turns its plain
	 * entry into the marker (not "asked already") */
	assert_int_equal(coord_mem_new(&c), 0);
	g = leaving_lapsed(c, &k);
	assert_int_equal(memb_drain_request(c, "c1", "n0001", false, true),
			 0);
	assert_drains(c, "{\"n0001\":{\"gone\":true,"
			 "\"inc\":\"0000000000000002\"}}");
	/* asked twice: no error, the same key */
	assert_int_equal(memb_drain_request(c, "c1", "n0001", false, true),
			 0);
	assert_drains(c, "{\"n0001\":{\"gone\":true,"
			 "\"inc\":\"0000000000000002\"}}");
	assert_int_equal(decided_keep(c, "n0001", 1, &k), MEMB_DOWN);
	/* registered again with that incarnation: the marker is a drain
	 * request too, it stays out */
	put_reg(c, &g[1], 0);
	assert_true(drain_flag(c, 3, 1));
	assert_int_equal(decided_keep(c, "n0001", 0, &k), MEMB_DOWN);
	/* another request keeps the marker; a forced drain of a registered
	 * member (past the floor) is an ordinary entry */
	assert_int_equal(memb_drain_request(c, "c1", "n0000", false, true),
			 0);
	assert_drains(c, "{\"n0000\":\"0000000000000001\",\"n0001\":"
			 "{\"gone\":true,\"inc\":\"0000000000000002\"}}");
	free(g);
	coord_close(&c);

	/* an active member gone, never drained: kept */
	assert_int_equal(coord_mem_new(&c), 0);
	g = regs_n(3);
	for (int i = 0; i < 3; i++)
		put_reg(c, &g[i], 0);
	assert_int_equal(decided_keep(c, "n0001", 1, &k), MEMB_ACTIVE);
	del_reg(c, "n0001");
	assert_int_equal(decided_keep(c, "n0001", 0, &k), MEMB_ACTIVE);
	/* a marker of another incarnation, or a malformed one: kept */
	raw_put(c, "drains", "{\"n0001\":{\"gone\":true,"
		"\"inc\":\"0000000000000009\"}}", 48);
	assert_int_equal(decided_keep(c, "n0001", 0, &k), MEMB_ACTIVE);
	raw_put(c, "drains", "{\"n0001\":{\"gone\":false,"
		"\"inc\":\"0000000000000002\"}}", 49);
	assert_int_equal(decided_keep(c, "n0001", 0, &k), MEMB_ACTIVE);
	/* what an older recstore-ctl wrote for drain --force of a gone
	 * member (the plain incarnation): kept until the operator repeats
	 * the forced drain (or coord.keep_s passes) */
	raw_put(c, "drains", "{\"n0001\":\"0000000000000002\"}", 28);
	assert_int_equal(decided_keep(c, "n0001", 0, &k), MEMB_ACTIVE);
	assert_int_equal(memb_drain_request(c, "c1", "n0001", false, true),
			 0);
	assert_drains(c, "{\"n0001\":{\"gone\":true,"
			 "\"inc\":\"0000000000000002\"}}");
	assert_int_equal(decided_keep(c, "n0001", 1, &k), MEMB_DOWN);
	free(g);
	coord_close(&c);
}

/* Fault 9: the store restored from an older snapshot (its configuration
 * epoch goes back). Without the check the agents ignored the old epochs
 * and the decider built new ones on the old configuration: no failover
 * until its epochs passed the nodes' (then a configuration derived from
 * the snapshot, which may hand ranges to members that purged them). Now:
 * every agent notices, follows and decides nothing, publishes what it
 * follows; no other decider writes either; memb_recover() writes the
 * newest published configuration back above every epoch, the agents
 * follow it and failover resumes. */
static void store_restored(void **state)
{
	struct coord *c;
	struct memb_agent *a, *b, *x;
	struct memb_config cfg, rec;
	char *snap, *pub;
	size_t snap_len, pub_len;
	uint64_t epoch;
	int64_t t = 0;

	(void)state;
	assert_int_equal(coord_mem_new(&c), 0);
	a = agent(c, "na");
	b = agent(c, "nb");
	assert_int_equal(memb_agent_tick(a, t), 0);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_int_equal(memb_agent_tick(a, t), 0);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_int_equal(memb_agent_epoch(a), 2);
	snap = raw_get(c, "config", &snap_len);	/* the snapshot: epoch 2 */
	assert_non_null(snap);

	/* nx joins: epoch 3, which both follow */
	x = agent(c, "nx");
	assert_int_equal(memb_agent_tick(x, t), 0);
	assert_int_equal(memb_agent_tick(a, t), 0);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_int_equal(memb_agent_tick(x, t), 0);
	assert_int_equal(memb_agent_epoch(a), 3);
	assert_int_equal(memb_agent_epoch(b), 3);

	/* the restore: the configuration is epoch 2 again */
	raw_put(c, "config", snap, snap_len);
	log_lines = 0;
	assert_int_equal(memb_agent_tick(a, t), 0);	/* the decider */
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_int_equal(memb_agent_regressed(a), 2);
	assert_int_equal(memb_agent_regressed(b), 2);
	assert_int_equal(memb_agent_epoch(a), 3);
	assert_true(log_lines >= 2);	/* each said so */
	config_of(c, &cfg);
	assert_int_equal(cfg.epoch, 2);	/* nothing written from it */
	memb_config_free(&cfg);
	/* the next round publishes (registration seen, recovery/<id>) */
	assert_int_equal(memb_agent_tick(a, t), 0);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_int_equal(reg_seen(c, "na"), 3);
	assert_int_equal(reg_seen(c, "nb"), 3);
	pub = raw_get(c, "recovery/na", &pub_len);
	assert_non_null(pub);
	assert_int_equal(memb_config_parse(pub, pub_len, &cfg), 0);
	assert_int_equal(cfg.epoch, 3);
	assert_int_equal(cfg.n, 3);
	memb_config_free(&cfg);
	free(pub);

	/* nx dies: nobody decides from the restored store, not even a
	 * decider that follows nothing (recstore-ctl cluster --decide) */
	memb_agent_free(&x);	/* revoked: its registration goes at once */
	for (int i = 0; i < 5; i++) {
		t += 1000;
		coord_mem_advance(c, 1000);
		assert_int_equal(memb_agent_tick(a, t), 0);
		assert_int_equal(memb_agent_tick(b, t), 0);
	}
	assert_int_equal(memb_decide(c, "c1", &pol3, &epoch),
			 MEMB_DECIDE_REGRESSED);
	assert_int_equal(epoch, 3);
	config_of(c, &cfg);
	assert_int_equal(cfg.epoch, 2);
	memb_config_free(&cfg);
	assert_int_equal(memb_agent_epoch(a), 3);

	/* the operator's recovery: the newest configuration a live node
	 * follows, at epoch 4 */
	assert_int_equal(memb_recover(c, "c1", &rec), 1);
	assert_int_equal(rec.epoch, 4);
	assert_int_equal(rec.recovered, 3);
	assert_int_equal(rec.n, 3);
	assert_int_equal(find(&rec, "nx")->state, MEMB_ACTIVE);
	memb_config_free(&rec);
	/* a second one finds nothing to do */
	assert_int_equal(memb_recover(c, "c1", &rec), 0);
	assert_int_equal(rec.epoch, 4);
	memb_config_free(&rec);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_int_equal(memb_agent_regressed(b), 0);
	assert_int_equal(memb_agent_epoch(b), 4);
	/* the decider follows it and then decides again: nx is down */
	assert_int_equal(memb_agent_tick(a, t), 0);
	assert_int_equal(memb_agent_regressed(a), 0);
	assert_int_equal(memb_agent_tick(a, t), 0);
	assert_int_equal(memb_agent_tick(b, t), 0);
	assert_int_equal(reg_seen(c, "na"), 0);
	assert_int_equal(reg_seen(c, "nb"), 0);
	assert_null(raw_get(c, "recovery/na", &pub_len));
	assert_null(raw_get(c, "recovery/nb", &pub_len));
	config_of(c, &cfg);
	assert_int_equal(cfg.epoch, 5);
	assert_int_equal(cfg.recovered, 0);
	assert_int_equal(find(&cfg, "nx")->state, MEMB_DOWN);
	memb_config_free(&cfg);
	assert_int_equal(memb_agent_epoch(b), 5);
	assert_int_equal(memb_recover(c, "c1", &rec), 0); /* nothing to do */
	assert_int_equal(rec.epoch, 5);
	memb_config_free(&rec);

	free(snap);
	memb_agent_free(&a);
	memb_agent_free(&b);
	coord_close(&c);
}

/* The same epoch written again from an older configuration is a
 * regression too; "recovered" and "seen" round-trip. */
static void regressed_rules(void **state)
{
	struct memb_member m[2] = {
		{ .id = "na", .addr = "a:1", .inc = 1, .state = MEMB_ACTIVE,
		  .since = 1 },
		{ .id = "nb", .addr = "b:1", .inc = 2, .state = MEMB_ACTIVE,
		  .since = 2 },
	};
	struct memb_config f = { .epoch = 3, .r = 2, .vnodes = 16, .n = 2,
				 .m = m }, g = f, back;
	struct memb_reg r = { .id = "na", .addr = "a:1", .inc = 1,
			      .seen = 7 }, rb;
	char *js;
	size_t len;

	(void)state;
	assert_false(memb_config_regressed(&f, &f));
	assert_false(memb_config_regressed(&f, NULL));
	g.epoch = 2;
	assert_true(memb_config_regressed(&g, &f));
	g.epoch = 4;
	assert_false(memb_config_regressed(&g, &f));
	g.epoch = 3;
	g.n = 1;
	assert_true(memb_config_regressed(&g, &f));
	f.recovered = 2;
	assert_int_equal(memb_config_format(&f, &js, &len), 0);
	assert_non_null(strstr(js, "\"recovered\":2"));
	assert_int_equal(memb_config_parse(js, len, &back), 0);
	assert_int_equal(back.recovered, 2);
	assert_true(memb_config_same(&back, &f));
	memb_config_free(&back);
	free(js);
	f.recovered = 3;	/* must be below its epoch */
	assert_int_equal(memb_config_format(&f, &js, &len), 0);
	assert_int_equal(memb_config_parse(js, len, &back), RS_E_CORRUPT);
	free(js);
	assert_int_equal(memb_reg_format(&r, &js, &len), 0);
	assert_int_equal(memb_reg_parse("na", js, len, &rb), 0);
	assert_int_equal(rb.seen, 7);
	free(js);
}

static uint64_t seen_epochs[8];
static unsigned nseen;

static void on_config(void *arg, const struct memb_config *c)
{
	(void)arg;
	if (nseen < 8)
		seen_epochs[nseen++] = c->epoch;
}

/* An initial cluster forms only with all its nodes; with r > 1 a later
 * node stays JOINING; the agent passes each higher epoch once. */
static void initial_members(void **state)
{
	struct memb_policy p = { .r = 2, .vnodes = 16,
				 .activate_joiners = false,
				 .first_members = 3 };
	struct memb_agent_opts o = {
		.cluster = "c1", .id = "n0000", .addr = "10.0.0.1:7471",
		.lease_s = 3, .decide = true, .policy = p,
		.log = count_log, .log_arg = "n0000",
		.on_config = on_config,
	};
	struct memb_reg *g = regs_n(4);
	struct memb_config cfg;
	struct memb_agent *a;
	struct coord *c;
	uint64_t epoch;

	nseen = 0;
	assert_int_equal(coord_mem_new(&c), 0);
	assert_int_equal(memb_agent_new(&a, c, &o), 0);
	assert_int_equal(memb_agent_tick(a, 0), 0);	/* alone: no config */
	assert_int_equal(memb_agent_epoch(a), 0);
	put_reg(c, &g[1], 0);
	assert_int_equal(memb_decide(c, "c1", &p, &epoch), 0); /* 2 of 3 */
	assert_int_equal(memb_agent_tick(a, 0), 0);
	assert_int_equal(memb_agent_epoch(a), 0);
	assert_int_equal(nseen, 0);
	put_reg(c, &g[2], 0);
	assert_int_equal(memb_agent_tick(a, 0), 0);
	assert_int_equal(memb_agent_epoch(a), 1);
	assert_int_equal(nseen, 1);
	assert_int_equal(seen_epochs[0], 1);
	config_of(c, &cfg);
	assert_int_equal(cfg.n, 3);
	for (size_t i = 0; i < cfg.n; i++)
		assert_int_equal(cfg.m[i].state, MEMB_ACTIVE);
	memb_config_free(&cfg);
	assert_int_equal(memb_agent_tick(a, 0), 0);	/* nothing new */
	assert_int_equal(nseen, 1);
	put_reg(c, &g[3], 0);				/* a late node */
	assert_int_equal(memb_agent_tick(a, 0), 0);
	assert_int_equal(nseen, 2);
	assert_int_equal(seen_epochs[1], 2);
	config_of(c, &cfg);
	assert_int_equal(find(&cfg, g[3].id)->state, MEMB_JOINING);
	memb_config_free(&cfg);
	assert_true(memb_agent_inc(a) != 0);
	memb_agent_free(&a);
	free(g);
	coord_close(&c);
}

/* The thread: registers within a moment; against a store that is down it
 * logs once, not once per retry; it stops promptly. */
static void agent_thread(void **state)
{
	struct coord *c;
	struct memb_agent *a;
	struct memb_config cfg;
	unsigned before;

	assert_int_equal(coord_mem_new(&c), 0);
	a = agent(c, "solo");
	assert_int_equal(memb_agent_start(a), 0);
	for (int i = 0; i < 200 && memb_agent_epoch(a) < 1; i++)
		usleep(10000);
	assert_int_equal(memb_agent_epoch(a), 1);
	config_of(c, &cfg);
	assert_int_equal(cfg.n, 1);
	memb_config_free(&cfg);
	before = log_lines;
	coord_mem_set_down(c, true);
	usleep(2500000); /* 2-3 retries */
	assert_int_equal(log_lines, before + 1);
	coord_mem_set_down(c, false);
	for (int i = 0; i < 300 && log_lines < before + 2; i++)
		usleep(10000);
	assert_int_equal(log_lines, before + 2); /* "reachable again" */
	memb_agent_free(&a);
	coord_close(&c);
}

/* ---- placement figures (docs/replication.md) ---- */

static double moved_fraction(const struct memb_config *a,
			     const struct memb_config *b, uint64_t nkeys,
			     bool primary_only)
{
	struct memb_placement *pa, *pb;
	unsigned oa[MEMB_MAX_R], ob[MEMB_MAX_R];
	uint64_t moved = 0;

	assert_int_equal(memb_placement_new(&pa, a), 0);
	assert_int_equal(memb_placement_new(&pb, b), 0);
	for (uint64_t k = 0; k < nkeys; k++) {
		uint64_t h = memb_key_hash(k);
		unsigned na = memb_replicas(pa, h, oa);
		unsigned nb = memb_replicas(pb, h, ob);

		if (primary_only) {
			moved += strcmp(a->m[oa[0]].id, b->m[ob[0]].id) != 0;
			continue;
		}
		/* replica copies that must be made: members of the new set
		 * that were not in the old one */
		for (unsigned i = 0; i < nb; i++) {
			bool had = false;

			for (unsigned j = 0; j < na; j++)
				had |= !strcmp(a->m[oa[j]].id, b->m[ob[i]].id);
			moved += !had;
		}
	}
	memb_placement_free(&pa);
	memb_placement_free(&pb);
	return (double)moved / (double)nkeys;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The ring's points of p appended to v (its range ends). */
static size_t add_ends(const struct memb_placement *p, uint64_t *v, size_t n)
{
	unsigned out[MEMB_MAX_R];
	uint64_t start, end;

	for (size_t i = 0; i < memb_ranges(p); i++) {
		memb_range(p, i, &start, &end, out);
		v[n++] = end;
	}
	return n;
}

/* Exact shares of the hash space (no sampling: what 10^10 keys give,
 * whose count per node has a binomial spread of 0.02% at 3 x 10^7): the
 * fraction each member of c leads (prim) and holds (repl, all r copies). */
static void exact_shares(const struct memb_config *c, double *prim,
			 double *repl)
{
	struct memb_placement *p;
	unsigned out[MEMB_MAX_R];
	uint64_t start, end;

	assert_int_equal(memb_placement_new(&p, c), 0);
	for (size_t i = 0; i < memb_ranges(p); i++) {
		unsigned k = memb_range(p, i, &start, &end, out);
		double len = (double)(end - start) / 18446744073709551616.0;

		prim[out[0]] += len;
		for (unsigned j = 0; j < k; j++)
			repl[out[j]] += len;
	}
	memb_placement_free(&p);
}

/* From configuration a to b, exactly: the fraction of the keys whose
 * primary changes, the fraction of copies to make (members of a key's new
 * set that were not in its old one), how many members gain copies, the
 * largest fraction one of them gains, the most members one gainer copies
 * from, and the largest fraction one source ships (each gained arc comes
 * from the first member of its old set that is in its new one). */
struct moves {
	double prim, copies, max_gain, max_out;
	size_t gainers, max_sources;
};

static void exact_moves(const struct memb_config *a,
			const struct memb_config *b, struct moves *mv)
{
	struct memb_placement *pa, *pb;
	size_t na, n;
	uint64_t *pts;
	double *gain = calloc(b->n, sizeof(*gain));
	double *out = calloc(a->n, sizeof(*out));
	unsigned char *src = calloc(b->n * a->n, 1);

	memset(mv, 0, sizeof(*mv));
	assert_non_null(gain);
	assert_non_null(out);
	assert_non_null(src);
	assert_int_equal(memb_placement_new(&pa, a), 0);
	assert_int_equal(memb_placement_new(&pb, b), 0);
	na = memb_ranges(pa);
	pts = malloc((na + memb_ranges(pb)) * sizeof(*pts));
	assert_non_null(pts);
	n = add_ends(pb, pts, add_ends(pa, pts, 0));
	qsort(pts, n, sizeof(*pts), u64_cmp);
	/* elementary arcs (pts[i - 1], pts[i]]: both sets are constant */
	for (size_t i = 0; i < n; i++) {
		uint64_t prev = pts[i ? i - 1 : n - 1];
		double len = (double)(pts[i] - prev) / 18446744073709551616.0;
		unsigned oa[MEMB_MAX_R], ob[MEMB_MAX_R];
		unsigned ka = memb_replicas(pa, pts[i], oa);
		unsigned kb = memb_replicas(pb, pts[i], ob);

		unsigned from = oa[0];

		if (i && pts[i] == prev)
			continue;
		/* the source: the first member of the old set still in the
		 * new one (a failed primary's ranges come from the next) */
		for (unsigned k = ka; k-- > 0;)
			for (unsigned j = 0; j < kb; j++)
				if (!strcmp(a->m[oa[k]].id, b->m[ob[j]].id) &&
				    b->m[ob[j]].state != MEMB_DOWN)
					from = oa[k];
		mv->prim += strcmp(a->m[oa[0]].id, b->m[ob[0]].id) ? len : 0;
		for (unsigned j = 0; j < kb; j++) {
			bool had = false;

			for (unsigned k = 0; k < ka; k++)
				had |= !strcmp(a->m[oa[k]].id, b->m[ob[j]].id);
			if (had)
				continue;
			mv->copies += len;
			gain[ob[j]] += len;
			out[from] += len;
			src[ob[j] * a->n + from] = 1;
		}
	}
	for (size_t g = 0; g < b->n; g++) {
		size_t ns = 0;

		if (gain[g] == 0)
			continue;
		mv->gainers++;
		mv->max_gain = gain[g] > mv->max_gain ? gain[g] : mv->max_gain;
		for (size_t k = 0; k < a->n; k++)
			ns += src[g * a->n + k];
		mv->max_sources = ns > mv->max_sources ? ns : mv->max_sources;
	}
	for (size_t k = 0; k < a->n; k++)
		mv->max_out = out[k] > mv->max_out ? out[k] : mv->max_out;
	free(out);
	free(pts);
	free(src);
	free(gain);
	memb_placement_free(&pa);
	memb_placement_free(&pb);
}

static void balance_1000(void **state)
{
	const size_t n = 1000;
	const uint64_t nkeys = 1000000, nmove = 300000;
	struct memb_config a, joined, failed;
	struct memb_placement *p;
	struct memb_reg *g = regs_n(n + 1);
	unsigned *prim = calloc(n, sizeof(*prim));
	unsigned *repl = calloc(n, sizeof(*repl));
	unsigned out[MEMB_MAX_R], pmax = 0, rmax = 0;
	double pm, rm, mj, ml, mjp, mlp;

	boot(&a, n, &pol3);
	assert_int_equal(memb_placement_new(&p, &a), 0);
	for (uint64_t k = 0; k < nkeys; k++) {
		unsigned c = memb_replicas(p, memb_key_hash(k), out);

		assert_int_equal(c, 3);
		prim[out[0]]++;
		for (unsigned i = 0; i < c; i++)
			repl[out[i]]++;
	}
	memb_placement_free(&p);
	for (size_t i = 0; i < n; i++) {
		pmax = prim[i] > pmax ? prim[i] : pmax;
		rmax = repl[i] > rmax ? repl[i] : rmax;
	}
	pm = (double)nkeys / n;
	rm = 3.0 * nkeys / n;
	/* one joins, one fails */
	assert_int_equal(memb_reconfigure(&a, g, n + 1, &pol3, &joined), 1);
	assert_int_equal(memb_reconfigure(&a, g + 1, n - 1, &pol3, &failed),
			 1);
	mjp = moved_fraction(&a, &joined, nmove, true);
	mj = moved_fraction(&a, &joined, nmove, false);
	mlp = moved_fraction(&a, &failed, nmove, true);
	ml = moved_fraction(&a, &failed, nmove, false);
	printf("placement: %zu nodes, 160 vnodes, r 3, %" PRIu64 " keys "
	       "(moves: %" PRIu64 ")\n"
	       "  primary keys per node: max/mean %.3f (max %u, mean %.0f)\n"
	       "  replica keys per node: max/mean %.3f (max %u, mean %.0f)\n"
	       "  join of 1:  primaries moved %.4f%% of keys, replica copies "
	       "%.4f%% (1/N = %.4f%%, r/N = %.4f%%)\n"
	       "  fail of 1:  primaries moved %.4f%% of keys, replica copies "
	       "%.4f%%\n",
	       n, nkeys, nmove, pmax / pm, pmax, pm, rmax / rm, rmax, rm,
	       100 * mjp,
	       100 * mj, 100.0 / (n + 1), 300.0 / (n + 1), 100 * mlp,
	       100 * ml);
	/* 160 vnodes: the largest share stays within 1.5x of the mean
	 * (sampling noise included), and only the changed node's share
	 * moves: about 1/N of the primaries and r/N of the copies */
	assert_true(pmax / pm < 1.5);
	assert_true(rmax / rm < 1.3);
	assert_true(mjp > 0.3 / n && mjp < 3.0 / n);
	assert_true(mlp > 0.3 / n && mlp < 3.0 / n);
	assert_true(mj > 0.3 * 3 / n && mj < 3.0 * 3 / n);
	assert_true(ml > 0.3 * 3 / n && ml < 3.0 * 3 / n);
	/* the same without sampling: the limit that 10^10 keys reach */
	{
		double *ep = calloc(n, sizeof(*ep)), *er = calloc(n, sizeof(*er));
		double epmax = 0, ermax = 0;
		struct moves mj1, mf1;

		assert_non_null(ep);
		assert_non_null(er);
		exact_shares(&a, ep, er);
		for (size_t i = 0; i < n; i++) {
			epmax = ep[i] > epmax ? ep[i] : epmax;
			ermax = er[i] > ermax ? er[i] : ermax;
		}
		exact_moves(&a, &joined, &mj1);
		exact_moves(&a, &failed, &mf1);
		printf("exact (every hash, as 10^10 keys):\n"
		       "  primary share per node: max/mean %.3f\n"
		       "  replica share per node: max/mean %.3f\n"
		       "  join of 1:  primaries moved %.4f%%, copies %.4f%% of "
		       "keys, to %zu member(s), from at most %zu source(s)\n"
		       "  fail of 1:  primaries moved %.4f%%, copies %.4f%% of "
		       "keys (the failed node held %.4f%%), to %zu members, "
		       "the largest gainer %.5f%% of keys, at most %zu "
		       "source(s) per gainer\n",
		       epmax * n, ermax * n / 3, 100 * mj1.prim,
		       100 * mj1.copies, mj1.gainers, mj1.max_sources,
		       100 * mf1.prim, 100 * mf1.copies, 100 * er[0],
		       mf1.gainers, 100 * mf1.max_gain, mf1.max_sources);
		assert_true(epmax * n < 1.5);
		assert_true(ermax * n / 3 < 1.3);
		/* a join: only the new member gains copies */
		assert_int_equal(mj1.gainers, 1);
		/* a failure: exactly the copies the failed member held are
		 * made again, spread over many members */
		assert_true(fabs(mf1.copies - er[0]) < 1e-9);
		assert_true(fabs(mf1.prim - ep[0]) < 1e-9);
		assert_true(mf1.gainers > 100);
		free(ep);
		free(er);
	}
	free(prim);
	free(repl);
	free(g);
	memb_config_free(&a);
	memb_config_free(&joined);
	memb_config_free(&failed);
}

/* How a failure's copies spread, by cluster size (r 3, 160 vnodes,
 * exact): the members that gain copies, the largest share of the failed
 * member's data one of them copies in, and the largest one source ships
 * (docs/replication.md, "At scale"). A small cluster restores through
 * a few members; a large one through hundreds at once. */
static void restore_spread(void **state)
{
	static const size_t sizes[] = { 4, 10, 100, 1000 };

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		struct memb_reg *g = regs_n(n);
		struct memb_config a, failed;
		double *ep = calloc(n, sizeof(*ep)), *er = calloc(n, sizeof(*er));
		struct moves mv;

		assert_non_null(ep);
		assert_non_null(er);
		boot(&a, n, &pol3);
		assert_int_equal(memb_reconfigure(&a, g + 1, n - 1, &pol3,
						  &failed), 1);
		exact_shares(&a, ep, er);
		exact_moves(&a, &failed, &mv);
		printf("restore: %4zu nodes: the failed one held %.4f%% of the "
		       "copies; %zu members copy them in, the largest %.3f of "
		       "them, from at most %zu source(s); the busiest source "
		       "ships %.3f of them\n", n, 100 * er[0] / 3, mv.gainers,
		       mv.max_gain / mv.copies, mv.max_sources,
		       mv.max_out / mv.copies);
		assert_true(fabs(mv.copies - er[0]) < 1e-9);
		assert_true(mv.gainers >= 1 && mv.gainers <= n - 1);
		free(ep);
		free(er);
		free(g);
		memb_config_free(&a);
		memb_config_free(&failed);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(config_roundtrip),
		cmocka_unit_test(config_rejects),
		cmocka_unit_test(first_config),
		cmocka_unit_test(synced_activates),
		cmocka_unit_test(fail_over),
		cmocka_unit_test(set_kept),
		cmocka_unit_test(join),
		cmocka_unit_test(leave_rejoin_restart),
		cmocka_unit_test(last_holder),
		cmocka_unit_test(fewer_than_r),
		cmocka_unit_test(capacity),
		cmocka_unit_test(cas_two_deciders),
		cmocka_unit_test(drain_steps),
		cmocka_unit_test(drain_cancel_and_last),
		cmocka_unit_test(drain_rings),
		cmocka_unit_test(drain_several),
		cmocka_unit_test(keeps),
		cmocka_unit_test(drain_request),
		cmocka_unit_test(drain_request_race),
		cmocka_unit_test(agents_fake_clock),
		cmocka_unit_test(agent_keeps_last),
		cmocka_unit_test(drain_lapsed_kept),
		cmocka_unit_test(drain_gone_forced),
		cmocka_unit_test(store_restored),
		cmocka_unit_test(regressed_rules),
		cmocka_unit_test(agent_thread),
		cmocka_unit_test(initial_members),
		cmocka_unit_test(balance_1000),
		cmocka_unit_test(restore_spread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
