/*
 * fuzz_io.h - what the libFuzzer harnesses share: their input and output
 * files (memfds named by /proc/self/fd paths, so the importers read a real
 * path and nothing touches the disk) and a fatal report.
 */
#ifndef KILN_FUZZ_IO_H
#define KILN_FUZZ_IO_H

#include <kiln/kiln_embed.h>
#include <stddef.h>
#include <stdint.h>

/** Paths of the input and output memfds (valid after fuzz_io_setup). */
extern char fuzz_in_path[64], fuzz_out_path[64];
/** Descriptor of the output memfd (to truncate it between writes). */
extern int fuzz_out_fd;

/** Create the two memfds, named "kiln-fuzz-in<ext>" / "kiln-fuzz-out<ext>";
 * @p harness names the program in fuzz_die's reports.  Once per process. */
void fuzz_io_setup(const char *harness, const char *ext);
/** Make the input file hold exactly @p size bytes of @p data. */
void fuzz_put_input(const uint8_t *data, size_t size);
/** Report "<harness>: <what>: <err>" on stderr and abort (a finding). */
_Noreturn void fuzz_die(const char *what, const kiln_error *err);

#endif
