/*
 * recstore/version.h - the version of the headers a program is built with,
 * and the check of the library it runs with.
 *
 * Versions are MAJOR.MINOR.PATCH. Within one MAJOR, a library of a higher
 * MINOR runs every program built against a lower one: it only adds
 * functions (in a new symbol version node, src/librecstore.map) and
 * fields at the end of the public structs (every caller-allocated struct
 * starts with uint32_t struct_size; docs/client.md, "ABI rules"). 0.2 is
 * the first such release: a program built against 0.1 headers must be
 * rebuilt (its structs carry no size; the loader refuses it, because the
 * functions taking those structs exist only at RECSTORE_0.2).
 *
 * A program checks at start-up that the library it was loaded with is at
 * least as new as its headers:
 *	if (RS_CHECK_VERSION())
 *		fprintf(stderr, "%s\n", rs_errormsg());
 */
#ifndef RECSTORE_VERSION_H
#define RECSTORE_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/* CMakeLists.txt reads the project version from these three lines. */
#define RS_VERSION_MAJOR 0
#define RS_VERSION_MINOR 6
#define RS_VERSION_PATCH 0

#define RS_VERSION_ENCODE(major, minor, patch) \
	((major) * 1000000 + (minor) * 1000 + (patch))
#define RS_VERSION_NUMBER \
	RS_VERSION_ENCODE(RS_VERSION_MAJOR, RS_VERSION_MINOR, RS_VERSION_PATCH)

/* The running library's version string, e.g. "0.2.0". */
const char *rs_version(void);

/*
 * 0 if the running library serves a program built against headers of
 * version major.minor: same major, library minor >= minor (and, in major
 * 0, minor >= 2, the first release with growable structs). Otherwise
 * RS_E_UNSUPPORTED with a message naming both versions.
 */
int rs_check_version(unsigned major, unsigned minor);
#define RS_CHECK_VERSION() rs_check_version(RS_VERSION_MAJOR, RS_VERSION_MINOR)

#ifdef __cplusplus
}
#endif
#endif
