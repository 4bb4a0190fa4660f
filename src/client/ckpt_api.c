/*
 * ckpt_api.c - the public checkpoint calls (include/recstore/client.h):
 * rs_checkpoint/rs_restore over cli_checkpoint/cli_restore, rs_ckpt_verify,
 * and the reader of a checkpoint or export without a store.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "client/client_internal.h"
#include "common/abi.h"
#include "common/rs_internal.h"
#include "value/row_format.h"

/* ---- growable structs (common/abi.h) ---- */

static const uint32_t opts_sizes[] = { 40, 48 };	/* 0.3, 0.4 */
static const uint32_t report_sizes[] = { 96, 112 };	/* 0.3, 0.8 */
_Static_assert(sizeof(struct rs_ckpt_opts) == 48, "append to opts_sizes");
_Static_assert(sizeof(struct rs_ckpt_report) == 112,
	       "append to report_sizes");
static const struct rs_abi_type opts_abi = {
	"struct rs_ckpt_opts", opts_sizes, RS_ARRAY_SIZE(opts_sizes)
};
static const struct rs_abi_type report_abi = {
	"struct rs_ckpt_report", report_sizes, RS_ARRAY_SIZE(report_sizes)
};

/* The caller's options (NULL: the defaults) as the internal ones. */
struct opts_bridge {
	struct rs_ckpt_opts pub;
	struct cli_ckpt_opts o;
};

static void progress_bridge(void *arg, const struct cli_ckpt_progress *p)
{
	const struct opts_bridge *b = arg;
	struct rs_ckpt_progress q = {
		.struct_size = sizeof(q),
		.phase = p->phase,
		.rows = p->rows,
		.bytes = p->bytes,
		.total_rows = p->total_rows,
		.total_bytes = p->total_bytes,
		.elapsed_us = p->elapsed_us,
	};

	b->pub.progress(b->pub.arg, &q);
}

static int opts_in(const struct rs_ckpt_opts *in, struct opts_bridge *b)
{
	memset(b, 0, sizeof(*b));
	if (in) {
		int ret = rs_abi_check(&opts_abi, in);

		if (ret)
			return ret;
		rs_abi_in(&b->pub, sizeof(b->pub), in);
	}
	if (b->pub.flags & ~RS_CKPT_EXPORT)
		return rs_seterr(RS_E_INVAL, "checkpoint options: unknown flags "
				 "%#x", b->pub.flags & ~RS_CKPT_EXPORT);
	if (b->pub.ntables && !b->pub.tables)
		return rs_seterr(RS_E_INVAL, "checkpoint options: %u tables "
				 "named, but no names", b->pub.ntables);
	for (uint32_t i = 0; i < b->pub.ntables; i++)
		if (!b->pub.tables[i])
			return rs_seterr(RS_E_INVAL, "checkpoint options: "
					 "table name %u is NULL", i);
	b->o.tables = b->pub.tables;
	b->o.ntables = b->pub.ntables;
	b->o.export_only = b->pub.flags & RS_CKPT_EXPORT;
	b->o.freeze_ms = b->pub.freeze_ms;
	b->o.base = b->pub.base;
	if (b->pub.progress) {
		b->o.progress = progress_bridge;
		b->o.arg = b;
	}
	return 0;
}

static int report_check(const struct rs_ckpt_report *rep)
{
	return rep ? rs_abi_check(&report_abi, rep) : 0;
}

static void report_out(struct rs_ckpt_report *out,
		       const struct cli_ckpt_report *r, bool incremental)
{
	struct rs_ckpt_report full;

	if (!out)
		return;
	memset(&full, 0, sizeof(full));
	full.struct_size = sizeof(full);
	full.tables = r->tables;
	full.parts = r->parts;
	full.with_state = r->with_state;
	full.rows = r->rows;
	full.bytes = r->bytes;
	full.raw_bytes = r->raw_bytes;
	full.paused_us = r->paused_us;
	full.elapsed_us = r->elapsed_us;
	ckpt_id_hex(r->id, full.id);
	full.deleted = r->deleted;
	full.incremental = incremental;
	rs_abi_out(out, &full, sizeof(full));
}

