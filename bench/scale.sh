#!/usr/bin/env bash
# Scale harness: steer beside gdnsd with many steered names over a few
# distinct policies (issue 12). For each size it generates the same names,
# zone and geo maps for both servers (gdnsd: one geoip map per policy,
# resources referring to it; steer: one named policy per map, records
# referring to it), starts each server and measures
#   - the time from exec to the first correct steered answer (the last
#     name, with an Indian client subnet, must get Mumbai), the CPU the
#     server had used by then, and steer's peak RSS by then (VmHWM: the
#     start-up's compile),
#   - RSS 3 s after the first answer (steady state),
#   - steer's RSS 2 s after one /metrics scrape (and the scrape's time and
#     size), against the steady RSS,
#   - between consecutive sizes, the RSS each added name costs (KiB), for
#     both servers, and the ratio,
# and for both a reload that changes nothing and one that changes one
# record (steer: POST /v1/reload, which waits for the reload; gdnsd:
# gdnsdctl replace, as its geoip resources live in its configuration): its
# time and the peak RSS sampled every 10 ms meanwhile, and that the change
# is answered.
#
#   bench/scale.sh [--sizes "1 100 1000 10000"] [--policies 5] [--db FILE] [--steer BINARY] [--no-install]
#
# --steer runs a steer binary built elsewhere (an older commit, to compare
# with); by default the working tree is built.
# --db is a GeoIP2-shaped database both servers load instead of the
# embedded one converted (bench/citygen writes a City-shaped one with
# millions of networks).
#
# Traffic goes to 127.0.0.1 only; every server it starts is stopped when it
# exits. Results: a markdown table on stdout and in bench/results/scale-<time>/.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
. "$REPO/bench/lib/scale-records.sh"
. "$REPO/bench/lib/rss.sh"
SIZES="1 100 1000 10000"
POLICIES=5
INSTALL=1
DB=""
STEER_BIN=""
STEER_PORT=${STEER_PORT:-5311}
STEER_API=${STEER_API:-5312}
GDNSD_PORT=${GDNSD_PORT:-5313}
while [ $# -gt 0 ]; do
	case "$1" in
	--sizes) SIZES=$2; shift 2 ;;
	--policies) POLICIES=$2; shift 2 ;;
	--db) DB=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
	--steer) STEER_BIN=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
	--no-install) INSTALL=0; shift ;;
	*) echo "usage: $0 [--sizes \"1 100 1000 10000\"] [--policies N] [--db FILE] [--steer BINARY] [--no-install]" >&2; exit 2 ;;
	esac
done

WORK=$(mktemp -d)
OUT="$REPO/bench/results/scale-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	pkill -f "gdnsd -c $WORK/" 2>/dev/null || true # a replacement gdnsd started by gdnsdctl
	rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "== $*" >&2; }
die() { echo "scale.sh: $*" >&2; exit 1; }

if [ "$INSTALL" = 1 ] && ! command -v gdnsd >/dev/null; then
	log "installing gdnsd (its service kept off)"
	created=0
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && created=1
	fi
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gdnsd bind9-dnsutils >/dev/null
	[ "$created" = 1 ] && rm -f /usr/sbin/policy-rc.d
	systemctl disable gdnsd.service >/dev/null 2>&1 || true
fi
for c in gdnsd dig curl go; do command -v "$c" >/dev/null || die "$c not found"; done

log "building steer and geoconv"
if [ -n "$STEER_BIN" ]; then
	cp "$STEER_BIN" "$WORK/steer"
	(cd "$REPO" && go build -o "$WORK/geoconv" ./bench/geoconv)
else
	(cd "$REPO" && go build -o "$WORK/steer" ./cmd/steer && go build -o "$WORK/geoconv" ./bench/geoconv)
fi
# gdnsd reads GeoIP2 layouts only: both servers load the same converted file.
if [ -n "$DB" ]; then
	ln -s "$DB" "$WORK/geo.mmdb"
else
	"$WORK/geoconv" -in "$REPO/internal/geo/embedded/iptoasn-country.mmdb.gz" -out "$WORK/geo.mmdb" 2>/dev/null
fi
CONTINENTS=(NA EU EU SA AS AS EU EU EU NA NA OC) # of each country, for gdnsd's nested map

