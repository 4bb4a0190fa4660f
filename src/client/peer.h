/*
 * peer.h - the client's request path to one node, as far as another node
 * needs it: a primary ships writes to its backups (src/server/srv_repl.c)
 * and a joining node copies ranges (srv_copy.c) over the same
 * connections, messages and replies a client uses. This is the node's
 * whole view of src/client: a struct cli_node (conn.h: address,
 * connection pool) per peer, and the calls below. The rest of the client
 * (struct rs_client, tables, routes, caches: client_internal.h) stays
 * out of the node's sight, so that it can change without the node
 * depending on it.
 *
 * Threads: as for every cli_conn, a context is used by the one thread
 * that borrowed it (cli_conn_get .. cli_conn_put).
 */
#ifndef CLI_PEER_H
#define CLI_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/conn.h"
#include "common/proto.h"

/* cluster.c: a code that says the node is unreachable or its connection
 * broke. */
bool cli_conn_error(int code);

/* wire.c: request/reply exchange on a borrowed context. */
void cli_hdr_init(struct proto_hdr *h, uint64_t trace_id, bool sampled);
/* Send one request built in cc->msg (len bytes) and wait for its reply;
 * *m is the decoded reply (valid until rv_msg_release(raw)). A reply with
 * hdr.status < 0 is returned as that status with its message set. */
int cli_wire_call(struct cli_conn *cc, size_t len, struct rv_msg *raw,
		  struct proto_msg *m);
/* Receive the reply to a request sent earlier with cli_conn_send()
 * (req_id 0: the reply to any request of opcode op; replies to pipelined
 * requests may come in any order, since node workers run in parallel).
 * m->hdr stays valid also when a whole-request error is returned. */
int cli_wire_recv(struct cli_conn *cc, uint8_t op, uint64_t req_id,
		  struct rv_msg *raw, struct proto_msg *m);
/* Fetch the whole directory of node n into a malloc'ed array. */
int cli_wire_dir(struct cli_node *n, struct proto_table_info **out,
		 uint32_t *count, uint64_t *generation);

#endif
