/*
 * ckpt.c - taking a checkpoint of a running store and restoring one onto
 * any store (docs/checkpoint.md; the format: docs/checkpoint-format.md).
 *
 * Checkpoint: FREEZE every node (writes answered RS_E_BUSY, which clients
 * retry; those in progress finish first), DUMP each table on each node
 * into <checkpoint_dir>/<name>/<table>-n<node>.rsck (the nodes write in
 * parallel: one thread per node), THAW every node, then write MANIFEST.
 * The point of the update stream it captures: every write acknowledged
 * before the checkpoint started is in it; none that started after every
 * node was frozen is. Reads never pause; writes pause from the first
 * FREEZE to the last THAW, which is reported.
 *
 * A replicated cluster (docs/checkpoint.md, "A replicated cluster"): the
 * nodes are the ACTIVE members of the client's configuration, epoch E;
 * FREEZE and DUMP name E, which every node must follow from its freeze
 * to its last part, and each writes the keys it is the primary of in E:
 * one copy of each key. A node that follows another epoch refuses
 * (RS_E_EPOCH): everything is thawed, the configuration refreshed, and
 * the checkpoint taken again from the start (at most CKPT_TRIES times).
 *
 * Restore: verify the whole checkpoint first (a damaged part is refused
 * before anything is written, with its name), create the tables that do
 * not exist, then stream every part's records to the nodes that own the
 * keys in the target store (any node count: the client's ring routes
 * them), as LOAD requests (rows with their optimizer state) or, for an
 * export, PUT (rows only); deletions of an incremental part as DELETE.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ckpt/ckpt.h"
#include "client/client_internal.h"
#include "common/rs_internal.h"
#include "value/optimizer.h"
#include "value/row_format.h"

#define RESTORE_BATCH 2048
#define CKPT_TRIES 3	/* a cluster's configuration changed: again */

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void progress(const struct cli_ckpt_opts *o, struct cli_ckpt_progress *p,
		     bool force)
{
	uint64_t now = now_us();

	if (!o->progress || (!force && now - p->last_us < 1000000u))
		return;
	p->last_us = now;
	p->elapsed_us = now - p->start_us;
	o->progress(o->arg, p);
}

/* ---- checkpoint ---- */

struct dump_job {
	struct rs_client *c;
	unsigned node;		/* the client's node index */
	unsigned part;		/* its part in every table */
	const struct ckpt_manifest *m;
	const char *name;
	uint32_t flags;
	uint64_t epoch;		/* a cluster's (PROTO_CKF_EPOCH), or 0 */
	unsigned wait_ms;	/* for each DUMP's reply: the freeze's limit */
	int rc;
	char err[RS_ERRMSG_MAX];
};

static void part_file(char *out, const char *table, unsigned node)
{
	snprintf(out, CKPT_FILE_MAX, "%.40s-n%u.rsck", table, node);
}

/* One node's DUMPs, table after table (a thread per node). */
static void *dump_node(void *arg)
{
	struct dump_job *j = arg;

	for (uint32_t t = 0; !j->rc && t < j->m->ntables; t++) {
		struct ckpt_part_entry *pe = &j->m->tables[t].parts[j->part];
		struct proto_ckpt_req q = { .phase = PROTO_CKPT_DUMP,
					    .flags = j->flags,
					    .table_idx = t,
					    .part_idx = j->part,
					    .epoch = j->epoch };
		struct proto_ckpt_reply rep;

		memcpy(q.id, j->m->id, CKPT_ID_BYTES);
		memcpy(q.base, j->m->base, CKPT_ID_BYTES);
		snprintf(q.dir, sizeof(q.dir), "%s", j->name);
		snprintf(q.table, sizeof(q.table), "%s",
			 j->m->tables[t].spec.name);
		snprintf(q.file, sizeof(q.file), "%s", pe->file);
		/* a DUMP answers once its part is written: it may take
		 * as long as the freeze it runs in */
		j->rc = cli_node_ckpt(j->c, j->node, &q, j->wait_ms, &rep);
		if (j->rc) {
			snprintf(j->err, sizeof(j->err), "node %u, table "
				 "'%s': %s", j->node, q.table, rs_errormsg());
			break;
		}
		pe->sum = (struct ckpt_part_sum){ .rows = rep.rows,
						  .deleted = rep.deleted,
						  .raw_bytes = rep.raw_bytes,
						  .bytes = rep.bytes,
						  .xxh64 = rep.xxh64 };
	}
	return NULL;
}

