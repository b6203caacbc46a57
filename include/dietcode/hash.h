/* dietcode/hash.h: the project's one string and byte hash, 64-bit FNV-1a.
 *
 * Header-only, and depending on nothing of ours, so that every layer
 * (libdcrt included, which links nothing else) hashes alike: names in the
 * IR's tables (ir_name_hash), the runtime's seeds (rt_rng_hash), workload
 * fingerprints and the records' keys (search/). */
#ifndef DIETCODE_HASH_H
#define DIETCODE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define DC_FNV_OFFSET 14695981039346656037ull
#define DC_FNV_PRIME 1099511628211ull

/* h (DC_FNV_OFFSET to start) extended by the n bytes at p. */
static inline uint64_t dc_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * DC_FNV_PRIME;
    return h;
}

/* The hash of the NUL-terminated string s (its bytes, not the NUL). */
static inline uint64_t dc_fnv1a_str(const char *s) { return dc_fnv1a(DC_FNV_OFFSET, s, strlen(s)); }

#endif
