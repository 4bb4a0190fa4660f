/*
 * ckpt_part.c - part files of a checkpoint: writer and reader.
 *
 * Layout (docs/checkpoint-format.md; all integers little-endian):
 *
 *   header  64 bytes
 *     0  magic "RSCKPART"        32 table index in the manifest
 *     8  format version (1)      36 part index in the table
 *    12  header bytes (64)       40 checkpoint id (16 bytes)
 *    16  flags (1: with state)   56 XXH64 of bytes [0, 56)
 *    20  dim
 *    24  dtype (u8), optimizer (u8), reserved (u16, 0)
 *    28  state floats per row
 *   body    one zstd stream of records:
 *             key u64, kind u8 (1 row, 2 deleted),
 *             row only: dim elements of dtype, then (with state)
 *             state_floats fp32
 *   trailer 40 bytes
 *     0  magic "RSCKEND1"   8 rows   16 deleted   24 record bytes
 *    32  XXH64 of every byte before the trailer
 *
 * Every byte is covered: the header by its own checksum, header and body
 * by the trailer's, the trailer's counts by the records counted, and its
 * checksum by the manifest, which records it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "ckpt/ckpt_int.h"
#include "common/rs_internal.h"
#include "value/optimizer.h"
#include "value/row_format.h"

#define HDR_BYTES 64
#define TRAILER_BYTES 40
#define REC_HEAD 9		/* key + kind */
#define F_STATE 1u
#define BUF_MIN (256u << 10)
/* zstd worker threads per part being written (ZSTD_c_nbWorkers): the
 * dump's CPU is compression, and writes are paused while it lasts */
#define CKPT_ZSTD_WORKERS 2

static const char part_magic[8] = { 'R', 'S', 'C', 'K', 'P', 'A', 'R', 'T' };
static const char end_magic[8] = { 'R', 'S', 'C', 'K', 'E', 'N', 'D', '1' };

/* ---- shared ---- */

int ckpt_desc_check(const struct ckpt_part_desc *d, const char *what)
{
	if (d->dim < 1 || d->dim > ROW_MAX_DIM)
		return rs_seterr(RS_E_CORRUPT, "%s: dim %u is not in [1, %u]",
				 what, d->dim, ROW_MAX_DIM);
	if (d->dtype >= PROTO_DTYPE_COUNT)
		return rs_seterr(RS_E_CORRUPT, "%s: unknown dtype %u", what,
				 d->dtype);
	if (d->optim_kind >= OPTIM_KIND_COUNT)
		return rs_seterr(RS_E_CORRUPT, "%s: unknown optimizer %u", what,
				 d->optim_kind);
	if (d->with_state &&
	    d->state_floats != optim_state_floats(d->optim_kind, d->dim))
		return rs_seterr(RS_E_CORRUPT, "%s: %u state floats per row, "
				 "the optimizer keeps %zu", what,
				 d->state_floats,
				 optim_state_floats(d->optim_kind, d->dim));
	if (!d->with_state && d->state_floats)
		return rs_seterr(RS_E_CORRUPT, "%s: state floats without "
				 "state", what);
	return 0;
}

size_t ckpt_payload_bytes(const struct ckpt_part_desc *d)
{
	return (size_t)d->dim * (d->dtype == PROTO_DTYPE_FP32 ? 4 : 2);
}

static size_t row_rec_bytes(const struct ckpt_part_desc *d)
{
	return REC_HEAD + ckpt_payload_bytes(d) + (size_t)d->state_floats * 4;
}

static void hdr_encode(uint8_t h[HDR_BYTES], const struct ckpt_part_desc *d)
{
	memset(h, 0, HDR_BYTES);
	memcpy(h, part_magic, 8);
	le_st32(h + 8, CKPT_FORMAT_VERSION);
	le_st32(h + 12, HDR_BYTES);
	le_st32(h + 16, d->with_state ? F_STATE : 0);
	le_st32(h + 20, d->dim);
	h[24] = (uint8_t)d->dtype;
	h[25] = (uint8_t)d->optim_kind;
	le_st32(h + 28, d->state_floats);
	le_st32(h + 32, d->table);
	le_st32(h + 36, d->part);
	memcpy(h + 40, d->id, CKPT_ID_BYTES);
	le_st64(h + 56, XXH64(h, 56, 0));
}

