/*
 * test_server_torn.c - one-sided readers never accept a torn row while the
 * node applies updates in place.
 *
 * A writer thread keeps sending UPDATE RPCs (SGD, lr 1, gradient all ones:
 * every element of a row drops by exactly 1 per step, so every consistent
 * row has all its elements equal) for a few hot keys of a wide table. The
 * main thread meanwhile READs the same rows straight out of the node's
 * registered memory, as a client does: both candidate buckets of the
 * PET-hash index (pet_locate, pet_bucket_validate, pet_bucket_find), then
 * the row (row_validate). Every row the validation accepts must be
 * consistent (all elements equal, never above the last accepted value);
 * rows caught mid-write must be rejected as torn. The counts are printed.
 *
 * The test must see the race it hunts: at least one row READ rejected as
 * torn. Rows are wide (DIM floats: a READ spans many rxe packets, an
 * update a long in-place write), so a READ overlaps a write often; the
 * reader stops once it has seen MIN_TORN torn and MIN_ACCEPTED consistent
 * rows, or after BUDGET seconds (a slow or loaded guest), then asserts.
 */
#include "server_harness.h"
#include "index/pet_format.h"
#include "value/row_format.h"

#define DIM 4096
#define HOT 4
#define BUDGET 60.0
#define MIN_TORN 5
#define MIN_ACCEPTED 200

static struct sv_node node;
static struct proto_table_info tab;
static _Atomic int writer_stop;
static unsigned long writer_steps;

static void *writer_main(void *arg)
{
	static float g[HOT * DIM];
	uint64_t keys[HOT];
	int32_t st[HOT];
	struct sv_cli k;

	(void)arg;
	sv_cli_open(&k, node.ip, node.port);
	for (int i = 0; i < HOT; i++)
		keys[i] = 4242 + (uint64_t)i;
	for (int i = 0; i < HOT * DIM; i++)
		g[i] = 1.0f;
	while (!writer_stop) {
		SV_OK(sv_keys(&k, PROTO_OP_UPDATE, &tab, keys, HOT, g, 0, st,
			      NULL));
		for (int i = 0; i < HOT; i++)
			SV_CHECK(st[i] == 0, "update status %d", st[i]);
		writer_steps++;
	}
	sv_cli_close(&k);
	return NULL;
}

struct reader {
	struct sv_cli k;
	struct rv_mr *mr;
	struct pet_geom pg;
	struct row_geom rg;
	unsigned long reads, accepted, torn, stale, bucket_torn;
};

static int read_remote(struct reader *r, uint64_t addr, uint32_t len,
		       uint32_t rkey, void *local)
{
	struct rv_read_req q = { .local = local, .lkey = r->mr->lkey,
				 .len = len, .remote = addr, .rkey = rkey };

	return rv_read_batch(r->k.c, &q, 1, SV_TIMEOUT_MS);
}

/* The key's row slot, through the index; -1 if absent. */
static int64_t lookup(struct reader *r, uint64_t key)
{
	uint8_t *b = (uint8_t *)r->mr->addr + (1u << 19); /* after the row */
	struct pet_loc loc;
	uint32_t ref;

	pet_locate(&r->pg, key, &loc);
	for (int tries = 0; tries < 1000; tries++) {
		bool torn = false;

		for (int i = 0; i < 2; i++) {
			SV_OK(read_remote(r, tab.index.addr +
						     pet_bucket_off(&r->pg,
								    loc.b[i]),
					  PET_BUCKET_BYTES, tab.index.rkey,
					  b + i * PET_BUCKET_BYTES));
			if (pet_bucket_validate(b + i * PET_BUCKET_BYTES,
						loc.b[i], r->pg.incarnation))
				torn = true;
		}
		if (torn) {
			r->bucket_torn++;
			continue;
		}
		for (int i = 0; i < 2; i++)
			if (!pet_bucket_find(b + i * PET_BUCKET_BYTES, key,
					     loc.tag, &ref))
				return ref;
		return -1; /* no moves in this test: absent */
	}
	sv_die("buckets of key %llu torn 1000 times",
	       (unsigned long long)key);
	return -1;
}

