/*
 * recstore/log.h - where the library's log lines go.
 *
 * The library writes a line when something happens that no call returns:
 * a node's table created or an epoch adopted, a peer's bad message, a
 * secret file others can read. By default each line goes to stderr as
 * "PREFIX: MESSAGE\n", PREFIX naming the part that wrote it
 * ("recstore-server", "coord", "recstore"). A program that has a log of
 * its own installs a function instead (libpmem2's pmem2_log_set_function
 * is the model):
 *
 *	static void to_syslog(enum rs_log_level level, const char *file,
 *			      int line, const char *func, const char *msg)
 *	{
 *		syslog(level <= RS_LOG_ERROR ? LOG_ERR : LOG_INFO, "%s", msg);
 *	}
 *	rs_set_log_function(to_syslog);
 *
 * The function receives the message without the prefix or a newline, and
 * the source location of the line that wrote it. It runs on whichever
 * thread logs (a node's workers, its coordination thread, the caller of a
 * client call), possibly on several at once; it must not call back into
 * the library. A line of a rate-limited site (one a peer can cause) that
 * follows dropped lines ends with "(K similar lines suppressed)".
 *
 * Both settings are process-wide and may be changed at any time from any
 * thread; a line being written while they change goes to the old or the
 * new function.
 */
#ifndef RECSTORE_LOG_H
#define RECSTORE_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

/* Most severe first: a threshold lets through its level and those above. */
enum rs_log_level {
	RS_LOG_FATAL,	/* a broken internal rule; the process aborts next */
	RS_LOG_ERROR,	/* a part of the node stopped working */
	RS_LOG_WARNING,	/* going on, but something needs a look */
	RS_LOG_NOTICE,	/* normal but significant: table created, epoch... */
	RS_LOG_INFO,
	RS_LOG_DEBUG,
};

typedef void rs_log_function(enum rs_log_level level, const char *file,
			     int line, const char *func, const char *msg);

/* Send every line to fn from now on; NULL: back to stderr. Returns 0. */
int rs_set_log_function(rs_log_function *fn);

/*
 * Drop the lines less severe than level (a higher enum value), for the
 * default writer as for a function. Default RS_LOG_DEBUG: every line.
 * RS_E_INVAL for a value outside the enum.
 */
int rs_set_log_threshold(enum rs_log_level level);

#ifdef __cplusplus
}
#endif
#endif
