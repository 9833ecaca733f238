#!/usr/bin/env bash
# Abuse-resistance benchmark (issue 14): a spoofed flood, a legitimate
# ECS-honouring resolver and cookie-bearing clients at once, against steer,
# BIND 9.18, Knot 3.2 and NSD 4.6 with equivalent response rate limiting
# (20 responses/s, slip 2) and DNS cookies (one shared secret), one server
# at a time, on loopback only. See "Abuse resistance" in bench/README.md.
#
#   bench/abuse.sh            # 60 s per server, about 5 minutes
#   bench/abuse.sh --quick    # 15 s per server, about 1.5 minutes
#
# Run as root: the generator (bench/abuse) binds source addresses all over
# 127.0.0.0/8 (127.9.9.1-254, 127.8.8.8, 127.6.6.1-50), which Linux routes
# to lo. Every server runs in the foreground with its config and state in a
# temp dir and is stopped by its PID at the end, on error and on Ctrl-C.
set -euo pipefail

DURATION=${DURATION:-60}
SERVERS=${SERVERS:-"steer bind knot nsd"}
ADDR=${ADDR:-127.0.0.1}
STEER_PORT=${STEER_PORT:-5321}
BIND_PORT=${BIND_PORT:-5322}
KNOT_PORT=${KNOT_PORT:-5323}
NSD_PORT=${NSD_PORT:-5324}
RATE=${RATE:-20}            # responses-per-second of every server's RRL
WINDOW=${WINDOW:-15}        # BIND and steer: seconds
SLIP=${SLIP:-2}
TXT_BYTES=${TXT_BYTES:-960} # RDATA of big.example.com TXT (see README)
FLOOD_QPS=${FLOOD_QPS:-20000}
FLOOD_EDNS=${FLOOD_EDNS:-4096}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PIN=${PIN:-1}
INSTALL=${INSTALL:-1}
KEEP=${KEEP:-0}
LABEL=${LABEL:-}
GEN_ARGS=${GEN_ARGS:-}      # added to every generator run
STEER_ALL_PER_SECOND=${STEER_ALL_PER_SECOND:-} # steer's rrl.all_per_second (empty: steer's default; 0: off, as the peers)
STEER_FROM_HEAD=${STEER_FROM_HEAD:-1} # build HEAD when the working tree does not build
STEER_BUILD=""

usage() {
	cat <<EOF
usage: bench/abuse.sh [--quick] [--duration S] [--servers "steer bind knot nsd"]
                      [--txt-bytes N] [--no-pin] [--no-install] [--keep] [--label NAME]
Environment: STEER_PORT BIND_PORT KNOT_PORT NSD_PORT ADDR RATE WINDOW SLIP
FLOOD_QPS FLOOD_EDNS SERVER_CPU CLIENT_CPU GEN_ARGS and the upper-case forms
of the flags.
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) DURATION=15 LABEL=${LABEL:-quick} ;;
	--duration) DURATION=$2; shift ;;
	--servers) SERVERS=$2; shift ;;
	--txt-bytes) TXT_BYTES=$2; shift ;;
	--no-pin) PIN=0 ;;
	--no-install) INSTALL=0 ;;
	--keep) KEEP=1 ;;
	--label) LABEL=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
for s in $SERVERS; do
	case "$s" in steer | bind | knot | nsd) ;; *) echo "unknown server $s" >&2; exit 2 ;; esac
done

log() { printf '[abuse %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it binds 127.x.y.z sources, installs packages and starts servers)"

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d /tmp/steer-abuse.XXXXXX)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RESULTS=$REPO/bench/results/abuse-$STAMP${LABEL:+-$LABEL}
BIN=$WORK/bin
HZ=$(getconf CLK_TCK)

declare -A PID=()
CREATED_POLICY_RC=0

. "$REPO/bench/lib/server.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

port_of() {
	case "$1" in
	steer) echo "$STEER_PORT" ;; bind) echo "$BIND_PORT" ;;
	knot) echo "$KNOT_PORT" ;; nsd) echo "$NSD_PORT" ;;
	esac
}

# ---- install (bench/lib/install.sh) ------------------------------------------
PKGS="bind9 knot nsd"
. "$REPO/bench/lib/install.sh"

