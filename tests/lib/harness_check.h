/*
 * harness_check.h - the abort-on-error checks shared by the rxe test
 * harnesses (client_harness.h, server_harness.h): a failed call or check
 * prints where, what, and rs_errormsg(), then exits 1, so test bodies stay
 * about what they check.
 */
#ifndef HARNESS_CHECK_H
#define HARNESS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "recstore/error.h"

/* Print the message, then rs_errormsg(), to stderr and exit 1. */
void hc_die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						 noreturn));

#define HC_OK(expr)                                                       \
	do {                                                              \
		int hc_ret_ = (expr);                                     \
		if (hc_ret_ < 0)                                          \
			hc_die("%s:%d: %s = %d (%s)", __FILE__, __LINE__, \
			       #expr, hc_ret_, rs_strerror(hc_ret_));     \
	} while (0)

#define HC_CHECK(cond, ...)                                               \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "%s:%d: check failed: %s: ",      \
				__FILE__, __LINE__, #cond);               \
			hc_die(__VA_ARGS__);                              \
		}                                                         \
	} while (0)

#endif
