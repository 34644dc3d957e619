/*
 * main.c - the kiln command line (docs: ../shared CLI contract, README).
 *
 *   kiln compile MODEL [-m MANIFEST] -o OUT      full pipeline
 *   kiln opt MODEL --passes LIST -o OUT           only the named passes
 *   kiln run MODEL ...                            execute (needs a runtime plugin)
 *   kiln plugins [-m MANIFEST] [NAME]             list / describe components
 *   kiln manifest check MANIFEST                  validate, print resolved pipeline
 *   kiln convert IN OUT                           between .json, .dot, plugin formats
 *   kiln lint MODEL                               GraphLint only (warnings, exit 0)
 *   kiln info MODEL [--json]                      inputs, outputs, opsets, ops, engines
 *   kiln memplan TRACE.csv [-o PLAN.csv]          plan a buffer trace (memplan.c)
 *   kiln help [VERB], kiln VERB --help, kiln --version   (help.c)
 *
 * Exit status: 0 success, 1 the work failed (message names file/pass/plugin),
 * 2 usage error.  Outputs are written atomically: never a partial file.
 */
#include "cli.h"
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>

enum {
    OPT_ENABLE = 256, OPT_DISABLE, OPT_PASS_OPT, OPT_OPTION, OPT_VERIFY, OPT_PRINT_AFTER,
    OPT_DUMP_DIR, OPT_TIME, OPT_REPORT, OPT_BUILD_MODE, OPT_BUILD_STEP, OPT_TUNER, OPT_RESUME,
    OPT_PASSES, OPT_BISECT, OPT_INPUT, OPT_OUTPUT_DIR, OPT_REPEAT,
    OPT_VERSION, OPT_JSON, OPT_INPUT_SHAPE, OPT_OUTPUT_FORMAT, OPT_MAX_MEMORY, OPT_THREADS,
    OPT_ENGINE_PRIORITY,
    OPT_FORMAT, OPT_INPUT_FORMAT, OPT_STATS, OPT_PLUGIN,
    OPT_PLANNER, OPT_ALIGNMENT, OPT_CAPACITY, OPT_PLANNER_OPT,
    OPT_MAX_STREAMS, OPT_CACHE_DIR, OPT_MEMORY_SVG, OPT_REPORT_BUFFERS, OPT_RUNTIME, OPT_TRACE
};

/* --pass-opt PASS.KEY=VALUE and --option KEY=VALUE: false (after saying so,
 * a usage error) when @p v is not of that shape. */
static bool well_formed(const char *v, bool pass_opt)
{
    const char *eq = strchr(v, '='), *dot = pass_opt ? strchr(v, '.') : NULL;
    bool ok = eq && eq != v && (size_t)(eq - v) < 512 && strlen(v) < 1024;
    if (pass_opt)
        ok = ok && dot && dot != v && dot + 1 < eq;
    if (!ok)
        fprintf(stderr, "kiln: %s expects %s, got '%s'\n", pass_opt ? "--pass-opt" : "--option",
                pass_opt ? "PASS.KEY=VALUE" : "KEY=VALUE", v);
    return ok;
}

/* Append @p v to a repeatable option's list; false (after saying so) when full. */
static bool list_add(const char **list, uint32_t *n, const char *v, const char *opt)
{
    if (*n >= KILN_CLI_MAX_LIST) {
        fprintf(stderr, "kiln: at most %d %s arguments\n", KILN_CLI_MAX_LIST, opt);
        return false;
    }
    list[(*n)++] = v;
    return true;
}

/* --option K=V: an unknown kiln.* key is a usage error with a suggestion. */
static bool check_option_key(const char *arg)
{
    char key[512];
    const char *eq = strchr(arg, '='), *hint;
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    snprintf(key, sizeof(key), "%.*s", (int)(n < sizeof(key) ? n : sizeof(key) - 1), arg);
    if (kiln_option_key_known(key, &hint))
        return true;
    fprintf(stderr, "kiln: --option %s: unknown option '%s'%s%s%s (" KILN_CLI_KNOWN_KEYS ")\n",
            arg, key, hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
    return false;
}

/* "4G", "512M", "65536": a byte count with an optional binary suffix K M G T
 * (also KB/KiB, ...); false unless it is a positive count that fits int64. */
static bool parse_bytes(const char *s, int64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || v == 0 || v > INT64_MAX)
        return false;
    int shift = 0;
    const char *units = "KMGT";
    const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    if (u) {
        shift = 10 * (int)(u - units + 1);
        end++;
        if (*end == 'i' && end[1] == 'B')
            end += 2;
        else if (*end == 'B' || *end == 'b')
            end++;
    } else if (*end == 'B' || *end == 'b') {
        end++;
    }
    if (*end || v > (unsigned long long)INT64_MAX >> shift)
        return false;
    *out = (int64_t)(v << shift);
    return true;
}

