/*
 * recstore._native - the CPython extension over the client library.
 *
 * Two types, Client and Table, thin over include/recstore/client.h; the
 * Python package (recstore/__init__.py, recstore/embedding.py) builds the
 * user-facing API on them. Rules kept here:
 *
 *  - Buffers come in through the buffer protocol (numpy arrays; the Python
 *    layer turns torch CPU tensors into numpy views without copying). They
 *    must be C-contiguous with the exact item format (keys 8-byte integers,
 *    rows and gradients float32); anything else raises TypeError or
 *    ValueError before the library sees it. Outputs are numpy arrays the
 *    extension allocates, or caller arrays it checks the same way.
 *  - The GIL is released around every call that waits for the network, so
 *    other Python threads (a prefetcher, a data loader) run meanwhile. The
 *    Py_buffer views held across the call keep the memory alive.
 *  - A call-level failure raises recstore.Error(code, message) with the
 *    library's code and thread-local message. Per-key outcomes come back as
 *    an int32 status array; the Python layer turns failed keys into an
 *    exception naming them.
 *  - A client belongs to the process that opened it: verbs resources do not
 *    survive fork(), so every call from another process raises, and a
 *    child's garbage collection leaves the parent's resources alone.
 *  - close() refuses while calls run in other threads; a closed client's
 *    tables raise.
 *  - The library's log lines (recstore/log.h) go to the logger "recstore"
 *    of Python's logging, from whichever thread wrote them: the function
 *    takes the GIL (PyGILState_Ensure), which is safe because every call
 *    that waits for a library thread releases it. At interpreter exit
 *    (atexit, before threads and modules are torn down) the library goes
 *    back to stderr.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "recstore/client.h"
#include "recstore/error.h"
#include "recstore/log.h"
/* header only: the spec's field table (a macro) and the kinds it names,
 * the node's default port; the extension links nothing of src/ */
#include "common/defaults.h"
#include "common/spec.h"
#include "common/spec_fields.h"

static PyObject *RsError;

typedef struct {
	PyObject_HEAD
	struct rs_client *c;
	pid_t pid;
	long busy;		/* calls running with the GIL released */
} ClientObject;

typedef struct {
	PyObject_HEAD
	ClientObject *client;	/* strong reference */
	struct rs_table *t;
	uint32_t dim;
	struct rs_table_spec spec; /* with have_spec: as the node reported it */
	int have_spec;
} TableObject;

static PyTypeObject ClientType;
static PyTypeObject TableType;

/* ---- errors ---- */

static PyObject *raise_rs(int code, const char *what)
{
	const char *msg = rs_errormsg();
	PyObject *text, *exc, *num;

	if (!msg || !*msg)
		msg = rs_strerror(code);
	text = PyUnicode_FromFormat("%s: %s [%s, code %d]", what, msg,
				    rs_strerror(code), code);
	if (!text)
		return NULL;
	exc = PyObject_CallOneArg(RsError, text);
	if (exc) {
		num = PyLong_FromLong(code);
		if (num && !PyObject_SetAttrString(exc, "code", num) &&
		    !PyObject_SetAttrString(exc, "message", text))
			PyErr_SetObject(RsError, exc);
		Py_XDECREF(num);
		Py_DECREF(exc);
	}
	Py_DECREF(text);
	return NULL;
}

static int client_usable(ClientObject *self)
{
	if (self->pid != getpid()) {
		PyErr_Format(PyExc_RuntimeError,
			     "this recstore client was opened in process %ld; "
			     "RDMA resources do not survive fork(): open a new "
			     "Client in process %ld",
			     (long)self->pid, (long)getpid());
		return 0;
	}
	if (!self->c) {
		PyErr_SetString(PyExc_RuntimeError,
				"the recstore client is closed");
		return 0;
	}
	return 1;
}

/* ---- buffers ---- */

/* The item format of a buffer without its byte-order prefix ('@', '=',
 * '<' are native on the little-endian machines verbs run on; '>' and '!'
 * are refused). */
static const char *native_format(const Py_buffer *v)
{
	const char *f = v->format ? v->format : "B";

	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	return f;
}

/*
 * Get a read-only (or writable) C-contiguous buffer of 8-byte integer keys
 * (int64 or uint64). One dimension, or more dimensions that are flattened.
 */
static int get_keys(PyObject *o, Py_buffer *v)
{
	const char *f;

	if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)) {
		if (PyErr_ExceptionMatches(PyExc_BufferError)) {
			PyErr_Clear();
			PyErr_SetString(PyExc_ValueError,
					"keys must be a C-contiguous array "
					"(call .contiguous() or "
					"numpy.ascontiguousarray)");
		} else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_TypeError,
				     "keys must be an array of int64 or "
				     "uint64, not %.100s", Py_TYPE(o)->tp_name);
		}
		return -1;
	}
	f = native_format(v);
	if (v->itemsize != 8 || strlen(f) != 1 || !strchr("qQlL", *f)) {
		PyErr_Format(PyExc_TypeError,
			     "keys must be int64 or uint64, not format '%s' "
			     "of %zd bytes", v->format ? v->format : "B",
			     v->itemsize);
		PyBuffer_Release(v);
		return -1;
	}
	if (*f == 'q' || *f == 'l') {
		const int64_t *k = v->buf;

		for (Py_ssize_t i = 0; i < v->len / 8; i++)
			if (k[i] < 0) {
				PyErr_Format(PyExc_ValueError,
					     "key %zd is negative (%lld): keys "
					     "are unsigned 64-bit ids", i,
					     (long long)k[i]);
				PyBuffer_Release(v);
				return -1;
			}
	}
	return 0;
}

/* A C-contiguous float32 buffer of exactly n * dim elements. */
static int get_rows(PyObject *o, Py_buffer *v, const char *what, size_t n,
		    uint32_t dim, int writable)
{
	const char *f;
	int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;

	if (writable)
		flags |= PyBUF_WRITABLE;
	if (PyObject_GetBuffer(o, v, flags)) {
		if (PyErr_ExceptionMatches(PyExc_BufferError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError,
				     "%s must be a %sC-contiguous float32 "
				     "array", what, writable ? "writable " : "");
		}
		return -1;
	}
	f = native_format(v);
	if (v->itemsize != 4 || strcmp(f, "f")) {
		PyErr_Format(PyExc_TypeError, "%s must be float32, not format "
			     "'%s' of %zd bytes", what,
			     v->format ? v->format : "B", v->itemsize);
		PyBuffer_Release(v);
		return -1;
	}
	if ((size_t)v->len != n * dim * sizeof(float)) {
		PyErr_Format(PyExc_ValueError, "%s holds %zd floats; %zu keys "
			     "x dim %u need %zu", what, v->len / 4, n, dim,
			     n * dim);
		PyBuffer_Release(v);
		return -1;
	}
	return 0;
}

static PyObject *new_status(size_t n)
{
	npy_intp d[1] = { (npy_intp)n };

	return PyArray_SimpleNew(1, d, NPY_INT32);
}

/* ---- Client ---- */

static int client_init(ClientObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "nodes", "device", "cache_entries",
				  "conns_per_node", "timeout_ms", "rpc_reads",
				  "spin_us", "key_id", "secret_file",
				  "replica_reads", "bucket_cache_bytes", NULL };
	const char *nodes, *device = NULL, *secret_file = NULL;
	long long cache = -1, bcache = -1;
	int conns = 0, timeout = 0, rpc_reads = 0, spin = -1;
	int replica_reads = 1;
	unsigned int key_id = 0;
	struct rs_client_config *cfg = NULL;
	struct rs_client *c = NULL;
	int ret;

	if (self->c) {
		PyErr_SetString(PyExc_RuntimeError, "Client already open");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$zLiipiIzpL", kwlist,
					 &nodes, &device, &cache, &conns,
					 &timeout, &rpc_reads, &spin, &key_id,
					 &secret_file, &replica_reads,
					 &bcache))
		return -1;
	ret = rs_client_config_new(&cfg);
	if (!ret)
		ret = rs_client_config_set_nodes(cfg, nodes);
	if (!ret && device)
		ret = rs_client_config_set_device(cfg, device);
	if (!ret && cache >= 0)
		ret = rs_client_config_set_cache_entries(cfg, (size_t)cache);
	if (!ret && bcache >= 0)
		ret = rs_client_config_set_bucket_cache_bytes(cfg,
							      (size_t)bcache);
	if (!ret && conns > 0)
		ret = rs_client_config_set_conns_per_node(cfg,
							  (unsigned)conns);
	if (!ret && timeout > 0)
		ret = rs_client_config_set_timeout_ms(cfg, (unsigned)timeout);
	if (!ret && rpc_reads)
		ret = rs_client_config_set_rpc_reads(cfg, 1);
	if (!ret && spin >= 0)
		ret = rs_client_config_set_spin_us(cfg, (unsigned)spin);
	if (!ret && !replica_reads)
		ret = rs_client_config_set_replica_reads(cfg, 0);
	if (!ret && secret_file)
		ret = rs_client_config_set_credentials_file(cfg, key_id,
							    secret_file);
	if (ret) {
		rs_client_config_delete(&cfg);
		raise_rs(ret, "client configuration");
		return -1;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = rs_client_open(&c, cfg);
	Py_END_ALLOW_THREADS
	rs_client_config_delete(&cfg);
	if (ret) {
		raise_rs(ret, "connect");
		return -1;
	}
	self->c = c;
	self->pid = getpid();
	self->busy = 0;
	return 0;
}