# ---- build -------------------------------------------------------------------
build() {
	command -v go >/dev/null || die "Go is needed (the repository's toolchain, see go.mod)"
	mkdir -p "$BIN"
	log "building steer and bench/abuse"
	(cd "$REPO" && go build -o "$BIN/abuse" ./bench/abuse) || die "building bench/abuse failed"
	if (cd "$REPO" && go build -o "$BIN/steer" ./cmd/steer) 2>"$WORK/build.log"; then
		STEER_BUILD="working tree $(cd "$REPO" && git rev-parse --short HEAD)$(cd "$REPO" && git diff --quiet 2>/dev/null || echo ' (dirty)')"
		return
	fi
	# The tree is shared with engineers mid-edit: when it does not build,
	# build the last commit instead (an export, the tree is not touched).
	cat "$WORK/build.log" >&2
	[ "$STEER_FROM_HEAD" = 1 ] || die "steer does not build from the working tree (STEER_FROM_HEAD=1 builds the last commit)"
	log "steer does not build from the working tree: building HEAD $(cd "$REPO" && git rev-parse --short HEAD) instead"
	mkdir -p "$WORK/src"
	(cd "$REPO" && git archive HEAD) | tar -x -C "$WORK/src"
	(cd "$WORK/src" && go build -o "$BIN/steer" ./cmd/steer) || die "steer does not build from HEAD either"
	STEER_BUILD="HEAD $(cd "$REPO" && git rev-parse --short HEAD) (the working tree did not build)"
}

# ---- zone and configs --------------------------------------------------------
# TXT RDATA of about TXT_BYTES: strings of at most 255 characters, each
# with its length byte.
big_txt() {
	local n=$(((TXT_BYTES + 255) / 256)) len i out=""
	len=$((TXT_BYTES / n - 1))
	for i in $(seq 1 "$n"); do
		out+=" \"$(printf "%0${len}d" 0 | tr 0 "$(printf "\\x$(printf %x $((96 + i)))")")\""
	done
	echo "$out"
}

zone() { # steer|peer: steer gets shop as a steered record
	cat <<EOF
\$ORIGIN example.com.
\$TTL 3600
@       300 IN SOA  ns1.example.com. hostmaster.example.com. (
                2026120101 7200 3600 1209600 300 )
        IN NS   ns1
        IN NS   ns2
ns1     IN A    192.0.2.53
ns2     IN A    198.51.100.53
static  IN A    192.0.2.80
big     60 IN TXT $(big_txt)
EOF
	[ "$1" = peer ] && echo 'shop    60 IN A 192.0.2.30'
	return 0
}

SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')

steer_config() { # WITH_ABUSE_KEYS(0|1)
	cat <<EOF
listen: ["$ADDR:$STEER_PORT"]
identity: bench
zones:
  - origin: example.com
    file: example.com.zone
geo:
  databases: [embedded]
ecs: { enabled: true, max_source_v4: 24, max_source_v6: 56 }
records:
$(cat "$REPO/bench/lib/larkbook-records.yaml")
EOF
	[ "$1" = 1 ] && cat <<EOF
rrl:
  responses_per_second: $RATE
  window: ${WINDOW}s
  slip: $SLIP
  exempt: []   # the default exempts 127.0.0.0/8 and ::1: every source here
EOF
	[ "$1" = 1 ] && [ -n "$STEER_ALL_PER_SECOND" ] && echo "  all_per_second: $STEER_ALL_PER_SECOND"
	[ "$1" = 1 ] && cat <<EOF
cookies:
  secret_file: cookie.secret
EOF
	return 0
}

