/*
 * prefetch.c - rs_table_prefetch_index(): a table's whole index READ in
 * bulk into the bucket-image cache (bcache.h).
 *
 * Per node that serves the table one-sided, the index region is READ in
 * PREFETCH_READ_BYTES pieces, as many per round as the borrowed
 * context's READ buffer holds (8 MiB: 32 READs of 256 KiB, 65,536
 * buckets per round trip). Each bucket image is validated as a get
 * validates it (pet_bucket_validate: even version, checksum seeded by
 * position and incarnation); a torn one (a writer inside) is skipped, and
 * the cold path READs that bucket when a key needs it. No more buckets
 * are READ than the cache holds: a prefetch never evicts its own images
 * (an index larger than that: the capacity is shared evenly among the
 * nodes).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/rs_internal.h"

#define PREFETCH_READ_BYTES (256u << 10)
#define PREFETCH_MAX_REQS 64u

/* READ the index of one node's view v into the cache, at most *budget
 * buckets (decremented); *total counts images entered. */
static int prefetch_node(struct rs_client *c, struct cli_node *node,
			 const struct cli_tloc *v, size_t *budget,
			 uint64_t *total)
{
	const uint64_t gen = cli_bcache_gen(&v->geom);
	const uint64_t per_req = PREFETCH_READ_BYTES / PET_BUCKET_BYTES;
	struct rv_read_req reqs[PREFETCH_MAX_REQS];
	uint64_t nb = v->geom.nbuckets, b0 = 0;
	struct cli_conn *cc;
	size_t per_round;
	int ret = cli_conn_get(node, &cc);

	if (ret)
		return ret;
	per_round = cc->buf->len / PREFETCH_READ_BYTES;
	if (per_round > PREFETCH_MAX_REQS)
		per_round = PREFETCH_MAX_REQS;
	while (!ret && b0 < nb && *budget) {
		uint8_t *base = cc->buf->addr;
		uint64_t b = b0, want = nb - b0;
		struct rv_batch batch;
		size_t n = 0;

		if (want > *budget)
			want = *budget;
		while (n < per_round && b < b0 + want) {
			uint64_t cnt = b0 + want - b;

			if (cnt > per_req)
				cnt = per_req;
			reqs[n] = (struct rv_read_req){
				.local = base + n * PREFETCH_READ_BYTES,
				.lkey = cc->buf->lkey,
				.len = (uint32_t)(cnt * PET_BUCKET_BYTES),
				.remote = v->info.index.addr +
					  pet_bucket_off(&v->geom, b),
				.rkey = v->info.index.rkey,
			};
			n++;
			b += cnt;
		}
		ret = rv_read_post(cc->rc, &batch, reqs, n);
		if (!ret)
			ret = rv_batch_wait(cc->rc, &batch,
					    (int)c->cfg.timeout_ms);
		if (ret) {
			/* closing the context (put below) completes a
			 * batch still pending while reqs live */
			cli_conn_fail(cc, ret);
			break;
		}
		CLI_INC(c, reads_posted, n);
		for (size_t j = 0; j < n; j++) {
			const uint8_t *img = reqs[j].local;
			uint64_t first = b0 + j * per_req;

			for (uint64_t x = 0; x < reqs[j].len / PET_BUCKET_BYTES;
			     x++, img += PET_BUCKET_BYTES) {
				if (pet_bucket_validate(img, first + x,
							v->geom.incarnation))
					continue;
				cli_bcache_put(c->bcache, v->uid, gen,
					       first + x, img);
				(*total)++;
			}
		}
		*budget -= b - b0;
		b0 = b;
	}
	cli_conn_put(cc);
	return ret;
}

RS_EXPORT int rs_table_prefetch_index(struct rs_table *t, uint64_t *buckets)
{
	struct cli_tloc *views;
	struct rs_client *c;
	uint64_t total = 0;
	size_t budget, nn, nv = 0;
	int ret = 0;

	if (buckets)
		*buckets = 0;
	if (!t)
		return rs_seterr(RS_E_INVAL, "prefetch index: NULL table");
	c = t->c;
	if (!c->bcache)
		return rs_seterr(RS_E_INVAL,
				 "prefetch index of %s: the bucket-image cache "
				 "is disabled (bucket cache bytes 0)",
				 t->name);
	budget = cli_bcache_capacity(c->bcache);
	nn = cli_nnodes(c);
	if (!(views = calloc(nn ? nn : 1, sizeof(*views))))
		return rs_seterr(-ENOMEM, "prefetch index: out of memory");
	for (size_t nd = 0; nd < nn; nd++) {
		cli_table_loc(t, (unsigned)nd, &views[nd]);
		nv += views[nd].valid && views[nd].onesided;
	}
	/* an index larger than the cache: its capacity shared evenly */
	for (size_t nd = 0; nd < nn && !ret && budget; nd++) {
		size_t share, left;

		if (!views[nd].valid || !views[nd].onesided)
			continue;
		share = left = budget / nv--;
		ret = prefetch_node(c, &c->nodes[nd], &views[nd], &left,
				    &total);
		budget -= share - left;
	}
	free(views);
	if (buckets)
		*buckets = total;
	return ret;
}
