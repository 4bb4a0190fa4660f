/*
 * table.c - tables by name: handles, directory refresh, and the admin RPCs
 * (create, drop, list, node stats) that recstore-ctl uses.
 *
 * A handle's per-node view (struct cli_tloc) is replaced wholesale by
 * cli_table_refresh() under the handle's write lock; data paths copy the
 * view of the node they need under the read lock (cli_table_loc()). A view
 * whose (id, generation) changed gets a new uid, which retires every
 * location-cache entry of the old incarnation.
 *
 * In cluster mode the directory calls touch the ACTIVE members of the
 * current configuration only (cli_active_nodes()); creates, drops and
 * grows go to its JOINING members too, naming its epoch (table_change()); the
 * view of any other member is invalid (a DOWN node is not asked), and so
 * is the view of a node the client added after the handle's last refresh
 * (client_internal.h): the data paths refresh the handle when a key's
 * node has no valid view.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "common/abi.h"
#include "common/rs_internal.h"
#include "common/spec_fields.h"
#include "value/initializer.h"
#include "value/row_format.h"

/* ---- growable structs (common/abi.h): every size each has had ---- */

/* 0.2; 0.4 (max_capacity); 0.5 (evict) */
static const uint32_t spec_sizes[] = { 144, 152, 176 };
static const uint32_t info_sizes[] = { 104 };	/* 0.2 */
static const uint32_t nstats_sizes[] = { 96 };	/* 0.2 */
_Static_assert(sizeof(struct rs_table_spec) == 176, "append to spec_sizes");
_Static_assert(sizeof(struct rs_table_info) == 104, "append to info_sizes");
_Static_assert(sizeof(struct rs_node_stats) == 96,
	       "append to nstats_sizes");
#define ABI_TYPE(s, arr) { "struct " #s, arr, RS_ARRAY_SIZE(arr) }
static const struct rs_abi_type spec_abi = ABI_TYPE(rs_table_spec,
						    spec_sizes);
static const struct rs_abi_type info_abi = ABI_TYPE(rs_table_info,
						    info_sizes);
static const struct rs_abi_type nstats_abi = ABI_TYPE(rs_node_stats,
						      nstats_sizes);

/* ---- specs ---- */

/*
 * The fields that struct rs_table_spec (public), struct proto_table_spec
 * (wire) and struct optim_params (kernels) share by name: the
 * hyper-parameters from the spec's field table (common/spec_fields.h),
 * the rest listed here. FIELDS(X, dst, src) expands to X(dst, src, field)
 * for each.
 */
#define COPY_FIELD(dst, src, f) (dst)->f = (src)->f;
#define COPY_ROW(ds, f, ...) SPEC_CALL(COPY_FIELD, SPEC_UNPAREN ds, f)
#define OPTIM_FIELDS(X, dst, src)                                      \
	X(dst, src, kind) SPEC_OPTIM_PARAMS(COPY_ROW, (dst, src))
#define INIT_FIELDS(X, dst, src)                                       \
	X(dst, src, kind) SPEC_INIT_PARAMS(COPY_ROW, (dst, src))
#define COPY_FIELDS(X, dst, src)                                       \
	X(dst, src, dim) X(dst, src, dtype) X(dst, src, capacity)      \
	OPTIM_FIELDS(X, &(dst)->optim, &(src)->optim)                  \
	INIT_FIELDS(X, &(dst)->init, &(src)->init)                     \
	X(dst, src, evict.policy) X(dst, src, evict.admit_after)         \
	X(dst, src, evict.max_rows) X(dst, src, evict.ttl_s)

RS_EXPORT int rs_table_spec_init(struct rs_table_spec *spec, const char *name,
				 uint32_t dim)
{
	struct rs_table_spec full;
	struct optim_params op;
	int ret;

	if (!spec || !name)
		return rs_seterr(RS_E_INVAL, "table spec: NULL argument");
	ret = rs_abi_check(&spec_abi, spec);
	if (ret)
		return ret;
	memset(&full, 0, sizeof(full));
	ret = proto_name_check("table name", name, strlen(name));
	if (ret)
		return ret;
	if (dim < 1 || dim > PROTO_MAX_DIM)
		return rs_seterr(RS_E_INVAL, "table '%s': dim %u not in 1..%u",
				 name, dim, PROTO_MAX_DIM);
	strcpy(full.name, name);
	full.dim = dim;
	full.dtype = RS_DTYPE_FP32;
	full.capacity = 0; /* the node's default (docs/config.md) */
	optim_params_default(&op, OPTIM_SGD);
	OPTIM_FIELDS(COPY_FIELD, &full.optim, &op)
	full.init.kind = RS_INIT_ZEROS;
	rs_abi_out(spec, &full, sizeof(full));
	return 0;
}

