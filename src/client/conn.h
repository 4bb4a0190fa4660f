/*
 * conn.h - the client's connection contexts and their per-node pools
 * (internal, cli_).
 *
 * A connection context (struct cli_conn) is one RC queue pair to one memory
 * node plus what a call needs to use it alone: a registered buffer that
 * READs land in, and a scratch buffer for building request messages. A call
 * borrows at most one context per node for its whole duration, so nothing
 * on a context is shared between threads while it is borrowed: replies on
 * the QP belong to the borrower, READ destinations cannot collide.
 *
 * Pools (one per node): contexts are created lazily, up to
 * cfg->conns_per_node; a borrower that finds none free and the pool full
 * waits on a condition variable. A call that needs several nodes borrows in
 * increasing node order, so two calls can never wait on each other
 * (no cycle). A context whose QP failed is closed on return instead of
 * being put back; the next borrower connects afresh.
 *
 * Why pooled, not per-thread: trainers may run more threads than the node
 * should have QPs for (QP state thrashes the NIC cache), and a per-thread
 * context would need thread-exit hooks to be freed. A pool bounds the QPs
 * per node and lets any thread use any context.
 */
#ifndef CLI_CONN_H
#define CLI_CONN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "verbs/rv.h"

#define CLI_HOST_MAX 64
/* Registered READ landing zone per context. */
#define CLI_CONN_BUF_BYTES (8u << 20)
/* Largest message we accept from a node, and request messages we build. */
#define CLI_MSG_MAX (256u << 10)
/* Messages the node may have in flight to us (receive buffers). */
#define CLI_MSG_CREDITS 16
/* Requests we keep in flight per context before reading replies. */
#define CLI_RPC_WINDOW 6
/* A pooled context idle longer than this is checked before reuse. */
#define CLI_IDLE_CHECK_MS 100

struct cli_node;

struct cli_conn {
	struct cli_node *node;
	struct rv_conn *rc;
	struct rv_mr *buf;	 /* READ destinations, CLI_CONN_BUF_BYTES */
	uint8_t *msg;		 /* request scratch, msg_max bytes */
	uint32_t msg_max;	 /* the node's limit for our requests */
	uint32_t rd_depth;
	uint32_t max_batch_keys; /* the node's, from HELLO */
	uint64_t dir_generation; /* the node's, from HELLO */
	uint64_t last_used;	 /* ms, when last returned to the pool */
	struct cli_conn *next;	 /* free list */
	int failed;
	/* receive timeout of the next replies (0: the node's timeout_ms);
	 * a caller that waits for a long request sets it and clears it */
	unsigned recv_timeout_ms;
};

struct cli_pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct cli_conn *free;
	unsigned count; /* contexts that exist (free or borrowed) */
	unsigned max;
};

struct cli_node {
	unsigned idx;
	char *name; /* "addr:port" as configured */
	char host[CLI_HOST_MAX];
	uint16_t port;
	struct rv_dev *dev; /* shared by the client's nodes on one device */
	struct cli_pool pool;
	unsigned timeout_ms;
	/* the longest wait for a new connection and its hello when a call
	 * names none (0: timeout_ms); a cluster member's is short, as the
	 * call goes to another replica instead (cluster.c) */
	unsigned connect_ms;
	unsigned spin_us;
	const struct auth_key *key; /* the client's credentials, or NULL */
};

int cli_pool_init(struct cli_pool *p, unsigned max);
/* Close every free context; all must have been returned. */
void cli_pool_destroy(struct cli_pool *p);

/* Borrow a context for node n (connecting one if needed, waiting at most
 * connect_ms for the connection and the node's hello when connect_ms is
 * below the node's timeout; 0: the node's connect_ms). */
int cli_conn_get_within(struct cli_node *n, struct cli_conn **out,
			unsigned connect_ms);
static inline int cli_conn_get(struct cli_node *n, struct cli_conn **out)
{
	return cli_conn_get_within(n, out, 0);
}
/* Return it (closed instead if it failed). Accepts NULL. */
void cli_conn_put(struct cli_conn *c);

/* One request, one reply (up to CLI_RPC_WINDOW in flight per context). */
int cli_conn_send(struct cli_conn *c, const void *buf, size_t len);
/* Wait for the next reply; *m must be released with rv_msg_release. */
int cli_conn_recv(struct cli_conn *c, struct rv_msg *m);

/* Mark the context failed with code (returned), so that put closes it. */
int cli_conn_fail(struct cli_conn *c, int code);

#endif
