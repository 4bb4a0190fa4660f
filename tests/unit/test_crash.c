/*
 * test_crash.c - kill -9 a process that writes a file-backed pool, reopen,
 * check that every acknowledged write survived and nothing torn is
 * visible. Several rounds on the same file: each round recovers what the
 * previous kill left (a kill may also land inside the child's own
 * recovery, which must therefore be restartable).
 *
 * The child opens the pool and runs inserts, in-place updates (with
 * optimizer state) and deletes. Before each operation it appends a "begin"
 * record to an acknowledgement log in shared memory, after each success
 * an "ack" record (plain stores and a release counter, not a pipe: no
 * system call between operations, so the kill lands inside operations).
 * The parent SIGKILLs the child after a random delay, then reads the log,
 * reopens the pool itself and checks, for every key it ever saw:
 *   - acknowledged present with generation g: readable, every element and
 *     the optimizer state say g (one write, not a mix);
 *   - acknowledged deleted: absent;
 *   - the one operation in flight at the kill: old or new state, either;
 *   - no key in the table that was never inserted, no row failing its
 *     checksum, the index consistent.
 * Rounds alternate between flushing with pmem_msync (the path used on a
 * non-pmem file) and SLAB_F_NOSYNC (same write orders, no flushes: what
 * a process crash needs); SIGKILL does not lose the page cache, so both
 * must pass. RS_CRASH_ROUNDS overrides the number of rounds (12).
 * Files go to $TMPDIR (default /tmp).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "value/slab_int.h" /* pet handle for pet_verify */

#define DIM 32
#define SFLOATS 2
#define CAPACITY 40000
#define MAP_SLOTS (1u << 20)

enum { OP_INSERT = 1, OP_UPDATE = 2, OP_DELETE = 3 };
enum { PH_BEGIN = 0, PH_ACK = 1 };

struct rec {
	uint64_t key;
	uint32_t gen;
	uint8_t op;
	uint8_t phase;
	uint16_t pad;
};

struct entry {
	uint64_t key;
	uint32_t gen;
	uint8_t used;
	uint8_t present;
};

#define ACKLOG_MAX (1u << 21)

/* Shared between the child (appends) and the parent (reads, after the
 * child is dead). */
struct acklog {
	_Atomic uint64_t n;
	struct rec r[ACKLOG_MAX];
};

static char pool_path[256];
static struct acklog *acklog;
static struct entry *model;
static struct rec inflight;
static int have_inflight;
static uint64_t n_acks;
static uint32_t max_gen; /* generations stay below 2^24: exact floats */

static struct entry *model_get(uint64_t key, int create)
{
	uint64_t h = key * 0x9E3779B97F4A7C15ULL;

	for (uint32_t i = (uint32_t)(h >> 44);; i = (i + 1) % MAP_SLOTS) {
		struct entry *e = &model[i];

		if (e->used && e->key == key)
			return e;
		if (!e->used) {
			if (!create)
				return NULL;
			e->used = 1;
			e->key = key;
			return e;
		}
	}
}

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* ---- child ---- */

static void send_rec(uint64_t key, uint32_t gen, int op, int phase)
{
	uint64_t n = atomic_load_explicit(&acklog->n, memory_order_relaxed);

	while (n == ACKLOG_MAX) /* full: wait for the kill */
		pause();
	acklog->r[n] = (struct rec){key, gen, (uint8_t)op, (uint8_t)phase, 0};
	atomic_store_explicit(&acklog->n, n + 1, memory_order_release);
}

struct keyset {
	uint64_t *k;
	uint64_t n;
};

static int collect(void *arg, uint64_t key, uint32_t row)
{
	struct keyset *ks = arg;

	ks->k[ks->n++] = key;
	return 0;
}