RS_EXPORT int rs_table_spec_set_optimizer(struct rs_table_spec *spec,
					  const char *name)
{
	struct rs_table_spec full;
	struct optim_params op;
	int kind;

	if (!spec || !name)
		return rs_seterr(RS_E_INVAL, "table spec: NULL argument");
	kind = rs_abi_check(&spec_abi, spec);
	if (kind)
		return kind;
	kind = optim_kind_parse(name);
	if (kind < 0)
		return kind;
	rs_abi_in(&full, sizeof(full), spec);
	optim_params_default(&op, (uint32_t)kind);
	OPTIM_FIELDS(COPY_FIELD, &full.optim, &op)
	rs_abi_out(spec, &full, sizeof(full));
	return 0;
}

static void spec_to_proto(const struct rs_table_spec *s,
			  struct proto_table_spec *p);

RS_EXPORT int rs_table_spec_set_eviction(struct rs_table_spec *spec,
					 const char *policy, uint64_t max_rows,
					 uint32_t ttl_s, uint32_t admit_after)
{
	struct rs_table_spec full;
	struct proto_table_spec p;
	int ret, kind;

	if (!spec || !policy)
		return rs_seterr(RS_E_INVAL, "table spec: NULL argument");
	ret = rs_abi_check(&spec_abi, spec);
	if (ret)
		return ret;
	if (spec->struct_size < sizeof(full))
		return rs_seterr(RS_E_INVAL, "struct rs_table_spec of %u "
				 "bytes has no eviction fields (0.5: %zu)",
				 spec->struct_size, sizeof(full));
	kind = proto_evict_policy_parse(policy);
	if (kind < 0)
		return kind;
	rs_abi_in(&full, sizeof(full), spec);
	full.evict.policy = (uint32_t)kind;
	full.evict.max_rows = max_rows;
	full.evict.ttl_s = ttl_s;
	full.evict.admit_after = admit_after;
	spec_to_proto(&full, &p);
	ret = proto_table_spec_validate(&p, NULL);
	if (ret)
		return ret;
	rs_abi_out(spec, &full, sizeof(full));
	return 0;
}

static void spec_to_proto(const struct rs_table_spec *s,
			  struct proto_table_spec *p)
{
	memset(p, 0, sizeof(*p));
	memcpy(p->name, s->name, sizeof(p->name));
	p->name[PROTO_NAME_MAX] = '\0';
	COPY_FIELDS(COPY_FIELD, p, s)
	p->grow_log2 = s->max_capacity ?
			       (uint8_t)(63 - __builtin_clzll(s->max_capacity))
				     : 0;
}

static void spec_from_proto(const struct proto_table_spec *p,
			    struct rs_table_spec *s)
{
	memset(s, 0, sizeof(*s));
	memcpy(s->name, p->name, sizeof(s->name));
	COPY_FIELDS(COPY_FIELD, s, p)
	s->max_capacity = p->grow_log2 ? 1ULL << p->grow_log2 : 0;
}

int cli_table_spec_out(const struct proto_table_spec *p,
		       struct rs_table_spec *out)
{
	struct rs_table_spec full;
	int ret = rs_abi_check(&spec_abi, out);

	if (ret)
		return ret;
	spec_from_proto(p, &full);
	full.struct_size = sizeof(full);
	rs_abi_out(out, &full, sizeof(full));
	return 0;
}

/* A payload element as the node stores it for dtype (rounded to nearest
 * even), back in fp32. */
static float dtype_round(uint32_t dtype, float f)
{
	if (dtype == RS_DTYPE_FP16)
		return row_f16_to_f32(row_f32_to_f16(f));
	if (dtype == RS_DTYPE_BF16)
		return row_bf16_to_f32(row_f32_to_bf16(f));
	return f;
}

RS_EXPORT int rs_table_init_rows(const struct rs_table_spec *spec,
				 const uint64_t *keys, size_t n, float *out)
{
	struct rs_table_spec full;
	struct proto_table_spec p;
	int ret;

	if (!spec || (n && (!keys || !out)))
		return rs_seterr(RS_E_INVAL, "init rows: NULL argument");
	ret = rs_abi_check(&spec_abi, spec);
	if (ret)
		return ret;
	rs_abi_in(&full, sizeof(full), spec);
	if (full.dim < 1 || full.dim > PROTO_MAX_DIM)
		return rs_seterr(RS_E_INVAL, "init rows: dim %u not in 1..%u",
				 full.dim, PROTO_MAX_DIM);
	if (full.dtype > RS_DTYPE_BF16)
		return rs_seterr(RS_E_INVAL, "init rows: dtype %u unknown",
				 full.dtype);
	spec_to_proto(&full, &p);
	ret = init_params_validate(&p.init);
	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++) {
		float *row = out + i * full.dim;

		init_row(&p.init, keys[i], row, full.dim);
		for (uint32_t j = 0; full.dtype != RS_DTYPE_FP32 &&
				     j < full.dim; j++)
			row[j] = dtype_round(full.dtype, row[j]);
	}
	return 0;
}

