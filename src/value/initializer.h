/*
 * initializer.h - initial values of embedding rows created by GET_OR_INIT
 * (or by an update that creates its key).
 *
 * Determinism: the value of element i of key k in a table with seed s is a
 * pure function of (kind, parameters, s, k, i): a counter-based generator,
 * not a stream. Rows come out the same whatever order keys arrive in,
 * which worker or memory node creates them, and after a restart or
 * re-sharding. The generator (docs/optimizers.md, "Initializers"):
 *   base = XXH3_64bits_withSeed(k as 8 little-endian bytes, s)
 *   r_i  = splitmix64 output number i of the stream seeded with base
 * uniform: top 24 bits of r_i -> u in [0, 1) -> a * (2u - 1), in [-a, a]
 *          (fp32 rounding may reach +a);
 * normal:  Box-Muller on two 32-bit halves of r_i (one normal per element)
 *          computed in double with libm log/cos/sqrt; nodes with different
 *          libm builds could differ in the last fp32 bit, nothing more.
 */
#ifndef RS_VALUE_INITIALIZER_H
#define RS_VALUE_INITIALIZER_H

#include <stdint.h>

#include "common/spec.h" /* enum init_kind, struct init_params */

/* Write the initial value of key's row into row[dim]. p must have passed
 * init_params_validate() (an unknown kind writes zeros). */
void init_row(const struct init_params *p, uint64_t key, float *row,
	      uint32_t dim);

#endif
