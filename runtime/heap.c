/* Memory the C library keeps after it was freed, given back to the
 * system: after a JIT compile, LLVM's transient memory (BERT-base: about
 * 300 MB of freed heap) would otherwise stay in the process's resident
 * set for as long as it runs. glibc's malloc_trim; elsewhere nothing. */
#include "dietcode/runtime.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

void rt_heap_trim(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