/* ---- per-node views ---- */

/* Fill a view from a directory entry; RS_E_UNSUPPORTED for a layout this
 * client cannot READ (it then uses the RPC for that table). */
static int tloc_fill(struct cli_tloc *l, const struct proto_table_info *in)
{
	memset(l, 0, sizeof(*l));
	l->info = *in;
	l->geom.nbuckets = in->index.nbuckets;
	l->geom.seed1 = in->index.seed1;
	l->geom.seed2 = in->index.seed2;
	l->geom.bucket_bytes = in->index.bucket_bytes;
	l->geom.buckets_off = in->index.buckets_off;
	l->geom.incarnation = in->generation;
	l->valid = true;
	l->onesided = in->index.layout == PET_LAYOUT_VERSION &&
		      in->rows.layout == ROW_LAYOUT_VERSION &&
		      in->index.bucket_bytes == PET_BUCKET_BYTES &&
		      in->index.slots == PET_SLOTS &&
		      in->index.nbuckets >= 2 && in->rows.row_bytes &&
		      row_geom_init(&l->rgeom, in->spec.dim,
				    row_dtype_from_proto(in->spec.dtype),
				    in->rows.bytes / in->rows.row_bytes,
				    (uint16_t)in->id) == 0 &&
		      l->rgeom.stride == in->rows.row_bytes;
	/* the table incarnation seeds every row and bucket checksum */
	l->rgeom.incarnation = in->generation;
	return 0;
}

void cli_table_loc(struct rs_table *t, unsigned node, struct cli_tloc *out)
{
	pthread_rwlock_rdlock(&t->lock);
	if (node < t->nloc)
		*out = t->loc[node];
	else	/* a node added after the last refresh: not valid */
		memset(out, 0, sizeof(*out));
	pthread_rwlock_unlock(&t->lock);
}

/* active[*nn] (malloc'ed, cli_active_nodes()) for the client's node
 * count *nn now (cli_nnodes()), and how many are active (*n). */
static bool *active_nodes(struct rs_client *c, size_t *nn, size_t *n)
{
	bool *a;

	*nn = cli_nnodes(c);
	a = calloc(*nn ? *nn : 1, sizeof(*a));
	if (!a) {
		rs_seterr(-ENOMEM, "table: out of memory");
		return NULL;
	}
	*n = cli_active_nodes(c, a, *nn);
	return a;
}

static int table_refresh_once(struct rs_table *t, size_t *failed);

/* Cluster mode, after a call that failed with ret: false when it is no
 * reason to try again (not a connection error nor RS_E_EPOCH, or the
 * client's timeout since *deadline was set has run out); else the
 * configuration refreshed (seen: the client's epoch when the call began;
 * failed: the node that could not be reached, SIZE_MAX: none) and the
 * resend backoff waited. */
static bool retry_pause(struct rs_client *c, int ret, uint64_t seen,
			size_t failed, uint64_t *deadline, unsigned *wait_ms)
{
	uint64_t now = rs_mono_ms();

	if (!c->cluster || (ret != RS_E_EPOCH && !cli_conn_error(ret)))
		return false;
	if (!*deadline)
		*deadline = now + c->cfg.timeout_ms;
	if (now >= *deadline)
		return false;
	(void)cli_cluster_refresh(c, seen, failed);
	usleep(*wait_ms * 1000u);
	*wait_ms = *wait_ms < 64 ? 2 * *wait_ms : 64;
	return true;
}

/* The directory of t from every active node. In cluster mode a node that
 * cannot be reached (it died: the configuration is about to drop it)
 * makes the client refresh its configuration and ask again, with the
 * resend backoff, until the client's timeout. */
int cli_table_refresh(struct rs_table *t)
{
	struct rs_client *c = t->c;
	uint64_t deadline = 0;
	unsigned wait_ms = 1;
	size_t failed;
	int ret;

	for (;;) {
		uint64_t seen = atomic_load(&c->epoch);

		ret = table_refresh_once(t, &failed);
		if (!ret || ret == RS_E_EPOCH ||
		    !retry_pause(c, ret, seen, failed, &deadline, &wait_ms))
			return ret;
	}
}

