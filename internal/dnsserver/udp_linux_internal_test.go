//go:build linux && (amd64 || arm64)

package dnsserver

import (
	"net/netip"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// An IPv4 batched socket sends with DF set and ignores the path MTU
// (IP_PMTUDISC_PROBE): answers are never fragmented, and the kernel draws
// no fragment ID for them. Read back from the kernel: a socket left at the
// default (IP_PMTUDISC_WANT) fails it.
func TestRawUDPSendsDontFragment(t *testing.T) {
	u, err := listenRawUDP(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer u.release()
	v, err := syscall.GetsockoptInt(u.fd, syscall.IPPROTO_IP, unix.IP_MTU_DISCOVER)
	if err != nil {
		t.Fatal(err)
	}
	if v != unix.IP_PMTUDISC_PROBE {
		t.Fatalf("IP_MTU_DISCOVER is %d, want IP_PMTUDISC_PROBE (%d)", v, unix.IP_PMTUDISC_PROBE)
	}
}
