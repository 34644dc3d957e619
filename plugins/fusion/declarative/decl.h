/*
 * decl.h - declarative fusions: pattern fusion passes defined as JSON in the
 * manifest entry of libkiln_fusion_decl.so (docs/fusion.md, "Declarative
 * fusions").
 *
 * decl_load.c parses and checks the definitions when the plugin loads (every
 * error names the file, the JSON path and the reason); decl_run.c is the
 * pattern-fusion hooks that interpret one checked definition; plugin.c
 * registers one fusion pass per definition.
 *
 * A definition is immutable once loaded: pass instances only point at it, so
 * the hooks are safe from the parallel optimize_subgraph tasks.
 */
#ifndef KILN_FUSION_DECL_H
#define KILN_FUSION_DECL_H

#include <kiln/kiln.h>

#include <jansson.h>

/* A tensor of the match: output `out` of capture `cap` (a pattern node index). */
typedef struct dref {
    int32_t cap;
    uint32_t out;
} dref;

/* One pattern node: a boundary input ("Data") or a matched op. */
typedef struct dpnode {
    char *name;
    char *op;
    bool is_input;       /* a pattern input: matches any producer */
    int32_t input_index; /* its position in "inputs" (boundary input), else -1 */
} dpnode;

typedef struct dpedge {
    int32_t src, dst;
    uint32_t so, di;
} dpedge;

typedef enum dreq_kind {
    DREQ_DTYPE,        /* tensor dtype in mask */
    DREQ_RANK,         /* tensor rank in the list */
    DREQ_SHAPE,        /* tensor dims equal (-2 = any) */
    DREQ_SAME_DTYPE,   /* two tensors, one dtype */
    DREQ_SAME_SHAPE,   /* two tensors, one known shape */
    DREQ_ATTR_EQ,      /* node attribute equals a literal */
    DREQ_ATTR_EQ_ATTR, /* node attribute equals another node's */
    DREQ_CONST_VALUE   /* every element of a Const capture equals value (+- tolerance) */
} dreq_kind;

typedef struct dreq {
    dreq_kind kind;
    dref t, t2;
    uint32_t dtype_mask;
    int64_t *list; /* ranks or dims */
    uint32_t nlist;
    int32_t node, node2; /* captures of attribute requirements */
    char *attr, *attr2;
    json_t *literal; /* DREQ_ATTR_EQ (owned) */
    double value, tolerance;
} dreq;

/* An attribute the replacement sets on a new node. */
typedef enum dattr_kind {
    DATTR_LITERAL, /* JSON value: int, float, bool, string, list */
    DATTR_FROM,    /* copied from a capture's attribute */
    DATTR_SCALAR,  /* the value of a scalar Const capture, as float (int for integers) */
    DATTR_DTYPE,   /* a dtype */
    DATTR_TENSOR   /* a tensor literal */
} dattr_kind;

typedef struct dattr {
    char *key;
    dattr_kind kind;
    json_t *literal; /* LITERAL, TENSOR (owned) */
    int32_t cap;     /* FROM, SCALAR */
    char *from_key;  /* FROM */
    kiln_dtype dtype;
    bool optional; /* FROM: skip when the capture lacks it */
} dattr;

/* An input of a replacement node: a pattern input, or an earlier replacement node's output. */
typedef struct drin {
    bool from_input;
    uint32_t index; /* pattern input index, or replacement node index */
    uint32_t out;
} drin;

typedef struct drnode {
    char *name;
    char *op;
    drin *inputs;
    uint32_t ninputs, noutputs;
    dattr *attrs;
    uint32_t nattrs;
    int32_t copy_attrs; /* capture whose attributes are copied first, or -1 */
    dref like;          /* descriptor source of output 0 (cap -1: none) */
} drnode;

typedef struct dfusion {
    char *name;
    char *summary;
    int32_t stage;
    bool commutative;
    dpnode *pnodes;
    uint32_t npnodes, ninputs;
    dpedge *pedges;
    uint32_t npedges;
    dref *outputs;
    uint32_t noutputs;
    dreq *reqs;
    uint32_t nreqs;
    drnode *rnodes;
    uint32_t nrnodes;
    drin *routputs; /* one per pattern output */
    char *origin;   /* "<file>: <json path>" of the definition, for messages */
} dfusion;

typedef struct dset {
    dfusion *f;
    uint32_t n;
} dset;

/**
 * Parse and check the fusions of a config (JSON text of the manifest entry's
 * "config"); @p file and @p jpath locate it for errors.  Op types are checked
 * with kiln_registrar_op_known.
 */
kiln_status decl_load(kiln_registrar *r, const char *config, const char *file, const char *jpath,
                      dset *out, kiln_error *err);
void decl_free(dset *s);

/* decl_run.c: the hooks of a pattern fusion whose instance is a dfusion. */
kiln_status decl_patterns(void *inst, kiln_pattern *p, kiln_error *err);
bool decl_meet(void *inst, const kiln_graph *g, const kiln_match *m);
kiln_status decl_replacement(void *inst, kiln_pass_ctx *ctx, const kiln_graph *g,
                             const kiln_match *m, kiln_graph *repl);

#endif
