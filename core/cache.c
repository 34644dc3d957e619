/*
 * cache.c - the compiled-model cache's directory, lock, index and entries
 * (see cache.h and docs/model_cache.md).  GE's ModelCache
 * (compiler/graph/build/model_cache.cc) read for behaviour: options and
 * their checks, cache.conf, the .lock flock, the .idx lookup fixed at Init,
 * timestamped entry names, appended index entries.  What kiln adds: entry
 * files are kiln output files, every write is atomic, and each index entry
 * records its file's size and SHA-256, checked on every load.
 */
#include "cache.h"
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IDX_LIST "cache_file_list"

typedef struct candidate {
    char *path;      /* full path of the entry file */
    bool has_digest; /* the index recorded size and SHA-256 */
    int64_t size;
    char sha[KILN_SHA256_HEX_LEN + 1];
} candidate;

struct kiln_cache {
    kiln_cache_mode mode;
    char *dir; /* with a trailing '/' */
    char *key, *ext;
    FILE *log;
    int lock_fd;
    bool debug_mode, manual_check;
    candidate *cand;
    uint32_t ncand;
    char *entry;   /* the entry loaded, else the name the next save writes */
    char *new_name; /* the name a save writes */
    char saved_sha[KILN_SHA256_HEX_LEN + 1]; /* of the last save, "" = none */
    int64_t saved_size;
};

