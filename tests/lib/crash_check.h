/*
 * crash_check.h - the model of acknowledged operations on one table and
 * the check that a recovered table holds it, shared by test_crash (SIGKILL
 * of a writer process) and test_powerfail (power-failure images built from
 * what was flushed).
 *
 * Encoding of a write, so that a row says which write produced it: every
 * payload element is the write's generation `gen`; the optimizer state is
 * {sgen, sgen ? key & 0xFFFF : 0}, sgen the generation of the write that
 * last set the state (== gen for inserts and optimizer updates, older for
 * an overwrite of the payload alone, 0 for a put that inserted). A row is
 * one write, not a mix, iff all elements agree and the state is the one
 * that write left. Generations stay below 2^24 (exact floats).
 *
 * The writer logs a BEGIN record before each operation and an ACK record
 * after each success; crash_model_apply() folds them in. After a crash,
 * crash_verify_table() checks, for every key the model has seen:
 *   - acknowledged present with (gen, sgen): readable, exactly that;
 *   - acknowledged deleted (or never acknowledged): absent;
 *   - the one operation in flight: old or new state, either;
 *   - no key in the table that was never inserted, no index-visible row
 *     failing validation, live count right, the index consistent
 *     (pet_verify);
 * then adopts what recovery decided for the in-flight key (the model is
 * the acknowledged state of the recovered table from then on).
 */
#ifndef RS_TEST_CRASH_CHECK_H
#define RS_TEST_CRASH_CHECK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "value/slab_int.h"

#define CRASH_DIM 32
#define CRASH_SFLOATS 2

enum { OP_INSERT = 1, OP_UPDATE = 2, OP_DELETE = 3 };
enum { PH_BEGIN = 0, PH_ACK = 1 };

struct crash_rec {
	uint64_t key;
	uint32_t gen;	/* payload generation the op writes */
	uint32_t sgen;	/* state generation the row has after it */
	uint8_t op;	/* OP_DELETE; OP_INSERT, OP_UPDATE: present after */
	uint8_t phase;
	uint16_t pad[3];
};

struct crash_entry {
	uint64_t key;
	uint32_t gen, sgen;
	uint8_t used;
	uint8_t present;
};

struct crash_model {
	struct crash_entry *map;
	uint32_t slots; /* power of two, above the number of keys ever used */
	struct crash_rec inflight;
	int have_inflight;
	uint64_t n_acks;
	uint32_t max_gen;
};

struct crash_stats {
	uint64_t replayed, reclaimed, torn_rows, torn_buckets, dropped;
	uint64_t checked_keys;
};

/* splitmix64: the tests' deterministic random numbers */
uint64_t crash_rnd(uint64_t *s);

void crash_model_init(struct crash_model *m, uint32_t slots);

struct crash_entry *crash_model_get(struct crash_model *m,
				    uint64_t key, int create);

void crash_model_apply(struct crash_model *m,
		       const struct crash_rec *r);

/* The payload and state a write of (gen, sgen) leaves for key. */
void crash_fill(uint64_t key, uint32_t gen, uint32_t sgen,
		float *val, float *state);

void crash_stats_add(struct crash_stats *acc,
		     struct slab_table *t);

/* Check recovered table t against m (above); adopt the in-flight key's
 * outcome. Returns the number of keys present. */
uint64_t crash_verify_table(struct crash_model *m,
			    struct slab_table *t,
			    struct crash_stats *acc);

#endif
