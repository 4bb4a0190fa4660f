/*
 * alloc.h - the one allocator of the storage side, and the failure
 * injection behind it (debug and sanitizer builds).
 *
 * Every heap allocation of src/common, src/index, src/value, src/ckpt,
 * src/place and src/server goes through rs_malloc, rs_calloc, rs_realloc,
 * rs_strdup, rs_strndup, rs_aligned_alloc or rs_posix_memalign (release
 * with free(), or rs_free() for symmetry), as PMDK's common/alloc.c does,
 * so that a test can fail any one of them and check that the caller
 * unwinds: an error returned, nothing leaked, nothing half made. src/verbs
 * keeps its own call sites (plain names, src/verbs/rv_fi.h) and maps its
 * allocators onto these: one mechanism, one count.
 *
 * Without RS_FAULT_INJECT (release builds) each wrapper is a macro for the
 * libc call: no cost on any path. With it (CMakeLists.txt: Debug and
 * sanitizer builds) each first asks rs_fi_fail(site) and, told to fail,
 * returns the call's documented error shape without calling it: NULL with
 * errno ENOMEM, or ENOMEM from rs_posix_memalign.
 *
 * Counting (the engine rs_fi_*, src/common/alloc.c, shared with the verbs
 * sites of rv_fi.h, which are numbered after the allocator sites). Only
 * threads that called rs_fi_enroll(true) count and fail, so a sequence of
 * calls is repeatable whatever other threads do. rs_fi_arm(site, nth) resets
 * the counts and fails the nth call (from 1) of site counted since, once;
 * site RS_FI_ALLOC: of any allocator, RS_FI_ANY: of any site (allocator or
 * verbs); nth 0 disarms and only counts. rs_fi_calls(site) tells how many
 * calls of a site (or class) were counted, rs_fi_fired() whether the armed
 * failure happened. A thread not enrolled pays a thread-local load per
 * call. Thread-safe (a mutex); the arming is for one test at a time.
 *
 * A walk (tests/unit/test_alloc_walk.c): arm (RS_FI_ALLOC, 0), run an
 * operation, read N = rs_fi_calls(RS_FI_ALLOC); then for k = 1..N arm
 * (RS_FI_ALLOC, k), run it again and check that it failed cleanly and that
 * rs_fi_fired() is true.
 */
#ifndef RS_COMMON_ALLOC_H
#define RS_COMMON_ALLOC_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifdef RS_FAULT_INJECT
#include <errno.h>

#define RS_FI_ALLOC_SITES(X)                                                  \
	X(CALLOC) X(MALLOC) X(REALLOC) X(POSIX_MEMALIGN) X(ALIGNED_ALLOC)     \
	X(STRDUP)

enum rs_fi_site {
#define RS_FI_ENUM(s) RS_FI_##s,
	RS_FI_ALLOC_SITES(RS_FI_ENUM)
#undef RS_FI_ENUM
	RS_FI_NALLOC,			/* the first site of another module */
	RS_FI_MAX_SITES = 64,
	RS_FI_ANY = RS_FI_MAX_SITES,	/* any site */
	RS_FI_ALLOC,			/* any allocator site */
};

void rs_fi_enroll(bool on);		/* the calling thread counts */
void rs_fi_arm(int site, unsigned long nth);
unsigned long rs_fi_calls(int site);
bool rs_fi_fired(void);
/* An allocator site's name ("CALLOC"), "ALLOC", "ANY", or "?". */
const char *rs_fi_site_name(int site);
bool rs_fi_fail_slow(int site);

extern __thread bool rs_fi_enrolled;

static inline bool rs_fi_fail(int site)
{
	return __builtin_expect(rs_fi_enrolled, 0) && rs_fi_fail_slow(site);
}

static inline void *rs_malloc(size_t n)
{
	if (rs_fi_fail(RS_FI_MALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return malloc(n);
}

static inline void *rs_calloc(size_t n, size_t sz)
{
	if (rs_fi_fail(RS_FI_CALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return calloc(n, sz);
}

/* On failure p stays allocated, as with realloc. */
static inline void *rs_realloc(void *p, size_t n)
{
	if (rs_fi_fail(RS_FI_REALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, n);
}

static inline char *rs_strdup(const char *s)
{
	if (rs_fi_fail(RS_FI_STRDUP)) {
		errno = ENOMEM;
		return NULL;
	}
	return strdup(s);
}

static inline char *rs_strndup(const char *s, size_t n)
{
	if (rs_fi_fail(RS_FI_STRDUP)) {
		errno = ENOMEM;
		return NULL;
	}
	return strndup(s, n);
}

static inline void *rs_aligned_alloc(size_t align, size_t n)
{
	if (rs_fi_fail(RS_FI_ALIGNED_ALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return aligned_alloc(align, n);
}

static inline int rs_posix_memalign(void **p, size_t align, size_t n)
{
	if (rs_fi_fail(RS_FI_POSIX_MEMALIGN))
		return ENOMEM;
	return posix_memalign(p, align, n);
}

#else /* !RS_FAULT_INJECT: the libc calls themselves */

#define rs_malloc(n) malloc(n)
#define rs_calloc(n, sz) calloc(n, sz)
#define rs_realloc(p, n) realloc(p, n)
#define rs_strdup(s) strdup(s)
#define rs_strndup(s, n) strndup(s, n)
#define rs_aligned_alloc(a, n) aligned_alloc(a, n)
#define rs_posix_memalign(p, a, n) posix_memalign(p, a, n)

#endif /* RS_FAULT_INJECT */

#define rs_free(p) free(p)

#endif
