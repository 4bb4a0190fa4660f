/*
 * fuzz_ckpt_part.c - libFuzzer harness for the reader of checkpoint part
 * files (ckpt_part_open, ckpt_part_next; clang only, see
 * tests/fuzz/CMakeLists.txt).
 *
 * A part's header and whole body are checksummed, and the body is a zstd
 * stream: random bytes would stop at the first check. So input byte 0
 * chooses what the rest is:
 *   odd      the whole file, opened without an expected descriptor;
 *   even     [rows] [deleted] BODY under a valid header of descriptor
 *            (byte0 >> 1) % NDESC (fixed, valid ones, written by the real
 *            writer), with a trailer of those counts (raw bytes as they
 *            imply) and the correct checksum. BODY is the record stream
 *            itself, which the harness compresses (bit 4 clear), or the
 *            compressed stream (bit 4 set).
 * The file lives in a memfd, opened through /proc/self/fd: no disk.
 *
 * Each record must be of a known kind with the payload and state its
 * descriptor says (every byte is read, so ASan sees a short buffer); the
 * reader ends with 0 and a sum matching what it returned, or with
 * RS_E_CORRUPT / RS_E_UNSUPPORTED and a message. Nothing may leak.
 * RS_FUZZ_SEED_DIR=dir: write parts of each descriptor, in each form,
 * into dir and exit (fuzz_seed.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "ckpt/ckpt_int.h"
#include "common/rs_internal.h"
#include "fuzz_seed.h"
#include "value/optimizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define HDR 64
#define TRAILER 40
#define REC_HEAD 9
#define NDESC 4
#define MAX_RECORDS 100000	/* a zstd bomb: enough of it */

static struct ckpt_part_desc desc[NDESC];
static uint8_t hdr[NDESC][HDR];	/* as ckpt_part_create wrote them */
static int fd = -1;		/* the memfd */
static char path[64];		/* and its name */
static volatile uint8_t sink;	/* what touch() read */

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_ckpt_part: %s: %s\n", what, rs_errormsg());
	exit(1);
}

static void desc_init(void)
{
	static const struct { uint32_t dim, dtype, optim; bool state; } g[] = {
		{ 4, PROTO_DTYPE_FP32, OPTIM_SGD, true },
		{ 3, PROTO_DTYPE_FP16, OPTIM_ADAGRAD, true },
		{ 8, PROTO_DTYPE_BF16, OPTIM_ADAM, true },
		{ 5, PROTO_DTYPE_FP32, OPTIM_ROWWISE_ADAGRAD, false },
	};

	for (unsigned i = 0; i < NDESC; i++) {
		struct ckpt_part_desc *d = &desc[i];

		memset(d->id, 0xa0 + (int)i, CKPT_ID_BYTES);
		d->table = i;
		d->part = 7;
		d->dim = g[i].dim;
		d->dtype = g[i].dtype;
		d->optim_kind = g[i].optim;
		d->with_state = g[i].state;
		d->state_floats = d->with_state ?
			(uint32_t)optim_state_floats(d->optim_kind, d->dim) : 0;
	}
}

/* Write a part of descriptor i with a few records into tmp (the real
 * writer), read it back whole: *len bytes, malloc'd. */
static uint8_t *real_part(unsigned i, const char *tmp, size_t *len)
{
	const struct ckpt_part_desc *d = &desc[i];
	uint8_t payload[64] = { 0 }, *buf = NULL;
	float state[64] = { 0 };
	struct ckpt_writer *w;
	struct ckpt_part_sum sum;
	FILE *f;

	for (unsigned k = 0; k < 64; k++) {
		payload[k] = (uint8_t)(k * 37);
		state[k] = 0.5f * (float)k;
	}
	unlink(tmp);
	if (ckpt_part_create(&w, tmp, d, 1))
		fail("ckpt_part_create");
	for (uint64_t k = 0; k < 5; k++)
		if (ckpt_part_put(w, 1000 + k, payload, state) ||
		    (k % 2 && ckpt_part_put_deleted(w, 77 + k)))
			fail("ckpt_part_put");
	if (ckpt_part_finish(w, &sum))
		fail("ckpt_part_finish");
	if (!(f = fopen(tmp, "rb")) || !(buf = malloc(sum.bytes)) ||
	    fread(buf, 1, sum.bytes, f) != sum.bytes)
		fail(tmp);
	fclose(f);
	unlink(tmp);
	*len = sum.bytes;
	return buf;
}

static void put(const char *name, unsigned i, uint8_t mode, const void *p,
		size_t len, uint8_t rows, uint8_t deleted)
{
	uint8_t *b = malloc(len + 3);
	char n[64];
	size_t off = 0;

	if (!b)
		exit(1);
	b[off++] = mode;
	if (!(mode & 1)) {
		b[off++] = rows;
		b[off++] = deleted;
	}
	memcpy(b + off, p, len);
	snprintf(n, sizeof(n), "%s-%u", name, i);
	fuzz_seed_put(n, b, off + len);
	free(b);
}