static int hdr_decode(const uint8_t h[HDR_BYTES], struct ckpt_part_desc *d,
		      const char *path)
{
	uint32_t flags;

	if (memcmp(h, part_magic, 8))
		return rs_seterr(RS_E_CORRUPT, "%s: not a checkpoint part "
				 "(bad magic)", path);
	if (le_ld64(h + 56) != XXH64(h, 56, 0))
		return rs_seterr(RS_E_CORRUPT, "%s: header checksum mismatch",
				 path);
	if (le_ld32(h + 8) != CKPT_FORMAT_VERSION)
		return rs_seterr(RS_E_UNSUPPORTED, "%s: format version %u (this "
				 "build reads %u)", path, le_ld32(h + 8),
				 CKPT_FORMAT_VERSION);
	flags = le_ld32(h + 16);
	if (le_ld32(h + 12) != HDR_BYTES || (flags & ~F_STATE) || h[26] ||
	    h[27])
		return rs_seterr(RS_E_CORRUPT, "%s: malformed header", path);
	memset(d, 0, sizeof(*d));
	d->with_state = flags & F_STATE;
	d->dim = le_ld32(h + 20);
	d->dtype = h[24];
	d->optim_kind = h[25];
	d->state_floats = le_ld32(h + 28);
	d->table = le_ld32(h + 32);
	d->part = le_ld32(h + 36);
	memcpy(d->id, h + 40, CKPT_ID_BYTES);
	return ckpt_desc_check(d, path);
}

static bool desc_same(const struct ckpt_part_desc *a,
		      const struct ckpt_part_desc *b)
{
	return !memcmp(a->id, b->id, CKPT_ID_BYTES) && a->table == b->table &&
	       a->part == b->part && a->dim == b->dim &&
	       a->dtype == b->dtype && a->optim_kind == b->optim_kind &&
	       a->state_floats == b->state_floats &&
	       a->with_state == b->with_state;
}

/* ---- writer ---- */

struct ckpt_writer {
	char *path;
	int fd;
	struct ckpt_part_desc d;
	size_t payload_bytes, rec_bytes;
	ZSTD_CCtx *cz;
	XXH64_state_t *h;
	uint8_t *in, *out;		/* records; compressed */
	size_t in_len, in_cap, out_cap;
	struct ckpt_part_sum sum;
};

static int w_write(struct ckpt_writer *w, const void *p, size_t n,
		   bool hashed)
{
	const uint8_t *b = p;

	if (hashed)
		XXH64_update(w->h, p, n);
	while (n) {
		ssize_t k = write(w->fd, b, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return rs_seterr(-errno, "%s: write: %s", w->path,
					 strerror(errno));
		b += k;
		n -= (size_t)k;
		w->sum.bytes += (uint64_t)k;
	}
	return 0;
}

/* Compress what is staged (end: and finish the stream). */
static int w_flush(struct ckpt_writer *w, bool end)
{
	ZSTD_inBuffer in = { w->in, w->in_len, 0 };
	size_t left;
	int rc;

	do {
		ZSTD_outBuffer out = { w->out, w->out_cap, 0 };

		left = ZSTD_compressStream2(w->cz, &out, &in,
					    end ? ZSTD_e_end : ZSTD_e_continue);
		if (ZSTD_isError(left))
			return rs_seterr(RS_E_INVAL, "%s: zstd: %s", w->path,
					 ZSTD_getErrorName(left));
		if ((rc = w_write(w, w->out, out.pos, true)))
			return rc;
	} while (in.pos < in.size || (end && left));
	w->in_len = 0;
	return 0;
}

int ckpt_part_create(struct ckpt_writer **out, const char *path,
		     const struct ckpt_part_desc *d, int level)
{
	struct ckpt_writer *w;
	uint8_t hdr[HDR_BYTES];
	int rc;

	*out = NULL;
	if ((rc = ckpt_desc_check(d, path)))
		return rs_seterr(RS_E_INVAL, "%s", rs_errormsg());
	if (!(w = rs_calloc(1, sizeof(*w))))
		return rs_seterr(-ENOMEM, "checkpoint: out of memory");
	w->fd = -1;
	w->d = *d;
	w->payload_bytes = ckpt_payload_bytes(d);
	w->rec_bytes = row_rec_bytes(d);
	w->in_cap = w->rec_bytes * 2 > BUF_MIN ? w->rec_bytes * 2 : BUF_MIN;
	w->out_cap = ZSTD_CStreamOutSize();
	w->path = rs_strdup(path);
	w->in = rs_malloc(w->in_cap);
	w->out = rs_malloc(w->out_cap);
	w->cz = ZSTD_createCCtx();
	w->h = XXH64_createState();
	if (!w->path || !w->in || !w->out || !w->cz || !w->h) {
		rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
		goto fail;
	}
	if (level &&
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cz, ZSTD_c_compressionLevel,
						level))) {
		rc = rs_seterr(RS_E_INVAL, "%s: zstd level %d refused", path,
			       level);
		goto fail;
	}
	/* compression off the dumping thread: zstd's own workers compress
	 * while it walks the rows (the same frame format; a libzstd built
	 * without threads refuses, and this thread compresses) */
	(void)ZSTD_CCtx_setParameter(w->cz, ZSTD_c_nbWorkers,
				     CKPT_ZSTD_WORKERS);
	XXH64_reset(w->h, 0);
	w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		rc = rs_seterr(-errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	hdr_encode(hdr, d);
	if ((rc = w_write(w, hdr, sizeof(hdr), true)))
		goto fail;
	*out = w;
	return 0;
fail:
	ckpt_part_abort(w);
	return rc;
}

