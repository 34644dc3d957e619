/*
 * kiln.h - umbrella header of the plugin API: graphs, passes, components,
 * runtimes and the plugin entry point.
 *
 * Plugins compile with KILN_PLUGIN defined (kiln_add_plugin() does this) and
 * use KILN_PLUGIN_DEFINE once; every kiln_* call then goes through the host
 * table handed to the plugin at init.  Programs that embed kiln (link
 * libkiln and drive it: sessions, models, compile, run) include
 * kiln_embed.h, which includes this header; see docs/embedding.md.
 */
#ifndef KILN_H
#define KILN_H

#include "kiln_status.h"
#include "kiln_graph.h"
#include "kiln_analysis.h"
#include "kiln_pass.h"
#include "kiln_component.h"
#include "kiln_alloc_api.h"
#include "kiln_runtime.h"
#include "kiln_op.h"
#include "kiln_plugin.h"

#endif /* KILN_H */
