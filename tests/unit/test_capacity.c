/*
 * test_capacity.c - the space of the slab pool: what a table needs
 * (slab_table_footprint, the arithmetic of docs/config.md), the largest
 * capacity that fits (slab_table_fit), the RS_E_FULL message (bytes needed
 * and free), and reuse of a dropped table's space: create / drop cycles
 * that fill most of a DRAM or file pool, across reopens of the file, after
 * torn directory entries (a create or drop cut short), and under kill -9
 * of a process cycling tables in a file pool (the test_crash.c way: every
 * acknowledged create and drop holds after the kill, and the free space
 * plus the live tables' extents always make up the whole pool).
 * Files go to $TMPDIR (default /tmp).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "index/pet_sync.h"
#include "value/optimizer.h"
#include "pool.h"
#include "value/slab_int.h" /* white-box: directory entries */

#define MiB (1ULL << 20)
/* No flushes: every write order stays, which is what a process crash (and
 * a close and reopen) tests; the flushes only cost disk time here. */
#define FILE_FLAGS (SLAB_F_SPARSE | SLAB_F_NOSYNC)

POOL_PATH_FIXTURES("capacity")

static struct slab_store_info info_of(struct slab_store *st)
{
	struct slab_store_info si;

	slab_store_info(st, &si);
	return si;
}

/* A table of `kind`'s optimizer state (dim 16 unless dim). */
static struct slab_table_cfg cfg_of(const char *name, uint32_t dim,
				    uint32_t kind, uint64_t cap)
{
	struct slab_table_cfg c = {
		.name = name, .dim = dim, .capacity = cap,
		.state_floats = (uint32_t)optim_state_floats(kind, dim),
	};

	return c;
}

/* ---- arithmetic ---- */

#define A2M(x) (((x) + (2 * MiB) - 1) / (2 * MiB) * (2 * MiB))
#define A4K(x) (((x) + 4095) / 4096 * 4096)

/* The formula of docs/config.md, for the documented example: Adam, dim
 * 16, fp32, 2^20 rows (the client's old default capacity), DRAM. */
static void footprint_arithmetic(void **state)
{
	struct slab_table_cfg c = cfg_of("t", 16, OPTIM_ADAM, 1ULL << 20);
	uint64_t cap = c.capacity, stride = 128, sbytes = 192;
	uint64_t nb = (cap * 100 + 8 * 85 - 1) / (8 * 85); /* ceil */
	uint64_t want = A2M(4096 + A4K(128 + nb * 128) + A4K(cap * stride) +
			    A4K(cap * sbytes));

	(void)state;
	assert_int_equal(c.state_floats, 33); /* m, v, step */
	assert_int_equal(slab_table_footprint(&c, false), want);
	assert_int_equal(want, 356515840ULL); /* 340 MiB */
	/* it does not fit the default storage (256 MiB minus the 2 MiB
	 * header): the bug a capacity-0 create now avoids */
	assert_true(want > 256 * MiB - SLAB_DATA_OFF);
	/* file pools add the redo log: 256 x align64(64 + 128 + 132) */
	assert_int_equal(slab_table_footprint(&c, true),
			 A2M(4096 + A4K(128 + nb * 128) + A4K(cap * stride) +
			     A4K(cap * sbytes) + A4K(256 * 384)));
	/* SGD: no state */
	c = cfg_of("t", 16, OPTIM_SGD, 1ULL << 20);
	assert_int_equal(slab_table_footprint(&c, false),
			 A2M(4096 + A4K(128 + nb * 128) + A4K(cap * stride)));
	/* no overflow at the bounds: the largest capacity and dim give a
	 * large but exact footprint, or a refusal */
	c = cfg_of("t", ROW_MAX_DIM, OPTIM_ADAM, UINT32_MAX - 1);
	assert_true(slab_table_footprint(&c, true) > (UINT32_MAX - 1ULL) *
							     ROW_MAX_DIM * 4);
	c.capacity = UINT32_MAX;
	assert_int_equal(slab_table_footprint(&c, true), 0);
}

