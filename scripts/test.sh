#!/usr/bin/env bash
# Runs steer's whole test suite on a fresh Debian machine with Go:
# installs the real DNS clients the tests talk to, then vets, tests with the
# race detector, runs each fuzz target for a bounded number of inputs and every
# benchmark once (so they keep compiling and running). Prints how long each
# stage took, and the total.
set -euo pipefail
cd "$(dirname "$0")/.."

# Stage timing: "stage NAME" ends the previous stage and starts the next;
# the summary is printed at the end, and on failure too.
now_ms() { date +%s%3N; }
start_all=$(now_ms)
stage_name="" stage_start="" timings=() log=""
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }
end_stage() {
	[ -n "$stage_name" ] || return 0
	timings+=("$(printf '  %-12s %7s s' "$stage_name" "$(secs $(($(now_ms) - stage_start)))")")
	stage_name=""
}
stage() {
	end_stage
	stage_name=$1 stage_start=$(now_ms)
	echo "== $*"
}
summary() {
	end_stage
	echo "== stage times"
	((${#timings[@]})) && printf '%s\n' "${timings[@]}"
	printf '  %-12s %7s s\n' total "$(secs $(($(now_ms) - start_all)))"
}
bg_pid="" bg_log="" apt_log=""
killtree() { # a process and everything it started
	local c
	for c in $(pgrep -P "$1"); do killtree "$c"; done
	kill "$1" 2>/dev/null || true
}
wait_pid=""
beside_pid=""
prebuild_pid="" prebuild_dir="" prebuild_log=""
trap 'rc=$?; [ -z "$prebuild_pid" ] || killtree "$prebuild_pid"; rm -rf $prebuild_dir $prebuild_log; [ -z "$bg_pid" ] || killtree "$bg_pid"; [ -z "$wait_pid" ] || killtree "$wait_pid"; [ -z "$beside_pid" ] || killtree "$beside_pid"; rm -f $log $bg_log $apt_log; [ "$rc" -eq 0 ] || summary' EXIT

PACKAGES=(knot-dnsutils bind9-dnsutils unbound dns-root-data bird2 knot nsd bind9 etcd-server lintian zsh fish pdns-recursor knot-resolver dnsviz chromium) # bird2: the BGP peer of the anycast tests; etcd-server: the store of the process-level fleet tests; knot, nsd, bind9: the reference servers; lintian: the Debian package test (packaging/); zsh, fish: the completion scripts' test; pdns-recursor, knot-resolver, dnsviz: the DNSSEC validators (internal/validatortest) beside delv (bind9-dnsutils) and Unbound (with dns-root-data, which it only recommends); chromium: the dashboard's browser tests (internal/uitest)
missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# On a fresh machine the packages install in the background while the
# sources are checked and the test binaries compile (neither needs them):
# apt mostly waits on the network and the disk, the compiler on the CPU.
# Without their recommendations (printing, desktop and Lua HTTP packages
# the tests never run), about a third fewer packages.
stage apt "(started in the background)"
apt_pid="" apt_log=$(mktemp)
if ((${#missing[@]})); then
	echo "installing ${missing[*]}"
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO="sudo"
	(
		$SUDO apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
	) >"$apt_log" 2>&1 &
	apt_pid=$!
fi
wait_apt() {
	[ -n "$apt_pid" ] || return 0
	if ! wait "$apt_pid"; then
		echo "installing the test packages failed:"; cat "$apt_log"; exit 1
	fi
	apt_pid=""
}
export STEER_REQUIRE_TOOLS=1 # a missing client fails tests instead of skipping them

stage gofmt
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "not gofmt-clean:"; echo "$unformatted"; exit 1
fi
# Race detection runs where the code under test is concurrent: the server,
# the node and its services. The packages below are tested without it: their
# tests are single-threaded computation (compiling policies against whole
# geo databases, parsing zones and configs) or drive a separately built
# binary, which the race detector slows five- to tenfold and where it has
# nothing to find. Their tests that do run goroutines are named *Concurrent*
# and run under -race as well. Benchmarks run once alongside the plain tests,
# so each test binary is built once per mode. A new package is raced unless
# it is listed here.
PLAIN_PKGS=(./cmd/steer ./examples ./packaging ./bench/... ./scripts/... ./internal/config ./internal/zone ./internal/geo ./internal/policy ./internal/difftest ./internal/ecs ./internal/explain ./internal/version ./internal/diag ./internal/simulate ./internal/uitest)
# Packages whose tests wait on the clock for minutes and use little CPU (a
# 2-minute run of real resolvers against the simulator's prediction): they
# run beside the stages, not niced (they measure what real resolvers do in
# time), rather than holding one of a stage's two package slots while they
# wait.
WAIT_PKGS=(./bench/simcheck)
mapfile -t waiting < <(go list "${WAIT_PKGS[@]}")
mapfile -t plain < <(go list "${PLAIN_PKGS[@]}" | grep -vxF -f <(printf '%s\n' "${waiting[@]}"))
mapfile -t raced < <(go list ./... | grep -vxF -f <(printf '%s\n' "${plain[@]}" "${waiting[@]}"))
mapfile -t concurrent < <(go list -f '{{.ImportPath}} {{.Dir}}' "${plain[@]}" | while read -r pkg dir; do
	grep -qsE '^func Test\w*Concurrent' "$dir"/*_test.go && echo "$pkg"
done)
# Every build but the raced ones is made as the release build of
# scripts/package.sh is: without cgo and with -trimpath (nothing here
# uses cgo; the race detector needs it, so the raced builds set
# CGO_ENABLED=1 themselves, and their test binaries run with the plain
# setting, for the steer binaries they build with go run). So the
# packaging test's release build finds every package compiled: a fourth
# configuration of std and every dependency (no cgo, trimmed) cost about
# 64 s of the compile stage on a cold cache, beside the plain and raced
# ones. (Test helpers find the repository from their working directory,
# not from their source's path, which -trimpath makes a module path.)
# Builds of cmd/steer here leave out its profile-guided optimization
# (default.pgo, bench/pgo.sh): with it, every package under cmd/steer
# would compile a second time for the steer binaries tests build, and
# what the tests check does not depend on it. The caller's own GOFLAGS
# come after and win.
export CGO_ENABLED=0
export GOFLAGS="-trimpath -pgo=off${GOFLAGS:+ $GOFLAGS}"
stage vet
go vet ./...
# What follows does not vet again: go test vets each package it tests
# with a subset of the analyzers above, in its build mode (raced and
# plain apart), and first computes their facts for every dependency, the
# standard library and etcd's server included: on a cold cache about 45 s
# of CPU for node's raced test binary, before its tests could start, and
# 50 s for cmd/steer's plain one, checking files go vet has just checked
# with every analyzer (no file here is built for the race detector only).
# (go test and go run already link without DWARF or a symbol table.) The
# caller's own GOFLAGS come after and win.
export GOFLAGS="-vet=off${GOFLAGS:+ $GOFLAGS}"
# Every package and test package compiles now, into the build cache,
# while apt may still be installing; the stages below then only link and
# run. (go list -export compiles without linking: a test binary linked
# now would be linked again by go test.)
stage compile "(every package and its tests, raced and plain, into the build cache)"
# The plain packages' *Concurrent* tests run raced at the race stage's
# end, after every raced package: their raced test packages (geo's,
# policy's, simulate's and zone's, 21 s of CPU) compile here too, beside
# apt, not there, alone on the critical path.
CGO_ENABLED=1 go list -race -export -test -deps "${raced[@]}" "${concurrent[@]}" >/dev/null
go list -export -test -deps ./... >/dev/null
# packaging's TestDebianPackage runs scripts/package.sh in the plain
# stage, which runs one package at a time: its release build of steer
# links what the line above compiled (the same settings, see vet), and
# nfpm (go run, cached once linked) compiles here instead, beside apt.
nfpm=$(sed -n 's/^NFPM_VERSION=${NFPM_VERSION:-\(v[0-9.]*\)}$/\1/p' scripts/package.sh)
[ -z "$nfpm" ] || go run -exec true "github.com/goreleaser/nfpm/v2/cmd/nfpm@$nfpm"
# The plain steer binary that cmd/steer's, internal/uitest's and
# internal/steeringtest's tests run (dnstest.SteerBinary) is linked once,
# into the build cache, rather than by each of them at the start of a
# test stage (5-8 s of CPU each, two of them at once in the plain stage).
go run -exec true ./cmd/steer
stage "apt wait"
wait_apt
# The waiting packages start now: their minutes of waiting overlap the race
# stage, which they barely load (about 15 % of one core).
wait_log=$(mktemp)
go test -count=1 -timeout 15m -v -bench . -benchtime 1x "${waiting[@]}" >"$wait_log" 2>&1 &
wait_pid=$!
# Fuzzing and the raced packages' benchmarks run beside the plain stage, at
# the lowest CPU priority: its tests mostly wait (on subprocesses, peers,
# timers), so these fill the idle core.
# Fuzz budgets are execution counts, not durations: with a duration, Go
# 1.26's fuzz coordinator can report "context deadline exceeded" as a
# failure when the time runs out while a starved worker is mid-call
# (golang/go#75804, fixed in Go 1.27). A count has no deadline to race.
# About 15 s and 10 s of CPU on this project's 2-core machine. (FuzzHandle
# at 200,000 took 107 s beside the tests at nice 19 and the suite waited
# 49 s on it after the test stage; set HANDLE_EXECS for a longer run.)
HANDLE_EXECS=${HANDLE_EXECS:-100000}
PARSE_EXECS=${PARSE_EXECS:-30000}
background() {
	set -euo pipefail
	# The fuzz targets' binaries compile beside the race stage (below).
	tail --pid="$PREBUILD_PID" -f /dev/null
	cat "$PREBUILD_LOG"
	echo "== fuzz (FuzzHandle ${HANDLE_EXECS}x, FuzzParse ${PARSE_EXECS}x)"
	go test -run '^$' -fuzz '^FuzzHandle$' -fuzztime "${HANDLE_EXECS}x" -fuzzminimizetime 1000x ./internal/dnsserver/
	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime "${PARSE_EXECS}x" -fuzzminimizetime 1000x ./internal/zone/
	echo "== benchmarks (the raced packages' benchmarks, each once, to keep them compiling and running; measure with bench/ or -benchtime)"
	(($# == 0)) || go test -run '^$' -bench . -benchtime 1x "$@" | grep -E '^(Benchmark|ok|FAIL)'
}
export -f background
export HANDLE_EXECS PARSE_EXECS
bg_log=$(mktemp)
log=$(mktemp)
status=0
run_tests() { # appends to $log; the first failure's exit status is kept
	go test -count=1 -timeout 15m -v "$@" >>"$log" 2>&1 || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
}
# run_raced runs tests with the race detector, which needs cgo; the test
# binaries run with cgo off, as every other build, for the steer binaries
# some of them build (dnstest.SteerBinary): with cgo on, each would compile
# std and every dependency once more.
run_raced() {
	CGO_ENABLED=1 run_tests -race -exec "env CGO_ENABLED=0" "$@"
}
# A raced package's compute-bound tests and its heavy scenarios sit in
# files built only without the race detector (//go:build !race). They run
# plain, beside the plain stage (at the priorities said below).
# The !race tests below mostly wait on the clock (signatures expiring, a
# primary trickling a transfer) and use little CPU: they run in a go test
# of their own beside their package's other !race tests instead of holding
# one of its two parallel slots for half a minute (node's two slots held
# 222 s of tests, 69 s of them these).
NORACE_WAITING='TestSignedZoneServedAcrossReloadAndRenewal|TestSlowPrimaryTransferred|TestPresignedExpiresWhileServed|TestSignedExportRenewal'
# The !race tests below bound times on the clock and otherwise wait: they
# run un-niced beside the race stage, as the waiting packages do, rather
# than beside the plain stage, whose compiles at nice 0 would starve them
# at nice 10 (and which has no idle core to spare at any priority).
# TestFleetAcceptance: 3 etcd members and 5 nodes, whose pushes must
# reach every node at p99 within 1 s; 58 s of node's raced run, alone
# (not parallel), 32 s of CPU; plain 44 s, 11 s of CPU.
NORACE_BESIDE_RACE='TestFleetAcceptance'
norace=() beside=()
while read -r pkg dir; do
	all=$( (grep -lsx '//go:build !race' "$dir"/*_test.go || true) | xargs -r sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p')
	tests=$(grep -vxE "$NORACE_WAITING|$NORACE_BESIDE_RACE" <<<"$all" | paste -sd'|' || true)
	waits=$(grep -xE "$NORACE_WAITING" <<<"$all" | paste -sd'|' || true)
	besides=$(grep -xE "$NORACE_BESIDE_RACE" <<<"$all" | paste -sd'|' || true)
	[ -z "$tests" ] || norace+=("$pkg" "^($tests)\$")
	[ -z "$waits" ] || norace+=("$pkg" "^($waits)\$")
	[ -z "$besides" ] || beside+=("$pkg" "^($besides)\$")
done < <(go list -f '{{.ImportPath}} {{.Dir}}' "${raced[@]}")
beside_log=$(mktemp)
(
	pids=() logs=() rc=0
	for ((i = 0; i < ${#beside[@]}; i += 2)); do
		logs+=("$(mktemp)")
		go test -count=1 -timeout 15m -v -run "${beside[i+1]}" "${beside[i]}" >"${logs[-1]}" 2>&1 &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}" || rc=$?
		cat "${logs[i]}"
		rm -f "${logs[i]}"
	done
	exit "$rc"
) >"$beside_log" 2>&1 &
beside_pid=$!
# Longest first: go test starts packages in the order given, two at a
# time, and node alone took about 170 s of the stage (about 70 s since
# TestFleetAcceptance runs beside the stage); started in import path
# order it began some 50 s in, and the stage waited on it at the end.
RACE_FIRST=(./internal/node ./internal/fleet ./internal/dnsserver ./internal/steeringtest ./internal/fleetnode ./internal/ui ./internal/secondary ./internal/xfr)
mapfile -t race_first < <(go list "${RACE_FIRST[@]}")
mapfile -t raced_order < <(printf '%s\n' "${race_first[@]}"; printf '%s\n' "${raced[@]}" | grep -vxF -f <(printf '%s\n' "${race_first[@]}"))
# The fuzz targets' test binaries are compiled with the fuzzer's
# instrumentation, which covers std and every dependency once more (about
# 80 s of CPU for FuzzHandle's), while the race stage runs, under the idle
# scheduling policy: the race stage leaves about half of the machine idle
# (its tests wait on peers, processes and clocks), and a task of the idle
# policy gives the CPU up to any other at once, so the stage's timed tests
# do not feel it. Compiled after it, with the test stage, they left a
# 40 s tail after that stage. The fuzzing itself runs with the test stage,
# as before (an idle-policy fuzz worker could be starved past its 10 s
# hang deadline).
prebuild_dir=$(mktemp -d) prebuild_log=$(mktemp)
chrt --idle 0 bash -c 'go test -c -o "$1/" -fuzz "^FuzzHandle\$" ./internal/dnsserver/ && go test -c -o "$1/" -fuzz "^FuzzParse\$" ./internal/zone/' prebuild "$prebuild_dir" >"$prebuild_log" 2>&1 &
prebuild_pid=$!
export PREBUILD_PID=$prebuild_pid PREBUILD_LOG=$prebuild_log
stage "test -race" "(${#raced[@]} packages, and the *Concurrent* tests of the others)"
# A binary built with -race sleeps a second before it exits (the race
# runtime's atexit_sleep_ms, for goroutines still running after main to
# report a race): a second of a stage slot per package, some 35 s of the
# stage's two slots, after every test has ended and been checked (a race
# during a test fails that test). A GORACE of the caller's own comes after
# and wins.
export GORACE="atexit_sleep_ms=0${GORACE:+ $GORACE}"
run_raced "${raced_order[@]}"
((${#concurrent[@]} == 0)) || run_raced -run 'Concurrent' "${concurrent[@]}"
# The race stage runs alone (but for the light load of the waiting
# packages and of the tests beside it): its tests bound times on the
# clock, and even niced work beside them (fuzzing's workers, policy
# compiles) pushed TestFleetAcceptance's pushes to five nodes, raced
# then, past their bound. What follows runs beside the plain stage.
# The packages run at once, each to its own log: their slow tests mostly
# wait (a primary trickling a transfer for a minute, a fleet soaking), so
# one after another they would add their waits up. (Four of a package's
# parallel tests at once instead of GOMAXPROCS' two made node's DNSSEC
# scenarios fail under the load: Unbound backing off a restarted server,
# TCP resets.)
# Two priorities among them: the scenarios (processes, resolvers, fleets
# on the clock: a rollover under a validator, a closed load loop) at nice
# 10; the compute-bound !race tests of NORACE_CPU, the fuzzing and the
# benchmarks at 19, filling what is left. All at 19, the fuzzing's and
# the fast-path comparisons' CPU starved the scenarios past their bounds
# (an embedded etcd not answering in 2 s, a node taking 4 s to restart
# under a validator). At the plain stage's own priority they in turn
# crowded the waiting package's real resolvers, whose timing the
# simulator's check compares with its prediction, and made the stage
# 15-50 s longer.
# The raced packages' benchmarks run once without the race detector: in
# the first !race run of a package that has one (its binary is linked
# anyway), else in the niced background run, which is given only the
# packages that have benchmarks (linking a test binary per raced package
# for nothing cost about 65 s of CPU).
mapfile -t benched < <(go list -f '{{.ImportPath}} {{.Dir}}' "${raced[@]}" | while read -r pkg dir; do
	grep -qsE '^func Benchmark' "$dir"/*_test.go && echo "$pkg"
done)
declare -A bench_in_norace=()
for ((i = 0; i < ${#norace[@]}; i += 2)); do
	[ -z "${bench_in_norace[${norace[i]}]:-}" ] || continue
	! printf '%s\n' "${benched[@]}" | grep -qxF "${norace[i]}" || bench_in_norace[${norace[i]}]=$i
done
bench_bg=()
for pkg in "${benched[@]}"; do [ -n "${bench_in_norace[$pkg]:-}" ] || bench_bg+=("$pkg"); done
NORACE_CPU=(./internal/dnsserver ./internal/traffic ./internal/snapshot)
mapfile -t norace_cpu < <(go list "${NORACE_CPU[@]}")
norace_log=$(mktemp)
(
	pids=() logs=() rc=0
	for ((i = 0; i < ${#norace[@]}; i += 2)); do
		logs+=("$(mktemp)")
		level=10
		! printf '%s\n' "${norace_cpu[@]}" | grep -qxF "${norace[i]}" || level=19
		bench=()
		[ "${bench_in_norace[${norace[i]}]:-}" != "$i" ] || bench=(-bench . -benchtime 1x)
		nice -n "$level" go test -count=1 -timeout 15m -v "${bench[@]}" -run "${norace[i+1]}" "${norace[i]}" >"${logs[-1]}" 2>&1 &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}" || rc=$?
		cat "${logs[i]}"
		rm -f "${logs[i]}"
	done
	exit "$rc"
) >"$norace_log" 2>&1 &
norace_pid=$!
# What is left of the fuzz targets' compile goes on at the background's
# priority, not the idle policy: the test stage leaves no core idle.
unidle() {
	local c
	chrt --other -p 0 "$1" 2>/dev/null && renice -n 19 -p "$1" >/dev/null 2>&1 || true
	for c in $(pgrep -P "$1"); do unidle "$c"; done
}
unidle "$prebuild_pid"
# Not in a session of its own: with the kernel's autogroups, a new session
# would get an equal share of the CPU whatever its nice value.
bg_start=$(now_ms)
nice -n 19 bash -c 'background "$@"' background "${bench_bg[@]}" >"$bg_log" 2>&1 &
bg_pid=$!
stage test "(${#plain[@]} packages, each benchmark once; beside them, the ${#waiting[@]} waiting ones and, niced, $((${#norace[@]} / 2)) runs of raced packages' !race tests, fuzzing and the raced packages' benchmarks)"
run_tests -bench . -benchtime 1x "${plain[@]}"
wait "$norace_pid" || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
cat "$norace_log" >>"$log"
rm -f "$norace_log"
wait "$wait_pid" || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
wait_pid=""
cat "$wait_log" >>"$log"
rm -f "$wait_log"
wait "$beside_pid" || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
beside_pid=""
cat "$beside_log" >>"$log"
rm -f "$beside_log"
# Show package results and failures, not every passing test's chatter.
grep -E '^(ok|FAIL|panic:|--- FAIL|\s+--- FAIL|\s+\S+_test\.go:[0-9]+:)' "$log" || true
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
if [ "$status" -ne 0 ]; then
	echo "go test failed (exit $status); full log follows"
	cat "$log"
	echo "tests: $passed passed, $failed failed, $skipped skipped"
	exit "$status"
fi

stage "fuzz, benchmarks" "(started beside the plain stage; waiting for what is left)"
bg_status=0
wait "$bg_pid" || bg_status=$?
bg_pid="" prebuild_pid=""
cat "$bg_log"
echo "(fuzzing and benchmarks took $(secs $(($(now_ms) - bg_start))) s in all, beside the tests)"
[ "$bg_status" -eq 0 ] || { echo "fuzzing or benchmarks failed (exit $bg_status)"; exit "$bg_status"; }
summary
echo "tests: $passed passed, $failed failed, $skipped skipped"
