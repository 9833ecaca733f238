# Sourced by the bench scripts that measure a server's memory.

# rss_kib PID: the resident set of PID, in KiB.
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# rss_peak PID FILE STOP EVERY samples PID's resident set every EVERY
# seconds until the file STOP exists, keeping the peak (KiB) in FILE. Run
# it in the background; FILE holds 0 until the first sample.
rss_peak() {
	local pid=$1 f=$2 stop=$3 every=$4 p=0 r
	echo 0 >"$f"
	while [ ! -e "$stop" ]; do
		r=$(rss_kib "$pid" 2>/dev/null || echo 0)
		if [ "${r:-0}" -gt "$p" ]; then p=$r; echo "$p" >"$f"; fi
		sleep "$every"
	done
}
