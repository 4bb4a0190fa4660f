/*
 * rs_json.h - jansson, used safely when memory runs out.
 *
 * Two gaps of jansson (2.14) that a failure walk (tests/unit/
 * test_alloc_walk.c) found:
 *  - json_dumps() ignores the failure of writing an object's key into its
 *    buffer and goes on, so an allocation that fails there gives a text
 *    with a key cut short and no error (akheron/jansson issue 655, pull
 *    request 649, open): a MANIFEST written so would carry a valid
 *    checksum over a body nobody can parse. rs_json_dumps() writes through
 *    a callback whose buffer remembers its first failure.
 *  - its parser is not safe when memory runs out either: the lexer
 *    ignores a failure to save a character (lex_save, akheron/jansson
 *    issue 362, pull requests 735 and 747), so a parse can succeed with a
 *    character missing from a string (a part file's or a table's name),
 *    and a failed parse mostly does not say it was memory: the error is
 *    "invalid syntax" near the token it was reading, or empty at line -1.
 *    rs_json_loadb() and rs_json_load_file() parse every input twice: two
 *    results that differ (json_equal) mean an allocation failed in one of
 *    them, and *oom is set. A failure is compared with the second one:
 *    bad input fails the same way again (jansson is deterministic), a
 *    failed allocation rarely does; when the second parse succeeds it is
 *    read once more to be checked. Two runs hit at the same step still
 *    read as bad input: the check narrows the gap, it cannot close it.
 *    The texts parsed this way are small and read rarely (a node's
 *    config, a pool's catalog records, a checkpoint's MANIFEST).
 */
#ifndef RS_COMMON_RS_JSON_H
#define RS_COMMON_RS_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* j as text (json_dump_callback flags), NUL-terminated, for free(); NULL
 * (errno ENOMEM) when out of memory or j cannot be encoded. */
char *rs_json_dumps(const json_t *j, size_t flags);

/* json_loadb / json_load_file, parsed twice (above): the value, or NULL
 * with *e and *oom (true: out of memory, not bad input). */
json_t *rs_json_loadb(const char *buf, size_t len, size_t flags,
		      json_error_t *e, bool *oom);
json_t *rs_json_load_file(const char *path, size_t flags, json_error_t *e,
			  bool *oom);

#endif
