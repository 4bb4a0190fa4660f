/*
 * srv_tables.c - the memory node's table registry: create, drop, look up,
 * and the table directory clients READ by.
 *
 * A table is a slab table (PET-hash index + rows + optimizer state in the
 * node's pool, src/value/slab.h) plus:
 *   - ONE memory registration for REMOTE_READ only, covering the index
 *     region and the rows region (contiguous in the pool, see
 *     slab_table_regions()); optimizer state, the pool superblock and the
 *     other tables are not readable. No registration grants remote write.
 *   - its spec: optimizer and initializer parameters (the directory keeps
 *     only the geometry; a file pool keeps the spec in the table's catalog
 *     record, written with the table: srv_catalog.c, slab.h);
 *   - its directory entry (struct proto_table_info): addresses, rkey and
 *     geometry, built once at create time.
 * The wire table id is the slab table id, which is also the table_id field
 * of every row header (rows validate against it). The table generation is
 * the slab table's random incarnation id: a drop + create of the same
 * name, even at the same id, gives a new generation, and requests carrying
 * an old generation are refused with RS_E_STALE. The same value seeds
 * every row and bucket checksum (row_seed, pet_bucket_seed), so a client
 * READing with an old generation rejects every row and bucket of a new
 * table on the same extent as torn, even where versions repeat.
 *
 * Directory generation: one counter per node, bumped by every create and
 * drop; it starts from a random value at each open so that a restarted
 * node never repeats the generation a client cached before the restart.
 *
 * Lifetime and concurrency. slot[] is read under tables.lock (read side)
 * by request handlers, which take a reference (srv_table_get) and drop it
 * when done (srv_table_put); no handler holds a reference while it waits
 * (for a send credit, a lock, ...). A drop unlinks the table under the
 * write lock (new requests then see "unknown table"), waits for the
 * references in flight to drain (handlers are short), then deregisters the
 * memory (one-sided READs still in flight on it then fail with a remote
 * access error: a client that READs a dropped table loses that queue pair
 * and reconnects) and only then drops the slab table, whose pages may be
 * reused. Create and drop serialize on tables.admin.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "index/pet_format.h"
#include "server/config.h"
#include "server/srv_internal.h"
#include "value/optimizer.h"
#include "value/row_format.h"
#include "value/slab_evict.h"


static void table_info_fill(struct srv_table *t)
{
	struct slab_table_geom g;
	struct slab_region idx, rows, rd;
	struct proto_table_info *i = &t->info;

	slab_table_geom(t->st, &g);
	slab_table_regions(t->st, &idx, &rows, &rd);
	memset(i, 0, sizeof(*i));
	i->id = t->id;
	i->generation = g.uid; /* never 0; also the checksum incarnation */
	i->spec = t->spec;
	i->spec.capacity = g.rows.nrows;
	i->index.addr = (uint64_t)(uintptr_t)idx.addr;
	i->index.bytes = idx.len;
	i->index.rkey = t->mr->rkey;
	i->index.layout = PET_LAYOUT_VERSION;
	i->index.nbuckets = g.index.nbuckets;
	i->index.bucket_bytes = g.index.bucket_bytes;
	i->index.buckets_off = g.index.buckets_off;
	i->index.slots = PET_SLOTS;
	i->index.seed1 = g.index.seed1;
	i->index.seed2 = g.index.seed2;
	i->rows.addr = (uint64_t)(uintptr_t)rows.addr;
	i->rows.bytes = rows.len;
	i->rows.rkey = t->mr->rkey;
	i->rows.layout = ROW_LAYOUT_VERSION;
	i->rows.row_bytes = g.rows.stride;
}

/* Register the readable range of a slab table. */
static int table_register(struct srv_tables *r, struct srv_table *t)
{
	struct slab_region idx, rows, rd;
	int ret;

	slab_table_regions(t->st, &idx, &rows, &rd);
	ret = rv_mr_reg(r->dev, rd.addr, rd.len, RV_ACC_REMOTE_READ, &t->mr);
	if (ret == -EOPNOTSUPP || (ret == -EINVAL && r->file_backed))
		return rs_seterr(ret, "table '%s': registering %zu bytes of "
				 "the pool file %s for RDMA READ failed (%s): "
				 "pages of a file on an fsdax file system "
				 "cannot be pinned for RDMA (and this device "
				 "has no on-demand paging); put the pool on "
				 "devdax (/dev/daxN.M) or use DRAM storage",
				 t->spec.name, rd.len,
				 r->pool_path ? r->pool_path : "?",
				 strerror(-ret));
	if (ret)
		return srv_err(ret, "table '%s': registering %zu bytes for "
				 "RDMA READ: %s", t->spec.name, rd.len,
				 rs_errormsg());
	atomic_fetch_add(&r->registered_bytes, rd.len);
	return 0;
}

