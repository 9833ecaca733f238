package secondary

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// fake is a primary speaking DNS by hand: SOA over UDP and TCP, AXFR and
// IXFR over TCP, misbehaving as told.
type fake struct {
	t    *testing.T
	addr string

	mu        sync.Mutex
	serial    uint32
	extra     []string
	ixfrMode  string // "": answer IXFR with the full zone; "notimp"; "baddelete"
	axfrBreak bool   // send the first AXFR message, then close
	hold      chan struct{}
	signSOA   bool   // sign SOA answers to signed queries
	signXfr   bool   // sign transfer messages to signed requests
	soaAlg    string // sign SOA answers under this algorithm rather than the request's
	xfrAlg    string // sign transfers under this algorithm rather than the request's
	timers    string
	refuse    bool // answer everything REFUSED
	ixfrN     int
	axfrN     int
	soaN      int
}

func startFake(t *testing.T, serial uint32) *fake {
	t.Helper()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ul, err := net.ListenPacket("udp", tl.Addr().String())
	if err != nil {
		tl.Close()
		t.Fatal(err)
	}
	f := &fake{t: t, addr: tl.Addr().String(), serial: serial, timers: slowTimers}
	var wg sync.WaitGroup
	t.Cleanup(func() { tl.Close(); ul.Close(); wg.Wait() })
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65535)
		for {
			n, from, err := ul.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			if b := f.soa(q); b != nil {
				ul.WriteTo(b, from)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				f.serveTCP(c)
			}()
		}
	}()
	return f
}

