/* Kernel bodies that are one function: the same stage of a model's twelve
 * layers lowers to twelve kernels that differ only in their buffers, whose
 * bodies (codegen/cpu.c: NAME.body, the buffers passed as arguments) are
 * the same function but for the names of its values. mergefunc
 * (codegen/module.c) would find them too, but only once every body is
 * built: a model's module then held twelve copies of each before any was
 * merged, LLVM's largest transient memory in a JIT of BERT-base. So
 * codegen/host.c builds each kernel first in a module of its own and
 * compares its body with those kept so far, by its printed IR (in a small
 * module, printing is cheap: in the model's, each print walks every
 * function) with every name the body defines (parameters, values, blocks:
 * %x and x:) renamed in order of first appearance, which is a function of
 * the body up to those names alone. A kernel whose body is one kept gets
 * only its entry, calling that body; the others are built again in the
 * module and kept. Bodies whose text quotes anything (a name or a string
 * that would need a real lexer) are not compared. */
#include "dietcode/codegen_llvm.h"
#include "dietcode/hash.h"

#include <stdlib.h>
#include <string.h>

typedef struct Kept {
    uint64_t hash;
    char *text;
    LLVMValueRef fn;
} Kept;

struct CgBodies {
    Kept *kept;
    int n, cap;
};

CgBodies *cg_bodies_new(void)
{
    CgBodies *b = calloc(1, sizeof *b);
    if (!b)
        ir_panic(__FILE__, __LINE__, "out of memory");
    return b;
}

void cg_bodies_free(CgBodies *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->n; i++)
        free(b->kept[i].text);
    free(b->kept);
    free(b);
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '$' || c == '.' || c == '_';
}

/* The names a body defines, each with its number once met in the
 * renaming (-1 before): open addressing, the table at most half full. */
typedef struct Name {
    const char *s;
    size_t len;
    int number;
} Name;

typedef struct Names {
    Name *slot;
    size_t cap, n;
    int numbered;
} Names;

static Name *find(Names *nm, const char *s, size_t len, bool add)
{
    if (add && 2 * (nm->n + 1) > nm->cap) {
        Names big = {calloc(nm->cap ? 2 * nm->cap : 256, sizeof *big.slot), nm->cap ? 2 * nm->cap : 256,
                     0, nm->numbered};
        if (!big.slot)
            ir_panic(__FILE__, __LINE__, "out of memory");
        for (size_t i = 0; i < nm->cap; i++)
            if (nm->slot[i].s)
                *find(&big, nm->slot[i].s, nm->slot[i].len, true) = nm->slot[i];
        free(nm->slot);
        *nm = big;
    }
    if (!nm->cap)
        return NULL;
    for (size_t i = dc_fnv1a(DC_FNV_OFFSET, s, len) & (nm->cap - 1);; i = (i + 1) & (nm->cap - 1)) {
        Name *x = &nm->slot[i];
        if (x->s && x->len == len && memcmp(x->s, s, len) == 0)
            return x;
        if (!x->s) {
            if (!add)
                return NULL;
            nm->n++;
            *x = (Name){s, len, -1};
            return x;
        }
    }
}

/* The name at p: a local one (%x: *local), a block's label at a line's
 * start (x:), or none (length 0). */
static size_t name_at(const char *text, const char *p, bool *local)
{
    const char *q = p + (*p == '%');
    size_t len = 0;
    while (name_char(q[len]))
        len++;
    *local = *p == '%';
    if (*local)
        return len;
    bool line_start = p == text || p[-1] == '\n';
    return line_start && len > 0 && q[len] == ':' ? len : 0;
}

/* text, a function's, with the names it defines (its parameters, its
 * values, its blocks) renamed to numbers in order of first appearance
 * (%x -> %N, x: -> N:), malloc'd; other names (a type's) as they are.
 * NULL when the text quotes anything. */
static char *renamed(const char *text)
{
    if (strchr(text, '"'))
        return NULL;
    /* the definitions: the parameters (%x on the define line), "%x =" and "x:" */
    Names def = {0};
    const char *body = strchr(text, '{');
    for (const char *p = text; *p; p++) {
        bool local;
        size_t len = name_at(text, p, &local);
        if (!len)
            continue;
        const char *q = p + local, *after = q + len;
        if (!local || (body && p < body) || strncmp(after, " = ", 3) == 0)
            find(&def, q, len, true);
        p = after - 1;
    }
    size_t cap = strlen(text) + 64, n = 0;
    char *out = malloc(cap);
    if (!out)
        ir_panic(__FILE__, __LINE__, "out of memory");
    for (const char *p = text; *p;) {
        if (n + 32 > cap) {
            cap *= 2;
            out = realloc(out, cap);
            if (!out)
                ir_panic(__FILE__, __LINE__, "out of memory");
        }
        bool local;
        size_t len = name_at(text, p, &local);
        Name *x = len ? find(&def, p + local, len, false) : NULL;
        if (x) {
            if (x->number < 0)
                x->number = def.numbered++;
            n += (size_t)snprintf(out + n, cap - n, "%s%d", local ? "%" : "", x->number);
            p += local + len;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    free(def.slot);
    return out;
}

LLVMValueRef cg_bodies_find(CgBodies *b, LLVMValueRef fn, char **key)
{
    /* the function's own name out of its text */
    size_t len;
    const char *own = LLVMGetValueName2(fn, &len);
    char *name = malloc(len + 1);
    if (!name)
        ir_panic(__FILE__, __LINE__, "out of memory");
    memcpy(name, own, len);
    name[len] = '\0';
    LLVMSetValueName2(fn, "dc.body", 7);
    char *text = LLVMPrintValueToString(fn);
    LLVMSetValueName2(fn, name, len);
    free(name);
    *key = renamed(text);
    LLVMDisposeMessage(text);
    if (!*key)
        return NULL;
    uint64_t h = dc_fnv1a_str(*key);
    for (int i = 0; i < b->n; i++)
        if (b->kept[i].hash == h && strcmp(b->kept[i].text, *key) == 0) {
            free(*key);
            *key = NULL;
            return b->kept[i].fn;
        }
    return NULL;
}

void cg_bodies_keep(CgBodies *b, char *key, LLVMValueRef fn)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->kept = realloc(b->kept, sizeof *b->kept * (size_t)b->cap);
        if (!b->kept)
            ir_panic(__FILE__, __LINE__, "out of memory");
    }
    b->kept[b->n++] = (Kept){dc_fnv1a_str(key), key, fn};
}
