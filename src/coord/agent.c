/*
 * agent.c - a memory node's membership agent (membership.h): registers
 * the node under /recstore/<cluster>/nodes/<id> on a lease it keeps
 * alive, competes for the decider key, and while it holds it turns every
 * change of the registrations into the next configuration
 * (memb_decide()).
 *
 * One thread runs memb_agent_tick() and then waits on the cluster's
 * prefix (coord_wait: a lease that expires deletes a registration, which
 * wakes the decider at once) until the next keepalive is due, a third of
 * the TTL after the last one. The node's serving threads never touch the
 * store: an unreachable etcd costs the node nothing but this thread's
 * retries (one a second) and a log line when it starts failing, one a
 * minute while it fails, and one when it recovers.
 *
 * Liveness is etcd's lease, not our own heartbeat: the decider never
 * judges a node by anything but the presence of its registration.
 *
 * Concurrency: tick state (lease, registered, ka_ms) belongs to whoever
 * calls tick: the thread once started, else the caller (unit tests).
 * decider, epoch and rev are atomics that other threads read.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/log.h"
#include "common/rs_internal.h"
#include "coord/membership.h"

#define AGENT_RETRY_MS 1000
#define AGENT_FAIL_LOG_MS 60000

struct memb_agent {
	struct coord *c;
	char cluster[MEMB_CLUSTER_MAX + 1];
	char prefix[COORD_KEY_MAX + 1];
	char reg_key[COORD_KEY_MAX + 1];
	char decider_key[COORD_KEY_MAX + 1];
	struct memb_reg self;
	int64_t lease_s;
	bool decide;
	struct memb_policy policy;
	void (*log)(void *arg, const char *line);
	void *log_arg;
	void (*on_config)(void *arg, const struct memb_config *c);
	void *config_arg;
	_Atomic uint64_t *synced;
	_Atomic int64_t *read_ms;
	_Atomic uint64_t *regressed_out;
	char recovery_key[COORD_KEY_MAX + 1];

	int64_t lease;		/* 0: none */
	int64_t ka_ms;		/* last grant or keepalive */
	bool registered;
	/* the last configuration passed to on_config (epoch 0: none) */
	struct memb_config followed;
	/* The store's configuration was found older than followed (a
	 * restore from a snapshot): its epoch then, 0 when not. While set,
	 * no configuration is followed but one memb_recover() wrote, none
	 * is decided, and followed is published (recovery/<id>, and seen in
	 * the registration). */
	_Atomic uint64_t regressed;
	bool published;		/* recovery/<id> written on this lease */
	atomic_bool decider;
	_Atomic uint64_t epoch;
	_Atomic int64_t rev;

	pthread_t thr;
	bool started;
	atomic_bool stop;
	pthread_mutex_t lock;	/* with cv: the retry sleep */
	pthread_cond_t cv;
	bool failing;
	unsigned fails;
	int64_t fail_log_ms;

	/* The members the decider keeps as last complete holders
	 * (memb_policy.keep_last), each since when: after keep_ms one goes
	 * down anyway (0: never). Read and written by the deciding round
	 * only. */
	struct agent_kept {
		struct memb_ref ref;
		int64_t since_ms;
		bool seen;	/* kept again in this round */
		bool late;	/* past keep_ms: forgotten this round */
	} *kept;
	size_t nkept, kept_cap;
	struct memb_ref *forget;	/* kept past keep_ms */
	int64_t keep_ms;
	int64_t now_ms;		/* of the round */
};

