/*
 * auth.c - roles, handshake MACs and the replay cache (see auth.h for the
 * formats and docs/security.md for what they protect).
 *
 * Crypto is libsodium's only: crypto_auth_hmacsha256_* (HMAC-SHA256),
 * crypto_verify_16 (constant-time compare), randombytes_buf (nonces),
 * crypto_shorthash (SipHash-2-4, the replay index hash), sodium_memzero.
 * Nothing here is hand-made cryptography: the code only lays out the
 * bytes each MAC covers.
 *
 * Every MAC input starts with a label naming the message it authenticates
 * ("recstore-auth-v1 connect" / "... accept"), so that a MAC of one kind
 * can never be presented as the other.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/le.h"
#include "common/proto.h"
#include "common/rs_internal.h"

static const char LABEL_REQ[] = "recstore-auth-v1 connect";
static const char LABEL_ACC[] = "recstore-auth-v1 accept";
static const uint8_t REJ_MAGIC[4] = { 'R', 'S', 'A', 'R' };

/* ---- roles ---- */

#define OPB(op) (1u << (op))
static const uint32_t role_ops[] = {
	[AUTH_ROLE_NONE] = 0,
	[AUTH_ROLE_READ] = OPB(PROTO_OP_HELLO) | OPB(PROTO_OP_TABLE_DIR) |
			   OPB(PROTO_OP_GET) | OPB(PROTO_OP_STATS) |
			   OPB(PROTO_OP_CONFIG),
	[AUTH_ROLE_DATA] = OPB(PROTO_OP_HELLO) | OPB(PROTO_OP_TABLE_DIR) |
			   OPB(PROTO_OP_GET) | OPB(PROTO_OP_STATS) |
			   OPB(PROTO_OP_CONFIG) |
			   OPB(PROTO_OP_GET_OR_INIT) | OPB(PROTO_OP_PUT) |
			   OPB(PROTO_OP_UPDATE) | OPB(PROTO_OP_DELETE),
	[AUTH_ROLE_ADMIN] = 0xffffffffu,
};
static const char *const role_names[] = { "none", "read", "data", "admin" };

int auth_role_parse(const char *s)
{
	for (unsigned r = AUTH_ROLE_READ; r <= AUTH_ROLE_ADMIN; r++)
		if (s && !strcmp(s, role_names[r]))
			return (int)r;
	return -1;
}

const char *auth_role_name(unsigned role)
{
	return role <= AUTH_ROLE_ADMIN ? role_names[role] : "?";
}

bool auth_role_allows(unsigned role, unsigned op)
{
	return role <= AUTH_ROLE_ADMIN && op < 32 &&
	       (role_ops[role] & OPB(op));
}

unsigned auth_role_needed(unsigned op)
{
	for (unsigned r = AUTH_ROLE_READ; r < AUTH_ROLE_ADMIN; r++)
		if (auth_role_allows(r, op))
			return r;
	return AUTH_ROLE_ADMIN;
}

const char *auth_rej_text(unsigned reason)
{
	switch (reason) {
	case AUTH_REJ_REQUIRED:
		return "the node requires credentials (none configured here)";
	case AUTH_REJ_FAILED:
		return "authentication failed";
	case AUTH_REJ_BUSY:
		return "busy: this key's share of the node's replay cache "
		       "is full, try again later";
	default:
		return "refused";
	}
}

const char *auth_why_name(unsigned why)
{
	static const char *const n[AUTH_W_COUNT] = {
		"ok", "missing", "malformed", "unknown_key", "clock", "mac",
		"replay", "busy",
	};

	return why < AUTH_W_COUNT ? n[why] : "?";
}

/* ---- keys ---- */

int auth_init(void)
{
	if (sodium_init() < 0)
		return rs_seterr(RS_E_UNSUPPORTED, "libsodium failed to "
				 "initialise");
	return 0;
}

int auth_key_init(struct auth_key *k, uint32_t id, unsigned role,
		  const void *secret, size_t len)
{
	memset(k, 0, sizeof(*k));
	if (!id)
		return rs_seterr(RS_E_INVAL, "key id: must be 1..4294967295");
	if (role > AUTH_ROLE_ADMIN)
		return rs_seterr(RS_E_INVAL, "role: unknown");
	if (!secret || len < AUTH_SECRET_MIN || len > AUTH_SECRET_MAX)
		return rs_seterr(RS_E_INVAL, "secret: %zu bytes, must be %d "
				 "to %d (e.g. 32 random bytes, base64)", len,
				 AUTH_SECRET_MIN, AUTH_SECRET_MAX);
	k->id = id;
	k->role = (uint8_t)role;
	k->len = len;
	memcpy(k->secret, secret, len);
	return 0;
}

