/*
 * srv_ckpt.c - the node's side of a checkpoint (docs/checkpoint.md): the
 * write pause, and writing a table's keys to a part file.
 *
 * A checkpoint of a store is one point of its update stream: the
 * checkpointer (recstore-ctl checkpoint) FREEZEs every node, so that no
 * write is in progress anywhere and every new one is answered RS_E_BUSY
 * (the client library retries those), has each node DUMP its share of
 * every table while frozen, and THAWs them all. Reads go on throughout:
 * one-sided READs never reach the node's CPU, GET RPCs are not writes.
 *
 * The pause: srv_write_enter() counts a write in, then checks `frozen`;
 * freeze sets `frozen`, then waits for the count to drain. With
 * sequentially consistent atomics one of them sees the other: a write is
 * either refused or finished before the freeze returns. A freeze has a
 * deadline (the FREEZE request's timeout): a checkpointer that dies does
 * not stop a node's writes for ever. The deadline is checked by the next
 * write that meets the freeze, and waits while a DUMP runs.
 *
 * A replicated cluster (docs/checkpoint.md, "A replicated cluster"):
 * FREEZE and DUMP name the configuration epoch E the checkpointer froze
 * every active member of; a node refuses (RS_E_EPOCH) unless it follows E
 * as an active member, at the FREEZE once the writes inside drained, and
 * at the start and the end of every DUMP. Epochs only grow, so the node
 * followed E from its freeze to its last part. A DUMP writes only the
 * keys the node is the primary of in E: one copy of every key. REPLs are
 * not writes (a frozen backup applies them: its primary's writes finish),
 * and they never touch a key the node is the primary of. A part's change
 * tracking is tagged with the checkpoint's id and E: an increment is
 * taken in its base's epoch, under the same primaries, or refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "common/le.h"
#include "server/srv_repl_int.h"
#include "server/srv_slab_ckpt.h"

void srv_ckpt_init(struct rs_server *s)
{
	pthread_mutex_init(&s->ckpt.lock, NULL);
}

void srv_ckpt_destroy(struct rs_server *s)
{
	pthread_mutex_destroy(&s->ckpt.lock);
}

/* End the pause (the caller holds ckpt.lock, or is the write that found
 * the deadline passed: the exchange decides who ends it). */
static uint64_t thaw_now(struct rs_server *s, const char *why)
{
	struct srv_ckpt *k = &s->ckpt;
	uint64_t us;

	if (!(atomic_fetch_and(&k->frozen, ~SRV_FROZEN_CKPT) &
	      SRV_FROZEN_CKPT))
		return 0;
	us = (rs_mono_ns() - atomic_load(&k->since_ns)) / 1000u;
	atomic_fetch_add(&k->paused_us, us);
	srv_log("checkpoint: writes resume after %.3f s (%s)", (double)us / 1e6,
		why);
	return us;
}

bool srv_write_enter(struct rs_server *s)
{
	struct srv_ckpt *k = &s->ckpt;

	atomic_fetch_add(&k->writers, 1);
	if (RS_LIKELY(!atomic_load(&k->frozen)))
		return true;
	atomic_fetch_sub(&k->writers, 1);
	if (rs_mono_ns() >= atomic_load(&k->until_ns)) {
		bool thawed = false;

		/* under the lock: a DUMP registers under it too, so a part
		 * never runs into a thaw that had not seen it */
		pthread_mutex_lock(&k->lock);
		if (rs_mono_ns() >= atomic_load(&k->until_ns) &&
		    !atomic_load(&k->dumping))
			thawed = thaw_now(s, "the freeze timed out: no THAW "
					     "came") || !atomic_load(&k->frozen);
		pthread_mutex_unlock(&k->lock);
		if (thawed)
			return srv_write_enter(s);
	}
	atomic_fetch_add_explicit(&k->busy, 1, memory_order_relaxed);
	return false;
}

void srv_write_leave(struct rs_server *s)
{
	atomic_fetch_sub(&s->ckpt.writers, 1);
}

/* The keys a cluster node dumps: those it is the primary of in the epoch
 * the checkpoint names (a copy of that epoch's ring: no lock held while
 * the part is written, so the node adopts a newer epoch meanwhile, and
 * the DUMP fails at its end). */
struct ckpt_ring {
	struct memb_placement *pl;	/* NULL: no cluster, every key */
	int self;
};

static bool ckpt_ring_keeps(void *arg, uint64_t key)
{
	const struct ckpt_ring *r = arg;
	unsigned set[MEMB_MAX_R];

	return memb_replicas(r->pl, memb_key_hash(key), set) &&
	       (int)set[0] == r->self;
}

/* A checkpoint request names the epoch of a cluster member exactly when
 * the node is one, and the node follows that epoch as an active member;
 * ring (may be NULL): a copy of that epoch's ring. 0 or RS_E_EPOCH. */
static int ckpt_epoch_check(struct rs_server *s, uint64_t epoch,
			    struct ckpt_ring *ring)
{
	struct srv_repl *rp = &s->repl;
	const struct srv_cfg *g;
	int rc = 0;

