#!/usr/bin/env bash
# DNSSEC benchmark (issue 26): steer signed beside steer unsigned, gdnsd
# (which has no DNSSEC) and Knot DNS with mod-onlinesign, on the Larkbook
# zone and the same geo data, on loopback only. See "DNSSEC" in
# bench/README.md. Run as root from anywhere inside the repository:
#
#   bench/dnssec.sh            # 3 rounds, flood, start times: ~6 minutes
#   bench/dnssec.sh --quick    # 1 round, short passes: ~2 minutes
#
# Three parts, each optional (--parts "load flood start"):
#   load   dnsperf max-load passes, server pinned on one core, dnsperf on the
#          other; static.example.com and shop.example.com with a different
#          client /24 (ECS) per query; the signed servers get the same
#          queries with DO. QPS, server CPU per query, ratios per round.
#   flood  a random-subdomain flood with DO from one spoofed loopback
#          source against each signed server, while Unbound (validating,
#          talking to the server over TCP only) resolves nonexistent and
#          existing names: the server's CPU and signatures against the
#          budget, the flood's TC share, the resolver's validated share.
#   start  steer with START_NAMES steered names (bench/lib/scale-records.sh),
#          unsigned and signed in turn: exec to the first right (signed)
#          answer of the last name.
# steer signs only when the tree has zone signing: when `steer check`
# refuses the dnssec: section, the steer-signed server and the signed start
# are left out with a note, and the rest still runs.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
PARTS=${PARTS:-"load flood start"}
SERVERS=${SERVERS:-"steer steer-signed gdnsd knot-online knot-signed"}
QUERIES=${QUERIES:-200000}
SAMPLE=${SAMPLE:-200}
BIND=${BIND:-127.0.0.1}
STEER_PORT=${STEER_PORT:-5341}
STEER_SIGNED_PORT=${STEER_SIGNED_PORT:-5342}
GDNSD_PORT=${GDNSD_PORT:-5343}
KNOT_PORT=${KNOT_PORT:-5344}
KNOT_SIGNED_PORT=${KNOT_SIGNED_PORT:-5348}
UNBOUND_PORT=${UNBOUND_PORT:-5345}
STEER_API_PORT=${STEER_API_PORT:-5346}
START_PORT=${START_PORT:-5347}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
DNSPERF_ARGS=${DNSPERF_ARGS:-"-c 8 -q 256 -t 1"}
FLOOD_QPS=${FLOOD_QPS:-40000}
FLOOD_SECONDS=${FLOOD_SECONDS:-20}
FLOOD_SRC=${FLOOD_SRC:-127.7.7.7}
RESOLVER_QPS=${RESOLVER_QPS:-50}
BUDGET=${BUDGET:-20000}          # steer's signing budget per core (the default)
FLOOD_BUDGETS=${FLOOD_BUDGETS:-"20000 2000"} # steer-signed is flooded once per budget
START_NAMES=${START_NAMES:-10000}
START_POLICIES=${START_POLICIES:-5}
START_ROUNDS=${START_ROUNDS:-3}
START_LIMIT=${START_LIMIT:-120}  # seconds to wait for the last name's right answer
INSTALL=${INSTALL:-1}
KEEP=${KEEP:-0}
LABEL=${LABEL:-}

