/*
 * evict_sim.h - for the eviction tests (tests/unit/test_evict.c,
 * tests/rxe/test_server_evict.c): a Zipf key trace and an exact
 * simulation of the LRU and LFU policies of value/slab_evict.c (full scan
 * for the victim instead of a sample), or of random eviction, on a trace
 * and a cap: the "ideal" a sampled policy's hit rate is held against.
 * Test code: aborts on allocation failure.
 */
#ifndef RS_TESTS_EVICT_SIM_H
#define RS_TESTS_EVICT_SIM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

uint64_t es_xs(uint64_t *s);

/* n accesses of keys 0..universe-1, key i with weight 1 / (i + 1)^s. */
uint32_t *es_zipf_trace(uint32_t universe, uint32_t n, double s,
			uint64_t seed);

/* Hits of the exact policy (full scan for the victim) over the trace with
 * `cap` rows, or of random eviction when random != 0 (its seed). Every
 * access advances the clock once, as a read or an insert does. */
uint64_t es_simulate(const uint32_t *tr, uint32_t n,
		     uint32_t universe, uint32_t cap, bool lfu,
		     uint64_t random);

#endif
