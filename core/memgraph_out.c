/*
 * memgraph_out.c - the memory plan's outputs: the report's `memory_plan`
 * object and the `--memory-svg` picture (docs/outputs.md,
 * docs/memory_planning.md).  Both read the graph only: the figures from the
 * root attributes MemoryAssigner writes, the buffers through
 * kiln__memgraph_read.
 */
#include "memgraph.h"
#include "fileio.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const int64_t *root_list(kiln_graph *root, const char *key, uint32_t *n)
{
    const int64_t *v = NULL;
    *n = 0;
    kiln_attrs_get_list_int(kiln_graph_attrs(root), key, &v, n);
    return v;
}

static int64_t at(const int64_t *v, uint32_t n, uint32_t i) { return v && i < n ? v[i] : 0; }

static json_t *buffer_json(kiln_graph *root, const kiln_mg_buf *b)
{
    char name[256];
    kiln__memgraph_name(root, b, name, sizeof name);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "kind", json_string(b->sym == KILN_SYMTAB_NONE ? "workspace"
                                               : b->isolation          ? "isolation_copy"
                                                                       : "tensor"));
    json_object_set_new(o, "offset", json_integer(b->offset));
    json_object_set_new(o, "size", json_integer(b->end - b->offset));
    json_object_set_new(o, "first", json_integer(b->first));
    json_object_set_new(o, "last", json_integer(b->last));
    json_object_set_new(o, "stream", json_integer(b->stream));
    return o;
}

json_t *kiln__memgraph_report(kiln_graph *root, double pass_ms)
{
    if (!kiln__memgraph_planned(root))
        return json_null();
    const kiln_attrs *ra = kiln_graph_attrs(root);
    const char *planner = "";
    kiln_attrs_get_string(ra, "_kiln_memory_planner", &planner);
    const char *const *types = NULL;
    uint32_t nt = 0, ns, nl, nb, nd;
    kiln_attrs_get_list_string(ra, "_kiln_memory_types", &types, &nt);
    const int64_t *sizes = root_list(root, "_kiln_memory_sizes", &ns);
    const int64_t *loads = root_list(root, "_kiln_memory_loads", &nl);
    const int64_t *bufs = root_list(root, "_kiln_memory_buffers", &nb);
    const int64_t *dyn = root_list(root, "_kiln_memory_dynamic", &nd);
    bool want = false;
    kiln_attrs_get_bool(ra, "_kiln_memory_report_buffers", &want);
    kiln_memgraph mg = {0};
    bool have = want && kiln__memgraph_read(root, &mg, NULL) == KILN_OK;
    json_t *doc = json_object();
    for (uint32_t t = 0; t < nt; t++) {
        json_t *o = json_object();
        int64_t size = at(sizes, ns, t), load = at(loads, nl, t);
        json_object_set_new(o, "size", json_integer(size));
        json_object_set_new(o, "load", json_integer(load));
        json_object_set_new(o, "ratio", json_real(load > 0 ? (double)size / (double)load : 1.0));
        json_object_set_new(o, "planner", json_string(planner));
        json_object_set_new(o, "time_ms", json_real(pass_ms));
        json_object_set_new(o, "buffers", json_integer(at(bufs, nb, t)));
        json_object_set_new(o, "dynamic", json_integer(at(dyn, nd, t)));
        int64_t nsub = 0, ssize = 0, sload = 0, sbufs = 0;
        if (strcmp(types[t], "HBM") == 0 &&
            kiln_attrs_get_int(ra, "_kiln_memory_subgraphs", &nsub)) {
            /* the subgraphs' own plans (MemoryAssigner, ma_subgraphs.c): totals */
            kiln_attrs_get_int(ra, "_kiln_memory_subgraph_sizes", &ssize);
            kiln_attrs_get_int(ra, "_kiln_memory_subgraph_loads", &sload);
            kiln_attrs_get_int(ra, "_kiln_memory_subgraph_buffers", &sbufs);
            json_t *so = json_object();
            json_object_set_new(so, "planned", json_integer(nsub));
            json_object_set_new(so, "size", json_integer(ssize));
            json_object_set_new(so, "load", json_integer(sload));
            json_object_set_new(so, "buffers", json_integer(sbufs));
            json_object_set_new(o, "subgraphs", so);
        }
        if (have) {
            json_t *list = json_array();
            for (uint32_t i = 0; i < mg.nbufs; i++)
                if (strcmp(mg.types[mg.bufs[i].type], types[t]) == 0)
                    json_array_append_new(list, buffer_json(root, &mg.bufs[i]));
            json_object_set_new(o, "buffer_list", list);
        }
        json_object_set_new(doc, types[t], o);
    }
    kiln__memgraph_free(&mg);
    return doc;
}

/* ---- SVG ---------------------------------------------------------------- */

