/*
 * repl_driver.c - the workload of test_repl.sh (not a test of its own): a
 * client of a replicated cluster, found through its seed nodes.
 *
 *   repl_driver init SEEDS
 *       create table "rt" (dim 4, SGD, lr 1, zeros) and put every key
 *   repl_driver stream SEEDS STOPFILE OUT
 *       until STOPFILE exists: UPDATE every key with gradient -1 (with
 *       lr 1 a row counts the steps applied to it). Per key: acked (the
 *       node acknowledged the step) and uncertain (the call or the key
 *       failed: the step may or may not have been applied). OUT gets one
 *       line per key and a summary: calls, failures, the longest time
 *       between two acknowledged calls (the write gap). OUT.ready appears
 *       after the third acknowledged call (read: the third full read).
 *   repl_driver read SEEDS STOPFILE OUT
 *       until STOPFILE exists: get every key; a row must never go back
 *       (it only grows) by more than the steps in flight (a read may see
 *       a step its primary applied and then died without acknowledging:
 *       one per writer). OUT: reads, failures, the read gap, regressions.
 *   repl_driver once SEEDS
 *       one UPDATE of key 0 tagged exactly-once (a raw message to the
 *       key's primary), sent twice: the second gets the first's status and
 *       the row moves by one step only; the same keys under the next seq
 *       move it again.
 *   repl_driver onceall SEEDS CLIENT OUT|- [ADDR]
 *       one exactly-once call (client CLIENT, seq 1) updating every key,
 *       sent to the keys' primaries: first (OUT: a stream file of it) it
 *       must apply to every key; resent ("-") it must apply to none, and
 *       ADDR (the node that copied the records) must be the primary of
 *       some of them.
 *   repl_driver staleread SEEDS ADDR primary|backup TRIGGER OUT
 *       a reader that only reads a key it READs at ADDR, as the key's
 *       primary or as a backup (replica reads): (OUT.ready: the key's
 *       index), again and again until TRIGGER appears; the read after
 *       that must see the step acknowledged meanwhile elsewhere.
 *   repl_driver bump SEEDS KEYIDX OUT
 *       one acknowledged UPDATE step of that key; OUT: its stream file.
 *   repl_driver stale SEEDS ADDR EPOCH
 *       an UPDATE of key 0 in an old EPOCH straight to ADDR must be
 *       refused (RS_E_EPOCH, whole request or per key) and leave the row
 *       the cluster serves as it was.
 *   repl_driver ttl SEEDS REPLICAS
 *       table "tt" with a TTL of 1 s (docs/eviction.md, "Replication"):
 *       put every key; half of them are put again every 200 ms for 4 s.
 *       On every node of REPLICAS (unfenced GETs): no key is gone before
 *       1 s after its last write, the keys left alone go from every
 *       replica, the keys written again stay, with the same rows; the
 *       nodes' evictions.ttl add up to the expired keys (each expired
 *       once, by its primary: backups never expire rows themselves).
 *   repl_driver ttlput SEEDS
 *       table "tt" with a TTL of 1 s; put every key
 *   repl_driver ttlgone SEEDS
 *       no key of table "tt" is readable through the cluster
 *   repl_driver evr SEEDS
 *       the nodes' repl.evict_deletions_{resent,pending,dropped}: some
 *       resent, none pending, none dropped (test_repl_ttl_resend.sh)
 *   repl_driver tables SEEDS create|grow|drop NAME
 *       create (dim 4, SGD, lr 1, 4096 rows), grow (to 8192 rows) or drop
 *       table NAME
 *   repl_driver tlate SEEDS GOFILE NEW OLD V
 *       a client that opens now and keeps its configuration (GOFILE.ready
 *       says it opened, with its epoch) until GOFILE appears; then, by
 *       that configuration, it creates table NEW, puts every key of it =
 *       V and reads them back, and drops table OLD (docs/replication.md,
 *       "Tables": a member that joined meanwhile must get both)
 *   repl_driver tput SEEDS NAME V
 *       put every key of table NAME = V
 *   repl_driver tcheck SEEDS NAME V
 *       every key of table NAME is V through the cluster, and on every
 *       member of its replica set (an unfenced GET straight to each)
 *   repl_driver tempty ADDR NAME
 *       the node at ADDR holds no key of table NAME (unfenced GET)
 *   repl_driver tdir ADDR
 *       the names of the tables of the node at ADDR, sorted
 *   repl_driver open SEEDS
 *       open through SEEDS (the first may be stopped): the epoch and the
 *       CONFIG asks the client gave up after its wait for one node
 *   repl_driver fire SEEDS SECS
 *       two writers (threads, a client each) UPDATE every key (batches
 *       that span every primary) for SECS seconds against nodes with one
 *       worker each (test_repl_fire.sh): no call may fail or take 1.5 s
 *       (a backup's timeout is 2 s), every row must equal its
 *       acknowledged steps, and every node must have applied REPLs while
 *       all its workers waited for their own backups
 *       (repl.repls_all_waiting > 0: the cross wait the step hunts).
 *   repl_driver cfgprobe SEEDS ADDR
 *       3 concurrent CONFIG asks straight to the node at ADDR (one
 *       connection each, from 3 threads), while that node's adoption is
 *       held (RS_TEST_ADOPT_HOLD, kept until the asks end): each must
 *       be answered within its 5 s wait (a CONFIG that waits for the
 *       adoption never is).
 *   repl_driver replstale SEEDS BACKUP HOLD [GO]
 *       a stale REPL (docs/replication.md, "Stale REPLs"): BACKUP was
 *       started with RS_TEST_REPL_HOLD=HOLD. For a key whose backup it
 *       is: create HOLD; an exactly-once UPDATE of the key at its
 *       primary must fail (the backup holds its REPL past the primary's
 *       timeout; the primary keeps it to send again); with GO, write
 *       the primary's address to GO.ready and wait for GO (the test
 *       changes the configuration meanwhile: the kept REPL is read
 *       again), then open again; the next UPDATE must be acknowledged
 *       (its REPL goes on a new connection and another worker applies
 *       it); remove HOLD and
 *       wait for HOLD.done (the held REPL went on). Then the backup's row
 *       must equal the primary's: the held REPL, older, must not have
 *       been applied over the newer one.
 *   repl_driver renew SEEDS
 *       20 gets of every key with the read lease ended (a test hook)
 *       after each call's READs: each call must renew it with a CONFIG
 *       round and keep its READs (every key by READ, none by RPC, no
 *       call by RPC for want of a lease).
 *   repl_driver onceagain SEEDS KEYIDX
 *       after replstale and a failover that made its backup the key's
 *       primary: replstale's failed call (its client, seq 1) resent to
 *       the key's primary now must be answered from the call's record
 *       (status 0) and leave the row as it was: the REPL that failed
 *       was sent again, completion included, before the next write's
 *       ("A REPL that failed is sent again").
 *   repl_driver droprecreate SEEDS BACKUP HOLD
 *       a failed REPL of a table dropped and created again must not
 *       reach the new table (docs/replication.md, "Stale REPLs"): for
 *       a key K of table "rt" whose backup is BACKUP (started with
 *       RS_TEST_REPL_HOLD=HOLD), an UPDATE at its primary fails on a
 *       held REPL (kept to be sent again); drop "rt", create it again
 *       and put another key of the same primary and backup (that write
 *       ships what the primary keeps for the backup first); release
 *       the hold. K must then be missing from the new "rt" at the
 *       primary and at BACKUP alike.
 *   repl_driver droprecreate SEEDS BACKUP HOLD wire
 *       the same with K put first (the held REPL carries its row) and
 *       no put after the create: the held REPL, of the dropped table,
 *       is then the last its sender sent, and reaches BACKUP after "rt"
 *       was created again there. It must be refused (the tables'
 *       identities differ): K missing at the primary and at BACKUP.
 *   repl_driver check SEEDS REPLICAS OUT...
 *       every key's row (RPC and READ through the cluster) must lie in
 *       [sum acked, sum acked + sum uncertain] of the stream files OUT...,
 *       and be bit-identical on every node of REPLICAS (addr,addr: an
 *       unfenced GET straight to each node; "sets": on every member of
 *       the key's replica set).
 *
 * SEEDS: addr:port,addr:port. Exit 0, or 1 with a message.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "common/addr.h"
#include "common/rs_internal.h"
#include "recstore/client.h"

#define K 256
#define DIM 4
#define TABLE "rt"
#define WRITERS 2	/* stream processes of test_repl.sh, one call each */

#define DRIVER_NAME "repl_driver"
#define DRIVER_TIMEOUT_MS 20000
#include "cluster_driver.h"
#include "stats.h"

static uint64_t keys[K];
static const char *table = TABLE;	/* the table the commands use */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct rs_table *open_table(struct rs_client *c)
{
	return open_table_named(c, table);
}

/* Put rows (K x DIM) at every key of the table; every key must take it. */
static void put_all(struct rs_client *c, const float *rows)
{
	int st[K], ret = rs_put(open_table(c), keys, K, rows, st, 0);

	if (ret < 0)
		die("put: %s (%s)", rs_strerror(ret), rs_errormsg());
	for (int i = 0; i < K; i++)
		if (st[i] < 0)
			die("put key %d: %s", i, rs_strerror(st[i]));
}

