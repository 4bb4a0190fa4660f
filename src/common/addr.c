/*
 * addr.c - "ADDR:PORT" parsing and formatting (addr.h).
 *
 * The input is read once from the left: an optional bracketed IPv6 host,
 * else a plain host up to the first ':'; then either the end (a bare host:
 * the caller's default port) or ':' and the port. Nothing is written to
 * the caller's buffers until the whole input is accepted.
 */
#include <stdio.h>
#include <string.h>

#include "common/addr.h"
#include "common/rs_internal.h"

#define ADDR_SHOW 64	/* characters of a refused input quoted back */

static bool plain_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

static bool v6_char(char c)
{
	return plain_char(c) || c == ':' || c == '%';
}

/* the message's prefix: "what: ", or nothing */
#define WHAT_FMT "%s%s"
#define WHAT_ARGS(what) (what) ? (what) : "", (what) ? ": " : ""

static int refuse(const char *what, const char *s, const char *why)
{
	return rs_seterr(RS_E_INVAL, WHAT_FMT "address '%.*s%s': %s",
			 WHAT_ARGS(what), ADDR_SHOW, s,
			 strlen(s) > ADDR_SHOW ? "..." : "", why);
}

/* digits of p (up to its end) as a port into *port */
static int parse_port(const char *what, const char *s, const char *p,
		      bool port0_ok, uint16_t *port)
{
	unsigned long v = 0;
	size_t n = 0;

	if (!*p)
		return refuse(what, s, "no port after ':'");
	for (; p[n]; n++) {
		if (p[n] < '0' || p[n] > '9')
			return refuse(what, s,
				      "the port is not a decimal number");
		if (n >= 5)
			return refuse(what, s, "the port is above 65535");
		v = v * 10 + (unsigned long)(p[n] - '0');
	}
	if (v > 65535)
		return refuse(what, s, "the port is above 65535");
	if (v == 0 && !port0_ok)
		return refuse(what, s,
			      "port 0 is not allowed here (1..65535)");
	*port = (uint16_t)v;
	return 0;
}

int rs_addr_parse(const char *what, const char *s, uint16_t default_port,
		  bool port0_ok, char *host, size_t hostlen, uint16_t *port)
{
	const char *h, *rest;
	uint16_t p = default_port;
	size_t hl;
	int ret;

	if (!s || !*s)
		return rs_seterr(RS_E_INVAL, WHAT_FMT "address: empty",
				 WHAT_ARGS(what));
	if (!host || !port || !hostlen)
		return rs_seterr(RS_E_INVAL, WHAT_FMT "address: no output "
				 "buffer", WHAT_ARGS(what));
	if (s[0] == '[') {
		h = s + 1;
		for (hl = 0; h[hl] && h[hl] != ']'; hl++)
			if (!v6_char(h[hl]))
				return refuse(what, s, "a character that is "
					      "not part of an IPv6 "
					      "address");
		if (!h[hl])
			return refuse(what, s, "no ']' after '['");
		if (!hl)
			return refuse(what, s, "empty host");
		if (!memchr(h, ':', hl))
			return refuse(what, s, "brackets hold an IPv6 address");
		rest = h + hl + 1;
	} else {
		h = s;
		for (hl = 0; h[hl] && h[hl] != ':'; hl++)
			if (!plain_char(h[hl]))
				return refuse(what, s, "a character that is "
					      "not part of a host "
					      "(white space?)");
		if (!hl)
			return refuse(what, s, "empty host");
		rest = h + hl;
		if (*rest && strchr(rest + 1, ':'))
			return refuse(what, s, "an IPv6 address needs "
				      "brackets: [ADDR]:PORT");
	}
	if (*rest == ':') {
		ret = parse_port(what, s, rest + 1, port0_ok, &p);
		if (ret)
			return ret;
	} else if (*rest) {
		return refuse(what, s, "expected ':' after ']'");
	} else if (!default_port) {
		return refuse(what, s, "expected ADDR:PORT");
	}
	if (hl >= hostlen)
		return refuse(what, s, "the host is too long");
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = p;
	return 0;
}

int rs_addr_format(const char *host, uint16_t port, char *buf, size_t len)
{
	bool v6 = host && strchr(host, ':');
	int n;

	if (!host || !buf)
		return rs_seterr(RS_E_INVAL, "address: NULL host or buffer");
	n = snprintf(buf, len, v6 ? "[%s]:%u" : "%s:%u", host,
		     (unsigned)port);
	if (n < 0 || (size_t)n >= len)
		return rs_seterr(RS_E_INVAL, "address '%s' port %u: longer "
				 "than %zu bytes", host, (unsigned)port,
				 len ? len - 1 : 0);
	return n;
}