func (f *fake) set(fn func(f *fake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fake) counts() (soa, ixfr, axfr int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.soaN, f.ixfrN, f.axfrN
}

func (f *fake) soaRR(serial uint32) dns.RR {
	return mustRR(f.t, fmt.Sprintf("%s 60 IN SOA ns1.%s hostmaster.%s %d %s", origin, origin, origin, serial, f.timers))
}

// zone is the fake's zone without the closing SOA (f.mu held).
func (f *fake) zone() []dns.RR {
	var out []dns.RR
	for _, l := range strings.Split(strings.TrimSpace(zoneBody(f.serial, f.timers, f.extra...)), "\n") {
		out = append(out, mustRR(f.t, l))
	}
	return out
}

// pack packs r, signed if the request was and sign says so; prevMAC
// chains the signatures of a transfer.
func pack(r, q *dns.Msg, sign bool, prevMAC string, timersOnly bool, alg string) ([]byte, string) {
	if ts := q.IsTsig(); ts != nil && sign {
		if alg == "" {
			alg = ts.Algorithm
		}
		r.SetTsig(ts.Hdr.Name, alg, 300, time.Now().Unix())
		if prevMAC == "" {
			prevMAC = ts.MAC
		}
		b, mac, err := dns.TsigGenerate(r, secret, prevMAC, timersOnly)
		if err != nil {
			panic(err)
		}
		return b, mac
	}
	b, err := r.Pack()
	if err != nil {
		panic(err)
	}
	return b, ""
}

// soa answers an SOA query; nil for anything else.
func (f *fake) soa(q *dns.Msg) []byte {
	if len(q.Question) != 1 || q.Question[0].Qtype != dns.TypeSOA {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.soaN++
	r := new(dns.Msg)
	r.SetReply(q)
	if f.refuse {
		r.Rcode = dns.RcodeRefused
		b, _ := pack(r, q, f.signSOA, "", false, f.soaAlg)
		return b
	}
	r.Authoritative = true
	r.Answer = []dns.RR{f.soaRR(f.serial)}
	b, _ := pack(r, q, f.signSOA, "", false, f.soaAlg)
	return b
}

func writeMsg(w io.Writer, b []byte) error {
	out := make([]byte, 2+len(b))
	binary.BigEndian.PutUint16(out, uint16(len(b)))
	copy(out[2:], b)
	_, err := w.Write(out)
	return err
}

func (f *fake) serveTCP(c net.Conn) {
	for {
		var l uint16
		if err := binary.Read(c, binary.BigEndian, &l); err != nil {
			return
		}
		buf := make([]byte, l)
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		q := new(dns.Msg)
		if q.Unpack(buf) != nil || len(q.Question) != 1 {
			return
		}
		if b := f.soa(q); b != nil {
			writeMsg(c, b)
			continue
		}
		msgs, closeAfter, sign := f.transfer(q)
		f.mu.Lock()
		hold := f.hold
		f.mu.Unlock()
		if hold != nil {
			<-hold // the answer is the zone as it was asked for
		}
		f.mu.Lock()
		alg := f.xfrAlg
		f.mu.Unlock()
		mac := ""
		for i, m := range msgs {
			b, next := pack(m, q, sign, mac, i > 0, alg)
			mac = next
			if writeMsg(c, b) != nil {
				return
			}
		}
		if closeAfter {
			return
		}
	}
}

// transfer returns the messages answering an AXFR or IXFR.
func (f *fake) transfer(q *dns.Msg) (msgs []*dns.Msg, closeAfter, sign bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := func(rrs ...dns.RR) *dns.Msg {
		r := new(dns.Msg)
		r.SetReply(q)
		r.Authoritative = true
		r.Answer = rrs
		return r
	}
	zone := f.zone()
	full := func() []*dns.Msg {
		half := len(zone) / 2
		return []*dns.Msg{reply(zone[:half]...), reply(append(append([]dns.RR{}, zone[half:]...), f.soaRR(f.serial))...)}
	}
	switch q.Question[0].Qtype {
	case dns.TypeAXFR:
		f.axfrN++
		if f.axfrBreak {
			return full()[:1], true, f.signXfr
		}
		return full(), false, f.signXfr
	case dns.TypeIXFR:
		f.ixfrN++
		ours := q.Ns[0].(*dns.SOA).Serial
		switch f.ixfrMode {
		case "notimp":
			r := new(dns.Msg)
			r.SetRcode(q, dns.RcodeNotImplemented)
			return []*dns.Msg{r}, false, f.signXfr
		case "baddelete":
			return []*dns.Msg{reply(f.soaRR(f.serial), f.soaRR(ours),
				mustRR(f.t, "nothere."+origin+" 60 IN A 192.0.2.99"),
				f.soaRR(f.serial), f.soaRR(f.serial))}, false, f.signXfr
		}
		return full(), false, f.signXfr
	}
	r := new(dns.Msg)
	r.SetRcode(q, dns.RcodeRefused)
	return []*dns.Msg{r}, false, false
}

// TestFakeBrokenTransfers: an AXFR cut after its first message is
// rejected whole; an IXFR deleting a record we do not have falls back to
// AXFR; an IXFR answered NOTIMP falls back too.
func TestFakeBrokenTransfers(t *testing.T) {
	f := startFake(t, 1)
	dir := t.TempDir()
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, dir, rec, log, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s\nevents %s", log.String(), rec)
		}
	})
	m.Set([]Zone{{Origin: origin, Primaries: []string{f.addr}}})
	dnstest.WaitFor(t, 3*time.Second, "the first AXFR", haveSerial(m, 1))
	good, _ := os.ReadFile(filepath.Join(dir, CacheFile(origin)))

	// NOTIMP to IXFR → AXFR, which breaks after its first message.
	f.set(func(f *fake) {
		f.serial, f.ixfrMode, f.axfrBreak, f.extra = 2, "notimp", true, []string{"cut." + origin + " 60 IN A 192.0.2.3"}
	})
	m.Refresh(origin)
	dnstest.WaitFor(t, 3*time.Second, "the broken AXFR", func() bool { return rec.has("axfr/broken") })
	if !rec.has("ixfr/error") {
		t.Fatalf("events %s", rec)
	}
	c, _ := m.Copy(origin)
	if c.Serial != 1 || copyHas(c, "cut."+origin+" 60 IN A 192.0.2.3") {
		t.Fatalf("broken transfer served: serial %d", c.Serial)
	}
	if disk, _ := os.ReadFile(filepath.Join(dir, CacheFile(origin))); string(disk) != string(good) {
		t.Fatal("broken transfer saved")
	}
	if st := m.Status(); !strings.Contains(st[0].LastError, "midway") {
		t.Fatalf("status %+v", st)
	}

	// An IXFR whose deletion does not match → AXFR.
	_, ixfr0, axfr0 := f.counts()
	f.set(func(f *fake) { f.serial, f.ixfrMode, f.axfrBreak = 3, "baddelete", false })
	m.Refresh(origin)
	dnstest.WaitFor(t, 3*time.Second, "the AXFR after the bad IXFR", haveSerial(m, 3))
	_, ixfr1, axfr1 := f.counts()
	if ixfr1 != ixfr0+1 || axfr1 != axfr0+1 || !rec.has("ixfr/broken") {
		t.Fatalf("IXFR %d→%d, AXFR %d→%d, events %s", ixfr0, ixfr1, axfr0, axfr1, rec)
	}
	if !strings.Contains(log.String(), "deletion of a record we do not have") || !strings.Contains(log.String(), "fallback_axfr=true") {
		t.Fatalf("log:\n%s", log.String())
	}
	c, _ = m.Copy(origin)
	if !copyHas(c, "cut."+origin+" 60 IN A 192.0.2.3") {
		t.Fatalf("copy after AXFR:\n%s", c.Text)
	}
	if st := m.Status(); st[0].LastTransfer != "axfr" || st[0].LastError != "" {
		t.Fatalf("status %+v", st)
	}

	// An IXFR answered with the whole zone is taken as one.
	f.set(func(f *fake) { f.serial, f.ixfrMode, f.extra = 4, "", nil })
	m.Refresh(origin)
	dnstest.WaitFor(t, 3*time.Second, "the AXFR-style IXFR", haveSerial(m, 4))
	c, _ = m.Copy(origin)
	if copyHas(c, "cut."+origin+" 60 IN A 192.0.2.3") || rec.count("ixfr/ok") != 1 {
		t.Fatalf("events %s, copy:\n%s", rec, c.Text)
	}
}

