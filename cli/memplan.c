/*
 * memplan.c - `kiln memplan FILE.csv`: plan a buffer trace with a memory
 * planner and print the figures (docs/memory_planning.md).
 *
 * FILE is CSV `id,lower,upper,size` (MiniMalloc's format; a header line is
 * optional): buffer `id` is live over the half-open step range [lower,
 * upper) and needs `size` bytes.  The problem handed to the planner has
 * first_use = lower, last_use = upper - 1, alignment --alignment (default 1:
 * the traces are byte-exact) and capacity --capacity (default unbounded).
 * The plan is checked (kiln_mem_plan_check, inside kiln_session_mem_plan);
 * -o writes `id,offset` CSV atomically.  A malformed line is an error naming
 * FILE:LINE and the reason, exit status 1, nothing written.
 */
#include "cli.h"
#include <ctype.h>
#include <errno.h>
#include <time.h>

typedef struct trace {
    kiln_mem_block *b;
    char **id;
    uint32_t n, cap;
} trace;

static void trace_free(trace *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        free(t->id[i]);
    free(t->id);
    free(t->b);
    memset(t, 0, sizeof(*t));
}

/* The next comma-separated field of @p *s, trimmed, into @p out; false at the end. */
static bool field(char **s, char **out)
{
    if (!*s)
        return false;
    char *p = *s, *comma = strchr(p, ',');
    if (comma) {
        *comma = 0;
        *s = comma + 1;
    } else {
        *s = NULL;
    }
    while (isspace((unsigned char)*p))
        p++;
    char *e = p + strlen(p);
    while (e > p && isspace((unsigned char)e[-1]))
        *--e = 0;
    *out = p;
    return true;
}

/* A decimal integer in [lo, hi]; false when @p s is not one. */
static bool parse_int(const char *s, long long lo, long long hi, long long *v)
{
    char *end;
    if (!*s || !(isdigit((unsigned char)*s) || *s == '-'))
        return false;
    errno = 0;
    *v = strtoll(s, &end, 10);
    return !*end && !errno && *v >= lo && *v <= hi;
}

/* Add one buffer; false on out of memory. */
static bool trace_add(trace *t, const char *id, long long lower, long long upper, long long size)
{
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 1024;
        kiln_mem_block *b = realloc(t->b, cap * sizeof(*b));
        if (b)
            t->b = b;
        char **ids = b ? realloc(t->id, cap * sizeof(*ids)) : NULL;
        if (!ids)
            return false;
        t->id = ids;
        t->cap = cap;
    }
    if (!(t->id[t->n] = strdup(id)))
        return false;
    kiln_mem_block *b = &t->b[t->n];
    memset(b, 0, sizeof(*b));
    b->size = size;
    b->first_use = (uint32_t)lower;
    b->last_use = (uint32_t)(upper - 1);
    b->id = t->n++;
    return true;
}

#define TRACE_ERR(...) (kiln_errorf(err, KILN_ERR_PARSE, __VA_ARGS__))

/* Read FILE into @p t.  Errors name path:line and the reason. */
static kiln_status trace_read(const char *path, trace *t, kiln_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return kiln_errorf(err, KILN_ERR_IO, "%s: %s", path, strerror(errno));
    char line[4096];
    kiln_status st = KILN_OK;
    for (uint32_t ln = 1; st == KILN_OK && fgets(line, sizeof(line), f); ln++) {
        size_t len = strlen(line);
        if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
            st = TRACE_ERR("%s:%u: line longer than %zu bytes", path, ln, sizeof(line) - 2);
            break;
        }
        char *s = line, *fl[5];
        while (isspace((unsigned char)*s))
            s++;
        if (!*s)
            continue; /* blank line */
        uint32_t nf = 0;
        while (nf < 5 && field(&s, &fl[nf]))
            nf++;
        if (nf != 4) {
            st = TRACE_ERR("%s:%u: expected 4 fields id,lower,upper,size, found %s", path, ln,
                           nf > 4 ? "more" : nf == 3 ? "3" : nf == 2 ? "2" : "1");
            break;
        }
        if (ln == 1 && strcmp(fl[0], "id") == 0 && strcmp(fl[1], "lower") == 0)
            continue; /* the header */
        long long lower, upper, size;
        if (!*fl[0])
            st = TRACE_ERR("%s:%u: empty id", path, ln);
        else if (!parse_int(fl[1], 0, UINT32_MAX - 1, &lower))
            st = TRACE_ERR("%s:%u: lower '%s' is not an integer from 0 to %u", path, ln, fl[1],
                           UINT32_MAX - 1);
        else if (!parse_int(fl[2], 0, UINT32_MAX, &upper))
            st = TRACE_ERR("%s:%u: upper '%s' is not an integer from 0 to %u", path, ln, fl[2],
                           UINT32_MAX);
        else if (upper <= lower)
            st = TRACE_ERR("%s:%u: upper %lld is not above lower %lld (the range is [lower, "
                           "upper))", path, ln, upper, lower);
        else if (!parse_int(fl[3], 1, INT64_MAX / 4, &size))
            st = TRACE_ERR("%s:%u: size '%s' is not a positive integer", path, ln, fl[3]);
        else if (!trace_add(t, fl[0], lower, upper, size))
            st = kiln_errorf(err, KILN_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == KILN_OK && ferror(f))
        st = kiln_errorf(err, KILN_ERR_IO, "%s: read error", path);
    fclose(f);
    return st;
}