static int thaw_all(struct rs_client *c, const unsigned *nodes, size_t n,
		    uint64_t *paused_us)
{
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		struct proto_ckpt_req q = { .phase = PROTO_CKPT_THAW };
		struct proto_ckpt_reply rep;
		int rc = cli_node_ckpt(c, nodes[i], &q, 0, &rep);

		if (rc && !first)
			first = rc;
		if (!rc && rep.paused_us > *paused_us)
			*paused_us = rep.paused_us;
	}
	return first;
}

struct cli_ckpt_names {
	const char *const *tables;
	size_t ntables;
};

/* The nodes a checkpoint takes: every node (static), or the ACTIVE
 * members of the client's configuration (cluster: *epoch, else 0);
 * *nodes malloc'ed. */
static int ckpt_members(struct rs_client *c, unsigned **nodes, size_t *n,
			uint64_t *epoch)
{
	size_t nn = cli_nnodes(c);
	bool *act = calloc(nn ? nn : 1, sizeof(*act));
	unsigned *out = calloc(nn ? nn : 1, sizeof(*out));
	size_t k = 0, unknown = 0;

	*epoch = 0;
	if (!act || !out) {
		free(act);
		free(out);
		return rs_seterr(-ENOMEM, "checkpoint: out of memory");
	}
	if (c->cluster) {
		const struct cli_route *rt = cli_route_hold(c);

		*epoch = rt->epoch;
		unknown = rt->nunknown;
		for (size_t i = 0; i < nn; i++)
			act[i] = i < rt->nknown && rt->active[i];
		cli_route_drop(c);
	} else {
		for (size_t i = 0; i < nn; i++)
			act[i] = true;
	}
	for (size_t i = 0; i < nn; i++)
		if (act[i])
			out[k++] = (unsigned)i;
	free(act);
	if (unknown || !k) {
		free(out);
		return rs_seterr(RS_E_EPOCH, "checkpoint: %s of the cluster's "
				 "configuration (epoch %llu) can the client "
				 "reach", k ? "not every active member" :
				 "no active member", (unsigned long long)*epoch);
	}
	*nodes = out;
	*n = k;
	return 0;
}

/* The tables to take, as node `node` lists them (every node has every
 * table). */
static int pick_tables(struct rs_client *c, unsigned node,
		       const struct cli_ckpt_names *o, struct ckpt_manifest *m)
{
	struct proto_table_info *dir;
	uint32_t n;
	uint64_t gen;
	int rc = cli_wire_dir(&c->nodes[node], &dir, &n, &gen);

	if (rc)
		return rc;
	m->tables = calloc(n ? n : 1, sizeof(*m->tables));
	if (!m->tables) {
		free(dir);
		return rs_seterr(-ENOMEM, "checkpoint: out of memory");
	}
	for (uint32_t i = 0; i < n; i++) {
		bool want = !o->ntables;

		for (size_t k = 0; k < o->ntables; k++)
			want |= !strcmp(o->tables[k], dir[i].spec.name);
		if (!want)
			continue;
		m->tables[m->ntables].spec = dir[i].spec;
		m->tables[m->ntables].state_floats = (uint32_t)
			optim_state_floats(dir[i].spec.optim.kind,
					   dir[i].spec.dim);
		m->ntables++;
	}
	free(dir);
	for (size_t k = 0; k < o->ntables; k++) {
		bool found = false;

		for (uint32_t i = 0; i < m->ntables; i++)
			found |= !strcmp(o->tables[k],
					 m->tables[i].spec.name);
		if (!found)
			return rs_seterr(RS_E_NOTFOUND, "checkpoint: no table "
					 "'%s'", o->tables[k]);
	}
	if (!m->ntables)
		return rs_seterr(RS_E_NOTFOUND, "checkpoint: no tables to take");
	return 0;
}