typedef struct svg_job {
    kiln_graph *root;
    kiln_memgraph *mg;
} svg_job;

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                                      "#edc948", "#9c755f", "#ff9da7", "#bab0ac", "#e15759"};

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

enum { W = 1000, PANEL_H = 420, MARGIN = 60 };

static void svg_panel(FILE *f, svg_job *j, uint32_t t, double y0)
{
    kiln_memgraph *mg = j->mg;
    /* the steps where some buffer of the type lives (Const/Data steps come first) */
    int64_t top = 1;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t i = 0; i < mg->nbufs; i++)
        if (mg->bufs[i].type == t) {
            top = mg->bufs[i].end > top ? mg->bufs[i].end : top;
            lo = mg->bufs[i].first < lo ? mg->bufs[i].first : lo;
            hi = mg->bufs[i].last > hi ? mg->bufs[i].last : hi;
        }
    if (lo > hi)
        lo = hi = 0;
    double sx = (W - 2.0 * MARGIN) / (double)(hi - lo + 1);
    double sy = (PANEL_H - 2.0 * MARGIN) / (double)top;
    fprintf(f, "<g><text x=\"%d\" y=\"%.1f\" font-size=\"14\">%s: %lld bytes, steps %u..%u"
               "</text>\n",
            MARGIN, y0 + 20, mg->types[t], (long long)top, lo, hi);
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#333\"/>\n",
            MARGIN, y0 + MARGIN, W - 2 * MARGIN, PANEL_H - 2 * MARGIN);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">step</text>"
               "<text x=\"4\" y=\"%.1f\" font-size=\"11\">offset</text>\n",
            W / 2, y0 + PANEL_H - MARGIN + 16, y0 + MARGIN + 10);
    for (uint32_t i = 0; i < mg->nbufs; i++) {
        const kiln_mg_buf *b = &mg->bufs[i];
        if (b->type != t || b->end <= b->offset)
            continue;
        char name[256];
        kiln__memgraph_name(j->root, b, name, sizeof name);
        double h = (double)(b->end - b->offset) * sy;
        const char *fill = b->stream < 0 ? "#999999" : palette[(uint32_t)b->stream % 10];
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
                   "fill-opacity=\"0.7\" stroke=\"%s\" stroke-width=\"%s\"%s>",
                MARGIN + (b->first - lo) * sx, y0 + MARGIN + (double)b->offset * sy,
                (b->last - b->first + 1) * sx, h < 0.5 ? 0.5 : h, fill,
                b->isolation ? "#d62728" : "#222", b->isolation ? "2" : "0.3",
                b->isolation ? " class=\"isolation\"" : "");
        fputs("<title>", f);
        xml_text(f, name);
        fprintf(f, ": offset %lld, %lld bytes, steps %u..%u, stream %d%s%s</title></rect>\n",
                (long long)b->offset, (long long)(b->end - b->offset), b->first, b->last,
                b->stream, b->sym == KILN_SYMTAB_NONE ? ", workspace" : "",
                b->isolation ? ", conflict-isolation copy" : "");
    }
    fputs("</g>\n", f);
}

static kiln_status write_svg(FILE *f, void *ud, kiln_error *err)
{
    svg_job *j = ud;
    uint32_t panels = j->mg->ntypes ? j->mg->ntypes : 1;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%u\" "
               "font-family=\"sans-serif\">\n<title>memory plan of ",
            W, panels * PANEL_H + 40);
    xml_text(f, kiln_graph_name(j->root));
    fputs("</title>\n", f);
    for (uint32_t t = 0; t < j->mg->ntypes; t++)
        svg_panel(f, j, t, t * (double)PANEL_H);
    fprintf(f, "<text x=\"%d\" y=\"%u\" font-size=\"11\">colour: stream (grey: none); red "
               "outline: conflict-isolation copy</text>\n</svg>\n",
            MARGIN, panels * PANEL_H + 25);
    if (ferror(f))
        return kiln_errorf(err, KILN_ERR_IO, "cannot write the memory picture");
    return KILN_OK;
}

kiln_status kiln__memgraph_svg(kiln_graph *root, const char *path, kiln_error *err)
{
    if (!kiln__memgraph_planned(root))
        return kiln_errorf(err, KILN_ERR_INVALID,
                           "--memory-svg %s: the graph has no memory plan (MemoryAssigner did "
                           "not run)",
                           path);
    kiln_memgraph mg;
    kiln_status st = kiln__memgraph_read(root, &mg, err);
    if (st != KILN_OK)
        return kiln_error_push(err, "--memory-svg %s", path);
    svg_job j = {root, &mg};
    st = kiln_file_write_atomic(path, write_svg, &j, err);
    kiln__memgraph_free(&mg);
    return st;
}
