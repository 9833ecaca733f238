package main

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// dnsperfOut is a max-load pass as dnsperf 2.10 prints it.
func dnsperfOut(completed int, seconds float64) string {
	return fmt.Sprintf(`DNS Performance Testing Tool
Version 2.10.0

Statistics:

  Queries sent:         %d
  Queries completed:    %d (100.00%%)
  Queries lost:         0 (0.00%%)

  Run time (s):         %f
  Queries per second:   %f
`, completed, completed, seconds, float64(completed)/seconds)
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSummary runs the summary over what a tiny bench/dnssec.sh run writes:
// two rounds, where the ratios must be taken round by round.
func TestSummary(t *testing.T) {
	dir := t.TempDir()
	var passes strings.Builder
	// round 1: steer 100k q/s at 5 µs/q (50 ticks at HZ 100 for 100k
	// queries); steer-signed 90k at 5.5; round 2 both half as fast.
	for _, p := range []struct {
		round          int
		server         string
		completed, tck int
	}{
		{1, "steer", 100000, 50}, {1, "steer-signed", 90000, 50}, {1, "gdnsd", 100000, 50},
		{2, "steer", 50000, 50}, {2, "steer-signed", 50000, 55}, {2, "gdnsd", 40000, 50},
	} {
		raw := fmt.Sprintf("raw/r%d-%s-steered.txt", p.round, p.server)
		write(t, filepath.Join(dir, raw), dnsperfOut(p.completed, 1))
		fmt.Fprintf(&passes, "%d\t%s\tsteered\t%s\t%d\t100\n", p.round, p.server, raw, p.tck)
	}
	write(t, filepath.Join(dir, "passes.tsv"), passes.String())
	write(t, filepath.Join(dir, "servers.tsv"), "steer\tok 201/201\t33792\tunsigned\nsteer-signed\tok 202/202 validated\t40960\tsigned\ngdnsd\tWRONG 3/201\t20480\t\n")
	write(t, filepath.Join(dir, "flood.jsonl"),
		`{"class":"flood","label":"steer-signed","seconds":10,"sent":400000,"send_qps":40000,"answered":400000,"tc":380000,"nxdomain":0,"noerror":20000,"signed":20000}
{"class":"resolver","label":"steer-signed","seconds":10,"asked":500,"validated":500,"p50_ms":1.5,"p99_ms":9}
{"class":"server","label":"steer-signed","cpu_s":6,"wall_s":10,"budget_per_s":20000,"signatures":200000,"refused":3800000,"note":"n"}
`)
	write(t, filepath.Join(dir, "start.tsv"), "1\tunsigned\t2.0\t10000\t1.0\n1\tsigned\t3.0\t10000\t1.5\n2\tunsigned\t4.0\t10000\t2.0\n2\tsigned\t4.0\t10000\n")
	var out bytes.Buffer
	if err := summary(dir, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		// QPS 90k/100k = 0.90 and 50k/50k = 1.00: median 0.95
		"| steered | steer-signed | ok 202/202 validated | 70000 (50000–90000) | 8.28 (5.56–11.00) | 0.95 (0.90–1.00) | 1.11 (1.10–1.11) |",
		"| steered | steer | ok 201/201 | 75000 (50000–100000) | 7.50 (5.00–10.00) | 1.00 | 1.00 | 1.12 (1.00–1.25) | 0.90 (0.80–1.00) | 33.0 |",
		"| steered | gdnsd | ✗ WRONG 3/201 |",
		"| steer-signed | 40000 | 100.0 | 95.0 | 2000 | 60 | 15.0 | 20000 (20000); refused 380000/s | 500 | 100.0 | 1.5 / 9.0 |  |",
		"#### Start: 10000 steered names",
		"| signed | 3.50 (3.00–4.00) | 1.25 (1.00–1.50) | 1.50 | 1.50 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks\n%s\ngot:\n%s", want, got)
		}
	}
}

func TestDoFile(t *testing.T) {
	dir := t.TempDir()
	var in bytes.Buffer
	for i, withEDNS := range []bool{true, false} {
		m := new(dns.Msg)
		m.SetQuestion("shop.example.com.", dns.TypeA)
		m.Id = uint16(i)
		if withEDNS {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: []byte{49, 36, 0, 0}})
		}
		if err := writeFramed(&in, m); err != nil {
			t.Fatal(err)
		}
	}
	inPath, outPath := filepath.Join(dir, "in.bin"), filepath.Join(dir, "out.bin")
	write(t, inPath, in.String())
	if err := doFile([]string{"-in", inPath, "-out", outPath}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; len(b) > 0; i++ {
		l := int(binary.BigEndian.Uint16(b))
		m := new(dns.Msg)
		if err := m.Unpack(b[2 : 2+l]); err != nil {
			t.Fatal(err)
		}
		opt := m.IsEdns0()
		if opt == nil || !opt.Do() || m.Id != uint16(i) {
			t.Fatalf("message %d: DO not set or ID changed: %v", i, m)
		}
		if i == 0 && (len(opt.Option) != 1 || opt.UDPSize() != 1232) {
			t.Fatalf("message 0 lost its ECS option or buffer size: %v", opt)
		}
		b = b[2+l:]
	}
}

// TestVerifySection: an answer verifies with its key, and a changed
// record or another key fails.
func TestVerifySection(t *testing.T) {
	key := &dns.DNSKEY{Hdr: dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600},
		Flags: 257, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
	priv, err := key.Generate(256)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := dns.NewRR("shop.example.com. 60 IN A 203.0.113.10")
	sig := &dns.RRSIG{Hdr: dns.RR_Header{Name: "shop.example.com.", Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: 60},
		Algorithm: key.Algorithm, SignerName: "example.com.", KeyTag: key.KeyTag(),
		Inception: uint32(time.Now().Add(-time.Hour).Unix()), Expiration: uint32(time.Now().Add(time.Hour).Unix())}
	if err := sig.Sign(priv.(*ecdsa.PrivateKey), []dns.RR{a}); err != nil {
		t.Fatal(err)
	}
	if n, err := verifySection([]dns.RR{a, sig}, []*dns.DNSKEY{key}); err != nil || n != 1 {
		t.Fatalf("a signed answer: %d, %v", n, err)
	}
	if _, err := verifySection([]dns.RR{a}, []*dns.DNSKEY{key}); err == nil {
		t.Fatal("an answer without RRSIG verified")
	}
	b, _ := dns.NewRR("shop.example.com. 60 IN A 198.51.100.20")
	if _, err := verifySection([]dns.RR{b, sig}, []*dns.DNSKEY{key}); err == nil {
		t.Fatal("another address verified with the first one's RRSIG")
	}
	if !answers(&dns.Msg{Answer: []dns.RR{a, sig}}, "203.0.113.10", true) || answers(&dns.Msg{Answer: []dns.RR{a}}, "203.0.113.10", true) {
		t.Fatal("wait's answers() must require the RRSIG with -do")
	}
}
