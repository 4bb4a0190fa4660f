/*
 * rv.h - the verbs layer: the only code of RecStore-C that calls ibv_* or
 * rdma_* (internal API, prefix rv_; design notes in docs/verbs.md).
 *
 * Objects and what must outlive what
 * ----------------------------------
 *   rv_dev       an RDMA device (opened by name or by the IP of its netdev)
 *                and one protection domain. Owns an async-event thread.
 *   rv_mr        a registered memory region: either allocated by rv_mem_alloc
 *                (huge pages when possible; freed with the MR) or caller
 *                memory registered by rv_mr_reg (the caller keeps ownership
 *                and must keep the memory mapped until rv_mr_free).
 *   rv_listener  an rdma_cm listening endpoint with a shared receive queue
 *                (SRQ) and one receive completion queue for every connection
 *                it accepts.
 *   rv_conn      one RC queue pair: a client connection (rv_connect) or an
 *                accepted one (delivered by rv_listener_event).
 *   rv_batch     caller-owned state of one asynchronous READ batch.
 *
 *   memory > rv_mr > rv_dev;  rv_conn (accepted) > rv_listener > rv_dev;
 *   rv_conn (client) > rv_dev.  Close children first: every rv_mr, conn and
 *   listener of a device before rv_dev_close(); every accepted conn before
 *   its listener (rv_listener_close() closes leftovers, invalidating any
 *   pointer the caller still holds).  Every *_close / *_free takes a pointer
 *   to the handle, accepts NULL and sets the handle to NULL.
 *   A received rv_msg may be released before or after its conn is closed
 *   (the conn's memory lives until its last message is released); its data
 *   is valid only until the release or the close, whichever comes first.
 *   Every message of a listener must be released before rv_listener_close.
 *
 * Error convention
 * ----------------
 * 0 (or a non-negative count) on success, a negative code on failure:
 * -errno for system errors, RS_E_* for ours; rs_errormsg() says what failed.
 * Connection failures are RS_E_DISCONNECTED (peer gone: rdma_cm
 * DISCONNECTED, REJECTED, device removal, or the connection was closed) or
 * RS_E_VERBS (a work completion failed: e.g. retries to a dead peer
 * exhausted, remote access error). Once a conn has failed every pending and
 * later operation on it fails with the same code; only rv_conn_close() is
 * left to do.
 *
 * Timeouts are in milliseconds: -1 waits for ever, 0 never blocks.
 *
 * Thread safety
 * -------------
 * - rv_dev and rv_mr are immutable after creation: use them from any thread.
 * - rv_conn: every data-path call (reads, batches, sends, receives,
 *   progress, status, stats) may be made from several threads at once; an
 *   internal mutex guards the QP, the send ring and the batch queue, and is
 *   never held while a thread sleeps. rv_conn_close() must be the last call
 *   on a conn, made when no other thread uses it.
 * - rv_listener: rv_listener_event() is for one thread at a time (the accept
 *   loop); rv_listener_recv() may be called from several worker threads.
 *   Closing an accepted conn must not race with the handling of an event
 *   for it (close it from the accept thread, or after its DISCONNECTED).
 * - Waiting is adaptive (poll the CQ for spin_us after the last completion,
 *   then arm the completion channel, poll again and sleep in poll(2)): an
 *   idle conn or listener costs no CPU.
 */
#ifndef RS_VERBS_RV_H
#define RS_VERBS_RV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rv_dev;
struct rv_conn;
struct rv_listener;

/* ------------------------------------------------------------------ */
/* Device and memory                                                   */
/* ------------------------------------------------------------------ */

/*
 * Open the device named `spec` (e.g. "rxe0"), or, when `spec` is an IPv4 or
 * IPv6 address, the device whose netdev holds that address (resolved with
 * rdma_cm); NULL or "" opens the first device. Allocates one PD.
 * Returns 0, RS_E_NODEV, -errno.
 */
int rv_dev_open(struct rv_dev **out, const char *spec);
void rv_dev_close(struct rv_dev **d);

