/*
 * coord_etcd_reply.c - what the etcd gateway answers, read without curl
 * (coord_etcd_reply.h; the calls and the format: coord_etcd.c).
 *
 * Bounds: a reply is at most ETCD_REPLY_MAX bytes (coord_etcd_buf_add
 * refuses more while it arrives), a key COORD_KEY_MAX and a value
 * COORD_VALUE_MAX bytes decoded (checked on the base64 length before
 * anything is allocated), a range at most COORD_RANGE_MAX keys, a token
 * ETCD_TOKEN_MAX bytes. Absent fields hold their zero value (the
 * gateway leaves zeros out).
 */
#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "coord/coord_etcd_reply.h"

/* ---- bounded reply buffer ---- */

bool coord_etcd_buf_add(struct coord_etcd_buf *r, const char *d, size_t n)
{
	if (n > ETCD_REPLY_MAX - r->len) {
		r->over = true;
		return false;
	}
	if (r->len + n + 1 > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;
		char *p;

		while (cap < r->len + n + 1)
			cap *= 2;
		if (!(p = realloc(r->p, cap)))
			return false;
		r->p = p;
		r->cap = cap;
	}
	memcpy(r->p + r->len, d, n);
	r->len += n;
	r->p[r->len] = '\0';
	return true;
}

/* ---- JSON fields ---- */

/* The base64 string v (absent: empty) into a new NUL-terminated buffer of
 * at most max bytes. */
static int b64_take(json_t *v, size_t max, char **out, size_t *len)
{
	const char *s = v ? json_string_value(v) : "";
	size_t n, cap;

	*out = NULL;
	if (!s)
		return rs_seterr(RS_E_PROTO, "etcd: base64 field is not a "
				 "string");
	n = strlen(s);
	if (n / 4 * 3 > max + 3)
		return rs_seterr(RS_E_TOOBIG, "etcd: a field of %zu base64 "
				 "bytes (max %zu decoded)", n, max);
	cap = n / 4 * 3 + 1;
	if (!(*out = malloc(cap)))
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	if (sodium_base642bin((unsigned char *)*out, cap, s, n, NULL, len,
			      NULL, sodium_base64_VARIANT_ORIGINAL) ||
	    *len > max) {
		free(*out);
		*out = NULL;
		return rs_seterr(RS_E_PROTO, "etcd: bad base64 field");
	}
	(*out)[*len] = '\0';
	return 0;
}

int coord_etcd_get_i64(json_t *o, const char *k, int64_t *out)
{
	json_t *v = json_object_get(o, k);
	const char *s;
	char *end;

	*out = 0;
	if (!v)
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	s = json_string_value(v);
	if (!s || !*s)
		return rs_seterr(RS_E_PROTO, "etcd: field %s is not a number",
				 k);
	errno = 0;
	*out = strtoll(s, &end, 10);
	if (errno || *end)
		return rs_seterr(RS_E_PROTO, "etcd: field %s: '%.32s' is not "
				 "an int64", k, s);
	return 0;
}

int coord_etcd_header_rev(json_t *o, int64_t *rev)
{
	json_t *h = json_object_get(o, "header");

	if (!json_is_object(h))
		return rs_seterr(RS_E_PROTO, "etcd: reply without header");
	return coord_etcd_get_i64(h, "revision", rev);
}

/* gRPC status code of an etcd error reply to ours. */
static int map_grpc(int64_t code)
{
	switch (code) {
	case 3: /* InvalidArgument */
	case 9: /* FailedPrecondition */
		return RS_E_INVAL;
	case 1: /* Canceled: the member is shutting down */
		return -ECONNRESET;
	case 4: /* DeadlineExceeded */
	case 14: /* Unavailable */
		return RS_E_TIMEOUT;
	case 5: /* NotFound */
		return RS_E_NOTFOUND;
	case 8: /* ResourceExhausted */
		return RS_E_TOOBIG;
	case 7: /* PermissionDenied */
	case 16: /* Unauthenticated */
		return RS_E_PERM;
	default:
		return RS_E_PROTO;
	}
}

