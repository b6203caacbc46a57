/* dietcode/base.h: what every layer shares.
 *
 * Arenas own IR memory: a module allocates from its arena and frees
 * everything at once when the arena is destroyed. Diagnostics are user
 * errors with a source location; they are collected in a list, never
 * printed or acted on by library code except through ir_diags_print,
 * which the driver calls. A broken invariant is a compiler bug and aborts
 * with the C file and line through IR_ASSERT.
 */
#ifndef DIETCODE_BASE_H
#define DIETCODE_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ir/arena.c */
typedef struct ArenaChunk ArenaChunk;
typedef struct Arena {
    ArenaChunk *head;
    size_t used_total;
} Arena;

Arena *ir_arena_new(void);
void ir_arena_destroy(Arena *a);
void *ir_arena_alloc(Arena *a, size_t size);          /* zeroed, 16-aligned */
/* Frees p before the arena when it was a request of more than a quarter
 * of a chunk (which got a chunk of its own): true; false, freeing
 * nothing, for any other pointer. */
bool ir_arena_release(Arena *a, const void *p);
/* Takes p, a block of size bytes from malloc, as if allocated here (freed
 * with the arena, or by ir_arena_release): a large block made elsewhere
 * joins the arena without a copy. Returns p. */
void *ir_arena_adopt(Arena *a, void *p, size_t size);
char *ir_arena_strdup(Arena *a, const char *s);
char *ir_arena_strndup(Arena *a, const char *s, size_t n);
char *ir_arena_printf(Arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define IR_NEW(arena, T) ((T *)ir_arena_alloc((arena), sizeof(T)))
#define IR_NEWN(arena, T, n) ((T *)ir_arena_alloc((arena), sizeof(T) * (size_t)(n)))

/* ir/diag.c */
typedef struct SrcLoc {
    int line, col; /* 1-based; line 0 means "no location" */
} SrcLoc;

typedef struct Source {
    const char *path; /* as the user named it */
    const char *text; /* NUL-terminated */
    size_t len;
} Source;

typedef struct Diag {
    SrcLoc loc;
    const char *msg;
    struct Diag *next;
} Diag;

typedef struct DiagList {
    Arena *arena;
    const Source *src;
    Diag *head, *tail;
    int count;
} DiagList;

void ir_diags_init(DiagList *d, Arena *a, const Source *src);
void ir_diag(DiagList *d, SrcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ir_vdiag(DiagList *d, SrcLoc loc, const char *fmt, va_list ap);
/* Prints every diagnostic as FILE:LINE:COL: error: MSG, the source line and
 * a caret under the column. */
void ir_diags_print(const DiagList *d, FILE *out);

/* A pointer an embedder passed to a public entry point: false when it is
 * NULL, with "FN: NAME is NULL" in err (err may be NULL). Entry points
 * return their own error for it (NULL, -1, false); a NULL that only our
 * own code could pass is an invariant (IR_ASSERT), not this. */
bool ir_arg_ok(const void *arg, const char *fn, const char *name, char *err, size_t errlen);
#define IR_ARG_OK(arg, err, errlen) ir_arg_ok((arg), __func__, #arg, (err), (errlen))

/* Internal invariants: a failure is a compiler bug, not a user error. */
_Noreturn void ir_panic(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define IR_ASSERT(c)                                                         \
    do {                                                                     \
        if (!(c))                                                            \
            ir_panic(__FILE__, __LINE__, "assertion failed: %s", #c);        \
    } while (0)
#define IR_UNREACHABLE() ir_panic(__FILE__, __LINE__, "unreachable")

#endif
