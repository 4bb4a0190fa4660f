/*
 * test_copy_plan.c - what a node copies in when it adopts a configuration
 * (srv_copy_plan, docs/replication.md, "Copying ranges"), with no device.
 *
 * The rule under test: when a node has adopted a configuration and its
 * copy is done (or there was nothing to copy), it holds completely every
 * range it serves in that configuration: those of its target sets (the
 * ring over ACTIVE and JOINING members) and those of its active sets (the
 * ring over the serving members). It says so (synced) and takes replica
 * reads (ready) for them, and the decider takes its word: a member synced
 * in the current epoch is "sure", and another member that may be the last
 * holder of its ranges is put down ("The last complete holder").
 *
 * Each test plays a sequence of configurations on one node, with a model
 * of what it holds completely, and checks after each plan, for many
 * hashes of the ring: a hash the node serves is held or gained (or the
 * node leads it and no one else holds it: counted as unheld), and the
 * node claims synced only when it holds all.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "coord/membership.h"
#include "server/srv_repl_int.h"

#define NMAX 4
#define SAMPLES 20000u

struct fx {
	struct rs_server *s;
	struct memb_member m[8][NMAX];	/* per configuration played */
	struct srv_cfg g[8];
	unsigned ng;
	/* the model: the ring whose sets this node held completely, and
	 * its index there (held: in one of that ring's sets) */
	struct memb_placement *held_pl;
	int held_self;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->s = calloc(1, sizeof(*f->s));
	assert_non_null(f->s);
	pthread_rwlock_init(&f->s->tables.lock, NULL);	/* no table */
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	srv_copy_fini(f->s);
	for (unsigned i = 0; i < f->ng; i++) {
		memb_placement_free(&f->g[i].pl);
		memb_placement_free(&f->g[i].tpl);
		free(f->g[i].gain);
	}
	memb_placement_free(&f->held_pl);
	pthread_rwlock_destroy(&f->s->tables.lock);
	free(f->s);
	free(f);
	return 0;
}

static bool leads(const struct memb_placement *p, uint64_t h, int who)
{
	unsigned set[MEMB_MAX_R];

	return who >= 0 && memb_replicas(p, h, set) && (int)set[0] == who;
}

/* Configuration number f->ng: n members (ids n0..), member i in st[i],
 * this node is member `me`; adopted and planned. */
static struct srv_cfg *play(struct fx *f, uint64_t epoch, unsigned n,
			    const enum memb_state *st, int me)
{
	struct memb_member *m = f->m[f->ng];
	struct srv_cfg *g = &f->g[f->ng++];

	for (unsigned i = 0; i < n; i++) {
		snprintf(m[i].id, sizeof(m[i].id), "n%u", i);
		snprintf(m[i].addr, sizeof(m[i].addr), "10.0.0.%u:7000", i);
		m[i].inc = 1;
		m[i].state = st[i];
		m[i].since = epoch;
	}
	g->c = (struct memb_config){ .epoch = epoch, .r = 2, .vnodes = 8,
				     .n = n, .m = m };
	assert_int_equal(memb_placement_new(&g->pl, &g->c), 0);
	assert_int_equal(memb_placement_target(&g->tpl, &g->c), 0);
	g->self = memb_serves(st[me]) ? me : -1;
	g->tself = st[me] != MEMB_DOWN ? me : -1;
	assert_int_equal(srv_copy_plan(f->s, g), 0);
	return g;
}

/* The model after a copy finished (or none was needed): the node holds
 * completely what it serves in g. */
static void model_holds(struct fx *f, const struct srv_cfg *g)
{
	memb_placement_free(&f->held_pl);
	f->held_pl = NULL;
	f->held_self = -1;
	if (g->self >= 0) {
		assert_int_equal(memb_placement_new(&f->held_pl, &g->c), 0);
		f->held_self = g->self;
	}
}

/* For SAMPLES hashes: every hash g serves at this node is held (by the
 * model, and still served: it got every write since) or gained, or led
 * here; returns how many it serves only in the active ring (not in a
 * target set), the case the rule is about, and *unheld (if not NULL)
 * how many of those it did not hold before. */
static unsigned check_plan(struct fx *f, const struct srv_cfg *g,
			   unsigned *unheld)
{
	const struct memb_placement *t = g->tpl ? g->tpl : g->pl;
	unsigned active_only = 0, missed = 0, lacking = 0;
	uint64_t h = 0x9e3779b97f4a7c15ull;

	for (unsigned i = 0; i < SAMPLES; i++) {
		bool in_a, in_t, held;

		h = h * 6364136223846793005ull + 1442695040888963407ull;
		in_a = memb_in_set(g->pl, h, g->self);
		in_t = memb_in_set(t, h, g->tself);
		if (!in_a && !in_t)
			continue;
		held = memb_in_set(f->held_pl, h, f->held_self);
		active_only += in_a && !in_t;
		missed += in_a && !in_t && !held;
		if (held || leads(g->pl, h, g->self))
			continue;
		if (!srv_cfg_gains(g, h))
			lacking++;
	}
	assert_int_equal(lacking, 0);
	if (atomic_load(&f->s->repl.synced) == g->c.epoch)
		assert_int_equal(g->ngain, 0);
	if (unheld)
		*unheld = missed;
	return active_only;
}

