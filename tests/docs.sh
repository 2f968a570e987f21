#!/usr/bin/env bash
# docs.sh BUILD_DIR [FILE.md ...]: every command block of README.md, docs/*.md
# and bench/README.md runs in a scratch folder, and what a block shows as
# output is compared with what its commands print. The conventions (what
# counts as shown output, "..." wildcards, the skip marker
# <!-- docs.sh: skip (reason) -->) are in tests/docs.py.
set -u
PY=${PYTHON:-python3}
exec "$PY" "$(dirname "$0")/docs.py" "$@"
