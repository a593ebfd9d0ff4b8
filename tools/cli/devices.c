/* tessera devices: every OpenCL platform and device, as a table or JSON. */
#include "cli.h"

static void human_bytes(uint64_t b, char *out, size_t size) {
    if (b >= (1ull << 30)) snprintf(out, size, "%.1f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(out, size, "%.1f MiB", (double)b / (1ull << 20));
    else snprintf(out, size, "%.0f KiB", (double)b / 1024.0);
}

static void print_device(const tsr_device_info *d) {
    char gmem[32], lmem[32], amem[32];
    human_bytes(d->global_mem_bytes, gmem, sizeof gmem);
    human_bytes(d->local_mem_bytes, lmem, sizeof lmem);
    human_bytes(d->max_alloc_bytes, amem, sizeof amem);
    printf("%d:%d  %s  %s\n", d->platform_index, d->device_index, tsr_device_type_str(d->type), d->name);
    printf("      vendor            %s\n", d->vendor);
    if (d->host_cpu[0]) printf("      processor         %s\n", d->host_cpu);
    printf("      platform          %s (%s; %s)\n", d->platform_name, d->platform_vendor, d->platform_version);
    printf("      device version    %s\n", d->device_version);
    printf("      driver version    %s\n", d->driver_version);
    printf("      OpenCL C          %s\n", d->opencl_c_version);
    printf("      compute units     %u at %u MHz\n", d->compute_units, d->max_clock_mhz);
    printf("      global memory     %s (max allocation %s)\n", gmem, amem);
    printf("      local memory      %s (%s)\n", lmem, d->local_mem_is_dedicated ? "dedicated" : "emulated in global");
    printf("      work-group        max %zu, item sizes %zu x %zu x %zu\n", d->max_work_group_size,
           d->max_work_item_sizes[0], d->max_work_item_sizes[1], d->max_work_item_sizes[2]);
    printf("      vector widths     preferred/native: char %u/%u short %u/%u int %u/%u long %u/%u float %u/%u "
           "double %u/%u half %u/%u\n",
           d->preferred_vector_width[0], d->native_vector_width[0], d->preferred_vector_width[1],
           d->native_vector_width[1], d->preferred_vector_width[2], d->native_vector_width[2],
           d->preferred_vector_width[3], d->native_vector_width[3], d->preferred_vector_width[4],
           d->native_vector_width[4], d->preferred_vector_width[5], d->native_vector_width[5],
           d->preferred_vector_width[6], d->native_vector_width[6]);
    printf("      fp16 / fp64       %s / %s\n", d->fp16 ? "yes" : "no", d->fp64 ? "yes" : "no");
    printf("      online compiler   %s%s\n", d->compiler_available ? "yes" : "no",
           d->available ? "" : "  (device reports itself unavailable)");
    if (d->worker_threads[0]) printf("      worker threads    %s\n", d->worker_threads);
    if (d->unusable[0]) printf("      UNUSABLE          %s\n", d->unusable);
}

static int run_devices(int argc, char **argv) {
    static const struct option options[] = {{"json", no_argument, NULL, 'j'}, CLI_OPTION_HELP, {0}};
    bool json = false;
    int c, rc = 0;
    while ((c = cli_next_option(&cli_devices, argc, argv, "jh", options, &rc)) != -1) {
        if (c == CLI_STOP) return rc;
        if (c == 'j') json = true;
    }
    if (optind < argc) return cli_usage(stderr);
    if (json) {
        char *text = NULL;
        tsr_status st = tsr_discover_json(&text);
        if (st != TSR_SUCCESS) return cli_fail(st);
        printf("%s\n", text);
        tsr_free(text);
        return 0;
    }
    tsr_device_info *infos = NULL;
    size_t n = 0;
    tsr_status st = tsr_discover(&infos, &n);
    if (st != TSR_SUCCESS) return cli_fail(st);
    printf("%-5s %-11s %-36s %-30s %5s %9s\n", "SEL", "TYPE", "DEVICE", "PLATFORM", "CUs", "GLOBAL");
    for (size_t i = 0; i < n; ++i) {
        char sel[16], gmem[32];
        snprintf(sel, sizeof sel, "%d:%d", infos[i].platform_index, infos[i].device_index);
        human_bytes(infos[i].global_mem_bytes, gmem, sizeof gmem);
        printf("%-5s %-11s %-36.36s %-30.30s %5u %9s%s\n", sel, tsr_device_type_str(infos[i].type), infos[i].name,
               infos[i].platform_name, infos[i].compute_units, gmem, infos[i].unusable[0] ? "  (unusable)" : "");
    }
    if (n == 0) printf("(the installed platforms offer no device)\n");
    char *broken = NULL;
    if (tsr_icd_problems(&broken) == TSR_SUCCESS && broken[0]) printf("broken vendor files: %s\n", broken);
    tsr_free(broken);
    printf("\n");
    for (size_t i = 0; i < n; ++i) print_device(&infos[i]);
    tsr_free(infos);
    return 0;
}

const cli_command cli_devices = {
    .name = "devices",
    .summary = "  devices [--json]                     list every OpenCL platform and device\n",
    .details = "A table (SEL is what --device takes), then each device's details; --json: the same as a JSON\n"
               "array.\n",
    .run = run_devices,
};
