/*
 * fuzz_seed.h - the seed corpora of the harnesses (tests/fuzz).
 *
 * A harness that builds its own valid inputs calls fuzz_seed_init() from
 * LLVMFuzzerInitialize (FUZZ_SEED_INITIALIZE when that is all it does):
 * with RS_FUZZ_SEED_DIR=dir set, its make_seeds writes each input with
 * fuzz_seed_put() into dir (created if missing), and the program exits. CTest runs that first (tests/fuzz/seeds.cmake)
 * and gives the files to the smoke run with -seed_inputs, so that a
 * short run starts deep in the format instead of at its first byte.
 */
#ifndef RS_TESTS_FUZZ_SEED_H
#define RS_TESTS_FUZZ_SEED_H

#include <stddef.h>

/* Write name = len bytes of p under the seed directory; exit(1) on error. */
void fuzz_seed_put(const char *name, const void *p, size_t len);
/* Write "<stem>-<i>" = the nhead bytes of head (the harness's set-up
 * bytes), then the string text without its NUL. */
void fuzz_seed_put_text(const char *stem, size_t i, const void *head,
			size_t nhead, const char *text);
/* Run make_seeds and exit when RS_FUZZ_SEED_DIR is set; else return. */
void fuzz_seed_init(void (*make_seeds)(void));

/* The LLVMFuzzerInitialize of a harness that needs nothing else set up:
 * fuzz_seed_init(make_seeds). */
#define FUZZ_SEED_INITIALIZE(make_seeds)				\
	int LLVMFuzzerInitialize(int *argc, char ***argv);		\
	int LLVMFuzzerInitialize(int *argc, char ***argv)		\
	{								\
		(void)argc;						\
		(void)argv;						\
		fuzz_seed_init(make_seeds);				\
		return 0;						\
	}

#endif
