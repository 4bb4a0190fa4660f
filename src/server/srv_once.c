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
 * 1024 new clients, and when a bound is reached (at most once a second),
 * clients not heard from for SRV_ONCE_IDLE_MS (10 min) are evicted. That
 * is shorter than a client may go on resending (its timeout alone may be
 * an hour, RS_TIMEOUT_MAX_MS), so eviction must not turn a resend into a
 * second application. An evicted client that still had records of calls at or
 * above its done_below stays as a small "forgotten" entry: its records are
 * freed, and it keeps `forgot`, the highest seq it had records of. A
 * client's request of a call at or below `forgot` is refused with
 * RS_E_TIMEOUT ("outcome unknown", as when the call gives up: the client
 * does not resend it, the caller learns the key may or may not have been
 * applied); its calls above `forgot` are new to this node and taken as
 * usual, and when it records again its entry is live again, still
 * refusing up to `forgot` until its done_below passes it. (A call below
 * `forgot` that never reached this node before is refused too: safe, and
 * only possible for a client with calls in flight for over 10 minutes.)
 * A replica's records for such calls are kept: they can only make a
 * later answer more precise. Requests of seq < done_below are refused
 * with RS_E_INVAL as before.
 *
 * A forgotten entry is kept SRV_ONCE_FORGET_MS (4 h: four times the
 * longest client timeout) after the client was last heard of: a call
 * stops resending one timeout after its resend rounds began, and its
 * first exchange waits at most a timeout per node, so by then the client
 * has given up every call this node had records of. A client evicted with
 * no such records (all below done_below, or none applied) is simply
 * dropped: nothing of it can be applied twice.
 *
 * Credentials. Every client is one credential's: the key id its
 * connection authenticated with (0 on a node without credentials, one
 * bucket for all). The table is keyed by (key id, client id): a client
 * id travels in clear, and another key naming it names a client of its
 * own, which can neither see the first one's records nor move its
 * done_below. Records carry their key id to the backups (REPL, COPY), so
 * after a failover the new primary keys them the same way. (Binding an
 * id to the first key that used it would let a key that saw an id on the
 * wire claim it first on a node the client has not written to yet.)
 *
 * Tags. A client's request whose seq runs more than SRV_ONCE_SEQ_WINDOW
 * (2^40) ahead of the highest its client sent this node is refused with
 * RS_E_INVAL and changes nothing; since done_below <= seq (the protocol
 * checks it), done_below cannot move further either. 2^40 calls are four
 * hours at 76 million calls a second, more than a client makes between
 * two requests to a node that still holds its entry (silent 10 minutes
 * it is evicted, forgotten it is kept 4 h). A client of another key
 * cannot touch the entry at all; one of the same key can (a key is one
 * trust domain: the window only keeps a single bad tag from moving an
 * entry to the end of the sequence space).
 *
 * Bounds (all from the wire). Per node: SRV_ONCE_MAX_CLIENTS live
 * clients, SRV_ONCE_MAX_CALLS calls per client, SRV_ONCE_MAX_ENTRIES
 * records, SRV_ONCE_MAX_FORGOTTEN forgotten clients. Clients' requests
 * may use three quarters of the first and third, and each credential
 * 1/SRV_ONCE_SHARE_DIV of each (its share; without credentials the one
 * bucket's share is the three quarters). A request that could take its
 * credential or the node past one is refused with RS_E_BUSY before
 * anything is applied (the client backs off and resends), and it is
 * refused only for what it adds: a resend whose keys are all on record
 * is answered. A lookup that records nothing allocates nothing: a write
 * whose keys all fail (a DELETE of a missing key) leaves no client and
 * no call behind, so fresh ids cost nothing until they hold records.
 * srv_once_add does not refuse: its lookup checked, under the same
 * `order` mutex, and a peer's records landing in between overshoot a
 * bound by one batch at most.
 *
 * Records peers send (srv_once_record) are counted to their credential
 * too but never fail the REPL: a REPL carries many clients' writes, and
 * its failure would fail them all (srv_repl.c). They are kept up to
 * twice their credential's share (and twice SRV_ONCE_MAX_CALLS calls per
 * client) and up to the node's whole bounds (the quarter clients cannot
 * take); past that they are dropped and counted (once.dropped_records),
 * the row itself still applied: after a failover to this node, a resend
 * of such a call could be applied twice. Only a credential whose clients
 * hold twice its share of unfinished calls here gets there for its own
 * records; for everyone's, it takes four such credentials at once.
 *
 * Forgotten clients count to their credential as well: with
 * SRV_ONCE_MAX_FORGOTTEN forgotten, or its credential's share, an idle
 * client with records is not evicted (failing closed: once its
 * credential's clients fill their share, its new clients get RS_E_BUSY)
 * until forgotten ones age out, never forgotten early. Honest clients
 * come nowhere near it (32,768 clients of one key that wrote here and
 * went away within 4 h).
 *
 * Cost: one SipHash of (key id, client id) per lookup and per add (keyed
 * with a random key, so that no one can aim ids at one chain of the
 * table), a few compares, no allocation unless a call records its first
 * key. A
 * pass over the table to evict idle clients runs every 1024 new clients,
 * and when a bound is reached at most once a second.
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

#include "common/le.h"
#include "server/srv_internal.h"

#define ONCE_BUCKETS 65536u	/* client hash chains (live and forgotten) */
#define CRED_BUCKETS 256u	/* credential chains */
#define ONCE_MAX_CREDS 4096u	/* credentials with an account */
#define SWEEP_GAP_MS 1000u	/* at a bound, one eviction pass a second */

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

/* A credential's account: what its clients hold here. Kept until fini. */
struct once_cred {
	uint32_t key;		/* key id; 0: no credentials */
	unsigned nclients, nforgot;
	uint64_t records;
	struct once_cred *next;
};

struct once_client {
	uint64_t id;
	uint64_t done_below;
	uint64_t hi;		/* the highest seq heard of */
	uint64_t seen_ms;
	uint64_t forgot;	/* requests of seq <= forgot refused; 0: none */
	struct once_cred *cred;
	unsigned ncalls, cap;
	bool forgotten;		/* evicted: no calls, counted in nforgot */
	struct once_call *calls;
	struct once_client *next;
};

static uint64_t mono_ms(const struct srv_once *o)
{
	return rs_mono_ms() + o->clock_ofs_ms;
}

static unsigned bucket_of(const struct srv_once *o, uint32_t cred,
			  uint64_t id)
{
	uint8_t in[12], h[crypto_shorthash_BYTES];

	le_st64(in, id);
	le_st32(in + 8, cred);
	crypto_shorthash(h, in, sizeof(in), o->hkey);
	return (unsigned)(le_ld64(h) % ONCE_BUCKETS);
}

int srv_once_init(struct srv_once *o)
{
	memset(o, 0, sizeof(*o));
	o->max_clients = SRV_ONCE_MAX_CLIENTS;
	o->max_forgot = SRV_ONCE_MAX_FORGOTTEN;
	o->max_entries = SRV_ONCE_MAX_ENTRIES;
	o->cred_clients = o->max_clients / SRV_ONCE_SHARE_DIV;
	o->cred_forgot = o->max_forgot / SRV_ONCE_SHARE_DIV;
	o->cred_records = o->max_entries / SRV_ONCE_SHARE_DIV;
	pthread_mutex_init(&o->lock, NULL);
	if (sodium_init() < 0)
		return rs_seterr(-ENOMEM, "exactly-once: libsodium");
	crypto_shorthash_keygen(o->hkey);
	o->bucket = rs_calloc(ONCE_BUCKETS, sizeof(*o->bucket));
	o->cbucket = rs_calloc(CRED_BUCKETS, sizeof(*o->cbucket));
	if (o->bucket && o->cbucket)
		return 0;
	srv_once_fini(o);
	return rs_seterr(-ENOMEM, "exactly-once: out of memory");
}

void srv_once_one_bucket(struct srv_once *o)
{
	o->cred_clients = o->max_clients - o->max_clients / 4;
	o->cred_forgot = o->max_forgot;
	o->cred_records = o->max_entries - o->max_entries / 4;
}

static void call_free(struct srv_once *o, struct once_client *c,
		      struct once_call *k)
{
	o->entries -= k->n;
	c->cred->records -= k->n;
	free(k->e);
	k->e = NULL;
	k->n = k->cap = 0;
}

static void calls_free(struct srv_once *o, struct once_client *c)
{
	for (unsigned i = 0; i < c->ncalls; i++)
		call_free(o, c, &c->calls[i]);
	free(c->calls);
	c->calls = NULL;
	c->ncalls = c->cap = 0;
}

static void client_free(struct srv_once *o, struct once_client *c)
{
	calls_free(o, c);
	if (c->forgotten) {
		o->nforgot--;
		c->cred->nforgot--;
	} else {
		o->nclients--;
		c->cred->nclients--;
	}
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
	for (unsigned b = 0; o->cbucket && b < CRED_BUCKETS; b++)
		while (o->cbucket[b]) {
			struct once_cred *cr = o->cbucket[b];

			o->cbucket[b] = cr->next;
			free(cr);
		}
	free(o->bucket);
	free(o->cbucket);
	o->bucket = NULL;
	o->cbucket = NULL;
	pthread_mutex_destroy(&o->lock);
}

/* ---- credentials (o->lock held) ---- */

static unsigned cbucket_of(uint32_t key)
{
	return (key * 2654435761u) >> 24;	/* CRED_BUCKETS = 2^8 */
}

static struct once_cred *cred_find(const struct srv_once *o, uint32_t key)
{
	struct once_cred *cr = o->cbucket[cbucket_of(key)];

	while (cr && cr->key != key)
		cr = cr->next;
	return cr;
}

/* key's account, opened if missing; NULL: out of memory, or too many */
static struct once_cred *cred_get(struct srv_once *o, uint32_t key)
{
	struct once_cred *cr = cred_find(o, key);

	if (cr || o->ncreds >= ONCE_MAX_CREDS ||
	    !(cr = rs_calloc(1, sizeof(*cr))))
		return cr;
	cr->key = key;
	cr->next = o->cbucket[cbucket_of(key)];
	o->cbucket[cbucket_of(key)] = cr;
	o->ncreds++;
	return cr;
}

/* ---- eviction (o->lock held) ---- */

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
 * forgotten when a resend could still come; kept when too many are, on
 * the node or of its credential. */
static enum evict_how evict(struct srv_once *o, struct once_client **pp)
{
	struct once_client *c = *pp;
	uint64_t mark = resend_mark(c);

	if (!mark) {
		*pp = c->next;
		client_free(o, c);
		return EV_DROPPED;
	}
	if (o->nforgot >= o->max_forgot ||
	    c->cred->nforgot >= o->cred_forgot)
		return EV_KEPT;
	calls_free(o, c);
	c->forgot = mark;
	c->forgotten = true;
	o->nclients--;
	c->cred->nclients--;
	o->nforgot++;
	c->cred->nforgot++;
	return EV_FORGOTTEN;
}

/* Evict clients idle for SRV_ONCE_IDLE_MS and drop forgotten ones past
 * SRV_ONCE_FORGET_MS. A client heard of at `now` stays. */
static void evict_idle(struct srv_once *o, uint64_t now)
{
	o->swept_ms = now;
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

				o->evicted += how != EV_KEPT;
				if (how == EV_DROPPED)
					continue;
			}
			pp = &c->next;
		}
	}
}

