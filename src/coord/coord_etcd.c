/*
 * coord_etcd.c - the etcd backend of coord.h, through etcd's v3 JSON gRPC
 * gateway (etcd 3.4: POST /v3/<service>/<method>, JSON bodies; keys and
 * values base64; 64-bit integers as decimal strings; fields that hold
 * their zero value are left out of replies, so an absent "succeeded" is
 * false and an absent "TTL" is 0).
 *
 * Calls used: /v3/kv/range, /v3/kv/put, /v3/kv/deleterange, /v3/kv/txn
 * (one compare on MOD revision, one put or delete), /v3/lease/grant,
 * /v3/lease/keepalive (a bidirectional stream in gRPC: the gateway sends
 * our one request and returns one {"result": ...}), /v3/lease/revoke and
 * /v3/watch (see wait below).
 *
 * Replies are read by coord_etcd_reply.c (no curl there, so that a
 * fuzzer reaches it): the JSON and its error, each call's fields, the
 * watch stream.
 *
 * Requests: libcurl easy handles. Unary calls share one handle under
 * `lock` (it keeps the HTTP connection open between calls); each wait()
 * uses a handle of its own, so a thread blocked in wait does not hold up
 * another's keepalive. Every request is bounded in time (timeout_ms; wait
 * by its own timeout) and every reply in size (ETCD_REPLY_MAX, checked
 * while it arrives, before it is parsed). Only http and https are allowed.
 *
 * Security (coord_etcd_open): https with a CA file and optionally a client
 * certificate and key on every handle; etcd authentication by password
 * through a token from /v3/auth/authenticate, sent as the Authorization
 * header, fetched again once when a request is refused as Unauthenticated
 * (an expired or revoked token; the request was not applied, so it is
 * sent again). A password is refused with an http:// endpoint.
 *
 * Endpoints: up to ETCD_MAX_ENDPOINTS; a request that cannot connect
 * (refused, unresolvable, connect timeout) tries the next one, starting
 * from the one that answered last. A request that reached a member and
 * failed there is not retried elsewhere: a put may have been applied.
 *
 * Errors: no connection to any endpoint -ECONNREFUSED; no answer in time
 * RS_E_TIMEOUT; an etcd error ({"error", "code"} with a gRPC code) is
 * mapped: NotFound (an expired lease) RS_E_NOTFOUND, InvalidArgument
 * RS_E_INVAL, ResourceExhausted RS_E_TOOBIG, Unavailable/DeadlineExceeded
 * (no leader) RS_E_TIMEOUT, Canceled (a member shutting down)
 * -ECONNRESET, others RS_E_PROTO; the message names the
 * endpoint, the call and etcd's text. A reply that does not parse as
 * expected is RS_E_PROTO.
 *
 * wait: POST /v3/watch {"create_request": {key, range_end, start_revision
 * = after + 1}}. The gateway streams one JSON object per line: first
 * {"result": {"created": true}}, then one per batch of events. The write
 * callback parses each line as it completes and ends the transfer on the
 * first batch with events, or on "canceled" (the revision was compacted:
 * reported as a change, the caller re-reads). A line longer than
 * ETCD_REPLY_MAX (a huge batch) is reported as a change too: always safe.
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth.h"
#include "common/netcut.h"
#include "common/rs_internal.h"
#include "coord/coord.h"
#include "coord/coord_etcd_reply.h"

#define ETCD_MAX_ENDPOINTS 8
#define ETCD_URL_MAX 256
#define ETCD_MIN_TIMEOUT_MS 10
#define ETCD_MAX_TIMEOUT_MS 600000
#define ETCD_CONNECT_TIMEOUT_MS 1000
#define ETCD_PATH_MAX 4096
#define ETCD_NAME_MAX 128	/* user names */
#define ETCD_PASS_MAX AUTH_SECRET_MAX

struct coord_etcd {
	struct coord c;
	pthread_mutex_t lock;	/* h */
	CURL *h;
	struct curl_slist *hdrs;	/* content type and the token, if any */
	char ep[ETCD_MAX_ENDPOINTS][ETCD_URL_MAX];
	char ca[ETCD_PATH_MAX], cert[ETCD_PATH_MAX], key[ETCD_PATH_MAX];
	char user[ETCD_NAME_MAX + 1], pass[ETCD_PASS_MAX + 1];
	char token[ETCD_TOKEN_MAX + 1];	/* under lock; "": none yet */
	unsigned nep;
	atomic_uint cur;	/* the endpoint that answered last */
	int timeout_ms;
};

