/*
 * manifest.c - the JSON manifest loader (format 1, docs/manifest.md).
 *
 * Design
 *   A manifest and the chain of manifests it `extends` are loaded as layers,
 *   base first.  Nothing is merged into a new JSON document: every setting is
 *   read from the layer that decides it, so errors always name the file and
 *   the JSON path the offending value came from.
 *
 *     plugins          every layer, base first; one resolved file loads once
 *     options          every layer, base first; later keys replace earlier
 *     stages.<name>    the last layer listing that stage (the list replaces)
 *     enable/disable   every layer, base first; per layer enable then
 *                      disable; each selector in order, the last match wins
 *     tuners, breakpoints, engines, memory_planner, allocator
 *                      the last layer that has the key
 *     instrumentation.<key>  the last layer that has that key
 *
 *   Plugin files resolve: absolute as is; else relative to the manifest's
 *   directory, then each directory of KILN_PLUGIN_PATH (colon separated),
 *   then <exe>/../lib/kiln/plugins, and last, when the executable runs from a
 *   build tree (<exe>/../CMakeCache.txt exists), <exe>/../tests/plugins, where
 *   the test plugins are built.  A plugin's `provides`, when present,
 *   must equal what it registered ("declared-vs-registered mismatch").
 *
 * Plugins loaded before a failure stay in the context (handles are only
 * closed with it); the pipeline is cleared.
 */
#include "manifest.h"
#include "stage.h"
#include <errno.h>
#include <jansson.h>
#include <pcre2.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>

typedef struct layer {
    char *file; /* path as opened: the name errors use */
    char *dir;  /* its directory, for relative paths */
    char *real; /* realpath, for cycle detection */
    json_t *root;
} layer;

typedef struct loader {
    kiln_ctx *ctx;
    kiln_pipeline *p;
    kiln_error *err;
    layer layers[KILN_MANIFEST_MAX_DEPTH]; /* base first */
    uint32_t nlayers;
} loader;

static const char *const top_keys[] = {
    "kiln_manifest", "description", "extends",        "plugins",   "options",
    "stages",        "enable",      "disable",        "breakpoints", "tuners",
    "memory_planner", "allocator",  "engines",        "instrumentation"};


/* ---- small helpers ------------------------------------------------------------ */

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "real";
    case JSON_TRUE:
    case JSON_FALSE: return "bool";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

/* JSON path of member @p key of @p parent: ".key" or ["k.e.y"]. */
static void jkey(char *buf, size_t size, const char *parent, const char *key)
{
    bool plain = key[0] != 0;
    for (const char *c = key; *c && plain; c++)
        plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                *c == '_';
    snprintf(buf, size, plain ? "%s.%s" : "%s[\"%s\"]", parent, key);
}

/* Record an error at @p jpath of layer @p ly: "file: jpath: message". */
static kiln_status fail_at(loader *L, const layer *ly, const char *jpath, kiln_status code,
                           const char *fmt, ...) KILN_PRINTF(5, 6);
static kiln_status fail_at(loader *L, const layer *ly, const char *jpath, kiln_status code,
                           const char *fmt, ...)
{
    char msg[KILN_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    kiln_errorf(L->err, code, "%s", msg);
    if (jpath)
        kiln_error_push(L->err, "%s", jpath);
    return kiln_error_push(L->err, "%s", ly->file);
}

/* Add the file and JSON path frames to an error recorded further down. */
static kiln_status frame_at(loader *L, const layer *ly, const char *jpath)
{
    if (jpath)
        kiln_error_push(L->err, "%s", jpath);
    return kiln_error_push(L->err, "%s", ly->file);
}

/* Append @p s to the string in @p buf, truncating. */
static void append(char *buf, size_t size, const char *s)
{
    size_t len = strlen(buf), n = strlen(s);
    if (len + 1 >= size)
        return;
    if (n > size - len - 1)
        n = size - len - 1;
    memcpy(buf + len, s, n);
    buf[len + n] = 0;
}

static bool key_ignored(const char *key)
{
    return strncmp(key, "x-", 2) == 0;
}

/* Unknown members of an object are errors (x- keys excepted). */
static kiln_status check_keys(loader *L, const layer *ly, const char *jpath, json_t *obj,
                              const char *const *allowed, size_t n)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool ok = key_ignored(key);
        for (size_t i = 0; i < n && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            char path[256];
            jkey(path, sizeof(path), jpath, key);
            return fail_at(L, ly, path, KILN_ERR_INVALID,
                           "unknown key \"%s\" (keys starting with x- are ignored)", key);
        }
    }
    return KILN_OK;
}

/* Member @p key of @p obj must be of type @p t when present (NULL if absent). */
static kiln_status get_typed(loader *L, const layer *ly, const char *jpath, json_t *obj,
                             const char *key, json_type t, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    *out = v;
    if (!v || json_typeof(v) == t || (t == JSON_TRUE && json_is_boolean(v)))
        return KILN_OK;
    static const char *const names[] = {"object", "array", "string", "integer",
                                        "real",   "bool",  "bool",   "null"};
    char path[256];
    jkey(path, sizeof(path), jpath, key);
    return fail_at(L, ly, path, KILN_ERR_INVALID, "expected %s, got %s", names[t],
                   json_type_name(v));
}

/* ---- layers and the extends chain ------------------------------------------------ */