static void table_unregister(struct srv_tables *r, struct srv_table *t)
{
	if (!t->mr)
		return;
	atomic_fetch_sub(&r->registered_bytes, t->mr->len);
	rv_mr_free(&t->mr);
}

int srv_table_wrap(struct srv_tables *r, struct slab_table *st,
		   const struct proto_table_spec *spec, struct srv_table **out)
{
	struct srv_table *t;
	struct slab_table_geom g;
	int ret;

	t = rs_calloc(1, sizeof(*t));
	if (!t)
		return rs_seterr(-ENOMEM, "table '%s': out of memory",
				 spec->name);
	ret = srv_evict_attach(st, spec); /* eviction: before it is shared */
	if (ret) {
		free(t);
		return ret;
	}
	if (slab_ev_attached(st))
		srv_evict_want(r->srv);
	t->id = slab_table_id(st);
	t->st = st;
	t->spec = *spec;
	t->state_floats = slab_table_state_floats(st);
	t->reg = r;
	atomic_init(&t->refs, 1);
	ret = table_register(r, t);
	if (ret) {
		free(t);
		return ret;
	}
	table_info_fill(t);
	slab_table_geom(st, &g);
	t->rgeom = g.rows;
	t->spec.capacity = t->info.spec.capacity;
	*out = t;
	return 0;
}

void srv_table_unwrap(struct srv_tables *r, struct srv_table *t)
{
	table_unregister(r, t);
	free(t);
}

/* Wrap a slab table: registration, directory entry, slot, metrics.
 * Caller holds admin. On failure the slab table is left alone. */
static int table_attach(struct srv_tables *r, struct slab_table *st,
			const struct proto_table_spec *spec,
			struct proto_table_info *info)
{
	struct srv_table *t;
	int ret;

	RS_ASSERT_HELD(&r->admin);
	ret = srv_table_wrap(r, st, spec, &t);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&r->lock);
	r->slot[t->id] = t;
	r->count++;
	atomic_fetch_add(&r->dir_gen, 1);
	pthread_rwlock_unlock(&r->lock);
	srv_metrics_table_add(r->srv, t);
	if (info)
		*info = t->info;
	return 0;
}

/* Unlink, drain and free the wrapper (not the slab table). Caller holds
 * admin. */
static void table_detach(struct srv_tables *r, struct srv_table *t)
{
	struct timespec nap = { 0, 50 * 1000 };

	RS_ASSERT_HELD(&r->admin);
	pthread_rwlock_wrlock(&r->lock);
	r->slot[t->id] = NULL;
	r->count--;
	atomic_fetch_add(&r->dir_gen, 1);
	pthread_rwlock_unlock(&r->lock);
	srv_metrics_table_remove(r->srv, t);
	srv_table_put(t); /* the registry's reference */
	while (atomic_load_explicit(&t->refs, memory_order_acquire))
		nanosleep(&nap, NULL);
	srv_table_unwrap(r, t);
}

static int spec_to_cfg(const struct srv_tables *r,
		       const struct proto_table_spec *s,
		       struct slab_table_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->name = s->name;
	c->dim = s->dim;
	c->dtype = row_dtype_from_proto(s->dtype);
	c->capacity = s->capacity;
	c->state_floats = (uint32_t)optim_state_floats(s->optim.kind, s->dim);
	c->index_load = r->index_load;
	return 0;
}

/*
 * Capacity 0 asks for the node's default: default_capacity rows, or, when
 * their footprint (rows, optimizer state, index: slab_table_footprint())
 * exceeds the largest free extent, the largest capacity that fits it, so
 * that a node on its defaults holds a table created with the client's
 * defaults whatever its dim and optimizer (docs/config.md). Sets the
 * capacity of spec and cfg; caller holds admin (free space is stable).
 */