static int table_refresh_once(struct rs_table *t, size_t *failed)
{
	struct rs_client *c = t->c;
	struct cli_tloc *fresh;
	unsigned have = 0;
	size_t nn, nact, ref = 0;
	bool *act;
	int ret = 0;

	*failed = SIZE_MAX;
	act = active_nodes(c, &nn, &nact);
	fresh = calloc(nn ? nn : 1, sizeof(*fresh));
	if (!fresh || !act) {
		free(act);
		free(fresh);
		return rs_seterr(-ENOMEM, "table: out of memory");
	}
	CLI_INC(c, dir_refreshes, 1);
	for (size_t i = 0; i < nn && !ret; i++) {
		struct proto_table_info *dir;
		uint32_t n;
		uint64_t gen;

		if (!act[i])
			continue;
		ret = cli_wire_dir(&c->nodes[i], &dir, &n, &gen);
		if (ret)
			*failed = i;
		for (uint32_t j = 0; !ret && j < n; j++)
			if (!strcmp(dir[j].spec.name, t->name)) {
				tloc_fill(&fresh[i], &dir[j]);
				have++;
				break;
			}
		free(dir);
	}
	if (!ret && have == 0)
		ret = rs_seterr(RS_E_NOTFOUND, "table '%s': no node has it",
				t->name);
	while (ref < nn && !fresh[ref].valid)
		ref++;
	for (size_t i = 0; !ret && i < nn; i++) {
		if (!act[i])
			continue;
		if (!fresh[i].valid)
			ret = rs_seterr(RS_E_NOTFOUND, "table '%s': missing on "
					"node %s", t->name, c->nodes[i].name);
		else if (fresh[i].info.spec.dim != fresh[ref].info.spec.dim ||
			 fresh[i].info.spec.dtype !=
				 fresh[ref].info.spec.dtype)
			ret = rs_seterr(RS_E_DIM, "table '%s': nodes disagree "
					"on dim/dtype", t->name);
	}
	free(act);
	if (ret) {
		free(fresh);
		return ret;
	}
	pthread_rwlock_wrlock(&t->lock);
	for (size_t i = 0; i < nn; i++) {
		const struct cli_tloc *old = i < t->nloc ? &t->loc[i] : NULL;

		if (!fresh[i].valid)
			continue;
		if (old && old->valid &&
		    old->info.id == fresh[i].info.id &&
		    old->info.generation == fresh[i].info.generation)
			fresh[i].uid = old->uid;
		else
			fresh[i].uid = atomic_fetch_add(&c->next_uid, 1);
	}
	free(t->loc);
	t->loc = fresh;
	t->nloc = nn;
	t->dim = fresh[ref].info.spec.dim;
	t->dtype = fresh[ref].info.spec.dtype;
	pthread_rwlock_unlock(&t->lock);
	return 0;
}

/* ---- handles ---- */

static struct rs_table *find_handle(struct rs_client *c, const char *name)
{
	for (struct rs_table *t = c->tables; t; t = t->next)
		if (!strcmp(t->name, name))
			return t;
	return NULL;
}

RS_EXPORT int rs_table_open(struct rs_client *c, const char *name,
			    struct rs_table **out)
{
	struct rs_table *t;
	int ret;

	if (!c || !name || !out)
		return rs_seterr(RS_E_INVAL, "table open: NULL argument");
	ret = proto_name_check("table name", name, strlen(name));
	if (ret)
		return ret;
	pthread_mutex_lock(&c->tables_lock);
	t = find_handle(c, name);
	if (t) {
		pthread_mutex_unlock(&c->tables_lock);
		*out = t;
		return 0;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		pthread_mutex_unlock(&c->tables_lock);
		return rs_seterr(-ENOMEM, "table: out of memory");
	}
	t->c = c;
	strcpy(t->name, name);
	t->luid = atomic_fetch_add(&c->next_uid, 1);
	pthread_rwlock_init(&t->lock, NULL);
	/* Refresh under the list lock: two openers of one name must not
	 * make two handles. Opening is rare. */
	ret = cli_table_refresh(t);
	if (ret) {
		pthread_rwlock_destroy(&t->lock);
		free(t->loc);
		free(t);
	} else {
		t->next = c->tables;
		c->tables = t;
		*out = t;
	}
	pthread_mutex_unlock(&c->tables_lock);
	return ret;
}

static const uint32_t rcopts_sizes[] = { 24 };	/* 0.6 */
_Static_assert(sizeof(struct rs_row_cache_opts) == 24,
	       "append to rcopts_sizes");
static const struct rs_abi_type rcopts_abi = ABI_TYPE(rs_row_cache_opts,
						      rcopts_sizes);

RS_EXPORT int rs_table_set_row_cache(struct rs_table *t,
				     const struct rs_row_cache_opts *opts)
{
	struct rs_row_cache_opts o;
	struct cli_rcache *rc = NULL;
	int ret;

	if (!t)
		return rs_seterr(RS_E_INVAL, "row cache: NULL table");
	if ((ret = rs_abi_check(&rcopts_abi, opts)))
		return ret;
	rs_abi_in(&o, sizeof(o), opts);
	if (o.flags & ~RS_ROW_CACHE_STALE)
		return rs_seterr(RS_E_INVAL, "row cache: unknown flags %#x",
				 o.flags & ~RS_ROW_CACHE_STALE);
	if ((o.flags & RS_ROW_CACHE_STALE) &&
	    o.max_stale_steps >= CLI_RCACHE_EXACT)
		return rs_seterr(RS_E_INVAL, "row cache: max_stale_steps %u is "
				 "out of range", o.max_stale_steps);
	if (o.bytes &&
	    (ret = cli_rcache_new(&rc, (size_t)o.bytes, t->dim,
				  o.flags & RS_ROW_CACHE_STALE
					  ? o.max_stale_steps
					  : CLI_RCACHE_EXACT)))
		return ret;
	cli_rcache_delete(t->rc);
	t->rc = rc;
	return 0;
}

