/*
 * recstore-ctl - administer memory nodes: create, list and drop tables,
 * show a node's counters. A thin front end over public calls only: the
 * client library's admin calls (include/recstore/client.h:
 * rs_table_create, rs_table_drop, rs_table_list, rs_node_stats_foreach,
 * rs_checkpoint, rs_restore, rs_ckpt_verify) and, for a cluster, the
 * admin API over etcd (include/recstore/admin.h).
 *
 *   recstore-ctl -s ADDR:PORT[,ADDR:PORT...] [--key-id N --secret-file F]
 *                COMMAND [ARGS]
 *     create NAME --dim D [--capacity N] [--max-capacity M]
 *            [--dtype fp32|fp16|bf16]
 *            [--evict lru|lfu] [--max-rows N] [--ttl S] [--admit-after K]
 *            [--optimizer sgd|adagrad|rowwise_adagrad|adam] [--decoupled]
 *            [--init zeros|constant|uniform|normal]
 *            [--HYPER-PARAMETER X]... (one per row of the spec's field
 *            table, common/spec_fields.h: --lr, --beta1, --init-a,
 *            --init-seed (also --seed) ...)
 *     list
 *     drop NAME
 *     grow NAME [--capacity N]
 *     stats
 *   recstore-ctl --etcd URL[,URL...] --cluster NAME cluster
 *                [--until-active N] [--until-epoch N] [--timeout S]
 *                [--ranges] [--decide] [--replicas R]
 *   recstore-ctl --etcd URL[,URL...] --cluster NAME [ETCD SECURITY] drain ID
 *                [--cancel] [--force] [--no-wait] [--timeout S]
 *   recstore-ctl --etcd URL[,URL...] --cluster NAME [ETCD SECURITY] recover
 *                [--timeout S]
 *
 * ETCD SECURITY: --etcd-ca F (https: the CA of the members' certificates),
 * --etcd-cert F --etcd-key F (a client certificate), --etcd-user U
 * --etcd-password-file F (etcd authentication), or the same from
 * RS_ETCD_CA, RS_ETCD_CERT, RS_ETCD_KEY, RS_ETCD_USER and
 * RS_ETCD_PASSWORD_FILE (docs/replication.md, "Running etcd in
 * production").
 *
 * drain asks the cluster to remove member ID without losing a copy
 * (docs/replication.md, "Removing a node"): it becomes LEAVING, the
 * members taking its place copy its ranges while it still serves, then it
 * is DOWN and holds nothing; drain waits for that (up to --timeout S,
 * default 600) unless --no-wait. --cancel withdraws the request (a
 * LEAVING member becomes ACTIVE again). A drain that would leave fewer
 * than r members holding copies (counting the drains already asked) is
 * refused unless --force; concurrent drain commands are decided one after
 * the other (a compare-and-swap in etcd), so two of them cannot together
 * pass that floor. A member whose registration is gone (its lease lapsed)
 * is drained only with --force, and then put down at the next decision
 * even as the last complete holder of a range (rows only it held are
 * lost): the request marks it so in etcd ({"inc": ..., "gone": true});
 * without that mark, an ordinary drain request of a member that lapsed
 * while leaving keeps it until the others hold its ranges
 * (docs/replication.md, "The last complete holder"). An etcd that does
 * not answer in time or cannot be reached is tried again every 250 ms
 * until the timeout (a request that took effect is found asked).
 *
 * recover, after etcd was restored from an older snapshot (the nodes then
 * log that its configuration went back and follow none of it): writes
 * the newest configuration a live node follows back into etcd, one epoch
 * above any it saw, so that every node follows it and failover resumes;
 * then waits (up to --timeout S, default 30) until every registered node
 * follows it. Nothing to do is no error (docs/replication.md, "A store
 * restored from a snapshot").
 *
 * cluster prints what etcd holds for a cluster of memory nodes
 * (docs/replication.md): the configuration's epoch, r and members with
 * their states, the decider, the live registrations, and the replica sets
 * (each member's share of the ring as primary and as a replica; --ranges
 * lists every range with its ordered replica set). --until-active N and
 * --until-epoch N first wait (watching etcd, up to --timeout S, default
 * 30) until the configuration has N active members / epoch >= N; exit 1
 * on timeout (an etcd call that fails meanwhile is tried again every
 * 500 ms, said on stderr once per 10 s). --decide runs one reconfigure step first (as the decider
 * node does; safe next to it: the write is a compare-and-swap), with r
 * from --replicas (default 3) when there is no configuration yet.
 *
 * --max-capacity M (a power of two) lets each node double the table when
 * it fills, up to M rows; grow grows it now, to N rows per node (default:
 * double, up to its --max-capacity if it has one), online (docs/server.md,
 * "Growth").
 *
 * Without --capacity a node gives the table its default capacity (its
 * "default_capacity" rows, or what its free storage holds if that is
 * less; docs/config.md); create prints the capacity the nodes chose.
 *
 * With several nodes a table is created on / dropped from every node (a
 * table exists on every node, each holding its share of the keys); list
 * shows the union; stats prints each node's counters.
 *
 * Credentials (nodes that require them, docs/security.md): --key-id and
 * --secret-file, or the environment: RS_KEY_ID with RS_SECRET_FILE (or
 * RS_SECRET holding the secret itself; a secret is never taken from the
 * command line, where other users could see it in ps). Options win over
 * the environment. create, drop and grow need an "admin" key, list and stats
 * any key.
 *
 * Exit status: 0, 1
 * when the operation failed (the node's message is printed), 2 for a bad
 * command line.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recstore/admin.h"
#include "recstore/client.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Name of a kind, "?" if unknown (rs_dtype_name, rs_optimizer_name...). */
#define NAME_OR(n) ((n) ? (n) : "?")

static void field_usage(FILE *f);

