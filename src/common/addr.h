/*
 * addr.h - the one parser of "ADDR:PORT" strings (a node's listen
 * address, a client's node list, the member addresses of a cluster
 * configuration) and its inverse.
 *
 * Accepted forms:
 *	HOST:PORT	HOST an IPv4 address or a name: letters, digits, '.',
 *			'-', '_'
 *	[IPV6]:PORT	the brackets are not part of the returned host; inside
 *			them letters, digits, ':', '.', '%' (a zone)
 *	HOST, [IPV6]	only when the caller has a default port (not 0)
 * PORT is 1 to 5 decimal digits, at most 65535; 0 only where the caller
 * allows it (a listener: any free port). Refused, with RS_E_INVAL and a
 * message naming the input: NULL or empty input, white space anywhere, an
 * empty host (":7471", "[]:1"), an empty port ("host:"), a port with a
 * sign or other characters ("host:12ab", "host:+1"), out of range, an
 * IPv6 address without brackets ("fe80::1:7471" is ambiguous), and a host
 * that does not fit hostlen (with its terminating NUL).
 */
#ifndef RS_COMMON_ADDR_H
#define RS_COMMON_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parse s into host (NUL-terminated, without brackets) and *port.
 * what: what the caller parses ("listen", "node"), the message's prefix
 * ("listen: address '...': ..."); NULL: none. default_port: the port of
 * a bare host; 0: a port is required. port0_ok: ":0" is accepted. On
 * failure host and *port are unchanged. Returns 0 or RS_E_INVAL (message
 * via rs_seterr). */
int rs_addr_parse(const char *what, const char *s, uint16_t default_port,
		  bool port0_ok, char *host, size_t hostlen, uint16_t *port);

/* "host:port", or "[host]:port" when host holds a ':' (IPv6), into buf;
 * the form rs_addr_parse() reads back. Returns the length written, or
 * RS_E_INVAL (message set) when it does not fit. */
int rs_addr_format(const char *host, uint16_t port, char *buf, size_t len);

#endif
