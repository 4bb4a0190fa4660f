/*
 * rv_dev.c - devices, protection domains, memory registration, and the
 * device's asynchronous events.
 *
 * Device contexts come from rdma_get_devices(), not ibv_open_device(): the
 * rdma_cm ids we create later carry librdmacm's context for the device, and
 * a QP can only use a PD of that same context. Holding the list keeps the
 * contexts open (librdmacm reference-counts them) until rv_dev_close().
 *
 * One thread per device sleeps in poll(2) on the context's async-event fd
 * (and an eventfd for shutdown). On a QP event (fatal, request or access
 * error) it fails that conn: the QP goes to the error state, so everything
 * posted on it completes with a flush error and waiters wake up. On a port
 * error or a fatal device error it fails every conn of the device. The conn
 * is found through qp->qp_context; ibv_destroy_qp() waits until the events
 * of the QP are acknowledged, so the conn outlives the handling. The list of
 * conns is guarded by dev->lock (the innermost lock).
 *
 * Memory: rv_mem_alloc() maps 2 MiB huge pages when it can (MAP_HUGETLB,
 * length rounded up to 2 MiB) and otherwise over-maps anonymous memory to
 * align it on 2 MiB and asks for transparent huge pages; rv_mr_reg()
 * registers memory the caller owns. Access defaults to LOCAL_WRITE +
 * REMOTE_READ: nothing is remotely writable unless asked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verbs/rv_internal.h"
#include "verbs/rv_fi.h"

#define RV_HUGE (2u << 20)

static int parse_ip(const char *s, struct sockaddr_storage *ss)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, s, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		return 0;
	}
	return -1;
}

/* Which context does the netdev holding `ip` belong to? */
static int ctx_by_ip(struct rv_dev *d, const char *ip,
		     struct ibv_context **ctx)
{
	struct rdma_cm_id *id;
	int ret;

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return rs_seterr(-errno, "rdma_create_id: %s", strerror(errno));
	if (rdma_bind_addr(id, (struct sockaddr *)&d->ip)) {
		ret = rs_seterr(RS_E_NODEV, "no RDMA device has address %s: %s",
				ip, strerror(errno));
		goto out_id;
	}
	if (!id->verbs) {
		ret = rs_seterr(RS_E_NODEV, "address %s is not on an RDMA "
				"device", ip);
		goto out_id;
	}
	*ctx = id->verbs;
	ret = 0;
out_id:
	rdma_destroy_id(id);
	return ret;
}

static int find_ctx(struct rv_dev *d, const char *spec)
{
	struct ibv_context *want = NULL;
	int n = 0, ret;

	d->list = rdma_get_devices(&n);
	if (!d->list || n == 0)
		return rs_seterr(RS_E_NODEV, "no RDMA device (rdma_get_devices:"
				 " %s)", strerror(errno ? errno : ENODEV));
	if (spec && *spec && parse_ip(spec, &d->ip) == 0) {
		d->has_ip = true;
		ret = ctx_by_ip(d, spec, &want);
		if (ret)
			return ret;
	}
	for (int i = 0; i < n; i++) {
		struct ibv_context *c = d->list[i];

		if (want ? c == want :
		    (!spec || !*spec ||
		     strcmp(ibv_get_device_name(c->device), spec) == 0)) {
			d->ctx = c;
			break;
		}
	}
	if (!d->ctx)
		return rs_seterr(RS_E_NODEV, "no RDMA device '%s'",
				 spec ? spec : "");
	snprintf(d->name, sizeof(d->name), "%s",
		 ibv_get_device_name(d->ctx->device));
	return 0;
}

static uint32_t port_max_msg(struct ibv_context *ctx)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, 1, &pa) || pa.max_msg_sz == 0)
		return 1u << 30;
	return pa.max_msg_sz;
}

static void fail_all(struct rv_dev *d, int code, const char *why)
{
	pthread_mutex_lock(&d->lock);
	for (struct rv_conn *c = d->conns; c; c = c->dev_next)
		rv_conn_fail(c, code, "%s: %s", d->name, why);
	pthread_mutex_unlock(&d->lock);
}

static void handle_async(struct rv_dev *d, struct ibv_async_event *ev)
{
	struct rv_conn *c;

	switch (ev->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
		c = ev->element.qp->qp_context;
		if (c)
			rv_conn_fail(c, RS_E_VERBS, "%s: async event %s on "
				     "QP %u", d->name,
				     ibv_event_type_str(ev->event_type),
				     ev->element.qp->qp_num);
		break;
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_DEVICE_FATAL:
	case IBV_EVENT_SRQ_ERR:
		if (ev->event_type == IBV_EVENT_DEVICE_FATAL)
			atomic_store(&d->fatal, 1);
		fail_all(d, RS_E_DISCONNECTED,
			 ibv_event_type_str(ev->event_type));
		break;
	default:	/* COMM_EST, LAST_WQE_REACHED, PORT_ACTIVE, ... */
		break;
	}
}

