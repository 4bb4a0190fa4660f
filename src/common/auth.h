/*
 * auth.h - connection credentials shared by the client and the memory node
 * (prefix auth_): roles, the MAC'ed handshake bytes carried by rdma_cm's
 * connect request / accept / reject private data, and the node's replay
 * cache. Threat model and operator guide: docs/security.md.
 *
 * Keys. A credential is a key id (u32, > 0) and a secret (AUTH_SECRET_MIN
 * to AUTH_SECRET_MAX bytes) shared by a node and a client; the node also
 * knows the key's role. The secret never goes on the wire: the handshake
 * carries MACs (HMAC-SHA256 from libsodium, truncated to 128 bits, compared
 * with crypto_verify_16, constant time).
 *
 * Handshake (all integers little-endian):
 *   connect request, AUTH_REQ_LEN = 44 bytes (RV_CONNECT_PRIV_MAX):
 *     0  u8   version (AUTH_VERSION)     1  u8[3] zero
 *     4  u32  key id                     8  u64   time (unix seconds)
 *     16 u8[12] client nonce (random)    28 u8[16] MAC
 *     MAC = HMAC(secret, "recstore-auth-v1 connect" || bytes 0..27)
 *   accept reply, AUTH_ACC_LEN = 24 bytes:
 *     0  u8   version    1 u8 role granted    2 u8[2] zero
 *     4  u32  key id     8 u8[16] MAC
 *     MAC = HMAC(secret, "recstore-auth-v1 accept" || request (44 bytes)
 *                || bytes 0..7)
 *     It covers the whole request (with its fresh nonce), so it proves to
 *     the client that this node knows the secret and cannot be replayed
 *     from an earlier handshake.
 *   reject, AUTH_REJ_LEN = 8 bytes: "RSAR", version, reason (AUTH_REJ_*),
 *     2 zero bytes. Reasons say as little as possible: a client learns
 *     "credentials required", "authentication failed" or "busy", never
 *     which check failed (the node logs that, see enum auth_why).
 *
 * Node checks, in order (auth_node_check): shape and version, key id known,
 * |time - now| <= skew, MAC, and only then the replay cache: a (key id,
 * nonce) accepted within the window is refused again. Only requests with a
 * valid MAC enter the cache, so a peer without a secret cannot fill it.
 *
 * Replay cache: one share per key, so that no key can crowd out another
 * (the node's peers connect with its first admin key: docs/security.md).
 * A share is a FIFO ring of `share` entries (AUTH_REPLAY_SHARE) with a
 * hash index (keyed SipHash, crypto_shorthash, so an authenticated peer
 * cannot aim at one probe chain), and a floor: a time at or below which
 * the key's requests are refused (AUTH_REJ_BUSY). The invariant: every
 * request the node accepted whose time is still inside the clock window
 * is either in its key's ring or dated at or below its key's floor, so a
 * replay of it is refused without the cache ever growing.
 *   - An entry leaves the ring max_skew_s after it came, whatever the
 *     request's time: a request dated now + skew pins nothing longer than
 *     one dated now. Leaving raises the floor to the request's time, which
 *     covers the rest of a future-dated request's window. Entries come in
 *     the node's clock order, so the ring's head always leaves first.
 *   - A full ring gives up its oldest entry the same way (floor raised to
 *     its time) when the new request is dated after it; otherwise the new
 *     request is refused as busy. A key over its share is thus refused
 *     only for requests dated no later than the ones it gave up: for the
 *     rest of the second at worst when its clients' clocks agree, longer
 *     only for itself when it dates requests in the future. Never another
 *     key, never a live nonce forgotten.
 *   - The cost: a client of a key whose clock lags another client's of the
 *     same key by max_skew_s or more may be refused as busy.
 *
 * Threads: an auth_key is immutable after auth_key_init (any thread). An
 * auth_node's keys are immutable after auth_node_init; auth_node_check()
 * (replay cache) is for one thread at a time (the node's rdma_cm thread);
 * the counters are relaxed atomics readable from any thread.
 *
 * Ownership: auth_key holds a copy of the secret (zeroed by auth_key_wipe);
 * auth_node owns its keys array and cache (auth_node_fini).
 */
#ifndef RS_COMMON_AUTH_H
#define RS_COMMON_AUTH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#include "recstore/error.h"

#define AUTH_VERSION 1
#define AUTH_REQ_LEN 44
#define AUTH_ACC_LEN 24
#define AUTH_REJ_LEN 8
#define AUTH_MAC_LEN 16
#define AUTH_NONCE_LEN 12
#define AUTH_SECRET_MIN 16
#define AUTH_SECRET_MAX 256
#define AUTH_DEFAULT_SKEW_S 60
#define AUTH_MAX_SKEW_S 3600
#define AUTH_REPLAY_SHARE 4096	/* replay cache entries per key */

/* Roles, each allowed everything the lower ones are. */
enum auth_role {
	AUTH_ROLE_NONE = 0,	/* nothing (not a valid configured role) */
	AUTH_ROLE_READ = 1,	/* HELLO, TABLE_DIR, GET, STATS (read-only
				 * counters); one-sided READ */
	AUTH_ROLE_DATA = 2,	/* + GET_OR_INIT, PUT, UPDATE, DELETE */
	AUTH_ROLE_ADMIN = 3,	/* + TABLE_CREATE, TABLE_DROP */
};

