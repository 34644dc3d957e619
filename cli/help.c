/*
 * help.c - `kiln --help`, `kiln help [VERB]`, `kiln VERB --help`,
 * `kiln --version` and the "did you mean" for unknown verbs.
 *
 * Two tables: the verbs (synopsis, one-line summary, details) and the options
 * (name, argument, text, the verbs it applies to).  `kiln VERB --help` prints
 * the verb's text and the options whose mask holds the verb.  The parser's
 * own table (main.c's getopt_long array and short-option string) is published
 * through kiln_cli_parser_longs / kiln_cli_parser_shorts, and `kiln help
 * --options` lists what the parser accepts, so the man page, the bash
 * completion and these tables are tested against the parser
 * (tests/e2e/front_door.sh) and cannot drift from it.
 */
#include "cli.h"
#include <getopt.h>

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unknown"
#endif

const struct option *kiln_cli_parser_longs;
const char *kiln_cli_parser_shorts;

enum {
    V_COMPILE = 1u << 0,
    V_OPT = 1u << 1,
    V_RUN = 1u << 2,
    V_PLUGINS = 1u << 3,
    V_MANIFEST = 1u << 4,
    V_CONVERT = 1u << 5,
    V_LINT = 1u << 6,
    V_INFO = 1u << 7,
    V_HELP = 1u << 8,
    V_MEMPLAN = 1u << 9,
    V_BUILD = V_COMPILE | V_OPT | V_RUN | V_LINT, /* verbs that run a pipeline over a model */
    V_SESSION = V_BUILD | V_PLUGINS | V_MANIFEST | V_CONVERT | V_INFO | V_MEMPLAN, /* verbs with a manifest */
    V_ALL = V_SESSION | V_HELP,
};

typedef struct verb_help {
    const char *verb;
    uint32_t bit;
    const char *synopsis; /* after "kiln " */
    const char *summary;
    const char *details; /* paragraphs for `kiln help VERB`, may be NULL */
} verb_help;

static const verb_help verbs[] = {
    {"compile", V_COMPILE,
     "compile MODEL -o OUT [-m MANIFEST] [options]\n"
     "       kiln compile --resume STATE -o OUT [options]",
     "run the manifest's full pipeline and write the result",
     "Imports MODEL (.json is kiln graph JSON; other extensions such as .onnx go to a\n"
     "frontend plugin of the manifest), runs every stage of the manifest's pipeline and\n"
     "writes OUT, chosen by extension: .json, .dot, or a format a frontend plugin\n"
     "exports (.onnx).  With --build-mode tuning --build-step STEP the build stops at\n"
     "STEP and OUT receives the paused state; --resume STATE continues it.\n"},
    {"opt", V_OPT, "opt MODEL --passes LIST -o OUT [options]",
     "run only the named passes, in order",
     "LIST is the textual pipeline form: pass names separated by commas, for example\n"
     "--passes PruneGraphPass,IdentityRemovePass.  The passes come from the manifest's\n"
     "plugins.\n"},
    {"run", V_RUN, "run MODEL [--input [NAME=]FILE]... [--output-dir DIR] [options]",
     "compile MODEL for its inputs and execute it on a runtime plugin",
     "Every model input needs a file (.npy, or raw data with a FILE.json sidecar);\n"
     "NAME is the input's name, a bare FILE binds the next input without one.  A\n"
     "missing input is an error that lists every missing input with its dtype and\n"
     "shape.  One summary line per output goes to stdout; with --output-dir the\n"
     "outputs are written there (nothing is written unless the whole run succeeds).\n"
     "The runtime is the session option kiln.runtime, else the first loaded one that\n"
     "takes the model (multistream, on one stream unless --max-streams says more; then\n"
     "sequential, for dynamic shapes).\n"},
    {"info", V_INFO, "info MODEL [--json] [-m MANIFEST]",
     "describe a model: inputs, outputs, opsets, ops and their engines",
     "Prints the model's inputs and outputs with dtypes and shapes (symbolic dims by\n"
     "name, '?' when unknown), the opsets it imports, its node and subgraph counts,\n"
     "and a histogram of its op types, each with the engine of the manifest that\n"
     "supports it (the engines' own support query) or 'none'.  --json prints the\n"
     "same as one JSON object.\n"},
    {"plugins", V_PLUGINS, "plugins [-m MANIFEST] [NAME]",
     "list the manifest's plugins and components, or describe one",
     "Without NAME, lists every plugin of the manifest with its components.  NAME (a\n"
     "plugin or component name) describes it in full: an engine's ops and dtypes, a\n"
     "pass's flags and options.\n"},
    {"manifest", V_MANIFEST, "manifest check MANIFEST [options]",
     "validate a manifest and print the resolved pipeline",
     "Loads MANIFEST (with its plugins and its 'extends' chain), applies the\n"
     "command-line selectors and options, and prints the resolved stages, passes and\n"
     "options, then the pipeline's textual form.\n"},
    {"convert", V_CONVERT, "convert IN OUT [-m MANIFEST]",
     "convert a model between formats, chosen by extension",
     "kiln reads and writes .json itself and writes .dot; other formats (.onnx) come\n"
     "from the manifest's frontend plugins.  No pass runs.\n"},
    {"lint", V_LINT, "lint MODEL [-m MANIFEST] [options]", "run GraphLint alone; warnings only",
     "Runs the GraphLint pass (W18888 read/write warnings on stderr) and writes\n"
     "nothing.  Exit status 0 whatever it finds.\n"},
    {"memplan", V_MEMPLAN,
     "memplan TRACE.csv [--planner NAME] [--alignment N] [--capacity N] [-o PLAN.csv]",
     "plan a buffer trace with a memory planner and print peak, LOAD, ratio and time",
     "TRACE.csv has lines id,lower,upper,size (a header line is optional): buffer id is\n"
     "live over the steps [lower, upper) and needs size bytes.  The planner (default:\n"
     "the manifest's memory_planner, else kiln) places every buffer; the plan is\n"
     "checked (no two live buffers overlap).  Prints buffers, peak, LOAD (the least any\n"
     "plan needs), peak/LOAD and the planning time; -o writes id,offset CSV.  A\n"
     "malformed line is an error naming FILE:LINE; nothing is written.\n"},
    {"help", V_HELP, "help [VERB]", "print the overview, or one verb's options",
     "`kiln help --options` lists every option the parser accepts, one a line.\n"},
};