STEER_NOTE=""
write_configs() {
	local d=$WORK/conf
	mkdir -p "$d"/steer "$d"/bind "$d"/knot/storage "$d"/knot/run "$d"/nsd

	zone steer >"$d/steer/example.com.zone"
	echo "$SECRET" >"$d/steer/cookie.secret"
	steer_config 1 >"$d/steer/steer.yaml"
	if ! "$BIN/steer" check --config "$d/steer/steer.yaml" >"$WORK/steer-check.txt" 2>&1; then
		STEER_NOTE="steer check rejects the rrl/cookies keys ($(grep -m1 -iE 'rrl|cookie|unknown|field' "$WORK/steer-check.txt" || head -1 "$WORK/steer-check.txt")): run WITHOUT rate limiting and cookies"
		log "note: $STEER_NOTE"
		steer_config 0 >"$d/steer/steer.yaml"
		"$BIN/steer" check --config "$d/steer/steer.yaml" >&2 || die "steer check fails even without the rrl/cookies keys"
	else
		STEER_NOTE="steer check accepts the rrl ($RATE/s, window ${WINDOW}s, slip $SLIP, exempt none, all_per_second ${STEER_ALL_PER_SECOND:-default}) and cookies keys"
	fi

	# BIND 9.18: RRL keyed on (source /24, response); cookies with the shared
	# secret (siphash24, the 9.18 default). minimal-responses so the
	# answers have the same sections as the others'.
	zone peer >"$d/bind/example.com.zone"
	cat >"$d/bind/named.conf" <<EOF
options {
	directory "$d/bind";
	pid-file "$d/bind/named.pid";
	session-keyfile "$d/bind/session.key";
	listen-on port $BIND_PORT { $ADDR; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	notify no;
	minimal-responses yes;
	cookie-algorithm siphash24;
	cookie-secret "$SECRET";
	rate-limit {
		responses-per-second $RATE;
		window $WINDOW;
		slip $SLIP;
	};
};
zone "example.com" { type primary; file "$d/bind/example.com.zone"; };
EOF

	# Knot 3.2: mod-cookies before mod-rrl, so a valid server cookie exempts
	# a UDP query from the rate limit. mod-rrl has no window.
	zone peer >"$d/knot/example.com.zone"
	cat >"$d/knot/knot.conf" <<EOF
server:
    rundir: $d/knot/run
    listen: $ADDR@$KNOT_PORT
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
    edns-client-subnet: on
log:
  - target: stderr
    any: info
database:
    storage: $d/knot/storage
mod-cookies:
  - id: bench
    secret: 0x$SECRET
mod-rrl:
  - id: bench
    rate-limit: $RATE
    slip: $SLIP
template:
  - id: default
    storage: $d/knot
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    global-module: [ mod-cookies/bench, mod-rrl/bench ]
zone:
  - domain: example.com
    file: example.com.zone
EOF

	# NSD 4.6: RRL per source /24 and query class; answer-cookie with the
	# shared secret (a valid server cookie skips RRL: server.c checks
	# COOKIE_VALID before rrl_process_query). No window.
	zone peer >"$d/nsd/example.com.zone"
	cat >"$d/nsd/nsd.conf" <<EOF
server:
    ip-address: $ADDR@$NSD_PORT
    port: $NSD_PORT
    do-ip6: no
    server-count: 1
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
    minimal-responses: yes
    rrl-ratelimit: $RATE
    rrl-slip: $SLIP
    rrl-ipv4-prefix-length: 24
    answer-cookie: yes
    cookie-secret: "$SECRET"
    cookie-secret-file: "$d/nsd/no-such-cookie-secrets.txt"
remote-control:
    control-enable: no
zone:
    name: example.com
    zonefile: example.com.zone
EOF
}

# ---- processes -----------------------------------------------------------------
machine_busy_ticks() { # -> busy ticks of all CPUs (user nice system irq softirq steal)
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}

udp_drops() { # PORT -> receive-buffer drops of the UDP sockets bound to it (/proc/net/udp)
	awk -v p="$(printf ':%04X' "$1")" 'NR > 1 && substr($2, length($2) - 4) == p { n += $NF } END { print n + 0 }' /proc/net/udp
}

start_server() { # NAME
	local s=$1 d=$WORK/conf port pin=() logf=$RESULTS/logs/$1.log
	port=$(port_of "$s")
	need_free_port "$s" "$port" "${s^^}_PORT"
	[ "$PIN" = 1 ] && pin=(taskset -c "$SERVER_CPU")
	case "$s" in
	steer) GOMAXPROCS=1 "${pin[@]}" "$BIN/steer" serve --config "$d/steer/steer.yaml" >"$logf" 2>&1 & ;;
	bind) "${pin[@]}" named -g -n 1 -c "$d/bind/named.conf" >"$logf" 2>&1 & ;;
	knot) "${pin[@]}" knotd -c "$d/knot/knot.conf" >"$logf" 2>&1 & ;;
	nsd) "${pin[@]}" nsd -d -c "$d/nsd/nsd.conf" >"$logf" 2>&1 & ;;
	esac
	PID[$s]=$!
	wait_answering "$s" "$logf" "$ADDR:$port" "$BIN/abuse" -probe -server "$ADDR:$port" -timeout 200ms
}

version_of() {
	case "$1" in
	steer) "$BIN/steer" version 2>/dev/null | head -1 ;;
	bind) dpkg-query -W -f='${Version}' bind9 ;;
	knot) dpkg-query -W -f='${Version}' knot ;;
	nsd) dpkg-query -W -f='${Version}' nsd ;;
	esac
}

