/*
 * tensor_io.h - tensor files of `kiln run` (docs/run.md).
 *
 * Read: `.npy` (format 1.0, 2.0 and 3.0; little-endian or byte-sized dtypes
 * <f4 <f8 <i4 <i8 |b1 |u1 and a few more, C order), or raw little-endian
 * row-major data with a sidecar FILE.json giving at least `dims` and `dtype`
 * (`byte_length` and `endianness` are checked when present).  Write:
 * DIR/output.N.bin + DIR/output.N.bin.json (`name`, `index`, `dtype`,
 * `dims`, `byte_length`, ...), or DIR/output.N.npy, each file written
 * atomically.
 *
 * Tensors returned here own their dims and data (kiln_alloc); release them
 * with kiln_cli_tensor_free.  Errors name the file and the defect.
 */
#ifndef KILN_CLI_TENSOR_IO_H
#define KILN_CLI_TENSOR_IO_H

#include "cli.h"

/** Read @p path (by extension: .npy, else raw + sidecar) into @p out. */
kiln_status kiln_cli_tensor_read(const char *path, kiln_tensor *out, kiln_error *err);

/**
 * Write output @p index of the model: @p dir/output.<index>.bin and its
 * sidecar.  On failure neither file of this output is left behind.
 */
kiln_status kiln_cli_tensor_write(const char *dir, uint32_t index, const char *name,
                                  const kiln_tensor *t, kiln_error *err);

/**
 * Write output @p index as @p dir/output.<index>.npy (NPY format 1.0, C
 * order, little-endian); KILN_ERR_UNSUPPORTED for dtypes numpy lacks
 * (bfloat16, string).  Atomic: no file on failure.
 */
kiln_status kiln_cli_tensor_write_npy(const char *dir, uint32_t index, const kiln_tensor *t,
                                      kiln_error *err);

/** Free the dims and data of @p t and zero it (NULL-safe). */
void kiln_cli_tensor_free(kiln_tensor *t);

/** Minimum, maximum and mean of the elements as doubles (NaN when empty or non-numeric). */
void kiln_cli_tensor_stats(const kiln_tensor *t, double *min, double *max, double *mean);

/** "[1,25,96]" into @p buf. */
void kiln_cli_dims_str(uint32_t rank, const int64_t *dims, char *buf, size_t size);

#endif
