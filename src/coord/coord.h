/*
 * coord.h - the coordination store interface (internal, prefix coord_).
 *
 * Memory nodes and recstore-ctl keep membership, leases and the cluster
 * configuration in etcd (docs/replication.md). Everything above this file
 * (src/coord/membership.c) talks to a struct coord through the small
 * vtable below, so that it is unit-tested against the in-memory backend
 * (coord_mem.c, with a fake clock) and runs against etcd (coord_etcd.c,
 * the v3 JSON gRPC gateway over libcurl) unchanged.
 *
 * The model is etcd's: a flat, ordered map of string keys to byte values;
 * one store-wide revision that every change increments; each key carries
 * the revision that created it and the one that last changed it
 * (mod_rev); leases with a TTL that expire unless kept alive, deleting the
 * keys attached to them.
 *
 * Operations (all return 0 or a count on success, a negative code with an
 * rs_seterr message on failure; -ECONNREFUSED: the store is unreachable,
 * RS_E_TIMEOUT: it did not answer in time):
 *   range     one key, or every key under a prefix, in key order, with the
 *             store revision the read saw; at most COORD_RANGE_MAX keys
 *             (more: RS_E_TOOBIG).
 *   put       set a key, optionally attached to a lease (0: none).
 *   del       delete a key or a prefix; returns the number deleted.
 *   cas       compare-and-swap on mod_rev, one transaction: if the key's
 *             mod_rev equals `expect` (0: the key must not exist), put the
 *             value (or delete the key when val is NULL). Returns 1 when it
 *             applied, 0 when the compare failed (someone else changed the
 *             key first): the caller re-reads and decides again.
 *   lease_grant / lease_keepalive / lease_revoke
 *             TTLs are whole seconds (etcd's unit; etcd raises a TTL below
 *             its minimum, 2 s with default timing, to that minimum).
 *             keepalive returns RS_E_NOTFOUND once the lease has expired
 *             or was revoked: its keys are gone; grant a new one.
 *   wait      block until a key under `prefix` changes at a revision after
 *             `after` (returns 1, *rev = the revision of the change), or
 *             timeout_ms passes (returns 0). It never misses a change: the
 *             etcd backend opens a watch that starts at after + 1 (history
 *             replayed), so changes between the caller's read and its wait
 *             are seen. When that history was compacted away it returns 1
 *             as well: the caller re-reads, which is always safe. A set
 *             c->cancel flag ends it early (returns 0).
 *
 * Why a watch and not polling: a poll either costs a request every period
 * or reacts a period late; a watch opened at after + 1 wakes the decider
 * within one round trip of a lease expiring and costs nothing while the
 * cluster is quiet. Each wait is one bounded HTTP request (the gateway's
 * streaming /v3/watch, ended by us after the first event batch or the
 * timeout), so there is no long-lived stream state to recover.
 *
 * Sizes: keys up to COORD_KEY_MAX bytes, values up to COORD_VALUE_MAX
 * (a configuration of COORD's 1024 members is about 100 KiB), bounded
 * before anything is allocated from a reply.
 *
 * Concurrency: a struct coord may be used from several threads; each
 * backend serialises what it must. Ownership: coord_kvs_free() frees what
 * range returned; coord_close() destroys the backend.
 */
#ifndef RS_COORD_H
#define RS_COORD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COORD_KEY_MAX 512
#define COORD_VALUE_MAX (512u << 10)
#define COORD_RANGE_MAX 4096
#define COORD_MAX_TTL_S 3600

struct coord_kv {
	char *key;		/* NUL-terminated */
	char *value;		/* value_len bytes, NUL-terminated as well */
	size_t value_len;
	int64_t create_rev;
	int64_t mod_rev;
	int64_t lease;		/* 0: none */
};

struct coord_kvs {
	struct coord_kv *kv;
	size_t n;
	int64_t rev;		/* the store's revision when it was read */
};

struct coord;

struct coord_ops {
	const char *name;
	int (*range)(struct coord *c, const char *key, bool prefix,
		     struct coord_kvs *out);
	int (*put)(struct coord *c, const char *key, const void *val,
		   size_t len, int64_t lease, int64_t *rev);
	int (*del)(struct coord *c, const char *key, bool prefix,
		   int64_t *rev);
	int (*cas)(struct coord *c, const char *key, int64_t expect,
		   const void *val, size_t len, int64_t lease, int64_t *rev);
	int (*lease_grant)(struct coord *c, int64_t ttl_s, int64_t *id);
	int (*lease_keepalive)(struct coord *c, int64_t id, int64_t *ttl_s);
	int (*lease_revoke)(struct coord *c, int64_t id);
	int (*wait)(struct coord *c, const char *prefix, int64_t after,
		    int timeout_ms, int64_t *rev);
	void (*destroy)(struct coord *c);
};