struct rv_dev_caps {
	char name[64];
	uint32_t max_qp_wr;	  /* work requests per queue */
	uint32_t max_rd_atom;	  /* READs a QP may have outstanding */
	uint32_t max_srq_wr;
	uint32_t max_cqe;
	uint64_t max_mr_size;
	bool hugepages;		  /* MAP_HUGETLB worked at least once */
};
void rv_dev_caps(const struct rv_dev *d, struct rv_dev_caps *caps);

/* Access rights of a registration. 0 means RV_ACC_DEFAULT. */
enum {
	RV_ACC_LOCAL_WRITE = 1 << 0,	/* the NIC writes it (READ target, recv) */
	RV_ACC_REMOTE_READ = 1 << 1,	/* peers may READ it */
	RV_ACC_REMOTE_WRITE = 1 << 2,	/* peers may WRITE it (implies local) */
	RV_ACC_REMOTE_ATOMIC = 1 << 3,
};
#define RV_ACC_DEFAULT (RV_ACC_LOCAL_WRITE | RV_ACC_REMOTE_READ)

/* A registration. The four public fields are valid until rv_mr_free(). */
struct rv_mr {
	void *addr;
	size_t len;
	uint32_t lkey;
	uint32_t rkey;
	/* private to src/verbs */
	void *ibmr;
	size_t map_len;		/* != 0: we mmap'ed it and unmap it */
	bool huge;		/* backed by MAP_HUGETLB pages */
};

/*
 * Allocate `len` bytes (zeroed) and register them. Uses 2 MiB huge pages
 * (MAP_HUGETLB) when the system has them, otherwise 2 MiB-aligned anonymous
 * memory with MADV_HUGEPAGE. The memory is freed by rv_mr_free().
 */
int rv_mem_alloc(struct rv_dev *d, size_t len, unsigned access,
		 struct rv_mr **out);

/*
 * Register caller memory (e.g. a devdax PMEM mapping). The caller owns the
 * memory and must keep it mapped until rv_mr_free(). A refused registration
 * (e.g. fsdax pages, which cannot be pinned long-term) returns -EOPNOTSUPP
 * or -EINVAL with a message saying so.
 */
int rv_mr_reg(struct rv_dev *d, void *addr, size_t len, unsigned access,
	      struct rv_mr **out);
void rv_mr_free(struct rv_mr **mr);

/* ------------------------------------------------------------------ */
/* Connections                                                         */
/* ------------------------------------------------------------------ */

/* Caller bytes carried by the rdma_cm handshake (the rest is ours). */
#define RV_CONNECT_PRIV_MAX 44	/* client -> server (56 minus our 12) */
#define RV_ACCEPT_PRIV_MAX 184	/* server -> client (196 minus our 12) */
#define RV_REJECT_PRIV_MAX 148	/* server -> client in a refusal (IB REJ) */

struct rv_conn_attr {
	uint32_t msg_max;	/* largest message we receive (bytes); 4096 */
	uint16_t credits;	/* data messages the peer may have in flight to
				 * us: we keep credits+1 receive buffers of
				 * msg_max bytes for it; >= 3; 16 */
	uint16_t send_slots;	/* sends in flight (send ring slots); 16 */
	uint16_t rd_depth;	/* READs outstanding; 0: device maximum;
				 * capped by what the peer grants */
	uint16_t chain_max;	/* READ work requests per doorbell; 0: auto
				 * (rd_depth / 4) */
	uint32_t spin_us;	/* adaptive polling window; 50 */
	uint8_t ack_timeout;	/* QP local ACK timeout, 4.096us * 2^x; 14 */
	uint8_t retry_cnt;	/* transport retries (0-7); 6 */
	uint8_t rnr_retry;	/* RNR retries (0-7, 7 = for ever); 6 */
	int connect_timeout_ms;	/* address/route resolution + handshake; 5000 */
	const void *priv;	/* handshake bytes to send (copied); client:
				 * <= RV_CONNECT_PRIV_MAX */
	size_t priv_len;
	uint32_t keepalive_ms;	/* probe an idle peer this often (a zero-
				 * length RDMA WRITE; a peer that does not
				 * answer fails the conn); 0: never; 5000 */
	void *reject_buf;	/* client, optional: when the server refuses
				 * with bytes (its on_request hook's reply),
				 * rv_connect copies up to reject_cap of them
				 * here, zero-padded (rdma_cm pads them) */
	size_t reject_cap;
};
void rv_conn_attr_init(struct rv_conn_attr *a);

