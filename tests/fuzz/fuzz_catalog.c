/*
 * fuzz_catalog.c - libFuzzer harness for the table specs a node reads
 * from its pool (clang only; see tests/fuzz/CMakeLists.txt): the catalog
 * record of a table (srv_spec_decode) and the JSON catalog file of a
 * layout-2 pool (srv_catalog_parse, the text srv_catalog_load reads).
 *
 * Each input is given to both. A record is refused (-1) or read into a
 * spec that proto_table_spec_validate() accepts and that encodes into a
 * record again and decodes to the same spec. A
 * catalog file is refused with RS_E_CORRUPT and a message, or read into
 * at most SRV_CATALOG_MAX entries, each of which round-trips the same way.
 * Nothing may leak (ASan's leak checker runs at exit).
 * RS_FUZZ_SEED_DIR=dir: write valid records and catalog files into dir
 * and exit (fuzz_seed.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_seed.h"
#include "server/srv_catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A spec of every optimizer and initializer, some growing or evicting. */
static void seed_spec(unsigned i, struct proto_table_spec *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "t%u.emb-x", i);
	s->dim = 1u + i * 7;
	s->dtype = i % 2 ? PROTO_DTYPE_FP16 : PROTO_DTYPE_FP32;
	s->capacity = 1000u << i;
	optim_params_default(&s->optim, i % OPTIM_KIND_COUNT);
	init_params_default(&s->init, i % INIT_KIND_COUNT);
	s->init.seed = 0x0123456789abcdefull * (i + 1);
	if (i % 3 == 1)
		s->grow_log2 = (uint8_t)(20 + i);
	if (i % 3 == 2) {
		s->evict.policy = PROTO_EVICT_LRU;
		s->evict.max_rows = 500;
		s->evict.ttl_s = 60;
		s->evict.admit_after = 2;
	}
}

static void make_seeds(void)
{
	json_t *file = json_pack("{s:s, s:i, s:[]}", "format",
				 "recstore-tables", "version", 1, "tables");
	json_t *tabs = json_object_get(file, "tables");
	char rec[SLAB_CATALOG_MAX], name[32], *text;
	struct proto_table_spec s;

	for (unsigned i = 0; i < 6; i++) {
		int len;

		seed_spec(i, &s);
		len = srv_spec_encode(&s, rec, sizeof(rec));
		if (len < 0) {
			fprintf(stderr, "seed %u: %s\n", i, rs_errormsg());
			exit(1);
		}
		snprintf(name, sizeof(name), "record-%u", i);
		fuzz_seed_put(name, rec, (size_t)len);
		json_array_append_new(tabs, json_pack(
			"{s:s, s:o}", "uid", i % 2 ? "00c0ffee12345678" : "",
			"spec", srv_spec_to_json(&s)));
	}
	text = json_dumps(file, JSON_COMPACT);
	if (!text)
		exit(1);
	fuzz_seed_put("catalog-file", text, strlen(text));
	free(text);
	json_decref(file);
}

FUZZ_SEED_INITIALIZE(make_seeds)

/* A spec that was read is valid, and writes and reads as itself. */
static void round_trip(const struct proto_table_spec *s)
{
	static char rec[1 << 16];
	struct proto_table_spec back;
	struct proto_limits lim;
	int len = srv_spec_encode(s, rec, sizeof(rec));

	proto_limits_default(&lim);
	lim.max_dim = PROTO_MAX_DIM;
	if (len < 0 || proto_table_spec_validate(s, &lim) ||
	    srv_spec_decode(rec, (size_t)len, &back) ||
	    memcmp(&back, s, sizeof(back)))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct srv_catalog c;
	struct proto_table_spec s;
	int rc;

	if (!srv_spec_decode(data, size, &s))
		round_trip(&s);
	srv_catalog_init(&c, NULL);
	rc = srv_catalog_parse(&c, (const char *)data, size);
	if (rc) {
		if (rc != RS_E_CORRUPT || !rs_errormsg()[0])
			__builtin_trap();
		return 0;
	}
	if (c.n > SRV_CATALOG_MAX)
		__builtin_trap();
	for (unsigned i = 0; i < c.n; i++)
		round_trip(&c.ent[i].spec);
	return 0;
}