/*
 * The nemesis's seed 20262529 with lapses: n0 and n1 paused together;
 * n0 goes down (epoch 2) while n1 is kept as the last holder of ranges,
 * and this node, n2, gains the ranges of the sets it is appended to,
 * copying them from n1, which does not answer. n0 comes back and joins
 * (epoch 3): n2's copy of epoch 2 has not finished. Ranges whose active
 * set is {n1, n2} and whose target set is {n0, n1} are served by n2
 * (replica reads, and once n1 goes down, everything) but not in a target
 * set of n2: n2 must copy them as well, and must not say it is synced
 * before it has them. Before, it claimed them, the decider put n1 down
 * (n2 was sure) and the rows were lost.
 */
static void active_ranges_copied(void **state)
{
	static const enum memb_state e1[3] = { MEMB_ACTIVE, MEMB_ACTIVE,
					       MEMB_ACTIVE };
	static const enum memb_state e2[3] = { MEMB_DOWN, MEMB_ACTIVE,
					       MEMB_ACTIVE };
	static const enum memb_state e3[3] = { MEMB_JOINING, MEMB_ACTIVE,
					       MEMB_ACTIVE };
	struct fx *f = *state;
	struct srv_cfg *g;
	unsigned unheld;

	g = play(f, 1, 3, e1, 2);		/* fresh: holds its sets */
	assert_int_equal(g->ngain, 0);
	assert_int_equal(atomic_load(&f->s->repl.synced), 1);
	model_holds(f, g);
	g = play(f, 2, 3, e2, 2);		/* gains ranges from n1 */
	assert_true(g->ngain > 0);
	check_plan(f, g, NULL);
	/* its copy is cut short: it holds epoch 1's sets still */
	g = play(f, 3, 3, e3, 2);
	check_plan(f, g, &unheld);
	assert_true(unheld > 0);		/* the case happened */
	assert_true(g->ngain > 0);
	assert_int_not_equal(atomic_load(&f->s->repl.synced), 3);
}

/*
 * A node synced in an epoch with a joiner holds the ranges of its active
 * sets too: when the joiner goes down before it is active, the node has
 * nothing to copy (before, it copied the ranges the joiner would have
 * taken from it again, and removed its rows of them meanwhile).
 */
static void synced_covers_active(void **state)
{
	static const enum memb_state e1[4] = { MEMB_ACTIVE, MEMB_ACTIVE,
					       MEMB_ACTIVE, MEMB_DOWN };
	static const enum memb_state e2[4] = { MEMB_ACTIVE, MEMB_ACTIVE,
					       MEMB_ACTIVE, MEMB_JOINING };
	static const enum memb_state e3[4] = { MEMB_ACTIVE, MEMB_ACTIVE,
					       MEMB_ACTIVE, MEMB_DOWN };
	struct fx *f = *state;
	struct srv_cfg *g;

	g = play(f, 1, 4, e1, 2);
	model_holds(f, g);
	g = play(f, 2, 4, e2, 2);		/* keeps all, gains none */
	assert_int_equal(g->ngain, 0);
	assert_int_equal(atomic_load(&f->s->repl.synced), 2);
	assert_true(check_plan(f, g, NULL) > 0); /* displaced by the joiner */
	g = play(f, 3, 4, e3, 2);
	check_plan(f, g, NULL);
	assert_int_equal(g->ngain, 0);
	assert_int_equal(atomic_load(&f->s->repl.synced), 3);
	assert_int_equal(atomic_load(&f->s->repl.ready), 3);
}

/*
 * A leaving member serves its active sets and is in no target set: it
 * holds them, says so, and gains nothing.
 */
static void leaving_holds_active(void **state)
{
	static const enum memb_state e1[3] = { MEMB_ACTIVE, MEMB_ACTIVE,
					       MEMB_ACTIVE };
	static const enum memb_state e2[3] = { MEMB_ACTIVE, MEMB_ACTIVE,
					       MEMB_LEAVING };
	struct fx *f = *state;
	struct srv_cfg *g;

	g = play(f, 1, 3, e1, 2);
	model_holds(f, g);
	g = play(f, 2, 3, e2, 2);
	check_plan(f, g, NULL);
	assert_int_equal(g->ngain, 0);
	assert_int_equal(atomic_load(&f->s->repl.synced), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(active_ranges_copied, setup,
						teardown),
		cmocka_unit_test_setup_teardown(synced_covers_active, setup,
						teardown),
		cmocka_unit_test_setup_teardown(leaving_holds_active, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
