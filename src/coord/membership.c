/*
 * membership.c - configuration records, the reconfigure step, placement
 * and the decision against the store (membership.h; the node's agent is
 * agent.c).
 *
 * The configuration JSON (memb_config_format):
 *   {"epoch": 3, "r": 2, "vnodes": 160, "placement": "ring-xxh3-v1",
 *    "members": [{"id": "n1", "addr": "10.0.0.1:7471",
 *                 "inc": "00c0ffee00c0ffee", "state": "active",
 *                 "since": 1}, ...]}
 * members sorted by id. The parser is strict (every field, its type and
 * range, ids in order): a configuration that does not parse is never
 * replaced by a decider that could not read it (RS_E_CORRUPT; an
 * operator repairs it), rather than guessed at.
 *
 * memb_reconfigure() merges the sorted members with the sorted
 * registrations in one pass (both sorted by id: the result does not
 * depend on the order registrations were listed in) and then makes room
 * if the result is over MEMB_MAX_NODES.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "coord/membership.h"
#include "place/ring.h"

#define MEMB_PLACEMENT "ring-xxh3-v1"

static const char *const state_names[] = {
	[MEMB_ACTIVE] = "active",
	[MEMB_JOINING] = "joining",
	[MEMB_DOWN] = "down",
	[MEMB_LEAVING] = "leaving",
};

const char *memb_state_name(enum memb_state s)
{
	return (unsigned)s < RS_ARRAY_SIZE(state_names) ? state_names[s] : "?";
}

int memb_check_id(const char *what, const char *id)
{
	size_t n = id ? strnlen(id, MEMB_ID_MAX + 1) : 0;

	if (n == 0 || n > MEMB_ID_MAX)
		return rs_seterr(RS_E_INVAL, "%s: length %zu (1..%d)", what, n,
				 MEMB_ID_MAX);
	for (size_t i = 0; i < n; i++) {
		char ch = id[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
		      ch == '-'))
			return rs_seterr(RS_E_INVAL, "%s: '%s' has a character "
					 "outside [A-Za-z0-9_.-]", what, id);
	}
	return 0;
}

void memb_config_free(struct memb_config *c)
{
	if (!c)
		return;
	free(c->m);
	memset(c, 0, sizeof(*c));
}

int memb_config_copy(struct memb_config *dst, const struct memb_config *src)
{
	*dst = *src;
	dst->m = NULL;
	if (!src->n)
		return 0;
	if (!(dst->m = malloc(src->n * sizeof(*dst->m)))) {
		dst->n = 0;
		return rs_seterr(-ENOMEM, "membership: out of memory");
	}
	memcpy(dst->m, src->m, src->n * sizeof(*dst->m));
	return 0;
}

static bool member_eq(const struct memb_member *a,
		      const struct memb_member *b);

bool memb_config_same(const struct memb_config *a,
		      const struct memb_config *b)
{
	if (a->epoch != b->epoch || a->r != b->r || a->vnodes != b->vnodes ||
	    a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (!member_eq(&a->m[i], &b->m[i]))
			return false;
	return true;
}

bool memb_config_regressed(const struct memb_config *cur,
			   const struct memb_config *followed)
{
	if (!followed || !followed->epoch)
		return false;
	return cur->epoch < followed->epoch ||
	       (cur->epoch == followed->epoch &&
		!memb_config_same(cur, followed));
}

/* ---- JSON ---- */

int memb_config_format(const struct memb_config *c, char **out, size_t *len)
{
	json_t *root, *arr;
	char inc[17];

	*out = NULL;
	root = json_pack("{s:I,s:I,s:I,s:s}", "epoch", (json_int_t)c->epoch,
			 "r", (json_int_t)c->r, "vnodes", (json_int_t)c->vnodes,
			 "placement", MEMB_PLACEMENT);
	arr = json_array();
	if (!root || !arr || json_object_set(root, "members", arr))
		goto nomem;
	if (c->recovered &&
	    json_object_set_new(root, "recovered",
				json_integer((json_int_t)c->recovered)))
		goto nomem;
	for (size_t i = 0; i < c->n; i++) {
		const struct memb_member *m = &c->m[i];

		snprintf(inc, sizeof(inc), "%016" PRIx64, m->inc);
		if (json_array_append_new(arr, json_pack(
			    "{s:s,s:s,s:s,s:s,s:I}", "id", m->id, "addr",
			    m->addr, "inc", inc, "state",
			    memb_state_name(m->state), "since",
			    (json_int_t)m->since)))
			goto nomem;
	}
	*out = json_dumps(root, JSON_COMPACT);
	if (!*out)
		goto nomem;
	*len = strlen(*out);
	json_decref(arr);
	json_decref(root);
	return 0;
nomem:
	json_decref(arr);
	json_decref(root);
	return rs_seterr(-ENOMEM, "membership: out of memory");
}

static int bad(const char *field, const char *why)
{
	return rs_seterr(RS_E_CORRUPT, "configuration: %s: %s", field, why);
}