static void layer_free(layer *ly)
{
    json_decref(ly->root);
    kiln__free(ly->file);
    kiln__free(ly->dir);
    kiln__free(ly->real);
    memset(ly, 0, sizeof(*ly));
}

static kiln_status load_layer(loader *L, const char *path, layer *ly)
{
    char real[PATH_MAX];
    memset(ly, 0, sizeof(*ly));
    if (!(ly->file = kiln__strdup(path)))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    struct stat sb;
    if (!realpath(path, real) || !file_exists(real))
        return fail_at(L, ly, NULL, KILN_ERR_NOT_FOUND, "cannot open manifest: %s",
                       stat(path, &sb) != 0   ? (errno == ENOENT ? "no such file" : strerror(errno))
                       : S_ISDIR(sb.st_mode) ? "it is a directory"
                                             : "not a regular file");
    const char *slash = strrchr(path, '/');
    ly->real = kiln__strdup(real);
    ly->dir = slash ? kiln__malloc((size_t)(slash - path) + 2) : kiln__strdup(".");
    if (!ly->real || !ly->dir)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    if (slash) {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        memcpy(ly->dir, path, n);
        ly->dir[n] = 0;
    }
    json_error_t je;
    ly->root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!ly->root)
        return fail_at(L, ly, NULL, KILN_ERR_PARSE, "line %d column %d: %s", je.line, je.column,
                       je.text);
    if (!json_is_object(ly->root))
        return fail_at(L, ly, "$", KILN_ERR_PARSE, "a manifest is a JSON object, got %s",
                       json_type_name(ly->root));
    json_t *ver = json_object_get(ly->root, "kiln_manifest");
    if (!ver)
        return fail_at(L, ly, "$.kiln_manifest", KILN_ERR_INVALID,
                       "missing (a manifest starts with \"kiln_manifest\": %d)",
                       KILN_MANIFEST_VERSION);
    if (!json_is_integer(ver))
        return fail_at(L, ly, "$.kiln_manifest", KILN_ERR_INVALID,
                       "expected integer %d, got %s", KILN_MANIFEST_VERSION,
                       json_type_name(ver));
    if (json_integer_value(ver) != KILN_MANIFEST_VERSION)
        return fail_at(L, ly, "$.kiln_manifest", KILN_ERR_VERSION,
                       "manifest format %" JSON_INTEGER_FORMAT
                       " is not supported (this kiln reads %d)",
                       json_integer_value(ver), KILN_MANIFEST_VERSION);
    kiln_status st = check_keys(L, ly, "$", ly->root, top_keys, KILN_ARRAY_LEN(top_keys));
    if (st != KILN_OK)
        return st;
    json_t *stages;
    if ((st = get_typed(L, ly, "$", ly->root, "stages", JSON_OBJECT, &stages)) != KILN_OK)
        return st;
    const char *key;
    json_t *v;
    json_object_foreach(stages, key, v) {
        if (!key_ignored(key) && kiln_stage_lookup(key) == KILN_STAGE_COUNT) {
            char spath[256];
            jkey(spath, sizeof(spath), "$.stages", key);
            return fail_at(L, ly, spath, KILN_ERR_INVALID,
                           "unknown stage \"%s\" (stages: %s)", key, KILN_STAGE_LIST);
        }
    }
    return KILN_OK;
}

/* Where an "extends" value points: relative to @p ly, then the installed manifests. */
static kiln_status resolve_extends(loader *L, const layer *ly, const char *name, char *out,
                                   size_t size)
{
    if (name[0] == '/') {
        snprintf(out, size, "%s", name);
        return KILN_OK;
    }
    snprintf(out, size, "%s/%s", ly->dir, name);
    if (file_exists(out))
        return KILN_OK;
    char installed[PATH_MAX];
    snprintf(installed, sizeof(installed), "%s/../share/kiln/manifests/%s", kiln_exe_dir(), name);
    if (!strchr(name, '/') && file_exists(installed)) {
        snprintf(out, size, "%s", installed);
        return KILN_OK;
    }
    return fail_at(L, ly, "$.extends", KILN_ERR_NOT_FOUND,
                   "cannot find base manifest %s (searched %s and %s)", name, out, installed);
}

static kiln_status load_chain(loader *L, const char *path)
{
    layer chain[KILN_MANIFEST_MAX_DEPTH]; /* child first */
    uint32_t n = 0;
    char next[PATH_MAX];
    snprintf(next, sizeof(next), "%s", path);
    kiln_status st = KILN_OK;
    for (;;) {
        if (n == KILN_MANIFEST_MAX_DEPTH) {
            st = fail_at(L, &chain[n - 1], "$.extends", KILN_ERR_LIMIT,
                         "extends chain longer than %d manifests", KILN_MANIFEST_MAX_DEPTH);
            goto fail;
        }
        char real[PATH_MAX];
        if (realpath(next, real)) {
            for (uint32_t i = 0; i < n; i++) {
                if (strcmp(chain[i].real, real) != 0)
                    continue;
                char msg[KILN_MSG_SIZE] = "extends cycle: ";
                for (uint32_t k = i; k < n; k++) {
                    append(msg, sizeof(msg), chain[k].file);
                    append(msg, sizeof(msg), " -> ");
                }
                append(msg, sizeof(msg), next);
                st = fail_at(L, &chain[n - 1], "$.extends", KILN_ERR_INVALID, "%s", msg);
                goto fail;
            }
        }
        st = load_layer(L, next, &chain[n]);
        n++;
        if (st != KILN_OK) {
            if (n > 1)
                frame_at(L, &chain[n - 2], "$.extends");
            goto fail;
        }
        json_t *ext;
        if ((st = get_typed(L, &chain[n - 1], "$", chain[n - 1].root, "extends", JSON_STRING,
                            &ext)) != KILN_OK)
            goto fail;
        if (!ext)
            break;
        if ((st = resolve_extends(L, &chain[n - 1], json_string_value(ext), next,
                                  sizeof(next))) != KILN_OK)
            goto fail;
    }
    for (uint32_t i = 0; i < n; i++)
        L->layers[i] = chain[n - 1 - i];
    L->nlayers = n;
    return KILN_OK;
fail:
    for (uint32_t i = 0; i < n; i++)
        layer_free(&chain[i]);
    return st;
}