/* ---- room (o->lock held) ---- */

/* Room for one more live client of cr (NULL: no account yet) for a
 * client's request (peer false) or a peer's record (peer true). */
static bool client_fits(const struct srv_once *o, const struct once_cred *cr,
			bool peer)
{
	unsigned node = o->max_clients - (peer ? 0 : o->max_clients / 4);
	unsigned share = o->cred_clients * (peer ? 2 : 1);

	if (!cr)
		return o->ncreds < ONCE_MAX_CREDS && o->nclients < node;
	return o->nclients < node && cr->nclients < share;
}

/* client_fits, after an eviction pass if it did not and none ran within
 * SWEEP_GAP_MS (a full table must not cost every request a pass). */
static bool client_room(struct srv_once *o, const struct once_cred *cr,
			bool peer, uint64_t now)
{
	if (client_fits(o, cr, peer))
		return true;
	if (now - o->swept_ms < SWEEP_GAP_MS)
		return false;
	evict_idle(o, now);
	return client_fits(o, cr, peer);
}

static bool records_fit(const struct srv_once *o, const struct once_cred *cr,
			uint64_t n, bool peer)
{
	uint64_t node = o->max_entries - (peer ? 0 : o->max_entries / 4);
	uint64_t share = o->cred_records * (peer ? 2 : 1);

	return o->entries + n <= node && (cr ? cr->records : 0) + n <= share;
}

