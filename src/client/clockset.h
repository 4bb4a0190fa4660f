/*
 * clockset.h - one set of a set-associative CLOCK cache (internal, cli_).
 *
 * The location cache (lcache.c) and the bucket-image cache (bcache.c) are
 * both fixed arrays of small sets: each set has a spin lock, a valid and
 * a reference bit per way (at most 8 ways) and a CLOCK hand. A hit sets
 * the way's reference bit; an insert into a full set advances the hand,
 * clearing reference bits, until it finds a way whose bit is clear (at
 * most two turns). The lock is held for a few dozen instructions.
 */
#ifndef CLI_CLOCKSET_H
#define CLI_CLOCKSET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A set array from calloc() needs no initialisation: every field starts
 * at zero, and a zeroed atomic_flag is a clear one (ATOMIC_FLAG_INIT is
 * { 0 } in GCC's and Clang's <stdatomic.h> on every target). So a cache
 * of a million entries costs memory only as its sets are used, not 50 MiB
 * of page faults when the client opens. */
struct cli_clock {
	atomic_flag lock;
	uint8_t valid; /* bit i: way i holds an entry */
	uint8_t ref;   /* bit i: way i used since the hand last passed */
	uint8_t hand;
};

static inline void cli_clock_lock(struct cli_clock *s)
{
	while (atomic_flag_test_and_set_explicit(&s->lock,
						 memory_order_acquire))
		__builtin_ia32_pause();
}

static inline void cli_clock_unlock(struct cli_clock *s)
{
	atomic_flag_clear_explicit(&s->lock, memory_order_release);
}

/* MurmurHash3's 64-bit finalizer: every bit of x moves every bit out. */
static inline uint64_t cli_fmix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* The set index bits of (id, x): a table's or view's id and a key or
 * bucket, mixed so one id's entries spread over all sets. */
static inline uint64_t cli_clock_mix(uint32_t id, uint64_t x)
{
	return cli_fmix64(x ^ (uint64_t)id * 0x9e3779b97f4a7c15ull);
}

/* Way w was used. */
static inline void cli_clock_touch(struct cli_clock *s, int w)
{
	s->ref |= (uint8_t)(1u << w);
}

/* Way w now holds an entry (not yet referenced). */
static inline void cli_clock_fill(struct cli_clock *s, int w)
{
	s->valid |= (uint8_t)(1u << w);
	s->ref &= (uint8_t)~(1u << w);
}

static inline void cli_clock_clear(struct cli_clock *s, int w)
{
	s->valid &= (uint8_t)~(1u << w);
	s->ref &= (uint8_t)~(1u << w);
}

/* The way to fill in a set of `ways` ways whose lock is held: a free one,
 * else the CLOCK victim (*evicted set). */
static inline int cli_clock_victim(struct cli_clock *s, unsigned ways,
				   bool *evicted)
{
	const uint8_t all = (uint8_t)((1u << ways) - 1);
	int w;

	*evicted = false;
	if ((s->valid & all) != all) {
		for (w = 0; w < (int)ways; w++)
			if (!(s->valid & (1u << w)))
				return w;
	}
	for (;;) {
		w = s->hand;
		s->hand = (uint8_t)((s->hand + 1) % ways);
		if (!(s->ref & (1u << w)))
			break;
		s->ref &= (uint8_t)~(1u << w);
	}
	*evicted = true;
	return w;
}

#endif
