/*
 * ckpt_nodes.c - the bodies of the helpers declared in ckpt_nodes.h, which
 * says what they are for.
 */
#include "ckpt_nodes.h"

bool ckpt_test_begin(char *root, size_t cap, const char *prefix)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

	if (!getenv("RS_RDMA_DEV") || !getenv("RS_RDMA_IP")) {
		fprintf(stderr, "skip: no RDMA device\n");
		return false;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	setrlimit(RLIMIT_MEMLOCK, &rl);
	snprintf(root, cap, "/tmp/%s-XXXXXX", prefix);
	H_CHECK(mkdtemp(root), "mkdtemp");
	return true;
}

void ckpt_node_start(struct sv_node *n, const char *ip, const char *root)
{
	struct rs_server_config *cfg =
		sv_config("{ \"listen\": { \"addr\": \"%s\", \"port\": 0 }, "
			  "\"workers\": 2, \"checkpoint_dir\": \"%s\" }\n",
			  ip, root);

	sv_node_open(n, cfg);
	rs_server_config_delete(&cfg);
}

void ckpt_flip_byte(const char *file)
{
	struct stat sb;
	FILE *f;
	int ch;

	H_CHECK(!stat(file, &sb), "%s", file);
	f = fopen(file, "r+b");
	H_CHECK(f && !fseek(f, sb.st_size / 2, SEEK_SET), "open");
	ch = fgetc(f);
	H_CHECK(ch != EOF && !fseek(f, sb.st_size / 2, SEEK_SET), "seek");
	H_CHECK(fputc(ch ^ 0x40, f) != EOF && !fclose(f), "write");
}

/* The end of a test: the nodes stopped, root removed, "ok". */
void ckpt_test_end(struct sv_node *const *nodes, size_t n, const char *root)
{
	char cmd[128];

	for (size_t i = 0; i < n; i++)
		sv_node_close(nodes[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	H_CHECK(!system(cmd), "rm");
	printf("ok\n");
}

void ckpt_each_record(const char *dir, const char *table,
		      void (*fn)(void *arg,
		      const struct ckpt_part_desc *d,
		      const struct ckpt_record *rec),
		      void *arg)
{
	struct ckpt_manifest *m;

	H_OK(ckpt_manifest_load(dir, &m));
	for (uint32_t t = 0; t < m->ntables; t++) {
		if (table && strcmp(m->tables[t].spec.name, table))
			continue;
		for (uint32_t p = 0; p < m->tables[t].nparts; p++) {
			struct ckpt_part_desc d;
			struct ckpt_reader *r;
			struct ckpt_record rec;
			char path[PATH_MAX];
			int rc;

			snprintf(path, sizeof(path), "%s/%s", dir,
				 m->tables[t].parts[p].file);
			ckpt_part_desc_for(m, t, p, &d);
			H_OK(ckpt_part_open(&r, path, &d));
			while ((rc = ckpt_part_next(r, &rec)) == 1)
				fn(arg, &d, &rec);
			H_OK(rc);
			ckpt_part_close(r);
		}
	}
	ckpt_manifest_free(m);
}
