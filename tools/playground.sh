#!/usr/bin/env bash
# tools/playground.sh OUTDIR: builds the playground, tfc and tfrun in the
# browser, as static files in OUTDIR (docs/playground.md).
#
#   tools/playground.sh [--work DIR] OUTDIR
#
# Needs Debian's emscripten (emcc), flex and bison. The compiler and runtime
# are compiled to one WebAssembly module (tfc.js + tfc.wasm) with their
# command-line tools inside (web/tf_web.c says how the page calls them);
# web/cblas.c stands in for OpenBLAS. cJSON has no WebAssembly build in
# Debian: its source is taken from Debian's own source package, the version
# of the installed libcjson-dev (the same cJSON as tfc's, so the same .tfw
# bytes), with `apt-get source` on a private source list under the work
# directory (the machine's apt configuration is not touched); set
# TF_CJSON_SRC to a directory holding cJSON.c and cJSON.h to use those
# instead. The work directory (default build/playground) keeps the sources
# fetched and the objects between builds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/build/playground"
out=""
while [ $# -gt 0 ]; do
    case "$1" in
    --work) work="$2"; shift 2 ;;
    --work=*) work="${1#--work=}"; shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "playground.sh: unknown option '$1'" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "playground.sh: more than one OUTDIR" >&2; exit 2; }; out="$1"; shift ;;
    esac
done
[ -n "$out" ] || { echo "usage: tools/playground.sh [--work DIR] OUTDIR" >&2; exit 2; }
for tool in emcc flex bison; do
    command -v $tool >/dev/null || { echo "playground.sh: $tool not found (apt-get install emscripten flex bison)" >&2; exit 2; }
done
mkdir -p "$work" "$out"
work=$(cd "$work" && pwd)

# --- cJSON: Debian's source of the installed version ------------------------
cjson="${TF_CJSON_SRC:-}"
if [ -z "$cjson" ]; then
    version=$(dpkg-query -W -f='${source:Version}' libcjson-dev 2>/dev/null || true)
    [ -n "$version" ] || { echo "playground.sh: libcjson-dev is not installed (apt-get install libcjson-dev), or set TF_CJSON_SRC" >&2; exit 2; }
    cjson="$work/cjson-$version"
    if [ ! -f "$cjson/cJSON.c" ]; then
        apt="$work/apt"
        mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/src"
        # The machine's own Debian mirror (its apt sources), as deb-src entries.
        mkdir -p "$apt/sources.list.d"
        : >"$apt/sources.list"
        [ -f /etc/apt/sources.list ] &&
            sed -n 's/^deb \(.*\/debian[^ ]* .*\)$/deb-src \1/p' /etc/apt/sources.list >"$apt/sources.list"
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] && grep -q '^URIs:.*/debian' "$f" || continue
            sed 's/^Types:.*/Types: deb-src/' "$f" >"$apt/sources.list.d/$(basename "$f")"
        done
        aptopts=(-o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts="$apt/sources.list.d"
                 -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Debug::NoLocking=1
                 -o APT::Sandbox::User=root -qq)
        echo "playground.sh: fetching Debian's cjson $version source (apt-get source)" >&2
        apt-get "${aptopts[@]}" update >/dev/null
        (cd "$apt/src" && apt-get "${aptopts[@]}" source "cjson=$version" >/dev/null)
        rm -rf "$cjson" && mv "$apt/src/cjson-${version%%-*}" "$cjson"
    fi
fi
[ -f "$cjson/cJSON.c" ] && [ -f "$cjson/cJSON.h" ] || { echo "playground.sh: no cJSON.c and cJSON.h in $cjson" >&2; exit 2; }

# --- the grammar's scanner and parser ---------------------------------------
gen="$work/gen"
mkdir -p "$gen"
bison -o "$gen/parser.tab.c" --defines="$gen/parser.tab.h" "$root/grammar/parser.y"
flex -o "$gen/lexer.yy.c" --header-file="$gen/lexer.yy.h" "$root/grammar/lexer.l"

