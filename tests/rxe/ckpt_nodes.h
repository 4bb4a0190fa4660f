/*
 * ckpt_nodes.h - what the checkpoint tests over rxe share: nodes started
 * in the test's process with a checkpoint_dir, a client of a node list,
 * and a byte of a file flipped.
 */
#ifndef RS_TESTS_CKPT_NODES_H
#define RS_TESTS_CKPT_NODES_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "client_harness.h"

struct ckpt_node {
	struct rs_server *s;
	pthread_t th;
	char addr[256];
};

/* The start of a test: false (skip: exit 77) without an RDMA device;
 * else line-buffered stdout, unlimited locked memory, and root (cap
 * bytes) a new directory /tmp/<prefix>-XXXXXX for the checkpoints. */
static inline bool ckpt_test_begin(char *root, size_t cap, const char *prefix)
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

/* A node on ip whose checkpoint_dir is root. */
static inline void ckpt_node_start(struct ckpt_node *n, const char *ip,
				   const char *root)
{
	char path[] = "/tmp/rs-ckpt-cfg-XXXXXX";
	struct rs_server_config *cfg;
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	H_CHECK(f, "mkstemp");
	fprintf(f, "{ \"listen\": { \"addr\": \"%s\", \"port\": 0 }, "
		"\"workers\": 2, \"checkpoint_dir\": \"%s\" }\n", ip, root);
	fclose(f);
	H_OK(rs_server_config_load(&cfg, path));
	unlink(path);
	H_OK(rs_server_open(&n->s, cfg));
	rs_server_config_delete(&cfg);
	snprintf(n->addr, sizeof(n->addr), "%s", rs_server_listen_addr(n->s));
	H_CHECK(!pthread_create(&n->th, NULL, h_run, n->s), "thread");
}

static inline void ckpt_node_stop(struct ckpt_node *n)
{
	rs_server_stop(n->s);
	pthread_join(n->th, NULL);
	rs_server_close(&n->s);
}

/* A client of the comma-separated nodes, with a 60 s timeout. */
static inline struct rs_client *ckpt_client(const char *nodes)
{
	struct rs_client_config *cfg;
	struct rs_client *c;

	H_OK(rs_client_config_new(&cfg));
	H_OK(rs_client_config_set_nodes(cfg, nodes));
	H_OK(rs_client_config_set_timeout_ms(cfg, 60000));
	H_OK(rs_client_open(&c, cfg));
	rs_client_config_delete(&cfg);
	return c;
}

/* Flip a bit of the byte in the middle of file. Read the byte, then seek
 * back before writing it flipped: without the seek the write goes to the
 * next byte (C requires a positioning call between a read and a write),
 * and leaves the file as it was when that byte equals the flipped one. */
static inline void ckpt_flip_byte(const char *file)
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
static inline void ckpt_test_end(struct ckpt_node *const *nodes, size_t n,
				 const char *root)
{
	char cmd[128];

	for (size_t i = 0; i < n; i++)
		ckpt_node_stop(nodes[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	H_CHECK(!system(cmd), "rm");
	printf("ok\n");
}

/* fn(arg, desc, record) for every record of the parts of table (NULL:
 * every table) of the checkpoint in dir (one link). */
static inline void ckpt_each_record(const char *dir, const char *table,
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

#endif
