/*
 * crash.h - crash attribution.  Before every call into plugin code the caller
 * records what is running (plugin, component, stage, graph, node) in a
 * thread-local activity record; a SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT handler
 * on an alternate stack prints it with one write(2) and re-raises the signal
 * with the default action, so core dumps still work.  Only core/ (and the CLI,
 * around its own calls into plugins) includes this.
 */
#ifndef KILN_CORE_CRASH_H
#define KILN_CORE_CRASH_H

#include "base.h"

typedef struct kiln_activity {
    const char *plugin;    /* plugin name (NULL while loading: only the file is known) */
    const char *component; /* pass / component name ("pass <component>") */
    const char *stage;     /* pipeline stage or "plugin load" */
    const kiln_graph *graph;
    kiln_node_id node;     /* node being passed, 0 = whole graph */
    /* Optional, after the positional five: */
    const char *file;  /* plugin file, when known */
    const char *doing; /* "while <doing>[, component <component>]" instead of
                          "pass <component>": "running its constructors" */
    /* Filled by kiln__activity_enter from graph/node, so the crash handler
     * never reads the graph (a pass may have freed it). */
    const char *graph_name;
    const char *node_name;
} kiln_activity;

/** A pass-like activity (the five positional fields; the rest zero). */
#define KILN_ACTIVITY(plugin_, component_, stage_, graph_, node_)                                  \
    {                                                                                              \
        .plugin = (plugin_), .component = (component_), .stage = (stage_), .graph = (graph_),      \
        .node = (node_)                                                                            \
    }

/** Make @p a current; returns the previous one (restore with _leave).  Every
 * string @p a points to must stay valid until then (the handler reads them). */
kiln_activity *kiln__activity_enter(kiln_activity *a);
/** Make @p prev current again (as it is: not refilled).  A parallel run's
 * workers start with the caller's record current this way (threads.md). */
void kiln__activity_leave(kiln_activity *prev);
/** Install the crash handlers (idempotent; CLI calls it at start). */
KILN_API void kiln_crash_handlers_install(void);

#endif