static void manifest_release(struct ckpt_manifest *m)
{
	for (uint32_t t = 0; m->tables && t < m->ntables; t++)
		free(m->tables[t].parts);
	free(m->tables);
	m->tables = NULL;
}

/* dirname(p), resolved (it exists) */
static int parent_real(const char *p, char *out)
{
	char tmp[PATH_MAX];
	size_t n = strlen(p);

	while (n > 1 && p[n - 1] == '/')
		n--;
	while (n && p[n - 1] != '/')
		n--;
	snprintf(tmp, sizeof(tmp), "%.*s", n ? (int)n : 1, n ? p : ".");
	if (!realpath(tmp, out))
		return rs_seterr(-errno, "checkpoint: %s: %s", tmp,
				 strerror(errno));
	return 0;
}

/* An increment on o->base: the base a complete chain, next to path, taken
 * of as many nodes; the increment takes the base's tables. */
static int incr_setup(struct rs_client *c, unsigned node, size_t nn,
		      const char *path, const struct cli_ckpt_opts *o,
		      struct ckpt_manifest *m)
{
	const char *bname = strrchr(o->base, '/') ? strrchr(o->base, '/') + 1
						  : o->base;
	char pp[PATH_MAX], pb[PATH_MAX];
	const struct ckpt_manifest *b;
	struct ckpt_chain *ch;
	const char **names;
	int rc;

	if (o->export_only || o->ntables)
		return rs_seterr(RS_E_INVAL, "checkpoint: an increment takes "
				 "its base's tables, with their optimizer "
				 "state (no table choice, no export)");
	if (!ckpt_file_name_ok(bname))
		return rs_seterr(RS_E_INVAL, "checkpoint: base '%s': the last "
				 "component must be a plain name (no trailing "
				 "'/')", o->base);
	if ((rc = parent_real(path, pp)) || (rc = parent_real(o->base, pb)))
		return rc;
	if (strcmp(pp, pb))
		return rs_seterr(RS_E_INVAL, "checkpoint: the base %s is not "
				 "in the directory of %s (the nodes write both "
				 "under their checkpoint_dir)", o->base, path);
	if ((rc = ckpt_chain_load(o->base, &ch)))
		return rc;
	b = ch->m[ch->n - 1];
	names = calloc(b->ntables ? b->ntables : 1, sizeof(*names));
	if (!names)
		rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
	for (uint32_t t = 0; !rc && t < b->ntables; t++) {
		names[t] = b->tables[t].spec.name;
		if (b->tables[t].nparts != nn)
			rc = rs_seterr(RS_E_INVAL, "checkpoint: the base %s "
				       "was taken of %u nodes, the store has "
				       "%zu: take a full checkpoint", o->base,
				       b->tables[t].nparts, nn);
	}
	if (!rc)
		rc = pick_tables(c, node, &(struct cli_ckpt_names){ names,
							b->ntables }, m);
	if (!rc) {
		m->kind = CKPT_INCREMENTAL;
		memcpy(m->base, b->id, CKPT_ID_BYTES);
		snprintf(m->base_dir, sizeof(m->base_dir), "%s", bname);
	}
	free(names);
	ckpt_chain_free(ch);
	return rc;
}

/* The parts of every table: one per node taken. */
static int parts_setup(struct ckpt_manifest *m, size_t nn)
{
	for (uint32_t t = 0; t < m->ntables; t++) {
		free(m->tables[t].parts);
		m->tables[t].nparts = (uint32_t)nn;
		m->tables[t].parts = calloc(nn, sizeof(*m->tables[t].parts));
		if (!m->tables[t].parts)
			return rs_seterr(-ENOMEM, "checkpoint: out of memory");
		for (size_t i = 0; i < nn; i++)
			part_file(m->tables[t].parts[i].file,
				  m->tables[t].spec.name, (unsigned)i);
	}
	return 0;
}

