#!/usr/bin/env bash
# Side-by-side load harness: steer against gdnsd, Knot DNS and NSD on the
# same Larkbook scenario and the same geo data, on loopback only.
# See bench/README.md. Run as root from anywhere inside the repository:
#
#   bench/run.sh            # full run (3 rounds, both modes, ~7-9 minutes)
#   bench/run.sh --quick    # 1 round, short passes (~2 minutes)
#
# It installs its tools with apt, builds steer and the bench tools, starts
# every server in the foreground on 127.0.0.1 with configs in a temp dir,
# checks their answers, runs dnsperf against them interleaved, prints a
# markdown table and saves everything under bench/results/. It stops all
# it started on exit.
set -euo pipefail

# ---- settings (flags override the environment) -----------------------------
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-6}          # seconds per max-throughput pass
LAT_DURATION=${LAT_DURATION:-3}  # seconds per fixed-rate latency pass
LAT_QPS=${LAT_QPS:-20000}        # rate of the latency pass
WARMUP=${WARMUP:-1}              # seconds of unrecorded load per server and file
MODES=${MODES:-"pinned unpinned"}
SERVERS=${SERVERS:-"steer gdnsd knot nsd"}
QUERIES=${QUERIES:-200000}       # distinct client /24s in the steered file
SAMPLE=${SAMPLE:-200}            # subnets checked per server before load
BIND=${BIND:-127.0.0.1}
STEER_PORT=${STEER_PORT:-5301}
STEER_GUARD_PORT=${STEER_GUARD_PORT:-5305} # steer-guard: --servers "steer steer-guard"
STEER_BASE_PORT=${STEER_BASE_PORT:-5306}   # steer-base: --servers "steer steer-base gdnsd"
BASE_REF=${BASE_REF:-main}                 # the commit steer-base is built from
GDNSD_PORT=${GDNSD_PORT:-5302}
KNOT_PORT=${KNOT_PORT:-5303}
NSD_PORT=${NSD_PORT:-5304}
SERVER_CPU=${SERVER_CPU:-0}      # pinned mode: the server's core
CLIENT_CPU=${CLIENT_CPU:-1}      # pinned mode: dnsperf's core
DNSPERF_ARGS=${DNSPERF_ARGS:-"-c 8 -q 256 -t 1"}
INSTALL=${INSTALL:-1}
KEEP=${KEEP:-0}
LABEL=${LABEL:-}

usage() {
	cat <<EOF
usage: bench/run.sh [--quick] [--rounds N] [--duration S] [--lat-duration S]
                    [--lat-qps N] [--modes "pinned unpinned"]
                    [--servers "steer gdnsd knot nsd"] [--queries N]
                    [--base-ref REF] [--no-install] [--keep] [--label NAME]
Environment: STEER_PORT GDNSD_PORT KNOT_PORT NSD_PORT STEER_GUARD_PORT
STEER_BASE_PORT BIND SERVER_CPU
CLIENT_CPU DNSPERF_ARGS WARMUP SAMPLE and the upper-case forms of the flags.
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) ROUNDS=1 DURATION=3 LAT_DURATION=2 LABEL=${LABEL:-quick} ;;
	--rounds) ROUNDS=$2; shift ;;
	--duration) DURATION=$2; shift ;;
	--lat-duration) LAT_DURATION=$2; shift ;;
	--lat-qps) LAT_QPS=$2; shift ;;
	--modes) MODES=$2; shift ;;
	--servers) SERVERS=$2; shift ;;
	--queries) QUERIES=$2; shift ;;
	--base-ref) BASE_REF=$2; shift ;;
	--no-install) INSTALL=0 ;;
	--keep) KEEP=1 ;;
	--label) LABEL=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done

for m in $MODES; do
	case "$m" in pinned | unpinned) ;; *) echo "unknown mode $m" >&2; exit 2 ;; esac
done
for s in $SERVERS; do
	case "$s" in steer | steer-guard | steer-base | gdnsd | knot | nsd) ;; *) echo "unknown server $s" >&2; exit 2 ;; esac
done

log() { printf '[bench %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts servers)"

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d /tmp/steer-bench.XXXXXX)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RESULTS=$REPO/bench/results/$STAMP${LABEL:+-$LABEL}
BIN=$WORK/bin
HZ=$(getconf CLK_TCK)
NCPU=$(nproc)

declare -A PID=()       # server name -> pid (the current mode's)
BASE_REV=""             # steer-base's commit, once built
CREATED_POLICY_RC=0

. "$REPO/bench/lib/server.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

port_of() {
	case "$1" in
	steer) echo "$STEER_PORT" ;; steer-guard) echo "$STEER_GUARD_PORT" ;; steer-base) echo "$STEER_BASE_PORT" ;;
	gdnsd) echo "$GDNSD_PORT" ;;
	knot) echo "$KNOT_PORT" ;; nsd) echo "$NSD_PORT" ;;
	esac
}

