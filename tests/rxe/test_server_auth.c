/*
 * test_server_auth.c - credentials and roles over rxe (docs/security.md).
 *
 * One node with three keys (admin, data, read; the read key's secret from
 * a 0600 file) and one node without credentials, both in-process.
 * Checked:
 *   - refused at connect (rdma_cm reject, nothing allocated): a peer
 *     without credentials (reason "required"), a wrong secret, an unknown
 *     key id (reason "authentication failed", RS_E_AUTH from the client
 *     library); a replayed connect request (the same 44 bytes again);
 *   - the node counts the refusals (STATS auth_refused);
 *   - admin: create, put, get (one-sided and RPC), get_or_init, update,
 *     delete, stats, drop;
 *   - data: everything but create and drop (RS_E_PERM);
 *   - read: table directory (and list, which uses STATS), one-sided READ
 *     and the GET RPC; PUT, UPDATE, DELETE, GET_OR_INIT (per-key
 *     RS_E_PERM, rows untouched, no key created), create and drop
 *     refused;
 *   - recstore-ctl: no credentials refused; --key-id/--secret-file and
 *     RS_KEY_ID with RS_SECRET_FILE or RS_SECRET; a read key cannot create;
 *   - a client with credentials refuses a node without any (it cannot
 *     prove it knows the secret), and that node still serves a client
 *     without credentials as admin.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/auth.h"
#include "recstore/client.h"
#include "server_harness.h"
#include "stats.h"

static const char SA[] = "admin-secret-0123456789abcdef";
static const char SD[] = "data-secret-0123456789abcdef";
static const char SR[] = "read-secret-0123456789abcdef";

#define DIM 4
#define NK 8

static char read_file_path[64];

static void write_secret(void)
{
	int fd;

	snprintf(read_file_path, sizeof(read_file_path),
		 "/tmp/rs-auth-read-XXXXXX");
	fd = mkstemp(read_file_path);
	SV_CHECK(fd >= 0, "mkstemp");
	SV_CHECK(write(fd, SR, strlen(SR)) == (ssize_t)strlen(SR) &&
		 write(fd, "\n", 1) == 1, "write");
	SV_CHECK(fchmod(fd, 0600) == 0, "fchmod");
	close(fd);
}

static struct rs_server_config *auth_config(void)
{
	struct rs_server_config *cfg;

	SV_OK(rs_server_config_new(&cfg));
	SV_OK(rs_server_config_set_workers(cfg, 2));
	SV_OK(rs_server_config_add_key(cfg, 1, "admin", SA, strlen(SA)));
	SV_OK(rs_server_config_add_key(cfg, 2, "data", SD, strlen(SD)));
	SV_OK(rs_server_config_add_key_file(cfg, 3, "read", read_file_path));
	SV_CHECK(rs_server_config_add_key(cfg, 3, "data", SD, strlen(SD)) ==
		 RS_E_INVAL, "duplicate key id accepted");
	return cfg;
}

/* A client of node addr with key id (0: none) and secret; returns the
 * open result, *out set on success. */
static int client(const char *addr, uint32_t id, const char *secret,
		  int rpc_reads, struct rs_client **out)
{
	struct rs_client_config *cfg;
	int ret;

	SV_OK(rs_client_config_new(&cfg));
	SV_OK(rs_client_config_set_nodes(cfg, addr));
	SV_OK(rs_client_config_set_async_threads(cfg, 0));
	SV_OK(rs_client_config_set_conns_per_node(cfg, 2));
	SV_OK(rs_client_config_set_timeout_ms(cfg, 30000));
	SV_OK(rs_client_config_set_rpc_reads(cfg, rpc_reads));
	if (id)
		SV_OK(rs_client_config_set_credentials(cfg, id, secret,
						       strlen(secret)));
	ret = rs_client_open(out, cfg);
	rs_client_config_delete(&cfg);
	return ret;
}

static struct rs_client *must_client(const char *addr, uint32_t id,
				     const char *secret, int rpc_reads)
{
	struct rs_client *c = NULL;

	SV_OK(client(addr, id, secret, rpc_reads, &c));
	return c;
}

static void expect_auth_refused(const char *addr, uint32_t id,
				const char *secret, const char *why)
{
	struct rs_client *c = NULL;
	int ret = client(addr, id, secret, 0, &c);

	SV_CHECK(ret == RS_E_AUTH && !c, "%s: open returned %d (%s)", why,
		 ret, rs_errormsg());
	fprintf(stderr, "  %s: refused: %s\n", why, rs_errormsg());
}

