/*
 * fuzz_manifest.c - libFuzzer harness for a checkpoint's MANIFEST
 * (ckpt_manifest_parse, what ckpt_manifest_load reads; clang only, see
 * tests/fuzz/CMakeLists.txt).
 *
 * The first line carries an XXH64 of the rest, which no mutation would
 * match: the harness writes it. Input byte 0 chooses: odd, the rest is
 * the whole file (the first line is fuzzed too); even, the rest is the
 * JSON body under a correct first line of version 1 or 2 (bit 1).
 *
 * A manifest is refused with RS_E_CORRUPT or RS_E_UNSUPPORTED and a
 * message, or read into one whose every part descriptor passes
 * ckpt_desc_check() (what a part reader sizes its buffers by), with plain
 * file names and a known kind. Nothing may leak.
 * RS_FUZZ_SEED_DIR=dir: write manifests of each kind, as
 * ckpt_manifest_save writes them, into dir and exit (fuzz_seed.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "ckpt/ckpt_int.h"
#include "common/rs_internal.h"
#include "fuzz_seed.h"
#include "value/optimizer.h"
#include "value/row_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void seed_table(struct ckpt_table_entry *e, struct ckpt_part_entry *p,
		       unsigned i)
{
	struct proto_table_spec *s = &e->spec;

	memset(e, 0, sizeof(*e));
	snprintf(s->name, sizeof(s->name), "table_%u", i);
	s->dim = 4 + 60 * i;
	s->dtype = i % PROTO_DTYPE_COUNT;
	s->capacity = 100000;
	optim_params_default(&s->optim, i % OPTIM_KIND_COUNT);
	init_params_default(&s->init, (i + 1) % INIT_KIND_COUNT);
	if (i == 1)
		s->grow_log2 = 24;	/* version 2 */
	if (i == 2) {
		s->evict.policy = PROTO_EVICT_LFU;
		s->evict.max_rows = 5000;
		s->evict.ttl_s = 3600;
	}
	e->state_floats = (uint32_t)optim_state_floats(s->optim.kind, s->dim);
	e->nparts = 2;
	e->parts = p;
	for (unsigned k = 0; k < 2; k++) {
		snprintf(p[k].file, sizeof(p[k].file), "t%u-p%u.part", i, k);
		p[k].sum = (struct ckpt_part_sum){
			10 * k, k, 100 * k + 64, 200 + k, 0xfeedfacecafe + k
		};
	}
}

/* dir/MANIFEST without its first line, after a mode byte. */
static void seed_from(const char *dir, const char *name)
{
	char path[4096], *buf, *nl, *raw;
	long len;
	FILE *f;

	snprintf(path, sizeof(path), "%s/" CKPT_MANIFEST, dir);
	if (!(f = fopen(path, "rb")) || fseek(f, 0, SEEK_END) ||
	    (len = ftell(f)) < 0 || !(buf = malloc((size_t)len + 1)) ||
	    fseek(f, 0, SEEK_SET) || fread(buf, 1, (size_t)len, f) !=
					     (size_t)len) {
		perror(path);
		exit(1);
	}
	fclose(f);
	buf[len] = '\0';
	nl = strchr(buf, '\n');
	/* mode byte: a correct first line of the version the file says */
	if (!nl || !(raw = malloc((size_t)len + 1)))
		exit(1);
	raw[0] = 1;	/* and the whole file, as is */
	memcpy(raw + 1, buf, (size_t)len);
	snprintf(path, sizeof(path), "%s-raw", name);
	fuzz_seed_put(path, raw, (size_t)len + 1);
	nl[0] = strstr(buf, " 2 xxh64") ? 2 : 0;
	fuzz_seed_put(name, nl, (size_t)(buf + len - nl));
	free(raw);
	free(buf);
}

static void make_seeds(void)
{
	static const unsigned kinds[] = { CKPT_FULL, CKPT_INCREMENTAL,
					  CKPT_EXPORT };
	struct ckpt_table_entry e[3];
	struct ckpt_part_entry p[3][2];
	struct ckpt_manifest m = { .tables = e };
	char dir[] = "/tmp/rs-fuzz-manifest-XXXXXX", path[64], name[32];

	if (!mkdtemp(dir)) {
		perror(dir);
		exit(1);
	}
	ckpt_new_id(m.id);
	ckpt_new_id(m.base);
	snprintf(m.base_dir, sizeof(m.base_dir), "ckpt-000041");
	m.created_ms = 1733500000000ull;
	for (unsigned k = 0; k < 3; k++) {
		m.kind = kinds[k];
		m.ntables = k + 1; /* version 1, then 2 */
		for (unsigned i = 0; i < m.ntables; i++)
			seed_table(&e[i], p[i], i);
		if (ckpt_manifest_save(dir, &m)) {
			fprintf(stderr, "%s\n", rs_errormsg());
			exit(1);
		}
		snprintf(name, sizeof(name), "manifest-%u", k);
		seed_from(dir, name);
	}
	snprintf(path, sizeof(path), "%s/" CKPT_MANIFEST, dir);
	unlink(path);
	rmdir(dir);
}

FUZZ_SEED_INITIALIZE(make_seeds)

static void check(const struct ckpt_manifest *m)
{
	if (m->kind < CKPT_FULL || m->kind > CKPT_EXPORT ||
	    (m->kind == CKPT_INCREMENTAL && !ckpt_file_name_ok(m->base_dir)))
		__builtin_trap();
	for (uint32_t t = 0; t < m->ntables; t++) {
		const struct ckpt_table_entry *e = &m->tables[t];

		if (proto_name_check("name", e->spec.name,
				     strlen(e->spec.name)) ||
		    e->spec.capacity > PROTO_MAX_CAPACITY)
			__builtin_trap();
		for (uint32_t p = 0; p < e->nparts; p++) {
			struct ckpt_part_desc d;

			ckpt_part_desc_for(m, t, p, &d);
			if (!ckpt_file_name_ok(e->parts[p].file) ||
			    ckpt_desc_check(&d, "fuzz"))
				__builtin_trap();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ckpt_manifest *m = NULL;
	char head[64], *buf;
	size_t hl = 0;
	int rc;

	if (!size)
		return 0;
	if (!(data[0] & 1))
		hl = (size_t)snprintf(head, sizeof(head), "recstore-checkpoint "
				      "%u xxh64=%016" PRIx64 "\n",
				      1 + ((data[0] >> 1) & 1),
				      (uint64_t)XXH64(data + 1, size - 1, 0));
	/* exactly the bytes and the NUL, so that ASan sees a read past */
	if (!(buf = malloc(hl + size)))
		return 0;
	memcpy(buf, head, hl);
	memcpy(buf + hl, data + 1, size - 1);
	buf[hl + size - 1] = '\0';
	rc = ckpt_manifest_parse("MANIFEST", buf, hl + size - 1, &m);
	free(buf);
	if (rc) {
		if ((rc != RS_E_CORRUPT && rc != RS_E_UNSUPPORTED) || m ||
		    !rs_errormsg()[0])
			__builtin_trap();
		return 0;
	}
	check(m);
	ckpt_manifest_free(m);
	return 0;
}
