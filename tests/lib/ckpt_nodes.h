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

/* The start of a test: false (skip: exit 77) without an RDMA device;
 * else line-buffered stdout, unlimited locked memory, and root (cap
 * bytes) a new directory /tmp/<prefix>-XXXXXX for the checkpoints. */
bool ckpt_test_begin(char *root, size_t cap, const char *prefix);

/* A node on ip whose checkpoint_dir is root. */
void ckpt_node_start(struct sv_node *n, const char *ip, const char *root);

/* Flip a bit of the byte in the middle of file. Read the byte, then seek
 * back before writing it flipped: without the seek the write goes to the
 * next byte (C requires a positioning call between a read and a write),
 * and leaves the file as it was when that byte equals the flipped one. */
void ckpt_flip_byte(const char *file);

/* The end of a test: the nodes stopped (sv_node_close), root removed,
 * "ok". */
void ckpt_test_end(struct sv_node *const *nodes, size_t n, const char *root);

/* fn(arg, desc, record) for every record of the parts of table (NULL:
 * every table) of the checkpoint in dir (one link). */
void ckpt_each_record(const char *dir, const char *table,
		      void (*fn)(void *arg, const struct ckpt_part_desc *d,
				 const struct ckpt_record *rec),
		      void *arg);

#endif
