# serve.sh: serve_static DIR LOG starts python3's http.server on a free port of
# 127.0.0.1 for DIR, logging to LOG, and sets `server` (its pid, for the
# caller's exit trap to kill) and `port`. Returns 1 when no port shows within
# 10 s. Sourced by tests/playground.sh and bench/playground.sh.
serve_static() {
    python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$1" >"$2" 2>&1 &
    server=$!
    port=""
    for _ in $(seq 100); do
        port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$2" | head -1)
        [ -n "$port" ] && return 0
        sleep 0.1
    done
    return 1
}
