/*
 * fileio.h - whole-file reads and atomic file output.
 *
 * kiln never leaves a partial output file behind: every writer goes through
 * kiln_file_write_atomic, which writes a temporary file in the destination's
 * directory and renames it over the destination only after the write function
 * succeeded and the data reached the disk (fflush + fsync).  A reader of the
 * destination therefore sees either the old file or the complete new one.
 *
 * Temporaries are created with mkstemp (O_EXCL, mode 0600, unpredictable name)
 * beside their destination, never at a predictable name, so a symlink planted
 * in the directory cannot redirect a write.  Every live temporary is recorded
 * in a table that kiln_file_cleanup_on_signals' handlers (and the crash
 * handler) empty with unlink(2) before the process dies.
 *
 * Output sets: between kiln_file_defer_begin and kiln_file_defer_commit, the
 * final rename of every write is held back; the commit renames them all, the
 * abort removes them all.  A command with several outputs (-o and --report)
 * thus replaces none of them unless all were written.
 *
 * The path "-" names standard output (writes: the content goes to a temporary
 * in $TMPDIR and is copied out at commit) and standard input (reads).
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
 * @p path is left untouched.  The new file gets the mode of the file it
 * replaces, else 0644.  Inside an output set the rename waits for
 * kiln_file_defer_commit.
 * Errors: KILN_ERR_IO naming @p path and strerror, or whatever @p write_fn
 * returned (its message is kept; a "file <path>" frame is not added here).
 */
KILN_API kiln_status kiln_file_write_atomic(const char *path, kiln_file_write_fn write_fn,
                                            void *ud, kiln_error *err);

/** A registered temporary file (removed on the cleanup signals). */
typedef struct kiln_tmpfile kiln_tmpfile;

/**
 * Create an empty temporary for @p path ("<path>.tmpXXXXXX" by mkstemp; for
 * "-", "$TMPDIR/kiln-stdout.tmpXXXXXX"), registered for removal on signals,
 * with the mode the final file will have.  @p fd (optional) receives the open
 * descriptor; when NULL it is closed.  For writers that take a path (exporter
 * plugins): hand them kiln_file_tmp_path, then kiln_file_tmp_commit.
 */
KILN_API kiln_status kiln_file_tmp_create(const char *path, kiln_tmpfile **tmp, int *fd,
                                          kiln_error *err);
KILN_API const char *kiln_file_tmp_path(const kiln_tmpfile *tmp);
/** fsync the temporary and rename it over @p path (or queue that inside an
 *  output set).  On failure the temporary is unlinked.  Releases @p tmp. */
KILN_API kiln_status kiln_file_tmp_commit(kiln_tmpfile *tmp, const char *path, kiln_error *err);
/** Unlink the temporary and release @p tmp (NULL-safe). */
KILN_API void kiln_file_tmp_discard(kiln_tmpfile *tmp);

/**
 * The tail of the atomic protocol for a temporary file someone else wrote:
 * fsync @p tmp, then rename it over @p path (inside an output set: at the
 * commit).  On failure @p tmp is unlinked and @p path is left untouched.
 */
KILN_API kiln_status kiln_file_commit(const char *tmp, const char *path, kiln_error *err);

/** Start an output set: renames wait for kiln_file_defer_commit.  Not nested. */
KILN_API void kiln_file_defer_begin(void);
/**
 * Commit the output set: copy the standard-output entries out, then rename
 * the others in the order they were written.  When a step fails, the
 * remaining temporaries are removed and the error says which destinations
 * were already replaced and which were not written.
 */
KILN_API kiln_status kiln_file_defer_commit(kiln_error *err);
/** Abandon the output set: unlink every held temporary (no-op outside one). */
KILN_API void kiln_file_defer_abort(void);

/**
 * Install handlers for SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGALRM,
 * SIGUSR1/2, SIGXCPU and SIGXFSZ that unlink every live temporary, then
 * re-raise the signal with its default action (exit status 128+N).  Signals
 * that are ignored when this is called (nohup, background jobs) stay ignored.
 * Idempotent.
 */
KILN_API void kiln_file_cleanup_on_signals(void);
/** Unlink every live temporary.  Async-signal-safe (the crash handler calls it). */
void kiln__tmpfiles_unlink_all(void);

/**
 * Check that @p path can be read as a file: KILN_OK, or KILN_ERR_NOT_FOUND /
 * KILN_ERR_IO saying "<path>: no such file" / "<path> is a directory, not a
 * file" / strerror.  "-" (standard input) is always fine.
 */
KILN_API kiln_status kiln_file_check_input(const char *path, kiln_error *err);

/**
 * Read the whole of @p path ("-": standard input) into a NUL-terminated
 * buffer (allocated with kiln__malloc; the caller frees it with kiln__free).
 * @p len (optional) receives the length without the terminator.  Errors:
 * KILN_ERR_IO naming the file and strerror (a directory says so),
 * KILN_ERR_NOMEM.
 */
KILN_API kiln_status kiln_file_read_all(const char *path, char **buf, size_t *len,
                                        kiln_error *err);

#endif /* KILN_CORE_FILEIO_H */
