/*
 * graph_ctrl.c - control edges: records {src, dst} in a pool with a free list,
 * threaded into the source's out-list and the destination's in-list (doubly
 * linked, circular prev: O(1) append and unlink, creation-order iteration).
 * Adding checks for an existing edge in O(min(out(src), in(dst))).
 */
#include "graph_int.h"

/* ---- control edges ------------------------------------------------------ */

static uint32_t ctrl_alloc(kiln_graph *g)
{
    if (g->ctrl_free) {
        uint32_t c = g->ctrl_free;
        g->ctrl_free = g->ctrl[c].out_next;
        return c;
    }
    if (!KILN_GROW(g->ctrl, g->ctrl_cap, g->ctrl_len + 1))
        return 0;
    if (g->ctrl_len == 1)
        memset(&g->ctrl[0], 0, sizeof(kctrl));
    return g->ctrl_len++;
}

#define CTRL_UNLINK(HEAD, PREV, NEXT)                  \
    do {                                               \
        kctrl *r = &g->ctrl[c];                        \
        if ((HEAD) == c) {                             \
            (HEAD) = r->NEXT;                          \
            if (HEAD)                                  \
                g->ctrl[HEAD].PREV = r->PREV;          \
        } else {                                       \
            g->ctrl[r->PREV].NEXT = r->NEXT;           \
            if (r->NEXT)                               \
                g->ctrl[r->NEXT].PREV = r->PREV;       \
            else                                       \
                g->ctrl[HEAD].PREV = r->PREV;          \
        }                                              \
    } while (0)

/* The record of src => dst, or 0.  Walks src's out-list and dst's in-list
 * in lock step and stops at the end of the shorter: O(min(out(src), in(dst))). */
static uint32_t ctrl_find(const kiln_graph *g, kiln_node_id src, kiln_node_id dst)
{
    uint32_t a = g->nodes[src].ctrl_out, b = g->nodes[dst].ctrl_in;
    while (a && b) {
        if (g->ctrl[a].dst == dst)
            return a;
        if (g->ctrl[b].src == src)
            return b;
        a = g->ctrl[a].out_next;
        b = g->ctrl[b].in_next;
    }
    return 0;
}

kiln_status kiln_ctrl_add(kiln_graph *g, kiln_node_id src, kiln_node_id dst)
{
    if (!kiln__live(g, src) || !kiln__live(g, dst) || src == dst)
        return KILN_ERR_INVALID;
    if (ctrl_find(g, src, dst))
        return KILN_OK;
    uint32_t c = ctrl_alloc(g);
    if (!c) {
        g->oom = true;
        return KILN_ERR_NOMEM;
    }
    g->ctrl[c].src = src;
    g->ctrl[c].dst = dst;
    KILN_CTRL_APPEND(g->ctrl, g->nodes[src].ctrl_out, c, out_prev, out_next);
    KILN_CTRL_APPEND(g->ctrl, g->nodes[dst].ctrl_in, c, in_prev, in_next);
    kiln__mutated(g, true);
    return KILN_OK;
}

void kiln__ctrl_free_rec(kiln_graph *g, uint32_t c)
{
    kiln_node_id src = g->ctrl[c].src, dst = g->ctrl[c].dst;
    CTRL_UNLINK(g->nodes[src].ctrl_out, out_prev, out_next);
    CTRL_UNLINK(g->nodes[dst].ctrl_in, in_prev, in_next);
    memset(&g->ctrl[c], 0, sizeof(kctrl));
    g->ctrl[c].out_next = g->ctrl_free;
    g->ctrl_free = c;
}

kiln_status kiln_ctrl_remove(kiln_graph *g, kiln_node_id src, kiln_node_id dst)
{
    if (!kiln__live(g, src) || !kiln__live(g, dst))
        return KILN_ERR_INVALID;
    uint32_t c = ctrl_find(g, src, dst);
    if (!c)
        return KILN_ERR_NOT_FOUND;
    kiln__ctrl_free_rec(g, c);
    kiln__mutated(g, true);
    return KILN_OK;
}

bool kiln_ctrl_exists(const kiln_graph *g, kiln_node_id src, kiln_node_id dst)
{
    return kiln__live(g, src) && kiln__live(g, dst) && ctrl_find(g, src, dst) != 0;
}

uint32_t kiln_ctrl_in_first(const kiln_graph *g, kiln_node_id n)
{
    return kiln__live(g, n) ? g->nodes[n].ctrl_in : 0;
}
uint32_t kiln_ctrl_in_next(const kiln_graph *g, uint32_t c)
{
    return c && c < g->ctrl_len ? g->ctrl[c].in_next : 0;
}
uint32_t kiln_ctrl_out_first(const kiln_graph *g, kiln_node_id n)
{
    return kiln__live(g, n) ? g->nodes[n].ctrl_out : 0;
}
uint32_t kiln_ctrl_out_next(const kiln_graph *g, uint32_t c)
{
    return c && c < g->ctrl_len ? g->ctrl[c].out_next : 0;
}
kiln_node_id kiln_ctrl_src(const kiln_graph *g, uint32_t c)
{
    return c && c < g->ctrl_len ? g->ctrl[c].src : 0;
}
kiln_node_id kiln_ctrl_dst(const kiln_graph *g, uint32_t c)
{
    return c && c < g->ctrl_len ? g->ctrl[c].dst : 0;
}
uint32_t kiln_node_ctrl_in_count(const kiln_graph *g, kiln_node_id n)
{
    uint32_t k = 0;
    for (uint32_t c = kiln_ctrl_in_first(g, n); c; c = g->ctrl[c].in_next)
        k++;
    return k;
}
uint32_t kiln_node_ctrl_out_count(const kiln_graph *g, kiln_node_id n)
{
    uint32_t k = 0;
    for (uint32_t c = kiln_ctrl_out_first(g, n); c; c = g->ctrl[c].out_next)
        k++;
    return k;
}
