/* kill_mid_write.c: a writer killed with SIGKILL in the middle of writing
 * its output, for tests/hardening.sh (LD_PRELOAD). The first write(2) of
 * KILL_MID_WRITE bytes or more (default 65536: a weight file, not a
 * message) writes half of them and then kills its own process, which can
 * run nothing after. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

ssize_t write(int fd, const void *buf, size_t n) {
    const char *env = getenv("KILL_MID_WRITE");
    size_t at = env && *env ? (size_t)strtoull(env, NULL, 10) : 65536;
    ssize_t (*real)(int, const void *, size_t);
    void *sym = dlsym(RTLD_NEXT, "write");
    if (!sym) abort();
    memcpy(&real, &sym, sizeof real);
    if (n < at) return real(fd, buf, n);
    real(fd, buf, n / 2);
    kill(getpid(), SIGKILL);
    return -1;
}
