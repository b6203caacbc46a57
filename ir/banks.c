/* Shared-memory bank conflicts of a warp's access, from the loop IR's
 * index expressions.
 *
 * Shared memory has 32 banks of 4-byte words (word w is in bank w % 32). A
 * warp's access of `width` words per thread (1, 2 or 4: 32-, 64- or
 * 128-bit) is served in phases of 32 / width threads each, so that a phase
 * moves at most 128 bytes; within a phase, threads that read the same word
 * share it (broadcast), and distinct words in one bank are served one
 * after another. A phase therefore takes as many wavefronts as the most
 * distinct words any bank holds in it, and the access the sum over its
 * phases: 1 per phase, `width` in all, is conflict-free. A 128-bit access
 * whose base is not 16-byte aligned is not one access: codegen splits it,
 * and it costs what its scalar parts cost.
 *
 * ir_access_wavefronts evaluates an access's word offsets for the threads
 * of the block's first warp from its index expressions: the thread loop's
 * variable takes each thread's index, the lets that derive per-thread
 * positions from it (t_i = Th / 16) are substituted, and every other
 * variable is uniform across the warp, so its value only shifts all
 * addresses alike (which permutes the banks: the count is unchanged); it
 * is taken as 0.
 */
#include "dietcode/ir.h"

#include <string.h>

enum { BANKS = 32, WARP = 32 };

static Expr *var_to_zero(ExprCtx *c, Expr *e, void *ud)
{
    (void)ud;
    return e->kind == EX_VAR ? ir_int(c, 0) : e;
}

typedef struct Vars {
    Var *v[64];
    int n;
} Vars;

static void collect_var(Expr *e, void *ud)
{
    Vars *vs = ud;
    if (e->kind != EX_VAR || vs->n == 64)
        return;
    for (int i = 0; i < vs->n; i++)
        if (vs->v[i] == e->var)
            return;
    vs->v[vs->n++] = e->var;
}

int ir_bank_wavefronts(const int64_t *words, int nthreads, int width)
{
    IR_ASSERT(width == 1 || width == 2 || width == 4);
    IR_ASSERT(nthreads >= 1 && nthreads <= WARP);
    int per_phase = WARP / width, total = 0;
    for (int p0 = 0; p0 < nthreads; p0 += per_phase) {
        int64_t seen[WARP * 4];
        int nseen = 0, count[BANKS] = {0}, most = 1;
        for (int t = p0; t < nthreads && t < p0 + per_phase; t++)
            for (int w = 0; w < width; w++) {
                int64_t word = words[t] + w;
                bool dup = false;
                for (int i = 0; i < nseen && !dup; i++)
                    dup = seen[i] == word;
                if (dup)
                    continue;
                seen[nseen++] = word;
                int b = (int)(((word % BANKS) + BANKS) % BANKS);
                if (++count[b] > most)
                    most = count[b];
            }
        total += most;
    }
    return total;
}

int ir_access_wavefronts(ExprCtx *c, Expr *offset, const Var *thread, int64_t nthreads,
                         int nlets, Var *const *letv, Expr *const *letval, const Var *lane,
                         int width)
{
    /* the lets, innermost first, so that each one's value is in terms of
     * the thread index alone once the outer ones are in */
    Expr *f = offset;
    for (int i = nlets - 1; i >= 0; i--)
        f = ir_subst(c, f, letv[i], letval[i]);
    int n = nthreads < WARP ? (int)nthreads : WARP;
    int64_t words[WARP];
    bool aligned = true;
    for (int t = 0; t < n; t++) {
        Expr *at = ir_subst(c, f, (Var *)thread, ir_int(c, t));
        if (lane)
            at = ir_subst(c, at, (Var *)lane, ir_int(c, 0));
        /* the remaining variables are uniform: 0 */
        at = ir_simplify(c, ir_rewrite(c, at, var_to_zero, NULL));
        if (!ir_is_const(at, &words[t]))
            return -1;
        aligned &= words[t] % width == 0;
    }
    /* aligned for every value of the uniform variables too: each one's
     * step (exact for offsets linear in them) is a multiple of width */
    if (width > 1 && aligned) {
        Expr *at0 = ir_simplify(c, ir_subst(c, f, (Var *)thread, ir_int(c, 0)));
        if (lane)
            at0 = ir_simplify(c, ir_subst(c, at0, (Var *)lane, ir_int(c, 0)));
        Vars vs = {{0}, 0};
        ir_expr_visit(at0, collect_var, &vs);
        for (int i = 0; i < vs.n && aligned; i++) {
            int64_t step;
            Expr *one = ir_subst(c, at0, vs.v[i], ir_int(c, 1));
            Expr *d = ir_simplify(c, ir_rewrite(c, ir_binop(c, EX_SUB, one, at0), var_to_zero, NULL));
            aligned = ir_is_const(d, &step) && step % width == 0;
        }
    }
    if (width == 1 || aligned)
        return ir_bank_wavefronts(words, n, width);
    /* split into its scalar accesses, each one a lane further */
    int total = 0;
    for (int l = 0; l < width; l++) {
        int64_t w[WARP];
        for (int t = 0; t < n; t++)
            w[t] = words[t] + l;
        total += ir_bank_wavefronts(w, n, 1);
    }
    return total;
}