static struct coord_etcd *etcd_of(struct coord *c)
{
	return (struct coord_etcd *)c;
}

/* ---- the reply buffer (coord_etcd_reply.h) ---- */

static size_t on_body(char *d, size_t sz, size_t n, void *arg)
{
	return coord_etcd_buf_add(arg, d, sz * n) ? sz * n : 0;
}

/* ---- JSON helpers ---- */

static json_t *b64_json(const void *p, size_t len)
{
	size_t cap = sodium_base64_ENCODED_LEN(len,
					       sodium_base64_VARIANT_ORIGINAL);
	char *s = malloc(cap);
	json_t *j;

	if (!s)
		return NULL;
	sodium_bin2base64(s, cap, p, len, sodium_base64_VARIANT_ORIGINAL);
	j = json_string(s);
	free(s);
	return j;
}

static json_t *i64_json(int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRId64, v);
	return json_string(s);
}

/* key (and the end of its prefix) into a request object */
static int set_key(json_t *req, const char *key, bool prefix)
{
	char end[COORD_KEY_MAX + 2];
	json_t *k = b64_json(key, strlen(key)), *e = NULL;

	if (prefix) {
		coord_prefix_end(key, end);
		/* "" would be the key "": etcd spells "every key up" "\0" */
		e = end[0] ? b64_json(end, strlen(end)) : json_string("AA==");
	}
	if (!k || (prefix && !e) || json_object_set_new(req, "key", k) ||
	    (e && json_object_set_new(req, "range_end", e)))
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	return 0;
}

/* ---- requests ---- */

/* Did the request reach a member? A reused connection has no connect
 * time, but it has a pre-transfer time; a failed connect has neither. */
static bool reached(CURL *h, long http)
{
	curl_off_t conn = 0, pre = 0;

	curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &conn);
	curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pre);
	return http != 0 || conn > 0 || pre > 0;
}

static bool connect_failed(CURLcode rc, bool reached_member)
{
	return rc == CURLE_COULDNT_CONNECT ||
	       rc == CURLE_COULDNT_RESOLVE_HOST ||
	       (rc == CURLE_OPERATION_TIMEDOUT && !reached_member);
}

/*
 * POST body to path on the endpoints, starting with the one that answered
 * last, until one connects. The write callback and its argument are the
 * caller's. *http: the status (0: no reply). A request that reached a
 * member is not sent to another (a put may have been applied there).
 * Returns the curl code.
 */
static CURLcode perform(struct coord_etcd *e, CURL *h, const char *path,
			const char *body, long timeout_ms, long *http,
			unsigned *used, struct curl_slist *hdrs)
{
	char url[ETCD_URL_MAX + 64];
	unsigned first = atomic_load(&e->cur);
	CURLcode rc = CURLE_COULDNT_CONNECT;

	*http = 0;
	if (rs_netcut("etcd"))	/* the test hook (common/netcut.h) */
		return rc;
	for (unsigned k = 0; k < e->nep; k++) {
		unsigned i = (first + k) % e->nep;
		long conn = timeout_ms < ETCD_CONNECT_TIMEOUT_MS ?
				    timeout_ms : ETCD_CONNECT_TIMEOUT_MS;

		snprintf(url, sizeof(url), "%s%s", e->ep[i], path);
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		if (e->ca[0])
			curl_easy_setopt(h, CURLOPT_CAINFO, e->ca);
		if (e->cert[0]) {
			curl_easy_setopt(h, CURLOPT_SSLCERT, e->cert);
			curl_easy_setopt(h, CURLOPT_SSLKEY, e->key);
		}
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, conn);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
		rc = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, http);
		*used = i;
		if (!connect_failed(rc, reached(h, *http))) {
			atomic_store(&e->cur, i);
			break;
		}
	}
	return rc;
}