static void usage(FILE *f)
{
	fprintf(f,
		"usage: recstore-ctl -s ADDR:PORT[,ADDR:PORT...] "
		"[--key-id N --secret-file F] COMMAND\n"
		"  create NAME --dim D [--capacity N] [--max-capacity M]\n"
		"         [--dtype fp32|fp16|bf16]\n"
		"         [--evict none|lru|lfu] [--max-rows N] [--ttl S] "
		"[--admit-after K]\n"
		"         [--optimizer sgd|adagrad|rowwise_adagrad|adam] "
		"[--decoupled]\n"
		"         [--init zeros|constant|uniform|normal]\n");
	field_usage(f);
	fprintf(f,
		"  list\n"
		"  drop NAME\n"
		"  grow NAME [--capacity N]\n"
		"  stats\n"
		"usage: recstore-ctl --etcd URL[,URL...] --cluster NAME "
		"[ETCD SECURITY] cluster\n"
		"         [--until-active N] [--until-epoch N] [--timeout S]\n"
		"         [--ranges] [--decide] [--replicas R]\n"
		"  drain ID [--cancel] [--force] [--no-wait] [--timeout S]\n"
		"         --force: drain below r copies, or put a member "
		"whose registration is\n"
		"         gone down at once (rows only it held are lost)\n"
		"  recover [--timeout S]   after etcd was restored from an "
		"older snapshot\n"
		"  checkpoint DIR [--table NAME]... [--export] "
		"[--freeze-ms N]\n"
		"  checkpoint DIR --incremental BASE_DIR [--freeze-ms N]\n"
		"         only the rows changed and keys deleted since "
		"BASE_DIR (next to DIR)\n"
		"         DIR is <checkpoint_dir of the nodes>/<name>, seen "
		"from here\n"
		"  restore DIR [--table NAME]...   (an increment: its bases "
		"first)\n"
		"usage: recstore-ctl verify DIR\n"
		"         check a checkpoint: its manifest, every part, every "
		"record\n"
		"credentials also from RS_KEY_ID with RS_SECRET_FILE or "
		"RS_SECRET\n"
		"ETCD SECURITY: [--etcd-ca F] [--etcd-cert F --etcd-key F] "
		"[--etcd-user U --etcd-password-file F]\n"
		"  (or RS_ETCD_CA, RS_ETCD_CERT, RS_ETCD_KEY, RS_ETCD_USER, "
		"RS_ETCD_PASSWORD_FILE)\n");
}

static int bad(const char *what, const char *v)
{
	fprintf(stderr, "recstore-ctl: %s: bad value '%s'\n", what, v);
	return 2;
}

/* --timeout S of drain and recover: 1..86400 seconds; -1 otherwise. */
static int parse_timeout(const char *v, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(v, &end, 10);
	return errno || *end || !*v || !*out || *out > 86400 ? -1 : 0;
}

static int parse_float(const char *v, float *out)
{
	char *end;

	errno = 0;
	*out = strtof(v, &end);
	return errno || end == v || *end ? -1 : 0;
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(v, &end, 0);
	return errno || end == v || *end || *v == '-' ? -1 : 0;
}

static char ctl_msg[160];

/* A message of our own for fail() (the library's is not set). */
static int ctl_err(const char *msg)
{
	snprintf(ctl_msg, sizeof(ctl_msg), "%s", msg);
	return RS_E_INVAL;
}

static int fail(const char *what, int ret)
{
	const char *m = ctl_msg[0] ? ctl_msg : rs_errormsg();

	fprintf(stderr, "recstore-ctl: %s: %s\n", what,
		m && *m ? m : rs_strerror(ret));
	return 1;
}

/* ---- create ---- */

enum {
	O_DIM = 1, O_CAP, O_DTYPE, O_OPT, O_DEC, O_INIT, O_SEED, O_MAXCAP,
	O_EVICT, O_MAXROWS, O_TTL, O_ADMIT,
	O_FIELD = 0x100 /* + row of the spec's parameters */
};

/*
 * The hyper-parameter options come from the spec's field table
 * (rs_table_spec_param, over common/spec_fields.h): row "weight_decay" of
 * the optimizer is --weight-decay, row "a" of the initializer --init-a.
 * The optimizer's flags (the one u32 row) are --decoupled; the
 * initializer's seed is --init-seed, and --seed as before.
 */
#define FIELD_OPT_MAX 32
static char field_opt_names[FIELD_OPT_MAX][40];

/* The rows with an option: at most FIELD_OPT_MAX of them. */
static unsigned field_count(void)
{
	unsigned n = rs_table_spec_param_count();

	return n < FIELD_OPT_MAX ? n : FIELD_OPT_MAX;
}

/* Row i's type (i < field_count()). */
static uint32_t field_type(unsigned i)
{
	uint32_t type = RS_PARAM_U32;

	rs_table_spec_param(i, NULL, NULL, &type);
	return type;
}

static const char *field_opt_name(unsigned i)
{
	const char *name = "?";
	uint32_t group = RS_PARAM_OPTIM;
	char *n = field_opt_names[i];

	rs_table_spec_param(i, &name, &group, NULL);
	snprintf(n, sizeof(field_opt_names[i]), "%s%s",
		 group == RS_PARAM_INIT ? "init-" : "", name);
	for (; *n; n++)
		if (*n == '_')
			*n = '-';
	return field_opt_names[i];
}

/* Append the table's options to opts[*n..] (room for FIELD_OPT_MAX). */
static void field_opts(struct option *opts, size_t *n)
{
	for (unsigned i = 0; i < field_count(); i++)
		if (field_type(i) != RS_PARAM_U32)
			opts[(*n)++] = (struct option){
				field_opt_name(i), required_argument, NULL,
				O_FIELD + (int)i };
}

static void field_usage(FILE *f)
{
	int col = 9;

	fprintf(f, "        ");
	for (unsigned i = 0; i < field_count(); i++) {
		if (field_type(i) == RS_PARAM_U32)
			continue;
		if (col + (int)strlen(field_opt_name(i)) + 6 > 78) {
			fprintf(f, "\n        ");
			col = 9;
		}
		col += fprintf(f, " [--%s X]", field_opt_name(i));
	}
	fprintf(f, "\n");
}

/* A table row's option: its value into the spec. 0 or an exit status. */
static int field_opt(struct rs_table_spec *s, unsigned i, const char *v)
{
	void *member = rs_table_spec_param_ptr(s, i);
	char what[48];

	snprintf(what, sizeof(what), "--%s", field_opt_name(i));
	if (field_type(i) == RS_PARAM_F32 ? parse_float(v, member)
					  : parse_u64(v, member))
		return bad(what, v);
	return 0;
}

