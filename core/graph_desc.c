/*
 * graph_desc.c - tensor descriptors: an output's descriptor (which also heads
 * its consumer list), an input's own descriptor or the producer's it reads,
 * and the typed fields (dtype, shape, format, ref_input, size/offset/memory
 * type, attributes).  Every setter bumps the graph's mutation counter so
 * cached analyses see the edit.  Layout in graph_int.h.
 */
#include "graph_int.h"

kiln_tensor_desc *kiln__desc_new(kiln_graph *g)
{
    kiln_tensor_desc *d = kiln__arena_alloc(&g->arena, sizeof(*d));
    if (!d) {
        g->oom = true;
        return NULL;
    }
    d->rank = -1;
    d->ref_input = -1;
    d->dtype = KILN_DT_FLOAT32;
    return d;
}

/* ---- tensor descriptors ------------------------------------------------- */

const kiln_tensor_desc *kiln_node_input_desc(const kiln_graph *g, kiln_node_id n, uint32_t i)
{
    if (!kiln__live(g, n) || i >= g->nodes[n].nin)
        return NULL;
    uint32_t idx = g->nodes[n].in_off + i;
    if (g->in_desc && g->in_desc[idx])
        return g->in_desc[idx];
    const kuse *r = &g->in[idx];
    return r->src ? kiln__out_desc(g, r->src, r->src_idx) : NULL;
}

bool kiln_node_input_has_desc(const kiln_graph *g, kiln_node_id n, uint32_t i)
{
    return kiln__live(g, n) && i < g->nodes[n].nin && g->in_desc &&
           g->in_desc[g->nodes[n].in_off + i];
}

kiln_tensor_desc *kiln_node_input_desc_mut(kiln_graph *g, kiln_node_id n, uint32_t i)
{
    if (!kiln__live(g, n) || i >= g->nodes[n].nin)
        return NULL;
    uint32_t idx = g->nodes[n].in_off + i;
    if (g->in_desc && g->in_desc[idx])
        return g->in_desc[idx];
    if (!g->in_desc) {
        g->in_desc = kiln__calloc(g->in_cap, sizeof(*g->in_desc));
        if (!g->in_desc) {
            g->oom = true;
            return NULL;
        }
    }
    kiln_tensor_desc *d = kiln__desc_new(g);
    if (!d)
        return NULL;
    const kiln_tensor_desc *cur = kiln_node_input_desc(g, n, i);
    if (cur && kiln_desc_copy(g, d, cur) != KILN_OK)
        return NULL;
    g->in_desc[idx] = d;
    kiln__mutated(g, false);
    return d;
}

kiln_tensor_desc *kiln_node_output_desc(kiln_graph *g, kiln_node_id n, uint32_t o)
{
    if (!kiln__live(g, n) || o >= g->nodes[n].nout)
        return NULL;
    return kiln__out_desc(g, n, o);
}

static kdesc_ext *desc_ext(kiln_graph *g, kiln_tensor_desc *d)
{
    if (!d->ext) {
        d->ext = kiln__arena_alloc(&g->arena, sizeof(kdesc_ext));
        if (!d->ext) {
            g->oom = true;
            return NULL;
        }
        d->ext->size = -1;
        d->ext->offset = -1;
    }
    return d->ext;
}

kiln_status kiln_desc_copy(kiln_graph *g, kiln_tensor_desc *dst, const kiln_tensor_desc *src)
{
    if (dst == src)
        return KILN_OK;
    kiln_status st = kiln_desc_set_shape(g, dst, src->rank, src->dims);
    if (st != KILN_OK)
        return st;
    dst->dtype = src->dtype;
    dst->format = src->format;
    dst->ref_input = src->ref_input;
    kiln__mutated(g, false);
    if (src->ext || dst->ext) {
        kdesc_ext *e = desc_ext(g, dst);
        if (!e)
            return KILN_ERR_NOMEM;
        e->size = src->ext ? src->ext->size : -1;
        e->offset = src->ext ? src->ext->offset : -1;
        e->memory_type = src->ext ? src->ext->memory_type : 0;
        if (e->attrs)
            kiln_attrs_clear(e->attrs);
        if (src->ext && src->ext->attrs && src->ext->attrs->n) {
            kiln_attrs *a = kiln_desc_attrs_mut(g, dst);
            if (!a || kiln_attrs_copy(a, src->ext->attrs) != KILN_OK)
                return KILN_ERR_NOMEM;
        }
    }
    return KILN_OK;
}

kiln_dtype kiln_desc_dtype(const kiln_tensor_desc *d)
{
    return (kiln_dtype)d->dtype;
}
kiln_status kiln_desc_set_dtype(kiln_graph *g, kiln_tensor_desc *d, kiln_dtype dt)
{
    if ((unsigned)dt >= KILN_DT_COUNT)
        return KILN_ERR_INVALID;
    d->dtype = (uint8_t)dt;
    kiln__mutated(g, false);
    return KILN_OK;
}
int32_t kiln_desc_rank(const kiln_tensor_desc *d)
{
    return d->rank;
}
const int64_t *kiln_desc_dims(const kiln_tensor_desc *d)
{
    return d->rank > 0 ? d->dims : NULL;
}

