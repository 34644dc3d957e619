/*
 * fileio.h - whole-file reads and atomic file output.
 *
 * kiln never leaves a partial output file behind: every writer goes through
 * kiln_file_write_atomic, which writes a temporary file in the destination's
 * directory and renames it over the destination only after the write function
 * succeeded and the data reached the disk (fflush + fsync).  A reader of the
 * destination therefore sees either the old file or the complete new one.
 * Only core/, the CLI and tests include this header.
 */
#ifndef KILN_CORE_FILEIO_H
#define KILN_CORE_FILEIO_H

#include "base.h"

/** Callback that writes the whole content to @p f; returns KILN_OK or fills @p err. */
typedef kiln_status (*kiln_file_write_fn)(FILE *f, void *ud, kiln_error *err);

/**
 * Atomically replace (or create) @p path with what @p write_fn writes.  The
 * temporary is "<path>.tmpXXXXXX" (mkstemp) in the same directory, so the final
 * rename(2) never crosses file systems.  On any failure -- of @p write_fn, of a
 * write, of fflush/fsync/close or of rename -- the temporary is unlinked and
 * @p path is left untouched.  The new file gets mode 0666 & ~umask like fopen.
 * Errors: KILN_ERR_IO naming @p path and strerror, or whatever @p write_fn
 * returned (its message is kept; a "file <path>" frame is not added here).
 */
KILN_API kiln_status kiln_file_write_atomic(const char *path, kiln_file_write_fn write_fn,
                                            void *ud, kiln_error *err);

/**
 * The tail of the atomic protocol for a temporary file someone else wrote
 * (an exporter plugin that takes a path): fsync @p tmp, then rename it over
 * @p path.  On failure @p tmp is unlinked and @p path is left untouched.
 */
KILN_API kiln_status kiln_file_commit(const char *tmp, const char *path, kiln_error *err);

/**
 * Read the whole of @p path into a NUL-terminated buffer (allocated with
 * kiln__malloc; the caller frees it with kiln__free).  @p len (optional)
 * receives the length without the terminator.  Errors: KILN_ERR_IO naming the
 * file and strerror, KILN_ERR_NOMEM.
 */
KILN_API kiln_status kiln_file_read_all(const char *path, char **buf, size_t *len,
                                        kiln_error *err);

#endif /* KILN_CORE_FILEIO_H */
