/*
 * test_proto_garbage.c - proto_decode() against hostile input.
 *
 * 100k messages, deterministic (seed printed; RS_GARBAGE_SEED overrides,
 * RS_GARBAGE_ITERS changes the count): pure random bytes, valid headers
 * over random bodies, and valid messages of every kind mutated by bit
 * flips, interesting bytes, integer "length lies" written over any field
 * (u16 / u32 / u64), truncation, extension, splicing and combinations,
 * with the header's body length fixed up half of the time so that the
 * body decoders, not just the header check, see the damage. Each message
 * sits in a heap buffer of exactly its length, so under ASan (-DRS_SANITIZE
 * =ON) any read past the end aborts the test.
 *
 * Every decode must either fail cleanly (RS_E_PROTO, RS_E_TOOBIG or
 * RS_E_INVAL, with a message) or succeed with a message that re-encodes
 * to exactly the same bytes (the encoding is canonical), reading every
 * key, status, row and list entry on the way. Half of the decodes use
 * tight limits so that limit checks fire on otherwise valid input.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proto_test_util.h"

#define MAX_LEN (SEED_CAP * 2)

static struct corpus corpus;
static uint8_t work[MAX_LEN], re[1 << 21];
static uint64_t rng;

static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t below(uint32_t n)
{
	return n ? (uint32_t)(rnd() % n) : 0;
}

static const uint64_t interesting[] = {
	0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256,
	4095, 4096, 65535, 65536, 0x7fff, 0x8000, 0x7fffffff, 0x80000000,
	0xfffffffe, 0xffffffff, 0x100000000ull, 0x7fffffffffffffffull,
	0x8000000000000000ull, UINT64_MAX, 1u << 20, (1u << 24) + 1,
};

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void fix_body_len(size_t len)
{
	if (len >= PROTO_HDR_BYTES)
		put_le(work + 24, len - PROTO_HDR_BYTES, 4);
}

/* one mutation of work[0..*len) */
static void mutate(size_t *len)
{
	size_t n = *len, off;
	int w;

	switch (below(8)) {
	case 0: /* bit flips */
		for (uint32_t i = 0, k = 1 + below(8); n && i < k; i++)
			work[below((uint32_t)n)] ^= (uint8_t)(1u << below(8));
		break;
	case 1: /* an interesting byte */
		if (n)
			work[below((uint32_t)n)] =
				(uint8_t)interesting[below(RS_ARRAY_SIZE(
					interesting))];
		break;
	case 2: /* a length lie: an interesting integer over any field,
		   or the old value +-1 */
	case 3:
		w = 1 << (1 + below(3)); /* 2, 4 or 8 bytes */
		if (n < (size_t)w)
			break;
		off = below((uint32_t)(n - w + 1));
		if (below(3) == 0) {
			uint64_t v = get_le(work + off, w);

			put_le(work + off, below(2) ? v + 1 : v - 1, w);
		} else {
			put_le(work + off,
			       interesting[below(RS_ARRAY_SIZE(interesting))],
			       w);
		}
		break;
	case 4: /* truncate */
		*len = below((uint32_t)n + 1);
		break;
	case 5: /* extend with random bytes */
		for (uint32_t i = 0, k = 1 + below(64); i < k && n < MAX_LEN;
		     i++)
			work[n++] = (uint8_t)rnd();
		*len = n;
		break;
	case 6: /* overwrite a run with random bytes */
		if (n) {
			off = below((uint32_t)n);
			for (size_t i = off; i < n && i < off + 1 + below(16);
			     i++)
				work[i] = (uint8_t)rnd();
		}
		break;
	default: { /* splice: our head, another seed's tail */
		size_t s = below((uint32_t)corpus.n);
		size_t cut = below((uint32_t)n + 1);
		size_t from = below((uint32_t)corpus.len[s] + 1);
		size_t take = corpus.len[s] - from;

		if (cut + take > MAX_LEN)
			take = MAX_LEN - cut;
		memcpy(work + cut, corpus.msg[s] + from, take);
		*len = cut + take;
		break;
	}
	}
}

/* build the next test message in work[]; returns its length */
static size_t next_message(void)
{
	size_t len, s;
	uint32_t kind = below(10);

	if (kind == 0) { /* random bytes */
		len = below(200);
		for (size_t i = 0; i < len; i++)
			work[i] = (uint8_t)rnd();
		return len;
	}
	if (kind == 1) { /* a valid header over a random body */
		len = PROTO_HDR_BYTES + below(300);
		for (size_t i = 0; i < len; i++)
			work[i] = (uint8_t)(below(4) ? rnd() : 0);
		put_le(work, PROTO_MAGIC, 4);
		work[4] = PROTO_VERSION;
		work[5] = (uint8_t)(1 + below(PROTO_OP_COUNT - 1));
		put_le(work + 6, below(2) ? PROTO_F_REPLY : 0, 2);
		put_le(work + 28, below(4) ? 0 : (uint32_t)-(int)below(5000),
		       4);
		fix_body_len(len);
		return len;
	}
	s = below((uint32_t)corpus.n);
	len = corpus.len[s];
	memcpy(work, corpus.msg[s], len);
	for (uint32_t i = 0, k = 1 + below(3); i < k; i++)
		mutate(&len);
	if (below(2))
		fix_body_len(len);
	return len;
}

struct tally {
	uint64_t ok, proto, toobig, inval;
	uint64_t past_header[PROTO_OP_COUNT][2];
	uint64_t accepted[PROTO_OP_COUNT][2];
};