/* One try: freeze nodes[0..nn) (in epoch, a cluster's), have each dump
 * its parts, thaw them all (also after a failure). */
static int take(struct rs_client *c, const char *name,
		const struct cli_ckpt_opts *o, struct ckpt_manifest *m,
		const unsigned *nodes, size_t nn, uint64_t epoch,
		struct cli_ckpt_progress *p, struct cli_ckpt_report *rep)
{
	unsigned freeze_ms = o->freeze_ms ? o->freeze_ms : 60000;
	uint32_t ef = epoch ? PROTO_CKF_EPOCH : 0;
	struct dump_job *jobs = calloc(nn, sizeof(*jobs));
	pthread_t *thr = calloc(nn, sizeof(*thr));
	size_t frozen = 0, started = 0;
	int rc = 0;

	if (!jobs || !thr) {
		free(jobs);
		free(thr);
		return rs_seterr(-ENOMEM, "checkpoint: out of memory");
	}
	/* 1. every node stops taking writes */
	p->phase = "freeze";
	progress(o, p, true);
	for (; frozen < nn; frozen++) {
		struct proto_ckpt_req q = { .phase = PROTO_CKPT_FREEZE,
					    .flags = ef, .epoch = epoch,
					    .timeout_ms = freeze_ms };
		struct proto_ckpt_reply r;

		if ((rc = cli_node_ckpt(c, nodes[frozen], &q, 0, &r)))
			break;
	}
	/* 2. every node writes its parts, in parallel */
	if (!rc) {
		p->phase = "dump";
		progress(o, p, true);
		for (; started < nn; started++) {
			jobs[started] = (struct dump_job){
				.c = c, .node = nodes[started],
				.part = (unsigned)started, .m = m,
				.name = name, .wait_ms = freeze_ms,
				.epoch = epoch,
				.flags = ef | (o->export_only ? 0 :
					 o->base ? PROTO_CKF_STATE |
					 PROTO_CKF_INCR : PROTO_CKF_STATE) };
			if (pthread_create(&thr[started], NULL, dump_node,
					   &jobs[started])) {
				rc = rs_seterr(-EAGAIN, "checkpoint: no thread");
				break;
			}
		}
		for (size_t i = 0; i < started; i++)
			pthread_join(thr[i], NULL);
		for (size_t i = 0; i < started && !rc; i++)
			if (jobs[i].rc)
				rc = rs_seterr(jobs[i].rc, "checkpoint: %s",
					       jobs[i].err);
	}
	/* 3. writes resume (also after a failure; the node whose FREEZE
	 * failed too: it may have paused before it refused) */
	{
		char keep[RS_ERRMSG_MAX];
		int trc;

		rs_errsave(keep);
		trc = thaw_all(c, nodes, frozen < nn ? frozen + 1 : nn,
			       &rep->paused_us);
		if (rc)
			rs_errrestore(keep);
		else
			rc = trc;
	}
	free(jobs);
	free(thr);
	return rc;
}