static int get_u64(json_t *o, const char *k, uint64_t lo, uint64_t hi,
		   uint64_t *out)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v))
		return bad(k, "missing or not an integer");
	if (json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) < lo ||
	    (uint64_t)json_integer_value(v) > hi)
		return bad(k, "out of range");
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_str(json_t *o, const char *k, char *dst, size_t cap)
{
	const char *s = json_string_value(json_object_get(o, k));

	if (!s)
		return bad(k, "missing or not a string");
	if (strlen(s) >= cap)
		return bad(k, "too long");
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

static int parse_inc(const char *s, uint64_t *out)
{
	char *end;

	if (strlen(s) != 16)
		return bad("inc", "not 16 hex digits");
	errno = 0;
	*out = strtoull(s, &end, 16);
	if (errno || *end)
		return bad("inc", "not 16 hex digits");
	return 0;
}

static int parse_member(json_t *o, uint64_t epoch, struct memb_member *m)
{
	char state[16], inc[24];
	uint64_t since;
	unsigned s;
	int ret;

	if (!json_is_object(o) || json_object_size(o) != 5)
		return bad("members[]", "not an object of 5 fields");
	if ((ret = get_str(o, "id", m->id, sizeof(m->id))) ||
	    (ret = get_str(o, "addr", m->addr, sizeof(m->addr))) ||
	    (ret = get_str(o, "inc", inc, sizeof(inc))) ||
	    (ret = parse_inc(inc, &m->inc)) ||
	    (ret = get_str(o, "state", state, sizeof(state))) ||
	    (ret = get_u64(o, "since", 1, epoch, &since)))
		return ret;
	if (memb_check_id("id", m->id))
		return bad("members[].id", rs_errormsg());
	for (s = 0; s < RS_ARRAY_SIZE(state_names); s++)
		if (!strcmp(state, state_names[s]))
			break;
	if (s == RS_ARRAY_SIZE(state_names))
		return bad("members[].state", "unknown state");
	m->state = (enum memb_state)s;
	m->since = since;
	return 0;
}

int memb_config_parse(const char *json, size_t len, struct memb_config *out)
{
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *arr;
	uint64_t r, vn;
	const char *pl;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(root)) {
		json_decref(root);
		return bad("(root)", "not a JSON object");
	}
	arr = json_object_get(root, "members");
	pl = json_string_value(json_object_get(root, "placement"));
	if ((ret = get_u64(root, "epoch", 1, INT64_MAX, &out->epoch)) ||
	    (ret = get_u64(root, "r", 1, MEMB_MAX_R, &r)) ||
	    (ret = get_u64(root, "vnodes", 1, MEMB_MAX_VNODES, &vn)))
		goto fail;
	if (!pl || strcmp(pl, MEMB_PLACEMENT)) {
		ret = bad("placement", "not " MEMB_PLACEMENT);
		goto fail;
	}
	if (json_object_get(root, "recovered") &&
	    (ret = get_u64(root, "recovered", 1, out->epoch - 1,
			   &out->recovered)))
		goto fail;
	if (json_object_size(root) != 5 + !!out->recovered) {
		ret = bad("(root)", "unknown fields");
		goto fail;
	}
	if (!json_is_array(arr) || json_array_size(arr) > MEMB_MAX_NODES) {
		ret = bad("members", "not an array of up to 1024");
		goto fail;
	}
	out->r = (unsigned)r;
	out->vnodes = (unsigned)vn;
	if (json_array_size(arr) &&
	    !(out->m = calloc(json_array_size(arr), sizeof(*out->m)))) {
		ret = rs_seterr(-ENOMEM, "membership: out of memory");
		goto fail;
	}
	for (size_t i = 0; i < json_array_size(arr); i++) {
		if ((ret = parse_member(json_array_get(arr, i), out->epoch,
					&out->m[i])))
			goto fail;
		if (i && strcmp(out->m[i - 1].id, out->m[i].id) >= 0) {
			ret = bad("members", "ids not sorted and distinct");
			goto fail;
		}
		out->n++;
	}
	json_decref(root);
	return 0;
fail:
	json_decref(root);
	memb_config_free(out);
	return ret;
}

int memb_reg_format(const struct memb_reg *r, char **out, size_t *len)
{
	char inc[17];
	json_t *o;

	snprintf(inc, sizeof(inc), "%016" PRIx64, r->inc);
	o = json_pack("{s:s,s:s}", "addr", r->addr, "inc", inc);
	if (o && ((r->synced &&
		   json_object_set_new(o, "synced", json_integer((json_int_t)
								 r->synced))) ||
		  (r->seen &&
		   json_object_set_new(o, "seen", json_integer((json_int_t)
							       r->seen))))) {
		json_decref(o);
		o = NULL;
	}
	*out = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!*out)
		return rs_seterr(-ENOMEM, "membership: out of memory");
	*len = strlen(*out);
	return 0;
}

int memb_reg_parse(const char *id, const char *json, size_t len,
		   struct memb_reg *out)
{
	json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
	char inc[24];
	int ret;

	memset(out, 0, sizeof(*out));
	if ((ret = memb_check_id("registration id", id)))
		goto out;
	snprintf(out->id, sizeof(out->id), "%s", id);
	if (!json_is_object(o))
		ret = bad("registration", "not a JSON object");
	else if (!(ret = get_str(o, "addr", out->addr, sizeof(out->addr))) &&
		 !(ret = get_str(o, "inc", inc, sizeof(inc))))
		ret = parse_inc(inc, &out->inc);
	if (!ret && json_object_get(o, "synced")) {
		json_t *v = json_object_get(o, "synced");

		if (!json_is_integer(v) || json_integer_value(v) < 0)
			ret = bad("synced", "not an epoch");
		else
			out->synced = (uint64_t)json_integer_value(v);
	}
	if (!ret && json_object_get(o, "seen")) {
		json_t *v = json_object_get(o, "seen");

		if (!json_is_integer(v) || json_integer_value(v) < 0)
			ret = bad("seen", "not an epoch");
		else
			out->seen = (uint64_t)json_integer_value(v);
	}
out:
	json_decref(o);
	return ret;
}

/* ---- reconfigure ---- */

static int reg_cmp(const void *a, const void *b)
{
	return strcmp(((const struct memb_reg *)a)->id,
		      ((const struct memb_reg *)b)->id);
}

static bool member_eq(const struct memb_member *a, const struct memb_member *b)
{
	return !strcmp(a->id, b->id) && !strcmp(a->addr, b->addr) &&
	       a->inc == b->inc && a->state == b->state && a->since == b->since;
}

