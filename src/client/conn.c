/*
 * conn.c - connection contexts and per-node pools (see conn.h).
 *
 * Opening a context: rv_connect() with our receive limit (CLI_MSG_MAX) and
 * credits and, when the client has credentials, a connect request MAC'ed
 * with them (src/common/auth.h) whose answer must prove that the node
 * knows the same secret; a refusal's reason (from the node's reject
 * bytes) becomes RS_E_AUTH. Then the HELLO exchange (cli_wire_hello(),
 * wire.c) that checks the protocol version. Then a CLI_CONN_BUF_BYTES READ landing zone is
 * registered (LOCAL_WRITE only: nobody reads or writes our memory).
 *
 * Locking: the pool mutex guards the free list and the count; it is never
 * held while connecting (a slow connect must not block returns), so the
 * count is raised first and lowered again if the connect fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "common/netcut.h"
#include "common/rs_internal.h"

int cli_pool_init(struct cli_pool *p, unsigned max)
{
	memset(p, 0, sizeof(*p));
	p->max = max;
	if (pthread_mutex_init(&p->lock, NULL))
		return rs_seterr(-ENOMEM, "pool: mutex");
	if (pthread_cond_init(&p->cond, NULL)) {
		pthread_mutex_destroy(&p->lock);
		return rs_seterr(-ENOMEM, "pool: condition variable");
	}
	return 0;
}

static void conn_close(struct cli_conn *c)
{
	if (!c)
		return;
	rv_conn_close(&c->rc);
	rv_mr_free(&c->buf);
	free(c->msg);
	free(c);
}

void cli_pool_destroy(struct cli_pool *p)
{
	while (p->free) {
		struct cli_conn *c = p->free;

		p->free = c->next;
		conn_close(c);
	}
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

/* A refused connect: RS_E_AUTH when the node said why in its reject. */
static int connect_refused(struct cli_node *n, int ret, const uint8_t *rej,
			   size_t len)
{
	unsigned why = auth_reject_reason(rej, len);
	char msg[256];

	if (ret == -ECONNREFUSED && why)
		return rs_seterr(RS_E_AUTH, "node %s: connect refused: %s",
				 n->name, auth_rej_text(why));
	/* rs_seterr() would overwrite the message while reading it */
	snprintf(msg, sizeof(msg), "%s",
		 rs_errormsg()[0] ? rs_errormsg() : rs_strerror(ret));
	return rs_seterr(ret, "node %s: connect: %s", n->name, msg);
}

/* With credentials: the node's accept must carry its proof. */
static int check_node(struct cli_node *n, struct cli_conn *c,
		      const uint8_t *req)
{
	const void *reply;
	size_t len = 0;
	unsigned role;
	int ret;

	if (!n->key)
		return 0;
	reply = rv_conn_peer_data(c->rc, &len);
	ret = auth_accept_check(n->key, req, reply, len, &role);
	if (ret) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", rs_errormsg());
		return rs_seterr(ret, "node %s: %s", n->name, msg);
	}
	return 0;
}

static int conn_open(struct cli_node *n, struct cli_conn **out,
		     unsigned connect_ms)
{
	uint8_t req[AUTH_REQ_LEN], rej[AUTH_REJ_LEN];
	struct rv_conn_attr a;
	struct cli_conn *c;
	int ret;

	c = calloc(1, sizeof(*c));
	if (!c)
		return rs_seterr(-ENOMEM, "node %s: out of memory", n->name);
	c->node = n;
	rv_conn_attr_init(&a);
	a.msg_max = CLI_MSG_MAX;
	a.credits = CLI_MSG_CREDITS;
	a.send_slots = CLI_MSG_CREDITS;
	a.connect_timeout_ms = (int)connect_ms;
	a.spin_us = n->spin_us;
	memset(rej, 0, sizeof(rej));
	a.reject_buf = rej;
	a.reject_cap = sizeof(rej);
	if (n->key) {
		auth_request_make(n->key, (uint64_t)time(NULL), req);
		a.priv = req;
		a.priv_len = sizeof(req);
	}
	ret = rv_connect(n->dev, n->host, n->port, &a, &c->rc);
	if (ret) {
		ret = connect_refused(n, ret, rej, sizeof(rej));
		goto close_conn;
	}
	if ((ret = check_node(n, c, req)))
		goto close_conn;
	c->msg_max = rv_conn_msg_max(c->rc);
	if (c->msg_max > CLI_MSG_MAX)
		c->msg_max = CLI_MSG_MAX;
	c->rd_depth = rv_conn_rd_depth(c->rc);
	c->msg = malloc(c->msg_max);
	if (!c->msg) {
		ret = rs_seterr(-ENOMEM, "node %s: out of memory", n->name);
		goto close_conn;
	}
	ret = rv_mem_alloc(n->dev, CLI_CONN_BUF_BYTES, RV_ACC_LOCAL_WRITE,
			   &c->buf);
	if (ret)
		goto close_conn;
	if (connect_ms < n->timeout_ms)
		c->recv_timeout_ms = connect_ms;
	ret = cli_wire_hello(c);
	c->recv_timeout_ms = 0;
	if (ret)
		goto close_conn;
	*out = c;
	return 0;

close_conn:
	conn_close(c);
	return ret;
}

