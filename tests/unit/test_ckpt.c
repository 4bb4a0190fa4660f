/*
 * test_ckpt.c - the checkpoint format (src/ckpt): parts and manifests
 * written and read back bit for bit, and damage of every kind detected
 * with a message naming the file: every byte of a part flipped in turn,
 * truncations, a missing or swapped part, a damaged manifest, hostile
 * values in a manifest whose checksum was recomputed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "ckpt/ckpt.h"
#include "recstore/client.h"
#include "common/rs_internal.h"
#include "value/optimizer.h"

struct fx {
	char dir[64];
	struct ckpt_manifest m;
	struct ckpt_table_entry t[2];
	struct ckpt_part_entry parts[2][3];
};

/* deterministic contents: row i of table t, element j */
static float val(uint32_t t, uint64_t key, uint32_t j)
{
	return (float)((double)(key % 1000) * 0.001 + t + j * 1e-3);
}

static void payload_of(const struct ckpt_part_desc *d, uint64_t key,
		       uint8_t *out)
{
	for (uint32_t j = 0; j < d->dim; j++) {
		float f = val(d->table, key, j);

		if (d->dtype == PROTO_DTYPE_FP32) {
			memcpy(out + 4 * j, &f, 4);
		} else {	/* bf16: the upper half */
			uint32_t u;

			memcpy(&u, &f, 4);
			out[2 * j] = (uint8_t)(u >> 16);
			out[2 * j + 1] = (uint8_t)(u >> 24);
		}
	}
}

static void state_of(const struct ckpt_part_desc *d, uint64_t key, float *s)
{
	for (uint32_t j = 0; j < d->state_floats; j++)
		s[j] = (float)key * 0.5f + (float)j;
}

/* rows of part p of table t: keys k with k % nparts == p */
#define NKEYS 3000
#define DELETED_EVERY 7

