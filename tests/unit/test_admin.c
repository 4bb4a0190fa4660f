/*
 * test_admin.c - the admin calls (include/recstore/admin.h) against the
 * in-memory coordination store (src/coord/coord_mem.c, through
 * rs_admin_open_coord of coord/admin_int.h): the arguments each call
 * refuses and their messages, then what recstore-ctl's cluster, drain and
 * recover read and write, on a cluster of three registered nodes. What
 * the calls decide is test_membership's; here, that the public structs
 * carry it unchanged.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "coord/admin_int.h"
#include "coord/membership.h"
#include "recstore/admin.h"

#define msg_has(what) do {						\
	if (!strstr(rs_errormsg(), (what)))				\
		fail_msg("'%s' lacks '%s'", rs_errormsg(), (what));	\
} while (0)

/* ---- arguments ---- */

static void check_id(void **state)
{
	(void)state;
	assert_int_equal(rs_admin_check_id("--cluster", "prod-1.a_b"), 0);
	assert_int_equal(rs_admin_check_id("--cluster", "a b"), RS_E_INVAL);
	msg_has("--cluster: 'a b' has a character outside [A-Za-z0-9_.-]");
	assert_int_equal(rs_admin_check_id("--cluster", ""), RS_E_INVAL);
	msg_has("--cluster: length 0 (1..63)");
	assert_int_equal(rs_admin_check_id(NULL, NULL), RS_E_INVAL);
	msg_has("id: length 0");
}

static void open_refuses(void **state)
{
	struct rs_admin_etcd_opts o = RS_ADMIN_ETCD_OPTS_INIT;
	struct rs_admin *a = (void *)1;
	struct coord *c;

	(void)state;
	assert_int_equal(rs_admin_open_etcd(NULL, "http://x", "c", NULL),
			 RS_E_INVAL);
	assert_int_equal(rs_admin_open_etcd(&a, NULL, "c", NULL),
			 RS_E_INVAL);
	msg_has("NULL argument");
	o.struct_size = 4;
	assert_int_equal(rs_admin_open_etcd(&a, "http://x", "c", &o),
			 RS_E_INVAL);
	msg_has("struct rs_admin_etcd_opts");
	assert_null(a);
	o.struct_size = sizeof(o);
	assert_int_equal(rs_admin_open_etcd(&a, "http://x", "no/slash", &o),
			 RS_E_INVAL);
	msg_has("cluster: 'no/slash'");
	assert_null(a);
	/* on a store: a bad name leaves the store the caller's */
	assert_int_equal(coord_mem_new(&c), 0);
	assert_int_equal(rs_admin_open_coord(&a, c, ""), RS_E_INVAL);
	assert_int_equal(rs_admin_open_coord(&a, NULL, "c1"), RS_E_INVAL);
	coord_close(&c);
	/* the frees accept NULL and a NULL handle */
	rs_admin_close(NULL);
	rs_admin_close(&a);
	rs_admin_config_free(NULL);
	rs_admin_regs_free(NULL);
	rs_admin_placement_free(NULL);
	assert_int_equal(rs_admin_warnings(NULL), 0);
}

static void names(void **state)
{
	(void)state;
	assert_string_equal(rs_admin_state_name(RS_ADMIN_ACTIVE), "active");
	assert_string_equal(rs_admin_state_name(RS_ADMIN_JOINING), "joining");
	assert_string_equal(rs_admin_state_name(RS_ADMIN_DOWN), "down");
	assert_string_equal(rs_admin_state_name(RS_ADMIN_LEAVING), "leaving");
	assert_string_equal(rs_admin_state_name(99), "?");
	assert_string_equal(rs_admin_state_name(UINT32_MAX), "?");
}

/* ---- against the in-memory store ---- */

struct fx {
	struct coord *c;	/* the handle's */
	struct rs_admin *a;
};

static void put_reg(struct coord *c, const char *id, uint64_t inc)
{
	char key[COORD_KEY_MAX + 1], *v;
	struct memb_reg g;
	size_t len;

	memset(&g, 0, sizeof(g));
	snprintf(g.id, sizeof(g.id), "%s", id);
	snprintf(g.addr, sizeof(g.addr), "10.0.0.1:%u",
		 7000u + (unsigned)inc);
	g.inc = inc;
	assert_int_equal(memb_key(key, "c1", "nodes/"), 0);
	strcat(key, id);
	assert_int_equal(memb_reg_format(&g, &v, &len), 0);
	assert_int_equal(coord_put(c, key, v, len, 0, NULL), 0);
	free(v);
}

/* Nodes n0, n1, n2 registered; no configuration yet. */
static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(coord_mem_new(&f->c), 0);
	put_reg(f->c, "n0", 1);
	put_reg(f->c, "n1", 2);
	put_reg(f->c, "n2", 3);
	assert_int_equal(rs_admin_open_coord(&f->a, f->c, "c1"), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	rs_admin_close(&f->a);	/* closes the store */
	assert_null(f->a);
	free(f);
	return 0;
}

