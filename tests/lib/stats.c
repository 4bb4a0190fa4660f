/*
 * stats.c - the STATS readers declared in stats.h, which says what they
 * are for.
 */
#include "stats.h"

#include <string.h>

static int tl_stat_match(const struct tl_stat *w, const char *table,
			 const char *key)
{
	if (!w->table != !table)
		return 0;
	return (!table || !strcmp(table, w->table)) && !strcmp(key, w->key);
}

int tl_stat_fn(void *arg, const char *table, const char *key, uint64_t v)
{
	for (struct tl_stat *w = arg; w->key; w++)
		if (tl_stat_match(w, table, key)) {
			w->v += v;
			w->seen++;
		}
	return 0;
}

int tl_stats_read(struct rs_client *c, unsigned node, struct tl_stat *w)
{
	return rs_node_stats_foreach(c, node, tl_stat_fn, w);
}

int tl_stats_sum(struct rs_client *c, struct tl_stat *w, unsigned *failed)
{
	for (unsigned n = 0; n < rs_client_node_count(c); n++) {
		int ret = tl_stats_read(c, n, w);

		if (ret) {
			if (failed)
				*failed = n;
			return ret;
		}
	}
	return 0;
}
