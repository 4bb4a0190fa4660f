/*
 * ckpt.h - the checkpoint format: part files of rows (and optimizer state)
 * and the manifest that lists them. Format: docs/checkpoint-format.md.
 *
 * A checkpoint is a directory: one MANIFEST (self-checksummed JSON: the
 * tables, their specs and their parts) and part files, each holding rows
 * of one table as a zstd-compressed stream of records (key, row payload in
 * the table's dtype, optionally the optimizer state) between a checksummed
 * header and a trailer with the record counts and the XXH64 of the whole
 * file. Nothing in it depends on the node count, the ring or the PMEM
 * layout: a part is a set of keys, restore routes each key anew.
 *
 * Every size read from a file is bounded before it sizes anything, and a
 * damaged file is an error that names the file, never a crash (the unit
 * test flips every byte of a small part).
 *
 * Thread-safety: a writer or reader is used by one thread at a time;
 * different ones are independent.
 */
#ifndef RS_CKPT_CKPT_H
#define RS_CKPT_CKPT_H

#include <stdbool.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"

#define CKPT_FORMAT_VERSION 1	/* part files; a manifest without v2's */
/* Manifest version 2 adds a table's growth (max_capacity) and eviction
 * settings; a writer writes it only for a checkpoint with a table that
 * has them (docs/checkpoint-format.md, "Versioning"). */
#define CKPT_MANIFEST_VERSION_MAX 2
#define CKPT_ID_BYTES 16
#define CKPT_MANIFEST "MANIFEST"
#define CKPT_FILE_MAX 64	/* part file names, with the NUL */

enum ckpt_kind {
	CKPT_FULL = 1,		/* every row and its optimizer state */
	CKPT_INCREMENTAL = 2,	/* rows changed and keys deleted since base */
	CKPT_EXPORT = 3,	/* rows only (serving): no optimizer state */
};

enum ckpt_rec_kind { CKPT_REC_ROW = 1, CKPT_REC_DELETED = 2 };

/* What a part holds: fixed at creation, written in its header. */
struct ckpt_part_desc {
	uint8_t id[CKPT_ID_BYTES];	/* the checkpoint's id */
	uint32_t table;			/* index in the manifest's tables */
	uint32_t part;			/* index in that table's parts */
	uint32_t dim;
	uint32_t dtype;			/* enum proto_dtype */
	uint32_t optim_kind;		/* enum optim_kind */
	uint32_t state_floats;		/* per row, when with_state */
	bool with_state;
};

/* What a finished part holds, for the manifest. */
struct ckpt_part_sum {
	uint64_t rows, deleted;		/* records of each kind */
	uint64_t raw_bytes;		/* records, uncompressed */
	uint64_t bytes;			/* the file */
	uint64_t xxh64;			/* of the whole file */
};

struct ckpt_record {
	uint64_t key;
	unsigned kind;			/* enum ckpt_rec_kind */
	const void *payload;		/* dim elements of dtype (ROW) */
	const float *state;		/* state_floats (ROW, with_state) */
};

/* ---- writing a part ---- */

struct ckpt_writer;

/* Create path (must not exist) for the rows of d; level: zstd level
 * (0: its default). 0 or a negative RS_E_* with a message. */
int ckpt_part_create(struct ckpt_writer **out, const char *path,
		     const struct ckpt_part_desc *d, int level);
/* Append a row: payload = dim elements of dtype, little-endian; state =
 * state_floats floats (ignored without with_state). */
int ckpt_part_put(struct ckpt_writer *w, uint64_t key, const void *payload,
		  const float *state);
/* Append "key deleted since the base" (incremental checkpoints). */
int ckpt_part_put_deleted(struct ckpt_writer *w, uint64_t key);
/* Flush, write the trailer, fsync and close; *sum gets what the manifest
 * records. Frees w whatever the outcome (on error the file is removed). */
int ckpt_part_finish(struct ckpt_writer *w, struct ckpt_part_sum *sum);
/* Give up: close and remove the file, free w. NULL is a no-op. */
void ckpt_part_abort(struct ckpt_writer *w);

/* ---- reading a part ---- */

struct ckpt_reader;

/* Open path and check its header; with expect, the header must describe
 * the same part (id, table, part, geometry). */
int ckpt_part_open(struct ckpt_reader **out, const char *path,
		   const struct ckpt_part_desc *expect);
