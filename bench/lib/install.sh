# Shared by the bench harnesses (sourced; they define log, die, WORK and
# PKGS, and remove /usr/sbin/policy-rc.d on exit when CREATED_POLICY_RC=1).
#
# install_packages installs what of PKGS is missing with apt, keeping the
# packages' daemons from starting while it does, and stops and disables the
# system services of those it installed.

CREATED_POLICY_RC=${CREATED_POLICY_RC:-0}

install_packages() {
	local missing=() p
	for p in $PKGS; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if [ ${#missing[@]} = 0 ]; then
		log "packages already installed: $PKGS"
		return
	fi
	log "installing ${missing[*]}"
	# Keep the packages' init scripts from starting the daemons at all.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		CREATED_POLICY_RC=1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$WORK/apt.log" 2>&1 ||
		{ tail -20 "$WORK/apt.log" >&2; die "apt-get install failed"; }
	if [ "$CREATED_POLICY_RC" = 1 ]; then
		rm -f /usr/sbin/policy-rc.d
		CREATED_POLICY_RC=0
	fi
	# Whatever the packages set up as a system service stays off: stop it
	# and disable it (only for the packages this run installed).
	for p in "${missing[@]}"; do
		case "$p" in gdnsd | knot | nsd) stop_system_service "$p" ;; esac
	done
}

stop_system_service() { # NAME: the package's daemon, stopped and disabled
	local svc=$1 pidfile pid
	if command -v systemctl >/dev/null; then
		if [ -d /run/systemd/system ]; then
			systemctl disable --now "$svc.service" >/dev/null 2>&1 || true
		else
			systemctl disable "$svc.service" >/dev/null 2>&1 || true # works offline too
		fi
	fi
	if [ -x "/etc/init.d/$svc" ]; then
		service "$svc" stop >/dev/null 2>&1 || true
		update-rc.d "$svc" disable >/dev/null 2>&1 || true
	fi
	for pidfile in /run/$svc/$svc.pid /run/$svc.pid /run/gdnsd/gdnsd.pid; do
		[ -r "$pidfile" ] || continue
		pid=$(cat "$pidfile" 2>/dev/null) || continue
		case "$(cat /proc/"$pid"/comm 2>/dev/null)" in
		gdnsd | knotd | nsd) log "stopping system $svc (pid $pid)"; kill "$pid" 2>/dev/null || true ;;
		esac
	done
}