/* Apply one create option to spec; 0 or an exit status. */
static int create_opt(struct rs_table_spec *s, int o, const char *v)
{
	uint64_t u;
	int k;

	switch (o) {
	case O_DIM:
		if (parse_u64(v, &u) || !u || u > 65536)
			return bad("--dim", v);
		s->dim = (uint32_t)u;
		return 0;
	case O_CAP:
		if (parse_u64(v, &u) || !u || u > 0xFFFFFFFEull)
			return bad("--capacity", v);
		s->capacity = u;
		return 0;
	case O_MAXCAP:
		if (parse_u64(v, &u) || u < 2 || u > 1ULL << 32 ||
		    (u & (u - 1)))
			return bad("--max-capacity (a power of two)", v);
		s->max_capacity = u;
		return 0;
	case O_DTYPE:
		if ((k = rs_dtype_parse(v)) < 0)
			return bad("--dtype", v);
		s->dtype = (uint32_t)k;
		return 0;
	case O_OPT:
		if (rs_table_spec_set_optimizer(s, v))
			return bad("--optimizer", v);
		return 0;
	case O_DEC:
		s->optim.flags |= 1;
		return 0;
	case O_INIT:
		if ((k = rs_init_parse(v)) < 0)
			return bad("--init", v);
		s->init.kind = (uint32_t)k;
		return 0;
	case O_SEED:
		if (parse_u64(v, &s->init.seed))
			return bad("--seed", v);
		return 0;
	/* eviction (docs/eviction.md): checked as a whole after parsing */
	case O_EVICT:
		if ((k = rs_evict_parse(v)) < 0)
			return bad("--evict", v);
		s->evict.policy = (uint32_t)k;
		return 0;
	case O_MAXROWS:
		if (parse_u64(v, &u) || !u || u > 0xFFFFFFFEull)
			return bad("--max-rows", v);
		s->evict.max_rows = u;
		return 0;
	case O_TTL:
		if (parse_u64(v, &u) || !u || u > RS_EVICT_TTL_MAX)
			return bad("--ttl", v);
		s->evict.ttl_s = (uint32_t)u;
		return 0;
	case O_ADMIT:
		if (parse_u64(v, &u) || u > RS_EVICT_ADMIT_MAX)
			return bad("--admit-after", v);
		s->evict.admit_after = (uint32_t)u;
		return 0;
	}
	if (o >= O_FIELD && o < O_FIELD + (int)field_count())
		return field_opt(s, (unsigned)(o - O_FIELD), v);
	return bad("option", v);
}

/* The tables of the nodes into *out (free it); their number or < 0. */
static int list_all(struct rs_client *c, struct rs_table_info **out)
{
	struct rs_table_info *t = NULL, *g;
	size_t cap = 64;
	int n;

	for (;;) {
		g = realloc(t, cap * sizeof(*t));
		if (!g) {
			free(t);
			return -ENOMEM;
		}
		t = g;
		t[0].struct_size = sizeof(*t);
		n = rs_table_list(c, t, cap);
		if (n < 0 || (size_t)n <= cap)
			break;
		cap = (size_t)n;
	}
	if (n < 0) {
		free(t);
		t = NULL;
	}
	*out = t;
	return n;
}

/* The capacity of table name summed over the nodes (0: unknown). */
static uint64_t capacity_of(struct rs_client *c, const char *name)
{
	struct rs_table_info *t;
	uint64_t cap = 0;
	int n = list_all(c, &t);

	for (int i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			cap = t[i].capacity;
	free(t);
	return cap;
}

/* --optimizer resets the hyper-parameters to its defaults, so it is
 * applied first; the other options in command-line order. */
static int cmd_create(struct rs_client *c, int argc, char **argv)
{
	static const struct option fixed[] = {
		{ "dim", required_argument, NULL, O_DIM },
		{ "capacity", required_argument, NULL, O_CAP },
		{ "max-capacity", required_argument, NULL, O_MAXCAP },
		{ "dtype", required_argument, NULL, O_DTYPE },
		{ "optimizer", required_argument, NULL, O_OPT },
		{ "decoupled", no_argument, NULL, O_DEC },
		{ "init", required_argument, NULL, O_INIT },
		{ "seed", required_argument, NULL, O_SEED },
		{ "evict", required_argument, NULL, O_EVICT },
		{ "max-rows", required_argument, NULL, O_MAXROWS },
		{ "ttl", required_argument, NULL, O_TTL },
		{ "admit-after", required_argument, NULL, O_ADMIT },
	};
	struct option opts[ARRAY_SIZE(fixed) + FIELD_OPT_MAX + 1];
	size_t nopts = ARRAY_SIZE(fixed);
	struct { int o; const char *v; } seen[64];
	struct rs_table_spec s = RS_TABLE_SPEC_INIT;
	int n = 0, o, ret;

	if (argc < 2 || argv[1][0] == '-') {
		usage(stderr);
		return 2;
	}
	memcpy(opts, fixed, sizeof(fixed));
	field_opts(opts, &nopts);
	opts[nopts] = (struct option){ NULL, 0, NULL, 0 };
	if (rs_table_spec_init(&s, argv[1], 1))
		return fail("create", RS_E_INVAL);
	s.dim = 0;
	optind = 2;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == '?' || n == 64) {
			usage(stderr);
			return 2;
		}
		seen[n].o = o;
		seen[n++].v = optarg;
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	for (int i = 0; i < n; i++)
		if (seen[i].o == O_OPT && (ret = create_opt(&s, O_OPT,
							    seen[i].v)))
			return ret;
	for (int i = 0; i < n; i++)
		if (seen[i].o != O_OPT &&
		    (ret = create_opt(&s, seen[i].o, seen[i].v)))
			return ret;
	if (!s.dim) {
		fprintf(stderr, "recstore-ctl: create: --dim is required\n");
		return 2;
	}
	if ((ret = rs_table_spec_set_eviction(
		     &s, rs_evict_name(s.evict.policy),
		     s.evict.max_rows, s.evict.ttl_s, s.evict.admit_after)))
		return fail("create", ret);
	ret = rs_table_create(c, &s);
	if (ret)
		return fail("create", ret);
	printf("created table '%s': dim %u, %s, capacity %" PRIu64
	       "%s, optimizer %s (lr %g), init %s\n", s.name, s.dim,
	       NAME_OR(rs_dtype_name(s.dtype)),
	       s.capacity ? s.capacity : capacity_of(c, s.name),
	       s.capacity ? " per node" : " (the nodes' default, in all)",
	       NAME_OR(rs_optimizer_name(s.optim.kind)), (double)s.optim.lr,
	       NAME_OR(rs_init_name(s.init.kind)));
	return 0;
}

/* ---- list / drop / stats ---- */

