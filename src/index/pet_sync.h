/*
 * pet_sync.h - word-granular shared-memory access for seqlock-protected
 * structures (PET buckets, slab rows); server side only.
 *
 * Memory model (C11). Buckets and rows are read concurrently by server
 * threads that take no lock (and by NICs, which are outside the C abstract
 * machine and are handled by checksums, not by this file). To have no data
 * race in the C11 sense, EVERY access to such memory while other threads
 * may read it is an atomic access of one aligned 64-bit word:
 *   - writers (holding the object's lock) store words with relaxed atomics,
 *     framed by the version protocol below;
 *   - lock-free readers load words with relaxed atomics.
 * Mixed-size atomics on one location are never used: a 32-bit ref or an
 * 8-bit tag is extracted from its 64-bit word. On x86-64 and AArch64 a
 * relaxed 64-bit atomic load/store is a plain aligned mov/ldr/str.
 *
 * Writer (holds the lock; v = current even version):
 *     store(version, v + 1, relaxed)
 *     atomic_thread_fence(release)          [F1]
 *     store data words ..., relaxed
 *     store(version, v + 2, release)        [S2]
 * Reader:
 *     v1 = load(version, acquire)           [L1]   (retry while odd)
 *     load data words ..., relaxed
 *     atomic_thread_fence(acquire)          [F2]
 *     v2 = load(version, relaxed)
 *     accept iff v1 == v2
 * Each write moves the version v -> v+1 -> v+2. If the copy holds a word of
 * a write W that opened after the version value v1 was stored, W's F1
 * synchronizes with the reader's F2, so v2 >= W's odd version > v1 and the
 * read is retried. The write that stored v1 (by its S2) is acquired by L1,
 * so the copy sees all of its words. An accepted copy (v1 == v2, even) is
 * therefore exactly the state at version v1. This is the seqlock of
 * H.-J. Boehm, "Can seqlocks get along with programming language memory
 * models?" (MSPC 2012), with relaxed-atomic data.
 */
#ifndef RS_INDEX_PET_SYNC_H
#define RS_INDEX_PET_SYNC_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

_Static_assert(sizeof(_Atomic uint64_t) == sizeof(uint64_t) &&
		       _Alignof(_Atomic uint64_t) == _Alignof(uint64_t),
	       "atomic words must overlay plain words");

static inline uint64_t pet_ld(const void *p)
{
	return atomic_load_explicit((_Atomic uint64_t *)p,
				    memory_order_relaxed);
}

static inline uint64_t pet_ld_acq(const void *p)
{
	return atomic_load_explicit((_Atomic uint64_t *)p,
				    memory_order_acquire);
}

static inline void pet_st(void *p, uint64_t v)
{
	atomic_store_explicit((_Atomic uint64_t *)p, v, memory_order_relaxed);
}

static inline void pet_st_rel(void *p, uint64_t v)
{
	atomic_store_explicit((_Atomic uint64_t *)p, v, memory_order_release);
}

/* Copy n words out of shared memory with relaxed atomic loads. */
static inline void pet_copy_out(uint64_t *dst, const uint64_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = pet_ld(&src[i]);
}

/* Copy n words into shared memory with relaxed atomic stores. */
static inline void pet_copy_in(uint64_t *dst, const uint64_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pet_st(&dst[i], src[i]);
}

static inline void pet_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Back-off for spin loops: pause, and yield the CPU now and then so that a
 * preempted lock holder (more threads than cores) can run. */
static inline void pet_backoff(unsigned *spins)
{
	if (++*spins % 64 == 0)
		sched_yield();
	else
		pet_cpu_relax();
}

/* A byte spin lock (test-and-test-and-set). */
static inline void pet_lock(_Atomic uint8_t *l)
{
	unsigned spins = 0;

	while (atomic_exchange_explicit(l, 1, memory_order_acquire)) {
		while (atomic_load_explicit(l, memory_order_relaxed))
			pet_backoff(&spins);
	}
}

static inline void pet_unlock(_Atomic uint8_t *l)
{
	atomic_store_explicit(l, 0, memory_order_release);
}

/* Seqlock writer: open (version odd) and close (version even, +2). */
static inline uint64_t pet_write_open(void *version_word)
{
	uint64_t v = pet_ld(version_word);

	pet_st(version_word, v + 1);
	atomic_thread_fence(memory_order_release);
	return v;
}

static inline void pet_write_close(void *version_word, uint64_t v_open)
{
	pet_st_rel(version_word, v_open + 2);
}

#endif
