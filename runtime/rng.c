/* runtime/rng.c: seeded, reproducible input data.
 *
 * Test inputs must be the same on every machine and every run, so this is
 * splitmix64 (Steele, Lea and Flood's SplittableRandom mixer), written out
 * here rather than borrowed from a libc whose rand() differs between
 * systems. A (seed, stream) pair picks a starting point on splitmix's
 * 2^64-long Weyl sequence: the stream is mixed before it is combined with
 * the seed, so neighbouring streams (inputs 0, 1, 2 or name hashes) start at
 * unrelated points and their sequences do not visibly overlap. Each output
 * takes the top 24 bits of a draw, which a float holds exactly.
 */
#include "dietcode/hash.h"
#include "dietcode/runtime.h"

#define GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t mix(uint64_t z)
{
    z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ z >> 27) * 0x94d049bb133111ebull;
    return z ^ z >> 31;
}

void rt_rng_fill(uint64_t seed, uint64_t stream, float *out, size_t n)
{
    uint64_t s = mix(seed ^ mix(stream + GOLDEN));
    for (size_t i = 0; i < n; i++) {
        int32_t u = (int32_t)(mix(s += GOLDEN) >> 40); /* 0 .. 2^24-1 */
        out[i] = (float)(u - (1 << 23)) * 0x1p-23f;
    }
}

void rt_rng_fill_elems(uint64_t seed, uint64_t stream, int32_t dtype, void *out, size_t n)
{
    if (dtype == DCRT_F32) {
        rt_rng_fill(seed, stream, out, n);
        return;
    }
    uint64_t s = mix(seed ^ mix(stream + GOLDEN));
    for (size_t i = 0; i < n; i++) {
        int32_t u = (int32_t)(mix(s += GOLDEN) >> 40);
        switch (dtype) {
        case DCRT_I32: ((int32_t *)out)[i] = (u >> 20) - 2; break;
        case DCRT_I64: ((int64_t *)out)[i] = (u >> 20) - 2; break;
        case DCRT_BOOL: ((uint8_t *)out)[i] = (uint8_t)(u >> 23); break;
        default: return;
        }
    }
}

uint64_t rt_rng_hash(const char *s) { return dc_fnv1a_str(s); }