static void capacity_resolve(struct srv_tables *r, struct proto_table_spec *s,
			     struct slab_table_cfg *cfg)
{
	struct slab_store_info si;
	uint64_t need, fit;

	RS_ASSERT_HELD(&r->admin);
	if (s->capacity)
		return;
	cfg->capacity = r->default_capacity;
	slab_store_info(r->store, &si);
	need = slab_table_footprint(cfg, r->file_backed);
	if (need && need > si.free_bytes) {
		fit = slab_table_fit(cfg, r->file_backed, si.free_bytes);
		srv_log_peer("table '%s': the default capacity of %llu rows "
			     "needs %llu bytes, %llu are free: %llu rows",
			     s->name, (unsigned long long)cfg->capacity,
			     (unsigned long long)need,
			     (unsigned long long)si.free_bytes,
			     (unsigned long long)fit);
		cfg->capacity = fit ? fit : 1; /* 1: refused, saying why */
	}
	s->capacity = cfg->capacity;
}

int srv_table_create(struct srv_tables *r, const struct proto_table_spec *req,
		     struct proto_table_info *info)
{
	struct proto_table_spec spec = *req, *s = &spec;
	struct slab_table_cfg cfg;
	struct slab_table *st = NULL;
	char rec[SLAB_CATALOG_MAX];
	int ret, mem;

	ret = proto_table_spec_validate(s, &r->limits);
	if (ret)
		return ret;
	pthread_mutex_lock(&r->admin);
	srv_tables_reap(r, false);
	if (slab_table_get(r->store, s->name)) {
		ret = rs_seterr(RS_E_EXISTS, "table '%s' exists", s->name);
		goto unlock;
	}
	spec_to_cfg(r, s, &cfg);
	capacity_resolve(r, s, &cfg); /* before the record holds it */
	if (s->grow_log2 && s->grow_log2 < 32 &&
	    (1ULL << s->grow_log2) <= s->capacity) {
		ret = rs_seterr(RS_E_INVAL, "table '%s': max_capacity 2^%u "
				"(grow_log2) is not above its capacity %" PRIu64,
				s->name, s->grow_log2, s->capacity);
		goto unlock;
	}
	if (r->file_backed) { /* persisted with the table, before it exists */
		ret = srv_spec_encode(s, rec, sizeof(rec));
		if (ret < 0)
			goto unlock;
		cfg.catalog = rec;
		cfg.catalog_len = (uint32_t)ret;
	}
	mem = srv_numa_mem_enter(r->numa);
	ret = slab_table_create(r->store, &cfg, &st);
	if (mem > 0)
		srv_numa_mem_leave(r->numa);
	if (ret) {
		if (ret == RS_E_FULL && !req->capacity)
			srv_err(ret, "capacity 0 (the node's default): %s",
				rs_errormsg());
		goto unlock;
	}
	ret = table_attach(r, st, s, info);
	if (ret)
		goto drop_slab;
	pthread_mutex_unlock(&r->admin);
	return 0;

drop_slab:
	{
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", rs_errormsg());
		slab_table_drop(r->store, s->name);
		rs_seterr(ret, "%s", msg);
	}
unlock:
	pthread_mutex_unlock(&r->admin);
	return ret;
}

int srv_table_drop(struct srv_tables *r, const char *name)
{
	struct srv_table *t = NULL;
	int ret;

	pthread_mutex_lock(&r->admin);
	srv_tables_reap(r, false);
	pthread_rwlock_rdlock(&r->lock);
	for (unsigned i = 0; i < SLAB_MAX_TABLES && !t; i++)
		if (r->slot[i] && !strcmp(r->slot[i]->spec.name, name))
			t = r->slot[i];
	pthread_rwlock_unlock(&r->lock);
	if (!t) {
		pthread_mutex_unlock(&r->admin);
		return rs_seterr(RS_E_NOTFOUND, "table '%s' not found", name);
	}
	table_detach(r, t);
	ret = slab_table_drop(r->store, name);
	pthread_mutex_unlock(&r->admin);
	if (ret)
		return srv_err(ret, "table '%s': slab drop failed: %s", name,
				 rs_errormsg());
	return 0;
}

struct srv_table *srv_table_get(struct srv_tables *r, uint32_t id)
{
	struct srv_table *t;

	if (id >= SLAB_MAX_TABLES)
		return NULL;
	pthread_rwlock_rdlock(&r->lock);
	t = r->slot[id];
	if (t)
		atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	pthread_rwlock_unlock(&r->lock);
	return t;
}