RS_EXPORT uint32_t rs_table_dim(const struct rs_table *t)
{
	return t ? t->dim : 0;
}

RS_EXPORT const char *rs_table_name(const struct rs_table *t)
{
	return t ? t->name : NULL;
}

/* ---- admin RPCs ---- */

/* One control request to node n, built by enc(), reply checked by ok(). */
static int node_call(struct cli_node *n, int (*enc)(struct cli_conn *, void *),
		     void *arg)
{
	struct cli_conn *cc;
	struct proto_msg m;
	struct rv_msg raw;
	int ret, len;

	ret = cli_conn_get(n, &cc);
	if (ret)
		return ret;
	len = enc(cc, arg);
	ret = len < 0 ? len : cli_wire_call(cc, (size_t)len, &raw, &m);
	if (len >= 0 && !ret)
		rv_msg_release(&raw);
	cli_conn_put(cc);
	return ret;
}

/* A TABLE_CREATE (arg: the spec), TABLE_DROP (arg: the name) or
 * TABLE_GROW (arg: struct proto_table_grow), naming epoch when it is not
 * 0. */
struct tchange {
	uint32_t op;
	const void *arg;
	uint64_t epoch;
};

static int enc_change(struct cli_conn *cc, void *arg)
{
	const struct tchange *t = arg;
	struct proto_hdr h;

	cli_hdr_init(&h, 0, false);
	if (t->epoch) {
		h.flags |= PROTO_F_EPOCH;
		h.epoch = t->epoch;
	}
	if (t->op == PROTO_OP_TABLE_CREATE)
		return proto_enc_table_create_req(cc->msg, cc->msg_max, &h,
						  t->arg);
	if (t->op == PROTO_OP_TABLE_GROW)
		return proto_enc_table_grow_req(cc->msg, cc->msg_max, &h,
						t->arg);
	return proto_enc_table_drop_req(cc->msg, cc->msg_max, &h, t->arg);
}

static int enc_ckpt(struct cli_conn *cc, void *arg)
{
	struct proto_hdr h;

	cli_hdr_init(&h, 0, false);
	return proto_enc_ckpt_req(cc->msg, cc->msg_max, &h, arg);
}

int cli_node_ckpt(struct rs_client *c, unsigned node,
		  const struct proto_ckpt_req *q, unsigned wait_ms,
		  struct proto_ckpt_reply *out)
{
	struct cli_conn *cc;
	struct proto_msg m;
	struct rv_msg raw;
	int ret, len;

	if (node >= cli_nnodes(c))
		return rs_seterr(RS_E_INVAL, "node %u: no such node", node);
	ret = cli_conn_get(&c->nodes[node], &cc);
	if (ret)
		return ret;
	len = enc_ckpt(cc, (void *)q);
	if (wait_ms > c->nodes[node].timeout_ms)
		cc->recv_timeout_ms = wait_ms;
	ret = len < 0 ? len : cli_wire_call(cc, (size_t)len, &raw, &m);
	cc->recv_timeout_ms = 0;
	if (len >= 0 && !ret) {
		if (m.hdr.opcode == PROTO_OP_CKPT)
			*out = m.u.ckpt_reply;
		else
			ret = rs_seterr(RS_E_PROTO, "node %s: a %s reply to "
					"CKPT", c->nodes[node].name,
					proto_op_name(m.hdr.opcode));
		rv_msg_release(&raw);
	}
	cli_conn_put(cc);
	return ret;
}

/*
 * A table create or drop (op, arg: struct tchange) at every node that
 * takes part (cli_table_nodes(): in cluster mode the ACTIVE and then the
 * JOINING members of the client's configuration, naming its epoch).
 * Each node answers 0 or `same` (RS_E_EXISTS, RS_E_NOTFOUND: it is so
 * already). In cluster mode RS_E_EPOCH from any node (its epoch is not
 * the client's) or a node that cannot be reached makes the client
 * refresh its configuration and redo the whole call, until the client's
 * timeout: the change then reached every member of one epoch
 * (docs/replication.md, "Tables"). A grow is not redone where it was
 * done (it would grow the table again): a redo skips the nodes that
 * answered 0 in an earlier round. *all_same: every node of the last
 * round answered `same` and no round changed a node.
 */
