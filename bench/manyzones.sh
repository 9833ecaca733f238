#!/usr/bin/env bash
# Many small zones: steer beside Knot DNS and NSD, as a hosting provider
# runs them. `bench/zonegen many` writes N zones of ten records each
# (SOA, two NS, MX, TXT, apex A, www A and AAAA, mail A, ftp CNAME), one
# file per zone, and every server loads all of them. One server at a time,
# it measures
#   - the time from exec to the correct answer for the last zone's www A,
#   - RSS 5 s after that answer (steady state), summed over the server's
#     processes, and PSS beside it (NSD forks: its shared pages count once),
#   - a reload after one zone changed (its www A and serial; the file gets
#     a new mtime): steer POST /v1/reload?zone=ZONE (it answers when the
#     reload is served; STEER_RELOAD=all: POST /v1/reload, every zone
#     file stamped), Knot `knotc -b zone-reload ZONE`, NSD `nsd-control
#     reload ZONE`, timed from the command to the changed answer,
# and checks the probes of the first, changed and last zones before and
# after the reload.
#
#   bench/manyzones.sh [--zones "10000 100000"] [--servers "steer knot nsd"]
#                      [--rev REV] [--no-install] [--keep]
#
# --rev builds steer from that commit (git archive) instead of the work
# tree. Run as root. Traffic goes to 127.0.0.1 only; every server it starts
# is stopped by its session id when it exits. Results: a markdown table on
# stdout and in bench/results/manyzones-<time>/ with the raw samples.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
ZONES="10000 100000"
SERVERS="steer knot nsd"
REV=""
STEADY_AFTER=${STEADY_AFTER:-5}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-900}
RELOAD_TIMEOUT=${RELOAD_TIMEOUT:-300}
INSTALL=1
KEEP=0
STEER_PORT=${STEER_PORT:-5351}
STEER_API=${STEER_API:-5352}
KNOT_PORT=${KNOT_PORT:-5353}
NSD_PORT=${NSD_PORT:-5354}
usage() { echo "usage: $0 [--zones \"10000 100000\"] [--servers \"steer knot nsd\"] [--rev REV] [--no-install] [--keep]" >&2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--zones) ZONES=$2; shift 2 ;;
	--servers) SERVERS=$2; shift 2 ;;
	--rev) REV=$2; shift 2 ;;
	--no-install) INSTALL=0; shift ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage; exit 2 ;;
	esac
done
for s in $SERVERS; do
	case "$s" in steer | knot | nsd) ;; *) echo "unknown server $s" >&2; exit 2 ;; esac
done

log() { printf '[manyzones %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts servers)"

WORK=$(mktemp -d /tmp/steer-manyzones.XXXXXX)
OUT="$REPO/bench/results/manyzones-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT/raw" "$OUT/logs" "$OUT/checks"
SIDS=()
CREATED_POLICY_RC=0

. "$REPO/bench/lib/session.sh" # stop_session, port_busy, ratio
cleanup() {
	local rc=$?
	set +e
	for s in "${SIDS[@]:-}"; do stop_session "$s"; done
	[ "$CREATED_POLICY_RC" = 1 ] && rm -f /usr/sbin/policy-rc.d
	if [ "$KEEP" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PKGS="knot knot-dnsutils nsd bind9-dnsutils"
. "$REPO/bench/lib/install.sh"
if [ "$INSTALL" = 1 ]; then install_packages; fi
need=(go curl ss setsid pgrep)
for s in $SERVERS; do
	case "$s" in knot) need+=(knotd knotc) ;; nsd) need+=(nsd nsd-control) ;; esac
done
for c in "${need[@]}"; do command -v "$c" >/dev/null || die "$c not found"; done

SRC=$REPO
if [ -n "$REV" ]; then
	SRC=$WORK/src
	mkdir -p "$SRC"
	(cd "$REPO" && git archive "$REV") | tar -x -C "$SRC"
fi
log "building steer (from ${REV:-the work tree}) and zonegen"
(cd "$SRC" && go build -o "$WORK/steer" ./cmd/steer)
(cd "$REPO" && go build -o "$WORK/zonegen" ./bench/zonegen)
ZG=$WORK/zonegen

{
	echo "start: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "zones: $ZONES"
	echo "servers: $SERVERS"
	if [ -n "$REV" ]; then
		echo "steer: $(cd "$REPO" && git rev-parse --short "$REV") (--rev $REV)"
	else
		echo "steer: $(cd "$REPO" && git rev-parse --short HEAD) (work tree$(cd "$REPO" && git diff --quiet HEAD -- . ':!bench' || echo ', with uncommitted changes'))"
	fi
	echo "go: $(go version)"
	for p in knot nsd; do echo "$p: $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo -)"; done
	echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/env.txt"

port_of() { case "$1" in steer) echo "$STEER_PORT" ;; knot) echo "$KNOT_PORT" ;; nsd) echo "$NSD_PORT" ;; esac; }