/*
 * Connect to `ip`:`port` through device `d` (the route must use d) with an
 * RC QP. On success *out is connected, the server's handshake bytes are
 * available through rv_conn_peer_data(), and receive buffers are posted.
 * Returns 0, -ECONNREFUSED (rejected, or nobody listens), RS_E_TIMEOUT,
 * RS_E_NODEV (the route uses another device), RS_E_INVAL, -errno.
 */
int rv_connect(struct rv_dev *d, const char *ip, uint16_t port,
	       const struct rv_conn_attr *a, struct rv_conn **out);

/*
 * Disconnect and free. Pending batches complete with RS_E_DISCONNECTED
 * (their request arrays must still be valid). Messages received on the conn
 * and not released yet stay safe to release: the conn's memory is freed by
 * the last rv_msg_release() (which then only gives the buffer back, without
 * returning a credit). Bounded: never waits more than about a second for
 * the device to flush.
 */
void rv_conn_close(struct rv_conn **c);

/* 0 while connected, else the failure code (rs_errormsg() then says why:
 * peer gone, keepalive unanswered, credits exceeded, a message without our
 * immediate data, a message larger than the receive buffer...). Consumes
 * pending rdma_cm events of a client conn, so it notices a peer that left
 * while the conn idled, and probes a client conn idle for keepalive_ms. */
int rv_conn_status(struct rv_conn *c);

/* The peer's handshake bytes (valid until close). */
const void *rv_conn_peer_data(const struct rv_conn *c, size_t *len);

uint32_t rv_conn_qp_num(const struct rv_conn *c);
uint32_t rv_conn_msg_max(const struct rv_conn *c);   /* peer's limit */
uint32_t rv_conn_rd_depth(const struct rv_conn *c);  /* READs in flight */
uint32_t rv_conn_chain_max(const struct rv_conn *c);
void rv_conn_set_user(struct rv_conn *c, void *user);
void *rv_conn_user(const struct rv_conn *c);

/* Counters; time is split between spinning (polling the CQ) and sleeping
 * in poll(2). Read racily (for metrics). */
struct rv_stats {
	uint64_t spin_ns;
	uint64_t block_ns;
	uint64_t wakeups;	/* returns from poll(2) */
	uint64_t reads;		/* READ work requests posted */
	uint64_t chains;	/* doorbells for READs */
	uint64_t sends;		/* data messages sent */
	uint64_t recvs;		/* data messages received */
	uint64_t credit_msgs;	/* credit-only messages sent */
};
void rv_conn_stats(const struct rv_conn *c, struct rv_stats *st);

/* One line of internal state (credits, rings, ops) for logs and debugging;
 * returns buf. */
const char *rv_conn_describe(struct rv_conn *c, char *buf, size_t len);

/*
 * Event-loop integration. rv_conn_fd() is a pollable fd (readable when the
 * conn has completions or, for a client conn, rdma_cm events); it can go
 * into the caller's epoll. Protocol: rv_conn_arm() (poll, re-arm, poll):
 * returns > 0 if it found work (call rv_conn_progress(), don't sleep), 0 if
 * it is safe to sleep on the fd; after waking, call rv_conn_progress(),
 * which consumes channel events, polls the CQ, completes batches, posts
 * queued READs, and returns the number of completions handled.
 */
int rv_conn_fd(struct rv_conn *c);
int rv_conn_arm(struct rv_conn *c);
int rv_conn_progress(struct rv_conn *c);

/* ------------------------------------------------------------------ */
/* Listener (server side)                                              */
/* ------------------------------------------------------------------ */

