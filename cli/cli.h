/*
 * cli.h - shared state and helpers of the kiln command line.
 *
 * The command line is a client of the public embedding API: cli/ includes
 * only <kiln/...> headers (tests/e2e/cli_public_api.sh checks it, and the
 * kiln_cli target has no core/ include directory).
 */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <kiln/kiln.h>
#include <kiln/kiln_embed.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KILN_CLI_MAX_LIST 64

typedef struct kiln_cli {
    const char *verb;
    const char *manifest, *output, *print_after, *dump_dir, *report, *build_mode, *build_step,
        *tuner, *resume, *passes, *output_dir;
    const char *format, *input_format; /* --format (outputs), --input-format (MODEL) */
    const char *selectors[KILN_CLI_MAX_LIST];
    bool selector_enable[KILN_CLI_MAX_LIST];
    uint32_t nselectors;
    const char *pass_opts[KILN_CLI_MAX_LIST];
    uint32_t npass_opts;
    const char *session[KILN_CLI_MAX_LIST];
    uint32_t nsession;
    const char *inputs[KILN_CLI_MAX_LIST];
    uint32_t ninputs;
    const char *positional[KILN_CLI_MAX_LIST];
    uint32_t npositional;
    bool verify_each, time_passes, has_bisect, stats;
    int64_t bisect_limit;
    int jobs, verbosity;
    int repeat; /* kiln run --repeat N */
    /* front door: kiln info --json, --input-shape NAME=DIMS, kiln run --output-format */
    bool json;
    const char *input_shapes[KILN_CLI_MAX_LIST];
    uint32_t ninput_shapes;
    const char *plugins[KILN_CLI_MAX_LIST]; /* --plugin FILE: loaded after the manifest's */
    uint32_t nplugins;
    const char *output_format;
    int64_t max_memory; /* kiln run --max-memory BYTES; 0 = the runtime's default */
    const char *trace;  /* kiln run --trace FILE.json (Chrome trace of the runs) */
    /* kiln memplan: --planner, --alignment, --capacity, --planner-opt */
    const char *memplan_planner;
    int64_t memplan_alignment, memplan_capacity;
    const char *planner_opts[KILN_CLI_MAX_LIST];
    uint32_t nplanner_opts;
} kiln_cli;

int kiln_cli_compile(kiln_cli *c);
int kiln_cli_opt(kiln_cli *c);
int kiln_cli_run(kiln_cli *c);
int kiln_cli_plugins(kiln_cli *c);
int kiln_cli_manifest(kiln_cli *c);
int kiln_cli_convert(kiln_cli *c);
int kiln_cli_lint(kiln_cli *c);
int kiln_cli_info(kiln_cli *c);
int kiln_cli_help(kiln_cli *c);
int kiln_cli_memplan(kiln_cli *c);

/* help.c: usage texts, version, unknown verbs */
/** The parser's long-option table and short-option string (set by main.c's parser). */
extern const struct option *kiln_cli_parser_longs;
extern const char *kiln_cli_parser_shorts;
/** The overview of every verb. */
void kiln_cli_usage(FILE *f);
/** `kiln help VERB`: the verb's synopsis, text and options; 2 (message printed) if unknown. */
int kiln_cli_help_verb(FILE *f, const char *verb);
/** True when help.c documents @p verb. */
bool kiln_cli_known_verb(const char *verb);
/** "unknown verb" with a "did you mean"; returns 2. */
int kiln_cli_unknown_verb(const char *verb);
void kiln_cli_version(FILE *f);

/*
 * A verb's session: the embedding session (the manifest, -m or the default,
 * with the command-line overrides applied), the model and the error.
 * kiln_cli_session_end releases whatever was set up.
 */
typedef struct kiln_cli_session {
    kiln_session *s;
    kiln_model *m;
    kiln_error *err;
} kiln_cli_session;

/* helpers (cli_common.c) */
int kiln_cli_fail(const kiln_error *err);
/** Exit status 2 with "kiln VERB: expected WHAT" unless there are @p n positionals; else 0. */
int kiln_cli_need(const kiln_cli *c, uint32_t n, const char *what);
/** For verbs over one MODEL that neither write -o nor take build options (run,
 *  lint): exit status 2 with a message ending in "(@p why)" when misused; else 0. */
int kiln_cli_model_only(const kiln_cli *c, const char *why);
/** Zero @p s and create its session and error (false on OOM, message printed). */
bool kiln_cli_session_ctx(const kiln_cli *c, kiln_cli_session *s);
/** kiln_cli_session_ctx, then kiln_cli_pipeline; prints the error and returns
 *  false on failure (kiln_cli_session_end must still be called). */
bool kiln_cli_session_begin(kiln_cli *c, kiln_cli_session *s);
void kiln_cli_session_end(kiln_cli_session *s);
/** Verify the model before it is written anywhere (a failing pass may leave a
 *  broken graph: a cycle, a dangling edge); the error says so. */
kiln_status kiln_cli_verify_final(const kiln_model *m, kiln_error *err);
/** A file a verb reads or writes, for kiln_cli_check_files. */
typedef struct kiln_cli_file {
    const char *what; /* "the model", "-o", "--report", ... */
    const char *path; /* NULL = not given */
    bool own_check;   /* its reader reports a missing file itself: same-file check only */
} kiln_cli_file;
/**
 * Before any work: every input must be readable as a file (not a directory),
 * no output may be an input or another output (same device and inode, also
 * through symlinks and other spellings), no output may be a directory, and an
 * output's directory must exist.  Prints the message and returns the exit
 * status (2 for conflicting or directory outputs, 1 for missing files), or 0.
 */
int kiln_cli_check_files(const kiln_cli *c, const kiln_cli_file *in, uint32_t nin,
                         const kiln_cli_file *out, uint32_t nout);
/**
 * --input-shape NAME=DIMS: fix each input's shape (kiln_model_set_input_shape:
 * the session option kiln.input_shape.<node> that InferShapes reads).
 * KILN_ERR_PARAM naming the argument on a bad one.
 */
kiln_status kiln_cli_apply_input_shapes(kiln_cli *c, kiln_model *m, kiln_error *err);
/** "1x3x640x640" into @p dims (at most @p max; "" is a scalar); KILN_ERR_PARAM when malformed. */
kiln_status kiln_cli_parse_dims(const char *s, int64_t *dims, uint32_t max, uint32_t *rank);
/** The tail of the message for an unknown kiln.* key. */
#define KILN_CLI_KNOWN_KEYS KILN_KNOWN_OPTION_KEYS
/** Load the manifest (-m or default) and apply every command-line override. */
kiln_status kiln_cli_pipeline(kiln_cli *c, kiln_session *s, kiln_error *err);
/** The command line's instrumentation and diagnostics (--verify-each, ...) only. */
kiln_status kiln_cli_diagnostics(kiln_cli *c, kiln_session *s, kiln_error *err);

#endif
