/*
 * test_client_optim.c - every optimizer, end to end: many UPDATE batches
 * with duplicate keys through the client, rows read back by one-sided
 * gets, compared with a plain scalar reference written here from the
 * formulas of docs/optimizers.md (double precision; duplicates summed in
 * batch order, one step per distinct key and batch; per-row Adam steps).
 * The learning rate changes from round to round as a scheduler would
 * change it (rs_update_ex with RS_UPDATE_LR, sync and async, a round at
 * lr 0 included), every third round at the table's own lr. And a
 * per-update lr on SGD with exact numbers, and the lr checks.
 */
#include <math.h>

#include "client_harness.h"

#define DIM 16
#define KEYS 40
#define BATCH 64
#define ROUNDS 30

struct ref_row {
	double w[DIM], g_acc[DIM], m[DIM], v[DIM], G;
	unsigned t;
};

struct hp {
	double lr, eps, b1, b2, wd;
};

static void ref_step(const char *opt, const struct hp *p, struct ref_row *r,
		     const double *g)
{
	if (!strcmp(opt, "sgd")) {
		for (int e = 0; e < DIM; e++)
			r->w[e] -= p->lr * g[e];
	} else if (!strcmp(opt, "adagrad")) {
		for (int e = 0; e < DIM; e++) {
			r->g_acc[e] += g[e] * g[e];
			r->w[e] -= p->lr * g[e] / (sqrt(r->g_acc[e]) + p->eps);
		}
	} else if (!strcmp(opt, "rowwise_adagrad")) {
		double s = 0;

		for (int e = 0; e < DIM; e++)
			s += g[e] * g[e];
		r->G += s / DIM;
		for (int e = 0; e < DIM; e++)
			r->w[e] -= p->lr / (sqrt(r->G) + p->eps) * g[e];
	} else { /* adam */
		double bc1, bc2;

		r->t++;
		bc1 = 1 - pow(p->b1, r->t);
		bc2 = 1 - pow(p->b2, r->t);
		for (int e = 0; e < DIM; e++) {
			r->m[e] = p->b1 * r->m[e] + (1 - p->b1) * g[e];
			r->v[e] = p->b2 * r->v[e] + (1 - p->b2) * g[e] * g[e];
			r->w[e] -= (p->lr / bc1) * r->m[e] /
				   (sqrt(r->v[e]) / sqrt(bc2) + p->eps);
		}
	}
}

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void run(struct rs_client *c, const char *opt)
{
	char name[32];
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	struct rs_table *t;
	struct hp p, pr;
	static struct ref_row ref[KEYS];
	uint64_t keys[BATCH], all[KEYS];
	float grads[BATCH * DIM], rows[KEYS * DIM];
	int st[BATCH > KEYS ? BATCH : KEYS];
	double worst = 0;

	snprintf(name, sizeof(name), "opt_%s", opt);
	H_OK(rs_table_spec_init(&spec, name, DIM));
	H_OK(rs_table_spec_set_optimizer(&spec, opt));
	spec.capacity = 1024;
	spec.init.kind = RS_INIT_CONSTANT;
	spec.init.value = 0.5f;
	spec.optim.lr = !strcmp(opt, "adam") ? 0.01f : 0.05f;
	H_OK(rs_table_create(c, &spec));
	H_OK(rs_table_open(c, name, &t));
	p = (struct hp){ spec.optim.lr, spec.optim.eps, spec.optim.beta1,
			 spec.optim.beta2, 0 };
	memset(ref, 0, sizeof(ref));
	for (int k = 0; k < KEYS; k++) {
		all[k] = 1000 + (uint64_t)k * 977;
		for (int e = 0; e < DIM; e++)
			ref[k].w[e] = 0.5;
	}
	H_CHECK(rs_get_or_init(t, all, KEYS, rows, st, 0) == KEYS, "init");
	for (int round = 0; round < ROUNDS; round++) {
		double sum[KEYS][DIM] = { { 0 } };
		int seen[KEYS] = { 0 };

		/* A skewed batch: low keys repeat often. */
		for (int i = 0; i < BATCH; i++) {
			int k = (int)(next() % KEYS);

			k = k * k / KEYS;
			keys[i] = all[k];
			seen[k] = 1;
			for (int e = 0; e < DIM; e++) {
				float g = (float)((int)(next() % 2001) - 1000) /
					  1000.0f;

				grads[i * DIM + e] = g;
				sum[k][e] += g;
			}
		}
		pr = p;
		if (round % 3 == 0) {
			H_CHECK(rs_update(t, keys, BATCH, grads, st, 0) ==
					BATCH,
				"%s: update round %d", opt, round);
		} else {
			/* a schedule: warm-up at 0, then up and down */
			struct rs_update_opts uo = RS_UPDATE_OPTS_INIT;
			struct rs_op *op;

			uo.flags = RS_UPDATE_LR;
			uo.lr = round == 1 ? 0.0f :
				spec.optim.lr * (0.25f + (round % 7) * 0.3f);
			pr.lr = uo.lr;
			if (round % 3 == 1) {
				H_CHECK(rs_update_ex(t, keys, BATCH, grads, st,
						     0, &uo) == BATCH,
					"%s: update_ex round %d", opt, round);
			} else {
				H_OK(rs_update_ex_async(t, keys, BATCH, grads,
							st, 0, &uo, &op));
				uo.lr = -1.0f; /* opts were copied */
				H_CHECK(rs_op_wait(&op) == BATCH,
					"%s: update_ex_async round %d", opt,
					round);
			}
		}
		for (int k = 0; k < KEYS; k++)
			if (seen[k])
				ref_step(opt, &pr, &ref[k], sum[k]);
		/* Read back by one-sided READ every few rounds (exercises
		 * the cached locations while rows change). */
		if (round % 5 == 4 || round == ROUNDS - 1) {
			H_CHECK(rs_get(t, all, KEYS, rows, st, 0) == KEYS,
				"get");
			for (int k = 0; k < KEYS; k++)
				for (int e = 0; e < DIM; e++) {
					double d = fabs(rows[k * DIM + e] -
							ref[k].w[e]);

					d /= fmax(1e-3, fabs(ref[k].w[e]));
					worst = fmax(worst, d);
					H_CHECK(d < 1e-3, "%s: key %d elem %d:"
						" %.7g vs reference %.7g",
						opt, k, e, rows[k * DIM + e],
						ref[k].w[e]);
				}
		}
	}
	printf("%-16s %d rounds x %d updates (duplicates): max rel. "
	       "error %.2g: ok\n", opt, ROUNDS, BATCH, worst);
}