static void write_ckpt(struct fx *f, unsigned kind)
{
	static const uint32_t nparts[2] = { 3, 2 };
	uint8_t payload[4 * 64];
	float state[2 * 64 + 1];

	memset(&f->m, 0, sizeof(f->m));
	ckpt_new_id(f->m.id);
	f->m.kind = kind;
	if (kind == CKPT_INCREMENTAL) {
		ckpt_new_id(f->m.base);
		snprintf(f->m.base_dir, sizeof(f->m.base_dir), "base");
	}
	f->m.created_ms = 1764000000123ull;
	f->m.ntables = 2;
	f->m.tables = f->t;
	memset(f->t, 0, sizeof(f->t));
	snprintf(f->t[0].spec.name, sizeof(f->t[0].spec.name), "emb_a");
	f->t[0].spec.dim = 16;
	f->t[0].spec.dtype = PROTO_DTYPE_FP32;
	f->t[0].spec.capacity = 4096;
	f->t[0].spec.optim = (struct optim_params){
		.kind = OPTIM_ADAM, .lr = 0.0123456789f, .eps = 1e-8f,
		.beta1 = 0.9f, .beta2 = 0.999f, .weight_decay = 0.01f };
	f->t[0].spec.init = (struct init_params){
		.kind = INIT_NORMAL, .std = 0.01f,
		.seed = 0xfedcba9876543210ull };
	snprintf(f->t[1].spec.name, sizeof(f->t[1].spec.name), "emb.b-2");
	f->t[1].spec.dim = 5;
	f->t[1].spec.dtype = PROTO_DTYPE_BF16;
	f->t[1].spec.capacity = 100000;
	f->t[1].spec.optim = (struct optim_params){
		.kind = OPTIM_ROWWISE_ADAGRAD, .lr = 0.05f, .eps = 1e-10f,
		.initial_accumulator = 0.1f };
	f->t[1].spec.init = (struct init_params){ .kind = INIT_UNIFORM,
						  .a = 0.125f, .seed = 7 };
	for (uint32_t t = 0; t < 2; t++) {
		f->t[t].state_floats = (uint32_t)optim_state_floats(
			f->t[t].spec.optim.kind, f->t[t].spec.dim);
		f->t[t].nparts = nparts[t];
		f->t[t].parts = f->parts[t];
		for (uint32_t p = 0; p < nparts[t]; p++) {
			struct ckpt_part_entry *pe = &f->parts[t][p];
			struct ckpt_part_desc d;
			struct ckpt_writer *w;
			char path[PATH_MAX];

			snprintf(pe->file, sizeof(pe->file), "t%u-p%u.rsck", t,
				 p);
			snprintf(path, sizeof(path), "%s/%s", f->dir, pe->file);
			ckpt_part_desc_for(&f->m, t, p, &d);
			assert_int_equal(ckpt_part_create(&w, path, &d, 0), 0);
			for (uint64_t k = p; k < NKEYS; k += nparts[t]) {
				if (kind == CKPT_INCREMENTAL &&
				    k % DELETED_EVERY == 0) {
					assert_int_equal(
						ckpt_part_put_deleted(w, k), 0);
					continue;
				}
				payload_of(&d, k, payload);
				state_of(&d, k, state);
				assert_int_equal(ckpt_part_put(w, k, payload,
							       state), 0);
			}
			assert_int_equal(ckpt_part_finish(w, &pe->sum), 0);
		}
	}
	if (ckpt_manifest_save(f->dir, &f->m))
		fail_msg("save: %s", rs_errormsg());
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/rs-ckpt-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void read_back(struct fx *f, const struct ckpt_manifest *m)
{
	uint8_t want[4 * 64];
	float st[2 * 64 + 1];

	for (uint32_t t = 0; t < m->ntables; t++) {
		uint64_t seen = 0;

		for (uint32_t p = 0; p < m->tables[t].nparts; p++) {
			struct ckpt_part_desc d;
			struct ckpt_reader *r;
			struct ckpt_record rec;
			char path[PATH_MAX];
			uint64_t k = p;
			int rc;

			snprintf(path, sizeof(path), "%s/%s", f->dir,
				 m->tables[t].parts[p].file);
			ckpt_part_desc_for(m, t, p, &d);
			assert_int_equal(ckpt_part_open(&r, path, &d), 0);
			while ((rc = ckpt_part_next(r, &rec)) == 1) {
				assert_int_equal(rec.key, k);
				seen++;
				if (m->kind == CKPT_INCREMENTAL &&
				    k % DELETED_EVERY == 0) {
					assert_int_equal(rec.kind,
							 CKPT_REC_DELETED);
					assert_null(rec.payload);
				} else {
					assert_int_equal(rec.kind,
							 CKPT_REC_ROW);
					payload_of(&d, k, want);
					assert_memory_equal(
						rec.payload, want,
						d.dim * (d.dtype ? 2 : 4));
					if (m->kind == CKPT_EXPORT) {
						assert_null(rec.state);
					} else {
						state_of(&d, k, st);
						assert_memory_equal(
							rec.state, st,
							d.state_floats * 4);
					}
				}
				k += m->tables[t].nparts;
			}
			if (rc)
				fail_msg("read %s: %s", path, rs_errormsg());
			assert_true(k >= NKEYS);
			ckpt_part_close(r);
		}
		assert_int_equal(seen, NKEYS);
	}
}

static void roundtrip(void **state, unsigned kind)
{
	struct fx *f = *state;
	struct ckpt_manifest *m;
	struct ckpt_verify_stats vs;

	write_ckpt(f, kind);
	assert_int_equal(ckpt_manifest_load(f->dir, &m), 0);
	assert_memory_equal(m->id, f->m.id, CKPT_ID_BYTES);
	assert_int_equal(m->kind, kind);
	if (kind == CKPT_INCREMENTAL) {
		assert_memory_equal(m->base, f->m.base, CKPT_ID_BYTES);
		assert_string_equal(m->base_dir, "base");
	}
	assert_int_equal(m->created_ms, f->m.created_ms);
	assert_int_equal(m->ntables, 2);
	for (uint32_t t = 0; t < 2; t++) {
		/* every spec field back bit for bit (floats included) */
		assert_memory_equal(&m->tables[t].spec, &f->t[t].spec,
				    sizeof(f->t[t].spec));
		assert_int_equal(m->tables[t].state_floats,
				 f->t[t].state_floats);
		assert_int_equal(m->tables[t].nparts, f->t[t].nparts);
		for (uint32_t p = 0; p < f->t[t].nparts; p++)
			assert_memory_equal(&m->tables[t].parts[p],
					    &f->t[t].parts[p],
					    sizeof(f->t[t].parts[p]));
	}
	read_back(f, m);
	ckpt_manifest_free(m);
	assert_int_equal(ckpt_verify(f->dir, &vs), 0);
	assert_int_equal(vs.parts, 5);
	assert_int_equal(vs.rows + vs.deleted, 2 * NKEYS);
	if (kind == CKPT_INCREMENTAL)
		assert_true(vs.deleted > 0);
	else
		assert_int_equal(vs.deleted, 0);
	/* compressed: smaller than the records */
	assert_true(vs.bytes < vs.raw_bytes);
}

static void full_roundtrip(void **state)
{
	roundtrip(state, CKPT_FULL);
}

static void incremental_roundtrip(void **state)
{
	roundtrip(state, CKPT_INCREMENTAL);
}

/* A checkpoint of `kind` in root/name; an increment on (base_id,
 * base_dir). Leaves f->dir as it found it. */
static void chain_link(struct fx *f, const char *root, const char *name,
		       unsigned kind, const uint8_t *base_id,
		       const char *base_dir, uint8_t id[CKPT_ID_BYTES])
{
	char keep[sizeof(f->dir)];

	memcpy(keep, f->dir, sizeof(keep));
	snprintf(f->dir, sizeof(f->dir), "%s/%s", root, name);
	assert_int_equal(mkdir(f->dir, 0755), 0);
	write_ckpt(f, kind);
	if (kind == CKPT_INCREMENTAL) {
		memcpy(f->m.base, base_id, CKPT_ID_BYTES);
		snprintf(f->m.base_dir, sizeof(f->m.base_dir), "%s",
			 base_dir);
		assert_int_equal(ckpt_manifest_save(f->dir, &f->m), 0);
	}
	memcpy(id, f->m.id, CKPT_ID_BYTES);
	memcpy(f->dir, keep, sizeof(keep));
}

static void expect_chain_err(const char *dir, int code, const char *what)
{
	struct ckpt_chain *c = NULL;

	assert_int_equal(ckpt_chain_load(dir, &c), code);
	assert_null(c);
	if (!strstr(rs_errormsg(), what))
		fail_msg("%s: '%s' lacks '%s'", dir, rs_errormsg(), what);
}

/* full <- inc1 <- inc2 found, checked and verified as one; every broken
 * link refused with a message naming it */
static void chain(void **state)
{
	struct fx *f = *state;
	uint8_t full[CKPT_ID_BYTES], i1[CKPT_ID_BYTES], i2[CKPT_ID_BYTES];
	uint8_t ex[CKPT_ID_BYTES], other[CKPT_ID_BYTES], x[CKPT_ID_BYTES];
	struct ckpt_verify_stats vs;
	struct ckpt_chain *c;
	char root[64], dir[PATH_MAX], path[PATH_MAX];
	struct ckpt_manifest m = { 0 };

	snprintf(root, sizeof(root), "%s", f->dir);
	chain_link(f, root, "full", CKPT_FULL, NULL, NULL, full);
	chain_link(f, root, "inc1", CKPT_INCREMENTAL, full, "full", i1);
	chain_link(f, root, "inc2", CKPT_INCREMENTAL, i1, "inc1", i2);
	snprintf(dir, sizeof(dir), "%s/inc2/", root);	/* trailing '/' */
	assert_int_equal(ckpt_chain_load(dir, &c), 0);
	assert_int_equal(c->n, 3);
	assert_int_equal(c->m[0]->kind, CKPT_FULL);
	assert_memory_equal(c->m[0]->id, full, CKPT_ID_BYTES);
	assert_memory_equal(c->m[1]->id, i1, CKPT_ID_BYTES);
	assert_memory_equal(c->m[2]->id, i2, CKPT_ID_BYTES);
	snprintf(path, sizeof(path), "%s/full", root);
	assert_string_equal(c->dir[0], path);
	ckpt_chain_free(c);
	assert_int_equal(ckpt_chain_verify(dir, &vs), 0);
	assert_int_equal(vs.parts, 15);
	/* the public report says the same, and that it is an increment */
	{
		struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;

		assert_int_equal(rs_ckpt_verify(dir, &rep), 0);
		assert_int_equal(rep.parts, vs.parts);
		assert_int_equal(rep.rows, vs.rows);
		assert_int_equal(rep.deleted, vs.deleted);
		assert_int_equal(rep.incremental, 1);
	}
	/* a full checkpoint is a chain of one */
	snprintf(dir, sizeof(dir), "%s/full", root);
	assert_int_equal(ckpt_chain_load(dir, &c), 0);
	assert_int_equal(c->n, 1);
	ckpt_chain_free(c);
	/* the base path: a sibling */
	snprintf(m.base_dir, sizeof(m.base_dir), "b0");
	assert_int_equal(ckpt_base_path("x/y/inc/", &m, path, sizeof(path)),
			 0);
	assert_string_equal(path, "x/y/b0");
	assert_int_equal(ckpt_base_path("inc", &m, path, sizeof(path)), 0);
	assert_string_equal(path, "b0");
	/* a base with another id */
	ckpt_new_id(other);
	chain_link(f, root, "wrongid", CKPT_INCREMENTAL, other, "full", x);
	snprintf(dir, sizeof(dir), "%s/wrongid", root);
	expect_chain_err(dir, RS_E_CORRUPT, "its base is checkpoint");
	assert_int_equal(ckpt_chain_verify(dir, NULL), RS_E_CORRUPT);
	/* a missing base, also further back */
	chain_link(f, root, "orphan", CKPT_INCREMENTAL, other, "nothere", x);
	snprintf(dir, sizeof(dir), "%s/orphan", root);
	expect_chain_err(dir, -ENOENT, "nothere is missing");
	chain_link(f, root, "on-orphan", CKPT_INCREMENTAL, x, "orphan", x);
	snprintf(dir, sizeof(dir), "%s/on-orphan", root);
	expect_chain_err(dir, -ENOENT, "nothere is missing");
	/* an export is no base */
	chain_link(f, root, "ex", CKPT_EXPORT, NULL, NULL, ex);
	chain_link(f, root, "on-export", CKPT_INCREMENTAL, ex, "ex", x);
	snprintf(dir, sizeof(dir), "%s/on-export", root);
	expect_chain_err(dir, RS_E_CORRUPT, "the export");
	/* a loop: an increment that is its own base */
	chain_link(f, root, "loop", CKPT_INCREMENTAL, other, "loop", x);
	snprintf(dir, sizeof(dir), "%s/loop", root);
	{
		struct ckpt_manifest *lm;

		assert_int_equal(ckpt_manifest_load(dir, &lm), 0);
		memcpy(lm->base, lm->id, CKPT_ID_BYTES);
		assert_int_equal(ckpt_manifest_save(dir, lm), 0);
		ckpt_manifest_free(lm);
	}
	expect_chain_err(dir, RS_E_CORRUPT, "in its chain of bases");
	/* a damaged part of a base: verify names it */
	snprintf(path, sizeof(path), "%s/inc1/t1-p0.rsck", root);
	assert_int_equal(truncate(path, 100), 0);
	snprintf(dir, sizeof(dir), "%s/inc2", root);
	assert_int_equal(ckpt_chain_verify(dir, NULL), RS_E_CORRUPT);
	assert_non_null(strstr(rs_errormsg(), "inc1/t1-p0.rsck"));
	/* a manifest must name its base's directory as a plain name */
	snprintf(f->m.base_dir, sizeof(f->m.base_dir), "../x");
	f->m.kind = CKPT_INCREMENTAL;
	assert_int_equal(ckpt_manifest_save(dir, &f->m), RS_E_INVAL);
}

static void export_roundtrip(void **state)
{
	roundtrip(state, CKPT_EXPORT);
}

/* ---- damage ---- */

static void path_of(struct fx *f, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", f->dir, name);
}

static size_t slurp(const char *path, uint8_t **out)
{
	struct stat st;
	int fd = open(path, O_RDONLY);
	uint8_t *b;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	b = malloc((size_t)st.st_size);
	assert_int_equal(read(fd, b, (size_t)st.st_size), st.st_size);
	close(fd);
	*out = b;
	return (size_t)st.st_size;
}

static void spit(const char *path, const uint8_t *b, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	close(fd);
}

static void expect_bad(struct fx *f, const char *file, const char *what)
{
	int rc = ckpt_verify(f->dir, NULL);

	if (rc == 0)
		fail_msg("%s: verify accepted it", what);
	if (!strstr(rs_errormsg(), file))
		fail_msg("%s: message does not name %s: %s", what, file,
			 rs_errormsg());
}

/* A small checkpoint so that flipping every byte stays quick. */
static void small_ckpt(struct fx *f)
{
	struct ckpt_part_desc d;
	struct ckpt_writer *w;
	char path[PATH_MAX];
	uint8_t payload[16];
	float st[4] = { 1, 2, 3, 4 };

	memset(&f->m, 0, sizeof(f->m));
	memset(f->t, 0, sizeof(f->t));
	ckpt_new_id(f->m.id);
	f->m.kind = CKPT_FULL;
	f->m.ntables = 1;
	f->m.tables = f->t;
	snprintf(f->t[0].spec.name, sizeof(f->t[0].spec.name), "s");
	f->t[0].spec.dim = 4;
	f->t[0].spec.capacity = 64;
	f->t[0].spec.optim = (struct optim_params){ .kind = OPTIM_ADAGRAD,
						    .lr = 0.1f, .eps = 1e-8f };
	f->t[0].state_floats = 4;
	f->t[0].nparts = 2;
	f->t[0].parts = f->parts[0];
	for (uint32_t p = 0; p < 2; p++) {
		snprintf(f->parts[0][p].file, CKPT_FILE_MAX, "p%u.rsck", p);
		path_of(f, f->parts[0][p].file, path, sizeof(path));
		ckpt_part_desc_for(&f->m, 0, p, &d);
		assert_int_equal(ckpt_part_create(&w, path, &d, 0), 0);
		for (uint64_t k = 0; k < 20; k++) {
			memset(payload, (int)(k + p), sizeof(payload));
			assert_int_equal(ckpt_part_put(w, k * 2 + p, payload,
						       st), 0);
		}
		assert_int_equal(ckpt_part_finish(w, &f->parts[0][p].sum), 0);
	}
	if (ckpt_manifest_save(f->dir, &f->m))
		fail_msg("save: %s", rs_errormsg());
	if (ckpt_verify(f->dir, NULL))
		fail_msg("verify: %s", rs_errormsg());
}

static void every_byte_flipped(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	uint8_t *orig, *b;
	size_t n;

	small_ckpt(f);
	path_of(f, "p1.rsck", path, sizeof(path));
	n = slurp(path, &orig);
	b = malloc(n);
	for (size_t i = 0; i < n; i++) {
		for (unsigned bit = 0; bit < 8; bit += 7) {
			char what[64];

			memcpy(b, orig, n);
			b[i] ^= (uint8_t)(1u << bit);
			spit(path, b, n);
			snprintf(what, sizeof(what), "byte %zu bit %u", i,
				 bit);
			expect_bad(f, "p1.rsck", what);
		}
	}
	spit(path, orig, n);
	assert_int_equal(ckpt_verify(f->dir, NULL), 0);
	/* every truncation */
	for (size_t len = 0; len < n; len += len < 80 ? 1 : 13) {
		spit(path, orig, len);
		expect_bad(f, "p1.rsck", "truncated");
	}
	/* a byte appended */
	memcpy(b, orig, n);
	spit(path, orig, n);
	{
		int fd = open(path, O_WRONLY | O_APPEND);

		assert_int_equal(write(fd, "x", 1), 1);
		close(fd);
	}
	expect_bad(f, "p1.rsck", "appended");
	spit(path, orig, n);
	printf("part of %zu bytes: every byte flipped (2 bits each) and "
	       "every truncation detected\n", n);
	free(b);
	free(orig);
}

static void missing_and_swapped(void **state)
{
	struct fx *f = *state;
	char p0[PATH_MAX], p1[PATH_MAX], tmp[PATH_MAX];

	small_ckpt(f);
	path_of(f, "p0.rsck", p0, sizeof(p0));
	path_of(f, "p1.rsck", p1, sizeof(p1));
	path_of(f, "x", tmp, sizeof(tmp));
	assert_int_equal(rename(p1, tmp), 0);
	expect_bad(f, "p1.rsck", "missing");
	assert_non_null(strstr(rs_errormsg(), "missing"));
	/* swapped parts: same sizes here, so the header must tell */
	assert_int_equal(rename(p0, p1), 0);
	assert_int_equal(rename(tmp, p0), 0);
	expect_bad(f, ".rsck", "swapped");
	assert_int_equal(rename(p0, tmp), 0);
	assert_int_equal(rename(p1, p0), 0);
	assert_int_equal(rename(tmp, p1), 0);
	assert_int_equal(ckpt_verify(f->dir, NULL), 0);
}

/* Rewrite MANIFEST with `from` replaced by `to` and a fresh checksum, so
 * that only the semantic checks stand between it and the reader. */
static void patch_manifest(struct fx *f, const char *from, const char *to)
{
	char path[PATH_MAX], *body, head[64];
	uint8_t *b;
	size_t n;
	char *out, *at;
	unsigned ver;

	path_of(f, CKPT_MANIFEST, path, sizeof(path));
	n = slurp(path, &b);
	b = realloc(b, n + 1);
	b[n] = 0;
	body = strchr((char *)b, '\n') + 1;
	assert_int_equal(sscanf((char *)b, "recstore-checkpoint %u", &ver), 1);
	at = strstr(body, from);
	assert_non_null(at);
	out = malloc(n + strlen(to) + 1);
	memcpy(out, body, (size_t)(at - body));
	strcpy(out + (at - body), to);
	strcat(out, at + strlen(from));
	snprintf(head, sizeof(head), "recstore-checkpoint %u xxh64=%016"
		 PRIx64 "\n", ver, (uint64_t)XXH64(out, strlen(out), 0));
	spit(path, (const uint8_t *)head, strlen(head));
	{
		int fd = open(path, O_WRONLY | O_APPEND);

		assert_int_equal(write(fd, out, strlen(out)),
				 (ssize_t)strlen(out));
		close(fd);
	}
	free(out);
	free(b);
}

struct patch {
	const char *from, *to;
};

/* Each patch of the manifest (orig, n bytes, restored before each) must
 * be refused by verify. */
static void expect_refused(struct fx *f, const uint8_t *orig, size_t n,
			   const struct patch *p, size_t np)
{
	char path[PATH_MAX];

	path_of(f, CKPT_MANIFEST, path, sizeof(path));
	for (size_t i = 0; i < np; i++) {
		spit(path, orig, n);
		patch_manifest(f, p[i].from, p[i].to);
		if (!ckpt_verify(f->dir, NULL))
			fail_msg("accepted %s", p[i].to);
		printf("refused %-30s %s\n", p[i].to, rs_errormsg());
	}
	spit(path, orig, n);
}

static void damaged_manifest(void **state)
{
	struct fx *f = *state;
	static const struct patch hostile[] = {
		{ "\"dim\": 4", "\"dim\": 100000000" },
		{ "\"dim\": 4", "\"dim\": 0" },
		{ "\"state_floats\": 4", "\"state_floats\": 9" },
		{ "\"file\": \"p0.rsck\"", "\"file\": \"../p0.rsck\"" },
		{ "\"file\": \"p0.rsck\"", "\"file\": \"/etc/passwd\"" },
		{ "\"dtype\": \"fp32\"", "\"dtype\": \"fp64\"" },
		{ "\"type\": \"adagrad\"", "\"type\": \"lamb\"" },
		{ "\"kind\": \"full\"", "\"kind\": \"partial\"" },
		{ "\"rows\": 20", "\"rows\": -1" },
		{ "\"rows\": 20", "\"rows\": 21" },
		{ "\"name\": \"s\"", "\"name\": \"a b\"" },
	};
	char path[PATH_MAX];
	uint8_t *orig, *b;
	size_t n;

	small_ckpt(f);
	path_of(f, CKPT_MANIFEST, path, sizeof(path));
	n = slurp(path, &orig);
	b = malloc(n);
	/* a flipped byte anywhere: the checksum line or the JSON */
	for (size_t i = 0; i < n; i += 3) {
		memcpy(b, orig, n);
		b[i] ^= 0x20;
		spit(path, b, n);
		expect_bad(f, CKPT_MANIFEST, "manifest byte");
	}
	expect_refused(f, orig, n, hostile, RS_ARRAY_SIZE(hostile));
	assert_int_equal(ckpt_verify(f->dir, NULL), 0);
	free(b);
	free(orig);
}

/* The manifest's first line's version. */
static unsigned manifest_version_of(struct fx *f)
{
	char path[PATH_MAX];
	unsigned v = 0;
	uint8_t *b;
	size_t n;

	path_of(f, CKPT_MANIFEST, path, sizeof(path));
	n = slurp(path, &b);
	b = realloc(b, n + 1);
	b[n] = 0;
	assert_int_equal(sscanf((char *)b, "recstore-checkpoint %u", &v), 1);
	free(b);
	return v;
}

/* The first line's version digit set to v (its checksum still holds:
 * it covers the JSON only). */
static void set_version(struct fx *f, char v)
{
	char path[PATH_MAX];
	uint8_t *b;
	size_t k;

	path_of(f, CKPT_MANIFEST, path, sizeof(path));
	k = slurp(path, &b);
	b[strlen("recstore-checkpoint ")] = (uint8_t)v;
	spit(path, b, k);
	free(b);
}

/* Version 2: a table's growth and eviction settings travel with it; a
 * checkpoint without them stays version 1; hostile values are refused;
 * version 1 readers' rule (unknown members ignored) holds for 1. */
static void manifest_v2(void **state)
{
	struct fx *f = *state;
	struct proto_table_spec *sp = &f->t[0].spec;
	struct ckpt_manifest *m;
	static const struct patch hostile[] = {
		{ "\"policy\": \"lru\"", "\"policy\": \"fifo\"" },
		{ "\"max_rows\": 32", "\"max_rows\": 65" },
		{ "\"max_rows\": 32", "\"max_rows\": -1" },
		{ "\"ttl_s\": 60", "\"ttl_s\": 999999999" },
		{ "\"admit_after\": 3", "\"admit_after\": 256" },
		{ "\"eviction\": {", "\"eviction\": 1, \"x\": {" },
	};
	static const struct patch hostile_grow[] = {
		{ "\"max_capacity\": 1024", "\"max_capacity\": 1000" },
		{ "\"max_capacity\": 1024", "\"max_capacity\": 1" },
		{ "\"max_capacity\": 1024", "\"max_capacity\": 8589934592" },
		{ "\"policy\": \"none\"", "\"policy\": \"lfu\"" },
	};
	char path[PATH_MAX];
	uint8_t *orig;
	size_t n;

	small_ckpt(f);
	assert_int_equal(manifest_version_of(f), 1);
	/* an evicting table */
	sp->evict = (struct proto_evict){ .policy = PROTO_EVICT_LRU,
					  .max_rows = 32, .ttl_s = 60,
					  .admit_after = 3 };
	assert_int_equal(ckpt_manifest_save(f->dir, &f->m), 0);
	assert_int_equal(manifest_version_of(f), 2);
	assert_int_equal(ckpt_verify(f->dir, NULL), 0);
	assert_int_equal(ckpt_manifest_load(f->dir, &m), 0);
	assert_int_equal(m->tables[0].spec.evict.policy, PROTO_EVICT_LRU);
	assert_int_equal(m->tables[0].spec.evict.max_rows, 32);
	assert_int_equal(m->tables[0].spec.evict.ttl_s, 60);
	assert_int_equal(m->tables[0].spec.evict.admit_after, 3);
	assert_int_equal(m->tables[0].spec.grow_log2, 0);
	ckpt_manifest_free(m);
	path_of(f, CKPT_MANIFEST, path, sizeof(path));
	n = slurp(path, &orig);
	expect_refused(f, orig, n, hostile, RS_ARRAY_SIZE(hostile));
	/* a later version is refused, not misread */
	set_version(f, '3');
	assert_int_equal(ckpt_verify(f->dir, NULL), RS_E_UNSUPPORTED);
	/* version 1 ignores members it does not know, as its readers did */
	spit(path, orig, n);
	set_version(f, '1');
	patch_manifest(f, "\"version\": 2", "\"version\": 1");
	assert_int_equal(ckpt_manifest_load(f->dir, &m), 0);
	assert_int_equal(m->tables[0].spec.evict.policy, PROTO_EVICT_NONE);
	assert_int_equal(m->tables[0].spec.evict.ttl_s, 0);
	ckpt_manifest_free(m);
	free(orig);
	/* a table that grows, with a TTL (no policy) */
	sp->evict = (struct proto_evict){ .ttl_s = 7 };
	sp->grow_log2 = 10;
	assert_int_equal(ckpt_manifest_save(f->dir, &f->m), 0);
	assert_int_equal(manifest_version_of(f), 2);
	assert_int_equal(ckpt_manifest_load(f->dir, &m), 0);
	assert_int_equal(m->tables[0].spec.grow_log2, 10);
	assert_int_equal(m->tables[0].spec.evict.ttl_s, 7);
	assert_int_equal(m->tables[0].spec.evict.policy, PROTO_EVICT_NONE);
	ckpt_manifest_free(m);
	n = slurp(path, &orig);
	expect_refused(f, orig, n, hostile_grow, RS_ARRAY_SIZE(hostile_grow));
	assert_int_equal(ckpt_verify(f->dir, NULL), 0);
	free(orig);
}

static void writer_refuses(void **state)
{
	struct fx *f = *state;
	struct ckpt_part_desc d = { .dim = 4, .optim_kind = OPTIM_ADAGRAD,
				    .state_floats = 3, .with_state = true };
	struct ckpt_writer *w, *w2;
	char path[PATH_MAX];

	path_of(f, "w.rsck", path, sizeof(path));
	assert_int_equal(ckpt_part_create(&w, path, &d, 0), RS_E_INVAL);
	assert_null(w);
	d.state_floats = 4;
	d.dim = 0;
	assert_int_equal(ckpt_part_create(&w, path, &d, 0), RS_E_INVAL);
	d.dim = 4;
	assert_int_equal(ckpt_part_create(&w, path, &d, 0), 0);
	/* never over an existing file */
	assert_int_equal(ckpt_part_create(&w2, path, &d, 0), -EEXIST);
	assert_null(w2);
	assert_int_equal(access(path, F_OK), 0);
	/* an aborted part leaves nothing */
	ckpt_part_abort(w);
	assert_int_equal(access(path, F_OK), -1);
}

/* test_ckpt --make DIR: write the small checkpoint into DIR (for
 * tests/unit/test_ctl_verify.sh) */
/* ---- the public reader (rs_ckpt_reader_*, rs_ckpt_verify) ---- */

static float bf16_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u &= 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}

