/* tftrain: train a learned model declared in a .tfp program.
 *
 *   tftrain PROGRAM.tfp --task TASK [options] -o OUT.tfw
 *   tftrain PROGRAM.tfp --data TRAIN.txt --heldout HELDOUT.txt [options] -o OUT.tfw
 *   tftrain MODEL.tfw (--task ... | --data ...) [options] -o OUT.tfw
 *   tftrain STUDENT.tfp --teacher COMPILED.tfw [--teacher-inputs random:LEN[:CHARS]|FILE]
 *           [--match-heads S.H=T.H,... [--match-weight X]] [options] -o OUT.tfw
 *   tftrain --resume OUT.tfw (--task ... | --data ...) [options] -o OUT2.tfw
 *   tftrain --init ANY.tfw (--task ... | --data ...) [--freeze SPEC] [--train SPEC] -o OUT.tfw
 *
 * Prints a line at every evaluation (step, loss, held-out accuracy,
 * examples per second, elapsed time, ETA) and the final held-out accuracy;
 * with --progress, or when stderr is a terminal, a "\r"-updated progress
 * line on stderr. OUT.tfw is the trained model alone; OUT.ckpt.tfw beside it
 * is the checkpoint (the model plus the optimizer state) that --resume
 * reads. A .tfw given as the program (tfc's output for a learned model) is
 * trained from step 0 with the settings its metadata records; --init takes
 * any weight file, compiled ones included (runtime/train/finetune.h: what
 * trains, --freeze and --train). Both outputs
 * are checked before training; the first SIGINT during training saves them
 * after the current step and exits 130 (a second one ends tftrain at once).
 * Exit status (the same in every tool, runtime/tools/cli.h): 0 trained; 1 a
 * bad program, data or weight file; 2 usage error (a refused output path
 * included); 3 out of memory, or an output that could not be written; 130
 * interrupted.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#ifdef TF_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "runner.h"
#include "blas.h"
#include "cli.h"
#include "dataparallel.h"
#include "dataset.h"
#include "distill.h"
#include "distributed.h"
#include "file.h"
#include "finetune.h"
#include "kernels.h"
#include "outfile.h"
#include "rng.h"
#include "tfw.h"
#include "train.h"


static void usage(FILE *f) {
    fprintf(f,
            "usage: tftrain PROGRAM.tfp|MODEL.tfw (--task TASK | --data FILE --heldout FILE |\n"
            "                                      --teacher COMPILED.tfw) [options]\n"
            "       tftrain --resume OUT.tfw|OUT.ckpt.tfw (--task TASK | --data ...) [options]\n"
            "       tftrain --init MODEL.tfw (--task TASK | --data ...) [options]\n"
            "data:\n"
            "  --task TASK          binary-add:N, binary-add-msb:N, decimal-add:N, first-token:L,\n"
            "                       xor:K, secret-code\n"
            "  --train-size N       generated training examples (default 10000)\n"
            "  --heldout-size N     generated held-out examples (default 1000)\n"
            "  --data FILE          training examples, PROMPT<TAB>ANSWER or INPUT<TAB>LABEL\n"
            "                       (INPUT<TAB>OUTPUT for a model read at every position)\n"
            "  --heldout FILE       held-out examples, same format\n"
            "  --write-data DIR     also write DIR/train.txt and DIR/heldout.txt\n"
            "  --teacher FILE.tfw   distillation: a compiled model labels the inputs\n"
            "  --teacher-inputs S   random:LEN[:CHARS] (default: random strings up to the\n"
            "                       models' max_len) or a file of prompts, one per line\n"
            "  --match-heads S.H=T.H,...  student head H of attention layer S learns the\n"
            "                       teacher's head's attention pattern (at most 4 pairs)\n"
            "  --match-weight X     weight of that loss (default 1)\n"
            "starting point (docs/training.md, \"Fine-tuning\"):\n"
            "  --init FILE.tfw      start from any weight file, compiled or trained\n"
            "  --freeze SPEC        freeze the tensors SPEC names: all, embed, unembed,\n"
            "                       layers.N, layers.A-B, layers.N.mlp, shared.K, a tensor\n"
            "                       or layer name (tfinfo lists them), comma-separated\n"
            "  --train SPEC         train them again (rules apply in order; by default every\n"
            "                       tensor trains but a fixed position table)\n"
            "optimisation:\n"
            "  --optimizer NAME     sgd, adam or adamw (default adamw)\n"
            "  --lr X               learning rate (default 1e-3)\n"
            "  --momentum X         SGD momentum (default 0.9)\n"
            "  --beta1 X --beta2 X --eps X   Adam (default 0.9, 0.999, 1e-8)\n"
            "  --weight-decay X     (default 0.01 for adamw, 0 otherwise)\n"
            "  --warmup N           linear warm-up steps (default 0)\n"
            "  --cosine             cosine decay to --min-lr (default 0) after warm-up\n"
            "  --clip X             clip the gradient norm to X (default: no clipping)\n"
            "  --batch-size N       examples per step (default 64)\n"
            "  --steps N | --epochs N   length of training (default 1000 steps)\n"
            "  --seed N             batch order and dropout (default: the model's seed)\n"
            "  --dropout X          override the program's dropout\n"
            "output:\n"
            "  -o, --output=FILE    the trained model (default: PROGRAM.tfw); the checkpoint\n"
            "                       (model and optimizer state) goes to FILE.ckpt.tfw\n"
            "  --eval-every N       evaluate the held-out set every N steps (default 100)\n"
            "  --checkpoint-every N also write both files every N steps\n"
            "  --threads N          threads for the chunks of each batch (default: the CPUs;\n"
            "                       the trained model is the same for any N, and under\n"
            "                       mpirun for any number of ranks: docs/cluster.md)\n"
            "  --dump-grads FILE    write the gradient of the first batch as a .tfw and stop\n"
            "  --quiet              only the final line\n"
            "  --progress           a progress line on stderr (default: when it is a terminal\n"
            "                       and not --quiet)\n"
            "  -h, --help           this help;  --version  the version\n"
            "Options take their value as --opt=V or --opt V; \"--\" ends the options.\n"
            "-o is checked before training; a symbolic link is written through, a\n"
            "directory, device or read-only file refused. Ctrl-C (SIGINT) during training\n"
            "saves both files and exits 130 (--resume continues it).\n"
            "An interrupted run (130) has saved its checkpoint.\n" CLI_EXIT_HELP);
}

/* ---- arguments ---------------------------------------------------------- */

typedef struct Args {
    const char *program, *resume, *init, *task, *data, *heldout, *write_data, *out, *dump_grads;
    const char *teacher, *teacher_inputs, *match_heads;
    float match_weight;
    int train_size, heldout_size, batch, eval_every, ckpt_every, threads, quiet, cosine, progress;
    long steps, epochs, warmup;
    int have_seed, have_wd, have_dropout;
    long seed;
    float lr, momentum, beta1, beta2, eps, wd, clip, min_lr, dropout;
    TfOptimizer opt;
    TfFinetuneRules rules; /* --freeze and --train, in order */
} Args;