const struct ckpt_part_desc *ckpt_part_desc_of(const struct ckpt_reader *r);
/* Next record into *rec (valid until the next call): 1; 0 at the end,
 * once the trailer's counts and the file's checksum matched; or a
 * negative RS_E_* (RS_E_CORRUPT for damage) naming the file. */
int ckpt_part_next(struct ckpt_reader *r, struct ckpt_record *rec);
/* What the trailer said (valid after ckpt_part_next returned 0). */
void ckpt_part_sum_of(const struct ckpt_reader *r, struct ckpt_part_sum *s);
void ckpt_part_close(struct ckpt_reader *r);

/* ---- the manifest ---- */

struct ckpt_part_entry {
	char file[CKPT_FILE_MAX];	/* relative to the checkpoint dir */
	struct ckpt_part_sum sum;
};

struct ckpt_table_entry {
	struct proto_table_spec spec;
	uint32_t state_floats;
	uint32_t nparts;
	struct ckpt_part_entry *parts;
};

struct ckpt_manifest {
	uint8_t id[CKPT_ID_BYTES];
	uint8_t base[CKPT_ID_BYTES];	/* CKPT_INCREMENTAL: the base's id */
	char base_dir[CKPT_FILE_MAX];	/* ... and its directory: a sibling
					 * of this one (a plain name) */
	unsigned kind;			/* enum ckpt_kind */
	uint64_t created_ms;		/* Unix time */
	uint32_t ntables;
	struct ckpt_table_entry *tables;
};

/* A fresh random id. */
void ckpt_new_id(uint8_t id[CKPT_ID_BYTES]);
/* "0123…" (2 * CKPT_ID_BYTES hex digits and a NUL). */
void ckpt_id_hex(const uint8_t id[CKPT_ID_BYTES],
		 char hex[2 * CKPT_ID_BYTES + 1]);

/* The descriptor of part p of table t of m. */
void ckpt_part_desc_for(const struct ckpt_manifest *m, uint32_t t,
			uint32_t p, struct ckpt_part_desc *d);

/* Write dir/MANIFEST atomically (temporary file, fsync, rename, fsync of
 * the directory). */
int ckpt_manifest_save(const char *dir, const struct ckpt_manifest *m);
/* Read and check dir/MANIFEST; *out is freed with ckpt_manifest_free. */
int ckpt_manifest_load(const char *dir, struct ckpt_manifest **out);
/* The same check of a MANIFEST's len bytes in memory, buf[len] being a
 * NUL; path names it in messages. */
int ckpt_manifest_parse(const char *path, const char *buf, size_t len,
			struct ckpt_manifest **out);
void ckpt_manifest_free(struct ckpt_manifest *m);

/* Check a whole checkpoint: the manifest's checksum, every part present
 * with its recorded size and checksum, every record decodable, the
 * counts as recorded. 0, or the first problem (RS_E_CORRUPT, -ENOENT)
 * with a message that names the file. *st (may be NULL): totals. */
struct ckpt_verify_stats {
	uint64_t parts, rows, deleted, bytes, raw_bytes;
};
int ckpt_verify(const char *dir, struct ckpt_verify_stats *st);

/* A plain name in a directory: [A-Za-z0-9_.-], 1..63 bytes, no leading
 * dot (part files, and the directory of an increment's base). */
bool ckpt_file_name_ok(const char *s);

/* ---- chains: a full checkpoint and the increments on it ---- */

#define CKPT_CHAIN_MAX 256	/* increments on one full checkpoint */

struct ckpt_chain {
	uint32_t n;			/* links; [0] full, [n - 1] the one asked */
	char (*dir)[PATH_MAX];		/* each link's directory */
	struct ckpt_manifest **m;	/* and its manifest */
};

/* The directory of m's base, dir being m's: <dirname(dir)>/<base_dir>. */
int ckpt_base_path(const char *dir, const struct ckpt_manifest *m, char *out,
		   size_t cap);
/* Load dir's manifest and, for an increment, its bases back to a full
 * checkpoint: each base present (-ENOENT naming the missing directory and
 * the increment that names it), its id the one the increment names, a
 * full checkpoint or an increment (not an export), at most CKPT_CHAIN_MAX
 * links (RS_E_CORRUPT otherwise, naming both). Manifests only: the parts
 * are checked by ckpt_chain_verify. */
int ckpt_chain_load(const char *dir, struct ckpt_chain **out);
void ckpt_chain_free(struct ckpt_chain *c);
/* ckpt_chain_load, then ckpt_verify of every link; *st: the totals of
 * all links. */
int ckpt_chain_verify(const char *dir, struct ckpt_verify_stats *st);

#endif
