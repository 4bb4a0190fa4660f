/*
 * ring.c - consistent-hash ring with virtual nodes (see ring.h).
 *
 * Layout: one sorted array of (point, node) pairs, n * vnodes long. A lookup
 * is a binary search for the first point >= hash(key); past the last point it
 * wraps to the first. With 160 vnodes per node the largest node's share stays
 * within a few percent of 1/N for the node counts we run (tested).
 *
 * Point of node i, vnode v: XXH3_64bits_withSeed(name_i, strlen, v). The key
 * hash uses a different fixed seed over the key's little-endian bytes, so the
 * two never correlate.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* inlined: a key is 8 bytes, where the library's call and its CPU
 * dispatch cost more than the hash (the same function, the same values) */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "place/ring.h"
#include "common/rs_internal.h"

#define KEY_SEED 0x9e3779b97f4a7c15ull

struct ring_point {
	uint64_t hash;
	uint32_t node;	/* the owner as lookups return it */
	uint32_t name;	/* the owner's position in names (ties; fills what
			   was padding) */
};

struct place_ring {
	size_t nnodes;
	size_t npoints;
	char **names;
	struct ring_point *points;
};

/* Sorting needs the names to break ties; qsort_r passes them in. */
static int point_cmp(const void *a, const void *b, void *arg)
{
	const struct ring_point *pa = a, *pb = b;
	char **names = arg;

	if (pa->hash != pb->hash)
		return pa->hash < pb->hash ? -1 : 1;
	return strcmp(names[pa->name], names[pb->name]);
}

static int check_names(const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!names[i] || !names[i][0])
			return rs_seterr(RS_E_INVAL, "ring: node %zu has no name",
					 i);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(names[i], names[j]))
				return rs_seterr(RS_E_INVAL,
						 "ring: node '%s' listed twice",
						 names[i]);
	}
	return 0;
}

static void free_names(char **names, size_t n)
{
	if (!names)
		return;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int check_owners(const unsigned *owner, size_t n)
{
	for (size_t i = 0; owner && i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (owner[i] == owner[j])
				return rs_seterr(RS_E_INVAL, "ring: owner %u "
						 "given twice", owner[i]);
	return 0;
}

int place_ring_new(struct place_ring **out, const char *const *names, size_t n,
		   unsigned vnodes)
{
	return place_ring_new_owned(out, names, NULL, n, vnodes);
}

int place_ring_new_owned(struct place_ring **out, const char *const *names,
			 const unsigned *owner, size_t n, unsigned vnodes)
{
	struct place_ring *r;
	int ret;

	*out = NULL;
	if (n == 0 || n > PLACE_RING_MAX_NODES)
		return rs_seterr(RS_E_INVAL, "ring: %zu nodes (1..%d)", n,
				 PLACE_RING_MAX_NODES);
	if (vnodes == 0 || vnodes > PLACE_RING_MAX_VNODES)
		return rs_seterr(RS_E_INVAL, "ring: %u vnodes (1..%d)", vnodes,
				 PLACE_RING_MAX_VNODES);
	ret = check_names(names, n);
	if (!ret)
		ret = check_owners(owner, n);
	if (ret)
		return ret;
	r = rs_calloc(1, sizeof(*r));
	if (!r)
		return rs_seterr(-ENOMEM, "ring: out of memory");
	r->names = rs_calloc(n, sizeof(*r->names));
	if (!r->names)
		goto free_ring;
	for (r->nnodes = 0; r->nnodes < n; r->nnodes++) {
		r->names[r->nnodes] = rs_strdup(names[r->nnodes]);
		if (!r->names[r->nnodes])
			goto free_names;
	}
	r->npoints = n * vnodes;
	r->points = rs_calloc(r->npoints, sizeof(*r->points));
	if (!r->points)
		goto free_names;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(names[i]);

		for (unsigned v = 0; v < vnodes; v++) {
			struct ring_point *p = &r->points[i * vnodes + v];

			p->hash = XXH3_64bits_withSeed(names[i], len, v);
			p->node = owner ? owner[i] : (uint32_t)i;
			p->name = (uint32_t)i;
		}
	}
	qsort_r(r->points, r->npoints, sizeof(*r->points), point_cmp,
		r->names);
	*out = r;
	return 0;

free_names:
	free_names(r->names, r->nnodes);
free_ring:
	free(r);
	return rs_seterr(-ENOMEM, "ring: out of memory");
}

void place_ring_delete(struct place_ring **ring)
{
	if (!ring || !*ring)
		return;
	free((*ring)->points);
	free_names((*ring)->names, (*ring)->nnodes);
	free(*ring);
	*ring = NULL;
}

uint64_t place_ring_key_hash(uint64_t key)
{
	/* the key's little-endian bytes, as one word (a byte loop here
	 * was 8 stores per placement) */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	uint64_t le = __builtin_bswap64(key);
#else
	uint64_t le = key;
#endif

	return XXH3_64bits_withSeed(&le, sizeof(le), KEY_SEED);
}

/* Index of the first point with hash >= h (wrapping to 0). */
static size_t first_at(const struct place_ring *ring, uint64_t h)
{
	size_t lo = 0, hi = ring->npoints;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ring->points[mid].hash < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == ring->npoints ? 0 : lo;
}

unsigned place_ring_successors(const struct place_ring *ring, uint64_t h,
			       unsigned *out, unsigned r)
{
	size_t i = first_at(ring, h);
	unsigned n = 0;

	if (r > ring->nnodes)
		r = (unsigned)ring->nnodes;
	for (size_t walked = 0; n < r && walked < ring->npoints; walked++) {
		unsigned node = ring->points[i].node;
		unsigned j;

		for (j = 0; j < n && out[j] != node; j++)
			;
		if (j == n)
			out[n++] = node;
		if (++i == ring->npoints)
			i = 0;
	}
	return n;
}

void place_ring_point(const struct place_ring *ring, size_t i, uint64_t *hash,
		      unsigned *node)
{
	*hash = ring->points[i].hash;
	*node = ring->points[i].node;
}

unsigned place_ring_node(const struct place_ring *ring, uint64_t key)
{
	return ring->points[first_at(ring, place_ring_key_hash(key))].node;
}

size_t place_ring_nodes(const struct place_ring *ring)
{
	return ring->nnodes;
}

size_t place_ring_points(const struct place_ring *ring)
{
	return ring->npoints;
}
