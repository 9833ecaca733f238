package peertest_test

import (
	"path/filepath"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
)

// TestPeersServeAndRefuse starts each peer with one good zone and one
// broken one: the good zone is served with authority, the broken one is
// reported not loaded, and the server is stopped at the end.
func TestPeersServeAndRefuse(t *testing.T) {
	dir := t.TempDir()
	dnstest.WriteFiles(t, dir, map[string]string{
		"good.test": "$TTL 300\n@ SOA ns.good.test. h.good.test. 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n",
		"bad.test":  "$TTL 300\n@ SOA ns.bad.test. h.bad.test. 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\nwww A 999.0.2.2\n",
	})
	zones := []peertest.Zone{{Origin: "good.test", File: filepath.Join(dir, "good.test")}, {Origin: "bad.test", File: filepath.Join(dir, "bad.test")}}
	for _, start := range []func(testing.TB, []peertest.Zone, peertest.Options) *peertest.Server{peertest.StartKnot, peertest.StartNSD, peertest.StartBIND} {
		s := start(t, zones, peertest.Options{})
		if !s.Loaded("good.test") || s.Loaded("bad.test") {
			t.Errorf("%s: loaded good=%v bad=%v\n%s", s.Name, s.Loaded("good.test"), s.Loaded("bad.test"), s.Log)
			continue
		}
		for _, network := range []string{"udp", "tcp"} {
			m := dnstest.Query("WWW.good.test.", dns.TypeA)
			r, err := s.Exchange(m, network)
			if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !r.Authoritative {
				t.Errorf("%s over %s: %v %v", s.Name, network, r, err)
			}
		}
	}
}
