/*
 * rv_logic.c - pure decisions of the verbs layer (see rv_logic.h): READ chain
 * sizing, the handshake header codec and the reject reasons. No verbs calls, no state.
 */
#include <string.h>

#include "verbs/rv_logic.h"

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

uint32_t rv_chain_len(uint32_t inflight, uint32_t depth, uint32_t sq_free,
		      uint32_t chain_max, uint32_t remaining)
{
	uint32_t room, want, k;

	if (inflight >= depth || remaining == 0 || chain_max == 0)
		return 0;
	room = min_u32(depth - inflight, sq_free);
	want = min_u32(chain_max, remaining);
	k = min_u32(room, want);
	if (k == 0)
		return 0;
	if (k == want || inflight == 0 || k >= (chain_max + 1) / 2)
		return k;
	return 0;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return get16(p) | (uint32_t)get16(p + 2) << 16;
}

int rv_hello_pack(uint8_t *buf, size_t cap, const struct rv_hello *h,
		  const void *user, size_t user_len)
{
	if (user_len > 255 || cap < RV_HELLO_LEN + user_len)
		return -1;
	put16(buf, RV_HELLO_MAGIC);
	buf[2] = RV_HELLO_VERSION;
	buf[3] = (uint8_t)user_len;
	put16(buf + 4, h->slots);
	put16(buf + 6, h->rd_depth);
	put32(buf + 8, h->msg_max);
	if (user_len)
		memcpy(buf + RV_HELLO_LEN, user, user_len);
	return (int)(RV_HELLO_LEN + user_len);
}

int rv_hello_unpack(const void *buf, size_t len, struct rv_hello *h)
{
	const uint8_t *p = buf;

	if (!p || len < RV_HELLO_LEN)
		return -1;
	if (get16(p) != RV_HELLO_MAGIC || p[2] != RV_HELLO_VERSION)
		return -1;
	if ((size_t)p[3] > len - RV_HELLO_LEN)
		return -1;
	h->slots = get16(p + 4);
	h->rd_depth = get16(p + 6);
	h->msg_max = get32(p + 8);
	h->user_len = p[3];
	h->user = p + RV_HELLO_LEN;
	if (h->slots < 4 || h->rd_depth == 0)
		return -1;
	return 0;
}

int rv_reject_pack(uint8_t *buf, size_t cap, unsigned reason, uint32_t limit)
{
	if (cap < RV_REJECT_LEN)
		return -1;
	put16(buf, RV_HELLO_MAGIC);
	buf[2] = RV_HELLO_VERSION;
	buf[3] = RV_REJECT_TAG;
	put16(buf + 4, (uint16_t)reason);
	put16(buf + 6, 0);
	put32(buf + 8, limit);
	return RV_REJECT_LEN;
}

int rv_reject_unpack(const void *buf, size_t len, unsigned *reason,
		     uint32_t *limit)
{
	const uint8_t *p = buf;

	if (!p || len < RV_REJECT_LEN || get16(p) != RV_HELLO_MAGIC ||
	    p[2] != RV_HELLO_VERSION || p[3] != RV_REJECT_TAG)
		return -1;
	*reason = get16(p + 4);
	*limit = get32(p + 8);
	if (*reason == 0 || *reason >= RV_REJ_MAX_)
		return -1;
	return 0;
}

const char *rv_reject_str(unsigned reason)
{
	switch (reason) {
	case RV_REJ_MALFORMED:
		return "handshake missing or malformed";
	case RV_REJ_LIMITS:
		return "handshake asks for more receive buffers than allowed";
	case RV_REJ_FULL:
		return "the node has its maximum number of connections";
	case RV_REJ_PEER_LIMIT:
		return "too many connections from this address";
	case RV_REJ_REFUSED:
		return "refused by the node";
	case RV_REJ_RESOURCES:
		return "the node could not allocate the connection";
	case RV_REJ_DEVICE:
		return "the request came through another RDMA device";
	default:
		return "unknown reason";
	}
}