usage() {
	cat <<EOF
usage: bench/dnssec.sh [--quick] [--rounds N] [--duration S] [--parts "load flood start"]
                       [--servers "steer steer-signed gdnsd knot-online"]
                       [--flood-qps N] [--flood-seconds S] [--start-names N]
                       [--start-rounds N] [--no-install] [--keep] [--label NAME]
Environment: the upper-case forms of the flags, and STEER_PORT
STEER_SIGNED_PORT GDNSD_PORT KNOT_PORT UNBOUND_PORT STEER_API_PORT START_PORT
BIND SERVER_CPU CLIENT_CPU DNSPERF_ARGS WARMUP SAMPLE QUERIES FLOOD_SRC
RESOLVER_QPS BUDGET FLOOD_BUDGETS START_POLICIES START_LIMIT.
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) ROUNDS=1 DURATION=3 FLOOD_SECONDS=8 START_ROUNDS=1 QUERIES=50000 LABEL=${LABEL:-quick} ;;
	--tiny) ROUNDS=1 DURATION=1 WARMUP=0 FLOOD_SECONDS=2 FLOOD_QPS=2000 RESOLVER_QPS=20 START_ROUNDS=1 START_NAMES=50 START_LIMIT=20 QUERIES=2000 SAMPLE=20 LABEL=${LABEL:-tiny} ;;
	--rounds) ROUNDS=$2; shift ;;
	--duration) DURATION=$2; shift ;;
	--parts) PARTS=$2; shift ;;
	--servers) SERVERS=$2; shift ;;
	--flood-qps) FLOOD_QPS=$2; shift ;;
	--flood-seconds) FLOOD_SECONDS=$2; shift ;;
	--start-names) START_NAMES=$2; shift ;;
	--start-rounds) START_ROUNDS=$2; shift ;;
	--no-install) INSTALL=0 ;;
	--keep) KEEP=1 ;;
	--label) LABEL=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
for s in $SERVERS; do
	case "$s" in steer | steer-signed | gdnsd | knot-online | knot-signed) ;; *) echo "unknown server $s" >&2; exit 2 ;; esac
done
for p in $PARTS; do
	case "$p" in load | flood | start) ;; *) echo "unknown part $p" >&2; exit 2 ;; esac
done

log() { printf '[dnssec %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages, binds $FLOOD_SRC and starts servers)"

REPO=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)} # REPO=...: run a copy of this script
WORK=$(mktemp -d /tmp/steer-dnssec.XXXXXX)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RESULTS=$REPO/bench/results/dnssec-$STAMP${LABEL:+-$LABEL}
BIN=$WORK/bin
HZ=$(getconf CLK_TCK)
NCPU=$(nproc)

declare -A PID=()
declare -A CHECK=()
declare -A NOTE=()
CREATED_POLICY_RC=0
STEER_SIGNS=0

. "$REPO/bench/lib/server.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

port_of() {
	case "$1" in
	steer) echo "$STEER_PORT" ;; steer-signed) echo "$STEER_SIGNED_PORT" ;;
	gdnsd) echo "$GDNSD_PORT" ;; knot-online) echo "$KNOT_PORT" ;; knot-signed) echo "$KNOT_SIGNED_PORT" ;;
	unbound) echo "$UNBOUND_PORT" ;; start-*) echo "$START_PORT" ;;
	esac
}
signed() { [ "$1" = steer-signed ] || [ "$1" = knot-online ] || [ "$1" = knot-signed ]; }

PKGS="dnsperf gdnsd knot knot-module-geoip unbound bind9-dnsutils"
. "$REPO/bench/lib/install.sh"
. "$REPO/bench/lib/larkbook-servers.sh"
. "$REPO/bench/lib/scale-records.sh"

build() { build_tools geoconv querygen check signbench; }

make_data() {
	larkbook_queries
	# the signed servers get the same queries with DO (and EDNS 1232 for static)
	"$BIN/signbench" dofile -in "$WORK/queries/steered.bin" -out "$WORK/queries/steered-do.bin"
	"$BIN/signbench" static -out "$WORK/queries/static-do.bin"
}

