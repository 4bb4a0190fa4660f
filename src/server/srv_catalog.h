/*
 * srv_catalog.h - table specs of a file-backed node, kept in a JSON file
 * next to the pool (see srv_catalog.c for the format and crash order).
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
/* 0 (a missing file is an empty catalog), RS_E_CORRUPT, -errno. */
int srv_catalog_load(struct srv_catalog *c);
/* Replace the file atomically. 0 or -errno. */
int srv_catalog_save(const struct srv_catalog *c);
/* Index of the entry for name, or -1. */
int srv_catalog_find(const struct srv_catalog *c, const char *name);
int srv_catalog_set(struct srv_catalog *c, const struct proto_table_spec *s,
		    uint64_t uid);
void srv_catalog_remove(struct srv_catalog *c, const char *name);

/* A spec as JSON (new reference) and back (0 or -1). Also used by
 * recstore-ctl-style tooling and the tests. */
json_t *srv_spec_to_json(const struct proto_table_spec *s);
int srv_spec_from_json(json_t *j, struct proto_table_spec *s);

#endif
