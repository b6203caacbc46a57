/* Default micro-kernels and their legalisation.
 *
 * Without tuning records every stage gets a default that suits the target
 * and does not look at any concrete shape. On the CPU a reduction stage
 * gets the outer-product kernel of DESIGN.md: 6 x (2 vectors) register
 * tiles, operands packed per block in 256-long chunks, vectors along the
 * innermost output axis; a rank-1 reduction (a row max, a row sum) has no
 * spatial axis worth vectorising, so it vectorises along the reduction.
 * Elementwise stages get one vector per thread along the innermost axis.
 */
#include "dietcode/passes.h"

#include <string.h>

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

MicroKernel pass_default_microkernel(const TeProgram *p, const Tensor *t, const Expr *body,
                                     const TargetInfo *ti)
{
    (void)p;
    MicroKernel mk;
    memset(&mk, 0, sizeof mk);
    for (int a = 0; a < MK_MAX_AXES; a++)
        mk.threads[a] = mk.tile[a] = 1;
    mk.unroll = 1;
    mk.vec = ti->vec_width;
    int n = t->rank;
    bool red = pass_stage_has_reduction(body);
    if (ti->kind == PT_GPU) {
        if (n >= 1) { mk.threads[n - 1] = 16; mk.tile[n - 1] = 4; }
        if (n >= 2) { mk.threads[n - 2] = 16; mk.tile[n - 2] = 4; }
        mk.rchunk = red ? 16 : 0;
        mk.stage = red && n >= 2;
        mk.vec = 4;
    } else if (red && n >= 2) {
        mk.threads[n - 1] = 8;
        mk.tile[n - 1] = 2 * ti->vec_width;
        mk.threads[n - 2] = 4;
        mk.tile[n - 2] = 6;
        mk.rchunk = 256;
        mk.stage = true;
    } else if (red) {
        if (n == 1) { mk.threads[0] = 4; mk.tile[0] = 4; }
        mk.rchunk = 16 * ti->vec_width;
        mk.vaxis = MK_VEC_REDUCE;
    } else if (n >= 1) {
        mk.threads[n - 1] = 8;
        mk.tile[n - 1] = ti->vec_width;
        if (n >= 2)
            mk.threads[n - 2] = 4;
    }
    pass_legalize_microkernel(&mk, t, ti);
    return mk;
}

void pass_legalize_microkernel(MicroKernel *mk, const Tensor *t, const TargetInfo *ti)
{
    int n = t->rank, nt = 1;
    for (int a = 0; a < MK_MAX_AXES; a++) {
        mk->threads[a] = a < n ? clampi(mk->threads[a], 1, 1024) : 1;
        mk->tile[a] = a < n ? clampi(mk->tile[a], 1, 64) : 1;
    }
    for (int a = 0; a < n; a++) {
        while (nt * mk->threads[a] > ti->max_threads && mk->threads[a] > 1)
            mk->threads[a] /= 2;
        nt *= mk->threads[a];
    }
    mk->rchunk = clampi(mk->rchunk, 0, 4096);
    mk->unroll = clampi(mk->unroll, 1, 16);
    if (mk->vec < 1 || (mk->vec & (mk->vec - 1)) || mk->vec > 16)
        mk->vec = 1;
    if (mk->vaxis == MK_VEC_REDUCE && (mk->rchunk == 0 || mk->rchunk % mk->vec != 0))
        mk->vaxis = MK_VEC_SPATIAL;
    if (mk->vaxis == MK_VEC_SPATIAL && (n == 0 || mk->tile[n - 1] % mk->vec != 0))
        mk->vec = 1;
    if (mk->rchunk == 0)
        mk->stage = false;
}