/* The test hook cut the link to n (common/netcut.h): its idle
 * connections go, the call fails as a refused connect does. */
static int conn_cut(struct cli_node *n)
{
	struct cli_pool *p = &n->pool;
	struct cli_conn *idle;

	pthread_mutex_lock(&p->lock);
	idle = p->free;
	p->free = NULL;
	for (struct cli_conn *c = idle; c; c = c->next)
		p->count--;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	while (idle) {
		struct cli_conn *c = idle;

		idle = c->next;
		conn_close(c);
	}
	return rs_seterr(-ECONNREFUSED, "node %s: connect: link cut "
			 "(RS_TEST_NET_CUT)", n->name);
}

int cli_conn_get_within(struct cli_node *n, struct cli_conn **out,
			unsigned connect_ms)
{
	struct cli_pool *p = &n->pool;
	int ret;

	if (rs_netcut(n->name))
		return conn_cut(n);

	pthread_mutex_lock(&p->lock);
	while (!p->free && p->count >= p->max)
		pthread_cond_wait(&p->cond, &p->lock);
	while (p->free) {
		struct cli_conn *c = p->free;
		uint64_t now = rs_mono_ms();

		p->free = c->next;
		/* A context that idled a while may have lost its peer: look
		 * at its rdma_cm events (a system call, so not every time;
		 * a busy context learns of failures from its operations). */
		if (now - c->last_used < CLI_IDLE_CHECK_MS ||
		    rv_conn_status(c->rc) == 0) {
			pthread_mutex_unlock(&p->lock);
			*out = c;
			return 0;
		}
		p->count--;
		conn_close(c);
	}
	if (p->count >= p->max) {
		/* closed a dead one and the pool is still full: wait again */
		pthread_mutex_unlock(&p->lock);
		return cli_conn_get_within(n, out, connect_ms);
	}
	p->count++;
	pthread_mutex_unlock(&p->lock);

	if (!connect_ms)
		connect_ms = n->connect_ms;
	ret = conn_open(n, out, connect_ms && connect_ms < n->timeout_ms
					? connect_ms : n->timeout_ms);
	if (ret) {
		pthread_mutex_lock(&p->lock);
		p->count--;
		pthread_cond_signal(&p->cond);
		pthread_mutex_unlock(&p->lock);
	}
	return ret;
}

void cli_conn_put(struct cli_conn *c)
{
	struct cli_pool *p;

	if (!c)
		return;
	p = &c->node->pool;
	c->last_used = rs_mono_ms();
	if (c->failed) {
		conn_close(c);
		pthread_mutex_lock(&p->lock);
		p->count--;
	} else {
		pthread_mutex_lock(&p->lock);
		c->next = p->free;
		p->free = c;
	}
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

int cli_conn_fail(struct cli_conn *c, int code)
{
	c->failed = 1;
	return code;
}

int cli_conn_send(struct cli_conn *c, const void *buf, size_t len)
{
	int ret = rv_msg_send(c->rc, buf, len, (int)c->node->timeout_ms);

	if (ret < 0)
		return cli_conn_fail(c, rs_seterr(ret, "node %s: send: %s",
						  c->node->name,
						  rs_strerror(ret)));
	return 0;
}

int cli_conn_recv(struct cli_conn *c, struct rv_msg *m)
{
	unsigned t = c->recv_timeout_ms ? c->recv_timeout_ms
					: c->node->timeout_ms;
	int ret = rv_msg_recv(c->rc, m, 1, (int)t);

	if (ret < 0)
		return cli_conn_fail(c, rs_seterr(ret, "node %s: receive: %s",
						  c->node->name,
						  rs_strerror(ret)));
	return 0;
}
