#!/usr/bin/env bash
# Profile-guided optimization: writes cmd/steer/default.pgo, the CPU
# profile `go build ./cmd/steer` optimizes with (Go's -pgo=auto: the
# release build of scripts/package.sh, bench/, `go run ./cmd/steer`).
#
#   bench/pgo.sh [--benchtime 10s]
#
# The profile is internal/dnsserver's BenchmarkServing: the query path as
# a node's batched UDP reader runs it (fast path, steering decision,
# metrics and dashboard accounting, cookies and rate limiting), for
# bench/run.sh's two query files, the static name and the steered name
# with ECS, on bench/run.sh's converted 1 M-network country database.
# That is where a serving node spends its user time; start-up, reloads
# and the general path are left to the compiler's defaults. Refresh it
# when the query path changes much (a stale profile only optimizes
# less: the compiler matches it by function and line). The test suite
# builds with -pgo=off (scripts/test.sh): what it checks does not depend
# on the profile, and a second build of every package would cost it a
# minute on two cores.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCHTIME=10s
while [ $# -gt 0 ]; do
	case "$1" in
	--benchtime) BENCHTIME=$2; shift ;;
	*) echo "usage: bench/pgo.sh [--benchtime 10s]" >&2; exit 2 ;;
	esac
	shift
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cd "$REPO"
go build -o "$WORK/geoconv" ./bench/geoconv
"$WORK/geoconv" -in internal/geo/embedded/iptoasn-country.mmdb.gz \
	-out "$WORK/geo-country.mmdb" -flat-out "$WORK/geo-flat.mmdb" 2>"$WORK/geoconv.log" ||
	{ cat "$WORK/geoconv.log" >&2; exit 1; }
# A test binary is not a main package: it is built without a profile.
go test -c -o "$WORK/dnsserver.test" ./internal/dnsserver
(cd internal/dnsserver && STEER_SERVING_DB="$WORK/geo-country.mmdb" "$WORK/dnsserver.test" \
	-test.run '^$' -test.bench '^BenchmarkServing$' -test.benchtime "$BENCHTIME" \
	-test.cpuprofile "$WORK/serving.pprof")
cp "$WORK/serving.pprof" cmd/steer/default.pgo
go tool pprof -top -nodecount=12 cmd/steer/default.pgo 2>/dev/null | sed -n '1,20p'
echo "wrote cmd/steer/default.pgo ($(wc -c <cmd/steer/default.pgo) bytes)"
