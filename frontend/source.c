/* Reading .tex files and naming programs. A source is read whole into the
 * arena; the lexer and every diagnostic point into it. */
#include "dietcode/frontend.h"
#include "dietcode/runtime.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_SOURCE = 16 << 20 };

int fe_read_source(Arena *a, const char *path, Source *out, char *err, size_t errlen)
{
    struct stat st;
    FILE *f = rt_open_read(path, err, errlen); /* the rule for files read */
    if (!f)
        return -1;
    if (fstat(fileno(f), &st) != 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        fclose(f);
        return -1;
    }
    if (st.st_size > MAX_SOURCE) {
        snprintf(err, errlen, "%s: too large (%lld bytes, at most %d)", path,
                 (long long)st.st_size, MAX_SOURCE);
        fclose(f);
        return -1;
    }
    char *text = ir_arena_alloc(a, (size_t)st.st_size + 1);
    size_t n = fread(text, 1, (size_t)st.st_size, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: read error", path);
        return -1;
    }
    text[n] = 0;
    if (memchr(text, 0, n)) {
        snprintf(err, errlen, "%s: contains a NUL byte; not a text file", path);
        return -1;
    }
    out->path = ir_arena_strdup(a, path);
    out->text = text;
    out->len = n;
    return 0;
}

char *fe_program_name(Arena *a, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strcspn(base, ".");
    char *name = ir_arena_alloc(a, n + 2);
    size_t j = 0;
    if (n == 0 || isdigit((unsigned char)base[0]))
        name[j++] = '_';
    for (size_t i = 0; i < n; i++)
        name[j++] = isalnum((unsigned char)base[i]) ? base[i] : '_';
    if (j == 1 && name[0] == '_')
        return ir_arena_strdup(a, "prog");
    return name;
}

/* ---- loading a program: arena, source and checked program together ---- */

static int check(FeUnit *u, const char *name)
{
    ir_diags_init(&u->diags, u->arena, &u->src);
    u->prog = fe_compile(&u->src, name ? name : fe_program_name(u->arena, u->src.path), &u->diags);
    return u->prog ? 0 : 1;
}

int fe_load(const char *path, FeUnit *u, char *err, size_t errlen)
{
    if (!IR_ARG_OK(u, err, errlen))
        return -1;
    memset(u, 0, sizeof *u); /* fe_unload is safe on it from here */
    if (!IR_ARG_OK(path, err, errlen))
        return -1;
    u->arena = ir_arena_new();
    if (fe_read_source(u->arena, path, &u->src, err, errlen) != 0)
        return -1;
    return check(u, NULL);
}

int fe_load_text(const char *path, const char *name, const char *text, FeUnit *u)
{
    if (!u)
        return -1;
    memset(u, 0, sizeof *u);
    u->arena = ir_arena_new();
    if (!text) { /* a diagnostic, as for any program that cannot be checked */
        u->src = (Source){ir_arena_strdup(u->arena, path ? path : "<input>"), "", 0};
        ir_diags_init(&u->diags, u->arena, &u->src);
        ir_diag(&u->diags, (SrcLoc){0, 0}, "fe_load_text: text is NULL");
        return 1;
    }
    if (!path)
        path = "<input>";
    size_t n = strlen(text);
    char *copy = ir_arena_strndup(u->arena, text, n);
    u->src = (Source){ir_arena_strdup(u->arena, path), copy, n};
    return check(u, name);
}

void fe_unload(FeUnit *u)
{
    if (u->prog)
        ir_te_destroy(u->prog);
    ir_arena_destroy(u->arena);
    memset(u, 0, sizeof *u);
}