static void client_dealloc(ClientObject *self)
{
	/* in a forked child the resources are the parent's: leave them */
	if (self->c && self->pid == getpid() && !self->busy)
		rs_client_close(&self->c);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *client_close(ClientObject *self, PyObject *unused)
{
	(void)unused;
	if (self->pid != getpid()) {
		client_usable(self);	/* raises the fork error */
		return NULL;
	}
	if (self->busy) {
		PyErr_Format(PyExc_RuntimeError, "close(): %ld call(s) of this "
			     "client are still running in other threads",
			     self->busy);
		return NULL;
	}
	if (self->c) {
		struct rs_client *c = self->c;

		self->c = NULL;
		Py_BEGIN_ALLOW_THREADS
		rs_client_close(&c);
		Py_END_ALLOW_THREADS
	}
	Py_RETURN_NONE;
}

static int init_kind(const char *s)
{
	if (!strcmp(s, "zeros"))
		return RS_INIT_ZEROS;
	if (!strcmp(s, "constant"))
		return RS_INIT_CONSTANT;
	if (!strcmp(s, "uniform"))
		return RS_INIT_UNIFORM;
	if (!strcmp(s, "normal"))
		return RS_INIT_NORMAL;
	return -1;
}

static int dtype_kind(const char *s)
{
	if (!strcmp(s, "fp32") || !strcmp(s, "float32"))
		return RS_DTYPE_FP32;
	if (!strcmp(s, "fp16") || !strcmp(s, "float16"))
		return RS_DTYPE_FP16;
	if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16"))
		return RS_DTYPE_BF16;
	return -1;
}

/* The names create_table() takes, by enum value (the inverse of
 * init_kind(), dtype_kind() and the library's optimizer and eviction
 * names). */
static const char *const init_names[] = { "zeros", "constant", "uniform",
					  "normal" };
static const char *const dtype_names[] = { "fp32", "fp16", "bf16" };
static const char *const optim_names[] = { "sgd", "adagrad",
					   "rowwise_adagrad", "adam" };
static const char *const evict_names[] = { "none", "lru", "lfu" };

static const char *enum_name(const char *const *names, size_t n, uint32_t v)
{
	return v < n ? names[v] : "unknown";
}
#define ENUM_NAME(arr, v) enum_name(arr, sizeof(arr) / sizeof(arr[0]), v)

/* A float keyword that may be None (keep the optimizer's default). */
static int opt_float(PyObject *o, float *dst, const char *name)
{
	double d;

	if (!o || o == Py_None)
		return 0;
	d = PyFloat_AsDouble(o);
	if (d == -1.0 && PyErr_Occurred())
		return -1;
	if (d != d || d > 3.4e38 || d < -3.4e38) {
		PyErr_Format(PyExc_ValueError, "%s must be a finite float32",
			     name);
		return -1;
	}
	*dst = (float)d;
	return 0;
}

/*
 * The hyper-parameter keywords of create_table(), one per row of the
 * spec's field table (common/spec_fields.h) but the optimizer's flags
 * (the keyword decoupled_weight_decay): the row's name, prefixed "init_"
 * for the initializer's. struct rs_table_spec's optim and init are laid
 * out as struct optim_params and init_params (common/spec.c asserts it).
 */
struct kw_field {
	const char *kw;
	int group;	/* enum spec_group */
	int type;	/* enum spec_type */
	size_t off;
	double lo, hi;
	double def[4];
	unsigned users;
};
#define KW_ROW(pre, G, S, n, t, lo_, lo_o, hi_, hi_o, d, u)               \
	{ pre #n, G, SPEC_T_##t, offsetof(S, n), lo_, hi_,                  \
	  { SPEC_UNPAREN d }, u },
#define KW_OPTIM(A, n, t, ...)                                              \
	KW_ROW("", SPEC_G_OPTIM, struct optim_params, n, t, __VA_ARGS__)
#define KW_INIT(A, n, t, ...)                                               \
	KW_ROW("init_", SPEC_G_INIT, struct init_params, n, t, __VA_ARGS__)
static const struct kw_field kw_fields[] = {
	SPEC_OPTIM_PARAMS(KW_OPTIM, 0)
	SPEC_INIT_PARAMS(KW_INIT, 0)
};
#define KW_N (sizeof(kw_fields) / sizeof(kw_fields[0]))

static void *kw_ptr(const struct kw_field *f, struct rs_table_spec *sp)
{
	char *base = f->group == SPEC_G_OPTIM ? (char *)&sp->optim
					      : (char *)&sp->init;

	return base + f->off;
}

static PyObject *kw_value(const struct kw_field *f,
			  const struct rs_table_spec *sp)
{
	const void *v = kw_ptr(f, (struct rs_table_spec *)sp);

	if (f->type == SPEC_T_f32)
		return PyFloat_FromDouble((double)*(const float *)v);
	return PyLong_FromUnsignedLongLong(*(const uint64_t *)v);
}

/* (kinds of group g whose bit is in users) as a tuple of names */
static PyObject *kw_users(const struct kw_field *f)
{
	const char *const *names = f->group == SPEC_G_OPTIM ? optim_names
							    : init_names;
	PyObject *t = PyTuple_New(0);

	for (unsigned k = 0; t && k < 4; k++) {
		PyObject *n;

		if (!(f->users & SPEC_BIT(k)))
			continue;
		n = Py_BuildValue("(s)", names[k]);
		Py_SETREF(t, n ? PySequence_Concat(t, n) : NULL);
		Py_XDECREF(n);
	}
	return t;
}

/* One row for Python: (keyword, type, defaults by kind, lo, hi, kinds
 * that use it); type "float" or "int"; lo/hi None when unbounded. */
static PyObject *kw_row(const struct kw_field *f)
{
	const char *const *names = f->group == SPEC_G_OPTIM ? optim_names
							    : init_names;
	PyObject *users = kw_users(f), *lo, *hi, *row;
	int fl = f->type == SPEC_T_f32;

	if (!users)
		return NULL;
	lo = fl && isfinite(f->lo) ? PyFloat_FromDouble(f->lo) : Py_None;
	hi = fl && isfinite(f->hi) ? PyFloat_FromDouble(f->hi) : Py_None;
	if (lo == Py_None)
		Py_INCREF(lo);
	if (hi == Py_None)
		Py_INCREF(hi);
	row = fl ? Py_BuildValue("(ss{s:d,s:d,s:d,s:d}NNN)", f->kw, "float",
				 names[0], f->def[0], names[1], f->def[1],
				 names[2], f->def[2], names[3], f->def[3],
				 lo, hi, users)
		 : Py_BuildValue("(ss{s:K,s:K,s:K,s:K}NNN)", f->kw, "int",
				 names[0], (unsigned long long)f->def[0],
				 names[1], (unsigned long long)f->def[1],
				 names[2], (unsigned long long)f->def[2],
				 names[3], (unsigned long long)f->def[3],
				 lo, hi, users);
	return row;
}

/* _native.SPEC_FIELDS: the rows that are keywords, in table order. */
static PyObject *kw_table(void)
{
	PyObject *t = PyList_New(0), *r;

	for (size_t i = 0; t && i < KW_N; i++) {
		if (kw_fields[i].type == SPEC_T_u32)
			continue;
		r = kw_row(&kw_fields[i]);
		if (!r || PyList_Append(t, r)) {
			Py_XDECREF(r);
			Py_CLEAR(t);
			break;
		}
		Py_DECREF(r);
	}
	if (!t)
		return NULL;
	Py_SETREF(t, PyList_AsTuple(t));
	return t;
}

/* Move the table's keywords from kw to tbl. 0 or -1. */
static int kw_split(PyObject *kw, PyObject *tbl)
{
	for (size_t i = 0; i < KW_N; i++) {
		const struct kw_field *f = &kw_fields[i];
		PyObject *v = PyDict_GetItemString(kw, f->kw);

		if (!v || f->type == SPEC_T_u32)
			continue;
		if (PyDict_SetItemString(tbl, f->kw, v) ||
		    PyDict_DelItemString(kw, f->kw))
			return -1;
	}
	return 0;
}

/* The table's keywords in tbl into sp (None: keep the default). */
static int kw_take(PyObject *tbl, struct rs_table_spec *sp)
{
	for (size_t i = 0; i < KW_N; i++) {
		const struct kw_field *f = &kw_fields[i];
		PyObject *v = PyDict_GetItemString(tbl, f->kw);
		unsigned long long u;

		if (!v || v == Py_None)
			continue;
		if (f->type == SPEC_T_f32) {
			if (opt_float(v, kw_ptr(f, sp), f->kw))
				return -1;
			continue;
		}
		u = PyLong_AsUnsignedLongLongMask(v); /* as "K" did */
		if (u == (unsigned long long)-1 && PyErr_Occurred())
			return -1;
		*(uint64_t *)kw_ptr(f, sp) = u;
	}
	return 0;
}

/* A table spec as the dict of create_table()'s keyword names. */
static PyObject *spec_dict(const struct rs_table_spec *sp)
{
	PyObject *d = Py_BuildValue(
		"{s:s,s:I,s:s,s:K,s:s,s:O,s:s,s:K,s:s,s:K,s:I,s:I}", "name",
		sp->name, "dim", sp->dim, "dtype",
		ENUM_NAME(dtype_names, sp->dtype), "capacity",
		(unsigned long long)sp->capacity, "optimizer",
		ENUM_NAME(optim_names, sp->optim.kind),
		"decoupled_weight_decay",
		(sp->optim.flags & OPTIM_F_DECOUPLED) ? Py_True : Py_False,
		"init", ENUM_NAME(init_names, sp->init.kind), "max_capacity",
		(unsigned long long)sp->max_capacity, "evict",
		ENUM_NAME(evict_names, sp->evict.policy), "max_rows",
		(unsigned long long)sp->evict.max_rows, "ttl_s",
		sp->evict.ttl_s, "admit_after", sp->evict.admit_after);

	for (size_t i = 0; d && i < KW_N; i++) {
		const struct kw_field *f = &kw_fields[i];
		PyObject *v;

		if (f->type == SPEC_T_u32)
			continue;
		v = kw_value(f, sp);
		if (!v || PyDict_SetItemString(d, f->kw, v))
			Py_CLEAR(d);
		Py_XDECREF(v);
	}
	return d;
}

/* The parts of create_table() around the field table's keywords: the
 * fixed keywords' values, then the spec they give. */
struct create_args {
	const char *name, *optim, *init, *dtype, *evict;
	unsigned int dim, ttl_s, admit_after;
	unsigned long long capacity, max_capacity, max_rows;
	int decoupled, exist_ok;
};

static int create_parse(PyObject *args, PyObject *kw, struct create_args *a)
{
	static char *kwlist[] = {
		"name", "dim", "optimizer", "decoupled_weight_decay", "init",
		"capacity", "dtype", "exist_ok", "max_capacity", "evict",
		"max_rows", "ttl_s", "admit_after", NULL
	};

	*a = (struct create_args){ .optim = "sgd", .init = "zeros",
				   .dtype = "fp32", .evict = "none" };
	return PyArg_ParseTupleAndKeywords(
		       args, kw, "sI|$spsKspKsKII", kwlist, &a->name, &a->dim,
		       &a->optim, &a->decoupled, &a->init, &a->capacity,
		       &a->dtype, &a->exist_ok, &a->max_capacity, &a->evict,
		       &a->max_rows, &a->ttl_s, &a->admit_after)
		       ? 0 : -1;
}

/* The spec of a (the optimizer's defaults), then the table's keywords
 * in tbl over them. 0, or -1 with a Python exception. */
static int create_spec(const struct create_args *a, PyObject *tbl,
		       struct rs_table_spec *spec)
{
	int ret, kind, dt;

	ret = rs_table_spec_init(spec, a->name, a->dim);
	if (!ret)
		ret = rs_table_spec_set_optimizer(spec, a->optim);
	if (ret)
		return raise_rs(ret, "table spec"), -1;
	if ((kind = init_kind(a->init)) < 0)
		return PyErr_Format(PyExc_ValueError, "init must be 'zeros', "
				    "'constant', 'uniform' or 'normal', not "
				    "'%s'", a->init), -1;
	if ((dt = dtype_kind(a->dtype)) < 0)
		return PyErr_Format(PyExc_ValueError, "dtype must be 'fp32', "
				    "'fp16' or 'bf16', not '%s'", a->dtype), -1;
	if (kw_take(tbl, spec))
		return -1;
	spec->optim.flags = a->decoupled ? OPTIM_F_DECOUPLED : 0u;
	spec->init.kind = (uint32_t)kind;
	spec->dtype = (uint32_t)dt;
	if (a->capacity)	/* 0: rs_table_spec_init()'s default */
		spec->capacity = a->capacity;
	spec->max_capacity = a->max_capacity; /* 0: the table does not grow */
	/* eviction and admission (docs/eviction.md) */
	ret = rs_table_spec_set_eviction(spec, a->evict, a->max_rows,
					 a->ttl_s, a->admit_after);
	return ret ? (raise_rs(ret, "table spec"), -1) : 0;
}

static PyObject *client_create_table(ClientObject *self, PyObject *args,
				     PyObject *kw)
{
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	PyObject *rest = kw ? PyDict_Copy(kw) : PyDict_New();
	PyObject *tbl = PyDict_New();
	struct create_args a;
	int ret = -1;

	if (client_usable(self) && rest && tbl && !kw_split(rest, tbl) &&
	    !create_parse(args, rest, &a))
		ret = create_spec(&a, tbl, &spec);
	Py_XDECREF(rest);
	Py_XDECREF(tbl);
	if (ret)
		return NULL;
	self->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = rs_table_create(self->c, &spec);
	Py_END_ALLOW_THREADS
	self->busy--;
	if (ret == RS_E_EXISTS && a.exist_ok)
		ret = 0;
	if (ret)
		return raise_rs(ret, "create table");
	Py_RETURN_NONE;
}

static PyObject *client_drop_table(ClientObject *self, PyObject *args,
				   PyObject *kw)
{
	static char *kwlist[] = { "name", "missing_ok", NULL };
	const char *name;
	int missing_ok = 0, ret;

	if (!client_usable(self))
		return NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$p", kwlist, &name,
					 &missing_ok))
		return NULL;
	self->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = rs_table_drop(self->c, name);
	Py_END_ALLOW_THREADS
	self->busy--;
	if (ret == RS_E_NOTFOUND && missing_ok)
		ret = 0;
	if (ret)
		return raise_rs(ret, "drop table");
	Py_RETURN_NONE;
}

