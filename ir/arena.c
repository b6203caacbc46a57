/* Bump allocation in chunks. IR nodes are never freed one by one: the
 * arena that owns a module is destroyed with it. Large requests get a chunk
 * of their own so a few big arrays do not waste the tail of a chunk; those
 * alone can be given back early (ir_arena_release: a constant's elements
 * that nothing reads any more), and so can a block the arena adopted
 * (ir_arena_adopt: a model's weights as decoded, not copied). */
#include "dietcode/base.h"

#include <stdlib.h>
#include <string.h>

struct ArenaChunk {
    ArenaChunk *next;
    size_t cap, used;
    bool single; /* made for one large request, or adopted */
    void *adopted; /* a malloc'd block the chunk stands for (its data unused), or NULL */
    _Alignas(16) unsigned char data[];
};

enum { CHUNK_SIZE = 64 * 1024 };

Arena *ir_arena_new(void)
{
    Arena *a = calloc(1, sizeof *a);
    if (!a)
        ir_panic(__FILE__, __LINE__, "out of memory");
    return a;
}

void ir_arena_destroy(Arena *a)
{
    if (!a)
        return;
    for (ArenaChunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c->adopted);
        free(c);
    }
    free(a);
}

/* n, a chunk of its own, behind the current one, which still has room */
static void link_behind(Arena *a, ArenaChunk *n)
{
    ArenaChunk *c = a->head;
    n->next = c ? c->next : NULL;
    if (c)
        c->next = n;
    else
        a->head = n;
}

void *ir_arena_alloc(Arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    ArenaChunk *c = a->head;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > CHUNK_SIZE / 4 ? size : CHUNK_SIZE;
        ArenaChunk *n = malloc(sizeof *n + cap);
        if (!n)
            ir_panic(__FILE__, __LINE__, "out of memory (%zu bytes)", size);
        n->cap = cap;
        n->used = 0;
        n->single = size > CHUNK_SIZE / 4;
        n->adopted = NULL;
        if (c && cap != CHUNK_SIZE) {
            link_behind(a, n);
        } else {
            n->next = c;
            a->head = n;
        }
        c = n;
    }
    void *p = c->data + c->used;
    c->used += size;
    a->used_total += size;
    memset(p, 0, size);
    return p;
}

void *ir_arena_adopt(Arena *a, void *p, size_t size)
{
    ArenaChunk *n = malloc(sizeof *n);
    if (!n)
        ir_panic(__FILE__, __LINE__, "out of memory");
    n->cap = n->used = size;
    n->single = true;
    n->adopted = p;
    link_behind(a, n);
    a->used_total += size;
    return p;
}

char *ir_arena_strndup(Arena *a, const char *s, size_t n)
{
    char *p = ir_arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *ir_arena_strdup(Arena *a, const char *s)
{
    return ir_arena_strndup(a, s, strlen(s));
}

char *ir_arena_printf(Arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = ir_arena_alloc(a, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

bool ir_arena_release(Arena *a, const void *p)
{
    if (!a || !p)
        return false;
    for (ArenaChunk **at = &a->head; *at; at = &(*at)->next) {
        ArenaChunk *c = *at;
        const void *d = c->adopted ? c->adopted : (const void *)c->data;
        if (c->single && d == p) {
            *at = c->next;
            a->used_total -= c->used;
            free(c->adopted);
            free(c);
            return true;
        }
    }
    return false;
}
