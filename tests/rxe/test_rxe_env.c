/*
 * test_rxe_env.c - the RDMA test environment itself, before any project code.
 *
 * ci/with-rxe.sh (natively through ci/rxe-setup.sh, or in a QEMU guest through
 * ci/rxe-vm.sh) promises the tests in tests/rxe/ an environment described by
 * RS_RDMA_DEV, RS_RDMA_IP, RS_RDMA_IPS and RS_RDMA_GID_INDEX
 * (docs/DEVELOPING.md). This test checks that promise directly with verbs and
 * rdma_cm, so that a broken set-up fails here with a plain message instead
 * of as an obscure failure deep in a project test:
 *   - the device RS_RDMA_DEV is listed and opens, port 1 is ACTIVE;
 *   - GID index RS_RDMA_GID_INDEX exists and, when RS_RDMA_IP is set, is the
 *     IPv4-mapped GID of that address (what raw verbs tools are told to use);
 *   - every address in RS_RDMA_IPS has a GID on the same port;
 *   - memory registration works (ulimit -l is large enough);
 *   - rdma_cm binds RS_RDMA_IP and resolves it to RS_RDMA_DEV (the rdma_ucm
 *     module stack is present).
 * It is the one test outside src/verbs allowed to call ibv_* / rdma_*: it
 * tests the environment, not the project. Exits 77 (skip) when RS_RDMA_DEV
 * is not set.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define PORT_NUM 1
#define GID_SCAN_MAX 64		/* entries searched for RS_RDMA_IPS */
#define MR_BYTES (4u << 20)

struct env {
	const char *dev_name;
	const char *ip;
	const char *ips;
	int gid_index;
	struct ibv_context *ctx;
	struct ibv_port_attr port;
};

static struct env env;

/* The IPv4-mapped GID ::ffff:a.b.c.d of a dotted address; -1 if malformed. */
static int ipv4_gid(const char *ip, union ibv_gid *gid)
{
	struct in_addr a;

	if (inet_pton(AF_INET, ip, &a) != 1)
		return -1;
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], &a, 4);
	return 0;
}

static int setup(void **state)
{
	struct ibv_device **list;
	int n;

	list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr, "ibv_get_device_list: %s\n", strerror(errno));
		return -1;
	}
	for (int i = 0; i < n && !env.ctx; i++) {
		if (strcmp(ibv_get_device_name(list[i]), env.dev_name) == 0) {
			env.ctx = ibv_open_device(list[i]);
			if (!env.ctx)
				fprintf(stderr, "ibv_open_device(%s): %s\n",
					env.dev_name, strerror(errno));
		}
	}
	if (!env.ctx && n >= 0) {
		fprintf(stderr, "RS_RDMA_DEV=%s: not among the %d device(s):",
			env.dev_name, n);
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %s", ibv_get_device_name(list[i]));
		fprintf(stderr, "\n");
	}
	ibv_free_device_list(list);
	return env.ctx ? 0 : -1;
}

static int teardown(void **state)
{
	if (env.ctx)
		ibv_close_device(env.ctx);
	env.ctx = NULL;
	return 0;
}

static void port_is_active(void **state)
{
	struct ibv_device_attr dev;

	assert_int_equal(ibv_query_device(env.ctx, &dev), 0);
	assert_true(dev.phys_port_cnt >= PORT_NUM);
	assert_int_equal(ibv_query_port(env.ctx, PORT_NUM, &env.port), 0);
	if (env.port.state != IBV_PORT_ACTIVE)
		fail_msg("%s port %d is %s, not ACTIVE", env.dev_name,
			 PORT_NUM, ibv_port_state_str(env.port.state));
}

static void gid_index_exists(void **state)
{
	union ibv_gid gid, want;
	static const union ibv_gid zero;

	assert_int_equal(ibv_query_port(env.ctx, PORT_NUM, &env.port), 0);
	if (env.gid_index >= env.port.gid_tbl_len)
		fail_msg("RS_RDMA_GID_INDEX=%d beyond the GID table (%d)",
			 env.gid_index, env.port.gid_tbl_len);
	assert_int_equal(ibv_query_gid(env.ctx, PORT_NUM, env.gid_index, &gid),
			 0);
	if (memcmp(&gid, &zero, sizeof(gid)) == 0)
		fail_msg("GID index %d of %s is empty", env.gid_index,
			 env.dev_name);
	if (!env.ip)
		return;
	if (ipv4_gid(env.ip, &want))
		fail_msg("RS_RDMA_IP=%s is not an IPv4 address", env.ip);
	if (memcmp(&gid, &want, sizeof(gid)) != 0)
		fail_msg("GID index %d is not the IPv4-mapped GID of %s",
			 env.gid_index, env.ip);
}

