/* What a GPU object holds and frees, on the fake driver
 * (tests/cuda/fake_libcuda.c), for tests/golden/accept/constants.tex
 * (constants, checked gathers, two kernels a call):
 *
 *     fake_client B S
 *
 * Four calls with the same arguments: the first loads the module and
 * uploads the constants once (later calls copy only the gathers' zeroed
 * error record), the second captures a CUDA graph, the later ones replay
 * it; no launch leaves out a parameter its kernel's PTX declares, and each
 * pointer points into live device memory. Then constants_release
 * leaves nothing on the device the object allocated: no module, graph or
 * executable graph, only the caller's buffers. A call after it loads
 * again; a second release is harmless. No call leaves dcrt_last_error set.
 * With FAKE_CUDA_FAIL_CAPTURE=1 every capture fails: the calls succeed
 * by launching directly, and still leave no error behind.
 */
#include "constants.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long (*count)(const char *);

static int expect(const char *what, long want, const char *when)
{
    long got = count(what);
    if (got == want)
        return 0;
    fprintf(stderr, "FAIL: %s: %ld %s, expected %ld\n", when, got, what, want);
    return 1;
}

static int call(int64_t B, int64_t S, const uint64_t *t, uint64_t ws, const char *when)
{
    int rc = constants_launch(B, S, t[0], t[1], t[2], ws, NULL);
    if (rc != DCRT_OK) {
        fprintf(stderr, "FAIL: %s: code %d: %s\n", when, rc, dcrt_last_error());
        return 1;
    }
    if (dcrt_last_error()[0]) {
        fprintf(stderr, "FAIL: %s succeeded but left an error: %s\n", when, dcrt_last_error());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int64_t B = atoll(argv[1]), S = atoll(argv[2]);
    bool fail_capture = getenv("FAKE_CUDA_FAIL_CAPTURE") && strcmp(getenv("FAKE_CUDA_FAIL_CAPTURE"), "1") == 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    int (*alloc)(uint64_t *, size_t) = NULL;
    if (lib) {
        *(void **)&count = dlsym(lib, "fake_cuda_count");
        *(void **)&alloc = dlsym(lib, "cuMemAlloc_v2");
    }
    if (!count || !alloc) {
        fprintf(stderr, "FAIL: libcuda.so.1 is not the fake driver\n");
        return 1;
    }
    size_t bytes[3] = {(size_t)(B * S * 8), (size_t)(B * S * 24 * 4), (size_t)(B * S * 24 * 4)};
    uint64_t t[3], ws = 0;
    for (int i = 0; i < 3; i++)
        if (alloc(&t[i], bytes[i]) != 0)
            return 1;
    size_t wsb = constants_workspace_size(B, S);
    if (wsb && alloc(&ws, wsb) != 0)
        return 1;
    long mine = count("allocs");
    int bad = 0;
    bad |= call(B, S, t, ws, "the first call");
    bad |= expect("modules", 1, "after the first call");
    long htod = count("htod"), launches = count("launches");
    if (launches < 2) {
        fprintf(stderr, "FAIL: the first call launched %ld kernels, expected 2 or more\n", launches);
        bad = 1;
    }
    for (int i = 2; i <= 4; i++)
        bad |= call(B, S, t, ws, i == 2 ? "the second call" : "a later call");
    /* one copy a call after the first: the gathers' zeroed error record */
    bad |= expect("htod", htod + 3, "after four calls (constants uploaded once)");
    bad |= expect("execs", fail_capture ? 0 : 1, "after four calls");
    bad |= expect("graph_launches", fail_capture ? 0 : 3, "after four calls");
    /* graphs: the first call and the capture launch, the graph replays */
    bad |= expect("launches", (fail_capture ? 4 : 2) * launches, "after four calls");
    bad |= expect("bad_launches", 0, "after four calls");
    constants_release();
    bad |= expect("modules", 0, "after constants_release");
    bad |= expect("execs", 0, "after constants_release");
    bad |= expect("graphs", 0, "after constants_release");
    bad |= expect("allocs", mine, "after constants_release (the caller's buffers only)");
    bad |= call(B, S, t, ws, "a call after constants_release");
    bad |= expect("modules", 1, "after a call after constants_release");
    constants_release();
    constants_release();
    bad |= expect("modules", 0, "after releasing twice");
    bad |= expect("allocs", mine, "after releasing twice");
    bad |= expect("bad_launches", 0, "at the end");
    if (!bad)
        printf("fake driver: B=%lld S=%lld: %ld launches, constants uploaded once, %s, "
               "nothing left after release\n",
               (long long)B, (long long)S, count("launches"),
               fail_capture ? "captures failed and calls launched directly" : "one graph replayed");
    return bad;
}
