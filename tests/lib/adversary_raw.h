/*
 * adversary_raw.h - a raw RC client for the adversarial test
 * (test_adversary.c), written on libibverbs + librdmacm directly and on
 * purpose NOT on src/verbs: it must be able to say and do what the verbs
 * layer never would (lie in the rdma_cm handshake, ignore credits, send
 * without immediate data, write into regions it was only allowed to read).
 *
 * What it knows of the verbs layer's wire contract (src/verbs/rv_logic.h):
 *   - the handshake header in the rdma_cm private data, 12 bytes little
 *     endian: u16 magic 0x5652, u8 version 1, u8 caller bytes, u16 receive
 *     buffers kept for the conn ("slots": data credits + 1), u16 READ depth,
 *     u32 largest message received (msg_max);
 *   - every message is one SEND_WITH_IMM whose immediate is
 *     type << 24 | ack << 23 | credits returned (type 1 data, 2 credit-only).
 * Messages themselves are src/common/proto.h requests, built with its
 * encoders (the wire format, not the verbs layer).
 *
 * One struct raw_conn is one rdma_cm id with its own event channel, PD, CQ,
 * QP and one registered buffer: `nrecv` receive buffers of `rsize` bytes,
 * then a send buffer of `ssize` bytes. Single-threaded: a conn belongs to
 * the thread that opened it. Functions return 0 / a count, or a negative
 * errno; nothing here exits.
 */
#ifndef ADVERSARY_RAW_H
#define ADVERSARY_RAW_H

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define RAW_HELLO_MAGIC 0x5652
#define RAW_HELLO_LEN 12
#define RAW_IMM_DATA 1u
#define RAW_IMM_CREDIT 2u
#define RAW_REJECTED 1	/* raw_connect: the node said no */
#define RAW_WRID_RECV (1ull << 63)

uint32_t raw_imm(unsigned type, uint32_t credits, int ack);

/* The handshake header (caller bytes count 0) into buf[12]. */
void raw_hello(uint8_t *buf, uint16_t magic, uint8_t version,
	       uint8_t user_len, uint16_t slots,
	       uint16_t rd_depth, uint32_t msg_max);

double raw_now(void);

int raw_sockaddr(const char *ip, uint16_t port,
		 struct sockaddr_in *sa);

struct raw_opts {
	const char *src;	/* source address (NULL: any) */
	const char *dst;
	uint16_t port;
	const void *priv;	/* rdma_cm private data (the handshake) */
	uint8_t priv_len;
	uint32_t nrecv;		/* receive buffers posted (0: none) */
	uint32_t rsize;		/* bytes each */
	uint32_t ssize;		/* send buffer bytes */
	uint32_t sq;		/* send queue depth */
	uint8_t retry, rnr_retry;
	int timeout_ms;
};

struct raw_conn {
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *mem, *sbuf;
	struct raw_opts o;
	/* the node's handshake answer */
	int hello_ok;
	uint16_t peer_slots;
	uint32_t peer_msg_max;
	/* flow control as a well-behaved peer would do it */
	uint32_t owed;		/* receive buffers re-posted, untold */
	int ack;		/* a credit-only message to acknowledge */
};

void raw_opts_init(struct raw_opts *o, const char *src,
		   const char *dst, uint16_t port);

/* Next cm event within ms (0 with *ev, or -ETIMEDOUT / -errno). */
int raw_cm_wait(struct rdma_event_channel *ech, int ms,
		struct rdma_cm_event **ev);

int raw_post_recv(struct raw_conn *c, uint32_t slot);

void raw_close(struct raw_conn *c);

/* Connect; 0 established, RAW_REJECTED, or -errno (c closed unless 0). */
int raw_connect(struct raw_conn *c, const struct raw_opts *o);

/* Connect with a well-formed handshake (slots receive buffers offered). */
int raw_connect_ok(struct raw_conn *c, struct raw_opts *o);

/* 1 if a DISCONNECTED (or any terminal cm event) arrived, else 0. */
int raw_dropped(struct raw_conn *c, int ms);

/* Post one WR of opcode on the send buffer (len bytes, signaled). */
int raw_post(struct raw_conn *c, enum ibv_wr_opcode op,
	     uint32_t len, uint32_t imm, uint64_t raddr,
	     uint32_t rkey, uint64_t wr_id, int signaled);

/* Poll one completion within ms: 1 and *wc, 0 on timeout. */
int raw_poll(struct raw_conn *c, int ms, struct ibv_wc *wc);

/* Send len bytes of sbuf as a data message returning what we owe. */
int raw_send(struct raw_conn *c, uint32_t len);

/*
 * Wait for the next data message within ms (re-posting credit-only
 * messages and send completions on the way): its length, with *data in
 * the receive buffer and *slot to raw_release(); 0 on timeout; -EIO when
 * a completion failed (*wc_status set).
 */
int raw_recv(struct raw_conn *c, int ms, const uint8_t **data,
	     uint32_t *slot, int *wc_status);

void raw_release(struct raw_conn *c, uint32_t slot);

#endif
