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

enum { DIAG_WIDTH = 160 }; /* the most of a source line a diagnostic shows */

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
        /* a long line is cut to DIAG_WIDTH columns around the caret, the
         * cuts marked with ... */
        size_t caret = (size_t)(g->loc.col > 0 ? g->loc.col - 1 : 0), from = 0, to = len;
        if (caret > len)
            caret = len;
        if (len > DIAG_WIDTH) {
            from = caret > DIAG_WIDTH / 2 ? caret - DIAG_WIDTH / 2 : 0;
            to = from + DIAG_WIDTH < len ? from + DIAG_WIDTH : len;
        }
        fputs(from ? " ..." : " ", out);
        for (size_t i = from; i < to; i++)
            fputc(line[i] == '\t' ? ' ' : (line[i] < 32 && line[i] >= 0 ? '?' : line[i]), out);
        fputs(to < len ? "...\n" : "\n", out);
        fprintf(out, "%*s^\n", (int)(caret - from + (from ? 4 : 1)), "");
    }
}

bool ir_arg_ok(const void *arg, const char *fn, const char *name, char *err, size_t errlen)
{
    if (arg)
        return true;
    if (err && errlen > 0)
        snprintf(err, errlen, "%s: %s is NULL", fn, name);
    return false;
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