/* A finite gradient whose Adagrad step overflows (g * g = 1e40): that key
 * gets RS_E_OVERFLOW and keeps its row bit for bit (and its state: the
 * next ordinary step still moves it); the other key of the batch is
 * updated. */
static void overflow(struct rs_client *c)
{
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	struct rs_table *t;
	uint64_t keys[2] = { 7, 8 };
	float before[2 * DIM], after[2 * DIM], grads[2 * DIM];
	int st[2];

	H_OK(rs_table_spec_init(&spec, "opt_overflow", DIM));
	H_OK(rs_table_spec_set_optimizer(&spec, "adagrad"));
	spec.capacity = 64;
	spec.init.kind = RS_INIT_CONSTANT;
	spec.init.value = 0.5f;
	H_OK(rs_table_create(c, &spec));
	H_OK(rs_table_open(c, "opt_overflow", &t));
	H_CHECK(rs_get_or_init(t, keys, 2, before, st, 0) == 2, "init");
	for (int e = 0; e < 2 * DIM; e++)
		grads[e] = 0.25f;
	grads[3] = 1e20f;
	H_CHECK(rs_update(t, keys, 2, grads, st, 0) == 1, "update: %d %d",
		st[0], st[1]);
	H_CHECK(st[0] == RS_E_OVERFLOW, "status %d (%s)", st[0],
		rs_strerror(st[0]));
	H_CHECK(st[1] == RS_KEY_FOUND, "status of the other key %d", st[1]);
	H_CHECK(rs_get(t, keys, 2, after, st, 0) == 2, "get");
	H_CHECK(!memcmp(before, after, DIM * sizeof(float)),
		"the refused key's row changed");
	H_CHECK(after[DIM] != before[DIM], "the other key was not updated");
	grads[3] = 0.25f;
	H_CHECK(rs_update(t, keys, 1, grads, st, 0) == 1 && st[0] == 1,
		"a later ordinary step: %d", st[0]);
	H_CHECK(rs_get(t, keys, 1, after, st, 0) == 1 && after[3] < 0.5f,
		"a later ordinary step did not move the row (state)");
	/* fp16 table: finite in fp32, infinite once stored (>= 65520) */
	H_OK(rs_table_spec_init(&spec, "opt_overflow16", DIM));
	spec.dtype = RS_DTYPE_FP16;
	spec.capacity = 64;
	spec.init.kind = RS_INIT_CONSTANT;
	spec.init.value = 65000.0f;
	spec.optim.lr = 1.0f;
	H_OK(rs_table_create(c, &spec));
	H_OK(rs_table_open(c, "opt_overflow16", &t));
	H_CHECK(rs_get_or_init(t, keys, 1, before, st, 0) == 1, "init16");
	for (int e = 0; e < DIM; e++)
		grads[e] = e == 5 ? -1000.0f : 1.0f;
	H_CHECK(rs_update(t, keys, 1, grads, st, 0) == 0 &&
			st[0] == RS_E_OVERFLOW,
		"fp16 update status %d", st[0]);
	H_CHECK(rs_get(t, keys, 1, after, st, 0) == 1 &&
			!memcmp(before, after, DIM * sizeof(float)),
		"fp16: the refused key's row changed");
	after[2] = 70000.0f;
	H_CHECK(rs_put(t, &keys[1], 1, after, st, 0) == 0 &&
			st[0] == RS_E_OVERFLOW,
		"fp16 put of 70000: status %d", st[0]);
	printf("overflow: refused with RS_E_OVERFLOW, row unchanged: ok\n");
}