static void child_main(int round, unsigned flags, uint64_t seed,
		       uint32_t gen_base)
{
	struct slab_store_cfg cfg = {.path = pool_path, .flags = flags};
	struct keyset ks = {malloc(CAPACITY * sizeof(uint64_t)), 0};
	float val[DIM], state[SFLOATS];
	struct slab_store *st;
	struct slab_table *t;

	if (!ks.k || slab_store_open(&st, &cfg))
		_exit(10);
	t = slab_table_get(st, "crash");
	if (!t || slab_iterate(t, collect, &ks))
		_exit(11);
	for (uint32_t n = 0;; n++) {
		uint32_t gen = gen_base + n;
		uint64_t x = rnd(&seed) % 100, key, i = 0;
		int op, rc;

		if (ks.n == 0 || (x < 50 && ks.n < CAPACITY * 8 / 10))
			op = OP_INSERT;
		else if (x < 85)
			op = OP_UPDATE;
		else
			op = OP_DELETE;
		if (op == OP_INSERT) {
			key = ((uint64_t)(round + 1) << 40) | n;
			if (round == 0 && n < 2)
				key = n ? UINT64_MAX : 0;
		} else {
			i = rnd(&seed) % ks.n;
			key = ks.k[i];
		}
		for (int j = 0; j < DIM; j++)
			val[j] = (float)gen;
		state[0] = (float)gen;
		state[1] = (float)(key & 0xFFFF);
		send_rec(key, gen, op, PH_BEGIN);
		if (op == OP_INSERT) {
			rc = slab_insert(t, key, val, state, NULL);
			if (rc == 0)
				ks.k[ks.n++] = key;
		} else if (op == OP_UPDATE) {
			struct slab_wr w = {.val = val, .state = state};

			rc = slab_write_begin(t, key, &w);
			if (rc)
				_exit(12); /* only this process writes */
			for (int j = 0; j < DIM; j++)
				w.val[j] = (float)gen;
			w.state[0] = (float)gen;
			rc = slab_write_commit(&w);
		} else {
			rc = slab_delete(t, key);
			if (rc == 0)
				ks.k[i] = ks.k[--ks.n];
		}
		if (rc == 0)
			send_rec(key, gen, op, PH_ACK);
		else if (rc != RS_E_FULL)
			_exit(13);
	}
}

/* ---- parent ---- */

static void apply(const struct rec *r)
{
	struct entry *e;

	if (r->gen > max_gen)
		max_gen = r->gen;
	if (r->phase == PH_BEGIN) {
		inflight = *r; /* a previous unacked op failed: no effect */
		have_inflight = 1;
		return;
	}
	n_acks++;
	e = model_get(r->key, 1);
	e->present = r->op != OP_DELETE;
	if (r->op != OP_DELETE)
		e->gen = r->gen;
	have_inflight = 0;
}

static void read_acklog(void)
{
	uint64_t n = atomic_load_explicit(&acklog->n, memory_order_acquire);

	for (uint64_t i = 0; i < n; i++)
		apply(&acklog->r[i]);
}

struct check_ctx {
	struct slab_table *t;
	uint64_t n;
	int bad;
};

static int check_row(void *arg, uint64_t key, uint32_t row)
{
	struct check_ctx *c = arg;
	struct entry *e = model_get(key, 0);
	uint8_t raw[ROW_HDR_BYTES + DIM * 4 + 64];
	int ok_inflight = have_inflight && inflight.key == key &&
			  inflight.op == OP_INSERT;

	c->n++;
	slab_read_row(c->t, row, raw);
	if (row_validate(raw, &c->t->rg, row, key, NULL))
		c->bad++; /* torn or foreign row visible */
	if (!ok_inflight && (!e || !e->present))
		c->bad++; /* a key nobody (acknowledged) inserted */
	return 0;
}

/* Read key; 0 and its generation, or RS_E_NOTFOUND. Fails the test on a
 * row that is not one single write. */
static int read_gen(struct slab_table *t, uint64_t key, uint32_t *gen)
{
	float v[DIM], s[SFLOATS];
	int rc = slab_read(t, key, v, NULL);

	if (rc)
		return rc;
	for (int j = 1; j < DIM; j++)
		assert_true(v[j] == v[0]);
	assert_int_equal(slab_read_state(t, key, s), 0);
	assert_true(s[0] == v[0]); /* state from the same write */
	assert_true(s[1] == (float)(key & 0xFFFF));
	*gen = (uint32_t)v[0];
	return 0;
}

struct slab_store_stats_acc {
	uint64_t replayed, reclaimed, torn_rows, torn_buckets, dropped;
	uint64_t checked_keys;
};