/* What rs_checkpoint and rs_restore share: the arguments and the caller's
 * structs checked, the options bridged, the call, the report out. */
static int ckpt_call(struct rs_client *c, const char *path,
		     const struct rs_ckpt_opts *opts,
		     struct rs_ckpt_report *rep, bool restore)
{
	struct cli_ckpt_report r;
	struct opts_bridge b;
	int ret;

	if (!c || !path)
		return rs_seterr(RS_E_INVAL, "%s: NULL argument",
				 restore ? "restore" : "checkpoint");
	if ((ret = report_check(rep)) || (ret = opts_in(opts, &b)))
		return ret;
	if (restore && b.o.export_only)
		return rs_seterr(RS_E_INVAL, "restore: RS_CKPT_EXPORT is an "
				 "option of rs_checkpoint (the checkpoint "
				 "itself says what it holds)");
	ret = restore ? cli_restore(c, path, &b.o, &r)
		      : cli_checkpoint(c, path, &b.o, &r);
	if (!ret)
		report_out(rep, &r, !restore && b.o.base);
	return ret;
}

RS_EXPORT int rs_checkpoint(struct rs_client *c, const char *path,
			    const struct rs_ckpt_opts *opts,
			    struct rs_ckpt_report *rep)
{
	return ckpt_call(c, path, opts, rep, false);
}

RS_EXPORT int rs_restore(struct rs_client *c, const char *path,
			 const struct rs_ckpt_opts *opts,
			 struct rs_ckpt_report *rep)
{
	return ckpt_call(c, path, opts, rep, true);
}

/* The report of the checkpoint in path, after a full verification. */
static int verify(const char *path, struct ckpt_manifest **mp,
		  struct cli_ckpt_report *r)
{
	struct ckpt_verify_stats vs;
	int ret;

	memset(r, 0, sizeof(*r));
	if ((ret = ckpt_chain_verify(path, &vs)) ||
	    (ret = ckpt_manifest_load(path, mp)))
		return ret;
	r->tables = (*mp)->ntables;
	r->parts = (uint32_t)vs.parts;
	r->rows = vs.rows;
	r->bytes = vs.bytes;
	r->raw_bytes = vs.raw_bytes;
	r->deleted = vs.deleted;
	r->with_state = (*mp)->kind != CKPT_EXPORT;
	memcpy(r->id, (*mp)->id, CKPT_ID_BYTES);
	return 0;
}

RS_EXPORT int rs_ckpt_verify(const char *path, struct rs_ckpt_report *rep)
{
	struct ckpt_manifest *m = NULL;
	struct cli_ckpt_report r;
	int ret;

	if (!path)
		return rs_seterr(RS_E_INVAL, "verify: NULL argument");
	if ((ret = report_check(rep)))
		return ret;
	ret = verify(path, &m, &r);
	if (!ret)
		report_out(rep, &r, m->kind == CKPT_INCREMENTAL);
	ckpt_manifest_free(m);
	return ret;
}

/* ---- the reader ---- */

struct reader_table {
	uint32_t next_part;		/* the part to open when cur ends */
	struct ckpt_reader *cur;
	struct row_geom g;
	bool done;
};

struct rs_ckpt_reader {
	char path[PATH_MAX];
	struct ckpt_manifest *m;
	struct reader_table *t;		/* [m->ntables] */
};

