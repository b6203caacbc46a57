/* dietcode/frontend.h: the frontend's table of contents.
 *
 * .tex text -> lexer -> parser (AST, frontend/ast.h) -> sema -> TE program.
 * Problems in the input become diagnostics in a DiagList; the functions
 * here never print and never exit.
 */
#ifndef DIETCODE_FRONTEND_H
#define DIETCODE_FRONTEND_H

#include "dietcode/base.h"
#include "dietcode/ir.h"

/* frontend/source.c */
/* Reads a whole file into the arena. Returns 0, or -1 with a one-line
 * message (unreadable, a directory, too large, contains NUL bytes). */
int fe_read_source(Arena *a, const char *path, Source *out, char *err, size_t errlen);
/* The workload name of a path: its file stem as a C identifier. */
char *fe_program_name(Arena *a, const char *path);

/* A program loaded from a file: its arena (everything below lives in it),
 * the source, the diagnostics, and the checked program or NULL. */
typedef struct FeUnit {
    Arena *arena;
    Source src;
    DiagList diags;
    TeProgram *prog;
} FeUnit;
/* Reads and checks path: 0 with u->prog set; 1 when the program has
 * errors (u->diags holds them for ir_diags_print); -1 when the file cannot
 * be read (err). Release with fe_unload in every case. */
int fe_load(const char *path, FeUnit *u, char *err, size_t errlen);
/* The same for text in memory, path naming it in messages; name is the
 * program's (NULL: from path). 0 or 1 (NULL text: 1, a diagnostic saying
 * so); -1 when u is NULL. */
int fe_load_text(const char *path, const char *name, const char *text, FeUnit *u);
void fe_unload(FeUnit *u);

/* frontend/sema.c */
/* Parses and checks src; the program, or NULL when diags got errors (a
 * NULL src, text or name is one; a NULL diags just returns NULL). */
TeProgram *fe_compile(const Source *src, const char *name, DiagList *diags);
/* Whether name cannot name a tensor or a dim in a .tex program: a keyword
 * (dim, in, input, output, const), a function, a reduction or a type. */
bool fe_reserved_name(const char *name);

#endif