static PyObject *client_grow_table(ClientObject *self, PyObject *args,
				   PyObject *kw)
{
	static char *kwlist[] = { "name", "capacity", NULL };
	const char *name;
	unsigned long long capacity = 0;
	int ret;

	if (!client_usable(self))
		return NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$K", kwlist, &name,
					 &capacity))
		return NULL;
	self->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = rs_table_grow(self->c, name, capacity);
	Py_END_ALLOW_THREADS
	self->busy--;
	if (ret)
		return raise_rs(ret, "grow table");
	Py_RETURN_NONE;
}

static PyObject *client_table(ClientObject *self, PyObject *args)
{
	const char *name;
	struct rs_table *t = NULL;
	TableObject *o;
	int ret;

	if (!client_usable(self))
		return NULL;
	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	self->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = rs_table_open(self->c, name, &t);
	Py_END_ALLOW_THREADS
	self->busy--;
	if (ret)
		return raise_rs(ret, "open table");
	o = PyObject_New(TableObject, &TableType);
	if (!o)
		return NULL;
	Py_INCREF(self);
	o->client = self;
	o->t = t;
	o->dim = rs_table_dim(t);
	o->have_spec = 0;
	return (PyObject *)o;
}

static PyObject *client_tables(ClientObject *self, PyObject *unused)
{
	struct rs_table_info *v = NULL;
	PyObject *list = NULL;
	int n, cap = 64;

	(void)unused;
	if (!client_usable(self))
		return NULL;
	for (;;) {
		v = PyMem_Calloc((size_t)cap, sizeof(*v));
		if (!v)
			return PyErr_NoMemory();
		v[0].struct_size = sizeof(*v);
		self->busy++;
		Py_BEGIN_ALLOW_THREADS
		n = rs_table_list(self->c, v, (size_t)cap);
		Py_END_ALLOW_THREADS
		self->busy--;
		if (n < 0) {
			PyMem_Free(v);
			return raise_rs(n, "list tables");
		}
		if (n <= cap)
			break;
		PyMem_Free(v);
		cap = n;
	}
	list = PyList_New(0);
	for (int i = 0; list && i < n; i++) {
		PyObject *d = Py_BuildValue(
			"{s:s,s:I,s:I,s:I,s:f,s:K,s:K}", "name",
			v[i].name, "dim", v[i].dim, "dtype", v[i].dtype,
			"optimizer", v[i].optimizer, "lr", (double)v[i].lr,
			"rows",
			(unsigned long long)v[i].rows, "capacity",
			(unsigned long long)v[i].capacity);

		if (!d || PyList_Append(list, d)) {
			Py_XDECREF(d);
			Py_CLEAR(list);
		} else {
			Py_DECREF(d);
		}
	}
	PyMem_Free(v);
	return list;
}

/* Counters of struct rs_client_stats that stats() adds to its dict under
 * the field's own name (since 0.6: the row caches; 0.9: bucket images). */
#define STAT_FIELD(f) { #f, offsetof(struct rs_client_stats, f) }
static const struct {
	const char *name;
	size_t off;
} stat_fields[] = {
	STAT_FIELD(reads_posted),
	STAT_FIELD(row_cache_hits),
	STAT_FIELD(row_cache_stale_hits),
	STAT_FIELD(row_cache_probes),
	STAT_FIELD(row_cache_probe_misses),
	STAT_FIELD(row_cache_fills),
	STAT_FIELD(row_cache_update_rows),
	STAT_FIELD(row_cache_evictions),
	STAT_FIELD(row_cache_rejects),
	STAT_FIELD(row_cache_invalidations),
	STAT_FIELD(row_cache_bytes_saved),
	STAT_FIELD(row_cache_bytes),
	STAT_FIELD(bucket_cache_hits),
	STAT_FIELD(bucket_cache_stale),
	STAT_FIELD(bucket_cache_fills),
	STAT_FIELD(bucket_cache_capacity),
};
#undef STAT_FIELD

static int stats_add_fields(PyObject *d, const struct rs_client_stats *s)
{
	for (size_t i = 0; i < sizeof(stat_fields) / sizeof(stat_fields[0]);
	     i++) {
		uint64_t v;
		PyObject *o;
		int ret;

		memcpy(&v, (const char *)s + stat_fields[i].off, sizeof(v));
		o = PyLong_FromUnsignedLongLong(v);
		if (!o)
			return -1;
		ret = PyDict_SetItemString(d, stat_fields[i].name, o);
		Py_DECREF(o);
		if (ret)
			return -1;
	}
	return 0;
}