# ---- install ---------------------------------------------------------------
PKGS="dnsperf gdnsd knot knot-module-geoip nsd"
. "$REPO/bench/lib/install.sh"
. "$REPO/bench/lib/larkbook-servers.sh"

# ---- build -----------------------------------------------------------------
build() {
	build_tools geoconv querygen check report
	# steer-base: steer as of BASE_REF, from a clean export of that commit,
	# so a change is measured against its base interleaved in one run.
	if [[ " $SERVERS " == *" steer-base "* ]]; then
		local rev
		rev=$(cd "$REPO" && git rev-parse --verify --quiet "$BASE_REF^{commit}") || die "--base-ref $BASE_REF: no such commit"
		log "building steer-base from $BASE_REF ($(cut -c1-7 <<<"$rev"))"
		mkdir -p "$WORK/base-src"
		(cd "$REPO" && git archive "$rev") | tar -x -C "$WORK/base-src"
		(cd "$WORK/base-src" && go build -o "$BIN/steer-base" ./cmd/steer) || die "building steer-base failed"
		BASE_REV=$(cut -c1-7 <<<"$rev")
	fi
}

# ---- data ------------------------------------------------------------------
make_data() { larkbook_queries; }

# ---- configs ---------------------------------------------------------------
write_configs() { # MODE THREADS
	local mode=$1 threads=$2 d=$WORK/$1 db=$WORK/geo-country.mmdb
	mkdir -p "$d"/steer "$d"/gdnsd/zones "$d"/knot/storage "$d"/knot/run "$d"/nsd

	# steer: the zone without shop; shop is the steered record.
	zone_base >"$d/steer/example.com.zone"
	larkbook_steer_config "$STEER_PORT" "$db" >"$d/steer/steer.yaml"

	# steer-guard: the same with rate limiting and cookies deciding every
	# query (loopback not exempt; rates no pass reaches, so every query
	# is decided and answered): the guard's cost per query, beside steer.
	mkdir -p "$d/steer-guard"
	cp "$d/steer/example.com.zone" "$d/steer-guard/"
	sed "s/:$STEER_PORT\"/:$STEER_GUARD_PORT\"/" "$d/steer/steer.yaml" >"$d/steer-guard/steer.yaml"
	cat >>"$d/steer-guard/steer.yaml" <<EOF
rrl: { exempt: [], responses_per_second: 1000000, all_per_second: 1000000 }
cookies: { enabled: true, max_nocookie_udp: 1232 }
EOF

	# steer-base: the same config, served by steer built from BASE_REF.
	mkdir -p "$d/steer-base"
	cp "$d/steer/example.com.zone" "$d/steer-base/"
	sed "s/:$STEER_PORT\"/:$STEER_BASE_PORT\"/" "$d/steer/steer.yaml" >"$d/steer-base/steer.yaml"

	# gdnsd: shop is a DYNA record of the geoip plugin; the map is
	# continent -> country, with Virginia as every default.
	{ zone_base; echo 'shop    60 DYNA geoip!shop'; } >"$d/gdnsd/zones/example.com"
	gdnsd_config "$d/gdnsd" "$db" "$threads"

	# Knot: mod-geoip in geodb mode keyed on continent and country; a client
	# no view matches (other continents, not in the database) falls through
	# to the zone's own shop record, Virginia.
	{ zone_base; echo 'shop    60 IN A 192.0.2.30'; } >"$d/knot/example.com.zone"
	knot_geo_conf "$d/knot/geo.conf"
	cat >"$d/knot/knot.conf" <<EOF
server:
    rundir: $d/knot/run
    listen: $BIND@$KNOT_PORT
    udp-workers: $threads
    tcp-workers: 1
    background-workers: 1
    edns-client-subnet: on
log:
  - target: stderr
    any: info
database:
    storage: $d/knot/storage
mod-geoip:
  - id: larkbook
    config-file: $d/knot/geo.conf
    ttl: 60
    mode: geodb
    geodb-file: $db
    geodb-key: [ continent/code, country/iso_code ]
template:
  - id: default
    storage: $d/knot
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: example.com
    file: example.com.zone
    module: mod-geoip/larkbook
EOF

	# NSD: no geo; shop is a plain A record (NSD only runs the static file).
	{ zone_base; echo 'shop    60 IN A 192.0.2.30'; } >"$d/nsd/example.com.zone"
	cat >"$d/nsd/nsd.conf" <<EOF
server:
    ip-address: $BIND@$NSD_PORT
    port: $NSD_PORT
    server-count: $threads
    username: ""
    chroot: ""
    zonesdir: "$d/nsd"
    database: ""
    zonelistfile: "$d/nsd/zone.list"
    xfrdfile: "$d/nsd/xfrd.state"
    xfrdir: "$d/nsd"
    pidfile: "$d/nsd/nsd.pid"
    logfile: "$d/nsd/nsd.log"
    verbosity: 1
    hide-version: yes
    # Debian's NSD rate-limits responses by default: off for a load test.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: example.com
    zonefile: example.com.zone
EOF
}