/* The chain's real paths, the manifest given first (kiln_pipeline.manifests). */
static kiln_status record_chain(loader *L)
{
    kiln_pipeline *p = L->p;
    if (!(p->manifests = kiln__calloc(L->nlayers, sizeof(char *))))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    for (uint32_t i = L->nlayers; i-- > 0;)
        if (!(p->manifests[p->nmanifests++] = kiln__strdup(L->layers[i].real)))
            return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    return KILN_OK;
}

/* ---- plugins ------------------------------------------------------------------- */

static const struct {
    const char *key;
    kiln_component_kind k1, k2;
} provide_keys[] = {
    {"passes", KILN_COMP_PASS, KILN_COMP_FUSION},
    {"engines", KILN_COMP_ENGINE, 0},
    {"checkers", KILN_COMP_CHECKER, 0},
    {"memory_planners", KILN_COMP_MEM_PLANNER, 0},
    {"allocators", KILN_COMP_ALLOCATOR, 0},
    {"frontends", KILN_COMP_FRONTEND, 0},
    {"tuners", KILN_COMP_TUNER, 0},
    {"instruments", KILN_COMP_INSTRUMENT, 0},
    {"runtimes", KILN_COMP_RUNTIME, 0},
};

/* Is @p name listed in array @p arr? */
static bool listed(json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
            return true;
    }
    return false;
}

/* `provides` must equal what @p rec registered, kind by kind. */
static kiln_status check_provides(loader *L, const layer *ly, const char *jpath, json_t *prov,
                                  const kiln_plugin_rec *rec)
{
    const char *pname = rec->desc.name;
    char path[256], epath[288];
    for (size_t k = 0; k < KILN_ARRAY_LEN(provide_keys); k++) {
        json_t *arr;
        kiln_status st = get_typed(L, ly, jpath, prov, provide_keys[k].key, JSON_ARRAY, &arr);
        if (st != KILN_OK)
            return st;
        jkey(path, sizeof(path), jpath, provide_keys[k].key);
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v) {
            snprintf(epath, sizeof(epath), "%s[%zu]", path, i);
            if (!json_is_string(v))
                return fail_at(L, ly, epath, KILN_ERR_INVALID, "expected string, got %s",
                               json_type_name(v));
            const char *name = json_string_value(v);
            const kiln_component *c = kiln_registry_find(L->ctx, 0, name);
            if (!c || c->plugin != rec)
                return fail_at(L, ly, epath, KILN_ERR_INVALID,
                               "declared-vs-registered mismatch: plugin %s declares %s but "
                               "does not register it%s%s",
                               pname, name, c ? "; it is registered by " : "",
                               c ? (c->plugin && c->plugin->path ? c->plugin->path
                                                                  : "a built-in plugin")
                                 : "");
            if (c->kind != provide_keys[k].k1 && c->kind != provide_keys[k].k2)
                return fail_at(L, ly, epath, KILN_ERR_INVALID,
                               "declared-vs-registered mismatch: plugin %s registers %s as a "
                               "%s, not under \"%s\"",
                               pname, name, kiln_component_kind_name(c->kind),
                               provide_keys[k].key);
        }
    }
    for (uint32_t i = 0; i < kiln_registry_count(L->ctx); i++) {
        const kiln_component *c = kiln_registry_at(L->ctx, i);
        if (c->plugin != rec)
            continue;
        for (size_t k = 0; k < KILN_ARRAY_LEN(provide_keys); k++) {
            if (c->kind != provide_keys[k].k1 && c->kind != provide_keys[k].k2)
                continue;
            if (!listed(json_object_get(prov, provide_keys[k].key), c->name))
                return fail_at(L, ly, jpath, KILN_ERR_INVALID,
                               "declared-vs-registered mismatch: plugin %s registers %s %s, "
                               "which \"provides\" does not declare under \"%s\"",
                               pname, kiln_component_kind_name(c->kind), c->name,
                               provide_keys[k].key);
        }
    }
    return KILN_OK;
}

/*
 * Resolve plugin file @p name of layer @p ly into @p out.  On failure @p out
 * holds "searched: a, b, c" for the message.
 */
