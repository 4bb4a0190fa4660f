/*
 * srv_once.c - completion records of exactly-once writes (RIFL; design in
 * docs/replication.md, "Exactly-once updates").
 *
 * A client in cluster mode tags each write call with (client id, seq) and
 * resends a failed call's keys with the same tag, to the same node or to
 * the key's next primary. The node keeps, per client and call, the status
 * it returned for each (table, key) it applied; a resent key that has a
 * record gets that status and is not applied again. Records travel to the
 * backups with the rows they produced (REPL), so the backup that becomes
 * primary after a failover recognises resends too.
 *
 * Forgetting: each request names done_below, the lowest seq of its
 * client's calls still in flight; every call below it is dropped. A
 * client's request naming a dropped call is refused (RS_E_INVAL); a
 * record a replica receives for one (srv_once_record) is obsolete and
 * skipped: a gaining node gets records both from its copy source and
 * from other primaries' forwarded writes, and a later call's done_below
 * may arrive first.
 *
 * Eviction. A client that goes away leaves its last calls behind: every
 * 1024 new clients, and whenever the table of clients is full, clients not
 * heard from for SRV_ONCE_IDLE_MS (10 min) are evicted. That is shorter
 * than a client may go on resending (its timeout alone may be an hour,
 * RS_TIMEOUT_MAX_MS), so eviction must not turn a resend into a second
 * application. An evicted client that still had records of calls at or
 * above its done_below stays as a small "forgotten" entry: its records are
 * freed, and it keeps `forgot`, the highest seq it had records of. A
 * client's request of a call at or below `forgot` is refused with
 * RS_E_TIMEOUT ("outcome unknown", as when the call gives up: the client
 * does not resend it, the caller learns the key may or may not have been
 * applied); its calls above `forgot` are new to this node and taken as
 * usual, and when it comes back its entry is live again, still refusing
 * up to `forgot` until its done_below passes it. (A call below `forgot`
 * that never reached this node before is refused too: safe, and only
 * possible for a client with calls in flight for over 10 minutes.) A
 * replica's records for such calls are kept: they can only make a later
 * answer more precise. Requests of seq < done_below are refused with
 * RS_E_INVAL as before.
 *
 * A forgotten entry is kept SRV_ONCE_FORGET_MS (4 h: four times the
 * longest client timeout) after the client was last heard of: a call
 * stops resending one timeout after its resend rounds began, and its
 * first exchange waits at most a timeout per node, so by then the client
 * has given up every call this node had records of. A client evicted with
 * no such records (all below done_below, or none applied) is simply
 * dropped: nothing of it can be applied twice.
 *
 * Bounds (all from the wire): SRV_ONCE_MAX_CLIENTS clients,
 * SRV_ONCE_MAX_CALLS calls per client, SRV_ONCE_MAX_ENTRIES records per
 * node; a request that would exceed one is refused with RS_E_BUSY (the
 * client backs off and resends; nothing was applied) and a REPL that
 * would fails, which fails the write at its primary the same way. At most
 * SRV_ONCE_MAX_FORGOTTEN forgotten clients (64 bytes each and the
 * allocator's share, about 20 MiB): with that many, an idle client with
 * records is not evicted (failing closed: once the table of clients is
 * full, new clients get RS_E_BUSY) until forgotten ones age out, never
 * forgotten early. Honest clients come nowhere near it (262,144 clients
 * that wrote here and went away within 4 h); a data-role peer cycling
 * fresh ids can reach it, as it can fill the table of clients.
 *
 * Concurrency: one mutex (`lock`) over everything here. Records are
 * looked up and added in batches (once per request), never per key with
 * the lock taken and dropped.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/srv_internal.h"

#define ONCE_BUCKETS 65536u	/* client hash chains (live and forgotten) */

struct once_ent {
	uint64_t key;
	uint32_t tid;
	int32_t st;
};

struct once_call {
	uint64_t seq;
	uint32_t n, cap;
	struct once_ent *e;	/* sorted by (tid, key), distinct */
};

struct once_client {
	uint64_t id;
	uint64_t done_below;
	uint64_t seen_ms;
	uint64_t forgot;	/* requests of seq <= forgot refused; 0: none */
	unsigned ncalls, cap;
	bool forgotten;		/* evicted: no calls, counted in nforgot */
	struct once_call *calls;
	struct once_client *next;
};

static uint64_t mono_ms(const struct srv_once *o)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u +
	       o->clock_ofs_ms;
}

