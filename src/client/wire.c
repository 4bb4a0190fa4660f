/*
 * wire.c - request/reply exchanges with a memory node over a borrowed
 * connection context: HELLO, one-shot calls, and the paged TABLE_DIR.
 *
 * Every received message goes through proto_decode() with our limits (the
 * largest message is our receive buffer), so a malformed reply is
 * RS_E_PROTO and never read out of bounds. Replies are matched to requests
 * by req_id: a context is used by one call at a time and messages on a QP
 * arrive in order, so a mismatch means the node is broken (RS_E_PROTO, the
 * context is failed and closed).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/rs_internal.h"
#include "trace/trace.h"

static atomic_uint_fast64_t next_req_id = 1;

void cli_hdr_init(struct proto_hdr *h, uint64_t trace_id, bool sampled)
{
	memset(h, 0, sizeof(*h));
	h->req_id = atomic_fetch_add_explicit(&next_req_id, 1,
					      memory_order_relaxed);
	h->trace_id = trace_id;
	h->flags = sampled ? PROTO_F_TRACE : 0;
}

static void client_limits(struct proto_limits *lim)
{
	proto_limits_default(lim);
	lim->max_message_bytes = CLI_MSG_MAX;
	lim->max_batch_keys = PROTO_MAX_BATCH_KEYS;
	lim->max_dim = PROTO_MAX_DIM;
	lim->max_tables = PROTO_MAX_TABLES;
}

/* Receive and decode the reply to (op, req_id). */
static int wire_reply(struct cli_conn *cc, uint8_t op, uint64_t req_id,
		      struct rv_msg *raw, struct proto_msg *m)
{
	struct proto_limits lim;
	int ret;

	ret = cli_conn_recv(cc, raw);
	if (ret)
		return ret;
	client_limits(&lim);
	ret = proto_decode(raw->data, raw->len, &lim, m);
	if (!ret && (!(m->hdr.flags & PROTO_F_REPLY) || m->hdr.opcode != op ||
		     (req_id && m->hdr.req_id != req_id)))
		ret = rs_seterr(RS_E_PROTO, "node %s: reply %s/%llu to "
				"request %s/%llu", cc->node->name,
				proto_op_name(m->hdr.opcode),
				(unsigned long long)m->hdr.req_id,
				proto_op_name(op),
				(unsigned long long)req_id);
	if (ret) {
		rv_msg_release(raw);
		return cli_conn_fail(cc, ret);
	}
	if (m->hdr.status < 0) {
		ret = rs_seterr(m->hdr.status, "node %s: %s: %s",
				cc->node->name, proto_op_name(op),
				m->u.error.msg);
		rv_msg_release(raw);
		return ret;
	}
	return 0;
}

int cli_wire_recv(struct cli_conn *cc, uint8_t op, uint64_t req_id,
		  struct rv_msg *raw, struct proto_msg *m)
{
	return wire_reply(cc, op, req_id, raw, m);
}

int cli_wire_call(struct cli_conn *cc, size_t len, struct rv_msg *raw,
		  struct proto_msg *m)
{
	struct proto_limits lim;
	struct proto_msg req;
	int ret;

	/* Our own request: decode its header back (cheap, and keeps one
	 * source of truth for op and req_id). */
	client_limits(&lim);
	lim.max_message_bytes = cc->msg_max;
	ret = proto_decode(cc->msg, len, &lim, &req);
	if (ret)
		return ret;
	ret = cli_conn_send(cc, cc->msg, len);
	if (ret)
		return ret;
	return wire_reply(cc, req.hdr.opcode, req.hdr.req_id, raw, m);
}

int cli_wire_hello(struct cli_conn *cc)
{
	struct proto_hello_req hello = { .recv_bytes = CLI_MSG_MAX };
	struct proto_hdr h;
	struct proto_msg m;
	struct rv_msg raw;
	int len, ret;

	cli_hdr_init(&h, 0, false);
	len = proto_enc_hello_req(cc->msg, cc->msg_max, &h, &hello);
	if (len < 0)
		return len;
	ret = cli_wire_call(cc, (size_t)len, &raw, &m);
	if (ret)
		return ret;
	if (m.u.hello_reply.limits.max_message_bytes < cc->msg_max)
		cc->msg_max = m.u.hello_reply.limits.max_message_bytes;
	cc->max_batch_keys = m.u.hello_reply.limits.max_batch_keys;
	cc->dir_generation = m.u.hello_reply.dir_generation;
	rv_msg_release(&raw);
	return 0;
}