static int do_init(const char *seeds)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	static float zero[K * DIM];
	int ret;

	rs_table_spec_init(&spec, TABLE, DIM);
	spec.optim.lr = 1.0f;
	if (getenv("RS_DRIVER_MAX_CAPACITY")) {
		/* a table that grows (the nemesis's grow): 4096 rows per
		 * node, doubled up to this */
		spec.capacity = 4096;
		spec.max_capacity = strtoull(getenv("RS_DRIVER_MAX_CAPACITY"),
					     NULL, 10);
	}
	ret = rs_table_create(c, &spec);
	if (ret && ret != RS_E_EXISTS)
		die("create: %s (%s)", rs_strerror(ret), rs_errormsg());
	put_all(c, zero);
	rs_client_close(&c);
	printf("init: %d keys\n", K);
	return 0;
}

/* The time of day, HH:MM:SS (the test's fault lines carry the same). */
static const char *clock_now(void)
{
	static char buf[16];
	time_t t = time(NULL);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
	return buf;
}

static int do_stream(const char *seeds, const char *stop, const char *out)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static float g[K * DIM];
	static uint64_t acked[K], unsure[K];
	uint64_t calls = 0, failed = 0, ok = 0, missing = 0;
	double last_ok = now_ms(), gap = 0, longest = 0;
	int st[K], lasterr = 0;
	FILE *f;

	for (int i = 0; i < K * DIM; i++)
		g[i] = -1.0f;
	while (access(stop, F_OK) != 0) {
		double t0 = now_ms();
		int ret = rs_update(t, keys, K, g, st, 0);
		bool all = ret >= 0;

		if (now_ms() - t0 > longest)
			longest = now_ms() - t0;
		calls++;
		for (int i = 0; i < K; i++) {
			if (ret >= 0 && st[i] == RS_KEY_FOUND) {
				acked[i]++;
			} else {
				/* every key exists: MISSING is a lie; the
				 * first ones say when and where */
				if (ret >= 0 && st[i] == RS_KEY_MISSING &&
				    missing++ < 5)
					printf("stream: key %d answered missing "
					       "at %s, call %" PRIu64 ", "
					       "epoch %" PRIu64 ", routed to "
					       "%s\n", i, clock_now(),
					       calls, (uint64_t)atomic_load(
						       &c->epoch),
					       rs_client_node_name(c,
						       rs_client_key_node(
							       c, keys[i])));
				unsure[i]++;
				all = false;
				lasterr = ret < 0 ? ret : st[i];
			}
		}
		if (all) {
			double now = now_ms();

			if (now - last_ok > gap)
				gap = now - last_ok;
			last_ok = now;
			if (++ok == 3)
				cd_ready(out);
		} else {
			failed++;
		}
	}
	if (!(f = fopen(out, "w")))
		die("%s: cannot write", out);
	for (int i = 0; i < K; i++)
		fprintf(f, "%d %" PRIu64 " %" PRIu64 "\n", i, acked[i],
			unsure[i]);
	fclose(f);
	{
		struct rs_client_stats cs = { .struct_size = sizeof(cs) };

		rs_client_get_stats(c, &cs);
		printf("stream: %" PRIu64 " calls of %d keys, %" PRIu64
		       " failed (last error: %s), longest write gap %.0f ms, "
		       "%" PRIu64 " configuration refreshes, %" PRIu64
		       " keys resent, longest call %.0f ms, %" PRIu64
		       " keys answered missing\n", calls, K, failed,
		       failed ? rs_strerror(lasterr) : "none", gap,
		       (uint64_t)cs.config_refreshes,
		       (uint64_t)cs.epoch_retries, longest, missing);
	}
	rs_client_close(&c);
	return 0;
}

static int do_read(const char *seeds, const char *stop, const char *out)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static float row[K * DIM], seen[K];
	uint64_t reads = 0, failed = 0, back = 0, ok = 0, inflight_back = 0;
	uint64_t missing = 0;
	double last_ok = now_ms(), gap = 0, longest = 0;
	int st[K];
	FILE *f;

	while (access(stop, F_OK) != 0) {
		double t0 = now_ms();
		int ret = rs_get(t, keys, K, row, st, 0);
		bool all = ret >= 0;

		if (now_ms() - t0 > longest)
			longest = now_ms() - t0;
		reads++;
		for (int i = 0; all && i < K; i++) {
			if (st[i] != RS_KEY_FOUND) {
				/* every key exists: MISSING is a lie; the
				 * first ones say when and where */
				for (int j = i; j < K; j++)
					if (st[j] == RS_KEY_MISSING &&
					    missing++ < 5)
						printf("read: key %d answered "
						       "missing at %s, call %"
						       PRIu64 ", epoch %" PRIu64
						       ", primary %s\n", j,
						       clock_now(), reads,
						       (uint64_t)atomic_load(
							       &c->epoch),
						       rs_client_node_name(c,
							rs_client_key_node(
								c, keys[j])));
				all = false;
				break;
			}
			/* a primary's row moves before its backups have the
			 * step; a primary that dies then leaves the step
			 * unacknowledged, and the new primary's row is one
			 * step behind what was read, per writer in flight */
			if (row[i * DIM] < seen[i] - WRITERS)
				back++;
			else if (row[i * DIM] < seen[i])
				inflight_back++;
			seen[i] = row[i * DIM];
		}
		if (all) {
			double now = now_ms();

			if (now - last_ok > gap)
				gap = now - last_ok;
			last_ok = now;
			if (++ok == 3)
				cd_ready(out);
		} else {
			failed++;
		}
	}
	if (!(f = fopen(out, "w")))
		die("%s: cannot write", out);
	fprintf(f, "reads %" PRIu64 " failed %" PRIu64 " back %" PRIu64
		" gap_ms %.0f\n", reads, failed, back, gap);
	fclose(f);
	{
		struct rs_client_stats cs = { .struct_size = sizeof(cs) };

		rs_client_get_stats(c, &cs);
		printf("read: %" PRIu64 " gets of %d keys, %" PRIu64
		       " failed, longest read gap %.0f ms, %" PRIu64
		       " rows went back (%" PRIu64 " by unacknowledged steps "
		       "only), %" PRIu64 " keys READ at a backup (%" PRIu64
		       " missing there), %" PRIu64 " keys READ at another "
		       "replica after a failure, %" PRIu64 " gets through "
		       "the RPC for want of a read lease, longest call %.0f "
		       "ms, %" PRIu64 " keys answered missing\n", reads, K,
		       failed, gap, back, inflight_back,
		       (uint64_t)cs.backup_keys, (uint64_t)cs.backup_misses,
		       (uint64_t)cs.diverted_keys,
		       (uint64_t)cs.lease_rpc_reads, longest, missing);
	}
	rs_client_close(&c);
	return back ? 1 : 0;
}

/* A node of its own at addr (one connection), and the table's id and
 * generation there in *q: raw requests bypass the cluster's routing. */
static void raw_node(struct rs_client *c, const char *addr,
		     struct cli_node *n, struct proto_keys_req *q)
{
	struct proto_table_info *dir = NULL;
	uint32_t cnt = 0;
	uint64_t gen;

	memset(n, 0, sizeof(*n));
	n->name = (char *)addr;
	n->dev = c->dev;
	n->timeout_ms = 10000;
	if (rs_addr_parse("node", addr, 0, false, n->host, sizeof(n->host),
			  &n->port) ||
	    cli_pool_init(&n->pool, 1))
		die("%s: bad address", addr);
	if (cli_wire_dir(n, &dir, &cnt, &gen))
		die("%s: directory: %s", addr, rs_errormsg());
	bool found = false;

	for (uint32_t i = 0; i < cnt; i++)
		if (!strcmp(dir[i].spec.name, table)) {
			q->table_id = dir[i].id;
			q->table_gen = dir[i].generation;
			found = true;
		}
	free(dir);
	if (!found)
		die("%s: no table '%s'", addr, table);
}

/* An unfenced GET of every key straight to the node at addr. */
static void raw_get(struct rs_client *c, const char *addr, float *out,
		    int32_t *st)
{
	struct cli_node n;
	struct proto_keys_req q = { 0 };
	struct proto_hdr h;
	struct proto_msg m;
	struct rv_msg raw;
	struct cli_conn *cc;
	int len, ret;

	raw_node(c, addr, &n, &q);
	q.n = K;
	q.keys = keys;
	if ((ret = cli_conn_get(&n, &cc)))
		die("%s: connect: %s", addr, rs_errormsg());
	cli_hdr_init(&h, 0, false);
	len = proto_enc_keys_req(cc->msg, cc->msg_max, &h, PROTO_OP_GET, &q);
	if (len < 0 || (ret = cli_wire_call(cc, (size_t)len, &raw, &m)))
		die("%s: GET: %s", addr, rs_errormsg());
	if (m.u.keys_reply.n != K || m.u.keys_reply.dtype != PROTO_DTYPE_FP32)
		die("%s: GET reply of %u keys", addr, m.u.keys_reply.n);
	for (int i = 0; i < K; i++)
		st[i] = proto_status_at(m.u.keys_reply.status, i);
	proto_load_f32(out, m.u.keys_reply.rows, (size_t)K * DIM);
	rv_msg_release(&raw);
	cli_conn_put(cc);
	cli_pool_destroy(&n.pool);
}

