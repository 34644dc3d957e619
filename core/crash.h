/*
 * crash.h - crash attribution.  Before every call into plugin code the caller
 * records what is running (plugin, component, stage, graph, node) in a
 * thread-local activity record; a SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT handler
 * on an alternate stack prints it with write(2) and re-raises the signal with
 * the default action, so core dumps still work.  Only core/ includes this.
 */
#ifndef KILN_CORE_CRASH_H
#define KILN_CORE_CRASH_H

#include "base.h"

typedef struct kiln_activity {
    const char *plugin;    /* plugin name */
    const char *component; /* pass / component name */
    const char *stage;     /* pipeline stage or "plugin init" */
    const kiln_graph *graph;
    kiln_node_id node;     /* node being passed, 0 = whole graph */
} kiln_activity;

/** Make @p a current; returns the previous one (restore with _leave). */
kiln_activity *kiln__activity_enter(kiln_activity *a);
void kiln__activity_leave(kiln_activity *prev);
/** Install the crash handlers (idempotent; CLI calls it at start). */
KILN_API void kiln_crash_handlers_install(void);

#endif
