/*
 * slab_recover.c - bring a file-backed table back to a consistent state
 * after a crash, before anyone else uses it (exclusive).
 *
 * What may be on media after a crash (slab_table.c gives the write orders):
 *  - a row torn by an in-place update, with a valid redo-log entry holding
 *    its complete new image (the entry was persisted first);
 *  - a torn or PENDING row of an insert that was not acknowledged, with
 *    or without its index slot (the row becomes LIVE only after the slot
 *    is persisted, and the insert returns after that);
 *  - a bucket torn by an insert, remove or move (at most the slot that
 *    write changed differs; every other slot is identical in both
 *    versions), or a key in two buckets (a move between its two writes);
 *  - a row that is LIVE on media but was being deleted (its slot already
 *    cleared: not acknowledged as deleted, but gone from the index).
 *
 * Steps:
 *  1. Redo log: for each entry with a valid checksum whose row image is a
 *     valid LIVE row, copy image and state back unless the row's version
 *     word on media is past the image's (versions of a slot only grow, and
 *     the entry of a row's stripe is the last logged write of that row):
 *     a row torn by the logged write itself, or not reached by it, gets
 *     the image; a row a later write reached is left alone, torn or not,
 *     since that write (an insert or a tombstone, which are not logged)
 *     is not the entry's.
 *  2. Index: pet_repair() keeps a slot only if its row is below the
 *     high-water mark, validates (checksum, LIVE, same key) and is not yet
 *     claimed by another slot; torn buckets are rewritten with what
 *     survives. Every acknowledged key passes: its row was persisted
 *     before its slot, and a torn bucket write only damages the slot that
 *     write was about (never acknowledged).
 *  3. Rows below the high-water mark: claimed rows are live; blank and
 *     valid tombstones are free; anything else (unreferenced LIVE or
 *     PENDING row, torn row) becomes a valid tombstone so that a stale reader sees
 *     RS_E_STALE instead of retrying a torn image forever; all unclaimed
 *     slots go on the free list.
 *  4. The redo log is invalidated (entries would otherwise be compared
 *     against versions written after this recovery).
 * Cost: one pass over the index and one over rows [0, hwm).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "index/pet_sync.h"
#include "value/slab_int.h"

struct claim_ctx {
	struct slab_table *t;
	uint8_t *claimed;
	uint64_t hwm;
};

static bool row_torn(const struct slab_table *t, uint32_t r)
{
	const uint64_t *w = slab_row_words(t, r);

	return (w[ROW_W_VERSION] & 1) ||
	       row_checksum(w, &t->rg, r, w[ROW_W_VERSION]) != w[ROW_W_CSUM];
}

static void replay_log(struct slab_table *t, uint64_t hwm)
{
	for (unsigned s = 0; s < t->ent.nstripes; s++) {
		uint8_t *e = slab_log_entry(t, s);
		const struct slab_log_hdr *h = (const struct slab_log_hdr *)e;
		const uint8_t *img = e + SLAB_LOG_HDR;
		uint64_t iv, ikey, *w;
		uint32_t r;

		if (!h->checksum || h->checksum != slab_log_checksum(t, e))
			continue; /* empty, or torn: its row was untouched */
		if (h->row >= hwm || slab_stripe_of((uint32_t)h->row) != s)
			continue;
		r = (uint32_t)h->row;
		memcpy(&iv, img, 8);
		memcpy(&ikey, img + 8 * ROW_W_KEY, 8);
		if (row_validate(img, &t->rg, r, ikey, NULL))
			continue;
		w = slab_row_words(t, r);
		/* The row moved on after this entry: a later write reached
		 * its version word. Torn or not: inserts and tombstones are
		 * not logged, so a row torn by one of them must not get
		 * this older image back (a key deleted and inserted again
		 * into the same slot would come back with the value it had
		 * before the delete). A write of this entry's own image
		 * leaves the version at iv - 2, iv - 1 or iv. */
		if (w[ROW_W_VERSION] > iv)
			continue;
		if (!row_torn(t, r) && w[ROW_W_VERSION] == iv &&
		    !memcmp(slab_state_of(t, r), img + t->rg.stride,
			    t->state_bytes))
			continue; /* that write had completed */
		memcpy(w, img, (size_t)t->row_words * 8);
		slab_persist(t->st, w, (size_t)t->row_words * 8);
		if (t->state_bytes) {
			memcpy(slab_state_of(t, r), img + t->rg.stride,
			       t->state_bytes);
			slab_persist(t->st, slab_state_of(t, r),
				     t->state_bytes);
		}
		t->rec.log_replayed++;
	}
}

