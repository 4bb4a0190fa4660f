/*
 * coord_mem.c - the in-memory coordination backend (coord.h), for unit
 * tests: etcd's semantics on one mutex, with a fake clock.
 *
 * Layout: the keys in one array sorted by key (a range is a binary search
 * and a walk); the leases in an unsorted array; a ring of the last
 * MEM_HIST changes (revision, key) for wait(). A wait whose revision is
 * older than the ring's oldest entry returns "changed", as etcd's watch
 * does on a compacted revision (coord.h).
 *
 * Time: `now_ms` moves only in coord_mem_advance(). Every operation first
 * expires the leases whose deadline is <= now (deleting their keys, one
 * revision each, as etcd does), so a test controls exactly when a node's
 * registration disappears.
 *
 * Concurrency: one mutex over everything; wait() sleeps on a condition
 * variable (CLOCK_MONOTONIC, real time) that every change broadcasts.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rs_internal.h"
#include "coord/coord.h"

#define MEM_HIST 1024
#define MEM_MAX_KEYS 65536
#define MEM_MAX_LEASES 4096

struct mem_lease {
	int64_t id;
	int64_t ttl_s;
	int64_t deadline_ms;
};

struct mem_change {
	int64_t rev;
	char *key;
};

struct coord_mem {
	struct coord c;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	struct coord_kv *kv;	/* sorted by key */
	size_t n, cap;
	struct mem_lease *leases;
	size_t nleases;
	struct mem_change hist[MEM_HIST];
	size_t hist_next;	/* slot of the next change */
	int64_t rev;
	int64_t next_lease;
	int64_t now_ms;
	bool down;
};

static struct coord_mem *mem_of(struct coord *c)
{
	return (struct coord_mem *)c;
}

/* Index of key, or where it would go (*found false). */
static size_t find_locked(struct coord_mem *m, const char *key, bool *found)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->kv[mid].key, key);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static int record_locked(struct coord_mem *m, const char *key)
{
	struct mem_change *h = &m->hist[m->hist_next];
	char *k = strdup(key);

	if (!k)
		return rs_seterr(-ENOMEM, "coord_mem: out of memory");
	free(h->key);
	h->key = k;
	h->rev = m->rev;
	m->hist_next = (m->hist_next + 1) % MEM_HIST;
	pthread_cond_broadcast(&m->changed);
	return 0;
}

static void remove_at_locked(struct coord_mem *m, size_t i)
{
	free(m->kv[i].key);
	free(m->kv[i].value);
	memmove(&m->kv[i], &m->kv[i + 1], (m->n - i - 1) * sizeof(*m->kv));
	m->n--;
}

/* Delete key i as one revision. */
static int delete_locked(struct coord_mem *m, size_t i)
{
	char key[COORD_KEY_MAX + 1];

	snprintf(key, sizeof(key), "%s", m->kv[i].key);
	remove_at_locked(m, i);
	m->rev++;
	return record_locked(m, key);
}

static void expire_locked(struct coord_mem *m)
{
	for (size_t l = 0; l < m->nleases;) {
		int64_t id = m->leases[l].id;

		if (m->leases[l].deadline_ms > m->now_ms) {
			l++;
			continue;
		}
		m->leases[l] = m->leases[--m->nleases];
		for (size_t i = 0; i < m->n;) {
			if (m->kv[i].lease == id)
				delete_locked(m, i); /* ENOMEM: history only */
			else
				i++;
		}
	}
}

static struct mem_lease *lease_find_locked(struct coord_mem *m, int64_t id)
{
	for (size_t l = 0; l < m->nleases; l++)
		if (m->leases[l].id == id)
			return &m->leases[l];
	return NULL;
}

/* Lock, expire, and fail while down. */
static int enter(struct coord_mem *m)
{
	pthread_mutex_lock(&m->lock);
	expire_locked(m);
	if (m->down) {
		pthread_mutex_unlock(&m->lock);
		return rs_seterr(-ECONNREFUSED, "coord_mem: store down");
	}
	return 0;
}

static void leave(struct coord_mem *m)
{
	pthread_mutex_unlock(&m->lock);
}