static unsigned bucket_of(uint64_t id)
{
	return (unsigned)((id * 0x9E3779B97F4A7C15ull) >> 48) % ONCE_BUCKETS;
}

int srv_once_init(struct srv_once *o)
{
	memset(o, 0, sizeof(*o));
	o->max_clients = SRV_ONCE_MAX_CLIENTS;
	o->max_forgot = SRV_ONCE_MAX_FORGOTTEN;
	pthread_mutex_init(&o->lock, NULL);
	o->bucket = calloc(ONCE_BUCKETS, sizeof(*o->bucket));
	return o->bucket ? 0 : -ENOMEM;
}

static void call_free(struct srv_once *o, struct once_call *k)
{
	o->entries -= k->n;
	free(k->e);
	k->e = NULL;
	k->n = k->cap = 0;
}

static void calls_free(struct srv_once *o, struct once_client *c)
{
	for (unsigned i = 0; i < c->ncalls; i++)
		call_free(o, &c->calls[i]);
	free(c->calls);
	c->calls = NULL;
	c->ncalls = c->cap = 0;
}

static void client_free(struct srv_once *o, struct once_client *c)
{
	calls_free(o, c);
	if (c->forgotten)
		o->nforgot--;
	else
		o->nclients--;
	free(c);
}

void srv_once_fini(struct srv_once *o)
{
	for (unsigned b = 0; o->bucket && b < ONCE_BUCKETS; b++)
		while (o->bucket[b]) {
			struct once_client *c = o->bucket[b];

			o->bucket[b] = c->next;
			client_free(o, c);
		}
	free(o->bucket);
	o->bucket = NULL;
	pthread_mutex_destroy(&o->lock);
}

/* The highest seq of c a resend could still be applied twice for once
 * its records are gone: its calls with records, and what an earlier
 * eviction forgot. 0 when nothing at or above done_below. */
static uint64_t resend_mark(const struct once_client *c)
{
	uint64_t mark = c->forgot;

	for (unsigned i = 0; i < c->ncalls; i++)
		if (c->calls[i].n && c->calls[i].seq > mark)
			mark = c->calls[i].seq;
	return mark >= c->done_below ? mark : 0;
}

enum evict_how { EV_KEPT, EV_FORGOTTEN, EV_DROPPED };

/* *pp (live, idle) leaves the table of clients: dropped (unlinked), or
 * forgotten when a resend could still come; kept when too many are. */
static enum evict_how evict(struct srv_once *o, struct once_client **pp)
{
	struct once_client *c = *pp;
	uint64_t mark = resend_mark(c);

	if (!mark) {
		*pp = c->next;
		client_free(o, c);
		return EV_DROPPED;
	}
	if (o->nforgot >= o->max_forgot)
		return EV_KEPT;
	calls_free(o, c);
	c->forgot = mark;
	c->forgotten = true;
	o->nclients--;
	o->nforgot++;
	return EV_FORGOTTEN;
}

/* Evict clients idle for SRV_ONCE_IDLE_MS and drop forgotten ones past
 * SRV_ONCE_FORGET_MS; how many clients left the table. */
static unsigned evict_idle(struct srv_once *o, uint64_t now)
{
	unsigned gone = 0;

	for (unsigned b = 0; b < ONCE_BUCKETS; b++) {
		struct once_client **pp = &o->bucket[b];

		while (*pp) {
			struct once_client *c = *pp;
			uint64_t idle = now - c->seen_ms;

			if (c->forgotten && idle >= SRV_ONCE_FORGET_MS) {
				*pp = c->next;
				client_free(o, c);
				continue;
			}
			if (!c->forgotten && idle >= SRV_ONCE_IDLE_MS) {
				enum evict_how how = evict(o, pp);

				gone += how != EV_KEPT;
				if (how == EV_DROPPED)
					continue;
			}
			pp = &c->next;
		}
	}
	o->evicted += gone;
	return gone;
}

/* Room in the table of clients for one more (o->lock held). */
static int client_room(struct srv_once *o, uint64_t now)
{
	/* every 1024 new clients, forget the ones long gone */
	if (++o->created % 1024 == 0)
		evict_idle(o, now);
	if (o->nclients >= o->max_clients && !evict_idle(o, now))
		return rs_seterr(RS_E_BUSY, "exactly-once: %u clients have "
				 "calls on record: retry", o->nclients);
	return 0;
}

static struct once_client *client_find(struct srv_once *o, uint64_t id)
{
	struct once_client *c;