bool kiln__cache_key_valid(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    if (n < 1 || n > KILN_CACHE_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = key[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 1;
    char *p = kiln__malloc(n);
    if (p)
        kiln__fmt(p, n, "%s%s", dir, name);
    return p;
}

static void warn(const kiln_cache *c, const char *fmt, const char *file, const char *why)
{
    FILE *f = c->log ? c->log : stderr;
    fputs("kiln: warning: model cache: ", f);
    fprintf(f, fmt, file, why);
    fputc('\n', f);
}

/* The directory must exist (GE); the automatic mode creates its last part. */
static kiln_status check_dir(kiln_cache *c, const char *dir, kiln_error *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0 && c->mode == KILN_CACHE_AUTO && errno == ENOENT &&
        mkdir(dir, 0755) != 0 && errno != EEXIST)
        return kiln_errorf(err, KILN_ERR_PARAM, "model cache directory %s cannot be created: %s",
                           dir, strerror(errno));
    if (stat(dir, &sb) != 0)
        return kiln_errorf(err, KILN_ERR_PARAM, "model cache directory %s: %s", dir,
                           strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return kiln_errorf(err, KILN_ERR_PARAM, "model cache directory %s is not a directory",
                           dir);
    size_t n = strlen(dir);
    c->dir = kiln__malloc(n + 2);
    if (!c->dir)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln__fmt(c->dir, n + 2, "%s%s", dir, n && dir[n - 1] == '/' ? "" : "/");
    return KILN_OK;
}

/* <dir>/cache.conf: optional; present keys must be JSON booleans. */
static kiln_status read_conf(kiln_cache *c, kiln_error *err)
{
    char *path = path_join(c->dir, "cache.conf");
    if (!path)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    if (access(path, F_OK) != 0)
        goto done;
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc || !json_is_object(doc)) {
        st = kiln_errorf(err, KILN_ERR_PARSE, "%s: %s", path,
                         doc ? "not a JSON object" : je.text);
        json_decref(doc);
        goto done;
    }
    static const char *const keys[] = {"cache_manual_check", "cache_debug_mode"};
    bool *slots[] = {&c->manual_check, &c->debug_mode};
    for (int i = 0; i < 2 && st == KILN_OK; i++) {
        json_t *v = json_object_get(doc, keys[i]);
        if (v && !json_is_boolean(v))
            st = kiln_errorf(err, KILN_ERR_PARSE, "%s: %s must be true or false", path, keys[i]);
        else if (v)
            *slots[i] = json_is_true(v);
    }
    json_decref(doc);
done:
    kiln__free(path);
    return st;
}

/* <dir>/<key>.lock, opened and locked exclusively (blocks while another holds it). */
static kiln_status take_lock(kiln_cache *c, kiln_error *err)
{
    char name[KILN_CACHE_KEY_MAX + 8];
    kiln__fmt(name, sizeof(name), "%s.lock", c->key);
    char *path = path_join(c->dir, name);
    if (!path)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (c->lock_fd < 0)
        st = kiln_errorf(err, KILN_ERR_IO, "cannot open model cache lock %s: %s", path,
                         strerror(errno));
    else
        while (flock(c->lock_fd, LOCK_EX) != 0)
            if (errno != EINTR) {
                st = kiln_errorf(err, KILN_ERR_IO, "cannot lock %s: %s", path, strerror(errno));
                break;
            }
    kiln__free(path);
    return st;
}

static bool has_ext(const char *name, const char *ext)
{
    size_t n = strlen(name), e = strlen(ext);
    return n > e + 1 && name[n - e - 1] == '.' && strcmp(name + n - e, ext) == 0;
}

static kiln_status add_candidate(kiln_cache *c, const char *name, const char *sha, int64_t size,
                                 kiln_error *err)
{
    candidate *v = kiln__realloc(c->cand, sizeof(*v) * (c->ncand + 1));
    if (!v)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    c->cand = v;
    candidate *cd = &v[c->ncand];
    memset(cd, 0, sizeof(*cd));
    /* names without '/' are relative to the directory (GE) */
    cd->path = strchr(name, '/') ? kiln__strdup(name) : path_join(c->dir, name);
    if (!cd->path)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    c->ncand++;
    if (sha && strlen(sha) == KILN_SHA256_HEX_LEN && size >= 0) {
        cd->has_digest = true;
        cd->size = size;
        memcpy(cd->sha, sha, KILN_SHA256_HEX_LEN + 1);
    }
    return KILN_OK;
}

/* The index at @p path: the document, or NULL (warned) when unreadable or malformed. */
static json_t *read_index(const kiln_cache *c, const char *path)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    json_t *list = doc ? json_object_get(doc, IDX_LIST) : NULL;
    if (!list || !json_is_array(list)) {
        warn(c, "%s: %s; its entries are ignored", path,
             doc ? "no \"" IDX_LIST "\" array" : je.text);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* GE's Init lookup: the index entries of this key, else <key>.<ext>. */
static kiln_status find_candidates(kiln_cache *c, kiln_error *err)
{
    char name[KILN_CACHE_KEY_MAX + 80];
    kiln__fmt(name, sizeof(name), "%s.idx", c->key);
    char *idx = path_join(c->dir, name);
    if (!idx)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = KILN_OK;
    if (access(idx, F_OK) == 0) {
        json_t *doc = read_index(c, idx);
        json_t *list = json_object_get(doc, IDX_LIST), *e;
        size_t i;
        json_array_foreach(list, i, e)
        {
            const char *k = json_string_value(json_object_get(e, "graph_key"));
            const char *f = json_string_value(json_object_get(e, "cache_file_name"));
            json_t *sz = json_object_get(e, "kiln_size");
            if (!k || !f || strcmp(k, c->key) != 0 || !has_ext(f, c->ext))
                continue;
            st = add_candidate(c, f, json_string_value(json_object_get(e, "kiln_sha256")),
                               json_is_integer(sz) ? (int64_t)json_integer_value(sz) : -1, err);
            if (st != KILN_OK)
                break;
        }
        json_decref(doc);
    } else {
        kiln__fmt(name, sizeof(name), "%s.%s", c->key, c->ext);
        char *om = path_join(c->dir, name);
        if (!om)
            st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        else if (access(om, F_OK) == 0)
            st = add_candidate(c, name, NULL, -1, err);
        kiln__free(om);
    }
    kiln__free(idx);
    return st;
}

/* The name a save writes: <key>_<YYYYmmddHHMMSS>.<ext> (GE, local time) or <key>.<ext>. */
static kiln_status name_new_entry(kiln_cache *c, kiln_error *err)
{
    char name[KILN_CACHE_KEY_MAX + 80], stamp[32] = "";
    if (c->mode == KILN_CACHE_GE) {
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || !strftime(stamp, sizeof(stamp), "_%Y%m%d%H%M%S", &tm))
            return kiln_errorf(err, KILN_ERR_INTERNAL, "model cache: cannot read the time");
    }
    kiln__fmt(name, sizeof(name), "%s%s.%s", c->key, stamp, c->ext);
    c->new_name = path_join(c->dir, name);
    c->entry = c->new_name ? kiln__strdup(c->new_name) : NULL;
    return c->entry ? KILN_OK : kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
}

kiln_status kiln__cache_open(kiln_cache_mode mode, const char *dir, const char *key,
                             const char *ext, FILE *log, kiln_cache **out, kiln_error *err)
{
    *out = NULL;
    if (!dir || !dir[0] || !key || !key[0])
        return KILN_OK; /* disabled, as GE's Init */
    if (!kiln__cache_key_valid(key))
        return kiln_errorf(err, KILN_ERR_PARAM,
                           "model cache key '%s' is invalid: it must match "
                           "^[A-Za-z0-9_\\-]{1,128}$ (" KILN_CACHE_GE_KEY_OPTION ")",
                           key);
    if (!ext || !ext[0] || strchr(ext, '/'))
        return kiln_errorf(err, KILN_ERR_INVALID, "model cache: no entry extension");
    kiln_cache *c = kiln__calloc(1, sizeof(*c));
    if (!c)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    c->mode = mode;
    c->log = log;
    c->lock_fd = -1;
    kiln_status st = KILN_ERR_NOMEM;
    if (!(c->key = kiln__strdup(key)) || !(c->ext = kiln__strdup(ext[0] == '.' ? ext + 1 : ext))) {
        kiln_errorf(err, st, "out of memory");
        goto fail;
    }
    if ((st = check_dir(c, dir, err)) != KILN_OK || (st = read_conf(c, err)) != KILN_OK ||
        (st = take_lock(c, err)) != KILN_OK || (st = find_candidates(c, err)) != KILN_OK ||
        (st = name_new_entry(c, err)) != KILN_OK)
        goto fail;
    *out = c;
    return KILN_OK;
fail:
    kiln__cache_close(c);
    return st;
}

void kiln__cache_close(kiln_cache *c)
{
    if (!c)
        return;
    if (c->lock_fd >= 0)
        close(c->lock_fd); /* releases the flock */
    for (uint32_t i = 0; i < c->ncand; i++)
        kiln__free(c->cand[i].path);
    kiln__free(c->cand);
    kiln__free(c->dir);
    kiln__free(c->key);
    kiln__free(c->ext);
    kiln__free(c->entry);
    kiln__free(c->new_name);
    kiln__free(c);
}

uint32_t kiln__cache_candidate_count(const kiln_cache *c) { return c ? c->ncand : 0; }
bool kiln__cache_debug_mode(const kiln_cache *c) { return c && c->debug_mode; }
bool kiln__cache_manual_check(const kiln_cache *c) { return c && c->manual_check; }
const char *kiln__cache_dir(const kiln_cache *c) { return c ? c->dir : NULL; }
const char *kiln__cache_entry(const kiln_cache *c) { return c ? c->entry : NULL; }

/* ---- load: copy while hashing ------------------------------------------------------ */

typedef struct copy_job {
    const candidate *cd;
    FILE *in;
    bool trusted; /* the digest memo knows the entry as it is: no hashing */
    bool corrupt; /* the entry did not match its record */
    char why[128];
    char hex[KILN_SHA256_HEX_LEN + 1]; /* what was read, when hashed */
} copy_job;

static kiln_status copy_entry(FILE *out, void *ud, kiln_error *err)
{
    copy_job *j = ud;
    struct sha256_ctx md;
    sha256_init(&md);
    unsigned char *buf = kiln__malloc(1 << 16);
    kiln_status st = KILN_OK;
    if (!buf) {
        st = kiln_errorf(err, KILN_ERR_NOMEM, "out of memory copying %s", j->cd->path);
        goto done;
    }
    size_t n;
    int64_t total = 0;
    while ((n = fread(buf, 1, 1 << 16, j->in)) > 0) {
        total += (int64_t)n;
        if (!j->trusted)
            sha256_update(&md, n, buf);
        if (fwrite(buf, 1, n, out) != n) {
            st = kiln_errorf(err, KILN_ERR_IO, "cannot copy %s", j->cd->path);
            goto done;
        }
    }
    if (ferror(j->in)) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", j->cd->path, strerror(errno));
        goto done;
    }
    char *hex = j->hex; /* what was read: hashed, or the index's digest when trusted */
    if (j->trusted) {
        memcpy(hex, j->cd->sha, sizeof(j->hex));
    } else {
        unsigned char d[SHA256_DIGEST_SIZE];
        sha256_digest(&md, SHA256_DIGEST_SIZE, d);
        kiln__to_hex(d, SHA256_DIGEST_SIZE, hex);
    }
    if (j->cd->has_digest && (total != j->cd->size || strcmp(hex, j->cd->sha) != 0)) {
        j->corrupt = true;
        if (total != j->cd->size)
            kiln__fmt(j->why, sizeof(j->why), "%lld bytes, the index says %lld",
                      (long long)total, (long long)j->cd->size);
        else
            kiln__fmt(j->why, sizeof(j->why), "SHA-256 %.12s..., the index says %.12s...", hex,
                      j->cd->sha);
        st = kiln_errorf(err, KILN_ERR_PARSE, "%s: %s", j->cd->path, j->why);
    }
done:
    kiln__free(buf);
    return st;
}

