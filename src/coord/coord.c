/*
 * coord.c - what every coordination backend shares (coord.h): argument
 * checks, freeing a range result, the end key of a prefix.
 */
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "coord/coord.h"

void coord_close(struct coord **c)
{
	if (!c || !*c)
		return;
	(*c)->ops->destroy(*c);
	*c = NULL;
}

void coord_kvs_free(struct coord_kvs *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++) {
		free(k->kv[i].key);
		free(k->kv[i].value);
	}
	free(k->kv);
	k->kv = NULL;
	k->n = 0;
}

void coord_prefix_end(const char *prefix, char *out)
{
	size_t n = strnlen(prefix, COORD_KEY_MAX);

	memcpy(out, prefix, n);
	while (n > 0 && (unsigned char)out[n - 1] == 0xff)
		n--;
	if (n > 0)
		out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
	out[n] = '\0';
}

int coord_check_key(const char *key)
{
	size_t n;

	if (!key || !key[0])
		return rs_seterr(RS_E_INVAL, "coord: empty key");
	n = strnlen(key, COORD_KEY_MAX + 1);
	if (n > COORD_KEY_MAX)
		return rs_seterr(RS_E_TOOBIG, "coord: key longer than %d bytes",
				 COORD_KEY_MAX);
	return 0;
}

int coord_check_value(const void *val, size_t len)
{
	if (!val && len)
		return rs_seterr(RS_E_INVAL, "coord: NULL value of %zu bytes",
				 len);
	if (len > COORD_VALUE_MAX)
		return rs_seterr(RS_E_TOOBIG, "coord: value of %zu bytes "
				 "(max %u)", len, COORD_VALUE_MAX);
	return 0;
}

int coord_check_ttl(int64_t ttl_s)
{
	if (ttl_s < 1 || ttl_s > COORD_MAX_TTL_S)
		return rs_seterr(RS_E_INVAL, "coord: lease TTL %lld s "
				 "(1..%d)", (long long)ttl_s, COORD_MAX_TTL_S);
	return 0;
}
