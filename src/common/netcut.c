/*
 * netcut.c - the link-cutting test hook (netcut.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/netcut.h"
#include "common/rs_internal.h"

#define NETCUT_PEERS 64
#define NETCUT_PEER_MAX 127
#define NETCUT_CHECK_MS 50

_Atomic int rs_netcut_state;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *file, *self;
static char peers[NETCUT_PEERS][NETCUT_PEER_MAX + 1];
static unsigned npeers;
static uint64_t checked_ms;
static struct stat seen;	/* of the file as last read (st_ino 0: none) */
static _Atomic uint64_t cuts;

static void init(void)
{
	file = getenv("RS_TEST_NET_CUT");
	self = getenv("RS_TEST_NET_ID");
	atomic_store(&rs_netcut_state, file && *file && self && *self ? 2 : 1);
}

/* Under lock: the lines of the file that name this process. */
static void reload(void)
{
	char line[256], id[128], peer[NETCUT_PEER_MAX + 1];
	struct stat st;
	FILE *f;

	if (stat(file, &st)) {
		memset(&seen, 0, sizeof(seen));
		npeers = 0;
		return;
	}
	if (st.st_ino == seen.st_ino && st.st_size == seen.st_size &&
	    st.st_mtim.tv_sec == seen.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == seen.st_mtim.tv_nsec)
		return;
	seen = st;
	npeers = 0;
	if (!(f = fopen(file, "r")))
		return;
	while (fgets(line, sizeof(line), f) && npeers < NETCUT_PEERS)
		if (sscanf(line, "%127s %127s", id, peer) == 2 &&
		    !strcmp(id, self))
			snprintf(peers[npeers++], sizeof(peers[0]), "%s", peer);
	fclose(f);
}

bool rs_netcut_slow(const char *peer)
{
	bool cut = false;
	uint64_t now;

	pthread_once(&once, init);
	if (atomic_load(&rs_netcut_state) != 2)
		return false;
	now = rs_mono_ms();
	pthread_mutex_lock(&lock);
	if (now - checked_ms >= NETCUT_CHECK_MS || !checked_ms) {
		checked_ms = now;
		reload();
	}
	for (unsigned i = 0; i < npeers && !cut; i++)
		cut = !strcmp(peers[i], peer);
	pthread_mutex_unlock(&lock);
	if (cut)
		atomic_fetch_add(&cuts, 1);
	return cut;
}

uint64_t rs_netcut_count(void)
{
	return atomic_load(&cuts);
}

bool rs_netcut_enabled(void)
{
	pthread_once(&once, init);
	return atomic_load(&rs_netcut_state) == 2;
}
