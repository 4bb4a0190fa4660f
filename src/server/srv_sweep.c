/*
 * srv_sweep.c - freeing the rows of key ranges this node no longer holds
 * (docs/replication.md, "Freeing what a node no longer holds").
 *
 * A configuration change can take a range away from a node: a member
 * joined and took its place in the range's replica set, or the node was
 * drained. Its rows there are unreachable from then on (no request of
 * the new epoch for those keys is taken here: the fence) and would be
 * removed if the range came back (srv_copy.c purges what it gains), so
 * they only hold memory. The adopting thread walks every table between
 * configurations, a slice of rows at a time, and deletes the keys of
 * which this node is in neither the active nor the target replica set of
 * the epoch it follows (memb_keeps): a drained node, in no set, frees
 * everything.
 *
 * When: once the epoch's copy is done here, and only after the read
 * lease of the epoch before has run out (a client trusting that epoch may
 * READ a key here as its former primary or backup until then; a READ
 * that finds no row would say the key does not exist). Between two
 * slices the thread takes any new configuration first, and a new epoch
 * starts the walk again under its own sets, so a key the node is a
 * replica of in the epoch it follows is never deleted. Rate: SWEEP_SCAN
 * rows looked at per slice, a slice every SWEEP_PAUSE_MS. A slice is a
 * writer of the node (srv_grow_enter): it waits while a table grows.
 */
#include <inttypes.h>
#include <time.h>

#include "server/srv_repl_int.h"
#include "value/slab.h"

#define SWEEP_SCAN 4096u	/* rows looked at per slice */
#define SWEEP_PAUSE_MS 10u

int64_t srv_sweep_next_ms(struct rs_server *s)
{
	struct srv_repl *rp = &s->repl;
	const struct srv_cfg *g = rp->cur;	/* this thread's */
	uint64_t now;

	if (!g || g->ngain)
		return -1;	/* no configuration, or its copy is not done */
	now = rs_mono_ms();
	if (rp->sweep.epoch != g->c.epoch) {
		memset(&rp->sweep, 0, sizeof(rp->sweep));
		rp->sweep.epoch = g->c.epoch;
		rp->sweep.not_before = now + rp->lease_ms;
	}
	if (rp->sweep.done)
		return -1;
	if (now < rp->sweep.not_before)
		return (int64_t)(rp->sweep.not_before - now);
	if (now < rp->sweep.last + SWEEP_PAUSE_MS)
		return (int64_t)(rp->sweep.last + SWEEP_PAUSE_MS - now);
	return 0;
}

struct sweep {
	const struct srv_cfg *g;
	struct slab_table *st;
	unsigned left;
	uint64_t freed;
};

static int sweep_key(void *arg, uint64_t key, uint32_t row)
{
	struct sweep *w = arg;

	(void)row;
	if (!memb_keeps(w->g->pl, w->g->tpl, memb_key_hash(key),
			w->g->tself))
		w->freed += slab_delete(w->st, key) == 0;
	return !--w->left;
}

void srv_sweep_slice(struct rs_server *s)
{
	struct srv_repl *rp = &s->repl;
	struct sweep w = { .g = rp->cur, .left = SWEEP_SCAN };

	while (w.left && rp->sweep.table < SLAB_MAX_TABLES) {
		struct srv_table *t;
		int ret = 0;

		/* a write as far as a growth goes, entered before the table
		 * is taken: never inside a growth's copy, never on a table
		 * it retired (srv_grow.c); the next slice goes on from here */
		if (!srv_grow_enter(s))
			break;
		t = srv_table_get(&s->tables, rp->sweep.table);
		if (t) {
			w.st = t->st;
			ret = slab_iterate_from(t->st, &rp->sweep.cursor,
						sweep_key, &w);
			srv_table_put(t);
		}
		srv_write_leave(s);
		if (!ret) {	/* the walk of this table ended */
			rp->sweep.table++;
			rp->sweep.cursor = 0;
		}
	}
	rp->sweep.last = rs_mono_ms();
	rp->sweep.freed += w.freed;
	atomic_fetch_add(&rp->freed_rows, w.freed);
	if (rp->sweep.table < SLAB_MAX_TABLES)
		return;
	rp->sweep.done = true;
	if (rp->sweep.freed)
		srv_log("repl: epoch %" PRIu64 ": %" PRIu64 " rows of ranges "
			"this node no longer holds freed", rp->sweep.epoch,
			rp->sweep.freed);
}