# configure SERVER DIR DATA: its configuration for every zone of DATA
# (origins.txt; the files are in DATA/zones, named <origin>zone).
configure() {
	local s=$1 d=$2 z=$3
	case "$s" in
	steer)
		{
			echo "listen: [\"127.0.0.1:$STEER_PORT\"]"
			echo "api: { listen: \"127.0.0.1:$STEER_API\" }"
			echo "zones:"
			awk -v z="$z/zones" '{ print "  - { origin: " $1 ", file: " z "/" $1 "zone }" }' "$z/origins.txt"
		} >"$d/steer.yaml"
		;;
	knot)
		mkdir -p "$d/run" "$d/storage"
		{
			cat <<EOF
server:
    rundir: $d/run
    listen: 127.0.0.1@$KNOT_PORT
control:
    listen: $d/run/knot.sock
log:
  - target: stderr
    any: notice
database:
    storage: $d/storage
template:
  - id: default
    storage: $z/zones
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
EOF
			awk '{ print "  - domain: " $1 "\n    file: " $1 "zone" }' "$z/origins.txt"
		} >"$d/knot.conf"
		;;
	nsd)
		{
			cat <<EOF
server:
    ip-address: 127.0.0.1@$NSD_PORT
    port: $NSD_PORT
    username: ""
    chroot: ""
    zonesdir: "$z/zones"
    database: ""
    zonelistfile: "$d/zone.list"
    xfrdfile: "$d/xfrd.state"
    xfrdir: "$d"
    pidfile: "$d/nsd.pid"
    logfile: "$d/nsd.log"
    verbosity: 1
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: yes
    control-interface: $d/nsd.sock
EOF
			awk '{ print "zone:\n    name: " $1 "\n    zonefile: " $1 "zone" }' "$z/origins.txt"
		} >"$d/nsd.conf"
		;;
	esac
}

start() { # SERVER DIR LOG: exec it in a new session; STARTED is its pid
	local s=$1 d=$2 logf=$3
	case "$s" in
	steer) setsid "$WORK/steer" serve --config "$d/steer.yaml" >"$logf" 2>&1 & ;;
	knot) setsid knotd -c "$d/knot.conf" >"$logf" 2>&1 & ;;
	nsd) setsid nsd -d -c "$d/nsd.conf" >"$logf" 2>&1 & ;;
	esac
	STARTED=$!
}

reload_cmd() { # SERVER DIR ZONE
	case "$1" in
	steer)
		if [ "${STEER_RELOAD:-zone}" = all ]; then
			echo "curl -sS -o $2/reload-response.json -X POST http://127.0.0.1:$STEER_API/v1/reload"
		else
			echo "curl -sS -o $2/reload-response.json -X POST http://127.0.0.1:$STEER_API/v1/reload?zone=$3"
		fi
		;;
	knot) echo "knotc -b -t $RELOAD_TIMEOUT -s $2/run/knot.sock zone-reload $3" ;;
	nsd) echo "nsd-control -c $2/nsd.conf reload $3" ;;
	esac
}

pss_kib() {
	local t=0 p v
	for p in $(pgrep -s "$1"); do
		v=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null) || v=0
		t=$((t + ${v:-0}))
	done
	echo "$t"
}
kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
mib() { awk -v k="$1" 'BEGIN { if (k + 0 > 0) printf "%.0f", k / 1024; else print "–" }'; }
secs() { awk -v s="$1" 'BEGIN { if (s == "" || s < 0) print "failed"; else if (s < 1) printf "%.0f ms", s * 1000; else printf "%.2f s", s }'; }
probe() { awk -F'\t' -v l="$2" -v c="$3" '$1 == l { n = split($c, f, " "); print (c == 2 ? $2 : f[n]) }' "$1"; }

