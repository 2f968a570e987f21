/* schedule.h: ops side by side, and a residual stream without dead columns.
 *
 * compiler/lower.c builds one layer per op, in program order. Under -O a
 * program made of general ops only is then rescheduled:
 *
 *   1. Dead ops go: a layer whose writes no live layer, check or the
 *      unembedding reads (repeatedly, so that whole chains go).
 *   2. Each layer reads the residual columns its query, key, value or fc1
 *      weights touch and writes those its output or fc2 weights (and biases)
 *      touch. A layer goes into the earliest slot after every layer whose
 *      writes it reads or whose columns it also writes, and not before a
 *      layer that reads what it writes; slots alternate attention, MLP, as
 *      tracr's blocks do (longest-path placement).
 *   3. The layers of a slot become one layer: attention layers the heads of
 *      one multi-head layer (d_head the widest, narrower heads padded with
 *      zeros, each head's own scale folded into its query when they
 *      differ), MLPs one block-diagonal MLP. TfLayer.parts says which op is
 *      which head or hidden units. Attention layers of different masks
 *      (causal or not) and MLPs of different activations never share a slot.
 *   4. Registers no layer, check or the unembedding reads lose their columns
 *      (d_model shrinks); the others move down to stay contiguous. Then,
 *      built a second time with columns reused, kept when that is smaller:
 *      a register first written in slot f takes the columns of registers
 *      whose last reader and writer come before an MLP slot z < f (first
 *      fit, registers by first write); the ReLU MLP of slot z gets a part
 *      "clear_<name>" of two units per column, ReLU(x) and ReLU(-x) written
 *      back as -1 and +1, which leaves exactly 0 (the validator checks it
 *      as such: compiler/prove_mlp.c, clear_part). No other layer of slot z
 *      touches those columns. Each register's live range (TfRegister.
 *      live_from) says which residual states hold it: the old one up to the
 *      state layer z reads, the new one from the state it writes on. The
 *      embedding's registers, the output, checked ones and those the
 *      unembedding reads keep their columns to themselves.
 *
 * Each step keeps every computation the same: a layer reads only columns no
 * layer of its slot writes, so running the slot's layers side by side adds
 * the same updates as running them in order (a layer may write what
 * another of its slot reads: both read the stream before the slot).
 *
 * Programs with seed ops are scheduled too (compiler/compile.c), without
 * the rewrites before lowering that assume a register is written once
 * (fusion, angles, numbers, folded tables): a seed op changes registers in
 * place. A program of seed ops only keeps every op and register (TF_SCHED_
 * KEEP, no reuse), and compiler/compile.c keeps whichever of the scheduled
 * model and one layer per op is smaller (the adder: one layer per op, whose
 * repeated rounds share their tensors).
 */
#ifndef TF_SCHEDULE_H
#define TF_SCHEDULE_H

#include "model.h"

/* What schedule_model may do besides placing layers in slots (step 2) and
 * merging them (step 3). TF_SCHED_REUSE: registers take dead registers'
 * columns (step 4 with reuse). TF_SCHED_KEEP: no op and no column goes
 * (step 1 skipped): a program of seed ops, which the validator proves op by
 * op (compiler/prove_split.c) and every register of which it checks. */
enum { TF_SCHED_REUSE = 1, TF_SCHED_KEEP = 2 };

/* A new model holding m's computation in fewer, wider layers (see above);
 * flags: TF_SCHED_* (0: dead ops and columns go, no reuse). m is left as it
 * was. NULL with err set: out of memory, or a layer it cannot take (a
 * norm, or attention without an output projection). */
TfModel *schedule_model(const TfModel *m, int flags, TfError *err);

#endif