static PyObject *client_stats(ClientObject *self, PyObject *unused)
{
	struct rs_client_stats s = RS_CLIENT_STATS_INIT;
	PyObject *d;
	int ret;

	(void)unused;
	if (!client_usable(self))
		return NULL;
	ret = rs_client_get_stats(self->c, &s);
	if (ret)
		return raise_rs(ret, "client stats");
	d = Py_BuildValue(
		"{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}",
		"get_keys", (unsigned long long)s.get_keys, "onesided_keys",
		(unsigned long long)s.onesided_keys, "rpc_keys",
		(unsigned long long)s.rpc_keys, "rpc_fallbacks",
		(unsigned long long)s.rpc_fallbacks, "torn_retries",
		(unsigned long long)s.torn_retries, "cache_hits",
		(unsigned long long)s.cache_hits, "cache_misses",
		(unsigned long long)s.cache_misses, "rpcs",
		(unsigned long long)s.rpcs, "update_requests",
		(unsigned long long)s.rpc_update.requests, "update_keys",
		(unsigned long long)s.rpc_update.keys, "get_or_init_keys",
		(unsigned long long)s.rpc_get_or_init.keys, "put_keys",
		(unsigned long long)s.rpc_put.keys, "config_refreshes",
		(unsigned long long)s.config_refreshes, "epoch_retries",
		(unsigned long long)s.epoch_retries);
	if (d && stats_add_fields(d, &s))
		Py_CLEAR(d);
	return d;
}

/* step() -> the new step: rs_client_step, one training step on the clock
 * a row cache's bounded staleness counts. */
static PyObject *client_step(ClientObject *self, PyObject *unused)
{
	(void)unused;
	if (!client_usable(self))
		return NULL;
	return PyLong_FromUnsignedLongLong(rs_client_step(self->c));
}

/*
 * The buffers of a multi-table call: per item i, its table, keys kv[i]
 * and rows rv[i] (rows out for a get, gradients in for an update).
 * held counts the items whose buffers are held (released by multi_free).
 */
static unsigned get_flags(int rpc, int nocache);

struct multi {
	Py_ssize_t m, held;
	TableObject **t;
	Py_buffer *kv, *rv;
	struct rs_update_opts *uo;
	size_t total;
};

static void multi_free(struct multi *mu)
{
	for (Py_ssize_t i = 0; i < mu->held; i++) {
		PyBuffer_Release(&mu->kv[i]);
		PyBuffer_Release(&mu->rv[i]);
	}
	PyMem_Free(mu->t);
	PyMem_Free(mu->kv);
	PyMem_Free(mu->rv);
	PyMem_Free(mu->uo);
}

/* An lr keyword (None: the table's) into *uo. */
static int update_lr(PyObject *lr, struct rs_update_opts *uo)
{
	double d;

	if (lr == Py_None)
		return 0;
	d = PyFloat_AsDouble(lr);
	if (d == -1.0 && PyErr_Occurred())
		return -1;
	if (!(d >= 0 && d <= 3.4e38)) {
		PyErr_Format(PyExc_ValueError, "lr must be a finite float >= 0, "
			     "not %R", lr);
		return -1;
	}
	uo->flags |= RS_UPDATE_LR;
	uo->lr = (float)d;
	return 0;
}

/* Item i of a multi call: (table, keys, rows[, lr, create]). */
static int multi_item(ClientObject *self, struct multi *mu, Py_ssize_t i,
		      PyObject *item, int update)
{
	PyObject *tab, *keys, *rows, *lr = Py_None;
	int create = 0;
	size_t n;

	if (!PyTuple_Check(item) ||
	    !PyArg_ParseTuple(item, update ? "OOO|Op" : "OOO", &tab, &keys,
			      &rows, &lr, &create)) {
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_TypeError, "item %zd must be a "
				     "tuple (table, keys, %s)", i,
				     update ? "grads[, lr, create]" : "out");
		return -1;
	}
	if (!PyObject_TypeCheck(tab, &TableType) ||
	    ((TableObject *)tab)->client != self) {
		PyErr_Format(PyExc_TypeError, "item %zd: not a table of this "
			     "client", i);
		return -1;
	}
	mu->t[i] = (TableObject *)tab;
	mu->uo[i] = (struct rs_update_opts)RS_UPDATE_OPTS_INIT;
	if (update && (update_lr(lr, &mu->uo[i]) < 0))
		return -1;
	if (create)
		mu->uo[i].flags |= RS_UPDATE_CREATE;
	if (get_keys(keys, &mu->kv[i]))
		return -1;
	n = (size_t)mu->kv[i].len / 8;
	if (get_rows(rows, &mu->rv[i], update ? "grads" : "out", n,
		     mu->t[i]->dim, !update)) {
		PyBuffer_Release(&mu->kv[i]);
		return -1;
	}
	mu->held = i + 1;
	mu->total += n;
	return 0;
}

static int multi_parse(ClientObject *self, PyObject *items, struct multi *mu,
		       int update)
{
	PyObject *seq = PySequence_Fast(items, "items must be a sequence");
	int ret = 0;

	memset(mu, 0, sizeof(*mu));
	if (!seq)
		return -1;
	mu->m = PySequence_Fast_GET_SIZE(seq);
	mu->t = PyMem_Calloc((size_t)mu->m + 1, sizeof(*mu->t));
	mu->kv = PyMem_Calloc((size_t)mu->m + 1, sizeof(*mu->kv));
	mu->rv = PyMem_Calloc((size_t)mu->m + 1, sizeof(*mu->rv));
	mu->uo = PyMem_Calloc((size_t)mu->m + 1, sizeof(*mu->uo));
	if (!mu->t || !mu->kv || !mu->rv || !mu->uo) {
		PyErr_NoMemory();
		ret = -1;
	}
	for (Py_ssize_t i = 0; !ret && i < mu->m; i++)
		ret = multi_item(self, mu, i,
				 PySequence_Fast_GET_ITEM(seq, i), update);
	Py_DECREF(seq);
	if (ret)
		multi_free(mu);
	return ret;
}

/* One int32 status array per item, from the slices of st[total]. */
static PyObject *multi_status(const struct multi *mu, const int *st)
{
	PyObject *list = PyList_New(mu->m);
	size_t off = 0;

	for (Py_ssize_t i = 0; list && i < mu->m; i++) {
		size_t n = (size_t)mu->kv[i].len / 8;
		PyObject *a = new_status(n);

		if (!a) {
			Py_CLEAR(list);
			break;
		}
		if (n)
			memcpy(PyArray_DATA((PyArrayObject *)a), st + off,
			       n * sizeof(int));
		off += n;
		PyList_SET_ITEM(list, i, a);
	}
	return list;
}

/* get_multi([(table, keys, out), ...], *, rpc=False, nocache=False) ->
 * [status, ...]: rs_get_multi() over keys of any tables, one round of
 * READs; rows land in each out (n, dim). */
static PyObject *client_get_multi(ClientObject *self, PyObject *args,
				  PyObject *kw)
{
	static char *kwlist[] = { "items", "rpc", "nocache", "init", NULL };
	PyObject *items, *res = NULL;
	struct rs_key_ref *refs = NULL;
	int rpc = 0, nocache = 0, init = 0, ret = 0, *st = NULL;
	struct multi mu;
	size_t k = 0;

	if (!client_usable(self) ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "O|$ppp", kwlist, &items,
					 &rpc, &nocache, &init) ||
	    multi_parse(self, items, &mu, 0))
		return NULL;
	refs = PyMem_Malloc((mu.total + 1) * sizeof(*refs));
	st = PyMem_Malloc((mu.total + 1) * sizeof(*st));
	if (!refs || !st) {
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0; i < mu.m; i++) {
		const uint64_t *kp = mu.kv[i].buf;
		float *o = mu.rv[i].buf;
		size_t n = (size_t)mu.kv[i].len / 8;

		for (size_t j = 0; j < n; j++, k++) {
			refs[k].table = mu.t[i]->t;
			refs[k].key = kp[j];
			refs[k].out = o + j * mu.t[i]->dim;
		}
	}
	self->busy++;
	Py_BEGIN_ALLOW_THREADS
	if (mu.total)
		ret = rs_get_multi(self->c, refs, mu.total, st,
				   get_flags(rpc, nocache) |
					   (init ? RS_F_INIT : 0u));
	Py_END_ALLOW_THREADS
	self->busy--;
	if (ret < 0)
		raise_rs(ret, "get_multi");
	else
		res = multi_status(&mu, st);
out:
	PyMem_Free(refs);
	PyMem_Free(st);
	multi_free(&mu);
	return res;
}

/* Item i's first status in the call's st[] (items in order). */
static size_t multi_off(const struct multi *mu, Py_ssize_t i)
{
	size_t off = 0;

	for (Py_ssize_t j = 0; j < i; j++)
		off += (size_t)mu->kv[j].len / 8;
	return off;
}

static int same_opts(const struct rs_update_opts *a,
		     const struct rs_update_opts *b)
{
	return a->flags == b->flags &&
	       (!(a->flags & RS_UPDATE_LR) || a->lr == b->lr);
}

/*
 * The items whose options equal item `first`'s (and are not done[]) as one
 * rs_update_multi: refs and status in scratch, statuses copied back to
 * st[] at each item's place. Runs without the GIL.
 */
static int multi_update_group(ClientObject *self, const struct multi *mu,
			      Py_ssize_t first, char *done,
			      struct rs_grad_ref *refs, int *tmp, int *st)
{
	size_t k = 0;
	int ret;

	for (Py_ssize_t i = first; i < mu->m; i++) {
		const uint64_t *kp = mu->kv[i].buf;
		const float *g = mu->rv[i].buf;
		size_t n = (size_t)mu->kv[i].len / 8;

		if (done[i] || !same_opts(&mu->uo[i], &mu->uo[first]))
			continue;
		for (size_t j = 0; j < n; j++, k++)
			refs[k] = (struct rs_grad_ref){ mu->t[i]->t, kp[j],
							g + j * mu->t[i]->dim };
	}
	ret = k ? rs_update_multi(self->c, refs, k, tmp, 0, &mu->uo[first])
		: 0;
	if (ret < 0)
		return ret;
	k = 0;
	for (Py_ssize_t i = first; i < mu->m; i++) {
		size_t n = (size_t)mu->kv[i].len / 8;

		if (done[i] || !same_opts(&mu->uo[i], &mu->uo[first]))
			continue;
		memcpy(st + multi_off(mu, i), tmp + k, n * sizeof(int));
		k += n;
		done[i] = 1;
	}
	return 0;
}

