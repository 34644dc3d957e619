/*
 * plugin.c - libkiln_fusion_decl.so: one pattern fusion pass per fusion that
 * the manifest entry's "config" declares (docs/fusion.md, "Declarative
 * fusions").
 *
 *   {"path": "libkiln_fusion_decl.so",
 *    "config": {"fusions": [ {...}, ... ]}}        or  {"fusions": "file.json"}
 *
 * The definitions are parsed and checked in init (decl_load.c): a bad one
 * fails the plugin load, and so the manifest, with the file, the JSON path
 * and the reason.  Each registered pass is named as declared.
 *
 * The fusion-pass ABI gives create() no descriptor, so each pass gets its own
 * create function from a fixed table (DECL_SLOTS of them): slot i hands out
 * the i-th definition.  The definitions live until the last context that
 * loaded the plugin unloads it (fini).
 */
#include "decl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECL_SLOTS 128

static pthread_mutex_t decl_lock = PTHREAD_MUTEX_INITIALIZER;
static dfusion *decl_slot[DECL_SLOTS];
static uint32_t decl_nslots; /* slots handed out */
static dset *decl_sets;      /* one per init */
static uint32_t decl_nsets, decl_loads;

static kiln_status create_slot(uint32_t i, kiln_error *err, void **inst)
{
    pthread_mutex_lock(&decl_lock);
    dfusion *f = i < DECL_SLOTS ? decl_slot[i] : NULL;
    pthread_mutex_unlock(&decl_lock);
    if (!f)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "declarative fusion slot %u is empty", i);
    *inst = f;
    return KILN_OK;
}

#define DECL_SLOT_LIST(X)                                                                          \
    X(0)                                                                                           \
    X(1)                                                                                           \
    X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) X(18)  \
        X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) X(32) X(33)  \
            X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47)    \
                X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57) X(58) X(59) X(60)      \
                    X(61) X(62) X(63) X(64) X(65) X(66) X(67) X(68) X(69) X(70) X(71) X(72) X(73)  \
                        X(74) X(75) X(76) X(77) X(78) X(79) X(80) X(81) X(82) X(83) X(84) X(85)    \
                            X(86) X(87) X(88) X(89) X(90) X(91) X(92) X(93) X(94) X(95) X(96)      \
                                X(97) X(98) X(99) X(100) X(101) X(102) X(103) X(104) X(105) X(106) \
                                    X(107) X(108) X(109) X(110) X(111) X(112) X(113) X(114) X(115) \
                                        X(116) X(117) X(118) X(119) X(120) X(121) X(122) X(123)    \
                                            X(124) X(125) X(126) X(127)

#define DECL_CREATE_FN(i)                                                                          \
    static kiln_status decl_create_##i(const kiln_options *o, kiln_error *err, void **inst)        \
    {                                                                                              \
        (void)o;                                                                                   \
        return create_slot(i, err, inst);                                                          \
    }
DECL_SLOT_LIST(DECL_CREATE_FN)
#define DECL_CREATE_REF(i) decl_create_##i,
static kiln_status (*const decl_create[DECL_SLOTS])(const kiln_options *, kiln_error *,
                                                    void **) = {DECL_SLOT_LIST(DECL_CREATE_REF)};

/* Forget the newest set (a failed init); decl_lock held. */
static void undo_load(uint32_t first_slot)
{
    while (decl_nslots > first_slot)
        decl_slot[--decl_nslots] = NULL;
    decl_free(&decl_sets[--decl_nsets]);
    decl_loads--;
}

static kiln_status init(const kiln_host_api *host, kiln_registrar *r, kiln_error *err)
{
    (void)host;
    const char *file = NULL, *jpath = NULL;
    const char *config = kiln_plugin_config(r, &file, &jpath);
    if (!config)
        return KILN_OK; /* no fusions declared: the plugin registers nothing */
    dset s;
    kiln_status st = decl_load(r, config, file, jpath, &s, err);
    if (st != KILN_OK)
        return st;
    pthread_mutex_lock(&decl_lock);
    dset *ns = realloc(decl_sets, (decl_nsets + 1) * sizeof(dset));
    if (!ns) {
        pthread_mutex_unlock(&decl_lock);
        decl_free(&s);
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    }
    decl_sets = ns;
    decl_sets[decl_nsets++] = s;
    decl_loads++;
    uint32_t first = decl_nslots;
    if (decl_nslots + s.n > DECL_SLOTS) {
        undo_load(first);
        pthread_mutex_unlock(&decl_lock);
        return kiln_errorf(err, KILN_ERR_LIMIT,
                           "%s: %s: %u more fusions, but at most %d per process can be declared",
                           file, jpath, s.n, DECL_SLOTS);
    }
    for (uint32_t i = 0; i < s.n; i++)
        decl_slot[decl_nslots++] = &decl_sets[decl_nsets - 1].f[i];
    pthread_mutex_unlock(&decl_lock);
    for (uint32_t i = 0; i < s.n; i++) {
        const dfusion *f = &s.f[i];
        kiln_fusion_pass_desc d = {
            .struct_size = sizeof(kiln_fusion_pass_desc),
            .name = f->name,
            .summary = f->summary,
            .create = decl_create[first + i],
            .kind = KILN_FUSION_PATTERN,
            .stage = f->stage,
            .patterns = decl_patterns,
            .meet_requirements = f->nreqs ? decl_meet : NULL,
            .replacement = decl_replacement,
        };
        if ((st = kiln_register_fusion_pass(r, &d)) != KILN_OK) {
            char msg[512];
            snprintf(msg, sizeof(msg), "%s", kiln_error_message(err));
            kiln_error_clear(err); /* the first message wins: replace it */
            st = kiln_errorf(err, st, "%s: %s", f->origin, msg);
            pthread_mutex_lock(&decl_lock);
            undo_load(first); /* the host rolls the registered passes back */
            pthread_mutex_unlock(&decl_lock);
            return st;
        }
    }
    return KILN_OK;
}

/* Called once per context that loaded the plugin; the last one frees. */
static void fini(void)
{
    pthread_mutex_lock(&decl_lock);
    if (decl_loads && --decl_loads == 0) {
        for (uint32_t i = 0; i < decl_nsets; i++)
            decl_free(&decl_sets[i]);
        free(decl_sets);
        decl_sets = NULL;
        decl_nsets = 0;
        decl_nslots = 0;
        memset(decl_slot, 0, sizeof(decl_slot));
    }
    pthread_mutex_unlock(&decl_lock);
}

KILN_PLUGIN_DEFINE("kiln.fusion.declarative", "0.1.0", "Apache-2.0",
                   "pattern fusions declared as JSON in the manifest", init, fini)
