/*
 * rv_internal.h - structures shared by the files of src/verbs (not an API).
 *
 * Locks and their order (never take one to the left while holding one to
 * the right):   listener.cm_lock -> listener.rq_lock -> conn.lock -> dev.lock
 *   dev.lock        the device's list of conns (for port/device failures)
 *   conn.lock       the QP's send side, the conn's own CQ, op ring, batch
 *                   queue, send ring, client receive queue
 *   listener.rq_lock the shared receive CQ, qp_num map, ready queue, pool
 *   listener.cm_lock accepted ids' context pointers and conn states
 * Atomics without a lock: conn.fail (first failure wins; its message is
 * published by conn.fail_msg_set), conn.credits and
 * conn.token (added by whoever polls the receive CQ, spent under
 * conn.lock), conn.owed (added by rv_msg_release) and conn.ack_pending
 * (set by the receive CQ poller), both taken under conn.lock; counters;
 * conn.refs (a reference per message out, see rv_conn.c "Lifetime");
 * listener.fail_pending (set by rv_conn_fail, taken by the accept loop).
 */
#ifndef RS_VERBS_RV_INTERNAL_H
#define RS_VERBS_RV_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "common/rs_internal.h"
#include "verbs/rv.h"
#include "verbs/rv_logic.h"

/* wr_id space: receive buffers carry RV_WRID_RECV | slot; the drain WR has
 * RV_WRID_DRAIN; every other send-queue WR carries its op sequence. */
#define RV_WRID_RECV (1ull << 63)
#define RV_WRID_DRAIN (1ull << 62)
#define RV_CTRL_MAX 4		/* credit messages in flight */
#define RV_PROBE_MAX 1		/* keepalive probes in flight */
#define RV_DRAIN_MS 1000	/* bound on waiting for a flush to finish */

