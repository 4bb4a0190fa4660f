#!/usr/bin/env bash
# test_client_lib.sh BUILD_DIR - the client library stands alone:
#  1. librecstore-client.so has no NEEDED libpmem, libhwloc or
#     libmicrohttpd (a trainer linking it pulls in none of the node's
#     dependencies), and defines no rs_server_* symbol;
#  2. a small C program built with nothing but
#     `pkg-config --cflags --libs recstore-client` (the build tree's
#     recstore-client.pc) compiles, links and runs: it checks the
#     version macros against the library (RS_CHECK_VERSION), the struct
#     sizes (RS_*_INIT), and creates and deletes a client config.
# CC and RS_TEST_CFLAGS (sanitizer flags of the build, from
# tests/unit/client_lib.cmake) come from the environment. Exit 0 pass.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
lib=$build/librecstore-client.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

[ -f "$lib" ] || fail "$lib missing"
readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' >"$tmp/needed"
echo "librecstore-client.so NEEDED: $(tr '\n' ' ' <"$tmp/needed")"
if grep -E '^lib(pmem|pmem2|hwloc|microhttpd)\.' "$tmp/needed"; then
	fail "the client library needs a node library (above)"
fi
grep -q '^libibverbs\.' "$tmp/needed" || fail "no NEEDED libibverbs?"
if nm -D --defined-only "$lib" | grep -w 'rs_server_[a-z_]*'; then
	fail "the client library defines server functions (above)"
fi

cat >"$tmp/tiny.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <recstore/client.h>

int main(void)
{
	struct rs_client_config *cfg = NULL;
	struct rs_table_spec spec = RS_TABLE_SPEC_INIT;
	struct rs_update_opts uo = RS_UPDATE_OPTS_INIT;
	char want[32];

	if (RS_CHECK_VERSION()) {
		fprintf(stderr, "version: %s\n", rs_errormsg());
		return 1;
	}
	snprintf(want, sizeof(want), "%d.%d.%d", RS_VERSION_MAJOR,
		 RS_VERSION_MINOR, RS_VERSION_PATCH);
	if (strcmp(want, rs_version())) {
		fprintf(stderr, "headers %s, library %s\n", want,
			rs_version());
		return 1;
	}
	if (rs_table_spec_init(&spec, "tiny", 8) || spec.dim != 8 ||
	    spec.struct_size != sizeof(spec) || uo.struct_size != sizeof(uo))
		return 1;
	if (rs_client_config_new(&cfg) ||
	    rs_client_config_add_node(cfg, "10.0.0.1:7471"))
		return 1;
	rs_client_config_delete(&cfg);
	printf("tiny client: recstore %s ok\n", rs_version());
	return 0;
}
C
export PKG_CONFIG_PATH=$build/pkgconfig-build
flags=$(pkg-config --cflags --libs recstore-client) ||
	fail "pkg-config recstore-client"
echo "pkg-config: $flags"
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -Wall -Wextra -Werror ${RS_TEST_CFLAGS:-} \
	-o "$tmp/tiny" "$tmp/tiny.c" $flags || fail "tiny program does not build"
readelf -d "$tmp/tiny" | grep -q 'librecstore-client\.so' ||
	fail "tiny program does not link librecstore-client.so"
LD_LIBRARY_PATH=$build "$tmp/tiny" || fail "tiny program failed"
