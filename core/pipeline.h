/*
 * pipeline.h - the resolved pipeline: what a manifest (or --passes) turns
 * into and what the stage driver runs.  Shared by manifest.c (builds it),
 * passmgr.c (runs one stage's passes) and stage.c (runs the stages).
 * Only core/ includes this header.
 *
 * Stages are the fixed compile stages of docs/architecture.md, in order.  Within a
 * stage, passes run in list order; a maximal run of consecutive node passes
 * forms one GEPass group (all of them run on each node, in order, GE's
 * NamesToPass).  Disabled passes stay in the list (so `manifest check` can
 * show them) with enabled = false.
 */
#ifndef KILN_CORE_PIPELINE_H
#define KILN_CORE_PIPELINE_H

#include "plugin.h"

/* The compile stages, in order (docs/architecture.md). */
#define KILN_STAGE_MAP(X)            \
    X(PREPARE, "prepare")            \
    X(OPTIMIZE_ORIGINAL, "optimize_original") \
    X(PARTITION, "partition")        \
    X(OPTIMIZE_SUBGRAPH, "optimize_subgraph") \
    X(OPTIMIZE_AFTER_SUBGRAPH, "optimize_after_subgraph") \
    X(MEM_CONFLICT, "mem_conflict")  \
    X(BUILD, "build")                \
    X(LINT, "lint")

typedef enum kiln_stage_id {
#define X(id, name) KILN_STAGE_##id,
    KILN_STAGE_MAP(X)
#undef X
    KILN_STAGE_COUNT
} kiln_stage_id;

/* "prepare, optimize_original, ..., lint": the stage names for messages. */
#define KILN_STAGE_X_LISTED(id, name) ", " name
#define KILN_STAGE_LIST (&(KILN_STAGE_MAP(KILN_STAGE_X_LISTED))[2])

const char *kiln_stage_name(kiln_stage_id s);
/** Stage by name; KILN_STAGE_COUNT if unknown. */
kiln_stage_id kiln_stage_lookup(const char *name);

typedef struct kiln_pass_inst {
    const kiln_component *comp; /* KILN_COMP_PASS or KILN_COMP_FUSION */
    kiln_options *options;      /* validated against the component's schema; owned */
    bool enabled;
    bool required;              /* KILN_PASS_REQUIRED or manifest "required": true */
    char *disabled_by;          /* owned: the selector that disabled it, for printing; or NULL */
} kiln_pass_inst;

typedef struct kiln_stage {
    kiln_pass_inst *passes;
    uint32_t npasses, cap;
} kiln_stage;

typedef struct kiln_instrumentation {
    bool verify_each;
    bool time_passes;
    char *print_after; /* PCRE2 pattern on pass names; NULL = none */
    char *dump_dir;    /* where --print-after writes; NULL = stderr */
    int64_t bisect_limit; /* -1 = off; else run at most this many optional passes */
    FILE *log;         /* stderr unless redirected (tests) */
    bool quiet;        /* -q: no warnings on log (survives a clear, like log) */
    bool stats;        /* --stats: print the passes' counters ("kiln: stat:") */
} kiln_instrumentation;

typedef struct kiln_pipeline {
    kiln_stage stages[KILN_STAGE_COUNT];
    char **tuners;        /* tuner component names */
    uint32_t ntuners;
    char **breakpoints;   /* build steps with a stop requested (manifest "breakpoints") */
    uint32_t nbreakpoints;
    char *memory_planner; /* component names, NULL = none chosen */
    char *allocator;
    char **engines;
    uint32_t nengines;
    char **manifests;     /* real paths of the manifest loaded and the ones it extends,
                           * in that order (what a paused state hashes); owned */
    uint32_t nmanifests;
    kiln_instrumentation instr;
} kiln_pipeline;

/** Free everything a pipeline owns (not the struct itself). */
void kiln_pipeline_clear(kiln_pipeline *p);

#endif