int coord_etcd_parse(const char *ep, const char *path,
		     const struct coord_etcd_buf *r, long http, json_t **out)
{
	json_error_t je;

	*out = r->p ? json_loadb(r->p, r->len, 0, &je) : NULL;
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return rs_seterr(RS_E_PROTO, "etcd %s%s: HTTP %ld, reply is "
				 "not a JSON object", ep, path, http);
	}
	if (http != 200 || json_object_get(*out, "error")) {
		json_t *msg = json_object_get(*out, "message");
		int64_t code = 0;
		int ret;

		if (!msg)
			msg = json_object_get(*out, "error");
		coord_etcd_get_i64(*out, "code", &code);
		/* etcd answers a request without a token, when
		 * authentication is on, with InvalidArgument */
		if (json_is_string(msg) && strstr(json_string_value(msg),
						  "user name is empty"))
			ret = rs_seterr(RS_E_PERM, "etcd %s%s: authentication "
					"is on and no user was given (coord.user "
					"and coord.password_file)",
					ep, path);
		else
			ret = rs_seterr(map_grpc(code), "etcd %s%s: HTTP %ld: "
					"%s", ep, path, http,
					json_is_string(msg) ?
						json_string_value(msg) :
						"(no message)");
		json_decref(*out);
		*out = NULL;
		return code == 16 ? ETCD_UNAUTHENTICATED : ret;
	}
	return 0;
}

int coord_etcd_token_reply(json_t *rep, const char *ep, const char *path,
			   char *tok, size_t cap)
{
	json_t *t = json_object_get(rep, "token");

	if (!json_is_string(t) || !json_string_length(t) ||
	    json_string_length(t) > ETCD_TOKEN_MAX ||
	    json_string_length(t) >= cap)
		return rs_seterr(RS_E_PROTO, "etcd %s%s: no token in the reply",
				 ep, path);
	snprintf(tok, cap, "%s", json_string_value(t));
	return 0;
}

/* ---- kv ---- */

static int take_kv(json_t *o, struct coord_kv *kv)
{
	int ret;

	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(o))
		return rs_seterr(RS_E_PROTO, "etcd: kv is not an object");
	if ((ret = b64_take(json_object_get(o, "key"), COORD_KEY_MAX,
			    &kv->key, &(size_t){ 0 })) ||
	    (ret = b64_take(json_object_get(o, "value"), COORD_VALUE_MAX,
			    &kv->value, &kv->value_len)) ||
	    (ret = coord_etcd_get_i64(o, "create_revision", &kv->create_rev)) ||
	    (ret = coord_etcd_get_i64(o, "mod_revision", &kv->mod_rev)) ||
	    (ret = coord_etcd_get_i64(o, "lease", &kv->lease))) {
		free(kv->key);
		free(kv->value);
		memset(kv, 0, sizeof(*kv));
	}
	return ret;
}

int coord_etcd_range_reply(json_t *rep, const char *key,
			   struct coord_kvs *out)
{
	json_t *kvs, *more;
	size_t n;
	int ret;

	memset(out, 0, sizeof(*out));
	if ((ret = coord_etcd_header_rev(rep, &out->rev)))
		return ret;
	more = json_object_get(rep, "more");
	if (json_is_true(more))
		return rs_seterr(RS_E_TOOBIG, "etcd: more than %d keys under "
				 "'%s'", COORD_RANGE_MAX, key);
	kvs = json_object_get(rep, "kvs");
	n = json_array_size(kvs);
	if (n > COORD_RANGE_MAX)
		return rs_seterr(RS_E_PROTO, "etcd: %zu keys over the limit",
				 n);
	if (n && !(out->kv = calloc(n, sizeof(*out->kv))))
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	for (size_t i = 0; i < n; i++) {
		if ((ret = take_kv(json_array_get(kvs, i), &out->kv[i]))) {
			coord_kvs_free(out);
			return ret;
		}
		out->n++;
	}
	return 0;
}