# --- one WebAssembly module: the libraries and the three tools --------------
# The sources of tf_grammar, tf_model, tf_engine, tf_inspect, tf_train,
# tf_dist (one process), tf_cli, tf_compiler and tf_prove, as in
# CMakeLists.txt (not the tools' own mains: tfc.c is renamed below, and the
# page has no tfprove).
libs=$(cd "$root" && ls grammar/*.c runtime/model/*.c runtime/engine/*.c runtime/inspect/*.c \
    runtime/train/*.c runtime/dist/*.c runtime/tools/cli.c compiler/*.c |
    grep -v -e '^compiler/tfc\.c$' -e '^compiler/tfprove\.c$')
version=$(sed -n 's/^project(tfc VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
cflags=(-std=c11 -O3 -msimd128 -ffp-contract=off -Wall -Wextra -Wno-unused-command-line-argument
        "-DTF_VERSION=\"$version\"" -I"$root/web" -I"$gen" -I"$cjson"
        -I"$root/grammar" -I"$root/compiler" -I"$root/runtime/model" -I"$root/runtime/engine"
        -I"$root/runtime/inspect" -I"$root/runtime/train" -I"$root/runtime/dist" -I"$root/runtime/tools")
obj="$work/obj"
mkdir -p "$obj"
# A generated makefile: the objects compile in parallel and only when their
# sources or headers (-MMD; -MP so a deleted header is no error) or the makefile itself (its flags) changed; it is
# replaced only when its text changes. (Paths with spaces are not supported.)
jobs=$(nproc 2>/dev/null || echo 2)
# The objects are compiled by emcc's clang with the flags emcc would give it
# (emcc --cflags): emcc itself, a Python program, costs about a second of CPU
# per call, most of the build's time. emcc links them below.
wasmcc="$(em-config LLVM_ROOT)/clang"
read -r -a emflags <<<"$(emcc --cflags)"
objs=()
{
    printf 'WASMCC := %q\n' "$wasmcc"
    printf 'CFLAGS :='
    printf ' %q' "${emflags[@]}" "${cflags[@]}"
    printf '\nOBJS :=\n'
    rule() { # rule SOURCE OBJECT [FLAGS...]
        local src=$1 o=$2
        shift 2
        objs+=("$o")
        printf 'OBJS += %s\n%s: %s %s\n\t$(WASMCC) $(CFLAGS)' "$o" "$o" "$src" "$work/objects.mk"
        printf ' %q' "$@"
        printf ' -MMD -MP -c $< -o $@\n'
    }
    for f in $libs; do rule "$root/$f" "$obj/$(echo "$f" | tr / _).o"; done
    rule "$gen/parser.tab.c" "$obj/parser.tab.o"
    rule "$gen/lexer.yy.c" "$obj/lexer.yy.o"
    rule "$cjson/cJSON.c" "$obj/cJSON.o" -std=c89 -Wno-all -Wno-extra
    rule "$root/web/cblas.c" "$obj/cblas.o"
    rule "$root/web/tf_web.c" "$obj/tf_web.o" -std=gnu11 # EM_ASM needs GNU C
    rule "$root/compiler/tfc.c" "$obj/tfc.o" -Dmain=tfc_main
    rule "$root/runtime/tools/tfrun.c" "$obj/tfrun.o" -Dmain=tfrun_main
    rule "$root/runtime/tools/tfinfo.c" "$obj/tfinfo.o" -Dmain=tfinfo_main
    printf 'all: $(OBJS)\n-include $(OBJS:.o=.d)\n'
} >"$work/objects.mk.new"
if cmp -s "$work/objects.mk.new" "$work/objects.mk"; then rm "$work/objects.mk.new"; else mv "$work/objects.mk.new" "$work/objects.mk"; fi
make -s -j"$jobs" -f "$work/objects.mk" all
# emcc's JavaScript optimizer needs acorn, which Debian keeps in /usr/share/nodejs.
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs"
emcc -O3 -msimd128 "${objs[@]}" -o "$out/tfc.js" \
    -sMODULARIZE=1 -sEXPORT_NAME=createTfc -sENVIRONMENT=web,worker \
    -sALLOW_MEMORY_GROWTH=1 -sFORCE_FILESYSTEM=1 -sEXIT_RUNTIME=0 \
    -sEXPORTED_FUNCTIONS=_web_tool,_web_check,_web_check_stat \
    -sEXPORTED_RUNTIME_METHODS=FS,ccall

# --- the page and the library's programs ------------------------------------
cp "$root"/web/index.html "$root"/web/*.js "$root"/web/*.css "$out/"
mkdir -p "$out/programs"
cp "$root"/programs/*.tfp "$out/programs/"
(cd "$root/programs" && ls *.tfp | sed 's/\.tfp$//') >"$out/programs/index.txt"
echo "playground.sh: $(du -sb "$out" | cut -f1) bytes in $out" >&2
