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

/* frontend/sema.c */
/* Parses and checks src; the program, or NULL when diags got errors. */
TeProgram *fe_compile(const Source *src, const char *name, DiagList *diags);

#endif
