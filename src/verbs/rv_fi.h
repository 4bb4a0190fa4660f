/*
 * rv_fi.h - failure injection for src/verbs (debug and sanitizer builds).
 *
 * Included LAST by every file of src/verbs (after <infiniband/verbs.h> and
 * <rdma/rdma_cma.h>, through the other headers). With RS_FAULT_INJECT
 * defined (CMakeLists.txt: Debug and sanitizer builds), each verbs and
 * rdma_cm call that can fail, and calloc/malloc/realloc/posix_memalign/mmap,
 * becomes a function-like macro that first asks rv_fi_fail(site) and, if
 * told to fail, returns the call's documented error shape without calling
 * it: NULL (MAP_FAILED for mmap) with errno, -1 with errno, a positive errno
 * (ibv_post_* also set *bad_wr), or a negative count (ibv_poll_cq).
 * Otherwise the real function runs: a function-like macro does not expand
 * inside its own expansion, so the name there is the real one, also for
 * verbs' static inline functions. Call sites stay unchanged. Calls that
 * release or only describe (destroy, dealloc, dereg, ack, *_str) are not
 * injected: a failed release cannot be unwound.
 *
 * Without RS_FAULT_INJECT this header defines nothing.
 *
 * The allocators are those of src/common/alloc.h (rs_calloc, ...), and the
 * counter is alloc.h's too: the verbs sites are numbered after the
 * allocator sites, so one arming covers both and a test of the storage
 * side counts allocations the same way.
 *
 * Counting. Only threads that called rv_fi_enroll() count and fail (the
 * test's threads, not the device's async thread), so a sequence of calls
 * is repeatable. rv_fi_arm(site, nth) fails the nth call (from 1) of site
 * (RV_FI_ANY: of any site) counted since the arming, once; nth 0 disarms
 * and only counts. rv_fi_calls() tells how many calls of a site were
 * counted, rv_fi_fired() whether the armed failure happened. A disarmed
 * rv_fi_fail() costs a thread-local load. Thread-safe; the arming is for
 * one test at a time.
 */
#ifndef RS_VERBS_RV_FI_H
#define RS_VERBS_RV_FI_H

#include <stdbool.h>

#ifdef RS_FAULT_INJECT

#include "common/alloc.h"

/* the verbs sites, numbered after the allocator sites of alloc.h */
#define RV_FI_SITES(X)                                                        \
	X(MMAP)                                                               \
	X(RDMA_GET_DEVICES) X(RDMA_CREATE_EVENT_CHANNEL) X(RDMA_CREATE_ID)    \
	X(RDMA_BIND_ADDR) X(RDMA_LISTEN) X(RDMA_RESOLVE_ADDR)                 \
	X(RDMA_RESOLVE_ROUTE) X(RDMA_CONNECT) X(RDMA_ACCEPT) X(RDMA_REJECT)   \
	X(RDMA_CREATE_QP) X(RDMA_SET_OPTION) X(RDMA_GET_CM_EVENT)             \
	X(RDMA_DISCONNECT) X(IBV_OPEN_DEVICE) X(IBV_ALLOC_PD)                 \
	X(IBV_QUERY_DEVICE) X(IBV_QUERY_PORT) X(IBV_REG_MR)                   \
	X(IBV_CREATE_COMP_CHANNEL) X(IBV_CREATE_CQ) X(IBV_CREATE_SRQ)         \
	X(IBV_MODIFY_QP) X(IBV_REQ_NOTIFY_CQ) X(IBV_GET_CQ_EVENT)             \
	X(IBV_GET_ASYNC_EVENT) X(IBV_POLL_CQ) X(IBV_POST_SEND)                \
	X(IBV_POST_RECV) X(IBV_POST_SRQ_RECV)

enum rv_fi_site {
	/* sites 0 .. RS_FI_NALLOC - 1: the allocators (alloc.h) */
#define RV_FI_ALLOC_ALIAS(s) RV_FI_##s = RS_FI_##s,
	RS_FI_ALLOC_SITES(RV_FI_ALLOC_ALIAS)
#undef RV_FI_ALLOC_ALIAS
	RV_FI_BEFORE_VERBS = RS_FI_NALLOC - 1,
#define RV_FI_ENUM(s) RV_FI_##s,
	RV_FI_SITES(RV_FI_ENUM)
#undef RV_FI_ENUM
	RV_FI_NSITES,
	RV_FI_ANY = RS_FI_ANY
};
_Static_assert((int)RV_FI_NSITES <= (int)RS_FI_MAX_SITES,
	       "RS_FI_MAX_SITES too small");

/* The engine is alloc.h's: these are its verbs names. */
static inline void rv_fi_enroll(bool on)	/* the calling thread counts */
{
	rs_fi_enroll(on);
}

static inline void rv_fi_arm(int site, unsigned long nth)
{
	rs_fi_arm(site, nth);
}

static inline unsigned long rv_fi_calls(int site)	/* RV_FI_ANY: all */
{
	return rs_fi_calls(site);
}

static inline bool rv_fi_fired(void)
{
	return rs_fi_fired();
}

static inline bool rv_fi_fail(int site)
{
	return rs_fi_fail(site);
}

const char *rv_fi_site_name(int site);

