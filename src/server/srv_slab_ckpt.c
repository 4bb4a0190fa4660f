/*
 * srv_slab_ckpt.c - a table's keys into a checkpoint part, and a part's
 * records into a table (docs/checkpoint-format.md; why in the node:
 * srv_slab_ckpt.h).
 *
 * A row and its optimizer state are taken together under the row's write
 * lock (slab_write_begin, then abort: nothing changes), so each record is
 * one consistent version of the key. The walk is slab_iterate's: not a
 * snapshot by itself; a caller that wants one pauses writes around it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "server/srv_slab_ckpt.h"
#include "value/slab.h"

/* The part's geometry is the table's (dtype, dim, state). */
static int geom_matches(struct slab_table *t, const struct ckpt_part_desc *d,
			struct row_geom *g, const char *what)
{
	struct slab_table_geom tg;

	slab_table_geom(t, &tg);
	*g = tg.rows;
	if (d->dim != g->dim ||
	    row_dtype_from_proto(d->dtype) != g->dtype ||
	    (d->with_state && d->state_floats != slab_table_state_floats(t)))
		return rs_seterr(RS_E_DIM, "%s: table '%s' holds dim %u %s "
				 "with %u state floats, the part dim %u %s "
				 "with %u", what, slab_table_name(t), g->dim,
				 row_dtype_name(g->dtype),
				 slab_table_state_floats(t), d->dim,
				 row_dtype_name(
					 row_dtype_from_proto(d->dtype)),
				 d->state_floats);
	return 0;
}

struct dump {
	struct slab_table *t;
	struct ckpt_writer *w;
	struct row_geom g;
	float *val, *state;
	void *payload;
	bool (*keep)(void *arg, uint64_t key);
	void *arg;
	uint64_t rows, deleted;
};

static int dump_one(void *arg, uint64_t key, uint32_t row)
{
	struct dump *d = arg;
	struct slab_wr wr = { .val = d->val, .state = d->state };
	int rc;

	(void)row;
	if (d->keep && !d->keep(d->arg, key))
		return 0;
	rc = slab_write_begin(d->t, key, &wr);
	if (rc == RS_E_NOTFOUND)	/* deleted since the walk saw it */
		return 0;
	if (rc)
		return rc;
	slab_write_abort(&wr);
	/* fp32 from the row, back to its dtype: exact (it came from it) */
	row_payload_from_f32(&d->g, d->val, d->payload);
	rc = ckpt_part_put(d->w, key, d->payload, d->state);
	if (!rc)
		d->rows++;
	return rc;
}

static int dump_gone(void *arg, uint64_t key, uint32_t row)
{
	struct dump *d = arg;
	int rc;

	(void)row;
	if (d->keep && !d->keep(d->arg, key))
		return 0;
	rc = ckpt_part_put_deleted(d->w, key);
	if (!rc)
		d->deleted++;
	return rc;
}

/* every key (!changes), or the keys changed and deleted since the
 * tracking's reset; of those, the ones keep() takes */
int slab_table_dump_keys(struct slab_table *t, struct ckpt_writer *w,
			 const struct ckpt_part_desc *desc, bool changes,
			 bool (*keep)(void *arg, uint64_t key), void *arg,
			 uint64_t *rows, uint64_t *deleted)
{
	uint32_t sf = slab_table_state_floats(t);
	struct dump d = { .t = t, .w = w, .keep = keep, .arg = arg };
	int rc;

	*rows = 0;
	if ((rc = geom_matches(t, desc, &d.g, "checkpoint")))
		return rc;
	d.val = rs_malloc((size_t)d.g.dim * sizeof(float));
	d.state = sf ? rs_malloc((size_t)sf * sizeof(float)) : NULL;
	d.payload = rs_malloc(d.g.payload_bytes);
	if (!d.val || (sf && !d.state) || !d.payload)
		rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
	else if (!changes)
		rc = slab_iterate(t, dump_one, &d);
	else if (!(rc = slab_track_gone(t, dump_gone, &d)))
		rc = slab_track_changed(t, dump_one, &d);
	*rows = d.rows;
	if (deleted)
		*deleted = d.deleted;
	free(d.val);
	free(d.state);
	free(d.payload);
	return rc;
}

int slab_table_dump(struct slab_table *t, struct ckpt_writer *w,
		    const struct ckpt_part_desc *desc, uint64_t *rows)
{
	return slab_table_dump_keys(t, w, desc, false, NULL, NULL, rows, NULL);
}

int slab_table_dump_changes(struct slab_table *t, struct ckpt_writer *w,
			    const struct ckpt_part_desc *desc, uint64_t *rows,
			    uint64_t *deleted)
{
	return slab_table_dump_keys(t, w, desc, true, NULL, NULL, rows,
				    deleted);
}

int slab_load_row(struct slab_table *t, uint64_t key, const float *val,
		  const float *state, float *vbuf, float *sbuf, bool *created)
{
	uint32_t sf = slab_table_state_floats(t);
	struct slab_wr wr = { .val = vbuf, .state = sf ? sbuf : NULL };
	int rc;

	*created = false;
	rc = slab_insert(t, key, val, state, NULL);
	if (rc != RS_E_EXISTS) {
		*created = rc == 0;
		return rc;
	}
	/* overwrite: payload, and the state when the record has one */
	rc = slab_write_begin(t, key, &wr);
	if (!rc) {
		memcpy(wr.val, val, (size_t)slab_table_dim(t) * sizeof(float));
		if (state && sf)
			memcpy(wr.state, state, (size_t)sf * sizeof(float));
		rc = slab_write_commit(&wr);
	}
	return rc;
}

int slab_table_load(struct slab_table *t, struct ckpt_reader *r,
		    struct slab_load_stats *st)
{
	const struct ckpt_part_desc *d = ckpt_part_desc_of(r);
	struct ckpt_record rec;
	struct row_geom g;
	bool created;
	float *val;
	int rc, more;

	memset(st, 0, sizeof(*st));
	if ((rc = geom_matches(t, d, &g, "restore")))
		return rc;
	/* the row, and the scratch of an overwrite (row and state) */
	val = rs_malloc(((size_t)g.dim * 2 + slab_table_state_floats(t) + 1) *
		     sizeof(float));
	if (!val)
		return rs_seterr(-ENOMEM, "restore: out of memory");
	while ((more = ckpt_part_next(r, &rec)) > 0) {
		if (rec.kind == CKPT_REC_DELETED) {
			rc = slab_delete(t, rec.key);
			if (rc == RS_E_NOTFOUND)
				rc = 0;
			else if (!rc)
				st->deleted++;
			if (rc)
				goto out;
			continue;
		}
		row_payload_to_f32(&g, rec.payload, val);
		/* without state in the part: a new row gets zeros (what
		 * the optimizer starts from), an existing one keeps its */
		rc = slab_load_row(t, rec.key, val, rec.state, val + g.dim,
				   val + 2 * g.dim, &created);
		if (!rc && created)
			st->inserted++;
		else if (!rc)
			st->overwritten++;
		if (rc == RS_E_FULL)
			rc = rs_seterr(RS_E_FULL, "restore: table '%s' is full "
				       "after %llu rows", slab_table_name(t),
				       (unsigned long long)(st->inserted +
							    st->overwritten));
		if (rc)
			goto out;
	}
	rc = more;
out:
	free(val);
	return rc;
}