static int curl_error(struct coord_etcd *e, CURLcode rc, unsigned used,
		      const char *path, bool over, long timeout_ms)
{
	if (over)
		return rs_seterr(RS_E_TOOBIG, "etcd %s%s: reply larger than "
				 "%u bytes", e->ep[used], path,
				 ETCD_REPLY_MAX);
	if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
		return rs_seterr(-ECONNREFUSED, "etcd %s%s: cannot connect "
				 "(%u endpoint%s tried): %s", e->ep[used],
				 path, e->nep, e->nep > 1 ? "s" : "",
				 curl_easy_strerror(rc));
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return rs_seterr(RS_E_TIMEOUT, "etcd %s%s: no answer in %ld ms",
				 e->ep[used], path, timeout_ms);
	return rs_seterr(-EIO, "etcd %s%s: %s", e->ep[used], path,
			 curl_easy_strerror(rc));
}

/* The content type and, with a token, the Authorization header. */
static struct curl_slist *headers(const char *token)
{
	char auth[ETCD_TOKEN_MAX + 32];
	struct curl_slist *l = curl_slist_append(NULL, "Content-Type: "
						 "application/json"), *t;

	if (!l || !token[0])
		return l;
	snprintf(auth, sizeof(auth), "Authorization: %s", token);
	if (!(t = curl_slist_append(l, auth)))
		curl_slist_free_all(l);
	sodium_memzero(auth, sizeof(auth));
	return t;
}

/* A token for e->user (e->lock held): e->token and e->hdrs. */
static int authenticate(struct coord_etcd *e)
{
	const char *path = "/v3/auth/authenticate";
	struct coord_etcd_buf r = { 0 };
	struct curl_slist *base = headers(""), *nh;
	json_t *req = json_pack("{s:s,s:s}", "name", e->user, "password",
				e->pass), *rep = NULL;
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	unsigned used = 0;
	long http = 0;
	CURLcode rc;
	int ret;

	json_decref(req);
	if (!body || !base) {
		free(body);
		curl_slist_free_all(base);
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	}
	curl_easy_setopt(e->h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e->h, CURLOPT_WRITEDATA, &r);
	rc = perform(e, e->h, path, body, e->timeout_ms, &http, &used, base);
	sodium_memzero(body, strlen(body));
	free(body);
	curl_slist_free_all(base);
	ret = rc != CURLE_OK ? curl_error(e, rc, used, path, r.over,
					  e->timeout_ms)
			     : coord_etcd_parse(e->ep[used], path, &r, http,
						&rep);
	if (!ret)
		ret = coord_etcd_token_reply(rep, e->ep[used], path, e->token,
					     sizeof(e->token));
	if (!ret) {
		if ((nh = headers(e->token))) {
			curl_slist_free_all(e->hdrs);
			e->hdrs = nh;
		} else {
			ret = rs_seterr(-ENOMEM, "etcd: out of memory");
		}
	}
	/* (Unauthenticated here too: no token to renew, a refusal; not
	 * the positive ETCD_UNAUTHENTICATED, which callers would take for
	 * a success) */
	if (ret == RS_E_PERM || ret == RS_E_INVAL ||
	    ret == ETCD_UNAUTHENTICATED)
		ret = rs_seterr(RS_E_PERM, "etcd: user '%s' could not "
				"authenticate: %s", e->user, rs_errormsg());
	json_decref(rep);
	if (r.p)
		sodium_memzero(r.p, r.len);
	free(r.p);
	return ret;
}

/* One unary call: req (consumed) to path; *out the parsed reply object. */
static int call(struct coord_etcd *e, const char *path, json_t *req,
		json_t **out)
{
	struct coord_etcd_buf r = { 0 };
	unsigned used = 0;
	long http = 0;
	CURLcode rc;
	char *body;
	int ret = 0;

	*out = NULL;
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body)
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	for (int attempt = 0;; attempt++) {
		pthread_mutex_lock(&e->lock);
		if (e->user[0] && !e->token[0])
			ret = authenticate(e);
		if (!ret) {
			curl_easy_setopt(e->h, CURLOPT_WRITEFUNCTION, on_body);
			curl_easy_setopt(e->h, CURLOPT_WRITEDATA, &r);
			rc = perform(e, e->h, path, body, e->timeout_ms, &http,
				     &used, e->hdrs);
		}
		pthread_mutex_unlock(&e->lock);
		if (ret)
			break;
		if (rc != CURLE_OK) {
			ret = curl_error(e, rc, used, path, r.over,
					 e->timeout_ms);
			break;
		}
		ret = coord_etcd_parse(e->ep[used], path, &r, http, out);
		if (ret != ETCD_UNAUTHENTICATED)
			break;
		/* the token expired or was revoked: refused before it was
		 * applied, so a new token and one more try */
		ret = RS_E_PERM;
		if (!e->user[0] || attempt)
			break;
		pthread_mutex_lock(&e->lock);
		e->token[0] = '\0';
		pthread_mutex_unlock(&e->lock);
		free(r.p);
		r = (struct coord_etcd_buf){ 0 };
		ret = 0;
	}
	free(body);
	free(r.p);
	return ret;
}

