/*
 * srv_catalog.h - table specs of a file-backed node: the pool's catalog
 * records, and the JSON catalog file of layout-2 pools (read only, to
 * migrate it into the pool); see srv_catalog.c.
 */
#ifndef RS_SERVER_SRV_CATALOG_H
#define RS_SERVER_SRV_CATALOG_H

#include <stdint.h>

#include <jansson.h>

#include "common/proto.h"
#include "common/rs_internal.h"
#include "value/slab.h"

#define SRV_CATALOG_MAX SLAB_MAX_TABLES

struct srv_catalog {
	char path[4096];	/* "" : no catalog (DRAM pool) */
	unsigned n;
	struct {
		struct proto_table_spec spec;
		uint64_t uid;	/* 0: the table was not created yet */
	} ent[SRV_CATALOG_MAX];
};

/* pool_path NULL: a DRAM node (load/save do nothing). */
void srv_catalog_init(struct srv_catalog *c, const char *pool_path);
/* 0 (a missing file is an empty catalog), RS_E_CORRUPT, -errno (-ENOMEM
 * when out of memory, not RS_E_CORRUPT). */
int srv_catalog_load(struct srv_catalog *c);
/* The same from the file's text in memory (len bytes, no NUL needed;
 * c->path, if set, names it in messages): 0, RS_E_CORRUPT or -ENOMEM. */
int srv_catalog_parse(struct srv_catalog *c, const char *text, size_t len);
/* Index of the entry for name, or -1. */
int srv_catalog_find(const struct srv_catalog *c, const char *name);
int srv_catalog_set(struct srv_catalog *c, const struct proto_table_spec *s,
		    uint64_t uid);

/* A spec as JSON (new reference) and back: 0, or -1 if j is not a spec
 * or one that proto_table_spec_validate() refuses (dims up to
 * PROTO_MAX_DIM). Also used by recstore-ctl-style tooling and the tests. */
json_t *srv_spec_to_json(const struct proto_table_spec *s);
int srv_spec_from_json(json_t *j, struct proto_table_spec *s);

/* A spec as a pool catalog record (compact JSON) in buf: its length,
 * RS_E_INVAL if it needs more than cap bytes, or -ENOMEM. */
int srv_spec_encode(const struct proto_table_spec *s, char *buf, size_t cap);
/* A catalog record back to a spec: 0, -1 if it is not one, or -ENOMEM
 * (with the error set) when out of memory. */
int srv_spec_decode(const void *buf, size_t len, struct proto_table_spec *s);

#endif