/* Send one UPDATE of keys[0..n) (gradient -1) tagged (client, seq) in
 * epoch (0: the client's) to addr; st[i]: each key's status, or the
 * whole request's error. */
static void raw_update_keys(struct rs_client *c, const char *addr,
			    const uint64_t *ks, uint32_t n, uint64_t client,
			    uint64_t seq, uint64_t epoch, int32_t *st)
{
	static const float g[K * DIM] = { [0 ... K * DIM - 1] = -1 };
	struct cli_node nd;
	struct proto_keys_req q = { 0 };
	struct proto_hdr h;
	struct proto_msg m;
	struct rv_msg raw;
	struct cli_conn *cc;
	int len, ret;

	raw_node(c, addr, &nd, &q);
	q.flags = PROTO_KF_EPOCH | PROTO_KF_ONCE;
	q.epoch = epoch ? epoch : atomic_load(&c->epoch);
	q.client = client;
	q.seq = seq;
	q.done_below = 1;
	q.n = n;
	q.dim = DIM;
	q.dtype = PROTO_DTYPE_FP32;
	q.keys = ks;
	q.rows = g;
	if ((ret = cli_conn_get(&nd, &cc)))
		die("%s: connect: %s", addr, rs_errormsg());
	cli_hdr_init(&h, 0, false);
	len = proto_enc_keys_req(cc->msg, cc->msg_max, &h, PROTO_OP_UPDATE,
				 &q);
	if (len < 0)
		die("%s: UPDATE: %s", addr, rs_errormsg());
	/* a node that just became the keys' primary holds writes for its
	 * read lease: RS_E_BUSY, nothing applied, try again */
	for (int i = 0; (ret = cli_wire_call(cc, (size_t)len, &raw, &m)) ==
				RS_E_BUSY && i < 200; i++)
		usleep(50000);
	if (ret == RS_E_EPOCH) {
		printf("UPDATE to %s in epoch %" PRIu64 ": %s\n", addr,
		       q.epoch, rs_errormsg());
		for (uint32_t i = 0; i < n; i++)
			st[i] = ret;
	} else if (ret) {
		die("%s: UPDATE: %s (%s)", addr, rs_strerror(ret),
		    rs_errormsg());
	} else {
		for (uint32_t i = 0; i < n; i++)
			st[i] = proto_status_at(m.u.keys_reply.status, i);
		rv_msg_release(&raw);
	}
	cli_conn_put(cc);
	cli_pool_destroy(&nd.pool);
}

static int32_t raw_update(struct rs_client *c, const char *addr,
			  uint64_t key, uint64_t client, uint64_t seq,
			  uint64_t epoch)
{
	int32_t st;

	raw_update_keys(c, addr, &key, 1, client, seq, epoch, &st);
	return st;
}

static float row_of(struct rs_table *t, uint64_t key)
{
	float row[DIM];
	int st;

	if (rs_get(t, &key, 1, row, &st, RS_F_RPC) < 0 || st != RS_KEY_FOUND)
		die("get: %s", rs_errormsg());
	return row[0];
}

static int do_once(const char *seeds)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	const char *addr = rs_client_node_name(c, rs_client_key_node(c,
								     keys[0]));
	const uint64_t client = 0x0dd5eed5eed5eed5ull;
	float v0 = row_of(t, keys[0]), v1, v2;
	int32_t s1, s2, s3;

	s1 = raw_update(c, addr, keys[0], client, 1, 0);
	s2 = raw_update(c, addr, keys[0], client, 1, 0);	/* a resend */
	v1 = row_of(t, keys[0]);
	s3 = raw_update(c, addr, keys[0], client, 2, 0);	/* next call */
	v2 = row_of(t, keys[0]);
	printf("once: primary %s, row %.0f, UPDATE seq 1 -> %d, resent -> %d, "
	       "row %.0f; seq 2 -> %d, row %.0f\n", addr, v0, s1, s2, v1, s3,
	       v2);
	rs_client_close(&c);
	if (s1 != 0 || s2 != 0 || s3 != 0 || v1 != v0 + 1 || v2 != v0 + 2) {
		printf("once: FAILED (the resend must not apply, the next "
		       "call must)\n");
		return 1;
	}
	return 0;
}

/* The test hook: the read lease ends after every call's READs. */
static atomic_uint lapses;

static void lease_lapses(struct rs_client *c)
{
	atomic_store(&c->read_until, 0);
	atomic_fetch_add(&lapses, 1);
}

/* A get whose read lease ran out while its READs were in flight renews
 * it with one CONFIG round and keeps its READs when the epoch held
 * (docs/replication.md, "A lease renewed after the READs"). The hook
 * ends the lease after the READs of each of CALLS gets of every key:
 * every key must still be found and served by READ, no call may
 * fall back to the GET RPC for want of a lease, and each call must have
 * run its CONFIG round. The code before the renewal sent every key of
 * every such call to the GET RPC. */
static int do_renew(const char *seeds)
{
	enum { CALLS = 20 };
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	struct rs_client_stats s0 = RS_CLIENT_STATS_INIT;
	struct rs_client_stats s1 = RS_CLIENT_STATS_INIT;
	static float row[K * DIM];
	int st[K], bad = 0;

	/* one get with the lease as it is: every key found, locations
	 * learnt */
	if (rs_get(t, keys, K, row, st, 0) != K)
		die("renew: first get: %s", rs_errormsg());
	rs_client_get_stats(c, &s0);
	cli_test_reads_done = lease_lapses;
	for (int i = 0; i < CALLS; i++) {
		static float again[K * DIM];
		int ret = rs_get(t, keys, K, again, st, 0);

		if (ret != K) {
			printf("renew: call %d: %d of %d keys (%s)\n", i, ret, K,
			       ret < 0 ? rs_errormsg() : "missing");
			bad++;
		}
	}
	cli_test_reads_done = NULL;
	rs_client_get_stats(c, &s1);
	printf("renew: %d calls, lease ended after the READs %u times; keys "
	       "by READ %" PRIu64 ", by RPC %" PRIu64 ", calls by RPC for "
	       "want of a lease %" PRIu64 ", CONFIG rounds %" PRIu64 "\n",
	       CALLS, atomic_load(&lapses),
	       s1.onesided_keys - s0.onesided_keys, s1.rpc_keys - s0.rpc_keys,
	       s1.lease_rpc_reads - s0.lease_rpc_reads,
	       s1.config_refreshes - s0.config_refreshes);
	rs_client_close(&c);
	if (bad || atomic_load(&lapses) != CALLS ||
	    s1.onesided_keys - s0.onesided_keys != (uint64_t)CALLS * K ||
	    s1.rpc_keys != s0.rpc_keys ||
	    s1.lease_rpc_reads != s0.lease_rpc_reads ||
	    s1.config_refreshes - s0.config_refreshes < CALLS) {
		printf("renew: FAILED (every key READ, none by RPC, a CONFIG "
		       "round per call)\n");
		return 1;
	}
	return 0;
}

/* A client that still routes by an old epoch writes to a node that was
 * paused past its lease (and may not have noticed yet): refused, and the
 * row the cluster serves does not move. */
static int do_stale(const char *seeds, const char *addr, uint64_t epoch)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	float v0 = row_of(t, keys[0]), v1;
	int32_t st;

	st = raw_update(c, addr, keys[0], 0x57a1e57a1e57a1eull, 1, epoch);
	v1 = row_of(t, keys[0]);
	printf("stale: UPDATE in epoch %" PRIu64 " to %s -> %d (%s); the "
	       "cluster (epoch %" PRIu64 ") serves row %.0f before, %.0f "
	       "after\n", epoch, addr, st, rs_strerror(st),
	       (uint64_t)atomic_load(&c->epoch), v0, v1);
	rs_client_close(&c);
	return st == RS_E_EPOCH && v1 == v0 ? 0 : 1;
}

/* One call tagged (client, seq) that updates every key, sent straight to
 * the keys' primaries. First (OUT given): every key must be applied, OUT
 * gets a stream file of one step per key. Again (OUT "-"): a resend of
 * the same call, which must apply nothing, wherever the keys' primaries
 * now are; NODE: how many keys the node of that name is the primary of
 * must be > 0 (the resends that reached a node that copied the records). */