struct coord {
	const struct coord_ops *ops;
	/* set: a wait() in progress returns 0 within about a second (the
	 * owner is stopping); NULL: never */
	const atomic_bool *cancel;
};

/* ---- the backends ---- */

/* etcd through its v3 JSON gateway. endpoints: comma-separated base URLs
 * ("http://10.0.0.1:2379,http://10.0.0.2:2379"), up to 8; a request that
 * cannot connect to one tries the next (the last one that worked is tried
 * first). timeout_ms bounds every request but wait (which has its own). */
int coord_etcd_new(struct coord **out, const char *endpoints, int timeout_ms);

/* The same with transport security and authentication (docs/replication.md,
 * "Running etcd in production"). Every field but endpoints may be NULL. */
struct coord_etcd_opts {
	const char *endpoints;
	int timeout_ms;
	/* https: the CA (PEM file) that signed the members' certificates;
	 * NULL: the system's CAs. A member's certificate must match the
	 * endpoint's host (name or IP). */
	const char *ca_file;
	/* a client certificate and its key (PEM files), for members started
	 * with --client-cert-auth; with etcd authentication on, the
	 * certificate's common name is the etcd user when no password is
	 * given */
	const char *cert_file, *key_file;
	/* etcd authentication by password: a token is fetched
	 * (/v3/auth/authenticate) before the first request and again when
	 * etcd says it expired. Refused over http:// (the password and the
	 * token would cross the network in clear). */
	const char *user, *password;
};
int coord_etcd_open(struct coord **out, const struct coord_etcd_opts *o);

/* What a node's or a tool's configuration names for the above: files, and
 * the user (the password is read from password_file when connecting).
 * Strings malloc'ed, NULL when absent. */
struct coord_etcd_files {
	char *ca_file, *cert_file, *key_file, *user, *password_file;
};
int coord_etcd_files_copy(struct coord_etcd_files *dst,
			  const struct coord_etcd_files *src); /* 0, -ENOMEM */
void coord_etcd_files_free(struct coord_etcd_files *f);
/* Open with them: the password file is read (16 to 256 bytes, one trailing
 * newline ignored; *world set when others may read it: warn) and wiped
 * after use. */
int coord_etcd_open_files(struct coord **out, const char *endpoints,
			  int timeout_ms, const struct coord_etcd_files *f,
			  bool *world);

/* In memory, with a fake clock that starts at 0 and moves only by
 * coord_mem_advance(): a lease expires when the clock reaches its deadline
 * (grant or last keepalive + TTL). wait() blocks on real time. */
int coord_mem_new(struct coord **out);
void coord_mem_advance(struct coord *c, int64_t ms);
/* While down, every operation fails with -ECONNREFUSED (an etcd outage);
 * leases still expire with the clock. */
void coord_mem_set_down(struct coord *c, bool down);

void coord_close(struct coord **c);
void coord_kvs_free(struct coord_kvs *k);
/* The end of the key range of a prefix, as etcd wants it: the prefix with
 * its last byte that is not 0xff incremented (and the rest cut); "" (all
 * keys up) when every byte is 0xff. out holds COORD_KEY_MAX + 1. */
void coord_prefix_end(const char *prefix, char *out);

/* ---- calls ---- */

static inline int coord_range(struct coord *c, const char *key, bool prefix,
			      struct coord_kvs *out)
{
	return c->ops->range(c, key, prefix, out);
}

static inline int coord_put(struct coord *c, const char *key, const void *v,
			    size_t len, int64_t lease, int64_t *rev)
{
	return c->ops->put(c, key, v, len, lease, rev);
}

static inline int coord_del(struct coord *c, const char *key, bool prefix,
			    int64_t *rev)
{
	return c->ops->del(c, key, prefix, rev);
}

static inline int coord_cas(struct coord *c, const char *key, int64_t expect,
			    const void *v, size_t len, int64_t lease,
			    int64_t *rev)
{
	return c->ops->cas(c, key, expect, v, len, lease, rev);
}

static inline int coord_lease_grant(struct coord *c, int64_t ttl_s,
				    int64_t *id)
{
	return c->ops->lease_grant(c, ttl_s, id);
}

static inline int coord_lease_keepalive(struct coord *c, int64_t id,
					int64_t *ttl_s)
{
	return c->ops->lease_keepalive(c, id, ttl_s);
}

static inline int coord_lease_revoke(struct coord *c, int64_t id)
{
	return c->ops->lease_revoke(c, id);
}

static inline int coord_wait(struct coord *c, const char *prefix,
			     int64_t after, int timeout_ms, int64_t *rev)
{
	return c->ops->wait(c, prefix, after, timeout_ms, rev);
}

/* Argument checks every backend makes (RS_E_INVAL / RS_E_TOOBIG). */
int coord_check_key(const char *key);
int coord_check_value(const void *val, size_t len);
int coord_check_ttl(int64_t ttl_s);

#endif