kiln_status kiln__cache_load(kiln_cache *c, const char *out_path, bool *hit, kiln_error *err)
{
    *hit = false;
    if (!c)
        return KILN_OK;
    for (uint32_t i = 0; i < c->ncand; i++) {
        const candidate *cd = &c->cand[i];
        if (c->mode == KILN_CACHE_AUTO && !cd->has_digest) {
            warn(c, "%s: %s; rebuilding", cd->path, "no SHA-256 recorded in the index");
            continue;
        }
        copy_job j = {.cd = cd, .in = fopen(cd->path, "rb")};
        if (!j.in) {
            warn(c, "%s: %s; entry skipped", cd->path, strerror(errno));
            continue;
        }
        /* an entry checked before and not changed since (digest memo:
         * same inode, size and timestamps) is copied without hashing */
        struct stat sb;
        kiln_file_sig before, after;
        bool have_sig = fstat(fileno(j.in), &sb) == 0 && S_ISREG(sb.st_mode);
        char known[KILN_SHA256_HEX_LEN + 1];
        if (have_sig) {
            kiln__file_sig_of(&sb, &before);
            j.trusted = cd->has_digest && before.size == cd->size &&
                        kiln__digest_memo_lookup(c->dir, &before, known) &&
                        strcmp(known, cd->sha) == 0;
        }
        kiln_error e;
        kiln_error_clear(&e);
        kiln_status st = kiln_file_write_atomic(out_path, copy_entry, &j, &e);
        if (st == KILN_OK && have_sig && !j.trusted && fstat(fileno(j.in), &sb) == 0) {
            kiln__file_sig_of(&sb, &after);
            kiln__digest_memo_record(c->dir, &before, &after, j.hex);
        }
        fclose(j.in);
        if (j.corrupt) {
            warn(c, "%s is corrupt (%s); entry skipped", cd->path, j.why);
            continue;
        }
        if (st != KILN_OK) {
            if (err)
                *err = e; /* the output could not be written: the caller's error */
            return st;
        }
        char *p = kiln__strdup(cd->path);
        if (!p)
            return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
        kiln__free(c->entry);
        c->entry = p;
        *hit = true;
        return KILN_OK;
    }
    return KILN_OK;
}

