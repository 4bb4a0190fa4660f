/*
 * fuzz_etcd_reply.c - libFuzzer harness for the reading of the etcd
 * gateway's replies (src/coord/coord_etcd_reply.c; clang only, see
 * tests/fuzz/CMakeLists.txt): what a member, or anything that answers on
 * its address, can hand a node.
 *
 * Input byte 0 chooses the call, byte 1 the rest of the set-up; the
 * remaining bytes are the reply:
 *   byte0 % 7 < 6  a unary call's body (range, deleterange, txn, grant,
 *                  keepalive, authenticate) with HTTP 200, or 400 if
 *                  byte 1 is odd: coord_etcd_parse, then that call's
 *                  reader;
 *   byte0 % 7 = 6  the watch stream, fed in pieces of 1 + byte1 % 64
 *                  bytes as curl would.
 * A reader succeeds with values within their bounds (keys, values, the
 * count of keys, a positive TTL, a token, a count that fits an int) or
 * fails with one of its documented codes and a message; a watch that
 * stopped saw a change or an error. Nothing may leak.
 * RS_FUZZ_SEED_DIR=dir: write replies of each call into dir and exit
 * (fuzz_seed.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "coord/coord_etcd_reply.h"
#include "fuzz_seed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { C_RANGE, C_DEL, C_TXN, C_GRANT, C_KEEPALIVE, C_TOKEN, C_WATCH,
       C_COUNT };

static const struct { uint8_t call, set; const char *body; } seeds[] = {
	{ C_RANGE, 0, "{\"header\":{\"cluster_id\":\"14841639068965178418\","
	  "\"member_id\":\"10276657743932975437\",\"revision\":\"42\","
	  "\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"cnMvbm9kZXMvYQ==\","
	  "\"create_revision\":\"5\",\"mod_revision\":\"41\",\"version\":"
	  "\"3\",\"value\":\"eyJhZGRyIjoiMTAuMC4wLjE6NzAwMCJ9\",\"lease\":"
	  "\"7587869283939441420\"},{\"key\":\"cnMvbm9kZXMvYg==\","
	  "\"create_revision\":\"6\",\"mod_revision\":\"6\",\"version\":"
	  "\"1\"}],\"count\":\"2\"}" },
	{ C_RANGE, 0, "{\"header\":{\"revision\":\"7\"},\"more\":true,"
	  "\"count\":\"5000\"}" },
	{ C_DEL, 0, "{\"header\":{\"revision\":\"43\"},\"deleted\":\"3\"}" },
	{ C_TXN, 0, "{\"header\":{\"revision\":\"44\"},\"succeeded\":true,"
	  "\"responses\":[{\"response_put\":{\"header\":{\"revision\":"
	  "\"44\"}}}]}" },
	{ C_TXN, 0, "{\"header\":{\"revision\":\"44\"}}" },
	{ C_GRANT, 0, "{\"header\":{\"revision\":\"44\"},\"ID\":"
	  "\"7587869283939441420\",\"TTL\":\"10\"}" },
	{ C_KEEPALIVE, 0, "{\"result\":{\"header\":{\"revision\":\"44\"},"
	  "\"ID\":\"7587869283939441420\",\"TTL\":\"10\"}}" },
	{ C_KEEPALIVE, 0, "{\"result\":{\"header\":{\"revision\":\"44\"},"
	  "\"ID\":\"7587869283939441420\"}}" },
	{ C_TOKEN, 0, "{\"header\":{\"revision\":\"44\"},\"token\":"
	  "\"kKzuHCpOYUbsBWHK.12\"}" },
	{ C_TOKEN, 1, "{\"error\":\"etcdserver: authentication failed, "
	  "invalid user ID or password\",\"code\":3,\"message\":"
	  "\"etcdserver: authentication failed, invalid user ID or "
	  "password\"}" },
	{ C_RANGE, 1, "{\"error\":\"etcdserver: invalid auth token\","
	  "\"code\":16,\"message\":\"etcdserver: invalid auth token\"}" },
	{ C_DEL, 1, "{\"error\":\"etcdserver: user name is empty\","
	  "\"code\":3,\"message\":\"etcdserver: user name is empty\"}" },
	{ C_GRANT, 1, "{\"error\":\"etcdserver: no leader\",\"code\":14}" },
	{ C_WATCH, 7, "{\"result\":{\"header\":{\"revision\":\"44\"},"
	  "\"created\":true}}\n{\"result\":{\"header\":{\"revision\":"
	  "\"45\"},\"events\":[{\"kv\":{\"key\":\"cnMvbm9kZXMvYQ==\","
	  "\"create_revision\":\"5\",\"mod_revision\":\"45\",\"value\":"
	  "\"eA==\"}}]}}\n" },
	{ C_WATCH, 63, "{\"result\":{\"header\":{\"revision\":\"44\"},"
	  "\"created\":true}}\n\n{\"result\":{\"header\":{\"revision\":"
	  "\"50\"},\"canceled\":true,\"compact_revision\":\"48\"}}\n" },
	{ C_WATCH, 0, "{\"error\":{\"grpc_code\":16,\"http_code\":401,"
	  "\"message\":\"etcdserver: invalid auth token\",\"code\":16}}\n" },
};

static void make_seeds(void)
{
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		uint8_t head[2] = { seeds[i].call, seeds[i].set };

		fuzz_seed_put_text("reply", i, head, sizeof(head),
				   seeds[i].body);
	}
}

FUZZ_SEED_INITIALIZE(make_seeds)

/* rc is a code of the reader's, with a message. */
static void expect_err(int rc)
{
	if (!rs_errormsg()[0])
		__builtin_trap();
	switch (rc) {
	case RS_E_PROTO: case RS_E_TOOBIG: case RS_E_INVAL: case RS_E_PERM:
	case RS_E_TIMEOUT: case RS_E_NOTFOUND: case -ECONNRESET:
	case -ENOMEM: case ETCD_UNAUTHENTICATED:
		return;
	default:
		__builtin_trap();
	}
}

