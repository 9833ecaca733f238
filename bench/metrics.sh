#!/usr/bin/env bash
# Metrics harness (issue 24): steer with many steered names over a few
# named policies (bench/scale.sh's configuration: every name has three
# pools and its policy three rules), and what one /metrics scrape costs:
#   - the number of series the scrape holds (all, and steer_* alone),
#   - how long each scrape takes (curl's total time, over --scrapes),
#   - the node's RSS before the first scrape (steady, 3 s after the first
#     answer), its peak while scraping (sampled every 5 ms), and 2 s after
#     the last scrape.
#
#   bench/metrics.sh [--names 10000] [--policies 5] [--scrapes 10] [--per-record GLOB] [--steer BINARY]
#
# --steer runs a steer binary built elsewhere (an older commit, to compare
# with); by default the working tree is built. --per-record adds
# metrics: { per_record: [GLOB] } to the configuration.
#
# Traffic goes to 127.0.0.1 only; the server is stopped when it exits.
# Prints a markdown table; with --check it exits 1 when the series are
# 2,000 or more, a scrape takes 100 ms or more, or RSS during or after a
# scrape is more than 10 % above the RSS before it.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
. "$REPO/bench/lib/scale-records.sh"
. "$REPO/bench/lib/rss.sh"
NAMES=10000
POLICIES=5
SCRAPES=10
PER_RECORD=""
STEER=""
CHECK=0
PORT=${STEER_PORT:-5321}
API=${STEER_API:-5322}
while [ $# -gt 0 ]; do
	case "$1" in
	--names) NAMES=$2; shift 2 ;;
	--policies) POLICIES=$2; shift 2 ;;
	--scrapes) SCRAPES=$2; shift 2 ;;
	--per-record) PER_RECORD=$2; shift 2 ;;
	--steer) STEER=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
	--check) CHECK=1; shift ;;
	*) echo "usage: $0 [--names N] [--policies N] [--scrapes N] [--per-record GLOB] [--steer BINARY] [--check]" >&2; exit 2 ;;
	esac
done

WORK=$(mktemp -d)
PID=""
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "== $*" >&2; }
die() { echo "metrics.sh: $*" >&2; exit 1; }
for c in curl dig awk; do command -v "$c" >/dev/null || die "$c not found"; done

if [ -z "$STEER" ]; then
	log "building steer"
	(cd "$REPO" && go build -o "$WORK/steer" ./cmd/steer)
	STEER=$WORK/steer
fi

{
	echo "listen: [\"127.0.0.1:$PORT\"]"
	echo "api: { listen: \"127.0.0.1:$API\" }"
	echo "zones: [{ origin: example.com, file: example.com.zone }]"
	[ -n "$PER_RECORD" ] && echo "metrics: { per_record: [\"$PER_RECORD\"] }"
	scale_policies_and_records "$NAMES" "$POLICIES"
} >"$WORK/steer.yaml"
cat >"$WORK/example.com.zone" <<'EOF'
$ORIGIN example.com.
$TTL 3600
@       300 IN SOA  ns1.example.com. hostmaster.example.com. 2026113001 7200 3600 1209600 300
        IN NS   ns1
ns1     IN A    192.0.2.53
EOF

mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

log "starting steer with $NAMES names over $POLICIES policies"
"$STEER" serve --config "$WORK/steer.yaml" >"$WORK/steer.log" 2>&1 &
PID=$!
last=s$((NAMES - 1)).example.com
for ((t = 0; t < 1200; t++)); do
	[ "$(dig @127.0.0.1 -p "$PORT" "$last" A +norec +subnet=49.36.0.0/24 +short +time=1 +tries=1 2>/dev/null)" = "203.0.113.$(((NAMES - 1) % 250 + 1))" ] && break
	kill -0 "$PID" 2>/dev/null || { cat "$WORK/steer.log" >&2; die "steer exited"; }
	sleep 0.05
done
[ "$t" -lt 1200 ] || die "no answer for $last within 60 s"
sleep 3
before=$(rss_kib "$PID")

# Sample RSS every 5 ms while scraping; keep the peak.
echo 0 >"$WORK/peak"
rss_peak "$PID" "$WORK/peak" "$WORK/stop" 0.005 &
sampler=$!
: >"$WORK/times"
for ((s = 0; s < SCRAPES; s++)); do
	curl -s -o "$WORK/scrape" -w '%{time_total}\n' "http://127.0.0.1:$API/metrics" >>"$WORK/times"
done
touch "$WORK/stop"
wait "$sampler" 2>/dev/null || true
sleep 2
after=$(rss_kib "$PID")
peak=$(cat "$WORK/peak")
[ "$peak" -gt 0 ] || peak=$before

[ -n "${METRICS_TIMES:-}" ] && tr "\n" " " <"$WORK/times" >&2
series=$(grep -cv '^#' "$WORK/scrape" || true)
steer_series=$(grep -c '^steer_' "$WORK/scrape" || true)
bytes=$(wc -c <"$WORK/scrape")
read -r tmin tmed tmax < <(sort -n "$WORK/times" | awk '{ t[NR] = $1 * 1000 } END { printf "%.1f %.1f %.1f\n", t[1], t[int((NR + 1) / 2)], t[NR] }')
during_pct=$(awk -v a="$peak" -v b="$before" 'BEGIN { printf "%+.1f", (a - b) * 100 / b }')
after_pct=$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%+.1f", (a - b) * 100 / b }')

echo "| names | policies | per_record | series | steer_* series | scrape bytes | scrape ms (min / median / max of $SCRAPES) | RSS before | RSS peak during | RSS 2 s after |"
echo "|--:|--:|---|--:|--:|--:|---|--:|--:|--:|"
echo "| $NAMES | $POLICIES | ${PER_RECORD:-–} | $series | $steer_series | $bytes | $tmin / $tmed / $tmax | $(mib "$before") MiB | $(mib "$peak") MiB ($during_pct %) | $(mib "$after") MiB ($after_pct %) |"

if [ "$CHECK" = 1 ]; then
	fail=0
	[ "$series" -lt 2000 ] || { echo "FAIL: $series series, want fewer than 2000" >&2; fail=1; }
	awk -v t="$tmax" 'BEGIN { exit !(t < 100) }' || { echo "FAIL: slowest scrape $tmax ms, want under 100" >&2; fail=1; }
	awk -v a="$peak" -v b="$before" 'BEGIN { exit !(a <= b * 1.1) }' || { echo "FAIL: RSS during a scrape $during_pct %" >&2; fail=1; }
	awk -v a="$after" -v b="$before" 'BEGIN { exit !(a <= b * 1.1) }' || { echo "FAIL: RSS after a scrape $after_pct %" >&2; fail=1; }
	exit "$fail"
fi