static bool resolve_plugin(const layer *ly, const char *name, char *out, size_t size)
{
    char tried[KILN_MSG_SIZE];
    size_t len = 0;
    tried[0] = 0;
    if (name[0] == '/') {
        snprintf(out, size, "%s", name);
        if (file_exists(out))
            return true;
        struct stat sb;
        snprintf(out, size, stat(name, &sb) == 0 && S_ISDIR(sb.st_mode)
                                ? "%s is a directory, not a plugin file"
                                : "searched: %s",
                 name);
        return false;
    }
#define TRY(...)                                                                          \
    do {                                                                                  \
        kiln__fmt(out, size, __VA_ARGS__);                                                   \
        if (file_exists(out))                                                             \
            return true;                                                                  \
        if (len < sizeof(tried))                                                          \
            len += (size_t)kiln__fmt(tried + len, sizeof(tried) - len, "%s%s", len ? ", " : "", \
                                     out);                                                \
    } while (0)
    TRY("%s/%s", ly->dir, name);
    const char *sp = getenv("KILN_PLUGIN_PATH");
    while (sp && *sp) {
        const char *colon = strchr(sp, ':');
        size_t n = colon ? (size_t)(colon - sp) : strlen(sp);
        if (n)
            TRY("%.*s/%s", (int)n, sp, name);
        sp = colon ? colon + 1 : NULL;
    }
    TRY("%s/../lib/kiln/plugins/%s", kiln_exe_dir(), name);
    /* A build tree also has the test plugins, so the manifests under
     * tests/data load as the docs show them, with no KILN_PLUGIN_PATH. */
    char cache[4096];
    kiln__fmt(cache, sizeof(cache), "%s/../CMakeCache.txt", kiln_exe_dir());
    if (file_exists(cache))
        TRY("%s/../tests/plugins/%s", kiln_exe_dir(), name);
#undef TRY
    snprintf(out, size, "searched: %s", tried);
    return false;
}

static const char *const plugin_keys[] = {"path", "required", "provides", "description",
                                          "config"};

/*
 * Defer loading the plugin of entry @p jpath when it is required and its
 * `provides` declares engines or runtimes and nothing else: it loads when
 * placement, a kernel or a runtime first needs those kinds
 * (kiln__registry_need).  *deferred is false when the entry loads now.
 */
static kiln_status maybe_defer(loader *L, const layer *ly, const char *jpath, json_t *prov,
                               const char *file, bool *deferred)
{
    *deferred = false;
    struct kiln_registry *r = L->ctx->registry;
    char real[PATH_MAX], where[96];
    if (!realpath(file, real))
        return KILN_OK; /* the eager path reports it */
    for (uint32_t i = 0; i < kiln_registry_plugin_count(L->ctx); i++) {
        const kiln_plugin_rec *p = kiln_registry_plugin_at(L->ctx, i);
        if (p->path && strcmp(p->path, real) == 0)
            return KILN_OK; /* loaded already: checked against this entry as before */
    }
    size_t total = 0;
    for (size_t k = 0; k < KILN_ARRAY_LEN(provide_keys); k++) {
        json_t *arr = json_object_get(prov, provide_keys[k].key);
        if (!json_is_array(arr)) {
            if (arr)
                return KILN_OK; /* a type error: the eager path reports it */
            continue;
        }
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v) {
            if (!json_is_string(v))
                return KILN_OK;
        }
        if (json_array_size(arr) && provide_keys[k].k1 != KILN_COMP_ENGINE &&
            provide_keys[k].k1 != KILN_COMP_RUNTIME)
            return KILN_OK;
        total += json_array_size(arr);
    }
    if (total == 0 || total > UINT32_MAX)
        return KILN_OK;
    for (uint32_t i = 0; i < r->ndeferred; i++) {
        if (strcmp(r->deferred[i].file, real) == 0) {
            *deferred = true; /* listed again (a base and a child): deferred once */
            return KILN_OK;
        }
    }
    snprintf(where, sizeof(where), "%s", jpath);
    kiln_deferred_plugin d;
    memset(&d, 0, sizeof(d));
    d.file = real;
    d.manifest = ly->file;
    d.jpath = where;
    d.names = kiln__calloc(total, sizeof(char *));
    d.kinds = kiln__calloc(total, sizeof(kiln_component_kind));
    d.kinds2 = kiln__calloc(total, sizeof(kiln_component_kind));
    d.keys = kiln__calloc(total, sizeof(char *));
    kiln_status st = KILN_ERR_NOMEM;
    if (d.names && d.kinds && d.kinds2 && d.keys) {
        for (size_t k = 0; k < KILN_ARRAY_LEN(provide_keys); k++) {
            size_t i;
            json_t *v;
            json_array_foreach(json_object_get(prov, provide_keys[k].key), i, v) {
                d.names[d.nnames] = (char *)(uintptr_t)json_string_value(v);
                d.kinds[d.nnames] = provide_keys[k].k1;
                d.kinds2[d.nnames] = provide_keys[k].k2;
                d.keys[d.nnames++] = provide_keys[k].key;
                d.kind_mask |= 1u << provide_keys[k].k1;
            }
        }
        st = kiln__registry_defer(L->ctx, &d, L->err);
    } else {
        kiln_errorf(L->err, st, "out of memory");
    }
    kiln__free(d.names);
    kiln__free(d.kinds);
    kiln__free(d.kinds2);
    kiln__free((void *)d.keys);
    if (st != KILN_OK)
        return frame_at(L, ly, jpath);
    *deferred = true;
    return KILN_OK;
}

/*
 * An entry with "config": the plugin reads it in its init
 * (kiln_plugin_config), so it must not be loaded yet, and it loads after every
 * plugin listed before it, deferred ones included (its init may look up their
 * ops and components).  *text = the value as compact JSON (free()).
 */
