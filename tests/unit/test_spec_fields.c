/*
 * test_spec_fields.c - every row of the table spec's field table
 * (src/common/spec_fields.h) through every path that carries it.
 *
 * For each row, a probe value (valid, and no kind's default) is set alone
 * in an otherwise default spec whose kinds use the row, then carried by
 * the wire (TABLE_CREATE encode + decode), the node's catalog record, the
 * checkpoint manifest (save + load) and the node config's table parser;
 * each must give the probe back. The range checks must agree too: a value
 * outside a row's range is refused by the kernel-side check, the wire
 * decoder and the config, each naming the row; the config refuses a row
 * under a kind that does not use it. A row added to the table and
 * forgotten in one of these paths fails here.
 *
 * The files' spellings: the catalog record is written byte for byte as
 * before (a literal below), and both readers take the other dialect's
 * keys ("type"/"kind", "initializer"/"init").
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "ckpt/ckpt.h"
#include "common/proto.h"
#include "common/rs_internal.h"
#include "common/spec.h"
#include "recstore/client.h"
#include "server/config.h"
#include "server/srv_catalog.h"
#include "value/optimizer.h"
#include "value/row_format.h"

#define PROBE_SEED 0x0123456789abcdefull

/* A valid value of f that is no kind's default. */
static double probe(const struct spec_field *f)
{
	if (f->type == SPEC_T_u32)
		return f->hi; /* every known bit */
	if (f->type == SPEC_T_u64)
		return 0;     /* see set_probe() */
	if (isinf(f->lo))
		return -0.625;
	if (isfinite(f->hi))
		return (f->lo + f->hi) / 2;
	return f->lo + 0.375;
}

static void *params_of(const struct spec_field *f, struct proto_table_spec *s)
{
	return f->group == SPEC_G_OPTIM ? (void *)&s->optim
					: (void *)&s->init;
}

static void set_value(const struct spec_field *f, struct proto_table_spec *s,
		      double v)
{
	void *p = spec_field_ptr(f, params_of(f, s));

	if (f->type == SPEC_T_f32)
		*(float *)p = (float)v;
	else if (f->type == SPEC_T_u32)
		*(uint32_t *)p = (uint32_t)v;
	else
		*(uint64_t *)p = PROBE_SEED;
}

static void set_probe(const struct spec_field *f, struct proto_table_spec *s)
{
	set_value(f, s, probe(f));
}

/* f's value in a equals its probe */
static void expect_probe(const struct spec_field *f,
			 struct proto_table_spec *a, const char *path)
{
	struct proto_table_spec want = *a;
	size_t w = f->type == SPEC_T_u64 ? 8 : 4;

	set_probe(f, &want);
	if (memcmp(spec_field_ptr(f, params_of(f, a)),
		   spec_field_ptr(f, params_of(f, &want)), w))
		fail_msg("%s: field '%s' did not come back", path, f->name);
}

static unsigned first_user(const struct spec_field *f)
{
	return (unsigned)__builtin_ctz(f->users);
}

/* A kind of f's group that does not use f; 4 if every kind does. */
static unsigned first_non_user(const struct spec_field *f)
{
	for (unsigned k = 0; k < 4; k++)
		if (!(f->users & SPEC_BIT(k)))
			return k;
	return 4;
}

/* A default spec whose kinds use f, with f at its probe. */
static void probe_spec(const struct spec_field *f, struct proto_table_spec *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "t");
	s->dim = 8;
	s->dtype = PROTO_DTYPE_FP32;
	s->capacity = 1000;
	optim_params_default(&s->optim, f->group == SPEC_G_OPTIM
						? first_user(f) : OPTIM_ADAM);
	init_params_default(&s->init, f->group == SPEC_G_INIT
					      ? first_user(f) : INIT_UNIFORM);
	set_probe(f, s);
}