# ---- processes ---------------------------------------------------------------
start_server() { # NAME MODE
	local s=$1 mode=$2 d=$WORK/$2 port pin=() envs=()
	port=$(port_of "$s")
	need_free_port "$s" "$port" "${s^^}_PORT"
	if [ "$mode" = pinned ]; then
		pin=(taskset -c "$SERVER_CPU")
		envs=(GOMAXPROCS=1)
	fi
	local logf=$RESULTS/logs/$mode-$s.log
	case "$s" in
	steer | steer-guard) env "${envs[@]}" "${pin[@]}" "$BIN/steer" serve --config "$d/$s/steer.yaml" >"$logf" 2>&1 & ;;
	steer-base) env "${envs[@]}" "${pin[@]}" "$BIN/steer-base" serve --config "$d/$s/steer.yaml" >"$logf" 2>&1 & ;;
	gdnsd) "${pin[@]}" gdnsd -c "$d/gdnsd" start >"$logf" 2>&1 & ;;
	knot) "${pin[@]}" knotd -c "$d/knot/knot.conf" >"$logf" 2>&1 & ;;
	nsd) "${pin[@]}" nsd -d -c "$d/nsd/nsd.conf" >"$logf" 2>&1 & ;;
	esac
	PID[$s]=$!
	# ready when it answers the static name
	wait_answering "$s" "$logf" "$BIND:$port ($mode)" "$BIN/check" -server "$BIND:$port" -static-only -timeout 200ms
}

# ---- load ------------------------------------------------------------------
files_for() { # SERVER -> the query files it runs
	if [ "$1" = nsd ]; then echo static; else echo "static steered"; fi
}

dnsperf_input() { # FILE -> dnsperf input arguments
	case "$1" in
	static) echo "-d $WORK/queries/static.txt" ;;
	steered) echo "-B -d $WORK/queries/steered.bin" ;;
	esac
}

run_pass() { # MODE ROUND SERVER FILE
	local mode=$1 round=$2 s=$3 file=$4 port cpin=() t0 t1 raw
	port=$(port_of "$s")
	[ "$mode" = pinned ] && cpin=(taskset -c "$CLIENT_CPU")
	# shellcheck disable=SC2046
	set -- $(dnsperf_input "$file")
	raw=raw/$mode-r$round-$s-$file-tput.txt
	t0=$(cpu_ticks "${PID[$s]}")
	# shellcheck disable=SC2086
	"${cpin[@]}" dnsperf -s "$BIND" -p "$port" "$@" -l "$DURATION" $DNSPERF_ARGS >"$RESULTS/$raw" 2>&1 || true
	t1=$(cpu_ticks "${PID[$s]}")
	printf '%s\t%s\t%s\t%s\ttput\t%s\t%s\t%s\n' "$mode" "$round" "$s" "$file" "$raw" "$((t1 - t0))" "$HZ" >>"$RESULTS/passes.tsv"
	raw=raw/$mode-r$round-$s-$file-lat.txt
	# shellcheck disable=SC2086
	"${cpin[@]}" dnsperf -s "$BIND" -p "$port" "$@" -l "$LAT_DURATION" -Q "$LAT_QPS" $DNSPERF_ARGS -v 2>&1 |
		"${cpin[@]}" "$BIN/report" lat >"$RESULTS/$raw" || true
	printf '%s\t%s\t%s\t%s\tlat\t%s\t-\t%s\n' "$mode" "$round" "$s" "$file" "$raw" "$HZ" >>"$RESULTS/passes.tsv"
	log "$mode r$round $s $file: $(awk '/Queries per second/{printf "%.0f qps", $4}' "$RESULTS/raw/$mode-r$round-$s-$file-tput.txt"), $(awk '/^LATENCY/{print $4, $6}' "$RESULTS/$raw")"
}

