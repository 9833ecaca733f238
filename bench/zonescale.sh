#!/usr/bin/env bash
# Large plain zone: steer beside Knot DNS, NSD and gdnsd. bench/zonegen
# writes one zone of N records (A/AAAA hosts several labels deep, CNAMEs,
# TXT, MX, delegations with glue, a wildcard) that every server loads. One
# server at a time, it measures
#   - the time from exec to the first correct answer for the last record,
#   - RSS 5 s after that answer (steady state; summed over the session's
#     processes, so NSD's forks count, and PSS beside it),
#   - a reload after one record changed and the serial went up: time to the
#     changed answer, peak RSS during it and for 15 s after, and when RSS
#     came back within 10 % of steady,
#   - a reload with nothing changed,
# and checks every probe zonegen prints (before and after the reload).
#
#   bench/zonescale.sh [--records "1000000"] [--servers "steer knot nsd gdnsd"]
#                      [--rev REV] [--after 15] [--no-install] [--keep]
#
# --records takes one size or several ("100000 1000000"). --rev builds steer
# from that commit (git archive) instead of the work tree. Run as root.
# Traffic goes to 127.0.0.1 only; every server it starts is stopped when it
# exits. Results: a markdown table on stdout and in
# bench/results/zonescale-<time>/ with the raw samples.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
RECORDS=1000000
SERVERS="steer knot nsd gdnsd"
REV=""
AFTER=${AFTER:-15}               # seconds of sampling after the reload's answer
STEADY_AFTER=${STEADY_AFTER:-5}  # seconds after the first answer = steady state
LOAD_TIMEOUT=${LOAD_TIMEOUT:-900}
RELOAD_TIMEOUT=${RELOAD_TIMEOUT:-600}
INSTALL=1
KEEP=0
STEER_PORT=${STEER_PORT:-5341}
STEER_API=${STEER_API:-5342}
KNOT_PORT=${KNOT_PORT:-5343}
NSD_PORT=${NSD_PORT:-5344}
GDNSD_PORT=${GDNSD_PORT:-5345}
ORIGIN=big.test
usage() { echo "usage: $0 [--records \"1000000\"] [--servers \"steer knot nsd gdnsd\"] [--rev REV] [--after S] [--no-install] [--keep]" >&2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--records) RECORDS=$2; shift 2 ;;
	--servers) SERVERS=$2; shift 2 ;;
	--rev) REV=$2; shift 2 ;;
	--after) AFTER=$2; shift 2 ;;
	--no-install) INSTALL=0; shift ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage; exit 2 ;;
	esac
done
for s in $SERVERS; do
	case "$s" in steer | knot | nsd | gdnsd) ;; *) echo "unknown server $s" >&2; exit 2 ;; esac
done

log() { printf '[zonescale %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts servers)"

WORK=$(mktemp -d /tmp/steer-zonescale.XXXXXX)
OUT="$REPO/bench/results/zonescale-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT/raw" "$OUT/logs" "$OUT/configs" "$OUT/checks"
SIDS=()          # session ids of the servers started (each started with setsid)
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

# ---- install ---------------------------------------------------------------
PKGS="knot knot-dnsutils nsd gdnsd bind9-dnsutils dnsperf"
. "$REPO/bench/lib/install.sh"
if [ "$INSTALL" = 1 ]; then install_packages; fi
need=(go curl ss setsid pgrep dig)
for s in $SERVERS; do
	case "$s" in knot) need+=(knotd knotc) ;; nsd) need+=(nsd nsd-control) ;; gdnsd) need+=(gdnsd gdnsdctl) ;; esac
done
for c in "${need[@]}"; do command -v "$c" >/dev/null || die "$c not found"; done