static void verify(struct slab_store_stats_acc *acc)
{
	struct slab_store_cfg cfg = {.path = pool_path};
	struct check_ctx cc = {0};
	struct slab_table_stats ts;
	struct slab_store *st;
	uint64_t present = 0;
	uint32_t gen;

	if (slab_store_open(&st, &cfg))
		fail_msg("reopen: %s", rs_errormsg());
	cc.t = slab_table_get(st, "crash");
	assert_non_null(cc.t);
	slab_table_stats(cc.t, &ts);
	acc->replayed += ts.recovery.log_replayed;
	acc->reclaimed += ts.recovery.rows_reclaimed;
	acc->torn_rows += ts.recovery.rows_torn;
	acc->torn_buckets += ts.recovery.index.torn_buckets;
	acc->dropped += ts.recovery.index.dropped;

	for (uint32_t i = 0; i < MAP_SLOTS; i++) {
		struct entry *e = &model[i];
		int fl, rc;

		if (!e->used)
			continue;
		fl = have_inflight && inflight.key == e->key;
		rc = read_gen(cc.t, e->key, &gen);
		acc->checked_keys++;
		if (!fl) {
			if (e->present) {
				assert_int_equal(rc, 0);
				assert_int_equal(gen, e->gen);
			} else {
				assert_int_equal(rc, RS_E_NOTFOUND);
			}
		} else if (rc == 0) { /* old or new */
			assert_true((e->present && gen == e->gen) ||
				    (inflight.op != OP_DELETE &&
				     gen == inflight.gen));
		} else {
			assert_int_equal(rc, RS_E_NOTFOUND);
			assert_true(!e->present || inflight.op == OP_DELETE);
		}
		/* adopt what recovery decided for the in-flight key */
		if (fl) {
			e->present = rc == 0;
			if (rc == 0)
				e->gen = gen;
		}
		present += rc == 0;
	}
	if (have_inflight && !model_get(inflight.key, 0) &&
	    inflight.op == OP_INSERT) {
		struct entry *e = model_get(inflight.key, 1);
		int rc = read_gen(cc.t, inflight.key, &gen);

		if (rc == 0)
			assert_int_equal(gen, inflight.gen);
		else
			assert_int_equal(rc, RS_E_NOTFOUND);
		e->present = rc == 0;
		e->gen = gen;
		present += rc == 0;
	}
	assert_int_equal(slab_iterate(cc.t, check_row, &cc), 0);
	assert_int_equal(cc.bad, 0);
	assert_int_equal(cc.n, present);
	slab_table_stats(cc.t, &ts);
	assert_int_equal(ts.live, present);
	assert_int_equal(pet_verify(cc.t->pet, NULL), 0);
	have_inflight = 0;
	slab_store_close(&st);
}

static void kill_and_recover(void **state)
{
	const char *rs = getenv("RS_CRASH_ROUNDS");
	const char *d = getenv("TMPDIR");
	int rounds = rs ? atoi(rs) : 12;
	struct slab_store_cfg cfg = {.size = 32ULL << 20,
				     .flags = SLAB_F_SPARSE};
	struct slab_table_cfg tc = {.name = "crash", .dim = DIM,
				    .capacity = CAPACITY,
				    .state_floats = SFLOATS};
	struct slab_store_stats_acc acc = {0};
	struct slab_store *st;
	uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();

	if (rounds < 1)
		rounds = 12;
	snprintf(pool_path, sizeof(pool_path), "%s/rs-test-crash-%d.pool",
		 d && *d ? d : "/tmp", (int)getpid());
	unlink(pool_path);
	cfg.path = pool_path;
	model = calloc(MAP_SLOTS, sizeof(*model));
	assert_non_null(model);
	acklog = mmap(NULL, sizeof(*acklog), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(acklog != MAP_FAILED);
	assert_int_equal(slab_store_open(&st, &cfg), 0);
	assert_int_equal(slab_table_create(st, &tc, NULL), 0);
	slab_store_close(&st);
	print_message("seed %llu, %d rounds, pool %s\n",
		      (unsigned long long)seed, rounds, pool_path);

	for (int round = 0; round < rounds && max_gen < (1u << 24) - ACKLOG_MAX;
	     round++) {
		unsigned flags = round % 3 == 1 ? 0 : SLAB_F_NOSYNC;
		/* msync rounds are slow (about 1 ms per flush): longer;
		 * every 4th round dies within 3 ms, in or near the
		 * child's own recovery */
		double delay_ms = (double)(rnd(&seed) % 150) +
				  (flags ? 5 : 100);

		if (round % 4 == 3)
			delay_ms = (double)(rnd(&seed) % 3000) / 1000;
		uint64_t cseed = rnd(&seed);
		struct timespec ts = {0, (long)(delay_ms * 1e6)};
		int status;
		pid_t pid;

		atomic_store(&acklog->n, 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			child_main(round, flags, cseed, max_gen + 1);
			_exit(1);
		}
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFSIGNALED(status))
			fail_msg("child exited with %d", WEXITSTATUS(status));
		read_acklog();
		verify(&acc);
		if (getenv("RS_CRASH_VERBOSE"))
			print_message("round %d (%s, %.0f ms): %llu acks, "
				      "%llu replays, %llu reclaimed, %llu "
				      "torn buckets\n", round,
				      flags ? "nosync" : "msync", delay_ms,
				      (unsigned long long)n_acks,
				      (unsigned long long)acc.replayed,
				      (unsigned long long)acc.reclaimed,
				      (unsigned long long)acc.torn_buckets);
	}
	print_message("recovery over %d kills: %llu log replays, %llu rows "
		      "reclaimed (%llu torn), %llu torn buckets, %llu slots "
		      "dropped; %llu acknowledged ops, %llu key checks\n",
		      rounds, (unsigned long long)acc.replayed,
		      (unsigned long long)acc.reclaimed,
		      (unsigned long long)acc.torn_rows,
		      (unsigned long long)acc.torn_buckets,
		      (unsigned long long)acc.dropped,
		      (unsigned long long)n_acks,
		      (unsigned long long)acc.checked_keys);
	unlink(pool_path);
	munmap(acklog, sizeof(*acklog));
	free(model);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kill_and_recover),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
