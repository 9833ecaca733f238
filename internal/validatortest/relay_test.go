package validatortest

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// TestECSRelay: the relay replaces a query's ECS option (or adds one) with
// its client subnet, over UDP and TCP, and returns the upstream's answer.
func TestECSRelay(t *testing.T) {
	port := dnstest.FreePort(t)
	addr := loopback(port)
	// The upstream answers with a TXT record saying the ECS it was sent.
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(q)
		got := "none"
		if o := q.IsEdns0(); o != nil {
			for _, e := range o.Option {
				if s, ok := e.(*dns.EDNS0_SUBNET); ok {
					got = netip.PrefixFrom(netip.MustParseAddr(s.Address.String()), int(s.SourceNetmask)).String()
				}
			}
		}
		r.Answer = append(r.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{got}})
		w.WriteMsg(r)
	})
	for _, network := range []string{"udp", "tcp"} {
		s := &dns.Server{Addr: addr.String(), Net: network, Handler: h}
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ListenAndServe()
		<-started
		t.Cleanup(func() { s.Shutdown() })
	}
	for _, c := range []struct{ client, sent string }{
		{"192.0.2.48/28", ""},
		{"2001:db8:2::/56", "198.51.100.0/24"},
	} {
		relay := ECSRelay(t, addr, netip.MustParsePrefix(c.client))
		for _, network := range []string{"udp", "tcp"} {
			m := new(dns.Msg)
			m.SetQuestion("x.example.", dns.TypeTXT)
			if c.sent != "" {
				m.SetEdns0(1232, true)
				p := netip.MustParsePrefix(c.sent)
				m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice())})
			}
			cl := &dns.Client{Net: network, Timeout: 3 * time.Second}
			r, _, err := cl.Exchange(m, relay.String())
			if err != nil {
				t.Fatalf("%s via the relay: %v", network, err)
			}
			if len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != c.client {
				t.Errorf("%s: upstream saw %v, want ECS %s", network, r.Answer, c.client)
			}
		}
	}
}
