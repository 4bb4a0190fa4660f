/*
 * test_server_stall.c - a peer that returns no credits must not stall
 * anyone else, and a peer that overruns its requests is cut off.
 *
 * The node runs with ONE worker and a 60 s send timeout, so that a worker
 * waiting for a peer's credits would stall every other client for a
 * minute (longer than this test's wait for progress). A raw client
 * ("stuck") sends requests and never receives: the node's 16 reply
 * credits toward it run out and later replies cannot be sent. Meanwhile a
 * well-behaved client (PUT + GET + verify) must keep making progress, and
 * the stuck conn must still be up (its replies parked, not given up on).
 * Then the stuck client sends more requests than the node grants it in
 * flight (credits + 1) while still returning nothing: the node cuts it off
 * (rs_connections_cut_total{reason="overrun"}, STATS connections_cut) and
 * goes on serving.
 */
#include "server_harness.h"

#define STUCK_FIRST 20	/* 16 replies delivered, 4 parked */
#define STUCK_MORE 40	/* parked beyond credits + 1 */

static struct sv_node node;
static struct sv_good good = { .node = &node, .nkeys = 8, .dim = 4,
				 .span = 100 };

static void send_dirs(struct sv_cli *k, int n, int timeout_ms)
{
	for (int i = 0; i < n; i++) {
		struct proto_list_req lr = { .start = 0 };
		struct proto_hdr h;
		int len;

		sv_hdr(k, &h);
		len = proto_enc_list_req(k->buf, k->cap, &h,
					 PROTO_OP_TABLE_DIR, &lr);
		SV_OK(len);
		if (rv_msg_send(k->c, k->buf, (size_t)len, timeout_ms) < 0)
			return;	/* cut off already */
	}
}


int main(void)
{
	struct rs_server_config *cfg;
	struct sv_cli ctl, stuck;
	unsigned long r0;
	const char *ip;
	double t0;

	ip = sv_ip();
	setvbuf(stdout, NULL, _IOLBF, 0);
	sv_memlock();
	cfg = sv_config("{ \"workers\": 1, \"send_timeout_ms\": 60000 }\n");
	sv_node_start(&node, ip, cfg);
	rs_server_config_delete(&cfg);
	printf("node on %s (1 worker, send timeout 60 s)\n", node.addr);
	sv_cli_open(&ctl, node.ip, node.port);
	sv_good_start(&good);
	while (!good.rounds)
		usleep(10000);

	/* phase 1: the stuck client exhausts its reply credits */
	sv_cli_open(&stuck, node.ip, node.port);
	send_dirs(&stuck, STUCK_FIRST, SV_TIMEOUT_MS);
	r0 = good.rounds;
	t0 = sv_now();
	while (good.rounds < r0 + 20) {
		SV_CHECK(sv_now() - t0 < 30, "the good client stalled behind "
			 "a peer that returns no credits (%lu rounds)",
			 good.rounds - r0);
		usleep(10000);
	}
	SV_CHECK(sv_stat(&ctl, PROTO_NO_TABLE, "connections_cut") == 0,
		 "the stuck client was cut off before its send timeout");
	SV_CHECK(sv_stat(&ctl, PROTO_NO_TABLE, "connections") == 3,
		 "the stuck conn is gone");
	printf("stuck client with %d requests unanswered: the good client "
	       "made %lu rounds meanwhile\n", STUCK_FIRST - 16,
	       good.rounds - r0);

	/* phase 2: it overruns what it may have outstanding */
	send_dirs(&stuck, STUCK_MORE, 2000);
	t0 = sv_now();
	while (sv_stat(&ctl, PROTO_NO_TABLE, "connections_cut") == 0 ||
	       sv_stat(&ctl, PROTO_NO_TABLE, "connections") != 2) {
		SV_CHECK(sv_now() - t0 < 30, "the overrunning client was not "
			 "cut off");
		usleep(10000);
	}
	r0 = good.rounds;
	while (good.rounds < r0 + 5)
		usleep(10000);
	printf("overrunning client cut off; the node goes on serving\n");

	sv_cli_close(&stuck);
	sv_good_stop(&good);
	printf("well-behaved client: %lu verified rounds\n", good.rounds);
	sv_cli_close(&ctl);
	sv_node_stop(&node);
	printf("ok\n");
	return 0;
}
