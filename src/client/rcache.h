/*
 * rcache.h - a table's row cache on the client (internal, cli_rcache_).
 *
 * Keeps copies of hot rows (fp32, as a get returns them) together with
 * what proves them current: the node and slot the row was seen in, and
 * the version and checksum words of that image. A get (get.c) uses an
 * entry in one of two ways (docs/client.md, "Row cache"):
 *   exact      a 16-byte READ of the slot's version and checksum words,
 *              in the same doorbell as the other keys' READs, must return
 *              the entry's words; anything else READs the row
 *   stale      an entry at most max_stale steps old (rs_client_step) is
 *              used without any READ (BagPipe-style bounded staleness)
 * Entries come from rows READ by gets and from the rows a node returns
 * for an UPDATE of this table (PROTO_KF_ROWS): a row this trainer updates
 * stays current without a READ.
 *
 * Bounded in bytes: the budget covers the sets, the rows and the
 * frequency sketch. Sets of CLI_RCACHE_WAYS ways. Admission by frequency
 * (TinyLFU): every lookup counts a sighting of its key in a count-min
 * sketch (4 counters per key, 16 to 32 per cached row, saturating at 15,
 * halved every 10 x capacity sightings); a row offered to a full set
 * replaces the set's least-seen row (ties: CLOCK order) only if its key
 * was seen more often.
 * Refreshing an entry already cached is always done.
 *
 * Concurrency: thread-safe; a spin lock per set (held for a row copy),
 * relaxed atomic counters and sketch.
 */
#ifndef CLI_RCACHE_H
#define CLI_RCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_RCACHE_WAYS 8

/* What proves a cached row current: where it was seen and its header
 * words there. uid: the client's id of the node's table view
 * (struct cli_tloc.uid), so a dropped and re-created table never
 * matches. stamp: the client's step when the row was seen. */
struct cli_rentry {
	uint64_t version, csum;
	uint32_t slot, node, uid, stamp;
};

struct cli_rcache_stats {
	uint64_t inserts, refreshes, evictions, rejects, invalidations;
	size_t bytes, rows; /* memory held, rows it can hold */
};

struct cli_rcache;

/* A cache of rows of dim floats in at most `bytes` (rows, sets and
 * sketch); max_stale: steps an entry is used without a probe
 * (CLI_RCACHE_EXACT: never). RS_E_INVAL if bytes holds fewer than
 * CLI_RCACHE_WAYS rows. */
#define CLI_RCACHE_EXACT UINT32_MAX
int cli_rcache_new(struct cli_rcache **out, size_t bytes, uint32_t dim,
		   uint32_t max_stale);
void cli_rcache_delete(struct cli_rcache *rc);

uint32_t cli_rcache_dim(const struct cli_rcache *rc);
uint32_t cli_rcache_max_stale(const struct cli_rcache *rc);

/* Count a sighting of key, and on a hit copy its row into out[dim] and
 * its proof into *e. */
bool cli_rcache_get(struct cli_rcache *rc, uint64_t key,
		    struct cli_rentry *e, float *out);
/* Offer row[dim] of key as proven by *e: an entry of key is refreshed;
 * otherwise the row is admitted if there is room or it is seen more
 * often than the set's victim (only_cached: never admitted). */
void cli_rcache_put(struct cli_rcache *rc, uint64_t key,
		    const struct cli_rentry *e, const float *row,
		    bool only_cached);
/* Drop key's entry (if it still says slot/version: any when version is
 * 0). */
void cli_rcache_drop(struct cli_rcache *rc, uint64_t key, uint64_t version);
void cli_rcache_get_stats(const struct cli_rcache *rc,
			  struct cli_rcache_stats *out);

#endif