struct rv_listener_attr {
	struct rv_conn_attr conn;	/* for every accepted conn (priv and
					 * connect_timeout_ms unused) */
	uint32_t max_conns;	/* connections at once (SRQ sizing); 64 */
	uint32_t max_conns_per_peer; /* from one peer IP address (refused at
				 * the request, before any allocation); 0:
				 * no limit; 16 */
	int backlog;		/* rdma_listen backlog; 64 */
	/*
	 * Optional handshake hook, called from rv_listener_event() for each
	 * connection request with the client's bytes, before any resource
	 * (QP, buffers) is spent on it; fills up to RV_ACCEPT_PRIV_MAX reply
	 * bytes (*reply_len, initially 0) and returns 0 to accept or < 0 to
	 * reject. A rejection carries its reply bytes to the client when
	 * there are at most RV_REJECT_PRIV_MAX (see reject_buf). Without it
	 * every request is accepted with conn.priv as the reply.
	 */
	int (*on_request)(void *arg, const void *priv, size_t len,
			  void *reply, size_t *reply_len);
	void *arg;
};
void rv_listener_attr_init(struct rv_listener_attr *a);

/* Listen on ip:port (port 0: any free port, see rv_listener_port()). */
int rv_listen(struct rv_dev *d, const char *ip, uint16_t port,
	      const struct rv_listener_attr *a, struct rv_listener **out);
void rv_listener_close(struct rv_listener **l);
uint16_t rv_listener_port(const struct rv_listener *l);

enum rv_event_type {
	RV_EV_CONNECTED = 1,	/* ev->conn is new; the caller owns it */
	RV_EV_DISCONNECTED,	/* ev->conn's peer left; close it */
};
struct rv_event {
	enum rv_event_type type;
	struct rv_conn *conn;
};

/*
 * Run the accept loop: handles rdma_cm events (requests, establishment,
 * disconnects), conns that failed on this side, and the keepalive timer,
 * until an event is for the caller, then returns 0 with *ev filled;
 * RS_E_TIMEOUT if none came in time. A DISCONNECTED event comes once per
 * conn that was delivered as CONNECTED and not closed yet: when the peer
 * disconnected, and also when the node failed the conn (the peer broke the
 * protocol, exceeded its credits, sent a message larger than the receive
 * buffer, or did not answer keepalive probes: the conn is disconnected and
 * rv_conn_status() says why). rv_listener_fd() is readable when there is
 * work (an epoll fd); after it was readable call rv_listener_event(..., 0)
 * until RS_E_TIMEOUT. Keepalive (conn.keepalive_ms) runs here: an idle
 * listener wakes once per interval and probes each idle conn.
 */
int rv_listener_event(struct rv_listener *l, struct rv_event *ev,
		      int timeout_ms);
int rv_listener_fd(const struct rv_listener *l);

/* ------------------------------------------------------------------ */
/* One-sided READ                                                      */
/* ------------------------------------------------------------------ */

struct rv_read_req {
	void *local;		/* destination, inside a LOCAL_WRITE rv_mr */
	uint32_t lkey;
	uint32_t len;		/* bytes; 0 completes at once */
	uint64_t remote;	/* peer virtual address */
	uint32_t rkey;
	int status;		/* out: 0 or a negative code */
};

/*
 * Read every request; returns 0 if all succeeded, else the first failure
 * code (each req->status says which). Requests are posted as chains of up to
 * chain_max work requests, one doorbell per chain, only the last signaled;
 * never more than rd_depth READs outstanding. If a chain fails its requests
 * get the error, requests of chains that completed before keep status 0, and
 * every later one gets the conn's failure code. On timeout the conn is failed
 * (RS_E_TIMEOUT) so that nothing still points into `reqs`.
 */
int rv_read_batch(struct rv_conn *c, struct rv_read_req *reqs, size_t n,
		  int timeout_ms);

/*
 * Asynchronous form. `b` and `reqs` are the caller's and must stay valid and
 * untouched until rv_batch_done(b): the conn queues the batch, posts what the
 * in-flight bound allows and posts the rest as completions come in (during
 * rv_batch_wait, rv_conn_progress or any other call on the conn). Batches
 * complete in the order they were posted. Returns 0 or an error (nothing
 * queued).
 */
