/*
 * server.c - the memory node's life cycle (rs_server_*), its run loop, its
 * worker threads and its connections. Overview: docs/server.md.
 *
 * Open (rs_server_open) does everything that can fail: device, NUMA
 * decision, metrics, slab pool and table recovery, config tables, the
 * listener, the metrics endpoint, tracing. Run (rs_server_run) starts the
 * workers and runs the event loop on the calling thread until stop.
 *
 * Run thread: one epoll set with the listener's rdma_cm channel, the stop
 * eventfd and the "poke" eventfd (a dead connection became closable). It
 * sleeps in epoll_wait without a timeout while nothing is pending: an idle
 * node costs nothing here. It handles CONNECTED (a struct srv_conn is
 * attached as the rv_conn's user pointer) and DISCONNECTED (the conn is
 * marked dead), and closes dead conns.
 *
 * Workers: leader/followers. One worker at a time (the leader) waits in
 * rv_listener_recv() on the listener's shared receive queue (rv spins for
 * spin_us after the last completion, then sleeps on the completion
 * channel); the others sleep on a condition variable. When the leader gets
 * messages it counts them on their conns, hands the leadership to a
 * follower and handles its batch (decode, run, reply, release), so batches
 * are handled in parallel while only one thread ever polls. The leader
 * is woken for a stop or a pending close by a message the node sends to
 * itself (the wake connection below); an idle node does not wake at all
 * (without a wake connection: once per SRV_RECV_TIMEOUT_MS).
 *
 * Closing a connection safely. rv requires that every message received on
 * a conn was released before the conn is closed. A worker learns a
 * message's conn only when rv_listener_recv() returns, so there is a window
 * in which a message is out but not yet counted. The receive gate closes
 * it: the leader holds the gate (gate.inside) from before
 * rv_listener_recv() until it has counted every returned message on its
 * conn (conn.held); the run thread closes conns only while it holds the
 * gate shut (gate.closers, no leader inside) and only conns with held == 0,
 * so no message of a closed conn is ever out. Shutting the gate waits for
 * the leader's next return (the run thread wakes it, see "the wake
 * connection") without stopping anyone: handling goes on meanwhile.
 *
 * A conn may deliver a message before its CONNECTED event was handled (the
 * client sends as soon as its side is established): the worker then
 * attaches the srv_conn itself (conn_of, under conns_lock). Such a conn is
 * "undelivered" until CONNECTED; if it fails before that, rv frees it
 * itself, and it is never closed here (rv_listener_close closes leftovers).
 *
 * Dead conns: a DISCONNECTED event, a failed or timed-out send (the peer
 * returns no credits), or a failed conn. The run thread closes them once
 * their held count drops to 0 (the worker releasing the last message
 * pokes it). The dead mark is also a bit of the held word
 * (SRV_HELD_DEAD): a worker's decrement is then its last access to the
 * conn, and the killer and the last releaser cannot both miss the other
 * (with two words, the releaser had to read "dead" after its decrement,
 * when the run thread may already have freed the conn).
 */
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/addr.h"
#include "server/srv_internal.h"
#include "trace/trace.h"

int srv_scratch(void **buf, size_t *cap, size_t bytes)
{
	void *p;

	if (bytes <= *cap)
		return 0;
	bytes = bytes < 4096 ? 4096 : bytes + bytes / 2;
	p = rs_realloc(*buf, bytes);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = bytes;
	return 0;
}

static void fd_poke(int fd)
{
	uint64_t one = 1;
	ssize_t r = write(fd, &one, sizeof(one));

	(void)r;
}

static void fd_drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));

	(void)r;
}

/* ---- the receive gate: leader/followers ---- */

/* gate.lock held: the worker threads that receive or handle now (not
 * waiting for backups, not parked as spares). */
static unsigned running_locked(const struct srv_gate *g)
{
	return g->nthreads - g->nwaiting - g->nparked;
}

/* gate.lock held: move up to a batch of handed-over messages to w. */
static void ho_take_locked(struct srv_gate *g, struct srv_worker *w)
{
	w->bhead = 0;
	w->blen = 0;
	while (g->ho_len && w->blen < SRV_RECV_BATCH) {
		struct srv_handoff *h = &g->ho[g->ho_head];

		w->batch[w->blen] = h->m;
		w->admitted[w->blen++] = h->admitted;
		g->ho_head = (g->ho_head + 1) % g->ho_cap;
		g->ho_len--;
	}
}

enum { GATE_STOP, GATE_RECV, GATE_HANDOFF };

/* What w does next: become the leader (the one worker receiving:
 * GATE_RECV), handle messages a waiting worker handed over (in w's
 * batch: GATE_HANDOFF), or leave (GATE_STOP). A thread in excess of the
 * configured workers (a wait ended) parks here as a spare. */
static int gate_enter(struct rs_server *s, struct srv_worker *w)
{
	struct srv_gate *g = &s->gate;
	int how = GATE_STOP;

	pthread_mutex_lock(&g->lock);
	while (!atomic_load(&s->stopping)) {
		if (running_locked(g) > s->cfg.workers) {
			g->nparked++;
			while (!g->wakes && !atomic_load(&s->stopping))
				pthread_cond_wait(&g->spare_cv, &g->lock);
			if (g->wakes)
				g->wakes--;	/* the waker counted us out */
			continue;
		}
		if (g->ho_len) {
			ho_take_locked(g, w);
			how = GATE_HANDOFF;
			break;
		}
		if (!g->inside && !g->closers) {
			g->inside = 1;
			how = GATE_RECV;
			break;
		}
		pthread_cond_wait(&g->cond, &g->lock);
	}
	pthread_mutex_unlock(&g->lock);
	return how;
}