static volatile uint8_t sink;	/* what check_kvs() read */

static void check_kvs(const struct coord_kvs *k)
{
	if (k->n > COORD_RANGE_MAX || (k->n && !k->kv))
		__builtin_trap();
	for (size_t i = 0; i < k->n; i++) {
		const struct coord_kv *kv = &k->kv[i];

		if (!kv->key || !kv->value || strlen(kv->key) > COORD_KEY_MAX ||
		    kv->value_len > COORD_VALUE_MAX ||
		    kv->value[kv->value_len] != '\0')
			__builtin_trap();
		if (kv->value_len)	/* read the ends */
			sink = (uint8_t)(kv->value[0] ^
					 kv->value[kv->value_len - 1]);
	}
}

static void unary(unsigned call, long http, const char *d, size_t n)
{
	struct coord_etcd_buf b = { 0 };
	struct coord_kvs kvs;
	char tok[ETCD_TOKEN_MAX + 1];
	int64_t v = -1;
	json_t *rep = NULL;
	int rc;

	if (!coord_etcd_buf_add(&b, d, n))
		goto out;
	rc = coord_etcd_parse("http://fuzz", "/v3/fuzz", &b, http, &rep);
	if (rc) {
		if (rep)
			__builtin_trap();
		expect_err(rc);
		goto out;
	}
	if (!json_is_object(rep))
		__builtin_trap();
	switch (call) {
	case C_RANGE:
		rc = coord_etcd_range_reply(rep, "rs/nodes/", &kvs);
		if (rc)
			expect_err(rc);
		if (rc && (kvs.n || kvs.kv))
			__builtin_trap();
		check_kvs(&kvs);
		coord_kvs_free(&kvs);
		break;
	case C_DEL:
		rc = coord_etcd_del_reply(rep, &v);
		if (rc < 0)
			expect_err(rc);
		break;
	case C_TXN:
		rc = coord_etcd_txn_reply(rep, &v);
		if (rc < 0)
			expect_err(rc);
		else if (rc > 1)
			__builtin_trap();
		break;
	case C_GRANT:
		rc = coord_etcd_grant_reply(rep, &v);
		if (rc)
			expect_err(rc);
		else if (v == 0)
			__builtin_trap();
		break;
	case C_KEEPALIVE:
		rc = coord_etcd_keepalive_reply(rep, 99, &v);
		if (rc)
			expect_err(rc);
		else if (v <= 0)
			__builtin_trap();
		break;
	default:
		rc = coord_etcd_token_reply(rep, "http://fuzz", "/v3/auth",
					    tok, sizeof(tok));
		if (rc)
			expect_err(rc);
		else if (!tok[0] || strlen(tok) > ETCD_TOKEN_MAX)
			__builtin_trap();
	}
out:
	json_decref(rep);
	free(b.p);
}

static void watch(size_t piece, const char *d, size_t n)
{
	struct coord_etcd_watch w = { 0 };
	bool more = true;

	for (size_t i = 0; more && i < n; i += piece)
		more = coord_etcd_watch_feed(&w, d + i,
					     n - i < piece ? n - i : piece);
	if (!more && w.rev <= 0 && !w.err)
		__builtin_trap();
	if (w.err)
		expect_err(w.err);
	free(w.line.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned call;

	if (size < 2)
		return 0;
	call = data[0] % C_COUNT;
	if (call == C_WATCH)
		watch(1 + data[1] % 64, (const char *)data + 2, size - 2);
	else
		unary(call, data[1] & 1 ? 400 : 200, (const char *)data + 2,
		      size - 2);
	return 0;
}