static int w_stage(struct ckpt_writer *w, size_t need)
{
	return w->in_len + need > w->in_cap ? w_flush(w, false) : 0;
}

int ckpt_part_put(struct ckpt_writer *w, uint64_t key, const void *payload,
		  const float *state)
{
	uint8_t *p;
	int rc;

	if ((rc = w_stage(w, w->rec_bytes)))
		return rc;
	p = w->in + w->in_len;
	le_st64(p, key);
	p[8] = CKPT_REC_ROW;
	memcpy(p + REC_HEAD, payload, w->payload_bytes);
	if (w->d.state_floats)	/* only with state */
		ckpt_store_f32(p + REC_HEAD + w->payload_bytes, state,
			       w->d.state_floats);
	w->in_len += w->rec_bytes;
	w->sum.rows++;
	w->sum.raw_bytes += w->rec_bytes;
	return 0;
}

int ckpt_part_put_deleted(struct ckpt_writer *w, uint64_t key)
{
	uint8_t *p;
	int rc;

	if ((rc = w_stage(w, REC_HEAD)))
		return rc;
	p = w->in + w->in_len;
	le_st64(p, key);
	p[8] = CKPT_REC_DELETED;
	w->in_len += REC_HEAD;
	w->sum.deleted++;
	w->sum.raw_bytes += REC_HEAD;
	return 0;
}

int ckpt_part_finish(struct ckpt_writer *w, struct ckpt_part_sum *sum)
{
	uint8_t t[TRAILER_BYTES];
	int rc;

	if ((rc = w_flush(w, true)))
		goto fail;
	w->sum.xxh64 = XXH64_digest(w->h);
	memcpy(t, end_magic, 8);
	le_st64(t + 8, w->sum.rows);
	le_st64(t + 16, w->sum.deleted);
	le_st64(t + 24, w->sum.raw_bytes);
	le_st64(t + 32, w->sum.xxh64);
	if ((rc = w_write(w, t, sizeof(t), false)))
		goto fail;
	if (fsync(w->fd)) {
		rc = rs_seterr(-errno, "%s: fsync: %s", w->path,
			       strerror(errno));
		goto fail;
	}
	if (close(w->fd)) {
		w->fd = -1;
		rc = rs_seterr(-errno, "%s: close: %s", w->path,
			       strerror(errno));
		goto fail;
	}
	w->fd = -1;
	*sum = w->sum;
	free(w->path);
	w->path = NULL;
	ckpt_part_abort(w);	/* frees the rest; no file to remove */
	return 0;
fail:
	ckpt_part_abort(w);
	return rc;
}

void ckpt_part_abort(struct ckpt_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0) {
		close(w->fd);
		if (w->path)
			unlink(w->path);
	}
	ZSTD_freeCCtx(w->cz);
	if (w->h)
		XXH64_freeState(w->h);
	free(w->in);
	free(w->out);
	free(w->path);
	free(w);
}

/* ---- reader ---- */

struct ckpt_reader {
	char *path;
	int fd;
	struct ckpt_part_desc d;
	size_t payload_bytes, rec_bytes;
	uint64_t off, body_end;		/* next compressed byte; its end */
	ZSTD_DCtx *dz;
	XXH64_state_t *h;
	uint8_t *cin;			/* compressed input */
	size_t cin_cap, cin_len, cin_pos;
	uint8_t *raw;			/* decompressed records */
	size_t raw_cap, raw_len, raw_pos;
	size_t zret;			/* last ZSTD_decompressStream */
	float *state;			/* aligned copy of a record's state */
	struct ckpt_part_sum want, got;	/* trailer; counted */
	bool done;
};