static int table_change(struct rs_client *c, uint32_t op, const void *arg,
			int same, bool *all_same)
{
	const bool once = op == PROTO_OP_TABLE_GROW;
	uint64_t deadline = 0;
	unsigned wait_ms = 1;
	bool changed = false;
	unsigned *done = NULL;	/* once: the nodes that answered 0 */
	size_t ndone = 0;
	int ret;

	for (;;) {
		uint64_t seen = atomic_load(&c->epoch);
		struct tchange t = { .op = op, .arg = arg };
		size_t n = 0, nsame = 0, failed = SIZE_MAX;
		unsigned *nodes = NULL;

		ret = cli_table_nodes(c, &nodes, &n, &t.epoch);
		if (!ret && once) {
			unsigned *d = realloc(done, (ndone + n + 1) *
						    sizeof(*d));

			if (d)
				done = d;
			else
				ret = rs_seterr(-ENOMEM, "table: out of "
						"memory");
		}
		for (size_t i = 0; !ret && i < n; i++) {
			bool skip = false;

			for (size_t k = 0; once && !skip && k < ndone; k++)
				skip = done[k] == nodes[i];
			if (skip)
				continue;
			ret = node_call(&c->nodes[nodes[i]], enc_change, &t);
			if (ret == same) {
				nsame++;
				ret = 0;
			} else if (!ret) {
				changed = true;
				if (once)
					done[ndone++] = nodes[i];
			} else {
				failed = nodes[i];
			}
		}
		free(nodes);
		if (!ret) {
			*all_same = !changed && nsame == n;
			break;
		}
		if (!retry_pause(c, ret, seen, failed, &deadline, &wait_ms))
			break;
	}
	free(done);
	return ret;
}

int cli_table_create_proto(struct rs_client *c,
			   const struct proto_table_spec *ps, size_t *existed)
{
	struct proto_table_spec with = *ps;
	bool all;
	int ret;

	/* one identity for every member, redos included, and another for
	 * every create (docs/replication.md, "Stale REPLs") */
	if ((ret = rs_random_id(&with.ident)))
		return ret;
	ret = table_change(c, PROTO_OP_TABLE_CREATE, &with, RS_E_EXISTS,
			   &all);

	*existed = !ret && all ? SIZE_MAX : 0; /* every node had it */
	return ret;
}

static void refresh_handle(struct rs_client *c, const char *name)
{
	struct rs_table *t;

	pthread_mutex_lock(&c->tables_lock);
	t = find_handle(c, name);
	pthread_mutex_unlock(&c->tables_lock);
	if (t)
		(void)cli_table_refresh(t);
}

RS_EXPORT int rs_table_create(struct rs_client *c,
			      const struct rs_table_spec *spec)
{
	struct proto_table_spec ps;
	struct proto_limits lim;
	size_t existed = 0;
	int ret;

	struct rs_table_spec full;

	if (!c || !spec)
		return rs_seterr(RS_E_INVAL, "table create: NULL argument");
	ret = rs_abi_check(&spec_abi, spec);
	if (ret)
		return ret;
	rs_abi_in(&full, sizeof(full), spec);
	spec = &full;
	if (spec->max_capacity &&
	    (spec->max_capacity & (spec->max_capacity - 1) ||
	     spec->max_capacity < 2 || spec->max_capacity > 1ULL << 32 ||
	     spec->max_capacity <= spec->capacity))
		return rs_seterr(RS_E_INVAL, "table '%.63s': max_capacity %llu "
				 "is not a power of two in [2, 2^32] above the "
				 "capacity", spec->name,
				 (unsigned long long)spec->max_capacity);
	spec_to_proto(spec, &ps);
	proto_limits_default(&lim);
	lim.max_dim = PROTO_MAX_DIM;
	ret = proto_table_spec_validate(&ps, &lim);
	if (ret)
		return ret;
	ret = cli_table_create_proto(c, &ps, &existed);
	if (ret)
		return ret;
	refresh_handle(c, spec->name);
	if (existed == SIZE_MAX)
		return rs_seterr(RS_E_EXISTS, "table '%s' exists", spec->name);
	return 0;
}

RS_EXPORT int rs_table_drop(struct rs_client *c, const char *name)
{
	char n[PROTO_NAME_MAX + 1];
	bool none;
	int ret;

	if (!c || !name)
		return rs_seterr(RS_E_INVAL, "table drop: NULL argument");
	ret = proto_name_check("table name", name, strlen(name));
	if (ret)
		return ret;
	strcpy(n, name);
	ret = table_change(c, PROTO_OP_TABLE_DROP, n, RS_E_NOTFOUND, &none);
	if (!ret && none)
		ret = rs_seterr(RS_E_NOTFOUND, "table '%s' not found", name);
	return ret;
}