# ---- keys and configs ------------------------------------------------------------
# make_key DIR: a CSK for example.com (ECDSA P-256), made by steer when it
# can, else by BIND's dnssec-keygen (steer reads BIND pairs); sets KEYBASE
# to its base name and KEYGEN to what made it.
make_key() {
	local d=$1 k
	mkdir -p "$d"
	if "$BIN/steer" dnssec keygen example.com --dir "$d" >"$WORK/keygen.log" 2>&1; then
		KEYGEN="steer dnssec keygen"
	else
		dnssec-keygen -q -a ECDSAP256SHA256 -f KSK -K "$d" example.com >"$WORK/keygen.log" 2>&1 ||
			{ cat "$WORK/keygen.log" >&2; die "dnssec-keygen failed"; }
		KEYGEN="dnssec-keygen -a ECDSAP256SHA256 -f KSK"
	fi
	k=$(cd "$d" && ls Kexample.com.+013+*.key | head -1)
	chmod 600 "$d"/*.private
	KEYBASE=${k%.key}
}

write_configs() {
	local d=$WORK/conf db=$WORK/geo-country.mmdb key
	mkdir -p "$d"/steer "$d"/steer-signed "$d"/gdnsd/zones "$d"/knot/storage "$d"/knot/run

	zone_base >"$d/steer/example.com.zone"
	larkbook_steer_config "$STEER_PORT" "$db" >"$d/steer/steer.yaml"

	zone_base >"$d/steer-signed/example.com.zone"
	make_key "$d/steer-signed"
	key=$KEYBASE
	larkbook_steer_config "$STEER_SIGNED_PORT" "$db" \
		"api: { listen: \"127.0.0.1:$STEER_API_PORT\" }
signing: { budget_per_core: $BUDGET }" \
		"    dnssec: { keys: [$key] }" >"$d/steer-signed/steer.yaml"
	if "$BIN/steer" check --config "$d/steer-signed/steer.yaml" >"$WORK/steer-signed-check.txt" 2>&1; then
		STEER_SIGNS=1
	else
		# without the node's signing section, in case only that is missing
		sed -i '/^signing:/d' "$d/steer-signed/steer.yaml"
		if "$BIN/steer" check --config "$d/steer-signed/steer.yaml" >>"$WORK/steer-signed-check.txt" 2>&1; then
			STEER_SIGNS=1
			NOTE[steer-signed]="no signing: section (refused by steer check): the default budget"
		else
			STEER_SIGNS=0
			NOTE[steer-signed]="not run: steer check refuses the dnssec: section ($(grep -m1 -iE 'dnssec|unknown|field' "$WORK/steer-signed-check.txt" | tr -d '\t' | cut -c1-160))"
		fi
	fi

	{ zone_base; echo 'shop    60 DYNA geoip!shop'; } >"$d/gdnsd/zones/example.com"
	gdnsd_config "$d/gdnsd" "$db" 1

	# Knot: mod-geoip (as in run.sh) stacked under mod-onlinesign, which
	# signs every answer as it goes out with a key it makes and manages
	# itself (automatic key management, a KASP policy: ECDSA P-256, one
	# CSK, 14-day signatures).
	{ zone_base; echo 'shop    60 IN A 192.0.2.30'; } >"$d/knot/example.com.zone"
	knot_geo_conf "$d/knot/geo.conf"
	cat >"$d/knot/knot.conf" <<EOF
server:
    rundir: $d/knot/run
    listen: $BIND@$KNOT_PORT
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
    edns-client-subnet: on
log:
  - target: stderr
    any: info
database:
    storage: $d/knot/storage
policy:
  - id: p256
    algorithm: ecdsap256sha256
    single-type-signing: on
    rrsig-lifetime: 14d
    rrsig-refresh: 7d
mod-geoip:
  - id: larkbook
    config-file: $d/knot/geo.conf
    ttl: 60
    mode: geodb
    geodb-file: $db
    geodb-key: [ continent/code, country/iso_code ]
mod-onlinesign:
  - id: p256
    policy: p256
template:
  - id: default
    storage: $d/knot
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: example.com
    file: example.com.zone
    module: [ mod-geoip/larkbook, mod-onlinesign/p256 ]
EOF

	# Knot with the zone signed when loaded (automatic signing, the same
	# KASP policy) and mod-geoip, which then signs each of its answers once
	# when it loads: the design closest to steer's pre-signing.
	mkdir -p "$d"/knot-signed/storage "$d"/knot-signed/run
	cp "$d/knot/example.com.zone" "$d/knot/geo.conf" "$d/knot-signed/"
	sed -e "s|$d/knot/|$d/knot-signed/|g" -e "s|storage: $d/knot\$|storage: $d/knot-signed|" -e "s|@$KNOT_PORT|@$KNOT_SIGNED_PORT|" \
		-e '/^mod-onlinesign:/,/^    policy: p256/d' \
		-e 's|module: \[ mod-geoip/larkbook, mod-onlinesign/p256 \]|module: mod-geoip/larkbook\n    dnssec-signing: on\n    dnssec-policy: p256|' \
		"$d/knot/knot.conf" >"$d/knot-signed/knot.conf"
	KNOT_SIGNED_PRESTART=1
}

# ---- processes -----------------------------------------------------------------
start_server() { # NAME
	local s=$1 d=$WORK/conf port pin=(taskset -c "$SERVER_CPU") logf=$RESULTS/logs/$1.log
	port=$(port_of "$s")
	need_free_port "$s" "$port" "its _PORT variable"
	case "$s" in
	steer | steer-signed) GOMAXPROCS=1 "${pin[@]}" "$BIN/steer" serve --config "$d/$s/${STEER_SIGNED_CONFIG:-steer.yaml}" >>"$logf" 2>&1 & ;;
	gdnsd) "${pin[@]}" gdnsd -c "$d/gdnsd" start >>"$logf" 2>&1 & ;;
	knot-online) "${pin[@]}" knotd -c "$d/knot/knot.conf" >>"$logf" 2>&1 & ;;
	knot-signed) "${pin[@]}" knotd -c "$d/knot-signed/knot.conf" >>"$logf" 2>&1 & ;;
	esac
	PID[$s]=$!
	wait_answering "$s" "$logf" "$BIND:$port" "$BIN/check" -server "$BIND:$port" -static-only -timeout 200ms
	# mod-geoip signs its answers when it loads, with the zone's key; at
	# Knot's very first start the key is made after the module loaded, and
	# the module then answers nothing (every client gets the zone's
	# default). Once the KASP database has the key, a restart loads it.
	if [ "$s" = knot-signed ] && [ "$KNOT_SIGNED_PRESTART" = 1 ]; then
		KNOT_SIGNED_PRESTART=0
		log "knot-signed: restarting once, now that its KASP database holds the key"
		stop_server "$s"
		start_server "$s"
	fi
}

# ---- load ----------------------------------------------------------------------
dnsperf_input() { # SERVER FILE
	if signed "$1"; then
		echo "-B -d $WORK/queries/$2-do.bin"
	elif [ "$2" = static ]; then
		echo "-d $WORK/queries/static.txt"
	else
		echo "-B -d $WORK/queries/steered.bin"
	fi
}

run_pass() { # ROUND SERVER FILE
	local round=$1 s=$2 file=$3 port t0 t1 raw
	port=$(port_of "$s")
	raw=raw/r$round-$s-$file.txt
	t0=$(cpu_ticks "${PID[$s]}")
	# shellcheck disable=SC2046,SC2086
	taskset -c "$CLIENT_CPU" dnsperf -s "$BIND" -p "$port" $(dnsperf_input "$s" "$file") -l "$DURATION" $DNSPERF_ARGS >"$RESULTS/$raw" 2>&1 || true
	t1=$(cpu_ticks "${PID[$s]}")
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$s" "$file" "$raw" "$((t1 - t0))" "$HZ" >>"$RESULTS/passes.tsv"
	log "r$round $s $file: $(awk '/Queries per second/{printf "%.0f qps", $4}' "$RESULTS/$raw"), $((t1 - t0)) ticks"
}

check_server() { # NAME: the pre-load answer check; signed servers validated
	local s=$1 res port
	port=$(port_of "$s")
	if signed "$s"; then
		res=$("$BIN/signbench" check -server "$BIND:$port" -sample "$WORK/queries/sample.tsv" 2>&1) || true
	else
		res=$("$BIN/check" -server "$BIND:$port" -sample "$WORK/queries/sample.tsv" 2>&1) || true
	fi
	printf '%s\n' "$res" >"$RESULTS/checks/$s.txt"
	CHECK[$s]=$(head -1 <<<"$res")
	if [[ ${CHECK[$s]} == ok* ]]; then log "$s answers: ${CHECK[$s]}"; else log "WARNING: $s: $res"; fi
}

part_load() {
	local servers=() s file r i n
	for s in $SERVERS; do
		[ "$s" = steer-signed ] && [ "$STEER_SIGNS" = 0 ] && continue
		servers+=("$s")
	done
	for s in "${servers[@]}"; do start_server "$s"; done
	for s in "${servers[@]}"; do check_server "$s"; done
	for s in "${servers[@]}"; do
		for file in static steered; do
			# shellcheck disable=SC2046,SC2086
			[ "$WARMUP" -gt 0 ] && taskset -c "$CLIENT_CPU" dnsperf -s "$BIND" -p "$(port_of "$s")" $(dnsperf_input "$s" "$file") -l "$WARMUP" $DNSPERF_ARGS >/dev/null 2>&1 || true
		done
	done
	n=${#servers[@]}
	for r in $(seq 1 "$ROUNDS"); do
		for file in static steered; do
			for i in $(seq 0 $((n - 1))); do
				run_pass "$r" "${servers[$(((i + r - 1) % n))]}" "$file"
			done
		done
	done
	for s in "${servers[@]}"; do
		local note=${NOTE[$s]:-}
		case "$s" in
		steer) note="GOMAXPROCS=1, unsigned, queries without DO" ;;
		steer-signed)
			local sg rf
			read -r sg rf < <(steer_signing)
			note="GOMAXPROCS=1, CSK ECDSA P-256 ($KEYGEN), queries with DO; signatures made on queries' behalf (online + denial) by the end of the load: $sg, budget refusals: $rf${note:+; $note}" ;;
		gdnsd) note="udp_threads=1, no DNSSEC, queries without DO" ;;
		knot-online) note="udp-workers=1, mod-geoip + mod-onlinesign (KASP: ECDSA P-256 CSK, automatic keys), queries with DO" ;;
		knot-signed) note="udp-workers=1, automatic signing (dnssec-signing: on, the same KASP) + mod-geoip, which signs its answers when it loads; queries with DO" ;;
		esac
		printf '%s\t%s\t%s\t%s\n' "$s" "${CHECK[$s]}" "$(peak_rss_kb "${PID[$s]}")" "$note" >>"$RESULTS/servers.tsv"
		stop_server "$s"
	done
}

# ---- flood -----------------------------------------------------------------------
# steer's signing metrics: "SIGNATURES REFUSED", the RRSIGs made on
# queries' behalf (reasons online and denial, what the budget caps) and
# the signatures the budget refused; -1 for what it does not report
steer_signing() {
	curl -s --max-time 2 "http://127.0.0.1:$STEER_API_PORT/metrics" 2>/dev/null | awk '
		/^steer_dnssec_signatures_total\{/ && /reason="(online|denial)"/ { n += $NF; fs = 1 }
		/^steer_dnssec_budget_refused_total / { r += $NF; fr = 1 }
		END { printf "%.0f %.0f\n", fs ? n : -1, fr ? r : -1 }'
}

start_unbound() { # SERVER: a validating Unbound in front of it, TCP upstream only
	local s=$1 port d=$WORK/unbound ta
	port=$(port_of "$s")
	mkdir -p "$d"
	ta=$(dig @"$BIND" -p "$port" example.com DNSKEY +norec +noall +answer +nosplit +tcp | awk '$5 == 257 { $2 = ""; print }' | head -1)
	[ -n "$ta" ] || die "no SEP DNSKEY from $s"
	cat >"$d/unbound.conf" <<EOF
server:
    interface: 127.0.0.1
    port: $UNBOUND_PORT
    do-ip6: no
    username: ""
    chroot: ""
    directory: "$d"
    pidfile: "$d/unbound.pid"
    use-syslog: no
    logfile: ""
    num-threads: 1
    do-not-query-localhost: no
    tcp-upstream: yes
    module-config: "validator iterator"
    trust-anchor: "$ta"
    val-log-level: 2
    qname-minimisation: no
    harden-referral-path: no
    so-reuseport: no
    outgoing-range: 256
    num-queries-per-thread: 512
remote-control:
    control-enable: no
stub-zone:
    name: "example.com"
    stub-addr: $BIND@$port
EOF
	taskset -c "$CLIENT_CPU" unbound -d -c "$d/unbound.conf" >"$RESULTS/logs/unbound-$s.log" 2>&1 &
	PID[unbound]=$!
	local i
	for i in $(seq 1 100); do
		kill -0 "${PID[unbound]}" 2>/dev/null || { tail -20 "$RESULTS/logs/unbound-$s.log" >&2; unset "PID[unbound]"; die "unbound exited"; }
		dig @127.0.0.1 -p "$UNBOUND_PORT" static.example.com A +time=1 +tries=1 >/dev/null 2>&1 && return
		sleep 0.1
	done
	die "unbound did not answer"
}

part_flood() {
	local s b
	for s in $SERVERS; do
		signed "$s" || continue
		[ "$s" = steer-signed ] && [ "$STEER_SIGNS" = 0 ] && continue
		if [ "$s" = steer-signed ]; then
			# steer once per budget: the default, and one the flood
			# certainly exceeds on this machine
			for b in $FLOOD_BUDGETS; do
				sed "s/budget_per_core: $BUDGET/budget_per_core: $b/" "$WORK/conf/steer-signed/steer.yaml" >"$WORK/conf/steer-signed/steer-b$b.yaml"
				STEER_SIGNED_CONFIG=steer-b$b.yaml flood_one "$s" "$s, budget $b" "$b"
			done
		else
			flood_one "$s" "$s" 0
		fi
	done
}

flood_one() { # SERVER LABEL BUDGET
	local s=$1 label=$2 budget=$3 out=$RESULTS/flood.jsonl f=${2//[ ,]/_}
	start_server "$s"
	[ -n "${CHECK[$s]:-}" ] || check_server "$s"
	if [[ ${CHECK[$s]} != ok* ]]; then
		log "flood: $s left out: its answers did not validate (${CHECK[$s]})"
		printf '{"class":"server","label":"%s","cpu_s":0,"wall_s":0,"budget_per_s":0,"signatures":-1,"note":"not flooded: its answers did not validate before load (%s)"}\n' "$label" "${CHECK[$s]//\"/}" >>"$out"
		stop_server "$s"
		return
	fi
	start_unbound "$s"
	log "$label: flood $FLOOD_QPS q/s from $FLOOD_SRC for ${FLOOD_SECONDS}s, resolver $RESOLVER_QPS q/s through Unbound over TCP"
	local t0 t1 w0 w1 g0=-1 r0=-1 g1=-1 r1=-1
	[ "$s" = steer-signed ] && read -r g0 r0 < <(steer_signing)
	t0=$(cpu_ticks "${PID[$s]}")
	w0=$(date +%s.%N)
	taskset -c "$CLIENT_CPU" "$BIN/signbench" resolve -server "127.0.0.1:$UNBOUND_PORT" -qps "$RESOLVER_QPS" \
		-duration "${FLOOD_SECONDS}s" -label "$label" >"$WORK/resolve.json" 2>"$RESULTS/logs/resolve-$f.err" &
	local rp=$!
	taskset -c "$CLIENT_CPU" "$BIN/signbench" flood -server "$BIND:$(port_of "$s")" -src "$FLOOD_SRC" -qps "$FLOOD_QPS" \
		-duration "${FLOOD_SECONDS}s" -label "$label" >>"$out" 2>"$RESULTS/logs/flood-$f.err" ||
		{ cat "$RESULTS/logs/flood-$f.err" >&2; die "flood failed against $label"; }
	wait "$rp" || { cat "$RESULTS/logs/resolve-$f.err" >&2; die "resolver client failed against $label"; }
	t1=$(cpu_ticks "${PID[$s]}")
	w1=$(date +%s.%N)
	[ "$s" = steer-signed ] && read -r g1 r1 < <(steer_signing)
	cat "$WORK/resolve.json" >>"$out"
	kill -0 "${PID[$s]}" 2>/dev/null || die "$label died under the flood"
	local sigs=-1 refused=-1 note
	[ "$g0" -ge 0 ] && [ "$g1" -ge 0 ] && sigs=$((g1 - g0))
	[ "$r0" -ge 0 ] && [ "$r1" -ge 0 ] && refused=$((r1 - r0))
	case $s in
	knot-*) note="Knot has no signing budget and reports no signature count" ;;
	*) note="GOMAXPROCS=1: signing.budget_per_core $budget" ;;
	esac
	printf '{"class":"server","label":"%s","cpu_s":%s,"wall_s":%s,"budget_per_s":%s,"signatures":%s,"refused":%s,"note":"%s"}\n' \
		"$label" "$(awk -v t=$((t1 - t0)) -v hz="$HZ" 'BEGIN{printf "%.2f", t/hz}')" \
		"$(awk -v a="$w1" -v b="$w0" 'BEGIN{printf "%.2f", a-b}')" "$budget" "$sigs" "$refused" "$note" >>"$out"
	log "$label: $(grep '"class":"flood"' "$out" | tail -1 | head -c 250)"
	log "$label: $(tail -2 "$out" | head -1 | head -c 250)"
	log "$label: $(tail -1 "$out" | head -c 250)"
	stop_server unbound
	stop_server "$s"
}

# ---- start time --------------------------------------------------------------------
part_start() {
	local d=$WORK/start r v key last want t0 t args cpu
	mkdir -p "$d/unsigned" "$d/signed"
	make_key "$d/signed"
	for v in unsigned signed; do
		zone_base >"$d/$v/example.com.zone"
		{
			echo "listen: [\"$BIND:$START_PORT\"]"
			echo "geo: { databases: [$WORK/geo-country.mmdb] }"
			if [ "$v" = signed ]; then
				echo "zones: [{ origin: example.com, file: example.com.zone, dnssec: { keys: [$KEYBASE] } }]"
			else
				echo "zones: [{ origin: example.com, file: example.com.zone }]"
			fi
			scale_policies_and_records "$START_NAMES" "$START_POLICIES"
		} >"$d/$v/steer.yaml"
	done
	local variants=(unsigned)
	if [ "$STEER_SIGNS" = 1 ] && "$BIN/steer" check --config "$d/signed/steer.yaml" >"$WORK/start-check.txt" 2>&1; then
		variants+=(signed)
	else
		log "start: the signed variant is left out (steer check refuses it or steer does not sign)"
	fi
	last="s$((START_NAMES - 1)).example.com"
	want="203.0.113.$(((START_NAMES - 1) % 250 + 1))"
	for r in $(seq 1 "$START_ROUNDS"); do
		for v in "${variants[@]}"; do
			[ -n "$(listening_on "$START_PORT")" ] && die "port $START_PORT is in use"
			args=()
			[ "$v" = signed ] && args=(-do)
			t0=$(date +%s%N)
			"$BIN/steer" serve --config "$d/$v/steer.yaml" >"$RESULTS/logs/start-$v-r$r.log" 2>&1 &
			PID[start-$v]=$!
			if t=$("$BIN/signbench" wait -server "$BIND:$START_PORT" -name "$last" -want "$want" "${args[@]}" \
				-since "$t0" -pid "${PID[start-$v]}" -limit "${START_LIMIT}s"); then
				cpu=$(awk -v t="$(cpu_ticks "${PID[start-$v]}")" -v hz="$HZ" 'BEGIN{printf "%.2f", t/hz}')
				printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$v" "$t" "$START_NAMES" "$cpu" >>"$RESULTS/start.tsv"
				log "start r$r $v: ${t}s, ${cpu}s of CPU"
			else
				log "WARNING: start r$r $v: no right answer within ${START_LIMIT}s (log: $RESULTS/logs/start-$v-r$r.log)"
				printf '%s\t%s\tnone within %ss\t%s\n' "$r" "$v" "$START_LIMIT" "$START_NAMES" >>"$RESULTS/start.tsv"
				stop_server "start-$v"
				if [ "$v" = signed ]; then
					log "start: the signed variant is left out from now on"
					variants=(unsigned)
				fi
				continue
			fi
			stop_server "start-$v"
		done
	done
}

# ---- main --------------------------------------------------------------------------
mkdir -p "$RESULTS"/{raw,logs,checks,configs}
[ "$INSTALL" = 1 ] && install_packages
for c in dnsperf gdnsd knotd unbound dig dnssec-keygen taskset ss curl; do
	command -v "$c" >/dev/null || die "$c not found (run without --no-install)"
done
[ "$NCPU" -lt 2 ] && { log "warning: 1 CPU: server and clients share it"; SERVER_CPU=0 CLIENT_CPU=0; }
build
make_data
KEYGEN="" KEYBASE="" KNOT_SIGNED_PRESTART=0
write_configs
cp -r "$WORK/conf" "$RESULTS/configs/"
rm -f "$RESULTS"/configs/conf/*/*.private
{
	echo "date: $STAMP"
	echo "git: $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null)$(cd "$REPO" && git diff --quiet 2>/dev/null || echo ' (dirty)')"
	echo "parts: $PARTS  servers: $SERVERS  rounds: $ROUNDS  duration: ${DURATION}s  queries: $QUERIES  dnsperf args: $DNSPERF_ARGS"
	echo "flood: $FLOOD_QPS q/s from $FLOOD_SRC for ${FLOOD_SECONDS}s  resolver: $RESOLVER_QPS q/s  budget: $BUDGET/core (flood: $FLOOD_BUDGETS)"
	echo "start: $START_NAMES names over $START_POLICIES policies, $START_ROUNDS round(s)"
	echo "steer signs: $STEER_SIGNS ${NOTE[steer-signed]:-}  key: $KEYGEN"
	echo "cpus: $NCPU ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo))  kernel: $(uname -r)"
	echo "steer: $("$BIN/steer" version 2>/dev/null | head -1)  go: $(go version | awk '{print $3}')"
	echo "gdnsd: $(dpkg-query -W -f='${Version}' gdnsd)  knot: $(dpkg-query -W -f='${Version}' knot)  unbound: $(dpkg-query -W -f='${Version}' unbound)  dnsperf: $(dpkg-query -W -f='${Version}' dnsperf)"
	echo "loadavg at start: $(cat /proc/loadavg)"
} >"$RESULTS/env.txt"
cat "$RESULTS/env.txt" >&2
[ "$STEER_SIGNS" = 0 ] && log "note: ${NOTE[steer-signed]}"

for p in $PARTS; do
	log "=== $p"
	"part_$p"
done
echo "loadavg at end: $(cat /proc/loadavg)" >>"$RESULTS/env.txt"
echo
"$BIN/signbench" summary -dir "$RESULTS"
ln -sfn "$(basename "$RESULTS")" "$REPO/bench/results/latest-dnssec"
log "raw results: $RESULTS"