static kiln_status config_prepare(loader *L, const layer *ly, const char *cpath,
                                  const char *file, json_t *config, char **text)
{
    char real[PATH_MAX];
    if (realpath(file, real)) {
        for (uint32_t i = 0; i < kiln_registry_plugin_count(L->ctx); i++) {
            const kiln_plugin_rec *p = kiln_registry_plugin_at(L->ctx, i);
            if (p->path && strcmp(p->path, real) == 0)
                return fail_at(L, ly, cpath, KILN_ERR_INVALID,
                               "plugin %s is already loaded (listed earlier, by this manifest "
                               "or a base); a plugin reads its config once, when it loads: "
                               "give the config on its first entry",
                               p->desc.name);
        }
    }
    kiln_error sub;
    kiln_error_clear(&sub);
    kiln_status st = kiln__registry_need(L->ctx, 0, &sub);
    if (st != KILN_OK)
        return fail_at(L, ly, cpath, st, "loading the plugins listed before it: %s", sub.msg);
    if (!(*text = json_dumps(config, JSON_COMPACT | JSON_ENCODE_ANY)))
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    return KILN_OK;
}

static kiln_status load_plugin(loader *L, const layer *ly, json_t *e, const char *jpath)
{
    kiln_status st;
    if (!json_is_object(e))
        return fail_at(L, ly, jpath, KILN_ERR_INVALID,
                       "a plugin entry is an object {\"path\": ...}, got %s", json_type_name(e));
    json_t *jp, *jreq, *prov;
    if ((st = check_keys(L, ly, jpath, e, plugin_keys, KILN_ARRAY_LEN(plugin_keys))) ||
        (st = get_typed(L, ly, jpath, e, "path", JSON_STRING, &jp)) ||
        (st = get_typed(L, ly, jpath, e, "required", JSON_TRUE, &jreq)) ||
        (st = get_typed(L, ly, jpath, e, "provides", JSON_OBJECT, &prov)))
        return st;
    char ppath[256];
    jkey(ppath, sizeof(ppath), jpath, "path");
    if (!jp)
        return fail_at(L, ly, ppath, KILN_ERR_INVALID, "missing (the plugin's .so file)");
    bool required = !jreq || json_is_true(jreq);
    const char *name = json_string_value(jp);
    char file[PATH_MAX + KILN_MSG_SIZE];
    if (!resolve_plugin(ly, name, file, sizeof(file))) {
        if (!required) {
            kiln__pipeline_warn(L->p, "%s: %s: optional plugin %s not found (%s); skipped",
                                ly->file, ppath, name, file);
            return KILN_OK;
        }
        return fail_at(L, ly, ppath, KILN_ERR_NOT_FOUND, "plugin %s not found; %s", name, file);
    }
    json_t *config = json_object_get(e, "config");
    char cpath[256];
    char *ctext = NULL;
    if (config) {
        jkey(cpath, sizeof(cpath), jpath, "config");
        if ((st = config_prepare(L, ly, cpath, file, config, &ctext)) != KILN_OK)
            return st;
    }
    bool deferred = false;
    if (!config && required && prov &&
        (st = maybe_defer(L, ly, jpath, prov, file, &deferred)) != KILN_OK)
        return st;
    if (deferred)
        return KILN_OK;
    kiln_error sub;
    kiln_error_clear(&sub);
    kiln_plugin_rec *rec = NULL;
    struct kiln_registry *reg = L->ctx->registry;
    reg->next_config = ctext;
    reg->next_config_file = ctext ? ly->file : NULL;
    reg->next_config_jpath = ctext ? cpath : NULL;
    st = kiln_plugin_load(L->ctx, file, &rec, &sub);
    reg->next_config = reg->next_config_file = reg->next_config_jpath = NULL;
    free(ctext);
    if (st != KILN_OK) {
        if (!required && st != KILN_ERR_NOMEM) {
            kiln__pipeline_warn(L->p, "%s: %s: optional plugin skipped: %s", ly->file, ppath,
                                sub.msg);
            return KILN_OK;
        }
        return fail_at(L, ly, ppath, st, "%s", sub.msg);
    }
    if (prov) {
        char vpath[256];
        jkey(vpath, sizeof(vpath), jpath, "provides");
        return check_provides(L, ly, vpath, prov, rec);
    }
    return KILN_OK;
}

