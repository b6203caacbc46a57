/* The graphs of recent calls: what dcrt_cuda_run replays instead of
 * launching a call's kernels one by one.
 *
 * A call is known by its key: the values of its dims and the device
 * address of every buffer (parameters and workspace intermediates), which
 * are all a captured graph's kernel arguments hold. The first call with a
 * key only records it (a key seen once may never come again, and
 * capturing and instantiating a graph costs more than the launches it
 * saves); the second captures the graph and stores it; later ones replay
 * it. A few keys are kept, the least recently used making room; its graph
 * is destroyed then (the driver lets a graph still running finish).
 * The cache has no lock of its own: its owner holds one around a lookup
 * and whatever it does with the graph.
 */
#include "dietcode/runtime.h"

#include <stdlib.h>
#include <string.h>

typedef struct Slot {
    uint64_t *key; /* NULL: free */
    int n;
    void *graph;   /* NULL: seen once, not captured */
    uint64_t used; /* the clock at the last lookup */
} Slot;

struct RtGraphCache {
    int nslots;
    void (*destroy)(void *graph);
    uint64_t clock;
    Slot slot[];
};

RtGraphCache *rt_graph_cache_new(int nslots, void (*destroy)(void *graph))
{
    RtGraphCache *c = calloc(1, sizeof *c + (size_t)nslots * sizeof c->slot[0]);
    if (!c)
        return NULL;
    c->nslots = nslots;
    c->destroy = destroy;
    return c;
}

static void clear(RtGraphCache *c, Slot *s)
{
    if (s->graph && c->destroy)
        c->destroy(s->graph);
    free(s->key);
    memset(s, 0, sizeof *s);
}

void rt_graph_cache_free(RtGraphCache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nslots; i++)
        clear(c, &c->slot[i]);
    free(c);
}

static Slot *find(RtGraphCache *c, const uint64_t *key, int n)
{
    for (int i = 0; i < c->nslots; i++) {
        Slot *s = &c->slot[i];
        if (s->key && s->n == n && memcmp(s->key, key, (size_t)n * sizeof *key) == 0)
            return s;
    }
    return NULL;
}

void *rt_graph_cache_lookup(RtGraphCache *c, const uint64_t *key, int n, bool *seen)
{
    *seen = false;
    Slot *s = find(c, key, n);
    if (s) {
        s->used = ++c->clock;
        *seen = true;
        return s->graph;
    }
    /* record the key: a free slot, else the least recently used one */
    Slot *victim = &c->slot[0];
    for (int i = 0; i < c->nslots; i++) {
        Slot *t = &c->slot[i];
        if (!t->key) {
            victim = t;
            break;
        }
        if (t->used < victim->used)
            victim = t;
    }
    uint64_t *copy = malloc((size_t)(n > 0 ? n : 1) * sizeof *key);
    if (!copy)
        return NULL; /* not recorded: the call launches directly */
    clear(c, victim);
    memcpy(copy, key, (size_t)n * sizeof *key);
    victim->key = copy;
    victim->n = n;
    victim->used = ++c->clock;
    return NULL;
}

void rt_graph_cache_store(RtGraphCache *c, const uint64_t *key, int n, void *graph)
{
    Slot *s = find(c, key, n);
    if (!s) { /* evicted meanwhile (the owner's lock makes that impossible) */
        if (graph && c->destroy)
            c->destroy(graph);
        return;
    }
    if (s->graph && s->graph != graph && c->destroy)
        c->destroy(s->graph);
    s->graph = graph;
}