static int r_pread(struct ckpt_reader *r, void *buf, size_t n, uint64_t at)
{
	uint8_t *b = buf;

	while (n) {
		ssize_t k = pread(r->fd, b, n, (off_t)at);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return rs_seterr(-errno, "%s: read: %s", r->path,
					 strerror(errno));
		if (k == 0)
			return rs_seterr(RS_E_CORRUPT, "%s: truncated", r->path);
		b += k;
		n -= (size_t)k;
		at += (uint64_t)k;
	}
	return 0;
}

int ckpt_part_open(struct ckpt_reader **out, const char *path,
		   const struct ckpt_part_desc *expect)
{
	struct ckpt_reader *r;
	uint8_t hdr[HDR_BYTES], t[TRAILER_BYTES];
	struct stat st;
	int rc;

	*out = NULL;
	if (!(r = rs_calloc(1, sizeof(*r))))
		return rs_seterr(-ENOMEM, "checkpoint: out of memory");
	r->fd = -1;
	if (!(r->path = rs_strdup(path))) {
		rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
		goto fail;
	}
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0 || fstat(r->fd, &st)) {
		rc = rs_seterr(-errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < HDR_BYTES + TRAILER_BYTES) {
		rc = rs_seterr(RS_E_CORRUPT, "%s: %lld bytes: too short for a "
			       "checkpoint part", path, (long long)st.st_size);
		goto fail;
	}
	if ((rc = r_pread(r, hdr, sizeof(hdr), 0)) ||
	    (rc = hdr_decode(hdr, &r->d, path)))
		goto fail;
	if (expect && !desc_same(expect, &r->d)) {
		rc = rs_seterr(RS_E_CORRUPT, "%s: belongs to another "
			       "checkpoint, table or part than the manifest "
			       "says", path);
		goto fail;
	}
	r->body_end = (uint64_t)st.st_size - TRAILER_BYTES;
	if ((rc = r_pread(r, t, sizeof(t), r->body_end)))
		goto fail;
	if (memcmp(t, end_magic, 8)) {
		rc = rs_seterr(RS_E_CORRUPT, "%s: no trailer (truncated or "
			       "damaged)", path);
		goto fail;
	}
	r->want.rows = le_ld64(t + 8);
	r->want.deleted = le_ld64(t + 16);
	r->want.raw_bytes = le_ld64(t + 24);
	r->want.xxh64 = le_ld64(t + 32);
	r->want.bytes = (uint64_t)st.st_size;
	r->payload_bytes = ckpt_payload_bytes(&r->d);
	r->rec_bytes = row_rec_bytes(&r->d);
	r->raw_cap = r->rec_bytes * 2 > BUF_MIN ? r->rec_bytes * 2 : BUF_MIN;
	r->cin_cap = ZSTD_DStreamInSize();
	r->raw = rs_malloc(r->raw_cap);
	r->cin = rs_malloc(r->cin_cap);
	r->state = rs_malloc(((size_t)r->d.state_floats + 1) * sizeof(float));
	r->dz = ZSTD_createDCtx();
	r->h = XXH64_createState();
	if (!r->raw || !r->cin || !r->state || !r->dz || !r->h) {
		rc = rs_seterr(-ENOMEM, "checkpoint: out of memory");
		goto fail;
	}
	XXH64_reset(r->h, 0);
	XXH64_update(r->h, hdr, sizeof(hdr));
	r->off = HDR_BYTES;
	*out = r;
	return 0;
fail:
	ckpt_part_close(r);
	return rc;
}

const struct ckpt_part_desc *ckpt_part_desc_of(const struct ckpt_reader *r)
{
	return &r->d;
}

/* Decompress until raw holds need bytes from raw_pos: 1; 0 when the body
 * is used up with fewer; < 0 on damage. */