static uint64_t refused_count(struct rs_client *admin)
{
	struct tl_stat w[] = { { NULL, "auth_refused", 0, 0 }, { 0 } };

	SV_OK(tl_stats_read(admin, 0, w));
	SV_CHECK(w[0].seen, "no auth_refused in STATS");
	return w[0].v;
}

/* ---- raw connects (the replay) ---- */

static int raw_connect(struct rv_dev *d, const struct sv_node *n,
		       const void *priv, size_t len, uint8_t *rej,
		       struct rv_conn **out)
{
	struct sv_conn_opts o = {
		.msg_max = PROTO_MIN_MESSAGE_BYTES, .slots = 3,
		.priv = priv, .priv_len = len,
		.rej = rej, .rej_cap = AUTH_REJ_LEN,
	};

	return sv_connect(d, n->ip, n->port, &o, out);
}

static void replay(const struct sv_node *n)
{
	struct auth_key k;
	struct rv_dev *d = NULL;
	struct rv_conn *c = NULL;
	uint8_t req[AUTH_REQ_LEN], rej[AUTH_REJ_LEN];
	const void *reply;
	size_t rlen = 0;
	unsigned role = 0;
	int ret;

	SV_OK(rv_dev_open(&d, n->ip));
	/* no credentials at all: refused, reason "required" */
	ret = raw_connect(d, n, NULL, 0, rej, &c);
	SV_CHECK(ret == -ECONNREFUSED, "bare connect: %d", ret);
	SV_CHECK(auth_reject_reason(rej, sizeof(rej)) == AUTH_REJ_REQUIRED,
		 "bare connect: reason %u", auth_reject_reason(rej, 8));
	/* a valid request, then the same bytes again */
	SV_OK(auth_key_init(&k, 2, AUTH_ROLE_NONE, SD, strlen(SD)));
	auth_request_make(&k, (uint64_t)time(NULL), req);
	SV_OK(raw_connect(d, n, req, sizeof(req), rej, &c));
	reply = rv_conn_peer_data(c, &rlen);
	SV_OK(auth_accept_check(&k, req, reply, rlen, &role));
	SV_CHECK(role == AUTH_ROLE_DATA, "role %u", role);
	rv_conn_close(&c);
	memset(rej, 0, sizeof(rej));
	ret = raw_connect(d, n, req, sizeof(req), rej, &c);
	SV_CHECK(ret == -ECONNREFUSED && !c, "replayed connect: %d", ret);
	SV_CHECK(auth_reject_reason(rej, sizeof(rej)) == AUTH_REJ_FAILED,
		 "replay: reason %u", auth_reject_reason(rej, 8));
	/* the wake connection's bytes are not a way in either */
	memset(rej, 0, sizeof(rej));
	ret = raw_connect(d, n, "RSWAKE\0\0\0\0\0\0\0\0\0\0", 16,
			  rej, &c);
	SV_CHECK(ret == -ECONNREFUSED, "wake-like connect: %d", ret);
	auth_key_wipe(&k);
	rv_dev_close(&d);
}

/* ---- roles ---- */

static void fill(uint64_t *keys, float *rows, float base)
{
	for (unsigned i = 0; i < NK; i++) {
		keys[i] = 1000 + i;
		for (unsigned j = 0; j < DIM; j++)
			rows[i * DIM + j] = base + (float)(i * DIM + j);
	}
}

static void all_status(const int *st, int want, const char *what)
{
	for (unsigned i = 0; i < NK; i++)
		SV_CHECK(st[i] == want, "%s: key %u status %d, want %d", what,
			 i, st[i], want);
}

static void admin_can_all(const char *addr)
{
	struct rs_client *c = must_client(addr, 1, SA, 0);
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	struct rs_table *t;
	uint64_t keys[NK];
	float rows[NK * DIM], out[NK * DIM];
	int st[NK];

	SV_OK(rs_table_spec_init(&spec, "scratch", DIM));
	spec.capacity = 1024;	/* small: a create clears its region */
	SV_OK(rs_table_create(c, &spec));
	SV_OK(rs_table_spec_init(&spec, "emb", DIM));
	spec.capacity = 1024;
	SV_OK(rs_table_create(c, &spec));
	SV_OK(rs_table_open(c, "emb", &t));
	fill(keys, rows, 1);
	SV_CHECK(rs_put(t, keys, NK, rows, st, 0) == NK, "admin put");
	SV_CHECK(rs_get(t, keys, NK, out, st, 0) == NK, "admin get");
	SV_CHECK(!memcmp(out, rows, sizeof(rows)), "admin: rows differ");
	SV_CHECK(rs_update(t, keys, NK, rows, st, 0) == NK, "admin update");
	SV_CHECK(rs_get_or_init(t, keys, NK, out, st, 0) == NK, "admin gi");
	SV_CHECK(rs_delete(t, keys, 1, st, 0) == 1, "admin delete");
	SV_CHECK(rs_put(t, keys, NK, rows, st, 0) == NK, "admin put 2");
	SV_CHECK(refused_count(c) >= 3, "refusals not counted");
	SV_OK(rs_table_drop(c, "scratch"));
	rs_client_close(&c);
}