static int header_valid(const uint8_t *m, size_t len)
{
	return len >= PROTO_HDR_BYTES && get_le(m, 4) == PROTO_MAGIC &&
	       m[4] == PROTO_VERSION && m[5] > 0 && m[5] < PROTO_OP_COUNT &&
	       !(get_le(m + 6, 2) & ~PROTO_F_ALL) &&
	       get_le(m + 24, 4) == len - PROTO_HDR_BYTES;
}

/* a successful decode must describe exactly the bytes it came from */
static void check_accepted(const uint8_t *m, size_t len,
			   const struct proto_msg *d)
{
	struct proto_msg d2;
	int n = reencode(d, re, sizeof(re));

	if (n < 0)
		fail_msg("accepted %s message does not re-encode: %d %s",
			 proto_op_name(d->hdr.opcode), n, rs_errormsg());
	if ((size_t)n == len && memcmp(re, m, len) == 0)
		return;
	/* only error text may differ: decoding replaced control bytes */
	if (!(d->hdr.flags & PROTO_F_REPLY) || d->hdr.status >= 0)
		fail_msg("accepted %s %s re-encodes differently (%d vs %zu)",
			 proto_op_name(d->hdr.opcode),
			 d->hdr.flags & PROTO_F_REPLY ? "reply" : "request",
			 n, len);
	assert_int_equal(proto_decode(re, (size_t)n, NULL, &d2), 0);
	assert_string_equal(d2.u.error.msg, d->u.error.msg);
	assert_int_equal((size_t)n, len);
}

static void run_one(const uint8_t *src, size_t len,
		    const struct proto_limits *lim, struct tally *t)
{
	uint8_t *m = malloc(len ? len : 1);
	struct proto_msg d;
	int rc, reply;

	assert_non_null(m);
	memcpy(m, src, len);
	reply = len > 7 && (m[6] & PROTO_F_REPLY);
	if (header_valid(m, len))
		t->past_header[m[5]][reply]++;
	rs_clearerr();
	rc = proto_decode(m, len, lim, &d);
	switch (rc) {
	case 0:
		t->ok++;
		t->accepted[d.hdr.opcode][reply]++;
		check_accepted(m, len, &d);
		break;
	case RS_E_PROTO:
		t->proto++;
		break;
	case RS_E_TOOBIG:
		t->toobig++;
		break;
	case RS_E_INVAL:
		t->inval++;
		break;
	default:
		fail_msg("decode returned %d (%s)", rc, rs_errormsg());
	}
	if (rc && rs_errormsg()[0] == '\0')
		fail_msg("error %d without a message", rc);
	free(m);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : dflt;
}

static void garbage(void **state)
{
	const uint64_t seed = env_u64("RS_GARBAGE_SEED", 20240611);
	const uint64_t iters = env_u64("RS_GARBAGE_ITERS", 100000);
	struct proto_limits dflt, tight = { PROTO_MIN_MESSAGE_BYTES, 5, 3, 2 };
	static struct tally t;

	proto_limits_default(&dflt);
	rng = seed;
	print_message("seed %llu, %llu messages\n", (unsigned long long)seed,
		      (unsigned long long)iters);
	for (uint64_t i = 0; i < iters; i++) {
		size_t len = next_message();

		run_one(work, len, i & 1 ? &tight : &dflt, &t);
	}
	print_message("accepted %llu, RS_E_PROTO %llu, RS_E_TOOBIG %llu, "
		      "RS_E_INVAL %llu\n", (unsigned long long)t.ok,
		      (unsigned long long)t.proto,
		      (unsigned long long)t.toobig,
		      (unsigned long long)t.inval);
	if (iters < 100000)
		return;
	/* the run reached every body decoder, and not only to reject */
	for (uint32_t op = 1; op < PROTO_OP_COUNT; op++)
		for (int r = 0; r < 2; r++) {
			if (t.past_header[op][r] < 500)
				fail_msg("%s %s: only %llu messages past the "
					 "header", proto_op_name(op),
					 r ? "reply" : "request",
					 (unsigned long long)
						 t.past_header[op][r]);
			if (t.accepted[op][r] == 0)
				fail_msg("%s %s: nothing accepted",
					 proto_op_name(op),
					 r ? "reply" : "request");
		}
	assert_true(t.proto > 0 && t.toobig > 0 && t.inval > 0);
}

/* the whole corpus, every truncation and every single-bit flip */
static void exhaustive_small_damage(void **state)
{
	struct proto_limits dflt;
	static struct tally t;

	proto_limits_default(&dflt);
	for (size_t s = 0; s < corpus.n; s++) {
		const size_t len = corpus.len[s];

		for (size_t cut = 0; cut < len; cut++) {
			memcpy(work, corpus.msg[s], len);
			run_one(work, cut, &dflt, &t);
			fix_body_len(cut);
			run_one(work, cut, &dflt, &t);
		}
		for (size_t bit = 0; bit < len * 8 && bit < 4096 * 8; bit++) {
			memcpy(work, corpus.msg[s], len);
			work[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			run_one(work, len, &dflt, &t);
		}
	}
	print_message("accepted %llu of the damaged messages\n",
		      (unsigned long long)t.ok);
}

static int setup(void **state)
{
	corpus_build(&corpus);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exhaustive_small_damage),
		cmocka_unit_test(garbage),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
