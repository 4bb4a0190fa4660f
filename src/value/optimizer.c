/*
 * optimizer.c - optimizer kernels and duplicate-key coalescing.
 *
 * Every kernel is one pass over the row (row-wise Adagrad: two, a
 * reduction then the update). Each also sums (x - x) over every value it
 * stores (see vnf()), so optim_apply() can report RS_E_OVERFLOW when a
 * finite gradient drove a weight or an accumulator to an infinity (Adagrad
 * with g = 1e20: g * g overflows; Adam with FLT_MAX; SGD past FLT_MAX):
 * the caller, which computes on copies, then discards the step. The loops are written with GCC vector
 * extensions rather than left to the auto-vectoriser, because GCC 12 at
 * -O2 (the RelWithDebInfo default) only vectorises loops whose trip count
 * is a known multiple of the vector width, and because sqrtf() under the
 * default -fmath-errno blocks vectorisation at any level. The square root
 * of a vector is the SSE / NEON instruction (correctly rounded, like
 * sqrtf); accumulators only grow from a non-negative start, so it never
 * sees a negative input. `objdump -d` shows mulps/divps/sqrtps.
 *
 * Per-row scalars (bias corrections, row-wise multipliers) are computed in
 * double; element arithmetic is fp32. The row-wise Adagrad reduction sums
 * exact fp32*fp32 products in double over eight independent lanes, so the
 * row mean is exact to well below fp32 rounding whatever the dimension.
 *
 * Coalescing uses an open-addressing table (linear probing) of 32-bit
 * output slots, sized to a power of two >= 2n so the load stays <= 1/2.
 * Hashes are keyed by a per-process random seed (a crafted key set cannot
 * force probe chains without knowing it); the seed does not affect the
 * result, which depends only on the batch order.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "common/rs_internal.h"
#include "value/optimizer.h"

/*
 * 4-lane fp32 vectors (SSE / NEON width, the x86-64 and aarch64 baseline).
 * Loads and stores go through memcpy, which compiles to unaligned vector
 * moves. Each kernel runs its vector loop over the first dim & ~3 elements
 * and the same formula in scalar code over the tail; both round every
 * operation to fp32 the same way (IEEE per lane, no contraction in ISO C
 * mode), so a row's result does not depend on where the tail begins.
 */
typedef float v4sf __attribute__((vector_size(16)));
#define VL 4

