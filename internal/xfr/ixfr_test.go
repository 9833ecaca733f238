package xfr

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/tsig"
)

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

func soaAt(t testing.TB, s uint32) *dns.SOA {
	return mustRR(t, fmt.Sprintf("%s 3600 IN SOA ns1.%s hostmaster.%s %d 3600 600 86400 300", origin, origin, origin, s)).(*dns.SOA)
}

// zoneAt is zone(n) at serial s, SOA first and not repeated at the end.
func zoneAt(t testing.TB, n int, s uint32) []dns.RR {
	rrs := zone(n)
	rrs = rrs[:len(rrs)-1]
	rrs[0] = soaAt(t, s)
	return rrs
}

// changed returns z at serial s with host1 (TXT) and host2 (A) deleted,
// host4's TTL changed and two records added.
func changed(t testing.TB, z []dns.RR, s uint32) []dns.RR {
	out := []dns.RR{soaAt(t, s)}
	for _, rr := range z[1:] {
		switch strings.SplitN(rr.Header().Name, ".", 2)[0] {
		case "host1", "host2":
			continue
		case "host4":
			rr = dns.Copy(rr)
			rr.Header().Ttl = 60
		}
		out = append(out, rr)
	}
	return append(out,
		mustRR(t, fmt.Sprintf("new%d.%s 300 IN A 203.0.113.%d", s%1000, origin, s%250)),
		mustRR(t, fmt.Sprintf("new%d.%s 300 IN TXT \"added at serial %d\"", s%1000, origin, s)))
}

