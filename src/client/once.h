/*
 * once.h - the call sequence of a client in cluster mode (exactly-once
 * writes, docs/client.md "Cluster mode", docs/replication.md).
 *
 * Every write call takes the next sequence number (1, 2, ...) when it
 * starts and gives it back when it returns to its caller; between the
 * two it is "in flight" and may send (and resend) its keys. done_below is
 * the lowest sequence still in flight, or the next one to be taken when
 * none is: every call below it has returned and will never send again,
 * so a node may forget its records.
 *
 * The calls in flight form a list in sequence order: a call takes its
 * sequence and joins the tail under one lock, so the tail always holds
 * the highest one and the head the lowest; leaving unlinks in O(1).
 * Every operation is O(1) and allocates nothing (the slot is the call's,
 * on its stack), whatever the number of calls in flight (the caller's
 * threads plus the async workers).
 */
#ifndef CLI_ONCE_H
#define CLI_ONCE_H

#include <pthread.h>
#include <stdint.h>

/* One call in flight (owned by the call; linked while it is in flight). */
struct cli_once_slot {
	uint64_t seq;
	struct cli_once_slot *prev, *next;
};

struct cli_once {
	pthread_mutex_t lock;
	uint64_t next;			/* the next sequence to take (>= 1) */
	struct cli_once_slot *head;	/* lowest sequence in flight */
	struct cli_once_slot *tail;	/* highest */
};

/* 0 or -ENOMEM (the mutex; no message set). */
int cli_once_init(struct cli_once *o);
void cli_once_destroy(struct cli_once *o);

/* A call starts: s gets the next sequence and is in flight until
 * cli_once_leave(o, s). Returns s->seq; *done_below: as
 * cli_once_done_below() once s is in flight (<= s->seq). */
uint64_t cli_once_enter(struct cli_once *o, struct cli_once_slot *s,
			uint64_t *done_below);
/* The call returns to its caller: it will never send again. */
void cli_once_leave(struct cli_once *o, struct cli_once_slot *s);
/* The lowest sequence in flight, or the next to be taken if none (never
 * above the sequence of a call in flight; never decreases). */
uint64_t cli_once_done_below(struct cli_once *o);

#endif