static void data_role(const char *addr)
{
	struct rs_client *c = must_client(addr, 2, SD, 0);
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	struct rs_table *t;
	uint64_t keys[NK];
	float rows[NK * DIM], out[NK * DIM];
	int st[NK], ret;

	SV_OK(rs_table_spec_init(&spec, "data_made", DIM));
	ret = rs_table_create(c, &spec);
	SV_CHECK(ret == RS_E_PERM, "data create: %d (%s)", ret,
		 rs_errormsg());
	ret = rs_table_drop(c, "emb");
	SV_CHECK(ret == RS_E_PERM, "data drop: %d (%s)", ret, rs_errormsg());
	SV_OK(rs_table_open(c, "emb", &t));
	fill(keys, rows, 100);
	SV_CHECK(rs_update(t, keys, NK, rows, st, 0) == NK, "data update");
	SV_CHECK(rs_put(t, keys, NK, rows, st, 0) == NK, "data put");
	SV_CHECK(rs_get(t, keys, NK, out, st, 0) == NK, "data get");
	SV_CHECK(!memcmp(out, rows, sizeof(rows)), "data: rows differ");
	SV_CHECK(rs_get_or_init(t, keys, NK, out, st, 0) == NK, "data gi");
	SV_CHECK(rs_delete(t, keys + NK - 1, 1, st, 0) == 1, "data delete");
	SV_CHECK(rs_put(t, keys, NK, rows, st, 0) == NK, "data put 2");
	SV_CHECK(refused_count(c) >= 3, "data: stats");
	rs_client_close(&c);
}

static void read_role(const char *addr, int rpc_reads)
{
	struct rs_client *c = must_client(addr, 3, SR, rpc_reads);
	struct rs_client_stats cs = RS_CLIENT_STATS_INIT;
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	struct rs_table_info info[4] = { RS_TABLE_INFO_INIT };
	struct rs_table *t;
	uint64_t keys[NK];
	float rows[NK * DIM], out[NK * DIM], junk[NK * DIM];
	int st[NK], ret;

	fill(keys, rows, 100);	/* what data_role left */
	fill(keys, junk, -5);
	SV_CHECK(rs_table_list(c, info, 4) == 1, "read: table list");
	SV_OK(rs_table_open(c, "emb", &t));
	SV_CHECK(rs_get(t, keys, NK, out, st, 0) == NK, "read get");
	SV_CHECK(!memcmp(out, rows, sizeof(rows)), "read: rows differ");
	rs_client_get_stats(c, &cs);
	if (rpc_reads)
		SV_CHECK(cs.rpc_keys >= NK, "read: no GET RPC");
	else
		SV_CHECK(cs.onesided_keys >= NK, "read: no one-sided READ");
	SV_CHECK(rs_put(t, keys, NK, junk, st, 0) == 0, "read put");
	all_status(st, RS_E_PERM, "read put");
	SV_CHECK(rs_update(t, keys, NK, junk, st, 0) == 0, "read update");
	all_status(st, RS_E_PERM, "read update");
	SV_CHECK(rs_delete(t, keys, NK, st, 0) == 0, "read delete");
	all_status(st, RS_E_PERM, "read delete");
	keys[0] = 999999;	/* a missing key: get_or_init would create it */
	SV_CHECK(rs_get_or_init(t, keys, NK, out, st, 0) == 0, "read gi");
	all_status(st, RS_E_PERM, "read get_or_init");
	SV_CHECK(rs_get(t, keys, 1, out, st, RS_F_RPC) == 0 &&
		 st[0] == RS_KEY_MISSING, "read gi created key 999999");
	fill(keys, out, 0);
	SV_CHECK(rs_get(t, keys, NK, out, st, 0) == NK &&
		 !memcmp(out, rows, sizeof(rows)), "read: rows changed");
	SV_OK(tl_stats_read(c, 0, (struct tl_stat[]){
		{ NULL, "auth_refused", 0, 0 }, { 0 } }));
	SV_OK(rs_table_spec_init(&spec, "read_made", DIM));
	ret = rs_table_create(c, &spec);
	SV_CHECK(ret == RS_E_PERM, "read create: %d (%s)", ret,
		 rs_errormsg());
	ret = rs_table_drop(c, "emb");
	SV_CHECK(ret == RS_E_PERM, "read drop: %d (%s)", ret, rs_errormsg());
	rs_client_close(&c);
}