# ---- build -----------------------------------------------------------------
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
	echo "records: $RECORDS"
	echo "servers: $SERVERS"
	if [ -n "$REV" ]; then
		echo "steer: $(cd "$REPO" && git rev-parse --short "$REV") (--rev $REV)"
	elif (cd "$REPO" && git diff --quiet HEAD -- . ':!bench'); then
		echo "steer: $(cd "$REPO" && git rev-parse --short HEAD) (work tree)"
	else
		echo "steer: $(cd "$REPO" && git rev-parse --short HEAD) (work tree, with uncommitted changes)"
	fi
	echo "go: $(go version)"
	for p in knot nsd gdnsd; do echo "$p: $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo -)"; done
	echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "kernel: $(uname -r)"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/env.txt"
awk '{ if ($1 > 1.0) exit 0; exit 1 }' /proc/loadavg && log "warning: load average $(cut -d' ' -f1 /proc/loadavg): the machine is not quiet"

# ---- servers ---------------------------------------------------------------
port_of() { case "$1" in steer) echo "$STEER_PORT" ;; knot) echo "$KNOT_PORT" ;; nsd) echo "$NSD_PORT" ;; gdnsd) echo "$GDNSD_PORT" ;; esac; }

# zone_path SERVER DIR: where that server reads the zone.
zone_path() {
	case "$1" in
	gdnsd) echo "$2/zones/$ORIGIN" ;;
	*) echo "$2/$ORIGIN.zone" ;;
	esac
}

# configure SERVER DIR: write its config (the zone is copied in by the caller).
configure() {
	local s=$1 d=$2
	case "$s" in
	steer)
		cat >"$d/steer.yaml" <<EOF
listen: ["127.0.0.1:$STEER_PORT"]
api: { listen: "127.0.0.1:$STEER_API" }
zones: [{ origin: $ORIGIN, file: $ORIGIN.zone }]
EOF
		;;
	knot)
		mkdir -p "$d/run" "$d/storage"
		cat >"$d/knot.conf" <<EOF
server:
    rundir: $d/run
    listen: 127.0.0.1@$KNOT_PORT
control:
    listen: $d/run/knot.sock
log:
  - target: stderr
    any: info
database:
    storage: $d/storage
template:
  - id: default
    storage: $d
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: $ORIGIN
    file: $ORIGIN.zone
EOF
		;;
	nsd)
		cat >"$d/nsd.conf" <<EOF
server:
    ip-address: 127.0.0.1@$NSD_PORT
    port: $NSD_PORT
    username: ""
    chroot: ""
    zonesdir: "$d"
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
zone:
    name: $ORIGIN
    zonefile: $ORIGIN.zone
EOF
		;;
	gdnsd)
		mkdir -p "$d/zones"
		cat >"$d/config" <<EOF
options => {
  listen => [ 127.0.0.1:$GDNSD_PORT ]
  run_dir => $d/run
  state_dir => $d/state
}
EOF
		;;
	esac
}

# start SERVER DIR LOG: exec it in a new session, in the foreground; sets
# STARTED to its pid (= its session id).
start() {
	local s=$1 d=$2 logf=$3
	case "$s" in
	steer) setsid "$WORK/steer" serve --config "$d/steer.yaml" >"$logf" 2>&1 & ;;
	knot) setsid knotd -c "$d/knot.conf" >"$logf" 2>&1 & ;;
	nsd) setsid nsd -d -c "$d/nsd.conf" >"$logf" 2>&1 & ;;
	gdnsd) setsid gdnsd -c "$d" start >"$logf" 2>&1 & ;;
	esac
	STARTED=$!
}

# reload_cmd SERVER DIR: the command that reloads the zone (waiting, where the server has a way).
reload_cmd() {
	case "$1" in
	steer) echo "curl -sS -o $2/reload-response.json -X POST http://127.0.0.1:$STEER_API/v1/reload" ;;
	knot) echo "knotc -b -t $RELOAD_TIMEOUT -s $2/run/knot.sock zone-reload $ORIGIN" ;;
	nsd) echo "nsd-control -c $2/nsd.conf reload $ORIGIN" ;;
	gdnsd) echo "gdnsdctl -t 300 -c $2 reload-zones" ;;
	esac
}