/* update_multi([(table, keys, grads[, lr, create]), ...]) -> [status, ...]:
 * the updates of one training step: rs_update_multi, one exchange with
 * every node for all tables (one per distinct lr/create among the items).
 * create=True: RS_UPDATE_CREATE (missing keys by the table's policy). A
 * call that fails as a whole raises; items of other option groups may have
 * been applied. */
static PyObject *client_update_multi(ClientObject *self, PyObject *args)
{
	PyObject *items, *res = NULL;
	struct rs_grad_ref *refs = NULL;
	int ret = 0, *st = NULL, *tmp = NULL;
	char *done = NULL;
	struct multi mu;

	if (!client_usable(self) || !PyArg_ParseTuple(args, "O", &items) ||
	    multi_parse(self, items, &mu, 1))
		return NULL;
	st = PyMem_Malloc((mu.total + 1) * sizeof(*st));
	tmp = PyMem_Malloc((mu.total + 1) * sizeof(*tmp));
	refs = PyMem_Malloc((mu.total + 1) * sizeof(*refs));
	done = PyMem_Calloc((size_t)mu.m + 1, 1);
	if (!st || !tmp || !refs || !done) {
		PyErr_NoMemory();
		goto out;
	}
	self->busy++;
	Py_BEGIN_ALLOW_THREADS
	for (Py_ssize_t i = 0; i < mu.m && ret >= 0; i++)
		if (!done[i])
			ret = multi_update_group(self, &mu, i, done, refs, tmp,
						 st);
	Py_END_ALLOW_THREADS
	self->busy--;
	if (ret < 0)
		raise_rs(ret, "update_multi");
	else
		res = multi_status(&mu, st);
out:
	PyMem_Free(st);
	PyMem_Free(tmp);
	PyMem_Free(refs);
	PyMem_Free(done);
	multi_free(&mu);
	return res;
}

static PyObject *client_node_count(ClientObject *self, PyObject *unused)
{
	(void)unused;
	if (!client_usable(self))
		return NULL;
	return PyLong_FromUnsignedLong(rs_client_node_count(self->c));
}

static PyObject *client_pid(ClientObject *self, void *unused)
{
	(void)unused;
	return PyLong_FromLong((long)self->pid);
}

static PyObject *client_closed(ClientObject *self, void *unused)
{
	(void)unused;
	return PyBool_FromLong(self->c == NULL);
}

/* ---- checkpoints ---- */

/* The progress callback, called by the library with the GIL released
 * (from the calling thread or a worker of the call). An exception in it
 * cannot stop the call: it is reported as unraisable. */
static void py_progress(void *arg, const struct rs_ckpt_progress *p)
{
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *r = PyObject_CallFunction(
		(PyObject *)arg, "{s:s,s:K,s:K,s:K,s:K,s:d}", "phase",
		p->phase, "rows", (unsigned long long)p->rows, "bytes",
		(unsigned long long)p->bytes, "total_rows",
		(unsigned long long)p->total_rows, "total_bytes",
		(unsigned long long)p->total_bytes, "elapsed_s",
		(double)p->elapsed_us / 1e6);

	if (r)
		Py_DECREF(r);
	else
		PyErr_WriteUnraisable((PyObject *)arg);
	PyGILState_Release(g);
}

/* tables (None or a sequence of str) and progress (None or a callable)
 * into o; *names must be freed with PyMem_Free, *seq released. */
static int ckpt_opts_from(PyObject *tables, PyObject *progress,
			  struct rs_ckpt_opts *o, const char ***names,
			  PyObject **seq)
{
	Py_ssize_t n;

	*names = NULL;
	*seq = NULL;
	if (progress && progress != Py_None) {
		if (!PyCallable_Check(progress)) {
			PyErr_SetString(PyExc_TypeError,
					"progress must be callable");
			return -1;
		}
		o->progress = py_progress;
		o->arg = progress;
	}
	if (!tables || tables == Py_None)
		return 0;
	if (PyUnicode_Check(tables)) {
		PyErr_SetString(PyExc_TypeError,
				"tables must be a sequence of names, not a str");
		return -1;
	}
	*seq = PySequence_Fast(tables, "tables must be a sequence of names");
	if (!*seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(*seq);
	if (n > UINT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "too many tables");
		return -1;
	}
	*names = PyMem_Calloc((size_t)n + 1, sizeof(**names));
	if (!*names) {
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(*seq, i);

		if (!PyUnicode_Check(it)) {
			PyErr_SetString(PyExc_TypeError,
					"tables must be a sequence of names");
			return -1;
		}
		(*names)[i] = PyUnicode_AsUTF8(it);
		if (!(*names)[i])
			return -1;
	}
	o->tables = *names;
	o->ntables = (uint32_t)n;
	return 0;
}

static PyObject *ckpt_report_dict(const struct rs_ckpt_report *r)
{
	return Py_BuildValue("{s:s,s:I,s:I,s:O,s:K,s:K,s:K,s:d,s:d}", "id",
			     r->id, "tables", r->tables, "parts", r->parts,
			     "with_state", r->with_state ? Py_True : Py_False,
			     "rows", (unsigned long long)r->rows, "bytes",
			     (unsigned long long)r->bytes, "raw_bytes",
			     (unsigned long long)r->raw_bytes, "paused_s",
			     (double)r->paused_us / 1e6, "elapsed_s",
			     (double)r->elapsed_us / 1e6);
}

static PyObject *client_ckpt_call(ClientObject *self, PyObject *args,
				  PyObject *kw, int restore)
{
	static char *kwl[] = { "path", "tables", "export", "freeze_ms",
			       "progress", "incremental", NULL };
	static char *kwl_r[] = { "path", "tables", "progress", NULL };
	struct rs_ckpt_opts o = RS_CKPT_OPTS_INIT;
	struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;
	PyObject *tables = NULL, *progress = NULL, *seq = NULL, *path;
	PyObject *base = NULL, *base_b = NULL;
	const char **names = NULL;
	unsigned int freeze_ms = 0;
	int exp = 0, ret;

	if (!client_usable(self))
		return NULL;
	if (restore ? !PyArg_ParseTupleAndKeywords(args, kw, "O&|$OO", kwl_r,
						   PyUnicode_FSConverter, &path,
						   &tables, &progress)
		    : !PyArg_ParseTupleAndKeywords(args, kw, "O&|$OpIOO", kwl,
						   PyUnicode_FSConverter, &path,
						   &tables, &exp, &freeze_ms,
						   &progress, &base))
		return NULL;
	/* incremental=BASE_DIR: an increment on that checkpoint */
	if (base && base != Py_None && !PyUnicode_FSConverter(base, &base_b)) {
		Py_DECREF(path);
		return NULL;
	}
	if (ckpt_opts_from(tables, progress, &o, &names, &seq)) {
		Py_DECREF(path);
		Py_XDECREF(base_b);
		Py_XDECREF(seq);
		PyMem_Free(names);
		return NULL;
	}
	o.flags = exp ? RS_CKPT_EXPORT : 0;
	o.freeze_ms = freeze_ms;
	o.base = base_b ? PyBytes_AS_STRING(base_b) : NULL;
	self->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = restore ? rs_restore(self->c, PyBytes_AS_STRING(path), &o, &rep)
		      : rs_checkpoint(self->c, PyBytes_AS_STRING(path), &o,
				      &rep);
	Py_END_ALLOW_THREADS
	self->busy--;
	Py_DECREF(path);
	Py_XDECREF(base_b);
	Py_XDECREF(seq);
	PyMem_Free(names);
	if (ret)
		return raise_rs(ret, restore ? "restore" : "checkpoint");
	return ckpt_report_dict(&rep);
}

static PyObject *client_checkpoint(ClientObject *self, PyObject *args,
				   PyObject *kw)
{
	return client_ckpt_call(self, args, kw, 0);
}

static PyObject *client_restore(ClientObject *self, PyObject *args,
				PyObject *kw)
{
	return client_ckpt_call(self, args, kw, 1);
}