static void fit_is_the_largest(void **state)
{
	static const uint32_t kinds[] = { OPTIM_SGD, OPTIM_ADAGRAD,
					   OPTIM_ADAM };
	static const uint32_t dims[] = { 1, 16, 300 };
	static const uint64_t budgets[] = { 2 * MiB, 30 * MiB, 254 * MiB,
					    4096 * MiB };

	(void)state;
	for (int fb = 0; fb < 2; fb++)
		for (size_t k = 0; k < 3; k++)
			for (size_t d = 0; d < 3; d++)
				for (size_t b = 0; b < 4; b++) {
					struct slab_table_cfg c = cfg_of(
						"t", dims[d], kinds[k],
						1ULL << 24);
					uint64_t fit = slab_table_fit(
						&c, fb, budgets[b]);

					assert_true(fit >= 1);
					c.capacity = fit;
					assert_true(slab_table_footprint(&c, fb)
						    <= budgets[b]);
					if (fit == 1ULL << 24)
						continue;
					c.capacity = fit + 1;
					assert_true(slab_table_footprint(&c, fb)
						    > budgets[b]);
				}
	/* capped by the capacity asked; 0 when one row does not fit */
	{
		struct slab_table_cfg c = cfg_of("t", 16, OPTIM_SGD, 1000);

		assert_int_equal(slab_table_fit(&c, false, 1ULL << 40), 1000);
		assert_int_equal(slab_table_fit(&c, false, 2 * MiB - 1), 0);
	}
}

/* ---- RS_E_FULL says what is needed and what is free ---- */

static uint64_t num_after(const char *msg, const char *tag)
{
	const char *p = strstr(msg, tag);

	if (!p)
		fail_msg("'%s' lacks '%s'", msg, tag);
	return strtoull(p + strlen(tag), NULL, 10);
}

static void full_says_needed_and_free(void **state)
{
	struct slab_store *st = tl_pool_open(NULL, 32 * MiB, 0);
	struct slab_table_cfg big = cfg_of("big", 16, OPTIM_ADAM, 1ULL << 20);
	struct slab_table_cfg a = cfg_of("a", 16, OPTIM_SGD, 1000);
	struct slab_table *t;
	const char *m;

	(void)state;
	assert_int_equal(slab_table_create(st, &big, &t), RS_E_FULL);
	m = rs_errormsg();
	print_message("%s\n", m);
	assert_non_null(strstr(m, "table 'big' (1048576 rows)"));
	assert_int_equal(num_after(m, "needs "), 356515840ULL);
	assert_int_equal(num_after(m, "rows "), 134217728ULL);
	assert_int_equal(num_after(m, "optimizer state "), 201326592ULL);
	assert_int_equal(num_after(m, "; "), 30 * MiB);
	assert_int_equal(num_after(m, "storage size "), 32 * MiB);
	/* fragmented: three 2 MiB tables, the middle one dropped */
	assert_int_equal(slab_table_create(st, &a, NULL), 0);
	a.name = "b";
	assert_int_equal(slab_table_create(st, &a, NULL), 0);
	a.name = "c";
	assert_int_equal(slab_table_create(st, &a, NULL), 0);
	assert_int_equal(slab_table_drop(st, "b"), 0);
	assert_int_equal(info_of(st).free_bytes, 24 * MiB);
	assert_int_equal(info_of(st).free_total, 26 * MiB);
	big.capacity = slab_table_fit(&big, false, 26 * MiB);
	assert_int_equal(slab_table_create(st, &big, &t), RS_E_FULL);
	m = rs_errormsg();
	print_message("%s\n", m);
	assert_int_equal(num_after(m, "; "), 24 * MiB);
	assert_int_equal(num_after(m, "in one piece, "), 26 * MiB);
	/* the hole takes a table of its size again */
	a.name = "b2";
	assert_int_equal(slab_table_create(st, &a, NULL), 0);
	assert_int_equal(info_of(st).free_total, 24 * MiB);
	slab_store_close(&st);
}

/* ---- reuse ---- */

static void put_rows(struct slab_table *t, uint64_t base, unsigned n)
{
	float v[300];

	for (unsigned i = 0; i < n; i++) {
		for (uint32_t j = 0; j < slab_table_dim(t); j++)
			v[j] = (float)(base + i) + (float)j / 64;
		assert_int_equal(slab_insert(t, base + i, v, NULL, NULL), 0);
	}
}