static void join(struct memb_member *m, const struct memb_reg *g,
		 enum memb_state st, uint64_t e)
{
	memset(m, 0, sizeof(*m));
	memcpy(m->id, g->id, sizeof(m->id));
	memcpy(m->addr, g->addr, sizeof(m->addr));
	m->inc = g->inc;
	m->state = st;
	m->since = e;
}

/* Over MEMB_MAX_NODES: forget the DOWN members that have been down
 * longest (ties: by id), then leave out the newest joiners (the highest
 * ids among those that were not members). */
static void make_room(struct memb_config *nx, bool *fresh)
{
	while (nx->n > MEMB_MAX_NODES) {
		size_t victim = SIZE_MAX;

		for (size_t i = 0; i < nx->n; i++)
			if (nx->m[i].state == MEMB_DOWN &&
			    (victim == SIZE_MAX ||
			     nx->m[i].since < nx->m[victim].since))
				victim = i;
		if (victim == SIZE_MAX)
			for (size_t i = nx->n; i-- > 0 && victim == SIZE_MAX;)
				if (fresh[i])
					victim = i;
		if (victim == SIZE_MAX)
			return; /* cannot happen: members <= MAX */
		memmove(&nx->m[victim], &nx->m[victim + 1],
			(nx->n - victim - 1) * sizeof(*nx->m));
		/* fresh[] is only read from the top: keep it aligned */
		memmove(&fresh[victim], &fresh[victim + 1],
			(nx->n - victim - 1) * sizeof(*fresh));
		nx->n--;
	}
}

static int check_regs(const struct memb_reg *regs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int ret = memb_check_id("registration id", regs[i].id);

		if (ret)
			return ret;
		if (i && !strcmp(regs[i - 1].id, regs[i].id))
			return rs_seterr(RS_E_INVAL, "registration '%s' twice",
					 regs[i].id);
	}
	return 0;
}

/* What drain may do in the step from cur (regs sorted by id): */
enum {
	DRAIN_MAY_START = 1,	/* an ACTIVE member without a request stays */
	DRAIN_MAY_END = 2,	/* every ACTIVE and JOINING member synced */
};

/* m's registration by id, of any incarnation (g sorted by id). */
static const struct memb_reg *reg_by_id(const struct memb_member *m,
					 const struct memb_reg *g, size_t n)
{
	struct memb_reg key;

	memcpy(key.id, m->id, sizeof(key.id));
	return n ? bsearch(&key, g, n, sizeof(*g), reg_cmp) : NULL;
}

/* m's registration with m's own incarnation. */
static const struct memb_reg *reg_of(const struct memb_member *m,
				     const struct memb_reg *g, size_t n)
{
	const struct memb_reg *r = reg_by_id(m, g, n);

	return r && r->inc == m->inc ? r : NULL;
}

static unsigned drain_state(const struct memb_config *cur,
			    const struct memb_reg *g, size_t n)
{
	bool stays = false, synced = true;

	for (size_t i = 0; i < cur->n; i++) {
		const struct memb_member *m = &cur->m[i];
		const struct memb_reg *r = reg_of(m, g, n);

		if (!memb_targeted(m->state))
			continue;
		stays |= m->state == MEMB_ACTIVE && r && !r->drain;
		synced &= r && r->synced == cur->epoch;
	}
	return (stays ? DRAIN_MAY_START : 0) |
	       (stays && synced ? DRAIN_MAY_END : 0);
}

/* A registered member with its own incarnation: its next state. */
static enum memb_state next_state(const struct memb_member *m,
				  const struct memb_reg *r, uint64_t epoch,
				  unsigned drain)
{
	switch (m->state) {
	case MEMB_JOINING:	/* copied its ranges */
		return r->synced == epoch ? MEMB_ACTIVE : MEMB_JOINING;
	case MEMB_ACTIVE:
		return r->drain && (drain & DRAIN_MAY_START) ? MEMB_LEAVING
							     : MEMB_ACTIVE;
	case MEMB_LEAVING:	/* cancelled, or its ranges are taken over */
		return !r->drain ? MEMB_ACTIVE
		       : drain & DRAIN_MAY_END ? MEMB_DOWN : MEMB_LEAVING;
	default:
		return m->state;
	}
}

static bool forgotten(const struct memb_policy *p, const struct memb_member *m)
{
	for (size_t k = 0; k < p->nforget; k++)
		if (p->forget[k].inc == m->inc && !strcmp(p->forget[k].id, m->id))
			return true;
	return false;
}

/*
 * keep_last (docs/replication.md, "The last complete holder"): keep[i] for
 * each serving member i of cur whose registration is gone and that is in
 * the replica set of a range of cur's active ring in which no other member
 * is sure: registered with its own incarnation and synced in cur's epoch
 * (it holds every range of cur it is in). Such a member may be the last
 * one that holds the range completely. g: sorted by id.
 */
static int last_holders(const struct memb_config *cur, const struct memb_reg *g,
			size_t n, const struct memb_policy *p, bool *keep)
{
	struct memb_placement *pl = NULL;
	size_t *alone = NULL;
	bool *gone = NULL, *sure = NULL, any = false;
	unsigned set[MEMB_MAX_R];
	int ret = 0;

	if (!p->keep_last || !cur->n)
		return 0;
	gone = calloc(cur->n, sizeof(*gone));
	sure = calloc(cur->n, sizeof(*sure));
	alone = calloc(cur->n, sizeof(*alone));
	if (!gone || !sure || !alone) {
		ret = rs_seterr(-ENOMEM, "membership: out of memory");
		goto out;
	}
	for (size_t i = 0; i < cur->n; i++) {
		const struct memb_member *m = &cur->m[i];
		const struct memb_reg *r = reg_of(m, g, n);

		gone[i] = memb_serves(m->state) && !reg_by_id(m, g, n);
		sure[i] = memb_serves(m->state) && r &&
			  r->synced == cur->epoch;
		any |= gone[i];
	}
	if (!any)
		goto out;
	if ((ret = memb_placement_new(&pl, cur)))
		goto out;
	for (size_t k = 0; k < memb_ranges(pl); k++) {
		uint64_t lo, hi;
		unsigned c = memb_range(pl, k, &lo, &hi, set);
		bool held = false;

		for (unsigned j = 0; j < c && !held; j++)
			held = sure[set[j]];
		for (unsigned j = 0; j < c && !held; j++)
			alone[set[j]] += gone[set[j]];
	}
	for (size_t i = 0; i < cur->n; i++) {
		keep[i] = alone[i] && !forgotten(p, &cur->m[i]);
		if (keep[i] && p->on_kept)
			p->on_kept(p->kept_arg, &cur->m[i], alone[i]);
	}
out:
	memb_placement_free(&pl);
	free(alone);
	free(sure);
	free(gone);
	return ret;
}