static bool claim(void *arg, uint64_t key, uint32_t ref)
{
	struct claim_ctx *c = arg;

	if (ref >= c->hwm || (c->claimed[ref / 8] & (1u << (ref % 8))))
		return false;
	if (row_validate(slab_row_words(c->t, ref), &c->t->rg, ref, key,
			 NULL))
		return false;
	c->claimed[ref / 8] |= (uint8_t)(1u << (ref % 8));
	return true;
}

static bool row_blank(const uint64_t *w)
{
	return !(w[0] | w[1] | w[2] | w[3]);
}

static void scan_rows(struct slab_table *t, const uint8_t *claimed,
		      uint64_t hwm)
{
	const uint64_t free_meta = row_meta(&t->rg, ROW_FREE);

	for (uint64_t i = hwm; i-- > 0;) { /* pushed high first: pops low */
		uint32_t r = (uint32_t)i;
		uint64_t *w = slab_row_words(t, r);

		t->rec.rows_scanned++;
		if (claimed[r / 8] & (1u << (r % 8))) {
			t->rec.rows_live++;
			continue;
		}
		if (!row_blank(w) &&
		    (row_torn(t, r) || w[ROW_W_META] != free_meta)) {
			t->rec.rows_torn += row_torn(t, r);
			t->rec.rows_reclaimed++;
			slab_row_tombstone(t, r);
		}
		slab_free_push(t, r);
	}
}

/* How many of rows [0, hwm) are claimed. */
static uint64_t claimed_count(const uint8_t *claimed, uint64_t hwm)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < hwm / 8; i++)
		n += (uint64_t)__builtin_popcount(claimed[i]);
	for (uint64_t r = hwm / 8 * 8; r < hwm; r++)
		n += (claimed[r / 8] >> (r % 8)) & 1u;
	return n;
}

int slab_recover(struct slab_table *t)
{
	struct claim_ctx c = {.t = t, .hwm = t->meta->hwm};
	int ret;

	memset(&t->rec, 0, sizeof(t->rec));
	if (c.hwm > t->ent.capacity)
		return rs_seterr(RS_E_CORRUPT, "table '%s': high-water mark "
				 "%llu above capacity", t->ent.name,
				 (unsigned long long)c.hwm);
	c.claimed = rs_calloc(c.hwm / 8 + 1, 1);
	if (!c.claimed)
		return rs_seterr(-ENOMEM, "table '%s': out of memory",
				 t->ent.name);
	if (t->log)
		replay_log(t, c.hwm);
	pet_repair(t->pet, claim, &c, &t->rec.index);
	/* room for every unclaimed row first: a push that could not grow
	 * the free list would lose the row, and the open succeed short of
	 * capacity. Failing here is safe: the replays and repairs so far
	 * are done again, to the same result, by the next recovery. */
	ret = slab_free_reserve(t, c.hwm - claimed_count(c.claimed, c.hwm));
	if (!ret)
		scan_rows(t, c.claimed, c.hwm);
	free(c.claimed);
	if (ret)
		return ret;
	if (t->log) { /* after the replays were persisted */
		for (unsigned s = 0; s < t->ent.nstripes; s++)
			pet_st(slab_log_entry(t, s), 0);
		slab_persist(t->st, t->log,
			     (size_t)t->ent.nstripes * t->ent.log_entry);
	}
	t->hwm = c.hwm;
	atomic_store(&t->next, c.hwm);
	atomic_store(&t->live, t->rec.rows_live);
	return slab_io_check(t->st);
}
