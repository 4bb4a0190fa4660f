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
 * (The model and this check are in crash_check.h, shared with
 * test_powerfail, which checks power-failure images the same way.)
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

#include "crash_check.h"

#define DIM CRASH_DIM
#define SFLOATS CRASH_SFLOATS
#define CAPACITY 40000
#define MAP_SLOTS (1u << 20)

#define ACKLOG_MAX (1u << 21)

/* Shared between the child (appends) and the parent (reads, after the
 * child is dead). */
struct acklog {
	_Atomic uint64_t n;
	struct crash_rec r[ACKLOG_MAX];
};

static char pool_path[256];
static struct acklog *acklog;
static struct crash_model model;

/* ---- child ---- */

static void send_rec(uint64_t key, uint32_t gen, int op, int phase)
{
	uint64_t n = atomic_load_explicit(&acklog->n, memory_order_relaxed);

	while (n == ACKLOG_MAX) /* full: wait for the kill */
		pause();
	acklog->r[n] = (struct crash_rec){.key = key, .gen = gen, .sgen = gen,
					  .op = (uint8_t)op,
					  .phase = (uint8_t)phase};
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
		uint64_t x = crash_rnd(&seed) % 100, key, i = 0;
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
			i = crash_rnd(&seed) % ks.n;
			key = ks.k[i];
		}
		crash_fill(key, gen, gen, val, state);
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

static void read_acklog(void)
{
	uint64_t n = atomic_load_explicit(&acklog->n, memory_order_acquire);

	for (uint64_t i = 0; i < n; i++)
		crash_model_apply(&model, &acklog->r[i]);
}

static void verify(struct crash_stats *acc)
{
	struct slab_store_cfg cfg = {.path = pool_path};
	struct slab_store *st;
	struct slab_table *t;

	if (slab_store_open(&st, &cfg))
		fail_msg("reopen: %s", rs_errormsg());
	t = slab_table_get(st, "crash");
	assert_non_null(t);
	crash_stats_add(acc, t);
	crash_verify_table(&model, t, acc);
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
	struct crash_stats acc = {0};
	struct slab_store *st;
	uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();

	if (rounds < 1)
		rounds = 12;
	snprintf(pool_path, sizeof(pool_path), "%s/rs-test-crash-%d.pool",
		 d && *d ? d : "/tmp", (int)getpid());
	unlink(pool_path);
	cfg.path = pool_path;
	crash_model_init(&model, MAP_SLOTS);
	acklog = mmap(NULL, sizeof(*acklog), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(acklog != MAP_FAILED);
	assert_int_equal(slab_store_open(&st, &cfg), 0);
	assert_int_equal(slab_table_create(st, &tc, NULL), 0);
	slab_store_close(&st);
	print_message("seed %llu, %d rounds, pool %s\n",
		      (unsigned long long)seed, rounds, pool_path);

	for (int round = 0;
	     round < rounds && model.max_gen < (1u << 24) - ACKLOG_MAX;
	     round++) {
		unsigned flags = round % 3 == 1 ? 0 : SLAB_F_NOSYNC;
		/* msync rounds are slow (about 1 ms per flush): longer;
		 * every 4th round dies within 3 ms, in or near the
		 * child's own recovery */
		double delay_ms = (double)(crash_rnd(&seed) % 150) +
				  (flags ? 5 : 100);

		if (round % 4 == 3)
			delay_ms = (double)(crash_rnd(&seed) % 3000) / 1000;
		uint64_t cseed = crash_rnd(&seed);
		struct timespec ts = {0, (long)(delay_ms * 1e6)};
		int status;
		pid_t pid;

		atomic_store(&acklog->n, 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			child_main(round, flags, cseed, model.max_gen + 1);
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
				      (unsigned long long)model.n_acks,
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
		      (unsigned long long)model.n_acks,
		      (unsigned long long)acc.checked_keys);
	unlink(pool_path);
	munmap(acklog, sizeof(*acklog));
	free(model.map);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kill_and_recover),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