zone_base() {
	cat <<'EOF'
$ORIGIN example.com.
$TTL 3600
@       300 IN SOA  ns1.example.com. hostmaster.example.com. 2026113001 7200 3600 1209600 300
        IN NS   ns1
ns1     IN A    192.0.2.53
EOF
}

# gen N DIR: the steer and gdnsd configurations for N names.
gen() {
	local n=$1 d=$2 i k
	mkdir -p "$d/steer" "$d/gdnsd/zones"
	zone_base >"$d/steer/example.com.zone"
	{
		echo "listen: [\"127.0.0.1:$STEER_PORT\"]"
		echo "api: { listen: \"127.0.0.1:$STEER_API\" }"
		echo "geo: { databases: [$WORK/geo.mmdb] }"
		echo "zones: [{ origin: example.com, file: example.com.zone }]"
		scale_policies_and_records "$n" "$POLICIES"
	} >"$d/steer/steer.yaml"
	{
		zone_base
		for ((i = 0; i < n; i++)); do echo "s$i 60 DYNA geoip!s$i"; done
	} >"$d/gdnsd/zones/example.com"
	{
		cat <<EOF
options => {
  listen => [ 127.0.0.1:$GDNSD_PORT ]
  run_dir => $d/gdnsd/run
  state_dir => $d/gdnsd/state
  edns_client_subnet => true
  udp_threads => 1
  tcp_threads => 1
}
plugins => { geoip => {
  maps => {
EOF
		for ((k = 0; k < POLICIES; k++)); do
			local cc=${SCALE_COUNTRIES[$k]} ct=${CONTINENTS[$k]} as eu other=""
			as="AS => { default => [ virginia ], IN => [ mumbai ] }"
			eu="EU => [ frankfurt ]"
			case "$ct" in
			AS) as="AS => { default => [ virginia ], IN => [ mumbai ], $cc => [ mumbai ] }" ;;
			EU) eu="EU => { default => [ frankfurt ], $cc => [ mumbai ] }" ;;
			*) other=", $ct => { default => [ virginia ], $cc => [ mumbai ] }" ;;
			esac
			echo "    p$k => { geoip2_db => $WORK/geo.mmdb, datacenters => [ virginia, mumbai, frankfurt ],"
			echo "      map => { default => [ virginia ], $as, $eu$other } }"
		done
		echo "  }"
		echo "  resources => {"
		for ((i = 0; i < n; i++)); do
			printf '    s%d => { map => p%d, dcmap => { virginia => 192.0.2.%d, mumbai => 203.0.113.%d, frankfurt => 198.51.100.%d } }\n' \
				"$i" $((i % POLICIES)) $((i % 250 + 1)) $((i % 250 + 1)) $((i % 250 + 1))
		done
		echo "  }"
		echo "} }"
	} >"$d/gdnsd/config"
}

# answered PORT NAME WANT: the steered answer is right.
answered() {
	[ "$(dig @127.0.0.1 -p "$1" "$2" A +norec +subnet=49.36.0.0/24 +short +time=1 +tries=1 2>/dev/null)" = "$3" ]
}


now() { date +%s.%N; }

