#!/usr/bin/env bash
# bench/prove_mutations.sh [BUILD_DIR] [OPTIONS...]: the validator's long
# mutation run (issue 22): 100 single-weight mutations of every library
# program tfprove proves (tests/prove_mutations.py --full; OPTIONS are its,
# e.g. --programs a,b or --mutations N), at nice 19. Prints one line per
# program and the totals; bench/prove-mutations.md keeps the last run's.
set -u
build=${1:-build}
[ $# -gt 0 ] && shift
cd "$(dirname "$0")/.."
exec nice -n 19 "${PYTHON:-/usr/bin/python3}" tests/prove_mutations.py "$build" --full "$@"
