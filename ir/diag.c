/* User-facing diagnostics. Messages are collected so one run reports every
 * problem it finds; the driver prints them and decides the exit status.
 * The printed form is the one compilers share (chibicc, cproc, clang):
 *
 *   prog.tex:3:14: error: unknown tensor 'Z'
 *    output Y[i: T] = Z[i]
 *                     ^
 */
#include "dietcode/base.h"

#include <stdlib.h>
#include <string.h>

void ir_diags_init(DiagList *d, Arena *a, const Source *src)
{
    memset(d, 0, sizeof *d);
    d->arena = a;
    d->src = src;
}

void ir_vdiag(DiagList *d, SrcLoc loc, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *msg = ir_arena_alloc(d->arena, (size_t)n + 1);
    vsnprintf(msg, (size_t)n + 1, fmt, ap2);
    va_end(ap2);

    Diag *g = IR_NEW(d->arena, Diag);
    g->loc = loc;
    g->msg = msg;
    if (d->tail)
        d->tail->next = g;
    else
        d->head = g;
    d->tail = g;
    d->count++;
}

void ir_diag(DiagList *d, SrcLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ir_vdiag(d, loc, fmt, ap);
    va_end(ap);
}

/* The text of line `line` (1-based) of src, and its length. */
static const char *find_line(const Source *src, int line, size_t *len)
{
    const char *p = src->text, *end = src->text + src->len;
    for (int l = 1; l < line && p < end; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return NULL;
        p = nl + 1;
    }
    if (p > end)
        return NULL;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *len = (size_t)((nl ? nl : end) - p);
    if (*len && p[*len - 1] == '\r')
        (*len)--;
    return p;
}

void ir_diags_print(const DiagList *d, FILE *out)
{
    const char *path = d->src && d->src->path ? d->src->path : "<input>";
    for (const Diag *g = d->head; g; g = g->next) {
        if (g->loc.line <= 0) {
            fprintf(out, "%s: error: %s\n", path, g->msg);
            continue;
        }
        fprintf(out, "%s:%d:%d: error: %s\n", path, g->loc.line, g->loc.col, g->msg);
        size_t len = 0;
        const char *line = d->src ? find_line(d->src, g->loc.line, &len) : NULL;
        if (!line)
            continue;
        fputc(' ', out);
        for (size_t i = 0; i < len; i++)
            fputc(line[i] == '\t' ? ' ' : (line[i] < 32 && line[i] >= 0 ? '?' : line[i]), out);
        fputc('\n', out);
        fputc(' ', out);
        for (int i = 1; i < g->loc.col && (size_t)(i - 1) < len; i++)
            fputc(' ', out);
        fputs("^\n", out);
    }
}

_Noreturn void ir_panic(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dcc: internal error at %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputs("\n", stderr);
    va_end(ap);
    abort();
}