static PyMethodDef client_methods[] = {
	{ "close", (PyCFunction)(void (*)(void))client_close, METH_NOARGS,
	  "Disconnect and free the client (refused while calls run)." },
	{ "create_table", (PyCFunction)(void (*)(void))client_create_table,
	  METH_VARARGS | METH_KEYWORDS,
	  "create_table(name, dim, *, optimizer='sgd', lr=None, ...)" },
	{ "drop_table", (PyCFunction)(void (*)(void))client_drop_table,
	  METH_VARARGS | METH_KEYWORDS, "drop_table(name, *, missing_ok)" },
	{ "grow_table", (PyCFunction)(void (*)(void))client_grow_table,
	  METH_VARARGS | METH_KEYWORDS,
	  "grow_table(name, *, capacity=0): grow a table online (0: double "
	  "it, up to its max_capacity)" },
	{ "table", (PyCFunction)(void (*)(void))client_table, METH_VARARGS,
	  "table(name) -> Table" },
	{ "tables", (PyCFunction)(void (*)(void))client_tables, METH_NOARGS,
	  "The tables the nodes know, as dicts." },
	{ "stats", (PyCFunction)(void (*)(void))client_stats, METH_NOARGS,
	  "The client's counters, as a dict." },
	{ "step", (PyCFunction)(void (*)(void))client_step, METH_NOARGS,
	  "step() -> int: advance the step clock of row caches with bounded "
	  "staleness (one training step); the new step" },
	{ "get_multi", (PyCFunction)(void (*)(void))client_get_multi,
	  METH_VARARGS | METH_KEYWORDS,
	  "get_multi([(table, keys, out), ...], *, rpc=False, nocache=False, "
	  "init=False) -> [status, ...]" },
	{ "update_multi", (PyCFunction)(void (*)(void))client_update_multi,
	  METH_VARARGS,
	  "update_multi([(table, keys, grads[, lr, create]), ...]) -> "
	  "[status, ...]" },
	{ "node_count", (PyCFunction)(void (*)(void))client_node_count, METH_NOARGS,
	  "Memory nodes configured." },
	{ "checkpoint", (PyCFunction)(void (*)(void))client_checkpoint,
	  METH_VARARGS | METH_KEYWORDS,
	  "checkpoint(path, *, tables=None, export=False, freeze_ms=0, "
	  "progress=None, incremental=None) -> dict" },
	{ "restore", (PyCFunction)(void (*)(void))client_restore,
	  METH_VARARGS | METH_KEYWORDS,
	  "restore(path, *, tables=None, progress=None) -> dict" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef client_getset[] = {
	{ "pid", (getter)client_pid, NULL, "process that opened the client",
	  NULL },
	{ "closed", (getter)client_closed, NULL, "closed or not", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject ClientType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "recstore._native.Client",
	.tp_basicsize = sizeof(ClientObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Client(nodes, *, device=None, cache_entries=-1, "
		  "conns_per_node=0, timeout_ms=0, rpc_reads=False, "
		  "spin_us=-1, key_id=0, secret_file=None, "
		  "replica_reads=True, bucket_cache_bytes=-1)",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)client_init,
	.tp_dealloc = (destructor)client_dealloc,
	.tp_methods = client_methods,
	.tp_getset = client_getset,
};

/* ---- Table ---- */

static void table_dealloc(TableObject *self)
{
	Py_XDECREF(self->client);
	PyObject_Free(self);
}

/* Call-level checks shared by the data calls. */
static int table_usable(TableObject *self)
{
	return client_usable(self->client);
}

enum data_op { OP_GET, OP_GET_OR_INIT, OP_UPDATE, OP_PUT, OP_DELETE };

static const char *const op_what[] = { "get", "get_or_init", "update",
				       "put", "delete" };

/*
 * One data call: keys (+ rows in or out) -> status array. For the gets,
 * `out` may be None (a fresh (n, dim) float32 array is returned with the
 * status) or a caller array filled in place.
 */
static PyObject *table_call(TableObject *self, enum data_op op,
			    PyObject *keys, PyObject *rows, unsigned flags,
			    const struct rs_update_opts *uo)
{
	Py_buffer kv, rv;
	PyObject *status, *outarr = NULL, *res;
	size_t n;
	int ret, have_rows = 0;
	int *st;

	if (!table_usable(self))
		return NULL;
	if (get_keys(keys, &kv))
		return NULL;
	n = (size_t)kv.len / 8;
	if (op == OP_GET || op == OP_GET_OR_INIT) {
		if (!rows || rows == Py_None) {
			npy_intp d[2] = { (npy_intp)n, (npy_intp)self->dim };

			outarr = PyArray_SimpleNew(2, d, NPY_FLOAT32);
			if (!outarr)
				goto fail_keys;
			rows = outarr;
		} else {
			Py_INCREF(rows);
			outarr = rows;
		}
		if (get_rows(rows, &rv, "out", n, self->dim, 1))
			goto fail_keys;
		have_rows = 1;
	} else if (op != OP_DELETE) {
		if (get_rows(rows, &rv, op == OP_PUT ? "values" : "grads", n,
			     self->dim, 0))
			goto fail_keys;
		have_rows = 1;
	}
	status = new_status(n);
	if (!status)
		goto fail_rows;
	st = PyArray_DATA((PyArrayObject *)status);
	self->client->busy++;
	Py_BEGIN_ALLOW_THREADS
	switch (op) {
	case OP_GET:
		ret = rs_get(self->t, kv.buf, n, rv.buf, st, flags);
		break;
	case OP_GET_OR_INIT:
		ret = rs_get_or_init(self->t, kv.buf, n, rv.buf, st, flags);
		break;
	case OP_UPDATE:
		ret = rs_update_ex(self->t, kv.buf, n, rv.buf, st, flags, uo);
		break;
	case OP_PUT:
		ret = rs_put(self->t, kv.buf, n, rv.buf, st, flags);
		break;
	default:
		ret = rs_delete(self->t, kv.buf, n, st, flags);
		break;
	}
	Py_END_ALLOW_THREADS
	self->client->busy--;
	if (have_rows)
		PyBuffer_Release(&rv);
	PyBuffer_Release(&kv);
	if (ret < 0) {
		Py_DECREF(status);
		Py_XDECREF(outarr);
		return raise_rs(ret, op_what[op]);
	}
	if (!outarr)
		return status;
	res = PyTuple_Pack(2, outarr, status);
	Py_DECREF(outarr);
	Py_DECREF(status);
	return res;
fail_rows:
	if (have_rows)
		PyBuffer_Release(&rv);
fail_keys:
	Py_XDECREF(outarr);
	PyBuffer_Release(&kv);
	return NULL;
}

static unsigned get_flags(int rpc, int nocache)
{
	return (rpc ? RS_F_RPC : 0u) | (nocache ? RS_F_NOCACHE : 0u);
}

static PyObject *table_get(TableObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "keys", "out", "init", "rpc", "nocache",
				  NULL };
	PyObject *keys, *out = Py_None;
	int init = 0, rpc = 0, nocache = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$ppp", kwlist, &keys,
					 &out, &init, &rpc, &nocache))
		return NULL;
	return table_call(self, init ? OP_GET_OR_INIT : OP_GET, keys, out,
			  get_flags(rpc, nocache), NULL);
}

static PyObject *table_update(TableObject *self, PyObject *args,
			      PyObject *kw)
{
	static char *kwlist[] = { "keys", "grads", "lr", "create", NULL };
	PyObject *keys, *grads, *lr = Py_None;
	struct rs_update_opts uo = RS_UPDATE_OPTS_INIT;
	int create = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$Op", kwlist, &keys,
					 &grads, &lr, &create))
		return NULL;
	if (update_lr(lr, &uo) < 0)	/* this step's lr (a schedule) */
		return NULL;
	if (create)	/* missing keys by the table's policy */
		uo.flags |= RS_UPDATE_CREATE;
	return table_call(self, OP_UPDATE, keys, grads, 0, &uo);
}

/* The table's spec as its node reports it (fetched once, then kept;
 * refresh=True fetches it again). */
static int table_fetch_spec(TableObject *self, int refresh)
{
	struct rs_table_spec sp = RS_TABLE_SPEC_INIT;
	int ret;

	if (self->have_spec && !refresh)
		return 0;
	self->client->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = rs_table_get_spec(self->client->c, rs_table_name(self->t), &sp);
	Py_END_ALLOW_THREADS
	self->client->busy--;
	if (ret) {
		raise_rs(ret, "table spec");
		return -1;
	}
	self->spec = sp;
	self->have_spec = 1;
	return 0;
}

static PyObject *table_spec(TableObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "refresh", NULL };
	int refresh = 0;

	if (!table_usable(self) ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "|$p", kwlist, &refresh) ||
	    table_fetch_spec(self, refresh))
		return NULL;
	return spec_dict(&self->spec);
}

/* init_rows(keys) -> rows (n, dim): what the node would create for the
 * keys (rs_table_init_rows), computed here; nothing is sent but the
 * first spec fetch. */
static PyObject *table_init_rows(TableObject *self, PyObject *args)
{
	PyObject *keys, *out;
	Py_buffer kv;
	npy_intp d[2];
	int ret;

	if (!table_usable(self) || !PyArg_ParseTuple(args, "O", &keys) ||
	    table_fetch_spec(self, 0) || get_keys(keys, &kv))
		return NULL;
	d[0] = (npy_intp)(kv.len / 8);
	d[1] = (npy_intp)self->dim;
	out = PyArray_SimpleNew(2, d, NPY_FLOAT32);
	if (!out) {
		PyBuffer_Release(&kv);
		return NULL;
	}
	ret = rs_table_init_rows(&self->spec, kv.buf, (size_t)d[0],
				 PyArray_DATA((PyArrayObject *)out));
	PyBuffer_Release(&kv);
	if (ret) {
		Py_DECREF(out);
		return raise_rs(ret, "init rows");
	}
	return out;
}

/* An int argument in 0..max (bool refused) into *out. */
static int uint_arg(PyObject *o, const char *name, unsigned long long max,
		    unsigned long long *out)
{
	if (!PyLong_Check(o) || PyBool_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s",
			     name, Py_TYPE(o)->tp_name);
		return -1;
	}
	*out = PyLong_AsUnsignedLongLong(o);
	if ((*out == (unsigned long long)-1 && PyErr_Occurred()) ||
	    *out > max) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "%s must be in 0..%llu, not %R",
			     name, max, o);
		return -1;
	}
	return 0;
}

/* set_row_cache(bytes, max_stale_steps=None): rs_table_set_row_cache.
 * None: exact (a 16-byte probe proves each hit current); k >= 0: a copy
 * at most k steps old is used without a READ. bytes 0 removes the cache.
 * The library wants no data call on the table meanwhile: refused while
 * calls of this client run in other threads. */