/* ---- kv ---- */

static int etcd_range(struct coord *c, const char *key, bool prefix,
		      struct coord_kvs *out)
{
	struct coord_etcd *e = etcd_of(c);
	json_t *req, *rep = NULL;
	int ret;

	memset(out, 0, sizeof(*out));
	if ((ret = coord_check_key(key)))
		return ret;
	if (!(req = json_object()) || (ret = set_key(req, key, prefix)) ||
	    json_object_set_new(req, "limit", json_integer(COORD_RANGE_MAX))) {
		json_decref(req);
		return ret ? ret : rs_seterr(-ENOMEM, "etcd: out of memory");
	}
	if (!(ret = call(e, "/v3/kv/range", req, &rep)))
		ret = coord_etcd_range_reply(rep, key, out);
	json_decref(rep);
	return ret;
}

static json_t *put_req(const char *key, const void *val, size_t len,
		       int64_t lease)
{
	json_t *req = json_object();

	if (!req || set_key(req, key, false) ||
	    json_object_set_new(req, "value", b64_json(val ? val : "", len)) ||
	    (lease && json_object_set_new(req, "lease", i64_json(lease)))) {
		json_decref(req);
		return NULL;
	}
	return req;
}

static int etcd_put(struct coord *c, const char *key, const void *val,
		    size_t len, int64_t lease, int64_t *rev)
{
	json_t *req, *rep;
	int64_t r;
	int ret;

	if ((ret = coord_check_key(key)) || (ret = coord_check_value(val, len)))
		return ret;
	if (!(req = put_req(key, val, len, lease)))
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	if ((ret = call(etcd_of(c), "/v3/kv/put", req, &rep)))
		return ret;
	ret = coord_etcd_header_rev(rep, &r);
	if (!ret && rev)
		*rev = r;
	json_decref(rep);
	return ret;
}

static int etcd_del(struct coord *c, const char *key, bool prefix,
		    int64_t *rev)
{
	json_t *req, *rep;
	int ret;

	if ((ret = coord_check_key(key)))
		return ret;
	if (!(req = json_object()) || (ret = set_key(req, key, prefix))) {
		json_decref(req);
		return ret ? ret : rs_seterr(-ENOMEM, "etcd: out of memory");
	}
	if ((ret = call(etcd_of(c), "/v3/kv/deleterange", req, &rep)))
		return ret;
	ret = coord_etcd_del_reply(rep, rev);
	json_decref(rep);
	return ret;
}

/* {"compare": [{MOD(key) == expect}], "success": [put or delete]} */
static json_t *cas_req(const char *key, int64_t expect, const void *val,
		       size_t len, int64_t lease)
{
	json_t *inner = val ? put_req(key, val, len, lease) : json_object();
	json_t *op = json_object(), *cmp = json_object(), *req = json_object();

	if (!inner || !op || !cmp || !req ||
	    (!val && set_key(inner, key, false)))
		goto nomem;
	/* set_new takes inner even when it fails */
	if (json_object_set_new(op, val ? "request_put" :
				"request_delete_range", inner)) {
		inner = NULL;
		goto nomem;
	}
	inner = NULL;
	if (set_key(cmp, key, false) ||
	    json_object_set_new(cmp, "target", json_string("MOD")) ||
	    json_object_set_new(cmp, "result", json_string("EQUAL")) ||
	    json_object_set_new(cmp, "mod_revision", i64_json(expect)) ||
	    json_object_set_new(req, "compare", json_pack("[O]", cmp)) ||
	    json_object_set_new(req, "success", json_pack("[O]", op)))
		goto nomem;
	json_decref(cmp);
	json_decref(op);
	return req;
nomem:
	json_decref(inner);
	json_decref(cmp);
	json_decref(op);
	json_decref(req);
	return NULL;
}