static void defaults(void **state)
{
	(void)state;
	for (uint32_t k = 0; k < 4; k++) {
		struct proto_table_spec s;

		memset(&s, 0, sizeof(s));
		assert_int_equal(optim_params_default(&s.optim, k), 0);
		assert_int_equal(init_params_default(&s.init, k), 0);
		for (unsigned i = 0; i < spec_nfields; i++) {
			const struct spec_field *f = &spec_fields[i];
			void *p = spec_field_ptr(f, params_of(f, &s));

			if (f->type == SPEC_T_f32)
				assert_true(*(float *)p == f->def[k]);
			assert_int_equal(spec_field_check(f, params_of(f, &s)),
					 0);
		}
	}
	/* the documented oddities */
	assert_true(spec_fields[1].def[OPTIM_ADAM] == 0.001f);
	assert_string_equal(spec_fields[1].name, "lr");
}

static void wire(void **state)
{
	static uint8_t buf[4096];

	(void)state;
	for (unsigned i = 0; i < spec_nfields; i++) {
		const struct spec_field *f = &spec_fields[i];
		struct proto_hdr h = { .req_id = 1 };
		struct proto_table_spec s;
		struct proto_msg m;
		int len;

		probe_spec(f, &s);
		len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
		assert_true(len > 0);
		if (proto_decode(buf, (size_t)len, NULL, &m))
			fail_msg("%s: %s", f->name, rs_errormsg());
		expect_probe(f, &m.u.table_create, "wire");
	}
}

static void catalog(void **state)
{
	char rec[2048];

	(void)state;
	for (unsigned i = 0; i < spec_nfields; i++) {
		const struct spec_field *f = &spec_fields[i];
		struct proto_table_spec s, back;
		int len;

		probe_spec(f, &s);
		len = srv_spec_encode(&s, rec, sizeof(rec));
		assert_true(len > 0);
		assert_int_equal(srv_spec_decode(rec, (size_t)len, &back), 0);
		expect_probe(f, &back, "catalog");
	}
}

/* The catalog record as every earlier version wrote it. */
static void catalog_bytes(void **state)
{
	static const char want[] =
		"{\"name\":\"ads\",\"dim\":4,\"dtype\":\"fp16\",\"capacity\":"
		"100,\"optimizer\":{\"kind\":\"adam\",\"flags\":1,\"lr\":0.5,"
		"\"eps\":0.25,\"beta1\":0.75,\"beta2\":0.875,\"weight_decay\""
		":0.125,\"initial_accumulator\":2.0},\"init\":{\"kind\":"
		"\"normal\",\"value\":0.0,\"a\":0.5,\"std\":1.5,\"seed\":"
		"\"0123456789abcdef\"}}";
	struct proto_table_spec s = { .name = "ads", .dim = 4,
				      .dtype = PROTO_DTYPE_FP16,
				      .capacity = 100 };
	char rec[1024];
	int len;

	(void)state;
	s.optim = (struct optim_params){ OPTIM_ADAM, 1, 0.5f, 0.25f, 0.75f,
					 0.875f, 0.125f, 2.0f };
	s.init = (struct init_params){ INIT_NORMAL, 0, 0.5f, 1.5f,
				       PROBE_SEED };
	len = srv_spec_encode(&s, rec, sizeof(rec));
	assert_int_equal(len, (int)strlen(want));
	assert_memory_equal(rec, want, strlen(want));
}

/* The catalog reads the config's and manifest's spellings too. */
static void catalog_aliases(void **state)
{
	static const char rec[] =
		"{\"name\":\"ads\",\"dim\":4,\"dtype\":\"fp32\",\"capacity\":"
		"100,\"optimizer\":{\"type\":\"adagrad\",\"flags\":0,\"lr\":"
		"0.5,\"eps\":0.25,\"beta1\":0.75,\"beta2\":0.875,"
		"\"weight_decay\":0,\"initial_accumulator\":2},"
		"\"initializer\":{\"type\":\"constant\",\"value\":3,\"a\":0.5,"
		"\"std\":1.5,\"seed\":\"7\"}}";
	struct proto_table_spec s;

	(void)state;
	assert_int_equal(srv_spec_decode(rec, strlen(rec), &s), 0);
	assert_int_equal(s.optim.kind, OPTIM_ADAGRAD);
	assert_true(s.optim.lr == 0.5f);
	assert_int_equal(s.init.kind, INIT_CONSTANT);
	assert_true(s.init.value == 3.0f);
	assert_true(s.init.seed == 7);
}