func names(rrs []dns.RR) string {
	var s []string
	for _, rr := range rrs {
		s = append(s, fmt.Sprintf("%s/%s/%d", strings.SplitN(rr.Header().Name, ".", 2)[0], dns.TypeToString[rr.Header().Rrtype], rr.Header().Ttl))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func TestSerialNewer(t *testing.T) {
	for _, c := range []struct {
		a, b uint32
		want bool
	}{
		{2, 1, true},
		{1, 2, false},
		{1, 1, false},
		{0, 0xFFFFFFFF, true}, // wraparound
		{5, 0xFFFFFFF0, true},
		{0xFFFFFFF0, 5, false},
		{0x7FFFFFFF, 0, true},  // 2^31 - 1 ahead: newer
		{0x80000000, 0, false}, // exactly 2^31: undefined, neither
		{0, 0x80000000, false},
		{0x80000001, 0, false}, // more than 2^31 ahead: older
		{0, 0x80000001, true},
	} {
		if got := SerialNewer(c.a, c.b); got != c.want {
			t.Errorf("SerialNewer(%d, %d) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestDiff(t *testing.T) {
	old := zoneAt(t, 12, 1)
	new := changed(t, old, 2)
	// Shuffled and with a differently cased duplicate: order and case do not matter.
	shuf := append([]dns.RR{new[0]}, new[len(new)-1:]...)
	shuf = append(shuf, new[1:len(new)-1]...)
	up := dns.Copy(new[1])
	up.Header().Name = strings.ToUpper(up.Header().Name)
	shuf = append(shuf, up)
	del, add := Diff(old, shuf)
	if got, want := names(del), "host1/TXT/300 host2/A/300 host4/A/300"; got != want {
		t.Errorf("del %s, want %s", got, want)
	}
	if got, want := names(add), "host4/A/60 new2/A/300 new2/TXT/300"; got != want {
		t.Errorf("add %s, want %s", got, want)
	}
	if del, add := Diff(old, old); len(del)+len(add) != 0 {
		t.Errorf("no change: del %v add %v", del, add)
	}
	// The SOA is never part of the diff.
	if del, add := Diff(old[:1], new[:1]); len(del)+len(add) != 0 {
		t.Errorf("SOA only: del %v add %v", del, add)
	}
	// Applying the diff to old gives new.
	var applied []dns.RR
	for _, rr := range old[1:] {
		gone := false
		for _, d := range del {
			if same(rr, d) {
				gone = true
			}
		}
		if !gone {
			applied = append(applied, rr)
		}
	}
	applied = append(applied, add...)
	if names(applied) != names(new[1:]) {
		t.Errorf("old - del + add:\n%s\nnew:\n%s", names(applied), names(new[1:]))
	}
}

func delta(t testing.TB, from, to uint32) Delta {
	return Delta{From: soaAt(t, from), To: soaAt(t, to)}
}

func serials(ds []Delta) string {
	var s []string
	for _, d := range ds {
		s = append(s, fmt.Sprintf("%d>%d", d.From.Serial, d.To.Serial))
	}
	return strings.Join(s, " ")
}

func TestJournal(t *testing.T) {
	j := NewJournal(3)
	if _, ok := j.Since(1); ok {
		t.Fatal("empty journal has serial 1")
	}
	for s := uint32(1); s <= 5; s++ {
		j.Add(delta(t, s, s+1))
	}
	// A ring of 3: 3>4 4>5 5>6.
	if j.Len() != 3 {
		t.Fatalf("len %d", j.Len())
	}
	for _, c := range []struct {
		serial uint32
		want   string
		ok     bool
	}{
		{1, "", false}, {2, "", false}, // dropped
		{3, "3>4 4>5 5>6", true},
		{5, "5>6", true},
		{6, "", true}, // current: nothing to send
		{7, "", false},
	} {
		ds, ok := j.Since(c.serial)
		if ok != c.ok || serials(ds) != c.want {
			t.Errorf("Since(%d) = %q %v, want %q %v", c.serial, serials(ds), ok, c.want, c.ok)
		}
	}
	// A gap restarts the journal from the new delta.
	j.Add(delta(t, 10, 11))
	if ds, ok := j.Since(10); !ok || serials(ds) != "10>11" || j.Len() != 1 {
		t.Fatalf("after gap: %q %v len %d", serials(ds), ok, j.Len())
	}
	if _, ok := j.Since(5); ok {
		t.Fatal("serial from before the gap still served")
	}
	// Serial wraparound is just another chain link.
	j.Add(delta(t, 11, 0xFFFFFFFF))
	j.Add(delta(t, 0xFFFFFFFF, 3))
	if ds, ok := j.Since(11); !ok || serials(ds) != "11>4294967295 4294967295>3" {
		t.Fatalf("wrap: %q %v", serials(ds), ok)
	}
}

func TestJournalConcurrent(t *testing.T) {
	j := NewJournal(8)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for s := uint32(0); s < 50; s += 7 {
					if ds, ok := j.Since(s); ok {
						for i := 1; i < len(ds); i++ {
							if ds[i].From.Serial != ds[i-1].To.Serial {
								t.Error("broken chain")
								return
							}
						}
					}
				}
			}
		}()
	}
	for s := uint32(0); s < 200; s++ {
		j.Add(delta(t, s, s+1))
	}
	close(stop)
	wg.Wait()
}

func TestIXFRForms(t *testing.T) {
	z1 := zoneAt(t, 12, 1)
	z2 := changed(t, z1, 2)
	z3 := changed(t, z2, 3)
	j := NewJournal(4)
	for _, p := range [][2][]dns.RR{{z1, z2}, {z2, z3}} {
		del, add := Diff(p[0], p[1])
		j.Add(Delta{From: p[0][0].(*dns.SOA), To: p[1][0].(*dns.SOA), Del: del, Add: add})
	}
	cur := z3[0]
	// Up to date, or newer (RFC 1982): the current SOA alone.
	for _, have := range []uint32{3, 4, 1 << 30} {
		if got := IXFR(z3, have, j); len(got) != 1 || got[0] != cur {
			t.Errorf("have %d: %d records", have, len(got))
		}
	}
	// Incremental from 1: cur, 1, del, 2, add, 2, del, 3, add, cur.
	got := IXFR(z3, 1, j)
	var soas []uint32
	for _, rr := range got {
		if s, ok := rr.(*dns.SOA); ok {
			soas = append(soas, s.Serial)
		}
	}
	if fmt.Sprint(soas) != "[3 1 2 2 3 3]" || len(got) != 14 {
		t.Fatalf("incremental from 1: SOAs %v, %d records:\n%v", soas, len(got), got)
	}
	if got := IXFR(z3, 2, j); len(got) != 1+1+0+1+2+1 {
		t.Fatalf("incremental from 2: %d records", len(got))
	}
	// Not in the journal (too old, or none): AXFR-style.
	for _, jj := range []*Journal{j, nil, NewJournal(1)} {
		got := IXFR(z3, 0xFFFFFFF0, jj)
		if len(got) != len(z3)+1 || got[0] != cur || got[len(got)-1] != cur {
			t.Fatalf("AXFR-style: %d records", len(got))
		}
	}
	// A journal that does not reach the current serial is not used.
	z4 := changed(t, z3, 4)
	if got := IXFR(z4, 1, j); len(got) != len(z4)+1 {
		t.Fatalf("stale journal used: %d records", len(got))
	}
	// Messages accepts the single SOA and the IXFR forms.
	for _, rrs := range [][]dns.RR{{cur}, IXFR(z3, 1, j)} {
		req := new(dns.Msg).SetIxfr(origin, 1, "ns1."+origin, "hostmaster."+origin)
		if msgs, err := Messages(req, rrs, 0); err != nil || len(msgs) != 1 {
			t.Fatalf("Messages: %d, %v", len(msgs), err)
		}
	}
}

func ixfrReq(have uint32, signed bool) *dns.Msg {
	m := new(dns.Msg).SetIxfr(origin, have, "ns1."+origin, "hostmaster."+origin)
	if signed {
		m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
	}
	return m
}

// ixfrIn runs an IXFR with miekg's client (which verifies each
// envelope's TSIG) and returns the records and the message count.
func ixfrIn(t *testing.T, addr string, have uint32) ([]dns.RR, int) {
	t.Helper()
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, TsigSecret: map[string]string{keyName: secret}}
	ch, err := tr.In(ixfrReq(have, true), addr)
	if err != nil {
		t.Fatal(err)
	}
	var got []dns.RR
	n := 0
	for e := range ch {
		if e.Error != nil {
			t.Fatalf("IXFR from %d: %v", have, e.Error)
		}
		n++
		got = append(got, e.RR...)
	}
	return got, n
}

func TestServeIXFRMiekgClient(t *testing.T) {
	z1 := zoneAt(t, 3000, 1)
	p := newRawPrimary(t, z1, true)
	z2 := changed(t, z1, 2)
	p.set(z2)
	// Incremental, one message.
	got, n := ixfrIn(t, p.addr, 1)
	sameRRs(t, got, IXFR(z2, 1, p.j))
	if n != 1 || len(got) != 1+1+3+1+3+1 {
		t.Fatalf("incremental: %d records in %d messages", len(got), n)
	}
	// Up to date: the SOA alone.
	if got, n := ixfrIn(t, p.addr, 2); len(got) != 1 || n != 1 {
		t.Fatalf("current: %d records in %d messages", len(got), n)
	}
	// Not in the journal, > 64 KiB: AXFR-style (serial 0, as miekg's
	// client compares serials numerically, not by RFC 1982) in several messages, each
	// signed in the chain (checked message by message over tsig.NewConnWriter).
	got, n = ixfrIn(t, p.addr, 0)
	sameRRs(t, got, IXFR(z2, 0, p.j))
	if n < 3 {
		t.Fatalf("AXFR-style > 64 KiB in %d messages", n)
	}
	c1, c2 := tcpPair(t)
	req := ixfrReq(0, true)
	b, mac, err := dns.TsigGenerate(req, secret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	w, r, err := tsig.NewConnWriter(c1, b, tsig.NewKeyring(*testKey))
	if err != nil {
		t.Fatal(err)
	}
	go ServeIXFR(w, r, IXFR(z2, 0, p.j))
	co := &dns.Conn{Conn: c2}
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	total := 0
	for i := 0; total < len(z2)+1; i++ {
		raw, err := co.ReadMsgHeader(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > DefaultLimit {
			t.Fatalf("message %d: %d bytes", i, len(raw))
		}
		m := new(dns.Msg)
		if err := m.Unpack(raw); err != nil || m.IsTsig() == nil {
			t.Fatalf("message %d unsigned (%v)", i, err)
		}
		if err := dns.TsigVerify(raw, secret, mac, i > 0); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		mac = m.IsTsig().MAC
		total += len(m.Answer)
	}
	t.Logf("AXFR-style IXFR: %d records in %d messages; log %v", len(got), n, p.requests())
}

func TestServeIXFRUDP(t *testing.T) {
	z1 := zoneAt(t, 3000, 1)
	p := newRawPrimary(t, z1, false)
	p.set(changed(t, z1, 2))
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, TsigSecret: map[string]string{keyName: secret}}
	for _, tc := range []struct {
		have    uint32
		edns    uint16
		records int
	}{
		{1, 0, 10}, // incremental fits in 512
		{2, 0, 1},  // current
		{0, 0, 1},  // AXFR-style does not fit: SOA only, retry over TCP
		{0, 4096, 1},
	} {
		for _, signed := range []bool{false, true} {
			q := ixfrReq(tc.have, false)
			if tc.edns != 0 {
				q.SetEdns0(tc.edns, false)
			}
			if signed {
				q.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
			}
			r, _, err := c.Exchange(q, p.addr)
			if err != nil {
				t.Fatalf("have %d signed=%v: %v", tc.have, signed, err)
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != tc.records || r.Answer[0].(*dns.SOA).Serial != 2 || (signed != (r.IsTsig() != nil)) || ((tc.edns != 0) != (r.IsEdns0() != nil)) {
				t.Fatalf("have %d signed=%v: %v", tc.have, signed, r)
			}
		}
	}
	// Without the client's SOA: FORMERR.
	q := new(dns.Msg)
	q.SetQuestion(origin, dns.TypeIXFR)
	for _, net := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: net, Timeout: 2 * time.Second}
		r, _, err := c.Exchange(q, p.addr)
		if err != nil || r.Rcode != dns.RcodeFormatError {
			t.Fatalf("%s IXFR without SOA: %v %v", net, r, err)
		}
	}
}