static int etcd_cas(struct coord *c, const char *key, int64_t expect,
		    const void *val, size_t len, int64_t lease, int64_t *rev)
{
	json_t *req, *rep;
	int ret;

	if ((ret = coord_check_key(key)) || (ret = coord_check_value(val, len)))
		return ret;
	if (expect < 0)
		return rs_seterr(RS_E_INVAL, "coord: cas on revision %" PRId64,
				 expect);
	if (!(req = cas_req(key, expect, val, len, lease)))
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	if ((ret = call(etcd_of(c), "/v3/kv/txn", req, &rep)))
		return ret;
	ret = coord_etcd_txn_reply(rep, rev);
	json_decref(rep);
	return ret;
}

/* ---- leases ---- */

static int etcd_lease_grant(struct coord *c, int64_t ttl_s, int64_t *id)
{
	json_t *req, *rep;
	int ret;

	if ((ret = coord_check_ttl(ttl_s)))
		return ret;
	if (!(req = json_pack("{s:I}", "TTL", (json_int_t)ttl_s)))
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	if ((ret = call(etcd_of(c), "/v3/lease/grant", req, &rep)))
		return ret;
	ret = coord_etcd_grant_reply(rep, id);
	json_decref(rep);
	return ret;
}

static int etcd_lease_keepalive(struct coord *c, int64_t id, int64_t *ttl_s)
{
	json_t *req, *rep;
	int ret;

	if (!(req = json_object()) ||
	    json_object_set_new(req, "ID", i64_json(id))) {
		json_decref(req);
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	}
	if ((ret = call(etcd_of(c), "/v3/lease/keepalive", req, &rep)))
		return ret;
	ret = coord_etcd_keepalive_reply(rep, id, ttl_s);
	json_decref(rep);
	return ret;
}

static int etcd_lease_revoke(struct coord *c, int64_t id)
{
	json_t *req, *rep;
	int ret;

	if (!(req = json_object()) ||
	    json_object_set_new(req, "ID", i64_json(id))) {
		json_decref(req);
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	}
	if ((ret = call(etcd_of(c), "/v3/lease/revoke", req, &rep)))
		return ret;
	json_decref(rep);
	return 0;
}

/* ---- wait: one watch, ended at the first batch of events ---- */

static size_t on_watch(char *d, size_t sz, size_t n, void *arg)
{
	return coord_etcd_watch_feed(arg, d, sz * n) ? sz * n : 0;
}

/* libcurl calls this about once a second at least: a set cancel flag ends
 * the watch */
static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
		       curl_off_t un)
{
	const struct coord_etcd_watch *w = arg;

	return w->cancel && atomic_load(w->cancel);
}

