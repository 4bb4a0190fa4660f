/*
 * srv_slab_ckpt.h - tables to checkpoint parts and back (the format:
 * src/ckpt/ckpt.h, docs/checkpoint-format.md). The glue between the slab
 * store and the checkpoint format lives in the node, above both: the
 * format reads rows (src/value/row_format.h), so a store that included
 * the format would make the two folders depend on each other. The
 * functions keep the slab_ prefix: they work on a table through the
 * store's own interface (value/slab.h) only.
 */
#ifndef RS_SERVER_SRV_SLAB_CKPT_H
#define RS_SERVER_SRV_SLAB_CKPT_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt/ckpt.h"

struct slab_table;

/*
 * Append every key of t to w, whose part desc is `desc`: the row payload
 * in the table's dtype, bit for bit, and (desc->with_state) its optimizer
 * state, each key's pair read under its row lock. *rows: keys written.
 * Not a snapshot by itself (slab_iterate): keys inserted or deleted during
 * the walk may or may not be in it; pause writes for one. 0, RS_E_DIM (the
 * part's geometry is not the table's), or the writer's error.
 */
int slab_table_dump(struct slab_table *t, struct ckpt_writer *w,
		    const struct ckpt_part_desc *desc, uint64_t *rows);

/* The same for an incremental checkpoint: the keys deleted since the
 * table's change tracking was reset (slab_track_reset) and absent now
 * (*deleted), then the rows written since (*rows). The caller checked the
 * tracking (slab_track_check) and paused writes. */
int slab_table_dump_changes(struct slab_table *t, struct ckpt_writer *w,
			    const struct ckpt_part_desc *desc, uint64_t *rows,
			    uint64_t *deleted);

/* The same two with only the keys keep(arg, key) is true of (every key
 * when keep is NULL): a cluster node dumps the keys it is the primary of
 * (docs/checkpoint.md, "A replicated cluster"). changes: the incremental
 * form (*deleted, which may be NULL otherwise). */
int slab_table_dump_keys(struct slab_table *t, struct ckpt_writer *w,
			 const struct ckpt_part_desc *desc, bool changes,
			 bool (*keep)(void *arg, uint64_t key), void *arg,
			 uint64_t *rows, uint64_t *deleted);

/* Set key to val[dim] and (state non-NULL) state[state_floats]: a new
 * row, or the existing one overwritten (its state kept when state is
 * NULL). *created tells which. vbuf[dim] and sbuf[state_floats] (NULL
 * without state) are the caller's scratch for an overwrite. 0,
 * RS_E_FULL, -EIO. */
int slab_load_row(struct slab_table *t, uint64_t key, const float *val,
		  const float *state, float *vbuf, float *sbuf, bool *created);

struct slab_load_stats {
	uint64_t inserted, overwritten, deleted;
};

/*
 * Apply every record of r to t: a row is inserted, or overwrites the
 * key's payload and (when the part has state) its optimizer state; a
 * deletion removes the key (absent: nothing). Stops at the first error:
 * RS_E_DIM, RS_E_FULL (the message says after how many rows), a damaged
 * part (RS_E_CORRUPT, naming the file). Records applied before an error
 * stay applied.
 */
int slab_table_load(struct slab_table *t, struct ckpt_reader *r,
		    struct slab_load_stats *st);

#endif
