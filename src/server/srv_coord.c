/*
 * srv_coord.c - the memory node's membership (the "coord" config section,
 * docs/config.md; design in docs/replication.md): an etcd backend
 * (src/coord/coord_etcd.c) and the agent that registers the node under
 * its id with the address clients connect to, keeps its lease alive,
 * and, if it holds the decider key, writes the next configuration when
 * the registrations change (src/coord/agent.c).
 *
 * Cost: none without the section (nothing is created). With it, one
 * thread that sleeps in a watch; the serving threads never wait on etcd,
 * so a node whose etcd is down keeps serving: only the agent retries,
 * and logs once when it starts failing, once a minute while it fails,
 * and once when it recovers.
 */
#include <stdio.h>
#include <string.h>

#include "coord/membership.h"
#include "server/srv_internal.h"

#define SRV_COORD_TIMEOUT_MS 2000

static void coord_log(void *arg, const char *line)
{
	srv_log("coord: %s", line);
}

static void coord_config(void *arg, const struct memb_config *c)
{
	srv_repl_adopt(arg, c);
}

int srv_coord_start(struct rs_server *s)
{
	const struct srv_config *o = &s->cfg;
	struct memb_agent_opts ao = {
		.cluster = o->coord_cluster,
		.id = srv_config_member_id(o),
		.addr = s->listen_addr,
		.lease_s = ((int64_t)o->coord_lease_ms + 999) / 1000,
		.keep_s = o->coord_keep_s,
		.decide = o->coord_decide,
		/* a node that joins an existing configuration holds none
		 * of its ranges: it stays JOINING until it copied them
		 * (docs/replication.md, "Copying ranges"), with r = 1 too
		 * (their rows are on their previous owner) */
		.policy = { .r = o->coord_replicas,
			    .vnodes = MEMB_DEFAULT_VNODES,
			    .activate_joiners = false,
			    .first_members = o->coord_initial_members,
			    /* a lapsed lease that may hold the last copy of
			     * a range: unavailable, not lost */
			    .keep_last = true },
		.log = coord_log,
		.on_config = coord_config,
		.config_arg = s,
		.synced = &s->repl.synced,
		.read_ms = &s->repl.read_ms,
		.regressed = &s->repl.regressed,
	};
	bool world;
	int ret;

	if (!o->coord_endpoints)
		return 0;
	ret = coord_etcd_open_files(&s->coord, o->coord_endpoints,
				    SRV_COORD_TIMEOUT_MS, &o->coord_sec,
				    &world);
	if (ret)
		return srv_err(ret, "coord: %s", rs_errormsg());
	if (world)
		srv_warn("warning: coord.password_file %s may be read by other "
			"users (chmod 600 it)", o->coord_sec.password_file);
	ret = memb_agent_new(&s->agent, s->coord, &ao);
	if (!ret) {
		/* the adopting thread must not read s->agent: it is freed
		 * at close while that thread may still run */
		s->repl.inc = memb_agent_inc(s->agent);
		ret = memb_agent_start(s->agent);
	}
	if (ret) {
		ret = srv_err(ret, "coord: %s", rs_errormsg());
		srv_coord_stop(s);
		return ret;
	}
	srv_log("coord: member '%s' of cluster '%s' through %s (%s%s%s%s)",
		srv_config_member_id(o), o->coord_cluster, o->coord_endpoints,
		strstr(o->coord_endpoints, "http://")
			? "some endpoints in clear text" : "https",
		o->coord_sec.cert_file ? ", client certificate" : "",
		o->coord_sec.user ? ", etcd user " : "",
		o->coord_sec.user ? o->coord_sec.user : "");
	return 0;
}

void srv_coord_stop(struct rs_server *s)
{
	memb_agent_free(&s->agent);
	coord_close(&s->coord);
}