static PyObject *table_set_row_cache(TableObject *self, PyObject *args,
				     PyObject *kw)
{
	static char *kwlist[] = { "bytes", "max_stale_steps", NULL };
	struct rs_row_cache_opts o = RS_ROW_CACHE_OPTS_INIT;
	PyObject *bytes, *stale = Py_None;
	unsigned long long k;
	int ret;

	if (!table_usable(self) ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &bytes,
					 &stale) ||
	    uint_arg(bytes, "bytes", UINT64_MAX, &k))
		return NULL;
	o.bytes = k;
	if (stale != Py_None) {
		if (uint_arg(stale, "max_stale_steps", UINT32_MAX - 1, &k))
			return NULL;
		o.flags = RS_ROW_CACHE_STALE;
		o.max_stale_steps = (uint32_t)k;
	}
	if (self->client->busy) {
		PyErr_Format(PyExc_RuntimeError, "set_row_cache(): %ld call(s) "
			     "of this client are still running in other "
			     "threads", self->client->busy);
		return NULL;
	}
	ret = rs_table_set_row_cache(self->t, &o);
	if (ret)
		return raise_rs(ret, "row cache");
	Py_RETURN_NONE;
}

/* prefetch_index() -> images entered (rs_table_prefetch_index). */
static PyObject *table_prefetch_index(TableObject *self, PyObject *unused)
{
	uint64_t n = 0;
	int ret;

	(void)unused;
	if (!table_usable(self))
		return NULL;
	self->client->busy++;
	Py_BEGIN_ALLOW_THREADS
	ret = rs_table_prefetch_index(self->t, &n);
	Py_END_ALLOW_THREADS
	self->client->busy--;
	if (ret)
		return raise_rs(ret, "prefetch index");
	return PyLong_FromUnsignedLongLong(n);
}

static PyObject *table_put(TableObject *self, PyObject *args)
{
	PyObject *keys, *values;

	if (!PyArg_ParseTuple(args, "OO", &keys, &values))
		return NULL;
	return table_call(self, OP_PUT, keys, values, 0, NULL);
}

static PyObject *table_delete(TableObject *self, PyObject *args)
{
	PyObject *keys;

	if (!PyArg_ParseTuple(args, "O", &keys))
		return NULL;
	return table_call(self, OP_DELETE, keys, NULL, 0, NULL);
}

static PyObject *table_dim(TableObject *self, void *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLong(self->dim);
}

static PyObject *table_name(TableObject *self, void *unused)
{
	(void)unused;
	return PyUnicode_FromString(rs_table_name(self->t));
}

