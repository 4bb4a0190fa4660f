/*
 * netcut.h - a test hook that cuts links between processes (internal,
 * rs_netcut_). The guest's nodes share one rxe device, which loops their
 * traffic inside the driver, so nothing on the network can partition
 * them (docs/DEVELOPING.md, "Pitfalls"); this hook does it where the
 * connections are made instead.
 *
 * Off unless the environment names a file: RS_TEST_NET_CUT=FILE, and
 * RS_TEST_NET_ID=ID names this process. Every line of FILE is "ID PEER":
 * the process ID cannot reach PEER: a node by the name the connecting
 * process knows it by (a client: its "host:port"; a node: a peer's member
 * id, for REPL and COPY), or "etcd" (the coordination store). The file is
 * read again when it changes (checked at most every 50 ms); a test writes
 * a new one and renames it into place, and removes it to heal.
 *
 * What a cut does (a link that rejects, like a firewall's reject rule):
 * a call that needs a connection to PEER fails at once, as a refused
 * connection does, and the idle connections to it are closed; a call
 * already running on one finishes. Both ends must be listed for a
 * two-way partition: each process stops its own connections. etcd calls
 * fail as an unreachable endpoint does.
 *
 * Cost when off: one relaxed atomic load per connection borrow.
 */
#ifndef RS_COMMON_NETCUT_H
#define RS_COMMON_NETCUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* 0: not looked at yet, 1: off, 2: on */
extern _Atomic int rs_netcut_state;

bool rs_netcut_slow(const char *peer);

/* Whether this process is cut from peer now (and count it if so). */
static inline bool rs_netcut(const char *peer)
{
	return atomic_load_explicit(&rs_netcut_state, memory_order_relaxed)
			       == 1
		       ? false
		       : rs_netcut_slow(peer);
}

/* Calls refused so far (a process's evidence that a cut really cut). */
uint64_t rs_netcut_count(void);
bool rs_netcut_enabled(void);

#endif