static void check_rows(struct slab_table *t, uint64_t base, unsigned n)
{
	float v[300];

	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(slab_read(t, base + i, v, NULL), 0);
		assert_float_equal(v[1], (float)(base + i) + 1.0f / 64, 0);
	}
}

/* A table taking (nearly) all of `bytes`, shaped by round r. */
static struct slab_table_cfg big_cfg(const char *name, unsigned r, bool fb,
				     uint64_t bytes)
{
	static const uint32_t kinds[] = { OPTIM_ADAM, OPTIM_SGD, OPTIM_ADAGRAD,
					  OPTIM_ROWWISE_ADAGRAD };
	struct slab_table_cfg c = cfg_of(name, r % 3 ? 16 : 40, kinds[r % 4],
					 1ULL << 30);

	c.capacity = slab_table_fit(&c, fb, bytes);
	assert_true(c.capacity > 1000);
	return c;
}

static void dram_cycles(void **state)
{
	struct slab_store *st = tl_pool_open(NULL, 48 * MiB, 0);
	struct slab_table_cfg small = cfg_of("small", 8, OPTIM_SGD, 100);
	struct slab_table *s, *t;
	uint64_t free0;

	(void)state;
	assert_int_equal(slab_table_create(st, &small, &s), 0);
	put_rows(s, 1, 10);
	free0 = info_of(st).free_total;
	assert_int_equal(free0, 44 * MiB);
	for (unsigned r = 0; r < 12; r++) {
		char name[16];
		struct slab_table_cfg c;

		snprintf(name, sizeof(name), "big%u", r % 2);
		c = big_cfg(name, r, false, free0 - (r % 3) * 2 * MiB);
		assert_int_equal(slab_table_create(st, &c, &t), 0);
		assert_int_equal(info_of(st).free_total,
				 free0 - slab_table_footprint(&c, false));
		assert_true(info_of(st).free_total <= (r % 3) * 2 * MiB);
		put_rows(t, 1000 * r, 50);
		check_rows(t, 1000 * r, 50);
		assert_int_equal(slab_table_drop(st, name), 0);
		assert_int_equal(info_of(st).free_total, free0); /* no leak */
		assert_int_equal(info_of(st).free_bytes, free0);
	}
	check_rows(s, 1, 10);
	slab_store_close(&st);
}

/* Bytes of the READable range of t past its index that are not zero. */
static uint64_t readable_dirty(struct slab_table *t)
{
	struct slab_region ri, rd;
	uint64_t n = 0;

	slab_table_regions(t, &ri, NULL, &rd);
	for (size_t i = ri.len; i < rd.len; i++)
		n += ((uint8_t *)rd.addr)[i] != 0;
	return n;
}

/*
 * DRAM: a create does not clear its extent (the pages are fresh, or a
 * drop gave them back with MADV_DONTNEED and they read as zeros), yet no
 * byte of a dropped table shows through the next one; and when a release
 * failed (dram_dirty), the create clears what is there.
 */
static void dram_recreate_exposes_nothing(void **state)
{
	struct slab_store *st = tl_pool_open(NULL, 16 * MiB, 0);
	struct slab_table_cfg a = cfg_of("old", 40, OPTIM_ADAM, 20000);
	struct slab_table_cfg b = cfg_of("new", 16, OPTIM_SGD, 3000);
	struct slab_table *t;
	struct slab_region ri, rr, rd;

	(void)state;
	assert_int_equal(slab_table_create(st, &a, &t), 0);
	put_rows(t, 1, 2000);
	assert_int_equal(slab_table_drop(st, "old"), 0);
	assert_false(st->dram_dirty);
	assert_int_equal(slab_table_create(st, &b, &t), 0);
	assert_int_equal(readable_dirty(t), 0);
	/* a release that failed: the old bytes are still there */
	slab_table_regions(t, &ri, &rr, &rd);
	assert_int_equal(slab_table_drop(st, "new"), 0);
	memset(rd.addr, 0xa5, rd.len + 4096);
	st->dram_dirty = true;
	assert_int_equal(slab_table_create(st, &b, &t), 0);
	assert_int_equal(readable_dirty(t), 0);
	put_rows(t, 5, 100);
	check_rows(t, 5, 100);
	slab_store_close(&st);
}

