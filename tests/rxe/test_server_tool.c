/*
 * test_server_tool.c - tools/recstore-server as scripts use it.
 *
 * 1. Bad command lines and configs exit 2 with a message naming the field
 *    (these checks need no RDMA device and run everywhere).
 * 2. Over rxe: the node prints "recstore-server: listening on ADDR:PORT";
 *    a client connects, creates a table and does a few requests, then both
 *    sit idle for 10 s: the node must use < 1% of a core (utime + stime
 *    of /proc/<pid>/stat; the figure is printed); SIGTERM stops it cleanly
 *    (exit 0, "stopped") with the client still connected; SIGINT too.
 * 3. recstore-ctl against that node: create (with optimizer and
 *    initializer options, and with eviction: the node's STATS show the
 *    spec), list, stats, drop, and its failures (bad eviction values
 *    among them).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "server_harness.h"

#if !defined(RS_SERVER_BIN) || !defined(RS_CTL_BIN)
#error "RS_SERVER_BIN, RS_CTL_BIN: paths of the tools (server_tool.cmake)"
#endif

struct proc {
	pid_t pid;
	FILE *out;	/* its stdout */
	int err_fd;	/* its stderr (read end) */
};

/* Start bin with argv (NULL-terminated, argv[0] omitted). */
static void start_bin(struct proc *p, const char *bin,
		      const char *const *args)
{
	const char *argv[24] = { bin };
	int o[2], e[2], n = 1;

	for (; *args && n < 23; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	if (pipe(o) || pipe(e))
		sv_die("pipe");
	p->pid = fork();
	if (p->pid < 0)
		sv_die("fork");
	if (p->pid == 0) {
		dup2(o[1], 1);
		dup2(e[1], 2);
		close(o[0]);
		close(o[1]);
		close(e[0]);
		close(e[1]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(o[1]);
	close(e[1]);
	p->out = fdopen(o[0], "r");
	p->err_fd = e[0];
}

static void start(struct proc *p, const char *const *args)
{
	start_bin(p, RS_SERVER_BIN, args);
}

static int finish(struct proc *p, char *err, size_t len);

/* Run recstore-ctl with args; exit status; stdout + stderr into out. */
static int ctl(const char *const *args, char *out, size_t len)
{
	struct proc p;
	size_t have;
	int status;

	start_bin(&p, RS_CTL_BIN, args);
	have = fread(out, 1, len / 2, p.out);
	out[have] = '\0';
	status = finish(&p, out + have, len - have);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void ctl_expect(const char *const *args, int code, const char *needle)
{
	static char out[65536];
	int st = ctl(args, out, sizeof(out));
	const char *first = strchr(out, '\n');

	printf("  recstore-ctl %s %s -> exit %d: %.*s\n", args[2],
	       args[3] ? args[3] : "", st,
	       (int)(first ? first - out : (long)strlen(out)), out);
	SV_CHECK(st == code, "exit %d, expected %d: %s", st, code, out);
	SV_CHECK(!needle || strstr(out, needle), "output lacks '%s': %s",
		 needle, out);
}

static void ctl_case(const char *addr)
{
	printf("recstore-ctl against %s:\n", addr);
	ctl_expect((const char *[]){ "-s", addr, "create", "emb", "--dim", "8",
				     "--capacity", "1000", "--optimizer",
				     "adam", "--lr", "0.002", "--init",
				     "normal", "--init-std", "0.1", "--seed",
				     "7", NULL }, 0, "created table 'emb'");
	ctl_expect((const char *[]){ "-s", addr, "create", "emb", "--dim", "8",
				     "--capacity", "1000", NULL }, 1,
		   "exists");
	ctl_expect((const char *[]){ "-s", addr, "create", "bad", "--dim", "8",
				     "--lr", "-1", NULL }, 1, "lr");
	ctl_expect((const char *[]){ "-s", addr, "create", "nodim", NULL }, 2,
		   "--dim");
	/* eviction (docs/eviction.md): the spec lands on the node */
	ctl_expect((const char *[]){ "-s", addr, "create", "ev", "--dim", "8",
				     "--capacity", "1000", "--evict", "lfu",
				     "--max-rows", "500", "--ttl", "60",
				     "--admit-after", "3", NULL }, 0,
		   "created table 'ev'");
	ctl_expect((const char *[]){ "-s", addr, "stats", NULL }, 0,
		   "ev.evict.policy 2\n");
	ctl_expect((const char *[]){ "-s", addr, "stats", NULL }, 0,
		   "ev.evict.max_rows 500\n");
	ctl_expect((const char *[]){ "-s", addr, "stats", NULL }, 0,
		   "ev.evict.ttl_s 60\n");
	ctl_expect((const char *[]){ "-s", addr, "stats", NULL }, 0,
		   "ev.evict.admit_after 3\n");
	ctl_expect((const char *[]){ "-s", addr, "create", "ev2", "--dim",
				     "8", "--evict", "fifo", NULL }, 2,
		   "--evict");
	ctl_expect((const char *[]){ "-s", addr, "create", "ev2", "--dim",
				     "8", "--ttl", "0", NULL }, 2, "--ttl");
	ctl_expect((const char *[]){ "-s", addr, "create", "ev2", "--dim",
				     "8", "--max-rows", "10", NULL }, 1,
		   "policy");
	/* a cap above the capacity */
	ctl_expect((const char *[]){ "-s", addr, "create", "ev2", "--dim",
				     "8", "--capacity", "100", "--evict",
				     "lru", "--max-rows", "200", NULL }, 1,
		   "max_rows");
	ctl_expect((const char *[]){ "-s", addr, "drop", "ev", NULL }, 0,
		   "dropped");
	ctl_expect((const char *[]){ "-s", addr, "list", NULL }, 0, "emb");
	ctl_expect((const char *[]){ "-s", addr, "stats", NULL }, 0,
		   "emb.capacity 1000");
	ctl_expect((const char *[]){ "-s", addr, "drop", "emb", NULL }, 0,
		   "dropped");
	ctl_expect((const char *[]){ "-s", addr, "drop", "emb", NULL }, 1,
		   "not found");
	ctl_expect((const char *[]){ "-s", addr, "frobnicate", NULL }, 2,
		   "unknown command");
}

/* Wait for exit; its status, and its stderr into err. */
static int finish(struct proc *p, char *err, size_t len)
{
	size_t have = 0;
	ssize_t r;
	int status;

	while (have + 1 < len &&
	       (r = read(p->err_fd, err + have, len - 1 - have)) > 0)
		have += (size_t)r;
	err[have] = '\0';
	waitpid(p->pid, &status, 0);
	fclose(p->out);
	close(p->err_fd);
	return status;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f))
		sv_die("writing %s", path);
}

/* The tool must exit 2 and say `needle`. */
static void expect_usage_error(const char *const *args, const char *needle)
{
	char err[4096];
	struct proc p;
	int status;

	start(&p, args);
	status = finish(&p, err, sizeof(err));
	printf("  %s %s -> exit %d: %s", args[0], args[1] ? args[1] : "",
	       WEXITSTATUS(status), err);
	SV_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2,
		 "exit status %d, expected 2", status);
	SV_CHECK(strstr(err, needle), "message lacks '%s': %s", needle, err);
}

static void config_errors(void)
{
	char dir[] = "/tmp/rs-tool-XXXXXX", path[64];

	if (!mkdtemp(dir))
		sv_die("mkdtemp");
	snprintf(path, sizeof(path), "%s/node.json", dir);
	printf("bad command lines and configs:\n");
	expect_usage_error((const char *[]){ "-c", "/nonexistent/n.json",
					     NULL },
			   "/nonexistent/n.json");
	write_file(path, "{\"workers\": 0}");
	expect_usage_error((const char *[]){ "-c", path, NULL }, "workers");
	write_file(path, "{\"wrokers\": 2}");
	expect_usage_error((const char *[]){ "-c", path, NULL }, "wrokers");
	write_file(path, "{\"tables\": [{\"name\": \"a\", \"dim\": 0}]}");
	expect_usage_error((const char *[]){ "-c", path, NULL },
			   "tables[0].dim");
	write_file(path, "{\"workers\": 2,");
	expect_usage_error((const char *[]){ "-c", path, NULL }, "node.json");
	expect_usage_error((const char *[]){ "--listen", "nocolon", NULL },
			   "listen");
	expect_usage_error((const char *[]){ "--workers", "0", NULL },
			   "workers");
	expect_usage_error((const char *[]){ "--bogus", NULL }, "usage");
	unlink(path);
	rmdir(dir);
}

/* utime + stime of /proc/<pid>[/task/<tid>]/stat; name into comm. */
static uint64_t stat_ticks(const char *path, char *comm, size_t len)
{
	char buf[1024], *p, *q;
	unsigned long ut = 0, st = 0;
	FILE *f;
	size_t n;

	f = fopen(path, "r");
	if (!f)
		sv_die("%s", path);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* comm may hold spaces */
	q = strchr(buf, '(');
	SV_CHECK(p && q, "bad %s", path);
	if (comm)
		snprintf(comm, len, "%.*s", (int)(p - q - 1), q + 1);
	/* after ") ": state(3) ... utime(14) stime(15) */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu "
		   "%lu", &ut, &st) != 2)
		sv_die("parsing %s", path);
	return ut + st;
}

