/*
 * async.c - asynchronous gets and updates (rs_*_async, rs_op_test/wait).
 *
 * Design: a small pool of client-owned worker threads (cfg async_threads,
 * default 1) takes ops from a FIFO queue and runs the synchronous engine
 * on them. The caller's thread returns at once and overlaps its compute
 * (e.g. a trainer's forward/backward pass) with the batch's READ rounds;
 * the worker sleeps on the NIC's completion channel (rv's adaptive wait)
 * while the READs fly, so it costs no CPU while waiting. One worker is
 * enough for one trainer thread's prefetch pipeline; more workers let
 * several ops of one or more trainers proceed at once (each borrows its
 * own connection contexts).
 *
 * With async_threads = 0 the async calls run the op before returning (a
 * finished op), which keeps the API usable where threads are unwanted.
 *
 * Concurrency: q_lock guards the queue and every op's `done`; op->cond is
 * signaled when it finishes. An op belongs to the caller from creation to
 * rs_op_wait(), which frees it. rs_client_close() drains the queue: ops
 * still queued are run, so their waiters are never stranded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/rs_internal.h"

enum op_kind { OP_GET, OP_GET_MULTI, OP_UPDATE };

struct rs_op {
	enum op_kind kind;
	struct rs_client *c;
	struct rs_table *t;
	const uint64_t *keys;
	const struct rs_key_ref *refs;
	size_t n;
	float *out;
	const float *in;
	int *status;
	unsigned flags;
	struct rs_update_opts uopts; /* OP_UPDATE with has_uopts */
	bool has_uopts;
	int result;
	bool done;
	pthread_cond_t cond;
	struct rs_op *next;
};

struct cli_async {
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct rs_op *head, *tail;
	bool stop;
	unsigned nthreads;
	pthread_t *threads;
};

static int op_run(struct rs_op *op)
{
	switch (op->kind) {
	case OP_GET:
		return rs_get(op->t, op->keys, op->n, op->out, op->status,
			      op->flags);
	case OP_GET_MULTI:
		return rs_get_multi(op->c, op->refs, op->n, op->status,
				    op->flags);
	case OP_UPDATE:
		return rs_update_ex(op->t, op->keys, op->n, op->in,
				    op->status, op->flags,
				    op->has_uopts ? &op->uopts : NULL);
	}
	return RS_E_INVAL;
}

static void *worker(void *arg)
{
	struct cli_async *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct rs_op *op;
		int ret;

		while (!a->head && !a->stop)
			pthread_cond_wait(&a->work, &a->lock);
		op = a->head;
		if (!op)
			break; /* stopping and drained */
		a->head = op->next;
		if (!a->head)
			a->tail = NULL;
		pthread_mutex_unlock(&a->lock);
		ret = op_run(op);
		pthread_mutex_lock(&a->lock);
		op->result = ret;
		op->done = true;
		pthread_cond_broadcast(&op->cond);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int cli_async_start(struct rs_client *c, unsigned threads)
{
	struct cli_async *a = calloc(1, sizeof(*a));

	if (!a)
		return rs_seterr(-ENOMEM, "async: out of memory");
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->work, NULL);
	c->async = a;
	if (!threads)
		return 0;
	a->threads = calloc(threads, sizeof(*a->threads));
	if (!a->threads)
		return rs_seterr(-ENOMEM, "async: out of memory");
	for (; a->nthreads < threads; a->nthreads++) {
		int ret = pthread_create(&a->threads[a->nthreads], NULL,
					 worker, a);

		if (ret)
			return rs_seterr(-ret, "async: thread: %s",
					 rs_strerror(-ret));
	}
	return 0;
}

void cli_async_stop(struct rs_client *c)
{
	struct cli_async *a = c->async;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stop = true;
	pthread_cond_broadcast(&a->work);
	pthread_mutex_unlock(&a->lock);
	for (unsigned i = 0; i < a->nthreads; i++)
		pthread_join(a->threads[i], NULL);
	/* No workers (0 threads or creation failed): run what is queued. */
	while (a->head) {
		struct rs_op *op = a->head;

		a->head = op->next;
		op->result = op_run(op);
		pthread_mutex_lock(&a->lock);
		op->done = true;
		pthread_cond_broadcast(&op->cond);
		pthread_mutex_unlock(&a->lock);
	}
	free(a->threads);
	pthread_cond_destroy(&a->work);
	pthread_mutex_destroy(&a->lock);
	free(a);
	c->async = NULL;
}

