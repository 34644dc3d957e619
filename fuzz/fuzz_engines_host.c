/*
 * fuzz_engines_host.c - onnx_run_fuzz only: the host-table pointer of the
 * engines' shared code (plugins/engines/common and the kernel libraries),
 * which a normal build links into each engine plugin and sets when that
 * plugin loads.  Linked into one binary with the kernel, it is the kernel's
 * table from the start.
 */
#include "plugin.h"

const kiln_host_api *kiln__host_shared = &kiln__host_api;