static PyMethodDef table_methods[] = {
	{ "get", (PyCFunction)(void (*)(void))table_get,
	  METH_VARARGS | METH_KEYWORDS,
	  "get(keys, out=None, *, init=False, rpc=False, nocache=False) -> "
	  "(rows, status)" },
	{ "update", (PyCFunction)(void (*)(void))table_update,
	  METH_VARARGS | METH_KEYWORDS,
	  "update(keys, grads, *, lr=None, create=False) -> status "
	  "(duplicate keys summed, "
	  "one step; lr: this step's learning rate, None: the table's)" },
	{ "spec", (PyCFunction)(void (*)(void))table_spec,
	  METH_VARARGS | METH_KEYWORDS,
	  "spec(*, refresh=False) -> dict of create_table()'s keywords" },
	{ "init_rows", (PyCFunction)(void (*)(void))table_init_rows,
	  METH_VARARGS, "init_rows(keys) -> the rows a get_or_init would "
	  "create, computed locally (nothing written)" },
	{ "put", (PyCFunction)(void (*)(void))table_put, METH_VARARGS,
	  "put(keys, values) -> status" },
	{ "prefetch_index", (PyCFunction)table_prefetch_index, METH_NOARGS,
	  "prefetch_index() -> int: READ the table's whole index into the "
	  "client's bucket-image cache (a first get of any key then takes "
	  "one READ); returns the images entered" },
	{ "set_row_cache", (PyCFunction)(void (*)(void))table_set_row_cache,
	  METH_VARARGS | METH_KEYWORDS,
	  "set_row_cache(bytes, max_stale_steps=None): a row cache of this "
	  "table on this client (None: exact probes; k: rows at most k steps "
	  "old used without a READ; bytes 0 removes it)" },
	{ "delete", (PyCFunction)(void (*)(void))table_delete, METH_VARARGS,
	  "delete(keys) -> status" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef table_getset[] = {
	{ "dim", (getter)table_dim, NULL, "row dimension", NULL },
	{ "name", (getter)table_name, NULL, "table name", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject TableType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "recstore._native.Table",
	.tp_basicsize = sizeof(TableObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A table handle (Client.table(name)).",
	.tp_dealloc = (destructor)table_dealloc,
	.tp_methods = table_methods,
	.tp_getset = table_getset,
};

/* ---- Reader: a checkpoint or export read without a store ---- */

typedef struct {
	PyObject_HEAD
	struct rs_ckpt_reader *r;
} ReaderObject;

static PyTypeObject ReaderType;

static int reader_init(ReaderObject *self, PyObject *args, PyObject *kw)
{
	static char *kwl[] = { "path", NULL };
	struct rs_ckpt_reader *r = NULL;
	PyObject *path;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&", kwl,
					 PyUnicode_FSConverter, &path))
		return -1;
	if (self->r)
		rs_ckpt_reader_close(&self->r);
	Py_BEGIN_ALLOW_THREADS
	ret = rs_ckpt_reader_open(&r, PyBytes_AS_STRING(path));
	Py_END_ALLOW_THREADS
	Py_DECREF(path);
	if (ret) {
		raise_rs(ret, "open checkpoint");
		return -1;
	}
	self->r = r;
	return 0;
}

static void reader_dealloc(ReaderObject *self)
{
	rs_ckpt_reader_close(&self->r);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int reader_open(ReaderObject *self)
{
	if (self->r)
		return 1;
	PyErr_SetString(PyExc_RuntimeError, "the checkpoint reader is closed");
	return 0;
}

static PyObject *reader_close(ReaderObject *self, PyObject *unused)
{
	(void)unused;
	rs_ckpt_reader_close(&self->r);
	Py_RETURN_NONE;
}

static PyObject *reader_tables(ReaderObject *self, PyObject *unused)
{
	PyObject *list;
	unsigned n;

	(void)unused;
	if (!reader_open(self))
		return NULL;
	n = rs_ckpt_reader_table_count(self->r);
	list = PyList_New(0);
	for (unsigned i = 0; list && i < n; i++) {
		struct rs_table_spec sp = RS_TABLE_SPEC_INIT;
		uint32_t sf = 0;
		PyObject *d;
		int ret = rs_ckpt_reader_table(self->r, i, &sp, &sf);

		if (ret) {
			Py_DECREF(list);
			return raise_rs(ret, "checkpoint table");
		}
		d = Py_BuildValue("{s:s,s:I,s:I,s:I,s:f,s:K,s:I}", "name",
				  sp.name, "dim", sp.dim, "dtype", sp.dtype,
				  "optimizer", sp.optim.kind, "lr",
				  (double)sp.optim.lr, "capacity",
				  (unsigned long long)sp.capacity,
				  "state_floats", sf);
		if (!d || PyList_Append(list, d))
			Py_CLEAR(list);
		Py_XDECREF(d);
	}
	return list;
}

/* read(i, max, state) -> (keys uint64 (n,), rows float32 (n, dim),
 * state float32 (n, state_floats) or None); n == 0 at the table's end. */
static PyObject *reader_read(ReaderObject *self, PyObject *args,
			     PyObject *kw)
{
	static char *kwl[] = { "table", "max", "state", NULL };
	struct rs_table_spec sp = RS_TABLE_SPEC_INIT;
	PyArrayObject *k = NULL, *rows = NULL, *st = NULL;
	unsigned int ti;
	Py_ssize_t max = 65536;
	uint32_t sf = 0;
	int want_state = 0, n;
	npy_intp dk[1], dr[2], ds[2];
	PyObject *res;

	if (!reader_open(self) ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "I|n$p", kwl, &ti, &max,
					 &want_state))
		return NULL;
	if (max < 1 || max > (1 << 24)) {
		PyErr_SetString(PyExc_ValueError,
				"max must be in 1..16777216");
		return NULL;
	}
	n = rs_ckpt_reader_table(self->r, ti, &sp, &sf);
	if (n)
		return raise_rs(n, "checkpoint table");
	if (want_state && !sf) {
		PyErr_SetString(PyExc_ValueError, "this checkpoint holds no "
				"optimizer state (an export)");
		return NULL;
	}
	dk[0] = max;
	dr[0] = max;
	dr[1] = sp.dim;
	ds[0] = max;
	ds[1] = sf;
	k = (PyArrayObject *)PyArray_SimpleNew(1, dk, NPY_UINT64);
	rows = (PyArrayObject *)PyArray_SimpleNew(2, dr, NPY_FLOAT32);
	if (want_state)
		st = (PyArrayObject *)PyArray_SimpleNew(2, ds, NPY_FLOAT32);
	if (!k || !rows || (want_state && !st))
		goto fail;
	Py_BEGIN_ALLOW_THREADS
	n = rs_ckpt_reader_read(self->r, ti, PyArray_DATA(k),
				PyArray_DATA(rows),
				st ? PyArray_DATA(st) : NULL, (size_t)max);
	Py_END_ALLOW_THREADS
	if (n < 0) {
		raise_rs(n, "read checkpoint");
		goto fail;
	}
	if (n < max) {	/* shrink to what was read */
		PyArray_Dims d1 = { dk, 1 }, d2 = { dr, 2 }, d3 = { ds, 2 };
		PyObject *t;

		dk[0] = dr[0] = ds[0] = n;
		t = PyArray_Resize(k, &d1, 0, NPY_CORDER);
		if (!t)
			goto fail;
		Py_DECREF(t);
		t = PyArray_Resize(rows, &d2, 0, NPY_CORDER);
		if (!t)
			goto fail;
		Py_DECREF(t);
		if (st) {
			t = PyArray_Resize(st, &d3, 0, NPY_CORDER);
			if (!t)
				goto fail;
			Py_DECREF(t);
		}
	}
	res = PyTuple_Pack(3, (PyObject *)k, (PyObject *)rows,
			   st ? (PyObject *)st : Py_None);
	Py_DECREF(k);
	Py_DECREF(rows);
	Py_XDECREF(st);
	return res;
fail:
	Py_XDECREF(k);
	Py_XDECREF(rows);
	Py_XDECREF(st);
	return NULL;
}

static PyMethodDef reader_methods[] = {
	{ "close", (PyCFunction)(void (*)(void))reader_close, METH_NOARGS,
	  "Close the files." },
	{ "tables", (PyCFunction)(void (*)(void))reader_tables, METH_NOARGS,
	  "The checkpoint's tables, as dicts (in table index order)." },
	{ "read", (PyCFunction)(void (*)(void))reader_read,
	  METH_VARARGS | METH_KEYWORDS,
	  "read(table_index, max=65536, *, state=False) -> (keys, rows, "
	  "state or None); empty arrays at the table's end" },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject ReaderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "recstore._native.Reader",
	.tp_basicsize = sizeof(ReaderObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Reader(path): a verified checkpoint or export, read "
		  "without a store.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)reader_init,
	.tp_dealloc = (destructor)reader_dealloc,
	.tp_methods = reader_methods,
};

/* ---- module ---- */

static PyObject *mod_strerror(PyObject *m, PyObject *args)
{
	int code;

	(void)m;
	if (!PyArg_ParseTuple(args, "i", &code))
		return NULL;
	return PyUnicode_FromString(rs_strerror(code));
}

static PyObject *mod_version(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyUnicode_FromString(rs_version());
}

static PyObject *mod_verify(PyObject *m, PyObject *args)
{
	struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;
	PyObject *path;
	int ret;

	(void)m;
	if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	ret = rs_ckpt_verify(PyBytes_AS_STRING(path), &rep);
	Py_END_ALLOW_THREADS
	Py_DECREF(path);
	if (ret)
		return raise_rs(ret, "verify");
	return ckpt_report_dict(&rep);
}

static PyMethodDef mod_methods[] = {
	{ "verify", mod_verify, METH_VARARGS,
	  "verify(path) -> dict: check every file of a checkpoint" },
	{ "strerror", mod_strerror, METH_VARARGS, "strerror(code) -> str" },
	{ "version", mod_version, METH_NOARGS, "library version" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef moddef = {
	PyModuleDef_HEAD_INIT, "recstore._native",
	"RecStore client library (use the recstore package).", -1,
	mod_methods, NULL, NULL, NULL, NULL,
};

/* ---- The library's log lines, to logging.getLogger("recstore") ---- */

static PyObject *py_logger;	/* strong reference, for the module's life */

static int log_py_level(enum rs_log_level level)
{
	/* logging has no NOTICE: a node's notices are what INFO means */
	static const int map[] = {
		[RS_LOG_FATAL] = 50, [RS_LOG_ERROR] = 40,
		[RS_LOG_WARNING] = 30, [RS_LOG_NOTICE] = 20,
		[RS_LOG_INFO] = 20, [RS_LOG_DEBUG] = 10,
	};

	return (unsigned)level < sizeof(map) / sizeof(map[0]) ? map[level]
							     : 40;
}

static int py_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
	return Py_IsFinalizing();
#else
	return _Py_IsFinalizing();
#endif
}

/* logger.log(level, "%s", msg, extra={rs_file, rs_line, rs_func}); an
 * exception of the caller's stays pending, one of logging's is reported
 * as unraisable (a log line cannot fail the call that wrote it). */
static void log_call(int level, const char *file, int line, const char *func,
		     const char *msg)
{
	PyObject *type, *value, *tb, *r = NULL;
	PyObject *extra = Py_BuildValue("{s:s,s:i,s:s}", "rs_file", file,
					"rs_line", line, "rs_func", func);
	PyObject *kw = extra ? Py_BuildValue("{s:O}", "extra", extra) : NULL;
	PyObject *args = Py_BuildValue("(iss)", level, "%s", msg);
	PyObject *meth = PyObject_GetAttrString(py_logger, "log");

	PyErr_Fetch(&type, &value, &tb);
	if (kw && args && meth)
		r = PyObject_Call(meth, args, kw);
	if (!r)
		PyErr_WriteUnraisable(py_logger);
	Py_XDECREF(r);
	Py_XDECREF(meth);
	Py_XDECREF(args);
	Py_XDECREF(kw);
	Py_XDECREF(extra);
	PyErr_Restore(type, value, tb);
}

static void log_to_python(enum rs_log_level level, const char *file,
			  int line, const char *func, const char *msg)
{
	PyGILState_STATE g;

	/* a line racing the interpreter's end is dropped: PyGILState_Ensure
	 * must not be called then */
	if (!py_logger || py_finalizing())
		return;
	g = PyGILState_Ensure();
	log_call(log_py_level(level), file, line, func, msg);
	PyGILState_Release(g);
}

static PyObject *mod_log_detach(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	rs_set_log_function(NULL);
	Py_RETURN_NONE;
}

static PyMethodDef log_detach_def = {
	"_log_detach", mod_log_detach, METH_NOARGS,
	"the library's log lines back to stderr",
};

/* Installs log_to_python and, at exit, its removal. */
static int log_attach(void)
{
	PyObject *logging = PyImport_ImportModule("logging");
	PyObject *atexit = logging ? PyImport_ImportModule("atexit") : NULL;
	PyObject *detach = PyCFunction_New(&log_detach_def, NULL);
	PyObject *r = NULL;

	if (atexit && detach)
		r = PyObject_CallMethod(atexit, "register", "O", detach);
	if (r)
		py_logger = PyObject_CallMethod(logging, "getLogger", "s",
						"recstore");
	Py_XDECREF(r);
	Py_XDECREF(detach);
	Py_XDECREF(atexit);
	Py_XDECREF(logging);
	if (!py_logger)
		return -1;
	rs_set_log_function(log_to_python);
	return 0;
}

static int add_codes(PyObject *m)
{
	static const struct {
		const char *name;
		int code;
	} codes[] = {
		{ "E_INVAL", RS_E_INVAL },
		{ "E_NOTFOUND", RS_E_NOTFOUND },
		{ "E_EXISTS", RS_E_EXISTS },
		{ "E_FULL", RS_E_FULL },
		{ "E_PROTO", RS_E_PROTO },
		{ "E_DIM", RS_E_DIM },
		{ "E_TOOBIG", RS_E_TOOBIG },
		{ "E_TORN", RS_E_TORN },
		{ "E_DISCONNECTED", RS_E_DISCONNECTED },
		{ "E_VERBS", RS_E_VERBS },
		{ "E_NODEV", RS_E_NODEV },
		{ "E_CORRUPT", RS_E_CORRUPT },
		{ "E_STALE", RS_E_STALE },
		{ "E_TIMEOUT", RS_E_TIMEOUT },
		{ "E_UNSUPPORTED", RS_E_UNSUPPORTED },
		{ "E_OVERFLOW", RS_E_OVERFLOW },
		{ "E_PERM", RS_E_PERM },
		{ "E_AUTH", RS_E_AUTH },
		{ "E_BUSY", RS_E_BUSY },
		{ "E_EPOCH", RS_E_EPOCH },
		{ "KEY_MISSING", RS_KEY_MISSING },
		{ "KEY_FOUND", RS_KEY_FOUND },
		{ "KEY_CREATED", RS_KEY_CREATED },
	};

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (PyModule_AddIntConstant(m, codes[i].name, codes[i].code))
			return -1;
	return 0;
}

/* SPEC_FIELDS: the table spec's hyper-parameter keywords (kw_table()),
 * which recstore.embedding reads instead of a list of its own. */
static int add_spec_fields(PyObject *m)
{
	PyObject *t = kw_table();

	if (!t || PyModule_AddObject(m, "SPEC_FIELDS", t)) {
		Py_XDECREF(t);
		return -1;
	}
	return 0;
}

PyMODINIT_FUNC PyInit__native(void);
PyMODINIT_FUNC PyInit__native(void)
{
	PyObject *m;

	import_array();
	if (PyType_Ready(&ClientType) < 0 || PyType_Ready(&TableType) < 0 ||
	    PyType_Ready(&ReaderType) < 0)
		return NULL;
	m = PyModule_Create(&moddef);
	if (!m)
		return NULL;
	RsError = PyErr_NewExceptionWithDoc(
		"recstore._native.Error",
		"A failed recstore call: .code (the library's negative error "
		"code) and .message.",
		PyExc_RuntimeError, NULL);
	if (!RsError || PyModule_AddObject(m, "Error", RsError) ||
	    add_codes(m) || log_attach())
		goto fail;
	Py_INCREF(RsError);
	Py_INCREF(&ClientType);
	if (PyModule_AddObject(m, "Client", (PyObject *)&ClientType)) {
		Py_DECREF(&ClientType);
		goto fail;
	}
	Py_INCREF(&TableType);
	if (PyModule_AddObject(m, "Table", (PyObject *)&TableType)) {
		Py_DECREF(&TableType);
		goto fail;
	}
	Py_INCREF(&ReaderType);
	if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType)) {
		Py_DECREF(&ReaderType);
		goto fail;
	}
	/* DEFAULT_PORT: the port a node listens on unless told otherwise */
	if (add_spec_fields(m) ||
	    PyModule_AddIntConstant(m, "DEFAULT_PORT", RS_DEFAULT_PORT))
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