pss_kib() { # SID: PSS summed over the session's processes
	local t=0 p v
	for p in $(pgrep -s "$1"); do
		v=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null) || v=0
		t=$((t + ${v:-0}))
	done
	echo "$t"
}
nproc_of() { pgrep -s "$1" | wc -l; }

kv() { # KEY LINE: the value of KEY=... in a zonegen watch line
	sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"
}
mib() { awk -v k="$1" 'BEGIN { if (k + 0 > 0) printf "%.0f", k / 1024; else print "–" }'; }
secs() { awk -v s="$1" 'BEGIN { if (s < 0) print "failed"; else if (s < 1) printf "%.0f ms", s * 1000; else printf "%.2f s", s }'; }

RESULTS=$OUT/results.tsv
printf 'records\tserver\tcheck1\tcheck2\tload_s\tload_cpu_s\tload_peak_kib\tsteady_kib\tsteady_pss_kib\tprocs\treload_s\treload_cmd_s\treload_peak_kib\treload_back_s\treload_end_kib\tnoop_cmd_s\tnoop_answer_s\tnoop_peak_kib\n' >"$RESULTS"

run_server() { # SERVER RECORDS
	local s=$1 n=$2 d=$WORK/n$2/$1 z=$WORK/zones/$2 port pid t0 line zf tag=$2-$1
	local last_name last_want ch_name ch_new check1 check2 steady pss nprocs
	mkdir -p "$d"
	configure "$s" "$d"
	zf=$(zone_path "$s" "$d")
	cp "$z/zone" "$zf"
	mkdir -p "$OUT/configs/$tag" && find "$d" -maxdepth 1 -type f ! -name "$ORIGIN*" -exec cp {} "$OUT/configs/$tag/" \;
	port=$(port_of "$s")
	for p in "$port" $([ "$s" = steer ] && echo "$STEER_API"); do
		port_busy "$p" && die "port $p (for $s) is in use; set ${s^^}_PORT"
	done
	last_name=$(awk -F'\t' '$1 == "last" {print $2}' "$z/probes.tsv")
	last_want=$(awk -F'\t' '$1 == "last" {n = split($6, f, " "); print f[n]}' "$z/probes.tsv")
	ch_name=$(awk -F'\t' '$1 == "changed" {print $2}' "$z/probes.tsv")
	ch_new=$(awk -F'\t' '$1 == "changed" {n = split($7, f, " "); print f[n]}' "$z/probes.tsv")

	log "$n records: $s (load average $(cut -d' ' -f1 /proc/loadavg))"
	sync
	t0=$(date +%s%N)
	start "$s" "$d" "$OUT/logs/$tag.log"
	pid=$STARTED
	SIDS+=("$pid")
	[ "$(awk '{ sub(/.*\) /, ""); print $4 }' "/proc/$pid/stat" 2>/dev/null)" = "$pid" ] || sleep 0.05
	[ "$(awk '{ sub(/.*\) /, ""); print $4 }' "/proc/$pid/stat" 2>/dev/null)" = "$pid" ] ||
		{ tail -5 "$OUT/logs/$tag.log" >&2; die "$s (pid $pid) is not its own session"; }

	# load: exec to the last record's answer, then STEADY_AFTER s more
	line=$("$ZG" watch -server "127.0.0.1:$port" -name "$last_name" -want "$last_want" -since "$t0" -sid "$pid" \
		-timeout "${LOAD_TIMEOUT}s" -after "${STEADY_AFTER}s" -samples "$OUT/raw/$tag-load.tsv" 2>>"$OUT/logs/$tag.watch.log") || true
	echo "$line" >"$OUT/raw/$tag-load.txt"
	if [ "$(kv answer_s "$line")" = "-1.000" ] || [ -z "$line" ]; then
		log "$s: no answer for $last_name (log: $OUT/logs/$tag.log)"
		tail -5 "$OUT/logs/$tag.log" >&2
		stop_session "$pid"
		printf '%s\t%s\tfailed\tfailed\t-1\t-1\t0\t0\t0\t0\t-1\t-1\t0\tna\t0\t-1\t-1\t0\n' "$n" "$s" >>"$RESULTS"
		return
	fi
	steady=$(kv end_kib "$line")
	pss=$(pss_kib "$pid")
	nprocs=$(nproc_of "$pid")
	check1=$("$ZG" check -server "127.0.0.1:$port" -probes "$z/probes.tsv" -version 1 2>&1) || true
	printf '%s\n' "$check1" >"$OUT/checks/$tag-before.txt"
	log "$s: first answer $(secs "$(kv answer_s "$line")"), steady RSS $(mib "$steady") MiB (PSS $(mib "$pss")), answers $(head -1 <<<"$check1")"

	# reload with one record changed and the serial up; the new file gets a new mtime
	cp "$z/zone.v2" "$zf.tmp" && touch "$zf.tmp" && mv "$zf.tmp" "$zf"
	# shellcheck disable=SC2046
	line=$("$ZG" watch -server "127.0.0.1:$port" -name "$ch_name" -want "$ch_new" -sid "$pid" -steady "$steady" \
		-timeout "${RELOAD_TIMEOUT}s" -after "${AFTER}s" -samples "$OUT/raw/$tag-reload.tsv" -- $(reload_cmd "$s" "$d") 2>>"$OUT/logs/$tag.watch.log") || true
	echo "$line" >"$OUT/raw/$tag-reload.txt"
	local r_ans r_cmd r_peak r_back r_end
	r_ans=$(kv answer_s "$line"); r_cmd=$(kv cmd_s "$line"); r_peak=$(kv peak_kib "$line"); r_back=$(kv back_s "$line"); r_end=$(kv end_kib "$line")
	check2=$("$ZG" check -server "127.0.0.1:$port" -probes "$z/probes.tsv" -version 2 2>&1) || true
	printf '%s\n' "$check2" >"$OUT/checks/$tag-after.txt"
	log "$s: changed answer after $(secs "${r_ans:--1}") (command $(secs "${r_cmd:--1}")), peak RSS $(mib "$r_peak") MiB, back within 10 %: ${r_back:-?} s; answers $(head -1 <<<"$check2")"

	# reload with nothing changed (the same file, untouched)
	line=$("$ZG" watch -server "127.0.0.1:$port" -name "$ch_name" -want "$ch_new" -sid "$pid" -steady "$steady" \
		-timeout "${RELOAD_TIMEOUT}s" -after 3s -samples "$OUT/raw/$tag-noop.tsv" -- $(reload_cmd "$s" "$d") 2>>"$OUT/logs/$tag.watch.log") || true
	echo "$line" >"$OUT/raw/$tag-noop.txt"
	log "$s: reload with nothing changed: command $(secs "$(kv cmd_s "$line")")"
	dig @127.0.0.1 -p "$port" "$ORIGIN" SOA +norec +short +time=1 +tries=1 >>"$OUT/logs/$tag.watch.log" 2>&1 || true

	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$s" \
		"$(head -1 <<<"$check1")" "$(head -1 <<<"$check2")" \
		"$(kv answer_s "$(cat "$OUT/raw/$tag-load.txt")")" "$(kv cpu_s "$(cat "$OUT/raw/$tag-load.txt")")" "$(kv peak_kib "$(cat "$OUT/raw/$tag-load.txt")")" \
		"$steady" "$pss" "$nprocs" "${r_ans:--1}" "${r_cmd:--1}" "${r_peak:-0}" "${r_back:-na}" "${r_end:-0}" \
		"$(kv cmd_s "$line")" "$(kv answer_s "$line")" "$(kv peak_kib "$line")" >>"$RESULTS"
	stop_session "$pid"
}

