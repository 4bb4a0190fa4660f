/*
 * crash_check.c - the bodies of the helpers declared in crash_check.h, which
 * says what they are for.
 */
#include "crash_check.h"

uint64_t crash_rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

void crash_model_init(struct crash_model *m, uint32_t slots)
{
	memset(m, 0, sizeof(*m));
	m->slots = slots;
	m->map = calloc(slots, sizeof(*m->map));
	assert_non_null(m->map);
}

struct crash_entry *crash_model_get(struct crash_model *m,
				    uint64_t key, int create)
{
	uint64_t h = key * 0x9E3779B97F4A7C15ULL;

	for (uint32_t i = (uint32_t)(h >> 32) & (m->slots - 1);;
	     i = (i + 1) & (m->slots - 1)) {
		struct crash_entry *e = &m->map[i];

		if (e->used && e->key == key)
			return e;
		if (!e->used) {
			if (!create)
				return NULL;
			e->used = 1;
			e->key = key;
			return e;
		}
	}
}

void crash_model_apply(struct crash_model *m,
		       const struct crash_rec *r)
{
	struct crash_entry *e;

	if (r->gen > m->max_gen)
		m->max_gen = r->gen;
	if (r->phase == PH_BEGIN) {
		m->inflight = *r; /* a previous unacked op failed: no effect */
		m->have_inflight = 1;
		return;
	}
	m->n_acks++;
	e = crash_model_get(m, r->key, 1);
	e->present = r->op != OP_DELETE;
	if (e->present) {
		e->gen = r->gen;
		e->sgen = r->sgen;
	}
	m->have_inflight = 0;
}

void crash_fill(uint64_t key, uint32_t gen, uint32_t sgen,
		float *val, float *state)
{
	for (int j = 0; j < CRASH_DIM; j++)
		val[j] = (float)gen;
	state[0] = (float)sgen;
	state[1] = sgen ? (float)(key & 0xFFFF) : 0.0f;
}

/* Read key: 0 and its generations, or RS_E_NOTFOUND. Fails the test on a
 * row that is not one single write. */
static int crash_read_gen(struct slab_table *t, uint64_t key,
			  uint32_t *gen, uint32_t *sgen)
{
	float v[CRASH_DIM], s[CRASH_SFLOATS];
	int rc = slab_read(t, key, v, NULL);

	if (rc)
		return rc;
	for (int j = 1; j < CRASH_DIM; j++)
		assert_true(v[j] == v[0]);
	assert_int_equal(slab_read_state(t, key, s), 0);
	assert_true(s[1] == (s[0] != 0.0f ? (float)(key & 0xFFFF) : 0.0f));
	*gen = (uint32_t)v[0];
	*sgen = (uint32_t)s[0];
	return 0;
}

struct crash_row_ctx {
	struct slab_table *t;
	struct crash_model *m;
	uint64_t n;
	int bad;
};

static int crash_check_row(void *arg, uint64_t key, uint32_t row)
{
	struct crash_row_ctx *c = arg;
	struct crash_entry *e = crash_model_get(c->m, key, 0);
	uint8_t raw[ROW_HDR_BYTES + CRASH_DIM * 4 + 64];
	int ok_inflight = c->m->have_inflight &&
			  c->m->inflight.key == key &&
			  c->m->inflight.op == OP_INSERT;

	c->n++;
	slab_read_row(c->t, row, raw);
	if (row_validate(raw, &c->t->rg, row, key, NULL))
		c->bad++; /* torn or foreign row visible */
	if (!ok_inflight && (!e || !e->present))
		c->bad++; /* a key nobody (acknowledged) inserted */
	return 0;
}

void crash_stats_add(struct crash_stats *acc,
		     struct slab_table *t)
{
	struct slab_table_stats ts;

	slab_table_stats(t, &ts);
	acc->replayed += ts.recovery.log_replayed;
	acc->reclaimed += ts.recovery.rows_reclaimed;
	acc->torn_rows += ts.recovery.rows_torn;
	acc->torn_buckets += ts.recovery.index.torn_buckets;
	acc->dropped += ts.recovery.index.dropped;
}

uint64_t crash_verify_table(struct crash_model *m,
			    struct slab_table *t,
			    struct crash_stats *acc)
{
	struct crash_row_ctx cc = {.t = t, .m = m};
	const struct crash_rec *in = &m->inflight;
	struct slab_table_stats ts;
	uint64_t present = 0;

	if (m->have_inflight) /* absent until acknowledged */
		crash_model_get(m, in->key, 1);
	for (uint32_t i = 0; i < m->slots; i++) {
		struct crash_entry *e = &m->map[i];
		uint32_t gen = 0, sgen = 0;
		int fl, rc;

		if (!e->used)
			continue;
		fl = m->have_inflight && in->key == e->key;
		rc = crash_read_gen(t, e->key, &gen, &sgen);
		if (acc)
			acc->checked_keys++;
		if (!fl) {
			if (e->present) {
				assert_int_equal(rc, 0);
				assert_int_equal(gen, e->gen);
				assert_int_equal(sgen, e->sgen);
			} else {
				assert_int_equal(rc, RS_E_NOTFOUND);
			}
		} else if (rc == 0) { /* old or new */
			if (!((e->present && gen == e->gen &&
			       sgen == e->sgen) ||
			      (in->op != OP_DELETE && gen == in->gen &&
			       sgen == in->sgen)))
				print_message("key %llu in flight (op %d, "
					      "%u/%u): holds %u/%u, was %s "
					      "%u/%u\n",
					      (unsigned long long)e->key,
					      in->op, in->gen, in->sgen, gen,
					      sgen, e->present ? "present"
							       : "absent",
					      e->gen, e->sgen);
			assert_true((e->present && gen == e->gen &&
				     sgen == e->sgen) ||
				    (in->op != OP_DELETE && gen == in->gen &&
				     sgen == in->sgen));
		} else {
			assert_int_equal(rc, RS_E_NOTFOUND);
			assert_true(!e->present || in->op == OP_DELETE);
		}
		if (fl) { /* adopt what recovery decided */
			e->present = rc == 0;
			e->gen = gen;
			e->sgen = sgen;
		}
		present += rc == 0;
	}
	assert_int_equal(slab_iterate(t, crash_check_row, &cc), 0);
	assert_int_equal(cc.bad, 0);
	assert_int_equal(cc.n, present);
	slab_table_stats(t, &ts);
	assert_int_equal(ts.live, present);
	assert_int_equal(pet_verify(t->pet, NULL), 0);
	m->have_inflight = 0;
	return present;
}