static char g_dir[64];

static void manifest_of(struct ckpt_manifest *m, struct ckpt_table_entry *e,
			const struct proto_table_spec *s)
{
	memset(m, 0, sizeof(*m));
	memset(e, 0, sizeof(*e));
	ckpt_new_id(m->id);
	m->kind = CKPT_FULL;
	m->ntables = 1;
	m->tables = e;
	e->spec = *s;
	e->state_floats = (uint32_t)optim_state_floats(s->optim.kind, s->dim);
}

static void manifest(void **state)
{
	(void)state;
	for (unsigned i = 0; i < spec_nfields; i++) {
		const struct spec_field *f = &spec_fields[i];
		struct proto_table_spec s;
		struct ckpt_table_entry e;
		struct ckpt_manifest m, *back;

		probe_spec(f, &s);
		manifest_of(&m, &e, &s);
		assert_int_equal(ckpt_manifest_save(g_dir, &m), 0);
		if (ckpt_manifest_load(g_dir, &back))
			fail_msg("%s: %s", f->name, rs_errormsg());
		expect_probe(f, &back->tables[0].spec, "manifest");
		ckpt_manifest_free(back);
	}
}

/* Replace every `from` in s (of cap bytes) by `to`. */
static void replace_all(char *s, size_t cap, const char *from, const char *to)
{
	char *p = s, tmp[8192];

	while ((p = strstr(p, from))) {
		snprintf(tmp, sizeof(tmp), "%s%s", to, p + strlen(from));
		snprintf(p, cap - (size_t)(p - s), "%s", tmp);
		p += strlen(to);
	}
}

/* The manifest reads the catalog's spellings ("init", "kind"). */
static void manifest_aliases(void **state)
{
	struct proto_table_spec s;
	struct ckpt_table_entry e;
	struct ckpt_manifest m, *back;
	char path[128], buf[8192], *body;
	FILE *fp;
	size_t n;

	(void)state;
	probe_spec(&spec_fields[spec_nfields - 1], &s); /* the seed */
	manifest_of(&m, &e, &s);
	assert_int_equal(ckpt_manifest_save(g_dir, &m), 0);
	snprintf(path, sizeof(path), "%s/MANIFEST", g_dir);
	assert_non_null(fp = fopen(path, "r"));
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	body = strchr(buf, '\n') + 1;
	replace_all(body, sizeof(buf) - (size_t)(body - buf),
		    "\"initializer\"", "\"init\"");
	replace_all(body, sizeof(buf) - (size_t)(body - buf), "\"type\"",
		    "\"kind\"");
	assert_null(strstr(body, "\"type\""));
	assert_non_null(fp = fopen(path, "w"));
	fprintf(fp, "recstore-checkpoint 1 xxh64=%016" PRIx64 "\n%s",
		(uint64_t)XXH64(body, strlen(body), 0), body);
	fclose(fp);
	if (ckpt_manifest_load(g_dir, &back))
		fail_msg("%s", rs_errormsg());
	assert_true(back->tables[0].spec.init.seed == PROBE_SEED);
	assert_int_equal(back->tables[0].spec.init.kind, s.init.kind);
	assert_int_equal(back->tables[0].spec.optim.kind, s.optim.kind);
	ckpt_manifest_free(back);
}

/* A node config with one table whose group object of f holds `member`
 * (JSON text) under the kind k. */
