/* The targets' limits, and on the CPU this host's caches.
 *
 * The CPU's cache sizes come from sysfs (cpu0's data or unified caches of
 * levels 1 to 3, /sys/devices/system/cpu/cpu0/cache/index*), read each
 * time a target is described, so the default blockings (passes/microkernel.c,
 * pass_outer_microkernel) fit the machine dcc runs on: the JIT's, the
 * tuner's and an object's built here. A level sysfs does not report keeps
 * the typical size (32 KiB, 1 MiB, 32 MiB).
 */
#include "dietcode/passes.h"
#include "dietcode/runtime.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line of path, without its newline; false when unreadable. */
static bool read_line(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = 0;
    return ok;
}

/* "48K", "1024K", "32M" (sysfs's form) in bytes; 0 when malformed. */
static int64_t parse_size(const char *s)
{
    char unit = 0;
    long long v = 0;
    int got = sscanf(s, "%lld%c", &v, &unit);
    if (got < 1 || v <= 0 || v > (1LL << 32))
        return 0;
    if (got == 1)
        return v;
    if (unit == 'K')
        return v << 10;
    if (unit == 'M')
        return v << 20;
    if (unit == 'G')
        return v << 30;
    return 0;
}

void pass_typical_caches(int64_t cache[3])
{
    cache[0] = 32 << 10;
    cache[1] = 1 << 20;
    cache[2] = 32 << 20;
}

void pass_host_caches(int64_t cache[3])
{
    pass_typical_caches(cache);
    for (int i = 0; i < 16; i++) {
        char path[96], level[16], type[32], size[32];
        const char *dir = "/sys/devices/system/cpu/cpu0/cache";
        snprintf(path, sizeof path, "%s/index%d/level", dir, i);
        if (!read_line(path, level, sizeof level))
            break;
        snprintf(path, sizeof path, "%s/index%d/type", dir, i);
        if (!read_line(path, type, sizeof type) || strcmp(type, "Instruction") == 0)
            continue;
        snprintf(path, sizeof path, "%s/index%d/size", dir, i);
        int lv = level[0] - '0';
        int64_t bytes = read_line(path, size, sizeof size) ? parse_size(size) : 0;
        if (level[1] == 0 && lv >= 1 && lv <= 3 && bytes > 0)
            cache[lv - 1] = bytes;
    }
}

int pass_sm_version(const char *arch)
{
    if (!arch || strncmp(arch, "sm_", 3) != 0 || !isdigit((unsigned char)arch[3]))
        return 80;
    int sm = 0;
    for (const char *c = arch + 3; isdigit((unsigned char)*c) && sm < 10000; c++)
        sm = 10 * sm + (*c - '0');
    return sm;
}

void pass_target_gpu_arch(TargetInfo *ti, const char *arch)
{
    if (ti->kind != PT_GPU)
        return;
    int sm = pass_sm_version(arch);
    ti->async_copy = sm >= 80;
    /* the most shared memory a block may opt into (above 48 KB, dynamic) */
    ti->shared_bytes = sm >= 90 ? 227 << 10 : sm == 86 || sm == 89 ? 99 << 10
                     : sm >= 80 ? 163 << 10 : 64 << 10;
}

TargetInfo pass_target_info_cpu(int level)
{
    TargetInfo ti = {.kind = PT_CPU,
                     .vec_width = level >= 4 ? 16 : level == 3 ? 8 : 4,
                     .max_threads = 1024,
                     .shared_bytes = 1 << 20,
                     .vregs = level >= 4 ? 32 : 16};
    pass_host_caches(ti.cache);
    return ti;
}

TargetInfo pass_target_info(PassTarget kind)
{
    if (kind == PT_GPU)
        return (TargetInfo){PT_GPU, 4, 1024, 48 * 1024, {0, 0, 0}, true, 0};
    return pass_target_info_cpu(dcrt_cpu_level());
}
