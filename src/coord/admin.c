/*
 * admin.c - the public admin calls (include/recstore/admin.h) over the
 * membership layer (membership.h) and a coordination store (coord.h).
 *
 * Each call is one memb_* call on the handle's store: no policy here
 * (waiting, retrying, printing are the caller's), so that the messages
 * of the layer below (an etcd error starts with "etcd") reach the
 * caller unchanged through rs_errormsg().
 *
 * The public structs mirror the internal ones field by field; a
 * configuration handed out keeps the internal one behind it (struct
 * config_box), since the placement of a configuration is computed from
 * the internal form. _Static_asserts tie the public limits and states to
 * the internal ones.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/abi.h"
#include "common/rs_internal.h"
#include "coord/admin_int.h"
#include "coord/membership.h"
#include "recstore/admin.h"

_Static_assert(RS_ADMIN_ID_MAX == MEMB_ID_MAX, "id length");
_Static_assert(RS_ADMIN_ID_MAX == MEMB_CLUSTER_MAX, "cluster name length");
_Static_assert(RS_ADMIN_ADDR_MAX == MEMB_ADDR_MAX, "address length");
_Static_assert(RS_ADMIN_MAX_R == MEMB_MAX_R, "replicas");
_Static_assert(RS_ADMIN_ACTIVE == (int)MEMB_ACTIVE &&
	       RS_ADMIN_JOINING == (int)MEMB_JOINING &&
	       RS_ADMIN_DOWN == (int)MEMB_DOWN &&
	       RS_ADMIN_LEAVING == (int)MEMB_LEAVING, "states");
_Static_assert(RS_ADMIN_DECIDE_REGRESSED == MEMB_DECIDE_REGRESSED,
	       "decide's return");

#define ETCD_TIMEOUT_MS 5000

struct rs_admin {
	struct coord *c;
	char cluster[MEMB_CLUSTER_MAX + 1];
	char prefix[COORD_KEY_MAX + 1];	/* "/recstore/<cluster>/" */
	unsigned warnings;
};

/* A configuration handed out, with the internal one it was made from. */
struct config_box {
	struct rs_admin_config pub;
	struct memb_config cfg;
};

struct rs_admin_placement {
	struct memb_placement *p;
};

static const uint32_t etcd_opts_sizes[] = { 48 };	/* 0.8 */
_Static_assert(sizeof(struct rs_admin_etcd_opts) == 48,
	       "append to etcd_opts_sizes");
static const struct rs_abi_type etcd_opts_abi = {
	"struct rs_admin_etcd_opts", etcd_opts_sizes,
	RS_ARRAY_SIZE(etcd_opts_sizes)
};

RS_EXPORT int rs_admin_check_id(const char *what, const char *id)
{
	return memb_check_id(what ? what : "id", id);
}

int rs_admin_open_coord(struct rs_admin **out, struct coord *c,
			const char *cluster)
{
	struct rs_admin *a;
	int ret;

	if (!out || !c)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	*out = NULL;
	if ((ret = memb_check_id("cluster", cluster)))
		return ret;
	a = calloc(1, sizeof(*a));
	if (!a)
		return rs_seterr(-ENOMEM, "admin: out of memory");
	strcpy(a->cluster, cluster);
	if ((ret = memb_key(a->prefix, cluster, ""))) {
		free(a);
		return ret;
	}
	a->c = c;
	*out = a;
	return 0;
}

RS_EXPORT int rs_admin_open_etcd(struct rs_admin **out, const char *endpoints,
				 const char *cluster,
				 const struct rs_admin_etcd_opts *o)
{
	struct rs_admin_etcd_opts full = RS_ADMIN_ETCD_OPTS_INIT;
	struct coord_etcd_files f;
	struct coord *c;
	bool world = false;
	int ret;

	if (!out || !endpoints)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	*out = NULL;
	if (o) {
		if ((ret = rs_abi_check(&etcd_opts_abi, o)))
			return ret;
		rs_abi_in(&full, sizeof(full), o);
	}
	if ((ret = memb_check_id("cluster", cluster)))
		return ret;
	/* the strings are only read: the casts drop a const the internal
	 * struct lacks because it owns its copies elsewhere */
	f = (struct coord_etcd_files){
		.ca_file = (char *)full.ca_file,
		.cert_file = (char *)full.cert_file,
		.key_file = (char *)full.key_file,
		.user = (char *)full.user,
		.password_file = (char *)full.password_file,
	};
	ret = coord_etcd_open_files(&c, endpoints,
				    full.timeout_ms ? (int)full.timeout_ms
						    : ETCD_TIMEOUT_MS,
				    &f, &world);
	if (ret)
		return ret;
	if ((ret = rs_admin_open_coord(out, c, cluster))) {
		coord_close(&c);
		return ret;
	}
	if (world)
		(*out)->warnings |= RS_ADMIN_WARN_PASSWORD_READABLE;
	return 0;
}