/* Drop, reopen, create; and a table surviving reopens among them. */
static void file_cycles_across_reopens(void **state)
{
	const uint64_t size = 40 * MiB, data = size - SLAB_DATA_OFF;
	struct slab_store *st = tl_pool_open(pool_path, size, FILE_FLAGS);
	struct slab_table *t;

	(void)state;
	for (unsigned r = 0; r < 6; r++) {
		struct slab_table_cfg c = big_cfg("big", r, true, data);

		assert_int_equal(info_of(st).free_total, data);
		assert_int_equal(slab_table_create(st, &c, &t), 0);
		put_rows(t, 100 * r, 20);
		slab_store_close(&st);
		st = tl_pool_open(pool_path, 0, SLAB_F_NOSYNC);
		t = slab_table_get(st, "big");
		assert_non_null(t);
		check_rows(t, 100 * r, 20);
		assert_int_equal(slab_table_drop(st, "big"), 0);
		slab_store_close(&st);
		/* drop, restart, create */
		st = tl_pool_open(pool_path, 0, SLAB_F_NOSYNC);
		assert_null(slab_table_get(st, "big"));
		assert_int_equal(info_of(st).ntables, 0);
	}
	assert_int_equal(info_of(st).boot_count, 13);
	slab_store_close(&st);
}

/*
 * Torn images: a create cut short before its directory entry was complete
 * (entry failing its checksum) and a drop cut short after its first store
 * (checksum word zeroed, the rest still there). Either way the table is
 * gone after a reopen and its whole extent is free for the next create.
 */
static void torn_entries_free_their_space(void **state)
{
	const uint64_t size = 24 * MiB, data = size - SLAB_DATA_OFF;
	struct slab_store *st = tl_pool_open(pool_path, size, FILE_FLAGS);
	struct slab_table_cfg c = big_cfg("big", 0, true, data);
	struct slab_table *t;
	struct slab_dirent *e;
	unsigned id;

	(void)state;
	for (int how = 0; how < 2; how++) {
		assert_int_equal(slab_table_create(st, &c, &t), 0);
		put_rows(t, 7, 5);
		id = slab_table_id(t);
		e = &st->dir[id];
		if (how == 0)
			e->capacity ^= 1; /* torn: checksum no longer holds */
		else
			pet_st(&e->checksum, 0); /* drop's first store */
		slab_persist(st, e, sizeof(*e));
		slab_store_close(&st);
		st = tl_pool_open(pool_path, 0, SLAB_F_NOSYNC);
		assert_null(slab_table_get(st, "big"));
		assert_int_equal(info_of(st).free_total, data);
	}
	assert_int_equal(slab_table_create(st, &c, &t), 0);
	assert_int_equal(slab_lookup(t, 7, &id), RS_E_NOTFOUND);
	slab_store_close(&st);
}

/* ---- kill -9 while cycling tables ---- */

#define KILL_TABLES 4
#define KILL_ROUNDS_DEFAULT 8

struct kill_log {
	_Atomic uint64_t seq;	  /* operations begun */
	_Atomic uint64_t acked;	  /* operations acknowledged */
	_Atomic uint32_t live[KILL_TABLES]; /* acked state: 1 = exists */
	_Atomic int32_t inflight; /* table of the op begun, -1 none */
};

/* The child: create and drop tables of a quarter of the pool each, with
 * a few rows, forever. */
static void kill_child(struct kill_log *lg, uint64_t quarter)
{
	struct slab_store *st = tl_pool_open(pool_path, 0, SLAB_F_NOSYNC);
	unsigned x = (unsigned)getpid();

	for (;;) {
		unsigned i = (x = x * 1103515245 + 12345) >> 16 & 3;
		char name[8];
		int rc;

		snprintf(name, sizeof(name), "t%u", i);
		atomic_store(&lg->inflight, (int32_t)i);
		atomic_fetch_add(&lg->seq, 1);
		if (atomic_load(&lg->live[i])) {
			rc = slab_table_drop(st, name);
			if (rc)
				_exit(10);
			atomic_store(&lg->live[i], 0);
		} else {
			struct slab_table_cfg c = big_cfg(name, i, true,
							  quarter);
			struct slab_table *t;

			rc = slab_table_create(st, &c, &t);
			if (rc)
				_exit(11);
			put_rows(t, i * 100, 3);
			atomic_store(&lg->live[i], 1);
		}
		atomic_store(&lg->inflight, -1);
		atomic_fetch_add(&lg->acked, 1);
	}
}

