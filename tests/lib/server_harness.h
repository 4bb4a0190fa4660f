/*
 * server_harness.h - shared pieces of the memory node's rxe tests
 * (tests/rxe/test_server_*.c): a node run in-process on a thread, and a
 * RAW client that speaks the wire protocol through src/verbs directly, so
 * that tests can send anything (garbage, lies, floods) and see exactly what
 * the node answers.
 *
 * Every helper aborts the test (exit 1) with a message on an unexpected
 * error; sv_skip_without_device() exits 77 when RS_RDMA_DEV is unset.
 */
#ifndef SERVER_HARNESS_H
#define SERVER_HARNESS_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/rs_internal.h"
#include "recstore/client.h"
#include "recstore/server.h"
#include "harness_check.h"
#include "verbs/rv.h"

#define SV_MSG_MAX (256u << 10)
#define SV_TIMEOUT_MS 30000

#define sv_die hc_die
#define SV_OK HC_OK
#define SV_CHECK HC_CHECK

double sv_now(void);

const char *sv_ip(void);

void sv_memlock(void);

/* ---- a node in a thread ---- */

/* A memory node run in the test's process (rs_server_run on thread th):
 * the one kind every in-process test starts (sv_, h_ and ckpt_ helpers). */
struct sv_node {
	struct rs_server *s;
	pthread_t th;
	char addr[256];		/* ADDR:PORT it listens on */
	char ip[64];
	uint16_t port;
	int run_ret;
};

/* Run the node n->s (open, the rest of n zero) on a thread; its address
 * into n. */
void sv_node_run(struct sv_node *n);

/* Open a node with cfg (its listen address set) and run it on a thread;
 * its address into n. cfg stays the caller's. */
void sv_node_open(struct sv_node *n, const struct rs_server_config *cfg);

/* Stop the node, wait for its thread and close it; rs_server_run's
 * result. */
int sv_node_close(struct sv_node *n);

/* A node config loaded from the JSON text printf(fmt, ...) gives (through
 * a file: the loader reads files); the caller deletes it. */
struct rs_server_config *sv_config(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Start a node on ip:0 (cfg NULL: defaults with 2 workers). */
void sv_node_start(struct sv_node *n, const char *ip,
		   struct rs_server_config *cfg);

/* sv_node_close, and the run must have returned 0. */
void sv_node_stop(struct sv_node *n);

/* ---- a tool run as a process ---- */

/* Run bin with args (up to 14) and environment env; its exit status (128
 * if it did not exit), its stdout and stderr into out. */
int sv_run(const char *bin, const char *const *args,
	   char *const *env, char *out, size_t len);

/* Run bin (recstore-ctl) with args, no environment; expect exit status
 * code and both needles in its output (n2 may be NULL). */
void sv_ctl_expect(const char *bin, const char *const *args,
		   int code, const char *n1, const char *n2);

/* The capacity rs_table_list gives for table name (not listed: 0). */
uint64_t sv_capacity(struct rs_client *c, const char *name);

/* A client of the comma-separated nodes, timeout_ms per call. */
struct rs_client *sv_client(const char *nodes, unsigned timeout_ms);

/* A client of node n only (30 s timeout). */
struct rs_client *sv_client_of(const struct sv_node *n);

/* ---- a raw client ---- */

/* How a raw connection is made: its largest message, its credits and
 * send slots (both `slots`), the handshake's private data (may be NULL)
 * and where a refusal's data goes (rej, rej_cap; may be NULL, 0). */
struct sv_conn_opts {
	uint32_t msg_max;
	uint16_t slots;
	const void *priv;
	size_t priv_len;
	void *rej;
	size_t rej_cap;
};

/* rv_connect to ip:port over d with o; rv_connect's result. */
int sv_connect(struct rv_dev *d, const char *ip, uint16_t port,
	       const struct sv_conn_opts *o, struct rv_conn **out);

struct sv_cli {
	struct rv_dev *dev;
	struct rv_conn *c;
	uint8_t *buf;		/* request under construction */
	uint32_t cap;		/* what the node accepts */
	uint64_t next_id;
	struct proto_limits lim;
};

void sv_cli_open(struct sv_cli *k, const char *ip,
		 uint16_t port);

void sv_cli_close(struct sv_cli *k);

void sv_hdr(struct sv_cli *k, struct proto_hdr *h);

int sv_send(struct sv_cli *k, const void *b, size_t len);

/* Receive one message and decode it as a reply; raw stays held (release
 * with rv_msg_release). Returns proto_decode's result. */
int sv_recv(struct sv_cli *k, struct rv_msg *raw,
	    struct proto_msg *m);

/* Send len bytes, wait for the reply; *m decoded (error replies too).
 * Returns the reply's status (0 or negative). The raw message is released
 * (so pointers into it are invalid): for keyed replies use sv_call_raw. */
int sv_call(struct sv_cli *k, size_t len, struct proto_msg *m);

int sv_call_raw(struct sv_cli *k, size_t len,
		struct proto_msg *m, struct rv_msg *raw);

void sv_spec(struct proto_table_spec *s, const char *name,
	     uint32_t dim, uint32_t kind);

/* Create a table; its directory entry into *info. */
int sv_create(struct sv_cli *k,
	      const struct proto_table_spec *s,
	      struct proto_table_info *info);

int sv_drop(struct sv_cli *k, const char *name);

/* Keyed request on table t with n keys and (PUT / UPDATE) rows; statuses
 * into st[n] and (GET / GET_OR_INIT) rows into out[n * dim]. Returns the
 * reply status (< 0: an error reply, message in rs_errormsg()). */
int sv_keys(struct sv_cli *k, uint32_t op,
	    const struct proto_table_info *t,
	    const uint64_t *keys, uint32_t n, const float *rows,
	    uint32_t flags, int32_t *st, float *out);

/* STATS: the value of node counter `key` (table_id PROTO_NO_TABLE, or a
 * table's id). */
uint64_t sv_stat(struct sv_cli *k, uint32_t table,
		 const char *key);

/*
 * The well-behaved client that runs beside a hostile or dying one: on its
 * own connection it creates table "good" (dim floats, SGD) and, round
 * after round until stopped, PUTs nkeys rows (keys cycle over `span`
 * rounds' worth), GETs them back and checks every status and row.
 * `rounds` counts the verified rounds.
 */
#define SV_GOOD_MAX_KEYS 32
#define SV_GOOD_MAX_DIM 8

struct sv_good {
	struct sv_node *node;
	unsigned nkeys, dim, span;
	_Atomic int stop;
	_Atomic unsigned long rounds;	/* read by the main thread */
	pthread_t th;
};

void sv_good_start(struct sv_good *g);

/* Stop the good client; its verified rounds. */
unsigned long sv_good_stop(struct sv_good *g);

#endif