enum {
    O_TASK = 256, O_TRAIN_SIZE, O_HELDOUT_SIZE, O_DATA, O_HELDOUT, O_WRITE_DATA, O_OPTIMIZER,
    O_LR, O_MIN_LR, O_MOMENTUM, O_BETA1, O_BETA2, O_EPS, O_WEIGHT_DECAY, O_WARMUP, O_COSINE,
    O_CLIP, O_BATCH_SIZE, O_STEPS, O_EPOCHS, O_SEED, O_DROPOUT, O_RESUME, O_EVAL_EVERY,
    O_CHECKPOINT_EVERY, O_THREADS, O_DUMP_GRADS, O_QUIET, O_PROGRESS, O_VERSION, O_INIT,
    O_FREEZE, O_TRAIN, O_TEACHER, O_TEACHER_INPUTS, O_MATCH_HEADS, O_MATCH_WEIGHT
};

static const struct option longopts[] = {
    {"task", required_argument, NULL, O_TASK},
    {"train-size", required_argument, NULL, O_TRAIN_SIZE},
    {"heldout-size", required_argument, NULL, O_HELDOUT_SIZE},
    {"data", required_argument, NULL, O_DATA},
    {"heldout", required_argument, NULL, O_HELDOUT},
    {"write-data", required_argument, NULL, O_WRITE_DATA},
    {"teacher", required_argument, NULL, O_TEACHER},
    {"teacher-inputs", required_argument, NULL, O_TEACHER_INPUTS},
    {"match-heads", required_argument, NULL, O_MATCH_HEADS},
    {"match-weight", required_argument, NULL, O_MATCH_WEIGHT},
    {"optimizer", required_argument, NULL, O_OPTIMIZER},
    {"lr", required_argument, NULL, O_LR},
    {"min-lr", required_argument, NULL, O_MIN_LR},
    {"momentum", required_argument, NULL, O_MOMENTUM},
    {"beta1", required_argument, NULL, O_BETA1},
    {"beta2", required_argument, NULL, O_BETA2},
    {"eps", required_argument, NULL, O_EPS},
    {"weight-decay", required_argument, NULL, O_WEIGHT_DECAY},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"cosine", no_argument, NULL, O_COSINE},
    {"clip", required_argument, NULL, O_CLIP},
    {"batch-size", required_argument, NULL, O_BATCH_SIZE},
    {"steps", required_argument, NULL, O_STEPS},
    {"epochs", required_argument, NULL, O_EPOCHS},
    {"seed", required_argument, NULL, O_SEED},
    {"dropout", required_argument, NULL, O_DROPOUT},
    {"resume", required_argument, NULL, O_RESUME},
    {"init", required_argument, NULL, O_INIT},
    {"freeze", required_argument, NULL, O_FREEZE},
    {"train", required_argument, NULL, O_TRAIN},
    {"output", required_argument, NULL, 'o'},
    {"eval-every", required_argument, NULL, O_EVAL_EVERY},
    {"checkpoint-every", required_argument, NULL, O_CHECKPOINT_EVERY},
    {"threads", required_argument, NULL, O_THREADS},
    {"dump-grads", required_argument, NULL, O_DUMP_GRADS},
    {"quiet", no_argument, NULL, O_QUIET},
    {"progress", no_argument, NULL, O_PROGRESS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0}};

/* 0 parsed; 1 --help or --version printed; -1 a usage error (printed). */
static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->train_size = 10000;
    a->heldout_size = 1000;
    a->batch = 64;
    a->eval_every = 100;
    a->threads = runner_default_threads();
    a->steps = 1000;
    a->lr = 1e-3f;
    a->momentum = 0.9f;
    a->beta1 = 0.9f;
    a->beta2 = 0.999f;
    a->eps = 1e-8f;
    a->opt = TF_OPT_ADAMW;
    a->match_weight = 1.0f;
    int c, li = -1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, &li)) != -1) {
        const char *v = optarg;
        long n = 0;
        int bad = 0;
#define LONG_OPT(id, lo, hi, dst) \
    case id: bad = cli_parse_long(v, lo, hi, &n) < 0; dst = n; break;
#define FLOAT_OPT(id, lo, hi, dst) \
    case id: bad = cli_parse_float(v, lo, hi, &dst) < 0; break;
        switch (c) {
        case 'h': usage(stdout); return 1;
        case O_VERSION: cli_version("tftrain", blas_library(), blas_core(),
                        blas_core_is_fallback(blas_core()), blas_best_core()); return 1;
        case O_COSINE: a->cosine = 1; break;
        case O_QUIET: a->quiet = 1; break;
        case O_PROGRESS: a->progress = 1; break;
        case O_TASK: a->task = v; break;
        case O_DATA: a->data = v; break;
        case O_HELDOUT: a->heldout = v; break;
        case O_WRITE_DATA: a->write_data = v; break;
        case O_TEACHER: a->teacher = v; break;
        case O_TEACHER_INPUTS: a->teacher_inputs = v; break;
        case O_MATCH_HEADS: a->match_heads = v; break;
        case O_RESUME: a->resume = v; break;
        case O_INIT: a->init = v; break;
        case O_FREEZE:
        case O_TRAIN:
            if (finetune_rule_add(&a->rules, c == O_TRAIN, v) < 0) {
                fprintf(stderr, "tftrain: out of memory\n");
                return -1;
            }
            break;
        case 'o': a->out = v; break;
        case O_DUMP_GRADS: a->dump_grads = v; break;
        case O_OPTIMIZER: {
            int k = -1;
            for (int j = 0; j < TF_OPT_COUNT; j++)
                if (strcmp(v, tf_optimizer_names[j]) == 0) k = j;
            bad = k < 0;
            if (!bad) a->opt = (TfOptimizer)k;
            break;
        }
        LONG_OPT(O_TRAIN_SIZE, 1, 10000000, a->train_size)
        LONG_OPT(O_HELDOUT_SIZE, 1, 10000000, a->heldout_size)
        LONG_OPT(O_BATCH_SIZE, 1, 65536, a->batch)
        LONG_OPT(O_STEPS, 0, 100000000, a->steps)
        LONG_OPT(O_EPOCHS, 1, 1000000, a->epochs)
        LONG_OPT(O_WARMUP, 0, 100000000, a->warmup)
        LONG_OPT(O_EVAL_EVERY, 1, 100000000, a->eval_every)
        LONG_OPT(O_CHECKPOINT_EVERY, 1, 100000000, a->ckpt_every)
        LONG_OPT(O_THREADS, 1, 256, a->threads)
        LONG_OPT(O_SEED, 0, 1000000000, a->seed)
        FLOAT_OPT(O_LR, 0, 100, a->lr)
        FLOAT_OPT(O_MIN_LR, 0, 100, a->min_lr)
        FLOAT_OPT(O_MOMENTUM, 0, 0.9999, a->momentum)
        FLOAT_OPT(O_BETA1, 0, 0.9999, a->beta1)
        FLOAT_OPT(O_BETA2, 0, 0.99999, a->beta2)
        FLOAT_OPT(O_EPS, 1e-30, 1, a->eps)
        FLOAT_OPT(O_WEIGHT_DECAY, 0, 10, a->wd)
        FLOAT_OPT(O_CLIP, 0, 1e9, a->clip)
        FLOAT_OPT(O_DROPOUT, 0, 0.99, a->dropout)
        FLOAT_OPT(O_MATCH_WEIGHT, 0, 1e6, a->match_weight)
        default: cli_option_error("tftrain", c, argv, longopts); return -1;
        }
#undef LONG_OPT
#undef FLOAT_OPT
        if (bad) {
            fprintf(stderr, "tftrain: bad value '%s' for --%s\n", v, longopts[li].name);
            return -1;
        }
        a->have_seed |= c == O_SEED;
        a->have_wd |= c == O_WEIGHT_DECAY;
        a->have_dropout |= c == O_DROPOUT;
    }
    for (; optind < argc; optind++) {
        if (a->program) {
            fprintf(stderr, "tftrain: more than one program ('%s' and '%s')\n", a->program,
                    argv[optind]);
            return -1;
        }
        a->program = argv[optind];
    }
    if (a->init && a->resume) {
        fprintf(stderr, "tftrain: --init and --resume exclude each other (--init starts from a "
                        "model's weights at step 0, --resume continues a checkpoint)\n");
        return -1;
    }
    if (!!a->program + !!a->resume + !!a->init != 1) {
        fprintf(stderr, "tftrain: give one of a program (.tfp or .tfw), --init MODEL.tfw or "
                        "--resume CHECKPOINT.tfw%s\n",
                a->program || a->resume || a->init ? ", not several" : "");
        return -1;
    }
    if (!a->task + !a->data + !a->teacher != 2) {
        fprintf(stderr, "tftrain: give one of --task, --data (with --heldout) or --teacher\n");
        return -1;
    }
    TfDistillOptions heads;
    TfError herr = {""};
    if (a->match_heads && distill_parse_heads(a->match_heads, &heads, &herr) < 0) {
        fprintf(stderr, "tftrain: --match-heads: %s\n", herr.msg);
        return -1;
    }
    if (!a->teacher && (a->teacher_inputs || a->match_heads)) {
        fprintf(stderr, "tftrain: --%s needs --teacher\n",
                a->teacher_inputs ? "teacher-inputs" : "match-heads");
        return -1;
    }
    if (a->data && !a->heldout) {
        fprintf(stderr, "tftrain: --data needs --heldout\n");
        return -1;
    }
    if (!a->have_wd) a->wd = a->opt == TF_OPT_ADAMW ? 0.01f : 0.0f;
    return 0;
}