static struct once_call *call_find(struct once_client *c, uint64_t seq)
{
	for (unsigned i = 0; i < c->ncalls; i++)
		if (c->calls[i].seq == seq)
			return &c->calls[i];
	return NULL;
}

/* Could client c (NULL: none here) of credential key record n more keys
 * of call seq (k: the call, NULL if none)? 0 or RS_E_BUSY naming the
 * bound. */
static int room(struct srv_once *o, struct once_client *c,
		const struct once_call *k, const struct srv_once_tag *t,
		uint64_t n, uint64_t now)
{
	struct once_cred *cr = c ? c->cred : cred_find(o, t->cred);

	if ((!c || c->forgotten) && !client_room(o, cr, false, now)) {
		o->busy++;
		return rs_seterr(RS_E_BUSY, "exactly-once: %u clients of key "
				 "%u (its share: %u) and %u on this node "
				 "have calls on record: retry",
				 cr ? cr->nclients : 0, t->cred,
				 o->cred_clients, o->nclients);
	}
	if (!k && c && c->ncalls >= SRV_ONCE_MAX_CALLS) {
		o->busy++;
		return rs_seterr(RS_E_BUSY, "exactly-once: client %016" PRIx64
				 " has %u calls in flight: retry", t->client,
				 c->ncalls);
	}
	if (!records_fit(o, cr, n, false)) {
		o->busy++;
		return rs_seterr(RS_E_BUSY, "exactly-once: key %u has %" PRIu64
				 " records on this node (its share: %" PRIu64
				 "), the node %" PRIu64 ": retry once its "
				 "calls are done", t->cred,
				 cr ? cr->records : 0, o->cred_records,
				 o->entries);
	}
	return 0;
}