static int etcd_wait(struct coord *c, const char *prefix, int64_t after,
		     int timeout_ms, int64_t *rev)
{
	struct coord_etcd *e = etcd_of(c);
	json_t *req, *cr;
	struct coord_etcd_watch w = { 0 };
	unsigned used = 0;
	long http = 0;
	CURLcode rc;
	struct curl_slist *hdrs;
	char *body;
	CURL *h;
	int ret, hret;

	if ((ret = coord_check_key(prefix)))
		return ret;
	if (timeout_ms < ETCD_MIN_TIMEOUT_MS ||
	    timeout_ms > ETCD_MAX_TIMEOUT_MS)
		return rs_seterr(RS_E_INVAL, "etcd: wait timeout %d ms "
				 "(%d..%d)", timeout_ms, ETCD_MIN_TIMEOUT_MS,
				 ETCD_MAX_TIMEOUT_MS);
	cr = json_object();
	req = cr ? json_pack("{s:O}", "create_request", cr) : NULL;
	if (!req || set_key(cr, prefix, true) ||
	    json_object_set_new(cr, "start_revision", i64_json(after + 1)) ||
	    !(body = json_dumps(req, JSON_COMPACT))) {
		json_decref(cr);
		json_decref(req);
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	}
	json_decref(cr);
	json_decref(req);
	if (!(h = curl_easy_init())) {
		free(body);
		return rs_seterr(-ENOMEM, "etcd: curl_easy_init failed");
	}
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
	w.cancel = c->cancel;
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &w);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	/* its own copy of the headers: a unary call may renew the token */
	pthread_mutex_lock(&e->lock);
	hret = e->user[0] && !e->token[0] ? authenticate(e) : 0;
	hdrs = hret ? NULL : headers(e->token);
	pthread_mutex_unlock(&e->lock);
	if (hret || !hdrs) {
		curl_easy_cleanup(h);
		free(body);
		return hret ? hret : rs_seterr(-ENOMEM, "etcd: out of memory");
	}
	rc = perform(e, h, "/v3/watch", body, timeout_ms, &http, &used, hdrs);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	free(body);
	if ((w.unauth || http == 401) && e->user[0]) {
		/* the token expired: the caller's next call renews it (and
		 * re-reads what it waited for, as after any wake-up) */
		pthread_mutex_lock(&e->lock);
		e->token[0] = '\0';
		pthread_mutex_unlock(&e->lock);
		free(w.line.p);
		return 0;
	}
	free(w.line.p);
	if (w.err)
		return w.err;
	if (w.rev > 0) { /* we ended it: CURLE_WRITE_ERROR */
		if (rev)
			*rev = w.rev;
		return 1;
	}
	/* quiet until the timeout, or cancelled. A wait's timeout may be
	 * shorter than a connect on a loaded host, so even a timeout before
	 * the stream began is no error: the caller's next unary request,
	 * with its full timeout, finds out whether etcd is there. */
	if (rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_ABORTED_BY_CALLBACK)
		return 0;
	if (rc == CURLE_OK && http == 200)
		return 0; /* the member ended the stream: look again */
	if (rc == CURLE_OK)
		return rs_seterr(RS_E_PROTO, "etcd %s/v3/watch: HTTP %ld",
				 e->ep[used], http);
	return curl_error(e, rc, used, "/v3/watch", false, timeout_ms);
}

/* ---- set-up ---- */

static void etcd_destroy(struct coord *c)
{
	struct coord_etcd *e = etcd_of(c);

	curl_easy_cleanup(e->h);
	curl_slist_free_all(e->hdrs);
	pthread_mutex_destroy(&e->lock);
	sodium_memzero(e->pass, sizeof(e->pass));
	sodium_memzero(e->token, sizeof(e->token));
	free(e);
}

static const struct coord_ops etcd_ops = {
	.name = "etcd",
	.range = etcd_range,
	.put = etcd_put,
	.del = etcd_del,
	.cas = etcd_cas,
	.lease_grant = etcd_lease_grant,
	.lease_keepalive = etcd_lease_keepalive,
	.lease_revoke = etcd_lease_revoke,
	.wait = etcd_wait,
	.destroy = etcd_destroy,
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Split "URL,URL" into e->ep; each must be http:// or https://. */
static int parse_endpoints(struct coord_etcd *e, const char *list)
{
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, ",");

		while (n && p[n - 1] == '/') /* we append "/v3/..." */
			n--;
		if (e->nep == ETCD_MAX_ENDPOINTS)
			return rs_seterr(RS_E_INVAL, "etcd: more than %d "
					 "endpoints", ETCD_MAX_ENDPOINTS);
		if (n == 0 || n >= ETCD_URL_MAX)
			return rs_seterr(RS_E_INVAL, "etcd: endpoint %u: "
					 "length %zu (1..%d)", e->nep + 1, n,
					 ETCD_URL_MAX - 1);
		if (strncmp(p, "http://", 7) && strncmp(p, "https://", 8))
			return rs_seterr(RS_E_INVAL, "etcd: endpoint '%.*s' "
					 "is not an http:// or https:// URL",
					 (int)n, p);
		memcpy(e->ep[e->nep], p, n);
		e->ep[e->nep++][n] = '\0';
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
	}
	if (!e->nep)
		return rs_seterr(RS_E_INVAL, "etcd: no endpoint");
	return 0;
}

/* A path option into dst ("" when absent). */
static int copy_opt(const char *what, const char *v, char *dst, size_t cap)
{
	size_t n = v ? strlen(v) : 0;

	if (v && (n == 0 || n >= cap))
		return rs_seterr(RS_E_INVAL, "etcd: %s: length %zu (1..%zu)",
				 what, n, cap - 1);
	memcpy(dst, v ? v : "", n + 1);
	return 0;
}