	for (c = o->bucket[bucket_of(id)]; c && c->id != id; c = c->next)
		;
	return c;
}

/* Client id, live (created, or back from forgotten). o->lock held. */
static int client_of(struct srv_once *o, uint64_t id, uint64_t now,
		     struct once_client **out)
{
	unsigned b = bucket_of(id);
	struct once_client *c = client_find(o, id);
	int ret;

	if (c && !c->forgotten) {
		*out = c;
		return 0;
	}
	if ((ret = client_room(o, now)))
		return ret;
	/* the eviction pass may have dropped a forgotten c */
	if ((c = client_find(o, id))) {
		c->forgotten = false;
		o->nforgot--;
		o->nclients++;
		*out = c;
		return 0;
	}
	if (!(c = calloc(1, sizeof(*c))))
		return rs_seterr(-ENOMEM, "exactly-once: out of memory");
	c->id = id;
	c->next = o->bucket[b];
	o->bucket[b] = c;
	o->nclients++;
	*out = c;
	return 0;
}

/* Forget the calls of c below done_below. */
static void advance(struct srv_once *o, struct once_client *c,
		    uint64_t done_below)
{
	unsigned j = 0;

	if (done_below <= c->done_below)
		return;
	c->done_below = done_below;
	for (unsigned i = 0; i < c->ncalls; i++) {
		if (c->calls[i].seq < done_below)
			call_free(o, &c->calls[i]);
		else
			c->calls[j++] = c->calls[i];
	}
	c->ncalls = j;
}

/* The call (client, seq) into *out, created if missing. o->lock held.
 * 0, or RS_E_BUSY over a bound, -ENOMEM, for a call already forgotten
 * RS_E_INVAL (a client's request) or 1 (a replica's record: obsolete,
 * see srv_once_record), and RS_E_TIMEOUT for a client's request of a
 * call whose records an eviction dropped. */