struct srv_table *srv_table_get_name(struct srv_tables *r, const char *name)
{
	struct srv_table *t = NULL;

	pthread_rwlock_rdlock(&r->lock);
	for (unsigned i = 0; i < SLAB_MAX_TABLES && !t; i++)
		if (r->slot[i] && !strcmp(r->slot[i]->spec.name, name))
			t = r->slot[i];
	if (t)
		atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	pthread_rwlock_unlock(&r->lock);
	return t;
}

void srv_table_put(struct srv_table *t)
{
	if (t)
		atomic_fetch_sub_explicit(&t->refs, 1, memory_order_release);
}

int srv_tables_dir(struct srv_tables *r, struct proto_table_info **out,
		   uint64_t *gen)
{
	struct proto_table_info *v;
	unsigned n = 0;

	pthread_rwlock_rdlock(&r->lock);
	v = rs_malloc((r->count ? r->count : 1) * sizeof(*v));
	if (!v) {
		pthread_rwlock_unlock(&r->lock);
		return rs_seterr(-ENOMEM, "directory: out of memory");
	}
	for (unsigned i = 0; i < SLAB_MAX_TABLES; i++)
		if (r->slot[i])
			v[n++] = r->slot[i]->info;
	*gen = atomic_load(&r->dir_gen);
	pthread_rwlock_unlock(&r->lock);
	*out = v;
	return (int)n;
}

/* ---- open: pool, recovery, config tables ---- */

/* A spec for a table found in the pool without any (its catalog entry was
 * lost): the optimizer kind that has its amount of state, defaults else. */
static void spec_guess(struct slab_table *st, struct proto_table_spec *s)
{
	struct slab_table_geom g;
	uint32_t sf = slab_table_state_floats(st), kind = OPTIM_SGD;

	slab_table_geom(st, &g);
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", slab_table_name(st));
	s->dim = g.rows.dim;
	s->dtype = row_dtype_to_proto(g.rows.dtype);
	s->capacity = g.rows.nrows;
	for (uint32_t k = 0; k < OPTIM_KIND_COUNT; k++)
		if (optim_state_floats(k, s->dim) == sf) {
			kind = k;
			break;
		}
	optim_params_default(&s->optim, kind);
	init_params_default(&s->init, INIT_ZEROS);
}

/* Does an existing slab table have the shape of spec? 0, or RS_E_INVAL
 * naming the field (prefix: what). */
static int shape_check(struct slab_table *st, const struct proto_table_spec *s,
		       const char *what, const char *pool)
{
	struct slab_table_geom g;
	uint32_t sf = (uint32_t)optim_state_floats(s->optim.kind, s->dim);

	slab_table_geom(st, &g);
	if (g.rows.dim != s->dim)
		return rs_seterr(RS_E_INVAL, "%s.dim: %u does not match table "
				 "'%s' in the pool %s (dim %u)", what, s->dim,
				 s->name, pool, g.rows.dim);
	if (g.rows.dtype != row_dtype_from_proto(s->dtype))
		return rs_seterr(RS_E_INVAL, "%s.dtype: %s does not match "
				 "table '%s' in the pool %s (%s)", what,
				 proto_dtype_name(s->dtype), s->name, pool,
				 row_dtype_name(g.rows.dtype));
	if (g.rows.nrows != s->capacity &&
	    !(s->grow_log2 && g.rows.nrows > s->capacity))
		return rs_seterr(RS_E_INVAL, "%s.capacity: %" PRIu64 " does "
				 "not match table '%s' in the pool %s (%" PRIu64
				 ")", what, s->capacity, s->name, pool,
				 g.rows.nrows);
	if (slab_table_state_floats(st) != sf)
		return rs_seterr(RS_E_INVAL, "%s.optimizer: %s does not match "
				 "the optimizer state of table '%s' in the pool "
				 "%s", what, optim_kind_name(s->optim.kind),
				 s->name, pool);
	return 0;
}

static const struct proto_table_spec *config_spec(const struct srv_config *o,
						  const char *name,
						  size_t *idx)
{
	for (size_t i = 0; i < o->ntables; i++)
		if (!strcmp(o->tables[i].name, name)) {
			*idx = i;
			return &o->tables[i];
		}
	return NULL;
}