RS_EXPORT int rs_table_grow(struct rs_client *c, const char *name,
			    uint64_t capacity)
{
	struct proto_table_grow g = { .capacity = capacity };
	bool none;
	int ret;

	if (!c || !name)
		return rs_seterr(RS_E_INVAL, "table grow: NULL argument");
	ret = proto_name_check("table name", name, strlen(name));
	if (ret)
		return ret;
	if (capacity > PROTO_MAX_CAPACITY)
		return rs_seterr(RS_E_TOOBIG, "table '%s': capacity %llu is "
				 "over the limit %llu", name,
				 (unsigned long long)capacity,
				 PROTO_MAX_CAPACITY);
	strcpy(g.name, name);
	/* every node (in cluster mode the ACTIVE, then the JOINING members of
	 * one epoch) grows its own copy; RS_E_NOTFOUND from every node is
	 * the call's */
	ret = table_change(c, PROTO_OP_TABLE_GROW, &g, RS_E_NOTFOUND, &none);
	if (!ret && none)
		ret = rs_seterr(RS_E_NOTFOUND, "table '%s' not found", name);
	if (!ret)
		refresh_handle(c, name);
	return ret;
}

/* ---- node stats ---- */

struct stats_ctx {
	int (*fn)(void *arg, const char *table, const char *key, uint64_t v);
	void *arg;
	struct proto_table_info *dir;
	uint32_t ndir;
};

static const char *table_of(const struct stats_ctx *s, uint32_t id)
{
	if (id == PROTO_NO_TABLE)
		return NULL;
	for (uint32_t i = 0; i < s->ndir; i++)
		if (s->dir[i].id == id)
			return s->dir[i].spec.name;
	return "?";
}

static int stats_pages(struct cli_conn *cc, struct stats_ctx *s)
{
	uint32_t start = 0, total = 1;
	int ret = 0, stop = 0;

	while (!ret && !stop && start < total) {
		struct proto_list_req lr = { .start = start };
		struct proto_hdr h;
		struct proto_msg m;
		struct proto_stat st;
		struct rv_msg raw;
		int len;

		cli_hdr_init(&h, 0, false);
		len = proto_enc_list_req(cc->msg, cc->msg_max, &h,
					 PROTO_OP_STATS, &lr);
		if (len < 0)
			return len;
		ret = cli_wire_call(cc, (size_t)len, &raw, &m);
		if (ret)
			return ret;
		total = m.u.stats.total;
		if (m.u.stats.n == 0 && start < total)
			ret = rs_seterr(RS_E_PROTO, "empty stats page");
		start += m.u.stats.n;
		while (!stop && proto_stats_next(&m.u.stats, &st)) {
			stop = s->fn(s->arg, table_of(s, st.table_id), st.key,
				     st.value);
		}
		rv_msg_release(&raw);
		if (stop)
			ret = stop;
	}
	return ret;
}

RS_EXPORT int rs_node_stats_foreach(struct rs_client *c, unsigned node,
				    int (*fn)(void *, const char *,
					      const char *, uint64_t),
				    void *arg)
{
	struct stats_ctx s = { .fn = fn, .arg = arg };
	struct cli_conn *cc;
	uint64_t gen;
	int ret;

	if (!c || !fn || node >= cli_nnodes(c))
		return rs_seterr(RS_E_INVAL, "stats: bad argument");
	ret = cli_wire_dir(&c->nodes[node], &s.dir, &s.ndir, &gen);
	if (ret)
		return ret;
	ret = cli_conn_get(&c->nodes[node], &cc);
	if (!ret) {
		ret = stats_pages(cc, &s);
		cli_conn_put(cc);
	}
	free(s.dir);
	return ret;
}

/* Counter names a node reports (docs/protocol.md, STATS) -> fields. */
static int stats_fill(void *arg, const char *table, const char *key,
		      uint64_t v)
{
	static const struct {
		const char *key;
		size_t off;
	} map[] = {
#define F(k, f) { k, offsetof(struct rs_node_stats, f) }
		F("tables", tables), F("rows", rows),
		F("get_keys", rpc_get_keys),
		F("get_or_init_keys", rpc_get_or_init_keys),
		F("put_keys", rpc_put_keys), F("update_keys", rpc_update_keys),
		F("delete_keys", rpc_delete_keys), F("requests", rpc_requests),
		F("cpu_user_us", cpu_user_us), F("cpu_sys_us", cpu_sys_us),
		F("mem_registered", mem_registered),
#undef F
	};
	struct rs_node_stats *st = arg; /* a full-size copy */

	if (table)
		return 0;
	for (size_t i = 0; i < RS_ARRAY_SIZE(map); i++)
		if (!strcmp(map[i].key, key))
			*(uint64_t *)((char *)st + map[i].off) = v;
	return 0;
}

RS_EXPORT int rs_node_get_stats(struct rs_client *c, unsigned node,
				struct rs_node_stats *out)
{
	struct rs_node_stats full;
	int ret = rs_abi_check(&nstats_abi, out);

	if (ret)
		return ret;
	memset(&full, 0, sizeof(full));
	ret = rs_node_stats_foreach(c, node, stats_fill, &full);
	if (!ret)
		rs_abi_out(out, &full, sizeof(full));
	return ret;
}

/* ---- listing ---- */

