/*
 * recstore/server.h - the RecStore memory node, embeddable in a process.
 *
 * A memory node holds embedding tables in memory registered for one-sided
 * REMOTE_READ (DRAM, or a PMEM/DAX file through libpmem), accepts rdma_cm
 * connections from clients and answers their RPCs (table create/drop and
 * directory, get, get-or-init, put, update, delete, stats). Design notes:
 * docs/server.md; the config file format: docs/config.md.
 *
 * Life cycle
 *	struct rs_server_config *cfg;
 *	struct rs_server *s;
 *	rs_server_config_load(&cfg, "node.json");	(or rs_server_config_new)
 *	rs_server_config_set_listen(cfg, "10.0.0.1:7471");	(optional)
 *	rs_server_open(&s, cfg);	(cfg may be deleted now)
 *	rs_server_run(s);		(blocks; another thread or a signal
 *					 handler calls rs_server_stop(s))
 *	rs_server_close(&s);
 *
 * rs_server_open() does everything that can fail for reasons of the
 * environment (device, memory registration, PMEM files, the listening
 * endpoint, the tables of the config, the metrics port): once it returns 0
 * the node accepts connections (the rdma_cm endpoint listens; requests are
 * served once rs_server_run() runs). rs_server_run() starts the worker
 * threads, serves until rs_server_stop(), then disconnects every client and
 * joins the workers; it returns 0 after a stop, or a negative code if the
 * node failed (e.g. the device went away).
 *
 * Threads. rs_server_stop() may be called from any thread and from a signal
 * handler (it only writes to an eventfd). The other functions are for one
 * thread at a time: open, run, close in that order.
 *
 * Errors follow recstore/error.h; config errors are RS_E_INVAL with a
 * message naming the field ("tables[1].dim: must be 1..65536").
 */
#ifndef RECSTORE_SERVER_H
#define RECSTORE_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "recstore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rs_server;
struct rs_server_config;

/* Default port of a memory node. */
#define RS_SERVER_DEFAULT_PORT 7471

/* ---- configuration ---- */

/* A config with every default (listen on the first RDMA device's first
 * IPv4 address, port RS_SERVER_DEFAULT_PORT, DRAM storage, no tables). */
int rs_server_config_new(struct rs_server_config **out);
/* Parse a JSON config file (docs/config.md). RS_E_INVAL names the first bad
 * field; -errno when the file cannot be read. */
int rs_server_config_load(struct rs_server_config **out, const char *path);
/* Accepts NULL and *cfg == NULL; sets *cfg to NULL. */
void rs_server_config_delete(struct rs_server_config **cfg);

/*
 * Any setting of the config file that holds one value, by its path in the
 * file ("workers", "storage.size", "coord.lease_ms"; docs/config.md), from
 * the text the file would hold: "4", "2GiB", "true", "pmem", "0.25", a
 * name or a path; NULL for null (no path). The value passes the checks of
 * the file and a refusal is RS_E_INVAL with the file's message, which
 * starts with the path ("workers: must be an integer in [1, 256]"); an
 * unknown path names the closest known one. Setting storage.path picks
 * the pmem backend (NULL: DRAM). Checks that involve several settings
 * wait for rs_server_open(). Since 0.8.
 */
int rs_server_config_set(struct rs_server_config *cfg, const char *path,
			 const char *value);

/*
 * The setters below are rs_server_config_set() of their settings
 * (listen.addr and listen.port, workers, storage.size and storage.path,
 * metrics_port, auth.max_skew_s): the same checks, and a refusal has the
 * file's message ("workers: must be an integer in [1, 256]") and changes
 * nothing.
 */

/* Override the listening endpoint: "ADDR:PORT" (IPv4 address of an RDMA
 * netdev) or "[IPV6]:PORT"; port 0 picks a free port, see
 * rs_server_listen_addr(), which brackets an IPv6 address. */
int rs_server_config_set_listen(struct rs_server_config *cfg,
				const char *addr_port);
/* Worker threads (1..256). */
int rs_server_config_set_workers(struct rs_server_config *cfg, unsigned n);
/* Storage of the tables: path NULL, a DRAM pool of `size` bytes (0: the
 * default, 256 MiB of address space, filled as tables grow); else a pool
 * file (created with `size` bytes if missing; an existing pool is reopened
 * with its tables and size, size 0). A file on a DAX file system (fsdax)
 * cannot be registered for RDMA READ: use devdax (/dev/daxN.M) or DRAM. */
int rs_server_config_set_storage(struct rs_server_config *cfg,
				 const char *path, uint64_t size);
/* Prometheus metrics on this TCP port (0: off). */
int rs_server_config_set_metrics_port(struct rs_server_config *cfg,
				      unsigned port);

/*
 * Credentials (docs/security.md). Without any, every peer that reaches the
 * port may do everything (the log says so). With at least one, a peer
 * must present a key id and prove it knows the key's secret when it
 * connects, and gets the key's role: "read" (table directory, GET, STATS,
 * one-sided READ), "data" (+ GET_OR_INIT, PUT, UPDATE, DELETE) or
 * "admin" (+ create and drop tables). key_id: 1..2^32-1, unique. The
 * secret is 16..256 bytes (e.g. 32 random bytes, base64); the file form
 * reads it from path (one trailing newline ignored) and warns when the
 * file is readable by group or others. The config keeps a copy (zeroed
 * when deleted).
 */
int rs_server_config_add_key(struct rs_server_config *cfg, uint32_t key_id,
			     const char *role, const void *secret,
			     size_t len);
int rs_server_config_add_key_file(struct rs_server_config *cfg,
				  uint32_t key_id, const char *role,
				  const char *path);
/* Largest accepted difference between a client's clock and the node's in
 * a connect request, seconds (0..3600, default 60). Clocks only decide
 * whether a connect is accepted, never the safety of data. */
int rs_server_config_set_auth_skew(struct rs_server_config *cfg,
				   unsigned seconds);

/* ---- the node ---- */

int rs_server_open(struct rs_server **out, const struct rs_server_config *cfg);
/* Serve until rs_server_stop(). 0 after a stop, negative on failure. */
int rs_server_run(struct rs_server *s);
/* Ask rs_server_run() to return. Async-signal-safe; idempotent; may come
 * before rs_server_run() (which then returns at once). */
void rs_server_stop(struct rs_server *s);
/* Free everything; accepts NULL and *s == NULL; sets *s to NULL. Must not
 * run concurrently with rs_server_run(). */
void rs_server_close(struct rs_server **s);

/* "ADDR:PORT" the node listens on (the real port when 0 was asked for).
 * Valid until rs_server_close(). */
const char *rs_server_listen_addr(const struct rs_server *s);
/* TCP port of the metrics endpoint, 0 when off. */
unsigned rs_server_metrics_port(const struct rs_server *s);

#ifdef __cplusplus
}
#endif
#endif