/* ---- save -------------------------------------------------------------------------- */

static kiln_status dump_index(FILE *f, void *ud, kiln_error *err)
{
    if (json_dumpf(ud, f, JSON_INDENT(4)) != 0 || fputc('\n', f) == EOF)
        return kiln_errorf(err, KILN_ERR_IO, "cannot write the model cache index");
    return KILN_OK;
}

/* Record the saved entry in <key>.idx: appended (GE) or alone (automatic key). */
static kiln_status write_index(kiln_cache *c, const char *sha, int64_t size, kiln_error *err)
{
    char name[KILN_CACHE_KEY_MAX + 8];
    kiln__fmt(name, sizeof(name), "%s.idx", c->key);
    char *idx = path_join(c->dir, name);
    if (!idx)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    json_t *doc = c->mode == KILN_CACHE_GE && access(idx, F_OK) == 0 ? read_index(c, idx) : NULL;
    if (!doc) {
        doc = json_object();
        json_object_set_new(doc, IDX_LIST, json_array());
    }
    const char *base = strrchr(c->new_name, '/');
    json_t *e = json_object();
    json_object_set_new(e, "graph_key", json_string(c->key));
    json_object_set_new(e, "cache_file_name", json_string(base ? base + 1 : c->new_name));
    json_object_set_new(e, "kiln_sha256", json_string(sha));
    json_object_set_new(e, "kiln_size", json_integer((json_int_t)size));
    kiln_status st = json_array_append_new(json_object_get(doc, IDX_LIST), e) == 0
                         ? kiln_file_write_atomic(idx, dump_index, doc, err)
                         : kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    json_decref(doc);
    kiln__free(idx);
    return st;
}