int memb_reconfigure(const struct memb_config *cur,
		     const struct memb_reg *regs, size_t nregs,
		     const struct memb_policy *p, struct memb_config *next)
{
	const uint64_t e = cur->epoch + 1;
	const bool first = cur->epoch == 0;
	enum memb_state joined = first || p->activate_joiners ? MEMB_ACTIVE
							      : MEMB_JOINING;
	struct memb_reg *g = NULL;
	bool *fresh = NULL, *keep = NULL, changed;
	unsigned drain;
	size_t i = 0, j = 0;
	int ret;

	memset(next, 0, sizeof(*next));
	if (cur->n > MEMB_MAX_NODES || nregs > 4 * MEMB_MAX_NODES)
		return rs_seterr(RS_E_TOOBIG, "membership: %zu members, %zu "
				 "registrations", cur->n, nregs);
	if (first && (p->r < 1 || p->r > MEMB_MAX_R || p->vnodes < 1 ||
		      p->vnodes > MEMB_MAX_VNODES))
		return rs_seterr(RS_E_INVAL, "membership: r %u (1..%d), "
				 "vnodes %u (1..%d)", p->r, MEMB_MAX_R,
				 p->vnodes, MEMB_MAX_VNODES);
	if (nregs && !(g = malloc(nregs * sizeof(*g))))
		return rs_seterr(-ENOMEM, "membership: out of memory");
	if (nregs) {
		memcpy(g, regs, nregs * sizeof(*g));
		qsort(g, nregs, sizeof(*g), reg_cmp);
	}
	if ((ret = check_regs(g, nregs)))
		goto out;
	next->epoch = cur->epoch;
	next->r = first ? p->r : cur->r;
	next->vnodes = first ? p->vnodes : cur->vnodes;
	next->m = calloc(cur->n + nregs + 1, sizeof(*next->m));
	fresh = calloc(cur->n + nregs + 1, sizeof(*fresh));
	keep = calloc(cur->n + 1, sizeof(*keep));
	if (!next->m || !fresh || !keep) {
		ret = rs_seterr(-ENOMEM, "membership: out of memory");
		goto out;
	}
	if ((ret = last_holders(cur, g, nregs, p, keep)))
		goto out;
	drain = drain_state(cur, g, nregs);
	while (i < cur->n || j < nregs) {
		int c = i == cur->n ? 1 : j == nregs ? -1 :
			strcmp(cur->m[i].id, g[j].id);
		struct memb_member *m = &next->m[next->n];

		if (c < 0) { /* a member without registration */
			bool kept = keep[i];

			*m = cur->m[i++];
			if (m->state != MEMB_DOWN && !kept) {
				m->state = MEMB_DOWN;
				m->since = e;
			}
		} else if (c > 0) { /* a new node */
			if (g[j].drain && !first) {
				j++;	/* drained: does not join */
				continue;
			}
			join(m, &g[j++], joined, e);
			fresh[next->n] = true;
		} else if (cur->m[i].inc == g[j].inc &&
			   cur->m[i].state == MEMB_DOWN && g[j].drain) {
			*m = cur->m[i++];	/* drained: stays out */
			j++;
		} else if (cur->m[i].state == MEMB_DOWN ||
			   cur->m[i].inc != g[j].inc) {
			/* back, or restarted with empty memory: joins anew */
			join(m, &g[j++], joined, e);
			i++;
		} else {
			enum memb_state to = next_state(&cur->m[i], &g[j],
							cur->epoch, drain);

			*m = cur->m[i++];
			if (to != m->state) {
				m->state = to;
				m->since = e;
			}
			memcpy(m->addr, g[j++].addr, sizeof(m->addr));
		}
		next->n++;
	}
	make_room(next, fresh);
	changed = next->n != cur->n;
	for (size_t k = 0; !changed && k < next->n; k++)
		changed = !member_eq(&next->m[k], &cur->m[k]);
	/* a first configuration with anyone in it differs from none */
	if (changed)
		next->epoch = e;
	ret = changed ? 1 : 0;
out:
	free(keep);
	free(fresh);
	free(g);
	if (ret < 0)
		memb_config_free(next);
	return ret;
}

/* ---- placement ---- */

struct memb_placement {
	struct place_ring *ring;	/* NULL: no active member */
	unsigned *map;		/* ring node -> member index */
	unsigned r;
};

static int placement(struct memb_placement **out, const struct memb_config *c,
		     bool (*in)(enum memb_state))
{
	struct memb_placement *p = calloc(1, sizeof(*p));
	const char **names = NULL;
	size_t n = 0;
	int ret = 0;

	*out = NULL;
	if (!p)
		return rs_seterr(-ENOMEM, "membership: out of memory");
	p->r = c->r;
	if (c->n) {
		names = calloc(c->n, sizeof(*names));
		p->map = calloc(c->n, sizeof(*p->map));
		if (!names || !p->map) {
			ret = rs_seterr(-ENOMEM, "membership: out of memory");
			goto out;
		}
	}
	for (size_t i = 0; i < c->n; i++)
		if (in(c->m[i].state)) {
			p->map[n] = (unsigned)i;
			names[n++] = c->m[i].id;
		}
	if (n)
		ret = place_ring_new(&p->ring, names, n, c->vnodes);
out:
	free(names);
	if (ret)
		memb_placement_free(&p);
	*out = p;
	return ret;
}

