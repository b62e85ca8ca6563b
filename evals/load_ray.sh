#!/usr/bin/env bash
# One run, three servers in turn on the same machine: plain `agentkit serve` (one process), and `agentkit serve --ray`
# with 1 and with 2 replicas (a local Ray; each replica one engine, 1 torch thread, --max-batch 32); the same
# evals/load_server.py load (AR, JSON workload, c = 1, 8, 32, 32 requests per level) against each; then a 40-question
# BFCL eval (ar-constrained, --limit 20 per file) locally and with --ray local --workers 2.
# CONFIGS (default "plain ray1 ray2") and EVALS (default "local ray2"; "" for none) choose what runs, in that order.
#
#   bash evals/load_ray.sh out/load_ray        # writes load_ray.txt (+ .json per server, eval JSONs)
set -u
OUT=${1:-out/load_ray}
PORT=${PORT:-8791}
LEVELS=${LEVELS:-1,8,32}
mkdir -p "$(dirname "$OUT")"
TXT="$OUT.txt"
: > "$TXT"
wait_up() {  # up to 300 s for GET /health
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return 0; sleep 1; done; return 1
}
serve_and_load() {  # NAME ARGS...
  local name=$1; shift
  agentkit serve --port "$PORT" --threads 1 --max-batch 32 --log-level warning "$@" > "$OUT.$name.server.log" 2>&1 &
  local pid=$!
  if wait_up; then
    echo "## $name: agentkit serve --threads 1 --max-batch 32 $*" >> "$TXT"
    python evals/load_server.py --url "http://127.0.0.1:$PORT" --modes ar --concurrency "$LEVELS" \
      --requests-per-level 32 --max-seconds 900 --json "$OUT.$name.json" >> "$TXT" 2>> "$OUT.$name.load.log"
  else
    echo "## $name: server did not come up (see $OUT.$name.server.log)" >> "$TXT"
  fi
  kill -TERM "$pid"; wait "$pid"
  sleep 3
}
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$TXT"
for c in ${CONFIGS-plain ray1 ray2}; do  # CONFIGS="ray2 ray1 plain" for a second pass in reverse order
  echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$TXT"
  case $c in
    plain) serve_and_load plain ;;
    ray1) serve_and_load ray1 --ray --replicas 1 ;;
    ray2) serve_and_load ray2 --ray --replicas 2 ;;
  esac
done
D=/work/shared/data/bfcl
for how in ${EVALS-local ray2}; do
  extra=(); [ "$how" = ray2 ] && extra=(--ray local --workers 2)
  t0=$(date +%s.%N)
  agentkit eval bfcl --data "$D" --limit 20 --modes ar-constrained --threads 1 --out "$OUT.eval_$how.json" \
    "${extra[@]}" > "$OUT.eval_$how.log" 2>&1
  t1=$(date +%s.%N)
  echo "## eval $how: agentkit eval bfcl --data $D --limit 20 --modes ar-constrained --threads 1 ${extra[*]}" >> "$TXT"
  echo "wall (command, model loads and Ray start included): $(echo "$t1 - $t0" | bc) s; $(grep -m1 'items ·' "$OUT.eval_$how.log")" >> "$TXT"
  grep -A3 '^| mode' "$OUT.eval_$how.log" >> "$TXT"
done
echo "# done $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$TXT"