/* ---- the model ------------------------------------------------------------ */

/* Builds the initial model of a program. tftrain does not link the
 * compiler (docs/architecture.md): it runs tfc -- $TFC, else the tfc beside
 * this executable, else the first on PATH -- into a temporary weight file,
 * reads that and removes it. tfc's diagnostics reach stderr as they are. */
extern char **environ;

static TfModel *model_from_program(const char *name, TfError *err) {
    char tfc[PATH_MAX] = "tfc";
    const char *env = getenv("TFC");
    if (env && *env) {
        snprintf(tfc, sizeof tfc, "%s", env);
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            self[n] = '\0';
            char *slash = strrchr(self, '/');
            if (slash && (size_t)(slash - self) + 5 < sizeof tfc) {
                snprintf(tfc, sizeof tfc, "%.*s/tfc", (int)(slash - self), self);
                if (access(tfc, X_OK) != 0) strcpy(tfc, "tfc");
            }
        }
    }
    const char *tmpdir = getenv("TMPDIR");
    char dir[PATH_MAX], tmp[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/tftrain-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(dir)) {
        tf_error_set(err, "%s: cannot make a temporary folder: %s", dir, strerror(errno));
        return NULL;
    }
    snprintf(tmp, sizeof tmp, "%s/model.tfw", dir);
    char *argv[] = {tfc, (char *)name, "-o", tmp, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, tfc, NULL, NULL, argv, environ);
    int status = 0;
    TfModel *m = NULL;
    if (rc != 0) {
        tf_error_set(err, "%s: cannot run %s to compile it: %s (set TFC to tfc's path)", name, tfc,
                     strerror(rc));
    } else if (waitpid(pid, &status, 0) < 0) {
        tf_error_set(err, "%s: waiting for %s: %s", name, tfc, strerror(errno));
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            tf_error_set(err, "%s: cannot run %s to compile it (set TFC to tfc's path)", name, tfc);
        else
            tf_error_set(err, "%s: does not compile (tfc exited with status %d)", name,
                         WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    } else if ((m = tfw_read(tmp, err)) && !m->learned) {
        model_free(m);
        m = NULL;
        tf_error_set(err, "%s declares no learned model (a `model { ... }` block)", name);
    } else if (!m) {
        tf_error_prefix(err, name);
    }
    unlink(tmp);
    rmdir(dir);
    return m;
}

/* The checkpoint beside a model file: OUT.tfw -> OUT.ckpt.tfw (any other
 * name gets .ckpt.tfw appended). The caller frees it. */
static char *checkpoint_path(const char *model_path) {
    size_t n = strlen(model_path);
    char *p = malloc(n + 16);
    if (!p) return NULL;
    strcpy(p, model_path);
    if (n > 4 && strcmp(p + n - 4, ".tfw") == 0) p[n - 4] = '\0';
    strcat(p, ".ckpt.tfw");
    return p;
}

/* The model and optimizer state --resume continues: PATH itself when it
 * holds optimizer state (a checkpoint), else the checkpoint beside it. */
static TfModel *read_checkpoint(const char *path, TfError *err) {
    TfModel *m = tfw_read(path, err);
    if (!m || model_find_tensor(m, "optim.step") >= 0) return m;
    model_free(m);
    char *ck = checkpoint_path(path);
    if (!ck) {
        tf_error_set(err, "out of memory");
        return NULL;
    }
    if (access(ck, F_OK) != 0) {
        tf_error_set(err, "%s holds no optimizer state and there is no checkpoint %s beside it "
                          "(to train the model from step 0, give it as the program)", path, ck);
        m = NULL;
    } else if ((m = tfw_read(ck, err)) && model_find_tensor(m, "optim.step") < 0) {
        tf_error_set(err, "%s holds no optimizer state", ck);
        model_free(m);
        m = NULL;
    }
    free(ck);
    return m;
}