static void say(struct memb_agent *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void say(struct memb_agent *a, const char *fmt, ...)
{
	char line[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (a->log)
		a->log(a->log_arg, line);
	else
		rs_log_from("coord", RS_LOG_NOTICE, "%s", line);
}

int memb_agent_new(struct memb_agent **out, struct coord *c,
		   const struct memb_agent_opts *o)
{
	struct memb_agent *a;
	pthread_condattr_t ca;
	int ret;

	*out = NULL;
	if ((ret = memb_check_id("coord.cluster", o->cluster)) ||
	    (ret = memb_check_id("coord.id", o->id)) ||
	    (ret = coord_check_ttl(o->lease_s)))
		return ret;
	if (!o->addr || !o->addr[0] || strlen(o->addr) > MEMB_ADDR_MAX)
		return rs_seterr(RS_E_INVAL, "coord: address of 1..%d bytes",
				 MEMB_ADDR_MAX);
	if (!(a = calloc(1, sizeof(*a))))
		return rs_seterr(-ENOMEM, "coord: out of memory");
	snprintf(a->cluster, sizeof(a->cluster), "%s", o->cluster);
	snprintf(a->self.id, sizeof(a->self.id), "%s", o->id);
	snprintf(a->self.addr, sizeof(a->self.addr), "%s", o->addr);
	if (getrandom(&a->self.inc, sizeof(a->self.inc), 0) !=
	    (ssize_t)sizeof(a->self.inc))
		a->self.inc = (uint64_t)rs_mono_ms() ^ (uint64_t)(uintptr_t)a;
	if ((ret = memb_key(a->prefix, o->cluster, "")) ||
	    (ret = memb_key(a->decider_key, o->cluster, "decider")) ||
	    (ret = memb_key(a->reg_key, o->cluster, "nodes/")) ||
	    (ret = memb_key(a->recovery_key, o->cluster, "recovery/")) ||
	    strlen(a->reg_key) + strlen(o->id) > COORD_KEY_MAX ||
	    strlen(a->recovery_key) + strlen(o->id) > COORD_KEY_MAX) {
		free(a);
		return ret ? ret : rs_seterr(RS_E_TOOBIG, "coord: key too "
					     "long");
	}
	strcat(a->reg_key, o->id);
	strcat(a->recovery_key, o->id);
	a->lease_s = o->lease_s;
	a->decide = o->decide;
	a->policy = o->policy;
	a->keep_ms = o->keep_s > 0 ? o->keep_s * 1000 : 0;
	a->log = o->log;
	a->log_arg = o->log_arg;
	a->on_config = o->on_config;
	a->config_arg = o->config_arg;
	a->synced = o->synced;
	a->read_ms = o->read_ms;
	a->regressed_out = o->regressed;
	a->c = c;
	c->cancel = &a->stop;
	pthread_mutex_init(&a->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = a;
	return 0;
}

static int ensure_lease(struct memb_agent *a, int64_t now)
{
	int ret;

	if (a->lease && now - a->ka_ms >= a->lease_s * 1000 / 3) {
		ret = coord_lease_keepalive(a->c, a->lease, NULL);
		if (ret == RS_E_NOTFOUND) {
			say(a, "lease %" PRIx64 " expired: registering again",
			    (uint64_t)a->lease);
			a->lease = 0;
		} else if (ret) {
			return ret;
		} else {
			a->ka_ms = now;
		}
	}
	if (!a->lease) {
		a->registered = false;
		a->published = false;
		atomic_store(&a->decider, false);
		if ((ret = coord_lease_grant(a->c, a->lease_s, &a->lease)))
			return ret;
		a->ka_ms = now;
	}
	return 0;
}

static int ensure_registered(struct memb_agent *a)
{
	size_t len;
	char *v;
	int ret;

	if (a->synced && atomic_load(a->synced) != a->self.synced) {
		a->self.synced = atomic_load(a->synced);
		a->registered = false;	/* publish it */
	}
	if (a->registered)
		return 0;
	if (atomic_load(&a->regressed) && !a->published) {
		/* the configuration followed, for memb_recover(): first, so
		 * that a registration with seen always has it published */
		if ((ret = memb_config_format(&a->followed, &v, &len)))
			return ret;
		ret = coord_put(a->c, a->recovery_key, v, len, a->lease, NULL);
		free(v);
		if (ret)
			return ret;
		a->published = true;
	}
	if ((ret = memb_reg_format(&a->self, &v, &len)))
		return ret;
	ret = coord_put(a->c, a->reg_key, v, len, a->lease, NULL);
	free(v);
	if (ret)
		return ret;
	a->registered = true;
	if (a->self.synced)
		say(a, "'%s' holds its ranges of epoch %" PRIu64, a->self.id,
		    a->self.synced);
	else
		say(a, "registered as '%s' (%s) in cluster '%s', lease TTL %"
		    PRId64 " s", a->self.id, a->self.addr, a->cluster,
		    a->lease_s);
	return 0;
}

/* Take the decider key if it is free; notice when it is ours. */
static int ensure_decider(struct memb_agent *a)
{
	struct coord_kvs r;
	bool mine;
	int ret;

	if ((ret = coord_range(a->c, a->decider_key, false, &r)))
		return ret;
	mine = r.n == 1 && r.kv[0].lease == a->lease &&
	       !strcmp(r.kv[0].value, a->self.id);
	if (r.n == 0) {
		ret = coord_cas(a->c, a->decider_key, 0, a->self.id,
				strlen(a->self.id), a->lease, NULL);
		mine = ret == 1;
	}
	coord_kvs_free(&r);
	if (ret < 0)
		return ret;
	if (mine && !atomic_exchange(&a->decider, true))
		say(a, "'%s' is the decider of cluster '%s'", a->self.id,
		    a->cluster);
	if (!mine)
		atomic_store(&a->decider, false);
	return 0;
}

/* The store's configuration cfg is older than the one followed: stop
 * following and deciding, publish the one followed, tell the operator. */
static void regressed(struct memb_agent *a, const struct memb_config *cfg)
{
	atomic_store(&a->regressed, cfg->epoch ? cfg->epoch : 1);
	if (a->regressed_out)
		atomic_store(a->regressed_out, atomic_load(&a->regressed));
	a->self.seen = a->followed.epoch;
	a->registered = false;	/* publish it */
	a->published = false;
	say(a, "the configuration of cluster '%s' went back from epoch %"
	    PRIu64 " to %" PRIu64 "%s: its store was restored from an older "
	    "snapshot. This node keeps serving epoch %" PRIu64 ", follows "
	    "and decides no configuration until an operator runs "
	    "'recstore-ctl --etcd URL --cluster %s recover' "
	    "(docs/replication.md, \"A store restored from a snapshot\")",
	    a->cluster, a->followed.epoch, cfg->epoch,
	    cfg->epoch == a->followed.epoch ? " (written again otherwise)"
					    : "",
	    a->followed.epoch, a->cluster);
}

/* A configuration memb_recover() wrote for every node that saw the store
 * go back: follow it again, unpublish. */
static int recovered(struct memb_agent *a, const struct memb_config *cfg)
{
	int ret = coord_del(a->c, a->recovery_key, false, NULL);

	if (ret < 0)
		return ret;
	say(a, "configuration epoch %" PRIu64 " recovers epoch %" PRIu64
	    ": following the store again", cfg->epoch, cfg->recovered);
	atomic_store(&a->regressed, 0);
	if (a->regressed_out)
		atomic_store(a->regressed_out, 0);
	a->self.seen = 0;
	a->registered = false;
	a->published = false;
	return 0;
}

/* Pass cfg to on_config and keep it as the one followed. */
static int follow(struct memb_agent *a, const struct memb_config *cfg)
{
	struct memb_config copy;
	int ret = memb_config_copy(&copy, cfg);

	if (ret)
		return ret;
	if (a->on_config)
		a->on_config(a->config_arg, cfg);
	memb_config_free(&a->followed);
	a->followed = copy;
	atomic_store(&a->epoch, cfg->epoch);
	return 0;
}

/* memb_policy.on_kept of the deciding round. */
static void kept_one(void *arg, const struct memb_member *m, size_t ranges)
{
	struct memb_agent *a = arg;
	struct agent_kept *k;

	for (size_t i = 0; i < a->nkept; i++)
		if (a->kept[i].ref.inc == m->inc &&
		    !strcmp(a->kept[i].ref.id, m->id)) {
			a->kept[i].seen = true;
			return;
		}
	if (a->nkept == a->kept_cap) {
		size_t cap = a->kept_cap ? 2 * a->kept_cap : 4;
		void *v = cap <= MEMB_MAX_NODES
			  ? realloc(a->kept, cap * sizeof(*a->kept)) : NULL;

		if (!v)
			return;	/* untimed: kept until it comes back */
		a->kept = v;
		a->kept_cap = cap;
	}
	k = &a->kept[a->nkept++];
	memset(k, 0, sizeof(*k));
	memcpy(k->ref.id, m->id, sizeof(k->ref.id));
	k->ref.inc = m->inc;
	k->since_ms = a->now_ms;
	k->seen = true;
	say(a, "member '%s' (incarnation %016" PRIx64 ") lost its "
	    "registration but may be the last complete holder of %zu "
	    "range%s: kept in the configuration, its keys unavailable, until "
	    "it registers again, an operator drains it (recstore-ctl drain "
	    "--force %s: rows only it held are lost)%s", m->id, m->inc,
	    ranges, ranges == 1 ? "" : "s", m->id,
	    a->keep_ms ? ", or the keep timeout passes" : "");
}

/*
 * One decision with the kept members timed: those kept longer than
 * keep_ms are passed as forgotten (they go down, and what only they held
 * is lost: said once), those no longer kept are dropped.
 */
static int decide(struct memb_agent *a, int64_t now_ms, uint64_t *epoch)
{
	struct memb_policy p = a->policy;
	size_t nf = 0, j = 0;
	int ret;

	if (a->nkept && !a->forget &&
	    !(a->forget = calloc(MEMB_MAX_NODES, sizeof(*a->forget))))
		return rs_seterr(-ENOMEM, "coord: out of memory");
	for (size_t i = 0; i < a->nkept; i++) {
		struct agent_kept *k = &a->kept[i];

		/* one past its time stays listed until a configuration
		 * without it is written */
		k->late = a->keep_ms && now_ms - k->since_ms >= a->keep_ms;
		k->seen = k->late;
		if (k->late)
			a->forget[nf++] = k->ref;
	}
	p.forget = a->forget;
	p.nforget = nf;
	p.on_kept = kept_one;
	p.kept_arg = a;
	a->now_ms = now_ms;
	ret = memb_decide_from(a->c, a->cluster, &p, &a->followed, epoch);
	if (ret < 0 || ret == MEMB_DECIDE_REGRESSED)
		return ret;
	for (size_t i = 0; ret == 1 && i < nf; i++)
		say(a, "member '%s' (incarnation %016" PRIx64 ") put down "
		    "after %" PRId64 " s without registration (keep timeout): "
		    "rows only it held are lost", a->forget[i].id,
		    a->forget[i].inc, a->keep_ms / 1000);
	for (size_t i = 0; i < a->nkept; i++)
		if (a->kept[i].seen && !(a->kept[i].late && ret == 1))
			a->kept[j++] = a->kept[i];
	a->nkept = j;
	return ret;
}

int memb_agent_tick(struct memb_agent *a, int64_t now_ms)
{
	struct memb_config cfg;
	int64_t mod_rev, rev, sent;
	uint64_t epoch;
	int ret;

	if ((ret = ensure_lease(a, now_ms)) || (ret = ensure_registered(a)))
		return ret;
	if (a->decide && (ret = ensure_decider(a)))
		return ret;
	if (atomic_load(&a->decider) && !atomic_load(&a->regressed)) {
		ret = decide(a, now_ms, &epoch);
		if (ret < 0)
			return ret;
		if (ret == 1)
			say(a, "configuration epoch %" PRIu64 " written",
			    epoch);
	}
	/* every node follows the configuration's epoch (fencing builds on
	 * it: docs/replication.md) */
	sent = (int64_t)rs_mono_ms();
	if ((ret = memb_read_config(a->c, a->cluster, &cfg, &mod_rev, &rev)))
		return ret;
	if (atomic_load(&a->regressed)) {
		if (cfg.recovered >= a->followed.epoch &&
		    cfg.epoch > a->followed.epoch &&
		    !(ret = recovered(a, &cfg)))
			ret = follow(a, &cfg);
	} else if (memb_config_regressed(&cfg, &a->followed)) {
		regressed(a, &cfg);
	} else if (cfg.epoch > a->followed.epoch) {
		ret = follow(a, &cfg);
	}
	/* after following: a node vouches for a configuration only once it
	 * follows it */
	if (!ret && a->read_ms)
		atomic_store(a->read_ms, sent);
	atomic_store(&a->rev, rev);
	memb_config_free(&cfg);
	return ret;
}

uint64_t memb_agent_regressed(const struct memb_agent *a)
{
	return atomic_load(&a->regressed);
}

int64_t memb_agent_rev(const struct memb_agent *a)
{
	return atomic_load(&a->rev);
}

bool memb_agent_is_decider(const struct memb_agent *a)
{
	return atomic_load(&a->decider);
}

uint64_t memb_agent_epoch(const struct memb_agent *a)
{
	return atomic_load(&a->epoch);
}

uint64_t memb_agent_inc(const struct memb_agent *a)
{
	return a->self.inc;
}

/* After a failure: retry in a second, or sooner when a keepalive falls
 * due sooner (a third of the TTL), so that a failed round never costs
 * the lease. */
static int64_t retry_ms(const struct memb_agent *a)
{
	int64_t third = a->lease_s * 1000 / 3;

	return third < AGENT_RETRY_MS ? third : AGENT_RETRY_MS;
}

/* Log transitions between working and failing, and a failing state once a
 * minute: never a line per retry. */
static void report(struct memb_agent *a, int ret, int64_t now)
{
	if (!ret) {
		if (a->failing)
			say(a, "store reachable again (%u attempt%s failed)",
			    a->fails, a->fails > 1 ? "s" : "");
		a->failing = false;
		return;
	}
	a->fails = a->failing ? a->fails + 1 : 1;
	if (!a->failing || now - a->fail_log_ms >= AGENT_FAIL_LOG_MS) {
		say(a, "%s (%s); attempt %u failed, the node keeps serving "
		    "and retries every %" PRId64 " ms", rs_errormsg(),
		    rs_strerror(ret), a->fails, retry_ms(a));
		a->fail_log_ms = now;
	}
	a->failing = true;
}

static void sleep_ms(struct memb_agent *a, int64_t ms)
{
	struct timespec dl;

	rs_deadline_ms(CLOCK_MONOTONIC, ms, &dl);
	pthread_mutex_lock(&a->lock);
	while (!atomic_load(&a->stop) &&
	       pthread_cond_timedwait(&a->cv, &a->lock, &dl) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&a->lock);
}

static void *agent_main(void *arg)
{
	struct memb_agent *a = arg;

	while (!atomic_load(&a->stop)) {
		int64_t now = (int64_t)rs_mono_ms(), due;
		int ret = memb_agent_tick(a, now);

		if (!ret) {
			due = a->ka_ms + a->lease_s * 1000 / 3 -
			      (int64_t)rs_mono_ms();
			if (due < 100)
				due = 100;
			ret = coord_wait(a->c, a->prefix, memb_agent_rev(a),
					 (int)due, NULL);
			ret = ret > 0 ? 0 : ret;
		}
		report(a, ret, (int64_t)rs_mono_ms());
		if (ret)
			sleep_ms(a, retry_ms(a));
	}
	return NULL;
}

int memb_agent_start(struct memb_agent *a)
{
	int ret = pthread_create(&a->thr, NULL, agent_main, a);

	if (ret)
		return rs_seterr(-ret, "coord: pthread_create: %s",
				 strerror(ret));
	a->started = true;
	return 0;
}

void memb_agent_free(struct memb_agent **ap)
{
	struct memb_agent *a = ap ? *ap : NULL;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	atomic_store(&a->stop, true);
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->lock);
	if (a->started)
		pthread_join(a->thr, NULL);
	/* a clean leave: the registration (and the decider key) go now,
	 * not a TTL later */
	if (a->lease && coord_lease_revoke(a->c, a->lease) == 0)
		say(a, "left cluster '%s' (lease revoked)", a->cluster);
	a->c->cancel = NULL;
	memb_config_free(&a->followed);
	free(a->kept);
	free(a->forget);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->lock);
	free(a);
	*ap = NULL;
}