// TestFakeAnswersUnderAnotherAlgorithm: the zone's key is hmac-sha256; a
// primary signing its answers with the same secret under hmac-sha512
// (SOA) or hmac-sha1 (transfer) is not using the key: a TSIG failure
// naming the key and both algorithms, no copy.
func TestFakeAnswersUnderAnotherAlgorithm(t *testing.T) {
	f := startFake(t, 1)
	f.set(func(f *fake) { f.signSOA, f.signXfr, f.soaAlg, f.xfrAlg = true, true, dns.HmacSHA512, dns.HmacSHA1 })
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, t.TempDir(), rec, log, nil)
	m.Set([]Zone{{Origin: origin, Primaries: []string{f.addr}, Key: testKey(secret)}})
	dnstest.WaitFor(t, 3*time.Second, "the SOA under hmac-sha512 refused", func() bool {
		return rec.has("soa/tsig") && strings.Contains(log.String(), "TSIG key sec-key. is hmac-sha256, the message is signed with hmac-sha512")
	}, log.String)
	f.set(func(f *fake) { f.soaAlg = "" })
	m.Refresh(origin)
	dnstest.WaitFor(t, 3*time.Second, "the AXFR under hmac-sha1 refused", func() bool {
		return rec.has("axfr/tsig") && strings.Contains(log.String(), "TSIG key sec-key. is hmac-sha256, the message is signed with hmac-sha1")
	}, log.String)
	if _, ok := m.Copy(origin); ok {
		t.Fatal("copy from a transfer signed under another algorithm")
	}
	f.set(func(f *fake) { f.xfrAlg = "" })
	m.Refresh(origin)
	dnstest.WaitFor(t, 3*time.Second, "the copy under the key's own algorithm", haveSerial(m, 1))
}

// TestFakeAnswersWithoutTSIG: with a key, an unsigned SOA answer or an
// unsigned transfer is a TSIG failure, not a copy.
func TestFakeAnswersWithoutTSIG(t *testing.T) {
	f := startFake(t, 1)
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, t.TempDir(), rec, log, nil)
	m.Set([]Zone{{Origin: origin, Primaries: []string{f.addr}, Key: testKey(secret)}})
	dnstest.WaitFor(t, 3*time.Second, "the unsigned SOA", func() bool { return rec.has("soa/tsig") })
	// The event and the log line are written one after the other: wait for
	// the line as well, not only for the event.
	dnstest.WaitFor(t, 3*time.Second, "the log to say unsigned answer", func() bool {
		return strings.Contains(log.String(), "unsigned answer")
	}, log.String)
	f.set(func(f *fake) { f.signSOA = true })
	m.Refresh(origin)
	dnstest.WaitFor(t, 3*time.Second, "the unsigned AXFR", func() bool { return rec.has("axfr/tsig") })
	if _, ok := m.Copy(origin); ok {
		t.Fatal("copy from an unsigned transfer")
	}
	// Signed throughout, it goes in: the fake's signing is right.
	f.set(func(f *fake) { f.signXfr = true })
	m.Refresh(origin)
	dnstest.WaitFor(t, 3*time.Second, "the signed AXFR", haveSerial(m, 1))
}

// TestFakeNotifyDuringTransfer: a NOTIFY while a transfer runs brings one
// more refresh right after it; primaries are tried in order.
func TestFakeNotifyDuringTransfer(t *testing.T) {
	f := startFake(t, 1)
	hold := make(chan struct{})
	f.set(func(f *fake) { f.hold = hold })
	dead := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, t.TempDir(), rec, log, nil)
	m.Set([]Zone{{Origin: origin, Primaries: []string{dead, f.addr}}})
	dnstest.WaitFor(t, 3*time.Second, "the AXFR to start", func() bool { _, _, a := f.counts(); return a == 1 })
	f.set(func(f *fake) { f.hold, f.serial = nil, 2 })
	if !m.Notify(origin, netip.MustParseAddr("::ffff:127.0.0.1")) {
		t.Fatal("NOTIFY refused")
	}
	close(hold) // the running AXFR sends serial 1
	dnstest.WaitFor(t, 3*time.Second, "serial 2", haveSerial(m, 2))
	if _, ixfr, axfr := f.counts(); ixfr != 1 || axfr != 1 {
		t.Fatalf("IXFR %d, AXFR %d", ixfr, axfr)
	}
	c, _ := m.Copy(origin)
	if c.From != f.addr {
		t.Fatalf("from %q", c.From)
	}
}