static uint64_t proc_ticks(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return stat_ticks(path, NULL, 0);
}

#define MAX_TASKS 64
struct tasks {
	int n;
	int tid[MAX_TASKS];
	char comm[MAX_TASKS][32];
	uint64_t ticks[MAX_TASKS];
};

static void task_ticks(pid_t pid, struct tasks *t)
{
	char path[320];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	SV_CHECK(d, "%s", path);
	t->n = 0;
	while ((e = readdir(d)) && t->n < MAX_TASKS) {
		if (e->d_name[0] == '.')
			continue;
		t->tid[t->n] = atoi(e->d_name);
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat",
			 (int)pid, e->d_name);
		t->ticks[t->n] = stat_ticks(path, t->comm[t->n], 32);
		t->n++;
	}
	closedir(d);
}

static void print_tasks(const struct tasks *a, const struct tasks *b)
{
	for (int i = 0; i < b->n; i++) {
		uint64_t before = 0;

		for (int j = 0; j < a->n; j++)
			if (a->tid[j] == b->tid[i])
				before = a->ticks[j];
		printf("  thread %-16s %llu ticks\n", b->comm[i],
		       (unsigned long long)(b->ticks[i] - before));
	}
}

static double self_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Start a node on ip:0 (with config file cfg, or none); its address into
 * addr. */
