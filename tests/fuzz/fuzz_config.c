/*
 * fuzz_config.c - libFuzzer harness for srv_config_parse() (clang only;
 * see tests/fuzz/CMakeLists.txt). Any input must be accepted with a
 * config whose tables pass proto_table_spec_validate() under its own
 * limits and whose settings are in their rows' ranges
 * (srv_config_check_rows(), the node's own check at open), or refused with RS_E_INVAL (or -ENOMEM) and a message; the
 * parse must not leak (ASan's leak checker runs at exit). Seed it with
 * the JSON examples of docs/config.md and tests/unit/test_config.c.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/rs_internal.h"
#include "server/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct srv_config *c = NULL;
	int rc = srv_config_parse(&c, (const char *)data, size);

	if (rc) {
		if ((rc != RS_E_INVAL && rc != -ENOMEM) || c ||
		    !rs_errormsg()[0])
			__builtin_trap();
		return 0;
	}
	if (proto_limits_validate(&c->limits) || c->workers == 0 ||
	    c->trace_sample < 0 || c->trace_sample > 1 ||
	    srv_config_check_rows(c))
		__builtin_trap();
	for (uint32_t i = 0; i < c->ntables; i++)
		if (proto_table_spec_validate(&c->tables[i], &c->limits))
			__builtin_trap();
	srv_config_free(&c);
	return 0;
}
