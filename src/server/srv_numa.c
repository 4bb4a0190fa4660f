/*
 * srv_numa.c - placing the memory node's threads and slab memory on the
 * NUMA node of its RDMA device (hwloc).
 *
 * Why: every one-sided READ a client issues is served by the NIC from the
 * node's slab memory, and every RPC is handled by a worker that touches
 * the same memory and the NIC's queues. Memory and threads on the NIC's
 * NUMA node keep both off the inter-socket link.
 *
 * How:
 *   1. hwloc loads the topology; with one NUMA node (or none reported)
 *      there is nothing to place and nothing is bound.
 *   2. The device's node is read from sysfs:
 *      <sysfs>/class/infiniband/<dev>/device/numa_node (what the PCI core
 *      reports; -1 when the platform does not say, e.g. software devices
 *      such as rxe, whose "device" is the netdev's parent or absent).
 *   3. Threads are bound (hwloc_set_cpubind, HWLOC_CPUBIND_THREAD) to the
 *      cpuset of that NUMA node; memory allocated while the placement is
 *      "entered" (the slab pool at open, first touch) is bound to it with
 *      hwloc_set_membind(HWLOC_MEMBIND_BIND, THREAD | BYNODESET) and the
 *      previous policy is restored afterwards.
 * Binding failures are not fatal: the node runs unplaced, and the reason
 * is in srv_numa.why (logged at open).
 *
 * Ownership: a struct srv_numa owns its topology and bitmaps
 * (srv_numa_fini). Concurrency: after init it is read-only; binding calls
 * act on the calling thread and may run concurrently.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/srv_internal.h"

int srv_numa_dev_node(const char *sysfs_root, const char *dev)
{
	char path[512], buf[32];
	FILE *f;
	long v;
	char *end;

	if (!dev || !*dev || strchr(dev, '/'))
		return -1;
	snprintf(path, sizeof(path), "%s/class/infiniband/%s/device/numa_node",
		 sysfs_root ? sysfs_root : "/sys", dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || v < 0 || v > 4095)
		return -1;
	return (int)v;
}

/* Choose the placement in an already loaded topology. */
static void numa_choose(struct srv_numa *n, int dev_node, const char *dev)
{
	hwloc_obj_t obj;

	n->nnodes = hwloc_get_nbobjs_by_type(n->topo, HWLOC_OBJ_NUMANODE);
	if (n->nnodes <= 1) {
		snprintf(n->why, sizeof(n->why),
			 "%d NUMA node(s): no placement needed",
			 n->nnodes < 1 ? 1 : n->nnodes);
		return;
	}
	if (dev_node < 0) {
		snprintf(n->why, sizeof(n->why),
			 "%d NUMA nodes, but device %s reports no NUMA node: "
			 "threads and memory not placed", n->nnodes,
			 dev ? dev : "?");
		return;
	}
	obj = hwloc_get_numanode_obj_by_os_index(n->topo, (unsigned)dev_node);
	if (!obj || !obj->cpuset || hwloc_bitmap_iszero(obj->cpuset)) {
		snprintf(n->why, sizeof(n->why),
			 "device %s is on NUMA node %d, which has no CPUs in "
			 "the topology: not placed", dev ? dev : "?",
			 dev_node);
		return;
	}
	n->cpuset = hwloc_bitmap_dup(obj->cpuset);
	n->nodeset = hwloc_bitmap_dup(obj->nodeset);
	if (!n->cpuset || !n->nodeset) {
		hwloc_bitmap_free(n->cpuset);
		hwloc_bitmap_free(n->nodeset);
		n->cpuset = n->nodeset = NULL;
		snprintf(n->why, sizeof(n->why), "out of memory: not placed");
		return;
	}
	n->node = dev_node;
	snprintf(n->why, sizeof(n->why),
		 "device %s on NUMA node %d of %d: workers and slab memory "
		 "placed there", dev ? dev : "?", dev_node, n->nnodes);
}

int srv_numa_init(struct srv_numa *n, const char *dev, const char *sysfs_root,
		  const char *synthetic)
{
	memset(n, 0, sizeof(*n));
	n->node = -1;
	if (hwloc_topology_init(&n->topo))
		return rs_seterr(-ENOMEM, "numa: hwloc_topology_init failed");
	if (synthetic && hwloc_topology_set_synthetic(n->topo, synthetic)) {
		hwloc_topology_destroy(n->topo);
		n->topo = NULL;
		return rs_seterr(RS_E_INVAL, "numa: bad synthetic topology "
				 "'%s'", synthetic);
	}
	if (hwloc_topology_load(n->topo)) {
		int err = errno ? -errno : -EIO;

		hwloc_topology_destroy(n->topo);
		n->topo = NULL;
		return rs_seterr(err, "numa: hwloc_topology_load failed");
	}
	numa_choose(n, srv_numa_dev_node(sysfs_root, dev), dev);
	return 0;
}

void srv_numa_fini(struct srv_numa *n)
{
	if (!n)
		return;
	hwloc_bitmap_free(n->cpuset);
	hwloc_bitmap_free(n->nodeset);
	hwloc_bitmap_free(n->saved_set);
	if (n->topo)
		hwloc_topology_destroy(n->topo);
	memset(n, 0, sizeof(*n));
	n->node = -1;
}

int srv_numa_bind_thread(const struct srv_numa *n)
{
	if (!n->cpuset)
		return 0;
	if (hwloc_set_cpubind(n->topo, n->cpuset, HWLOC_CPUBIND_THREAD))
		return rs_seterr(errno ? -errno : -EINVAL, "numa: binding a "
				 "thread to node %d failed", n->node);
	return 1;
}

int srv_numa_mem_enter(struct srv_numa *n)
{
	if (!n->nodeset)
		return 0;
	n->saved_set = hwloc_bitmap_alloc();
	if (!n->saved_set)
		return rs_seterr(-ENOMEM, "numa: out of memory");
	if (hwloc_get_membind(n->topo, n->saved_set, &n->saved_policy,
			      HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET))
		n->saved_policy = HWLOC_MEMBIND_DEFAULT;
	if (hwloc_set_membind(n->topo, n->nodeset, HWLOC_MEMBIND_BIND,
			      HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET)) {
		hwloc_bitmap_free(n->saved_set);
		n->saved_set = NULL;
		return rs_seterr(errno ? -errno : -EINVAL, "numa: binding "
				 "memory to node %d failed", n->node);
	}
	return 1;
}

void srv_numa_mem_leave(struct srv_numa *n)
{
	if (!n->saved_set)
		return;
	if (n->saved_policy == HWLOC_MEMBIND_DEFAULT ||
	    hwloc_bitmap_iszero(n->saved_set) ||
	    hwloc_set_membind(n->topo, n->saved_set, n->saved_policy,
			      HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET))
		hwloc_set_membind(n->topo, hwloc_topology_get_topology_nodeset(
						   n->topo),
				  HWLOC_MEMBIND_DEFAULT,
				  HWLOC_MEMBIND_THREAD |
					  HWLOC_MEMBIND_BYNODESET);
	hwloc_bitmap_free(n->saved_set);
	n->saved_set = NULL;
}