static int cmd_list(struct rs_client *c)
{
	struct rs_table_info *t;
	int n = list_all(c, &t);

	if (n < 0)
		return fail("list", n);
	printf("%-24s %6s %5s %16s %12s %-16s %s\n", "NAME", "DIM", "DTYPE",
	       "ROWS", "CAPACITY", "OPTIMIZER", "LR");
	for (int i = 0; i < n; i++)
		printf("%-24s %6u %5s %16" PRIu64 " %12" PRIu64 " %-16s %g\n",
		       t[i].name, t[i].dim,
		       NAME_OR(rs_dtype_name(t[i].dtype)),
		       t[i].rows, t[i].capacity,
		       NAME_OR(rs_optimizer_name(t[i].optimizer)),
		       (double)t[i].lr);
	free(t);
	return 0;
}

static int cmd_drop(struct rs_client *c, int argc, char **argv)
{
	int ret;

	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	ret = rs_table_drop(c, argv[1]);
	if (ret)
		return fail("drop", ret);
	printf("dropped table '%s'\n", argv[1]);
	return 0;
}

static int cmd_grow(struct rs_client *c, int argc, char **argv)
{
	uint64_t cap = 0;
	int ret;

	if (argc == 4 && !strcmp(argv[2], "--capacity")) {
		if (parse_u64(argv[3], &cap) || !cap || cap > 0xFFFFFFFEull)
			return bad("--capacity", argv[3]);
	} else if (argc != 2) {
		usage(stderr);
		return 2;
	}
	ret = rs_table_grow(c, argv[1], cap);
	if (ret)
		return fail("grow", ret);
	printf("grew table '%s': capacity %" PRIu64 " in all\n", argv[1],
	       capacity_of(c, argv[1]));
	return 0;
}

static int print_stat(void *arg, const char *table, const char *key,
		      uint64_t v)
{
	(void)arg;
	if (table)
		printf("  %s.%s %" PRIu64 "\n", table, key, v);
	else
		printf("  %s %" PRIu64 "\n", key, v);
	return 0;
}

/* Every node's counters; a node that does not answer is said and the
 * others still printed (exit 1 then). */
static int cmd_stats(struct rs_client *c)
{
	int rc = 0;

	for (unsigned k = 0; k < rs_client_node_count(c); k++) {
		int ret;

		printf("node %s\n", rs_client_node_name(c, k));
		ret = rs_node_stats_foreach(c, k, print_stat, NULL);
		if (ret)
			rc = fail("stats", ret);
	}
	return rc;
}

/* ---- main ---- */

struct creds {
	const char *key_id;	/* NULL: none */
	const char *file;
};

/* Credentials from the options, else the environment; 0 or a code. */
static int set_creds(struct rs_client_config *cfg, const struct creds *o)
{
	const char *id = o->key_id ? o->key_id : getenv("RS_KEY_ID");
	const char *file = o->file ? o->file : getenv("RS_SECRET_FILE");
	const char *secret = getenv("RS_SECRET");
	uint64_t v;

	if (!id && !o->file)
		return 0;
	if (!id || parse_u64(id, &v) || !v || v > UINT32_MAX)
		return ctl_err("--key-id / RS_KEY_ID: need a key id "
			       "1..4294967295");
	if (file && *file)
		return rs_client_config_set_credentials_file(cfg, (uint32_t)v,
							     file);
	if (secret && *secret)
		return rs_client_config_set_credentials(cfg, (uint32_t)v,
							secret,
							strlen(secret));
	return ctl_err("a key id without a secret: give --secret-file (or "
		       "RS_SECRET_FILE / RS_SECRET)");
}

static int connect_nodes(const char *nodes, const struct creds *cr,
			 struct rs_client **c)
{
	struct rs_client_config *cfg;
	int ret;

	ret = rs_client_config_new(&cfg);
	if (!ret)
		ret = set_creds(cfg, cr);
	if (!ret)
		ret = rs_client_config_set_nodes(cfg, nodes);
	if (!ret)
		ret = rs_client_config_set_cache_entries(cfg, 0);
	if (!ret)
		ret = rs_client_config_set_async_threads(cfg, 0);
	if (!ret)
		ret = rs_client_config_set_conns_per_node(cfg, 1);
	if (!ret)
		ret = rs_client_open(c, cfg);
	rs_client_config_delete(&cfg);
	return ret;
}

/* ---- cluster (etcd) ---- */

/* --etcd-ca/--etcd-cert/--etcd-key/--etcd-user/--etcd-password-file, or
 * RS_ETCD_CA, RS_ETCD_CERT, RS_ETCD_KEY, RS_ETCD_USER,
 * RS_ETCD_PASSWORD_FILE (strings of argv or the environment) */
static struct rs_admin_etcd_opts etcd_sec = RS_ADMIN_ETCD_OPTS_INIT;

/* The admin handle of cluster in the etcd of etcd (recstore/admin.h). */
static int etcd_open(struct rs_admin **a, const char *etcd,
		     const char *cluster)
{
	static const struct { const char *env; const char **field; } envs[] = {
		{ "RS_ETCD_CA", &etcd_sec.ca_file },
		{ "RS_ETCD_CERT", &etcd_sec.cert_file },
		{ "RS_ETCD_KEY", &etcd_sec.key_file },
		{ "RS_ETCD_USER", &etcd_sec.user },
		{ "RS_ETCD_PASSWORD_FILE", &etcd_sec.password_file },
	};
	int ret;

	for (size_t i = 0; i < ARRAY_SIZE(envs); i++)
		if (!*envs[i].field && getenv(envs[i].env) &&
		    *getenv(envs[i].env))
			*envs[i].field = getenv(envs[i].env);
	ret = rs_admin_open_etcd(a, etcd, cluster, &etcd_sec);
	if (!ret && (rs_admin_warnings(*a) & RS_ADMIN_WARN_PASSWORD_READABLE))
		fprintf(stderr, "recstore-ctl: warning: %s may be read by "
			"other users (chmod 600 it)\n",
			etcd_sec.password_file);
	return ret;
}

/* The monotonic clock in ms: the deadlines of the waiting commands. */
static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A message of our own, formatted, for err_msg(); returns code. */
__attribute__((format(printf, 2, 3)))
static int ctl_errf(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctl_msg, sizeof(ctl_msg), fmt, ap);
	va_end(ap);
	return code;
}

/* What failed last: ours (a timeout of a command) or the library's. */
static const char *err_msg(void)
{
	return ctl_msg[0] ? ctl_msg : rs_errormsg();
}

/* In the active ring: serves reads, leads its primary ranges. */
static bool serves(uint32_t state)
{
	return state == RS_ADMIN_ACTIVE || state == RS_ADMIN_LEAVING;
}

