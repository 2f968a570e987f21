#!/usr/bin/env bash
# tests/layering.sh BUILD_DIR: the runtime's libraries depend one way only
# (docs/architecture.md). Every symbol of ours that a library uses but does
# not define must come from a library below it; one of a library above it, or
# of the compiler, fails the test. The system's (libc, BLAS, cJSON, MPI) are
# not ours and are not looked at.
set -u
. "$(dirname "$0")/lib.sh"
build=$1
declare -A deps=( # library: the libraries it may use
  [tf_model]=""
  [tf_engine]="tf_model"
  [tf_inspect]="tf_engine tf_model"
  [tf_train]="tf_engine tf_model"
  [tf_dist]="tf_train tf_engine tf_model"
  [tf_convert]="tf_model"
  [tf_cli]="tf_model"
  [tf_grammar]=""
  [tf_compiler]="tf_grammar tf_model"
  [tf_prove]="tf_compiler tf_grammar tf_model"
  [tf_prove_search]="tf_prove tf_compiler tf_grammar tf_engine tf_model"
)
for l in "${!deps[@]}"; do
  nm -g --defined-only "$build/lib$l.a" | awk 'NF==3 {print $3}' | sort -u >"$tmp/$l.def"
  nm -g --undefined-only "$build/lib$l.a" | awk '{print $NF}' | sort -u >"$tmp/$l.use"
done
cat "$tmp"/*.def | sort -u >"$tmp/ours"
for l in "${!deps[@]}"; do
  allowed=("$tmp/$l.def")
  for d in ${deps[$l]}; do allowed+=("$tmp/$d.def"); done
  sort -u "${allowed[@]}" >"$tmp/allowed"
  comm -12 "$tmp/$l.use" "$tmp/ours" | comm -23 - "$tmp/allowed" >"$tmp/bad"
  while read -r s; do
    echo "$l uses $s of $(grep -lx "$s" "$tmp"/*.def | xargs -n1 basename | sed 's/\.def$//' | tr '\n' ' ')"
  done <"$tmp/bad"
  check "$l uses only: ${deps[$l]:-nothing of ours}" "$([ -s "$tmp/bad" ] && echo 1 || echo 0)"
  [ -s "$tmp/$l.def" ]; check "$l defines symbols (it was built)" $?
done
# Inside tf_inspect: report.c draws what inspect.c captured; inspect.c
# never calls the report (session.c runs both).
nm --undefined-only "$build/libtf_inspect.a" 2>/dev/null |
    awk '/^inspect\.c\.o:/ {in_=1; next} /^[^ ].*:$/ {in_=0} in_ {print $NF}' >"$tmp/inspect.use"
[ -s "$tmp/inspect.use" ] && ! grep -q '^report_' "$tmp/inspect.use"
check "inspect.c uses nothing of report.c" $?
# The validator (compiler/prove.h) shares the front end only: no symbol of
# the compiler's plans, lowering, cubes, fusion, scheduling or the general
# ops' planning (select.c, map.c) may be referenced by its objects.
nm -g --defined-only "$build/libtf_compiler.a" |
    awk '/^[a-z_]+\.c\.o:$/ {f=$1; next} NF==3 && f ~ /^(plans|lower|lower_general|cubes|fuse|schedule|tensors|select|map|compile|stage_dump)\.c\.o:$/ {print $3}' |
    sort -u >"$tmp/backend"
[ -s "$tmp/backend" ]; check "the compiler's back end defines symbols (it was built)" $?
for l in tf_prove tf_prove_search; do # the validator and its counterexample search
  comm -12 "$tmp/$l.use" "$tmp/backend" >"$tmp/prove_bad"
  while read -r s; do echo "$l uses $s of the compiler's back end"; done <"$tmp/prove_bad"
  [ ! -s "$tmp/prove_bad" ]; check "$l references nothing of plans, lowering, cubes, fusion, scheduling, select.c, map.c" $?
done
# The tools link what they need and no more (the link lines CMake wrote).
links() { cat "$build/CMakeFiles/$1.dir/link.txt"; }
for tool in tftrain tfinfo tfrun tfconvert; do
  ! links "$tool" | grep -q 'libtf_compiler'; check "$tool does not link the compiler" $?
done
! links tfinfo | grep -q 'libtf_engine'; check "tfinfo does not link the engine" $?
! links tfconvert | grep -q 'libtf_engine'; check "tfconvert does not link the engine" $?
finish