int memb_placement_new(struct memb_placement **out,
		       const struct memb_config *c)
{
	return placement(out, c, memb_serves);
}

int memb_placement_target(struct memb_placement **out,
			  const struct memb_config *c)
{
	return placement(out, c, memb_targeted);
}

void memb_placement_free(struct memb_placement **p)
{
	if (!p || !*p)
		return;
	place_ring_delete(&(*p)->ring);
	free((*p)->map);
	free(*p);
	*p = NULL;
}

uint64_t memb_key_hash(uint64_t key)
{
	return place_ring_key_hash(key);
}

unsigned memb_replicas(const struct memb_placement *p, uint64_t hash,
		       unsigned *out)
{
	unsigned n;

	if (!p->ring)
		return 0;
	n = place_ring_successors(p->ring, hash, out,
				  p->r < MEMB_MAX_R ? p->r : MEMB_MAX_R);
	for (unsigned i = 0; i < n; i++)
		out[i] = p->map[out[i]];
	return n;
}

bool memb_in_set(const struct memb_placement *p, uint64_t h, int who)
{
	unsigned set[MEMB_MAX_R], n;

	if (!p || who < 0)
		return false;
	n = memb_replicas(p, h, set);
	for (unsigned j = 0; j < n; j++)
		if ((int)set[j] == who)
			return true;
	return false;
}

bool memb_keeps(const struct memb_placement *act,
		const struct memb_placement *tgt, uint64_t h, int me)
{
	return memb_in_set(act, h, me) || memb_in_set(tgt, h, me);
}

size_t memb_ranges(const struct memb_placement *p)
{
	return p->ring ? place_ring_points(p->ring) : 0;
}

unsigned memb_range(const struct memb_placement *p, size_t i,
		    uint64_t *start, uint64_t *end, unsigned *out)
{
	size_t n = place_ring_points(p->ring);
	unsigned node;

	place_ring_point(p->ring, i ? i - 1 : n - 1, start, &node);
	place_ring_point(p->ring, i, end, &node);
	return memb_replicas(p, *end, out);
}

/* ---- the store ---- */

int memb_key(char *out, const char *cluster, const char *what)
{
	int ret = memb_check_id("cluster", cluster);

	if (ret)
		return ret;
	if (snprintf(out, COORD_KEY_MAX + 1, "/recstore/%s/%s", cluster,
		     what) > COORD_KEY_MAX)
		return rs_seterr(RS_E_TOOBIG, "membership: key too long");
	return 0;
}

int memb_read_config(struct coord *c, const char *cluster,
		     struct memb_config *out, int64_t *mod_rev, int64_t *rev)
{
	char key[COORD_KEY_MAX + 1];
	struct coord_kvs r;
	int ret;

	memset(out, 0, sizeof(*out));
	*mod_rev = 0;
	if ((ret = memb_key(key, cluster, "config")) ||
	    (ret = coord_range(c, key, false, &r)))
		return ret;
	if (rev)
		*rev = r.rev;
	if (r.n == 1) {
		ret = memb_config_parse(r.kv[0].value, r.kv[0].value_len, out);
		*mod_rev = r.kv[0].mod_rev;
		if (ret) {
			char msg[320];

			snprintf(msg, sizeof(msg), "%s", rs_errormsg());
			ret = rs_seterr(ret, "%s: %s", key, msg);
		}
	}
	coord_kvs_free(&r);
	return ret;
}

/* drains = {"<id>": "<inc>", ...}: the incarnations an operator asked to
 * drain, in one key so that every request is one compare-and-swap on it.
 * An entry is the incarnation as a string (an ordinary drain), or
 * {"inc": "<inc>", "gone": true}: a forced drain of a member whose
 * registration was gone (drain_try()), the only entry the decider reads
 * as "forget" (forget_drained()). Both forms are drain requests. */
static int drains_read(struct coord *c, const char *cluster, json_t **out,
		       int64_t *mod_rev);
static void drains_mark(json_t *drains, struct memb_reg *regs, size_t n);
static int read_regs_drains(struct coord *c, const char *cluster,
			    struct memb_reg **regs, size_t *n,
			    size_t *bad_regs, json_t **drains);

/* The registrations without their drain flags. */
static int read_regs(struct coord *c, const char *cluster,
		     struct memb_reg **regs, size_t *n, size_t *bad_regs)
{
	char key[COORD_KEY_MAX + 1];
	struct coord_kvs r;
	size_t plen;
	int ret;

	*regs = NULL;
	*n = 0;
	if (bad_regs)
		*bad_regs = 0;
	if ((ret = memb_key(key, cluster, "nodes/")) ||
	    (ret = coord_range(c, key, true, &r)))
		return ret;
	plen = strlen(key);
	if (r.n && !(*regs = calloc(r.n, sizeof(**regs)))) {
		coord_kvs_free(&r);
		return rs_seterr(-ENOMEM, "membership: out of memory");
	}
	for (size_t i = 0; i < r.n; i++) {
		if (!memb_reg_parse(r.kv[i].key + plen, r.kv[i].value,
				    r.kv[i].value_len, &(*regs)[*n]))
			(*n)++;
		else if (bad_regs)
			(*bad_regs)++;
	}
	coord_kvs_free(&r);
	return 0;
}

/* The registrations with their drain flags, and the drains key they
 * were marked from (*drains: the caller's to json_decref). */