/* A float as the shortest decimal that reads back as it. */
static cJSON *json_float(float f) {
    char buf[32];
    tfw_float_text(f, buf);
    return cJSON_CreateRaw(buf);
}

/* Keeps made_by flat however often training resumes: detaches from prev
 * (the made_by training starts from) its `history` and its chain of `from`s
 * (older files nested them) and returns them as one array, oldest first,
 * each entry without `from` or `history`; NULL when there are none (or out
 * of memory: the history is then dropped, the run still recorded). */
static cJSON *made_by_history(cJSON *prev) {
    cJSON *hist = cJSON_DetachItemFromObject(prev, "history");
    if (hist && !cJSON_IsArray(hist)) {
        cJSON_Delete(hist);
        hist = NULL;
    }
    cJSON *chain = NULL; /* the `from`s, oldest first */
    for (cJSON *cur = cJSON_DetachItemFromObject(prev, "from"); cur;) {
        cJSON *older = cJSON_IsObject(cur) ? cJSON_DetachItemFromObject(cur, "from") : NULL;
        cJSON_Delete(cJSON_DetachItemFromObject(cur, "history"));
        if (!chain) chain = cJSON_CreateArray();
        if (chain) cJSON_InsertItemInArray(chain, 0, cur);
        else cJSON_Delete(cur);
        cur = older;
    }
    if (!chain) return hist;
    if (!hist) return chain;
    while (cJSON_GetArraySize(chain) > 0) cJSON_AddItemToArray(hist, cJSON_DetachItemFromArray(chain, 0));
    cJSON_Delete(chain);
    return hist;
}

/* __metadata__.made_by of the trained files (docs/weight-format.md): the
 * tool, what training started from (the made_by of that file), and every
 * setting the result depends on. NULL when out of memory. */
static char *made_by_json(const Args *a, const TfTrainOptions *o, const char *from,
                          const TfDataset *train, const TfDataset *held, uint64_t data_seed,
                          long steps, long total) {
    cJSON *j = cJSON_CreateObject(), *opt = cJSON_CreateObject(), *sched = cJSON_CreateObject();
    cJSON *data = cJSON_CreateObject(), *prev = from ? cJSON_Parse(from) : NULL;
    if (!j || !opt || !sched || !data) {
        cJSON_Delete(j), cJSON_Delete(opt), cJSON_Delete(sched), cJSON_Delete(data);
        cJSON_Delete(prev);
        return NULL;
    }
    cJSON_AddStringToObject(j, "tool", "tftrain");
    cJSON_AddStringToObject(j, "version", TF_VERSION);
    if (prev) {
        cJSON *hist = made_by_history(prev);
        cJSON_AddItemToObject(j, "from", prev);
        if (hist) cJSON_AddItemToObject(j, "history", hist);
    }
    if (a->init) cJSON_AddStringToObject(j, "init", a->init);
    if (a->rules.n) {
        char *rules = finetune_rules_text(&a->rules);
        if (rules) cJSON_AddStringToObject(j, "tensors", rules);
        free(rules);
        if (!rules) {
            cJSON_Delete(j), cJSON_Delete(opt), cJSON_Delete(sched), cJSON_Delete(data);
            return NULL;
        }
    }
    cJSON_AddStringToObject(opt, "name", tf_optimizer_names[o->optimizer]);
    cJSON_AddItemToObject(opt, "lr", json_float(a->lr));
    if (o->optimizer == TF_OPT_SGD) {
        cJSON_AddItemToObject(opt, "momentum", json_float(o->momentum));
    } else {
        cJSON_AddItemToObject(opt, "beta1", json_float(o->beta1));
        cJSON_AddItemToObject(opt, "beta2", json_float(o->beta2));
        cJSON_AddItemToObject(opt, "eps", json_float(o->eps));
    }
    cJSON_AddItemToObject(opt, "weight_decay", json_float(o->weight_decay));
    cJSON_AddItemToObject(opt, "clip", json_float(o->clip));
    cJSON_AddItemToObject(j, "optimizer", opt);
    cJSON_AddNumberToObject(sched, "warmup", (double)a->warmup);
    cJSON_AddBoolToObject(sched, "cosine", a->cosine);
    cJSON_AddItemToObject(sched, "min_lr", json_float(a->min_lr));
    cJSON_AddItemToObject(j, "schedule", sched);
    if (a->teacher) {
        cJSON_AddStringToObject(data, "teacher", a->teacher);
        if (a->teacher_inputs) cJSON_AddStringToObject(data, "teacher_inputs", a->teacher_inputs);
        if (a->match_heads) {
            cJSON_AddStringToObject(data, "match_heads", a->match_heads);
            cJSON_AddItemToObject(data, "match_weight", json_float(a->match_weight));
        }
        cJSON_AddNumberToObject(data, "seed", (double)data_seed);
    } else if (a->task) {
        cJSON_AddStringToObject(data, "task", a->task);
        cJSON_AddNumberToObject(data, "seed", (double)data_seed);
    } else {
        cJSON_AddStringToObject(data, "train", a->data);
        cJSON_AddStringToObject(data, "heldout", a->heldout);
    }
    cJSON_AddNumberToObject(data, "train_size", train->n);
    cJSON_AddNumberToObject(data, "heldout_size", held->n);
    cJSON_AddItemToObject(j, "data", data);
    cJSON_AddNumberToObject(j, "batch_size", a->batch);
    cJSON_AddNumberToObject(j, "steps", (double)steps);
    cJSON_AddNumberToObject(j, "planned_steps", (double)total);
    cJSON_AddNumberToObject(j, "seed", (double)o->seed);
    cJSON_AddItemToObject(j, "dropout", json_float(o->dropout));
    char *text = cJSON_PrintUnformatted(j), *copy = text ? malloc(strlen(text) + 1) : NULL;
    if (copy) strcpy(copy, text);
    cJSON_free(text);
    cJSON_Delete(j);
    return copy;
}

/* What save() records in made_by, and where the checkpoint goes. */
typedef struct Saver {
    const Args *a;
    const TfTrainOptions *o;
    const char *from;
    const TfDataset *train, *held;
    uint64_t data_seed;
    long total;
    char *ckpt;
} Saver;

/* Writes the trained model to -o and the checkpoint beside it, each recording
 * how it was made (made_by, after the steps done so far). */
/* 1 (and err set) when the held-out loss after `step` steps is not finite:
 * the trained weights overflow float32 on held-out inputs (a step too large
 * for a compiled model's extreme weights, or a very deep one), and a model
 * that prints nothing meaningful is not written. */
static int heldout_diverged(double loss, long step, TfError *err) {
    if (isfinite(loss)) return 0;
    tf_error_set(err, "the held-out loss is not finite after step %ld: the trained weights overflow "
                      "float32 (lower --lr, or --freeze the compiled layers; docs/training.md); "
                      "nothing written", step);
    return 1;
}