static void config_json(const struct spec_field *f, unsigned k,
			const char *member, char *out, size_t cap)
{
	const char *sect = f->group == SPEC_G_OPTIM ? "optimizer"
						    : "initializer";
	const char *kind = f->group == SPEC_G_OPTIM ? optim_kind_name(k)
						    : init_kind_name(k);

	snprintf(out, cap, "{\"tables\": [{\"name\": \"t\", \"dim\": 8, "
		 "\"capacity\": 1000, \"%s\": {\"type\": \"%s\"%s%s%s}}]}",
		 sect, kind, k == INIT_CONSTANT && f->group == SPEC_G_INIT &&
		 strcmp(f->name, "value") ? ", \"value\": 1" : "",
		 *member ? ", " : "", member);
}

static void member_of(const struct spec_field *f, double v, char *out,
		      size_t cap)
{
	if (f->type == SPEC_T_u64)
		snprintf(out, cap, "\"%s\": \"0x%" PRIx64 "\"", f->name,
			 (uint64_t)PROBE_SEED);
	else
		snprintf(out, cap, "\"%s\": %.17g", f->name, v);
}

static void config(void **state)
{
	char json[512], member[128];

	(void)state;
	for (unsigned i = 0; i < spec_nfields; i++) {
		const struct spec_field *f = &spec_fields[i];
		struct srv_config *c = NULL;
		unsigned k;

		if (f->type == SPEC_T_u32)
			continue; /* the flags: decoupled_weight_decay */
		member_of(f, probe(f), member, sizeof(member));
		config_json(f, first_user(f), member, json, sizeof(json));
		if (srv_config_parse(&c, json, strlen(json)))
			fail_msg("%s: %s\n%s", f->name, rs_errormsg(), json);
		expect_probe(f, &c->tables[0], "config");
		srv_config_free(&c);
		/* under a kind that does not use it: refused */
		if ((k = first_non_user(f)) == 4)
			continue;
		config_json(f, k, member, json, sizeof(json));
		assert_int_equal(srv_config_parse(&c, json, strlen(json)),
				 RS_E_INVAL);
		assert_non_null(strstr(rs_errormsg(), "not used by"));
		assert_non_null(strstr(rs_errormsg(), f->name));
	}
}

/* The values just outside f's range (NAN always). */
static unsigned outside(const struct spec_field *f, double out[3])
{
	unsigned n = 0;

	out[n++] = NAN;
	if (isfinite(f->lo))
		out[n++] = f->lo_open ? f->lo : f->lo - 1;
	if (isfinite(f->hi))
		out[n++] = f->hi_open ? f->hi : f->hi + 1;
	return n;
}

static void expect_refused(const struct spec_field *f, double v)
{
	static uint8_t buf[4096];
	struct proto_hdr h = { .req_id = 1 };
	struct proto_table_spec s;
	struct proto_msg m;
	char prefix[96], json[512], member[128];
	struct srv_config *c = NULL;
	int len;

	probe_spec(f, &s);
	set_value(f, &s, v);
	assert_int_equal(spec_field_check(f, params_of(f, &s)), RS_E_INVAL);
	snprintf(prefix, sizeof(prefix), "%s: ", f->name);
	assert_memory_equal(rs_errormsg(), prefix, strlen(prefix));
	/* the wire: the encoder sends it, the decoder refuses it */
	len = proto_enc_table_create_req(buf, sizeof(buf), &h, &s);
	assert_true(len > 0);
	assert_int_equal(proto_decode(buf, (size_t)len, NULL, &m), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), prefix));
	if (isnan(v))
		return; /* JSON has no NaN */
	member_of(f, v, member, sizeof(member));
	config_json(f, first_user(f), member, json, sizeof(json));
	assert_int_equal(srv_config_parse(&c, json, strlen(json)), RS_E_INVAL);
	snprintf(prefix, sizeof(prefix), "tables[0].%s.%s: ",
		 f->group == SPEC_G_OPTIM ? "optimizer" : "initializer",
		 f->name);
	if (!strstr(rs_errormsg(), prefix))
		fail_msg("%s: config said '%s'", f->name, rs_errormsg());
}

