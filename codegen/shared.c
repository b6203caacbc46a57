/* The layout of a kernel's shared buffers in one block-wide allocation:
 * in the order the kernel allocates them, each at a 64-byte aligned
 * offset. The emulator's shared buffer (codegen/emu.c) is laid out so, and
 * so is NVPTX's dynamic shared memory, which a kernel uses when its shared
 * buffers exceed the 48 KB a kernel may declare statically
 * (codegen/nvptx.c); the program table carries those bytes for the launch
 * (codegen/table.c, DcrtKernel.shared_bytes).
 */
#include "dietcode/codegen.h"

enum { SHARED_ALIGN = 64, STATIC_SHARED_MAX = 48 << 10 };

typedef struct Layout {
    const Tensor *want;
    int64_t want_off; /* -1 until found */
    int64_t shared;   /* bytes so far */
    int64_t local;    /* bytes of per-thread buffers, lanes included */
} Layout;

static int64_t buffer_bytes(const Tensor *t)
{
    int64_t n = ir_dtype_size(t->dtype), d;
    for (int i = 0; i < t->rank; i++) {
        if (!ir_is_const(t->shape[i], &d))
            ir_panic(__FILE__, __LINE__, "buffer %s has a non-constant shape", t->name);
        n *= d > 0 ? d : 1;
    }
    return n;
}

static void layout(const Stmt *s, int64_t lanes, Layout *L)
{
    switch (s->kind) {
    case ST_SEQ:
        for (int i = 0; i < s->seq.n; i++)
            layout(s->seq.s[i], lanes, L);
        return;
    case ST_FOR: {
        int64_t n = 1;
        if (s->loop.fk == FK_VECTORIZED && ir_is_const(s->loop.var->extent, &n) && n > 1)
            lanes *= n;
        layout(s->loop.body, lanes, L);
        return;
    }
    case ST_LET: layout(s->let.body, lanes, L); return;
    case ST_IF:
        layout(s->ifs.then, lanes, L);
        if (s->ifs.els)
            layout(s->ifs.els, lanes, L);
        return;
    case ST_ALLOC: {
        const Tensor *t = s->alloc.buf;
        if (t->scope == MS_SHARED) {
            IR_ASSERT(lanes == 1);
            L->shared = (L->shared + SHARED_ALIGN - 1) / SHARED_ALIGN * SHARED_ALIGN;
            if (t == L->want)
                L->want_off = L->shared;
            L->shared += buffer_bytes(t);
        } else {
            L->local += buffer_bytes(t) * lanes;
        }
        layout(s->alloc.body, lanes, L);
        return;
    }
    case ST_STORE: case ST_BARRIER: return;
    }
}

int64_t cg_shared_bytes(const Kernel *k)
{
    Layout L = {.want_off = -1};
    layout(k->body, 1, &L);
    return L.shared;
}

int64_t cg_local_bytes(const Kernel *k)
{
    Layout L = {.want_off = -1};
    layout(k->body, 1, &L);
    return L.local;
}

int64_t cg_shared_offset(const LoopProgram *lp, const Tensor *buf, const Kernel **owner)
{
    for (int i = 0; i < lp->nkernels; i++) {
        Layout L = {.want = buf, .want_off = -1};
        layout(lp->kernels[i]->body, 1, &L);
        if (L.want_off >= 0) {
            if (owner)
                *owner = lp->kernels[i];
            return L.want_off;
        }
    }
    return -1;
}

int64_t cg_dynamic_shared_bytes(const LoopProgram *lp, const Kernel *k)
{
    int64_t n = lp->gpu ? cg_shared_bytes(k) : 0;
    return n > STATIC_SHARED_MAX ? n : 0;
}