run_mode() { # MODE
	local mode=$1 threads s file r i n
	if [ "$mode" = pinned ]; then threads=1; else threads=$NCPU; fi
	write_configs "$mode" "$threads"
	cp -r "$WORK/$mode" "$RESULTS/configs/$mode"
	local servers=($SERVERS)
	for s in "${servers[@]}"; do start_server "$s" "$mode"; done
	# answers first: a fast wrong server must not win
	for s in "${servers[@]}"; do
		local args=(-server "$BIND:$(port_of "$s")" -sample "$WORK/queries/sample.tsv")
		[ "$s" = nsd ] && args+=(-static-only)
		local res
		res=$("$BIN/check" "${args[@]}" 2>&1) || true
		printf '%s\n' "$res" >"$RESULTS/checks/$mode-$s.txt"
		CHECK[$s]=$(head -1 <<<"$res")
		if [[ ${CHECK[$s]} == ok* ]]; then
			log "$s answers: ${CHECK[$s]}"
		else
			log "WARNING: $s gives wrong answers: $res"
		fi
	done
	# warm-up, not recorded
	for s in "${servers[@]}"; do
		for file in $(files_for "$s"); do
			# shellcheck disable=SC2046,SC2086
			dnsperf -s "$BIND" -p "$(port_of "$s")" $(dnsperf_input "$file") -l "$WARMUP" $DNSPERF_ARGS >/dev/null 2>&1 || true
		done
	done
	# rounds: every server and file once per round, the server order rotated
	n=${#servers[@]}
	for r in $(seq 1 "$ROUNDS"); do
		for file in static steered; do
			for i in $(seq 0 $((n - 1))); do
				s=${servers[$(((i + r - 1) % n))]}
				[[ " $(files_for "$s") " == *" $file "* ]] || continue
				run_pass "$mode" "$r" "$s" "$file"
			done
		done
	done
	for s in "${servers[@]}"; do
		local note=""
		case "$s" in
		steer) note="GOMAXPROCS=$([ "$mode" = pinned ] && echo 1 || echo "default ($NCPU)")" ;;
		steer-guard) note="GOMAXPROCS=$([ "$mode" = pinned ] && echo 1 || echo "default ($NCPU)"), rrl deciding every query, cookies on" ;;
		steer-base) note="GOMAXPROCS=$([ "$mode" = pinned ] && echo 1 || echo "default ($NCPU)"), built from $BASE_REF ($BASE_REV)" ;;
		gdnsd) note="udp_threads=$threads" ;;
		knot) note="udp-workers=$threads" ;;
		nsd) note="server-count=$threads, static only (no geo)" ;;
		esac
		printf '%s\t%s\t%s\t%s\t%s\n' "$mode" "$s" "${CHECK[$s]}" "$(peak_rss_kb "${PID[$s]}")" "$note" >>"$RESULTS/servers.tsv"
		stop_server "$s"
	done
}

# ---- main ------------------------------------------------------------------
declare -A CHECK=()
mkdir -p "$RESULTS"/{raw,logs,checks,configs}
[ "$INSTALL" = 1 ] && install_packages
for c in dnsperf gdnsd knotd nsd taskset ss; do command -v "$c" >/dev/null || die "$c not found (run without --no-install)"; done
if [ -n "$(listening_on 53)" ]; then
	log "note: something listens on port 53 (not started by this run):"
	listening_on 53 >&2
fi
if [ "$NCPU" -lt 2 ]; then
	log "warning: $NCPU CPU(s): pinned mode shares one core between server and client"
	SERVER_CPU=0 CLIENT_CPU=0
fi
build
make_data
cp "$WORK/queries/mix.txt" "$WORK/queries/sample.tsv" "$RESULTS/"

{
	echo "date: $STAMP"
	echo "git: $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null)$(cd "$REPO" && git diff --quiet 2>/dev/null || echo ' (dirty)')"
	echo "rounds: $ROUNDS  duration: ${DURATION}s  latency pass: ${LAT_DURATION}s at $LAT_QPS qps  warm-up: ${WARMUP}s"
	echo "modes: $MODES  servers: $SERVERS  queries: $QUERIES  dnsperf args: $DNSPERF_ARGS"
	echo "cpus: $NCPU ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo))  kernel: $(uname -r)"
	echo "steer: $("$BIN/steer" version 2>/dev/null)  go: $(go version | awk '{print $3}')"
	[ -n "$BASE_REV" ] && echo "steer-base: built from $BASE_REF ($BASE_REV)"
	echo "gdnsd: $(dpkg-query -W -f='${Version}' gdnsd)  knot: $(dpkg-query -W -f='${Version}' knot)  nsd: $(dpkg-query -W -f='${Version}' nsd)  dnsperf: $(dpkg-query -W -f='${Version}' dnsperf)"
	echo "loadavg at start: $(cat /proc/loadavg)"
} >"$RESULTS/env.txt"
cat "$RESULTS/env.txt" >&2
if awk -v n="$NCPU" '{exit !($1 > n / 4)}' /proc/loadavg; then
	log "warning: the machine is busy (load $(cut -d' ' -f1 /proc/loadavg)): expect noisy figures"
fi

for mode in $MODES; do
	log "=== mode $mode"
	run_mode "$mode"
done
echo "loadavg at end: $(cat /proc/loadavg)" >>"$RESULTS/env.txt"

echo
"$BIN/report" summary -dir "$RESULTS"
ln -sfn "$(basename "$RESULTS")" "$REPO/bench/results/latest"
log "raw results: $RESULTS"