struct cluster_args {
	unsigned until_active;
	uint64_t until_epoch;
	unsigned timeout_s;
	unsigned replicas;
	bool ranges, decide;
};

static int parse_cluster_args(int argc, char **argv, struct cluster_args *a)
{
	static const struct option opts[] = {
		{ "until-active", required_argument, NULL, 'a' },
		{ "until-epoch", required_argument, NULL, 'e' },
		{ "timeout", required_argument, NULL, 't' },
		{ "replicas", required_argument, NULL, 'r' },
		{ "ranges", no_argument, NULL, 'R' },
		{ "decide", no_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long long v;
	char *end;
	int o;

	*a = (struct cluster_args){ .timeout_s = 30, .replicas = 3 };
	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'R' || o == 'd') {
			*(o == 'R' ? &a->ranges : &a->decide) = true;
			continue;
		}
		if (o == '?')
			return 2;
		errno = 0;
		v = strtoull(optarg, &end, 10);
		if (errno || *end || !*optarg || v > 1000000000ull)
			return bad(opts[o == 'a' ? 0 : o == 'e' ? 1 :
				       o == 't' ? 2 : 3].name, optarg);
		if (o == 'a')
			a->until_active = (unsigned)v;
		else if (o == 'e')
			a->until_epoch = v;
		else if (o == 't')
			a->timeout_s = (unsigned)v;
		else if (v < 1 || v > RS_ADMIN_MAX_R)
			return bad("replicas", optarg);
		else
			a->replicas = (unsigned)v;
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	return 0;
}

static unsigned count_active(const struct rs_admin_config *c)
{
	unsigned n = 0;

	for (size_t i = 0; i < c->n; i++)
		n += serves(c->m[i].state);
	return n;
}

/* With a condition, an etcd call that failed (etcd slow or restarting:
 * an authentication under load can take longer than a call's 5 s) is
 * tried again every 500 ms until the deadline; true when it is. */
static bool retry_read(const struct cluster_args *a, uint64_t deadline,
		       int ret)
{
	static uint64_t said;

	if ((!a->until_active && !a->until_epoch) ||
	    mono_ms() + 500 >= deadline)
		return false;
	if (!said || mono_ms() - said >= 10000) {
		fprintf(stderr, "recstore-ctl: %s (%s); trying again\n",
			rs_errormsg(), rs_strerror(ret));
		said = mono_ms();
	}
	usleep(500000);
	return true;
}

/* Read the configuration; with a condition, watch until it holds. */
static int read_until(struct rs_admin *adm, const struct cluster_args *a,
		      struct rs_admin_config **cfg)
{
	uint64_t deadline = mono_ms() + (uint64_t)a->timeout_s * 1000;
	int64_t rev;
	int ret;

	for (;;) {
		uint64_t now;

		if ((ret = rs_admin_read_config(adm, cfg))) {
			if (retry_read(a, deadline, ret))
				continue;
			return ret;
		}
		if (count_active(*cfg) >= a->until_active &&
		    (*cfg)->epoch >= a->until_epoch)
			return 0;
		now = mono_ms();
		if (now >= deadline) {
			ret = ctl_errf(RS_E_TIMEOUT, "after %u s: epoch %llu, "
				       "%u active (waited for epoch >= %llu, "
				       "%u active)", a->timeout_s,
				       (unsigned long long)(*cfg)->epoch,
				       count_active(*cfg),
				       (unsigned long long)a->until_epoch,
				       a->until_active);
			rs_admin_config_free(cfg);
			return ret;
		}
		rev = (*cfg)->rev;
		rs_admin_config_free(cfg);
		ret = rs_admin_wait(adm, rev, (int)(deadline - now));
		if (ret < 0 && !retry_read(a, deadline, ret))
			return ret;
	}
}

static void print_placement(const struct rs_admin_config *cfg, bool ranges)
{
	struct rs_admin_placement *p;
	double *prim, *repl;
	unsigned out[RS_ADMIN_MAX_R];
	size_t n;

	if (rs_admin_placement_new(&p, cfg)) {
		printf("replica sets: %s\n", rs_errormsg());
		return;
	}
	n = rs_admin_placement_ranges(p);
	printf("replica sets: %zu ranges on the ring of %u active members, "
	       "up to %u replicas each\n", n, count_active(cfg), cfg->r);
	prim = calloc(cfg->n + 1, sizeof(*prim));
	repl = calloc(cfg->n + 1, sizeof(*repl));
	for (size_t i = 0; prim && repl && i < n; i++) {
		uint64_t start, end;
		unsigned k = rs_admin_placement_range(p, i, &start, &end, out);
		double share = (double)(end - start) / 18446744073709551616.0;

		if (i == 0 && end <= start) /* the range that wraps */
			share = (double)(end + (UINT64_MAX - start) + 1) /
				18446744073709551616.0;
		if (k)
			prim[out[0]] += share;
		for (unsigned j = 0; j < k; j++)
			repl[out[j]] += share;
		if (ranges) {
			printf("  (%016" PRIx64 ", %016" PRIx64 "]:", start,
			       end);
			for (unsigned j = 0; j < k; j++)
				printf(" %s", cfg->m[out[j]].id);
			printf("\n");
		}
	}
	for (size_t i = 0; prim && repl && i < cfg->n; i++)
		if (serves(cfg->m[i].state))
			printf("  %-20s primary of %5.1f%% of the ring, "
			       "replica of %5.1f%%\n", cfg->m[i].id, 100 * prim[i],
			       100 * repl[i]);
	free(prim);
	free(repl);
	rs_admin_placement_free(&p);
}

/* What a member's registration says, for its line of print_cluster. */
static const char *reg_status(const struct rs_admin_config *cfg,
			      const struct rs_admin_member *m,
			      const struct rs_admin_regs *regs)
{
	const char *reg = "not registered";

	for (size_t j = 0; j < regs->n; j++) {
		const struct rs_admin_reg *r = &regs->reg[j];

		if (strcmp(r->id, m->id))
			continue;
		reg = r->inc != m->inc ? "registered (restarted)"
		      : r->drain ? "registered, drain requested"
		      : m->state != RS_ADMIN_JOINING ? "registered"
		      /* "Copying ranges", docs/replication.md */
		      : r->synced == cfg->epoch
			      ? "registered, ranges copied: active next"
			      : "registered, copying its ranges";
	}
	return reg;
}

static int print_cluster(struct rs_admin *adm, const char *cluster,
			 const struct rs_admin_config *cfg, bool ranges)
{
	struct rs_admin_regs *regs;
	char *decider;
	int ret;

	if ((ret = rs_admin_read_regs(adm, &regs)))
		return ret;
	if ((ret = rs_admin_read_decider(adm, &decider))) {
		rs_admin_regs_free(&regs);
		return ret;
	}
	if (cfg->epoch)
		printf("cluster %s: epoch %" PRIu64 ", r %u, vnodes %u, "
		       "config revision %" PRId64 "\n", cluster, cfg->epoch,
		       cfg->r, cfg->vnodes, cfg->mod_rev);
	else
		printf("cluster %s: no configuration yet\n", cluster);
	printf("decider: %s\n", decider ? decider : "(none)");
	printf("members: %zu\n", cfg->n);
	for (size_t i = 0; i < cfg->n; i++) {
		const struct rs_admin_member *m = &cfg->m[i];

		printf("  %-20s %-22s %-8s since epoch %-6" PRIu64 " %s\n",
		       m->id, m->addr, rs_admin_state_name(m->state), m->since,
		       reg_status(cfg, m, regs));
	}
	for (size_t j = 0; j < regs->n; j++) {
		bool known = false;

		for (size_t i = 0; i < cfg->n; i++)
			known |= !strcmp(regs->reg[j].id, cfg->m[i].id);
		if (!known)
			printf("  %-20s %-22s registered, not in the "
			       "configuration yet\n", regs->reg[j].id,
			       regs->reg[j].addr);
	}
	if (regs->unreadable)
		printf("unreadable registrations: %zu\n", regs->unreadable);
	for (size_t j = 0; j < regs->n; j++)
		if (regs->reg[j].seen)
			printf("WARNING: %s follows epoch %" PRIu64 ", newer "
			       "than this configuration: etcd was restored "
			       "from an older snapshot, failover is stopped; "
			       "run 'recstore-ctl ... recover'\n",
			       regs->reg[j].id, regs->reg[j].seen);
	print_placement(cfg, ranges);
	free(decider);
	rs_admin_regs_free(&regs);
	return 0;
}

static int cmd_cluster(const char *etcd, const char *cluster, int argc,
		       char **argv)
{
	struct rs_admin_config *cfg;
	struct cluster_args a;
	struct rs_admin *adm;
	uint64_t epoch;
	int ret;

	if ((ret = parse_cluster_args(argc, argv, &a)))
		return ret;
	if ((ret = rs_admin_check_id("--cluster", cluster)) ||
	    (ret = etcd_open(&adm, etcd, cluster))) {
		fprintf(stderr, "recstore-ctl: %s\n", rs_errormsg());
		return 1;
	}
	if (a.decide) {
		ret = rs_admin_decide(adm, a.replicas, &epoch);
		if (ret == 1)
			printf("decided: configuration epoch %" PRIu64
			       " written\n", epoch);
		else if (ret == RS_ADMIN_DECIDE_REGRESSED)
			printf("decided: nothing: a node follows epoch %"
			       PRIu64 ", newer than etcd's (recover)\n",
			       epoch);
		else if (ret == 0)
			printf("decided: no change\n");
	}
	if (ret >= 0)
		ret = read_until(adm, &a, &cfg);
	if (!ret) {
		ret = print_cluster(adm, cluster, cfg, a.ranges);
		rs_admin_config_free(&cfg);
	}
	if (ret < 0)
		fprintf(stderr, "recstore-ctl: cluster %s: %s\n", cluster,
			err_msg());
	rs_admin_close(&adm);
	return ret < 0 ? 1 : 0;
}

/* The state of member id in cfg, or -1. */
static int member_state(const struct rs_admin_config *cfg, const char *id)
{
	for (size_t i = 0; i < cfg->n; i++)
		if (!strcmp(cfg->m[i].id, id))
			return (int)cfg->m[i].state;
	return -1;
}

/* An etcd that is unreachable or slow to answer (a loaded member, an
 * election): drain tries again until its deadline. Its requests are safe
 * to redo: a request that took effect is found asked (or withdrawn). */
static bool store_transient(int ret)
{
	return ret == RS_E_TIMEOUT || ret == -ECONNREFUSED;
}

/* Sleep before the next try; false when the deadline has passed. Says
 * so on stderr once per command. */
static bool store_retry(uint64_t deadline, bool *said)
{
	if (mono_ms() + 250 >= deadline)
		return false;
	if (!*said)
		fprintf(stderr, "recstore-ctl: etcd: %s; trying again\n",
			rs_errormsg());
	*said = true;
	usleep(250000);
	return true;
}

struct drain_args {
	const char *id;
	bool cancel, force, wait;
	unsigned long timeout_s;
};

/* drain's command line; 0 or an exit status. */
static int parse_drain_args(int argc, char **argv, struct drain_args *d)
{
	static const struct option opts[] = {
		{ "cancel", no_argument, NULL, 'c' },
		{ "force", no_argument, NULL, 'f' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	int o;

	*d = (struct drain_args){ .wait = true, .timeout_s = 600 };
	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'c')
			d->cancel = true;
		else if (o == 'f')
			d->force = true;
		else if (o == 'n')
			d->wait = false;
		else if (o == 't') {
			if (parse_timeout(optarg, &d->timeout_s))
				return bad("timeout", optarg);
		} else
			return 2;
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	d->id = argv[optind];
	return 0;
}

/* After the request: until id is DOWN (or, cancelled, no longer
 * LEAVING), or at once with --no-wait; prints where it stands. */
static int drain_wait(struct rs_admin *adm, const struct drain_args *d,
		      uint64_t t0, uint64_t deadline, bool *said)
{
	struct rs_admin_config *cfg;
	int64_t rev;
	int ret, st;

	for (;;) {
		ret = rs_admin_read_config(adm, &cfg);
		if (store_transient(ret) && store_retry(deadline, said))
			continue;
		if (ret)
			return ret;
		st = member_state(cfg, d->id);
		if (!d->wait || (d->cancel ? st != RS_ADMIN_LEAVING
					   : st == RS_ADMIN_DOWN)) {
			printf("%s: %s in epoch %" PRIu64 " (%.1f s)\n", d->id,
			       st < 0 ? "not a member"
				      : rs_admin_state_name((uint32_t)st),
			       cfg->epoch, (double)(mono_ms() - t0) / 1e3);
			rs_admin_config_free(&cfg);
			return 0;
		}
		rev = cfg->rev;
		rs_admin_config_free(&cfg);
		if (mono_ms() >= deadline)
			return ctl_errf(RS_E_TIMEOUT, "after %lu s '%s' is "
					"still %s", d->timeout_s, d->id,
					rs_admin_state_name((uint32_t)st));
		ret = rs_admin_wait(adm, rev, (int)(deadline - mono_ms()));
		if (ret < 0 && !(store_transient(ret) &&
				 store_retry(deadline, said)))
			return ret;
	}
}

static int cmd_drain(const char *etcd, const char *cluster, int argc,
		     char **argv)
{
	struct drain_args d;
	struct rs_admin *adm;
	uint64_t t0, deadline;
	bool said = false;
	int ret;

	if ((ret = parse_drain_args(argc, argv, &d)))
		return ret;
	if ((ret = rs_admin_check_id("--cluster", cluster)) ||
	    (ret = etcd_open(&adm, etcd, cluster))) {
		fprintf(stderr, "recstore-ctl: %s\n", rs_errormsg());
		return 1;
	}
	t0 = mono_ms();
	deadline = t0 + (uint64_t)d.timeout_s * 1000;
	while (store_transient(ret = rs_admin_drain(
				       adm, d.id,
				       (d.cancel ? RS_ADMIN_DRAIN_CANCEL : 0) |
				       (d.force ? RS_ADMIN_DRAIN_FORCE : 0))) &&
	       store_retry(deadline, &said))
		;
	if (!ret) {
		printf("drain %s: %s\n", d.id, d.cancel ? "request withdrawn"
							: "requested");
		ret = drain_wait(adm, &d, t0, deadline, &said);
	}
	if (ret < 0)
		fprintf(stderr, "recstore-ctl: drain %s: %s\n", d.id,
			err_msg());
	rs_admin_close(&adm);
	return ret < 0 ? 1 : 0;
}

/* Registrations that still say their node follows no configuration
 * (seen: it saw the store go back and has not followed a recovery). */
static size_t regs_waiting(struct rs_admin *adm, int *ret)
{
	struct rs_admin_regs *regs;
	size_t waiting = 0;

	if ((*ret = rs_admin_read_regs(adm, &regs)))
		return 0;
	for (size_t i = 0; i < regs->n; i++)
		waiting += regs->reg[i].seen != 0;
	rs_admin_regs_free(&regs);
	return waiting;
}

/* After a recovery was written: until every registered node follows it
 * (its registration drops seen). */
static int recover_wait(struct rs_admin *adm, unsigned long timeout_s,
			uint64_t t0, uint64_t deadline, bool *said)
{
	size_t waiting;
	int ret;

	while ((waiting = regs_waiting(adm, &ret)) || store_transient(ret)) {
		if (mono_ms() >= deadline)
			return ctl_errf(RS_E_TIMEOUT, "after %lu s %zu node(s) "
					"still wait for a recovery", timeout_s,
					waiting);
		if (store_transient(ret))
			store_retry(deadline, said);
		else
			usleep(100000);
	}
	if (!ret)
		printf("recover: every registered node follows it (%.1f s)\n",
		       (double)(mono_ms() - t0) / 1e3);
	return ret;
}

/* recover: after etcd was restored from an older snapshot
 * (docs/replication.md, "A store restored from a snapshot"). */
static int cmd_recover(const char *etcd, const char *cluster, int argc,
		       char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long timeout_s = 30;
	struct rs_admin_config *cfg;
	uint64_t t0, deadline;
	struct rs_admin *adm;
	bool said = false;
	int o, ret;

	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o != 't')
			return 2;
		if (parse_timeout(optarg, &timeout_s))
			return bad("timeout", optarg);
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if ((ret = rs_admin_check_id("--cluster", cluster)) ||
	    (ret = etcd_open(&adm, etcd, cluster))) {
		fprintf(stderr, "recstore-ctl: %s\n", rs_errormsg());
		return 1;
	}
	t0 = mono_ms();
	deadline = t0 + (uint64_t)timeout_s * 1000;
	/* a node publishes what it follows within a round of its agent:
	 * BUSY until then; a decider or another recover racing: STALE */
	while (((ret = rs_admin_recover(adm, &cfg)) == RS_E_BUSY ||
		ret == RS_E_STALE || store_transient(ret)) &&
	       store_retry(deadline, &said))
		;
	if (ret == 0) {
		printf("recover: nothing to recover: no node follows a newer "
		       "configuration than epoch %" PRIu64 "\n", cfg->epoch);
		rs_admin_config_free(&cfg);
	} else if (ret == 1) {
		printf("recover: configuration epoch %" PRIu64 " written: the "
		       "newest a live node followed (epoch %" PRIu64 ", %zu "
		       "members)\n", cfg->epoch, cfg->recovered, cfg->n);
		rs_admin_config_free(&cfg);
		ret = recover_wait(adm, timeout_s, t0, deadline, &said);
	}
	if (ret < 0)
		fprintf(stderr, "recstore-ctl: recover: %s\n", err_msg());
	rs_admin_close(&adm);
	return ret < 0 ? 1 : 0;
}

/* ---- checkpoint / restore ---- */

static void show_progress(void *arg, const struct rs_ckpt_progress *p)
{
	double s = (double)p->elapsed_us / 1e6;

	(void)arg;
	if (p->total_rows && p->rows && p->rows < p->total_rows)
		fprintf(stderr, "recstore-ctl: %s: %llu of %llu rows, %.1f "
			"MB, %.0f rows/s, about %.0f s left\n", p->phase,
			(unsigned long long)p->rows,
			(unsigned long long)p->total_rows,
			(double)p->bytes / 1e6, (double)p->rows / (s ? s : 1),
			(double)(p->total_rows - p->rows) /
				((double)p->rows / (s ? s : 1)));
	else
		fprintf(stderr, "recstore-ctl: %s: %llu rows, %.1f MB after "
			"%.1f s\n", p->phase, (unsigned long long)p->rows,
			(double)p->bytes / 1e6, s);
}

static int cmd_ckpt(struct rs_client *c, int argc, char **argv)
{
	const char *tables[64];
	struct rs_ckpt_opts o = RS_CKPT_OPTS_INIT;
	struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;
	bool restore = !strcmp(argv[0], "restore");
	int ret;

	if (argc < 2)
		return usage(stderr), 2;
	o.tables = tables;
	o.progress = show_progress;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--table") && i + 1 < argc &&
		    o.ntables < ARRAY_SIZE(tables))
			tables[o.ntables++] = argv[++i];
		else if (!restore && !strcmp(argv[i], "--export"))
			o.flags |= RS_CKPT_EXPORT;
		else if (!restore && !strcmp(argv[i], "--incremental") &&
			 i + 1 < argc)
			o.base = argv[++i];
		else if (!restore && !strcmp(argv[i], "--freeze-ms") &&
			 i + 1 < argc)
			o.freeze_ms = (uint32_t)strtoul(argv[++i], NULL, 10);
		else
			return usage(stderr), 2;
	}
	ret = restore ? rs_restore(c, argv[1], &o, &rep)
		      : rs_checkpoint(c, argv[1], &o, &rep);
	if (ret)
		return fail(argv[0], ret);
	if (restore)
		printf("restored checkpoint %s: %u tables, %u parts, %llu "
		       "rows in %.2f s\n", rep.id, rep.tables, rep.parts,
		       (unsigned long long)rep.rows,
		       (double)rep.elapsed_us / 1e6);
	else
		printf("%scheckpoint %s: %u tables, %u parts, %llu rows, "
		       "%llu deletions, %llu bytes (%llu uncompressed) in "
		       "%.2f s; writes paused %.3f s\n",
		       o.base ? "incremental " : "", rep.id, rep.tables,
		       rep.parts, (unsigned long long)rep.rows,
		       (unsigned long long)rep.deleted,
		       (unsigned long long)rep.bytes,
		       (unsigned long long)rep.raw_bytes,
		       (double)rep.elapsed_us / 1e6,
		       (double)rep.paused_us / 1e6);
	return 0;
}