static void start_node_cfg(struct proc *p, const char *ip, const char *cfg,
			   char *addr, size_t len)
{
	char listen[80], line[512];
	const char *at;

	snprintf(listen, sizeof(listen), "%s:0", ip);
	if (cfg)
		start(p, (const char *[]){ "-c", cfg, "--listen", listen,
					   NULL });
	else
		start(p, (const char *[]){ "--listen", listen, "--workers",
					   "2", NULL });
	if (!fgets(line, sizeof(line), p->out))
		sv_die("the node printed nothing");
	line[strcspn(line, "\n")] = '\0';
	at = strstr(line, "recstore-server: listening on ");
	SV_CHECK(at == line, "first line: %s", line);
	snprintf(addr, len, "%.120s", line + strlen("recstore-server: listening "
						"on "));
}

static void start_node(struct proc *p, const char *ip, char *addr,
		       size_t len)
{
	start_node_cfg(p, ip, NULL, addr, len);
}

static void stop_node(struct proc *p, int sig)
{
	char line[256] = "", err[8192];
	int status;

	kill(p->pid, sig);
	while (fgets(line, sizeof(line), p->out) &&
	       !strstr(line, "stopped"))
		;
	status = finish(p, err, sizeof(err));
	SV_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "node exit status %d after signal %d: %s", status, sig, err);
	SV_CHECK(strstr(line, "stopped"), "no 'stopped' line");
	printf("signal %d: clean stop (exit 0)\n", sig);
}

