/*
 * rs_json.c - json_dumps through a buffer that remembers its first failure
 * (rs_json.h says why). The buffer grows by doubling through rs_realloc
 * (failure injection counts it); once a write failed every later one
 * fails too, so a write jansson does not check cannot be skipped silently.
 * And parsing twice on failure, to tell bad input from memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "common/rs_json.h"

struct dump_buf {
	char *p;
	size_t len, cap;
	bool failed;
};

static int dump_put(const char *s, size_t n, void *arg)
{
	struct dump_buf *b = arg;

	if (b->failed)
		return -1;
	if (n + 1 > b->cap - b->len) {
		size_t cap = b->cap ? b->cap : 256;
		char *q;

		while (cap - b->len < n + 1)
			cap *= 2;
		if (!(q = rs_realloc(b->p, cap))) {
			b->failed = true;
			return -1;
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

char *rs_json_dumps(const json_t *j, size_t flags)
{
	struct dump_buf b = { 0 };

	if (json_dump_callback(j, dump_put, &b, flags) || b.failed || !b.p) {
		free(b.p);
		errno = ENOMEM;
		return NULL;
	}
	return b.p;
}

/* Whether a parse that failed with a, then with b, ran out of memory. */
static bool load_oom(const json_error_t *a, const json_error_t *b)
{
	if (json_error_code(a) == json_error_out_of_memory ||
	    json_error_code(b) == json_error_out_of_memory ||
	    (!a->text[0] && a->line == -1) || (!b->text[0] && b->line == -1))
		return true;
	return a->line != b->line || a->column != b->column ||
	       a->position != b->position || strcmp(a->text, b->text);
}

/* Two results of one input (either may be NULL): the value when both are
 * equal, else NULL with *oom if memory failed (load_oom). */
static json_t *load_pair(json_t *a, const json_error_t *ea, json_t *b,
			 json_error_t *e, bool *oom)
{
	if (a && b && json_equal(a, b)) {
		json_decref(b);
		return a;
	}
	*oom = (a && b) || load_oom(ea, e);
	json_decref(a);
	json_decref(b);
	return NULL;
}

json_t *rs_json_loadb(const char *buf, size_t len, size_t flags,
		      json_error_t *e, bool *oom)
{
	json_error_t first;
	json_t *a = json_loadb(buf, len, flags, &first), *b;

	*oom = false;
	b = json_loadb(buf, len, flags, e);
	if (!a && b) {		/* the first failed, not for bad input */
		first = *e;
		a = b;
		b = json_loadb(buf, len, flags, e);
	}
	return load_pair(a, &first, b, e, oom);
}

json_t *rs_json_load_file(const char *path, size_t flags, json_error_t *e,
			  bool *oom)
{
	json_error_t first;
	json_t *a = json_load_file(path, flags, &first), *b;

	*oom = false;
	if (!a && json_error_code(&first) == json_error_cannot_open_file) {
		*e = first;
		return NULL;
	}
	b = json_load_file(path, flags, e);
	if (!a && b) {
		first = *e;
		a = b;
		b = json_load_file(path, flags, e);
	}
	return load_pair(a, &first, b, e, oom);
}