/* SGD with a per-update lr, exact in binary floating point: w = 0.5,
 * g 0.5 at lr 1.0 -> 0, g 1 at lr 0.25 -> -0.25, then g 2 at the table's
 * lr 0.125 -> -0.5 (the table's lr was never changed). Bad lrs are
 * refused with RS_E_INVAL and change nothing. */
static void lr_exact(struct rs_client *c)
{
	static const float bad[] = { NAN, INFINITY, -INFINITY, -0.25f };
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	struct rs_update_opts uo = RS_UPDATE_OPTS_INIT;
	struct rs_table *t;
	uint64_t keys[2] = { 11, 12 };
	float g[2 * DIM], row[2 * DIM];
	int st[2];

	H_OK(rs_table_spec_init(&spec, "opt_lr", DIM));
	spec.capacity = 64;
	spec.init.kind = RS_INIT_CONSTANT;
	spec.init.value = 0.5f;
	spec.optim.lr = 0.125f;
	H_OK(rs_table_create(c, &spec));
	H_OK(rs_table_open(c, "opt_lr", &t));
	H_CHECK(rs_get_or_init(t, keys, 2, row, st, 0) == 2, "init");
	uo.flags = RS_UPDATE_LR;
	for (int e = 0; e < 2 * DIM; e++)
		g[e] = 0.5f;
	uo.lr = 1.0f;
	H_CHECK(rs_update_ex(t, keys, 2, g, st, 0, &uo) == 2, "lr 1.0");
	for (int e = 0; e < 2 * DIM; e++)
		g[e] = 1.0f;
	uo.lr = 0.25f;
	H_CHECK(rs_update_ex(t, keys, 2, g, st, 0, &uo) == 2, "lr 0.25");
	H_CHECK(rs_get(t, keys, 2, row, st, 0) == 2, "get");
	for (int e = 0; e < 2 * DIM; e++)
		H_CHECK(row[e] == -0.25f, "after lr 1.0 and 0.25: elem %d is "
			"%.9g, not -0.25", e, row[e]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uo.lr = bad[i];
		H_CHECK(rs_update_ex(t, keys, 2, g, st, 0, &uo) ==
				RS_E_INVAL,
			"lr %g accepted", (double)bad[i]);
	}
	uo.flags = 0x4; /* unknown */
	uo.lr = 1.0f;
	H_CHECK(rs_update_ex(t, keys, 2, g, st, 0, &uo) == RS_E_INVAL,
		"unknown option flags accepted");
	for (int e = 0; e < 2 * DIM; e++)
		g[e] = 2.0f;
	H_CHECK(rs_update_ex(t, keys, 2, g, st, 0, NULL) == 2,
		"update_ex without options");
	H_CHECK(rs_get(t, keys, 2, row, st, 0) == 2, "get");
	for (int e = 0; e < 2 * DIM; e++)
		H_CHECK(row[e] == -0.5f, "at the table's lr: elem %d is %.9g, "
			"not -0.5", e, row[e]);
	H_OK(rs_table_get_spec(c, "opt_lr", &spec));
	H_CHECK(spec.optim.lr == 0.125f, "the table's lr changed: %g",
		(double)spec.optim.lr);
	printf("per-update lr (sgd, exact): 1.0, 0.25, table's 0.125; "
	       "NaN/inf/negative refused: ok\n");
}

int main(void)
{
	static const char *const opts[] = { "sgd", "adagrad",
					    "rowwise_adagrad", "adam" };
	struct harness h;
	struct rs_client *c;

	h_start(&h, 1);
	c = h_client(&h);
	for (size_t i = 0; i < 4; i++)
		run(c, opts[i]);
	overflow(c);
	lr_exact(c);
	rs_client_close(&c);
	h_stop(&h);
	printf("6 passed, 0 failed\n");
	return 0;
}
