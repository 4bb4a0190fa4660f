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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(abi_copies_stay_within_size),
		cmocka_unit_test(spec_needs_a_size),
		cmocka_unit_test(stats_need_a_size),
		cmocka_unit_test(version_check),
		cmocka_unit_test(update_opts_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