static void make_seeds(void)
{
	char tmp[] = "/tmp/rs-fuzz-part-XXXXXX";
	int tfd = mkstemp(tmp);

	if (tfd < 0)
		fail(tmp);
	close(tfd);
	for (unsigned i = 0; i < NDESC; i++) {
		size_t len, blen, rlen;
		uint8_t *f = real_part(i, tmp, &len), *raw;
		uint8_t mode = (uint8_t)(i << 1);

		/* the whole file; its body; its records */
		put("file", i, 1, f, len, 0, 0);
		blen = len - HDR - TRAILER;
		put("body", i, mode | 0x10, f + HDR, blen, 5, 2);
		rlen = (size_t)ZSTD_getFrameContentSize(f + HDR, blen);
		if (rlen == (size_t)ZSTD_CONTENTSIZE_UNKNOWN ||
		    rlen == (size_t)ZSTD_CONTENTSIZE_ERROR)
			rlen = 1 << 16;
		if (!(raw = malloc(rlen + 1)))
			exit(1);
		rlen = ZSTD_decompress(raw, rlen + 1, f + HDR, blen);
		if (ZSTD_isError(rlen))
			fail("zstd");
		put("records", i, mode, raw, rlen, 5, 2);
		free(raw);
		free(f);
	}
	unlink(tmp);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char tmp[] = "/tmp/rs-fuzz-part-XXXXXX";
	int tfd;

	(void)argc;
	(void)argv;
	desc_init();
	fuzz_seed_init(make_seeds);
	if ((tfd = mkstemp(tmp)) < 0)
		fail(tmp);
	close(tfd);
	for (unsigned i = 0; i < NDESC; i++) {
		size_t len;
		uint8_t *f = real_part(i, tmp, &len);

		memcpy(hdr[i], f, HDR);
		free(f);
	}
	unlink(tmp);
	if ((fd = memfd_create("fuzz-part", MFD_CLOEXEC)) < 0)
		fail("memfd_create");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return 0;
}

static void file_put(const void *p, size_t n, off_t at)
{
	if (n && pwrite(fd, p, n, at) != (ssize_t)n)
		__builtin_trap();
}

/* The file for a non-raw input: header, body, trailer. */
static void build(const struct ckpt_part_desc *d, const uint8_t *h,
		  const uint8_t *data, size_t size)
{
	static uint8_t z[1 << 20];
	const uint8_t *body = data + 3;
	size_t blen = size - 3;
	uint64_t rows = data[1], del = data[2];
	uint8_t t[TRAILER];
	XXH64_state_t *x = XXH64_createState();
	size_t rec = REC_HEAD + ckpt_payload_bytes(d) +
		     (size_t)d->state_floats * 4;

	if (!x)
		__builtin_trap();
	if (!(data[0] & 0x10)) {
		blen = ZSTD_compress(z, sizeof(z), body, blen, 1);
		if (ZSTD_isError(blen))
			__builtin_trap();
		body = z;
	}
	XXH64_reset(x, 0);
	XXH64_update(x, h, HDR);
	XXH64_update(x, body, blen);
	memcpy(t, "RSCKEND1", 8);
	le_st64(t + 8, rows);
	le_st64(t + 16, del);
	le_st64(t + 24, rows * rec + del * REC_HEAD);
	le_st64(t + 32, XXH64_digest(x));
	XXH64_freeState(x);
	file_put(h, HDR, 0);
	file_put(body, blen, HDR);
	file_put(t, TRAILER, (off_t)(HDR + blen));
}

/* Every byte of a record, so that a short buffer is seen. */
static void touch(const struct ckpt_part_desc *d,
		  const struct ckpt_record *rec)
{
	uint8_t acc = 0;

	if (rec->kind == CKPT_REC_DELETED) {
		if (rec->payload || rec->state)
			__builtin_trap();
		return;
	}
	if (rec->kind != CKPT_REC_ROW || !rec->payload ||
	    !rec->state != !d->with_state)
		__builtin_trap();
	for (size_t i = 0; i < ckpt_payload_bytes(d); i++)
		acc ^= ((const uint8_t *)rec->payload)[i];
	for (size_t i = 0; rec->state && i < d->state_floats; i++)
		acc ^= (uint8_t)(rec->state[i] != 0);
	sink = acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct ckpt_part_desc *expect = NULL, *d;
	struct ckpt_reader *r;
	struct ckpt_record rec;
	struct ckpt_part_sum sum;
	uint64_t rows = 0, del = 0;
	unsigned n = 0;
	int rc;

	if (!size || size > (1 << 20) || ftruncate(fd, 0))
		return 0;
	if (data[0] & 1) {
		file_put(data + 1, size - 1, 0);
	} else if (size >= 3) {
		unsigned i = (data[0] >> 1) % NDESC;

		expect = &desc[i];
		build(expect, hdr[i], data, size);
	} else {
		return 0;
	}
	rc = ckpt_part_open(&r, path, expect);
	if (rc) {
		if ((rc != RS_E_CORRUPT && rc != RS_E_UNSUPPORTED) || r ||
		    !rs_errormsg()[0])
			__builtin_trap();
		return 0;
	}
	d = ckpt_part_desc_of(r);
	if (ckpt_desc_check(d, "fuzz") || (expect && memcmp(d, expect,
							    sizeof(*d))))
		__builtin_trap();
	while (n++ < MAX_RECORDS && (rc = ckpt_part_next(r, &rec)) > 0) {
		touch(d, &rec);
		if (rec.kind == CKPT_REC_ROW)
			rows++;
		else
			del++;
	}
	if (rc == 0) {
		ckpt_part_sum_of(r, &sum);
		if (sum.rows != rows || sum.deleted != del ||
		    ckpt_part_next(r, &rec) != 0)
			__builtin_trap();
	} else if (rc < 0 && (rc != RS_E_CORRUPT || !rs_errormsg()[0])) {
		__builtin_trap();
	}
	ckpt_part_close(r);
	return 0;
}
