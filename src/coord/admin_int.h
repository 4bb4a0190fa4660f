/*
 * admin_int.h - what the tests need of the admin calls beyond
 * include/recstore/admin.h: a handle on any coordination store (the
 * in-memory one of coord_mem.c), so that every call runs without etcd.
 */
#ifndef RS_COORD_ADMIN_INT_H
#define RS_COORD_ADMIN_INT_H

#include "coord/coord.h"
#include "recstore/admin.h"

/* A handle on c: rs_admin_close closes c; on failure c stays the
 * caller's. */
int rs_admin_open_coord(struct rs_admin **out, struct coord *c,
			const char *cluster);

#endif