static inline v4sf vld(const float *p)
{
	v4sf v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void vst(float *p, v4sf v)
{
	memcpy(p, &v, sizeof(v));
}

static inline v4sf vsplat(float x)
{
	return (v4sf){ x, x, x, x };
}

static inline v4sf vsqrt(v4sf x)
{
#if defined(__SSE__)
	return (v4sf)_mm_sqrt_ps((__m128)x);
#elif defined(__aarch64__) && defined(__ARM_NEON)
	return vsqrtq_f32(x);
#else
	return (v4sf){ sqrtf(x[0]), sqrtf(x[1]), sqrtf(x[2]), sqrtf(x[3]) };
#endif
}

/*
 * Finiteness of results. x - x is +0 for every finite x and NaN for an
 * infinity or a NaN, so a lane sum of (x - x) over everything a kernel
 * stores stays 0 exactly when all of it is finite: two vector operations
 * per stored vector and one test per row, no branch per element. The
 * compiler may not fold x - x to 0 (no -ffinite-math-only).
 */
static inline v4sf vnf(v4sf x)
{
	return x - x;
}

static inline int all_zero(v4sf bad, float tail)
{
	return bad[0] + bad[1] + bad[2] + bad[3] + tail == 0.0f;
}

size_t optim_state_floats(uint32_t kind, uint32_t dim)
{
	switch (kind) {
	case OPTIM_ADAGRAD:
		return dim;
	case OPTIM_ROWWISE_ADAGRAD:
		return 1;
	case OPTIM_ADAM:
		return 2 * (size_t)dim + 1;
	default:
		return 0;
	}
}

void optim_init_state(const struct optim_params *p, float *state,
		      uint32_t dim)
{
	size_t n = optim_state_floats(p->kind, dim);

	if (p->kind == OPTIM_ADAGRAD || p->kind == OPTIM_ROWWISE_ADAGRAD) {
		for (size_t i = 0; i < n; i++)
			state[i] = p->initial_accumulator;
	} else if (n) {
		/* Adam: m = v = 0.0f and step 0 are all-zero bit patterns */
		memset(state, 0, n * sizeof(float));
	}
}

uint32_t optim_adam_step(const float *state, uint32_t dim)
{
	uint32_t t;

	memcpy(&t, state + 2 * (size_t)dim, sizeof(t));
	return t;
}

/* Decoupled decay: w <- w * (1 - lr * wd); returns the L2 coefficient the
 * kernel must still fold into the gradient (0 when decoupled). */
static float apply_decay(const struct optim_params *p, float *restrict w,
			 uint32_t dim)
{
	float c;
	uint32_t i = 0;

	if (!(p->flags & OPTIM_F_DECOUPLED))
		return p->weight_decay;
	if (p->weight_decay == 0.0f)
		return 0.0f;
	/* w - c * w, not w * (1 - c): 1 - c rounded to fp32 would carry a
	 * relative error of up to 2^-24 / c into every step, always in the
	 * same direction */
	c = (float)((double)p->lr * p->weight_decay);
	for (; i + VL <= dim; i += VL) {
		const v4sf wi = vld(w + i);

		vst(w + i, wi - vsplat(c) * wi);
	}
	for (; i < dim; i++)
		w[i] -= c * w[i];
	return 0.0f;
}

/* w -= mult * (g + wd * w): SGD, and row-wise Adagrad's update pass.
 * 1 if every new weight is finite. */
static int scaled_step(float *restrict w, const float *restrict g,
		       float mult, float wd, uint32_t dim)
{
	const v4sf vm = vsplat(mult), vwd = vsplat(wd);
	v4sf bad = vsplat(0.0f);
	float tail = 0.0f;
	uint32_t i = 0;

	for (; i + VL <= dim; i += VL) {
		const v4sf wi = vld(w + i);
		const v4sf wn = wi - vm * (vld(g + i) + vwd * wi);

		vst(w + i, wn);
		bad += vnf(wn);
	}
	for (; i < dim; i++) {
		w[i] -= mult * (g[i] + wd * w[i]);
		tail += w[i] - w[i];
	}
	return all_zero(bad, tail);
}

static int sgd(const struct optim_params *p, float *restrict w,
	       const float *restrict g, uint32_t dim)
{
	const float wd = apply_decay(p, w, dim);

	return scaled_step(w, g, p->lr, wd, dim);
}

static int adagrad(const struct optim_params *p, float *restrict w,
		    float *restrict acc, const float *restrict g, uint32_t dim)
{
	const float wd = apply_decay(p, w, dim);
	const float lr = p->lr, eps = p->eps;
	const v4sf vlr = vsplat(lr), veps = vsplat(eps), vwd = vsplat(wd);
	v4sf bad = vsplat(0.0f);
	float tail = 0.0f;
	uint32_t i = 0;

	for (; i + VL <= dim; i += VL) {
		const v4sf wi = vld(w + i);
		const v4sf gi = vld(g + i) + vwd * wi;
		const v4sf a = vld(acc + i) + gi * gi;
		const v4sf wn = wi - vlr * gi / (vsqrt(a) + veps);

		vst(acc + i, a);
		vst(w + i, wn);
		bad += vnf(a) + vnf(wn);
	}
	for (; i < dim; i++) {
		const float gi = g[i] + wd * w[i];
		const float a = acc[i] + gi * gi;

		acc[i] = a;
		w[i] -= lr * gi / (sqrtf(a) + eps);
		tail += (a - a) + (w[i] - w[i]);
	}
	return all_zero(bad, tail);
}

/* sum over i of (g[i] + wd * w[i])^2: exact fp32 products (a float times a
 * float fits a double) summed in double over independent lanes */
static double sum_sq(const float *restrict w, const float *restrict g,
		     float wd, uint32_t dim)
{
	const v4sf vwd = vsplat(wd);
	double lane[VL] = { 0 };
	double s = 0;
	uint32_t i = 0;

	for (; i + VL <= dim; i += VL) {
		const v4sf gi = vld(g + i) + vwd * vld(w + i);

		for (int j = 0; j < VL; j++)
			lane[j] += (double)gi[j] * gi[j];
	}
	for (; i < dim; i++) {
		const float gi = g[i] + wd * w[i];

		s += (double)gi * gi;
	}
	for (int j = 0; j < VL; j++)
		s += lane[j];
	return s;
}

static int rowwise_adagrad(const struct optim_params *p, float *restrict w,
			   float *restrict acc, const float *restrict g,
			   uint32_t dim)
{
	const float wd = apply_decay(p, w, dim);

	if (dim == 0)
		return 1;
	acc[0] = (float)((double)acc[0] + sum_sq(w, g, wd, dim) / dim);
	return scaled_step(w, g,
			   (float)(p->lr / (sqrt((double)acc[0]) + p->eps)),
			   wd, dim) &
	       isfinite(acc[0]);
}

static int adam(const struct optim_params *p, float *restrict w,
		 float *restrict st, const float *restrict g, uint32_t dim)
{
	float *restrict m = st;
	float *restrict v = st + dim;
	const float wd = apply_decay(p, w, dim);
	const float b1 = p->beta1, b2 = p->beta2, eps = p->eps;
	const float c1 = 1.0f - b1, c2 = 1.0f - b2;
	uint32_t t = optim_adam_step(st, dim), i = 0;
	float step, ibc2;
	v4sf vb1, vb2, vc1, vc2, vstep, vibc2, veps, vwd, bad = vsplat(0.0f);
	float tail = 0.0f;

	if (t < UINT32_MAX)
		t++;
	memcpy(st + 2 * (size_t)dim, &t, sizeof(t));
	step = (float)(p->lr / (1.0 - pow(b1, t)));
	ibc2 = (float)(1.0 / sqrt(1.0 - pow(b2, t)));
	vb1 = vsplat(b1), vb2 = vsplat(b2), vc1 = vsplat(c1), vc2 = vsplat(c2);
	vstep = vsplat(step), vibc2 = vsplat(ibc2), veps = vsplat(eps);
	vwd = vsplat(wd);

	for (; i + VL <= dim; i += VL) {
		const v4sf wi = vld(w + i);
		const v4sf gi = vld(g + i) + vwd * wi;
		const v4sf mi = vb1 * vld(m + i) + vc1 * gi;
		const v4sf vi = vb2 * vld(v + i) + vc2 * gi * gi;
		const v4sf wn = wi - vstep * mi / (vsqrt(vi) * vibc2 + veps);

		vst(m + i, mi);
		vst(v + i, vi);
		vst(w + i, wn);
		/* m need not be tested: step > 0 and a finite v make an
		 * infinite or NaN m give an infinite or NaN w */
		bad += vnf(vi) + vnf(wn);
	}
	for (; i < dim; i++) {
		const float gi = g[i] + wd * w[i];
		const float mi = b1 * m[i] + c1 * gi;
		const float vi = b2 * v[i] + c2 * gi * gi;

		m[i] = mi;
		v[i] = vi;
		w[i] -= step * mi / (sqrtf(vi) * ibc2 + eps);
		tail += (vi - vi) + (w[i] - w[i]);
	}
	return all_zero(bad, tail);
}

int optim_apply(const struct optim_params *p, float *restrict row,
		float *restrict state, const float *restrict grad,
		uint32_t dim)
{
	int finite;

	switch (p->kind) {
	case OPTIM_SGD:
		finite = sgd(p, row, grad, dim);
		break;
	case OPTIM_ADAGRAD:
		finite = adagrad(p, row, state, grad, dim);
		break;
	case OPTIM_ROWWISE_ADAGRAD:
		finite = rowwise_adagrad(p, row, state, grad, dim);
		break;
	case OPTIM_ADAM:
		finite = adam(p, row, state, grad, dim);
		break;
	default:
		return rs_seterr(RS_E_INVAL, "unknown optimizer kind %u",
				 p->kind);
	}
	return finite ? 0 : RS_E_OVERFLOW; /* per-key outcome: no message */
}

/* ---- duplicate-key coalescing ---------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static _Atomic uint64_t coalesce_seed;

static uint64_t get_seed(void)
{
	uint64_t s = atomic_load_explicit(&coalesce_seed, memory_order_relaxed);
	uint64_t expect = 0;
	struct timespec ts;

	if (RS_LIKELY(s))
		return s;
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != sizeof(s)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
			  (uint64_t)(uintptr_t)&ts);
	}
	s |= 1; /* never 0, which means "not yet chosen" */
	if (!atomic_compare_exchange_strong(&coalesce_seed, &expect, s))
		s = expect;
	return s;
}