static void kill_during_cycles(void **state)
{
	const uint64_t size = 34 * MiB, data = size - SLAB_DATA_OFF;
	const char *env = getenv("RS_CRASH_ROUNDS");
	int rounds = env ? atoi(env) : KILL_ROUNDS_DEFAULT;
	struct kill_log *lg = mmap(NULL, sizeof(*lg), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct slab_store *st = tl_pool_open(pool_path, size, FILE_FLAGS);
	uint64_t total_acked = 0;

	(void)state;
	assert_true(lg != MAP_FAILED);
	memset(lg, 0, sizeof(*lg));
	atomic_store(&lg->inflight, -1);
	slab_store_close(&st);
	srand((unsigned)time(NULL));
	for (int r = 0; r < rounds; r++) {
		uint64_t used = 0, target;
		int32_t fl;
		int status;
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (pid == 0)
			kill_child(lg, data / KILL_TABLES);
		/* let it acknowledge a few operations (however slow the
		 * build), then kill it at a random point of the next ones */
		target = atomic_load(&lg->acked) + 1 + (uint64_t)(rand() % 6);
		for (int ms = 0; ms < 20000 &&
				 atomic_load(&lg->acked) < target; ms++)
			usleep(1000);
		usleep((unsigned)(rand() % 3000));
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFSIGNALED(status))
			fail_msg("round %d: the child failed (exit %d)", r,
				 WEXITSTATUS(status));
		fl = atomic_load(&lg->inflight);
		st = tl_pool_open(pool_path, 0, SLAB_F_NOSYNC);
		for (unsigned i = 0; i < KILL_TABLES; i++) {
			char name[8];
			struct slab_table *t;
			bool want = atomic_load(&lg->live[i]);

			snprintf(name, sizeof(name), "t%u", i);
			t = slab_table_get(st, name);
			if ((int32_t)i == fl && t) {
				/* either state; a create cut short may lack
				 * rows: drop it (a drop after recovery) */
				assert_int_equal(slab_table_drop(st, name), 0);
				atomic_store(&lg->live[i], 0);
				continue;
			}
			if ((int32_t)i == fl)
				atomic_store(&lg->live[i], 0);
			else if (want != (t != NULL))
				fail_msg("round %d: table %s %s", r, name,
					 want ? "lost" : "came back");
			if (t && (int32_t)i != fl)
				check_rows(t, i * 100, 3);
			if (t)
				used += t->ent.ext_len;
		}
		atomic_store(&lg->inflight, -1);
		/* nothing leaked: free space and extents make up the pool */
		assert_int_equal(info_of(st).free_total + used, data);
		total_acked = atomic_load(&lg->acked);
		slab_store_close(&st);
	}
	print_message("%d kills, %llu acknowledged creates and drops\n",
		      rounds, (unsigned long long)total_acked);
	assert_true(total_acked >= (uint64_t)rounds);
	/* after it all, the whole pool is one table's again */
	st = tl_pool_open(pool_path, 0, SLAB_F_NOSYNC);
	for (unsigned i = 0; i < KILL_TABLES; i++) {
		char name[8];

		snprintf(name, sizeof(name), "t%u", i);
		(void)slab_table_drop(st, name);
	}
	{
		struct slab_table_cfg c = big_cfg("all", 1, true, data);

		assert_int_equal(slab_table_create(st, &c, NULL), 0);
	}
	slab_store_close(&st);
	munmap(lg, sizeof(*lg));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(footprint_arithmetic),
		cmocka_unit_test(fit_is_the_largest),
		cmocka_unit_test(full_says_needed_and_free),
		cmocka_unit_test(dram_cycles),
		cmocka_unit_test(dram_recreate_exposes_nothing),
		cmocka_unit_test_setup_teardown(file_cycles_across_reopens,
						setup_path, teardown_path),
		cmocka_unit_test_setup_teardown(torn_entries_free_their_space,
						setup_path, teardown_path),
		cmocka_unit_test_setup_teardown(kill_during_cycles, setup_path,
						teardown_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
