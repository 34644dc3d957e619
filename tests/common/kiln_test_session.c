/*
 * kiln_test_session.c - sessions on the default manifest and generated JSON
 * text for the suites that drive kiln through the embedding API
 * (test_ms_differential, test_ms_soak).
 */
#include "kiln_test.h"
#include "kiln/kiln_embed.h"

#include <stdarg.h>
#include <stdio.h>

kiln_session *kiln_test_session(const char *runtime)
{
    kiln_error *err = kiln_error_create();
    kiln_session *s = kiln_session_create();
    char path[1024];
    snprintf(path, sizeof(path), "%s/manifests/default.json",
             kiln_test_env("KILN_SOURCE_DIR", ".."));
    if (!err || !s || kiln_session_load_manifest(s, path, err) != KILN_OK ||
        kiln_session_set_option(s, "kiln.runtime", runtime, err) != KILN_OK) {
        char msg[1024] = "out of memory";
        if (err)
            kiln_error_format(err, msg, sizeof(msg));
        fprintf(stderr, "session (%s): %s\n", runtime, msg);
        kiln_session_destroy(s);
        s = NULL;
    }
    if (s)
        kiln_session_set_verbosity(s, -2);
    kiln_error_destroy(err);
    return s;
}

void kiln_test_put(kiln_test_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->len + (size_t)n + 1) * 2;
        char *s = realloc(t->s, t->cap);
        if (!s)
            abort();
        t->s = s;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}