static int do_onceall(const char *seeds, uint64_t client, const char *out,
		      const char *node)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static float before[K * DIM], after[K * DIM];
	static uint64_t ks[K];
	int32_t st[K], bad = 0, on_node = 0;
	int gst[K];
	bool first = strcmp(out, "-") != 0;

	if (rs_get(t, keys, K, before, gst, RS_F_RPC) < 0)
		die("get: %s", rs_errormsg());
	for (unsigned nd = 0; nd < rs_client_node_count(c); nd++) {
		const char *addr = rs_client_node_name(c, nd);
		uint32_t n = 0;
		int idx[K];

		for (int i = 0; i < K; i++)
			if (rs_client_key_node(c, keys[i]) == nd) {
				idx[n] = i;
				ks[n++] = keys[i];
			}
		if (!n)
			continue;
		raw_update_keys(c, addr, ks, n, client, 1, 0, st);
		for (uint32_t i = 0; i < n; i++) {
			if (st[i] != 0) {
				printf("key %d at %s: status %d\n", idx[i],
				       addr, st[i]);
				bad++;
			}
			if (node && strstr(addr, node))
				on_node++;
		}
	}
	if (rs_get(t, keys, K, after, gst, RS_F_RPC) < 0)
		die("get: %s", rs_errormsg());
	for (int i = 0; i < K; i++)
		if (after[i * DIM] != before[i * DIM] + (first ? 1 : 0)) {
			printf("key %d: row %.0f -> %.0f\n", i,
			       before[i * DIM], after[i * DIM]);
			bad++;
		}
	if (first) {
		FILE *f = fopen(out, "w");

		if (!f)
			die("%s: cannot write", out);
		for (int i = 0; i < K; i++)
			fprintf(f, "%d 1 0\n", i);
		fclose(f);
	}
	printf("onceall: %s of a call over %d keys: %d problems%s",
	       first ? "first send" : "resend", K, bad,
	       node ? "" : "\n");
	if (node)
		printf(", %d of the keys resent to %s\n", on_node, node);
	rs_client_close(&c);
	return bad || (node && !on_node) ? 1 : 0;
}

/* The index of a key this client READs at the node at addr, as its
 * primary (as_backup false) or as a backup (true: replica reads), or -1. */
static int read_at(struct rs_client *c, const char *addr, bool as_backup)
{
	const struct cli_route *rt = cli_route_hold(c);
	size_t nn = cli_nnodes(c);
	int k = -1;

	for (int i = 0; i < K && k < 0; i++) {
		unsigned prim, at = cli_route_reader(rt, keys[i],
						     c->client_id, c->ready,
						     nn, &prim);

		if ((at != prim) == as_backup &&
		    strstr(rs_client_node_name(c, at), addr))
			k = i;
	}
	cli_route_drop(c);
	return k;
}

/* A reader that only reads (it learns nothing from writes): it picks a
 * key it READs at ADDR, as the key's primary or (ROLE "backup") as a
 * backup, READs it, says so (OUT.ready holds the key's index), and READs
 * it again and again until TRIGGER exists (ADDR was paused, the store
 * went on without it and acknowledged a step of the key elsewhere); a
 * READ after that must see the step. Without a read lease its
 * configuration still sends it to the paused node's memory, which still
 * answers READs; without the primary's hold on a key whose replica set
 * lost a member, its lease still covers the paused backup when the step
 * is acknowledged. */
static int do_staleread(const char *seeds, const char *addr,
			const char *role, const char *trigger, const char *out)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	struct rs_client_stats cs = { .struct_size = sizeof(cs) };
	bool backup = !strcmp(role, "backup");
	float v0[DIM], v1[DIM];
	int st, k = read_at(c, addr, backup);
	uint64_t reads = 0;
	double longest = 0, last;
	char path[1024], during[512] = "";
	FILE *f;

	if (k < 0)
		die("no key is read at %s as its %s", addr, role);
	if (rs_get(t, &keys[k], 1, v0, &st, 0) < 0 || st != RS_KEY_FOUND)
		die("get: %s", rs_errormsg());
	rs_client_get_stats(c, &cs);
	if (backup && cs.backup_keys != 1)
		die("the key was not READ at its backup (%" PRIu64 " keys)",
		    (uint64_t)cs.backup_keys);
	snprintf(path, sizeof(path), "%s.ready", out);
	if (!(f = fopen(path, "w")))
		die("%s: cannot write", path);
	fprintf(f, "%d\n", k);
	fclose(f);
	/* keep the read lease as fresh as reads keep it */
	while (access(trigger, F_OK) != 0) {
		struct rs_client_stats b = RS_CLIENT_STATS_INIT,
				       a = RS_CLIENT_STATS_INIT;
		double t0 = now_ms();

		rs_client_get_stats(c, &b);
		if (rs_get(t, &keys[k], 1, v1, &st, 0) < 0 ||
		    st != RS_KEY_FOUND)
			die("get: %s", rs_errormsg());
		if (now_ms() - t0 > longest) {
			longest = now_ms() - t0;
			rs_client_get_stats(c, &a);
			snprintf(during, sizeof(during), "rpcs %" PRIu64
				 " rpc_keys %" PRIu64 " torn %" PRIu64
				 " config_refreshes %" PRIu64 " waits_cut %"
				 PRIu64 " dir_refreshes %" PRIu64
				 " backup_misses %" PRIu64 " reads_posted %"
				 PRIu64 " diverted %" PRIu64, a.rpcs - b.rpcs,
				 a.rpc_keys - b.rpc_keys,
				 a.torn_retries - b.torn_retries,
				 a.config_refreshes - b.config_refreshes,
				 a.config_waits_cut - b.config_waits_cut,
				 a.dir_refreshes - b.dir_refreshes,
				 a.backup_misses - b.backup_misses,
				 a.reads_posted - b.reads_posted,
				 a.diverted_keys - b.diverted_keys);
		}
		reads++;
		usleep(10000);
	}
	last = now_ms();
	if (rs_get(t, &keys[k], 1, v1, &st, 0) < 0 || st != RS_KEY_FOUND)
		die("get: %s", rs_errormsg());
	last = now_ms() - last;
	rs_client_get_stats(c, &cs);
	printf("staleread: key %d, %s %s: read %.0f, %" PRIu64 " reads, then "
	       "%.0f after the step was acknowledged elsewhere (%s; %" PRIu64
	       " keys READ at a backup, %" PRIu64 " gets by RPC for want of "
	       "a lease; longest get %.0f ms (%s), the last %.0f ms)\n", k,
	       role, addr, v0[0], reads, v1[0],
	       v1[0] > v0[0] ? "seen" : "STALE", (uint64_t)cs.backup_keys,
	       (uint64_t)cs.lease_rpc_reads, longest, during, last);
	fflush(stdout);	/* the verdict, before a close that waits */
	rs_client_close(&c);
	return v1[0] > v0[0] ? 0 : 1;
}

/* One acknowledged step of key KEYIDX (an UPDATE through the cluster);
 * OUT: a stream file of it. */
static int do_bump(const char *seeds, int k, const char *out)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static const float g[DIM] = { -1, -1, -1, -1 };
	double t0 = now_ms();
	int st, ret;
	FILE *f;

	if (k < 0 || k >= K)
		die("key index %d", k);
	ret = rs_update(t, &keys[k], 1, g, &st, 0);
	if (ret < 0 || st < 0)
		die("update: %s (%s)", rs_strerror(ret < 0 ? ret : st),
		    rs_errormsg());
	if (!(f = fopen(out, "w")))
		die("%s: cannot write", out);
	fprintf(f, "%d 1 0\n", k);
	fclose(f);
	printf("bump: key %d acknowledged after %.0f ms\n", k, now_ms() - t0);
	rs_client_close(&c);
	return 0;
}

/* Each key's replica set in the client's configuration (owners[i][0..
 * nown[i])); returns the node slots the configuration knows. */
static size_t replica_sets(struct rs_client *c,
			  unsigned owners[K][PROTO_CONFIG_MAX_R],
			  unsigned *nown)
{
	const struct cli_route *rt = cli_route_hold(c);
	size_t nn = rt->nknown;

	for (int i = 0; i < K; i++)
		nown[i] = cli_route_replicas(rt, keys[i], owners[i]);
	cli_route_drop(c);
	return nn;
}

/* How many keys have node in their replica set. */
static int keys_held(unsigned owners[K][PROTO_CONFIG_MAX_R],
		     const unsigned *nown, size_t node)
{
	int want = 0;

	for (int i = 0; i < K; i++)
		for (unsigned j = 0; j < nown[i]; j++)
			want += owners[i][j] == node;
	return want;
}

/* Every key's row on every member of its replica set in the client's
 * configuration (an unfenced GET straight to each): the problems; *nrep
 * gets the nodes asked. */
static int check_sets(struct rs_client *c, const float *row, int *nrep)
{
	static unsigned owners[K][PROTO_CONFIG_MAX_R];
	static float copy[K * DIM];
	unsigned nown[K];
	int32_t rst[K];
	int bad = 0;
	size_t nn;

	nn = replica_sets(c, owners, nown);
	for (size_t node = 0; node < nn; node++) {
		int want = 0;

		want = keys_held(owners, nown, node);
		if (!want)
			continue;
		raw_get(c, c->nodes[node].name, copy, rst);
		(*nrep)++;
		for (int i = 0; i < K; i++)
			for (unsigned j = 0; j < nown[i]; j++)
				if (owners[i][j] == node &&
				    (rst[i] || memcmp(copy + i * DIM,
						      row + i * DIM,
						      DIM * sizeof(float)))) {
					printf("key %d: replica %s has %s%.0f, "
					       "the primary %.0f\n", i,
					       c->nodes[node].name,
					       rst[i] ? "no row, status " : "",
					       rst[i] ? (double)rst[i]
						      : copy[i * DIM],
					       row[i * DIM]);
					bad++;
				}
	}
	return bad;
}