RESULTS=$OUT/results.tsv
printf 'zones\tserver\tcheck1\tcheck2\tload_s\tload_cpu_s\tsteady_kib\tsteady_pss_kib\tprocs\treload_s\treload_cmd_s\n' >"$RESULTS"

run_server() { # SERVER ZONES
	local s=$1 n=$2 d=$WORK/n$2/$1 z=$WORK/zones-$2 port pid t0 line tag=$2-$1
	local last_name last_want ch_name ch_zone ch_new check1 check2 steady pss nprocs
	rm -rf "$d"
	mkdir -p "$d"
	cp "$z/orig.zone" "$z/zones/$(sed -n "$((n / 2 + 1))p" "$z/origins.txt")zone" # the changed zone as generated
	configure "$s" "$d" "$z"
	cp "$d"/*.conf "$d"/*.yaml "$OUT/logs/" 2>/dev/null || true
	port=$(port_of "$s")
	for p in "$port" $([ "$s" = steer ] && echo "$STEER_API"); do
		port_busy "$p" && die "port $p (for $s) is in use"
	done
	last_name=$(probe "$z/probes.tsv" last 2)
	last_want=$(probe "$z/probes.tsv" last 6)
	ch_name=$(probe "$z/probes.tsv" changed 2)
	ch_new=$(probe "$z/probes.tsv" changed 7)
	ch_zone=${ch_name#www.}

	log "$n zones: $s (load average $(cut -d' ' -f1 /proc/loadavg))"
	sync
	t0=$(date +%s%N)
	start "$s" "$d" "$OUT/logs/$tag.log"
	pid=$STARTED
	SIDS+=("$pid")
	line=$("$ZG" watch -server "127.0.0.1:$port" -name "$last_name" -want "$last_want" -since "$t0" -sid "$pid" \
		-timeout "${LOAD_TIMEOUT}s" -after "${STEADY_AFTER}s" -samples "$OUT/raw/$tag-load.tsv" 2>>"$OUT/logs/$tag.watch.log") || true
	echo "$line" >"$OUT/raw/$tag-load.txt"
	if [ -z "$line" ] || [ "$(kv answer_s "$line")" = "-1.000" ]; then
		log "$s: no answer for $last_name (log: $OUT/logs/$tag.log)"
		tail -5 "$OUT/logs/$tag.log" >&2
		stop_session "$pid"
		printf '%s\t%s\tfailed\tfailed\t-1\t-1\t0\t0\t0\t-1\t-1\n' "$n" "$s" >>"$RESULTS"
		return
	fi
	steady=$(kv end_kib "$line")
	pss=$(pss_kib "$pid")
	nprocs=$(pgrep -s "$pid" | wc -l)
	check1=$("$ZG" check -server "127.0.0.1:$port" -probes "$z/probes.tsv" -version 1 2>&1) || true
	printf '%s\n' "$check1" >"$OUT/checks/$tag-before.txt"
	log "$s: last zone answers after $(secs "$(kv answer_s "$line")"), steady RSS $(mib "$steady") MiB (PSS $(mib "$pss")), answers $(head -1 <<<"$check1")"

	# one zone changed: its www A and serial; a new mtime
	cp "$z/changed.zone" "$z/zones/$ch_zone"zone.tmp && touch "$z/zones/$ch_zone"zone.tmp && mv "$z/zones/$ch_zone"zone.tmp "$z/zones/$ch_zone"zone
	# shellcheck disable=SC2046
	line=$("$ZG" watch -server "127.0.0.1:$port" -name "$ch_name" -want "$ch_new" -sid "$pid" -steady "$steady" \
		-timeout "${RELOAD_TIMEOUT}s" -after 1s -samples "$OUT/raw/$tag-reload.tsv" -- $(reload_cmd "$s" "$d" "$ch_zone") 2>>"$OUT/logs/$tag.watch.log") || true
	echo "$line" >"$OUT/raw/$tag-reload.txt"
	check2=$("$ZG" check -server "127.0.0.1:$port" -probes "$z/probes.tsv" -version 2 2>&1) || true
	printf '%s\n' "$check2" >"$OUT/checks/$tag-after.txt"
	log "$s: changed answer after $(secs "$(kv answer_s "$line")") (command $(secs "$(kv cmd_s "$line")")); answers $(head -1 <<<"$check2")"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$s" "$(head -1 <<<"$check1")" "$(head -1 <<<"$check2")" \
		"$(kv answer_s "$(cat "$OUT/raw/$tag-load.txt")")" "$(kv cpu_s "$(cat "$OUT/raw/$tag-load.txt")")" \
		"$steady" "$pss" "$nprocs" "$(kv answer_s "$line")" "$(kv cmd_s "$line")" >>"$RESULTS"
	stop_session "$pid"
}

for n in $ZONES; do
	log "generating $n zones"
	"$ZG" many -zones "$n" -out "$WORK/zones-$n" >"$OUT/probes-$n.tsv" 2>"$WORK/zonegen-$n.log" ||
		{ cat "$WORK/zonegen-$n.log" >&2; die "zonegen failed"; }
	cp "$WORK/zones-$n/zones/$(sed -n "$((n / 2 + 1))p" "$WORK/zones-$n/origins.txt")zone" "$WORK/zones-$n/orig.zone"
	for s in $SERVERS; do run_server "$s" "$n"; done
done
echo "end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"

# RSS is compared with the smaller of Knot's RSS and NSD's PSS (NSD's
# forked processes share most pages).
{
	echo "| zones | server | answers (before / after) | start to last zone's answer | CPU by then | RSS steady | PSS steady | KiB per zone (PSS) | reload, one zone changed | start ×Knot | start ×NSD | memory ×min(Knot RSS, NSD PSS) | reload ×Knot |"
	echo "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	awk -F'\t' 'NR > 1' "$RESULTS" | while IFS=$'\t' read -r n s c1 c2 ls lcpu st pss np rs rcmd; do
		k=$(awk -F'\t' -v n="$n" '$1 == n && $2 == "knot"' "$RESULTS")
		ns=$(awk -F'\t' -v n="$n" '$1 == n && $2 == "nsd"' "$RESULTS")
		kl=$(cut -f5 <<<"$k"); kst=$(cut -f7 <<<"$k"); kr=$(cut -f10 <<<"$k")
		nl=$(cut -f5 <<<"$ns"); npss=$(cut -f8 <<<"$ns")
		best=$(awk -v a="${kst:-0}" -v b="${npss:-0}" 'BEGIN { if (a > 0 && (b <= 0 || a < b)) print a; else print b }')
		mine=$st
		[ "$s" = nsd ] && mine=$pss
		mark=""
		[[ $c1 == ok* && $c2 == ok* ]] || mark=" ✗"
		printf '| %s | %s%s | %s / %s | %s | %s | %s MiB | %s MiB | %s | %s | %s | %s | %s | %s |\n' "$n" "$s" "$mark" "${c1%% (*}" "${c2%% (*}" \
			"$(secs "$ls")" "$(secs "$lcpu")" "$(mib "$st")" "$(mib "$pss")" \
			"$(awk -v p="$pss" -v n="$n" 'BEGIN { printf "%.1f", p / n }')" "$(secs "$rs")" \
			"$(ratio "$ls" "$kl")" "$(ratio "$ls" "$nl")" "$(ratio "$mine" "$best")" "$(ratio "$rs" "$kr")"
	done
	echo
	echo "Start: exec to the correct answer for the last zone's www A, polled every 20 ms. RSS and PSS: ${STEADY_AFTER} s after it, summed over the server's processes. Reload: the command (steer POST /v1/reload$([ "${STEER_RELOAD:-zone}" = all ] || echo '?zone=ZONE'), Knot knotc -b zone-reload ZONE, NSD nsd-control reload ZONE) to the changed answer. Memory ratio: steer's RSS (NSD's PSS) over the smaller of Knot's RSS and NSD's PSS. ✗ = a probe answered wrong."
} >"$OUT/table.md"
cat "$OUT/table.md"
log "results: $OUT"