/* Hand the leadership over (and let a waiting closer in). */
static void gate_leave(struct rs_server *s)
{
	struct srv_gate *g = &s->gate;

	pthread_mutex_lock(&g->lock);
	g->inside = 0;
	if (g->closers)
		pthread_cond_broadcast(&g->cond);
	else
		pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* Run thread: wait until no worker receives, and keep them out. */
static void wake_leader(struct rs_server *s);

static void gate_shut(struct rs_server *s)
{
	struct srv_gate *g = &s->gate;
	struct timespec ts;

	pthread_mutex_lock(&g->lock);
	g->closers++;
	while (g->inside) {
		pthread_mutex_unlock(&g->lock);
		wake_leader(s);
		pthread_mutex_lock(&g->lock);
		if (!g->inside)
			break;
		rs_deadline_ms(CLOCK_REALTIME, 200, &ts);
		pthread_cond_timedwait(&g->cond, &g->lock, &ts);
	}
	pthread_mutex_unlock(&g->lock);
}

static void gate_reopen(struct rs_server *s)
{
	struct srv_gate *g = &s->gate;

	pthread_mutex_lock(&g->lock);
	g->closers--;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* ---- waits: a write waiting for its backups never stops receiving ----
 *
 * A replicated write (and a COPY served) waits in srv_repl_wait() until
 * its backups applied its records, and a backup applies them only when
 * one of its workers receives the REPL. Two nodes whose workers all wait
 * for each other would receive nothing (the REPLs each waits for sit in
 * the other's receive queue, or in the rest of a waiting worker's batch)
 * until a backup's timeout failed the writes (docs/replication.md, "A
 * waiting write never keeps a node from receiving"). So a worker about
 * to wait (srv_wait_begin):
 *   - hands the rest of its batch over (gate.ho, a ring under gate.lock):
 *     the next worker at the gate handles it before it receives;
 *   - when no other thread is left to receive or handle (all wait, or
 *     are parked), wakes a parked spare or starts one.
 * A wait's end (srv_wait_end) only counts; a thread that finds more
 * threads running than the configured workers at the gate parks as a
 * spare. So at most o.workers threads run besides the waiting ones, and
 * at least one always can receive. REPL and CONFIG never wait for a
 * backup, so a running thread always makes progress, and so do the
 * waits. Requests that may wait take a slot first (srv_wait_reserve, at
 * most SRV_WAITS_MAX; over it RS_E_BUSY before any work): then
 * o.workers + SRV_WAITS_MAX threads are always enough, and that bounds
 * the spares. The handover ring holds received messages only, bounded
 * by the listener's receive buffers.
 *
 * Cost: nothing outside a cluster (no write waits); in one, a gate.lock
 * round per waiting write, and a spare thread's wake-up only when every
 * worker waits (with one worker: every replicated write).
 */
static _Thread_local struct srv_worker *cur_worker;

static void *worker_main(void *arg);

/* gate.lock held: one more worker thread, a spare. */
static void spare_start_locked(struct rs_server *s)
{
	struct srv_gate *g = &s->gate;
	struct srv_worker *w;
	int ret;

	if (g->nthreads >= s->cfg.workers + SRV_WAITS_MAX)
		return;
	w = &s->workers[g->nthreads];
	w->srv = s;
	w->idx = g->nthreads;
	if (!w->reply && !(w->reply = rs_malloc(s->reply_limit))) {
		srv_warn("spare worker: out of memory: receiving waits for a "
			"write's backups");
		return;
	}
	g->nthreads++;
	ret = pthread_create(&w->thr, NULL, worker_main, w);
	if (ret) {
		g->nthreads--;
		srv_warn("spare worker: pthread_create: %s: receiving waits "
			"for a write's backups", strerror(ret));
		return;
	}
	w->started = true;
	atomic_fetch_add(&s->spares_started, 1);
}

/* gate.lock held: hand m over; false when out of memory (it stays). */
static bool ho_push_locked(struct srv_gate *g, const struct rv_msg *m,
			   bool admitted)
{
	if (g->ho_len == g->ho_cap) {
		unsigned cap = g->ho_cap ? 2 * g->ho_cap : 4 * SRV_RECV_BATCH;
		struct srv_handoff *n = rs_malloc(cap * sizeof(*n));

		if (!n)
			return false;
		for (unsigned i = 0; i < g->ho_len; i++)
			n[i] = g->ho[(g->ho_head + i) % g->ho_cap];
		free(g->ho);
		g->ho = n;
		g->ho_head = 0;
		g->ho_cap = cap;
	}
	g->ho[(g->ho_head + g->ho_len++) % g->ho_cap] =
		(struct srv_handoff){ .m = *m, .admitted = admitted };
	return true;
}

bool srv_wait_reserve(struct rs_server *s)
{
	if (atomic_fetch_add(&s->waits, 1) < SRV_WAITS_MAX)
		return true;
	atomic_fetch_sub(&s->waits, 1);
	atomic_fetch_add(&s->waits_refused, 1);
	return false;
}

void srv_wait_unreserve(struct rs_server *s)
{
	atomic_fetch_sub(&s->waits, 1);
}

void srv_wait_begin(struct rs_server *s)
{
	struct srv_worker *w = cur_worker;
	struct srv_gate *g = &s->gate;

	if (!w || w->srv != s)
		return;		/* not a worker: it receives nothing */
	pthread_mutex_lock(&g->lock);
	atomic_store(&s->waiting, ++g->nwaiting);
	while (w->blen) {
		const struct rv_msg *m = &w->batch[w->bhead];

		if (m->conn && !ho_push_locked(g, m, w->admitted[w->bhead]))
			break;	/* out of memory: handled after the wait */
		w->bhead = (w->bhead + 1) % SRV_RECV_BATCH;
		w->blen--;
	}
	if (!running_locked(g) && !atomic_load(&s->stopping)) {
		if (g->nparked) {
			g->nparked--;
			g->wakes++;
			pthread_cond_signal(&g->spare_cv);
		} else {
			spare_start_locked(s);
		}
	}
	if (g->ho_len)
		pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

void srv_wait_end(struct rs_server *s)
{
	struct srv_worker *w = cur_worker;
	struct srv_gate *g = &s->gate;

	if (!w || w->srv != s)
		return;
	pthread_mutex_lock(&g->lock);
	atomic_store(&s->waiting, --g->nwaiting);
	pthread_mutex_unlock(&g->lock);
}

/* ---- connections ---- */

/* The srv_conn of rc, attached on first sight. Caller: the run thread, or
 * a worker inside the gate. NULL only when out of memory. */
static struct srv_conn *conn_of(struct rs_server *s, struct rv_conn *rc,
				bool delivered)
{
	struct srv_conn *c;

	pthread_mutex_lock(&s->conns_lock);
	c = rv_conn_user(rc);
	if (!c) {
		c = rs_calloc(1, sizeof(*c));
		if (c) {
			size_t plen = 0;
			const void *p = rv_conn_peer_data(rc, &plen);

			c->rc = rc;
			c->srv = s;
			pthread_mutex_init(&c->send_lock, NULL);
			c->parked_tail = &c->parked;
			pthread_mutex_init(&c->q_lock, NULL);
			c->q = rs_calloc(s->cfg.credits + 1, sizeof(*c->q));
			c->q_cap = c->q ? s->cfg.credits + 1 : 0;
			c->reply_max = rv_conn_msg_max(rc);
			c->is_wake = plen == SRV_WAKE_LEN &&
				     !memcmp(p, s->wake_msg, SRV_WAKE_LEN);
			if (!c->is_wake) {
				c->id = ++s->conns_total;
				s->nconns++;
			}
			c->role = (uint8_t)(c->is_wake ? AUTH_ROLE_NONE :
					    srv_auth_conn_role(s, p, plen));
			c->key = c->is_wake ? 0 : srv_auth_conn_key(s, p,
								    plen);
			c->next = s->conns;
			if (s->conns)
				s->conns->prev = c;
			s->conns = c;
			rv_conn_set_user(rc, c);
		}
	}
	if (c && delivered)
		c->delivered = true;
	pthread_mutex_unlock(&s->conns_lock);
	return c;
}

/*
 * Checked rules (Debug and sanitizer builds, RS_DEBUG_LOCKS). The two
 * rules below guard races whose windows are a few instructions wide, so
 * the tests widen them:
 *   - after its decrement, conn_release() must not touch the conn: with
 *     RS_TEST_RELEASE_DELAY_US set, the last release of a dead conn wakes
 *     the run thread and sleeps that long after the decrement, so the
 *     conn is freed meanwhile and any later access is a use-after-free
 *     that ASan reports (test_server_kill; STATS debug.dead_releases
 *     counts those releases, so the test knows the window was opened);
 *   - no more than conn_cap messages of one conn are handled at once
 *     (counted around srv_handle, independently of the admission code;
 *     a breach aborts).
 * Release builds compile all of it out.
 */
#ifdef RS_DEBUG_LOCKS
static void srv_debug_init(struct rs_server *s)
{
	const char *v = getenv("RS_TEST_RELEASE_DELAY_US");

	s->release_delay_us = v ? (unsigned)strtoul(v, NULL, 10) : 0;
	if (s->release_delay_us > 1000000)
		s->release_delay_us = 1000000;
}

/* h: the held word before this release's decrement. Touches s only. */
static void srv_debug_released(struct rs_server *s, unsigned h)
{
	if (h != (SRV_HELD_DEAD | 1))	/* not the last of a dead conn */
		return;
	atomic_fetch_add(&s->dead_releases, 1);
	if (s->release_delay_us) {
		fd_poke(s->poke_fd);	/* the run thread may free it now */
		usleep(s->release_delay_us);
	}
}

static void srv_debug_handling(struct srv_conn *c, int d)
{
	unsigned n = atomic_fetch_add(&c->handling, (unsigned)d) + (unsigned)d;

	if (d > 0 && n > c->srv->conn_cap) {
		rs_log_from("recstore-node", RS_LOG_FATAL, "%u messages of "
			    "connection %" PRIu64 " handled at once, over "
			    "the cap of %u", n, c->id, c->srv->conn_cap);
		abort();
	}
}
#else
#define srv_debug_init(s) ((void)0)
#define srv_debug_released(s, h) ((void)0)
#define srv_debug_handling(c, d) ((void)0)
#endif

/* Caller: the run thread, or a worker holding a message of c (so c cannot
 * be freed under it before the SRV_HELD_DEAD bit is set). */
static void conn_mark_dead(struct srv_conn *c)
{
	struct rs_server *s = c->srv;

	if (!atomic_exchange(&c->dead, true)) {
		atomic_fetch_or(&c->held, SRV_HELD_DEAD);
		fd_poke(s->poke_fd);
	}
}

void srv_conn_kill(struct srv_conn *c, int why)
{
	struct rs_server *s = c->srv;

	if (!atomic_exchange(&c->dead, true)) {
		if (c->is_wake)
			srv_log_peer("the wake connection dropped: %s (a "
				     "message that is not the wake message?)",
				     rs_strerror(why));
		else if (why != RS_E_DISCONNECTED)
			srv_log_peer("connection %" PRIu64 "%s%s dropped: %s",
				     c->id, c->peer[0] ? " from " : "",
				     c->peer, rs_strerror(why));
		atomic_fetch_or(&c->held, SRV_HELD_DEAD);
		fd_poke(s->poke_fd);
	}
}

/* A worker is done with one message of c. The decrement is its last
 * access to c: once the count is 0 and the conn dead, the run thread may
 * free it at any moment. Dead and count are one word, so exactly one of
 * the killer and the last releaser sees "dead and nothing held". */
static void conn_release(struct srv_conn *c)
{
	struct rs_server *s = c->srv;
	unsigned h = atomic_fetch_sub(&c->held, 1);

	srv_debug_released(s, h);
	if (h == (SRV_HELD_DEAD | 1))
		fd_poke(s->poke_fd);
}

/* The run thread may close c (all: also a live one). */
/* A dead conn that no worker holds may go; one whose CONNECTED event has
 * not come yet waits for it (conns_lock held): until then rv owns the
 * rv_conn, whose user pointer would still name the freed srv_conn when
 * the event comes (a flood can kill a conn whose first messages came
 * before its CONNECTED event: ASan, test_adversary). At shutdown (all)
 * every conn goes. */
static bool conn_closable(struct srv_conn *c, bool all)
{
	unsigned h = atomic_load(&c->held);

	if (all)
		return (h & ~SRV_HELD_DEAD) == 0;
	return (h & ~SRV_HELD_DEAD) == 0 && (h & SRV_HELD_DEAD) &&
	       c->delivered;
}

static void conn_unlink_locked(struct rs_server *s, struct srv_conn *c)
{
	struct rv_stats st;

	RS_ASSERT_HELD(&s->conns_lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (!c->is_wake)
		s->nconns--;
	if (c->delivered) {
		rv_conn_stats(c->rc, &st);
		s->closed_cq.spin_ns += st.spin_ns;
		s->closed_cq.block_ns += st.block_ns;
		s->closed_cq.wakeups += st.wakeups;
	}
}

/* ---- replies: sent at once or parked ----
 *
 * A worker never waits for a send slot or a credit of one conn: that
 * would stall every other conn's requests behind a peer that returns no
 * credits. A reply is built in the worker's scratch and sent with
 * rv_msg_send(timeout 0) under the conn's send_lock (so the only other
 * reservation a send can meet is none: rv's slot is reserved for the
 * copy only). When there is no slot or credit at once, the reply is
 * copied and parked on the conn; the next reply on the conn, or the run
 * thread every SRV_PARK_TICK_MS while anything is parked, sends parked
 * replies first, oldest first.
 *
 * A client within the protocol never leaves the node without a credit
 * for long: it keeps at most its receive credits' worth of requests
 * outstanding (sent, reply not yet released), and every request carries
 * the credits of the replies it released. So a reply can only lack a
 * slot while the NIC has not acknowledged earlier ones (microseconds),
 * and the parked list holds at most as many replies as the node grants
 * requests (credits + 1). A peer is cut off (logged, counted in
 * rs_connections_cut_total) when its parked list would exceed that
 * (overrun) or when parked replies made no progress for send_timeout_ms
 * (no_credit). Nobody else waits meanwhile.
 */
struct srv_parked {
	struct srv_parked *next;
	size_t len;
	uint8_t data[];
};

uint32_t srv_reply_cap(const struct srv_conn *c)
{
	uint32_t cap = rv_conn_msg_max(c->rc);
	uint32_t rmax = atomic_load_explicit(&c->reply_max,
					     memory_order_relaxed);

	if (rmax && rmax < cap)
		cap = rmax;
	return cap < c->srv->reply_limit ? cap : c->srv->reply_limit;
}

/* Log, count and kill a peer that broke the protocol. */
static void conn_cut(struct srv_conn *c, enum srv_cut_reason why)
{
	static const char *const what[SRV_CUT_COUNT] = {
		[SRV_CUT_NO_CREDIT] = "returned no send credit",
		[SRV_CUT_OVERRUN] = "has more replies owed than it may have "
				    "requests outstanding",
	};
	struct rs_server *s = c->srv;

	if (atomic_load(&c->dead))
		return;
	metrics_counter_add(s->m.cut[why], 1);
	srv_log_peer("connection %" PRIu64 "%s%s cut off: it %s (%u replies "
		     "parked, send timeout %u ms)", c->id,
		     c->peer[0] ? " from " : "", c->peer, what[why],
		     atomic_load(&c->nparked), s->cfg.send_timeout_ms);
	conn_mark_dead(c);
}

static void parked_drop_one(struct srv_conn *c)
{
	struct srv_parked *p = c->parked;

	c->parked = p->next;
	free(p);
	if (atomic_fetch_sub(&c->nparked, 1) == 1) {
		c->parked_tail = &c->parked;
		atomic_fetch_sub(&c->srv->parked_conns, 1);
	}
}

/* Send parked replies, oldest first: 0 (none left), RS_E_TIMEOUT (still
 * no slot or credit) or the conn's failure. c->send_lock held. */
static int parked_flush_locked(struct srv_conn *c)
{
	int ret;

	while (c->parked) {
		ret = rv_msg_send(c->rc, c->parked->data, c->parked->len, 0);
		if (ret < 0)
			return ret;
		metrics_counter_add(c->srv->m.bytes_served, c->parked->len);
		parked_drop_one(c);
		c->parked_since_ns = rs_mono_ns();
	}
	return 0;
}

static int park_locked(struct srv_conn *c, const void *buf, size_t len)
{
	struct rs_server *s = c->srv;
	struct srv_parked *p;

	if (atomic_load(&c->nparked) > s->cfg.credits) {
		conn_cut(c, SRV_CUT_OVERRUN);
		return RS_E_PROTO;
	}
	p = rs_malloc(sizeof(*p) + len);
	if (!p)
		return -ENOMEM;
	p->next = NULL;
	p->len = len;
	memcpy(p->data, buf, len);
	*c->parked_tail = p;
	c->parked_tail = &p->next;
	if (atomic_fetch_add(&c->nparked, 1) == 0) {
		c->parked_since_ns = rs_mono_ns();
		if (atomic_fetch_add(&s->parked_conns, 1) == 0)
			fd_poke(s->poke_fd);	/* start the run thread's tick */
	}
	return 1;
}

int srv_conn_send(struct srv_conn *c, const void *buf, size_t len)
{
	int ret = 0;

	pthread_mutex_lock(&c->send_lock);
	if (c->parked)
		ret = parked_flush_locked(c);
	if (!ret)
		ret = rv_msg_send(c->rc, buf, len, 0);
	if (ret == RS_E_TIMEOUT)
		ret = park_locked(c, buf, len);
	pthread_mutex_unlock(&c->send_lock);
	if (ret < 0)
		srv_conn_kill(c, ret);
	return ret < 0 ? ret : 0;
}

/* Run thread: retry parked replies; cut off peers that made no progress
 * for send_timeout_ms. */
static void parked_tick(struct rs_server *s)
{
	uint64_t now, limit = (uint64_t)s->cfg.send_timeout_ms * 1000000ull;
	struct srv_conn *c;
	int ret;

	if (!atomic_load(&s->parked_conns))
		return;
	now = rs_mono_ns();
	pthread_mutex_lock(&s->conns_lock);
	for (c = s->conns; c; c = c->next) {
		if (!atomic_load(&c->nparked) || atomic_load(&c->dead) ||
		    !c->delivered)
			continue;
		pthread_mutex_lock(&c->send_lock);
		ret = c->parked ? parked_flush_locked(c) : 0;
		if (ret == RS_E_TIMEOUT && now > c->parked_since_ns &&
		    now - c->parked_since_ns >= limit) {
			conn_cut(c, SRV_CUT_NO_CREDIT);
			ret = 0;
		}
		pthread_mutex_unlock(&c->send_lock);
		if (ret < 0 && ret != RS_E_TIMEOUT)
			srv_conn_kill(c, ret);
	}
	pthread_mutex_unlock(&s->conns_lock);
}

static void conn_free(struct srv_conn *c)
{
	while (c->parked)
		parked_drop_one(c);
	pthread_mutex_destroy(&c->send_lock);
	pthread_mutex_destroy(&c->q_lock);
	free(c->q);
	free(c);
}

/* Close dead conns (every conn with all == true) that no worker holds. */
static void reap(struct rs_server *s, bool all)
{
	struct srv_conn *c, *next, *gone = NULL;
	bool any = false;

	pthread_mutex_lock(&s->conns_lock);
	for (c = s->conns; c && !any; c = c->next)
		any = conn_closable(c, all);
	pthread_mutex_unlock(&s->conns_lock);
	if (!any)
		return;
	gate_shut(s);
	pthread_mutex_lock(&s->conns_lock);
	for (c = s->conns; c; c = next) {
		next = c->next;
		if (conn_closable(c, all)) {
			conn_unlink_locked(s, c);
			c->next = gone;
			gone = c;
		}
	}
	pthread_mutex_unlock(&s->conns_lock);
	for (c = gone; c; c = next) {
		next = c->next;
		if (c->delivered)
			rv_conn_close(&c->rc);
		else	/* shutdown: rv still owns it; forget us */
			rv_conn_set_user(c->rc, NULL);
		conn_free(c);
	}
	gate_reopen(s);
}

static void on_event(struct rs_server *s, const struct rv_event *ev)
{
	struct srv_conn *c;

	switch (ev->type) {
	case RV_EV_CONNECTED:
		c = conn_of(s, ev->conn, true);
		if (!c) {
			srv_warn_peer("out of memory: closing a new "
				     "connection");
			rv_conn_close(&(struct rv_conn *){ ev->conn });
		}
		break;
	case RV_EV_DISCONNECTED:
		c = rv_conn_user(ev->conn);
		if (c) {
			pthread_mutex_lock(&s->conns_lock);
			c->delivered = true;	/* read under conns_lock */
			pthread_mutex_unlock(&s->conns_lock);
			srv_conn_kill(c, RS_E_DISCONNECTED);
		} else {
			rv_conn_close(&(struct rv_conn *){ ev->conn });
		}
		break;
	}
}

/* ---- the wake connection ----
 *
 * The leader sleeps in rv_listener_recv(), which returns only for a
 * message or a timeout. To wake it without polling, the node connects to
 * its own listener (rxe and RoCE NICs loop the traffic back) and sends a
 * 16-byte message: "RSWAKE" + a random token, which no protocol message can
 * be (a header alone is 32 bytes). The wake conn is recognised by its
 * handshake bytes (the same 16 bytes), is not counted as a client and gets
 * no replies. If it cannot be set up, the leader falls back to waking
 * every SRV_RECV_TIMEOUT_MS. The token is not the node id (HELLO tells
 * every client that one), so a peer cannot pass for the wake conn; a
 * message on it other than the wake message is a protocol violation
 * (logged, rate-limited, and the conn dropped).
 */

static void wake_leader(struct rs_server *s)
{
	struct rv_conn *w = atomic_load(&s->wake);

	if (w) /* no credit: an earlier wake message is on its way */
		(void)rv_msg_send(w, s->wake_msg, SRV_WAKE_LEN, 0);
}

static bool is_wake_msg(const struct rs_server *s, const struct rv_msg *m)
{
	return m->len == SRV_WAKE_LEN &&
	       !memcmp(m->data, s->wake_msg, SRV_WAKE_LEN);
}

static void *wake_connect_main(void *arg)
{
	struct rs_server *s = arg;
	struct rv_conn_attr a;
	struct rv_conn *c = NULL;
	int ret;

	rv_conn_attr_init(&a);
	a.msg_max = PROTO_MIN_MESSAGE_BYTES;
	a.credits = 3;
	a.send_slots = 2;
	a.connect_timeout_ms = 3000;
	a.priv = s->wake_msg;
	a.priv_len = SRV_WAKE_LEN;
	ret = rv_connect(s->dev, s->cfg.listen_addr, rv_listener_port(s->l), &a,
			 &c);
	if (ret)
		srv_log("note: no wake connection to itself (%s): idle "
			"workers poll every %d ms", rs_errormsg(),
			SRV_RECV_TIMEOUT_MS);
	else
		atomic_store(&s->wake, c);
	atomic_store(&s->wake_thr_done, true);
	fd_poke(s->poke_fd);
	return NULL;
}

static void wake_start(struct rs_server *s)
{
	memcpy(s->wake_msg, "RSWAKE\0\0", 8);
	memcpy(s->wake_msg + 8, &s->wake_token, 8);
	atomic_store(&s->wake_thr_done, false);
	atomic_store(&s->wake_pending, true);
	if (pthread_create(&s->wake_thr, NULL, wake_connect_main, s)) {
		atomic_store(&s->wake_pending, false);
		atomic_store(&s->wake_thr_done, true);
		return;
	}
	s->wake_thr_started = true;
}

/* After the run loop: let the connect finish (it needs our events), then
 * close the client side (the node side is closed with the others). */
static void wake_stop(struct rs_server *s)
{
	struct rv_event ev;
	struct rv_conn *w;

	if (!s->wake_thr_started)
		return;
	while (!atomic_load(&s->wake_thr_done))
		if (rv_listener_event(s->l, &ev, 50) == 0)
			on_event(s, &ev);
	pthread_join(s->wake_thr, NULL);
	s->wake_thr_started = false;
	w = atomic_exchange(&s->wake, NULL);
	rv_conn_close(&w);
}

/* ---- workers ---- */

/* ---- fairness between conns ----
 *
 * A conn that floods the node (its credits' worth of requests in flight,
 * refilled as soon as replies arrive) must not take every worker: at most
 * conn_cap = max(1, workers - 1) of one conn's messages are handled at
 * once, so a worker is always left for the others. A message over the cap
 * waits in its conn's queue (bounded by the credits the node grants, and
 * still counted in held) and is taken by the next worker that finishes one
 * of that conn's messages; that worker handles it after the rest of its
 * own batch, so one conn cannot hold a worker's other conns back either.
 *
 * Fast path (nothing queued): one compare-and-swap to start a message,
 * one atomic subtraction and a load to finish it. The slow path takes
 * q_lock. A message is queued only while the cap is reached: the queuer
 * pushes, then re-reads active; the finisher decrements active, then
 * reads nq; so one of them always sees the other (sequentially consistent
 * atomics) and no message waits with no handler to take it.
 */

static bool active_take(struct srv_conn *c)
{
	unsigned a = atomic_load(&c->active);

	while (a < c->srv->conn_cap)
		if (atomic_compare_exchange_weak(&c->active, &a, a + 1))
			return true;
	return false;
}

/* Oldest queued message into *m. c->q_lock held, q_len > 0. */
static void q_pop_locked(struct srv_conn *c, struct rv_msg *m)
{
	*m = c->q[c->q_head];
	c->q_head = (c->q_head + 1) % c->q_cap;
	c->q_len--;
	atomic_fetch_sub(&c->nq, 1);
}

/* May a message of c be handled now? true: handle *m (which may now be an
 * older message of c); false: *m was queued on c. */
static bool conn_admit(struct srv_conn *c, struct rv_msg *m)
{
	bool go;

	if (active_take(c))
		return true;
	pthread_mutex_lock(&c->q_lock);
	if (c->q_len == c->q_cap) {	/* beyond its credits: no room */
		pthread_mutex_unlock(&c->q_lock);
		atomic_fetch_add(&c->active, 1);
		return true;
	}
	c->q[(c->q_head + c->q_len) % c->q_cap] = *m;
	c->q_len++;
	atomic_fetch_add(&c->nq, 1);
	atomic_fetch_add_explicit(&c->srv->deferred, 1, memory_order_relaxed);
	go = active_take(c);	/* a finisher may have missed the push */
	if (go)
		q_pop_locked(c, m);
	pthread_mutex_unlock(&c->q_lock);
	return go;
}

/* A message of c was handled (c still held): true and *next when a queued
 * message of c is now the caller's to handle. */
static bool conn_done(struct srv_conn *c, struct rv_msg *next)
{
	bool go = false;

	atomic_fetch_sub(&c->active, 1);
	if (!atomic_load(&c->nq))
		return false;
	pthread_mutex_lock(&c->q_lock);
	if (c->q_len && (go = active_take(c)))
		q_pop_locked(c, next);
	pthread_mutex_unlock(&c->q_lock);
	return go;
}

/* Handle m; true and *next when a queued message of m's conn is now
 * ours (see conn_done). */
static bool worker_handle(struct srv_worker *w, struct rv_msg *m,
			  struct rv_msg *next)
{
	struct rs_server *s = w->srv;
	struct srv_conn *c = rv_conn_user(m->conn);
	bool more;

	atomic_fetch_add(&s->inflight, 1);
	if (!c->is_wake && !atomic_load(&c->dead)) {
		srv_debug_handling(c, 1);
		srv_handle(w, c, m->data, m->len);
		srv_debug_handling(c, -1);
	}
	else if (c->is_wake && !is_wake_msg(s, m))
		srv_conn_kill(c, RS_E_PROTO);
	rv_msg_release(m);
	atomic_fetch_sub(&s->inflight, 1);
	more = conn_done(c, next);	/* before: next holds c */
	conn_release(c);
	return more;
}

/* Handle w's batch; messages taken over from conn queues go to its end,
 * already admitted (their conn's active count includes them). A wait
 * for backups may hand the rest over meanwhile (srv_wait_begin). */
static void worker_batch(struct srv_worker *w)
{
	struct rv_msg m, next;
	unsigned tail;
	bool ok;

	while (w->blen) {
		m = w->batch[w->bhead];
		ok = w->admitted[w->bhead];
		w->bhead = (w->bhead + 1) % SRV_RECV_BATCH;
		w->blen--;
		if (!m.conn)
			continue;
		if (!ok && !conn_admit(rv_conn_user(m.conn), &m))
			continue;
		if (worker_handle(w, &m, &next)) {
			tail = (w->bhead + w->blen++) % SRV_RECV_BATCH;
			w->batch[tail] = next;
			w->admitted[tail] = true;
		}
	}
}

/* Leader: receive a batch into w (0: none). */
static int worker_recv(struct srv_worker *w)
{
	struct rs_server *s = w->srv;
	int n = rv_listener_recv(s->l, w->batch, SRV_RECV_BATCH,
				 atomic_load(&s->wake) ?
					 SRV_RECV_TIMEOUT_WAKE_MS :
					 SRV_RECV_TIMEOUT_MS);

	for (int i = 0; i < n; i++) {
		struct srv_conn *c = conn_of(s, w->batch[i].conn, false);

		w->admitted[i] = false;
		if (!c) { /* out of memory: drop the message */
			rv_msg_release(&w->batch[i]);
			w->batch[i].conn = NULL;
			continue;
		}
		atomic_fetch_add(&c->held, 1);
	}
	gate_leave(s);
	w->bhead = 0;
	w->blen = n > 0 ? (unsigned)n : 0;
	if (n < 0 && n != RS_E_TIMEOUT) {
		srv_log_at(RS_LOG_ERROR, "worker %u: receive failed: %s", w->idx,
			rs_errormsg());
		s->fatal = n;
		rs_server_stop(s);
		return n;
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct srv_worker *w = arg;
	struct rs_server *s = w->srv;
	char name[16];
	int how;

	cur_worker = w;
	snprintf(name, sizeof(name), "rs-worker-%u", w->idx);
	pthread_setname_np(pthread_self(), name);
	srv_numa_bind_thread(&s->numa);
	while ((how = gate_enter(s, w)) != GATE_STOP) {
		if (how == GATE_RECV && worker_recv(w))
			break;
		worker_batch(w);
	}
	return NULL;
}

static void worker_free(struct srv_worker *w)
{
	free(w->keys);
	free(w->vals);
	free(w->idx_map);
	free(w->coalesce);
	free(w->status);
	free(w->row);
	free(w->state);
	free(w->tmp);
	free(w->once);
	free(w->reply);
	free(w->evicted);
	free(w->images);
}

static int workers_start(struct rs_server *s)
{
	s->workers = rs_calloc(s->cfg.workers + SRV_WAITS_MAX,
			    sizeof(*s->workers));
	if (!s->workers)
		return rs_seterr(-ENOMEM, "workers: out of memory");
	for (unsigned i = 0; i < s->cfg.workers; i++) {
		struct srv_worker *w = &s->workers[i];
		int ret;

		w->srv = s;
		w->idx = i;
		w->reply = rs_malloc(s->reply_limit);
		if (!w->reply)
			return rs_seterr(-ENOMEM, "worker %u: out of memory", i);
		pthread_mutex_lock(&s->gate.lock);
		s->gate.nthreads++;	/* before it runs: see running_locked */
		ret = pthread_create(&w->thr, NULL, worker_main, w);
		if (ret)
			s->gate.nthreads--;
		pthread_mutex_unlock(&s->gate.lock);
		if (ret)
			return rs_seterr(-ret, "starting worker %u: %s", i,
					 strerror(ret));
		w->started = true;
		s->nworkers++;
	}
	return 0;
}

/* After the workers left: messages still handed over are released. */
static void handoff_drop(struct rs_server *s)
{
	struct srv_gate *g = &s->gate;

	while (g->ho_len) {
		struct rv_msg m = g->ho[g->ho_head].m;
		struct srv_conn *c = rv_conn_user(m.conn);

		g->ho_head = (g->ho_head + 1) % g->ho_cap;
		g->ho_len--;
		rv_msg_release(&m);
		conn_release(c);
	}
	free(g->ho);
	g->ho = NULL;
	g->ho_cap = g->ho_head = 0;
}

static void workers_stop(struct rs_server *s)
{
	unsigned n;

	atomic_store(&s->stopping, true);
	pthread_mutex_lock(&s->gate.lock);
	pthread_cond_broadcast(&s->gate.cond);
	pthread_cond_broadcast(&s->gate.spare_cv);
	n = s->gate.nthreads;	/* no spare starts once stopping is set */
	pthread_mutex_unlock(&s->gate.lock);
	for (unsigned i = 0; s->workers && i < s->cfg.workers + SRV_WAITS_MAX;
	     i++) {
		if (i >= n) {
			worker_free(&s->workers[i]);
			continue;
		}
		struct timespec ts;

		while (s->workers[i].started) {
			wake_leader(s);
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			if (!pthread_timedjoin_np(s->workers[i].thr, NULL, &ts))
				s->workers[i].started = false;
		}
		worker_free(&s->workers[i]);
	}
	handoff_drop(s);
	s->gate.nthreads = s->gate.nwaiting = s->gate.nparked = 0;
	s->gate.wakes = 0;
	free(s->workers);
	s->workers = NULL;
	s->nworkers = 0;
}

/* ---- run ---- */

static int epoll_add(int ep, int fd)
{
	struct epoll_event e = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

static int run_loop(struct rs_server *s, int ep)
{
	struct epoll_event evs[4];
	struct rv_event ev;
	int ret;

	for (;;) {
		while ((ret = rv_listener_event(s->l, &ev, 0)) == 0)
			on_event(s, &ev);
		if (ret != RS_E_TIMEOUT) {
			srv_log_at(RS_LOG_ERROR, "listener failed: %s",
				   rs_errormsg());
			return ret;
		}
		parked_tick(s);
		reap(s, false);
		if (atomic_load(&s->stop_req))
			return s->fatal;
		ret = epoll_wait(ep, evs, 4, atomic_load(&s->parked_conns) ?
						     SRV_PARK_TICK_MS : -1);
		if (ret < 0 && errno != EINTR)
			return rs_seterr(-errno, "epoll_wait: %s",
					 strerror(errno));
		for (int i = 0; i < ret; i++)
			if (evs[i].data.fd == s->stop_fd ||
			    evs[i].data.fd == s->poke_fd)
				fd_drain(evs[i].data.fd);
	}
}

RS_EXPORT int rs_server_run(struct rs_server *s)
{
	int ep, ret;

	if (!s)
		return rs_seterr(RS_E_INVAL, "server: NULL");
	if (atomic_exchange(&s->running, true))
		return rs_seterr(RS_E_INVAL, "server: already running");
	srv_numa_bind_thread(&s->numa);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		ret = rs_seterr(-errno, "epoll_create1: %s", strerror(errno));
		goto not_running;
	}
	if ((ret = epoll_add(ep, rv_listener_fd(s->l))) ||
	    (ret = epoll_add(ep, s->stop_fd)) ||
	    (ret = epoll_add(ep, s->poke_fd))) {
		ret = rs_seterr(ret, "epoll_ctl: %s", strerror(-ret));
		goto close_ep;
	}
	atomic_store(&s->stopping, false);
	ret = workers_start(s);
	if (!ret) {
		wake_start(s);
		ret = run_loop(s, ep);
	}
	workers_stop(s);
	wake_stop(s);
	reap(s, true);
close_ep:
	close(ep);
not_running:
	atomic_store(&s->running, false);
	return ret;
}

RS_EXPORT void rs_server_stop(struct rs_server *s)
{
	if (!s)
		return;
	atomic_store(&s->stop_req, true);
	fd_poke(s->stop_fd);
}

/* ---- open / close ---- */

/* First IPv4 address of the netdev under an RDMA device (port 1). */
static int device_ipv4(const char *dev, char *out, size_t len)
{
	char path[512], ndev[IF_NAMESIZE + 2] = "";
	struct ifaddrs *ifa, *i;
	FILE *f;
	int found = 0;

	for (int gid = 0; gid < 4 && !ndev[0]; gid++) {
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/"
			 "gid_attrs/ndevs/%d", dev, gid);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(ndev, sizeof(ndev), f))
			ndev[0] = '\0';
		fclose(f);
		ndev[strcspn(ndev, "\n")] = '\0';
	}
	if (!ndev[0] || getifaddrs(&ifa))
		return -1;
	for (i = ifa; i && !found; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    !strcmp(i->ifa_name, ndev))
			found = inet_ntop(AF_INET,
					  &((struct sockaddr_in *)i->ifa_addr)
						   ->sin_addr,
					  out, (socklen_t)len) != NULL;
	freeifaddrs(ifa);
	return found ? 0 : -1;
}

static int open_device(struct rs_server *s)
{
	struct srv_config *o = &s->cfg;
	const char *spec = o->device[0] ? o->device
			   : o->listen_addr[0] ? o->listen_addr : NULL;
	int ret;

	ret = rv_dev_open(&s->dev, spec);
	if (ret)
		return ret; /* rv's message names the device or address */
	rv_dev_caps(s->dev, &s->caps);
	if (!o->listen_addr[0] &&
	    device_ipv4(s->caps.name, o->listen_addr, sizeof(o->listen_addr)))
		return rs_seterr(RS_E_NODEV, "listen: device %s has no IPv4 "
				 "address; set \"listen\"", s->caps.name);
	return 0;
}

static int open_listener(struct rs_server *s)
{
	struct rv_listener_attr la;
	int ret;

	rv_listener_attr_init(&la);
	la.conn.msg_max = s->cfg.limits.max_message_bytes;
	la.conn.credits = (uint16_t)s->cfg.credits;
	la.conn.send_slots = (uint16_t)s->cfg.credits;
	if (s->cfg.spin_us)
		la.conn.spin_us = s->cfg.spin_us;
	la.max_conns = s->cfg.max_conns;
	la.max_conns_per_peer = s->cfg.max_conns_per_peer;
	la.conn.keepalive_ms = s->cfg.keepalive_ms;
	if (s->auth_on) {
		la.on_request = srv_auth_on_request;
		la.arg = s;
	}
	ret = rv_listen(s->dev, s->cfg.listen_addr, s->cfg.listen_port, &la,
			&s->l);
	if (ret)
		return srv_err(ret, "listen on %s:%u: %s", s->cfg.listen_addr,
				 s->cfg.listen_port, rs_errormsg());
	ret = rs_addr_format(s->cfg.listen_addr, rv_listener_port(s->l),
			     s->listen_addr, sizeof(s->listen_addr));
	if (ret < 0)
		return srv_err(ret, "listen address: %s", rs_errormsg());
	srv_auth_announce(s);
	return 0;
}

static int open_trace(struct rs_server *s)
{
	int ret;

	if (s->cfg.trace_path) {
		ret = trace_open(s->cfg.trace_path, s->cfg.trace_sample);
		if (ret == RS_E_EXISTS)
			return 0; /* the process traces already */
		if (ret)
			return srv_err(ret, "trace: %s", rs_errormsg());
		s->trace_opened = true;
		return 0;
	}
	ret = trace_open_env();
	if (ret < 0)
		return srv_err(ret, "RS_TRACE: %s", rs_errormsg());
	s->trace_opened = ret == 1;
	return 0;
}

static int open_all(struct rs_server *s)
{
	int ret;

	if ((ret = open_device(s)))
		return ret;
	ret = srv_numa_init(&s->numa, s->caps.name, NULL, NULL);
	if (ret)
		srv_warn("warning: %s", rs_errormsg());
	else if (s->numa.nnodes > 1)
		srv_log("numa: %s", s->numa.why);
	if ((ret = srv_metrics_init(s)))
		return ret;
	if ((ret = srv_tables_open(&s->tables, s, &s->cfg)))
		return ret;
	s->tables_open = true;
	if ((ret = srv_tables_apply_config(&s->tables, &s->cfg)))
		return ret;
	if ((ret = srv_auth_open(s)))
		return ret;
	if ((ret = open_listener(s)))
		return ret;
	if ((ret = srv_metrics_serve(s)))
		return ret;
	if ((ret = open_trace(s)))
		return ret;
	if ((ret = srv_stagelog_start(s)))
		return ret;
	if ((ret = srv_evict_start(s)))
		return ret;
	if ((ret = srv_repl_start(s)))
		return ret;
	return srv_coord_start(s);
}

RS_EXPORT int rs_server_open(struct rs_server **out,
			     const struct rs_server_config *cfg)
{
	struct rs_server *s;
	int ret;

	if (!out)
		return rs_seterr(RS_E_INVAL, "server: out is NULL");
	*out = NULL;
	s = rs_calloc(1, sizeof(*s));
	if (!s)
		return rs_seterr(-ENOMEM, "server: out of memory");
	s->stop_fd = s->poke_fd = -1;
	pthread_mutex_init(&s->gate.lock, NULL);
	pthread_cond_init(&s->gate.cond, NULL);
	pthread_cond_init(&s->gate.spare_cv, NULL);
	pthread_mutex_init(&s->conns_lock, NULL);
	srv_ckpt_init(s);
	srv_repl_init(s);
	s->numa.node = -1;
	ret = srv_config_to_node(cfg, &s->cfg);
	if (ret)
		goto close;
	s->repl.on = s->cfg.coord_endpoints != NULL;
	/* the read lease: two thirds of the coordination lease, so that a
	 * node's reads of etcd (at least every third of it) leave clients a
	 * third of it to read by (docs/replication.md, "Read leases") */
	s->repl.lease_ms = s->cfg.coord_lease_ms / 3 * 2;
	if (s->repl.lease_ms > PROTO_CONFIG_MAX_LEASE_MS)
		s->repl.lease_ms = PROTO_CONFIG_MAX_LEASE_MS;
	s->reply_limit = s->cfg.limits.max_message_bytes > SRV_REPLY_MIN_BYTES ?
			 s->cfg.limits.max_message_bytes : SRV_REPLY_MIN_BYTES;
	s->conn_cap = s->cfg.workers > 1 ? s->cfg.workers - 1 : 1;
	srv_debug_init(s);
	if (getrandom(&s->node_id, sizeof(s->node_id), 0) !=
	    (ssize_t)sizeof(s->node_id))
		s->node_id = (uint64_t)getpid() << 32 | (uint64_t)time(NULL);
	if (getrandom(&s->wake_token, sizeof(s->wake_token), 0) !=
	    (ssize_t)sizeof(s->wake_token))
		s->wake_token = ~s->node_id ^ (uint64_t)(uintptr_t)s;
	s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	s->poke_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->stop_fd < 0 || s->poke_fd < 0) {
		ret = rs_seterr(-errno, "eventfd: %s", strerror(errno));
		goto close;
	}
	srv_log_memory(&s->cfg);
	ret = open_all(s);
	if (ret)
		goto close;
	*out = s;
	return 0;

close:
	{
		char msg[1024];

		snprintf(msg, sizeof(msg), "%s", rs_errormsg());
		rs_server_close(&s);
		rs_seterr(ret, "%s", msg);
	}
	return ret;
}

RS_EXPORT void rs_server_close(struct rs_server **sp)
{
	struct rs_server *s = sp ? *sp : NULL;

	if (!s)
		return;
	srv_coord_stop(s);
	reap(s, true);
	/* the sweep of a cluster member forwards its deletions (repl) and
	 * reads the tables: stop it before either goes */
	srv_evict_stop(s);
	srv_repl_fini(s);	/* its peer connections use the device */
	/* the scrape thread reads the listener's counters (rs_cq_*,
	 * rs_transport_events_total): stop it before the listener goes */
	metrics_http_stop(&s->m.http);
	rv_listener_close(&s->l);
	srv_stagelog_stop(s);	/* its last window, then no more reads */
	srv_auth_close(s);
	if (s->tables_open)
		srv_tables_close(&s->tables);
	srv_metrics_fini(s);
	if (s->trace_opened)
		trace_close();
	rv_dev_close(&s->dev);
	srv_numa_fini(&s->numa);
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	if (s->poke_fd >= 0)
		close(s->poke_fd);
	srv_config_clear(&s->cfg);
	pthread_mutex_destroy(&s->conns_lock);
	srv_ckpt_destroy(s);
	pthread_cond_destroy(&s->gate.spare_cv);
	pthread_cond_destroy(&s->gate.cond);
	pthread_mutex_destroy(&s->gate.lock);
	free(s);
	*sp = NULL;
}

RS_EXPORT const char *rs_server_listen_addr(const struct rs_server *s)
{
	return s ? s->listen_addr : NULL;
}

RS_EXPORT unsigned rs_server_metrics_port(const struct rs_server *s)
{
	return s && s->m.http ? metrics_http_port(s->m.http) : 0;
}