static int do_check(const char *seeds, const char *replicas, int nout,
		    char **outs)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static uint64_t acked[K], unsure[K];
	static float row[K * DIM], rrow[K * DIM], copy[K * DIM];
	uint64_t exact = 0, extra = 0, steps = 0;
	char buf[1024], *tok, *save = NULL;
	int st[K], bad = 0, nrep = 0;
	int32_t rst[K];

	for (int o = 0; o < nout; o++) {
		FILE *f = fopen(outs[o], "r");
		uint64_t a, u;
		int i;

		if (!f)
			die("%s: cannot read", outs[o]);
		while (fscanf(f, "%d %" SCNu64 " %" SCNu64, &i, &a, &u) == 3)
			if (i >= 0 && i < K) {
				acked[i] += a;
				unsure[i] += u;
			}
		fclose(f);
	}
	if (rs_get(t, keys, K, row, st, RS_F_RPC) < 0 ||
	    rs_get(t, keys, K, rrow, st, RS_F_NOCACHE) < 0)
		die("get: %s", rs_errormsg());
	for (int i = 0; i < K; i++) {
		double v = row[i * DIM];

		for (int j = 0; j < DIM; j++)
			if (row[i * DIM + j] != v ||
			    rrow[i * DIM + j] != row[i * DIM + j]) {
				printf("key %d: elements or READ/RPC differ\n",
				       i);
				bad++;
				break;
			}
		steps += acked[i];
		if (v < (double)acked[i]) {
			printf("key %d: row %.0f < %" PRIu64 " acknowledged "
			       "steps: an acknowledged update was LOST\n", i,
			       v, acked[i]);
			bad++;
		} else if (v > (double)(acked[i] + unsure[i])) {
			printf("key %d: row %.0f > %" PRIu64 " acknowledged + "
			       "%" PRIu64 " uncertain: applied twice\n", i, v,
			       acked[i], unsure[i]);
			bad++;
		} else if (v == (double)acked[i]) {
			exact++;
		} else {
			extra += (uint64_t)(v - (double)acked[i]);
		}
	}
	if (!strcmp(replicas, "sets"))
		bad += check_sets(c, row, &nrep);
	snprintf(buf, sizeof(buf), "%s", strcmp(replicas, "sets") ? replicas
								  : "");
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save), nrep++) {
		raw_get(c, tok, copy, rst);
		for (int i = 0; i < K; i++)
			if (rst[i] != 0 ||
			    memcmp(copy + i * DIM, row + i * DIM,
				   DIM * sizeof(float))) {
				printf("key %d: replica %s has %s%.0f, the "
				       "primary %.0f\n", i, tok,
				       rst[i] ? "no row, status " : "",
				       rst[i] ? (double)rst[i] : copy[i * DIM],
				       row[i * DIM]);
				bad++;
			}
	}
	printf("check: %d keys, %" PRIu64 " acknowledged steps none lost; "
	       "%" PRIu64 " keys exact, %" PRIu64 " unacknowledged steps "
	       "applied; %d replicas bit-identical; %d problems\n", K, steps,
	       exact, extra, nrep, bad);
	rs_client_close(&c);
	return bad ? 1 : 0;
}

/* Keys of keys[] (a: the even ones, b: the odd ones) present on every
 * replica; dies on a status other than found or missing. */
static void ttl_census(struct rs_client *c, const char *replicas, int *a,
		       int *b, float *rows)
{
	static float copy[K * DIM];
	char buf[1024], *tok, *save = NULL;
	int32_t st[K];

	*a = *b = 0;
	snprintf(buf, sizeof(buf), "%s", replicas);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		raw_get(c, tok, copy, st);
		for (int i = 0; i < K; i++) {
			if (st[i] != 0 && st[i] != RS_E_NOTFOUND)
				die("%s: GET key %d: %s", tok, i,
				    rs_strerror(st[i]));
			if (st[i])
				continue;
			(i % 2 ? (*b)++ : (*a)++);
			if (rows && memcmp(copy + i * DIM, rows + i * DIM,
					   DIM * sizeof(float)))
				die("%s: key %d: a row other than written",
				    tok, i);
		}
	}
}

static int do_ttl(const char *seeds, const char *replicas)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	static float rows[K * DIM], bro[K / 2 * DIM];
	static uint64_t bkeys[K / 2];
	int st[K], nrep = 1, a, b, ret;
	double t0, tb, gone_at = 0, gap = 0;
	struct tl_stat ev[] = { { "tt", "evictions.ttl", 0, 0 }, { 0 } };
	unsigned bad;
	struct rs_table *t;

	for (const char *p = replicas; *p; p++)
		nrep += *p == ',';
	table = "tt";
	rs_table_spec_init(&spec, "tt", DIM);
	if (rs_table_spec_set_eviction(&spec, "none", 0, 1, 0))
		die("spec: %s", rs_errormsg());
	ret = rs_table_create(c, &spec);
	if (ret)
		die("create: %s (%s)", rs_strerror(ret), rs_errormsg());
	if (rs_table_open(c, "tt", &t))
		die("table: %s", rs_errormsg());
	for (int i = 0; i < K; i++)
		for (int j = 0; j < DIM; j++)
			rows[i * DIM + j] = (float)(i * DIM + j);
	for (int i = 0; i < K / 2; i++) {
		bkeys[i] = keys[2 * i + 1];
		memcpy(bro + i * DIM, rows + (2 * i + 1) * DIM,
		       DIM * sizeof(float));
	}
	t0 = now_ms();
	ret = rs_put(t, keys, K, rows, st, 0);
	if (ret != K)
		die("put: %d (%s)", ret, rs_errormsg());
	ttl_census(c, replicas, &a, &b, rows);
	if (now_ms() - t0 < 1000 && (a != nrep * K / 2 || b != nrep * K / 2))
		die("keys gone before their TTL: %d and %d of %d per half "
		    "present", a, b, nrep * K / 2);
	/* the odd keys are written again every 100 ms, for at least 4 s
	 * and until the even ones went from every replica */
	tb = t0;
	while (now_ms() - t0 < 4000 || (!gone_at && now_ms() - t0 < 30000)) {
		double w = now_ms();

		gap = w - tb > gap ? w - tb : gap;
		tb = w;
		ret = rs_put(t, bkeys, K / 2, bro, st, 0);
		if (ret != K / 2)
			die("put again: %d (%s)", ret, rs_errormsg());
		ttl_census(c, replicas, &a, &b, rows);
		if (now_ms() - tb < 1000 && b != nrep * K / 2)
			die("keys written again gone before their TTL: %d of "
			    "%d copies present", b, nrep * K / 2);
		if (now_ms() - t0 < 1000 && a != nrep * K / 2)
			die("keys gone before their TTL: %d of %d copies "
			    "present", a, nrep * K / 2);
		if (!gone_at && !a)
			gone_at = now_ms() - t0;
		usleep(100 * 1000);
	}
	if (!gone_at)
		die("expired keys still on the replicas: %d copies", a);
	if (gone_at < 1000)
		die("expired keys gone after %.0f ms, before their TTL",
		    gone_at);
	if (tl_stats_sum(c, ev, &bad))
		die("stats of node %u: %s", bad, rs_errormsg());
	/* each expired key counted once, by its primary; a key written
	 * again may only have gone too if the writes were more than its
	 * TTL apart (a slow guest) */
	if (ev[0].v < K / 2 || (gap < 1000 && ev[0].v != K / 2))
		die("evictions.ttl over the nodes: %" PRIu64 ", %d keys "
		    "expired (writes again at most %.0f ms apart)", ev[0].v,
		    K / 2, gap);
	printf("ttl: %d keys expired from %d replicas after %.2f s, %d "
	       "written again (at most %.0f ms apart) kept; evictions.ttl "
	       "%" PRIu64 "\n", K / 2, nrep, gone_at / 1e3, K / 2, gap,
	       ev[0].v);
	rs_client_close(&c);
	return 0;
}

/* ttlput SEEDS: table "tt" with a TTL of 1 s; put every key, present on
 * every member of its replica set (test_repl_ttl_resend.sh) */
static int do_ttlput(const char *seeds)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	static float rows[K * DIM];
	struct rs_table *t;
	int st[K], ret;

	rs_table_spec_init(&spec, "tt", DIM);
	if (rs_table_spec_set_eviction(&spec, "none", 0, 1, 0))
		die("spec: %s", rs_errormsg());
	if ((ret = rs_table_create(c, &spec)))
		die("create: %s (%s)", rs_strerror(ret), rs_errormsg());
	if (rs_table_open(c, "tt", &t))
		die("table: %s", rs_errormsg());
	for (int i = 0; i < K * DIM; i++)
		rows[i] = (float)i;
	ret = rs_put(t, keys, K, rows, st, 0);
	if (ret != K)
		die("put: %d (%s)", ret, rs_errormsg());
	printf("ttlput: %d keys put in table tt (TTL 1 s)\n", K);
	rs_client_close(&c);
	return 0;
}

