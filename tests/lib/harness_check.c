/*
 * harness_check.c - the bodies of the helpers declared in
 * harness_check.h, which says what they are for.
 */
#include "harness_check.h"

void hc_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " [%s]\n", rs_errormsg());
	exit(1);
}
