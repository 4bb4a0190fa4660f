/*
 * test_server_numa.c - the memory node's NUMA placement decision
 * (src/server/srv_numa.c) against synthetic hwloc topologies and a fake
 * sysfs tree, so that the multi-socket paths are checked on any machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "server/srv_internal.h"

static char root[64];

/* <root>/class/infiniband/<dev>/device/numa_node := text (NULL: none) */
static void fake_dev(const char *dev, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/class/infiniband/%s/device", root,
		 dev);
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	mkdir(path, 0755);
	strcat(path, "/numa_node");
	unlink(path);
	if (!text)
		return;
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/rs-numa-XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) ? -1 : 0;
}

static void dev_node_from_sysfs(void **state)
{
	(void)state;
	fake_dev("mlx5_0", "1\n");
	fake_dev("mlx5_1", "-1\n");
	fake_dev("mlx5_2", "garbage\n");
	fake_dev("mlx5_3", NULL);
	assert_int_equal(srv_numa_dev_node(root, "mlx5_0"), 1);
	assert_int_equal(srv_numa_dev_node(root, "mlx5_1"), -1);
	assert_int_equal(srv_numa_dev_node(root, "mlx5_2"), -1);
	assert_int_equal(srv_numa_dev_node(root, "mlx5_3"), -1);
	assert_int_equal(srv_numa_dev_node(root, "nosuch"), -1);
	assert_int_equal(srv_numa_dev_node(root, "../../etc"), -1);
	assert_int_equal(srv_numa_dev_node(root, ""), -1);
	assert_int_equal(srv_numa_dev_node(root, NULL), -1);
}

static void two_nodes_device_on_one(void **state)
{
	struct srv_numa n;

	(void)state;
	fake_dev("mlx5_0", "1\n");
	assert_int_equal(srv_numa_init(&n, "mlx5_0", root,
				       "pack:2 numa:1 core:2 pu:1"), 0);
	assert_int_equal(n.nnodes, 2);
	assert_int_equal(n.node, 1);
	assert_non_null(n.cpuset);
	assert_int_equal(hwloc_bitmap_weight(n.cpuset), 2);
	assert_true(hwloc_bitmap_isset(n.cpuset, 2));
	assert_true(hwloc_bitmap_isset(n.cpuset, 3));
	assert_true(hwloc_bitmap_isset(n.nodeset, 1));
	assert_false(hwloc_bitmap_isset(n.nodeset, 0));
	assert_non_null(strstr(n.why, "NUMA node 1 of 2"));
	srv_numa_fini(&n);
	assert_int_equal(n.node, -1);
}

static void two_nodes_device_unknown(void **state)
{
	struct srv_numa n;

	(void)state;
	fake_dev("rxe0", "-1\n");
	assert_int_equal(srv_numa_init(&n, "rxe0", root, "numa:2 core:2 pu:1"),
			 0);
	assert_int_equal(n.nnodes, 2);
	assert_int_equal(n.node, -1);
	assert_null(n.cpuset);
	assert_non_null(strstr(n.why, "reports no NUMA node"));
	/* nothing to bind: both calls are no-ops */
	assert_int_equal(srv_numa_bind_thread(&n), 0);
	assert_int_equal(srv_numa_mem_enter(&n), 0);
	srv_numa_mem_leave(&n);
	srv_numa_fini(&n);
}

static void device_on_missing_node(void **state)
{
	struct srv_numa n;

	(void)state;
	fake_dev("mlx5_0", "7\n");
	assert_int_equal(srv_numa_init(&n, "mlx5_0", root,
				       "numa:2 core:2 pu:1"), 0);
	assert_int_equal(n.node, -1);
	assert_null(n.cpuset);
	assert_non_null(strstr(n.why, "not placed"));
	srv_numa_fini(&n);
}

static void one_node(void **state)
{
	struct srv_numa n;

	(void)state;
	fake_dev("mlx5_0", "0\n");
	assert_int_equal(srv_numa_init(&n, "mlx5_0", root, "core:4 pu:1"), 0);
	assert_int_equal(n.nnodes, 1);
	assert_int_equal(n.node, -1);
	assert_null(n.cpuset);
	assert_non_null(strstr(n.why, "no placement needed"));
	srv_numa_fini(&n);
}

static void this_machine(void **state)
{
	struct srv_numa n;

	(void)state;
	/* whatever this machine is, init works and decides something */
	assert_int_equal(srv_numa_init(&n, "nosuch", NULL, NULL), 0);
	assert_true(n.nnodes >= 1);
	assert_true(n.why[0] != '\0');
	assert_int_equal(n.node, -1); /* no such device: not placed */
	srv_numa_fini(&n);
}

static void bad_synthetic(void **state)
{
	struct srv_numa n;

	(void)state;
	assert_int_equal(srv_numa_init(&n, "x", root, "nonsense:foo"),
			 RS_E_INVAL);
	srv_numa_fini(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dev_node_from_sysfs),
		cmocka_unit_test(two_nodes_device_on_one),
		cmocka_unit_test(two_nodes_device_unknown),
		cmocka_unit_test(device_on_missing_node),
		cmocka_unit_test(one_node),
		cmocka_unit_test(this_machine),
		cmocka_unit_test(bad_synthetic),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
