/*
 * coord_files.c - the etcd security settings a configuration names
 * (struct coord_etcd_files, coord.h): copy and free. Apart from
 * coord_etcd.c so that the config parser links without libcurl.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "coord/coord.h"

int coord_etcd_files_copy(struct coord_etcd_files *dst,
			  const struct coord_etcd_files *src)
{
	char **d[] = { &dst->ca_file, &dst->cert_file, &dst->key_file,
		       &dst->user, &dst->password_file };
	char *const *sv[] = { &src->ca_file, &src->cert_file, &src->key_file,
			      &src->user, &src->password_file };

	memset(dst, 0, sizeof(*dst));
	for (size_t i = 0; i < RS_ARRAY_SIZE(d); i++)
		if (*sv[i] && !(*d[i] = strdup(*sv[i]))) {
			coord_etcd_files_free(dst);
			return -ENOMEM;
		}
	return 0;
}

void coord_etcd_files_free(struct coord_etcd_files *f)
{
	free(f->ca_file);
	free(f->cert_file);
	free(f->key_file);
	free(f->user);
	free(f->password_file);
	memset(f, 0, sizeof(*f));
}
