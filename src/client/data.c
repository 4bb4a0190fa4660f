/*
 * data.c - the public data calls: argument checks, then the one-sided
 * engine (get.c) or the keyed RPC engine (rpc.c).
 *
 * Every call works on a per-call array of struct cli_key (table, key,
 * output row) so that single-table and multi-table batches take the same
 * path. A NULL status array is replaced by a temporary one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/abi.h"
#include "common/rs_internal.h"
#include "trace/trace.h"

#define CLI_MAX_CALL_KEYS (1u << 26)
#define SMALL 16 /* batches this small use the stack */

static int check(const struct rs_table *t, const uint64_t *keys, size_t n,
		 const void *rows)
{
	if (!t)
		return rs_seterr(RS_E_INVAL, "table handle is NULL");
	if (n && (!keys || !rows))
		return rs_seterr(RS_E_INVAL, "table '%s': NULL keys or rows",
				 t->name);
	if (n > CLI_MAX_CALL_KEYS)
		return rs_seterr(RS_E_TOOBIG, "%zu keys in one call", n);
	return 0;
}

static int count_ok(const int *status, size_t n)
{
	int ok = 0;

	for (size_t i = 0; i < n; i++)
		ok += status[i] == RS_KEY_FOUND || status[i] == RS_KEY_CREATED;
	return ok;
}

/* Keys of one table as cli_keys; out may be NULL (no rows back). */
static struct cli_key *make_keys(struct rs_table *t, const uint64_t *keys,
				 size_t n, float *out)
{
	struct cli_key *k = malloc((n ? n : 1) * sizeof(*k));

	if (!k)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		k[i].t = t;
		k[i].key = keys[i];
		k[i].out = out ? out + i * (size_t)t->dim : NULL;
	}
	return k;
}

RS_EXPORT int rs_get_multi(struct rs_client *c, const struct rs_key_ref *refs,
			   size_t n, int *status, unsigned flags)
{
	struct cli_key *k;
	int *st = status, ret;

	if (!c || (n && !refs))
		return rs_seterr(RS_E_INVAL, "get: NULL argument");
	if (n > CLI_MAX_CALL_KEYS)
		return rs_seterr(RS_E_TOOBIG, "%zu keys in one call", n);
	if (flags & ~(RS_F_RPC | RS_F_NOCACHE | RS_F_INIT))
		return rs_seterr(RS_E_INVAL, "get: unknown flags %#x", flags);
	if (!n)
		return 0;
	k = malloc(n * sizeof(*k));
	if (!st)
		st = malloc(n * sizeof(*st));
	if (!k || !st) {
		ret = rs_seterr(-ENOMEM, "get: out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!refs[i].table || !refs[i].out ||
		    refs[i].table->c != c) {
			ret = rs_seterr(RS_E_INVAL, "get: key %zu has no table "
					"of this client or no output", i);
			goto out;
		}
		k[i].t = refs[i].table;
		k[i].key = refs[i].key;
		k[i].out = refs[i].out;
	}
	ret = cli_get(c, k, n, st, flags);
out:
	if (st != status)
		free(st);
	free(k);
	return ret;
}

RS_EXPORT int rs_get(struct rs_table *t, const uint64_t *keys, size_t n,
		     float *out, int *status, unsigned flags)
{
	struct cli_key *k;
	int *st = status, ret;

	ret = check(t, keys, n, out);
	if (ret)
		return ret;
	if (flags & ~(RS_F_RPC | RS_F_NOCACHE | RS_F_INIT))
		return rs_seterr(RS_E_INVAL, "get: unknown flags %#x", flags);
	if (!n)
		return 0;
	if (n <= SMALL && status) {
		/* the latency path: no allocation here */
		struct cli_key small[SMALL];

		for (size_t i = 0; i < n; i++) {
			small[i].t = t;
			small[i].key = keys[i];
			small[i].out = out + i * (size_t)t->dim;
		}
		return cli_get(t->c, small, n, status, flags);
	}
	k = make_keys(t, keys, n, out);
	if (!st)
		st = malloc(n * sizeof(*st));
	if (!k || !st)
		ret = rs_seterr(-ENOMEM, "get: out of memory");
	else
		ret = cli_get(t->c, k, n, st, flags);
	if (st != status)
		free(st);
	free(k);
	return ret;
}