/* ---- tags (o->lock held) ---- */

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
			call_free(o, c, &c->calls[i]);
		else
			c->calls[j++] = c->calls[i];
	}
	c->ncalls = j;
}

/* c was heard of with tag t: 0, or for a call its client declared done
 * 1 (a peer's record: obsolete, see srv_once_record) or RS_E_INVAL. */
static int heard(struct srv_once *o, struct once_client *c,
		 const struct srv_once_tag *t, uint64_t now, bool peer)
{
	c->seen_ms = now;
	if (t->seq > c->hi)
		c->hi = t->seq;
	advance(o, c, t->done_below);
	if (t->seq >= c->done_below)
		return 0;
	if (peer)
		return 1;
	return rs_seterr(RS_E_INVAL, "exactly-once: call %" PRIu64 " of "
			 "client %016" PRIx64 " was declared done (done_below "
			 "%" PRIu64 ")", t->seq, t->client, c->done_below);
}

/* A client's request against its entry c (NULL: none here): refused
 * (nothing changed) when its seq runs too far ahead; then heard(); then
 * RS_E_TIMEOUT for a call whose records an eviction dropped. */
static int tag_check(struct srv_once *o, struct once_client *c,
		     const struct srv_once_tag *t, uint64_t now)
{
	int ret;

	if (!c)
		return 0;
	if (t->seq > c->hi && t->seq - c->hi > SRV_ONCE_SEQ_WINDOW) {
		o->ahead++;
		return rs_seterr(RS_E_INVAL, "exactly-once: call %" PRIu64
				 " of client %016" PRIx64 " is more than 2^40 "
				 "calls ahead of its call %" PRIu64 " here: "
				 "refused", t->seq, t->client, c->hi);
	}
	if ((ret = heard(o, c, t, now, false)))
		return ret;
	if (t->seq > c->forgot)
		return 0;
	o->refused++;
	return rs_seterr(RS_E_TIMEOUT, "exactly-once: call %" PRIu64 " of "
			 "client %016" PRIx64 ": this node forgot the client's "
			 "records of calls up to %" PRIu64 " (it was silent "
			 "for over %u s) and cannot tell whether it applied "
			 "it: refused, not applied again; its outcome is "
			 "unknown", t->seq, t->client, c->forgot,
			 SRV_ONCE_IDLE_MS / 1000);
}