struct rv_batch {
	/* private to src/verbs */
	struct rv_read_req *reqs;
	uint32_t n;
	uint32_t posted;
	uint32_t done;
	int result;
	struct rv_batch *next;
};
int rv_read_post(struct rv_conn *c, struct rv_batch *b,
		 struct rv_read_req *reqs, size_t n);
static inline bool rv_batch_done(const struct rv_batch *b)
{
	return __atomic_load_n(&b->done, __ATOMIC_ACQUIRE) == b->n;
}
/* Wait for b: 0 / first failure code; RS_E_TIMEOUT leaves b pending. */
int rv_batch_wait(struct rv_conn *c, struct rv_batch *b, int timeout_ms);

/* ------------------------------------------------------------------ */
/* Two-sided messages                                                  */
/* ------------------------------------------------------------------ */

/*
 * A message is one SEND of 0..rv_conn_msg_max(c) bytes into one receive
 * buffer sized to the receiver's msg_max (no fragmentation: callers split
 * larger payloads). Credit-based flow control: a sender never has more
 * messages in flight than the receiver has buffers posted for it; credits
 * return in the immediate data of every message, or in an empty credit
 * message when traffic is one-way. Messages on one conn arrive in order.
 */
struct rv_msg {
	struct rv_conn *conn;	/* where it came from */
	void *data;		/* valid until rv_msg_release() */
	uint32_t len;
	/* private to src/verbs */
	uint32_t slot;
	void *pool;
};

/* Copy buf into a send slot and post it; waits for a slot and a credit up to
 * timeout (RS_E_TIMEOUT). buf is reusable on return. */
int rv_msg_send(struct rv_conn *c, const void *buf, size_t len,
		int timeout_ms);

/* Zero-copy form: reserve the next send slot (waiting as rv_msg_send does)
 * and get its address; write the message there, then rv_msg_post() it.
 * Returns the slot capacity (the peer's msg_max). Other senders on the conn
 * wait while a slot is reserved. */
int rv_msg_get_buf(struct rv_conn *c, void **buf, int timeout_ms);
int rv_msg_post(struct rv_conn *c, size_t len);

/* Receive up to max messages from a client conn (accepted conns receive
 * through rv_listener_recv). Returns the count (>= 1), RS_E_TIMEOUT, or the
 * conn's failure once no received message is left. */
int rv_msg_recv(struct rv_conn *c, struct rv_msg *msgs, int max,
		int timeout_ms);

/* Receive from any conn accepted by l (the shared receive queue). */
int rv_listener_recv(struct rv_listener *l, struct rv_msg *msgs, int max,
		     int timeout_ms);
int rv_listener_recv_fd(const struct rv_listener *l);
/* Receive-side counters of the listener (spin/sleep of rv_listener_recv). */
void rv_listener_stats(const struct rv_listener *l, struct rv_stats *st);

/* What peers did to the listener (monotonic, read racily; srq_buffers is a
 * gauge). For metrics and rate-limited logs of the listener's owner. */
struct rv_listener_counters {
	uint64_t rej_malformed;	/* requests without a valid handshake */
	uint64_t rej_limits;	/* handshake numbers out of range */
	uint64_t rej_full;	/* max_conns reached */
	uint64_t rej_per_peer;	/* max_conns_per_peer reached */
	uint64_t rej_refused;	/* on_request said no */
	uint64_t rej_resources;	/* could not allocate the conn */
	uint64_t credit_overruns; /* conns cut off: more messages than credits */
	uint64_t proto_errors;	/* no immediate, unknown type, bogus credits */
	uint64_t oversize;	/* message larger than the receive buffer */
	uint64_t ka_probes;	/* keepalive probes posted */
	uint64_t ka_failures;	/* conns failed by an unanswered probe */
	uint64_t failed;	/* conns failed on this side and disconnected */
	uint64_t srq_buffers;	/* receive buffers of the SRQ pool (gauge) */
};
void rv_listener_counters(const struct rv_listener *l,
			  struct rv_listener_counters *out);

/* Give the buffer back (re-posted; its credit returns to the sender). Safe
 * after the conn was closed or failed (then nothing returns to the sender).
 * Messages of a listener must be released before rv_listener_close(). */
void rv_msg_release(struct rv_msg *m);

#endif