RS_EXPORT void rs_admin_close(struct rs_admin **ap)
{
	struct rs_admin *a = ap ? *ap : NULL;

	if (!a)
		return;
	coord_close(&a->c);
	free(a);
	*ap = NULL;
}

RS_EXPORT unsigned rs_admin_warnings(const struct rs_admin *a)
{
	return a ? a->warnings : 0;
}

RS_EXPORT const char *rs_admin_state_name(uint32_t state)
{
	return memb_state_name((enum memb_state)state);
}

/* ---- the configuration ---- */

/* cfg (taken over: freed with the box) as a public configuration. */
static int config_out(struct memb_config *cfg, int64_t mod_rev, int64_t rev,
		      struct rs_admin_config **out)
{
	struct config_box *b = calloc(1, sizeof(*b));

	if (b)
		b->pub.m = calloc(cfg->n ? cfg->n : 1, sizeof(*b->pub.m));
	if (!b || !b->pub.m) {
		free(b);
		memb_config_free(cfg);
		return rs_seterr(-ENOMEM, "admin: out of memory");
	}
	b->cfg = *cfg;
	b->pub = (struct rs_admin_config){
		.epoch = cfg->epoch, .r = cfg->r, .vnodes = cfg->vnodes,
		.recovered = cfg->recovered, .mod_rev = mod_rev, .rev = rev,
		.n = cfg->n, .m = b->pub.m,
	};
	for (size_t i = 0; i < cfg->n; i++) {
		struct rs_admin_member *m = &b->pub.m[i];

		memcpy(m->id, cfg->m[i].id, sizeof(m->id));
		memcpy(m->addr, cfg->m[i].addr, sizeof(m->addr));
		m->inc = cfg->m[i].inc;
		m->state = (uint32_t)cfg->m[i].state;
		m->since = cfg->m[i].since;
	}
	*out = &b->pub;
	return 0;
}

RS_EXPORT int rs_admin_read_config(struct rs_admin *a,
				   struct rs_admin_config **out)
{
	struct memb_config cfg;
	int64_t mod_rev, rev;
	int ret;

	if (!a || !out)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	*out = NULL;
	ret = memb_read_config(a->c, a->cluster, &cfg, &mod_rev, &rev);
	return ret ? ret : config_out(&cfg, mod_rev, rev, out);
}

RS_EXPORT void rs_admin_config_free(struct rs_admin_config **cp)
{
	struct config_box *b;

	if (!cp || !*cp)
		return;
	b = (struct config_box *)((char *)*cp -
				  offsetof(struct config_box, pub));
	memb_config_free(&b->cfg);
	free(b->pub.m);
	free(b);
	*cp = NULL;
}

RS_EXPORT int rs_admin_wait(struct rs_admin *a, int64_t rev, int timeout_ms)
{
	int ret;

	if (!a)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	ret = coord_wait(a->c, a->prefix, rev, timeout_ms, NULL);
	return ret < 0 ? ret : 0;
}

/* ---- registrations ---- */

RS_EXPORT int rs_admin_read_regs(struct rs_admin *a,
				 struct rs_admin_regs **out)
{
	struct rs_admin_regs *r;
	struct memb_reg *regs;
	size_t n, nbad;
	int ret;

	if (!a || !out)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	*out = NULL;
	if ((ret = memb_read_regs(a->c, a->cluster, &regs, &n, &nbad)))
		return ret;
	r = calloc(1, sizeof(*r));
	if (r)
		r->reg = calloc(n ? n : 1, sizeof(*r->reg));
	if (!r || !r->reg) {
		free(r);
		free(regs);
		return rs_seterr(-ENOMEM, "admin: out of memory");
	}
	r->n = n;
	r->unreadable = nbad;
	for (size_t i = 0; i < n; i++) {
		memcpy(r->reg[i].id, regs[i].id, sizeof(r->reg[i].id));
		memcpy(r->reg[i].addr, regs[i].addr, sizeof(r->reg[i].addr));
		r->reg[i].inc = regs[i].inc;
		r->reg[i].synced = regs[i].synced;
		r->reg[i].seen = regs[i].seen;
		r->reg[i].drain = regs[i].drain;
	}
	free(regs);
	*out = r;
	return 0;
}

