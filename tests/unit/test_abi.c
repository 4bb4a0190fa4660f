/*
 * test_abi.c - the growable public structs (src/common/abi.h): size
 * checks, copies that never touch a byte past the caller's struct_size,
 * the version check, and the checks of the update options.
 */
#include <math.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "client/client_internal.h"
#include "common/abi.h"
#include "common/rs_internal.h"
#include "recstore/client.h"
#include "value/initializer.h"
#include "value/row_format.h"

/* a struct of two releases: v1 had a, v2 appended b */
struct two {
	uint32_t struct_size;
	uint32_t a;
	uint64_t b;
};
static const uint32_t two_sizes[] = { 8, sizeof(struct two) };
static const struct rs_abi_type two_abi = { "struct two", two_sizes, 2 };

static void abi_copies_stay_within_size(void **state)
{
	uint8_t caller[32];
	struct two full = { sizeof(full), 7, 99 };
	uint32_t v1 = 8;

	/* an older caller (v1, 8 bytes) followed by bytes it owns */
	memset(caller, 0xab, sizeof(caller));
	memcpy(caller, &v1, 4);
	assert_int_equal(rs_abi_check(&two_abi, caller), 0);
	rs_abi_out(caller, &full, sizeof(full));
	assert_int_equal(rs_abi_size(caller), 8);
	assert_int_equal(caller[4], 7);
	for (size_t i = 8; i < sizeof(caller); i++)
		assert_int_equal(caller[i], 0xab); /* b not written */
	/* and read back: b, which v1 lacks, is zero (its default) */
	rs_abi_in(&full, sizeof(full), caller);
	assert_int_equal(full.a, 7);
	assert_true(full.b == 0);

	/* sizes that are not a release's */
	for (uint32_t bad = 0; bad < 40; bad++) {
		if (bad == 8 || bad == sizeof(struct two))
			continue;
		memcpy(caller, &bad, 4);
		assert_int_equal(rs_abi_check(&two_abi, caller), RS_E_INVAL);
		assert_non_null(strstr(rs_errormsg(), "struct two"));
	}
	assert_int_equal(rs_abi_check(&two_abi, NULL), RS_E_INVAL);
}

static void spec_needs_a_size(void **state)
{
	struct rs_table_spec s = RS_TABLE_SPEC_INIT;
	struct rs_table_spec z;

	assert_int_equal(s.struct_size, sizeof(s));
	assert_int_equal(rs_table_spec_init(&s, "ads", 16), 0);
	assert_int_equal(s.struct_size, sizeof(s));
	assert_int_equal(s.dim, 16);
	assert_int_equal(rs_table_spec_set_optimizer(&s, "adam"), 0);
	assert_int_equal(s.optim.kind, RS_OPT_ADAM);
	assert_int_equal(s.struct_size, sizeof(s));

	memset(&z, 0, sizeof(z)); /* struct_size 0: never set */
	assert_int_equal(rs_table_spec_init(&z, "ads", 16), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "struct rs_table_spec"));
	assert_non_null(strstr(rs_errormsg(), "struct_size 0"));
	assert_int_equal(z.dim, 0); /* nothing written */
	z.struct_size = sizeof(z) + 8; /* a newer release's size */
	assert_int_equal(rs_table_spec_init(&z, "ads", 16), RS_E_INVAL);
	assert_int_equal(rs_table_spec_set_optimizer(&z, "sgd"), RS_E_INVAL);
	assert_int_equal(rs_table_create(NULL, &s), RS_E_INVAL);
}

static void stats_need_a_size(void **state)
{
	struct rs_client_stats cs;

	memset(&cs, 0x5a, sizeof(cs));
	cs.struct_size = sizeof(cs);
	/* a NULL client: zeros and RS_E_INVAL */
	assert_int_equal(rs_client_get_stats(NULL, &cs), RS_E_INVAL);
	assert_int_equal(cs.struct_size, sizeof(cs));
	assert_true(cs.get_keys == 0 && cs.rpc_delete.keys == 0);
	assert_true(cs.config_refreshes == 0 && cs.epoch_retries == 0);
	/* a 0.2 caller's struct (before the cluster counters): accepted,
	 * and nothing written past its 176 bytes */
	memset(&cs, 0x5a, sizeof(cs));
	cs.struct_size = offsetof(struct rs_client_stats, config_refreshes);
	assert_int_equal(cs.struct_size, 176);
	assert_int_equal(rs_client_get_stats(NULL, &cs), RS_E_INVAL);
	assert_true(cs.get_keys == 0 && cs.rpc_delete.keys == 0);
	assert_true(cs.config_refreshes == 0x5a5a5a5a5a5a5a5aull);
	cs.struct_size = 16;
	assert_int_equal(rs_client_get_stats(NULL, &cs), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "struct rs_client_stats"));
	assert_int_equal(rs_client_get_stats(NULL, NULL), RS_E_INVAL);
}