int cli_checkpoint(struct rs_client *c, const char *path,
		   const struct cli_ckpt_opts *o, struct cli_ckpt_report *rep)
{
	const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	struct ckpt_manifest m = { 0 };
	struct cli_ckpt_progress p = { .start_us = now_us() };
	unsigned *nodes = NULL;
	size_t nn = 0;
	uint64_t epoch = 0;
	int rc;

	memset(rep, 0, sizeof(*rep));
	if (!*name || name[0] == '.' ||
	    proto_name_check("checkpoint name", name, strlen(name)))
		return rs_seterr(RS_E_INVAL, "checkpoint: '%s': the last "
				 "component must be a name of [A-Za-z0-9_.-] "
				 "not starting with a dot", path);
	if (mkdir(path, 0755) && errno != EEXIST)
		return rs_seterr(-errno, "checkpoint: %s: %s", path,
				 strerror(errno));
	{
		char mf[PATH_MAX];
		struct stat st;

		snprintf(mf, sizeof(mf), "%s/" CKPT_MANIFEST, path);
		if (!stat(mf, &st))
			return rs_seterr(RS_E_EXISTS, "checkpoint: %s holds a "
					 "checkpoint already", path);
	}
	ckpt_new_id(m.id);
	m.kind = o->export_only ? CKPT_EXPORT : CKPT_FULL;
	if ((rc = ckpt_members(c, &nodes, &nn, &epoch)))
		goto out;
	if (o->base)
		rc = incr_setup(c, nodes[0], nn, path, o, &m);
	else
		rc = pick_tables(c, nodes[0], &(struct cli_ckpt_names){
					 o->tables, o->ntables }, &m);
	for (unsigned tries = 1; !rc; tries++) {
		if ((rc = parts_setup(&m, nn)))
			break;
		rc = take(c, name, o, &m, nodes, nn, epoch, &p, rep);
		if (rc != RS_E_EPOCH || !c->cluster)
			break;
		if (tries == CKPT_TRIES) {
			rc = rs_seterr(rc, "checkpoint: the cluster's "
				       "configuration changed while it was "
				       "taken, %u times (last: %s); every "
				       "node resumed writes and nothing was "
				       "written", tries, rs_errormsg());
			break;
		}
		/* the configuration moved on: all nodes are thawed; take
		 * it again, of the members of the new one */
		p.phase = "configuration changed: again";
		progress(o, &p, true);
		(void)cli_cluster_refresh(c, epoch, SIZE_MAX);
		free(nodes);
		nodes = NULL;
		rc = ckpt_members(c, &nodes, &nn, &epoch);
	}
	if (rc)
		goto out;
	/* 4. the manifest makes it a checkpoint */
	m.created_ms = (uint64_t)time(NULL) * 1000u;
	if ((rc = ckpt_manifest_save(path, &m)))
		goto out;
	for (uint32_t t = 0; t < m.ntables; t++)
		for (uint32_t i = 0; i < m.tables[t].nparts; i++) {
			rep->rows += m.tables[t].parts[i].sum.rows;
			rep->deleted += m.tables[t].parts[i].sum.deleted;
			rep->bytes += m.tables[t].parts[i].sum.bytes;
			rep->raw_bytes += m.tables[t].parts[i].sum.raw_bytes;
		}
	rep->tables = m.ntables;
	rep->parts = m.ntables * (uint32_t)nn;
	rep->with_state = m.kind != CKPT_EXPORT;
	memcpy(rep->id, m.id, CKPT_ID_BYTES);
	p.phase = "done";
	p.rows = rep->rows;
	p.bytes = rep->bytes;
	progress(o, &p, true);
out:
	rep->elapsed_us = now_us() - p.start_us;
	free(nodes);
	manifest_release(&m);
	return rc;
}

/* ---- restore ---- */

struct batch {
	struct cli_key *keys;
	const float **in;
	float *rows;
	int *status;
	uint32_t width, n;
};

static int flush(struct rs_client *c, uint32_t op, struct batch *b,
		 struct cli_ckpt_progress *p)
{
	int rc;

	if (!b->n)
		return 0;
	rc = cli_rpc(c, op, b->keys, op == PROTO_OP_DELETE ? NULL : b->in,
		     NULL, b->n, b->status, 0, false, NULL);
	for (uint32_t i = 0; !rc && i < b->n; i++)
		if (b->status[i] < 0)
			rc = rs_seterr(b->status[i], "restore: table '%s', key "
				       "%llu: %s", b->keys[i].t->name,
				       (unsigned long long)b->keys[i].key,
				       rs_strerror(b->status[i]));
	if (!rc && op != PROTO_OP_DELETE)
		p->rows += b->n;
	b->n = 0;
	return rc;
}

#define PASS_ROWS 1u
#define PASS_DELETED 2u