static struct rs_admin_config *config(struct fx *f)
{
	struct rs_admin_config *cfg = NULL;

	assert_int_equal(rs_admin_read_config(f->a, &cfg), 0);
	assert_non_null(cfg);
	return cfg;
}

static uint32_t state_of(struct fx *f, const char *id)
{
	struct rs_admin_config *cfg = config(f);
	uint32_t st = UINT32_MAX;

	for (size_t i = 0; i < cfg->n; i++)
		if (!strcmp(cfg->m[i].id, id))
			st = cfg->m[i].state;
	rs_admin_config_free(&cfg);
	return st;
}

/* Before and after the first decision: epoch, members, revisions. */
static void decide_and_read(void **state)
{
	struct fx *f = *state;
	struct rs_admin_config *cfg = config(f);
	uint64_t epoch = 0;

	assert_int_equal(cfg->epoch, 0);
	assert_int_equal(cfg->n, 0);
	assert_int_equal(cfg->mod_rev, 0);
	rs_admin_config_free(&cfg);
	assert_null(cfg);
	assert_int_equal(rs_admin_decide(f->a, 0, &epoch), RS_E_INVAL);
	msg_has("replicas 0");
	assert_int_equal(rs_admin_decide(f->a, RS_ADMIN_MAX_R + 1, &epoch),
			 RS_E_INVAL);
	assert_int_equal(rs_admin_decide(f->a, 3, &epoch), 1);
	assert_int_equal(epoch, 1);
	assert_int_equal(rs_admin_decide(f->a, 3, NULL), 0);
	cfg = config(f);
	assert_int_equal(cfg->epoch, 1);
	assert_int_equal(cfg->r, 3);
	assert_int_equal(cfg->vnodes, MEMB_DEFAULT_VNODES);
	assert_int_equal(cfg->recovered, 0);
	assert_true(cfg->mod_rev > 0);
	assert_true(cfg->rev >= cfg->mod_rev);
	assert_int_equal(cfg->n, 3);
	for (size_t i = 0; i < 3; i++) {
		char id[8], addr[32];

		snprintf(id, sizeof(id), "n%zu", i);
		snprintf(addr, sizeof(addr), "10.0.0.1:%zu", 7001 + i);
		assert_string_equal(cfg->m[i].id, id);
		assert_string_equal(cfg->m[i].addr, addr);
		assert_int_equal(cfg->m[i].inc, i + 1);
		assert_int_equal(cfg->m[i].state, RS_ADMIN_ACTIVE);
		assert_int_equal(cfg->m[i].since, 1);
	}
	/* nothing changes: the wait ends at its timeout, without error */
	assert_int_equal(rs_admin_wait(f->a, cfg->rev, 20), 0);
	rs_admin_config_free(&cfg);
}

/* The ring of three members with r = 3: every range held by all three,
 * each the primary of about a third. */
static void placement(void **state)
{
	struct fx *f = *state;
	struct rs_admin_placement *p;
	struct rs_admin_config *cfg;
	double prim[3] = { 0 };
	unsigned set[RS_ADMIN_MAX_R];
	size_t n;

	assert_int_equal(rs_admin_decide(f->a, 3, NULL), 1);
	cfg = config(f);
	assert_int_equal(rs_admin_placement_new(&p, cfg), 0);
	n = rs_admin_placement_ranges(p);
	assert_int_equal(n, 3 * MEMB_DEFAULT_VNODES);
	for (size_t i = 0; i < n; i++) {
		uint64_t start, end;
		unsigned k = rs_admin_placement_range(p, i, &start, &end, set);

		assert_int_equal(k, 3);
		assert_int_not_equal(set[0], set[1]);
		assert_int_not_equal(set[0], set[2]);
		assert_int_not_equal(set[1], set[2]);
		prim[set[0]] += (double)(end - start) / 18446744073709551616.0;
	}
	for (int i = 0; i < 3; i++)
		assert_true(prim[i] > 0.2 && prim[i] < 0.5);
	{
		uint64_t start, end;

		assert_int_equal(rs_admin_placement_range(p, n, &start, &end,
							  set), 0);
		assert_int_equal(rs_admin_placement_range(NULL, 0, &start,
							  &end, set), 0);
	}
	rs_admin_placement_free(&p);
	assert_null(p);
	assert_int_equal(rs_admin_placement_new(&p, NULL), RS_E_INVAL);
	rs_admin_config_free(&cfg);
}

