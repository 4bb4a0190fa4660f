/*
 * coord_etcd_reply.h - reading what the etcd gateway answers (see
 * coord_etcd.c for the calls): the bounded reply buffer, a reply's JSON
 * and its error, and the fields of each call's reply and of the watch
 * stream. Pure functions over bytes and parsed JSON, no curl, so that
 * tests/fuzz/fuzz_etcd_reply.c reaches them; not an interface beyond
 * coord_etcd.c.
 *
 * Every function fails with RS_E_PROTO (a reply of the wrong shape),
 * RS_E_TOOBIG (a field over its bound), -ENOMEM, or, for an etcd error
 * reply, the code coord_etcd_parse() maps; the message is set.
 */
#ifndef RS_COORD_ETCD_REPLY_H
#define RS_COORD_ETCD_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "coord/coord.h"

#define ETCD_REPLY_MAX (4u << 20)
#define ETCD_TOKEN_MAX 512
/* coord_etcd_parse(): etcd said Unauthenticated (the message is set) */
#define ETCD_UNAUTHENTICATED 1

/* A reply as it arrives, NUL-terminated; the owner frees p. */
struct coord_etcd_buf {
	char *p;
	size_t len, cap;
	bool over;		/* more than ETCD_REPLY_MAX arrived */
};

/* Append n bytes: false when over ETCD_REPLY_MAX (b->over) or out of
 * memory. */
bool coord_etcd_buf_add(struct coord_etcd_buf *b, const char *d, size_t n);

/* An int64 field of o: a decimal string (the gateway's form) or a JSON
 * integer; absent: 0. */
int coord_etcd_get_i64(json_t *o, const char *k, int64_t *out);
/* o's header.revision. */
int coord_etcd_header_rev(json_t *o, int64_t *rev);

/* The reply in b (HTTP status http, from endpoint ep and call path, for
 * the message) as a JSON object in *out (the caller's reference), or the
 * error it holds (ETCD_UNAUTHENTICATED for gRPC code 16). */
int coord_etcd_parse(const char *ep, const char *path,
		     const struct coord_etcd_buf *b, long http, json_t **out);

/* The replies of each call (rep: what coord_etcd_parse returned). */
/* /v3/auth/authenticate: its token into tok (cap > ETCD_TOKEN_MAX). */
int coord_etcd_token_reply(json_t *rep, const char *ep, const char *path,
			   char *tok, size_t cap);
/* /v3/kv/range of key: out (freed with coord_kvs_free; empty on error). */
int coord_etcd_range_reply(json_t *rep, const char *key,
			   struct coord_kvs *out);
/* /v3/kv/deleterange: the count deleted, *rev (may be NULL). */
int coord_etcd_del_reply(json_t *rep, int64_t *rev);
/* /v3/kv/txn: 1 if it succeeded, else 0; *rev (may be NULL). */
int coord_etcd_txn_reply(json_t *rep, int64_t *rev);
/* /v3/lease/grant: the lease's id. */
int coord_etcd_grant_reply(json_t *rep, int64_t *id);
/* /v3/lease/keepalive of lease id: its TTL left (RS_E_NOTFOUND: none). */
int coord_etcd_keepalive_reply(json_t *rep, int64_t id, int64_t *ttl_s);

/* The watch stream, fed as it arrives. */
struct coord_etcd_watch {
	const atomic_bool *cancel;
	struct coord_etcd_buf line;	/* the line being received */
	int64_t rev;		/* > 0: a change was seen */
	int err;		/* an error the stream reported */
	bool created;
	bool unauth;		/* that error: Unauthenticated (the token) */
};

/* Feed len bytes of the stream: false when the watch is over (a change,
 * rev > 0, or an error, err). w->line.p is the caller's to free. */
bool coord_etcd_watch_feed(struct coord_etcd_watch *w, const char *d,
			   size_t len);

#endif