kiln_status kiln_desc_set_shape(kiln_graph *g, kiln_tensor_desc *d, int32_t rank,
                                const int64_t *dims)
{
    if (rank < -1 || rank > KILN_MAX_RANK)
        return KILN_ERR_INVALID;
    if (rank > 0) {
        if (!(d->rank >= rank && d->dims)) {
            int64_t *nd = kiln__arena_alloc(&g->arena, (size_t)rank * sizeof(int64_t));
            if (!nd) {
                g->oom = true;
                return KILN_ERR_NOMEM;
            }
            d->dims = nd;
        }
        memmove(d->dims, dims, (size_t)rank * sizeof(int64_t));
    }
    d->rank = (int16_t)rank;
    kiln__mutated(g, false);
    return KILN_OK;
}

const char *kiln_desc_format(const kiln_graph *g, const kiln_tensor_desc *d)
{
    return d->format ? kiln_sym_str(g, d->format) : "ND";
}
void kiln_desc_set_format(kiln_graph *g, kiln_tensor_desc *d, const char *format)
{
    d->format = (format && strcmp(format, "ND") != 0) ? kiln_intern(g, format) : 0;
    kiln__mutated(g, false);
}
int32_t kiln_desc_ref_input(const kiln_tensor_desc *d)
{
    return d->ref_input;
}
kiln_status kiln_desc_set_ref_input(kiln_graph *g, kiln_tensor_desc *d, int32_t k)
{
    if (k > INT16_MAX)
        return KILN_ERR_INVALID;
    d->ref_input = (int16_t)(k < 0 ? -1 : k);
    kiln__mutated(g, false);
    return KILN_OK;
}
int64_t kiln_desc_size(const kiln_tensor_desc *d)
{
    return d->ext ? d->ext->size : -1;
}
void kiln_desc_set_size(kiln_graph *g, kiln_tensor_desc *d, int64_t size)
{
    kdesc_ext *e = desc_ext(g, d);
    if (e)
        e->size = size;
    kiln__mutated_plan(g);
}
int64_t kiln_desc_offset(const kiln_tensor_desc *d)
{
    return d->ext ? d->ext->offset : -1;
}
void kiln_desc_set_offset(kiln_graph *g, kiln_tensor_desc *d, int64_t offset)
{
    kdesc_ext *e = desc_ext(g, d);
    if (e)
        e->offset = offset;
    kiln__mutated_plan(g);
}
const char *kiln_desc_memory_type(const kiln_graph *g, const kiln_tensor_desc *d)
{
    return d->ext && d->ext->memory_type ? kiln_sym_str(g, d->ext->memory_type) : NULL;
}
void kiln_desc_set_memory_type(kiln_graph *g, kiln_tensor_desc *d, const char *mt)
{
    kdesc_ext *e = desc_ext(g, d);
    if (e)
        e->memory_type = mt ? kiln_intern(g, mt) : 0;
    kiln__mutated_plan(g);
}
const kiln_attrs *kiln_desc_attrs(const kiln_tensor_desc *d)
{
    return d->ext ? d->ext->attrs : NULL;
}
kiln_attrs *kiln_desc_attrs_mut(kiln_graph *g, kiln_tensor_desc *d)
{
    kdesc_ext *e = desc_ext(g, d);
    if (!e)
        return NULL;
    if (!e->attrs) {
        /* room for 2: a descriptor's set mostly holds one mark (such as
         * InplaceSupportCheckPass's), where a node set's first 4 would
         * waste 32 bytes on every marked output */
        e->attrs = kiln__attrs_new(g, 2);
        if (!e->attrs) {
            g->oom = true;
            return NULL;
        }
    }
    return e->attrs;
}

int64_t kiln_desc_numel(const kiln_tensor_desc *d)
{
    int64_t n;
    if (d->rank < 0 || kiln_dims_numel(d->dims, (uint32_t)d->rank, &n) != KILN_OK)
        return -1;
    return n;
}

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
#define X(name, value, str, size) {str, size},
    KILN_DTYPE_MAP(X)
#undef X
};

size_t kiln_dtype_size(kiln_dtype dt)
{
    return (unsigned)dt < KILN_DT_COUNT ? dtypes[dt].size : 0;
}
const char *kiln_dtype_name(kiln_dtype dt)
{
    return (unsigned)dt < KILN_DT_COUNT ? dtypes[dt].name : "unknown";
}
bool kiln_dtype_parse(const char *name, kiln_dtype *out)
{
    for (unsigned i = 0; i < KILN_DT_COUNT; i++) {
        if (strcmp(dtypes[i].name, name) == 0) {
            *out = (kiln_dtype)i;
            return true;
        }
    }
    return false;
}
