/*
 * srv_memory.c - the node's worst-case memory, held against the machine.
 *
 * A config is refused (srv_config_validate) when the memory it may come to
 * use exceeds what the machine has, instead of the node failing, or the
 * kernel's OOM killer ending it, the day the last connection arrives. The
 * worst case (struct srv_mem_budget), with R = the reply bound
 * max(max_message_bytes, SRV_REPLY_MIN_BYTES):
 *   receive   max_message_bytes x (credits + 1) x max_conns  (registered:
 *             the listener's shared receive pool, one chunk per conn)
 *   send      credits x R x max_conns  (registered: each conn's send ring,
 *             one slot per credit, as large as the replies it carries)
 *   parked    (credits + 1) x R x max_conns  (replies waiting for a credit,
 *             server.c)
 *   scratch   workers x (R + 6 x max_message_bytes + E)  (reply buffer
 *             and the request scratch: keys, widened rows, coalescing,
 *             statuses; E, a cluster member's only: the keys a write's
 *             inserts evicted, 8 x (4 n + 64) bytes for a batch of n
 *             keys, n at most max_batch_keys and max_message_bytes / 8,
 *             srv_handlers.c evicted_sink_begin)
 *   pool      storage.size  (registered: the slabs are READ by clients)
 * Everything must fit the machine's memory (MemAvailable, or the physical
 * pages when /proc/meminfo cannot be read); the registered part must also
 * fit RLIMIT_MEMLOCK unless the process may lock any amount (CAP_IPC_LOCK).
 * The message says what the config needs and what the machine has.
 *
 * The machine is probed (srv_machine_probe) unless a test installed its
 * own numbers (srv_machine_set), so tests need no particular host.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "server/config.h"
#include "server/srv_internal.h"

static struct srv_machine machine_override;
static bool machine_overridden;

void srv_machine_set(const struct srv_machine *m)
{
	machine_overridden = m != NULL;
	if (m)
		machine_override = *m;
}

static uint64_t meminfo_available(void)
{
	char line[256];
	unsigned long long kb;
	uint64_t v = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
			v = (uint64_t)kb * 1024;
			break;
		}
	fclose(f);
	return v;
}

/* CAP_IPC_LOCK in the effective set: no memlock limit applies. */
static bool can_lock_any(void)
{
	char line[256];
	unsigned long long caps;
	bool yes = false;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			yes = caps & (1ull << 14);
			break;
		}
	fclose(f);
	return yes;
}

void srv_machine_probe(struct srv_machine *m)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	struct rlimit rl;

	if (machine_overridden) {
		*m = machine_override;
		return;
	}
	memset(m, 0, sizeof(*m));
	if (pages > 0 && psz > 0)
		m->phys_bytes = (uint64_t)pages * (uint64_t)psz;
	m->avail_bytes = meminfo_available();
	m->memlock_bytes = UINT64_MAX;
	if (!can_lock_any() && !getrlimit(RLIMIT_MEMLOCK, &rl) &&
	    rl.rlim_cur != RLIM_INFINITY)
		m->memlock_bytes = (uint64_t)rl.rlim_cur;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* A cluster member's worker buffer of the keys one write evicted (the
 * sink of srv_handlers.c: 4 per key of the batch and 64), at its largest:
 * a batch's keys are bounded by max_batch_keys and take 8 bytes each of
 * a message. */
static uint64_t evicted_bytes(const struct srv_config *o)
{
	uint64_t n = o->limits.max_batch_keys, by_msg =
		o->limits.max_message_bytes / 8;

	if (!o->coord_endpoints)
		return 0;
	n = n < by_msg ? n : by_msg;
	return 8 * (SRV_EVICTED_PER_KEY * n + SRV_EVICTED_SPARE);
}

void srv_config_budget(const struct srv_config *o, struct srv_mem_budget *b)
{
	uint64_t msg = o->limits.max_message_bytes;
	uint64_t reply = msg > SRV_REPLY_MIN_BYTES ? msg : SRV_REPLY_MIN_BYTES;
	uint64_t conns = o->max_conns, cr = o->credits;
	struct srv_config d;

	memset(b, 0, sizeof(*b));
	b->recv = msg * (cr + 1) * conns;
	b->send = cr * reply * conns;
	b->parked = (cr + 1) * reply * conns;
	b->scratch = (uint64_t)o->workers * (reply + 6 * msg +
					     evicted_bytes(o));
	b->pool = o->storage_bytes;
	if (!b->pool) {
		srv_config_defaults(&d);
		b->pool = d.storage_bytes;
	}
	b->registered = sat_add(sat_add(b->recv, b->send), b->pool);
	b->total = sat_add(sat_add(b->registered, b->parked), b->scratch);
}

static double mib(uint64_t v)
{
	return (double)v / (1024.0 * 1024.0);
}

int srv_config_check_memory(const struct srv_config *o,
			  const struct srv_machine *m)
{
	uint64_t have = m->avail_bytes ? m->avail_bytes : m->phys_bytes;
	struct srv_mem_budget b;

	srv_config_budget(o, &b);
	if (have && b.total > have)
		return rs_seterr(RS_E_INVAL, "memory: the config may need "
				 "%.0f MiB (receive %.0f + send %.0f + parked "
				 "%.0f + scratch %.0f + pool %.0f: "
				 "max_message_bytes x (credits+1) x "
				 "max_connections, ...), the machine has %.0f "
				 "MiB available; lower max_message_bytes, "
				 "credits, max_connections or storage.size",
				 mib(b.total), mib(b.recv), mib(b.send),
				 mib(b.parked), mib(b.scratch), mib(b.pool),
				 mib(have));
	if (b.registered > m->memlock_bytes)
		return rs_seterr(RS_E_INVAL, "memory: the config may register "
				 "%.0f MiB (receive %.0f + send %.0f + pool "
				 "%.0f), RLIMIT_MEMLOCK allows %.0f MiB; raise "
				 "it (ulimit -l, LimitMEMLOCK=) or lower "
				 "max_message_bytes, credits, max_connections "
				 "or storage.size", mib(b.registered),
				 mib(b.recv), mib(b.send), mib(b.pool),
				 mib(m->memlock_bytes));
	return 0;
}

void srv_log_memory(const struct srv_config *o)
{
	struct srv_machine m;
	struct srv_mem_budget b;
	char lock[32] = "unlimited";

	srv_machine_probe(&m);
	srv_config_budget(o, &b);
	if (m.memlock_bytes != UINT64_MAX)
		snprintf(lock, sizeof(lock), "%.0f MiB", mib(m.memlock_bytes));
	srv_log("memory: worst case %.0f MiB (registered %.0f: receive %.0f, "
		"send %.0f, pool %.0f; parked replies %.0f, worker scratch "
		"%.0f); machine: %.0f MiB available, memlock %s",
		mib(b.total), mib(b.registered), mib(b.recv), mib(b.send),
		mib(b.pool), mib(b.parked), mib(b.scratch),
		mib(m.avail_bytes ? m.avail_bytes : m.phys_bytes), lock);
}