/* "read", "data", "admin" -> role; -1 when unknown. */
int auth_role_parse(const char *s);
const char *auth_role_name(unsigned role);
/* May a connection of this role send a request of opcode op? */
bool auth_role_allows(unsigned role, unsigned op);
/* The lowest role that may send op ("admin" for unknown opcodes). */
unsigned auth_role_needed(unsigned op);

/* Reject reasons (what the client is told). */
enum auth_rej {
	AUTH_REJ_REQUIRED = 1,	/* the node wants credentials, none came */
	AUTH_REJ_FAILED = 2,	/* any check failed */
	AUTH_REJ_BUSY = 3,	/* the key's replay share is full: try again
				 * later */
};
const char *auth_rej_text(unsigned reason);

/* Why the node refused (its log and metrics only). */
enum auth_why {
	AUTH_W_OK = 0,
	AUTH_W_MISSING,		/* no credentials in the request */
	AUTH_W_MALFORMED,	/* wrong length, version or reserved bytes */
	AUTH_W_UNKNOWN_KEY,
	AUTH_W_CLOCK,		/* time outside now +- skew */
	AUTH_W_MAC,
	AUTH_W_REPLAY,
	AUTH_W_BUSY,		/* the key's replay share is full, or the
				 * time is at or below its floor */
	AUTH_W_COUNT
};
const char *auth_why_name(unsigned why);

struct auth_key {
	uint32_t id;
	uint8_t role;		/* enum auth_role (node side) */
	size_t len;
	uint8_t secret[AUTH_SECRET_MAX];
};

/* Copy a secret of len bytes (AUTH_SECRET_MIN..MAX) into k. RS_E_INVAL
 * names the problem. */
int auth_key_init(struct auth_key *k, uint32_t id, unsigned role,
		  const void *secret, size_t len);
void auth_key_wipe(struct auth_key *k);

/*
 * Read a secret file: its bytes without one trailing newline (and "\r").
 * RS_E_INVAL for a size out of range; -errno when unreadable. *world is
 * set when the file is readable by others (group or world bits: the
 * caller warns).
 */
int auth_secret_file(const char *path, uint8_t *out, size_t *len,
		     bool *world);

/* libsodium's sodium_init(); 0 or RS_E_UNSUPPORTED. Idempotent. */
int auth_init(void);

/* ---- client side ---- */

/* Build the connect request for time now_s (fresh random nonce). */
void auth_request_make(const struct auth_key *k, uint64_t now_s,
		       uint8_t out[AUTH_REQ_LEN]);
/*
 * Check the node's reply to our request req: 0 and *role when it is an
 * accept whose MAC proves the node knows k; RS_E_AUTH otherwise (len 0:
 * the node checks no credentials).
 */
int auth_accept_check(const struct auth_key *k,
		      const uint8_t req[AUTH_REQ_LEN], const void *reply,
		      size_t len, unsigned *role);
/* A refusal's bytes (zero-padded by rdma_cm): the reason, or 0 when they
 * are not an auth reject. */
unsigned auth_reject_reason(const void *data, size_t len);

/* ---- node side ---- */

struct auth_replay_ent {
	uint64_t expire;	/* unix seconds: kept while now <= expire */
	uint64_t ts;		/* the request's time */
	uint8_t nonce[AUTH_NONCE_LEN];
};

/* One key's share of the replay cache. */
struct auth_replay {
	struct auth_replay_ent *ring;	/* [share] */
	uint32_t *index;		/* [2 * share]: ring slot + 1 or 0 */
	uint32_t head, count;
	uint64_t floor;			/* refuse times <= floor (0: none) */
};

struct auth_node {
	struct auth_key *keys;		/* sorted by id */
	struct auth_replay *replay;	/* [nkeys]: keys[i]'s share */
	size_t nkeys;
	uint32_t skew_s;
	uint32_t share;			/* entries per key */
	uint8_t hkey[crypto_shorthash_KEYBYTES];
	_Atomic uint64_t accepted;
	_Atomic uint64_t refused[AUTH_W_COUNT];
};

/* Copy n keys (ids must be distinct) and allocate the replay cache with
 * share entries per key (0: AUTH_REPLAY_SHARE; 40 bytes each). */
int auth_node_init(struct auth_node *a, const struct auth_key *keys,
		   size_t n, uint32_t skew_s, uint32_t share);
void auth_node_fini(struct auth_node *a);
const struct auth_key *auth_node_key(const struct auth_node *a, uint32_t id);
/* Key id's entries in the replay cache (0 for an unknown key). */
uint32_t auth_node_cached(const struct auth_node *a, uint32_t id);

/*
 * Check a connect request (priv, len) at time now_s. Accept: returns
 * AUTH_W_OK, *role and the accept reply in reply[AUTH_ACC_LEN]. Refuse:
 * returns the enum auth_why, reply holds the reject (AUTH_REJ_LEN bytes).
 * *reply_len is set either way. Counts the outcome.
 */
unsigned auth_node_check(struct auth_node *a, const void *priv, size_t len,
			 uint64_t now_s, unsigned *role, uint8_t *reply,
			 size_t *reply_len);

/* The role of an accepted connection from its request bytes (the key's
 * role; AUTH_ROLE_NONE when they are not a request of a known key). */
unsigned auth_node_role_of(const struct auth_node *a, const void *priv,
			   size_t len);

#endif
