package main

import (
	"log/slog"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// sd_notify(3) by hand: a datagram of NAME=value lines to the unix socket
// systemd names in $NOTIFY_SOCKET (a path, or "@name" in the abstract
// namespace). It is a dozen lines, so steer does not import go-systemd
// for it (that module comes in only through etcd's client, and a direct
// dependency for one sendto is not worth tracking). Without the variable
// (not under systemd, or Type= other than notify) it does nothing.

func sdNotifying() bool { return os.Getenv("NOTIFY_SOCKET") != "" }

func sdNotify(log *slog.Logger, state string) {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return
	}
	if sock[0] == '@' {
		sock = "\x00" + sock[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err == nil {
		_, err = c.Write([]byte(state))
		c.Close()
	}
	if err != nil {
		log.Warn("sd_notify failed", "socket", os.Getenv("NOTIFY_SOCKET"), "err", err)
	}
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, which systemd wants
// with RELOADING=1.
func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return time.Now().UnixMicro()
	}
	return ts.Nano() / 1000
}