static void *async_main(void *arg)
{
	struct rv_dev *d = arg;
	struct pollfd pf[2] = {
		{ .fd = d->ctx->async_fd, .events = POLLIN },
		{ .fd = d->wake_fd, .events = POLLIN },
	};
	struct ibv_async_event ev;

	for (;;) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents)
			break;
		while (ibv_get_async_event(d->ctx, &ev) == 0) {
			handle_async(d, &ev);
			ibv_ack_async_event(&ev);
		}
		if (atomic_load(&d->fatal))
			break;
	}
	return NULL;
}

int rv_dev_open(struct rv_dev **out, const char *spec)
{
	struct rv_dev *d;
	int ret, fl;

	*out = NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return rs_seterr(-ENOMEM, "rv_dev_open: out of memory");
	pthread_mutex_init(&d->lock, NULL);
	d->wake_fd = -1;
	ret = find_ctx(d, spec);
	if (ret)
		goto err_list;
	if (ibv_query_device(d->ctx, &d->attr)) {
		ret = rs_seterr(-EIO, "%s: ibv_query_device failed", d->name);
		goto err_list;
	}
	d->max_msg = port_max_msg(d->ctx);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		ret = rs_seterr(-(errno ? errno : ENOMEM),
				"%s: ibv_alloc_pd: %s", d->name,
				strerror(errno));
		goto err_list;
	}
	fl = fcntl(d->ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(d->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		ret = rs_seterr(-errno, "%s: async fd: %s", d->name,
				strerror(errno));
		goto err_pd;
	}
	d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->wake_fd < 0) {
		ret = rs_seterr(-errno, "eventfd: %s", strerror(errno));
		goto err_pd;
	}
	ret = pthread_create(&d->async_thr, NULL, async_main, d);
	if (ret) {
		ret = rs_seterr(-ret, "%s: async thread: %s", d->name,
				strerror(ret));
		goto err_wake;
	}
	*out = d;
	return 0;

err_wake:
	close(d->wake_fd);
err_pd:
	ibv_dealloc_pd(d->pd);
err_list:
	if (d->list)
		rdma_free_devices(d->list);
	pthread_mutex_destroy(&d->lock);
	free(d);
	return ret;
}

void rv_dev_close(struct rv_dev **dp)
{
	struct rv_dev *d = dp ? *dp : NULL;
	uint64_t one = 1;

	if (!d)
		return;
	if (write(d->wake_fd, &one, sizeof(one)) != sizeof(one))
		rs_seterr(-errno, "rv_dev_close: eventfd write failed");
	pthread_join(d->async_thr, NULL);
	close(d->wake_fd);
	ibv_dealloc_pd(d->pd);
	rdma_free_devices(d->list);
	pthread_mutex_destroy(&d->lock);
	free(d);
	*dp = NULL;
}

void rv_dev_caps(const struct rv_dev *d, struct rv_dev_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
	snprintf(caps->name, sizeof(caps->name), "%s", d->name);
	caps->max_qp_wr = (uint32_t)d->attr.max_qp_wr;
	caps->max_rd_atom = (uint32_t)d->attr.max_qp_rd_atom;
	if ((uint32_t)d->attr.max_qp_init_rd_atom < caps->max_rd_atom)
		caps->max_rd_atom = (uint32_t)d->attr.max_qp_init_rd_atom;
	caps->max_srq_wr = (uint32_t)d->attr.max_srq_wr;
	caps->max_cqe = (uint32_t)d->attr.max_cqe;
	caps->max_mr_size = d->attr.max_mr_size;
	caps->hugepages = atomic_load_explicit(&d->huge_ok,
					       memory_order_relaxed);
}

void rv_dev_link(struct rv_dev *d, struct rv_conn *c)
{
	pthread_mutex_lock(&d->lock);
	c->dev_prev = NULL;
	c->dev_next = d->conns;
	if (d->conns)
		d->conns->dev_prev = c;
	d->conns = c;
	pthread_mutex_unlock(&d->lock);
}

void rv_dev_unlink(struct rv_dev *d, struct rv_conn *c)
{
	pthread_mutex_lock(&d->lock);
	if (c->dev_prev)
		c->dev_prev->dev_next = c->dev_next;
	else if (d->conns == c)
		d->conns = c->dev_next;
	if (c->dev_next)
		c->dev_next->dev_prev = c->dev_prev;
	c->dev_next = c->dev_prev = NULL;
	pthread_mutex_unlock(&d->lock);
}

/* ---- memory ---- */

