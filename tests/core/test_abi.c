/*
 * test_abi.c - the ABI tripwire (GStreamer gstabi.c): pins sizeof and the
 * offset of every field of every public struct, and the host table's layout.
 * A failure here means a change broke plugins built against older headers:
 * append fields at the end (and bump KILN_ABI_MINOR) instead.  Values are for
 * LP64 (x86_64, aarch64).
 *
 * This file includes the headers WITHOUT KILN_EXPERIMENTAL: every kind pinned
 * here is declared without it (the runtime allocators became a stable kind
 * once the multistream runtime used them).  Memory planners are not pinned
 * here yet.  Every host-table slot is pinned.
 */
#undef KILN_EXPERIMENTAL
#include "kiln_test.h"
#include <kiln/kiln.h>
#include <stdio.h>

static int bad;

#define SIZE(T, n)                                                                     \
    do {                                                                               \
        if (sizeof(T) != (size_t)(n)) {                                                \
            fprintf(stderr, "sizeof(" #T ") = %zu, pinned %d\n", sizeof(T), (int)(n)); \
            bad++;                                                                     \
        }                                                                              \
    } while (0)
#define OFF(T, f, n)                                                                   \
    do {                                                                               \
        if (offsetof(T, f) != (size_t)(n)) {                                           \
            fprintf(stderr, "offsetof(" #T ", " #f ") = %zu, pinned %d\n",             \
                    offsetof(T, f), (int)(n));                                         \
            bad++;                                                                     \
        }                                                                              \
    } while (0)

static void test_abi_struct_layouts(void)
{
    bad = 0;
    /* fusion passes (kiln_pass.h, stable since the executor landed) */
    SIZE(kiln_fusion_pass_desc, 136);
    OFF(kiln_fusion_pass_desc, struct_size, 0);
    OFF(kiln_fusion_pass_desc, name, 8);
    OFF(kiln_fusion_pass_desc, summary, 16);
    OFF(kiln_fusion_pass_desc, flags, 24);
    OFF(kiln_fusion_pass_desc, option_count, 28);
    OFF(kiln_fusion_pass_desc, options, 32);
    OFF(kiln_fusion_pass_desc, create, 40);
    OFF(kiln_fusion_pass_desc, destroy, 48);
    OFF(kiln_fusion_pass_desc, kind, 56);
    OFF(kiln_fusion_pass_desc, stage, 60);
    OFF(kiln_fusion_pass_desc, patterns, 64);
    OFF(kiln_fusion_pass_desc, decompose_ops, 72);
    OFF(kiln_fusion_pass_desc, meet_requirements, 80);
    OFF(kiln_fusion_pass_desc, replacement, 88);
    OFF(kiln_fusion_pass_desc, run, 96);
    OFF(kiln_fusion_pass_desc, reserved, 104);
    SIZE(kiln_fusion_boundary, 56);
    OFF(kiln_fusion_boundary, struct_size, 0);
    OFF(kiln_fusion_boundary, nodes, 8);
    OFF(kiln_fusion_boundary, node_count, 16);
    OFF(kiln_fusion_boundary, inputs, 24);
    OFF(kiln_fusion_boundary, input_count, 32);
    OFF(kiln_fusion_boundary, outputs, 40);
    OFF(kiln_fusion_boundary, output_count, 48);
    /* the op registry (kiln_op.h, ABI 1.1) */
    SIZE(kiln_op_def, 112);
    OFF(kiln_op_def, struct_size, 0);
    OFF(kiln_op_def, type, 8);
    OFF(kiln_op_def, domain, 16);
    OFF(kiln_op_def, summary, 24);
    OFF(kiln_op_def, flags, 32);
    OFF(kiln_op_def, min_inputs, 36);
    OFF(kiln_op_def, max_inputs, 40);
    OFF(kiln_op_def, min_outputs, 44);
    OFF(kiln_op_def, max_outputs, 48);
    OFF(kiln_op_def, infer, 56);
    OFF(kiln_op_def, fold, 64);
    OFF(kiln_op_def, user, 72);
    OFF(kiln_op_def, reserved, 80);
    SIZE(kiln_op_shape, 72);
    OFF(kiln_op_shape, d, 8);
    SIZE(kiln_op_value, 104);
    OFF(kiln_op_value, s, 8);
    OFF(kiln_op_value, data, 80);
    OFF(kiln_op_value, nbytes, 88);
    OFF(kiln_op_value, borrowed, 96);
    SIZE(kiln_op_io, 88);
    OFF(kiln_op_io, dtype, 4);
    OFF(kiln_op_io, s, 8);
    OFF(kiln_op_io, val, 80);
    SIZE(kiln_op_node, 72);
    OFF(kiln_op_node, n, 8);
    OFF(kiln_op_node, attrs, 16);
    OFF(kiln_op_node, nin, 40);
    OFF(kiln_op_node, in, 48);
    OFF(kiln_op_node, def, 64);
    SIZE(kiln_runtime_desc, 112);
    OFF(kiln_runtime_desc, struct_size, 0);
    OFF(kiln_runtime_desc, name, 8);
    OFF(kiln_runtime_desc, summary, 16);
    OFF(kiln_runtime_desc, flags, 24);
    OFF(kiln_runtime_desc, option_count, 28);
    OFF(kiln_runtime_desc, options, 32);
    OFF(kiln_runtime_desc, create, 40);
    OFF(kiln_runtime_desc, destroy, 48);
    OFF(kiln_runtime_desc, load, 56);
    OFF(kiln_runtime_desc, run, 64);
    OFF(kiln_runtime_desc, unload, 72);
    OFF(kiln_runtime_desc, profile, 80); /* 0.5: was reserved[0] */
    OFF(kiln_runtime_desc, reserved, 88);
    /* run profiles (kiln_runtime.h, 0.5) */
    SIZE(kiln_prof_task, 56);
    OFF(kiln_prof_task, graph, 0);
    OFF(kiln_prof_task, node, 8);
    OFF(kiln_prof_task, engine, 16);
    OFF(kiln_prof_task, stream, 24);
    OFF(kiln_prof_task, run, 28);
    OFF(kiln_prof_task, depth, 32);
    OFF(kiln_prof_task, start_ns, 40);
    OFF(kiln_prof_task, end_ns, 48);
    SIZE(kiln_prof_flow, 12);
    OFF(kiln_prof_flow, event, 0);
    OFF(kiln_prof_flow, send, 4);
    OFF(kiln_prof_flow, recv, 8);
    SIZE(kiln_prof_memory, 24);
    OFF(kiln_prof_memory, memory_type, 0);
    OFF(kiln_prof_memory, arena_bytes, 8);
    OFF(kiln_prof_memory, own_bytes, 16);
    SIZE(kiln_run_profile, 64);
    OFF(kiln_run_profile, struct_size, 0);
    OFF(kiln_run_profile, stream_count, 4);
    OFF(kiln_run_profile, run_count, 8);
    OFF(kiln_run_profile, task_count, 12);
    OFF(kiln_run_profile, tasks, 16);
    OFF(kiln_run_profile, flow_count, 24);
    OFF(kiln_run_profile, flows, 32);
    OFF(kiln_run_profile, memory_count, 40);
    OFF(kiln_run_profile, memory, 48);
    OFF(kiln_run_profile, truncated, 56);
    SIZE(kiln_symtab_anchor, 16);
    OFF(kiln_symtab_anchor, graph, 0);
    OFF(kiln_symtab_anchor, node, 4);
    OFF(kiln_symtab_anchor, index, 8);
    OFF(kiln_symtab_anchor, is_output, 12);
    SIZE(kiln_anchor, 8);
    OFF(kiln_anchor, node, 0);
    OFF(kiln_anchor, index, 4);
    SIZE(kiln_tensor_value, 32);
    OFF(kiln_tensor_value, dtype, 0);
    OFF(kiln_tensor_value, rank, 4);
    OFF(kiln_tensor_value, dims, 8);
    OFF(kiln_tensor_value, data, 16);
    OFF(kiln_tensor_value, nbytes, 24);
    SIZE(kiln_option_def, 48);
    OFF(kiln_option_def, struct_size, 0);
    OFF(kiln_option_def, type, 4);
    OFF(kiln_option_def, name, 8);
    OFF(kiln_option_def, default_value, 16);
    OFF(kiln_option_def, help, 24);
    OFF(kiln_option_def, min, 32);
    OFF(kiln_option_def, max, 40);
    SIZE(kiln_pass_desc, 128);
    OFF(kiln_pass_desc, struct_size, 0);
    OFF(kiln_pass_desc, kind, 4);
    OFF(kiln_pass_desc, name, 8);
    OFF(kiln_pass_desc, summary, 16);
    OFF(kiln_pass_desc, flags, 24);
    OFF(kiln_pass_desc, option_count, 28);
    OFF(kiln_pass_desc, options, 32);
    OFF(kiln_pass_desc, create, 40);
    OFF(kiln_pass_desc, destroy, 48);
    OFF(kiln_pass_desc, run_graph, 56);
    OFF(kiln_pass_desc, run_node, 64);
    OFF(kiln_pass_desc, on_start_graph, 72);
    OFF(kiln_pass_desc, on_suspend_nodes_leaked, 80);
    OFF(kiln_pass_desc, on_finish_graph, 88);
    OFF(kiln_pass_desc, reserved, 96);
    SIZE(kiln_mem_anchor, 24);
    OFF(kiln_mem_anchor, graph, 0);
    OFF(kiln_mem_anchor, node, 8);
    OFF(kiln_mem_anchor, index, 12);
    OFF(kiln_mem_anchor, is_output, 16);
    SIZE(kiln_checker_query, 88);
    OFF(kiln_checker_query, struct_size, 0);
    OFF(kiln_checker_query, graph_info, 4);
    OFF(kiln_checker_query, root, 8);
    OFF(kiln_checker_query, a, 16);
    OFF(kiln_checker_query, b, 40);
    OFF(kiln_checker_query, type_a, 64);
    OFF(kiln_checker_query, type_b, 68);
    OFF(kiln_checker_query, symbol, 72);
    OFF(kiln_checker_query, symbol_count, 80);
    SIZE(kiln_attr_pair, 2);
    OFF(kiln_attr_pair, a, 0);
    OFF(kiln_attr_pair, b, 1);
    SIZE(kiln_checker_desc, 80);
    OFF(kiln_checker_desc, struct_size, 0);
    OFF(kiln_checker_desc, name, 8);
    OFF(kiln_checker_desc, summary, 16);
    OFF(kiln_checker_desc, flags, 24);
    OFF(kiln_checker_desc, pair_count, 28);
    OFF(kiln_checker_desc, pairs, 32);
    OFF(kiln_checker_desc, check, 40);
    OFF(kiln_checker_desc, reserved, 48);
    SIZE(kiln_op_info, 40);
    OFF(kiln_op_info, struct_size, 0);
    OFF(kiln_op_info, op_type, 8);
    OFF(kiln_op_info, dtype_mask, 16);
    OFF(kiln_op_info, formats, 24);
    OFF(kiln_op_info, flags, 32);
    SIZE(kiln_tensor, 32);
    OFF(kiln_tensor, dtype, 0);
    OFF(kiln_tensor, rank, 4);
    OFF(kiln_tensor, dims, 8);
    OFF(kiln_tensor, data, 16);
    OFF(kiln_tensor, nbytes, 24);
    SIZE(kiln_kernel_args, 72);
    OFF(kiln_kernel_args, struct_size, 0);
    OFF(kiln_kernel_args, graph, 8);
    OFF(kiln_kernel_args, node, 16);
    OFF(kiln_kernel_args, input_count, 20);
    OFF(kiln_kernel_args, output_count, 24);
    OFF(kiln_kernel_args, inputs, 32);
    OFF(kiln_kernel_args, outputs, 40);
    OFF(kiln_kernel_args, workspace, 48);
    OFF(kiln_kernel_args, workspace_size, 56);
    OFF(kiln_kernel_args, threads, 64);
    SIZE(kiln_engine_desc, 176);
    OFF(kiln_engine_desc, struct_size, 0);
    OFF(kiln_engine_desc, name, 8);
    OFF(kiln_engine_desc, summary, 16);
    OFF(kiln_engine_desc, flags, 24);
    OFF(kiln_engine_desc, priority, 28);
    OFF(kiln_engine_desc, option_count, 32);
    OFF(kiln_engine_desc, options, 40);
    OFF(kiln_engine_desc, op_count, 48);
    OFF(kiln_engine_desc, ops, 56);
    OFF(kiln_engine_desc, create, 64);
    OFF(kiln_engine_desc, destroy, 72);
    OFF(kiln_engine_desc, supports, 80);
    OFF(kiln_engine_desc, optimize_subgraph, 88);
    OFF(kiln_engine_desc, kernel_create, 96);
    OFF(kiln_engine_desc, kernel_destroy, 104);
    OFF(kiln_engine_desc, optimize_original_graph, 112);
    OFF(kiln_engine_desc, optimize_whole_graph, 120);
    OFF(kiln_engine_desc, calc_op_running_param, 128);
    OFF(kiln_engine_desc, generate_task, 136);
    OFF(kiln_engine_desc, optimize_subgraph_wanted, 144); /* 0.10: was reserved[0] */
    OFF(kiln_engine_desc, reserved, 152);
    SIZE(kiln_running_param, 88);
    OFF(kiln_running_param, struct_size, 0);
    OFF(kiln_running_param, output_count, 4);
    OFF(kiln_running_param, output_sizes, 8);
    OFF(kiln_running_param, workspace_count, 16);
    OFF(kiln_running_param, workspace_sizes, 24);
    SIZE(kiln_task_desc, 48);
    OFF(kiln_task_desc, struct_size, 0);
    OFF(kiln_task_desc, kind, 4);
    OFF(kiln_task_desc, stream_id, 8);
    OFF(kiln_task_desc, event_id, 12);
    OFF(kiln_task_desc, target_stream_id, 16);
    OFF(kiln_task_desc, args_size, 20);
    OFF(kiln_task_desc, kernel_name, 24);
    OFF(kiln_task_desc, args, 32);
    OFF(kiln_task_desc, args_capacity, 40);
    OFF(kiln_task_desc, flags, 44);
    SIZE(kiln_frontend_desc, 88);
    OFF(kiln_frontend_desc, struct_size, 0);
    OFF(kiln_frontend_desc, name, 8);
    OFF(kiln_frontend_desc, summary, 16);
    OFF(kiln_frontend_desc, flags, 24);
    OFF(kiln_frontend_desc, extensions, 32);
    OFF(kiln_frontend_desc, import_file, 40);
    OFF(kiln_frontend_desc, export_file, 48);
    OFF(kiln_frontend_desc, reserved, 56);
    SIZE(kiln_tuner_desc, 96);
    OFF(kiln_tuner_desc, struct_size, 0);
    OFF(kiln_tuner_desc, name, 8);
    OFF(kiln_tuner_desc, summary, 16);
    OFF(kiln_tuner_desc, flags, 24);
    OFF(kiln_tuner_desc, option_count, 28);
    OFF(kiln_tuner_desc, options, 32);
    OFF(kiln_tuner_desc, create, 40);
    OFF(kiln_tuner_desc, destroy, 48);
    OFF(kiln_tuner_desc, on_build_step, 56);
    OFF(kiln_tuner_desc, reserved, 64);
    SIZE(kiln_instrument_desc, 120);
    OFF(kiln_instrument_desc, struct_size, 0);
    OFF(kiln_instrument_desc, name, 8);
    OFF(kiln_instrument_desc, summary, 16);
    OFF(kiln_instrument_desc, flags, 24);
    OFF(kiln_instrument_desc, create, 32);
    OFF(kiln_instrument_desc, destroy, 40);
    OFF(kiln_instrument_desc, before_stage, 48);
    OFF(kiln_instrument_desc, after_stage, 56);
    OFF(kiln_instrument_desc, before_pass, 64);
    OFF(kiln_instrument_desc, after_pass, 72);
    OFF(kiln_instrument_desc, after_pass_failed, 80);
    OFF(kiln_instrument_desc, reserved, 88);
    /* runtime allocators (kiln_component.h, stable since the multistream runtime
     * uses them; kiln_alloc_stats' plan figures were appended before the freeze) */
    SIZE(kiln_alloc_config, 32);
    OFF(kiln_alloc_config, struct_size, 0);
    OFF(kiln_alloc_config, stream_count, 4);
    OFF(kiln_alloc_config, event_count, 8);
    OFF(kiln_alloc_config, events, 16);
    OFF(kiln_alloc_config, flags, 24);
    SIZE(kiln_alloc_stats, 168);
    OFF(kiln_alloc_stats, struct_size, 0);
    OFF(kiln_alloc_stats, reserved, 8);
    OFF(kiln_alloc_stats, peak_reserved, 16);
    OFF(kiln_alloc_stats, allocated, 24);
    OFF(kiln_alloc_stats, peak_allocated, 32);
    OFF(kiln_alloc_stats, cached, 40);
    OFF(kiln_alloc_stats, allocs, 48);
    OFF(kiln_alloc_stats, frees, 56);
    OFF(kiln_alloc_stats, system_allocs, 64);
    OFF(kiln_alloc_stats, system_frees, 72);
    OFF(kiln_alloc_stats, cache_hits, 80);
    OFF(kiln_alloc_stats, borrow_hits, 88);
    OFF(kiln_alloc_stats, birth_recycles, 96);
    OFF(kiln_alloc_stats, borrow_recycles, 104);
    OFF(kiln_alloc_stats, local_recycles, 112);
    OFF(kiln_alloc_stats, steady_peak_reserved, 120);
    OFF(kiln_alloc_stats, steady_peak_allocated, 128);
    OFF(kiln_alloc_stats, plans, 136);
    OFF(kiln_alloc_stats, plan_hits, 144);
    OFF(kiln_alloc_stats, plan_fallbacks, 152);
    OFF(kiln_alloc_stats, plan_arena, 160);
    SIZE(kiln_allocator_desc, 144);
    OFF(kiln_allocator_desc, struct_size, 0);
    OFF(kiln_allocator_desc, name, 8);
    OFF(kiln_allocator_desc, summary, 16);
    OFF(kiln_allocator_desc, flags, 24);
    OFF(kiln_allocator_desc, option_count, 28);
    OFF(kiln_allocator_desc, options, 32);
    OFF(kiln_allocator_desc, create, 40);
    OFF(kiln_allocator_desc, destroy, 48);
    OFF(kiln_allocator_desc, alloc, 56);
    OFF(kiln_allocator_desc, free, 64);
    OFF(kiln_allocator_desc, access, 72);
    OFF(kiln_allocator_desc, send_events, 80);
    OFF(kiln_allocator_desc, wait_events, 88);
    OFF(kiln_allocator_desc, last_wait, 96);
    OFF(kiln_allocator_desc, stats, 104);
    OFF(kiln_allocator_desc, reserved, 112);
    CU_ASSERT_EQUAL(KILN_ALLOC_HOST_MEMORY, 0x1u);
    SIZE(kiln_plugin_desc, 96);
    OFF(kiln_plugin_desc, struct_size, 0);
    OFF(kiln_plugin_desc, abi_major, 4);
    OFF(kiln_plugin_desc, abi_minor, 6);
    OFF(kiln_plugin_desc, name, 8);
    OFF(kiln_plugin_desc, version, 16);
    OFF(kiln_plugin_desc, license, 24);
    OFF(kiln_plugin_desc, description, 32);
    OFF(kiln_plugin_desc, build_info, 40);
    OFF(kiln_plugin_desc, init, 48);
    OFF(kiln_plugin_desc, fini, 56);
    OFF(kiln_plugin_desc, reserved, 64);
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_abi_host_table(void)
{
    /* ABI 1.0: the header (struct_size, major, minor) then one pointer per
     * function of KILN_HOST_FUNCS; the count only ever grows. */
#define X(ret, name, member, params) +1
    enum { count = 0 KILN_HOST_FUNCS(X) };
#undef X
    CU_ASSERT(count >= 169);
    CU_ASSERT_EQUAL(offsetof(kiln_host_api, status_name), 8);
    CU_ASSERT_EQUAL(offsetof(kiln_host_api, errorf), 8 + 2 * sizeof(void *));
    CU_ASSERT_EQUAL(offsetof(kiln_host_api, graph_add_node), 8 + 23 * sizeof(void *));
    CU_ASSERT_EQUAL(sizeof(kiln_host_api), 8 + count * sizeof(void *));
    /* slots of kinds once experimental stay where they were */
    CU_ASSERT_EQUAL(offsetof(kiln_host_api, pattern_node), 8 + 139 * sizeof(void *));
    CU_ASSERT_EQUAL(offsetof(kiln_host_api, register_fusion_pass), 8 + 147 * sizeof(void *));
    CU_ASSERT_EQUAL(offsetof(kiln_host_api, register_mem_planner), 8 + 150 * sizeof(void *));
    CU_ASSERT_EQUAL(offsetof(kiln_host_api, register_allocator), 8 + 151 * sizeof(void *));

    CU_ASSERT_EQUAL(KILN_ABI_MAJOR, 1);
}

static void test_abi_enums(void)
{
    CU_ASSERT_EQUAL(KILN_ERR_PARAM, 14);
    CU_ASSERT_EQUAL(KILN_DT_STRING, 13);
    CU_ASSERT_EQUAL(KILN_ATTR_TENSOR, 11);
    CU_ASSERT_EQUAL(KILN_AA_NORMAL_OUTPUT, 13);
    CU_ASSERT_EQUAL(KILN_AA_COUNT, 14);
    CU_ASSERT_EQUAL(KILN_PASS_KIND_FUSION, 3);
}

int main(void)
{
    static const kiln_test_case cases[] = {
        {"test_abi_struct_layouts", test_abi_struct_layouts},
        {"test_abi_host_table", test_abi_host_table},
        {"test_abi_enums", test_abi_enums},
        {NULL, NULL},
    };
    return kiln_test_run("abi", cases);
}