static int parse_args(int argc, char **argv, kiln_cli *c)
{
    static const struct option longs[] = {
        {"manifest", required_argument, 0, 'm'},  {"output", required_argument, 0, 'o'},
        {"enable-pass", required_argument, 0, OPT_ENABLE},
        {"disable-pass", required_argument, 0, OPT_DISABLE},
        {"pass-opt", required_argument, 0, OPT_PASS_OPT},
        {"option", required_argument, 0, OPT_OPTION},
        {"verify-each", no_argument, 0, OPT_VERIFY},
        {"print-after", required_argument, 0, OPT_PRINT_AFTER},
        {"dump-dir", required_argument, 0, OPT_DUMP_DIR},
        {"time-passes", no_argument, 0, OPT_TIME},
        {"report", required_argument, 0, OPT_REPORT},
        {"build-mode", required_argument, 0, OPT_BUILD_MODE},
        {"build-step", required_argument, 0, OPT_BUILD_STEP},
        {"tuner", required_argument, 0, OPT_TUNER},
        {"resume", required_argument, 0, OPT_RESUME},
        {"passes", required_argument, 0, OPT_PASSES},
        {"bisect-limit", required_argument, 0, OPT_BISECT},
        {"input", required_argument, 0, OPT_INPUT},
        {"output-dir", required_argument, 0, OPT_OUTPUT_DIR},
        {"repeat", required_argument, 0, OPT_REPEAT},
        {"max-memory", required_argument, 0, OPT_MAX_MEMORY},
        {"format", required_argument, 0, OPT_FORMAT},
        {"input-format", required_argument, 0, OPT_INPUT_FORMAT},
        {"stats", no_argument, 0, OPT_STATS},
        {"plugin", required_argument, 0, OPT_PLUGIN},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, OPT_VERSION},
        {"json", no_argument, 0, OPT_JSON},
        {"input-shape", required_argument, 0, OPT_INPUT_SHAPE},
        {"threads", required_argument, 0, OPT_THREADS},
        {"engine-priority", required_argument, 0, OPT_ENGINE_PRIORITY},
        {"max-streams", required_argument, 0, OPT_MAX_STREAMS},
        {"output-format", required_argument, 0, OPT_OUTPUT_FORMAT},
        {"planner", required_argument, 0, OPT_PLANNER},
        {"alignment", required_argument, 0, OPT_ALIGNMENT},
        {"capacity", required_argument, 0, OPT_CAPACITY},
        {"planner-opt", required_argument, 0, OPT_PLANNER_OPT},
        {"cache-dir", required_argument, 0, OPT_CACHE_DIR},
        {"memory-svg", required_argument, 0, OPT_MEMORY_SVG},
        {"report-buffers", no_argument, 0, OPT_REPORT_BUFFERS},
        {"runtime", required_argument, 0, OPT_RUNTIME},
        {"trace", required_argument, 0, OPT_TRACE},
        {0, 0, 0, 0}};
    static const char shorts[] = "m:o:j:qvh";
    kiln_cli_parser_longs = longs; /* help.c lists and documents them */
    kiln_cli_parser_shorts = shorts;
    int ch;
    optind = 2; /* argv[1] is the verb */
    while ((ch = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        switch (ch) {
        case 'm': c->manifest = optarg; break;
        case 'o': c->output = optarg; break;
        case 'j': {
            char *end;
            long j = strtol(optarg, &end, 10);
            if (*end || j < 1 || j > 1024) {
                fprintf(stderr, "kiln: -j expects an integer from 1 to 1024\n");
                return 2;
            }
            c->jobs = (int)j;
            break;
        }
        case 'q': c->verbosity = -1; break;
        case 'v': c->verbosity++; break;
        case 'h': exit(kiln_cli_help_verb(stdout, c->verb));
        case OPT_VERSION: kiln_cli_version(stdout); exit(0);
        case OPT_JSON: c->json = true; break;
        case OPT_INPUT_SHAPE: {
            int64_t dims[32];
            uint32_t rank;
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || kiln_cli_parse_dims(eq + 1, dims, 32, &rank) != KILN_OK) {
                fprintf(stderr, "kiln: --input-shape expects NAME=DIMS with DIMS like 1x3x640x640 "
                                "(at most 32 dims), got '%s'\n", optarg);
                return 2;
            }
            if (!list_add(c->input_shapes, &c->ninput_shapes, optarg, "--input-shape"))
                return 2;
            break;
        }
        case OPT_OUTPUT_FORMAT:
            if (strcmp(optarg, "raw") != 0 && strcmp(optarg, "npy") != 0) {
                fprintf(stderr, "kiln: --output-format expects raw or npy, got '%s'\n", optarg);
                return 2;
            }
            c->output_format = optarg;
            break;
        case OPT_ENABLE:
        case OPT_DISABLE:
            if (!list_add(c->selectors, &c->nselectors, optarg, "--enable-pass/--disable-pass"))
                return 2;
            c->selector_enable[c->nselectors - 1] = ch == OPT_ENABLE;
            break;
        case OPT_PASS_OPT:
            if (!well_formed(optarg, true) ||
                !list_add(c->pass_opts, &c->npass_opts, optarg, "--pass-opt"))
                return 2;
            break;
        case OPT_OPTION:
            if (!well_formed(optarg, false) ||
                !list_add(c->session, &c->nsession, optarg, "--option"))
                return 2;
            if (!check_option_key(optarg))
                return 2;
            break;
        case OPT_THREADS: { /* sugar for --option kiln.threads=N (docs/threads.md) */
            static char kv[64];
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (!*optarg || *end || errno || v > 256) {
                fprintf(stderr, "kiln: --threads expects 0 (one per core, up to 16) or 1..256, "
                                "got '%s'\n", optarg);
                return 2;
            }
            snprintf(kv, sizeof(kv), "kiln.threads=%lu", v);
            if (!list_add(c->session, &c->nsession, kv, "--threads"))
                return 2;
            break;
        }
        case OPT_MAX_STREAMS: { /* sugar for --option kiln.max_streams=N (docs/streams.md) */
            static char kv[64];
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (!*optarg || *end || errno || v < 1 || v > 1000000) {
                fprintf(stderr, "kiln: --max-streams expects a positive number of streams, "
                                "got '%s'\n", optarg);
                return 2;
            }
            snprintf(kv, sizeof(kv), "kiln.max_streams=%lu", v);
            if (!list_add(c->session, &c->nsession, kv, "--max-streams"))
                return 2;
            break;
        }
        case OPT_ENGINE_PRIORITY: { /* sugar for --option kiln.engine_priority=LIST */
            static char kv[1024];
            if (!*optarg || strlen(optarg) >= sizeof(kv) - 32) {
                fprintf(stderr, "kiln: --engine-priority expects a comma-separated list of "
                                "engine names\n");
                return 2;
            }
            snprintf(kv, sizeof(kv), "kiln.engine_priority=%s", optarg);
            if (!list_add(c->session, &c->nsession, kv, "--engine-priority"))
                return 2;
            break;
        }
        case OPT_CACHE_DIR: { /* sugar for --option kiln.cache_dir=DIR (docs/model_cache.md) */
            static char kv[4200];
            if (!*optarg || strlen(optarg) >= sizeof(kv) - 32) {
                fprintf(stderr, "kiln: --cache-dir expects a directory\n");
                return 2;
            }
            snprintf(kv, sizeof(kv), "kiln.cache_dir=%s", optarg);
            if (!list_add(c->session, &c->nsession, kv, "--cache-dir"))
                return 2;
            break;
        }
        case OPT_MEMORY_SVG: { /* sugar for --option kiln.memory_svg=FILE */
            static char kv[4096 + 32];
            if (!*optarg || strlen(optarg) >= 4096) {
                fprintf(stderr, "kiln: --memory-svg expects a file name\n");
                return 2;
            }
            snprintf(kv, sizeof(kv), "kiln.memory_svg=%s", optarg);
            if (!list_add(c->session, &c->nsession, kv, "--memory-svg"))
                return 2;
            break;
        }
        case OPT_REPORT_BUFFERS: /* sugar for --option kiln.report_buffers=true */
            if (!list_add(c->session, &c->nsession, "kiln.report_buffers=true",
                          "--report-buffers"))
                return 2;
            break;
        case OPT_RUNTIME: { /* sugar for --option kiln.runtime=NAME */
            static char kv[256 + 32];
            if (!*optarg || strlen(optarg) >= 256 || strchr(optarg, '=')) {
                fprintf(stderr, "kiln: --runtime expects a runtime name (kiln plugins lists "
                                "them), not '%s'\n", optarg);
                return 2;
            }
            snprintf(kv, sizeof(kv), "kiln.runtime=%s", optarg);
            if (!list_add(c->session, &c->nsession, kv, "--runtime"))
                return 2;
            break;
        }
        case OPT_TRACE: c->trace = optarg; break;
        case OPT_INPUT:
            if (!list_add(c->inputs, &c->ninputs, optarg, "--input"))
                return 2;
            break;
        case OPT_VERIFY: c->verify_each = true; break;
        case OPT_PRINT_AFTER: c->print_after = optarg; break;
        case OPT_DUMP_DIR: c->dump_dir = optarg; break;
        case OPT_TIME: c->time_passes = true; break;
        case OPT_REPORT: c->report = optarg; break;
        case OPT_BUILD_MODE: c->build_mode = optarg; break;
        case OPT_BUILD_STEP: c->build_step = optarg; break;
        case OPT_TUNER: c->tuner = optarg; break;
        case OPT_RESUME: c->resume = optarg; break;
        case OPT_PASSES: c->passes = optarg; break;
        case OPT_OUTPUT_DIR: c->output_dir = optarg; break;
        case OPT_FORMAT: c->format = optarg; break;
        case OPT_INPUT_FORMAT: c->input_format = optarg; break;
        case OPT_STATS: c->stats = true; break;
        case OPT_PLUGIN:
            if (!list_add(c->plugins, &c->nplugins, optarg, "--plugin"))
                return 2;
            break;
        case OPT_REPEAT: {
            char *end;
            long r = strtol(optarg, &end, 10);
            if (*end || r < 1 || r > 100000) {
                fprintf(stderr, "kiln: --repeat expects an integer from 1 to 100000\n");
                return 2;
            }
            c->repeat = (int)r;
            break;
        }
        case OPT_MAX_MEMORY:
            if (!parse_bytes(optarg, &c->max_memory)) {
                fprintf(stderr, "kiln: --max-memory expects a positive byte count such as "
                                "1073741824, 512M or 4G, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_PLANNER: c->memplan_planner = optarg; break;
        case OPT_ALIGNMENT:
            if (!parse_bytes(optarg, &c->memplan_alignment) || c->memplan_alignment > (1 << 30) ||
                (c->memplan_alignment & (c->memplan_alignment - 1)) != 0) {
                fprintf(stderr, "kiln: --alignment expects a power of two up to 1G, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_CAPACITY:
            if (!parse_bytes(optarg, &c->memplan_capacity)) {
                fprintf(stderr, "kiln: --capacity expects a positive byte count such as "
                                "1048576, 512M or 4G, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_PLANNER_OPT:
            if (!strchr(optarg, '=') || optarg[0] == '=') {
                fprintf(stderr, "kiln: --planner-opt expects KEY=VALUE, got '%s'\n", optarg);
                return 2;
            }
            if (!list_add(c->planner_opts, &c->nplanner_opts, optarg, "--planner-opt"))
                return 2;
            break;
        case OPT_BISECT: {
            char *end;
            c->bisect_limit = strtoll(optarg, &end, 10);
            if (*end || c->bisect_limit < -1) {
                fprintf(stderr, "kiln: --bisect-limit expects an integer >= -1\n");
                return 2;
            }
            c->has_bisect = true;
            break;
        }
        default:
            fprintf(stderr, "run 'kiln help %s' for its options\n", c->verb);
            return 2;
        }
    }
    for (int i = optind; i < argc; i++)
        if (!list_add(c->positional, &c->npositional, argv[i], "positional"))
            return 2;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        kiln_cli_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        kiln_cli_version(stdout);
        return 0;
    }
    kiln_cli c;
    memset(&c, 0, sizeof(c));
    c.verb = argv[1];
    c.bisect_limit = -1;
    if (!kiln_cli_known_verb(c.verb))
        return kiln_cli_unknown_verb(c.verb);
    /* `kiln help` takes words, not options (kiln help --options). */
    bool help = strcmp(c.verb, "help") == 0;
    int rc = parse_args(help ? 2 : argc, argv, &c);
    for (int i = 2; help && i < argc; i++)
        if (!list_add(c.positional, &c.npositional, argv[i], "positional"))
            return 2;
    if (rc)
        return rc;
    if (c.jobs > 0) {
        /* The parallel work is the kernels': OpenBLAS's pool, and the OpenMP
         * pool (libgomp) that oneDNN and the vector and aicore kernels share
         * (docs/threads.md).  Both fix their thread count when they load,
         * which happens after this point. */
        char buf[16];
        snprintf(buf, sizeof(buf), "%d", c.jobs);
        setenv("OPENBLAS_NUM_THREADS", buf, 1);
        setenv("OMP_NUM_THREADS", buf, 1);
    } else if (strcmp(c.verb, "run") != 0 && !getenv("OPENBLAS_NUM_THREADS")) {
        /* Only `kiln run` runs kernels in bulk; the other verbs at most fold
         * a few constants.  OpenBLAS starts its thread pool when it loads
         * and the pool spins (sched_yield) for a while after each call:
         * one thread unless -j or the environment says otherwise. */
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
    }
    if (!getenv("OMP_WAIT_POLICY")) {
        /* The OpenMP workers sleep between parallel regions instead of
         * spinning, for `run` too: libgomp's default spin (and shorter ones,
         * GOMP_SPINCOUNT 3000 to 300000) made `run -j 2` up to 3x slower
         * than PASSIVE whenever another process was busy on the machine (a
         * region waits for a descheduled spinner; OpenBLAS's threads spin
         * too), and won at best 30% on an idle one (docs/threads.md, "The
         * wait policy").  GOMP_SPINCOUNT, when set, still overrides it. */
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    }
    if (c.jobs <= 0 && strcmp(c.verb, "run") != 0 && !getenv("OMP_NUM_THREADS")) {
        /* The same for oneDNN (the aicore Conv kernels): its OpenMP pool
         * starts with the first kernel a verb folds with. */
        setenv("OMP_NUM_THREADS", "1", 1);
    }
    /* The plugins stay mapped until the process ends: dlclose at session end
     * would run their destructors and unmap them, which exit does anyway
     * (about 0.8 ms of a small compile); a leak report then also still
     * resolves the plugins' symbols. */
    setenv("KILN_NO_DLCLOSE", "1", 0);
    if (strcmp(c.verb, "run") != 0 && !getenv("MALLOC_MMAP_THRESHOLD_") &&
        !getenv("MALLOC_TRIM_THRESHOLD_") && !getenv("GLIBC_TUNABLES")) {
        /* A build verb is one short process that copies a model's weights a
         * few times (the file, the import, the partitions, the merged blob,
         * the output text): freed blocks stay in the heap for the next copy
         * instead of going back to the kernel, which charges a page fault
         * per 4 KiB to hand them out again (a 10 MB OCR model: 14.4k -> 9.6k
         * faults).  `run` keeps glibc's defaults: its peak RSS is measured. */
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, 256 << 20);
    }
    kiln_crash_handlers_install();
    kiln_output_cleanup_on_signals(); /* no temporary survives SIGINT/SIGTERM */
    static const struct {
        const char *verb;
        int (*fn)(kiln_cli *);
    } verbs[] = {{"compile", kiln_cli_compile}, {"opt", kiln_cli_opt},
                 {"run", kiln_cli_run},         {"plugins", kiln_cli_plugins},
                 {"manifest", kiln_cli_manifest}, {"convert", kiln_cli_convert},
                 {"lint", kiln_cli_lint},       {"info", kiln_cli_info},
                 {"memplan", kiln_cli_memplan}, {"help", kiln_cli_help}};
    for (unsigned i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(verbs[i].verb, c.verb) == 0)
            return verbs[i].fn(&c);
    return kiln_cli_unknown_verb(c.verb);
}