/* Send keys k[n] (inp: their rows in, or NULL) as op, traced as ev: the
 * count of keys that succeeded, or an error for the call. status NULL:
 * per-key statuses are not wanted. */
static int keyed_send(struct rs_client *c, uint32_t op,
		      const struct cli_key *k, const float **inp, size_t n,
		      int *status, const struct cli_keyed_opts *ko,
		      struct trace_event *ev, bool sampled)
{
	int *st = status ? status : malloc(n * sizeof(*st));
	int ret;

	if (!st)
		return rs_seterr(-ENOMEM, "%s: out of memory",
				 proto_op_name(op));
	ret = cli_rpc(c, op, k, inp, NULL, n, st, ev->trace_id, sampled, ko);
	if (!ret)
		ret = count_ok(st, n);
	if (sampled)
		trace_end(ev);
	if (st != status)
		free(st);
	return ret;
}

/* A keyed RPC on one table. */
static int keyed(struct rs_table *t, uint32_t op, const uint64_t *keys,
		 size_t n, const float *in, float *out, int *status,
		 const struct cli_keyed_opts *ko)
{
	uint64_t id = trace_new_id();
	bool sampled = trace_sampled(id);
	struct trace_event ev = { .trace_id = id, .stage = "client.op",
				  .table = t->name, .batch = (uint32_t)n,
				  .start_us = trace_start_us(sampled) };
	const float **inp = NULL;
	struct cli_key *k;
	int ret;

	if (!n)
		return 0;
	k = make_keys(t, keys, n, out);
	if (in) {
		inp = malloc(n * sizeof(*inp));
		for (size_t i = 0; inp && i < n; i++)
			inp[i] = in + i * (size_t)t->dim;
	}
	if (!k || (in && !inp))
		ret = rs_seterr(-ENOMEM, "%s: out of memory",
				proto_op_name(op));
	else
		ret = keyed_send(t->c, op, k, inp, n, status, ko, &ev,
				 sampled);
	free(k);
	free(inp);
	return ret;
}

RS_EXPORT int rs_get_or_init(struct rs_table *t, const uint64_t *keys,
			     size_t n, float *out, int *status, unsigned flags)
{
	int ret = check(t, keys, n, out);

	return ret ? ret : keyed(t, PROTO_OP_GET_OR_INIT, keys, n, NULL, out,
				 status, NULL);
}

RS_EXPORT int rs_update(struct rs_table *t, const uint64_t *keys, size_t n,
			const float *grads, int *status, unsigned flags)
{
	int ret = check(t, keys, n, grads);

	return ret ? ret : keyed(t, PROTO_OP_UPDATE, keys, n, grads, NULL,
				 status, NULL);
}

static const uint32_t uopts_sizes[] = { 12 };	/* 0.2 */
_Static_assert(sizeof(struct rs_update_opts) == 12, "append to uopts_sizes");
static const struct rs_abi_type uopts_abi = {
	"struct rs_update_opts", uopts_sizes, RS_ARRAY_SIZE(uopts_sizes)
};

int cli_update_opts(const struct rs_update_opts *in,
		    struct rs_update_opts *full)
{
	int ret = rs_abi_check(&uopts_abi, in);