static void idle_case(const char *ip)
{
	struct proto_table_spec spec;
	struct proto_table_info t;
	uint64_t keys[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, t0, t1;
	float rows[8 * 16] = { 0 }, out[8 * 16];
	char addr[128], *colon;
	double c0, c1, pct, hz = (double)sysconf(_SC_CLK_TCK);
	static struct tasks ta, tb;
	struct sv_cli k;
	struct proc p;
	int32_t st[8];

	start_node(&p, ip, addr, sizeof(addr));
	printf("node pid %d listening on %s\n", (int)p.pid, addr);
	colon = strrchr(addr, ':');
	*colon = '\0';
	sv_cli_open(&k, addr, (uint16_t)atoi(colon + 1));
	sv_spec(&spec, "idle", 16, OPTIM_ADAGRAD);
	SV_OK(sv_create(&k, &spec, &t));
	SV_OK(sv_keys(&k, PROTO_OP_PUT, &t, keys, 8, rows, 0, st, NULL));
	SV_OK(sv_keys(&k, PROTO_OP_UPDATE, &t, keys, 8, rows, 0, st, NULL));
	SV_OK(sv_keys(&k, PROTO_OP_GET, &t, keys, 8, NULL, 0, st, out));

	sleep(1); /* let the adaptive spin windows run out */
	task_ticks(p.pid, &ta);
	t0 = proc_ticks(p.pid);
	c0 = self_cpu();
	sleep(10);
	t1 = proc_ticks(p.pid);
	c1 = self_cpu();
	task_ticks(p.pid, &tb);
	pct = (double)(t1 - t0) / hz / 10.0 * 100.0;
	printf("idle node with a connected client: %.2f%% of a core over "
	       "10 s (%llu ticks of 1/%.0f s)\n", pct,
	       (unsigned long long)(t1 - t0), hz);
	print_tasks(&ta, &tb);
	printf("idle client process: %.2f%% of a core\n",
	       (c1 - c0) / 10.0 * 100.0);
#ifndef __SANITIZE_THREAD__
	SV_CHECK(pct < 1.0, "idle node uses %.2f%% of a core", pct);
#else
	/* ThreadSanitizer multiplies every wake-up's cost: the release and
	 * ASan trees check the bound, this one only prints it */
	(void)pct;
#endif
	/* still serving after the idle period */
	SV_OK(sv_keys(&k, PROTO_OP_GET, &t, keys, 8, NULL, 0, st, out));
	*colon = ':';
	ctl_case(addr);
	stop_node(&p, SIGTERM); /* with the client connected */
	sv_cli_close(&k);

	/* tables from the config file exist when the node listens */
	{
		char dir[] = "/tmp/rs-tool-XXXXXX", path[64];

		SV_CHECK(mkdtemp(dir), "mkdtemp");
		snprintf(path, sizeof(path), "%s/node.json", dir);
		write_file(path, "{\"name\": \"cfg-node\", \"workers\": 3,"
				 " \"tables\": [{\"name\": \"from_config\","
				 " \"dim\": 4, \"capacity\": 100, "
				 "\"optimizer\": {\"type\": \"rowwise_adagrad\","
				 " \"lr\": 0.25}}]}");
		start_node_cfg(&p, ip, path, addr, sizeof(addr));
		ctl_expect((const char *[]){ "-s", addr, "list", NULL }, 0,
			   "from_config");
		ctl_expect((const char *[]){ "-s", addr, "stats", NULL }, 0,
			   "workers 3");
		stop_node(&p, SIGINT);
		unlink(path);
		rmdir(dir);
	}
}

int main(void)
{
	const char *dev = getenv("RS_RDMA_DEV"), *ip = getenv("RS_RDMA_IP");

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	config_errors();
	if (!dev || !*dev || !ip || !*ip) {
		printf("skip: no RDMA device for the idle and signal cases\n");
		return 77;
	}
	sv_memlock();
	idle_case(ip);
	printf("ok\n");
	return 0;
}
