/* Where PoCL's CPU worker threads run. PoCL's pthread driver starts one worker thread per compute
 * unit and leaves their placement to the kernel's scheduler, which on a small or virtualised
 * machine often puts two workers on one CPU for the length of a short call while another CPU
 * idles: a batch-1 3x3 convolution then runs at about one core's speed (process CPU / wall 1.1
 * instead of 1.8 on the 2-vCPU Zen 5, 0.80 ms instead of 0.53; docs/conv.md, session 24).
 * POCL_AFFINITY=1 makes PoCL pin worker i to CPU i, which removes that. Before its first OpenCL
 * call tessera sets it when doing so is safe (tsr_cpu_pin_decide); a user's own POCL_AFFINITY,
 * either value, always wins. The setenv happens once per process, before any OpenCL call of
 * tessera's; PoCL reads the variable when its device starts, so a process that started PoCL
 * earlier (another library's OpenCL call) keeps PoCL's placement. */
#define _GNU_SOURCE
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *tsr_cpu_pin_decide(const tsr_cpu_pin_facts *facts, bool *pin) {
    *pin = false;
    if (facts->pocl_affinity) return "POCL_AFFINITY is set in the environment";
    if (facts->pocl_max_threads) return "POCL_MAX_PTHREAD_COUNT is set: PoCL would pin every worker to the first CPUs";
    if (facts->pocl_max_cu) return "POCL_CPU_MAX_CU_COUNT is set: PoCL would pin every worker to the first CPUs";
    if (facts->online_cpus < 2) return "one CPU";
    /* PoCL pins worker i to CPU i whatever the process may use: only a process allowed on every
     * CPU 0..n-1 (no taskset, cpuset or MPI binding) may have that. */
    if (!facts->allowed_known) return "the process's CPU mask cannot be read";
    if (facts->allowed_cpus != facts->online_cpus || !facts->allowed_from_zero)
        return "the process may run on only some CPUs: taskset, cpuset or an MPI binding";
    *pin = true;
    return NULL;
}

static pthread_once_t pin_once = PTHREAD_ONCE_INIT;
/* written once by pin_workers, pin_decided last (release): describe may run on another thread */
static atomic_bool pin_decided;
static bool pinned_by_tessera;
static char pin_reason[160];

static void pin_workers(void) {
    tsr_cpu_pin_facts facts = {.pocl_affinity = getenv("POCL_AFFINITY"),
                               .pocl_max_threads = getenv("POCL_MAX_PTHREAD_COUNT"),
                               .pocl_max_cu = getenv("POCL_CPU_MAX_CU_COUNT")};
#ifdef __linux__
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    facts.online_cpus = online > 0 ? (size_t)online : 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        facts.allowed_known = true;
        facts.allowed_cpus = (size_t)CPU_COUNT(&set);
        facts.allowed_from_zero = true;
        for (size_t i = 0; i < facts.allowed_cpus && i < CPU_SETSIZE; ++i)
            if (!CPU_ISSET(i, &set)) facts.allowed_from_zero = false;
    }
    bool pin = false;
    const char *why = tsr_cpu_pin_decide(&facts, &pin);
    if (pin && setenv("POCL_AFFINITY", "1", 0) == 0) pinned_by_tessera = true;
    else if (pin) why = "setenv failed";
    snprintf(pin_reason, sizeof pin_reason, "%s", why ? why : "");
#else
    snprintf(pin_reason, sizeof pin_reason, "not Linux");
    (void)facts;
#endif
    atomic_store_explicit(&pin_decided, true, memory_order_release);
}

void tsr_cpu_pin_workers(void) { pthread_once(&pin_once, pin_workers); }

/* The environment's value as it may be shown: short and printable, else how long it is. */
static void shown_value(const char *value, char *out, size_t size) {
    size_t n = strlen(value);
    bool plain = n <= 16;
    for (size_t i = 0; plain && i < n; ++i) plain = value[i] >= 0x20 && value[i] < 0x7f;
    if (plain) snprintf(out, size, "POCL_AFFINITY=%s", value);
    else snprintf(out, size, "POCL_AFFINITY set to %zu bytes not shown", n);
}

/* Reads what tsr_cpu_pin_workers decided and never decides itself: a device wrapped from the
 * caller's context (tsr_device_wrap) found OpenCL started already, when setting the variable
 * would have no effect. */
void tsr_cpu_workers_describe(const tsr_device_info *info, char *out, size_t size) {
    out[0] = '\0';
    if (info->type != TSR_DEVICE_CPU || !strstr(info->platform_name, "Portable Computing Language")) return;
    const bool decided = atomic_load_explicit(&pin_decided, memory_order_acquire);
    const bool by_tessera = decided && pinned_by_tessera;
    const char *mine = getenv("POCL_AFFINITY");
    char value[64];
    if (mine) shown_value(mine, value, sizeof value);
    if (by_tessera && mine && strcmp(mine, "1") == 0)
        snprintf(out, size, "pinned, worker i on CPU i (POCL_AFFINITY=1, set by tessera before its first OpenCL call)");
    else if (mine && strcmp(mine, "1") == 0)
        snprintf(out, size, "pinned, worker i on CPU i (POCL_AFFINITY=1 from the environment)");
    else if (mine)
        snprintf(out, size, "placed by the OS scheduler (%s from the environment)", value);
    else
        snprintf(out, size, "placed by the OS scheduler (%s)",
                 decided ? pin_reason : "OpenCL was started before tessera's discovery: a wrapped context");
}