static int submit(struct rs_client *c, struct rs_op *op, struct rs_op **out)
{
	struct cli_async *a = c->async;

	op->c = c;
	pthread_cond_init(&op->cond, NULL);
	if (!a->nthreads) {
		op->result = op_run(op);
		op->done = true;
	} else {
		pthread_mutex_lock(&a->lock);
		if (a->tail)
			a->tail->next = op;
		else
			a->head = op;
		a->tail = op;
		pthread_cond_signal(&a->work);
		pthread_mutex_unlock(&a->lock);
	}
	*out = op;
	return 0;
}

static struct rs_op *op_new(enum op_kind kind, struct rs_op **out)
{
	struct rs_op *op;

	if (!out) {
		rs_seterr(RS_E_INVAL, "async: op pointer is NULL");
		return NULL;
	}
	*out = NULL;
	op = calloc(1, sizeof(*op));
	if (!op)
		rs_seterr(-ENOMEM, "async: out of memory");
	else
		op->kind = kind;
	return op;
}

RS_EXPORT int rs_get_async(struct rs_table *t, const uint64_t *keys,
			   size_t n, float *out, int *status, unsigned flags,
			   struct rs_op **opp)
{
	struct rs_op *op;

	if (!t)
		return rs_seterr(RS_E_INVAL, "table handle is NULL");
	op = op_new(OP_GET, opp);
	if (!op)
		return opp ? -ENOMEM : RS_E_INVAL;
	op->t = t;
	op->keys = keys;
	op->n = n;
	op->out = out;
	op->status = status;
	op->flags = flags;
	return submit(t->c, op, opp);
}

RS_EXPORT int rs_get_multi_async(struct rs_client *c,
				 const struct rs_key_ref *refs, size_t n,
				 int *status, unsigned flags,
				 struct rs_op **opp)
{
	struct rs_op *op;

	if (!c)
		return rs_seterr(RS_E_INVAL, "client is NULL");
	op = op_new(OP_GET_MULTI, opp);
	if (!op)
		return opp ? -ENOMEM : RS_E_INVAL;
	op->refs = refs;
	op->n = n;
	op->status = status;
	op->flags = flags;
	return submit(c, op, opp);
}

RS_EXPORT int rs_update_ex_async(struct rs_table *t, const uint64_t *keys,
				 size_t n, const float *grads, int *status,
				 unsigned flags,
				 const struct rs_update_opts *opts,
				 struct rs_op **opp)
{
	struct rs_update_opts uo;
	struct rs_op *op;
	int ret;

	if (!t)
		return rs_seterr(RS_E_INVAL, "table handle is NULL");
	if (opts && (ret = cli_update_opts(opts, &uo)))
		return ret;
	op = op_new(OP_UPDATE, opp);
	if (!op)
		return opp ? -ENOMEM : RS_E_INVAL;
	if (opts) {
		op->uopts = uo;
		op->has_uopts = true;
	}
	op->t = t;
	op->keys = keys;
	op->n = n;
	op->in = grads;
	op->status = status;
	op->flags = flags;
	return submit(t->c, op, opp);
}

RS_EXPORT int rs_update_async(struct rs_table *t, const uint64_t *keys,
			      size_t n, const float *grads, int *status,
			      unsigned flags, struct rs_op **opp)
{
	return rs_update_ex_async(t, keys, n, grads, status, flags, NULL, opp);
}

RS_EXPORT int rs_op_test(struct rs_op *op)
{
	struct cli_async *a;
	bool done;

	if (!op)
		return rs_seterr(RS_E_INVAL, "op is NULL");
	a = op->c->async;
	pthread_mutex_lock(&a->lock);
	done = op->done;
	pthread_mutex_unlock(&a->lock);
	return done ? 1 : 0;
}

RS_EXPORT int rs_op_wait(struct rs_op **opp)
{
	struct rs_op *op;
	struct cli_async *a;
	int ret;

	if (!opp || !*opp)
		return rs_seterr(RS_E_INVAL, "op is NULL");
	op = *opp;
	a = op->c->async;
	pthread_mutex_lock(&a->lock);
	while (!op->done)
		pthread_cond_wait(&op->cond, &a->lock);
	pthread_mutex_unlock(&a->lock);
	ret = op->result;
	pthread_cond_destroy(&op->cond);
	free(op);
	*opp = NULL;
	return ret;
}