static struct once_client *client_find(const struct srv_once *o,
				       uint32_t cred, uint64_t id)
{
	struct once_client *c = o->bucket[bucket_of(o, cred, id)];

	while (c && (c->id != id || c->cred->key != cred))
		c = c->next;
	return c;
}

/* ---- records ---- */

/* The order of a call's entries: by table, then key. */
static inline bool ent_less(const struct once_ent *x, const struct once_ent *y)
{
	return x->tid != y->tid ? x->tid < y->tid : x->key < y->key;
}

static inline bool ent_same(const struct once_ent *x, const struct once_ent *y)
{
	return x->tid == y->tid && x->key == y->key;
}

static const struct once_ent *find(const struct once_call *k, uint32_t tid,
				   uint64_t key)
{
	const struct once_ent probe = { .key = key, .tid = tid };
	uint32_t lo = 0, hi = k ? k->n : 0;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ent_less(&k->e[mid], &probe))
			lo = mid + 1;
		else
			hi = mid;
	}
	return k && lo < k->n && ent_same(&k->e[lo], &probe) ? &k->e[lo]
							      : NULL;
}

/* Merge sorted a[0..na) and b[0..nb) into out (stable: a first). */
static void ent_merge(const struct once_ent *a, uint32_t na,
		      const struct once_ent *b, uint32_t nb,
		      struct once_ent *out)
{
	uint32_t i = 0, j = 0, o = 0;

	while (i < na && j < nb)
		out[o++] = ent_less(&b[j], &a[i]) ? b[j++] : a[i++];
	while (i < na)
		out[o++] = a[i++];
	while (j < nb)
		out[o++] = b[j++];
}

/* Sort e[0..n) (stable; tmp holds n): runs of 8 by insertion, then
 * merges of doubling width. O(n log n) whatever the keys: they come
 * from the wire. The comparison is inline, where qsort's is a call. */
