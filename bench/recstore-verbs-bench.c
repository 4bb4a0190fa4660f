/*
 * recstore-verbs-bench - READ latency and READ message rate of the verbs
 * layer (src/verbs), for comparison with perftest's ib_read_lat/ib_read_bw
 * (ci/bench-verbs.sh runs both in one guest boot).
 *
 *   recstore-verbs-bench self   --ip A [options]   server thread + client
 *   recstore-verbs-bench server --ip A [--port P]  serve until killed
 *   recstore-verbs-bench client --ip A --port P [options]
 *
 * Options: --dev NAME (default: the device of --ip), --size B (512),
 * --iters N latency samples (1000, after 100 warm-up), --seconds S for the
 * rate (3), --batch N READs per batch (1024), --inflight K batches kept
 * posted (2), --depth D READs outstanding (0: device max), --chain C WRs
 * per doorbell (0: depth / 4), --spin-us U adaptive window (50; it must
 * cover a round trip to keep waits from sleeping: ~2 us on hardware,
 * 30-70 us under QEMU TCG), --only lat|rate.
 *
 * Latency: one rv_read_batch() of one READ per sample, timed around the
 * call (post + completion). Rate: K asynchronous batches kept in flight, so
 * the window of outstanding READs never drains between batches.
 * Output: key=value lines (lat_p50_us, lat_p99_us, lat_avg_us, rate_rps,
 * rate_mbps, ...).
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/defaults.h"
#include "recstore/error.h"
#include "verbs/rv.h"

struct opts {
	const char *mode, *ip, *dev, *only;
	uint16_t port;
	uint32_t size, iters, batch, inflight, depth, chain, spin_us;
	double seconds;
};

struct region_info {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
} __attribute__((packed));

#define REGION_LEN (64u << 20)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int die(const char *what, int code)
{
	fprintf(stderr, "recstore-verbs-bench: %s: %s (%s)\n", what,
		rs_errormsg(), rs_strerror(code));
	return 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: recstore-verbs-bench self|server|client --ip A"
		" [--port P] [--dev NAME] [--size B] [--iters N] [--seconds S]"
		" [--batch N] [--inflight K] [--depth D] [--chain C]"
		" [--spin-us U]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "ip", 1, NULL, 'i' },	     { "port", 1, NULL, 'p' },
		{ "dev", 1, NULL, 'd' },     { "size", 1, NULL, 's' },
		{ "iters", 1, NULL, 'n' },   { "seconds", 1, NULL, 't' },
		{ "batch", 1, NULL, 'b' },   { "inflight", 1, NULL, 'k' },
		{ "depth", 1, NULL, 'D' },   { "chain", 1, NULL, 'c' },
		{ "spin-us", 1, NULL, 'w' }, { "only", 1, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	*o = (struct opts){ .size = 512, .iters = 1000, .seconds = 3,
			    .batch = 1024, .inflight = 2,
			    .spin_us = RS_SPIN_US_DEFAULT };
	if (argc < 2)
		usage();
	o->mode = argv[1];
	optind = 2;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'i': o->ip = optarg; break;
		case 'p': o->port = (uint16_t)atoi(optarg); break;
		case 'd': o->dev = optarg; break;
		case 's': o->size = (uint32_t)atoi(optarg); break;
		case 'n': o->iters = (uint32_t)atoi(optarg); break;
		case 't': o->seconds = atof(optarg); break;
		case 'b': o->batch = (uint32_t)atoi(optarg); break;
		case 'k': o->inflight = (uint32_t)atoi(optarg); break;
		case 'D': o->depth = (uint32_t)atoi(optarg); break;
		case 'c': o->chain = (uint32_t)atoi(optarg); break;
		case 'w': o->spin_us = (uint32_t)atoi(optarg); break;
		case 'o': o->only = optarg; break;
		default: usage();
		}
	}
	if (!o->ip || !o->size || !o->iters || !o->batch || !o->inflight ||
	    o->inflight > 64 || o->size > REGION_LEN ||
	    (o->only && strcmp(o->only, "lat") && strcmp(o->only, "rate")))
		usage();
}

/* ---- server ---- */