run_server() { # NAME
	local s=$1 port t0 t1 cpin=() out=$RESULTS/$1.jsonl note=""
	port=$(port_of "$s")
	start_server "$s"
	[ "$PIN" = 1 ] && cpin=(taskset -c "$CLIENT_CPU")
	log "$s: flood $FLOOD_QPS q/s + ECS resolver + cookie clients for ${DURATION}s"
	local load0 d0 d1 m0 m1
	load0=$(cut -d' ' -f1 /proc/loadavg)
	m0=$(machine_busy_ticks)
	d0=$(udp_drops "$port")
	t0=$(cpu_ticks "${PID[$s]}")
	# shellcheck disable=SC2086
	"${cpin[@]}" "$BIN/abuse" -server "$ADDR:$port" -label "$s" -duration "${DURATION}s" \
		-flood-qps "$FLOOD_QPS" -flood-edns "$FLOOD_EDNS" $GEN_ARGS >"$out" 2>"$RESULTS/logs/$s-abuse.err" ||
		{ cat "$RESULTS/logs/$s-abuse.err" >&2; die "generator failed against $s"; }
	t1=$(cpu_ticks "${PID[$s]}")
	d1=$(udp_drops "$port")
	m1=$(machine_busy_ticks)
	kill -0 "${PID[$s]}" 2>/dev/null || die "$s died under load (log: $RESULTS/logs/$s.log)"
	[ "$s" = steer ] && note="built from $STEER_BUILD; $STEER_NOTE"
	printf '{"server":"%s","class":"server","version":"%s","cpu_s":%s,"rx_drops":%s,"load_before":%s,"load_after":%s,"machine_busy_s":%s,"note":"%s"}\n' \
		"$s" "$(version_of "$s")" "$(awk -v t=$((t1 - t0)) -v hz="$HZ" 'BEGIN{printf "%.2f", t/hz}')" \
		"$((d1 - d0))" "$load0" "$(cut -d' ' -f1 /proc/loadavg)" \
		"$(awk -v t=$((m1 - m0)) -v hz="$HZ" 'BEGIN{printf "%.2f", t/hz}')" "${note//\"/\'}" >>"$out"
	log "$s: $(grep '"class":"flood"' "$out" | head -c 300)"
	stop_server "$s"
}

# ---- main ----------------------------------------------------------------------
mkdir -p "$RESULTS"/logs
if [ "$INSTALL" = 1 ]; then
	bind_missing=0
	dpkg-query -W -f='${Status}' bind9 2>/dev/null | grep -q "install ok installed" || bind_missing=1
	install_packages
	[ "$bind_missing" = 1 ] && stop_system_service named
fi
for c in named knotd nsd taskset ss; do command -v "$c" >/dev/null || die "$c not found (run without --no-install)"; done
NCPU=$(nproc)
if [ "$NCPU" -lt 2 ] && [ "$PIN" = 1 ]; then
	log "warning: 1 CPU: server and generator share it"
	SERVER_CPU=0 CLIENT_CPU=0
fi
build
write_configs
cp -r "$WORK/conf" "$RESULTS/configs"
rm -f "$RESULTS/configs/steer/cookie.secret"
{
	echo "date: $STAMP"
	echo "git: $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null)$(cd "$REPO" && git diff --quiet 2>/dev/null || echo ' (dirty)')"
	echo "duration: ${DURATION}s per server  flood: $FLOOD_QPS q/s EDNS $FLOOD_EDNS  TXT RDATA: $TXT_BYTES B  RRL: $RATE/s window ${WINDOW}s slip $SLIP"
	echo "pinned: $PIN (server cpu $SERVER_CPU, generator cpu $CLIENT_CPU)  cpus: $NCPU ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo))  kernel: $(uname -r)"
	for s in $SERVERS; do echo "$s: $(version_of "$s")"; done
	echo "steer: built from $STEER_BUILD; $STEER_NOTE"
	echo "loadavg at start: $(cat /proc/loadavg)"
} >"$RESULTS/env.txt"
cat "$RESULTS/env.txt" >&2

sleep "${SETTLE:-5}" # let the build's processes finish
for s in $SERVERS; do run_server "$s"; done
echo "loadavg at end: $(cat /proc/loadavg)" >>"$RESULTS/env.txt"

cat "$RESULTS"/*.jsonl >"$RESULTS/all.jsonl"
files=()
for s in $SERVERS; do files+=("$RESULTS/$s.jsonl"); done
"$BIN/abuse" -report "${files[@]}" | tee "$RESULTS/table.md"
ln -sfn "$(basename "$RESULTS")" "$REPO/bench/results/abuse-latest"
log "raw results: $RESULTS"