static bool in_range(const char *k, const char *key, bool prefix)
{
	return prefix ? strncmp(k, key, strlen(key)) == 0 : strcmp(k, key) == 0;
}

static int copy_kv(struct coord_kv *dst, const struct coord_kv *src)
{
	*dst = *src;
	dst->key = strdup(src->key);
	dst->value = malloc(src->value_len + 1);
	if (!dst->key || !dst->value) {
		free(dst->key);
		free(dst->value);
		return rs_seterr(-ENOMEM, "coord_mem: out of memory");
	}
	memcpy(dst->value, src->value, src->value_len + 1);
	return 0;
}

static int mem_range(struct coord *c, const char *key, bool prefix,
		     struct coord_kvs *out)
{
	struct coord_mem *m = mem_of(c);
	size_t first, cnt = 0;
	bool found;
	int ret;

	memset(out, 0, sizeof(*out));
	if ((ret = coord_check_key(key)) || (ret = enter(m)))
		return ret;
	first = find_locked(m, key, &found);
	while (first + cnt < m->n && in_range(m->kv[first + cnt].key, key,
					      prefix))
		cnt++;
	if (cnt > COORD_RANGE_MAX) {
		ret = rs_seterr(RS_E_TOOBIG, "coord_mem: %zu keys under '%s' "
				"(max %d)", cnt, key, COORD_RANGE_MAX);
		goto out;
	}
	out->rev = m->rev;
	if (cnt && !(out->kv = calloc(cnt, sizeof(*out->kv)))) {
		ret = rs_seterr(-ENOMEM, "coord_mem: out of memory");
		goto out;
	}
	for (size_t i = 0; i < cnt; i++) {
		if ((ret = copy_kv(&out->kv[i], &m->kv[first + i]))) {
			coord_kvs_free(out);
			goto out;
		}
		out->n++;
	}
out:
	leave(m);
	return ret;
}

/* Set key = val (lease) as one revision. */
static int put_locked(struct coord_mem *m, const char *key, const void *val,
		      size_t len, int64_t lease)
{
	struct coord_kv *kv;
	bool found;
	size_t i = find_locked(m, key, &found);
	char *v;

	if (lease && !lease_find_locked(m, lease))
		return rs_seterr(RS_E_NOTFOUND, "coord_mem: lease %lld not "
				 "found", (long long)lease);
	if (!found && m->n >= MEM_MAX_KEYS)
		return rs_seterr(RS_E_FULL, "coord_mem: %d keys",
				 MEM_MAX_KEYS);
	if (!(v = malloc(len + 1)))
		return rs_seterr(-ENOMEM, "coord_mem: out of memory");
	if (len)
		memcpy(v, val, len);
	v[len] = '\0';
	if (!found) {
		if (m->n == m->cap) {
			size_t cap = m->cap ? 2 * m->cap : 16;
			struct coord_kv *a = realloc(m->kv, cap * sizeof(*a));

			if (!a) {
				free(v);
				return rs_seterr(-ENOMEM, "coord_mem: out of "
						 "memory");
			}
			m->kv = a;
			m->cap = cap;
		}
		kv = &m->kv[i];
		memmove(kv + 1, kv, (m->n - i) * sizeof(*kv));
		memset(kv, 0, sizeof(*kv));
		if (!(kv->key = strdup(key))) {
			memmove(kv, kv + 1, (m->n - i) * sizeof(*kv));
			free(v);
			return rs_seterr(-ENOMEM, "coord_mem: out of memory");
		}
		m->n++;
		kv->create_rev = m->rev + 1;
	}
	kv = &m->kv[i];
	free(kv->value);
	kv->value = v;
	kv->value_len = len;
	kv->lease = lease;
	kv->mod_rev = ++m->rev;
	return record_locked(m, key);
}

static int mem_put(struct coord *c, const char *key, const void *val,
		   size_t len, int64_t lease, int64_t *rev)
{
	struct coord_mem *m = mem_of(c);
	int ret;

	if ((ret = coord_check_key(key)) ||
	    (ret = coord_check_value(val, len)) || (ret = enter(m)))
		return ret;
	ret = put_locked(m, key, val, len, lease);
	if (!ret && rev)
		*rev = m->rev;
	leave(m);
	return ret;
}