# cpu_s PID: the user and system CPU PID has used, in seconds.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# hwm_mib PID: PID's peak RSS, in MiB.
hwm_mib() { awk '/^VmHWM/ { printf "%d", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# wait_answer PID PORT NAME WANT LIMIT: seconds from now until answered.
wait_answer() {
	local pid=$1 start t
	start=$(now)
	while ! answered "$2" "$3" "$4"; do
		kill -0 "$pid" 2>/dev/null || return 1
		t=$(now)
		awk -v a="$t" -v b="$start" -v l="$5" 'BEGIN { exit !(a - b > l) }' && return 1
		sleep 0.05
	done
	awk -v a="$(now)" -v b="$start" 'BEGIN { printf "%.2f", a - b }'
}

reload_ms() {
	curl -s -o /dev/null -w '%{time_total}' -X POST "http://127.0.0.1:$STEER_API/v1/reload" | awk '{ printf "%.0f", $1 * 1000 }'
}

# reload_measure PID STEADY_KIB: a reload (POST /v1/reload, which waits for
# it) with the server's RSS sampled every 10 ms from just before it until
# 200 ms after; prints "<ms> ms, peak <MiB> MiB (<x> steady)".
reload_measure() {
	local pid=$1 steady=$2 f="$WORK/peak" sampler ms peak
	echo 0 >"$f"
	rm -f "$WORK/stop"
	rss_peak "$pid" "$f" "$WORK/stop" 0.01 &
	sampler=$!
	sleep 0.05
	ms=$(reload_ms)
	sleep 0.2
	touch "$WORK/stop"
	wait "$sampler" 2>/dev/null || true
	peak=$(cat "$f")
	awk -v ms="$ms" -v p="$peak" -v s="$steady" 'BEGIN { printf "%s ms, peak %d MiB (%.2f×)", ms, p / 1024, (s > 0 ? p / s : 0) }'
}

# gdnsd_rss_kib DIR: the summed RSS of the gdnsd processes of config DIR
# (two while a replace hands over).
gdnsd_rss_kib() {
	local s=0 p r
	for p in $(pgrep -f "gdnsd -c $1 " || true); do
		r=$(rss_kib "$p" 2>/dev/null || echo 0)
		s=$((s + ${r:-0}))
	done
	echo "$s"
}

# gdnsd_reload DIR STEADY_KIB: gdnsd's reload of configuration and zones,
# \`gdnsdctl replace\` (it starts a new daemon that takes over, and returns
# once it answers), with RSS sampled as reload_measure does. gdnsdctl gives
# up after 47 s by default, while the replacement goes on loading: with a
# City-sized --db (five maps, each loading it) or on a loaded machine the
# replace took longer, the failure was ignored, the changed record was
# asked of the old daemon and reported "not applied", and the next replace
# was refused as one in progress. It now waits up to gdnsdctl's maximum,
# 300 s, and a failure is reported as such.
gdnsd_reload() {
	local dir=$1 steady=$2 f="$WORK/gpeak" sampler t0 ms peak out fail=""
	echo 0 >"$f"
	rm -f "$WORK/gstop"
	(
		p=0
		while [ ! -e "$WORK/gstop" ]; do
			r=$(gdnsd_rss_kib "$dir")
			if [ "${r:-0}" -gt "$p" ]; then p=$r; echo "$p" >"$f"; fi
			sleep 0.01
		done
	) &
	sampler=$!
	sleep 0.05
	t0=$(now)
	out=$(gdnsdctl -t 300 -c "$dir" replace 2>&1) || fail=" ✗ gdnsdctl replace failed: $(tail -1 <<<"$out")"
	ms=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.0f", (a - b) * 1000 }')
	sleep 0.2
	touch "$WORK/gstop"
	wait "$sampler" 2>/dev/null || true
	peak=$(cat "$f")
	awk -v ms="$ms" -v p="$peak" -v s="$steady" -v f="$fail" 'BEGIN { printf "%s ms, peak %d MiB (%.2f×)%s", ms, p / 1024, (s > 0 ? p / s : 0), f }'
}

# scrape_measure STEADY_KIB PID: one /metrics scrape, then RSS 2 s later;
# prints "<MiB> MiB (<+x> %), <ms> ms, <KiB> KiB".
scrape_measure() {
	local steady=$1 pid=$2 tb after
	tb=$(curl -s -o "$WORK/scrape" -w '%{time_total}' "http://127.0.0.1:$STEER_API/metrics")
	sleep 2
	after=$(rss_kib "$pid" || echo 0)
	awk -v a="$after" -v s="$steady" -v t="$tb" -v b="$(wc -c <"$WORK/scrape")" \
		'BEGIN { printf "%d MiB (%+.1f %%), %.0f ms, %d KiB", a / 1024, (s > 0 ? (a - s) * 100 / s : 0), t * 1000, b / 1024 }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", a / b; else print "–" }'; }
# per_name KIB1 KIB0 N1 N0: the RSS each name from N0 to N1 added, in KiB.
per_name() { awk -v a="$1" -v b="$2" -v n="$3" -v m="$4" 'BEGIN { if (n > m) printf "%.2f", (a - b) / (n - m); else print "–" }'; }

{
	echo "| names | policies | steer: first answer | gdnsd: first answer | ×gdnsd | steer RSS | gdnsd RSS | ×gdnsd | steer RSS 2 s after a /metrics scrape (scrape time, size) | steer KiB per added name | gdnsd KiB per added name | ×gdnsd | steer reload, nothing changed | gdnsd | steer reload, one record changed | gdnsd | steer CPU to first answer | gdnsd | ×gdnsd | steer peak RSS at start |"
	echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
} >"$OUT/table.md"
pn=0 psrss=0 pgrss=0
for n in $SIZES; do
	d="$WORK/n$n"
	gen "$n" "$d"
	last="s$((n - 1)).example.com"
	want="203.0.113.$(((n - 1) % 250 + 1))"
	log "$n names: steer"
	start=$(now)
	"$WORK/steer" serve --config "$d/steer/steer.yaml" >"$OUT/steer-$n.log" 2>&1 &
	sp=$!
	PIDS+=("$sp")
	if t=$(wait_answer "$sp" "$STEER_PORT" "$last" "$want" 600); then
		st=$(awk -v a="$(now)" -v b="$start" 'BEGIN { printf "%.2f", a - b }')
	else
		st="failed"
	fi
	scpu=$(cpu_s "$sp") shwm=$(hwm_mib "$sp")
	sleep 3 # steady state: RSS after the start-up's garbage is returned
	srss=$(rss_kib "$sp" || echo 0)
	sm=$(scrape_measure "$srss" "$sp")
	r0=$(reload_measure "$sp" "$srss")
	# One record changed: s0's Mumbai address.
	sed -i "0,/address: 203.0.113.1 }/s//address: 203.0.113.251 }/" "$d/steer/steer.yaml"
	r1=$(reload_measure "$sp" "$srss")
	answered "$STEER_PORT" s0.example.com 203.0.113.251 || r1="$r1 ✗ not applied"
	kill "$sp"; wait "$sp" 2>/dev/null || true
	log "$n names: gdnsd"
	start=$(now)
	gdnsd -c "$d/gdnsd" start >"$OUT/gdnsd-$n.log" 2>&1 &
	gp=$!
	PIDS+=("$gp")
	if wait_answer "$gp" "$GDNSD_PORT" "$last" "$want" 600 >/dev/null; then
		gt=$(awk -v a="$(now)" -v b="$start" 'BEGIN { printf "%.2f", a - b }')
	else
		gt="failed"
	fi
	gcpu=$(cpu_s "$gp")
	sleep 3
	grss=$(gdnsd_rss_kib "$d/gdnsd")
	g0=$(gdnsd_reload "$d/gdnsd" "$grss")
	sed -i "0,/mumbai => 203.0.113.1,/s//mumbai => 203.0.113.251,/" "$d/gdnsd/config"
	g1=$(gdnsd_reload "$d/gdnsd" "$grss")
	answered "$GDNSD_PORT" s0.example.com 203.0.113.251 || g1="$g1 ✗ not applied"
	gdnsdctl -c "$d/gdnsd" -i stop >/dev/null 2>&1 || true
	kill "$gp" 2>/dev/null || true
	wait "$gp" 2>/dev/null || true
	sp_n="–" gp_n="–"
	if [ "$pn" -gt 0 ]; then
		sp_n=$(per_name "$srss" "$psrss" "$n" "$pn")
		gp_n=$(per_name "$grss" "$pgrss" "$n" "$pn")
	fi
	printf '| %s | %s | %s s | %s s | %s | %d MiB | %d MiB | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s s | %s s | %s | %s MiB |\n' "$n" "$((n < POLICIES ? n : POLICIES))" \
		"$st" "$gt" "$(ratio "$st" "$gt")" $((srss / 1024)) $((grss / 1024)) "$(ratio "$srss" "$grss")" "$sm" \
		"$sp_n" "$gp_n" "$(ratio "$sp_n" "$gp_n")" "$r0" "$g0" "$r1" "$g1" "$scpu" "$gcpu" "$(ratio "$scpu" "$gcpu")" "$shwm" >>"$OUT/table.md"
	pn=$n psrss=$srss pgrss=$grss
done
cat "$OUT/table.md"
echo "results: $OUT" >&2