#define ENT_RUN 8u
static void ent_sort(struct once_ent *e, struct once_ent *tmp, uint32_t n)
{
	struct once_ent *src = e, *dst = tmp, *sw;

	for (uint32_t lo = 0; lo < n; lo += ENT_RUN) {
		uint32_t hi = n - lo > ENT_RUN ? lo + ENT_RUN : n;

		for (uint32_t i = lo + 1; i < hi; i++) {
			struct once_ent x = e[i];
			uint32_t j = i;

			for (; j > lo && ent_less(&x, &e[j - 1]); j--)
				e[j] = e[j - 1];
			e[j] = x;
		}
	}
	for (uint32_t w = ENT_RUN; w < n; w *= 2) {
		for (uint32_t lo = 0; lo < n; lo += 2 * w) {
			uint32_t mid = n - lo > w ? lo + w : n;
			uint32_t hi = n - mid > w ? mid + w : n;

			ent_merge(src + lo, mid - lo, src + mid, hi - mid,
				  dst + lo);
		}
		sw = src;
		src = dst;
		dst = sw;
	}
	if (src != e)
		memcpy(e, src, (size_t)n * sizeof(*e));
}

int srv_once_lookup(struct srv_once *o, const struct srv_once_tag *tag,
		    uint32_t tid, const uint64_t *keys, uint32_t n,
		    int32_t *st, bool *found)
{
	uint64_t now = mono_ms(o);
	struct once_client *c;
	struct once_call *k = NULL;
	uint32_t hits = 0;
	int ret;

	pthread_mutex_lock(&o->lock);
	c = client_find(o, tag->cred, tag->client);
	ret = tag_check(o, c, tag, now);
	if (!ret && c)
		k = call_find(c, tag->seq);
	for (uint32_t i = 0; !ret && i < n; i++) {
		const struct once_ent *e = find(k, tid, keys[i]);

		found[i] = e != NULL;
		if (e) {
			st[i] = e->st;
			hits++;
		}
	}
	if (!ret && hits < n)
		ret = room(o, c, k, tag, n - hits, now);
	if (!ret)
		o->deduplicated += hits;
	pthread_mutex_unlock(&o->lock);
	return ret;
}

/* Room for a peer's nrec records of call t (c, cr: its client and
 * credential, NULL if none here)? */
static bool peer_room(struct srv_once *o, struct once_client *c,
		      const struct once_cred *cr,
		      const struct srv_once_tag *t, uint32_t nrec,
		      uint64_t now)
{
	if ((!c || c->forgotten) && !client_room(o, cr, true, now))
		return false;
	if (c && !call_find(c, t->seq) && c->ncalls >= 2 * SRV_ONCE_MAX_CALLS)
		return false;
	return records_fit(o, cr, nrec, true);
}

/* Client t of cr, live: created, or back from forgotten. NULL: out of
 * memory. */
static struct once_client *client_live(struct srv_once *o,
				       struct once_client *c,
				       struct once_cred *cr,
				       const struct srv_once_tag *t,
				       uint64_t now)
{
	unsigned b;

	if (c) {
		c->forgotten = false;
		o->nforgot--;
		cr->nforgot--;
		o->nclients++;
		cr->nclients++;
		return c;
	}
	/* every 1024 new clients, forget the ones long gone */
	if (++o->created % 1024 == 0)
		evict_idle(o, now);
	if (!(c = rs_calloc(1, sizeof(*c))))
		return NULL;
	c->id = t->client;
	c->cred = cr;
	c->seen_ms = now;
	c->hi = t->seq;
	c->done_below = t->done_below;
	b = bucket_of(o, t->cred, t->client);
	c->next = o->bucket[b];
	o->bucket[b] = c;
	o->nclients++;
	cr->nclients++;
	return c;
}

/* The call seq of c, appended if missing; NULL: out of memory. */
static struct once_call *call_get(struct once_client *c, uint64_t seq)
{
	struct once_call *k = call_find(c, seq);

	if (k)
		return k;
	if (c->ncalls == c->cap) {
		unsigned cap = c->cap ? 2 * c->cap : 4;
		void *p = rs_realloc(c->calls, cap * sizeof(*c->calls));

		if (!p)
			return NULL;
		c->calls = p;
		c->cap = cap;
	}
	k = &c->calls[c->ncalls++];
	memset(k, 0, sizeof(*k));
	k->seq = seq;
	return k;
}

