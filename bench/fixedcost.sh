#!/usr/bin/env bash
# The fixed cost of a node: the memory steer holds serving one small zone,
# beside gdnsd, Knot DNS and NSD serving the same zone, in one run. steer
# runs as
#   min   one zone, nothing else (no steered name, API, RUM, query log,
#         anycast or fleet),
#   name  + one steered name with a continent rule (the embedded geo
#         database is loaded and a policy compiled),
#   api   + the admin API, after one GET /metrics and one GET /ui/,
# built as scripts/package.sh builds the release (CGO_ENABLED=0,
# -trimpath, -s -w) and copied into place as a package would install it.
# --baseline REV adds the same three rows for steer built from REV.
#
# Each server is started alone, asked until it answers (60 s at most),
# left SETTLE seconds, then sampled 5 times 0.5 s apart: RSS (VmRSS summed
# over the server's processes: NSD forks), its anonymous part (heap,
# stacks) and file part (the binary's and libraries' pages), and PSS (the
# pages shared between NSD's processes shared out). The median of the
# samples is taken, then the median over ROUNDS rounds, which interleave
# the servers. The ratios are to each peer in the same run.
#
#   bench/fixedcost.sh [--rounds 3] [--settle 5] [--baseline REV] [--servers "steer gdnsd knot nsd"] [--no-install] [--keep]
#
# Run as root. Traffic goes to 127.0.0.1 only; every server it starts is
# stopped when it exits. Results: a markdown table on stdout and in
# bench/results/fixedcost-<time>/ with the raw samples.
#
# The file part depends on how the kernel maps the binary: on kernels
# that map large page-cache folios whole (Linux 6.18 on ext4 here), almost
# all of a binary's text and read-only data is resident as soon as the
# process runs, so a Go binary's size is most of its RSS.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=3
SETTLE=${SETTLE:-5}
BASELINE=""
SERVERS="steer gdnsd knot nsd"
INSTALL=1
KEEP=0
STEER_PORT=${STEER_PORT:-5361}
STEER_API=${STEER_API:-5362}
GDNSD_PORT=${GDNSD_PORT:-5363}
KNOT_PORT=${KNOT_PORT:-5364}
NSD_PORT=${NSD_PORT:-5365}
usage() { echo "usage: $0 [--rounds N] [--settle S] [--baseline REV] [--servers \"steer gdnsd knot nsd\"] [--no-install] [--keep]" >&2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift 2 ;;
	--settle) SETTLE=$2; shift 2 ;;
	--baseline) BASELINE=$2; shift 2 ;;
	--servers) SERVERS=$2; shift 2 ;;
	--no-install) INSTALL=0; shift ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage; exit 2 ;;
	esac
done
for s in $SERVERS; do
	case "$s" in steer | gdnsd | knot | nsd) ;; *) echo "unknown server $s" >&2; exit 2 ;; esac
done

log() { printf '[fixedcost %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts servers)"

WORK=$(mktemp -d /tmp/steer-fixedcost.XXXXXX)
OUT="$REPO/bench/results/fixedcost-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT/raw" "$OUT/logs" "$OUT/configs"
SIDS=() # session ids of the servers started (each started with setsid)
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

# ---- install and build -----------------------------------------------------
PKGS="knot knot-dnsutils nsd gdnsd bind9-dnsutils"
. "$REPO/bench/lib/install.sh"
if [ "$INSTALL" = 1 ]; then install_packages; fi
need=(go curl ss setsid pgrep dig)
for s in $SERVERS; do
	case "$s" in knot) need+=(knotd) ;; nsd) need+=(nsd) ;; gdnsd) need+=(gdnsd) ;; esac
done
for c in "${need[@]}"; do command -v "$c" >/dev/null || die "$c not found"; done

# build_steer SRC OUT: the release build of steer from SRC, installed at OUT.
build_steer() {
	(cd "$1" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$WORK/build.steer" ./cmd/steer)
	install -m 755 "$WORK/build.steer" "$2" # written anew, as a package install writes it
	rm -f "$WORK/build.steer"
}
STEERS=()
if [[ " $SERVERS " == *" steer "* ]]; then
	log "building steer (work tree)"
	build_steer "$REPO" "$WORK/steer"
	STEERS+=(steer)
	if [ -n "$BASELINE" ]; then
		log "building steer at $BASELINE"
		mkdir -p "$WORK/src"
		(cd "$REPO" && git archive "$BASELINE") | tar -x -C "$WORK/src"
		build_steer "$WORK/src" "$WORK/steer-base"
		STEERS+=(steer-base)
	fi
fi

{
	echo "start: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "steer: $(cd "$REPO" && git rev-parse --short HEAD)$(cd "$REPO" && git diff --quiet HEAD -- . ':!bench' || echo ' (with uncommitted changes)')"
	[ -n "$BASELINE" ] && echo "baseline: $(cd "$REPO" && git rev-parse --short "$BASELINE") ($BASELINE)"
	for b in "${STEERS[@]}"; do echo "$b binary: $(stat -c %s "$WORK/$b") bytes"; done
	echo "go: $(go version)"
	for p in knot nsd gdnsd; do echo "$p: $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo -)"; done
	echo "cpus: $(nproc); kernel: $(uname -r); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "rounds: $ROUNDS, settle: $SETTLE s"
} >"$OUT/env.txt"

# ---- the zone and the configurations ---------------------------------------
ORIGIN=example.com
cat >"$WORK/zone" <<'EOF'
$ORIGIN example.com.
$TTL 300
@       SOA  ns1 hostmaster 2026120301 7200 3600 1209600 300
        NS   ns1
        NS   ns2
        MX   10 mail
        TXT  "v=spf1 mx -all"
ns1     A    192.0.2.1
ns2     A    192.0.2.2
mail    A    192.0.2.25
www     A    192.0.2.80
        AAAA 2001:db8::80
static  A    192.0.2.81
EOF

# The steer variants: NAME of the row, then the configuration's extra lines.
variant_extra() {
	case "$1" in
	min) ;;
	name)
		cat <<'EOF'
