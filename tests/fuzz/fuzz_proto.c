/*
 * fuzz_proto.c - libFuzzer harness for proto_decode() (clang only; see
 * tests/fuzz/CMakeLists.txt).
 *
 * Each input is decoded twice, under the default limits and under tight
 * ones. A decode must fail with RS_E_PROTO / RS_E_TOOBIG / RS_E_INVAL and
 * a message, or succeed with a message that re-encodes to the same bytes
 * (only sanitised error text may differ); anything else traps. Run:
 *   ./fuzz_proto -max_total_time=600 corpus/
 * With RS_FUZZ_SEED_DIR=dir set, the harness first writes one valid
 * message of every kind into dir (a starting corpus) and exits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_test_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static uint8_t re[1 << 21];

static void write_seeds(const char *dir)
{
	static struct corpus c;
	char path[4096];
	FILE *f;

	corpus_build(&c);
	for (size_t i = 0; i < c.n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, c.name[i]);
		if (!(f = fopen(path, "wb"))) {
			perror(path);
			exit(1);
		}
		fwrite(c.msg[i], 1, c.len[i], f);
		fclose(f);
	}
	printf("wrote %zu seeds to %s\n", c.n, dir);
	exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("RS_FUZZ_SEED_DIR");

	if (dir && *dir)
		write_seeds(dir);
	return 0;
}

static void one(const uint8_t *data, size_t size,
		const struct proto_limits *lim)
{
	struct proto_msg m, m2;
	int rc = proto_decode(data, size, lim, &m), n;

	if (rc) {
		if ((rc != RS_E_PROTO && rc != RS_E_TOOBIG &&
		     rc != RS_E_INVAL) || !rs_errormsg()[0])
			__builtin_trap();
		return;
	}
	n = reencode(&m, re, sizeof(re));
	if (n < 0)
		__builtin_trap();
	if ((size_t)n == size && memcmp(re, data, size) == 0)
		return;
	/* only an error reply's text may differ (control bytes -> '?') */
	if (!(m.hdr.flags & PROTO_F_REPLY) || m.hdr.status >= 0 ||
	    (size_t)n != size || proto_decode(re, (size_t)n, NULL, &m2) ||
	    strcmp(m.u.error.msg, m2.u.error.msg))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct proto_limits tight = { PROTO_MIN_MESSAGE_BYTES, 5, 3, 2 };
	struct proto_limits dflt;

	proto_limits_default(&dflt);
	one(data, size, &dflt);
	one(data, size, &tight);
	return 0;
}