static void version_check(void **state)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", RS_VERSION_MAJOR,
		 RS_VERSION_MINOR, RS_VERSION_PATCH);
	assert_string_equal(rs_version(), want);
	assert_int_equal(RS_CHECK_VERSION(), 0);
	assert_int_equal(rs_check_version(RS_VERSION_MAJOR,
					  RS_VERSION_MINOR + 1),
			 RS_E_UNSUPPORTED);
	assert_non_null(strstr(rs_errormsg(), rs_version()));
	assert_int_equal(rs_check_version(RS_VERSION_MAJOR + 1, 0),
			 RS_E_UNSUPPORTED);
	/* 0.1 structs carried no size */
	assert_int_equal(rs_check_version(0, 1), RS_E_UNSUPPORTED);
	assert_non_null(strstr(rs_errormsg(), "rebuild"));
	assert_true(RS_VERSION_NUMBER ==
		    RS_VERSION_ENCODE(RS_VERSION_MAJOR, RS_VERSION_MINOR,
				      RS_VERSION_PATCH));
}

static void update_opts_checked(void **state)
{
	struct rs_update_opts o = RS_UPDATE_OPTS_INIT, full;
	const float bad[] = { NAN, INFINITY, -INFINITY, -0.5f, -1e-30f };

	assert_int_equal(cli_update_opts(&o, &full), 0);
	assert_int_equal(full.flags, 0);
	o.flags = RS_UPDATE_LR;
	o.lr = 0.0f; /* a warm-up step */
	assert_int_equal(cli_update_opts(&o, &full), 0);
	o.lr = 0.25f;
	assert_int_equal(cli_update_opts(&o, &full), 0);
	assert_true(full.lr == 0.25f && full.flags == RS_UPDATE_LR);
	for (size_t i = 0; i < RS_ARRAY_SIZE(bad); i++) {
		o.lr = bad[i];
		assert_int_equal(cli_update_opts(&o, &full), RS_E_INVAL);
		assert_non_null(strstr(rs_errormsg(), "lr"));
	}
	/* without the flag, lr is not looked at */
	o.flags = 0;
	o.lr = NAN;
	assert_int_equal(cli_update_opts(&o, &full), 0);
	o.flags = RS_UPDATE_CREATE | RS_UPDATE_LR; /* 0.6 */
	o.lr = 0.5f;
	assert_int_equal(cli_update_opts(&o, &full), 0);
	assert_int_equal(full.flags, RS_UPDATE_CREATE | RS_UPDATE_LR);
	o.flags = 0x80;
	assert_int_equal(cli_update_opts(&o, &full), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "unknown flags"));
	o.flags = 0;
	o.struct_size = 4;
	assert_int_equal(cli_update_opts(&o, &full), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "struct rs_update_opts"));
	assert_int_equal(rs_update_ex(NULL, NULL, 0, NULL, NULL, 0, NULL),
			 RS_E_INVAL);
}

/* rs_table_init_rows(): the node's init_row() for each key, rounded to
 * the table's dtype as the node stores it; bad specs refused. */
static void init_rows_as_the_node(void **state)
{
	struct rs_table_spec sp = RS_TABLE_SPEC_INIT;
	const uint64_t keys[] = { 0, 1, 1ULL << 63, UINT64_MAX, 12345 };
	enum { N = 5, DIM = 7 };
	float got[N * DIM], want[DIM];
	struct init_params ip = { 0 };

	(void)state;
	assert_int_equal(rs_table_spec_init(&sp, "t", DIM), 0);
	sp.init.kind = RS_INIT_UNIFORM;
	sp.init.a = 0.3f;
	sp.init.seed = 99;
	ip.kind = INIT_UNIFORM;
	ip.a = 0.3f;
	ip.seed = 99;
	for (uint32_t dt = RS_DTYPE_FP32; dt <= RS_DTYPE_BF16; dt++) {
		sp.dtype = dt;
		assert_int_equal(rs_table_init_rows(&sp, keys, N, got), 0);
		for (int i = 0; i < N; i++) {
			init_row(&ip, keys[i], want, DIM);
			for (int j = 0; j < DIM; j++) {
				float w = want[j];

				if (dt == RS_DTYPE_FP16)
					w = row_f16_to_f32(row_f32_to_f16(w));
				else if (dt == RS_DTYPE_BF16)
					w = row_bf16_to_f32(row_f32_to_bf16(w));
				assert_true(got[i * DIM + j] == w);
				assert_true(fabsf(w) <= 0.3f);
			}
		}
	}
	/* distinct keys, distinct rows (not a constant) */
	assert_true(memcmp(got, got + DIM, sizeof(float) * DIM) != 0);
	sp.init.a = -1.0f;
	assert_int_equal(rs_table_init_rows(&sp, keys, N, got), RS_E_INVAL);
	sp.init.a = 0.3f;
	sp.dtype = 9;
	assert_int_equal(rs_table_init_rows(&sp, keys, N, got), RS_E_INVAL);
	assert_int_equal(rs_table_init_rows(NULL, keys, N, got), RS_E_INVAL);
	sp.dtype = RS_DTYPE_FP32;
	assert_int_equal(rs_table_init_rows(&sp, keys, 0, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(abi_copies_stay_within_size),
		cmocka_unit_test(spec_needs_a_size),
		cmocka_unit_test(stats_need_a_size),
		cmocka_unit_test(version_check),
		cmocka_unit_test(update_opts_checked),
		cmocka_unit_test(init_rows_as_the_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