void auth_key_wipe(struct auth_key *k)
{
	if (k)
		sodium_memzero(k, sizeof(*k));
}

/* One read of at most cap + 2 bytes: a longer file is refused. */
int auth_secret_file(const char *path, uint8_t *out, size_t *len,
		     bool *world)
{
	uint8_t buf[AUTH_SECRET_MAX + 3];
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd, ret = 0;

	*len = 0;
	*world = false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rs_seterr(-errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		ret = rs_seterr(-errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	*world = (st.st_mode & (S_IRWXG | S_IRWXO)) != 0;
	while (got < sizeof(buf) &&
	       (n = read(fd, buf + got, sizeof(buf) - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = rs_seterr(-errno, "%s: %s", path,
					strerror(errno));
			goto out;
		}
		got += (size_t)n;
	}
	if (got && buf[got - 1] == '\n')
		got--;
	if (got && buf[got - 1] == '\r')
		got--;
	if (got < AUTH_SECRET_MIN || got > AUTH_SECRET_MAX) {
		ret = rs_seterr(RS_E_INVAL, "%s: the secret must be %d to %d "
				"bytes (one trailing newline ignored)", path,
				AUTH_SECRET_MIN, AUTH_SECRET_MAX);
		goto out;
	}
	memcpy(out, buf, got);
	*len = got;
out:
	sodium_memzero(buf, sizeof(buf));
	close(fd);
	return ret;
}

/* HMAC(k, label || a || b) truncated to AUTH_MAC_LEN. */
static void mac(const struct auth_key *k, const char *label, const void *a,
		size_t alen, const void *b, size_t blen,
		uint8_t out[AUTH_MAC_LEN])
{
	crypto_auth_hmacsha256_state st;
	uint8_t full[crypto_auth_hmacsha256_BYTES];

	crypto_auth_hmacsha256_init(&st, k->secret, k->len);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)label,
				      strlen(label));
	crypto_auth_hmacsha256_update(&st, a, alen);
	if (blen)
		crypto_auth_hmacsha256_update(&st, b, blen);
	crypto_auth_hmacsha256_final(&st, full);
	memcpy(out, full, AUTH_MAC_LEN);
	sodium_memzero(&st, sizeof(st));
	sodium_memzero(full, sizeof(full));
}

/* ---- client side ---- */

void auth_request_make(const struct auth_key *k, uint64_t now_s,
		       uint8_t out[AUTH_REQ_LEN])
{
	memset(out, 0, AUTH_REQ_LEN);
	out[0] = AUTH_VERSION;
	le_st32(out + 4, k->id);
	le_st64(out + 8, now_s);
	randombytes_buf(out + 16, AUTH_NONCE_LEN);
	mac(k, LABEL_REQ, out, 28, NULL, 0, out + 28);
}

static void accept_make(const struct auth_key *k,
			const uint8_t req[AUTH_REQ_LEN], unsigned role,
			uint8_t out[AUTH_ACC_LEN])
{
	memset(out, 0, AUTH_ACC_LEN);
	out[0] = AUTH_VERSION;
	out[1] = (uint8_t)role;
	le_st32(out + 4, k->id);
	mac(k, LABEL_ACC, req, AUTH_REQ_LEN, out, 8, out + 8);
}

int auth_accept_check(const struct auth_key *k,
		      const uint8_t req[AUTH_REQ_LEN], const void *reply,
		      size_t len, unsigned *role)
{
	const uint8_t *p = reply;
	uint8_t want[AUTH_MAC_LEN];
	int ok;

	if (!len)
		return rs_seterr(RS_E_AUTH, "the node checks no credentials "
				 "(none configured there), so it cannot prove "
				 "it knows ours: refused");
	if (len < AUTH_ACC_LEN || p[0] != AUTH_VERSION || p[2] || p[3] ||
	    le_ld32(p + 4) != k->id || p[1] < AUTH_ROLE_READ ||
	    p[1] > AUTH_ROLE_ADMIN)
		return rs_seterr(RS_E_AUTH, "the node's accept is not a "
				 "valid credential reply");
	mac(k, LABEL_ACC, req, AUTH_REQ_LEN, p, 8, want);
	ok = crypto_verify_16(want, p + 8) == 0;
	sodium_memzero(want, sizeof(want));
	if (!ok)
		return rs_seterr(RS_E_AUTH, "the node could not prove it knows "
				 "our secret (impostor, or a different "
				 "secret for key %u)", k->id);
	*role = p[1];
	return 0;
}

unsigned auth_reject_reason(const void *data, size_t len)
{
	const uint8_t *p = data;

	if (!p || len < AUTH_REJ_LEN || memcmp(p, REJ_MAGIC, 4) ||
	    p[4] != AUTH_VERSION)
		return 0;
	return p[5];
}

static size_t reject_make(unsigned reason, uint8_t *out)
{
	memset(out, 0, AUTH_REJ_LEN);
	memcpy(out, REJ_MAGIC, 4);
	out[4] = AUTH_VERSION;
	out[5] = (uint8_t)reason;
	return AUTH_REJ_LEN;
}

/* ---- replay cache: one share per key (the rules: auth.h) ---- */

static int replay_init(struct auth_replay *r, uint32_t share)
{
	r->ring = rs_calloc(share, sizeof(*r->ring));
	r->index = rs_calloc((size_t)share * 2, sizeof(*r->index));
	if (!r->ring || !r->index)
		return rs_seterr(-ENOMEM, "auth: replay cache: out of memory");
	return 0;
}

static uint32_t replay_home(const struct auth_node *a, const uint8_t *nonce)
{
	uint8_t h[crypto_shorthash_BYTES];

	crypto_shorthash(h, nonce, AUTH_NONCE_LEN, a->hkey);
	return le_ld32(h) % (a->share * 2);
}

/* Index position of ring slot `slot` (1-based in the index). */
static uint32_t replay_pos(const struct auth_node *a,
			   const struct auth_replay *r, uint32_t slot)
{
	uint32_t n = a->share * 2;

	for (uint32_t i = replay_home(a, r->ring[slot].nonce);;
	     i = (i + 1) % n)
		if (r->index[i] == slot + 1)
			return i;
}

/* Remove index position i (backward-shift deletion, linear probing). */
static void replay_unindex(const struct auth_node *a, struct auth_replay *r,
			   uint32_t i)
{
	uint32_t n = a->share * 2, j = i, home;

	for (;;) {
		j = (j + 1) % n;
		if (!r->index[j])
			break;
		home = replay_home(a, r->ring[r->index[j] - 1].nonce);
		/* move j into the hole i unless its home lies in (i, j] */
		if ((j > i && (home <= i || home > j)) ||
		    (j < i && home <= i && home > j)) {
			r->index[i] = r->index[j];
			i = j;
		}
	}
	r->index[i] = 0;
}

/* The oldest entry leaves; the floor keeps refusing its time. */
static void replay_pop(const struct auth_node *a, struct auth_replay *r)
{
	const struct auth_replay_ent *e = &r->ring[r->head];

	if (e->ts > r->floor)
		r->floor = e->ts;
	replay_unindex(a, r, replay_pos(a, r, r->head));
	r->head = (r->head + 1) % a->share;
	r->count--;
}

static bool replay_seen(const struct auth_node *a,
			const struct auth_replay *r, const uint8_t *nonce,
			uint32_t *pos)
{
	uint32_t n = a->share * 2, i;

	for (i = replay_home(a, nonce); r->index[i]; i = (i + 1) % n)
		if (!memcmp(r->ring[r->index[i] - 1].nonce, nonce,
			    AUTH_NONCE_LEN))
			return true;
	*pos = i;
	return false;
}

/* AUTH_W_OK (recorded), AUTH_W_REPLAY (seen) or AUTH_W_BUSY (at or below
 * the floor, or the share full of entries dated no earlier). */
static unsigned replay_check_add(const struct auth_node *a,
				 struct auth_replay *r, const uint8_t *nonce,
				 uint64_t ts, uint64_t now_s)
{
	uint32_t pos, slot;

	while (r->count && r->ring[r->head].expire < now_s)
		replay_pop(a, r);
	if (replay_seen(a, r, nonce, &pos))
		return AUTH_W_REPLAY;
	if (ts <= r->floor)
		return AUTH_W_BUSY;
	if (r->count == a->share) {
		if (ts <= r->ring[r->head].ts)
			return AUTH_W_BUSY;
		replay_pop(a, r);
		/* the shift may have moved the free position */
		(void)replay_seen(a, r, nonce, &pos);
	}
	slot = (r->head + r->count) % a->share;
	r->ring[slot].expire = now_s + a->skew_s;
	r->ring[slot].ts = ts;
	memcpy(r->ring[slot].nonce, nonce, AUTH_NONCE_LEN);
	r->index[pos] = slot + 1;
	r->count++;
	return AUTH_W_OK;
}

/* ---- node side ---- */

static int key_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct auth_key *)a)->id,
		 y = ((const struct auth_key *)b)->id;

	return x < y ? -1 : x > y;
}