static kiln_status load_plugins(loader *L)
{
    for (uint32_t l = 0; l < L->nlayers; l++) {
        const layer *ly = &L->layers[l];
        json_t *arr;
        kiln_status st = get_typed(L, ly, "$", ly->root, "plugins", JSON_ARRAY, &arr);
        if (st != KILN_OK)
            return st;
        size_t i;
        json_t *e;
        json_array_foreach(arr, i, e) {
            char jpath[64];
            snprintf(jpath, sizeof(jpath), "$.plugins[%zu]", i);
            if ((st = load_plugin(L, ly, e, jpath)) != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

/* ---- session options --------------------------------------------------------- */

/* A JSON scalar as option text; false for objects, arrays and null. */
static bool scalar_text(json_t *v, char *buf, size_t size)
{
    if (json_is_string(v))
        snprintf(buf, size, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, size, "%.17g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, size, "%s", json_is_true(v) ? "true" : "false");
    else
        return false;
    return true;
}

static kiln_status set_session_options(loader *L)
{
    for (uint32_t l = 0; l < L->nlayers; l++) {
        const layer *ly = &L->layers[l];
        json_t *obj, *v;
        kiln_status st = get_typed(L, ly, "$", ly->root, "options", JSON_OBJECT, &obj);
        if (st != KILN_OK)
            return st;
        const char *key;
        json_object_foreach(obj, key, v) {
            char path[256], text[1024];
            jkey(path, sizeof(path), "$.options", key);
            if (!scalar_text(v, text, sizeof(text)))
                return fail_at(L, ly, path, KILN_ERR_INVALID,
                               "a session option is a string, number or bool, got %s",
                               json_type_name(v));
            if (kiln_ctx_set_option(L->ctx, key, text) != KILN_OK)
                return fail_at(L, ly, path, KILN_ERR_NOMEM, "out of memory");
        }
    }
    return KILN_OK;
}

/* ---- stages -------------------------------------------------------------------- */

/* Set option @p key of @p pi from JSON @p v, checking the JSON type first. */
static kiln_status set_json_option(loader *L, const layer *ly, const char *jpath,
                                   kiln_pass_inst *pi, const char *key, json_t *v)
{
    const kiln_option_def *def = kiln__options_lookup(pi->options, key);
    if (!def) {
        kiln__options_set_text(pi->options, key, "", L->err); /* the "unknown" message */
        kiln_error_push(L->err, "pass %s", pi->comp->name);
        return frame_at(L, ly, jpath);
    }
    bool ok;
    switch (def->type) {
    case KILN_OPT_BOOL: ok = json_is_boolean(v); break;
    case KILN_OPT_INT: ok = json_is_integer(v); break;
    case KILN_OPT_FLOAT: ok = json_is_number(v); break;
    case KILN_OPT_STRING: ok = json_is_string(v); break;
    default: ok = false; break;
    }
    char text[1024];
    if (!ok || !scalar_text(v, text, sizeof(text)))
        return fail_at(L, ly, jpath, KILN_ERR_INVALID, "option '%s' of %s expects %s, got %s",
                       key, pi->comp->name, kiln__option_type_name(def->type),
                       json_type_name(v));
    if (kiln__options_set_text(pi->options, key, text, L->err) != KILN_OK) {
        kiln_error_push(L->err, "pass %s", pi->comp->name);
        return frame_at(L, ly, jpath);
    }
    return KILN_OK;
}

static const char *const entry_keys[] = {"pass", "options", "required", "enabled"};

static kiln_status add_entry(loader *L, const layer *ly, kiln_stage *stage, json_t *e,
                             const char *jpath)
{
    kiln_status st;
    json_t *jname = e, *opts = NULL, *jreq = NULL, *jen = NULL;
    char npath[256];
    snprintf(npath, sizeof(npath), "%s", jpath);
    if (json_is_object(e)) {
        if ((st = check_keys(L, ly, jpath, e, entry_keys, KILN_ARRAY_LEN(entry_keys))) ||
            (st = get_typed(L, ly, jpath, e, "pass", JSON_STRING, &jname)) ||
            (st = get_typed(L, ly, jpath, e, "options", JSON_OBJECT, &opts)) ||
            (st = get_typed(L, ly, jpath, e, "required", JSON_TRUE, &jreq)) ||
            (st = get_typed(L, ly, jpath, e, "enabled", JSON_TRUE, &jen)))
            return st;
        jkey(npath, sizeof(npath), jpath, "pass");
        if (!jname)
            return fail_at(L, ly, npath, KILN_ERR_INVALID, "missing (the pass name)");
    } else if (!json_is_string(e)) {
        return fail_at(L, ly, jpath, KILN_ERR_INVALID,
                       "a stage entry is a pass name or {\"pass\": ...}, got %s",
                       json_type_name(e));
    }
    kiln_pass_inst *pi;
    if ((st = kiln__pipeline_append(L->ctx, stage, json_string_value(jname), &pi, L->err)))
        return frame_at(L, ly, npath);
    const char *key;
    json_t *v;
    json_object_foreach(opts, key, v) {
        char opath[320];
        jkey(opath, sizeof(opath), jpath, "options");
        char kpath[400];
        jkey(kpath, sizeof(kpath), opath, key);
        if ((st = set_json_option(L, ly, kpath, pi, key, v)) != KILN_OK)
            return st;
    }
    if (jreq && json_is_true(jreq))
        pi->required = true;
    if (jen && !json_is_true(jen)) {
        char epath[256];
        jkey(epath, sizeof(epath), jpath, "enabled");
        if (pi->required)
            return fail_at(L, ly, epath, KILN_ERR_INVALID, "cannot disable required pass %s",
                           pi->comp->name);
        pi->enabled = false;
        size_t n = strlen(ly->file) + strlen(epath) + 3;
        if (!(pi->disabled_by = kiln__malloc(n)))
            return fail_at(L, ly, epath, KILN_ERR_NOMEM, "out of memory");
        snprintf(pi->disabled_by, n, "%s: %s", ly->file, epath);
    }
    return KILN_OK;
}

static kiln_status build_stages(loader *L)
{
    for (int s = 0; s < KILN_STAGE_COUNT; s++) {
        const char *sname = kiln_stage_name((kiln_stage_id)s);
        const layer *ly = NULL;
        json_t *arr = NULL;
        for (uint32_t l = L->nlayers; l-- > 0 && !arr;) {
            arr = json_object_get(json_object_get(L->layers[l].root, "stages"), sname);
            ly = &L->layers[l];
        }
        if (!arr)
            continue;
        char spath[128];
        jkey(spath, sizeof(spath), "$.stages", sname);
        if (!json_is_array(arr))
            return fail_at(L, ly, spath, KILN_ERR_INVALID, "expected array of passes, got %s",
                           json_type_name(arr));
        size_t i;
        json_t *e;
        json_array_foreach(arr, i, e) {
            char jpath[160];
            snprintf(jpath, sizeof(jpath), "%s[%zu]", spath, i);
            kiln_status st = add_entry(L, ly, &L->p->stages[s], e, jpath);
            if (st != KILN_OK)
                return st;
        }
    }
    return KILN_OK;
}

/* ---- selectors ------------------------------------------------------------------ */

static kiln_status apply_layer_selectors(loader *L)
{
    static const char *const which[2] = {"enable", "disable"};
    for (uint32_t l = 0; l < L->nlayers; l++) {
        const layer *ly = &L->layers[l];
        for (int w = 0; w < 2; w++) {
            json_t *arr;
            kiln_status st = get_typed(L, ly, "$", ly->root, which[w], JSON_ARRAY, &arr);
            if (st != KILN_OK)
                return st;
            size_t i;
            json_t *v;
            json_array_foreach(arr, i, v) {
                char jpath[64], origin[PATH_MAX + 80];
                snprintf(jpath, sizeof(jpath), "$.%s[%zu]", which[w], i);
                if (!json_is_string(v))
                    return fail_at(L, ly, jpath, KILN_ERR_INVALID,
                                   "a selector is a PCRE2 pattern string, got %s",
                                   json_type_name(v));
                snprintf(origin, sizeof(origin), "%s: %s", ly->file, jpath);
                st = kiln__pipeline_select(L->p, json_string_value(v), w == 0, origin, L->err);
                if (st != KILN_OK)
                    return frame_at(L, ly, jpath);
            }
        }
    }
    return KILN_OK;
}

/* ---- tuners, breakpoints, engines, planner, allocator, instrumentation ------------ */

/* The last layer that has top-level @p key, or NULL. */
static const layer *deciding(const loader *L, const char *key, json_t **v)
{
    for (uint32_t l = L->nlayers; l-- > 0;) {
        if ((*v = json_object_get(L->layers[l].root, key)) != NULL)
            return &L->layers[l];
    }
    return NULL;
}

/* Check a component name of kind @p k (or a build step when k == 0). */
static kiln_status check_name(loader *L, const layer *ly, const char *jpath, const char *name,
                              kiln_component_kind k, const char *what)
{
    if (k == 0) {
        kiln_stage_id stage;
        bool after;
        if (kiln_build_step_lookup(name, &stage, &after))
            return KILN_OK;
        return fail_at(L, ly, jpath, KILN_ERR_INVALID,
                       "unknown build step \"%s\" (steps: %s, %s, %s)", name,
                       KILN_STEP_BEFORE_UB_MATCH, KILN_STEP_AFTER_UB_MATCH, KILN_STEP_AFTER_BUILD);
    }
    const kiln_component *found;
    kiln_status st = kiln__registry_find_loading(L->ctx, k, name, &found, L->err);
    if (st != KILN_OK || found)
        return st; /* a deferred plugin's load error names its entry */
    const char *hint = kiln__registry_suggest(L->ctx, k, 0, name);
    return fail_at(L, ly, jpath, KILN_ERR_NOT_FOUND, "unknown %s %s%s%s%s", what, name,
                   hint ? " (did you mean " : " (no loaded plugin registers it)",
                   hint ? hint : "", hint ? "?)" : "");
}

static kiln_status read_names(loader *L, const char *key, kiln_component_kind k,
                              const char *what, char ***out, uint32_t *n)
{
    json_t *arr;
    const layer *ly = deciding(L, key, &arr);
    if (!ly)
        return KILN_OK;
    char path[64];
    snprintf(path, sizeof(path), "$.%s", key);
    if (!json_is_array(arr))
        return fail_at(L, ly, path, KILN_ERR_INVALID, "expected array of names, got %s",
                       json_type_name(arr));
    if (json_array_size(arr) && !(*out = kiln__calloc(json_array_size(arr), sizeof(char *))))
        return fail_at(L, ly, path, KILN_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        char jpath[96];
        snprintf(jpath, sizeof(jpath), "$.%s[%zu]", key, i);
        kiln_status st;
        if (!json_is_string(v))
            return fail_at(L, ly, jpath, KILN_ERR_INVALID, "expected string, got %s",
                           json_type_name(v));
        if ((st = check_name(L, ly, jpath, json_string_value(v), k, what)) != KILN_OK)
            return st;
        if (!((*out)[(*n)++] = kiln__strdup(json_string_value(v))))
            return fail_at(L, ly, jpath, KILN_ERR_NOMEM, "out of memory");
    }
    return KILN_OK;
}

/* A string (or null = none) setting; @p k != 0 checks the component exists. */
static kiln_status read_string(loader *L, const layer *ly, json_t *v, const char *jpath,
                               kiln_component_kind k, const char *what, char **out)
{
    if (!v || json_is_null(v))
        return KILN_OK;
    if (!json_is_string(v))
        return fail_at(L, ly, jpath, KILN_ERR_INVALID, "expected string or null, got %s",
                       json_type_name(v));
    kiln_status st;
    if (k && (st = check_name(L, ly, jpath, json_string_value(v), k, what)) != KILN_OK)
        return st;
    if (!(*out = kiln__strdup(json_string_value(v))))
        return fail_at(L, ly, jpath, KILN_ERR_NOMEM, "out of memory");
    return KILN_OK;
}

static const char *const instr_keys[] = {"verify_each", "time_passes", "print_after", "dump_dir",
                                         "bisect_limit"};

static kiln_status read_instrumentation(loader *L)
{
    kiln_instrumentation *in = &L->p->instr;
    for (uint32_t l = 0; l < L->nlayers; l++) {
        const layer *ly = &L->layers[l];
        json_t *obj;
        kiln_status st = get_typed(L, ly, "$", ly->root, "instrumentation", JSON_OBJECT, &obj);
        if (st || (st = check_keys(L, ly, "$.instrumentation", obj, instr_keys,
                                   KILN_ARRAY_LEN(instr_keys))))
            return st;
        json_t *v;
        if ((st = get_typed(L, ly, "$.instrumentation", obj, "verify_each", JSON_TRUE, &v)))
            return st;
        if (v)
            in->verify_each = json_is_true(v);
        if ((st = get_typed(L, ly, "$.instrumentation", obj, "time_passes", JSON_TRUE, &v)))
            return st;
        if (v)
            in->time_passes = json_is_true(v);
        if ((v = json_object_get(obj, "print_after")) != NULL) {
            kiln__free(in->print_after);
            in->print_after = NULL;
            const char *jp = "$.instrumentation.print_after";
            if ((st = read_string(L, ly, v, jp, 0, NULL, &in->print_after)))
                return st;
            if (in->print_after) {
                int code;
                PCRE2_SIZE off;
                pcre2_code *re = pcre2_compile((PCRE2_SPTR)in->print_after,
                                               PCRE2_ZERO_TERMINATED, 0, &code, &off, NULL);
                if (!re) {
                    PCRE2_UCHAR msg[160];
                    pcre2_get_error_message(code, msg, sizeof(msg));
                    return fail_at(L, ly, jp, KILN_ERR_PARSE, "bad regex \"%s\" at offset %zu: %s",
                                   in->print_after, (size_t)off, (const char *)msg);
                }
                pcre2_code_free(re);
            }
        }
        if ((v = json_object_get(obj, "dump_dir")) != NULL) {
            kiln__free(in->dump_dir);
            in->dump_dir = NULL;
            if ((st = read_string(L, ly, v, "$.instrumentation.dump_dir", 0, NULL,
                                  &in->dump_dir)))
                return st;
        }
        if ((v = json_object_get(obj, "bisect_limit")) != NULL) {
            if (!json_is_integer(v) || json_integer_value(v) < -1)
                return fail_at(L, ly, "$.instrumentation.bisect_limit", KILN_ERR_INVALID,
                               "expected an integer >= -1 (-1 = off), got %s",
                               json_type_name(v));
            in->bisect_limit = json_integer_value(v);
        }
    }
    return KILN_OK;
}

static kiln_status read_components(loader *L)
{
    kiln_pipeline *p = L->p;
    kiln_status st;
    if ((st = read_names(L, "tuners", KILN_COMP_TUNER, "tuner", &p->tuners, &p->ntuners)) ||
        (st = read_names(L, "breakpoints", 0, NULL, &p->breakpoints, &p->nbreakpoints)) ||
        (st = read_names(L, "engines", KILN_COMP_ENGINE, "engine", &p->engines, &p->nengines)))
        return st;
    json_t *v;
    const layer *ly = deciding(L, "memory_planner", &v);
    if (ly && (st = read_string(L, ly, v, "$.memory_planner", KILN_COMP_MEM_PLANNER,
                                "memory planner", &p->memory_planner)))
        return st;
    ly = deciding(L, "allocator", &v);
    if (ly && (st = read_string(L, ly, v, "$.allocator", KILN_COMP_ALLOCATOR, "allocator",
                                &p->allocator)))
        return st;
    /* The build stage's MemoryAssigner reads the planner as a session option. */
    if (p->memory_planner && kiln_ctx_set_option(L->ctx, "kiln.memory_planner",
                                                 p->memory_planner) != KILN_OK)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    /* The multistream runtime reads the allocator as a session option. */
    if (p->allocator && kiln_ctx_set_option(L->ctx, "kiln.allocator", p->allocator) != KILN_OK)
        return kiln_errorf(L->err, KILN_ERR_NOMEM, "out of memory");
    return read_instrumentation(L);
}

/* ---- entry point ------------------------------------------------------------------- */

kiln_status kiln_manifest_load(kiln_ctx *ctx, const char *path, kiln_pipeline *out,
                               kiln_error *err)
{
    loader L;
    memset(&L, 0, sizeof(L));
    L.ctx = ctx;
    L.p = out;
    L.err = err;
    kiln_pipeline_clear(out); /* keeps instr.log, sets bisect_limit = -1 */
    kiln_status st;
    if ((st = load_chain(&L, path)) || (st = record_chain(&L)) || (st = load_plugins(&L)) ||
        (st = set_session_options(&L)) || (st = build_stages(&L)) ||
        (st = apply_layer_selectors(&L)) || (st = read_components(&L)))
        kiln_pipeline_clear(out);
    for (uint32_t i = 0; i < L.nlayers; i++)
        layer_free(&L.layers[i]);
    return st;
}
