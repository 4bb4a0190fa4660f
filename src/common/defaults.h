/*
 * defaults.h - settings that the node and the client share, defined once.
 *
 * The rdma_cm port a node listens on and that examples and scripts use
 * (its one definition is the public RS_SERVER_DEFAULT_PORT, which the
 * API documents; RS_DEFAULT_PORT names it for the sources), and the
 * adaptive completion wait's spin window (poll the CQ for this
 * long after the last completion, then sleep on the completion channel):
 * its default and its maximum are the same for a node's `spin_us`
 * (docs/config.md), a client's rs_client_config_set_spin_us()
 * (docs/client.md), a connection of src/verbs (rv_conn_attr.spin_us) and
 * the benches' --spin-us.
 */
#ifndef RS_COMMON_DEFAULTS_H
#define RS_COMMON_DEFAULTS_H

#include "recstore/server.h"

#define RS_DEFAULT_PORT RS_SERVER_DEFAULT_PORT
#define RS_SPIN_US_DEFAULT 50
#define RS_SPIN_US_MAX 1000000	/* one second */

#endif