/* Registrations, one that does not parse, and the decider key. */
static void regs_and_decider(void **state)
{
	struct fx *f = *state;
	char key[COORD_KEY_MAX + 1], *d = (void *)1;
	struct rs_admin_regs *r;

	assert_int_equal(rs_admin_read_decider(f->a, &d), 0);
	assert_null(d);
	assert_int_equal(memb_key(key, "c1", "decider"), 0);
	assert_int_equal(coord_put(f->c, key, "n1", 2, 0, NULL), 0);
	assert_int_equal(rs_admin_read_decider(f->a, &d), 0);
	assert_string_equal(d, "n1");
	free(d);
	assert_int_equal(memb_key(key, "c1", "nodes/n9"), 0);
	assert_int_equal(coord_put(f->c, key, "{", 1, 0, NULL), 0);
	assert_int_equal(rs_admin_read_regs(f->a, &r), 0);
	assert_int_equal(r->n, 3);
	assert_int_equal(r->unreadable, 1);
	assert_string_equal(r->reg[2].id, "n2");
	assert_string_equal(r->reg[2].addr, "10.0.0.1:7003");
	assert_int_equal(r->reg[2].inc, 3);
	assert_int_equal(r->reg[2].drain, 0);
	assert_int_equal(r->reg[2].seen, 0);
	rs_admin_regs_free(&r);
	assert_null(r);
}

/* drain: refused below r unless forced, then LEAVING at the next
 * decision; cancelled, ACTIVE again. */
static void drain(void **state)
{
	struct fx *f = *state;
	struct rs_admin_regs *r;

	assert_int_equal(rs_admin_drain(f->a, "n1", 0), RS_E_INVAL);
	assert_int_equal(rs_admin_decide(f->a, 3, NULL), 1);
	assert_int_equal(rs_admin_drain(f->a, "n1", 4), RS_E_INVAL);
	msg_has("unknown flags 0x4");
	assert_int_equal(rs_admin_drain(f->a, NULL, 0), RS_E_INVAL);
	assert_int_equal(rs_admin_drain(f->a, "n1", 0), RS_E_INVAL);
	msg_has("fewer than r = 3");
	assert_int_equal(rs_admin_drain(f->a, "n1", RS_ADMIN_DRAIN_FORCE), 0);
	assert_int_equal(rs_admin_read_regs(f->a, &r), 0);
	assert_int_equal(r->reg[1].drain, 1);
	rs_admin_regs_free(&r);
	assert_int_equal(rs_admin_decide(f->a, 3, NULL), 1);
	assert_int_equal(state_of(f, "n1"), RS_ADMIN_LEAVING);
	assert_int_equal(rs_admin_drain(f->a, "n1", RS_ADMIN_DRAIN_CANCEL), 0);
	assert_int_equal(rs_admin_decide(f->a, 3, NULL), 1);
	assert_int_equal(state_of(f, "n1"), RS_ADMIN_ACTIVE);
}

/* recover with nothing to recover: 0 and etcd's configuration. */
static void recover_nothing(void **state)
{
	struct fx *f = *state;
	struct rs_admin_config *cfg = (void *)1;

	assert_int_equal(rs_admin_recover(NULL, &cfg), RS_E_INVAL);
	assert_int_equal(rs_admin_decide(f->a, 3, NULL), 1);
	assert_int_equal(rs_admin_recover(f->a, &cfg), 0);
	assert_non_null(cfg);
	assert_int_equal(cfg->epoch, 1);
	assert_int_equal(cfg->n, 3);
	rs_admin_config_free(&cfg);
}

/* An etcd outage reaches the caller as -ECONNREFUSED (recstore-ctl's
 * drain and cluster retry on it). */
static void store_down(void **state)
{
	struct fx *f = *state;
	struct rs_admin_config *cfg = (void *)1;
	struct rs_admin_regs *r = (void *)1;

	coord_mem_set_down(f->c, true);
	assert_int_equal(rs_admin_read_config(f->a, &cfg), -ECONNREFUSED);
	assert_null(cfg);
	assert_int_equal(rs_admin_read_regs(f->a, &r), -ECONNREFUSED);
	assert_null(r);
	assert_int_equal(rs_admin_drain(f->a, "n1", 0), -ECONNREFUSED);
	assert_true(rs_admin_wait(f->a, 1, 10) < 0);
	coord_mem_set_down(f->c, false);
	assert_int_equal(rs_admin_read_config(f->a, &cfg), 0);
	rs_admin_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(check_id),
		cmocka_unit_test(open_refuses),
		cmocka_unit_test(names),
		cmocka_unit_test_setup_teardown(decide_and_read, setup,
						teardown),
		cmocka_unit_test_setup_teardown(placement, setup, teardown),
		cmocka_unit_test_setup_teardown(regs_and_decider, setup,
						teardown),
		cmocka_unit_test_setup_teardown(drain, setup, teardown),
		cmocka_unit_test_setup_teardown(recover_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(store_down, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
