#!/usr/bin/env python3
"""intervene_check.py: the Python side of tests/interventions.sh.

    intervene_check.py nocarry STRIDE > cases.tsv
        every adder case of tools/adder_cases.py (a, b < 1000, 4 digits) whose
        sum has a carry, each STRIDE-th one: prompt<TAB>the digits
        programs/adder.tfp writes when no carry reaches any digit, digit i
        (least significant first) (a_i + b_i) mod 10 where the true sum has
        (a_i + b_i + c_i) mod 10: exactly the digits a carry c_i = 1 reaches
        differ. The last line on stderr: how many cases, how many digits a
        carry reaches.
    intervene_check.py decimal N SEED > cases.tsv
        N random 4-digit additions for programs/add_decimal.tfp written as 8
        digits, each with a carry: prompt<TAB>the 9 digits with every carry
        taken out (patching the carry head from a sum without carries).
    intervene_check.py patch TFRUN WEIGHTS HOOK[:REG] SPEC SOURCE PROMPT...
        tfrun --ablate SPEC --patch-from SOURCE and this module's
        run_with_hooks, patching HOOK (a run_with_cache name; with :REG only
        that register's columns) with its values in SOURCE's run at the same
        positions, print the same line for each PROMPT. Exit 1 on any
        difference.
"""
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))


def digits(v, n):
    return [(v // 10 ** i) % 10 for i in range(n)]  # least significant first


def nocarry(stride):
    n = reached = k = 0
    for a in range(1000):
        for b in range(1000):
            da, db = digits(a, 4), digits(b, 4)
            carry, cin = 0, []
            for i in range(4):
                cin.append(carry)
                carry = (da[i] + db[i] + carry) // 10
            if a + b >= 10000 or not any(cin):
                continue
            k += 1
            if (k - 1) % stride:
                continue
            true = digits(a + b, 4)
            ablated = [(da[i] + db[i]) % 10 for i in range(4)]
            assert [t != x for t, x in zip(true, ablated)] == [c == 1 for c in cin]
            n += 1
            reached += sum(cin)
            print("%04d+%04d=\t%s" % (a, b, "".join(map(str, ablated))))
    print("%d cases, %d digits reached by a carry" % (n, reached), file=sys.stderr)


def decimal(n, seed):
    r = random.Random(seed)
    made = 0
    while made < n:
        a, b = r.randrange(10000), r.randrange(10000)
        da, db = digits(a, 8), digits(b, 8)
        if not any((da[i] + db[i]) >= 10 for i in range(8)):
            continue
        made += 1
        out = [(da[i] + db[i]) % 10 for i in range(8)] + [0]  # no carry anywhere, carry out 0
        print("^%08d+%08d=\t%s" % (a, b, "".join(map(str, reversed(out)))))


def patch(tfrun, weights, hook, spec, source, prompts):
    import torch
    import tfw_torch
    m = tfw_torch.load(weights)
    full = source + m.generate(source)
    _, cache = m.run_with_cache(full[:-1] if len(full) > len(source) else full)

    # HOOK:REG patches the register's columns of a residual stream only.
    hook, _, reg = hook.partition(":")
    cols = slice(None)
    if reg:
        r = m.registers[reg]
        cols = slice(r["offset"], r["offset"] + r["size"])

    def fn(x, hook):
        src = cache[hook.name]
        p = min(x.shape[1], src.shape[1])
        x = x.clone()
        x[:, :p, cols] = src[:, :p, cols]
        return x

    bad = 0
    with torch.no_grad():
        for prompt in prompts:
            py = prompt + m.generate(prompt, fwd_hooks=[(hook, fn)])
            c = subprocess.run([tfrun, weights, "--ablate", spec, "--patch-from", source, "--", prompt],
                               capture_output=True, text=True).stdout.rstrip("\n")
            if c != py:
                print("FAIL %s: tfrun %r, run_with_hooks %r" % (prompt, c, py))
                bad += 1
    print("%d prompts, %d differ" % (len(prompts), bad))
    return 1 if bad or not prompts else 0


def main():
    cmd = sys.argv[1]
    if cmd == "nocarry":
        nocarry(int(sys.argv[2]))
    elif cmd == "decimal":
        decimal(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(patch(*sys.argv[2:7], sys.argv[7:]))


if __name__ == "__main__":
    main()
