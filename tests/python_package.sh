#!/usr/bin/env bash
# python_package.sh TFC TFRUN: the Python module as a package (tools/python,
# docs/python.md): pip installs it into a fresh virtual environment with no
# network (setuptools and torch from Debian), the installed tfw-torch prints
# what tfrun prints, tools/tfw_torch.py is the same module, and the patching
# experiment of docs/python.md runs as written with the installed module.
set -u
. "$(dirname "$0")/lib.sh"
TFC=$1 TFRUN=$2
need_torch
"$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw" 2>/dev/null
# A copy: building writes build/ and *.egg-info next to pyproject.toml.
cp -r "$SRC/tools/python" "$tmp/pkg"
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
check "python3 -m venv (Debian's python3-venv)" $?
"$tmp/venv/bin/pip" install --no-build-isolation --no-index "$tmp/pkg" >"$tmp/pip.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || cat "$tmp/pip.txt"
check "pip install --no-build-isolation --no-index tools/python" $rc
[ "$("$tmp/venv/bin/tfw-torch" "$tmp/adder.tfw" "0999+0111=")" = "$("$TFRUN" "$tmp/adder.tfw" "0999+0111=")" ]
check "the installed tfw-torch prints what tfrun prints" $?
"$tmp/venv/bin/python" -c "import tfw_torch, sys; assert tfw_torch.__file__.startswith(sys.prefix), tfw_torch.__file__"
check "the venv imports the installed module" $?
"$PY" -c "
import sys; sys.path.insert(0, sys.argv[1] + '/tools'); import tfw_torch
assert tfw_torch.__file__.endswith('tools/python/tfw_torch.py'), tfw_torch.__file__
assert hasattr(tfw_torch.Model, 'run_with_hooks')" "$SRC"
check "tools/tfw_torch.py loads the package's module" $?
# docs/python.md's patching block, run in a folder holding adder.tfw.
awk '/^### Hooks and patching/ {on=1} on && /^```python/ {code=1; next} code && /^```/ {exit} code {print}' \
    "$SRC/docs/python.md" >"$tmp/patch.py"
out=$(cd "$tmp" && "$tmp/venv/bin/python" patch.py)
rc=$?
[ $rc -eq 0 ] && [ "$out" = "0100" ] && grep -q run_with_cache "$tmp/patch.py"
check "docs/python.md's patching experiment prints 0100 ($out)" $?
[ "$("$TFRUN" "$tmp/adder.tfw" --ablate layers.8 --patch-from "0001+0009=" "0001+0008=")" = "0001+0008=0100" ]
check "docs/python.md's tfrun line prints 0001+0008=0100" $?
finish
