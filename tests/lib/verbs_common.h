/*
 * verbs_common.h - helpers for the rxe tests of src/verbs: the environment
 * (skip when there is no device), a server that runs in threads of the test
 * process (listener + accept loop + optional echo workers) over a region it
 * exports through the handshake, and small measurement helpers.
 */
#ifndef VERBS_COMMON_H
#define VERBS_COMMON_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "recstore/error.h"
#include "verbs/rv.h"

#define VT_CHECK(expr)							\
	do {								\
		int vt_rc_ = (expr);					\
		if (vt_rc_ < 0)						\
			fail_msg("%s = %d (%s): %s", #expr, vt_rc_,	\
				 rs_strerror(vt_rc_), rs_errormsg());	\
	} while (0)

/* set by vt_env() */
extern const char *vt_dev_name, *vt_ip;

/* Exit 77 (skipped) when the rxe environment is missing. */
void vt_env(void);

double vt_now(void);

double vt_cpu_s(void);

int vt_count_fds(void);

long vt_rss_kb(void);

/* Deterministic content of the exported region. */
uint8_t vt_byte(uint64_t off);

void vt_fill(uint8_t *p, size_t len);

/* What the server tells clients in its handshake reply. */
struct vt_region {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
} __attribute__((packed));

#define VT_MAX_CONNS 64

struct vt_srv {
	struct rv_dev *dev;
	struct rv_listener *l;
	struct rv_mr *region;
	struct vt_region info;
	pthread_t acc, echo[4];
	int n_echo;
	bool close_on_disconnect;
	_Atomic int idle_ms;	/* how long the threads sleep between checks */
	atomic_bool stop;
	atomic_int live;	/* connected, not closed */
	atomic_long connected;	/* CONNECTED events so far */
	atomic_long echoed;
	pthread_mutex_t lock;
	struct rv_conn *conns[VT_MAX_CONNS];
};

void vt_srv_start(struct vt_srv *s, struct rv_dev *d,
		  size_t region_len, int n_echo,
		  const struct rv_listener_attr *la_in);

void vt_srv_stop(struct vt_srv *s);

struct rv_conn *vt_connect(struct rv_dev *d, uint16_t port,
			   struct rv_conn_attr *a_in,
			   struct vt_region *info);

#endif
