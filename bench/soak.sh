#!/usr/bin/env bash
# Reload soak (issue 12): dnsperf sends steered queries with an ECS option
# on every one at a fixed rate while steer gets SIGHUP every second,
# alternately after a zone change (a new serial) and after a change of one
# record's split weights. Reports lost queries, latency percentiles, the
# reload durations, whether every reload was applied in order, and how
# soon after the last one its zone serial was served.
#
#   bench/soak.sh [--qps 20000] [--seconds 60]
#
# Traffic goes to 127.0.0.1 only; steer is stopped when it exits. Needs
# dnsperf (apt-get install dnsperf) and dig.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
QPS=20000
SECONDS_=60
PORT=${STEER_PORT:-5321}
while [ $# -gt 0 ]; do
	case "$1" in
	--qps) QPS=$2; shift 2 ;;
	--seconds) SECONDS_=$2; shift 2 ;;
	*) echo "usage: $0 [--qps N] [--seconds N]" >&2; exit 2 ;;
	esac
done
for c in dnsperf dig go; do command -v "$c" >/dev/null || { echo "soak.sh: $c not found" >&2; exit 1; }; done

WORK=$(mktemp -d)
OUT="$REPO/bench/results/soak-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
log() { echo "== $*" >&2; }

log "building steer and the bench tools"
(cd "$REPO" && go build -o "$WORK/" ./cmd/steer ./bench/geoconv ./bench/querygen ./bench/report)
"$WORK/geoconv" -in "$REPO/internal/geo/embedded/iptoasn-country.mmdb.gz" -out "$WORK/geo.mmdb" -flat-out "$WORK/flat.mmdb" 2>/dev/null
"$WORK/querygen" -db "$WORK/flat.mmdb" -out "$WORK/q" -n 100000 2>/dev/null

zone() { # SERIAL
	cat <<EOF
\$ORIGIN example.com.
\$TTL 3600
@       300 IN SOA  ns1.example.com. hostmaster.example.com. $1 7200 3600 1209600 300
        IN NS   ns1
ns1     IN A    192.0.2.53
static  IN A    192.0.2.80
EOF
}
config() { # WEIGHT of the canary
	cat <<EOF
listen: ["127.0.0.1:$PORT"]
zones: [{ origin: example.com, file: example.com.zone }]
geo: { databases: [$WORK/geo.mmdb] }
records:
  - name: shop.example.com
    ttl: 60
    pools:
      ap-south:   { address: 203.0.113.10 }
      eu-central: { address: 198.51.100.20 }
      us-east:    { address: 192.0.2.30 }
      us-canary:  { address: 192.0.2.31 }
    rules:
      - match: { country: [IN, LK, BD, NP] }
        pool: ap-south
      - match: { continent: EU }
        pool: eu-central
      - default:
          split: [{ pool: us-east, weight: 95 }, { pool: us-canary, weight: $1 }]
          sticky: client_subnet
EOF
}
zone 1 >"$WORK/example.com.zone"
config 5 >"$WORK/steer.yaml"
"$WORK/steer" serve --config "$WORK/steer.yaml" --pid-file "$WORK/steer.pid" >"$OUT/steer.log" 2>&1 &
SPID=$!
for _ in $(seq 100); do grep -q msg=serving "$OUT/steer.log" && break; sleep 0.1; done
grep -q msg=serving "$OUT/steer.log" || { cat "$OUT/steer.log" >&2; exit 1; }

log "dnsperf at $QPS q/s for $SECONDS_ s, SIGHUP every second"
dnsperf -s 127.0.0.1 -p "$PORT" -B -d "$WORK/q/steered.bin" -l "$SECONDS_" -Q "$QPS" -c 8 -q 512 -t 2 -v >"$WORK/dnsperf.out" 2>&1 &
DP=$!
serial=1
for ((i = 1; i < SECONDS_; i++)); do
	sleep 1
	if ((i % 2)); then
		serial=$((serial + 1))
		zone "$serial" >"$WORK/example.com.zone.tmp" && mv "$WORK/example.com.zone.tmp" "$WORK/example.com.zone"
	else
		config $((1 + i % 9)) >"$WORK/steer.yaml.tmp" && mv "$WORK/steer.yaml.tmp" "$WORK/steer.yaml"
	fi
	kill -HUP "$SPID"
done
last_sent=$(date +%s.%N)
served=""
for _ in $(seq 200); do
	got=$(dig @127.0.0.1 -p "$PORT" example.com SOA +short +time=1 +tries=1 | awk '{print $3}')
	if [ "$got" = "$serial" ]; then served=$(awk -v a="$(date +%s.%N)" -v b="$last_sent" 'BEGIN { printf "%.0f ms", (a - b) * 1000 }'); break; fi
	sleep 0.01
done
wait "$DP" || true
"$WORK/report" lat <"$WORK/dnsperf.out" >"$OUT/latency.txt"
grep -vE '^> ' "$WORK/dnsperf.out" | grep -E 'Queries (sent|completed|lost)|Queries per second|Average Latency' >"$OUT/dnsperf.txt" || true
reloads=$(grep -c 'msg=reloaded' "$OUT/steer.log" || true)
rejected=$(grep -c 'reload rejected' "$OUT/steer.log" || true)
inorder=yes
n=0
for s in $(grep -o 'msg=reloaded trigger=[^ ]* seq=[0-9]*' "$OUT/steer.log" | sed 's/.*seq=//'); do
	n=$((n + 1))
	[ "$s" = "$n" ] || inorder=no
done
took=$(grep 'msg=reloaded' "$OUT/steer.log" | sed -n 's/.* took=\([^ ]*\).*/\1/p' | sort -V | awk '{ a[NR] = $1 } END { if (NR) printf "median %s, max %s", a[int((NR + 1) / 2)], a[NR] }')
{
	echo "reload soak: $QPS q/s for $SECONDS_ s with ECS, SIGHUP every second ($((SECONDS_ - 1)) sent)"
	cat "$OUT/dnsperf.txt"
	grep "^LATENCY" "$OUT/latency.txt" || true
	echo "reloads applied: $reloads (rejected: $rejected), sequence in order: $inorder"
	echo "reload durations: $took"
	echo "last zone serial ($serial) served ${served:-NOT within 2 s} after the last SIGHUP"
} | tee "$OUT/summary.txt"
echo "results: $OUT" >&2
