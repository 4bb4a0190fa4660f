/*
 * srv_auth.c - who may connect to the node and with what role (design and
 * threat model: docs/security.md; bytes and checks: src/common/auth.h).
 *
 * With no credentials configured the node behaves as it always did: no
 * on_request hook, every connection is admin, and the log says so at
 * start. With credentials, the listener's on_request hook
 * (srv_auth_on_request) checks each connect request on the run thread
 * before rv allocates a QP or a buffer for it: a request without a valid
 * MAC of a known key, fresh in time and never seen before, is refused in
 * the rdma_cm handshake, with a reason code and nothing else. An accepted
 * connection's role is found again by conn_of() (server.c) from the same
 * request bytes (srv_auth_conn_role); srv_handle() checks every request's
 * opcode against it before any work. Its key id (srv_auth_conn_key) is
 * the account its exactly-once records count to (srv_once.c).
 *
 * The node's own wake connection (server.c) carries no credentials: the
 * hook accepts its 16 bytes once, while the node's own connect is
 * expected (wake_pending), and refuses them afterwards, so a captured copy
 * is worth nothing. Its conn gets role NONE (the node ignores its
 * messages anyway).
 *
 * Refusals are counted per reason (metric rs_auth_refused_total{reason},
 * STATS auth_refused) and logged; the log line is the one place here a
 * peer can cause, marked RATE-LIMITED below.
 *
 * Threads: the hook and auth_node_check() run on the run thread only (the
 * replay cache has no lock); srv_auth_conn_role() reads immutable keys
 * from any worker; the counters are relaxed atomics.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/le.h"
#include "server/srv_internal.h"

static double rd_accepted(void *arg)
{
	struct rs_server *s = arg;

	return (double)atomic_load_explicit(&s->auth.accepted,
					    memory_order_relaxed);
}

static double rd_refused(void *arg)
{
	_Atomic uint64_t *v = arg;

	return (double)atomic_load_explicit(v, memory_order_relaxed);
}

static int register_metrics(struct rs_server *s)
{
	struct metrics_counter *m;
	int ret;

	if (!s->m.reg)
		return 0;
	ret = metrics_counter_fn(s->m.reg, &m, "rs_auth_accepted_total",
				 "Connect requests with valid credentials",
				 rd_accepted, s, NULL);
	for (unsigned w = AUTH_W_OK + 1; !ret && w < AUTH_W_COUNT; w++)
		ret = metrics_counter_fn(s->m.reg, &s->m_auth[w],
					 "rs_auth_refused_total",
					 "Connect requests refused at the "
					 "credential check", rd_refused,
					 &s->auth.refused[w], "reason",
					 auth_why_name(w), NULL);
	return ret;
}

int srv_auth_open(struct rs_server *s)
{
	int ret;

	if (!s->cfg.ncreds)
		return 0;
	ret = auth_node_init(&s->auth, s->cfg.creds, s->cfg.ncreds,
			     s->cfg.auth_skew_s, 0);
	if (ret)
		return srv_err(ret, "auth: %s", rs_errormsg());
	s->auth_on = true;
	ret = register_metrics(s);
	if (ret)
		return srv_err(ret, "auth metrics: %s", rs_errormsg());
	return 0;
}

void srv_auth_announce(struct rs_server *s)
{
	unsigned n[AUTH_ROLE_ADMIN + 1] = { 0 };

	if (!s->auth_on) {
		srv_warn("no credentials configured: any peer that reaches %s "
			"is admin; use only on a trusted network",
			s->listen_addr);
		return;
	}
	for (size_t i = 0; i < s->auth.nkeys; i++)
		n[s->auth.keys[i].role]++;
	srv_log("credentials required: %zu key(s) (admin %u, data %u, read "
		"%u), clock skew up to %u s", s->auth.nkeys,
		n[AUTH_ROLE_ADMIN], n[AUTH_ROLE_DATA], n[AUTH_ROLE_READ],
		s->auth.skew_s);
}

void srv_auth_close(struct rs_server *s)
{
	if (s->auth_on)
		auth_node_fini(&s->auth);
	s->auth_on = false;
}

/* RATE-LIMITED: the one log line a peer can cause here. At most one line
 * per second; the lines skipped meanwhile are counted into the next one.
 * A refusal after the MAC check (replay, busy) names its key, so that the
 * operator learns which key is over its share of the replay cache.
 * (Run thread only. To be replaced by the shared rate limiter.) */
static void log_refusal(unsigned why, const void *priv, size_t len)
{
	char key[32] = "";
	static time_t last;
	static uint64_t skipped;
	time_t now = time(NULL);

	if (now == last) {
		skipped++;
		return;
	}
	last = now;
	if ((why == AUTH_W_REPLAY || why == AUTH_W_BUSY) &&
	    len == AUTH_REQ_LEN)
		snprintf(key, sizeof(key), " of key %u",
			 le_ld32((const uint8_t *)priv + 4));
	srv_warn("connect request refused: credentials%s %s (%" PRIu64 " more "
		"refusals not logged)", key, auth_why_name(why), skipped);
	skipped = 0;
}

static bool is_wake(struct rs_server *s, const void *priv, size_t len)
{
	return len == SRV_WAKE_LEN && !memcmp(priv, s->wake_msg, len) &&
	       atomic_exchange(&s->wake_pending, false);
}

int srv_auth_on_request(void *arg, const void *priv, size_t len,
			void *reply, size_t *reply_len)
{
	struct rs_server *s = arg;
	unsigned why, role;

	if (is_wake(s, priv, len))
		return 0;
	why = auth_node_check(&s->auth, priv, len, (uint64_t)time(NULL),
			      &role, reply, reply_len);
	if (why == AUTH_W_OK)
		return 0;
	log_refusal(why, priv, len);
	return RS_E_AUTH;
}

unsigned srv_auth_conn_role(struct rs_server *s, const void *priv,
			    size_t len)
{
	if (!s->auth_on)
		return AUTH_ROLE_ADMIN;
	return auth_node_role_of(&s->auth, priv, len);
}

uint32_t srv_auth_conn_key(struct rs_server *s, const void *priv,
			   size_t len)
{
	if (!s->auth_on || auth_node_role_of(&s->auth, priv, len) ==
				   AUTH_ROLE_NONE)
		return 0;
	return le_ld32((const uint8_t *)priv + 4);
}

uint64_t srv_auth_refused(struct rs_server *s)
{
	uint64_t n = 0;

	for (unsigned w = 0; w < AUTH_W_COUNT; w++)
		n += atomic_load_explicit(&s->auth.refused[w],
					  memory_order_relaxed);
	return n;
}
