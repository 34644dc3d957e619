/*
 * memgraph.h - the memory plan as it stands on the graph (docs/build.md,
 * docs/memory_planning.md "MemoryAssigner"): read back from the attributes
 * MemoryAssigner writes, checked against the schedule, reported and drawn.
 *
 * The reader rebuilds buffers from the graph only (descriptor `offset`,
 * `size`, `memory_type`; node `_kiln_workspace_bytes` / `_kiln_workspace_offsets`;
 * the symbol table; the schedule analysis), never from the planner's blocks,
 * so the checker is an independent witness of the plan.  Only core/ includes
 * this header; plugins reach the checker through kiln_memory_plan_verify.
 */
#ifndef KILN_CORE_MEMGRAPH_H
#define KILN_CORE_MEMGRAPH_H

#include "base.h"
#include <kiln/kiln.h>

typedef struct json_t json_t;

/** One planned buffer of the root graph: a symbol or a workspace. */
typedef struct kiln_mg_buf {
    uint32_t sym;       /* memory symbol; KILN_SYMTAB_NONE for a workspace */
    kiln_node_id node;  /* workspace owner, or the symbol's first root anchor's node */
    uint32_t index;     /* workspace index, or that anchor's index */
    uint32_t type;      /* index into kiln_memgraph.types */
    uint32_t group;     /* continuous component (its first buffer), else the buffer itself */
    int64_t offset;     /* lowest offset of its anchors */
    int64_t end;        /* highest offset + size of its output anchors */
    uint32_t first;     /* first live step */
    uint32_t last;      /* last live step (kiln_schedule_release_step of its uses) */
    int32_t stream;     /* stream of its producer, -1 when none */
    bool isolation;     /* produced by a conflict-isolation copy (Identity, _cannot_be_deleted) */
} kiln_mg_buf;

typedef struct kiln_memgraph {
    kiln_mg_buf *bufs;
    uint32_t nbufs, cap;
    const char **types; /* memory type names (borrowed from the graph's strings) */
    uint32_t ntypes;
    uint32_t steps;
    uint32_t unplanned; /* symbols with no offset (zero-copy, weights, dynamic) */
} kiln_memgraph;

/**
 * Read the planned buffers of @p root.  Fails (KILN_ERR_INVALID) when the
 * anchors of one symbol disagree (an anchor's offset differs from the anchor
 * it shares memory with), naming both anchors.  O(anchors + n log n).
 */
kiln_status kiln__memgraph_read(kiln_graph *root, kiln_memgraph *mg, kiln_error *err);
void kiln__memgraph_free(kiln_memgraph *mg);
/** Name of buffer @p b ("<node>_out_<i>" or "<node>_ws_<i>") into @p buf. */
void kiln__memgraph_name(kiln_graph *root, const kiln_mg_buf *b, char *buf, size_t size);
/** True when the root carries a plan (`_kiln_memory_planner`). */
bool kiln__memgraph_planned(const kiln_graph *root);
/** The report's `memory_plan` object (null when no plan), with @p pass_ms (the
 *  MemoryAssigner pass's wall time) as each type's time_ms; new reference. */
json_t *kiln__memgraph_report(kiln_graph *root, double pass_ms);
/** Draw the plan as SVG (offset against step) into @p path, atomically. */
kiln_status kiln__memgraph_svg(kiln_graph *root, const char *path, kiln_error *err);

#endif
