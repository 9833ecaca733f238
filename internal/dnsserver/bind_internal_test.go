package dnsserver

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// A server must not join SO_REUSEPORT sockets that already hold its
// address (another process, or a server of this one still closing): the
// kernel would hand them part of the queries. Binding fails instead.
func TestBindRefusesAnAddressInUse(t *testing.T) {
	if !rawUDPSupported {
		t.Skip("no batched UDP on this platform")
	}
	// A lingering batched socket, as a closing server leaves for up to a
	// poll interval.
	var zombie *rawUDP
	var err error
	for range 20 {
		ap := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(20000+rand.IntN(30000)))
		if zombie, err = listenRawUDP(ap); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.release()
	ln, err := bind(fmt.Sprintf("127.0.0.1:%d", zombie.local.Port()))
	if err == nil {
		ln.close()
		for _, r := range ln.raws {
			r.release()
		}
		t.Fatalf("bind joined the sockets already holding %v", zombie.local)
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("bind: %v, want address already in use", err)
	}
}