static int gid_present(const union ibv_gid *want)
{
	union ibv_gid gid;
	int max = env.port.gid_tbl_len < GID_SCAN_MAX ?
		  env.port.gid_tbl_len : GID_SCAN_MAX;

	for (int i = 0; i < max; i++) {
		if (ibv_query_gid(env.ctx, PORT_NUM, i, &gid) == 0 &&
		    memcmp(&gid, want, sizeof(gid)) == 0)
			return 1;
	}
	return 0;
}

static void extra_ips_have_gids(void **state)
{
	char buf[512], *save = NULL, *ip;
	union ibv_gid want;

	if (!env.ips || !*env.ips)
		skip();
	assert_int_equal(ibv_query_port(env.ctx, PORT_NUM, &env.port), 0);
	if (strlen(env.ips) >= sizeof(buf))
		fail_msg("RS_RDMA_IPS is too long");
	strcpy(buf, env.ips);
	for (ip = strtok_r(buf, " ", &save); ip;
	     ip = strtok_r(NULL, " ", &save)) {
		if (ipv4_gid(ip, &want))
			fail_msg("RS_RDMA_IPS: '%s' is not an IPv4 address", ip);
		if (!gid_present(&want))
			fail_msg("no GID for %s on %s port %d", ip,
				 env.dev_name, PORT_NUM);
	}
}

static void memory_registers(void **state)
{
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	void *buf;

	pd = ibv_alloc_pd(env.ctx);
	assert_non_null(pd);
	buf = aligned_alloc(4096, MR_BYTES);
	assert_non_null(buf);
	memset(buf, 0, MR_BYTES);
	mr = ibv_reg_mr(pd, buf, MR_BYTES,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		fail_msg("ibv_reg_mr of %u bytes: %s (is ulimit -l too low?)",
			 MR_BYTES, strerror(errno));
	assert_int_equal(ibv_dereg_mr(mr), 0);
	free(buf);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

static void rdma_cm_binds_ip(void **state)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in sin = { .sin_family = AF_INET };

	if (!env.ip)
		skip();
	assert_int_equal(inet_pton(AF_INET, env.ip, &sin.sin_addr), 1);
	ch = rdma_create_event_channel();
	if (!ch)
		fail_msg("rdma_create_event_channel: %s (rdma_ucm missing?)",
			 strerror(errno));
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	if (rdma_bind_addr(id, (struct sockaddr *)&sin))
		fail_msg("rdma_bind_addr(%s): %s", env.ip, strerror(errno));
	assert_non_null(id->verbs);
	assert_string_equal(ibv_get_device_name(id->verbs->device),
			    env.dev_name);
	assert_int_equal(id->port_num, PORT_NUM);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	const char *s;
	char *end;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(port_is_active),
		cmocka_unit_test(gid_index_exists),
		cmocka_unit_test(extra_ips_have_gids),
		cmocka_unit_test(memory_registers),
		cmocka_unit_test(rdma_cm_binds_ip),
	};

	env.dev_name = getenv("RS_RDMA_DEV");
	if (!env.dev_name || !*env.dev_name) {
		fprintf(stderr, "RS_RDMA_DEV not set: no RDMA device, skip\n");
		return 77;
	}
	env.ip = getenv("RS_RDMA_IP");
	if (env.ip && !*env.ip)
		env.ip = NULL;
	env.ips = getenv("RS_RDMA_IPS");
	s = getenv("RS_RDMA_GID_INDEX");
	env.gid_index = 1;
	if (s && *s) {
		errno = 0;
		long v = strtol(s, &end, 10);

		if (errno || *end || v < 0 || v > 0xffff) {
			fprintf(stderr, "RS_RDMA_GID_INDEX=%s: not an index\n",
				s);
			return 1;
		}
		env.gid_index = (int)v;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
