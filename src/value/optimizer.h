/*
 * optimizer.h - optimizer kernels applied by the memory node to embedding
 * rows (SGD, Adagrad, row-wise Adagrad, Adam/AdamW), and the coalescing of
 * duplicate keys in an update batch.
 *
 * Formulas, defaults and references: docs/optimizers.md.
 *
 * Data model. A table row is `dim` fp32 weights. Each row owns a separate
 * optimizer state block of optim_state_floats(kind, dim) 4-byte slots
 * (kept apart from the row that clients READ, see ARCHITECTURE.md):
 *
 *   kind                  state layout (4-byte slots)
 *   OPTIM_SGD             (none)
 *   OPTIM_ADAGRAD         G[dim]           sum of squared gradients
 *   OPTIM_ROWWISE_ADAGRAD G                one accumulator per row
 *   OPTIM_ADAM            m[dim] v[dim] t  t = step count, uint32 stored
 *                                          bit-for-bit in the last slot
 *
 * The kernels make no alignment assumption beyond that of float (state
 * blocks may follow one another with a stride of state_floats * 4 bytes).
 * The row, state and gradient must not overlap (restrict).
 *
 * Weight decay. By default weight decay is L2 regularisation folded into
 * the gradient before the optimizer sees it: g' = g + wd * w. With
 * OPTIM_F_DECOUPLED the weights are shrunk directly instead,
 * w <- w * (1 - lr * wd), and the gradient is left alone (AdamW, Loshchilov
 * & Hutter); that flag is accepted for every kind.
 *
 * Concurrency: the kernels are pure functions of their arguments; the
 * caller serialises writers of one row (the row's write protocol).
 */
#ifndef RS_VALUE_OPTIMIZER_H
#define RS_VALUE_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common/spec.h" /* enum optim_kind, struct optim_params */

/* 4-byte slots of optimizer state per row of dimension dim (0 for SGD and
 * for unknown kinds). */
size_t optim_state_floats(uint32_t kind, uint32_t dim);

/* Initialise the state block of one fresh row (accumulators to
 * initial_accumulator, moments and step to 0). No-op for SGD. */
void optim_init_state(const struct optim_params *p, float *state,
		      uint32_t dim);

/*
 * One optimizer step on one row with gradient grad[dim]: updates row[] and
 * state[] in place. p must have passed optim_params_validate(). Returns 0;
 * RS_E_OVERFLOW (no message: a per-key outcome) if a new weight or state
 * value is not finite although the inputs were (the step overflowed):
 * row[] and state[] then hold that result and must be discarded, which is
 * why the server runs the kernels on slab_write_begin()'s copies and
 * aborts the write; or RS_E_INVAL for an unknown kind (nothing is modified
 * then).
 */
int optim_apply(const struct optim_params *p, float *restrict row,
		float *restrict state, const float *restrict grad,
		uint32_t dim);

/* Adam's step count of a state block (0 for other kinds). */
uint32_t optim_adam_step(const float *state, uint32_t dim);

/*
 * Duplicate-key coalescing for an update batch: the server applies ONE
 * optimizer step per distinct key with the SUM of that key's gradients.
 *
 * Input: keys[n], grads[n * dim] (row i = grads + i * dim; grads and
 * out_grads may be NULL when dim is 0).
 * Output: out_keys[m] and out_grads[m * dim] hold the m distinct keys in
 * order of first occurrence, each with its gradients summed in batch order
 * (so the result is deterministic). If out_index is not NULL, out_index[i]
 * is the output slot of input i (to map per-key statuses back).
 * Returns m (0 <= m <= n).
 *
 * In place: out_keys may equal keys and out_grads may equal grads (exact
 * alias, not partial overlap); every other pair of buffers must be
 * disjoint.
 *
 * scratch: optim_coalesce_scratch_size(n) bytes, any alignment >= 4,
 * owned by the caller (one per worker; it holds a hash table with a
 * per-process random seed, so crafted keys cannot force collisions).
 * Cost O(n * dim) expected.
 */
size_t optim_coalesce_scratch_size(uint32_t n);
uint32_t optim_coalesce(const uint64_t *keys, const float *grads, uint32_t n,
			uint32_t dim, uint64_t *out_keys, float *out_grads,
			uint32_t *out_index, void *scratch);

#endif
