/*
 * plugin.c - libkiln_kmodel.so: the build stage's MergeWeights and
 * TaskGenerator passes and the `kmodel` frontend (.kmodel files), the
 * executable model file of docs/model_format.md.
 */
#include "kmodel.h"

const kiln_frontend_desc km_frontend = {
    .struct_size = sizeof(kiln_frontend_desc),
    .name = "kmodel",
    .summary = "kiln executable model files (.kmodel): the built graph, task sequences and "
               "weights (docs/model_format.md)",
    .flags = KILN_FRONTEND_IO_NAMES, /* kiln run names a loaded model's outputs by them */
    .extensions = ".kmodel",
    .import_file = km_import_file,
    .export_file = km_export_file,
};

static kiln_status init(const kiln_host_api *h, kiln_registrar *r, kiln_error *e)
{
    (void)h;
    (void)e;
    kiln_status st = kiln_register_pass(r, &km_merge_weights_pass);
    if (st == KILN_OK)
        st = kiln_register_pass(r, &km_task_generator_pass);
    if (st == KILN_OK)
        st = kiln_register_frontend(r, &km_frontend);
    return st;
}

KILN_PLUGIN_DEFINE("kiln.kmodel", "0.1.0", "Apache-2.0",
                   "MergeWeights, TaskGenerator and the .kmodel executable model file", init, NULL)