static kiln_status write_plan(FILE *f, void *ud, kiln_error *err)
{
    const trace *t = ud;
    fputs("id,offset\n", f);
    for (uint32_t i = 0; i < t->n; i++)
        fprintf(f, "%s,%lld\n", t->id[i], (long long)t->b[i].offset);
    if (ferror(f))
        return kiln_errorf(err, KILN_ERR_IO, "write error: %s", strerror(errno));
    return KILN_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int kiln_cli_memplan(kiln_cli *c)
{
    int rc = kiln_cli_need(c, 1, "one trace FILE.csv");
    if (rc)
        return rc;
    const kiln_cli_file in[] = {{"trace", c->positional[0], false},
                                {"manifest", c->manifest, false}};
    const kiln_cli_file out[] = {{"-o", c->output, false}};
    if ((rc = kiln_cli_check_files(c, in, 2, out, 1)))
        return rc;
    kiln_cli_session s;
    trace t = {0};
    rc = 1;
    if (!kiln_cli_session_begin(c, &s))
        goto out;
    if (trace_read(c->positional[0], &t, s.err) != KILN_OK) {
        kiln_cli_fail(s.err);
        goto out;
    }
    kiln_mem_problem p;
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.block_count = t.n;
    p.blocks = t.b;
    p.capacity = c->memplan_capacity;
    p.alignment = c->memplan_alignment ? (uint32_t)c->memplan_alignment : 1;
    p.stream_count = 1;
    p.memory_type = "trace";
    for (uint32_t i = 0; i < t.n; i++)
        if (t.b[i].last_use + 1 > p.step_count)
            p.step_count = t.b[i].last_use + 1;
    int64_t load = kiln_mem_problem_load(&p), peak = 0;
    double t0 = now_ms();
    kiln_status st = kiln_session_mem_plan(s.s, c->memplan_planner, c->planner_opts,
                                           c->nplanner_opts, &p, &peak, s.err);
    double ms = now_ms() - t0;
    if (st != KILN_OK) {
        kiln_error_push(s.err, "%s", c->positional[0]);
        kiln_cli_fail(s.err);
        goto out;
    }
    if (c->output && kiln_output_write(c->output, write_plan, &t, s.err) != KILN_OK) {
        kiln_error_push(s.err, "-o %s", c->output);
        kiln_cli_fail(s.err);
        goto out;
    }
    if (c->verbosity >= 0) {
        printf("trace      %s\n", c->positional[0]);
        const char *pl = c->memplan_planner ? c->memplan_planner
                                             : kiln_session_option(s.s, "kiln.memory_planner");
        printf("planner    %s\n", pl && pl[0] ? pl : "kiln");
        printf("buffers    %u\n", t.n);
        printf("peak       %lld\n", (long long)peak);
        printf("LOAD       %lld\n", (long long)load);
        printf("peak/LOAD  %.4f\n", load > 0 ? (double)peak / (double)load : 1.0);
        printf("time       %.1f ms\n", ms);
    }
    rc = 0;
out:
    trace_free(&t);
    kiln_cli_session_end(&s);
    return rc;
}