static void public_reader(void **state, unsigned kind)
{
	struct fx *f = *state;
	struct rs_ckpt_report rep = RS_CKPT_REPORT_INIT;
	struct rs_ckpt_reader *r;
	uint64_t keys[77];
	float rows[77 * 16], st[77 * (2 * 16 + 1)];

	write_ckpt(f, kind);
	assert_int_equal(rs_ckpt_verify(f->dir, &rep), 0);
	assert_int_equal(rep.tables, 2);
	assert_int_equal(rep.parts, 5);
	assert_int_equal(rep.rows, 2 * NKEYS);
	assert_int_equal(rep.with_state, kind != CKPT_EXPORT);
	assert_int_equal(strlen(rep.id), 32);
	assert_int_equal(rep.deleted, 0);
	assert_int_equal(rep.incremental, 0);
	/* a report of 0.3 (96 bytes, without deleted and incremental):
	 * filled up to its size, nothing written past it */
	{
		struct rs_ckpt_report old;

		memset(&old, 0xab, sizeof(old));
		old.struct_size = 96;
		assert_int_equal(rs_ckpt_verify(f->dir, &old), 0);
		assert_int_equal(old.rows, 2 * NKEYS);
		assert_int_equal(old.deleted, 0xababababababababull);
		assert_int_equal(old.incremental, 0xababababu);
	}
	assert_int_equal(rs_ckpt_reader_open(&r, f->dir), 0);
	assert_int_equal(rs_ckpt_reader_table_count(r), 2);
	for (unsigned t = 0; t < 2; t++) {
		struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
		uint8_t *seen = calloc(NKEYS, 1);
		uint32_t sf = 99;
		size_t total = 0;
		int n;

		assert_non_null(seen);
		assert_int_equal(rs_ckpt_reader_table(r, t, &spec, &sf), 0);
		assert_string_equal(spec.name, f->t[t].spec.name);
		assert_int_equal(spec.dim, f->t[t].spec.dim);
		assert_int_equal(spec.optim.kind, f->t[t].spec.optim.kind);
		assert_true(spec.optim.lr == f->t[t].spec.optim.lr);
		assert_int_equal(sf, kind == CKPT_EXPORT ? 0
							 : f->t[t].state_floats);
		/* an odd batch size, so batches straddle the parts */
		while ((n = rs_ckpt_reader_read(r, t, keys, rows,
						sf ? st : NULL, 77)) > 0) {
			for (int i = 0; i < n; i++) {
				struct ckpt_part_desc d = {
					.table = t,
					.state_floats = f->t[t].state_floats };
				float want[2 * 64 + 1];

				assert_true(keys[i] < NKEYS);
				assert_false(seen[keys[i]]);
				seen[keys[i]] = 1;
				for (uint32_t j = 0; j < spec.dim; j++) {
					float v = val(t, keys[i], j);

					if (spec.dtype == RS_DTYPE_BF16)
						v = bf16_of(v);
					assert_memory_equal(
						&rows[i * spec.dim + j], &v, 4);
				}
				if (sf) {
					state_of(&d, keys[i], want);
					assert_memory_equal(&st[i * sf], want,
							    sf * 4);
				}
			}
			total += (size_t)n;
		}
		assert_int_equal(n, 0);
		assert_int_equal(total, NKEYS);
		/* at its end, the table stays there */
		assert_int_equal(rs_ckpt_reader_read(r, t, keys, rows, NULL,
						     77), 0);
		free(seen);
	}
	assert_int_equal(rs_ckpt_reader_read(r, 2, keys, rows, NULL, 1),
			 RS_E_INVAL);
	rs_ckpt_reader_close(&r);
	assert_null(r);
}