static int read_regs_drains(struct coord *c, const char *cluster,
			    struct memb_reg **regs, size_t *n,
			    size_t *bad_regs, json_t **drains)
{
	int ret;

	if ((ret = read_regs(c, cluster, regs, n, bad_regs)))
		return ret;
	if ((ret = drains_read(c, cluster, drains, NULL))) {
		free(*regs);
		*regs = NULL;
		*n = 0;
		return ret;
	}
	drains_mark(*drains, *regs, *n);
	return 0;
}

int memb_read_regs(struct coord *c, const char *cluster,
		   struct memb_reg **regs, size_t *n, size_t *bad_regs)
{
	json_t *drains = NULL;
	int ret = read_regs_drains(c, cluster, regs, n, bad_regs, &drains);

	json_decref(drains);
	return ret;
}

/* An unreadable drains key, or an entry in it that names no valid id and
 * incarnation, drains nothing; a request rewrites the key without it. */
static int drains_read(struct coord *c, const char *cluster, json_t **out,
		       int64_t *mod_rev)
{
	char key[COORD_KEY_MAX + 1];
	struct coord_kvs r;
	json_t *o = NULL;
	int ret;

	*out = NULL;
	if ((ret = memb_key(key, cluster, "drains")) ||
	    (ret = coord_range(c, key, false, &r)))
		return ret;
	if (r.n == 1)
		o = json_loadb(r.kv[0].value, r.kv[0].value_len,
			       JSON_REJECT_DUPLICATES, NULL);
	if (mod_rev)
		*mod_rev = r.n == 1 ? r.kv[0].mod_rev : 0;
	coord_kvs_free(&r);
	if (!json_is_object(o)) {
		json_decref(o);
		o = json_object();
	}
	if (!(*out = o))
		return rs_seterr(-ENOMEM, "membership: out of memory");
	return 0;
}

/* The incarnation entry id of drains names (false: none or invalid), and
 * in *gone (may be NULL) whether it is the marker of a forced drain of a
 * member whose registration was gone. An object without "gone": true is
 * invalid. */
static bool drains_inc(json_t *drains, const char *id, uint64_t *inc,
		       bool *gone)
{
	json_t *v = json_object_get(drains, id);
	bool g = json_is_object(v);
	const char *s = json_string_value(g ? json_object_get(v, "inc") : v);

	if (g && !json_is_true(json_object_get(v, "gone")))
		return false;
	if (gone)
		*gone = g;
	return s && !memb_check_id("drain", id) && !parse_inc(s, inc);
}

static void drains_mark(json_t *drains, struct memb_reg *regs, size_t n)
{
	uint64_t inc;

	for (size_t j = 0; j < n; j++)
		if (drains_inc(drains, regs[j].id, &inc, NULL) &&
		    regs[j].inc == inc)
			regs[j].drain = true;
}

/* Keep the entries that still name a member of cfg or a registration by
 * id and incarnation: a node restarted under its id is a new incarnation
 * that the old request does not drain, and one gone from both will never
 * be seen again. */
static int drains_prune(json_t *drains, const struct memb_config *cfg,
			const struct memb_reg *regs, size_t nregs)
{
	const char *id;
	json_t *v;
	void *next;

	json_object_foreach_safe(drains, next, id, v) {
		uint64_t inc;
		bool keep = false;

		if (drains_inc(drains, id, &inc, NULL)) {
			for (size_t i = 0; !keep && i < cfg->n; i++)
				keep = !strcmp(cfg->m[i].id, id) &&
				       cfg->m[i].inc == inc;
			for (size_t j = 0; !keep && j < nregs; j++)
				keep = !strcmp(regs[j].id, id) &&
				       regs[j].inc == inc;
		}
		if (!keep && json_object_del(drains, id))
			return rs_seterr(-ENOMEM, "membership: out of memory");
	}
	(void)v;
	return 0;
}

/* One try: 1 written, 0 another request changed the key first, < 0 refused
 * or failed. */