/* The spec in t's catalog record: 1, or 0 if it has none (or a record
 * that is not a spec of t's shape: logged), or -ENOMEM (not read as a
 * damaged record). */
static int spec_from_record(struct srv_tables *r, struct slab_table *st,
			    struct proto_table_spec *s, const char *pool)
{
	char rec[SLAB_CATALOG_MAX];
	int len = slab_table_catalog(r->store, st, rec, sizeof(rec)), ret;

	if (len < 0)
		return 0;
	ret = srv_spec_decode(rec, (size_t)len, s);
	if (ret == -ENOMEM)
		return srv_err(ret, "table '%s': reading its catalog record: "
			       "%s", slab_table_name(st), rs_errormsg());
	if (ret || strcmp(s->name, slab_table_name(st))) {
		srv_warn("warning: table '%s' in the pool %s: its catalog "
			"record is not a table spec", slab_table_name(st),
			pool);
		return 0;
	}
	if (shape_check(st, s, "catalog record", pool)) {
		srv_warn("warning: %s", rs_errormsg());
		return 0;
	}
	return 1;
}

/* The spec of pool table st: the config's (tables[]), else its catalog
 * record, else the layout-2 JSON catalog file's, else (layout 2 only) a
 * guess, logged. A table that lacks a valid record gets one from the config
 * or the JSON file (migration; a crash half way leaves it without one, and
 * the next open does it again). A layout-3 table with neither a record nor
 * a spec elsewhere is damage: the node refuses to open rather than serve
 * it with parameters nobody gave it. */
static int spec_resolve(struct srv_tables *r, const struct srv_config *o,
			struct slab_table *st, unsigned layout,
			struct proto_table_spec *spec)
{
	const char *pool = o->storage_path ? o->storage_path : "(dram)";
	const struct proto_table_spec *cs;
	struct slab_table_geom g;
	bool have_rec, migrate = false;
	char what[32], rec[SLAB_CATALOG_MAX];
	size_t ci;
	int k, ret = 0;

	slab_table_geom(st, &g);
	cs = config_spec(o, slab_table_name(st), &ci);
	if (r->file_backed && (ret = spec_from_record(r, st, spec, pool)) < 0)
		return ret;
	have_rec = r->file_backed && ret;
	k = srv_catalog_find(r->cat, slab_table_name(st));
	if (cs) {
		snprintf(what, sizeof(what), "tables[%zu]", ci);
		ret = shape_check(st, cs, what, pool);
		if (ret)
			return ret;
		*spec = *cs;
		migrate = r->file_backed && !have_rec;
	} else if (have_rec) {
		return 0;
	} else if (k >= 0 && (!r->cat->ent[k].uid ||
			      r->cat->ent[k].uid == g.uid) &&
		   !shape_check(st, &r->cat->ent[k].spec, "catalog", pool)) {
		*spec = r->cat->ent[k].spec;
		migrate = true;
	} else if (layout >= 3) {
		return rs_seterr(RS_E_CORRUPT, "table '%s' in the pool %s has "
				 "no valid catalog record (damaged) and no "
				 "spec in the config: give it in tables[] to "
				 "serve it", slab_table_name(st), pool);
	} else {
		if (k >= 0)
			srv_warn("warning: %s; using the pool's shape",
				rs_errormsg());
		spec_guess(st, spec);
		srv_warn("warning: table '%s' in the pool %s has no catalog "
			"entry: serving it with optimizer %s and default "
			"parameters", spec->name, pool,
			optim_kind_name(spec->optim.kind));
	}
	if (migrate) {
		ret = srv_spec_encode(spec, rec, sizeof(rec));
		if (ret >= 0)
			ret = slab_table_set_catalog(r->store, st, rec,
						     (uint32_t)ret);
		if (ret < 0)
			return srv_err(ret, "table '%s': writing its catalog "
				       "record: %s", spec->name,
				       rs_errormsg());
		srv_log("table '%s': spec written into the pool's catalog "
			"record (from the %s)", spec->name,
			cs ? "config" : "catalog file");
	}
	return 0;
}

