/*
 * rv_logic.h - the pure decisions of the verbs layer, kept apart from any
 * ibv_* call so that unit tests can check them without a device:
 *   - how long the next READ chain is (in-flight and send-queue bounds);
 *   - which sends are signaled (selective signaling without SQ deadlock);
 *   - credit-based flow control for messages;
 *   - the immediate-data word and the rdma_cm handshake header.
 * Everything here is a function of its arguments; no locking.
 */
#ifndef RS_VERBS_RV_LOGIC_H
#define RS_VERBS_RV_LOGIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Length of the next READ chain, or 0 to wait for completions first.
 *   inflight   READs posted and not completed
 *   depth      bound on outstanding READs (max_rd_atomic)
 *   sq_free    send-queue slots free for READs
 *   chain_max  preferred chain length
 *   remaining  requests still to post
 * A chain never takes the READs above depth or the slots above sq_free. A
 * short chain is posted only when it is all that is left, when at least
 * half a chain fits, or when nothing is in flight (so progress never
 * depends on a completion that cannot come).
 */
uint32_t rv_chain_len(uint32_t inflight, uint32_t depth, uint32_t sq_free,
		      uint32_t chain_max, uint32_t remaining);

/*
 * Selective signaling of sends: op `seq` is signaled when at least `every`
 * ops were posted since the last signaled one. With every <= ring/2 a full
 * ring always holds a signaled op, so slots are always reclaimed.
 */
static inline bool rv_signal_due(uint64_t seq, uint64_t last_signaled,
				 uint32_t every)
{
	return seq - last_signaled >= every;
}

/*
 * Flow control. The receiver keeps `slots` buffers per conn: slots - 1 for
 * data messages and one for credit-only messages. The sender starts with
 * slots - 1 data credits and one "credit token":
 *   - a data message spends one data credit;
 *   - the receiver "owes" a data credit for every data buffer it re-posts
 *     (when the application releases the message) and returns all it owes
 *     in every message it sends;
 *   - when it owes at least rv_credit_thresh() and holds the token, it sends
 *     a credit-only message, spending the token. That message lands in the
 *     control buffer, which the peer's completion handler re-posts at once
 *     (no application involved) and acknowledges with a flag in its next
 *     message, which gives the token back.
 * Credit returns thus never wait for data credits: a side that holds
 * received messages while it waits to send (decode in place, reply, then
 * release) cannot deadlock the other side's returns. The ack rides on the
 * data the peer sends with the credits it just got, so it always comes back
 * before the token is needed again.
 */
static inline bool rv_credit_data_ok(int32_t credits)
{
	return credits >= 1;
}

static inline int32_t rv_credit_thresh(uint32_t slots)
{
	int32_t t = (int32_t)(slots - 1) / 2;

	return t > 0 ? t : 1;
}

static inline bool rv_credit_ctrl_due(int32_t owed, int32_t token,
				      int32_t thresh)
{
	return owed >= thresh && token > 0;
}

/* Immediate data of every SEND: type in the top byte, then the ack of a
 * credit-only message received, then the credits returned. */
enum { RV_IMM_DATA = 1, RV_IMM_CREDIT = 2 };
#define RV_IMM_ACK (1u << 23)
#define RV_IMM_CREDIT_MAX 0x7fffffu

static inline uint32_t rv_imm_pack(unsigned type, uint32_t credits, bool ack)
{
	return (uint32_t)type << 24 | (ack ? RV_IMM_ACK : 0) |
	       (credits & RV_IMM_CREDIT_MAX);
}

static inline unsigned rv_imm_type(uint32_t imm)
{
	return imm >> 24;
}

static inline bool rv_imm_ack(uint32_t imm)
{
	return imm & RV_IMM_ACK;
}

static inline uint32_t rv_imm_credits(uint32_t imm)
{
	return imm & RV_IMM_CREDIT_MAX;
}

/*
 * Credits from the wire are checked, never trusted:
 *   - returned credits (the immediate of every message) may only bring the
 *     sender's credit count back up to what the peer granted in its
 *     handshake (slots - 1): more is a protocol violation (a 2^23 claim
 *     would otherwise wrap a signed counter);
 *   - a receiver that shares its buffers (the listener's SRQ) counts the
 *     credits the peer has used: messages received and not released
 *     (`held`, this one included) plus those released but not yet returned
 *     (`owed`). Above the grant the peer ignored flow control.
 */
static inline bool rv_credit_return_ok(int32_t cur, uint32_t n,
				       uint32_t granted)
{
	return cur >= 0 && n <= granted && (uint64_t)cur + n <= granted;
}

static inline bool rv_credit_rx_ok(int32_t held, int32_t owed,
				   uint32_t granted)
{
	return held >= 0 && owed >= 0 &&
	       (uint64_t)(uint32_t)held + (uint32_t)owed <= granted;
}

/*
 * Handshake header in front of the caller's bytes in rdma_cm private data
 * (12 bytes, little endian):
 *   0  u16 magic 0x5652 ("RV")   2 u8 version (1)   3 u8 caller bytes
 *   4  u16 receive buffers the sender keeps for this conn (data + 1)
 *   6  u16 READ depth: client's wish / server's grant
 *   8  u32 largest message the sender receives
 * A transport may pad private data with zeros; the caller-bytes count says
 * how much is real.
 */
#define RV_HELLO_MAGIC 0x5652
#define RV_HELLO_VERSION 1
#define RV_HELLO_LEN 12

struct rv_hello {
	uint16_t slots;
	uint16_t rd_depth;
	uint32_t msg_max;
	const uint8_t *user;	/* unpack: points into the buffer */
	uint8_t user_len;
};

/* Bounds on a peer's handshake numbers (its receive buffers per conn: a
 * node never lets a peer claim more than a conn may have, 16383 + 1). */
#define RV_SLOTS_MAX 16384

/* Pack hello + user bytes into buf; returns the length or -1 if too big. */
int rv_hello_pack(uint8_t *buf, size_t cap, const struct rv_hello *h,
		  const void *user, size_t user_len);
/* Unpack; returns 0, or -1 for anything malformed (a peer's bytes). */
int rv_hello_unpack(const void *buf, size_t len, struct rv_hello *h);

/*
 * Why a listener refused a connection request: carried in the reject's
 * private data so that the client can say why (12 bytes, little endian):
 *   0  u16 magic 0x5652   2 u8 version (1)   3 u8 0xee (a reject)
 *   4  u16 reason          6 u16 0            8 u32 the limit involved
 * Transports may pad the private data; anything else is "not ours".
 */
enum rv_reject_reason {
	RV_REJ_MALFORMED = 1,	/* handshake absent, short, or not ours */
	RV_REJ_LIMITS,		/* a handshake number out of range */
	RV_REJ_FULL,		/* the listener's max_conns reached */
	RV_REJ_PEER_LIMIT,	/* max_conns_per_peer reached for this address */
	RV_REJ_REFUSED,		/* the listener's owner refused (on_request) */
	RV_REJ_RESOURCES,	/* the node could not set the conn up */
	RV_REJ_DEVICE,		/* the request came through another device */
	RV_REJ_MAX_
};
#define RV_REJECT_LEN 12
#define RV_REJECT_TAG 0xee

int rv_reject_pack(uint8_t *buf, size_t cap, unsigned reason, uint32_t limit);
/* 0 and the reason (and limit), or -1 if the bytes are not an rv reject. */
int rv_reject_unpack(const void *buf, size_t len, unsigned *reason,
		     uint32_t *limit);
/* A phrase for a reason ("too many connections from this address"). */
const char *rv_reject_str(unsigned reason);

#endif
