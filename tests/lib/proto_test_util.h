/*
 * proto_test_util.h - shared by test_proto.c and test_proto_garbage.c:
 * a corpus of valid messages (every opcode, both directions) and
 * reencode(), which encodes a decoded message again through the public
 * encoders. The encoding is canonical (reserved bytes zero, no slack), so
 * any message that decodes must re-encode to the same bytes; the tests use
 * that as their strongest check. fuzz_proto.c compiles proto_test_util.c
 * itself (for its coverage instrumentation).
 */
#ifndef PROTO_TEST_UTIL_H
#define PROTO_TEST_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "common/rs_internal.h"

#define SEED_CAP 8192
#define MAX_SEEDS 64

struct corpus {
	uint8_t msg[MAX_SEEDS][SEED_CAP];
	size_t len[MAX_SEEDS];
	const char *name[MAX_SEEDS];
	size_t n;
};

struct proto_hdr hdr_of(uint64_t req_id, int traced);

struct proto_table_spec sample_spec(const char *name, uint32_t kind);

struct proto_table_info sample_info(const char *name, uint32_t id);

/* every message kind, both directions, several shapes */
void corpus_build(struct corpus *c);

/* Encode a decoded message again. Returns the length or a negative code. */
int reencode(const struct proto_msg *m, uint8_t *buf, size_t cap);

#endif