records:
  - name: shop.example.com
    type: A
    ttl: 60
    pools:
      eu: { address: 198.51.100.20 }
      us: { address: 192.0.2.30 }
    rules:
      - match: { continent: [NA, SA] }
        pool: us
      - default: { pool: eu }
EOF
		;;
	api) echo "api: { listen: \"127.0.0.1:$STEER_API\" }" ;;
	esac
}

# configure SERVER DIR [VARIANT]: its config and zone in DIR.
configure() {
	local s=$1 d=$2 v=${3:-}
	mkdir -p "$d"
	case "$s" in
	steer*)
		cp "$WORK/zone" "$d/$ORIGIN.zone"
		{
			echo "listen: [\"127.0.0.1:$STEER_PORT\"]"
			echo "zones: [{ origin: $ORIGIN, file: $ORIGIN.zone }]"
			variant_extra "$v"
		} >"$d/steer.yaml"
		;;
	knot)
		mkdir -p "$d/run" "$d/storage"
		cp "$WORK/zone" "$d/$ORIGIN.zone"
		cat >"$d/knot.conf" <<EOF
server:
    rundir: $d/run
    listen: 127.0.0.1@$KNOT_PORT
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
		cp "$WORK/zone" "$d/$ORIGIN.zone"
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
remote-control:
    control-enable: no
zone:
    name: $ORIGIN
    zonefile: $ORIGIN.zone
EOF
		;;
	gdnsd)
		mkdir -p "$d/zones"
		cp "$WORK/zone" "$d/zones/$ORIGIN"
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

port_of() { case "$1" in steer*) echo "$STEER_PORT" ;; knot) echo "$KNOT_PORT" ;; nsd) echo "$NSD_PORT" ;; gdnsd) echo "$GDNSD_PORT" ;; esac; }

# start SERVER DIR LOG: exec it in a new session; sets STARTED to its pid
# (= its session id).
start() {
	local s=$1 d=$2 logf=$3
	case "$s" in
	steer*) setsid "$WORK/$s" serve --config "$d/steer.yaml" >"$logf" 2>&1 & ;;
	knot) setsid knotd -c "$d/knot.conf" >"$logf" 2>&1 & ;;
	nsd) setsid nsd -d -c "$d/nsd.conf" >"$logf" 2>&1 & ;;
	gdnsd) setsid gdnsd -c "$d" start >"$logf" 2>&1 & ;;
	esac
	STARTED=$!
}

# sample SID: "rss anon file pss threads procs" in KiB, summed over the
# session's processes.
sample() {
	local p rss=0 anon=0 file=0 pss=0 thr=0 n=0 v
	for p in $(pgrep -s "$1"); do
		v=$(awk '/^VmRSS:/ {r=$2} /^RssAnon:/ {a=$2} /^RssFile:/ {f=$2} /^RssShmem:/ {f+=$2} /^Threads:/ {t=$2} END {print r+0, a+0, f+0, t+0}' "/proc/$p/status" 2>/dev/null) || continue
		read -r a b c d <<<"$v"
		rss=$((rss + a)); anon=$((anon + b)); file=$((file + c)); thr=$((thr + d)); n=$((n + 1))
		v=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null) || v=0
		pss=$((pss + ${v:-0}))
	done
	echo "$rss $anon $file $pss $thr $n"
}

RESULTS=$OUT/samples.tsv
printf 'round\trow\trss_kib\tanon_kib\tfile_kib\tpss_kib\tthreads\tprocs\n' >"$RESULTS"