RS_EXPORT int rs_ckpt_reader_open(struct rs_ckpt_reader **out,
				  const char *path)
{
	struct rs_ckpt_reader *r;
	struct cli_ckpt_report rep;
	int ret;

	if (!out || !path)
		return rs_seterr(RS_E_INVAL, "checkpoint reader: NULL argument");
	*out = NULL;
	if (strlen(path) >= sizeof(r->path))
		return rs_seterr(RS_E_INVAL, "checkpoint reader: path too "
				 "long");
	r = calloc(1, sizeof(*r));
	if (!r)
		return rs_seterr(-ENOMEM, "checkpoint reader: out of memory");
	strcpy(r->path, path);
	ret = verify(path, &r->m, &rep);
	if (!ret) {
		r->t = calloc(r->m->ntables ? r->m->ntables : 1,
			      sizeof(*r->t));
		if (!r->t)
			ret = rs_seterr(-ENOMEM, "checkpoint reader: out of "
					"memory");
	}
	for (uint32_t i = 0; !ret && i < r->m->ntables; i++)
		ret = row_geom_init(&r->t[i].g, r->m->tables[i].spec.dim,
				    row_dtype_from_proto(
					    r->m->tables[i].spec.dtype),
				    0, 0);
	if (ret) {
		rs_ckpt_reader_close(&r);
		return ret;
	}
	*out = r;
	return 0;
}

RS_EXPORT void rs_ckpt_reader_close(struct rs_ckpt_reader **rp)
{
	struct rs_ckpt_reader *r = rp ? *rp : NULL;

	if (!r)
		return;
	for (uint32_t i = 0; r->t && i < r->m->ntables; i++)
		ckpt_part_close(r->t[i].cur);
	free(r->t);
	ckpt_manifest_free(r->m);
	free(r);
	*rp = NULL;
}

RS_EXPORT unsigned rs_ckpt_reader_table_count(const struct rs_ckpt_reader *r)
{
	return r ? r->m->ntables : 0;
}

RS_EXPORT int rs_ckpt_reader_table(const struct rs_ckpt_reader *r,
				   unsigned i, struct rs_table_spec *spec,
				   uint32_t *state_floats)
{
	int ret;

	if (!r || !spec)
		return rs_seterr(RS_E_INVAL, "checkpoint reader: NULL argument");
	if (i >= r->m->ntables)
		return rs_seterr(RS_E_INVAL, "checkpoint reader: table %u of "
				 "%u", i, r->m->ntables);
	ret = cli_table_spec_out(&r->m->tables[i].spec, spec);
	if (!ret && state_floats)
		*state_floats = r->m->kind == CKPT_EXPORT
					? 0 : r->m->tables[i].state_floats;
	return ret;
}

RS_EXPORT int rs_ckpt_reader_read(struct rs_ckpt_reader *r, unsigned i,
				  uint64_t *keys, float *rows, float *state,
				  size_t max)
{
	struct reader_table *t;
	const struct ckpt_table_entry *e;
	struct ckpt_record rec;
	size_t n = 0;
	int ret;

	if (!r || (max && (!keys || !rows)))
		return rs_seterr(RS_E_INVAL, "checkpoint reader: NULL argument");
	if (i >= r->m->ntables)
		return rs_seterr(RS_E_INVAL, "checkpoint reader: table %u of "
				 "%u", i, r->m->ntables);
	if (max > INT_MAX)
		max = INT_MAX;
	t = &r->t[i];
	e = &r->m->tables[i];
	while (n < max && !t->done) {
		if (!t->cur) {
			struct ckpt_part_desc d;
			char p[PATH_MAX + 256];

			if (t->next_part == e->nparts) {
				t->done = true;
				break;
			}
			snprintf(p, sizeof(p), "%s/%s", r->path,
				 e->parts[t->next_part].file);
			ckpt_part_desc_for(r->m, i, t->next_part, &d);
			if ((ret = ckpt_part_open(&t->cur, p, &d)))
				return ret;
			t->next_part++;
		}
		ret = ckpt_part_next(t->cur, &rec);
		if (ret < 0)
			return ret;
		if (!ret) {
			ckpt_part_close(t->cur);
			t->cur = NULL;
			continue;
		}
		if (rec.kind != CKPT_REC_ROW)
			continue;	/* a deletion (increments): no row */
		keys[n] = rec.key;
		row_payload_to_f32(&t->g, rec.payload,
				   rows + n * (size_t)e->spec.dim);
		if (state && rec.state && e->state_floats)
			memcpy(state + n * (size_t)e->state_floats, rec.state,
			       e->state_floats * sizeof(float));
		n++;
	}
	return (int)n;
}
