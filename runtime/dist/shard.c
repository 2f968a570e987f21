/* shard.c: --batch and --check split over the ranks (shard.h).
 *
 * Each rank runs blocks of lines through runner_run (its own threads and
 * engines), the block's text in memory (fmemopen), its output to `out`
 * directly on rank 0 when nothing comes before it, to a buffer otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include "shard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "distributed.h"
#include "lines.h"

#define BLOCK_LINES 32768 /* lines per block */
#define PIECE (16 << 20)  /* bytes per message of a rank's buffered output */

typedef struct Buf {
    char *p;
    size_t len, cap;
} Buf;

static int buf_add(Buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* What a block (or a rank) did, sent as bytes. */
typedef struct Result {
    long lines, run, passed, failed, bad, errors, rc;
    double flops;
} Result;

static void result_add(Result *r, long lines, long run, long passed, long failed, long bad,
                       long errors, double flops) {
    r->lines += lines;
    r->run += run;
    r->passed += passed;
    r->failed += failed;
    r->bad += bad;
    r->errors += errors;
    r->flops += flops;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads whole lines into b (emptied first) while the stream is before `end`
 * (-1: no end), at most BLOCK_LINES; *pos follows the stream. A line over
 * max bytes goes in cut to max bytes and a '\n', which the runner refuses as
 * too long. Returns the lines read, or -1 on a read error or out of memory. */
static long read_block(FILE *f, off_t end, off_t *pos, Buf *b, TfLine *ln, size_t max) {
    b->len = 0;
    long n = 0;
    TfLineStatus ls = TF_LINE_OK;
    while (n < BLOCK_LINES && (end < 0 || *pos < end) && (ls = tf_line_read(f, max, ln)) > 0) {
        *pos += (off_t)ln->bytes;
        n++;
        if (buf_add(b, ln->buf, ln->len) < 0) return -1;
        if ((ln->len == 0 || ln->buf[ln->len - 1] != '\n') && buf_add(b, "\n", 1) < 0) return -1;
    }
    return ls == TF_LINE_ERROR ? -1 : n;
}

/* Runs one block; the failures still to print are o->show_failures less
 * `shown`. */
static int run_block(const TfModel *m, Buf *b, const char *in_name, long first_line, long shown,
                     FILE *out, FILE *errs, const TfRunnerOptions *o, Result *r, TfError *err) {
    if (b->len == 0) return 0;
    FILE *f = fmemopen(b->p, b->len, "r");
    if (!f) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    TfRunnerOptions bo = *o;
    bo.first_line = first_line;
    bo.progress = NULL; /* a block's counts are not the run's */
    bo.show_failures = shown >= o->show_failures ? 0 : (int)(o->show_failures - shown);
    TfRunnerStats st;
    int rc = runner_run(m, f, in_name, out, errs, &bo, &st, err);
    fclose(f);
    result_add(r, st.lines, st.run, st.passed, st.failed, st.bad, st.errors, st.flops);
    return rc;
}

/* Writes text to out; in check mode only while fewer than o->show_failures
 * lines have been printed (*printed counts them). */
static void print_text(FILE *out, const char *p, size_t n, const TfRunnerOptions *o,
                       long *printed) {
    if (!o->check) {
        fwrite(p, 1, n, out);
        return;
    }
    for (size_t i = 0; i < n && *printed < o->show_failures;) {
        const char *nl = memchr(p + i, '\n', n - i);
        size_t k = nl ? (size_t)(nl - (p + i)) + 1 : n - i;
        fwrite(p + i, 1, k, out);
        i += k;
        (*printed)++;
    }
}

/* The first line start at or after byte `at` of f (a regular file of
 * `size` bytes). */
static off_t line_start(FILE *f, off_t at, off_t size) {
    if (at <= 0) return 0;
    if (at >= size || fseeko(f, at - 1, SEEK_SET) != 0) return size;
    off_t pos = at - 1;
    int c;
    while ((c = getc(f)) != EOF) {
        pos++;
        if (c == '\n') return pos;
    }
    return size;
}

/* A regular file: this rank's bytes [*start, *end) and the number of its
 * first line. */
static int file_share(FILE *f, off_t size, off_t *start, off_t *end, long *first_line) {
    int rank = dist_rank(), n = dist_size();
    *start = line_start(f, (off_t)((double)size * rank / n), size);
    *end = rank == n - 1 ? size : line_start(f, (off_t)((double)size * (rank + 1) / n), size);
    if (*end < *start) *end = *start;
    long lines = 0;
    if (fseeko(f, *start, SEEK_SET) != 0) return -1;
    char chunk[1 << 16];
    for (off_t left = *end - *start; left > 0;) {
        size_t want = left < (off_t)sizeof chunk ? (size_t)left : sizeof chunk;
        size_t got = fread(chunk, 1, want, f);
        if (got == 0) break;
        for (const char *p = chunk; (p = memchr(p, '\n', (size_t)(chunk + got - p))); p++) lines++;
        left -= (off_t)got;
    }
    *first_line = 1 + dist_exscan_long(lines);
    return fseeko(f, *start, SEEK_SET);
}

/* Rank 0 of a pipe: reads blocks and hands them out, one per rank in turn,
 * prints every block's output in order. Message to a rank: first line
 * number and failures already printed (two longs), then the block; an
 * empty message ends. Reply: a Result, then the block's output. */
static int pipe_leader(const TfModel *m, FILE *in, const char *in_name, FILE *out, FILE *errs,
                       const TfRunnerOptions *o, Result *mine, TfError *err) {
    int n = dist_size(), rc = 0, eof = 0;
    Buf own = {0}, block = {0}, msg = {0};
    TfLine line = {0};
    size_t max = TF_LINE_MAX(m->max_len);
    char *reply = NULL;
    size_t rcap = 0;
    long next_line = 1, failed = 0;
    off_t pos = 0;
    while (!eof && rc == 0) {
        long first = next_line, got = read_block(in, -1, &pos, &own, &line, max);
        if (got < 0) {
            tf_error_set(err, "error reading '%s': %s", in_name, strerror(errno));
            rc = -1;
            break;
        }
        next_line += got;
        eof = got < BLOCK_LINES;
        int sent = 1; /* ranks given a block this round */
        for (; sent < n && !eof; sent++) {
            long head[2] = {next_line, failed};
            got = read_block(in, -1, &pos, &block, &line, max);
            if (got <= 0) {
                eof = 1;
                if (got < 0) rc = -1;
                break;
            }
            eof = got < BLOCK_LINES;
            next_line += got;
            msg.len = 0;
            if (buf_add(&msg, (const char *)head, sizeof head) < 0 ||
                buf_add(&msg, block.p, block.len) < 0) {
                rc = -1;
                break;
            }
            dist_send(msg.p, msg.len, sent);
        }
        long before = mine->failed;
        if (rc == 0 && run_block(m, &own, in_name, first, failed, out, errs, o, mine, err) < 0)
            rc = -1;
        failed += mine->failed - before;
        // Failures come in case order: those before a block are all printed, up to the limit.
        for (int r = 1; r < sent; r++) {
            size_t len = dist_recv(&reply, &rcap, r);
            Result res;
            memcpy(&res, reply, sizeof res);
            if (res.rc < 0) rc = -1;
            long printed = failed < o->show_failures ? failed : o->show_failures;
            print_text(out, reply + sizeof res, len - sizeof res, o, &printed);
            failed += res.failed;
        }
        if (rc < 0 && !err->msg[0]) tf_error_set(err, "out of memory or a read error");
    }
    for (int r = 1; r < n; r++) dist_send(NULL, 0, r); /* the end */
    free(own.p);
    free(block.p);
    free(msg.p);
    tf_line_free(&line);
    free(reply);
    return rc;
}

/* Another rank of a pipe: runs the blocks rank 0 sends until an empty one. */
static int pipe_follower(const TfModel *m, const char *in_name, FILE *errs,
                         const TfRunnerOptions *o, Result *mine, TfError *err) {
    char *msg = NULL, *text = NULL;
    size_t cap = 0, text_len = 0, len;
    int rc = 0;
    while ((len = dist_recv(&msg, &cap, 0)) > 0) {
        long head[2];
        memcpy(head, msg, sizeof head);
        Buf b = {msg + sizeof head, len - sizeof head, len - sizeof head};
        FILE *out = open_memstream(&text, &text_len);
        Result res = {0};
        if (!out || run_block(m, &b, in_name, head[0], head[1], out, errs, o, &res, err) < 0)
            res.rc = rc = -1;
        if (out) fclose(out);
        Buf reply = {0};
        if (buf_add(&reply, (const char *)&res, sizeof res) < 0 ||
            (text && buf_add(&reply, text, text_len) < 0)) {
            res.rc = rc = -1;
            reply.len = 0;
            buf_add(&reply, (const char *)&res, sizeof res);
        }
        dist_send(reply.p ? reply.p : (const char *)&res, reply.p ? reply.len : sizeof res, 0);
        free(reply.p);
        free(text);
        text = NULL;
        result_add(mine, res.lines, res.run, res.passed, res.failed, res.bad, res.errors, res.flops);
    }
    free(msg);
    return rc;
}

/* A regular file's share or the rank's own input: blocks run in turn; rank
 * 0 prints straight away, the others into a temporary file that rank 0
 * prints after its own, rank by rank. */
static int run_own(const TfModel *m, FILE *in, const char *in_name, off_t end, long first_line,
                   off_t pos, FILE *out, FILE *errs, const TfRunnerOptions *o, Result *mine,
                   TfError *err) {
    int rank = dist_rank(), n = dist_size(), rc = 0;
    FILE *dst = rank == 0 ? out : tmpfile();
    Buf block = {0};
    TfLine line = {0};
    size_t max = TF_LINE_MAX(m->max_len);
    long got;
    if (!dst) {
        tf_error_set(err, "cannot make a temporary file: %s", strerror(errno));
        rc = -1;
    }
    while (rc == 0 && (got = read_block(in, end, &pos, &block, &line, max)) != 0) {
        if (got < 0) {
            tf_error_set(err, "error reading '%s': %s", in_name, strerror(errno));
            rc = -1;
            break;
        }
        if (run_block(m, &block, in_name, first_line, mine->failed, dst, errs, o, mine, err) < 0)
            rc = -1;
        first_line += got;
    }
    free(block.p);
    tf_line_free(&line);
    // Rank 0 prints the others' output in rank order: pieces, then an empty one.
    long printed = mine->failed < o->show_failures ? mine->failed : o->show_failures;
    if (rank == 0) {
        char *piece = NULL;
        size_t cap = 0, len;
        for (int r = 1; r < n; r++)
            while ((len = dist_recv(&piece, &cap, r)) > 0) print_text(out, piece, len, o, &printed);
        free(piece);
        return rc;
    }
    char *piece = malloc(PIECE);
    if (dst && piece && fflush(dst) == 0 && fseeko(dst, 0, SEEK_SET) == 0) {
        size_t len;
        while ((len = fread(piece, 1, PIECE, dst)) > 0) dist_send(piece, len, 0);
    } else if (rc == 0) {
        tf_error_set(err, "cannot read back this rank's output");
        rc = -1;
    }
    dist_send(NULL, 0, 0);
    free(piece);
    if (dst) fclose(dst);
    return rc;
}

int shard_run(const TfModel *m, FILE *in, const char *in_name, int own_input, FILE *out,
              FILE *errs, const TfRunnerOptions *o, TfRunnerStats *st, TfError *err) {
    memset(st, 0, sizeof *st);
    double t0 = now_seconds();
    Result mine = {0};
    struct stat sb;
    int rc;
    if (own_input) {
        rc = run_own(m, in, in_name, -1, 1, 0, out, errs, o, &mine, err);
    } else if (fstat(fileno(in), &sb) == 0 && S_ISREG(sb.st_mode)) {
        off_t start, end;
        long first_line;
        rc = file_share(in, sb.st_size, &start, &end, &first_line);
        if (rc < 0) tf_error_set(err, "cannot read '%s': %s", in_name, strerror(errno));
        else rc = run_own(m, in, in_name, end, first_line, start, out, errs, o, &mine, err);
    } else if (dist_rank() == 0) {
        rc = pipe_leader(m, in, in_name, out, errs, o, &mine, err);
    } else {
        rc = pipe_follower(m, in_name, errs, o, &mine, err);
    }
    // Every rank: the sums, and whether any rank failed.
    long sums[8] = {mine.lines, mine.run, mine.passed, mine.failed, mine.bad, rc < 0,
                    (long)mine.flops, mine.errors};
    double seconds = now_seconds() - t0;
    dist_sum_longs(sums, 8);
    dist_max_doubles(&seconds, 1);
    st->lines = sums[0];
    st->run = sums[1];
    st->passed = sums[2];
    st->failed = sums[3];
    st->bad = sums[4];
    st->errors = sums[7];
    st->seconds = seconds;
    st->flops = (double)sums[6];
    if (sums[5] > 0) {
        if (rc == 0) tf_error_set(err, "the run failed on another rank");
        return -1;
    }
    return 0;
}
