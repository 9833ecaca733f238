# Shared by the bench scripts that start each server in a session of its
# own (setsid) and compare them side by side.

# stop_session SID: TERM to every process of the session, KILL to what is
# left after 15 s.
stop_session() {
	local sid=$1 i p
	[ -n "$sid" ] || return 0
	kill -TERM -- "-$sid" 2>/dev/null || true
	for i in $(seq 150); do
		pgrep -s "$sid" >/dev/null || break
		sleep 0.1
	done
	for p in $(pgrep -s "$sid"); do kill -KILL "$p" 2>/dev/null || true; done
	wait "$sid" 2>/dev/null || true
}

# port_busy PORT: something listens on PORT (UDP or TCP).
port_busy() { [ -n "$(ss -Hlnu "sport = :$1" 2>/dev/null)$(ss -Hlnt "sport = :$1" 2>/dev/null)" ]; }

# ratio A B: A/B to two decimals, "–" when either is missing or zero.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "–" }'; }