static void public_reader_full(void **state)
{
	public_reader(state, CKPT_FULL);
}

static void public_reader_export(void **state)
{
	public_reader(state, CKPT_EXPORT);
}

/* A damaged part: the reader does not open, the message names the file;
 * a report without its size is refused. */
static void public_reader_refuses(void **state)
{
	struct fx *f = *state;
	struct rs_ckpt_report bad = { 0 };
	struct rs_ckpt_reader *r = (void *)1;
	char path[PATH_MAX];
	uint8_t *b;
	size_t n;

	write_ckpt(f, CKPT_FULL);
	assert_int_equal(rs_ckpt_verify(f->dir, &bad), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "struct rs_ckpt_report"));
	path_of(f, "t1-p1.rsck", path, sizeof(path));
	n = slurp(path, &b);
	b[n / 2] ^= 0x10;
	spit(path, b, n);
	free(b);
	assert_int_equal(rs_ckpt_reader_open(&r, f->dir), RS_E_CORRUPT);
	assert_null(r);
	assert_non_null(strstr(rs_errormsg(), "t1-p1.rsck"));
}

static int make_only(const char *dir)
{
	struct fx f;

	memset(&f, 0, sizeof(f));
	snprintf(f.dir, sizeof(f.dir), "%s", dir);
	small_ckpt(&f);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(full_roundtrip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(incremental_roundtrip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(chain, setup, teardown),
		cmocka_unit_test_setup_teardown(export_roundtrip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(every_byte_flipped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(missing_and_swapped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(damaged_manifest, setup,
						teardown),
		cmocka_unit_test_setup_teardown(public_reader_full, setup,
						teardown),
		cmocka_unit_test_setup_teardown(public_reader_export, setup,
						teardown),
		cmocka_unit_test_setup_teardown(public_reader_refuses, setup,
						teardown),
		cmocka_unit_test_setup_teardown(manifest_v2, setup, teardown),
		cmocka_unit_test_setup_teardown(writer_refuses, setup,
						teardown),
	};

	if (argc == 3 && !strcmp(argv[1], "--make"))
		return make_only(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