static void ranges(void **state)
{
	(void)state;
	for (unsigned i = 0; i < spec_nfields; i++) {
		const struct spec_field *f = &spec_fields[i];
		double out[3];
		unsigned n;

		if (f->type != SPEC_T_f32)
			continue;
		n = outside(f, out);
		for (unsigned j = 0; j < n; j++)
			expect_refused(f, out[j]);
	}
}

static void dtypes(void **state)
{
	(void)state;
	assert_int_equal(row_dtype_from_proto(PROTO_DTYPE_FP32), ROW_F32);
	assert_int_equal(row_dtype_from_proto(PROTO_DTYPE_BF16), ROW_BF16);
	assert_int_equal(row_dtype_to_proto(ROW_F16), PROTO_DTYPE_FP16);
}

/* The table as the public API hands it out (rs_table_spec_param*, what
 * recstore-ctl's create options are made from): the same rows, each
 * member's address inside the public spec's block, and the names of the
 * kinds both ways. */
static void public_rows(void **state)
{
	struct rs_table_spec pub = RS_TABLE_SPEC_INIT;
	unsigned n = rs_table_spec_param_count();

	(void)state;
	assert_int_equal(n, spec_nfields);
	for (unsigned i = 0; i < n; i++) {
		const struct spec_field *f = &spec_fields[i];
		char *block = f->group == SPEC_G_OPTIM ? (char *)&pub.optim
						       : (char *)&pub.init;
		uint32_t group = 99, type = 99;
		const char *name = NULL;

		assert_int_equal(rs_table_spec_param(i, &name, &group, &type),
				 0);
		assert_string_equal(name, f->name);
		assert_int_equal(group, f->group);
		assert_int_equal(type, f->type);
		assert_ptr_equal(rs_table_spec_param_ptr(&pub, i),
				 block + f->off);
	}
	assert_int_equal(rs_table_spec_param(n, NULL, NULL, NULL),
			 RS_E_NOTFOUND);
	assert_null(rs_table_spec_param_ptr(&pub, n));
	assert_null(rs_table_spec_param_ptr(NULL, 0));
	for (uint32_t d = 0; d < PROTO_DTYPE_COUNT; d++)
		assert_int_equal(rs_dtype_parse(rs_dtype_name(d)), d);
	assert_null(rs_dtype_name(PROTO_DTYPE_COUNT));
	assert_int_equal(rs_dtype_parse("fp64"), RS_E_INVAL);
	assert_int_equal(rs_dtype_parse(NULL), RS_E_INVAL);
	for (uint32_t k = 0; k < INIT_KIND_COUNT; k++)
		assert_int_equal(rs_init_parse(rs_init_name(k)), k);
	assert_null(rs_init_name(INIT_KIND_COUNT));
	assert_int_equal(rs_init_parse("gaussian"), RS_E_INVAL);
	for (uint32_t k = 0; k < OPTIM_KIND_COUNT; k++)
		assert_string_equal(rs_optimizer_name(k), optim_kind_name(k));
	assert_null(rs_optimizer_name(OPTIM_KIND_COUNT));
	for (uint32_t k = 0; k <= RS_EVICT_LFU; k++)
		assert_int_equal(rs_evict_parse(rs_evict_name(k)), k);
	assert_null(rs_evict_name(RS_EVICT_LFU + 1));
	assert_int_equal(rs_evict_parse("fifo"), RS_E_INVAL);
}

static int setup(void **state)
{
	(void)state;
	snprintf(g_dir, sizeof(g_dir), "/tmp/rs-spec-XXXXXX");
	return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[128];

	(void)state;
	snprintf(path, sizeof(path), "%s/MANIFEST", g_dir);
	unlink(path);
	return rmdir(g_dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults),
		cmocka_unit_test(wire),
		cmocka_unit_test(catalog),
		cmocka_unit_test(catalog_bytes),
		cmocka_unit_test(catalog_aliases),
		cmocka_unit_test(manifest),
		cmocka_unit_test(manifest_aliases),
		cmocka_unit_test(config),
		cmocka_unit_test(ranges),
		cmocka_unit_test(dtypes),
		cmocka_unit_test(public_rows),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