/* ---- recstore-ctl ---- */

#ifndef RS_CTL_BIN
#error "RS_CTL_BIN: path of recstore-ctl (server_auth.cmake)"
#endif

/* Run recstore-ctl with args and environment env; its exit status, its
 * stdout and stderr into out. */
static int ctl(const char *const *args, char *const *env, char *out,
	       size_t len)
{
	return sv_run(RS_CTL_BIN, args, env, out, len);
}

static void ctl_expect(const char *const *args, char *const *env, int code,
		       const char *needle)
{
	char out[8192];
	int st = ctl(args, env, out, sizeof(out));

	fprintf(stderr, "  recstore-ctl %s -> %d: %s", args[2], st, out);
	SV_CHECK(st == code, "exit %d, expected %d: %s", st, code, out);
	SV_CHECK(!needle || strstr(out, needle), "output lacks '%s': %s",
		 needle, out);
}

static void ctl_cases(const char *addr)
{
	char id3[] = "RS_KEY_ID=3", id1[] = "RS_KEY_ID=1", file[96],
	     secret[64];
	char *none[] = { NULL };
	char *env_file[] = { id3, file, NULL };
	char *env_secret[] = { id1, secret, NULL };

	snprintf(file, sizeof(file), "RS_SECRET_FILE=%s", read_file_path);
	snprintf(secret, sizeof(secret), "RS_SECRET=%s", SA);
	ctl_expect((const char *[]){ "-s", addr, "list", NULL }, none, 1,
		   "requires credentials");
	ctl_expect((const char *[]){ "-s", addr, "--key-id", "3",
				     "--secret-file", read_file_path, "list",
				     NULL }, none, 0, "emb");
	ctl_expect((const char *[]){ "-s", addr, "create", "ctl_t", "--dim",
				     "4", "--capacity", "1024", NULL },
		   env_file, 1, "admin");
	ctl_expect((const char *[]){ "-s", addr, "create", "ctl_t", "--dim",
				     "4", "--capacity", "1024", NULL },
		   env_secret, 0, "created");
	ctl_expect((const char *[]){ "-s", addr, "drop", "ctl_t", NULL },
		   env_secret, 0, "dropped");
}

/* A client with credentials and a node without any. */
static void open_node(const char *ip)
{
	struct sv_node n;
	struct rs_client *c = NULL;
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	int ret;

	sv_node_start(&n, ip, NULL);
	ret = client(n.addr, 1, SA, 0, &c);
	SV_CHECK(ret == RS_E_AUTH && !c, "node without credentials "
		 "accepted: %d", ret);
	fprintf(stderr, "  credentialed client, open node: %s\n",
		rs_errormsg());
	c = must_client(n.addr, 0, NULL, 0);
	SV_OK(rs_table_spec_init(&spec, "open", DIM));
	spec.capacity = 1024;
	SV_OK(rs_table_create(c, &spec));	/* everyone is admin */
	rs_client_close(&c);
	sv_node_stop(&n);
}

int main(void)
{
	const char *ip = sv_ip();
	struct rs_server_config *cfg;
	struct sv_node n;

	sv_memlock();
	write_secret();
	cfg = auth_config();
	sv_node_start(&n, ip, cfg);
	rs_server_config_delete(&cfg);
	fprintf(stderr, "node %s\n", n.addr);

	expect_auth_refused(n.addr, 0, NULL, "no credentials");
	expect_auth_refused(n.addr, 2, "wrong-secret-for-key-2", "wrong secret");
	expect_auth_refused(n.addr, 42, SA, "unknown key id");
	replay(&n);
	admin_can_all(n.addr);
	data_role(n.addr);
	read_role(n.addr, 0);
	read_role(n.addr, 1);
	ctl_cases(n.addr);
	sv_node_stop(&n);
	unlink(read_file_path);

	open_node(ip);
	printf("server_auth: ok\n");
	return 0;
}