static int set_security(struct coord_etcd *e, const struct coord_etcd_opts *o)
{
	int ret;

	if ((ret = copy_opt("ca_file", o->ca_file, e->ca, sizeof(e->ca))) ||
	    (ret = copy_opt("cert_file", o->cert_file, e->cert,
			    sizeof(e->cert))) ||
	    (ret = copy_opt("key_file", o->key_file, e->key,
			    sizeof(e->key))) ||
	    (ret = copy_opt("user", o->user, e->user, sizeof(e->user))) ||
	    (ret = copy_opt("password", o->password, e->pass,
			    sizeof(e->pass))))
		return ret;
	if (!e->cert[0] != !e->key[0])
		return rs_seterr(RS_E_INVAL, "etcd: a client certificate needs "
				 "both cert_file and key_file");
	if (!e->user[0] != !e->pass[0])
		return rs_seterr(RS_E_INVAL, "etcd: authentication needs both "
				 "a user and a password");
	for (unsigned i = 0; e->user[0] && i < e->nep; i++)
		if (strncmp(e->ep[i], "https://", 8))
			return rs_seterr(RS_E_INVAL, "etcd: endpoint %s: a "
					 "password is sent only over https",
					 e->ep[i]);
	return 0;
}

int coord_etcd_open(struct coord **out, const struct coord_etcd_opts *o)
{
	struct coord_etcd *e;
	int ret;

	*out = NULL;
	if (!o->endpoints)
		return rs_seterr(RS_E_INVAL, "etcd: no endpoint");
	if (o->timeout_ms < ETCD_MIN_TIMEOUT_MS ||
	    o->timeout_ms > ETCD_MAX_TIMEOUT_MS)
		return rs_seterr(RS_E_INVAL, "etcd: timeout %d ms (%d..%d)",
				 o->timeout_ms, ETCD_MIN_TIMEOUT_MS,
				 ETCD_MAX_TIMEOUT_MS);
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return rs_seterr(RS_E_UNSUPPORTED, "etcd: curl_global_init: %s",
				 curl_easy_strerror(curl_init_rc));
	if (!(e = calloc(1, sizeof(*e))))
		return rs_seterr(-ENOMEM, "etcd: out of memory");
	e->c.ops = &etcd_ops;
	e->timeout_ms = o->timeout_ms;
	pthread_mutex_init(&e->lock, NULL);
	if ((ret = parse_endpoints(e, o->endpoints)) ||
	    (ret = set_security(e, o)))
		goto free_e;
	e->h = curl_easy_init();
	e->hdrs = headers("");
	if (!e->h || !e->hdrs) {
		ret = rs_seterr(-ENOMEM, "etcd: out of memory");
		goto free_e;
	}
	*out = &e->c;
	return 0;
free_e:
	etcd_destroy(&e->c);
	return ret;
}

int coord_etcd_new(struct coord **out, const char *endpoints, int timeout_ms)
{
	struct coord_etcd_opts o = { .endpoints = endpoints,
				     .timeout_ms = timeout_ms };

	return coord_etcd_open(out, &o);
}

int coord_etcd_open_files(struct coord **out, const char *endpoints,
			  int timeout_ms, const struct coord_etcd_files *f,
			  bool *world)
{
	uint8_t pass[ETCD_PASS_MAX + 1];
	size_t len = 0;
	struct coord_etcd_opts o = {
		.endpoints = endpoints, .timeout_ms = timeout_ms,
		.ca_file = f->ca_file, .cert_file = f->cert_file,
		.key_file = f->key_file, .user = f->user,
	};
	int ret = 0;

	*out = NULL;
	*world = false;
	if (f->password_file) {
		ret = auth_secret_file(f->password_file, pass, &len, world);
		if (!ret && memchr(pass, 0, len))
			ret = rs_seterr(RS_E_INVAL, "%s: a NUL byte in the "
					"password", f->password_file);
		pass[len] = 0;
		o.password = (const char *)pass;
	}
	if (!ret)
		ret = coord_etcd_open(out, &o);
	sodium_memzero(pass, sizeof(pass));
	return ret;
}
