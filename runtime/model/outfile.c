/* outfile.c: see outfile.h. */
#define _GNU_SOURCE /* O_TMPFILE, linkat's AT_SYMLINK_FOLLOW */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUTFILE_MAX_LINKS 40 /* as the kernel's ELOOP limit */
#define OUTFILE_NAME_MAX 4096

/* The temporary file of the write in progress (one at a time): named while
 * pending is set; anonymous (O_TMPFILE, no name yet) while anonymous is. */
static char pending_name[OUTFILE_NAME_MAX];
static volatile sig_atomic_t pending;
static int anonymous;

void outfile_remove_pending(void) {
    if (pending) unlink(pending_name);
}

/* path after following symbolic links (malloc'd); a name that does not
 * exist (yet) is its own target. NULL with err set. */
static char *resolve(const char *path, TfError *err) {
    char *p = malloc(strlen(path) + 1);
    if (p) strcpy(p, path);
    for (int hops = 0; p; hops++) {
        struct stat st;
        if (lstat(p, &st) != 0 || !S_ISLNK(st.st_mode)) return p;
        char link[OUTFILE_NAME_MAX];
        ssize_t n = hops < OUTFILE_MAX_LINKS ? readlink(p, link, sizeof link - 1) : -1;
        if (n < 0) {
            tf_error_set(err, "%s: cannot follow the symbolic link: %s", path,
                         hops < OUTFILE_MAX_LINKS ? strerror(errno) : strerror(ELOOP));
            free(p);
            return NULL;
        }
        link[n] = '\0';
        // A relative link is relative to the directory holding it.
        const char *slash = strrchr(p, '/');
        size_t dir = link[0] == '/' || !slash ? 0 : (size_t)(slash - p) + 1;
        char *next = malloc(dir + (size_t)n + 1);
        if (next) {
            memcpy(next, p, dir);
            memcpy(next + dir, link, (size_t)n + 1);
        }
        free(p);
        p = next;
    }
    tf_error_set(err, "%s: out of memory", path);
    return NULL;
}

/* Refuses a target that exists and is not a writable regular file; *mode is
 * the mode the written file gets. */
static int check_target(const char *path, const char *target, mode_t *mode, TfError *err) {
    struct stat st;
    const char *how = NULL;
    if (stat(target, &st) != 0) {
        if (errno != ENOENT) {
            tf_error_set(err, "%s: cannot write: %s", path, strerror(errno));
            return -1;
        }
        mode_t mask = umask(0);
        umask(mask);
        *mode = 0666 & ~mask;
        return 0;
    }
    if (S_ISDIR(st.st_mode))
        how = "is a directory";
    else if (!S_ISREG(st.st_mode))
        how = "is not a regular file (a device, FIFO or socket); refusing to replace it";
    else if (!(st.st_mode & 0222) || access(target, W_OK) != 0)
        // A read-only mount is not a file its owner protected: say which.
        how = st.st_mode & 0222 && errno == EROFS
                  ? "is on a read-only file system"
                  : "is read-only; refusing to replace it (remove it or make it writable first)";
    if (how) {
        if (strcmp(path, target) != 0)
            tf_error_set(err, "%s: its target %s %s", path, target, how);
        else
            tf_error_set(err, "%s %s", path, how);
        return -1;
    }
    *mode = st.st_mode & 07777;
    return 0;
}

/* Blocks the signals whose handler removes the pending file (they wait
 * while a name is created and registered); *old gets the mask to restore. */
static void block_signals(sigset_t *old) {
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &block, old);
}

/* An unnamed file in target's directory (Linux's O_TMPFILE): a writer
 * killed before it is linked leaves nothing. -1 where the kernel, the file
 * system or a missing /proc (which linkat needs to name it) says no. */