int coord_etcd_del_reply(json_t *rep, int64_t *rev)
{
	int64_t r, n = 0;
	int ret;

	if (!(ret = coord_etcd_header_rev(rep, &r)) &&
	    !(ret = coord_etcd_get_i64(rep, "deleted", &n)) && rev)
		*rev = r;
	if (!ret && (n < 0 || n > INT32_MAX))
		ret = rs_seterr(RS_E_PROTO, "etcd: deleted %" PRId64, n);
	return ret ? ret : (int)n;
}

int coord_etcd_txn_reply(json_t *rep, int64_t *rev)
{
	int64_t r;
	int ret = coord_etcd_header_rev(rep, &r);

	if (!ret && rev)
		*rev = r;
	if (!ret)
		ret = json_is_true(json_object_get(rep, "succeeded")) ? 1 : 0;
	return ret;
}

/* ---- leases ---- */

int coord_etcd_grant_reply(json_t *rep, int64_t *id)
{
	int ret = coord_etcd_get_i64(rep, "ID", id);

	if (!ret && *id == 0)
		ret = rs_seterr(RS_E_PROTO, "etcd: lease grant without an ID");
	return ret;
}

int coord_etcd_keepalive_reply(json_t *rep, int64_t id, int64_t *ttl_s)
{
	json_t *res = json_object_get(rep, "result");
	int64_t ttl = 0;
	int ret;

	if (!json_is_object(res))
		ret = rs_seterr(RS_E_PROTO, "etcd: keepalive reply without "
				"a result");
	else if (!(ret = coord_etcd_get_i64(res, "TTL", &ttl)) && ttl <= 0)
		ret = rs_seterr(RS_E_NOTFOUND, "etcd: lease %" PRId64
				" expired or unknown", id);
	if (!ret && ttl_s)
		*ttl_s = ttl;
	return ret;
}

/* ---- the watch stream ---- */

/* One complete line of the stream. true: stop the transfer. */
static bool watch_line(struct coord_etcd_watch *w, const char *s, size_t n)
{
	json_t *o = json_loadb(s, n, 0, NULL), *res, *ev;
	bool stop = false;

	if (!o) /* blank line or partial garbage: the reply's end decides */
		return false;
	res = json_object_get(o, "result");
	if (json_object_get(o, "error") || !json_is_object(res)) {
		json_t *m = json_object_get(o, "error");
		int64_t code = 0;

		if (json_is_object(m)) {
			coord_etcd_get_i64(m, "code", &code);
			w->unauth = code == 16;
			m = json_object_get(m, "message");
		}
		w->err = rs_seterr(RS_E_PROTO, "etcd watch: %s",
				   json_is_string(m) ? json_string_value(m) :
						       "unexpected reply");
		stop = true;
	} else if (json_is_true(json_object_get(res, "canceled"))) {
		/* compacted (or refused): the caller re-reads */
		coord_etcd_get_i64(res, "compact_revision", &w->rev);
		if (w->rev <= 0)
			coord_etcd_header_rev(res, &w->rev);
		if (w->rev <= 0)
			w->rev = 1;
		stop = true;
	} else if (json_array_size(ev = json_object_get(res, "events"))) {
		json_t *kv = json_object_get(json_array_get(ev, 0), "kv");

		coord_etcd_get_i64(kv, "mod_revision", &w->rev);
		if (w->rev <= 0)
			coord_etcd_header_rev(res, &w->rev);
		if (w->rev <= 0)
			w->rev = 1;
		stop = true;
	} else if (json_is_true(json_object_get(res, "created"))) {
		w->created = true;
	}
	json_decref(o);
	return stop;
}

bool coord_etcd_watch_feed(struct coord_etcd_watch *w, const char *d,
			   size_t len)
{
	size_t i = 0;

	while (i < len) {
		const char *nl = memchr(d + i, '\n', len - i);
		size_t part = nl ? (size_t)(nl - (d + i)) : len - i;

		if (!coord_etcd_buf_add(&w->line, d + i, part)) {
			/* an oversized batch: certainly a change */
			w->rev = w->rev > 0 ? w->rev : 1;
			return false;
		}
		i += part;
		if (nl) {
			i++;
			if (watch_line(w, w->line.p, w->line.len))
				return false;
			w->line.len = 0;
		}
	}
	return true;
}