	if (!rp->on)
		return epoch ? rs_seterr(RS_E_EPOCH, "checkpoint of epoch %"
					 PRIu64 ": this node is not a member "
					 "of a cluster", epoch) : 0;
	if (!epoch)
		return rs_seterr(RS_E_EPOCH, "this node is a member of a "
				 "replicated cluster: a checkpoint names the "
				 "configuration epoch (an older client?)");
	if (pthread_rwlock_tryrdlock(&rp->lock))
		return rs_seterr(RS_E_EPOCH, "checkpoint of epoch %" PRIu64
				 ": the node is adopting a new configuration",
				 epoch);
	g = rp->cur;
	if (!g || g->c.epoch != epoch || g->self < 0)
		rc = rs_seterr(RS_E_EPOCH, "checkpoint of epoch %" PRIu64 ": "
			       "this node follows epoch %" PRIu64 "%s", epoch,
			       g ? g->c.epoch : 0, g && g->self < 0 ?
			       " and is not an active member of it" : "");
	else if (ring && memb_placement_new(&ring->pl, &g->c))
		rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
	else if (ring)
		ring->self = g->self;
	pthread_rwlock_unlock(&rp->lock);
	return rc;
}

/* The tag of the change tracking a part with state leaves: the
 * checkpoint's id, with the epoch of a cluster folded in, so that an
 * increment is never relative to a base of other primaries. */
static void ckpt_track_tag(uint8_t out[CKPT_ID_BYTES],
			   const uint8_t id[CKPT_ID_BYTES], uint64_t epoch)
{
	memcpy(out, id, CKPT_ID_BYTES);
	le_st64(out, le_ld64(out) ^ epoch);
}

int srv_ckpt_freeze(struct rs_server *s, uint32_t timeout_ms, uint64_t epoch)
{
	struct srv_ckpt *k = &s->ckpt;
	uint64_t now = rs_mono_ns();
	bool froze = false;
	int rc;

	/* refused before it pauses anything */
	if ((rc = ckpt_epoch_check(s, epoch, NULL)))
		return rc;
	pthread_mutex_lock(&k->lock);
	atomic_store(&k->until_ns, now + (uint64_t)timeout_ms * 1000000u);
	if (!(atomic_load(&k->frozen) & SRV_FROZEN_CKPT)) {
		atomic_store(&k->since_ns, now);
		atomic_fetch_or(&k->frozen, SRV_FROZEN_CKPT);
		atomic_fetch_add(&k->pauses, 1);
		froze = true;
		srv_log("checkpoint: writes paused (for at most %u ms)",
			timeout_ms);
	}
	/* the writes already inside finish (a request's work: bounded; a
	 * replicated write leaves once applied and queued for its backups,
	 * before it waits for them: its row is what the DUMP reads), and a
	 * table's growth (its copy: bounded by the table; no growth starts
	 * while frozen, srv_grow.c), so no DUMP overlaps one */
	while (atomic_load(&k->writers) ||
	       (atomic_load(&k->frozen) & SRV_FROZEN_GROW))
		usleep(50);
	/* the deadline counts from the pause's start of effect */
	atomic_store(&k->until_ns, rs_mono_ns() + (uint64_t)timeout_ms * 1000000u);
	/* and they were all of epoch `epoch`: none is in flight */
	if ((rc = ckpt_epoch_check(s, epoch, NULL)) && froze) {
		char keep[RS_ERRMSG_MAX];

		rs_errsave(keep);
		thaw_now(s, "the configuration changed");
		rs_errrestore(keep);
	}
	pthread_mutex_unlock(&k->lock);
	return rc;
}

uint64_t srv_ckpt_thaw(struct rs_server *s)
{
	uint64_t us;

	pthread_mutex_lock(&s->ckpt.lock);
	us = thaw_now(s, "THAW");
	pthread_mutex_unlock(&s->ckpt.lock);
	return us;
}

/* mkdir -p of root/dir (one level below root: dir is a plain name) */
static int ckpt_mkdir(const char *root, const char *dir, char *out,
		      size_t cap)
{
	if ((size_t)snprintf(out, cap, "%s/%s", root, dir) >= cap)
		return rs_seterr(RS_E_INVAL, "checkpoint: path too long");
	if (mkdir(out, 0755) && errno != EEXIST)
		return rs_seterr(-errno, "checkpoint: %s: %s", out,
				 strerror(errno));
	return 0;
}

int srv_ckpt_dump(struct rs_server *s, const struct proto_ckpt_req *q,
		  struct proto_ckpt_reply *out)
{
	struct ckpt_part_desc d;
	struct ckpt_part_sum sum;
	struct ckpt_writer *w;
	struct srv_table *t;
	struct ckpt_ring ring = { .pl = NULL };
	char dir[PATH_MAX], path[PATH_MAX];
	bool incr = q->flags & PROTO_CKF_INCR,
	     held = q->flags & PROTO_CKF_HELD;	/* inspection: every row */
	uint64_t rows, deleted = 0, epoch = q->flags & PROTO_CKF_EPOCH ?
					    q->epoch : 0;
	uint8_t tag[CKPT_ID_BYTES];
	int rc;

