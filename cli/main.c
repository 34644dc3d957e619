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
 *
 * Exit status: 0 success, 1 the work failed (message names file/pass/plugin),
 * 2 usage error.  Outputs are written atomically: never a partial file.
 */
#include "cli.h"
#include "fileio.h"
#include <getopt.h>

static void usage(FILE *f)
{
    fputs("usage: kiln <verb> [options]\n"
          "verbs:\n"
          "  compile MODEL [-m MANIFEST] -o OUT   run the manifest's full pipeline\n"
          "                                       (MODEL or OUT '-': standard input/output)\n"
          "  compile --resume STATE -o OUT        continue a paused (tuning) build\n"
          "  opt MODEL --passes LIST -o OUT       run only the named passes, in order\n"
          "  run MODEL [--input NAME=FILE]... [--output-dir DIR] [--repeat N]\n"
          "  plugins [-m MANIFEST] [NAME]         list plugins and components\n"
          "  manifest check MANIFEST              validate and print the resolved pipeline\n"
          "  convert IN OUT                       convert between formats by extension\n"
          "  lint MODEL                           GraphLint warnings only\n"
          "common options: -m FILE, --enable-pass RE, --disable-pass RE, --pass-opt P.K=V,\n"
          "  --option K=V, --verify-each, --print-after RE, --dump-dir DIR, --time-passes,\n"
          "  --bisect-limit N, --report FILE.json, --build-mode tuning --build-step STEP,\n"
          "  --tuner NAME, --format FMT (json, dot, onnx: OUT's format), --input-format FMT,\n"
          "  --stats, -j N, -q, -v\n",
          f);
}

enum {
    OPT_ENABLE = 256, OPT_DISABLE, OPT_PASS_OPT, OPT_OPTION, OPT_VERIFY, OPT_PRINT_AFTER,
    OPT_DUMP_DIR, OPT_TIME, OPT_REPORT, OPT_BUILD_MODE, OPT_BUILD_STEP, OPT_TUNER, OPT_RESUME,
    OPT_PASSES, OPT_BISECT, OPT_INPUT, OPT_OUTPUT_DIR, OPT_REPEAT, OPT_FORMAT, OPT_INPUT_FORMAT,
    OPT_STATS
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
        {"format", required_argument, 0, OPT_FORMAT},
        {"input-format", required_argument, 0, OPT_INPUT_FORMAT},
        {"stats", no_argument, 0, OPT_STATS},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int ch;
    optind = 2; /* argv[1] is the verb */
    while ((ch = getopt_long(argc, argv, "m:o:j:qvh", longs, NULL)) != -1) {
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
        case 'h': usage(stdout); exit(0);
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
            break;
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
        default: usage(stderr); return 2;
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
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    kiln_cli c;
    memset(&c, 0, sizeof(c));
    c.verb = argv[1];
    c.bisect_limit = -1;
    int rc = parse_args(argc, argv, &c);
    if (rc)
        return rc;
    if (c.jobs > 0) {
        /* The parallel work is the CPU kernels' BLAS calls: their thread
         * count is fixed when the engine plugin (and OpenBLAS) is loaded,
         * which happens after this point. */
        char buf[16];
        snprintf(buf, sizeof(buf), "%d", c.jobs);
        setenv("OPENBLAS_NUM_THREADS", buf, 1);
        setenv("OMP_NUM_THREADS", buf, 1);
    }
    kiln_crash_handlers_install();
    kiln_file_cleanup_on_signals(); /* no temporary survives SIGINT/SIGTERM */
    static const struct {
        const char *verb;
        int (*fn)(kiln_cli *);
    } verbs[] = {{"compile", kiln_cli_compile}, {"opt", kiln_cli_opt},
                 {"run", kiln_cli_run},         {"plugins", kiln_cli_plugins},
                 {"manifest", kiln_cli_manifest}, {"convert", kiln_cli_convert},
                 {"lint", kiln_cli_lint}};
    for (unsigned i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(verbs[i].verb, c.verb) == 0)
            return verbs[i].fn(&c);
    fprintf(stderr, "kiln: unknown verb '%s'\n", c.verb);
    usage(stderr);
    return 2;
}