struct server {
	struct rv_listener *l;
	struct rv_mr *region;
	struct region_info info;
	pthread_t thr;
	volatile int stop;
};

static void *accept_main(void *arg)
{
	struct server *s = arg;
	struct rv_event ev;

	while (!s->stop)
		if (rv_listener_event(s->l, &ev, 200) == 0 &&
		    ev.type == RV_EV_DISCONNECTED)
			rv_conn_close(&ev.conn);
	return NULL;
}

static int server_start(struct rv_dev *d, const struct opts *o,
			struct server *s)
{
	struct rv_listener_attr la;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = rv_mem_alloc(d, REGION_LEN, RV_ACC_REMOTE_READ, &s->region);
	if (ret)
		return ret;
	memset(s->region->addr, 0x5a, REGION_LEN);
	s->info = (struct region_info){ (uintptr_t)s->region->addr,
					REGION_LEN, s->region->rkey };
	rv_listener_attr_init(&la);
	la.conn.priv = &s->info;
	la.conn.priv_len = sizeof(s->info);
	ret = rv_listen(d, o->ip, o->port, &la, &s->l);
	if (ret)
		return ret;
	return pthread_create(&s->thr, NULL, accept_main, s) ? -1 : 0;
}

static void server_stop(struct server *s)
{
	s->stop = 1;
	pthread_join(s->thr, NULL);
	rv_listener_close(&s->l);
	rv_mr_free(&s->region);
}

/* ---- client ---- */

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int bench_latency(struct rv_conn *c, struct rv_mr *local,
			 const struct region_info *ri, const struct opts *o)
{
	double *lat = calloc(o->iters, sizeof(*lat)), sum = 0, t;
	uint64_t span = ri->len - o->size;
	struct rv_stats s0, s1;
	int ret = 0;

	if (!lat)
		return -1;
	rv_conn_stats(c, &s0);
	for (uint32_t i = 0; i < o->iters + 100; i++) {
		struct rv_read_req r = {
			.local = local->addr, .lkey = local->lkey,
			.len = o->size, .rkey = ri->rkey,
			.remote = ri->addr + ((uint64_t)i * 4096) % span,
		};

		t = now_s();
		ret = rv_read_batch(c, &r, 1, 10000);
		t = now_s() - t;
		if (ret)
			goto out;
		if (i >= 100)
			lat[i - 100] = t * 1e6;
	}
	rv_conn_stats(c, &s1);
	qsort(lat, o->iters, sizeof(*lat), cmp_dbl);
	for (uint32_t i = 0; i < o->iters; i++)
		sum += lat[i];
	printf("lat_size=%u\nlat_iters=%u\nlat_min_us=%.2f\nlat_p50_us=%.2f\n"
	       "lat_p99_us=%.2f\nlat_avg_us=%.2f\nlat_spin_ms=%.1f\n"
	       "lat_block_ms=%.1f\nlat_wakeups=%llu\n", o->size, o->iters,
	       lat[0], lat[o->iters / 2], lat[(size_t)(o->iters * 0.99)],
	       sum / o->iters, (s1.spin_ns - s0.spin_ns) / 1e6,
	       (s1.block_ns - s0.block_ns) / 1e6,
	       (unsigned long long)(s1.wakeups - s0.wakeups));
out:
	free(lat);
	return ret;
}

