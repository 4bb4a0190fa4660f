/*
 * test_server_pipeline.c - requests pipelined on one connection: a long
 * request must not get its neighbours' replies (or the connection) killed.
 *
 * Three workers (two may handle one conn's messages at once) and a 10 ms
 * send timeout. Round after round the raw client sends a GET_OR_INIT of
 * 1800 new keys (creating 1800 rows takes far longer than 10 ms here),
 * then, while it is being worked on, a one-key GET. A worker that held the
 * connection's send slot while working would make the GET's reply wait
 * for it past the send timeout, and the node would drop the connection.
 * Both replies must arrive, with the right statuses and rows, and the
 * connection must stay up.
 */
#include "server_harness.h"

#define NKEYS 1800
#define DIM 32
#define ROUNDS 5

static struct sv_node node;


static uint64_t send_keys(struct sv_cli *k, const struct proto_table_info *t,
			  uint32_t op, const uint64_t *keys, uint32_t n)
{
	struct proto_keys_req q = { .table_id = t->id,
				    .table_gen = t->generation, .n = n,
				    .keys = keys };
	struct proto_hdr h;
	int len;

	sv_hdr(k, &h);
	len = proto_enc_keys_req(k->buf, k->cap, &h, op, &q);
	SV_OK(len);
	SV_OK(sv_send(k, k->buf, (size_t)len));
	return h.req_id;
}

int main(void)
{
	static uint64_t keys[NKEYS];
	struct rs_server_config *cfg;
	struct proto_table_spec spec;
	struct proto_table_info t = { 0 };
	struct sv_cli k;
	const char *ip;

	ip = sv_ip();
	setvbuf(stdout, NULL, _IOLBF, 0);
	sv_memlock();
	cfg = sv_config("{ \"workers\": 3, \"send_timeout_ms\": 10 }\n");
	sv_node_start(&node, ip, cfg);
	rs_server_config_delete(&cfg);
	sv_cli_open(&k, node.ip, node.port);
	sv_spec(&spec, "pipe", DIM, OPTIM_SGD);
	spec.capacity = 16384;
	SV_OK(sv_create(&k, &spec, &t));
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t big, small, lone = 900000 + (uint64_t)r;
		int got = 0;

		for (int i = 0; i < NKEYS; i++)
			keys[i] = (uint64_t)r * NKEYS + (uint64_t)i + 1;
		big = send_keys(&k, &t, PROTO_OP_GET_OR_INIT, keys, NKEYS);
		usleep(2000);	/* let a worker start on it */
		small = send_keys(&k, &t, PROTO_OP_GET, &lone, 1);
		while (got < 2) {
			struct proto_msg m;
			struct rv_msg raw;
			int32_t st;

			SV_OK(sv_recv(&k, &raw, &m));
			SV_CHECK(m.hdr.status == 0, "round %d: request %llu "
				 "failed: %s", r,
				 (unsigned long long)m.hdr.req_id,
				 m.u.error.msg);
			if (m.hdr.req_id == big) {
				SV_CHECK(m.u.keys_reply.n == NKEYS, "n");
				for (uint32_t i = 0; i < NKEYS; i++) {
					proto_load_i32(&st,
						(const uint8_t *)
						m.u.keys_reply.status + 4 * i, 1);
					SV_CHECK(st == PROTO_ST_CREATED,
						 "key %u: status %d", i, st);
				}
			} else {
				SV_CHECK(m.hdr.req_id == small, "reply to "
					 "%llu", (unsigned long long)
					 m.hdr.req_id);
				proto_load_i32(&st, m.u.keys_reply.status, 1);
				SV_CHECK(st == RS_E_NOTFOUND, "lone key: %d",
					 st);
			}
			rv_msg_release(&raw);
			got++;
		}
	}
	SV_CHECK(sv_stat(&k, PROTO_NO_TABLE, "connections") == 1,
		 "the connection was dropped");
	printf("%d rounds of a %d-key GET_OR_INIT with a GET pipelined "
	       "behind it: every reply arrived, connection up\n", ROUNDS,
	       NKEYS);
	sv_cli_close(&k);
	sv_node_stop(&node);
	printf("ok\n");
	return 0;
}