static int open_anonymous(const char *target, mode_t mode) {
#ifdef O_TMPFILE
    char dir[OUTFILE_NAME_MAX];
    const char *slash = strrchr(target, '/');
    size_t n = slash ? (size_t)(slash - target) : 0;
    if (n + 2 > sizeof dir) return -1;
    if (!slash)
        strcpy(dir, ".");
    else if (n == 0)
        strcpy(dir, "/");
    else {
        memcpy(dir, target, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
    if (fd < 0) return -1;
    char self[64];
    struct stat st;
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    if (stat(self, &st) != 0) {
        close(fd);
        return -1;
    }
    return fd;
#else
    (void)target;
    (void)mode;
    return -1;
#endif
}

/* Resolves and checks path and opens the temporary file: an unnamed one
 * where the system allows (open_anonymous), else TARGET.tmp.XXXXXX,
 * registered as pending. The open descriptor, or -1 with err set; *target
 * is malloc'd. */
static int open_temp(const char *path, char **target, TfError *err) {
    mode_t mode = 0644;
    *target = resolve(path, err);
    if (!*target) return -1;
    if (check_target(path, *target, &mode, err) < 0) return -1;
    size_t n = strlen(*target);
    if (n + sizeof ".tmp.XXXXXX" > sizeof pending_name) {
        tf_error_set(err, "%s: cannot create: %s", path, strerror(ENAMETOOLONG));
        return -1;
    }
    memcpy(pending_name, *target, n);
    memcpy(pending_name + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = open_anonymous(*target, mode);
    if (fd >= 0) {
        anonymous = 1;
    } else {
        sigset_t old;
        block_signals(&old);
        fd = mkstemp(pending_name);
        int saved = errno;
        if (fd >= 0) pending = 1;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (fd < 0) {
            tf_error_set(err, "%s: cannot create: %s", path, strerror(saved));
            return -1;
        }
    }
    fchmod(fd, mode); /* mkstemp makes 0600, O_TMPFILE applies the umask */
    return fd;
}

/* Gives the anonymous file fd a name, TARGET.tmp.XXXXXX in pending_name
 * (its template), registered as pending: it exists only between here and
 * the rename. 0, or -1 with errno set. */
static int name_anonymous(int fd) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    size_t x = strlen(pending_name) - 6;
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned long long r = (unsigned long long)getpid() * 2654435761u ^ (unsigned long long)(size_t)&fd;
    for (int attempt = 0; attempt < 100; attempt++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        unsigned long long v = r >> 16;
        for (int i = 0; i < 6; i++, v /= 36) pending_name[x + i] = digits[v % 36];
        sigset_t old;
        block_signals(&old);
        int rc = linkat(AT_FDCWD, self, AT_FDCWD, pending_name, AT_SYMLINK_FOLLOW);
        int saved = errno;
        if (rc == 0) pending = 1;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc == 0) return 0;
        if (saved != EEXIST) {
            errno = saved;
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

static void drop_temp(int fd) {
    close(fd);
    if (pending) unlink(pending_name);
    pending = 0;
    anonymous = 0;
}

int outfile_check(const char *path, TfError *err) {
    char *target = NULL;
    int fd = open_temp(path, &target, err);
    if (fd >= 0) drop_temp(fd);
    free(target);
    return fd >= 0 ? 0 : -1;
}

int outfile_write(const char *path, const void *buf, size_t len, TfError *err) {
    char *target = NULL;
    int fd = open_temp(path, &target, err);
    if (fd < 0) {
        free(target);
        return -1;
    }
    const char *p = buf;
    size_t left = len;
    int ok = 1;
    while (ok && left > 0) {
        ssize_t k = write(fd, p, left);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            ok = 0;
            break;
        }
        p += k;
        left -= (size_t)k;
    }
    if (ok && anonymous && name_anonymous(fd) != 0) ok = 0;
    if (!ok || close(fd) != 0 || rename(pending_name, target) != 0) {
        tf_error_set(err, "%s: cannot write: %s", path, strerror(errno ? errno : EIO));
        if (!ok) close(fd);
        if (pending) unlink(pending_name);
        pending = 0;
        anonymous = 0;
        free(target);
        return -1;
    }
    pending = 0;
    anonymous = 0;
    free(target);
    return 0;
}

/* The streams outfile_open gave out, and what each collects into. */
#define OUTFILE_STREAMS 16
static struct {
    FILE *f;
    char *buf, *path;
    size_t len;
} streams[OUTFILE_STREAMS];
static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;

FILE *outfile_open(const char *path, TfError *err) {
    if (outfile_check(path, err) < 0) return NULL;
    pthread_mutex_lock(&streams_mu);
    int i = 0;
    while (i < OUTFILE_STREAMS && streams[i].f) i++;
    FILE *f = NULL;
    if (i < OUTFILE_STREAMS && (streams[i].path = malloc(strlen(path) + 1))) {
        strcpy(streams[i].path, path);
        streams[i].buf = NULL;
        streams[i].len = 0;
        f = streams[i].f = open_memstream(&streams[i].buf, &streams[i].len);
        if (!f) {
            free(streams[i].path);
            streams[i].path = NULL;
        }
    }
    pthread_mutex_unlock(&streams_mu);
    if (!f) tf_error_set(err, "%s: cannot write: %s", path,
                         i < OUTFILE_STREAMS ? "out of memory" : "too many files open");
    return f;
}

int outfile_close(FILE *f, TfError *err) {
    pthread_mutex_lock(&streams_mu);
    int i = 0;
    while (i < OUTFILE_STREAMS && streams[i].f != f) i++;
    pthread_mutex_unlock(&streams_mu);
    if (i == OUTFILE_STREAMS) {
        tf_error_set(err, "outfile_close: not a stream from outfile_open");
        return -1;
    }
    int bad = ferror(f);
    int rc = fclose(f) != 0 || bad ? -1 : 0; /* fclose sets buf and len */
    if (rc < 0)
        tf_error_set(err, "%s: cannot write: %s", streams[i].path, "out of memory");
    else
        rc = outfile_write(streams[i].path, streams[i].buf, streams[i].len, err);
    pthread_mutex_lock(&streams_mu);
    free(streams[i].buf);
    free(streams[i].path);
    streams[i].buf = streams[i].path = NULL;
    streams[i].f = NULL;
    pthread_mutex_unlock(&streams_mu);
    return rc;
}