static int mem_del(struct coord *c, const char *key, bool prefix,
		   int64_t *rev)
{
	struct coord_mem *m = mem_of(c);
	bool found;
	size_t i;
	int ret, n = 0;

	if ((ret = coord_check_key(key)) || (ret = enter(m)))
		return ret;
	i = find_locked(m, key, &found);
	/* etcd deletes a range in one revision */
	while (!ret && i < m->n && in_range(m->kv[i].key, key, prefix)) {
		if (!n)
			m->rev++;
		ret = record_locked(m, m->kv[i].key);
		remove_at_locked(m, i);
		n++;
	}
	if (rev)
		*rev = m->rev;
	leave(m);
	return ret ? ret : n;
}

static int mem_cas(struct coord *c, const char *key, int64_t expect,
		   const void *val, size_t len, int64_t lease, int64_t *rev)
{
	struct coord_mem *m = mem_of(c);
	bool found;
	size_t i;
	int ret;

	if ((ret = coord_check_key(key)) ||
	    (ret = coord_check_value(val, len)) || (ret = enter(m)))
		return ret;
	i = find_locked(m, key, &found);
	if ((found ? m->kv[i].mod_rev : 0) != expect) {
		ret = 0;
	} else if (val) {
		ret = put_locked(m, key, val, len, lease);
		ret = ret ? ret : 1;
	} else {
		ret = found ? delete_locked(m, i) : 0;
		ret = ret ? ret : 1;
	}
	if (ret >= 0 && rev)
		*rev = m->rev;
	leave(m);
	return ret;
}

static int mem_lease_grant(struct coord *c, int64_t ttl_s, int64_t *id)
{
	struct coord_mem *m = mem_of(c);
	struct mem_lease *a;
	int ret;

	if ((ret = coord_check_ttl(ttl_s)) || (ret = enter(m)))
		return ret;
	if (m->nleases >= MEM_MAX_LEASES) {
		ret = rs_seterr(RS_E_FULL, "coord_mem: %d leases",
				MEM_MAX_LEASES);
		goto out;
	}
	a = realloc(m->leases, (m->nleases + 1) * sizeof(*a));
	if (!a) {
		ret = rs_seterr(-ENOMEM, "coord_mem: out of memory");
		goto out;
	}
	m->leases = a;
	a[m->nleases].id = ++m->next_lease;
	a[m->nleases].ttl_s = ttl_s;
	a[m->nleases].deadline_ms = m->now_ms + ttl_s * 1000;
	*id = a[m->nleases++].id;
out:
	leave(m);
	return ret;
}

static int mem_lease_keepalive(struct coord *c, int64_t id, int64_t *ttl_s)
{
	struct coord_mem *m = mem_of(c);
	struct mem_lease *l;
	int ret;

	if ((ret = enter(m)))
		return ret;
	if (!(l = lease_find_locked(m, id))) {
		ret = rs_seterr(RS_E_NOTFOUND, "coord_mem: lease %lld "
				"expired or unknown", (long long)id);
	} else {
		l->deadline_ms = m->now_ms + l->ttl_s * 1000;
		if (ttl_s)
			*ttl_s = l->ttl_s;
	}
	leave(m);
	return ret;
}

static int mem_lease_revoke(struct coord *c, int64_t id)
{
	struct coord_mem *m = mem_of(c);
	struct mem_lease *l;
	int ret;

	if ((ret = enter(m)))
		return ret;
	if (!(l = lease_find_locked(m, id))) {
		ret = rs_seterr(RS_E_NOTFOUND, "coord_mem: lease %lld "
				"expired or unknown", (long long)id);
	} else {
		l->deadline_ms = m->now_ms; /* the next expiry takes it */
		expire_locked(m);
	}
	leave(m);
	return ret;
}

/* A change under prefix after `after` in the history, or the history no
 * longer reaches back to after + 1: *rev and true. */