int main(void)
{
	const char *ip = sv_ip();
	struct proto_table_spec spec;
	struct reader r = { 0 };
	uint64_t keys[HOT];
	int64_t ref[HOT];
	float last[HOT], *rows;
	int32_t st[HOT];
	pthread_t w;
	double t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sv_memlock();
	sv_node_start(&node, ip, NULL);
	sv_cli_open(&r.k, node.ip, node.port);
	SV_OK(rv_mem_alloc(r.k.dev, 1 << 20, RV_ACC_LOCAL_WRITE, &r.mr));
	sv_spec(&spec, "torn", DIM, OPTIM_SGD);
	spec.optim.lr = 1.0f;
	spec.capacity = 64;
	SV_OK(sv_create(&r.k, &spec, &tab));
	rows = calloc(HOT * DIM, sizeof(float));
	for (int i = 0; i < HOT; i++)
		keys[i] = 4242 + (uint64_t)i;
	SV_OK(sv_keys(&r.k, PROTO_OP_PUT, &tab, keys, HOT, rows, 0, st,
		      NULL));
	free(rows);

	r.pg = (struct pet_geom){ .nbuckets = tab.index.nbuckets,
				  .seed1 = tab.index.seed1,
				  .seed2 = tab.index.seed2,
				  .bucket_bytes = tab.index.bucket_bytes,
				  .buckets_off = tab.index.buckets_off,
				  .incarnation = tab.generation };
	SV_OK(row_geom_init(&r.rg, DIM, ROW_F32,
			    tab.rows.bytes / tab.rows.row_bytes,
			    (uint16_t)tab.id));
	r.rg.incarnation = tab.generation;
	SV_CHECK(r.rg.stride == tab.rows.row_bytes, "stride %u vs %u",
		 r.rg.stride, tab.rows.row_bytes);
	for (int i = 0; i < HOT; i++) {
		ref[i] = lookup(&r, keys[i]);
		SV_CHECK(ref[i] >= 0, "key %llu not in the index",
			 (unsigned long long)keys[i]);
		last[i] = 1.0f;
	}

	if (pthread_create(&w, NULL, writer_main, NULL))
		sv_die("pthread_create");
	t0 = sv_now();
	while (sv_now() - t0 < BUDGET &&
	       (r.torn < MIN_TORN || r.accepted < MIN_ACCEPTED)) {
		for (int i = 0; i < HOT; i++) {
			uint8_t *row = r.mr->addr;
			const float *v = (const float *)row_payload(row);
			int ret;

			SV_OK(read_remote(&r, tab.rows.addr +
						     row_off(&r.rg,
							     (uint32_t)ref[i]),
					  r.rg.stride, tab.rows.rkey, row));
			r.reads++;
			ret = row_validate(row, &r.rg, (uint32_t)ref[i],
					   keys[i], NULL);
			if (ret == RS_E_TORN) {
				r.torn++;
				continue;
			}
			if (ret == RS_E_STALE) {
				r.stale++;
				ref[i] = lookup(&r, keys[i]);
				continue;
			}
			SV_OK(ret);
			for (int j = 1; j < DIM; j++)
				SV_CHECK(v[j] == v[0], "ACCEPTED A TORN ROW: "
					 "key %llu element %d is %g, element "
					 "0 is %g", (unsigned long long)keys[i],
					 j, v[j], v[0]);
			SV_CHECK(v[0] <= last[i], "row went back: %g after %g",
				 v[0], last[i]);
			last[i] = v[0];
			r.accepted++;
		}
	}
	writer_stop = 1;
	pthread_join(w, NULL);
	printf("%lu update batches of %d keys x %d floats; %lu one-sided row "
	       "READs: %lu accepted (all consistent), %lu rejected as torn, "
	       "%lu stale; %lu torn bucket reads\n", writer_steps, HOT, DIM,
	       r.reads, r.accepted, r.torn, r.stale, r.bucket_torn);
	SV_CHECK(writer_steps > 0 && r.accepted > 0, "no progress");
	SV_CHECK(r.torn > 0, "no READ overlapped an update: the race this "
		 "test hunts did not happen");
	SV_CHECK(-last[0] <= (float)writer_steps, "values");
	rv_mr_free(&r.mr);
	sv_cli_close(&r.k);
	sv_node_stop(&node);
	printf("ok\n");
	return 0;
}