#ifndef RV_FI_NO_MACROS
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* NULL + errno */
#define RV_FI_NULL(site, call)                                                \
	(rv_fi_fail(RV_FI_##site) ? (errno = ENOMEM, NULL) : (call))
/* -1 + errno */
#define RV_FI_M1(site, call)                                                  \
	(rv_fi_fail(RV_FI_##site) ? (errno = EIO, -1) : (call))
/* a positive errno */
#define RV_FI_ERRNO(site, call) (rv_fi_fail(RV_FI_##site) ? EIO : (call))

/* the allocators of alloc.h (which are not macros here) */
#define calloc(n, s) rs_calloc(n, s)
#define malloc(s) rs_malloc(s)
#define realloc(p, s) rs_realloc(p, s)
#define posix_memalign(p, a, s) rs_posix_memalign(p, a, s)
#define mmap(a, l, p, f, fd, o)                                               \
	(rv_fi_fail(RV_FI_MMAP) ? (errno = ENOMEM, MAP_FAILED)                \
				: mmap(a, l, p, f, fd, o))

#define rdma_get_devices(n) RV_FI_NULL(RDMA_GET_DEVICES, rdma_get_devices(n))
#define rdma_create_event_channel()                                           \
	RV_FI_NULL(RDMA_CREATE_EVENT_CHANNEL, rdma_create_event_channel())
#define rdma_create_id(ch, id, ctx, ps)                                       \
	RV_FI_M1(RDMA_CREATE_ID, rdma_create_id(ch, id, ctx, ps))
#define rdma_bind_addr(id, a) RV_FI_M1(RDMA_BIND_ADDR, rdma_bind_addr(id, a))
#define rdma_listen(id, b) RV_FI_M1(RDMA_LISTEN, rdma_listen(id, b))
#define rdma_resolve_addr(id, s, d, t)                                        \
	RV_FI_M1(RDMA_RESOLVE_ADDR, rdma_resolve_addr(id, s, d, t))
#define rdma_resolve_route(id, t)                                             \
	RV_FI_M1(RDMA_RESOLVE_ROUTE, rdma_resolve_route(id, t))
#define rdma_connect(id, p) RV_FI_M1(RDMA_CONNECT, rdma_connect(id, p))
#define rdma_accept(id, p) RV_FI_M1(RDMA_ACCEPT, rdma_accept(id, p))
#define rdma_reject(id, p, l) RV_FI_M1(RDMA_REJECT, rdma_reject(id, p, l))
#define rdma_create_qp(id, pd, a)                                             \
	RV_FI_M1(RDMA_CREATE_QP, rdma_create_qp(id, pd, a))
#define rdma_set_option(id, l, n, v, s)                                       \
	RV_FI_M1(RDMA_SET_OPTION, rdma_set_option(id, l, n, v, s))
#define rdma_get_cm_event(ch, ev)                                             \
	RV_FI_M1(RDMA_GET_CM_EVENT, rdma_get_cm_event(ch, ev))
#define rdma_disconnect(id) RV_FI_M1(RDMA_DISCONNECT, rdma_disconnect(id))

#define ibv_open_device(d) RV_FI_NULL(IBV_OPEN_DEVICE, ibv_open_device(d))
#define ibv_alloc_pd(c) RV_FI_NULL(IBV_ALLOC_PD, ibv_alloc_pd(c))
#define ibv_query_device(c, a)                                                \
	RV_FI_ERRNO(IBV_QUERY_DEVICE, ibv_query_device(c, a))
/* verbs.h makes these two macros over inline functions: name those */
#undef ibv_query_port
#define ibv_query_port(c, p, a)                                               \
	RV_FI_ERRNO(IBV_QUERY_PORT, ___ibv_query_port(c, p, a))
#undef ibv_reg_mr
#define ibv_reg_mr(pd, a, l, acc)                                             \
	RV_FI_NULL(IBV_REG_MR, ibv_reg_mr(pd, a, l, (int)(acc)))
#define ibv_create_comp_channel(c)                                            \
	RV_FI_NULL(IBV_CREATE_COMP_CHANNEL, ibv_create_comp_channel(c))
#define ibv_create_cq(c, n, u, ch, v)                                         \
	RV_FI_NULL(IBV_CREATE_CQ, ibv_create_cq(c, n, u, ch, v))
#define ibv_create_srq(pd, a) RV_FI_NULL(IBV_CREATE_SRQ, ibv_create_srq(pd, a))
#define ibv_modify_qp(qp, a, m)                                               \
	RV_FI_ERRNO(IBV_MODIFY_QP, ibv_modify_qp(qp, a, m))
#define ibv_req_notify_cq(cq, s)                                              \
	RV_FI_ERRNO(IBV_REQ_NOTIFY_CQ, ibv_req_notify_cq(cq, s))
#define ibv_get_cq_event(ch, cq, ctx)                                         \
	RV_FI_M1(IBV_GET_CQ_EVENT, ibv_get_cq_event(ch, cq, ctx))
#define ibv_get_async_event(c, e)                                             \
	RV_FI_M1(IBV_GET_ASYNC_EVENT, ibv_get_async_event(c, e))
#define ibv_poll_cq(cq, n, wc) RV_FI_M1(IBV_POLL_CQ, ibv_poll_cq(cq, n, wc))
#define ibv_post_send(qp, wr, bad)                                            \
	(rv_fi_fail(RV_FI_IBV_POST_SEND) ? (*(bad) = (wr), ENOMEM)            \
					 : ibv_post_send(qp, wr, bad))
#define ibv_post_recv(qp, wr, bad)                                            \
	(rv_fi_fail(RV_FI_IBV_POST_RECV) ? (*(bad) = (wr), ENOMEM)            \
					 : ibv_post_recv(qp, wr, bad))
#define ibv_post_srq_recv(srq, wr, bad)                                       \
	(rv_fi_fail(RV_FI_IBV_POST_SRQ_RECV) ? (*(bad) = (wr), ENOMEM)        \
					     : ibv_post_srq_recv(srq, wr, bad))
#endif /* RV_FI_NO_MACROS */

#endif /* RS_FAULT_INJECT */
#endif
