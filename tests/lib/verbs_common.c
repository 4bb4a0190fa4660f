/*
 * verbs_common.c - the bodies of the helpers declared in verbs_common.h, which
 * says what they are for.
 */
#include "verbs_common.h"

const char *vt_dev_name, *vt_ip;

void vt_env(void)
{
	vt_dev_name = getenv("RS_RDMA_DEV");
	vt_ip = getenv("RS_RDMA_IP");
	if (!vt_dev_name || !*vt_dev_name || !vt_ip || !*vt_ip) {
		printf("RS_RDMA_DEV / RS_RDMA_IP unset: skipped\n");
		exit(77);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
}

double vt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double vt_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

int vt_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n - 1;	/* the DIR's own fd */
}

long vt_rss_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size = 0, rss = 0;

	if (f) {
		if (fscanf(f, "%ld %ld", &size, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

uint8_t vt_byte(uint64_t off)
{
	uint64_t x = (off >> 3) * 0x9e3779b97f4a7c15ull;

	x ^= x >> 29;
	return (uint8_t)(x >> ((off & 7) * 8));
}

void vt_fill(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = vt_byte(i);
}

static void vt_srv_add(struct vt_srv *s, struct rv_conn *c)
{
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < VT_MAX_CONNS; i++)
		if (!s->conns[i]) {
			s->conns[i] = c;
			break;
		}
	pthread_mutex_unlock(&s->lock);
}

static void vt_srv_del(struct vt_srv *s, struct rv_conn *c)
{
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < VT_MAX_CONNS; i++)
		if (s->conns[i] == c)
			s->conns[i] = NULL;
	pthread_mutex_unlock(&s->lock);
}

static void *vt_accept_main(void *arg)
{
	struct vt_srv *s = arg;
	struct rv_event ev;

	while (!atomic_load(&s->stop)) {
		/* long timeouts: these threads must not cost CPU at idle */
		if (rv_listener_event(s->l, &ev, s->idle_ms) < 0)
			continue;
		if (ev.type == RV_EV_CONNECTED) {
			vt_srv_add(s, ev.conn);
			atomic_fetch_add(&s->live, 1);
			atomic_fetch_add(&s->connected, 1);
		} else if (s->close_on_disconnect) {
			vt_srv_del(s, ev.conn);
			rv_conn_close(&ev.conn);
			atomic_fetch_sub(&s->live, 1);
		}
	}
	return NULL;
}

/* Echo every message back to its sender. */
static void *vt_echo_main(void *arg)
{
	struct vt_srv *s = arg;
	struct rv_msg m[8];
	int n;

	while (!atomic_load(&s->stop)) {
		n = rv_listener_recv(s->l, m, 8, s->idle_ms);
		for (int i = 0; i < n; i++) {
			if ((m[i].len != 1 ||
			     ((uint8_t *)m[i].data)[0] != 0xee) &&
			    rv_msg_send(m[i].conn, m[i].data, m[i].len,
					10000) < 0 &&
			    rv_conn_status(m[i].conn) == 0) {
				char d[256];

				fprintf(stderr, "echo: %s: %s\n", rs_errormsg(),
					rv_conn_describe(m[i].conn, d,
							 sizeof(d)));
			}
			rv_msg_release(&m[i]);
			atomic_fetch_add(&s->echoed, 1);
		}
	}
	return NULL;
}

void vt_srv_start(struct vt_srv *s, struct rv_dev *d,
		  size_t region_len, int n_echo,
		  const struct rv_listener_attr *la_in)
{
	struct rv_listener_attr la;

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->dev = d;
	s->n_echo = n_echo;
	s->idle_ms = 1000;
	if (la_in)
		la = *la_in;
	else
		rv_listener_attr_init(&la);
	if (region_len) {
		VT_CHECK(rv_mem_alloc(d, region_len, RV_ACC_REMOTE_READ,
				      &s->region));
		vt_fill(s->region->addr, region_len);
		s->info.addr = (uintptr_t)s->region->addr;
		s->info.len = region_len;
		s->info.rkey = s->region->rkey;
		la.conn.priv = &s->info;
		la.conn.priv_len = sizeof(s->info);
	}
	VT_CHECK(rv_listen(d, vt_ip, 0, &la, &s->l));
	pthread_create(&s->acc, NULL, vt_accept_main, s);
	for (int i = 0; i < n_echo; i++)
		pthread_create(&s->echo[i], NULL, vt_echo_main, s);
}

void vt_srv_stop(struct vt_srv *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->acc, NULL);
	for (int i = 0; i < s->n_echo; i++)
		pthread_join(s->echo[i], NULL);
	for (int i = 0; i < VT_MAX_CONNS; i++)
		rv_conn_close(&s->conns[i]);
	rv_listener_close(&s->l);
	rv_mr_free(&s->region);
	pthread_mutex_destroy(&s->lock);
}

struct rv_conn *vt_connect(struct rv_dev *d, uint16_t port,
			   struct rv_conn_attr *a_in,
			   struct vt_region *info)
{
	struct rv_conn_attr a;
	struct rv_conn *c = NULL;
	const void *p;
	size_t len;

	if (a_in)
		a = *a_in;
	else
		rv_conn_attr_init(&a);
	VT_CHECK(rv_connect(d, vt_ip, port, &a, &c));
	p = rv_conn_peer_data(c, &len);
	if (info) {
		if (len != sizeof(*info))
			fail_msg("handshake reply of %zu bytes", len);
		memcpy(info, p, sizeof(*info));
	}
	return c;
}
