/*
 * io_reuse.h - GE's model I/O reuse check (ModelV2Executor::CheckIoReuseAddrs,
 * ParseOutputReuseInputMemIndexes; docs/control_flow_lowering.md).
 *
 * A model may declare that output o reuses the memory of input i (an inplace
 * model output): the session option `ge.exec.outputReuseInputMemIndexes`
 * ("i,o|i,o|..."), which the build stores on the root graph as the string
 * attribute `output_reuse_input_mem_indexes`, or the build's own record of the
 * same name (MemoryAssigner: list_int of flat pairs output, input).  Before
 * each execution the runtimes check that output o's address is input i's.
 */
#ifndef KILN_IO_REUSE_H
#define KILN_IO_REUSE_H

#include <kiln/kiln.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_IO_REUSE_OPTION "ge.exec.outputReuseInputMemIndexes"
#define KILN_IO_REUSE_ATTR "output_reuse_input_mem_indexes"

typedef struct kiln_io_pair {
    size_t input, output;
} kiln_io_pair;

/**
 * GE ParseOutputReuseInputMemIndexes: pairs "in,out" separated by '|'.  Empty
 * segments, segments without a comma, segments with a '-' and segments whose
 * halves do not start with a decimal number (after blanks; std::stoul) are
 * skipped, in order.  Writes at most @p cap pairs to @p out (may be NULL) and
 * returns how many pairs the string holds.
 */
size_t kiln_io_reuse_parse(const char *s, kiln_io_pair *out, size_t cap);

/**
 * The pairs of a model: the string attribute `output_reuse_input_mem_indexes`
 * of @p root (GE form, the user's declaration), or, unless @p declared_only,
 * its list_int form (the build's record: flat output, input pairs).
 * *pairs is malloc'd (free it; NULL when none).  Errors: a list of odd
 * length or with a negative entry, naming the graph.
 */
kiln_status kiln_io_reuse_from_graph(kiln_graph *root, bool declared_only, kiln_io_pair **pairs,
                                     size_t *n, kiln_error *err);

/**
 * GE CheckIoReuseAddrs: KILN_OK when there are no pairs, when either address
 * array is NULL or either count is 0; otherwise, per pair, an index out of
 * range or output address != input address is KILN_ERR_PARAM naming the
 * pair, the addresses and the option.
 */
kiln_status kiln_io_reuse_check(const kiln_io_pair *pairs, size_t npairs, const void *const *inputs,
                                size_t nin, const void *const *outputs, size_t nout,
                                kiln_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KILN_IO_REUSE_H */