/* ttlgone SEEDS: no key of table "tt" is readable through the cluster */
static int do_ttlgone(const char *seeds)
{
	struct rs_client *c = open_client(seeds);
	static float row[K * DIM];
	struct rs_table *t;
	int st[K], held = 0;

	if (rs_table_open(c, "tt", &t))
		die("table: %s", rs_errormsg());
	if (rs_get(t, keys, K, row, st, RS_F_RPC) < 0)
		die("get: %s", rs_errormsg());
	for (int i = 0; i < K; i++)
		held += st[i] != RS_KEY_MISSING;
	printf("ttlgone: %d of %d expired keys readable through the "
	       "cluster\n", held, K);
	rs_client_close(&c);
	return held ? 1 : 0;
}

/* evr SEEDS: the nodes' deletions resent, pending and dropped (summed);
 * fails unless some were resent, none pend and none were dropped */
static int do_evr(const char *seeds)
{
	struct rs_client *c = open_client(seeds);
	struct tl_stat e[] = {
		{ NULL, "repl.evict_deletions_pending", 0, 0 },
		{ NULL, "repl.evict_deletions_resent", 0, 0 },
		{ NULL, "repl.evict_deletions_dropped", 0, 0 },
		{ 0 },
	};
	unsigned bad;

	if (tl_stats_sum(c, e, &bad))
		die("stats of node %u: %s", bad, rs_errormsg());
	printf("evr: deletions resent %" PRIu64 ", pending %" PRIu64
	       ", dropped %" PRIu64 "\n", e[1].v, e[0].v, e[2].v);
	rs_client_close(&c);
	return e[1].v && !e[0].v && !e[2].v ? 0 : 1;
}

/* create (dim 4, SGD, lr 1, 4096 rows), grow (to 8192 rows) or drop table
 * name through c */
static void table_op(struct rs_client *c, const char *op, const char *name)
{
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	int ret;

	rs_table_spec_init(&spec, name, DIM);
	spec.optim.lr = 1.0f;
	spec.capacity = 4096;	/* several fit in a node of the tests */
	ret = !strcmp(op, "create") ? rs_table_create(c, &spec)
	      : !strcmp(op, "grow") ? rs_table_grow(c, name, 2 * 4096)
				    : rs_table_drop(c, name);
	if (ret)
		die("%s %s: %s (%s)", op, name, rs_strerror(ret),
		    rs_errormsg());
	printf("tables: %s %s\n", op, name);
}

/* tables SEEDS create|grow|drop NAME */
static int do_tables(const char *seeds, const char *op, const char *name)
{
	struct rs_client *c = open_client(seeds);

	table_op(c, op, name);
	rs_client_close(&c);
	return 0;
}

/* tlate SEEDS GOFILE NEW OLD V: see the head comment */
static int do_tlate(const char *seeds, const char *go, const char *nt,
		    const char *old, float v)
{
	struct rs_client *c = open_client(seeds);
	static float rows[K * DIM], got[K * DIM];
	uint64_t e0 = atomic_load(&c->epoch), e1;
	char ready[4096];
	int st[K];
	FILE *f;

	snprintf(ready, sizeof(ready), "%s.ready", go);
	if (!(f = fopen(ready, "w")))
		die("%s: cannot write", ready);
	fprintf(f, "tlate: opened in epoch %" PRIu64 "\n", e0);
	fclose(f);
	for (int i = 0; access(go, F_OK); i++) {
		if (i >= 6000)
			die("%s never appeared", go);
		usleep(50000);
	}
	e1 = atomic_load(&c->epoch);
	printf("tlate: epoch %" PRIu64 " at open, %" PRIu64 " at the "
	       "create\n", e0, e1);
	table_op(c, "create", nt);
	table = nt;
	for (int i = 0; i < K * DIM; i++)
		rows[i] = v;
	put_all(c, rows);
	if (rs_get(open_table(c), keys, K, got, st, RS_F_RPC) < 0)
		die("get %s: %s", nt, rs_errormsg());
	for (int i = 0; i < K; i++)
		if (st[i] < 0 || got[i * DIM] != v)
			die("%s key %d: %s", nt, i, st[i] < 0 ?
			    rs_strerror(st[i]) : "another row");
	table_op(c, "drop", old);
	printf("tlate: %s: %d keys = %g written and read; %s dropped; "
	       "epoch %" PRIu64 " now\n", nt, K, v, old,
	       (uint64_t)atomic_load(&c->epoch));
	rs_client_close(&c);
	return 0;
}

/* tput SEEDS NAME V: every key of table NAME set to V */
static int do_tput(const char *seeds, float v)
{
	struct rs_client *c = open_client(seeds);
	static float rows[K * DIM];

	for (int i = 0; i < K * DIM; i++)
		rows[i] = v;
	put_all(c, rows);
	rs_client_close(&c);
	printf("tput: %s: %d keys = %g\n", table, K, v);
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* tdir ADDR: the tables of the node at ADDR (unfenced), sorted */
static int do_tdir(const char *addr)
{
	struct rs_client *c = open_client(addr);
	struct proto_table_info *dir = NULL;
	struct cli_node n = { .name = (char *)addr, .timeout_ms = 10000 };
	char *names[256];
	uint32_t cnt = 0;
	uint64_t gen;

	n.dev = c->dev;
	if (rs_addr_parse("node", addr, 0, false, n.host, sizeof(n.host),
			  &n.port) ||
	    cli_pool_init(&n.pool, 1))
		die("%s: bad address", addr);
	if (cli_wire_dir(&n, &dir, &cnt, &gen))
		die("%s: directory: %s", addr, rs_errormsg());
	for (uint32_t i = 0; i < cnt && i < 256; i++)
		names[i] = dir[i].spec.name;
	qsort(names, cnt < 256 ? cnt : 256, sizeof(*names), name_cmp);
	printf("tables:");
	for (uint32_t i = 0; i < cnt && i < 256; i++)
		printf(" %s", names[i]);
	printf("\n");
	free(dir);
	cli_pool_destroy(&n.pool);
	rs_client_close(&c);
	return 0;
}

/* tcheck SEEDS NAME V: every key of table NAME is V, through the cluster
 * and on every member of its replica set (unfenced GETs) */
static int do_tcheck(const char *seeds, float v)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static float row[K * DIM], copy[K * DIM];
	unsigned owners[K][PROTO_CONFIG_MAX_R], nown[K];
	int st[K], bad = 0, checked = 0;
	int32_t rst[K];
	size_t nn;

	if (rs_get(t, keys, K, row, st, RS_F_RPC) < 0)
		die("get: %s", rs_errormsg());
	for (int i = 0; i < K; i++)
		if (st[i] < 0 || row[i * DIM] != v) {
			printf("key %d: %s %g, not %g\n", i,
			       st[i] < 0 ? "missing" : "row", row[i * DIM], v);
			bad++;
		}
	nn = replica_sets(c, owners, nown);
	for (size_t node = 0; node < nn; node++) {
		int held = 0, want = 0;

		want = keys_held(owners, nown, node);
		if (!want)
			continue;
		raw_get(c, c->nodes[node].name, copy, rst);
		for (int i = 0; i < K; i++)
			for (unsigned j = 0; j < nown[i]; j++) {
				if (owners[i][j] != node)
					continue;
				if (rst[i] || copy[i * DIM] != v) {
					printf("key %d: replica %s has %s\n",
					       i, c->nodes[node].name,
					       rst[i] ? "no row" : "another");
					bad++;
				} else {
					held++;
				}
			}
		printf("tcheck: %s holds %d of its %d keys of %s\n",
		       c->nodes[node].name, held, want, table);
		checked++;
	}
	rs_client_close(&c);
	printf("tcheck: %s: %d keys = %g on %d nodes, %d problems\n", table,
	       K, v, checked, bad);
	return bad ? 1 : 0;
}

/* tempty ADDR NAME: the node at ADDR holds no key of table NAME (an
 * unfenced GET straight to it) */
static int do_tempty(const char *addr)
{
	struct rs_client *c = open_client(addr);
	static float copy[K * DIM];
	int32_t rst[K];
	int held = 0;

	raw_get(c, addr, copy, rst);
	for (int i = 0; i < K; i++)
		held += rst[i] != RS_E_NOTFOUND;
	rs_client_close(&c);
	printf("tempty: %s holds %d keys of %s\n", addr, held, table);
	return held ? 1 : 0;
}

/* open SEEDS: open (the first seeds may be stopped), one CONFIG round;
 * print the CONFIG asks given up */
static int do_open(const char *seeds)
{
	struct rs_client *c = open_client(seeds);
	struct rs_client_stats cs = RS_CLIENT_STATS_INIT;

	if (rs_client_get_stats(c, &cs))
		die("stats: %s", rs_errormsg());
	printf("open: epoch %" PRIu64 ", %" PRIu64 " CONFIG waits cut\n",
	       (uint64_t)atomic_load(&c->epoch), cs.config_waits_cut);
	rs_client_close(&c);
	return 0;
}

/* ---- replstale: a REPL overtaken by the next one ---- */

