/*
 * ring.h - consistent hashing of keys onto memory nodes (place_ring_):
 * placement, below both the client (static mode, cluster routes) and
 * coordination (replica sets), so that both place every key alike.
 *
 * Every memory node owns `vnodes` points on a 64-bit ring. A node's points
 * are XXH3-64 hashes of its *name* (the "addr:port" string from the client
 * config) and the virtual-node number, so the ring depends only on the set
 * of names and the vnode count: every client given the same node list, in
 * any order, places every key on the same node. A key goes to the owner of
 * the first point at or after hash(key) (wrapping around). Removing a node
 * moves only the keys that node owned; adding one moves about 1/N of them.
 *
 * Points that collide (two equal 64-bit values, astronomically rare) are
 * ordered by node name, so even then every client agrees.
 *
 * Successor lists (place_ring_successors) are distinct owners; with
 * place_ring_new_owned() the owners are the caller's numbers.
 *
 * Concurrency: a ring is immutable after place_ring_new(); lookups from any
 * number of threads need no lock. Ownership: the ring copies the names.
 */
#ifndef PLACE_RING_H
#define PLACE_RING_H

#include <stddef.h>
#include <stdint.h>

#define PLACE_RING_DEFAULT_VNODES 160
#define PLACE_RING_MAX_VNODES 4096
#define PLACE_RING_MAX_NODES 1024

struct place_ring;

/* Build a ring over n named nodes (names must be distinct and non-empty).
 * Node indexes returned by lookups are positions in `names`. */
int place_ring_new(struct place_ring **out, const char *const *names, size_t n,
		   unsigned vnodes);
/* The same ring, but lookups return owner[i] for names[i] instead of i
 * (distinct values; owner NULL: i). Placement depends on the names only,
 * so both rings put every key on the same name. The cluster route uses
 * it to get client node indexes straight from a ring over member ids. */
int place_ring_new_owned(struct place_ring **out, const char *const *names,
			 const unsigned *owner, size_t n, unsigned vnodes);
void place_ring_delete(struct place_ring **ring);

/* The hash a key is placed by (exposed for tests and tools). */
uint64_t place_ring_key_hash(uint64_t key);

/* Node index owning `key`. */
unsigned place_ring_node(const struct place_ring *ring, uint64_t key);

/* The successor list of hash h: the owners of the points at or after h,
 * walking clockwise, each node once, up to r of them (fewer when the ring
 * has fewer nodes). out[0] is the owner (place_ring_node), out[1] the next
 * distinct node, ... Returns the count. For replica sets
 * (src/coord/membership.c). */
unsigned place_ring_successors(const struct place_ring *ring, uint64_t h,
			       unsigned *out, unsigned r);

/* Point i (0..points-1) in ring order: its hash and owner. */
void place_ring_point(const struct place_ring *ring, size_t i, uint64_t *hash,
		      unsigned *node);

size_t place_ring_nodes(const struct place_ring *ring);
size_t place_ring_points(const struct place_ring *ring);

#endif