typedef struct opt_help {
    const char *name; /* long name, or NULL for a short-only option */
    char shortc;      /* 0 when none */
    const char *arg;  /* argument name, NULL for flags */
    uint32_t verbs;
    const char *text;
} opt_help;

static const opt_help opts[] = {
    {"manifest", 'm', "FILE", V_SESSION & ~V_MANIFEST,
     "the manifest (default: share/kiln/manifests/default.json beside the executable)"},
    {"output", 'o', "OUT", V_COMPILE | V_OPT | V_MEMPLAN,
     "the output file; its extension picks the format (kiln memplan: id,offset CSV)"},
    {"planner", 0, "NAME", V_MEMPLAN,
     "the memory planner (kiln plugins lists them; default the manifest's, else kiln)"},
    {"alignment", 0, "N", V_MEMPLAN, "offset alignment in bytes, a power of two (default 1)"},
    {"capacity", 0, "BYTES", V_MEMPLAN,
     "fail when the plan needs more than BYTES (512M, 4G; default unbounded)"},
    {"planner-opt", 0, "K=V", V_MEMPLAN,
     "set option K of the planner (kiln: effort, time_budget_ms, search_nodes, ...); "
     "repeatable"},
    {"format", 0, "FMT", V_COMPILE | V_OPT | V_CONVERT,
     "the output's format (json, dot, onnx), overriding its extension ('-' writes json)"},
    {"input-format", 0, "FMT", V_BUILD | V_CONVERT | V_INFO,
     "the model's format (json, onnx), overriding its extension ('-' is told by content)"},
    {"plugin", 0, "FILE", V_SESSION & ~V_MANIFEST,
     "load plugin FILE (a .so) after the manifest's, e.g. for --passes; repeatable"},
    {"passes", 0, "LIST", V_OPT, "the passes to run, comma separated, in order"},
    {"resume", 0, "STATE", V_COMPILE, "continue a build paused with --build-step"},
    {"build-mode", 0, "MODE", V_COMPILE, "normal (default) or tuning"},
    {"build-step", 0, "STEP", V_COMPILE,
     "with --build-mode tuning: stop at before_ub_match, after_ub_match or after_build"},
    {"tuner", 0, "NAME", V_COMPILE, "the tuner component whose hooks run at the build step"},
    {"input", 0, "[NAME=]FILE", V_RUN,
     "an input tensor file (.npy, or raw + FILE.json); repeatable"},
    {"input-shape", 0, "NAME=DIMS", V_COMPILE | V_OPT | V_RUN | V_LINT,
     "fix the shape of input NAME, dims joined by x (1x3x640x640); repeatable"},
    {"output-dir", 0, "DIR", V_RUN, "write every output to DIR (created when missing)"},
    {"output-format", 0, "FMT", V_RUN,
     "with --output-dir: raw (output.N.bin + .json sidecar, default) or npy (output.N.npy)"},
    {"repeat", 0, "N", V_RUN, "run N times; median and minimum run time on stderr"},
    {"threads", 0, "N", V_BUILD,
     "threads for the parallel stages (optimize_subgraph); 0 = one per core up to 16 "
     "(= --option kiln.threads=N)"},
    {"engine-priority", 0, "LIST", V_BUILD,
     "engines in the order placement tries them, e.g. vendor,aicore (= --option "
     "kiln.engine_priority=LIST)"},
    {"max-streams", 0, "N", V_BUILD,
     "at most N streams per graph: StreamAllocator merges each stream s >= N into the "
     "stream below N it shares the most edges with (= --option kiln.max_streams=N)"},
    {"cache-dir", 0, "DIR", V_COMPILE | V_OPT,
     "the model cache: reuse a model compiled before from DIR, store a new one (= --option "
     "kiln.cache_dir=DIR; docs/model_cache.md)"},
    {"max-memory", 0, "BYTES", V_RUN,
     "cap the runtime's buffers for one model (512M, 4G; default 3/4 of RAM)"},
    {"runtime", 0, "NAME", V_RUN,
     "the runtime to run on: sequential, multistream, ... (= --option kiln.runtime=NAME)"},
    {"trace", 0, "FILE.json", V_RUN,
     "write a Chrome trace of the runs (Perfetto, chrome://tracing): a row per stream, a "
     "slice per task, events as arrows"},
    {"json", 0, NULL, V_INFO, "print one JSON object instead of text"},
    {"enable-pass", 0, "RE", V_BUILD | V_MANIFEST,
     "enable the passes whose names match the PCRE2 pattern RE; repeatable"},
    {"disable-pass", 0, "RE", V_BUILD | V_MANIFEST,
     "disable the passes matching RE (never a required pass); repeatable"},
    {"pass-opt", 0, "P.K=V", V_BUILD | V_MANIFEST, "set option K of pass P to V; repeatable"},
    {"option", 0, "K=V", V_SESSION,
     "set session option K (kiln.runtime, kiln.input_shape.NAME, kiln.input_value.NAME, or a "
     "plugin's own key; an unknown kiln.* key is an error); repeatable"},
    {"verify-each", 0, NULL, V_BUILD, "verify the graph after every pass"},
    {"print-after", 0, "RE", V_BUILD, "print the graph (JSON) after each pass matching RE"},
    {"dump-dir", 0, "DIR", V_BUILD,
     "with --print-after: write NNN-STAGE-PASS.json and .dot to DIR instead of stderr"},
    {"time-passes", 0, NULL, V_BUILD, "print the time and counters of every pass"},
    {"stats", 0, NULL, V_BUILD, "print the passes' statistics (kiln: stat: lines; also -v)"},
    {"bisect-limit", 0, "N", V_BUILD,
     "run only the first N optional pass executions (-1: all), printing each decision"},
    {"report", 0, "FILE.json", V_BUILD,
     "write the compile report (passes, counters, explanations)"},
    {"report-buffers", 0, NULL, V_BUILD,
     "the report's memory_plan lists every buffer with its offset (= --option "
     "kiln.report_buffers=true)"},
    {"memory-svg", 0, "FILE.svg", V_BUILD,
     "draw the memory plan: offset against step, a rectangle per buffer (= --option "
     "kiln.memory_svg=FILE)"},
    {NULL, 'j', "N", V_ALL, "threads of the kernels (OpenMP, oneDNN, BLAS), 1 to 1024"},
    {NULL, 'q', NULL, V_ALL, "quiet: errors only"},
    {NULL, 'v', NULL, V_ALL, "verbose (repeatable): pass statistics, runtime timings"},
    {"help", 'h', NULL, V_ALL, "print this help and exit"},
    {"version", 0, NULL, V_ALL, "print kiln's version and plugin ABI version and exit"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const verb_help *find_verb(const char *verb)
{
    for (size_t i = 0; i < COUNT(verbs); i++)
        if (strcmp(verbs[i].verb, verb) == 0)
            return &verbs[i];
    return NULL;
}

bool kiln_cli_known_verb(const char *verb) { return find_verb(verb) != NULL; }

void kiln_cli_usage(FILE *f)
{
    fputs("usage: kiln VERB [options]\n       kiln --version | --help | help VERB\nverbs:\n", f);
    for (size_t i = 0; i < COUNT(verbs); i++)
        fprintf(f, "  %-10s %s\n", verbs[i].verb, verbs[i].summary);
    fputs("Run 'kiln help VERB' or 'kiln VERB --help' for a verb's options; 'man kiln' for all.\n"
          "Exit status: 0 success, 1 the work failed, 2 usage error.\n",
          f);
}

static void print_opt(FILE *f, const opt_help *o)
{
    char left[64];
    if (o->name && o->shortc)
        snprintf(left, sizeof(left), "-%c, --%s%s%s", o->shortc, o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "");
    else if (o->name)
        snprintf(left, sizeof(left), "    --%s%s%s", o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "");
    else
        snprintf(left, sizeof(left), "-%c%s%s", o->shortc, o->arg ? " " : "", o->arg ? o->arg : "");
    if (strlen(left) > 24)
        fprintf(f, "  %s\n  %-24s ", left, "");
    else
        fprintf(f, "  %-24s ", left);
    /* The text wrapped at 79 columns, continuation lines under its start. */
    const char *t = o->text;
    for (int first = 1; *t; first = 0) {
        size_t n = strlen(t), w = 79 - 27;
        if (n > w) {
            n = w;
            while (n > 0 && t[n] != ' ')
                n--;
            if (n == 0)
                n = strcspn(t, " ");
        }
        fprintf(f, "%*s%.*s\n", first ? 0 : 27, "", (int)n, t);
        t += n;
        while (*t == ' ')
            t++;
    }
}

int kiln_cli_help_verb(FILE *f, const char *verb)
{
    const verb_help *v = find_verb(verb);
    if (!v)
        return kiln_cli_unknown_verb(verb);
    fprintf(f, "usage: kiln %s\n%s.\n", v->synopsis, v->summary);
    if (v->details)
        fprintf(f, "\n%s", v->details);
    fputs("\noptions:\n", f);
    for (size_t i = 0; i < COUNT(opts); i++)
        if (opts[i].verbs & v->bit)
            print_opt(f, &opts[i]);
    return 0;
}

int kiln_cli_unknown_verb(const char *verb)
{
    const char *names[COUNT(verbs)];
    for (size_t i = 0; i < COUNT(verbs); i++)
        names[i] = verbs[i].verb;
    const char *hint = kiln_suggest(verb, names, (uint32_t)COUNT(verbs));
    if (hint)
        fprintf(stderr, "kiln: unknown verb '%s' (did you mean '%s'?)\n", verb, hint);
    else
        fprintf(stderr, "kiln: unknown verb '%s'\n", verb);
    fputs("run 'kiln help' for the list of verbs\n", stderr);
    return 2;
}

void kiln_cli_version(FILE *f)
{
    fprintf(f, "kiln %s\nplugin ABI %d.%d\n", KILN_VERSION_STRING, KILN_ABI_MAJOR, KILN_ABI_MINOR);
}

/* Every option the parser accepts: "--name" or "-c", one a line. */
static void list_parser_options(FILE *f)
{
    for (const struct option *o = kiln_cli_parser_longs; o && o->name; o++)
        fprintf(f, "--%s\n", o->name);
    for (const char *s = kiln_cli_parser_shorts; s && *s; s++)
        if (*s != ':')
            fprintf(f, "-%c\n", *s);
}

int kiln_cli_help(kiln_cli *c)
{
    if (c->npositional == 0) {
        kiln_cli_usage(stdout);
        return 0;
    }
    if (c->npositional > 1) {
        fprintf(stderr, "usage: kiln help [VERB]\n");
        return 2;
    }
    if (strcmp(c->positional[0], "--options") == 0) {
        list_parser_options(stdout);
        return 0;
    }
    return kiln_cli_help_verb(stdout, c->positional[0]);
}