#define REPLSTALE_CLIENT 0x57a1e5eed0000001ull

/* Key k's primary when its replica set (replica_sets) is (primary,
 * backup), else NULL. */
static const char *primary_before(struct rs_client *c,
				  unsigned owners[][PROTO_CONFIG_MAX_R],
				  const unsigned *nown, int k,
				  const char *backup)
{
	if (nown[k] != 2 || strcmp(c->nodes[owners[k][1]].name, backup))
		return NULL;
	return c->nodes[owners[k][0]].name;
}

static int do_replstale(const char *seeds, const char *backup,
			const char *hold, const char *go)
{
	static unsigned owners[K][PROTO_CONFIG_MAX_R];
	static float prow[K * DIM], brow[K * DIM];
	struct rs_client *c = open_client(seeds);
	const uint64_t client = REPLSTALE_CLIENT;
	int32_t s1, s2, pst[K], bst[K];
	char done[4200], paddr[256] = "";
	const char *p = NULL;
	unsigned nown[K];
	int k, waited = 0;

	replica_sets(c, owners, nown);
	for (k = 0; k < K && !(p = primary_before(c, owners, nown, k,
						 backup)); k++)
		;
	if (p)
		snprintf(paddr, sizeof(paddr), "%s", p);
	else
		die("replstale: no key has %s as its backup", backup);
	snprintf(done, sizeof(done), "%s.done", hold);
	unlink(done);
	if (close(open(hold, O_CREAT | O_WRONLY, 0644)))
		die("replstale: %s: cannot create", hold);
	s1 = raw_update(c, paddr, keys[k], client, 1, 0);
	if (go) {	/* GO.ready names the primary; then wait for GO */
		char ready[4200];
		FILE *f;

		snprintf(ready, sizeof(ready), "%s.ready", go);
		if (!(f = fopen(ready, "w")))
			die("replstale: %s: cannot write", ready);
		fprintf(f, "%s\n", paddr);
		fclose(f);
		for (int i = 0; access(go, F_OK) && i < 1200; i++)
			usleep(50000);
		if (access(go, F_OK))
			die("replstale: %s never appeared", go);
		rs_client_close(&c);	/* the configuration now */
		c = open_client(seeds);
	}
	/* the configuration may move on between the open and the UPDATE
	 * (n4's join takes two epochs): a key answered RS_E_EPOCH is what
	 * a client refreshes and resends, same seq (a resend of an applied
	 * call is answered from its record and shipped again) */
	for (int i = 0;
	     (s2 = raw_update(c, paddr, keys[k], client, 2, 0)) == RS_E_EPOCH;
	     i++) {
		if (i == 20)
			die("replstale: UPDATE 2 answered RS_E_EPOCH 20 times");
		printf("replstale: UPDATE 2 -> RS_E_EPOCH in epoch %" PRIu64
		       ": refresh and resend\n",
		       (uint64_t)atomic_load(&c->epoch));
		usleep(200000);
		rs_client_close(&c);
		c = open_client(seeds);
		replica_sets(c, owners, nown);
		p = primary_before(c, owners, nown, k, backup);
		if (!p || strcmp(p, paddr))
			die("replstale: key %d moved off (%s, %s) in epoch %"
			    PRIu64, k, paddr, backup,
			    (uint64_t)atomic_load(&c->epoch));
	}
	unlink(hold);
	while (access(done, F_OK) && waited++ < 200)
		usleep(50000);
	usleep(500000);		/* the held REPL applies (or is refused) */
	raw_get(c, paddr, prow, pst);
	raw_get(c, backup, brow, bst);
	printf("replstale: key %d, primary %s, backup %s: UPDATE 1 -> %d "
	       "(held REPL), UPDATE 2 -> %d; held REPL %s; row %.0f at the "
	       "primary, %.0f at the backup\n", k, paddr, backup, s1, s2,
	       access(done, F_OK) ? "never went on" : "went on",
	       prow[k * DIM], brow[k * DIM]);
	rs_client_close(&c);
	if (s1 >= 0 || s2 != 0 || access(done, F_OK))
		die("replstale: the race did not happen (the first UPDATE "
		    "must fail on the held REPL, the second succeed)");
	if (pst[k] || bst[k] ||
	    memcmp(prow + k * DIM, brow + k * DIM, DIM * sizeof(float))) {
		printf("replstale: FAILED: the backup applied the older REPL "
		       "over the newer one\n");
		return 1;
	}
	return 0;
}

static int do_onceagain(const char *seeds, int k)
{
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	const char *addr = rs_client_node_name(c, rs_client_key_node(c,
								     keys[k]));
	float v0 = row_of(t, keys[k]), v1;
	int32_t st = raw_update(c, addr, keys[k], REPLSTALE_CLIENT, 1, 0);

	v1 = row_of(t, keys[k]);
	printf("onceagain: key %d, primary now %s: the failed call resent "
	       "-> %d, row %.0f before, %.0f after\n", k, addr, st, v0, v1);
	rs_client_close(&c);
	if (st != 0 || v1 != v0) {
		printf("onceagain: FAILED: the resend must be answered from "
		       "the call's record, not applied\n");
		return 1;
	}
	return 0;
}

static int do_droprecreate(const char *seeds, const char *backup,
			   const char *hold, bool wire)
{
	static unsigned owners[K][PROTO_CONFIG_MAX_R];
	static float rows[K * DIM], prow[K * DIM], brow[K * DIM];
	struct rs_client *c = open_client(seeds);
	int32_t s1, pst[K], bst[K];
	int k = -1, j = -1, waited = 0, st, ret;
	char paddr[256] = "", done[4200];
	unsigned nown[K];

	for (int i = 0; i < K * DIM; i++)
		rows[i] = 5;
	replica_sets(c, owners, nown);
	for (int i = 0; i < K && j < 0; i++) {
		if (nown[i] != 2 || strcmp(c->nodes[owners[i][1]].name, backup))
			continue;
		if (k < 0) {
			k = i;	/* (the client is opened again below) */
			snprintf(paddr, sizeof(paddr), "%s",
				 c->nodes[owners[i][0]].name);
		} else if (!strcmp(c->nodes[owners[i][0]].name, paddr)) {
			j = i;
		}
	}
	if (j < 0)
		die("droprecreate: no two keys have %s as their backup", backup);
	snprintf(done, sizeof(done), "%s.done", hold);
	unlink(done);
	if (wire) {	/* the held REPL then carries a row, not a deletion */
		ret = rs_put(open_table(c), &keys[k], 1, rows, &st, 0);
		if (ret < 0 || st < 0)
			die("droprecreate: put key %d: %s", k,
			    rs_strerror(ret < 0 ? ret : st));
	}
	if (close(open(hold, O_CREAT | O_WRONLY, 0644)))
		die("droprecreate: %s: cannot create", hold);
	s1 = raw_update(c, paddr, keys[k], REPLSTALE_CLIENT + (wire ? 2 : 1),
			1, 0);
	table_op(c, "drop", table);
	table_op(c, "create", table);
	rs_client_close(&c);
	c = open_client(seeds);		/* the new table's directory */
	if (!wire) {
		ret = rs_put(open_table(c), &keys[j], 1, rows, &st, 0);
		if (ret < 0 || st < 0)
			die("droprecreate: put key %d: %s", j,
			    rs_strerror(ret < 0 ? ret : st));
	}
	unlink(hold);
	while (access(done, F_OK) && waited++ < 200)
		usleep(50000);
	usleep(500000);		/* the held REPL applies (or is refused) */
	raw_get(c, paddr, prow, pst);
	raw_get(c, backup, brow, bst);
	printf("droprecreate%s: key %d, primary %s, backup %s: UPDATE of the "
	       "old table -> %d (held REPL); in the new table: key %d %s, "
	       "key %d status %d at the primary, %d at the backup",
	       wire ? " wire" : "", k, paddr, backup, s1, j,
	       wire ? "not put" : "put", k, pst[k], bst[k]);
	if (!bst[k])
		printf(" (row %.0f there)", brow[k * DIM]);
	printf("\n");
	rs_client_close(&c);
	if (s1 >= 0 || access(done, F_OK))
		die("droprecreate: the race did not happen (the UPDATE must "
		    "fail on the held REPL)");
	if (pst[k] == 0 || bst[k] != pst[k] ||
	    (!wire && (pst[j] || bst[j] || memcmp(prow + j * DIM,
						  brow + j * DIM,
						  DIM * sizeof(float))))) {
		printf("droprecreate: FAILED: a record of the dropped table "
		       "reached the new one\n");
		return 1;
	}
	return 0;
}

/* ---- fire: writers whose batches span both primaries ---- */

#define FIRE_WRITERS 2
#define FIRE_SLOW_MS 1500.0	/* a call this long waited for a timeout */

struct fire_writer {
	const char *seeds;
	double secs;
	uint64_t calls, failed, slow, acked[K];
	double longest;
	int lasterr;
};