RS_EXPORT void rs_admin_regs_free(struct rs_admin_regs **rp)
{
	if (!rp || !*rp)
		return;
	free((*rp)->reg);
	free(*rp);
	*rp = NULL;
}

RS_EXPORT int rs_admin_read_decider(struct rs_admin *a, char **id)
{
	char key[COORD_KEY_MAX + 1];
	struct coord_kvs d;
	int ret;

	if (!a || !id)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	*id = NULL;
	if ((ret = memb_key(key, a->cluster, "decider")) ||
	    (ret = coord_range(a->c, key, false, &d)))
		return ret;
	if (d.n && !(*id = strdup(d.kv[0].value)))
		ret = rs_seterr(-ENOMEM, "admin: out of memory");
	coord_kvs_free(&d);
	return ret;
}

/* ---- placement ---- */

RS_EXPORT int rs_admin_placement_new(struct rs_admin_placement **out,
				     const struct rs_admin_config *cfg)
{
	const struct config_box *b;
	struct rs_admin_placement *p;
	int ret;

	if (!out || !cfg)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	*out = NULL;
	b = (const struct config_box *)((const char *)cfg -
					offsetof(struct config_box, pub));
	p = calloc(1, sizeof(*p));
	if (!p)
		return rs_seterr(-ENOMEM, "admin: out of memory");
	if ((ret = memb_placement_new(&p->p, &b->cfg))) {
		free(p);
		return ret;
	}
	*out = p;
	return 0;
}

RS_EXPORT void rs_admin_placement_free(struct rs_admin_placement **pp)
{
	if (!pp || !*pp)
		return;
	memb_placement_free(&(*pp)->p);
	free(*pp);
	*pp = NULL;
}

RS_EXPORT size_t rs_admin_placement_ranges(const struct rs_admin_placement *p)
{
	return p ? memb_ranges(p->p) : 0;
}

RS_EXPORT unsigned rs_admin_placement_range(const struct rs_admin_placement *p,
					    size_t i, uint64_t *start,
					    uint64_t *end, unsigned *set)
{
	if (!p || i >= memb_ranges(p->p))
		return 0;
	return memb_range(p->p, i, start, end, set);
}

/* ---- changes ---- */

RS_EXPORT int rs_admin_decide(struct rs_admin *a, unsigned replicas,
			      uint64_t *epoch)
{
	struct memb_policy pol = { .r = replicas,
				   .vnodes = MEMB_DEFAULT_VNODES,
				   .activate_joiners = true };
	uint64_t e = 0;

	if (!a)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	if (replicas < 1 || replicas > MEMB_MAX_R)
		return rs_seterr(RS_E_INVAL, "decide: replicas %u (1..%d)",
				 replicas, MEMB_MAX_R);
	return memb_decide(a->c, a->cluster, &pol, epoch ? epoch : &e);
}

RS_EXPORT int rs_admin_drain(struct rs_admin *a, const char *id,
			     unsigned flags)
{
	if (!a || !id)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	if (flags & ~(RS_ADMIN_DRAIN_CANCEL | RS_ADMIN_DRAIN_FORCE))
		return rs_seterr(RS_E_INVAL, "drain: unknown flags %#x",
				 flags & ~(RS_ADMIN_DRAIN_CANCEL |
					   RS_ADMIN_DRAIN_FORCE));
	return memb_drain_request(a->c, a->cluster, id,
				  flags & RS_ADMIN_DRAIN_CANCEL,
				  flags & RS_ADMIN_DRAIN_FORCE);
}

RS_EXPORT int rs_admin_recover(struct rs_admin *a,
			       struct rs_admin_config **out)
{
	struct memb_config cfg;
	int ret, r2;

	if (!a || !out)
		return rs_seterr(RS_E_INVAL, "admin: NULL argument");
	*out = NULL;
	ret = memb_recover(a->c, a->cluster, &cfg);
	if (ret != 0 && ret != 1)
		return ret;
	r2 = config_out(&cfg, 0, 0, out);
	return r2 ? r2 : ret;
}