static int r_fill(struct ckpt_reader *r, size_t need)
{
	size_t z;
	int rc;

	if (r->raw_len - r->raw_pos >= need)
		return 1;	/* the common case: no copy */
	/* the rest to the front (a partial record: less than need bytes) */
	if (r->raw_pos) {
		memmove(r->raw, r->raw + r->raw_pos, r->raw_len - r->raw_pos);
		r->raw_len -= r->raw_pos;
		r->raw_pos = 0;
	}
	while (r->raw_len < need) {
		ZSTD_outBuffer o = { r->raw, r->raw_cap, r->raw_len };
		ZSTD_inBuffer in;

		if (r->cin_pos == r->cin_len && r->off < r->body_end) {
			size_t n = r->cin_cap;

			if (n > r->body_end - r->off)
				n = (size_t)(r->body_end - r->off);
			if ((rc = r_pread(r, r->cin, n, r->off)))
				return rc;
			XXH64_update(r->h, r->cin, n);
			r->off += n;
			r->cin_len = n;
			r->cin_pos = 0;
		}
		in = (ZSTD_inBuffer){ r->cin, r->cin_len, r->cin_pos };
		z = ZSTD_decompressStream(r->dz, &o, &in);
		if (ZSTD_isError(z))
			return rs_seterr(RS_E_CORRUPT, "%s: damaged data: %s",
					 r->path, ZSTD_getErrorName(z));
		/* no input left to give and nothing came out: the end (zret
		 * keeps what the last call that did something said: 0 when
		 * it finished a frame) */
		if (o.pos == r->raw_len && in.pos == in.size &&
		    r->off == r->body_end)
			return 0;
		r->zret = z;
		r->cin_pos = in.pos;
		r->raw_len = o.pos;
	}
	return 1;
}

static int r_end(struct ckpt_reader *r)
{
	struct ckpt_part_sum *g = &r->got, *w = &r->want;

	if (r->raw_len - r->raw_pos)
		return rs_seterr(RS_E_CORRUPT, "%s: a record is cut short",
				 r->path);
	if (r->zret)
		return rs_seterr(RS_E_CORRUPT, "%s: the compressed stream is "
				 "cut short", r->path);
	g->xxh64 = XXH64_digest(r->h);
	g->bytes = w->bytes;
	if (g->xxh64 != w->xxh64)
		return rs_seterr(RS_E_CORRUPT, "%s: checksum mismatch (the "
				 "file is damaged)", r->path);
	if (g->rows != w->rows || g->deleted != w->deleted ||
	    g->raw_bytes != w->raw_bytes)
		return rs_seterr(RS_E_CORRUPT, "%s: %llu rows and %llu "
				 "deletions, the trailer says %llu and %llu",
				 r->path, (unsigned long long)g->rows,
				 (unsigned long long)g->deleted,
				 (unsigned long long)w->rows,
				 (unsigned long long)w->deleted);
	r->done = true;
	return 0;
}

int ckpt_part_next(struct ckpt_reader *r, struct ckpt_record *rec)
{
	const uint8_t *p;
	size_t len;
	int rc;

	if (r->done)
		return 0;
	rc = r_fill(r, REC_HEAD);
	if (rc <= 0)
		return rc < 0 ? rc : r_end(r);
	p = r->raw + r->raw_pos;
	rec->key = le_ld64(p);
	rec->kind = p[8];
	rec->payload = NULL;
	rec->state = NULL;
	if (rec->kind == CKPT_REC_DELETED) {
		r->raw_pos += REC_HEAD;
		r->got.deleted++;
		r->got.raw_bytes += REC_HEAD;
		return 1;
	}
	if (rec->kind != CKPT_REC_ROW)
		return rs_seterr(RS_E_CORRUPT, "%s: record %llu: unknown kind "
				 "%u", r->path,
				 (unsigned long long)(r->got.rows +
						      r->got.deleted),
				 rec->kind);
	len = r->rec_bytes;
	if ((rc = r_fill(r, len)) <= 0)
		return rc < 0 ? rc : rs_seterr(RS_E_CORRUPT, "%s: a record is "
					       "cut short", r->path);
	p = r->raw + r->raw_pos;
	rec->payload = p + REC_HEAD;
	if (r->d.with_state) {	/* (SGD: with state, none to copy) */
		ckpt_load_f32(r->state, p + REC_HEAD + r->payload_bytes,
			      r->d.state_floats);
		rec->state = r->state;
	}
	r->raw_pos += len;
	r->got.rows++;
	r->got.raw_bytes += len;
	return 1;
}

void ckpt_part_sum_of(const struct ckpt_reader *r, struct ckpt_part_sum *s)
{
	*s = r->done ? r->got : r->want;
}

void ckpt_part_close(struct ckpt_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	ZSTD_freeDCtx(r->dz);
	if (r->h)
		XXH64_freeState(r->h);
	free(r->cin);
	free(r->raw);
	free(r->state);
	free(r->path);
	free(r);
}
