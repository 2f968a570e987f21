/* fake_corename.c: a stand-in for an OpenBLAS that does not know this CPU,
 * for tests/blas_core.sh (LD_PRELOAD). With OPENBLAS_CORETYPE unset or
 * empty, openblas_get_corename() says "Prescott", the generic fallback that
 * OpenBLAS 0.3.21 gives recent Intel Xeons; with it set, it asks the real
 * library. Only the name is faked: the kernels are the real library's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

char *openblas_get_corename(void);

char *openblas_get_corename(void) {
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (!env || !*env) return "Prescott";
    char *(*real)(void);
    void *sym = dlsym(RTLD_NEXT, "openblas_get_corename");
    if (!sym) return "unknown";
    memcpy(&real, &sym, sizeof real);
    return real();
}