static bool changed_locked(struct coord_mem *m, const char *prefix,
			   int64_t after, int64_t *rev)
{
	int64_t oldest = INT64_MAX;

	if (m->rev <= after)
		return false;
	for (size_t i = 0; i < MEM_HIST; i++) {
		const struct mem_change *h = &m->hist[i];

		if (!h->key)
			continue;
		if (h->rev < oldest)
			oldest = h->rev;
		if (h->rev > after && in_range(h->key, prefix, true)) {
			*rev = h->rev;
			return true;
		}
	}
	if (oldest > after + 1) { /* compacted */
		*rev = m->rev;
		return true;
	}
	return false;
}

static int mem_wait(struct coord *c, const char *prefix, int64_t after,
		    int timeout_ms, int64_t *rev)
{
	struct coord_mem *m = mem_of(c);
	struct timespec dl;
	int64_t r = 0;
	int ret;

	if ((ret = coord_check_key(prefix)) || (ret = enter(m)))
		return ret;
	rs_deadline_ms(CLOCK_MONOTONIC, timeout_ms, &dl);
	while (!m->down && !changed_locked(m, prefix, after, &r) &&
	       !(c->cancel && atomic_load(c->cancel))) {
		struct timespec now, slice;

		/* 50 ms slices: the cancel flag is nobody's to signal */
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > dl.tv_sec ||
		    (now.tv_sec == dl.tv_sec && now.tv_nsec >= dl.tv_nsec))
			break;
		slice = now;
		slice.tv_nsec += 50000000L;
		if (slice.tv_nsec >= 1000000000L) {
			slice.tv_sec++;
			slice.tv_nsec -= 1000000000L;
		}
		if (slice.tv_sec > dl.tv_sec ||
		    (slice.tv_sec == dl.tv_sec && slice.tv_nsec > dl.tv_nsec))
			slice = dl;
		pthread_cond_timedwait(&m->changed, &m->lock, &slice);
		expire_locked(m);
	}
	if (m->down)
		ret = rs_seterr(-ECONNREFUSED, "coord_mem: store down");
	else if (r) {
		ret = 1;
		if (rev)
			*rev = r;
	}
	leave(m);
	return ret;
}

static void mem_destroy(struct coord *c)
{
	struct coord_mem *m = mem_of(c);

	for (size_t i = 0; i < m->n; i++) {
		free(m->kv[i].key);
		free(m->kv[i].value);
	}
	for (size_t i = 0; i < MEM_HIST; i++)
		free(m->hist[i].key);
	free(m->kv);
	free(m->leases);
	pthread_cond_destroy(&m->changed);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static const struct coord_ops mem_ops = {
	.name = "mem",
	.range = mem_range,
	.put = mem_put,
	.del = mem_del,
	.cas = mem_cas,
	.lease_grant = mem_lease_grant,
	.lease_keepalive = mem_lease_keepalive,
	.lease_revoke = mem_lease_revoke,
	.wait = mem_wait,
	.destroy = mem_destroy,
};

int coord_mem_new(struct coord **out)
{
	struct coord_mem *m = calloc(1, sizeof(*m));
	pthread_condattr_t ca;

	*out = NULL;
	if (!m)
		return rs_seterr(-ENOMEM, "coord_mem: out of memory");
	m->c.ops = &mem_ops;
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->changed, &ca);
	pthread_condattr_destroy(&ca);
	m->rev = 1; /* etcd's first revision of an empty store */
	m->next_lease = 0x7000;
	*out = &m->c;
	return 0;
}

void coord_mem_advance(struct coord *c, int64_t ms)
{
	struct coord_mem *m = mem_of(c);

	pthread_mutex_lock(&m->lock);
	m->now_ms += ms;
	expire_locked(m);
	pthread_mutex_unlock(&m->lock);
}

void coord_mem_set_down(struct coord *c, bool down)
{
	struct coord_mem *m = mem_of(c);

	pthread_mutex_lock(&m->lock);
	m->down = down;
	pthread_cond_broadcast(&m->changed);
	pthread_mutex_unlock(&m->lock);
}
