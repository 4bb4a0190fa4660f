/*
 * client_harness.h - shared set-up of the client rxe tests: memory nodes
 * run IN-PROCESS (include/recstore/server.h), one per address: RS_RDMA_IP
 * and, for tests that want several nodes, the addresses in RS_RDMA_IPS
 * (all on the one rxe device; rxe loops the traffic back). Each node
 * listens on port 0 (a free port) and runs rs_server_run() in a thread.
 *
 * A test calls h_start(&h, want_nodes): it exits 77 (skip) when there is
 * no RDMA device (RS_RDMA_DEV unset) or fewer addresses than wanted.
 * Helpers abort the test (exit 1) with a message on any unexpected error,
 * so the test bodies stay about what they check.
 */
#ifndef CLIENT_HARNESS_H
#define CLIENT_HARNESS_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "recstore/client.h"
#include "recstore/server.h"
#include "server_harness.h"

#define H_MAX_NODES 5

struct harness {
	unsigned n;
	struct sv_node node[H_MAX_NODES];
	char list[H_MAX_NODES * 260];
};

#define h_die hc_die
#define H_OK HC_OK
#define H_CHECK HC_CHECK

/* Rows with known contents: element e of key's row in generation gen
 * (multiples of 1/16 below 256: exact in fp16 and bf16 too). */
float h_val(uint64_t key, unsigned e, unsigned gen);
/* rows[n * dim] of keys[n] in generation gen */
void h_fill(float *rows, const uint64_t *keys, size_t n, unsigned dim,
	    unsigned gen);
/* Every key FOUND with its generation-gen row, or the test fails. */
void h_expect_rows(const float *rows, const int *st, const uint64_t *keys,
		   size_t n, unsigned dim, unsigned gen, const char *what);
/* The client's counters now. */
struct rs_client_stats h_stats(struct rs_client *c);

/* Start `want` nodes (exit 77 if the environment cannot give them). */
void h_start(struct harness *h, unsigned want);

/* Stop and close the nodes (what their runs returned is not checked). */
void h_stop(struct harness *h);

/* A client of the harness' nodes (or of one node, node >= 0). */
struct rs_client *h_client_conns(struct harness *h, int node,
				 size_t cache, unsigned async,
				 unsigned conns);

struct rs_client *h_client_opts(struct harness *h, int node,
				size_t cache, unsigned async);

struct rs_client *h_client(struct harness *h);

/* Create (or re-create) a table with an optimizer and open it. */
struct rs_table *h_table(struct rs_client *c, const char *name,
			 uint32_t dim, const char *optim,
			 uint32_t dtype, uint64_t cap);

#endif