int auth_node_init(struct auth_node *a, const struct auth_key *keys,
		   size_t n, uint32_t skew_s, uint32_t share)
{
	int ret;

	memset(a, 0, sizeof(*a));
	if ((ret = auth_init()))
		return ret;
	if (!n)
		return rs_seterr(RS_E_INVAL, "auth: no keys");
	if (skew_s > AUTH_MAX_SKEW_S)
		return rs_seterr(RS_E_INVAL, "auth.max_skew_s: %u is over %d",
				 skew_s, AUTH_MAX_SKEW_S);
	a->keys = rs_calloc(n, sizeof(*a->keys));
	if (!a->keys)
		return rs_seterr(-ENOMEM, "auth: out of memory");
	memcpy(a->keys, keys, n * sizeof(*a->keys));
	qsort(a->keys, n, sizeof(*a->keys), key_cmp);
	a->nkeys = n;
	a->skew_s = skew_s;
	for (size_t i = 1; i < n; i++)
		if (a->keys[i].id == a->keys[i - 1].id) {
			ret = rs_seterr(RS_E_INVAL, "auth.keys: key id %u "
					"given twice", a->keys[i].id);
			auth_node_fini(a);
			return ret;
		}
	a->share = share ? share : AUTH_REPLAY_SHARE;
	crypto_shorthash_keygen(a->hkey);
	a->replay = rs_calloc(n, sizeof(*a->replay));
	ret = a->replay ? 0 : rs_seterr(-ENOMEM, "auth: out of memory");
	for (size_t i = 0; !ret && i < n; i++)
		ret = replay_init(&a->replay[i], a->share);
	if (ret)
		auth_node_fini(a);
	return ret;
}