static int drain_try(struct coord *c, const char *cluster, const char *id,
		     bool cancel, bool force)
{
	char key[COORD_KEY_MAX + 1], inc[17];
	const struct memb_member *me = NULL;
	const struct memb_reg *reg = NULL;
	struct memb_config cfg = { 0 };
	struct memb_reg *regs = NULL;
	size_t nregs = 0, stay = 0, hold = 0;
	int64_t mod_rev, dmod;
	json_t *drains, *entry;
	uint64_t had;
	bool was_gone = false;
	char *val = NULL;
	int ret;

	if ((ret = memb_key(key, cluster, "drains")) ||
	    (ret = drains_read(c, cluster, &drains, &dmod)))
		return ret;
	if ((ret = memb_read_config(c, cluster, &cfg, &mod_rev, NULL)) ||
	    (ret = read_regs(c, cluster, &regs, &nregs, NULL)))
		goto out;
	/* the flags as of the drains key read above (its compare-and-swap
	 * revision), not a later one */
	drains_mark(drains, regs, nregs);
	if (cancel) {
		if (!json_object_get(drains, id)) {
			ret = 1;	/* nothing to withdraw */
			goto out;
		}
		json_object_del(drains, id);
	} else {
		for (size_t i = 0; i < cfg.n; i++) {
			const struct memb_member *m = &cfg.m[i];
			const struct memb_reg *r = reg_of(m, regs, nregs);

			if (!strcmp(m->id, id)) {
				me = m;
				reg = r;
				continue;
			}
			stay += m->state == MEMB_ACTIVE && r && !r->drain;
			hold += memb_targeted(m->state) &&
				m->state != MEMB_LEAVING && r && !r->drain;
		}
		if (!me || !memb_serves(me->state)) {
			ret = rs_seterr(RS_E_INVAL, "drain: '%s' is not an "
					"active member of cluster %s (epoch %"
					PRIu64 ": %s)", id, cluster, cfg.epoch,
					me ? memb_state_name(me->state)
					   : "no member");
			goto out;
		}
		if (!reg && !force) {
			/* gone: nothing can copy from it; a forced drain
			 * (the marker below) puts it down even as the last
			 * complete holder of a range (memb_policy.keep_last) */
			ret = rs_seterr(RS_E_INVAL, "drain: '%s' is not "
					"registered with the incarnation the "
					"configuration knows (its lease lapsed "
					"or it restarted); --force puts it down "
					"at once, and rows only it held are "
					"lost", id);
			goto out;
		}
		/* asked already; for a member that is gone, only by a
		 * forced drain of it as gone (an ordinary request made
		 * while it was registered, or one an older recstore-ctl
		 * wrote, is replaced by the marker) */
		if (drains_inc(drains, id, &had, &was_gone) &&
		    had == (reg ? reg->inc : me->inc) && (reg || was_gone)) {
			ret = 1;
			goto out;
		}
		if (!stay) {
			ret = rs_seterr(RS_E_INVAL, "drain: '%s' is the last "
					"active member of cluster %s not being "
					"drained", id, cluster);
			goto out;
		}
		if (hold < cfg.r && !force) {
			ret = rs_seterr(RS_E_INVAL, "drain: without '%s' (and "
					"the members already being drained) "
					"%zu member%s would hold copies, fewer "
					"than r = %u of cluster %s: keys would "
					"keep %zu cop%s (--force drains anyway)",
					id, hold, hold == 1 ? "" : "s", cfg.r,
					cluster, hold, hold == 1 ? "y" : "ies");
			goto out;
		}
		snprintf(inc, sizeof(inc), "%016" PRIx64,
			 reg ? reg->inc : me->inc);
		/* registered: the plain incarnation, as every version
		 * writes and reads it; gone (forced): the marker */
		entry = reg ? json_string(inc)
			    : json_pack("{s:s, s:b}", "inc", inc, "gone", 1);
		if (json_object_set_new(drains, id, entry)) {
			ret = rs_seterr(-ENOMEM, "membership: out of memory");
			goto out;
		}
	}
	if ((ret = drains_prune(drains, &cfg, regs, nregs)))
		goto out;
	if (!json_object_size(drains)) {
		ret = coord_cas(c, key, dmod, NULL, 0, 0, NULL);
	} else if (!(val = json_dumps(drains, JSON_COMPACT | JSON_SORT_KEYS))) {
		ret = rs_seterr(-ENOMEM, "membership: out of memory");
	} else {
		ret = coord_cas(c, key, dmod, val, strlen(val), 0, NULL);
	}
out:
	free(val);
	free(regs);
	memb_config_free(&cfg);
	json_decref(drains);
	return ret;
}

int memb_drain_request(struct coord *c, const char *cluster, const char *id,
		       bool cancel, bool force)
{
	int ret;

	if ((ret = memb_check_id("node id", id)))
		return ret;
	for (int i = 0; i < MEMB_DRAIN_TRIES; i++)
		if ((ret = drain_try(c, cluster, id, cancel, force)))
			return ret < 0 ? ret : 0;
	return rs_seterr(RS_E_BUSY, "drain: the drain requests of cluster %s "
			 "changed %d times while this one was decided",
			 cluster, MEMB_DRAIN_TRIES);
}

/* The highest epoch a registration says its node follows (seen). */
static uint64_t regs_seen(const struct memb_reg *regs, size_t n,
			  const char **who)
{
	uint64_t seen = 0;

	for (size_t i = 0; i < n; i++)
		if (regs[i].seen > seen) {
			seen = regs[i].seen;
			*who = regs[i].id;
		}
	return seen;
}

/*
 * *out: p, its forget list extended by the members of cur that an
 * operator drained by force while their registration was gone: drains
 * names their incarnation with the marker ({"inc": ..., "gone": true},
 * drain_try()), which puts them down even as the last complete holder.
 * An ordinary request (the plain incarnation) is no "forget": a member
 * leaving by one whose lease lapses before the others synced may be the
 * last complete holder of a range and is kept like any other
 * (last_holders()); so is one named by the plain form an older
 * recstore-ctl wrote for a forced drain of a gone member, until the
 * operator repeats it or the keep timeout passes. A forget entry counts
 * only for a member whose registration is gone, so for the others it
 * changes nothing. The list is malloc'ed.
 */
static int forget_drained(const struct memb_config *cur, json_t *drains,
			  const struct memb_policy *p, struct memb_policy *out)
{
	struct memb_ref *f;
	size_t n = p->nforget;

	*out = *p;
	if (!(f = calloc(p->nforget + cur->n + 1, sizeof(*f))))
		return rs_seterr(-ENOMEM, "membership: out of memory");
	if (p->nforget)
		memcpy(f, p->forget, p->nforget * sizeof(*f));
	for (size_t i = 0; i < cur->n; i++) {
		const struct memb_member *m = &cur->m[i];
		uint64_t inc;
		bool gone = false;

		if (!drains_inc(drains, m->id, &inc, &gone) || !gone ||
		    inc != m->inc)
			continue;
		memcpy(f[n].id, m->id, sizeof(f[n].id));
		f[n++].inc = inc;
	}
	out->forget = f;
	out->nforget = n;
	return 0;
}