/* The records of one part that `pass` takes (PASS_*) to the store. */
static int restore_part(struct rs_client *c, const char *dir,
			const struct ckpt_manifest *m, uint32_t t, uint32_t pi,
			struct rs_table *tab, const struct cli_ckpt_opts *o,
			struct cli_ckpt_progress *p, unsigned pass)
{
	const struct ckpt_table_entry *e = &m->tables[t];
	uint32_t dim = e->spec.dim, sf = m->kind == CKPT_EXPORT ? 0 :
					 e->state_floats;
	uint32_t op = m->kind == CKPT_EXPORT ? PROTO_OP_PUT : PROTO_OP_LOAD;
	struct batch rows = { .width = dim + sf }, gone = { .width = 0 };
	struct ckpt_part_desc d;
	struct ckpt_reader *r = NULL;
	struct ckpt_record rec;
	struct row_geom g;
	char path[PATH_MAX];
	int rc, more;

	snprintf(path, sizeof(path), "%s/%s", dir, e->parts[pi].file);
	ckpt_part_desc_for(m, t, pi, &d);
	rc = row_geom_init(&g, dim, row_dtype_from_proto(e->spec.dtype), 0,
			   0);
	rows.keys = calloc(RESTORE_BATCH, sizeof(*rows.keys));
	rows.in = calloc(RESTORE_BATCH, sizeof(*rows.in));
	rows.rows = malloc((size_t)RESTORE_BATCH * rows.width * sizeof(float));
	rows.status = calloc(RESTORE_BATCH, sizeof(int));
	gone.keys = calloc(RESTORE_BATCH, sizeof(*gone.keys));
	gone.status = calloc(RESTORE_BATCH, sizeof(int));
	if (!rc && (!rows.keys || !rows.in || !rows.rows || !rows.status ||
		    !gone.keys || !gone.status))
		rc = rs_seterr(-ENOMEM, "restore: out of memory");
	if (!rc)
		rc = ckpt_part_open(&r, path, &d);
	while (!rc && (more = ckpt_part_next(r, &rec)) > 0) {
		if (!(pass & (rec.kind == CKPT_REC_DELETED ? PASS_DELETED :
			      PASS_ROWS)))
			continue;
		if (rec.kind == CKPT_REC_DELETED) {
			gone.keys[gone.n++] = (struct cli_key){ .t = tab,
								.key = rec.key };
			if (gone.n == RESTORE_BATCH)
				rc = flush(c, PROTO_OP_DELETE, &gone, p);
			continue;
		}
		{
			float *row = rows.rows + (size_t)rows.n * rows.width;

			row_payload_to_f32(&g, rec.payload, row);
			if (sf)
				memcpy(row + dim, rec.state, sf * sizeof(float));
			rows.keys[rows.n] = (struct cli_key){ .t = tab,
							      .key = rec.key };
			rows.in[rows.n] = row;
			rows.n++;
		}
		if (rows.n == RESTORE_BATCH) {
			rc = flush(c, op, &rows, p);
			progress(o, p, false);
		}
	}
	if (!rc && more < 0)
		rc = more;
	if (!rc)
		rc = flush(c, op, &rows, p);
	if (!rc)
		rc = flush(c, PROTO_OP_DELETE, &gone, p);
	if (!rc && (pass & PASS_ROWS))
		p->bytes += e->parts[pi].sum.bytes;
	ckpt_part_close(r);
	free(rows.keys);
	free(rows.in);
	free(rows.rows);
	free(rows.status);
	free(gone.keys);
	free(gone.status);
	return rc;
}

/* The table exists with the same geometry, or is created. */
static int ensure_table(struct rs_client *c, const struct ckpt_table_entry *e,
			struct rs_table **out)
{
	struct proto_limits lim;
	size_t existed, nn;
	bool *active;
	int rc;

