/*
 * fuzz_addr.c - libFuzzer harness for the one "ADDR:PORT" parser
 * (rs_addr_parse, src/common/addr.h; clang only, see
 * tests/fuzz/CMakeLists.txt): what an operator, a config file or a
 * cluster configuration hands a node or a client as an address.
 *
 * Input byte 0 chooses the caller's policy: bit 0 port 0 allowed, bit 1
 * a default port (RS_DEFAULT_PORT) for a bare host, bit 2 a name for the
 * message ("node"), bits 3-7 the host buffer's length (1 + 4 * value,
 * so that "the host is too long" is reached); the remaining bytes, up to
 * the first NUL, are the address. A refused address gives RS_E_INVAL
 * and a message (with the name's prefix when one was given) and leaves
 * the outputs alone; an accepted one gives a non-empty host,
 * NUL-terminated within its buffer, a port allowed by the policy, and
 * formats (rs_addr_format) into a NUL-terminated string that parses back
 * to the same host and port; a buffer one byte short is refused, still
 * NUL-terminated. Nothing is written past the buffers' lengths.
 * RS_FUZZ_SEED_DIR=dir: write addresses of each form into dir and exit
 * (fuzz_seed.h).
 */
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"
#include "common/defaults.h"
#include "common/rs_internal.h"
#include "fuzz_seed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
	P_PORT0 = 1,		/* ":0" accepted (a listener) */
	P_DEFAULT = 2,		/* a bare host takes RS_DEFAULT_PORT */
	P_NAMED = 4,		/* messages start "node: " */
	P_LEN_SHIFT = 3,	/* host buffer: 1 + 4 * (byte0 >> 3) bytes */
	HOST_MAX = 1 + 4 * (0xff >> P_LEN_SHIFT),
	GUARD = 8,		/* bytes past the buffer that must not change */
	FMT_MAX = HOST_MAX + sizeof("[]:65535"),
};

#define FILL 0x5a	/* what the outputs hold before a call */
#define HOSTLEN_ALL (31u << P_LEN_SHIFT)	/* the longest host buffer */

static const struct { uint8_t policy; const char *addr; } seeds[] = {
	{ HOSTLEN_ALL, "10.0.0.1:7471" },
	{ HOSTLEN_ALL, "10.0.0.1:65535" },
	{ HOSTLEN_ALL | P_PORT0, "0.0.0.0:0" },
	{ HOSTLEN_ALL, "host:0" },
	{ HOSTLEN_ALL | P_PORT0, "host:65536" },
	{ HOSTLEN_ALL | P_DEFAULT, "10.0.0.1" },
	{ HOSTLEN_ALL | P_DEFAULT, "[::1]" },
	{ HOSTLEN_ALL | P_PORT0, "[::1]:0" },
	{ HOSTLEN_ALL, "[fe80::1%eth0]:7471" },
	{ HOSTLEN_ALL, "[::ffff:10.0.0.1]:9" },
	{ HOSTLEN_ALL | P_NAMED, "node-1.example_x:80" },
	{ HOSTLEN_ALL | P_NAMED, "mem-0.cluster.local:7471" },
	{ 2u << P_LEN_SHIFT, "abcdefgh:1" },	/* just fits */
	{ 2u << P_LEN_SHIFT, "abcdefghi:1" },	/* one byte too long */
	{ HOSTLEN_ALL | P_NAMED, "" },
	{ HOSTLEN_ALL, ":7471" },
	{ HOSTLEN_ALL, "host:" },
	{ HOSTLEN_ALL, "[::1:7471" },		/* no closing bracket */
	{ HOSTLEN_ALL, "::1]:7471" },
	{ HOSTLEN_ALL | P_DEFAULT, "fe80::1:7471" },
	{ HOSTLEN_ALL, "[10.0.0.1]:80" },
	{ HOSTLEN_ALL, "host:+80" },
	{ HOSTLEN_ALL, "host :80" },
};

static void make_seeds(void)
{
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		fuzz_seed_put_text("addr", i, &seeds[i].policy, 1,
				   seeds[i].addr);
}

FUZZ_SEED_INITIALIZE(make_seeds)

/* n bytes of p still hold the filler */
static bool untouched(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != FILL)
			return false;
	return true;
}

/* rs_addr_format of an accepted host and port, then its read-back */
static void round_trip(const char *host, size_t hostlen, uint16_t port,
		       bool port0_ok)
{
	char buf[FMT_MAX + GUARD], back[HOST_MAX + GUARD];
	uint16_t port2 = 1;
	int n;

	memset(buf, FILL, sizeof(buf));
	n = rs_addr_format(host, port, buf, FMT_MAX);
	if (n <= 0 || !memchr(buf, '\0', FMT_MAX) ||
	    strlen(buf) != (size_t)n || !untouched(buf + FMT_MAX, GUARD))
		__builtin_trap();
	memset(back, FILL, sizeof(back));
	if (rs_addr_parse(NULL, buf, 0, port0_ok, back, hostlen, &port2) ||
	    strcmp(back, host) || port2 != port ||
	    !untouched(back + hostlen, GUARD))
		__builtin_trap();
	/* one byte short: refused, and what was written still ends */
	memset(buf, FILL, sizeof(buf));
	if (rs_addr_format(host, port, buf, (size_t)n) != RS_E_INVAL ||
	    !memchr(buf, '\0', (size_t)n) || !untouched(buf + n, GUARD) ||
	    !rs_errormsg()[0])
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char host[HOST_MAX + GUARD], *s;
	uint16_t port = 1234, dflt;
	size_t hostlen;
	bool port0_ok;
	const char *what;
	int rc;

	if (size < 1)
		return 0;
	port0_ok = data[0] & P_PORT0;
	dflt = (data[0] & P_DEFAULT) ? RS_DEFAULT_PORT : 0;
	what = (data[0] & P_NAMED) ? "node" : NULL;
	hostlen = 1 + 4 * (size_t)(data[0] >> P_LEN_SHIFT);
	s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	memset(host, FILL, sizeof(host));
	rc = rs_addr_parse(what, s, dflt, port0_ok, host, hostlen, &port);
	if (rc) {
		if (rc != RS_E_INVAL || !rs_errormsg()[0] ||
		    (what && strncmp(rs_errormsg(), "node: ", 6)) ||
		    port != 1234 || !untouched(host, sizeof(host)))
			__builtin_trap();
	} else {
		if (!memchr(host, '\0', hostlen) || !host[0] ||
		    !untouched(host + hostlen, GUARD) || !strstr(s, host) ||
		    (port == 0 && !port0_ok))
			__builtin_trap();
		round_trip(host, hostlen, port, port0_ok);
	}
	free(s);
	return 0;
}