void auth_node_fini(struct auth_node *a)
{
	if (a->keys) {
		sodium_memzero(a->keys, a->nkeys * sizeof(*a->keys));
		free(a->keys);
	}
	for (size_t i = 0; a->replay && i < a->nkeys; i++) {
		free(a->replay[i].ring);
		free(a->replay[i].index);
	}
	free(a->replay);
	memset(a, 0, sizeof(*a));
}

const struct auth_key *auth_node_key(const struct auth_node *a, uint32_t id)
{
	size_t lo = 0, hi = a->nkeys;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->keys[mid].id == id)
			return &a->keys[mid];
		if (a->keys[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

uint32_t auth_node_cached(const struct auth_node *a, uint32_t id)
{
	const struct auth_key *k = auth_node_key(a, id);

	return k ? a->replay[k - a->keys].count : 0;
}

/* The checks before the replay cache; AUTH_W_OK and *key when they pass. */
static unsigned request_check(const struct auth_node *a, const uint8_t *p,
			      size_t len, uint64_t now_s,
			      const struct auth_key **key)
{
	uint8_t want[AUTH_MAC_LEN];
	uint64_t ts;
	bool ok;

	if (!len)
		return AUTH_W_MISSING;
	if (len != AUTH_REQ_LEN || p[0] != AUTH_VERSION || p[1] || p[2] ||
	    p[3])
		return AUTH_W_MALFORMED;
	*key = auth_node_key(a, le_ld32(p + 4));
	if (!*key)
		return AUTH_W_UNKNOWN_KEY;
	ts = le_ld64(p + 8);
	if ((ts > now_s ? ts - now_s : now_s - ts) > a->skew_s)
		return AUTH_W_CLOCK;
	mac(*key, LABEL_REQ, p, 28, NULL, 0, want);
	ok = crypto_verify_16(want, p + 28) == 0;
	sodium_memzero(want, sizeof(want));
	return ok ? AUTH_W_OK : AUTH_W_MAC;
}

unsigned auth_node_check(struct auth_node *a, const void *priv, size_t len,
			 uint64_t now_s, unsigned *role, uint8_t *reply,
			 size_t *reply_len)
{
	const uint8_t *p = priv;
	const struct auth_key *k = NULL;
	unsigned why;

	why = request_check(a, p, len, now_s, &k);
	if (why == AUTH_W_OK)
		why = replay_check_add(a, &a->replay[k - a->keys], p + 16,
				       le_ld64(p + 8), now_s);
	if (why != AUTH_W_OK) {
		atomic_fetch_add_explicit(&a->refused[why], 1,
					  memory_order_relaxed);
		*reply_len = reject_make(why == AUTH_W_MISSING ?
					 AUTH_REJ_REQUIRED :
					 why == AUTH_W_BUSY ? AUTH_REJ_BUSY :
					 AUTH_REJ_FAILED, reply);
		return why;
	}
	atomic_fetch_add_explicit(&a->accepted, 1, memory_order_relaxed);
	*role = k->role;
	accept_make(k, p, k->role, reply);
	*reply_len = AUTH_ACC_LEN;
	return AUTH_W_OK;
}

unsigned auth_node_role_of(const struct auth_node *a, const void *priv,
			   size_t len)
{
	const uint8_t *p = priv;
	const struct auth_key *k;

	if (len != AUTH_REQ_LEN || p[0] != AUTH_VERSION)
		return AUTH_ROLE_NONE;
	k = auth_node_key(a, le_ld32(p + 4));
	return k ? k->role : AUTH_ROLE_NONE;
}
