#!/usr/bin/env bash
# funclen.sh [LIMIT]: the compiler's functions stay short. Lists the ten
# longest functions of compiler/*.c (lines from the signature's first line to
# the closing brace at column 0) and fails when one is longer than LIMIT
# (default 120; issue 21: split a long analysis by the form it builds).
set -uo pipefail
LIMIT=${1:-120}
ROOT=${TF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
list=$(awk '
# A signature starts at column 0 with a name and "(", not a declaration
# (";") or an initializer ("="); its body opens at the first line ending
# in ") {" and closes at the next "}" at column 0.
/^[A-Za-z_][^=;]*\(/ && !infn { sig = FNR; name = $0; sub(/\(.*/, "", name); n = split(name, a, /[ *]+/); name = a[n] }
/\)[ ]*\{[ ]*$/ && !infn && sig { infn = 1; start = sig; next }
/^\}/ { if (infn) print FNR - start + 1, FILENAME ":" start, name; infn = 0; sig = 0 }
/;[ ]*$/ && !infn { sig = 0 }
' "$ROOT"/compiler/*.c | sort -rn)
n=$(printf '%s\n' "$list" | grep -c .)
printf '%s\n' "$list" | head -10 | sed "s|$ROOT/||"
longest=$(printf '%s\n' "$list" | head -1 | awk '{print $1}')
echo "$n functions in compiler/; the longest has $longest lines (limit $LIMIT)"
[ "$n" -gt 100 ] && [ "$longest" -le "$LIMIT" ]