	memset(out, 0, sizeof(*out));
	if (!s->cfg.checkpoint_dir)
		return rs_seterr(RS_E_UNSUPPORTED, "checkpoints are off on this "
				 "node: set checkpoint_dir in its config");
	t = srv_table_get_name(&s->tables, q->table);
	if (!t)
		return rs_seterr(RS_E_NOTFOUND, "table '%s': no such table on "
				 "this node", q->table);
	/* registered under the lock the deadline's thaw takes */
	pthread_mutex_lock(&s->ckpt.lock);
	if (!(atomic_load(&s->ckpt.frozen) & SRV_FROZEN_CKPT)) {
		pthread_mutex_unlock(&s->ckpt.lock);
		srv_table_put(t);
		return rs_seterr(RS_E_INVAL, "DUMP without FREEZE: the part "
				 "would not be one point of the updates");
	}
	/* after the freeze is seen: the epoch held since the FREEZE's
	 * check (epochs only grow; checked again at the end) */
	if ((rc = ckpt_epoch_check(s, epoch, s->repl.on && !held ? &ring
							     : NULL))) {
		pthread_mutex_unlock(&s->ckpt.lock);
		srv_table_put(t);
		return rc;
	}
	atomic_fetch_add(&s->ckpt.dumping, 1);
	pthread_mutex_unlock(&s->ckpt.lock);
	memset(&d, 0, sizeof(d));
	memcpy(d.id, q->id, CKPT_ID_BYTES);
	d.table = q->table_idx;
	d.part = q->part_idx;
	d.dim = t->spec.dim;
	d.dtype = t->spec.dtype;
	d.optim_kind = t->spec.optim.kind;
	d.with_state = q->flags & PROTO_CKF_STATE;
	d.state_floats = d.with_state ? t->state_floats : 0;
	rc = ckpt_mkdir(s->cfg.checkpoint_dir, q->dir, dir, sizeof(dir));
	if (!rc && (size_t)snprintf(path, sizeof(path), "%s/%s", dir,
				    q->file) >= sizeof(path))
		rc = rs_seterr(RS_E_INVAL, "checkpoint: path too long");
	if (!rc && incr) {
		ckpt_track_tag(tag, q->base, epoch);
		rc = slab_track_check(t->st, tag);
		/* the tag folds the epoch in: another one reads as another
		 * base; say what it means in a cluster, first */
		if (rc && epoch)
			rc = rs_seterr(rc, "cluster epoch %" PRIu64 ": an "
				       "increment is taken in its base's "
				       "epoch (after a failover, join or drain "
				       "the keys' primaries moved): take a "
				       "full checkpoint; %s", epoch,
				       rs_errormsg());
	}
	if (!rc)
		rc = ckpt_part_create(&w, path, &d, 0);
	if (!rc) {
		rc = slab_table_dump_keys(t->st, w, &d, incr,
					  ring.pl ? ckpt_ring_keeps : NULL,
					  &ring, &rows, &deleted);
		/* the node followed the epoch throughout: its keys were
		 * the primary's copies of one configuration */
		if (!rc && epoch && atomic_load(&s->repl.epoch) != epoch)
			rc = rs_seterr(RS_E_EPOCH, "checkpoint of epoch %"
				       PRIu64 ": the node adopted epoch %"
				       PRIu64 " while it wrote table '%s'",
				       epoch, atomic_load(&s->repl.epoch),
				       t->spec.name);
		if (rc)
			ckpt_part_abort(w);
		else
			rc = ckpt_part_finish(w, &sum);
	}
	/* a full or incremental part is the next base of this table's
	 * changes (an export is not: it cannot be restored under one) */
	if (!rc && d.with_state && !held) {
		ckpt_track_tag(tag, q->id, epoch);
		slab_track_reset(t->st, tag);
	}
	memb_placement_free(&ring.pl);
	atomic_fetch_sub(&s->ckpt.dumping, 1);
	if (!rc) {
		out->rows = sum.rows;
		out->deleted = sum.deleted;
		out->raw_bytes = sum.raw_bytes;
		out->bytes = sum.bytes;
		out->xxh64 = sum.xxh64;
		out->paused_us = (rs_mono_ns() - atomic_load(&s->ckpt.since_ns)) /
				 1000u;
		srv_log("checkpoint: table '%s': %" PRIu64 " rows, %" PRIu64
			" deleted, %" PRIu64 " bytes to %s%s%s", t->spec.name,
			sum.rows, sum.deleted, sum.bytes, path,
			incr ? " (changes since the base)" : "",
			held ? " (every row it holds: an inspection)"
			: epoch ? " (the keys it leads in its epoch)" : "");
	}
	srv_table_put(t);
	return rc;
}
