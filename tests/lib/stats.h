/*
 * stats.h - reading a node's STATS counters through the public client
 * (rs_node_stats_foreach), for every test and driver that asserts on them.
 *
 * A caller names the counters it wants in an array of struct tl_stat,
 * ended by an entry whose key is NULL; each read adds every matching
 * entry's value to v and counts it in seen. One node lists a (table, key)
 * once, so after a read of one node v is that counter's value; a read of
 * every node (tl_stats_sum) gives the sum over the nodes.
 */
#ifndef RS_TESTS_STATS_H
#define RS_TESTS_STATS_H

#include <stdint.h>

#include "recstore/client.h"

struct tl_stat {
	const char *table;	/* NULL: a node-wide counter */
	const char *key;	/* NULL ends the array */
	uint64_t v;		/* summed over the matches */
	unsigned seen;		/* how many entries matched */
};

/* The rs_node_stats_foreach callback: arg is the struct tl_stat array. */
int tl_stat_fn(void *arg, const char *table, const char *key, uint64_t v);

/* Add node `node`'s counters to w (v and seen are not reset);
 * rs_node_stats_foreach's result. */
int tl_stats_read(struct rs_client *c, unsigned node, struct tl_stat *w);

/* tl_stats_read of every node of c; the first failure's result (the
 * index of that node into *failed when failed is not NULL), else 0. */
int tl_stats_sum(struct rs_client *c, struct tl_stat *w, unsigned *failed);

#endif