# run ROUND ROW SERVER [VARIANT]: one measurement.
run() {
	local round=$1 row=$2 s=$3 v=${4:-} d pid port i ok=0 tag
	tag="$row-r$round"
	d=$WORK/$tag
	configure "$s" "$d" "$v"
	[ "$round" = 1 ] && mkdir -p "$OUT/configs/$row" && find "$d" -maxdepth 1 -type f ! -name "$ORIGIN*" -exec cp {} "$OUT/configs/$row/" \;
	port=$(port_of "$s")
	for p in "$port" $([ "$v" = api ] && echo "$STEER_API"); do
		port_busy "$p" && die "port $p (for $s) is in use; set ${s^^}_PORT"
	done
	start "$s" "$d" "$OUT/logs/$tag.log"
	pid=$STARTED
	SIDS+=("$pid")
	for i in $(seq 600); do
		if [ "$v" = name ]; then
			[ "$(dig +short +time=1 +tries=1 @127.0.0.1 -p "$port" shop.example.com A 2>/dev/null)" = 198.51.100.20 ] && ok=1 && break
		else
			[ "$(dig +short +time=1 +tries=1 @127.0.0.1 -p "$port" www.example.com A 2>/dev/null)" = 192.0.2.80 ] && ok=1 && break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ "$ok" != 1 ]; then
		tail -5 "$OUT/logs/$tag.log" >&2
		die "$row did not answer (log: $OUT/logs/$tag.log)"
	fi
	if [ "$v" = api ]; then
		# the API is bound after the DNS listeners
		for i in $(seq 100); do
			curl -sf -o /dev/null "http://127.0.0.1:$STEER_API/healthz" 2>/dev/null && break
			sleep 0.1
		done
		curl -sS -o /dev/null "http://127.0.0.1:$STEER_API/metrics" || die "$row: GET /metrics failed"
		curl -sS -o /dev/null -H 'Accept-Encoding: gzip' "http://127.0.0.1:$STEER_API/ui/" || die "$row: GET /ui/ failed"
	fi
	sleep "$SETTLE"
	: >"$OUT/raw/$tag.txt"
	for i in 1 2 3 4 5; do
		sample "$pid" >>"$OUT/raw/$tag.txt"
		sleep 0.5
	done
	# the median sample by RSS
	read -r rss anon file pss thr procs < <(sort -n "$OUT/raw/$tag.txt" | sed -n 3p)
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$row" "$rss" "$anon" "$file" "$pss" "$thr" "$procs" >>"$RESULTS"
	log "round $round: $row RSS $((rss / 1024)) MiB (anon $((anon / 1024)), file $((file / 1024)), PSS $((pss / 1024))), $thr threads in $procs processes"
	stop_session "$pid"
}

ROWS=()
for s in "${STEERS[@]}"; do
	for v in min name api; do ROWS+=("$s:$v"); done
done
for s in gdnsd knot nsd; do [[ " $SERVERS " == *" $s "* ]] && ROWS+=("$s:"); done

for round in $(seq "$ROUNDS"); do
	# rotate the order each round
	n=${#ROWS[@]}
	for i in $(seq 0 $((n - 1))); do
		r=${ROWS[$(((i + round - 1) % n))]}
		s=${r%%:*} v=${r#*:}
		row=$s
		[ -n "$v" ] && row="$s-$v"
		run "$round" "$row" "$s" "$v"
	done
done
echo "end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"

# ---- report ----------------------------------------------------------------
# median over the rounds of column COL for ROW
med() {
	awk -F'\t' -v r="$1" -v c="$2" 'NR > 1 && $2 == r {print $c}' "$RESULTS" | sort -n |
		awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
mib() { awk -v k="$1" 'BEGIN { if (k + 0 > 0) printf "%.1f", k / 1024; else print "–" }'; }
{
	echo "| server | RSS | anon | file | PSS | threads | RSS ×gdnsd | RSS ×Knot | RSS ×NSD | PSS ×gdnsd | PSS ×Knot | PSS ×NSD |"
	echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	g=$(med gdnsd 3) k=$(med knot 3) ns=$(med nsd 3)
	gp=$(med gdnsd 6) kp=$(med knot 6) np=$(med nsd 6)
	for r in "${ROWS[@]}"; do
		s=${r%%:*} v=${r#*:}
		row=$s
		[ -n "$v" ] && row="$s-$v"
		rss=$(med "$row" 3) pss=$(med "$row" 6)
		printf '| %s | %s MiB | %s | %s | %s MiB | %s | %s | %s | %s | %s | %s | %s |\n' "$row" "$(mib "$rss")" "$(mib "$(med "$row" 4)")" \
			"$(mib "$(med "$row" 5)")" "$(mib "$pss")" "$(med "$row" 7)" "$(ratio "$rss" "$g")" "$(ratio "$rss" "$k")" "$(ratio "$rss" "$ns")" \
			"$(ratio "$pss" "$gp")" "$(ratio "$pss" "$kp")" "$(ratio "$pss" "$np")"
	done
	echo
	echo "Medians over $ROUNDS rounds of the median of 5 samples taken ${SETTLE} s after the first answer; MiB. anon: heap, stacks and other private memory; file: mapped files (the binary, libraries; NSD's shared memory). Summed over a server's processes (NSD: 3). steer-min: one zone; -name: + one steered name (geo database, one policy); -api: + the admin API after one GET /metrics and /ui/.${BASELINE:+ steer-base: built from $BASELINE.}"
} >"$OUT/table.md"
cat "$OUT/table.md"
log "results: $OUT"