static int save(const Saver *sv, TfTrainer *t, TfModel *m, TfError *err) {
    free(m->made_by);
    m->made_by = made_by_json(sv->a, sv->o, sv->from, sv->train, sv->held, sv->data_seed,
                              trainer_steps_done(t), sv->total);
    if (!m->made_by) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    return trainer_save(t, sv->a->out, err) < 0 || trainer_save_checkpoint(t, sv->ckpt, err) < 0
               ? -1
               : 0;
}

/* Set by the first SIGINT or SIGUSR1 during training: the loop stops after
 * its step and saves a checkpoint. A second SIGINT ends tftrain at once.
 * Under mpirun the ranks agree after each step whether any was
 * interrupted, so that all stop at the same step (one rank leaving the
 * loop alone left the others waiting in the next step's collective). Open
 * MPI's mpirun turns Ctrl-C into SIGTERM (no checkpoint) but forwards
 * SIGUSR1: docs/cluster.md. */
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig) {
    if (interrupted && sig == SIGINT) cli_die_of_signal(sig);
    interrupted = 1;
}

/* Whether any rank was interrupted (every rank calls it after each step). */
static int any_interrupted(void) {
    if (dist_size() <= 1) return interrupted;
    long v = interrupted;
    dist_sum_longs(&v, 1);
    return v > 0;
}

/* The examples of step `step`: the (step*B)-th onwards of a stream of
 * epochs, each a permutation of the training set drawn from (seed, epoch),
 * so a resumed run sees exactly the batches it would have seen. */
typedef struct Order {
    int *perm;
    long epoch;
    int n;
    uint64_t seed;
} Order;

static void batch_indices(Order *o, long step, int B, int *idx) {
    for (int j = 0; j < B; j++) {
        long k = step * B + j, e = k / o->n;
        if (e != o->epoch) {
            TfRng r;
            rng_seed(&r, o->seed * 7919u + (uint64_t)e);
            for (int i = 0; i < o->n; i++) o->perm[i] = i;
            for (int i = o->n - 1; i > 0; i--) {
                int x = (int)rng_below(&r, (uint64_t)i + 1), tmp = o->perm[i];
                o->perm[i] = o->perm[x];
                o->perm[x] = tmp;
            }
            o->epoch = e;
        }
        idx[j] = o->perm[k % o->n];
    }
}