int memb_decide_from(struct coord *c, const char *cluster,
		     const struct memb_policy *p,
		     const struct memb_config *followed, uint64_t *epoch)
{
	struct memb_policy pol;
	struct memb_config cur, next;
	json_t *drains = NULL;
	char key[COORD_KEY_MAX + 1];
	struct memb_reg *regs;
	const char *who = NULL;
	uint64_t seen;
	int64_t mod_rev;
	size_t nregs, len;
	char *json;
	int ret;

	if ((ret = memb_key(key, cluster, "config")) ||
	    (ret = read_regs_drains(c, cluster, &regs, &nregs, NULL,
				    &drains)))
		return ret;
	if ((ret = memb_read_config(c, cluster, &cur, &mod_rev, NULL)))
		goto free_regs;
	if ((ret = forget_drained(&cur, drains, p, &pol))) {
		memb_config_free(&cur);
		goto free_regs;
	}
	p = &pol;
	seen = regs_seen(regs, nregs, &who);
	if (memb_config_regressed(&cur, followed) || seen > cur.epoch) {
		/* restored from an older snapshot: nothing derived from it */
		if (epoch)
			*epoch = seen > cur.epoch ? seen : followed->epoch;
		memb_config_free(&cur);
		ret = MEMB_DECIDE_REGRESSED;
		goto free_regs;
	}
	if (cur.epoch == 0 && nregs < p->first_members) {
		/* an initial cluster forms once its nodes are all there */
		memb_config_free(&cur);
		ret = 0;
		goto free_regs;
	}
	ret = memb_reconfigure(&cur, regs, nregs, p, &next);
	if (ret == 1 && !(ret = memb_config_format(&next, &json, &len))) {
		ret = coord_cas(c, key, mod_rev, json, len, 0, NULL);
		free(json);
		if (ret == 1 && epoch)
			*epoch = next.epoch;
	}
	memb_config_free(&next);
	memb_config_free(&cur);
free_regs:
	if (p == &pol)
		free((void *)pol.forget);
	json_decref(drains);
	free(regs);
	return ret;
}

int memb_decide(struct coord *c, const char *cluster,
		const struct memb_policy *p, uint64_t *epoch)
{
	return memb_decide_from(c, cluster, p, NULL, epoch);
}

/* The newest configuration published under recovery/ (epoch 0: none). */
static int read_published(struct coord *c, const char *cluster,
			  struct memb_config *best)
{
	char key[COORD_KEY_MAX + 1];
	struct coord_kvs r;
	int ret;

	memset(best, 0, sizeof(*best));
	if ((ret = memb_key(key, cluster, "recovery/")) ||
	    (ret = coord_range(c, key, true, &r)))
		return ret;
	for (size_t i = 0; i < r.n && !ret; i++) {
		struct memb_config one;

		if (memb_config_parse(r.kv[i].value, r.kv[i].value_len, &one))
			continue;	/* a broken entry recovers nothing */
		if (one.epoch > best->epoch) {
			memb_config_free(best);
			*best = one;
		} else {
			memb_config_free(&one);
		}
	}
	coord_kvs_free(&r);
	return ret;
}

int memb_recover(struct coord *c, const char *cluster,
		 struct memb_config *out)
{
	struct memb_config cur, best;
	char key[COORD_KEY_MAX + 1];
	struct memb_reg *regs = NULL;
	const char *who = "";
	uint64_t seen;
	int64_t mod_rev;
	size_t nregs, len;
	char *json;
	int ret;

	memset(out, 0, sizeof(*out));
	if ((ret = memb_key(key, cluster, "config")) ||
	    (ret = memb_read_regs(c, cluster, &regs, &nregs, NULL)))
		return ret;
	if ((ret = memb_read_config(c, cluster, &cur, &mod_rev, NULL)))
		goto free_regs;
	if ((ret = read_published(c, cluster, &best)))
		goto free_cur;
	seen = regs_seen(regs, nregs, &who);
	if (seen <= cur.epoch && best.epoch <= cur.epoch) {
		ret = memb_config_copy(out, &cur);	/* nothing to do */
		goto free_best;
	}
	if (seen > best.epoch) {
		ret = rs_seterr(RS_E_BUSY, "recover: node %s follows epoch %"
				PRIu64 " but published no configuration of "
				"it yet (the newest published: %" PRIu64
				"); retry", who, seen, best.epoch);
		goto free_best;
	}
	/* the newest configuration any live node follows, above every
	 * epoch anyone has seen: each node takes it (recovered) */
	*out = best;
	memset(&best, 0, sizeof(best));
	out->recovered = out->epoch;
	out->epoch = (cur.epoch > out->epoch ? cur.epoch : out->epoch) + 1;
	if (!(ret = memb_config_format(out, &json, &len))) {
		ret = coord_cas(c, key, mod_rev, json, len, 0, NULL);
		free(json);
		if (ret == 0)
			ret = rs_seterr(RS_E_STALE, "recover: the "
					"configuration of cluster %s changed "
					"meanwhile; retry", cluster);
	}
	if (ret != 1)
		memb_config_free(out);
free_best:
	memb_config_free(&best);
free_cur:
	memb_config_free(&cur);
free_regs:
	free(regs);
	return ret;
}

int memb_member_map(const struct memb_config *from,
		    const struct memb_config *to, int **map)
{
	int *m = malloc((from->n + 1) * sizeof(*m));

	*map = m;
	if (!m)
		return rs_seterr(-ENOMEM, "membership: out of memory");
	for (size_t i = 0; i < from->n; i++) {
		const struct memb_member *o = &from->m[i];

		m[i] = -1;
		for (size_t j = 0; memb_serves(o->state) && j < to->n; j++)
			if (memb_serves(to->m[j].state) &&
			    to->m[j].inc == o->inc &&
			    !strcmp(to->m[j].id, o->id)) {
				m[i] = (int)j;
				break;
			}
	}
	return 0;
}

bool memb_set_kept(const struct memb_placement *prev, const int *map,
		   int self, const struct memb_placement *cur, uint64_t h)
{
	unsigned ps[MEMB_MAX_R], cs[MEMB_MAX_R], np, nc;

	np = memb_replicas(prev, h, ps);
	if (!np || (int)ps[0] != self)
		return false;
	nc = memb_replicas(cur, h, cs);
	for (unsigned i = 0; i < np; i++) {
		bool in = false;

		for (unsigned k = 0; map[ps[i]] >= 0 && k < nc && !in; k++)
			in = (int)cs[k] == map[ps[i]];
		if (!in)
			return false;
	}
	return true;
}