for n in $RECORDS; do
	log "generating $n records"
	"$ZG" gen -records "$n" -origin "$ORIGIN." -out "$WORK/zones/$n" >/dev/null 2>"$WORK/zonegen-$n.log" ||
		{ cat "$WORK/zonegen-$n.log" >&2; die "zonegen failed"; }
	cat "$WORK/zonegen-$n.log" >&2
	cp "$WORK/zones/$n/probes.tsv" "$OUT/probes-$n.tsv"
	ls -l "$WORK/zones/$n/zone" | awk '{print "zone file: " $5 " bytes"}' >>"$OUT/env.txt"
	for s in $SERVERS; do run_server "$s" "$n"; done
done
echo "end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"

# ---- report ----------------------------------------------------------------
{
	echo "| records | server | answers (before / after reload) | load to first answer | CPU to first answer | RSS steady | PSS steady | reload (one record) | peak RSS in reload (× steady) | back to steady after | RSS ${AFTER} s after (× steady) | reload, nothing changed | load ×Knot | RSS ×Knot | reload ×Knot |"
	echo "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	awk -F'\t' -v OFS='\t' 'NR > 1' "$RESULTS" | while IFS=$'\t' read -r n s c1 c2 ls lcpu lpeak st pss np rs rcmd rpeak rback rend ncmd nans npeak; do
		k=$(awk -F'\t' -v n="$n" '$1 == n && $2 == "knot"' "$RESULTS")
		kl=$(cut -f5 <<<"$k"); kst=$(cut -f8 <<<"$k"); kr=$(cut -f11 <<<"$k")
		mark=""
		[[ $c1 == ok* && $c2 == ok* ]] || mark=" ✗"
		case "$rback" in
		0) back="stayed within" ;; -1) back="not within ${AFTER} s" ;; na | "") back="–" ;; *) back=$(secs "$rback") ;;
		esac
		peak="–"
		[ "${rpeak:-0}" -gt 0 ] 2>/dev/null && peak="$(mib "$rpeak") MiB ($(ratio "$rpeak" "$st")×)"
		endr="–"
		[ "${rend:-0}" -gt 0 ] 2>/dev/null && endr="$(mib "$rend") MiB ($(ratio "$rend" "$st")×)"
		noop=$(secs "${ncmd:--1}")
		[ "$s" = nsd ] && noop="$noop ¹"
		answers="${c1%% (*} / ${c2%% (*}"
		[[ "$c1$c2" == *"CNAME not followed"* ]] && answers="$answers ²"
		printf '| %s | %s%s | %s | %s | %s | %s MiB | %s MiB | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$n" "$s" "$mark" "$answers" \
			"$(secs "$ls")" "$(secs "$lcpu")" "$(mib "$st")" "$(mib "$pss")" "$(secs "$rs")" "$peak" "$back" "$endr" "$noop" \
			"$(ratio "$ls" "$kl")" "$(ratio "$st" "$kst")" "$(ratio "$rs" "$kr")"
	done
	echo
	echo "Load: exec to the first correct answer for the last record written, polled every 20 ms; CPU: user+system time of the server's processes by then (on 2 cores, it can exceed the wall time). RSS steady: ${STEADY_AFTER} s after it, summed over the server's processes (NSD: xfrd, main and server child, so pages shared by fork count more than once; PSS shares them out). Reload: the reload command to the first changed answer, RSS sampled every 50 ms until ${AFTER} s after it; back to steady = from the command until RSS stays within 10 % of steady. ✗ = a probe answered wrong."
	echo "¹ nsd-control returns once NSD has the command, and NSD skips a zone file whose mtime has not changed."
	echo "² the answer to an A query for a CNAME in the zone has the CNAME but not its in-zone target (allowed; the other servers add it)."
} >"$OUT/table.md"
cat "$OUT/table.md"
log "results: $OUT"