	if (ret)
		return ret;
	rs_abi_in(full, sizeof(*full), in);
	full->struct_size = sizeof(*full);
	if (full->flags & ~(RS_UPDATE_LR | RS_UPDATE_CREATE))
		return rs_seterr(RS_E_INVAL, "update options: unknown flags "
				 "%#x", full->flags &
				 ~(RS_UPDATE_LR | RS_UPDATE_CREATE));
	if ((full->flags & RS_UPDATE_LR) && !proto_lr_ok(full->lr))
		return rs_seterr(RS_E_INVAL, "update options: lr %g is not a "
				 "finite number >= 0", (double)full->lr);
	return 0;
}

/* The keyed options of an update (lr, create) from the caller's opts. */
static int update_ko(const struct rs_update_opts *opts,
		     struct cli_keyed_opts *ko)
{
	struct rs_update_opts o;
	int ret;

	memset(ko, 0, sizeof(*ko));
	if (!opts)
		return 0;
	ret = cli_update_opts(opts, &o);
	if (ret)
		return ret;
	if (o.flags & RS_UPDATE_LR) {
		ko->kflags |= PROTO_KF_LR;
		ko->lr = o.lr;
	}
	if (o.flags & RS_UPDATE_CREATE)
		ko->kflags |= PROTO_KF_CREATE;
	return 0;
}

RS_EXPORT int rs_update_ex(struct rs_table *t, const uint64_t *keys,
			   size_t n, const float *grads, int *status,
			   unsigned flags, const struct rs_update_opts *opts)
{
	struct cli_keyed_opts ko;
	int ret = check(t, keys, n, grads);

	if (!ret)
		ret = update_ko(opts, &ko);
	if (ret)
		return ret;
	return keyed(t, PROTO_OP_UPDATE, keys, n, grads, NULL, status, &ko);
}

RS_EXPORT int rs_update_multi(struct rs_client *c,
			      const struct rs_grad_ref *refs, size_t n,
			      int *status, unsigned flags,
			      const struct rs_update_opts *opts)
{
	uint64_t id = trace_new_id();
	bool sampled = trace_sampled(id);
	struct trace_event ev = { .trace_id = id, .stage = "client.op",
				  .table = "(several)", .batch = (uint32_t)n,
				  .start_us = trace_start_us(sampled) };
	struct cli_keyed_opts ko;
	const float **inp = NULL;
	struct cli_key *k = NULL;
	int ret;

	(void)flags;
	if (!c || (n && !refs))
		return rs_seterr(RS_E_INVAL, "update: NULL argument");
	if (n > CLI_MAX_CALL_KEYS)
		return rs_seterr(RS_E_TOOBIG, "%zu keys in one call", n);
	ret = update_ko(opts, &ko);
	if (ret || !n)
		return ret;
	k = malloc(n * sizeof(*k));
	inp = malloc(n * sizeof(*inp));
	if (!k || !inp) {
		ret = rs_seterr(-ENOMEM, "update: out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!refs[i].table || !refs[i].grad ||
		    refs[i].table->c != c) {
			ret = rs_seterr(RS_E_INVAL, "update: key %zu has no "
					"table of this client or no gradient",
					i);
			goto out;
		}
		k[i].t = refs[i].table;
		k[i].key = refs[i].key;
		k[i].out = NULL;
		inp[i] = refs[i].grad;
	}
	ret = keyed_send(c, PROTO_OP_UPDATE, k, inp, n, status, &ko, &ev,
			 sampled);
out:
	free(k);
	free(inp);
	return ret;
}

RS_EXPORT int rs_put(struct rs_table *t, const uint64_t *keys, size_t n,
		     const float *values, int *status, unsigned flags)
{
	int ret = check(t, keys, n, values);

	return ret ? ret : keyed(t, PROTO_OP_PUT, keys, n, values, NULL,
				 status, NULL);
}

RS_EXPORT int rs_delete(struct rs_table *t, const uint64_t *keys, size_t n,
			int *status, unsigned flags)
{
	int ret = check(t, keys, n, keys);

	return ret ? ret : keyed(t, PROTO_OP_DELETE, keys, n, NULL, NULL,
				 status, NULL);
}