kiln_status kiln__cache_save(kiln_cache *c, kiln_cache_produce_fn produce, void *ud,
                             kiln_error *err)
{
    if (!c || c->debug_mode)
        return KILN_OK; /* disabled, or cache_debug_mode: GE saves nothing */
    kiln_tmpfile *t;
    kiln_status st = kiln_file_tmp_create(c->new_name, &t, NULL, err);
    if (st != KILN_OK)
        return st;
    char sha[KILN_SHA256_HEX_LEN + 1];
    struct stat sb;
    if ((st = produce(kiln_file_tmp_path(t), ud, err)) != KILN_OK ||
        (st = kiln__sha256_file(kiln_file_tmp_path(t), sha, err)) != KILN_OK) {
        kiln_file_tmp_discard(t);
        return st;
    }
    if (stat(kiln_file_tmp_path(t), &sb) != 0) {
        st = kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", kiln_file_tmp_path(t),
                         strerror(errno));
        kiln_file_tmp_discard(t);
        return st;
    }
    if ((st = kiln_file_tmp_commit(t, c->new_name, err)) != KILN_OK)
        return st;
    if ((st = write_index(c, sha, (int64_t)sb.st_size, err)) != KILN_OK)
        return st;
    memcpy(c->saved_sha, sha, sizeof(sha));
    c->saved_size = (int64_t)sb.st_size;
    char *p = kiln__strdup(c->new_name);
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln__free(c->entry);
    c->entry = p;
    return KILN_OK;
}

/* ---- the input-key alias ----------------------------------------------------------- */

static char *alias_path(const char *dir, const char *alias)
{
    size_t n = strlen(dir) + strlen(alias) + 16;
    char *p = kiln__malloc(n);
    if (p)
        kiln__fmt(p, n, "%s%s%s.alias", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/",
                  alias);
    return p;
}

bool kiln__cache_alias_read(const char *dir, const char *alias, char key[KILN_SHA256_HEX_LEN + 1])
{
    key[0] = 0;
    char *p = alias_path(dir, alias);
    FILE *f = p ? fopen(p, "r") : NULL;
    kiln__free(p);
    if (!f)
        return false;
    char buf[KILN_SHA256_HEX_LEN + 4] = "";
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    if (n != KILN_SHA256_HEX_LEN + 1 || buf[KILN_SHA256_HEX_LEN] != '\n')
        return false;
    for (int i = 0; i < KILN_SHA256_HEX_LEN; i++)
        if (!strchr("0123456789abcdef", buf[i]) || !buf[i])
            return false;
    memcpy(key, buf, KILN_SHA256_HEX_LEN);
    key[KILN_SHA256_HEX_LEN] = 0;
    return true;
}

static kiln_status write_line(FILE *f, void *ud, kiln_error *err)
{
    if (fprintf(f, "%s\n", (const char *)ud) < 0)
        return kiln_errorf(err, KILN_ERR_IO, "cannot write a model cache alias");
    return KILN_OK;
}

kiln_status kiln__cache_alias_write(const char *dir, const char *alias, const char *key,
                                    kiln_error *err)
{
    char *p = alias_path(dir, alias);
    if (!p)
        return kiln_errorf(err, KILN_ERR_NOMEM, "out of memory");
    kiln_status st = kiln_file_write_atomic(p, write_line, (void *)(uintptr_t)key, err);
    kiln__free(p);
    return st;
}

const char *kiln__cache_saved_sha256(const kiln_cache *c)
{
    return c && c->saved_sha[0] ? c->saved_sha : NULL;
}

int64_t kiln__cache_saved_size(const kiln_cache *c)
{
    return c && c->saved_sha[0] ? c->saved_size : -1;
}

kiln_status kiln__cache_copy_checked(const char *src, const char *sha, int64_t size,
                                     const char *out, kiln_error *err)
{
    candidate cd = {.path = (char *)(uintptr_t)src, .has_digest = true, .size = size};
    if (!sha || strlen(sha) != KILN_SHA256_HEX_LEN)
        return kiln_errorf(err, KILN_ERR_INVALID, "%s: no SHA-256 to check", src);
    memcpy(cd.sha, sha, KILN_SHA256_HEX_LEN + 1);
    copy_job j = {.cd = &cd, .in = fopen(src, "rb")};
    if (!j.in)
        return kiln_errorf(err, KILN_ERR_IO, "cannot read %s: %s", src, strerror(errno));
    kiln_status st = kiln_file_write_atomic(out, copy_entry, &j, err);
    fclose(j.in);
    return st;
}
