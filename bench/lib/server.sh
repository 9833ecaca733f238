# Shared by the bench harnesses that start servers and measure them
# (sourced; they define log, die, WORK, KEEP and an associative array PID
# of the servers they started, by name).

# cleanup, the harnesses' EXIT trap: stops every server still running,
# removes the policy-rc.d that bench/lib/install.sh made, and WORK unless
# KEEP=1; exits with the status the script had.
cleanup() {
	local rc=$?
	set +e
	for s in "${!PID[@]}"; do stop_server "$s"; done
	if [ "$CREATED_POLICY_RC" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
	if [ "$KEEP" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
	exit $rc
}

# listening_on PORT: prints the listeners (UDP or TCP) on PORT.
listening_on() {
	ss -Hlnup "sport = :$1" 2>/dev/null
	ss -Hlntp "sport = :$1" 2>/dev/null
}

# need_free_port NAME PORT HINT: dies, showing who listens, when PORT (for
# server NAME) is in use; HINT says which variable sets it.
need_free_port() {
	if [ -n "$(listening_on "$2")" ]; then
		listening_on "$2" >&2
		die "port $2 (for $1) is already in use; set $3"
	fi
}

# wait_answering NAME LOGF WHERE PROBE...: waits up to 60 s for server
# NAME (pid PID[NAME], logging to LOGF) to answer: until the command PROBE
# succeeds. Dies, showing the log's tail, when the server exits first.
wait_answering() {
	local s=$1 logf=$2 where=$3 i
	shift 3
	for i in $(seq 1 300); do
		if ! kill -0 "${PID[$s]}" 2>/dev/null; then
			tail -20 "$logf" >&2
			unset "PID[$s]"
			die "$s exited at startup (log: $logf)"
		fi
		if "$@" >/dev/null 2>&1; then
			log "$s up on $where (pid ${PID[$s]})"
			return
		fi
		sleep 0.2
	done
	die "$s did not answer on $where within 60s (log: $logf)"
}

# stop_server NAME: stops the server PID[NAME] (TERM, KILL after 5 s).
stop_server() {
	local s=$1 pid=${PID[$1]:-} i
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	unset "PID[$s]"
}

# tree_pids PID...: the pids and all their descendants.
tree_pids() {
	local p c
	for p in "$@"; do
		echo "$p"
		for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do tree_pids "$c"; done
	done
}

# cpu_ticks PID: utime+stime of the process tree, in clock ticks.
cpu_ticks() {
	local t=0 p v
	for p in $(tree_pids "$1"); do
		v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12+$13}') || v=0
		t=$((t + ${v:-0}))
	done
	echo "$t"
}

# peak_rss_kb PID: VmHWM summed over the process tree, in KiB.
peak_rss_kb() {
	local t=0 p v
	for p in $(tree_pids "$1"); do
		v=$(awk '/^VmHWM:/{print $2}' "/proc/$p/status" 2>/dev/null) || v=0
		t=$((t + ${v:-0}))
	done
	echo "$t"
}
