#!/usr/bin/env python3
"""tools/tfw_torch.py: the Python module tools/python/tfw_torch.py (the
package `pip install tools/python` installs; docs/python.md), runnable from
the source tree as before:

    /usr/bin/python3 tools/tfw_torch.py WEIGHTS.tfw [-n N] PROMPT
    sys.path.insert(0, "tools"); import tfw_torch

It loads the package's module under the name tfw_torch, so both ways give
the one module."""
import importlib.util
import os
import sys

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python", "tfw_torch.py")
_spec = importlib.util.spec_from_file_location("tfw_torch", _path)
_module = importlib.util.module_from_spec(_spec)
sys.modules["tfw_torch"] = _module
_spec.loader.exec_module(_module)

if __name__ == "__main__":
    sys.exit(_module.main())