static inline void rv_stat_add(uint64_t *p, uint64_t v)
{
	__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

/* A counter with one writer at a time (the writer holds the owner's lock)
 * and racy readers (rv_conn_stats): a relaxed load and store, no locked
 * instruction, but no torn or undefined read either. */
static inline void rv_stat_bump(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
}

/* ---- device ---- */
struct rv_dev {
	struct ibv_context **list;	/* rdma_get_devices(): keeps ctx open */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	char name[64];
	struct sockaddr_storage ip;	/* when opened by address */
	bool has_ip;
	atomic_bool huge_ok;		/* set by any thread's allocation */
	uint32_t max_msg;		/* port's max_msg_sz */
	pthread_t async_thr;
	int wake_fd;			/* eventfd stopping the async thread */
	pthread_mutex_t lock;		/* conns list */
	struct rv_conn *conns;
	atomic_int fatal;
};

void rv_dev_link(struct rv_dev *d, struct rv_conn *c);
void rv_dev_unlink(struct rv_dev *d, struct rv_conn *c);

/* ---- completion queue + channel ---- */
struct rv_cq {
	struct ibv_cq *cq;
	struct ibv_comp_channel *ch;	/* fd is O_NONBLOCK */
	pthread_mutex_t *lock;		/* the owner's lock */
	unsigned unacked;
};

/* Create cq with `cqe` entries and its channel; *lock guards it. */
int rv_cq_create(struct rv_dev *d, struct rv_cq *q, int cqe,
		 pthread_mutex_t *lock);
void rv_cq_destroy(struct rv_cq *q);
/* Caller holds q->lock. */
int rv_cq_arm_locked(struct rv_cq *q);
void rv_cq_take_events_locked(struct rv_cq *q);

/* ---- adaptive wait ---- */
struct rv_waitfd {
	int fd;
	struct rv_cq *cq;		/* channel fd of this cq, or NULL */
	void (*on_ready)(void *arg);	/* for fds that are not a cq */
};

struct rv_wait {
	struct rv_waitfd fds[4];
	int nfds;
	int (*progress)(void *arg);	/* poll CQs; completions handled */
	/* optional: arm every CQ of fds, then progress, in one go (one
	 * lock); NULL: each CQ armed under its lock, then progress */
	int (*arm_progress)(void *arg);
	int (*check)(void *arg);	/* 1 done, 0 not yet, < 0 error */
	int (*sleep_cap_ms)(void *arg);	/* < 0: no cap */
	void *arg;
	uint64_t spin_ns;
	struct rv_stats *st;
	/* the caller progressed and checked (not done) just before: the
	 * first round starts at the spin test, not with another poll */
	bool polled;
};

/* Returns 0 (check said done), check's error, or RS_E_TIMEOUT. */
int rv_wait_run(const struct rv_wait *w, int timeout_ms);
/* The same from `now` (rs_mono_ns(), just read) to the absolute deadline
 * `deadline` (UINT64_MAX: none). */
int rv_wait_until(const struct rv_wait *w, uint64_t now, uint64_t deadline);

/* ---- receive buffer pool (client RQ or listener SRQ) ---- */
struct rv_pool {
	uint32_t size;			/* bytes per buffer */
	uint32_t per_chunk;
	uint32_t max_chunks;
	_Atomic uint32_t nchunks;
	struct rv_mr **chunks;		/* [max_chunks], filled in order */
	struct ibv_qp *qp;		/* one of qp / srq */
	struct ibv_srq *srq;
};

int rv_pool_init(struct rv_pool *p, uint32_t size, uint32_t per_chunk,
		 uint32_t max_chunks);
/* Add and post one chunk (caller serialises growth). */
int rv_pool_grow(struct rv_pool *p, struct rv_dev *d);
void rv_pool_fini(struct rv_pool *p);
void *rv_pool_addr(const struct rv_pool *p, uint32_t slot);
int rv_pool_post(struct rv_pool *p, uint32_t slot);

/* ---- connection ---- */
enum rv_op_kind { RV_OP_READ = 1, RV_OP_SEND, RV_OP_CREDIT, RV_OP_PROBE };

struct rv_op {
	uint8_t kind;
	uint16_t nwr;
	uint32_t first;
	uint32_t count;
	struct rv_batch *batch;
};

enum rv_conn_state {
	RV_CS_CONNECTING = 1,	/* client before ESTABLISHED */
	RV_CS_ACCEPTING,	/* accepted id before ESTABLISHED */
	RV_CS_CONNECTED,
	RV_CS_DISCONNECTED,	/* DISCONNECTED delivered to the caller */
};

struct rv_rxent {
	uint32_t slot;
	uint32_t len;
};

struct rv_conn {
	struct rv_dev *dev;
	struct rv_listener *l;		/* accepted: its listener */
	struct rdma_cm_id *id;
	struct rdma_event_channel *ech;	/* client: own; accepted: NULL */
	struct ibv_qp *qp;
	uint32_t qp_num;
	pthread_mutex_t lock;
	struct rv_cq cq;		/* client: send+recv; accepted: send */
	atomic_int fail;
	/* written once, by the first failure, after it set fail; read only
	 * once fail_msg_set says it is complete */
	char fail_msg[160];
	atomic_bool fail_msg_set;
	/* lifetime: one reference for the owner (dropped by close) and one
	 * per received message not yet released; the last one frees */
	atomic_int refs;
	bool closed;			/* under lock: torn down, only the
					 * memory is left for late releases */
	struct sockaddr_storage peer;	/* accepted: the peer's address */
	int state;			/* enum rv_conn_state (cm side) */
	struct rv_conn *dev_next, *dev_prev;
	struct rv_conn *l_next, *l_prev;	/* listener's list */
	pthread_cond_t cv;		/* followers of a wait (rv_conn.c) */
	int waiters;			/* threads inside rv_conn_wait */
	bool polling;			/* one of them sleeps on the channels */
	int kick_fd;			/* eventfd: wakes the poller */
	uint32_t cm_tick;		/* client: calls since cm fd check */
	uint64_t cm_checked;		/* client: last cm fd check (ns) */
	int epfd;			/* rv_conn_fd(), made on demand */
	void *user;
	uint64_t spin_ns;

	/* send queue */
	struct rv_op *ops;		/* [ops_cap], index seq % ops_cap */
	uint32_t ops_cap;
	uint64_t seq_next;		/* next op sequence */
	uint64_t seq_done;		/* ops below are retired */
	uint64_t last_sig;
	uint32_t sq_depth;		/* WRs for ops (one more for drain) */
	uint32_t sq_used;
	uint32_t rd_depth;
	uint32_t rd_inflight;
	uint32_t chain_max;
	uint32_t ctrl_inflight;
	bool ka_inflight;		/* a keepalive probe is posted */
	uint64_t ka_seen;		/* receives at the last keepalive look */
	uint64_t ka_next;		/* client: next keepalive look (ns) */
	uint64_t ka_ns;			/* keepalive interval; 0: off */
	struct ibv_send_wr *wr;		/* [chain_max] scratch */
	struct ibv_sge *sge;
	struct rv_batch *bq_head, *bq_tail;	/* batches with unposted reqs */
	bool drain_posted;
	uint64_t drain_deadline;

	/* send ring: s_slots buffers of s_size bytes, used in order */
	struct rv_mr *smr;
	uint32_t s_slots;
	uint32_t s_size;		/* the peer's msg_max */
	uint32_t s_head;
	uint32_t s_inflight;
	uint32_t s_sig_every;
	bool s_reserved;
	uint32_t max_inline;
	atomic_int credits;		/* peer data buffers we may fill */
	uint32_t credits_max;		/* what the peer granted (slots - 1) */
	atomic_int owed;		/* data buffers re-posted, untold */
	atomic_int token;		/* may send a credit-only message */
	atomic_int ack_pending;		/* peer's credit message re-posted */
	int32_t c_thresh;

	/* receive side: client conns own a pool and a ready queue */
	struct rv_pool pool;
	uint32_t r_slots;		/* credits + 1 */
	uint32_t r_size;		/* our msg_max */
	struct rv_rxent *rxq;		/* [r_slots] ring */
	uint32_t rx_head, rx_count;
	uint32_t outstanding;		/* messages handed out, unreleased */

	/* handshake */
	uint8_t peer_priv[RV_ACCEPT_PRIV_MAX];
	size_t peer_priv_len;

	struct rv_stats st;
};

/* rv_conn.c */
/* Drop one reference (see rv_conn.refs); the last frees the memory. */
void rv_conn_unref(struct rv_conn *c);
/* Post a keepalive probe if c was idle since the last call (c->lock). */
void rv_conn_keepalive_locked(struct rv_conn *c);
int rv_conn_new(struct rv_dev *d, const struct rv_conn_attr *a,
		struct rv_listener *l, struct rv_conn **out);
int rv_conn_setup_qp(struct rv_conn *c, struct rdma_cm_id *id);
int rv_conn_apply_peer(struct rv_conn *c, const struct rv_hello *h);
void rv_conn_free(struct rv_conn *c);
/* Record the first failure and move the QP to the error state, so that
 * every posted work request completes (flushed). Any thread. */
void rv_conn_fail(struct rv_conn *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Wake the thread sleeping on c's channels (state changed elsewhere). */
void rv_conn_kick(struct rv_conn *c);
int rv_conn_err(struct rv_conn *c);	/* rs_seterr with the failure */
/* Poll the conn's CQ and handle completions (no posting). */
int rv_conn_reap_locked(struct rv_conn *c);
/* Reap, then post queued READs and a due credit message. */
int rv_conn_progress_locked(struct rv_conn *c);
void rv_conn_maybe_credit_locked(struct rv_conn *c);
/* Adaptive wait on c until check(arg) != 0 (check runs with c->lock
 * held); rx: an accepted conn's sender waiting for credits, which arrive
 * through the listener's SRQ CQ. Several threads may wait at once. */
int rv_conn_wait(struct rv_conn *c, int (*check)(void *), void *arg,
		 bool rx, int timeout_ms);
/* Handle pending rdma_cm events of a client conn (non-blocking). */
void rv_conn_cm_events(void *arg);
void rv_conn_cm_events_locked(struct rv_conn *c);
/* Cheap periodic look at a client conn's rdma_cm fd (see rv_conn.c). */
void rv_conn_tick_locked(struct rv_conn *c);

/* rv_read.c */
int rv_batch_check(void *b);	/* wait condition; needs no lock */
void rv_read_post_queued_locked(struct rv_conn *c);
/* Once, when c->wr and c->sge are allocated: the READ fields every
 * chain shares (sg_list, num_sge, opcode; the rest zero). */
void rv_read_wr_init(struct rv_conn *c);
void rv_read_fail_queued_locked(struct rv_conn *c, int code);
void rv_op_retire_locked(struct rv_conn *c, uint64_t seq, int code);

/* rv_msg.c */
void rv_msg_recv_wc_locked(struct rv_conn *c, const struct ibv_wc *wc);
/* Take the credits of an immediate; RS_E_PROTO (conn failed) if the peer
 * returns more than it granted. */
int rv_msg_credit_in(struct rv_conn *c, uint32_t imm);

/* ---- listener ---- */
struct rv_lmsg {
	struct rv_conn *c;
	uint32_t slot;
	uint32_t len;
};

struct rv_qpmap_ent {
	uint32_t qpn;
	struct rv_conn *c;	/* NULL: empty; (void *)1: deleted */
};

struct rv_listener {
	struct rv_dev *dev;
	struct rv_listener_attr attr;
	uint8_t reply_default[RV_ACCEPT_PRIV_MAX];
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	uint16_t port;
	pthread_mutex_t cm_lock;
	struct rv_conn *conns;		/* accepting + connected */
	uint32_t nconns;
	pthread_mutex_t rq_lock;
	struct ibv_srq *srq;
	struct rv_cq rcq;
	struct rv_pool pool;
	/* shrinking: buffers of chunks >= live_chunks are not re-posted but
	 * parked (rq_lock); a top chunk whose buffers are all parked is
	 * freed */
	_Atomic uint32_t live_chunks;
	uint32_t *parked;		/* [max_chunks][per_chunk] slots */
	uint32_t *nparked;		/* [max_chunks] */
	struct rv_qpmap_ent *map;
	uint32_t map_cap;
	struct rv_lmsg *rq;		/* ready queue ring [rq_cap] */
	uint32_t rq_cap, rq_head, rq_count;
	int q_evfd;			/* readable iff rq_count > 0 */
	int recv_waiters;
	uint32_t r_slots;
	struct rv_stats st;
	struct rv_listener_counters cnt;
	/* rv_listener_fd(): epoll over ech, fail_evfd and ka_tfd */
	int ep_fd;
	int fail_evfd;			/* a conn failed on this side */
	atomic_int fail_pending;
	int ka_tfd;			/* keepalive timerfd, or -1 */
};

/* rv_listen.c */
/* Poll the shared receive CQ into the ready queue; returns completions. */
int rv_listener_rq_progress(struct rv_listener *l);
/* Close path, cm side: the listener stops delivering events for c, and the
 * peer is told (rdma_disconnect). Takes cm_lock. */
void rv_listener_forget_conn(struct rv_listener *l, struct rv_conn *c);
/* Free path, receive side: c's completions and queued messages are
 * dropped (buffers re-posted), its qp_num unmapped. Takes rq_lock. */
void rv_listener_drop_rx(struct rv_listener *l, struct rv_conn *c);
/* After a wait that may have taken the SRQ CQ's channel event: re-arm it
 * if receivers sleep on it. */
void rv_listener_rearm(struct rv_listener *l);
/* c failed on this side (any thread, any lock): the accept loop will
 * disconnect it and tell the owner. */
void rv_listener_conn_failed(struct rv_listener *l);
/* A released SRQ buffer: re-post it, or park it if its chunk is retiring.
 * No lock held (takes rq_lock only for a retiring chunk). */
int rv_listener_give_back(struct rv_listener *l, uint32_t slot);

#endif