static uint32_t table_slots(uint32_t n)
{
	uint64_t cap = 16;

	while (cap < 2 * (uint64_t)n)
		cap <<= 1;
	return (uint32_t)cap;
}

size_t optim_coalesce_scratch_size(uint32_t n)
{
	return (size_t)table_slots(n) * sizeof(uint32_t);
}

static void row_add(float *restrict dst, const float *restrict src,
		    uint32_t dim)
{
	uint32_t i = 0;

	for (; i + VL <= dim; i += VL)
		vst(dst + i, vld(dst + i) + vld(src + i));
	for (; i < dim; i++)
		dst[i] += src[i];
}

uint32_t optim_coalesce(const uint64_t *keys, const float *grads, uint32_t n,
			uint32_t dim, uint64_t *out_keys, float *out_grads,
			uint32_t *out_index, void *scratch)
{
	const uint32_t cap = table_slots(n), mask = cap - 1;
	const uint64_t seed = get_seed();
	uint32_t *slot = scratch; /* 0 = empty, else output index + 1 */
	uint32_t m = 0;

	memset(slot, 0, (size_t)cap * sizeof(*slot));
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t k = keys[i];
		uint32_t h = (uint32_t)mix64(k ^ seed) & mask;
		uint32_t u;

		while (slot[h] && out_keys[slot[h] - 1] != k)
			h = (h + 1) & mask;
		if (slot[h]) {
			u = slot[h] - 1;
			if (dim)
				row_add(out_grads + (size_t)u * dim,
					grads + (size_t)i * dim, dim);
		} else {
			/* u <= i: in place, slot u's input was consumed */
			u = m++;
			slot[h] = u + 1;
			out_keys[u] = k;
			/* the rows coincide only in place with u == i */
			if (dim && (u != i || out_grads != grads))
				memcpy(out_grads + (size_t)u * dim,
				       grads + (size_t)i * dim,
				       (size_t)dim * sizeof(float));
		}
		if (out_index)
			out_index[i] = u;
	}
	return m;
}
