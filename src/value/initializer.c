/*
 * initializer.c - deterministic, counter-based row initialisers.
 *
 * Element i of a row is generated from (seed, key, i) alone (see the head
 * comment of initializer.h): the per-row base is XXH3 of the key keyed by
 * the table seed, and element i takes the i-th output of a splitmix64
 * stream started at that base, i.e. mix(base + (i + 1) * golden). splitmix64
 * passes BigCrush and each output is computed independently of the others,
 * which is what makes the generator order-free.
 *
 * Uniform uses the top 24 bits (exactly representable in fp32), so the
 * values are multiples of 2^-23 * a in [-a, a]. Normal uses Box-Muller
 * with u1 in (0, 1] (never log(0)) from the high 32 bits and the angle from
 * the low 32 bits; one normal per element, the sine half is discarded so
 * that each element stays a function of its own index.
 */
#include <math.h>
#include <string.h>
#include <xxhash.h>

#include "common/rs_internal.h"
#include "value/initializer.h"

#define GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t splitmix(uint64_t base, uint32_t i)
{
	uint64_t z = base + ((uint64_t)i + 1) * GOLDEN;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t row_base(uint64_t seed, uint64_t key)
{
	uint8_t le[8];

	for (int b = 0; b < 8; b++)
		le[b] = (uint8_t)(key >> (8 * b));
	return XXH3_64bits_withSeed(le, sizeof(le), seed);
}

static void uniform(float a, uint64_t base, float *row, uint32_t dim)
{
	const float scale = 2.0f * a / 16777216.0f; /* 2a * 2^-24 */

	for (uint32_t i = 0; i < dim; i++) {
		const uint32_t u24 = (uint32_t)(splitmix(base, i) >> 40);

		row[i] = (float)u24 * scale - a;
	}
}

static void normal(float std, uint64_t base, float *row, uint32_t dim)
{
	const double two_pi = 6.283185307179586476925286766559;

	for (uint32_t i = 0; i < dim; i++) {
		const uint64_t r = splitmix(base, i);
		/* (hi + 1) / 2^32 in (0, 1]; lo / 2^32 in [0, 1) */
		const double u1 = ((double)(r >> 32) + 1.0) * 0x1p-32;
		const double u2 = (double)(uint32_t)r * 0x1p-32;

		row[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(two_pi * u2));
	}
}

void init_row(const struct init_params *p, uint64_t key, float *row,
	      uint32_t dim)
{
	switch (p->kind) {
	case INIT_CONSTANT:
		for (uint32_t i = 0; i < dim; i++)
			row[i] = p->value;
		return;
	case INIT_UNIFORM:
		uniform(p->a, row_base(p->seed, key), row, dim);
		return;
	case INIT_NORMAL:
		normal(p->std, row_base(p->seed, key), row, dim);
		return;
	default:
		memset(row, 0, (size_t)dim * sizeof(float));
		return;
	}
}