// TestCloseStopsEverything: Close ends a transfer in flight at once and
// leaves no goroutine behind.
func TestCloseStopsEverything(t *testing.T) {
	f := startFake(t, 1)
	hold := make(chan struct{})
	f.set(func(f *fake) { f.hold = hold })
	before := runtime.NumGoroutine()
	m := New(Options{Timeout: 5 * time.Second, MinRefresh: 100 * time.Millisecond})
	m.Set([]Zone{{Origin: origin, Primaries: []string{f.addr}}, {Origin: "other.example.", Primaries: []string{f.addr}}})
	dnstest.WaitFor(t, 3*time.Second, "the AXFR to start", func() bool { _, _, a := f.counts(); return a >= 1 })
	start := time.Now()
	m.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %v", d)
	}
	close(hold)                                                  // the fake's held connections end too
	m.Close()                                                    // twice is fine
	m.Set([]Zone{{Origin: origin, Primaries: []string{f.addr}}}) // after Close: nothing starts
	dnstest.WaitFor(t, 2*time.Second, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// TestSetReconfigures: removing a zone calls Changed and drops it;
// changing its primaries keeps the copy and refreshes at once.
func TestSetReconfigures(t *testing.T) {
	f1, f2 := startFake(t, 1), startFake(t, 5)
	rec := &recorder{}
	m := newManager(t, "", rec, &dnstest.LockedBuffer{}, nil)
	m.Set([]Zone{{Origin: origin, Primaries: []string{f1.addr}}})
	dnstest.WaitFor(t, 3*time.Second, "serial 1", haveSerial(m, 1))
	m.Set([]Zone{{Origin: origin, Primaries: []string{f1.addr}}}) // the same: nothing happens
	soa0, _, _ := f1.counts()
	time.Sleep(100 * time.Millisecond)
	if soa1, _, _ := f1.counts(); soa1 != soa0 {
		t.Fatal("an unchanged Set refreshed")
	}
	m.Set([]Zone{{Origin: origin, Primaries: []string{f2.addr}}})
	if c, ok := m.Copy(origin); !ok || c.Serial != 1 {
		t.Fatal("copy lost on reconfiguration")
	}
	dnstest.WaitFor(t, 3*time.Second, "serial 5 from the new primary", haveSerial(m, 5))
	n := rec.changes()
	m.Set(nil)
	if _, ok := m.Copy(origin); ok {
		t.Fatal("removed zone still has a copy")
	}
	dnstest.WaitFor(t, 2*time.Second, "Changed for the removal", func() bool { return rec.changes() > n })
	if len(m.Status()) != 0 || m.Refresh(origin) || m.Notify(origin, netip.MustParseAddr("127.0.0.1")) {
		t.Fatal("removed zone still known")
	}
}

// TestFakeExpiryAndRecovery: the copy expires when no primary confirms
// it for SOA EXPIRE, and a primary confirming it later unexpires it.
func TestFakeExpiryAndRecovery(t *testing.T) {
	t.Parallel() // waits out REFRESH, RETRY and EXPIRE timers
	f := startFake(t, 1)
	f.set(func(f *fake) { f.timers = "1 1 2 1" })
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, t.TempDir(), rec, log, nil)
	m.Set([]Zone{{Origin: origin, Primaries: []string{f.addr}}})
	dnstest.WaitFor(t, 3*time.Second, "serial 1", haveSerial(m, 1))
	f.set(func(f *fake) { f.refuse = true })
	n := rec.changes()
	dnstest.WaitFor(t, 4*time.Second, "expiry", func() bool { c, _ := m.Copy(origin); return c.Expired })
	// The copy shows the expiry a moment before the change is reported
	// (a loaded CI run once looked in between).
	dnstest.WaitFor(t, time.Second, "Changed for the expiry", func() bool { return rec.changes() > n })
	if !rec.has("soa/refused") {
		t.Fatalf("changes %d→%d, events %s", n, rec.changes(), rec)
	}
	n = rec.changes()
	f.set(func(f *fake) { f.refuse = false })
	dnstest.WaitFor(t, 3*time.Second, "recovery", func() bool { c, _ := m.Copy(origin); return !c.Expired })
	dnstest.WaitFor(t, time.Second, "Changed for the recovery", func() bool { return rec.changes() > n })
	if c, _ := m.Copy(origin); c.Serial != 1 || !rec.has("soa/uptodate") || !strings.Contains(log.String(), "no longer expired") {
		t.Fatalf("serial %d, events %s", c.Serial, rec)
	}
}