static void info_from_proto(const struct proto_table_spec *p,
			    struct rs_table_info *in)
{
	memset(in, 0, sizeof(*in));
	in->struct_size = sizeof(*in);
	memcpy(in->name, p->name, sizeof(in->name));
	in->dim = p->dim;
	in->dtype = p->dtype;
	in->optimizer = p->optim.kind;
	in->lr = p->optim.lr;
	in->init = p->init.kind;
}

struct rows_ctx {
	struct rs_table_info *all;
	size_t nall;
};

static int add_rows(void *arg, const char *table, const char *key,
		    uint64_t v)
{
	struct rows_ctx *r = arg;

	if (!table || strcmp(key, "rows"))
		return 0;
	for (size_t k = 0; k < r->nall; k++)
		if (!strcmp(r->all[k].name, table))
			r->all[k].rows += v;
	return 0;
}

static int cmp_info(const void *a, const void *b)
{
	return strcmp(((const struct rs_table_info *)a)->name,
		      ((const struct rs_table_info *)b)->name);
}

/* Add node directory dir[n] to the union all[*nall]. */
static int merge_dir(struct rs_table_info **all, size_t *nall,
		     const struct proto_table_info *dir, uint32_t n)
{
	for (uint32_t j = 0; j < n; j++) {
		struct rs_table_info *grown;
		size_t k;

		for (k = 0; k < *nall; k++)
			if (!strcmp((*all)[k].name, dir[j].spec.name))
				break;
		if (k == *nall) {
			grown = realloc(*all, (*nall + 1) * sizeof(**all));
			if (!grown)
				return rs_seterr(-ENOMEM, "list: memory");
			*all = grown;
			info_from_proto(&dir[j].spec, &grown[k]);
			(*nall)++;
		}
		(*all)[k].capacity += dir[j].spec.capacity;
	}
	return 0;
}

/* all[nall] (full size) into the caller's array of out[0].struct_size
 * elements. */
static void list_out(struct rs_table_info *out, size_t max,
		     const struct rs_table_info *all, size_t nall)
{
	const uint32_t stride = rs_abi_size(out);

	for (size_t i = 0; i < nall && i < max; i++) {
		void *o = (char *)out + i * stride;

		memcpy(o, &stride, sizeof(stride));
		rs_abi_out(o, &all[i], sizeof(all[i]));
	}
}

RS_EXPORT int rs_table_list(struct rs_client *c, struct rs_table_info *out,
			    size_t max)
{
	struct rs_table_info *all = NULL;
	size_t nall = 0, nn, nact;
	bool *act;
	int ret = 0;

	if (!c || (!out && max))
		return rs_seterr(RS_E_INVAL, "table list: NULL argument");
	if (max && (ret = rs_abi_check(&info_abi, out)))
		return ret;
	act = active_nodes(c, &nn, &nact);
	if (!act)
		return -ENOMEM;
	for (size_t i = 0; i < nn && !ret; i++) {
		struct proto_table_info *dir;
		uint32_t n;
		uint64_t gen;

		if (!act[i])
			continue;
		ret = cli_wire_dir(&c->nodes[i], &dir, &n, &gen);
		if (!ret)
			ret = merge_dir(&all, &nall, dir, n);
		free(dir);
	}
	for (size_t i = 0; i < nn && !ret; i++) {
		struct rows_ctx rc = { all, nall };

		if (act[i])
			ret = rs_node_stats_foreach(c, (unsigned)i, add_rows,
						    &rc);
	}
	free(act);
	if (!ret) {
		if (nall)
			qsort(all, nall, sizeof(*all), cmp_info);
		if (max)
			list_out(out, max, all, nall);
		ret = (int)nall;
	}
	free(all);
	return ret;
}

RS_EXPORT int rs_table_get_spec(struct rs_client *c, const char *name,
				struct rs_table_spec *spec)
{
	size_t nn, nact;
	bool *act;
	int ret;

	if (!c || !name)
		return rs_seterr(RS_E_INVAL, "table spec: NULL argument");
	ret = rs_abi_check(&spec_abi, spec);
	if (!ret)
		ret = proto_name_check("table name", name, strlen(name));
	if (ret)
		return ret;
	act = active_nodes(c, &nn, &nact);
	if (!act)
		return -ENOMEM;
	for (size_t i = 0; i < nn && !ret; i++) {
		struct proto_table_info *dir;
		uint32_t n;
		uint64_t gen;

		if (!act[i])
			continue;
		ret = cli_wire_dir(&c->nodes[i], &dir, &n, &gen);
		for (uint32_t j = 0; !ret && j < n; j++) {
			if (strcmp(dir[j].spec.name, name))
				continue;
			ret = cli_table_spec_out(&dir[j].spec, spec);
			free(dir);
			free(act);
			return ret;
		}
		free(dir);
	}
	free(act);
	return ret ? ret : rs_seterr(RS_E_NOTFOUND, "table '%s' not found",
				     name);
}
