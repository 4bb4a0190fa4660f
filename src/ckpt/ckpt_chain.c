/*
 * ckpt_chain.c - a checkpoint and the bases it stands on
 * (docs/checkpoint-format.md, "Increments").
 *
 * An incremental checkpoint names its base by id and by directory, a
 * sibling of its own (the nodes write every checkpoint under their
 * checkpoint_dir, so a base is always next to its increments). Restoring
 * or verifying an increment walks back to the full checkpoint, checking
 * every link, and applies the chain from the full checkpoint on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "common/rs_internal.h"

int ckpt_base_path(const char *dir, const struct ckpt_manifest *m, char *out,
		   size_t cap)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')	/* "a/b/" is "a/b" */
		n--;
	while (n && dir[n - 1] != '/')		/* the parent, with its '/' */
		n--;
	if ((size_t)snprintf(out, cap, "%.*s%s", (int)n, dir, m->base_dir) >=
	    cap)
		return rs_seterr(RS_E_INVAL, "checkpoint: path too long");
	return 0;
}

void ckpt_chain_free(struct ckpt_chain *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; c->m && i < c->n; i++)
		ckpt_manifest_free(c->m[i]);
	free(c->m);
	free(c->dir);
	free(c);
}

/* the link before c->m[0] (read into index 0 after shifting the rest) */
static int load_base(struct ckpt_chain *c)
{
	const struct ckpt_manifest *inc = c->m[0];
	char path[PATH_MAX], hi[2 * CKPT_ID_BYTES + 1], hb[2 * CKPT_ID_BYTES + 1];
	struct ckpt_manifest *b;
	struct stat st;
	int rc;

	if (c->n == CKPT_CHAIN_MAX)
		return rs_seterr(RS_E_CORRUPT, "%s: more than %u checkpoints "
				 "in its chain of bases (a loop?)",
				 c->dir[c->n - 1], CKPT_CHAIN_MAX);
	if ((rc = ckpt_base_path(c->dir[0], inc, path, sizeof(path))))
		return rc;
	if (stat(path, &st) || !S_ISDIR(st.st_mode))
		return rs_seterr(-ENOENT, "%s: its base %s is missing "
				 "(an increment restores only on its base)",
				 c->dir[0], path);
	if ((rc = ckpt_manifest_load(path, &b)))
		return rc;
	ckpt_id_hex(inc->base, hi);
	ckpt_id_hex(b->id, hb);
	if (memcmp(b->id, inc->base, CKPT_ID_BYTES) || b->kind == CKPT_EXPORT) {
		rc = rs_seterr(RS_E_CORRUPT, "%s: its base is checkpoint %s, "
			       "but %s holds %s %s", c->dir[0], hi, path,
			       b->kind == CKPT_EXPORT ? "the export" :
			       "checkpoint", hb);
		ckpt_manifest_free(b);
		return rc;
	}
	memmove(c->m + 1, c->m, c->n * sizeof(*c->m));
	memmove(c->dir + 1, c->dir, c->n * sizeof(*c->dir));
	c->m[0] = b;
	snprintf(c->dir[0], sizeof(c->dir[0]), "%s", path);
	c->n++;
	return 0;
}

int ckpt_chain_load(const char *dir, struct ckpt_chain **out)
{
	struct ckpt_chain *c = rs_calloc(1, sizeof(*c));
	int rc;

	*out = NULL;
	if (c) {
		c->m = rs_calloc(CKPT_CHAIN_MAX, sizeof(*c->m));
		c->dir = rs_calloc(CKPT_CHAIN_MAX, sizeof(*c->dir));
	}
	if (!c || !c->m || !c->dir) {
		ckpt_chain_free(c);
		return rs_seterr(-ENOMEM, "checkpoint: out of memory");
	}
	if ((size_t)snprintf(c->dir[0], sizeof(c->dir[0]), "%s", dir) >=
	    sizeof(c->dir[0]))
		rc = rs_seterr(RS_E_INVAL, "checkpoint: path too long");
	else
		rc = ckpt_manifest_load(dir, &c->m[0]);
	if (!rc)
		c->n = 1;
	while (!rc && c->m[0]->kind == CKPT_INCREMENTAL)
		rc = load_base(c);
	if (rc) {
		ckpt_chain_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int ckpt_chain_verify(const char *dir, struct ckpt_verify_stats *st)
{
	struct ckpt_verify_stats one, sum = { 0 };
	struct ckpt_chain *c;
	int rc = ckpt_chain_load(dir, &c);

	for (uint32_t i = 0; !rc && i < c->n; i++) {
		rc = ckpt_verify(c->dir[i], &one);
		sum.parts += one.parts;
		sum.rows += one.rows;
		sum.deleted += one.deleted;
		sum.bytes += one.bytes;
		sum.raw_bytes += one.raw_bytes;
	}
	if (st)
		*st = sum;
	ckpt_chain_free(c);
	return rc;
}