/* Attach every table the pool recovered, with its spec (spec_resolve). */
static int tables_recover(struct srv_tables *r, const struct srv_config *o)
{
	struct slab_store_info si;

	slab_store_info(r->store, &si);
	for (unsigned id = 0; id < SLAB_MAX_TABLES; id++) {
		struct slab_table *st = slab_table_by_id(r->store, id);
		struct proto_table_spec spec;
		int ret;

		if (!st)
			continue;
		ret = spec_resolve(r, o, st, si.layout, &spec);
		if (ret)
			return ret;
		/* a grown table: the pool's capacity, not the one the spec
		 * was created with (shape_check allowed it) */
		spec.capacity = slab_table_capacity(st);
		/* single-threaded at open, but attach's rule holds all the
		 * same */
		pthread_mutex_lock(&r->admin);
		ret = table_attach(r, st, &spec, NULL);
		pthread_mutex_unlock(&r->admin);
		if (ret)
			return ret;
	}
	return 0;
}

int srv_tables_apply_config(struct srv_tables *r, const struct srv_config *o)
{
	for (size_t i = 0; i < o->ntables; i++) {
		int ret;

		if (slab_table_get(r->store, o->tables[i].name))
			continue; /* recovered and checked */
		ret = srv_table_create(r, &o->tables[i], NULL);
		if (ret)
			return srv_err(ret, "tables[%zu] ('%s'): %s", i,
					 o->tables[i].name, rs_errormsg());
	}
	return 0;
}

int srv_tables_open(struct srv_tables *r, struct rs_server *s,
		    const struct srv_config *o)
{
	struct slab_store_cfg sc = {
		.path = o->storage_path,
		.size = o->storage_bytes,
		.flags = srv_config_slab_flags(o),
	};
	uint64_t g0 = 0;
	struct stat sb;
	int ret, mem;

	memset(r, 0, sizeof(*r));
	r->dev = s->dev;
	r->srv = s;
	r->numa = &s->numa;
	r->index_load = o->index_load;
	r->default_capacity = o->default_capacity ? o->default_capacity
						  : SRV_CONFIG_DEFAULT_CAPACITY;
	r->limits = o->limits;
	r->file_backed = o->storage_path != NULL;
	r->pool_path = o->storage_path;
	if (getrandom(&g0, sizeof(g0), 0) != (ssize_t)sizeof(g0))
		g0 = (uint64_t)time(NULL) << 20;
	atomic_init(&r->dir_gen, (g0 >> 1) + 1);
	pthread_mutex_init(&r->admin, NULL);
	pthread_rwlock_init(&r->lock, NULL);
	r->cat = rs_calloc(1, sizeof(*r->cat));
	if (!r->cat) {
		ret = rs_seterr(-ENOMEM, "tables: out of memory");
		goto destroy_locks;
	}
	srv_catalog_init(r->cat, o->storage_path);
	ret = srv_catalog_load(r->cat);
	if (ret)
		goto free_cat;
	if (r->file_backed && !stat(o->storage_path, &sb) &&
	    !S_ISCHR(sb.st_mode))
		sc.size = 0; /* existing file: its own size */
	else if (!sc.size)
		sc.size = SRV_CONFIG_STORAGE_BYTES;
	/* a device: the whole device, sc.size only bounds it (slab.h) */
	mem = srv_numa_mem_enter(r->numa);
	ret = slab_store_open(&r->store, &sc);
	if (mem > 0)
		srv_numa_mem_leave(r->numa);
	if (ret) {
		ret = srv_err(ret, "storage: %s", rs_errormsg());
		goto free_cat;
	}
	ret = tables_recover(r, o);
	if (ret)
		goto close_tables;
	return 0;

close_tables:
	srv_tables_close(r);
	return ret;
free_cat:
	free(r->cat);
	r->cat = NULL;
destroy_locks:
	pthread_rwlock_destroy(&r->lock);
	pthread_mutex_destroy(&r->admin);
	return ret;
}

/* Close everything (no request may run any more). The slab tables stay
 * in a file pool. */
void srv_tables_close(struct srv_tables *r)
{
	if (!r->cat)
		return;
	pthread_mutex_lock(&r->admin);
	srv_tables_reap(r, true);
	for (unsigned i = 0; i < SLAB_MAX_TABLES; i++)
		if (r->slot[i])
			table_detach(r, r->slot[i]);
	pthread_mutex_unlock(&r->admin);
	slab_store_close(&r->store);
	free(r->cat);
	r->cat = NULL;
	pthread_rwlock_destroy(&r->lock);
	pthread_mutex_destroy(&r->admin);
}