static int bench_rate(struct rv_conn *c, struct rv_mr *local,
		      const struct region_info *ri, const struct opts *o)
{
	struct rv_read_req *reqs;
	struct rv_batch b[64];
	struct rv_stats s0, s1;
	uint64_t span = ri->len - o->size, reads = 0;
	double t0, el;
	int ret = 0;

	reqs = calloc((size_t)o->batch * o->inflight, sizeof(*reqs));
	if (!reqs)
		return -1;
	for (uint32_t i = 0; i < o->batch * o->inflight; i++)
		reqs[i] = (struct rv_read_req){
			.local = (uint8_t *)local->addr +
				 (size_t)(i % 1024) * o->size,
			.lkey = local->lkey, .len = o->size, .rkey = ri->rkey,
			.remote = ri->addr + ((uint64_t)i * 4096) % span,
		};
	rv_conn_stats(c, &s0);
	t0 = now_s();
	for (uint32_t k = 0; k < o->inflight && !ret; k++)
		ret = rv_read_post(c, &b[k], reqs + (size_t)k * o->batch,
				   o->batch);
	for (uint32_t k = 0; !ret; k = (k + 1) % o->inflight) {
		ret = rv_batch_wait(c, &b[k], 10000);
		if (ret)
			break;
		reads += o->batch;
		if (now_s() - t0 >= o->seconds)
			break;
		ret = rv_read_post(c, &b[k], reqs + (size_t)k * o->batch,
				   o->batch);
	}
	for (uint32_t k = 0; k < o->inflight && !ret; k++)
		if (!rv_batch_done(&b[k]))
			ret = rv_batch_wait(c, &b[k], 10000);
	el = now_s() - t0;
	rv_conn_stats(c, &s1);
	if (!ret)
		printf("rate_size=%u\nrate_depth=%u\nrate_chain=%u\n"
		       "rate_batch=%u\nrate_seconds=%.2f\nrate_rps=%.0f\n"
		       "rate_mbps=%.2f\nrate_doorbells=%llu\n"
		       "rate_spin_ms=%.1f\nrate_block_ms=%.1f\n", o->size,
		       rv_conn_rd_depth(c), rv_conn_chain_max(c), o->batch, el,
		       reads / el, reads * (double)o->size / el / 1e6,
		       (unsigned long long)(s1.chains - s0.chains),
		       (s1.spin_ns - s0.spin_ns) / 1e6,
		       (s1.block_ns - s0.block_ns) / 1e6);
	free(reqs);
	return ret;
}

static int client_run(struct rv_dev *d, const struct opts *o, uint16_t port)
{
	struct rv_conn_attr a;
	struct region_info ri;
	struct rv_conn *c;
	struct rv_mr *local;
	const void *p;
	size_t len;
	int ret;

	rv_conn_attr_init(&a);
	a.rd_depth = (uint16_t)o->depth;
	a.chain_max = (uint16_t)o->chain;
	a.spin_us = o->spin_us;
	ret = rv_connect(d, o->ip, port, &a, &c);
	if (ret)
		return die("connect", ret);
	p = rv_conn_peer_data(c, &len);
	if (len != sizeof(ri)) {
		fprintf(stderr, "recstore-verbs-bench: not a bench server\n");
		rv_conn_close(&c);
		return 1;
	}
	memcpy(&ri, p, sizeof(ri));
	ret = rv_mem_alloc(d, (size_t)o->size * 1024, RV_ACC_LOCAL_WRITE,
			   &local);
	if (ret)
		return die("alloc", ret);
	if (!o->only || !strcmp(o->only, "lat")) {
		ret = bench_latency(c, local, &ri, o);
		if (ret)
			return die("latency", ret);
	}
	if (!o->only || !strcmp(o->only, "rate")) {
		ret = bench_rate(c, local, &ri, o);
		if (ret)
			return die("rate", ret);
	}
	rv_mr_free(&local);
	rv_conn_close(&c);
	return 0;
}

int main(int argc, char **argv)
{
	struct server s;
	struct rv_dev *d;
	struct opts o;
	int ret;

	parse(argc, argv, &o);
	signal(SIGPIPE, SIG_IGN);
	ret = rv_dev_open(&d, o.dev ? o.dev : o.ip);
	if (ret)
		return die("open device", ret);
	if (!strcmp(o.mode, "client")) {
		ret = client_run(d, &o, o.port);
	} else if (!strcmp(o.mode, "server") || !strcmp(o.mode, "self")) {
		ret = server_start(d, &o, &s);
		if (ret)
			return die("server", ret);
		printf("port=%u\n", rv_listener_port(s.l));
		fflush(stdout);
		if (!strcmp(o.mode, "server"))
			for (;;)
				pause();
		ret = client_run(d, &o, rv_listener_port(s.l));
		server_stop(&s);
	} else {
		usage();
	}
	rv_dev_close(&d);
	return ret;
}
