//go:build !race

package zone_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/zone"
)

// signOnline is a zone.Signing that allows every signature and signs a
// steered RRset on demand (the snapshot pre-signs them; this test only
// needs them signed).
type signOnline struct{}

func (signOnline) Allow() bool { return true }
func (signOnline) Steered(z *zone.Zone, name string, qtype uint16, rrs []dns.RR) []dns.RR {
	sigs, err := z.Signer().Sign(rrs, time.Now(), dnssec.ReasonOnline)
	if err != nil {
		return nil
	}
	return sigs
}

// serveZone answers queries for set on a loopback port over UDP and TCP
// as the server does: DO and CO from the query's OPT record, CO echoed.
func serveZone(t *testing.T, set *zone.Set) string {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) != 1 {
			m.Rcode = dns.RcodeFormatError
			w.WriteMsg(m)
			return
		}
		q := r.Question[0]
		o := &zone.LookupOptions{Signing: signOnline{}}
		opt := r.IsEdns0()
		if opt != nil {
			o.DO, o.CO = opt.Do(), opt.Co()
		}
		var a zone.Answer
		set.LookupWith(&a, q.Name, q.Qtype, steerA{}, o)
		m.Rcode, m.Authoritative = a.Rcode, a.Authoritative
		m.Answer, m.Ns, m.Extra = a.Answer, a.Ns, a.Extra
		m.RecursionAvailable = false
		if opt != nil {
			m.SetEdns0(1232, o.DO)
			if o.CO {
				m.IsEdns0().SetCo()
			}
		}
		m.Compress = true
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp && m.Len() > 1232 {
			m.Truncate(1232)
		}
		w.WriteMsg(m)
	})
	// The sockets are bound here, and a port another process took
	// between FreePort and the bind is given up for the next (a loaded
	// run once lost that race).
	var (
		pc   net.PacketConn
		ln   net.Listener
		addr string
		err  error
	)
	for try := 0; ; try++ {
		addr = fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
		if pc, err = net.ListenPacket("udp", addr); err == nil {
			if ln, err = net.Listen("tcp", addr); err == nil {
				break
			}
			pc.Close()
		}
		if try == 10 {
			t.Fatal(err)
		}
	}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return addr
}

// TestDenialDelv has delv (BIND 9.18) validate every shape of answer a
// signed zone gives with DO, with the zone's SEP key as trust anchor:
// "fully validated" for answers, "negative response, fully validated"
// for denials.
func TestDenialDelv(t *testing.T) {
	t.Parallel()
	dnstest.NeedTool(t, "delv")
	for _, ks := range []struct {
		name string
		keys func(t testing.TB) []*dnssec.Key
	}{
		{"csk-p256", func(t testing.TB) []*dnssec.Key {
			return []*dnssec.Key{memKey(t, "example.com.", dns.ECDSAP256SHA256, true)}
		}},
		{"ksk-zsk-ed25519", func(t testing.TB) []*dnssec.Key {
			return []*dnssec.Key{memKey(t, "example.com.", dns.ED25519, true), memKey(t, "example.com.", dns.ED25519, false)}
		}},
		{"rsa-ksk-p256-zsk", func(t testing.TB) []*dnssec.Key {
			return []*dnssec.Key{memKey(t, "example.com.", dns.RSASHA256, true), memKey(t, "example.com.", dns.ECDSAP256SHA256, false)}
		}},
	} {
		t.Run(ks.name, func(t *testing.T) {
			t.Parallel()
			keys := ks.keys(t)
			z, _ := mustParse(t, "example.com.", signedZone)
			if err := z.MarkSteered("steer.example.com.", dns.TypeA); err != nil {
				t.Fatal(err)
			}
			s, err := dnssec.NewSigner("example.com.", keys, dnssec.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s.Cache = dnssec.NewCache(1024)
			if err := z.Sign(s, time.Now(), 1); err != nil {
				t.Fatal(err)
			}
			set := zone.NewSet([]*zone.Zone{z})
			set.Precompile()
			addr := serveZone(t, set)
			dir := t.TempDir()
			anchor := filepath.Join(dir, "anchor.conf")
			k := keys[0].DNSKEY
			conf := fmt.Sprintf("trust-anchors { example.com. static-key %d %d %d %q; };\n", k.Flags, k.Protocol, k.Algorithm, k.PublicKey)
			if err := os.WriteFile(anchor, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			host, port, _ := net.SplitHostPort(addr)
			for _, q := range []struct {
				name, qtype string
				negative    bool
			}{
				{"example.com.", "SOA", false},
				{"example.com.", "DNSKEY", false},
				{"www.example.com.", "A", false},
				{"nope.example.com.", "A", true},
				{"x.y.nope.example.com.", "AAAA", true},
				{"www.example.com.", "MX", true},
				{"example.com.", "TXT", true},
				{"b.example.com.", "A", true},
				{"x.w.example.com.", "A", true},
				{"x.w.example.com.", "TXT", false},
				{"y.x.w.example.com.", "TXT", false},
				{"sub.example.com.", "DS", true},
				{"sec.example.com.", "DS", false},
				{"steer.example.com.", "A", false},
				{"steer.example.com.", "AAAA", true},
				{"alias.example.com.", "A", false}, // the CNAME validated, then the target's denial:
				{"walias.example.com.", "TXT", false},
				{"www.example.com.", "NSEC", false},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				out, err := exec.CommandContext(ctx, "delv", "@"+host, "-p", port, "-a", anchor, "+root=example.com",
					"+nosplit", q.name, q.qtype).CombinedOutput()
				cancel()
				want := "; fully validated"
				if q.negative {
					want = "; negative response, fully validated"
				}
				if q.name == "alias.example.com." {
					want = "; fully validated\nalias.example.com.\t3600\tIN\tCNAME\tnowhere.example.com."
					if !strings.Contains(string(out), "; nowhere.example.com.\t300\tIN\t\\-A\t;-$NXRRSET") {
						t.Errorf("delv %s %s: no validated denial of the target\n%s", q.name, q.qtype, out)
					}
				}
				if err != nil || !strings.Contains(string(out), want) || strings.Contains(string(out), "insecure") {
					t.Errorf("delv %s %s (%v): want %q\n%s", q.name, q.qtype, err, want, out)
				}
			}
		})
	}
}