static int to_ibv_access(unsigned acc, int *out)
{
	int f = 0;

	if (acc == 0)
		acc = RV_ACC_DEFAULT;
	if (acc & ~(unsigned)(RV_ACC_LOCAL_WRITE | RV_ACC_REMOTE_READ |
			      RV_ACC_REMOTE_WRITE | RV_ACC_REMOTE_ATOMIC))
		return rs_seterr(RS_E_INVAL, "unknown access bits 0x%x", acc);
	if (acc & (RV_ACC_REMOTE_WRITE | RV_ACC_REMOTE_ATOMIC))
		acc |= RV_ACC_LOCAL_WRITE;	/* required by verbs */
	if (acc & RV_ACC_LOCAL_WRITE)
		f |= IBV_ACCESS_LOCAL_WRITE;
	if (acc & RV_ACC_REMOTE_READ)
		f |= IBV_ACCESS_REMOTE_READ;
	if (acc & RV_ACC_REMOTE_WRITE)
		f |= IBV_ACCESS_REMOTE_WRITE;
	if (acc & RV_ACC_REMOTE_ATOMIC)
		f |= IBV_ACCESS_REMOTE_ATOMIC;
	*out = f;
	return 0;
}

static int reg(struct rv_dev *d, struct rv_mr *m, unsigned access)
{
	struct ibv_mr *mr;
	int flags = 0, ret;

	ret = to_ibv_access(access, &flags);
	if (ret)
		return ret;
	mr = ibv_reg_mr(d->pd, m->addr, m->len, flags);
	if (!mr) {
		int e = errno ? errno : ENOMEM;

		return rs_seterr(-e, "%s: ibv_reg_mr(%p, %zu bytes): %s%s",
				 d->name, m->addr, m->len, strerror(e),
				 e == EOPNOTSUPP || e == EFAULT ?
				 " (memory that cannot be pinned, e.g. fsdax "
				 "pages: use devdax)" :
				 e == ENOMEM || e == EPERM ?
				 " (check ulimit -l)" : "");
	}
	m->ibmr = mr;
	m->lkey = mr->lkey;
	m->rkey = mr->rkey;
	return 0;
}

static void *map_aligned(size_t len, size_t *map_len, bool *huge)
{
	size_t hlen = (len + RV_HUGE - 1) & ~(size_t)(RV_HUGE - 1);
	uint8_t *p, *a;
	size_t over;

	if (len >= RV_HUGE) {
		p = mmap(NULL, hlen, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
			 MAP_POPULATE, -1, 0);
		if (p != MAP_FAILED) {
			*map_len = hlen;
			*huge = true;
			return p;
		}
	}
	*huge = false;
	if (len < RV_HUGE) {
		*map_len = (len + 4095) & ~(size_t)4095;
		p = mmap(NULL, *map_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	over = hlen + RV_HUGE;
	p = mmap(NULL, over, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)p + RV_HUGE - 1) & ~(uintptr_t)(RV_HUGE - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (p + over > a + hlen)
		munmap(a + hlen, (size_t)(p + over - (a + hlen)));
	madvise(a, hlen, MADV_HUGEPAGE);
	*map_len = hlen;
	return a;
}

int rv_mem_alloc(struct rv_dev *d, size_t len, unsigned access,
		 struct rv_mr **out)
{
	struct rv_mr *m;
	int ret;

	*out = NULL;
	if (len == 0)
		return rs_seterr(RS_E_INVAL, "rv_mem_alloc: zero length");
	m = calloc(1, sizeof(*m));
	if (!m)
		return rs_seterr(-ENOMEM, "rv_mem_alloc: out of memory");
	m->addr = map_aligned(len, &m->map_len, &m->huge);
	if (!m->addr) {
		ret = rs_seterr(-ENOMEM, "rv_mem_alloc: cannot map %zu bytes",
				len);
		goto err_free;
	}
	if (m->huge)	/* a node allocates from its workers too (peers) */
		atomic_store_explicit(&d->huge_ok, true,
				      memory_order_relaxed);
	m->len = len;
	ret = reg(d, m, access);
	if (ret)
		goto err_unmap;
	*out = m;
	return 0;

err_unmap:
	munmap(m->addr, m->map_len);
err_free:
	free(m);
	return ret;
}

int rv_mr_reg(struct rv_dev *d, void *addr, size_t len, unsigned access,
	      struct rv_mr **out)
{
	struct rv_mr *m;
	int ret;

	*out = NULL;
	if (!addr || len == 0)
		return rs_seterr(RS_E_INVAL, "rv_mr_reg: empty region");
	m = calloc(1, sizeof(*m));
	if (!m)
		return rs_seterr(-ENOMEM, "rv_mr_reg: out of memory");
	m->addr = addr;
	m->len = len;
	ret = reg(d, m, access);
	if (ret) {
		free(m);
		return ret;
	}
	*out = m;
	return 0;
}

void rv_mr_free(struct rv_mr **mp)
{
	struct rv_mr *m = mp ? *mp : NULL;

	if (!m)
		return;
	if (m->ibmr)
		ibv_dereg_mr(m->ibmr);
	if (m->map_len)
		munmap(m->addr, m->map_len);
	free(m);
	*mp = NULL;
}
