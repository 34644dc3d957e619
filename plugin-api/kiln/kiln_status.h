/*
 * kiln_status.h - status codes and the caller-owned error object.
 *
 * Every fallible kiln function returns a kiln_status.  Human-readable detail goes
 * into a kiln_error owned by the caller; the first error recorded wins (it is the
 * cause), later ones only bump a counter.  Context frames (file, JSON path, stage,
 * pass, plugin, node) are pushed by each layer the error crosses, so the CLI can
 * print "kiln: <frames>: <message>".
 *
 * This header is part of the stable plugin ABI: codes are only ever appended.
 */
#ifndef KILN_STATUS_H
#define KILN_STATUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KILN_BUILDING_CORE)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#if defined(__GNUC__)
#define KILN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define KILN_PRINTF(fmt, args)
#endif

/* X(name, value, description).  APPEND ONLY: values are part of the ABI. */
#define KILN_STATUS_MAP(X)                                                  \
    X(OK, 0, "success")                                                     \
    X(ERR_NOMEM, 1, "out of memory")                                        \
    X(ERR_INVALID, 2, "invalid argument or input")                          \
    X(ERR_IO, 3, "input/output error")                                      \
    X(ERR_PARSE, 4, "parse error")                                          \
    X(ERR_NOT_FOUND, 5, "not found")                                        \
    X(ERR_DUPLICATE, 6, "duplicate")                                        \
    X(ERR_VERSION, 7, "version mismatch")                                   \
    X(ERR_PLUGIN_INIT, 8, "plugin initialisation failed")                   \
    X(ERR_PASS, 9, "pass failed")                                           \
    X(ERR_VERIFY, 10, "IR verification failed")                             \
    X(ERR_LIMIT, 11, "limit exceeded")                                      \
    X(ERR_INTERNAL, 12, "internal error")                                   \
    X(ERR_UNSUPPORTED, 13, "unsupported")                                   \
    X(ERR_PARAM, 14, "parameter invalid")                                   \
    X(PAUSED, 15, "build paused at a build step")                           \
    X(ERR_CONFLICT, 16, "refused: the change would conflict")

typedef enum kiln_status {
#define KILN__ST(name, value, desc) KILN_##name = value,
    KILN_STATUS_MAP(KILN__ST)
#undef KILN__ST
} kiln_status;

/**
 * Opaque, caller-owned error object.  A plugin receives one with every
 * fallible callback; a program embedding kiln creates its own with
 * kiln_error_create() and reads it with kiln_error_format() (kiln_embed.h).
 */
typedef struct kiln_error kiln_error;

/** Symbolic name of a status ("ERR_PARSE"); never NULL. */
KILN_API const char *kiln_status_name(kiln_status st);
/** One-line description of a status ("parse error"); never NULL. */
KILN_API const char *kiln_status_str(kiln_status st);

/**
 * Record an error.  Keeps the first error's code and message; later calls only
 * count.  Returns @p code so failure sites read `return kiln_errorf(err, ...)`.
 * @p err may be NULL (the error is then dropped).
 */
KILN_API kiln_status kiln_errorf(kiln_error *err, kiln_status code, const char *fmt, ...)
    KILN_PRINTF(3, 4);

/**
 * Push a context frame ("pass PruneGraphPass", "file a.json", "$.nodes[3]").
 * Frames are printed outermost first.  Only the frames pushed while the first
 * error is being propagated are kept; of a long chain, the first (innermost)
 * and the last (outermost) ones, with a count of those left out between.  The
 * first error's message is kept whole.  Returns the error's code.
 */
KILN_API kiln_status kiln_error_push(kiln_error *err, const char *fmt, ...) KILN_PRINTF(2, 3);

/** The recorded code (KILN_OK when none). */
KILN_API kiln_status kiln_error_code(const kiln_error *err);
/** The recorded message without frames ("" when none). Borrowed. */
KILN_API const char *kiln_error_message(const kiln_error *err);
/** A new, empty error object (for a worker thread of a plugin, say); NULL on OOM.  Destroy with kiln_error_destroy. */
KILN_API kiln_error *kiln_error_create(void);
KILN_API void kiln_error_destroy(kiln_error *err);
/** Reset to "no error" (reuse one object for several calls). */
KILN_API void kiln_error_clear(kiln_error *err);
/** "frame: frame: message", outermost frame first, into @p buf (truncated to @p size). */
KILN_API void kiln_error_format(const kiln_error *err, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* KILN_STATUS_H */