/* verify DIR: exit 0 with the totals, 1 with the first problem (which
 * names the file). */
static int cmd_verify(int argc, char **argv)
{
	struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;

	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if (rs_ckpt_verify(argv[1], &rep)) {
		fprintf(stderr, "recstore-ctl: verify: %s\n", rs_errormsg());
		return 1;
	}
	printf("checkpoint %s%s: %u tables, %llu parts, %llu rows, %llu "
	       "deletions, %llu bytes (%llu uncompressed): intact\n", rep.id,
	       rep.incremental ? " (an increment; with its bases)" : "",
	       rep.tables, (unsigned long long)rep.parts,
	       (unsigned long long)rep.rows, (unsigned long long)rep.deleted,
	       (unsigned long long)rep.bytes,
	       (unsigned long long)rep.raw_bytes);
	return 0;
}

int main(int argc, char **argv)
{
	const char *nodes = NULL, *cmd, *etcd = NULL, *cluster = NULL;
	struct creds cr = { NULL, NULL };
	struct rs_client *c = NULL;
	int i = 1, ret;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-s") && i + 1 < argc) {
			nodes = argv[++i];
		} else if (!strncmp(argv[i], "--server=", 9)) {
			nodes = argv[i] + 9;
		} else if (!strcmp(argv[i], "--key-id") && i + 1 < argc) {
			cr.key_id = argv[++i];
		} else if (!strncmp(argv[i], "--key-id=", 9)) {
			cr.key_id = argv[i] + 9;
		} else if (!strcmp(argv[i], "--secret-file") && i + 1 < argc) {
			cr.file = argv[++i];
		} else if (!strncmp(argv[i], "--secret-file=", 14)) {
			cr.file = argv[i] + 14;
		} else if (!strcmp(argv[i], "--etcd") && i + 1 < argc) {
			etcd = argv[++i];
		} else if (!strcmp(argv[i], "--cluster") && i + 1 < argc) {
			cluster = argv[++i];
		} else if (!strcmp(argv[i], "--etcd-ca") && i + 1 < argc) {
			etcd_sec.ca_file = argv[++i];
		} else if (!strcmp(argv[i], "--etcd-cert") && i + 1 < argc) {
			etcd_sec.cert_file = argv[++i];
		} else if (!strcmp(argv[i], "--etcd-key") && i + 1 < argc) {
			etcd_sec.key_file = argv[++i];
		} else if (!strcmp(argv[i], "--etcd-user") && i + 1 < argc) {
			etcd_sec.user = argv[++i];
		} else if (!strcmp(argv[i], "--etcd-password-file") &&
			   i + 1 < argc) {
			etcd_sec.password_file = argv[++i];
		} else if (!strcmp(argv[i], "-h") ||
			   !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (i < argc && !strcmp(argv[i], "verify"))
		return cmd_verify(argc - i, argv + i);
	if (i < argc && !strcmp(argv[i], "cluster")) {
		if (!etcd || !cluster) {
			usage(stderr);
			return 2;
		}
		return cmd_cluster(etcd, cluster, argc - i, argv + i);
	}
	if (i < argc && !strcmp(argv[i], "drain")) {
		if (!etcd || !cluster) {
			usage(stderr);
			return 2;
		}
		return cmd_drain(etcd, cluster, argc - i, argv + i);
	}
	if (i < argc && !strcmp(argv[i], "recover")) {
		if (!etcd || !cluster) {
			usage(stderr);
			return 2;
		}
		return cmd_recover(etcd, cluster, argc - i, argv + i);
	}
	if (!nodes || i >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[i];
	if (strcmp(cmd, "create") && strcmp(cmd, "list") &&
	    strcmp(cmd, "drop") && strcmp(cmd, "stats") &&
	    strcmp(cmd, "grow") &&
	    strcmp(cmd, "checkpoint") && strcmp(cmd, "restore")) {
		fprintf(stderr, "recstore-ctl: unknown command '%s'\n", cmd);
		usage(stderr);
		return 2;
	}
	ret = connect_nodes(nodes, &cr, &c);
	if (ret)
		return fail(nodes, ret);
	if (!strcmp(cmd, "create"))
		ret = cmd_create(c, argc - i, argv + i);
	else if (!strcmp(cmd, "list"))
		ret = argc - i == 1 ? cmd_list(c) : (usage(stderr), 2);
	else if (!strcmp(cmd, "drop"))
		ret = cmd_drop(c, argc - i, argv + i);
	else if (!strcmp(cmd, "grow"))
		ret = cmd_grow(c, argc - i, argv + i);
	else if (!strcmp(cmd, "checkpoint") || !strcmp(cmd, "restore"))
		ret = cmd_ckpt(c, argc - i, argv + i);
	else
		ret = argc - i == 1 ? cmd_stats(c) : (usage(stderr), 2);
	rs_client_close(&c);
	return ret;
}