static int call_of(struct srv_once *o, uint64_t client, uint64_t seq,
		   uint64_t done_below, bool replica, struct once_call **out)
{
	uint64_t now = mono_ms(o);
	struct once_client *c = NULL;
	struct once_call *k;
	int ret;

	if ((ret = client_of(o, client, now, &c)))
		return ret;
	c->seen_ms = now;
	advance(o, c, done_below);
	if (seq < c->done_below && replica)
		return 1;
	if (seq < c->done_below)
		return rs_seterr(RS_E_INVAL, "exactly-once: call %" PRIu64
				 " of client %016" PRIx64 " was declared done "
				 "(done_below %" PRIu64 ")", seq, client,
				 c->done_below);
	if (seq <= c->forgot && !replica) {
		o->refused++;
		return rs_seterr(RS_E_TIMEOUT, "exactly-once: call %" PRIu64
				 " of client %016" PRIx64 ": this node forgot "
				 "the client's records of calls up to %" PRIu64
				 " (it was silent for over %u s) and cannot "
				 "tell whether it applied it: refused, not "
				 "applied again; its outcome is unknown", seq,
				 client, c->forgot, SRV_ONCE_IDLE_MS / 1000);
	}
	for (unsigned i = 0; i < c->ncalls; i++)
		if (c->calls[i].seq == seq) {
			*out = &c->calls[i];
			return 0;
		}
	if (c->ncalls == SRV_ONCE_MAX_CALLS)
		return rs_seterr(RS_E_BUSY, "exactly-once: client %016" PRIx64
				 " has %u calls in flight: retry", client,
				 c->ncalls);
	if (c->ncalls == c->cap) {
		unsigned cap = c->cap ? 2 * c->cap : 4;
		void *p = realloc(c->calls, cap * sizeof(*c->calls));

		if (!p)
			return rs_seterr(-ENOMEM, "exactly-once: out of memory");
		c->calls = p;
		c->cap = cap;
	}
	k = &c->calls[c->ncalls++];
	memset(k, 0, sizeof(*k));
	k->seq = seq;
	*out = k;
	return 0;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct once_ent *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

static const struct once_ent *find(const struct once_call *k, uint32_t tid,
				   uint64_t key)
{
	struct once_ent probe = { .key = key, .tid = tid };

	return k->n ? bsearch(&probe, k->e, k->n, sizeof(*k->e), ent_cmp)
		    : NULL;
}

int srv_once_lookup(struct srv_once *o, const struct srv_once_tag *tag,
		    uint32_t tid, const uint64_t *keys, uint32_t n,
		    int32_t *st, bool *found)
{
	struct once_call *k = NULL;
	uint64_t hits = 0;
	int ret;

	pthread_mutex_lock(&o->lock);
	ret = call_of(o, tag->client, tag->seq, tag->done_below, false, &k);
	if (!ret && o->entries + n > SRV_ONCE_MAX_ENTRIES)
		ret = rs_seterr(RS_E_BUSY, "exactly-once: %" PRIu64 " records "
				"on this node: retry", o->entries);
	for (uint32_t i = 0; !ret && i < n; i++) {
		const struct once_ent *e = find(k, tid, keys[i]);

		found[i] = e != NULL;
		if (e) {
			st[i] = e->st;
			hits++;
		}
	}
	o->deduplicated += hits;
	pthread_mutex_unlock(&o->lock);
	return ret;
}

static int add(struct srv_once *o, const struct srv_once_tag *tag,
	       uint32_t tid, const uint64_t *keys, const int32_t *st,
	       uint32_t n, bool replica)
{
	struct once_call *k = NULL;
	uint32_t add = 0, j;
	int ret;

	pthread_mutex_lock(&o->lock);
	ret = call_of(o, tag->client, tag->seq, tag->done_below, replica, &k);
	if (ret == 1) {
		o->obsolete++;
		ret = 0;
		goto out;
	}
	if (ret)
		goto out;
	for (uint32_t i = 0; i < n; i++)
		add += st[i] >= 0;
	if (o->entries + add > SRV_ONCE_MAX_ENTRIES) {
		ret = rs_seterr(RS_E_BUSY, "exactly-once: %" PRIu64 " records "
				"on this node: retry", o->entries);
		goto out;
	}
	if (k->n + add > k->cap) {
		uint32_t cap = k->n + add + 16;
		void *p = realloc(k->e, (size_t)cap * sizeof(*k->e));

		if (!p) {
			ret = rs_seterr(-ENOMEM, "exactly-once: out of memory");
			goto out;
		}
		k->e = p;
		k->cap = cap;
	}
	j = k->n;
	for (uint32_t i = 0; i < n; i++)
		if (st[i] >= 0 && !find(k, tid, keys[i]))
			k->e[j++] = (struct once_ent){ .key = keys[i],
						       .tid = tid,
						       .st = st[i] };
	/* sort, then drop duplicates within this batch */
	qsort(k->e, j, sizeof(*k->e), ent_cmp);
	add = 0;
	for (uint32_t i = 0; i < j; i++)
		if (!add || ent_cmp(&k->e[add - 1], &k->e[i]))
			k->e[add++] = k->e[i];
	o->entries += add - k->n;
	k->n = add;
out:
	pthread_mutex_unlock(&o->lock);
	return ret;
}

int srv_once_add(struct srv_once *o, const struct srv_once_tag *tag,
		 uint32_t tid, const uint64_t *keys, const int32_t *st,
		 uint32_t n)
{
	return add(o, tag, tid, keys, st, n, false);
}

int srv_once_record(struct srv_once *o, const struct srv_once_tag *tag,
		    uint32_t tid, const uint64_t *keys, const int32_t *st,
		    uint32_t n)
{
	return add(o, tag, tid, keys, st, n, true);
}

int srv_once_each(struct srv_once *o, uint32_t tid, srv_once_fn fn, void *arg)
{
	int ret = 0;

	pthread_mutex_lock(&o->lock);
	for (unsigned b = 0; !ret && b < ONCE_BUCKETS; b++)
		for (struct once_client *c = o->bucket[b]; !ret && c;
		     c = c->next)
			for (unsigned i = 0; !ret && i < c->ncalls; i++) {
				const struct once_call *k = &c->calls[i];
				struct srv_once_tag tag = {
					.client = c->id, .seq = k->seq,
					.done_below = c->done_below,
				};

				for (uint32_t j = 0; !ret && j < k->n; j++)
					if (k->e[j].tid == tid)
						ret = fn(arg, &tag, k->e[j].key,
							 k->e[j].st);
			}
	pthread_mutex_unlock(&o->lock);
	return ret;
}

void srv_once_stats(struct srv_once *o, struct srv_once_counts *out)
{
	pthread_mutex_lock(&o->lock);
	*out = (struct srv_once_counts){
		.clients = o->nclients, .records = o->entries,
		.deduplicated = o->deduplicated, .evicted = o->evicted,
		.obsolete = o->obsolete, .forgotten = o->nforgot,
		.refused = o->refused,
	};
	pthread_mutex_unlock(&o->lock);
}