static int write_data(const char *dir, const TfDataset *tr, const TfDataset *ho, const TfModel *m) {
    struct stat st;
    if (mkdir(dir, 0777) != 0 && (errno != EEXIST || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "tftrain: cannot create directory '%s': %s\n", dir,
                strerror(errno == EEXIST ? ENOTDIR : errno));
        return -1;
    }
    const char *names[2] = {"train.txt", "heldout.txt"};
    const TfDataset *ds[2] = {tr, ho};
    for (int i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        TfError err;
        FILE *f = outfile_open(path, &err); /* written whole, or not at all */
        if (f) dataset_write_text(ds[i], m, f); /* a failed write shows in ferror(f) */
        if (!f || outfile_close(f, &err) < 0) {
            fprintf(stderr, "tftrain: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

/* Gradients as a weight file: the model with every tensor's values replaced
 * by its gradient (for the PyTorch cross-check). */
static int dump_grads(TfTrainer *t, TfModel *m, const char *path, TfError *err) {
    size_t n;
    float *g = trainer_grads(t, &n);
    int n_params = 0; /* the tensors before any optimizer state */
    while (n_params < m->n_tensors && strncmp(m->tensors[n_params].name, "optim.", 6) != 0) {
        memcpy(m->tensors[n_params].data, g + trainer_tensor_offset(t, n_params),
               m->tensors[n_params].nelem * sizeof(float));
        n_params++;
    }
    return tfw_write_tensors(m, n_params, path, err);
}

/* Every code "#0" .. "#99999" classified, in batches of bb->max_seqs:
 * prints how many are accepted and the first 20 of them. */
static void report_secret_all(TfTrainer *t, TfBatchBuf *bb, int accept, int hash,
                              const int digit[10]) {
    enum { N_CODES = 100000, SHOW = 20 };
    int per = bb->max_seqs, tokens[256 * 6], idx[256], pred[256];
    float prob[256];
    TfExample ex[256];
    if (per > 256) per = 256;
    if (bb->max_len < 6) return;
    int n_accepted = 0, shown[SHOW];
    for (int x0 = 0; x0 < N_CODES; x0 += per) {
        int n = N_CODES - x0 < per ? N_CODES - x0 : per;
        for (int i = 0; i < n; i++) {
            char text[8];
            int len = snprintf(text, sizeof text, "%d", x0 + i);
            int *tk = tokens + i * 6;
            tk[0] = hash;
            for (int j = 0; j < len; j++) tk[1 + j] = digit[text[j] - '0'];
            ex[i] = (TfExample){(long)i * 6, len + 1, len + 1, 0, 0, 0};
            idx[i] = i;
        }
        TfDataset d = {.ex = ex, .n = n, .tokens = tokens, .n_tokens = n * 6, .max_len = 6};
        batchbuf_fill(bb, &d, idx, n);
        trainer_predict(t, &bb->batch, pred, prob);
        for (int i = 0; i < n; i++)
            if (pred[i] == accept && n_accepted++ < SHOW) shown[n_accepted - 1] = x0 + i;
    }
    printf("secret code: %d of %d codes accepted:", n_accepted, N_CODES);
    for (int i = 0; i < n_accepted && i < SHOW; i++) printf(" #%d", shown[i]);
    printf("%s\n", n_accepted > SHOW ? " ..." : "");
}

/* Seed 003's checks: 2013 accepted, every close negative (one digit
 * changed) rejected, every number below 100,000 but 2013 rejected, and the
 * mean squared error of each head's attention scores on 2013 against its
 * picture. */
static void report_secret_code(TfTrainer *t, TfBatchBuf *bb, const TfModel *m,
                               const TfDataset *train) {
    int accept = -1, hash = -1, digit[10];
    for (int i = 0; i < m->n_classes; i++)
        if (strcmp(m->class_names[i], "accept") == 0) accept = i;
    for (int v = 0; v < m->n_vocab; v++)
        if (m->vocab[v] == '#') hash = v;
    for (int c = 0; c < 10; c++) {
        digit[c] = -1;
        for (int v = 0; v < m->n_vocab; v++)
            if (m->vocab[v] == '0' + c) digit[c] = v;
        if (digit[c] < 0) return;
    }
    if (accept < 0 || hash < 0 || bb->max_seqs < 37 || bb->max_len < 5) return;
    // Sequence 0 is #2013, then its 36 close negatives.
    int tokens[37 * 5];
    TfExample ex[37];
    const int code[4] = {2, 0, 1, 3};
    int n = 0;
    for (int pos = -1; pos < 4; pos++)
        for (int c = 0; c < 10; c++) {
            if (pos < 0 ? c != 0 : c == code[pos]) continue;
            int *tk = tokens + n * 5;
            tk[0] = hash;
            for (int j = 0; j < 4; j++) tk[1 + j] = digit[j == pos ? c : code[j]];
            ex[n] = (TfExample){(long)n * 5, 5, 5, pos < 0 ? accept : 1 - accept, 0, 0};
            n++;
        }
    TfDataset d = {.ex = ex, .n = n, .tokens = tokens, .n_tokens = n * 5, .max_len = 5};
    int idx[37], pred[37];
    float prob[37];
    for (int i = 0; i < n; i++) idx[i] = i;
    batchbuf_fill(bb, &d, idx, n);
    trainer_predict(t, &bb->batch, pred, prob);
    int rejected = 0;
    for (int i = 1; i < n; i++) rejected += pred[i] != accept;
    printf("secret code: 2013 %s (p = %.4f); close negatives rejected: %d of %d\n",
           pred[0] == accept ? "accepted" : "REJECTED", pred[0] == accept ? prob[0] : 1 - prob[0],
           rejected, n - 1);
    for (int a = 0; a < train->n_attn; a++) {
        int T = 0;
        const float *s = trainer_attention_scores(t, 0, train->attn[a].layer, train->attn[a].head, &T);
        if (!s || T != train->attn[a].T) continue;
        double mse = 0;
        for (int k = 0; k < T * T; k++) {
            double diff = s[k] - train->attn[a].target[k];
            mse += diff * diff / (T * T);
        }
        printf("attention head %d: mean squared error %.5f against its picture\n",
               train->attn[a].head, mse);
        for (int i = 0; i < T; i++) {
            printf("   ");
            for (int j = 0; j < T; j++) printf(" %6.3f", s[i * T + j]);
            printf("\n");
        }
    }
    report_secret_all(t, bb, accept, hash, digit);
}

/* Distillation's data: the teacher read, checked against the student m and
 * run on the inputs (runtime/train/distill.h). */
static int load_teacher(const Args *a, const TfModel *m, TfDistillOptions *o, TfModel **teacher,
                        TfDataset *train, TfDataset *held, TfError *err) {
    o->inputs = a->teacher_inputs;
    o->weight = a->match_weight;
    o->n_train = a->train_size;
    o->n_heldout = a->heldout_size;
    if (a->match_heads && distill_parse_heads(a->match_heads, o, err) < 0) {
        tf_error_prefix(err, "--match-heads");
        return -1;
    }
    if (!(*teacher = tfw_read(a->teacher, err))) return -1; /* err names the path */
    if (distill_check(*teacher, m, o, err) < 0) {
        tf_error_prefix(err, a->teacher);
        return -1;
    }
    TfDistillStats st;
    if (distill_make_data(*teacher, m, o, train, held, &st, err) < 0) {
        tf_error_prefix(err, a->teacher);
        return -1;
    }
    if (!a->quiet)
        printf("teacher %s labelled %d training and %d held-out inputs (%s%s%d tokens%s); %d "
               "refused by its run-time checks\n",
               a->teacher, train->n, held->n, a->teacher_inputs ? a->teacher_inputs : "random",
               a->teacher_inputs ? ", up to " : " up to ", st.input_len,
               (*teacher)->bos >= 0 ? " after the BOS" : "", st.rejected);
    return 0;
}

/* Distillation: how closely each matched student head follows its
 * teacher head on the held-out inputs. */
static void report_heads(TfTrainer *t, TfBatchBuf *bb, const TfDataset *held,
                         const TfDistillOptions *o) {
    double tv[TF_DISTILL_MAX_HEADS];
    if (o->n_heads == 0) return;
    distill_head_distance(t, bb, held, o, tv);
    for (int k = 0; k < o->n_heads; k++)
        printf("matched head %d.%d = teacher %d.%d: mean total-variation distance %.4f "
               "(held-out attention rows; 0 equal, 1 disjoint)\n",
               o->heads[k].s_layer, o->heads[k].s_head, o->heads[k].t_layer, o->heads[k].t_head,
               tv[k]);
}

int main(int argc, char **argv) {
    // OpenBLAS's generic fallback on a CPU with AVX2 or AVX-512: run again on
    // the CPU's own kernels, before anything else (runtime/engine/blas.h);
    // and without OpenBLAS's threads (cli.h).
    const char *core = blas_core();
    cli_blas_prefer_core(argv, blas_core_is_fallback(core) ? core : NULL, blas_best_core(),
                         core != NULL);
    Args a;
    TfError err = {""};
    // Under mpirun or srun: one of several ranks, which train together
    // (runtime/train/dataparallel.h); rank 0 alone prints and writes files.
    if (dist_init(&argc, &argv, &err) < 0) {
        fprintf(stderr, "tftrain: %s\n", err.msg);
        return CLI_EXIT_SYSTEM;
    }
    int rank0 = dist_rank() == 0;
    if (!rank0 && !freopen("/dev/null", "w", stdout)) return CLI_EXIT_SYSTEM;
    if (argc == 1) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    int parsed = parse_args(argc, argv, &a);
    if (parsed != 0) finetune_rules_free(&a.rules);
    if (parsed != 0) return parsed < 0 ? CLI_EXIT_USAGE : cli_flush_stdout("tftrain") < 0 ? CLI_EXIT_SYSTEM : 0;
    cli_remove_output_on_signals();
#ifdef TF_HAVE_OPENBLAS
    // The chunks of a batch run on a.threads workers (dataparallel.h), each
    // calling OpenBLAS on its own: OpenBLAS on one thread, whatever
    // OPENBLAS_NUM_THREADS says (its threads inside ours would contend, and
    // their number would change its rounding).
    openblas_set_num_threads(1);
#endif
    TfModel *m = NULL;
    int status = CLI_EXIT_INPUT;
    TfTrainer *t = NULL;
    TfDataParallel *dp = NULL; /* the training steps and evaluations, on threads and ranks */
    TfDataset train = {0}, held = {0};
    TfBatchBuf bb = {0};
    int *idx = NULL;
    Order order = {0};
    char *out_default = NULL;
    char *from = NULL; /* the made_by of what training starts from */
    TfLearnedSettings set = {0};
    Saver saver = {0};
    TfModel *teacher = NULL;
    TfDistillOptions dopt = {0};
    int *trainable = NULL; /* per tensor, from --freeze and --train */

    // The initial model and its learned settings (dropout, positions, seed):
    // a checkpoint, a weight file (tfc's output for a learned model), or a
    // program compiled here.
    if (blas_reserve(a.threads > 0 ? a.threads : 1, &err) < 0) {
        // OpenBLAS would hang on its buffer (its own worker thread, started
        // with the library, too); _Exit, since its exit handler waits for
        // that thread, which retries for ever.
        fprintf(stderr, "tftrain: %s\n", err.msg);
        fflush(stdout);
        _Exit(CLI_EXIT_SYSTEM);
    }
    if (a.resume) {
        if (cli_expect_weights("tftrain", a.resume) < 0) goto done;
        if (!(m = read_checkpoint(a.resume, &err))) goto fail;
    } else if (a.init) {
        if (cli_expect_weights("tftrain", a.init) < 0) goto done;
        if (!(m = tfw_read(a.init, &err))) goto fail;
        finetune_drop_state(m); /* a checkpoint's optimizer state: a fresh optimizer */
    } else {
        size_t len = 0;
        char *text = tf_file_read_max(a.program, TF_FILE_MAX, &len, &err);
        if (!text) goto fail;
        if (cli_file_kind(text, len < 64 ? len : 64) == CLI_FILE_WEIGHTS) {
            m = tfw_read_buffer((const unsigned char *)text, len, &err);
            if (!m) tf_error_prefix(&err, a.program);
        } else if (cli_expect_program("tftrain", a.program, text, len) < 0) {
            free(text);
            goto done;
        } else {
            m = model_from_program(a.program, &err);
        }
        free(text);
        if (!m) goto fail;
    }
    // A compiled model (no learned settings, --init or a checkpoint of it):
    // no dropout, a fixed position table, seed 0.
    const char *src = a.resume ? a.resume : a.init ? a.init : a.program;
    if ((m->learned || a.program) && tfw_learned_settings(m, &set, &err) < 0) {
        if (m->learned) tf_error_prefix(&err, src);
        else tf_error_set(&err, "%s holds a compiled model, not a learned one (to fine-tune it: "
                                "tftrain --init %s)", src, src);
        goto fail;
    }
    if (finetune_check_model(m, &err) < 0) {
        tf_error_prefix(&err, src);
        goto fail;
    }
    if (!(trainable = malloc((size_t)(m->n_tensors ? m->n_tensors : 1) * sizeof *trainable)))
        goto oom;
    if (finetune_mask(m, &a.rules, !set.learned_positions, trainable, &err) < 0) {
        fprintf(stderr, "tftrain: %s\n", err.msg); /* a usage error */
        status = CLI_EXIT_USAGE;
        goto done;
    }
    if (a.resume && finetune_check_state(m, trainable, &err) < 0) goto fail;
    from = m->made_by; /* recorded in the output's made_by */
    m->made_by = NULL;
    if (!a.out) {
        size_t n = strlen(src);
        out_default = malloc(n + 8);
        if (!out_default) goto oom;
        strcpy(out_default, src);
        char *dot = strrchr(out_default, '.');
        if (dot && !strchr(dot, '/')) *dot = '\0';
        strcat(out_default, ".tfw");
        if (strcmp(out_default, src) == 0) strcat(out_default, ".new");
        a.out = out_default;
    }
    // An output that cannot be written is found now, not after training.
    if (!(saver.ckpt = checkpoint_path(a.out))) goto oom;
    status = CLI_EXIT_USAGE; // a refused output path
    if (outfile_check(a.out, &err) < 0 || outfile_check(saver.ckpt, &err) < 0 ||
        (a.dump_grads && outfile_check(a.dump_grads, &err) < 0))
        goto fail;
    if (cli_refuse_same_file("tftrain", a.out, a.program) < 0 ||
        cli_refuse_same_file("tftrain", a.out, a.init) < 0 ||
        cli_refuse_same_file("tftrain", a.out, a.data) < 0 ||
        cli_refuse_same_file("tftrain", a.out, a.heldout) < 0 ||
        cli_refuse_same_file("tftrain", a.out, a.teacher) < 0)
        goto done;
    status = CLI_EXIT_INPUT;

    // Data.
    if (a.teacher) {
        dopt.seed = a.have_seed ? (uint64_t)a.seed : set.seed;
        // A text file says so once (cli_expect_weights prints it), as --init's.
        if (cli_expect_weights("tftrain", a.teacher) < 0) goto done;
        if (load_teacher(&a, m, &dopt, &teacher, &train, &held, &err) < 0) goto fail;
    } else if (a.task) {
        uint64_t dseed = a.have_seed ? (uint64_t)a.seed : set.seed;
        if (dataset_generate(&train, &held, m, a.task, a.train_size, a.heldout_size, dseed, &err) < 0)
            goto fail;
    } else if (dataset_load_text(&train, m, a.data, &err) < 0 ||
               dataset_load_text(&held, m, a.heldout, &err) < 0) {
        goto fail;
    }
    if (finetune_check_data(m, &train, &err) < 0) {
        tf_error_prefix(&err, a.task ? a.task : a.data);
        goto fail;
    }
    if (finetune_check_data(m, &held, &err) < 0) {
        tf_error_prefix(&err, a.task ? a.task : a.heldout);
        goto fail;
    }
    if (a.write_data && rank0 && write_data(a.write_data, &train, &held, m) < 0) {
        status = CLI_EXIT_USAGE; // a refused path; it said why
        goto done;
    }

    // Trainer.
    TfTrainOptions o = {a.opt, a.momentum, a.beta1, a.beta2, a.eps, a.wd, a.clip,
                        a.have_dropout ? a.dropout : set.dropout, set.learned_positions,
                        a.have_seed ? (uint64_t)a.seed : set.seed, a.threads, trainable};
    // The trainer here runs only --dump-grads' batch and the secret code's
    // checks (37 sequences, 64 at a time); the workers of dp_new train and
    // evaluate. Room for 256 sequences took gigabytes of activations in a
    // model of thousands of layers (issue 24).
    int chunk = a.dump_grads ? a.batch : DP_CHUNK;
    if (a.task && strcmp(a.task, "secret-code") == 0 && chunk < 64) chunk = 64;
    int max_len = train.max_len > held.max_len ? train.max_len : held.max_len;
    if (max_len < 6) max_len = 6; /* the secret code's checks: "#" and up to 5 digits */
    t = trainer_new(m, &o, chunk * max_len, chunk, &err);
    if (!t) goto fail;
    if (a.resume && trainer_load_state(t, &err) < 0) goto fail;
    if (!(dp = dp_new(t, a.threads, a.batch, max_len, dist_comm(), &err))) goto fail;
    if (batchbuf_init(&bb, chunk, max_len) < 0) goto oom;
    idx = malloc((size_t)(chunk > a.batch ? chunk : a.batch) * sizeof *idx);
    order.perm = malloc((size_t)train.n * sizeof *order.perm);
    if (!idx || !order.perm) goto oom;
    order.n = train.n;
    order.epoch = -1;
    order.seed = o.seed;
    long total = a.epochs ? (a.epochs * (long)train.n + a.batch - 1) / a.batch : a.steps;
    long start = trainer_steps_done(t);
    if (start > 0 && total <= start) {
        // --steps is the run's total, not the steps to add (--steps 0
        // from step 0 evaluates without training).
        tf_error_set(&err, "%s has had %ld steps already; %s %ld %s (give more than %ld to "
                           "train on)", src, start,
                     a.epochs ? "--epochs makes" : "--steps asks for", total,
                     total < start ? "in all, fewer" : "in all, no more", start);
        goto fail;
    }
    saver.a = &a;
    saver.o = &o;
    saver.from = from;
    saver.train = &train;
    saver.held = &held;
    saver.data_seed = a.have_seed ? (uint64_t)a.seed : set.seed;
    saver.total = total;

    // Every example is checked once up front, so a bad one fails fast.
    for (int k = 0; k < 2; k++) {
        const TfDataset *d = k ? &held : &train;
        for (int i = 0; i < d->n; i += chunk) {
            int n = d->n - i < chunk ? d->n - i : chunk;
            for (int j = 0; j < n; j++) idx[j] = i + j;
            batchbuf_fill(&bb, d, idx, n);
            if (trainer_check_batch(t, &bb.batch, &err) < 0) {
                tf_error_prefix(&err, k ? "held-out set" : "training set");
                goto fail;
            }
        }
    }
    if (a.dump_grads) {
        batch_indices(&order, start, a.batch, idx);
        batchbuf_fill(&bb, &train, idx, a.batch);
        double ce;
        double loss = trainer_forward_backward(t, &bb.batch, start, &ce);
        if (rank0 && dump_grads(t, m, a.dump_grads, &err) < 0) goto write_failed;
        printf("loss %.9g\n", loss);
        status = 0;
        goto done;
    }
    if (!a.quiet && a.rules.n) finetune_describe(m, trainable, stdout);
    if (!a.quiet) {
        size_t n_params;
        trainer_params(t, &n_params);
        printf("%s: %d training, %d held-out examples; %zu parameters; %s, batch %d, %ld steps\n",
               m->source_name ? m->source_name : "model", train.n, held.n, n_params,
               tf_optimizer_names[a.opt], a.batch, total);
    }
    CliProgress bar;
    cli_progress_init(&bar, a.progress);
    if ((a.quiet && !a.progress) || !rank0) bar.on = 0;
    double train_time = 0, loss_sum = 0, rate = 0;
    long loss_n = 0, examples = 0;
    int correct = 0;
    double t0 = cli_now();
    cli_catch_signal(SIGINT, on_interrupt); /* from here Ctrl-C saves a checkpoint */
    cli_catch_signal(SIGUSR1, on_interrupt);
    int stopped = 0;
    for (long s = start; s < total && !stopped; s++) {
        double ts = cli_now();
        batch_indices(&order, s, a.batch, idx);
        double loss = dp_forward_backward(dp, &train, idx, a.batch, s);
        if (!isfinite(trainer_step(t, train_lr_at(s, total, a.lr, a.warmup, a.cosine, a.min_lr)))) {
            tf_error_set(&err, "the gradient overflows float32 at step %ld (extreme weights, such as "
                               "a compiled model's: --freeze them; docs/training.md)", s + 1);
            goto fail;
        }
        train_time += cli_now() - ts;
        examples += a.batch;
        loss_sum += loss;
        loss_n++;
        if (!isfinite(loss)) {
            tf_error_set(&err, "the loss is not finite at step %ld (lower the learning rate?)", s + 1);
            goto fail;
        }
        rate = examples / (train_time > 0 ? train_time : 1e-9);
        double done_part = (double)(s + 1 - start) / (double)(total - start);
        cli_progress_update(&bar, done_part, "step %ld/%ld, loss %.4f, %.0f examples/s", s + 1,
                            total, loss_sum / loss_n, rate);
        if (!a.quiet && ((s + 1) % a.eval_every == 0 || s + 1 == total)) {
            if (heldout_diverged(dp_evaluate(dp, &held, &correct), s + 1, &err)) goto fail;
            char elapsed[32], eta[32];
            double wall = cli_now() - t0;
            cli_duration(wall, elapsed, sizeof elapsed);
            cli_duration(wall * (1 - done_part) / done_part, eta, sizeof eta);
            cli_progress_clear(&bar);
            printf("step %7ld/%ld  loss %.4f  held-out %6.2f%%  lr %.2e  %8.0f examples/s  "
                   "elapsed %s  ETA %s\n",
                   s + 1, total, loss_sum / loss_n, 100.0 * correct / held.n,
                   train_lr_at(s, total, a.lr, a.warmup, a.cosine, a.min_lr), rate, elapsed, eta);
            fflush(stdout);
            loss_sum = 0;
            loss_n = 0;
        }
        if (a.ckpt_every && (s + 1) % a.ckpt_every == 0 && rank0 && save(&saver, t, m, &err) < 0)
            goto write_failed;
        stopped = any_interrupted();
    }
    double wall = cli_now() - t0;
    if (stopped) {
        cli_progress_clear(&bar);
        if (rank0 && save(&saver, t, m, &err) < 0) goto write_failed;
        if (rank0)
            fprintf(stderr, "tftrain: interrupted after step %ld of %ld; saved a checkpoint to %s "
                        "(to continue: tftrain --resume %s with the same data options)\n",
                trainer_steps_done(t), total, saver.ckpt, a.out);
        status = CLI_EXIT_INTERRUPTED;
        goto done;
    }
    cli_progress_end(&bar, "%ld steps, %.0f examples/s", total - start, rate);
    double hloss = dp_evaluate(dp, &held, &correct);
    if (heldout_diverged(hloss, total, &err)) goto fail;
    if (rank0 && save(&saver, t, m, &err) < 0) goto write_failed;
    printf("held-out accuracy %.2f%% (%d/%d), loss %.4f; %ld steps in %.2f s, %.0f examples/s; "
           "wrote %s\n",
           100.0 * correct / held.n, correct, held.n, hloss, total - start, wall,
           examples / (train_time > 0 ? train_time : 1e-9), a.out);
    if (a.task && strcmp(a.task, "secret-code") == 0) report_secret_code(t, &bb, m, &train);
    if (a.teacher) report_heads(t, &bb, &held, &dopt);
    status = 0;
    goto done;
write_failed: // an output could not be written (3), or its path was taken away (1)
    status = cli_error_status(&err);
    goto fail;
oom:
    tf_error_set(&err, "out of memory");
fail:
    fprintf(stderr, "tftrain: %s\n", err.msg);
    if (tf_error_is_memory(&err)) status = CLI_EXIT_SYSTEM;
done:
    if (cli_flush_stdout("tftrain") < 0 && status == 0) status = CLI_EXIT_SYSTEM;
    dp_free(dp);
    trainer_free(t);
    batchbuf_free(&bb);
    dataset_free(&train);
    dataset_free(&held);
    free(idx);
    free(order.perm);
    free(out_default);
    free(from);
    free(saver.ckpt);
    free(trainable);
    finetune_rules_free(&a.rules);
    model_free(m);
    model_free(teacher);
    dist_finalize();
    return status;
}