	proto_limits_default(&lim);
	lim.max_dim = PROTO_MAX_DIM;
	if ((rc = proto_table_spec_validate(&e->spec, &lim)) ||
	    (rc = cli_table_create_proto(c, &e->spec, &existed)) ||
	    (rc = rs_table_open(c, e->spec.name, out)))
		return rc;
	(void)cli_table_refresh(*out);
	nn = cli_nnodes(c);
	if (!(active = calloc(nn ? nn : 1, sizeof(*active))))
		return rs_seterr(-ENOMEM, "restore: out of memory");
	/* every node, or a cluster's ACTIVE members */
	cli_active_nodes(c, active, nn);
	for (size_t i = 0; !rc && i < nn; i++) {
		struct cli_tloc v;

		if (!active[i])
			continue;
		cli_table_loc(*out, (unsigned)i, &v);
		if (!v.valid)
			rc = rs_seterr(RS_E_NOTFOUND, "restore: table '%s' "
				       "missing on node %zu", e->spec.name, i);
		else if (v.info.spec.dim != e->spec.dim ||
			 v.info.spec.dtype != e->spec.dtype ||
			 v.info.spec.optim.kind != e->spec.optim.kind)
			rc = rs_seterr(RS_E_DIM, "restore: table '%s' exists "
				       "with another dim, dtype or optimizer "
				       "than the checkpoint's", e->spec.name);
	}
	free(active);
	return rc;
}

/* One checkpoint of a chain into c's store. An increment's deletions go
 * first, for every part, then its rows: a key that moved between nodes
 * since the base may be deleted by one part and written by another. */
static int restore_link(struct rs_client *c, const char *dir,
			const struct ckpt_manifest *m,
			const struct cli_ckpt_opts *o,
			struct cli_ckpt_progress *p, uint32_t *ntables)
{
	unsigned npass = m->kind == CKPT_INCREMENTAL ? 2 : 1;
	int rc = 0;

	*ntables = 0;
	for (uint32_t t = 0; !rc && t < m->ntables; t++) {
		struct rs_table *tab;
		bool want = !o->ntables;

		for (size_t k = 0; k < o->ntables; k++)
			want |= !strcmp(o->tables[k], m->tables[t].spec.name);
		if (!want)
			continue;
		rc = ensure_table(c, &m->tables[t], &tab);
		for (unsigned ps = 0; ps < npass; ps++) {
			unsigned pass = npass == 1 ? PASS_ROWS | PASS_DELETED :
					ps == 0 ? PASS_DELETED : PASS_ROWS;

			for (uint32_t i = 0; !rc && i < m->tables[t].nparts;
			     i++)
				rc = restore_part(c, dir, m, t, i, tab, o, p,
						  pass);
		}
		if (!rc)
			(*ntables)++;
	}
	return rc;
}

int cli_restore(struct rs_client *c, const char *path,
		const struct cli_ckpt_opts *o, struct cli_ckpt_report *rep)
{
	struct cli_ckpt_progress p = { .start_us = now_us() };
	struct ckpt_verify_stats vs;
	struct ckpt_chain *ch = NULL;
	const struct ckpt_manifest *m;
	int rc;

	memset(rep, 0, sizeof(*rep));
	/* nothing is written before the whole chain checked out: the
	 * increment, its bases back to a full checkpoint, every part */
	p.phase = "verify";
	progress(o, &p, true);
	if ((rc = ckpt_chain_verify(path, &vs)) ||
	    (rc = ckpt_chain_load(path, &ch)))
		goto out;
	p.phase = "load";
	p.total_bytes = vs.bytes;
	p.total_rows = vs.rows;
	for (uint32_t i = 0; !rc && i < ch->n; i++)
		rc = restore_link(c, ch->dir[i], ch->m[i], o, &p, &rep->tables);
	if (rc)
		goto out;
	m = ch->m[ch->n - 1];
	rep->rows = p.rows;
	rep->bytes = p.bytes;
	rep->parts = (uint32_t)vs.parts;
	rep->raw_bytes = vs.raw_bytes;
	rep->with_state = m->kind != CKPT_EXPORT;
	memcpy(rep->id, m->id, CKPT_ID_BYTES);
	p.phase = "done";
	progress(o, &p, true);
out:
	rep->elapsed_us = now_us() - p.start_us;
	ckpt_chain_free(ch);
	return rc;
}