static void *fire_main(void *arg)
{
	struct fire_writer *fw = arg;
	struct rs_client *c = open_client(fw->seeds);
	struct rs_table *t = open_table(c);
	static const float g1 = -1.0f;
	float *g = malloc(sizeof(float) * K * DIM);
	double t0 = now_ms();
	int st[K];

	if (!g)
		die("out of memory");
	for (int i = 0; i < K * DIM; i++)
		g[i] = g1;
	while (now_ms() - t0 < fw->secs * 1e3) {
		double a = now_ms(), took;
		int ret = rs_update(t, keys, K, g, st, 0);
		bool all = ret >= 0;

		took = now_ms() - a;
		fw->longest = took > fw->longest ? took : fw->longest;
		fw->slow += took >= FIRE_SLOW_MS;
		fw->calls++;
		for (int i = 0; i < K; i++) {
			if (ret >= 0 && st[i] >= 0) {
				fw->acked[i]++;
			} else {
				all = false;
				fw->lasterr = ret < 0 ? ret : st[i];
			}
		}
		fw->failed += !all;
	}
	free(g);
	rs_client_close(&c);
	return NULL;
}

static int do_fire(const char *seeds, double secs)
{
	static struct fire_writer fw[FIRE_WRITERS];
	pthread_t thr[FIRE_WRITERS];
	struct rs_client *c = open_client(seeds);
	struct rs_table *t = open_table(c);
	static float rows[K * DIM];
	uint64_t calls = 0, failed = 0, slow = 0;
	double longest = 0;
	int st[K], bad = 0, lasterr = 0;

	for (int w = 0; w < FIRE_WRITERS; w++) {
		fw[w].seeds = seeds;
		fw[w].secs = secs;
		if (pthread_create(&thr[w], NULL, fire_main, &fw[w]))
			die("pthread_create");
	}
	for (int w = 0; w < FIRE_WRITERS; w++) {
		pthread_join(thr[w], NULL);
		calls += fw[w].calls;
		failed += fw[w].failed;
		slow += fw[w].slow;
		longest = fw[w].longest > longest ? fw[w].longest : longest;
		lasterr = fw[w].lasterr ? fw[w].lasterr : lasterr;
	}
	printf("fire: %" PRIu64 " calls of %d keys by %d writers in %.0f s, "
	       "%" PRIu64 " failed (last error: %s), %" PRIu64 " took %.0f ms "
	       "or more, the longest %.0f ms\n", calls, K, FIRE_WRITERS, secs,
	       failed, failed ? rs_strerror(lasterr) : "none", slow,
	       FIRE_SLOW_MS, longest);
	if (rs_get(t, keys, K, rows, st, 0) < 0)
		die("get: %s", rs_errormsg());
	for (int i = 0; i < K; i++) {
		uint64_t want = 0;

		for (int w = 0; w < FIRE_WRITERS; w++)
			want += fw[w].acked[i];
		/* rows start at 0 (init) or at the steps of an earlier run:
		 * only failures may leave a row ahead of its acked steps */
		if (st[i] < 0 || (!failed && rows[i * DIM] != (float)want))
			bad++;
	}
	for (unsigned n = 0; n < rs_client_node_count(c); n++) {
		struct tl_stat fs[] = {
			{ NULL, "repl.repls_all_waiting", 0, 0 },
			{ NULL, "repl.chunks_failed", 0, 0 },
			{ NULL, "repl.failed_writes", 0, 0 },
			{ 0 },
		};

		if (tl_stats_read(c, n, fs))
			die("stats of node %u: %s", n, rs_errormsg());
		printf("fire: node %u: %" PRIu64 " REPLs applied while all "
		       "its workers waited for backups, %" PRIu64 " failed "
		       "chunks, %" PRIu64 " failed writes\n", n,
		       fs[0].v, fs[1].v, fs[2].v);
		if (!fs[0].v)
			bad++;
		bad += fs[1].v != 0;
	}
	rs_client_close(&c);
	if (failed || slow)
		die("writers whose batches span both primaries waited for "
		    "timeouts: %" PRIu64 " failed calls, %" PRIu64 " of %.0f ms "
		    "or more", failed, slow, FIRE_SLOW_MS);
	if (bad)
		die("%d wrong rows or nodes (a row other than its acked "
		    "steps, a failed chunk, or a node where the cross wait "
		    "did not happen)", bad);
	return 0;
}

/* ---- cfgprobe: CONFIG while an adoption is held ---- */

#define PROBES 3

struct probe {
	struct rs_client *c;
	const char *addr;
	double took;
	uint64_t epoch;
	int ret;
	char why[256];
};

static void *probe_main(void *arg)
{
	struct probe *pr = arg;
	struct cli_node n;
	struct cli_config cfg = { 0 };
	double t0;

	memset(&n, 0, sizeof(n));
	n.name = (char *)pr->addr;
	n.dev = pr->c->dev;
	n.timeout_ms = 5000;
	if (rs_addr_parse("node", pr->addr, 0, false, n.host,
			  sizeof(n.host), &n.port) ||
	    cli_pool_init(&n.pool, 1))
		die("%s: bad address", pr->addr);
	t0 = now_ms();
	pr->ret = cli_wire_config(&n, &cfg, 0);
	pr->took = now_ms() - t0;
	if (pr->ret)
		snprintf(pr->why, sizeof(pr->why), "%s", rs_errormsg());
	pr->epoch = cfg.epoch;
	cli_config_free(&cfg);
	cli_pool_destroy(&n.pool);
	return NULL;
}

static int do_cfgprobe(const char *seeds, const char *addr)
{
	struct rs_client *c = open_client(seeds);
	struct probe pr[PROBES];
	pthread_t thr[PROBES];
	int bad = 0;

	for (int i = 0; i < PROBES; i++) {
		pr[i] = (struct probe){ .c = c, .addr = addr };
		if (pthread_create(&thr[i], NULL, probe_main, &pr[i]))
			die("pthread_create");
	}
	for (int i = 0; i < PROBES; i++) {
		pthread_join(thr[i], NULL);
		printf("cfgprobe: CONFIG %d at %s: %s, epoch %" PRIu64 ", "
		       "%.0f ms%s%s\n", i, addr, pr[i].ret ?
		       rs_strerror(pr[i].ret) : "answered", pr[i].epoch,
		       pr[i].took, pr[i].ret ? ": " : "", pr[i].why);
		bad += pr[i].ret != 0;
	}
	rs_client_close(&c);
	if (bad)
		die("%d of %d CONFIG asks not answered while the node's "
		    "adoption waited", bad, PROBES);
	return 0;
}

int main(int argc, char **argv)
{
	for (int i = 0; i < K; i++)
		keys[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
	if (argc == 3 && !strcmp(argv[1], "init"))
		return do_init(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "stream"))
		return do_stream(argv[2], argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "read"))
		return do_read(argv[2], argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "stale"))
		return do_stale(argv[2], argv[3], strtoull(argv[4], NULL, 10));
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "onceall"))
		return do_onceall(argv[2], strtoull(argv[3], NULL, 0),
				  argv[4], argc == 6 ? argv[5] : NULL);
	if (argc == 7 && !strcmp(argv[1], "staleread"))
		return do_staleread(argv[2], argv[3], argv[4], argv[5],
				    argv[6]);
	if (argc == 5 && !strcmp(argv[1], "bump"))
		return do_bump(argv[2], atoi(argv[3]), argv[4]);
	if (argc == 3 && !strcmp(argv[1], "renew"))
		return do_renew(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "once"))
		return do_once(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "ttl"))
		return do_ttl(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "ttlput"))
		return do_ttlput(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "ttlgone"))
		return do_ttlgone(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "evr"))
		return do_evr(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "tables"))
		return do_tables(argv[2], argv[3], argv[4]);
	if (argc == 7 && !strcmp(argv[1], "tlate"))
		return do_tlate(argv[2], argv[3], argv[4], argv[5],
				strtof(argv[6], NULL));
	if (argc == 5 && !strcmp(argv[1], "tput"))
		return table = argv[3], do_tput(argv[2], strtof(argv[4], NULL));
	if (argc == 5 && !strcmp(argv[1], "tcheck"))
		return table = argv[3],
		       do_tcheck(argv[2], strtof(argv[4], NULL));
	if (argc == 4 && !strcmp(argv[1], "tempty"))
		return table = argv[3], do_tempty(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "tdir"))
		return do_tdir(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "open"))
		return do_open(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "fire"))
		return do_fire(argv[2], strtod(argv[3], NULL));
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "droprecreate"))
		return do_droprecreate(argv[2], argv[3], argv[4],
				       argc == 6 && !strcmp(argv[5], "wire"));
	if (argc == 4 && !strcmp(argv[1], "onceagain"))
		return do_onceagain(argv[2], atoi(argv[3]));
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "replstale"))
		return do_replstale(argv[2], argv[3], argv[4],
				    argc == 6 ? argv[5] : NULL);
	if (argc == 4 && !strcmp(argv[1], "cfgprobe"))
		return do_cfgprobe(argv[2], argv[3]);
	if (argc >= 5 && !strcmp(argv[1], "check"))
		return do_check(argv[2], argv[3], argc - 4, argv + 4);
	fprintf(stderr, "usage: repl_driver init|stream|read|check ...\n");
	return 2;
}