static int dir_page(struct cli_conn *cc, uint32_t start,
		    struct proto_table_info **tabs, uint32_t *count,
		    uint64_t *gen, uint32_t *total)
{
	struct proto_list_req lr = { .start = start };
	struct proto_table_info info, *grown;
	struct proto_hdr h;
	struct proto_msg m;
	struct rv_msg raw;
	int len, ret;

	cli_hdr_init(&h, 0, false);
	len = proto_enc_list_req(cc->msg, cc->msg_max, &h, PROTO_OP_TABLE_DIR,
				 &lr);
	if (len < 0)
		return len;
	ret = cli_wire_call(cc, (size_t)len, &raw, &m);
	if (ret)
		return ret;
	if (start > 0 && m.u.table_dir.generation != *gen)
		ret = -EAGAIN; /* changed under us: start again */
	*gen = m.u.table_dir.generation;
	*total = m.u.table_dir.total;
	if (!ret && m.u.table_dir.n == 0 && start < *total)
		ret = rs_seterr(RS_E_PROTO, "node %s: empty directory page",
				cc->node->name);
	if (!ret && m.u.table_dir.n) {
		grown = realloc(*tabs, (*count + m.u.table_dir.n) *
					       sizeof(**tabs));
		if (!grown)
			ret = rs_seterr(-ENOMEM, "directory: out of memory");
		else
			*tabs = grown;
	}
	while (!ret && proto_table_dir_next(&m.u.table_dir, &info))
		(*tabs)[(*count)++] = info;
	rv_msg_release(&raw);
	return ret;
}

int cli_wire_dir(struct cli_node *n, struct proto_table_info **out,
		 uint32_t *count, uint64_t *generation)
{
	struct cli_conn *cc;
	uint32_t total = 0;
	int ret, tries = 0;

	*out = NULL;
	*count = 0;
	ret = cli_conn_get(n, &cc);
	if (ret)
		return ret;
	do {
		free(*out);
		*out = NULL;
		*count = 0;
		do {
			ret = dir_page(cc, *count, out, count, generation,
				       &total);
		} while (!ret && *count < total);
	} while (ret == -EAGAIN && ++tries < 8);
	cli_conn_put(cc);
	if (ret) {
		free(*out);
		*out = NULL;
		*count = 0;
	}
	return ret;
}

/* The decoded view into *out (bounded by proto_decode: n <= the maximum,
 * every member checked). */
static int config_copy(struct cli_node *n, struct proto_config *v,
		       struct cli_config *out)
{
	struct proto_member mb;
	size_t i = 0;

	if (v->n > PROTO_CONFIG_MAX_MEMBERS || (v->epoch == 0 && v->n))
		return rs_seterr(RS_E_PROTO, "node %s: CONFIG of epoch %llu "
				 "with %u members", n->name,
				 (unsigned long long)v->epoch, v->n);
	out->epoch = v->epoch;
	out->ready = v->ready;
	out->self = v->self < v->n ? v->self : SIZE_MAX;
	out->r = v->r;
	out->vnodes = v->vnodes;
	if (!v->n)
		return 0;
	out->m = calloc(v->n, sizeof(*out->m));
	if (!out->m)
		return rs_seterr(-ENOMEM, "configuration: out of memory");
	while (i < v->n && proto_config_next(v, &mb))
		out->m[i++] = mb;
	out->n = i;
	if (i != v->n)
		return rs_seterr(RS_E_PROTO, "node %s: CONFIG lists %zu of %u "
				 "members", n->name, i, v->n);
	return 0;
}

int cli_wire_config(struct cli_node *n, struct cli_config *out,
		    unsigned wait_ms)
{
	struct cli_conn *cc;
	struct proto_hdr h;
	struct proto_msg m;
	struct rv_msg raw;
	int ret, len;

	int64_t sent;

	memset(out, 0, sizeof(*out));
	memset(&m.hdr, 0, sizeof(m.hdr));
	/* a stopped node's NIC takes the connection request and its
	 * process never accepts it: wait_ms bounds that wait too */
	ret = cli_conn_get_within(n, &cc, wait_ms);
	if (ret)
		return ret;
	cli_hdr_init(&h, 0, false);
	len = proto_enc_config_req(cc->msg, cc->msg_max, &h);
	sent = (int64_t)rs_mono_ms();
	if (wait_ms && wait_ms < n->timeout_ms)
		cc->recv_timeout_ms = wait_ms;
	ret = len < 0 ? len : cli_wire_call(cc, (size_t)len, &raw, &m);
	cc->recv_timeout_ms = 0;
	if (len >= 0 && !ret) {
		ret = config_copy(n, &m.u.config, out);
		/* the node read the configuration age_ms before it answered,
		 * so after we sent: it vouches until that read + lease_ms */
		if (m.u.config.age_ms < m.u.config.lease_ms)
			out->read_until = sent - m.u.config.age_ms +
					  m.u.config.lease_ms;
		rv_msg_release(&raw);
	} else if (len >= 0 && !cc->failed && m.hdr.status == ret &&
		   (ret == RS_E_PROTO || ret == RS_E_UNSUPPORTED)) {
		ret = 0; /* its error reply: it knows no CONFIG, epoch 0 */
	}
	cli_conn_put(cc);
	if (ret)
		cli_config_free(out);
	return ret;
}