/* Add the keys with st >= 0 (nrec of them) to call k of c. */
static int insert(struct srv_once *o, struct once_client *c,
		  struct once_call *k, uint32_t tid, const uint64_t *keys,
		  const int32_t *st, uint32_t n, uint32_t nrec)
{
	struct once_ent *tmp;
	uint32_t kept = 0, j;

	if (k->n + nrec > k->cap) {
		uint32_t cap = k->n + nrec + 16;
		void *p = rs_realloc(k->e, (size_t)cap * sizeof(*k->e));

		if (!p)
			return rs_seterr(-ENOMEM, "exactly-once: out of "
					 "memory");
		k->e = p;
		k->cap = cap;
	}
	j = k->n;
	for (uint32_t i = 0; i < n; i++)
		if (st[i] >= 0 && !find(k, tid, keys[i]))
			k->e[j++] = (struct once_ent){ .key = keys[i],
						       .tid = tid,
						       .st = st[i] };
	if (j == k->n)
		return 0;
	/* sort the new entries, merge them behind the call's (sorted, and
	 * none of them among the new), then drop repeats within the batch
	 * (the first one stays) */
	if (!(tmp = rs_malloc((size_t)j * sizeof(*tmp))))
		return rs_seterr(-ENOMEM, "exactly-once: out of memory");
	ent_sort(k->e + k->n, tmp, j - k->n);
	if (k->n) {
		ent_merge(k->e, k->n, k->e + k->n, j - k->n, tmp);
		memcpy(k->e, tmp, (size_t)j * sizeof(*tmp));
	}
	free(tmp);
	for (uint32_t i = 0; i < j; i++)
		if (!kept || !ent_same(&k->e[kept - 1], &k->e[i]))
			k->e[kept++] = k->e[i];
	o->entries += kept - k->n;
	c->cred->records += kept - k->n;
	k->n = kept;
	return 0;
}

/* srv_once_add (peer false) and srv_once_record (peer true): 0, 1 when
 * a peer's records were dropped (a bound), or < 0. */
static int add(struct srv_once *o, const struct srv_once_tag *tag,
	       uint32_t tid, const uint64_t *keys, const int32_t *st,
	       uint32_t n, bool peer)
{
	uint64_t now = mono_ms(o);
	struct once_client *c;
	struct once_cred *cr;
	struct once_call *k;
	uint32_t nrec = 0;
	int ret = 0;

	for (uint32_t i = 0; i < n; i++)
		nrec += st[i] >= 0;
	pthread_mutex_lock(&o->lock);
	c = client_find(o, tag->cred, tag->client);
	if (c && (ret = heard(o, c, tag, now, peer))) {
		o->obsolete += ret == 1;
		ret = ret == 1 ? 0 : ret;
		goto out;
	}
	if (!nrec)
		goto out;	/* nothing recorded: nothing allocated */
	cr = c ? c->cred : cred_find(o, tag->cred);
	if (peer && !peer_room(o, c, cr, tag, nrec, now)) {
		o->dropped += nrec;
		ret = 1;
		goto out;
	}
	/* a client's request was checked by its lookup */
	if (!cr && !(cr = cred_get(o, tag->cred)))
		ret = -ENOMEM;
	else if ((!c || c->forgotten) &&
		 !(c = client_live(o, c, cr, tag, now)))
		ret = -ENOMEM;
	else if (!(k = call_get(c, tag->seq)))
		ret = -ENOMEM;
	else
		ret = insert(o, c, k, tid, keys, st, n, nrec);
	if (ret == -ENOMEM)
		rs_seterr(ret, "exactly-once: out of memory");
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
					.cred = c->cred->key,
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
		.refused = o->refused, .creds = o->ncreds, .busy = o->busy,
		.dropped = o->dropped, .ahead = o->ahead,
	};
	pthread_mutex_unlock(&o->lock);
}
