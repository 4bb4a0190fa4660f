/*
 * once.c - the call sequence of a client in cluster mode (once.h).
 */
#include <errno.h>

#include "client/once.h"

int cli_once_init(struct cli_once *o)
{
	o->next = 1;
	o->head = NULL;
	o->tail = NULL;
	return pthread_mutex_init(&o->lock, NULL) ? -ENOMEM : 0;
}

void cli_once_destroy(struct cli_once *o)
{
	pthread_mutex_destroy(&o->lock);
}

uint64_t cli_once_enter(struct cli_once *o, struct cli_once_slot *s,
			uint64_t *done_below)
{
	pthread_mutex_lock(&o->lock);
	/* taken and linked under one lock: the list stays in sequence
	 * order, and no reader sees a taken sequence outside it */
	s->seq = o->next++;
	s->next = NULL;
	s->prev = o->tail;
	if (o->tail)
		o->tail->next = s;
	else
		o->head = s;
	o->tail = s;
	*done_below = o->head->seq;
	pthread_mutex_unlock(&o->lock);
	return s->seq;
}

void cli_once_leave(struct cli_once *o, struct cli_once_slot *s)
{
	pthread_mutex_lock(&o->lock);
	if (s->prev)
		s->prev->next = s->next;
	else
		o->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		o->tail = s->prev;
	pthread_mutex_unlock(&o->lock);
	s->prev = NULL;
	s->next = NULL;
}

uint64_t cli_once_done_below(struct cli_once *o)
{
	uint64_t d;

	pthread_mutex_lock(&o->lock);
	d = o->head ? o->head->seq : o->next;
	pthread_mutex_unlock(&o->lock);
	return d;
}
