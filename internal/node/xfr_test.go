package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
	"github.com/steer-dns/steer/internal/snapshot"
)

// Three keys, one per secondary (per-secondary keys), in tsig-keygen's
// format.
var xfrKeys = map[string]string{
	"nsd-key":  "bnNkIHNlY29uZGFyeSBrZXkgb2YgdGhpcnR5LXR3byE=",
	"knot-key": "a25vdCBzZWNvbmRhcnkga2V5IG9mIHRoaXJ0eS10d28=",
	"bind-key": "YmluZCBzZWNvbmRhcnkga2V5IG9mIHRoaXJ0eS10d28=",
}

func keyFile(name string) string {
	return fmt.Sprintf("key %q {\n\talgorithm hmac-sha256;\n\tsecret %q;\n};\n", name, xfrKeys[name])
}

const xfrOrigin = "xfr.example."

// bigZone is a zone of more than 64 KiB (so an AXFR takes several
// messages), with serial and a TXT at gen.
func bigZone(serial int, gen string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n$TTL 300\n@ SOA ns1 hostmaster %d 86400 3600 1209600 60\n@ NS ns1\nns1 A 192.0.2.53\ngen TXT %q\n", xfrOrigin, serial, gen)
	for i := range 1500 {
		fmt.Fprintf(&b, "host%d TXT \"record %d of a zone that takes more than one 64 KiB message\"\n", i, i)
	}
	return b.String()
}

// xfrConfig is steer's configuration: the zone, one steered name whose
// fallback is the pool other (de when other is down), and the three
// secondaries on 127.0.0.1, each with its own key and NOTIFY port (0:
// none). The steered name's country rule is compiled against the small
// country database (smallGeo): the transfers do not depend on where a
// client is, and compiling against the embedded one took a third of
// TestSecondaryOfKnot's CPU under the race detector (3 of its 10 s).
func xfrConfig(notify map[string]int) string {
	var sec strings.Builder
	for _, k := range []string{"nsd-key", "knot-key", "bind-key"} {
		n := "none"
		if p := notify[k]; p != 0 {
			n = fmt.Sprintf("127.0.0.1:%d", p)
		}
		fmt.Fprintf(&sec, "      - { address: 127.0.0.1, tsig: %s, notify: %q }\n", k, n)
	}
	return `api: { listen: "127.0.0.1:0" }
health: { state_file: state/steer-health.json }
geo: { databases: ["` + smallGeo + `"] }
tsig:
  nsd-key: { secret_file: nsd.key }
  knot-key: { secret_file: knot.key }
  bind-key: { secret_file: bind.key }
zones:
  - origin: xfr.example
    file: xfr.zone
    secondaries:
` + sec.String() + `records:
  - name: shop.xfr.example
    ttl: 30
    pools:
      de: { address: 198.51.100.1 }
      other: { address: 198.51.100.2 }
    rules:
      - match: { country: DE }
        pool: de
      - default: { failover: [other, de] }
`
}

// serves reports whether peer answers name/A with addr in a zone of serial.
func serves(s *peertest.Server, serial uint32, name, addr string) bool {
	q := new(dns.Msg)
	q.SetQuestion(xfrOrigin, dns.TypeSOA)
	r, err := s.Exchange(q, "udp")
	if err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Serial != serial {
		return false
	}
	q.SetQuestion(name, dns.TypeA)
	r, err = s.Exchange(q, "udp")
	return err == nil && len(r.Answer) == 1 && r.Answer[0].(*dns.A).A.String() == addr
}

func TestSecondariesOfSteer(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	files := map[string]string{"steer.yaml": xfrConfig(nil), "xfr.zone": bigZone(1, "one")}
	for k := range xfrKeys {
		files[strings.TrimSuffix(k, "-key")+".key"] = keyFile(k)
	}
	n := startNode(t, files, Options{})
	host, port := n.dns.Addr().String(), n.dns.Port()

	// Refused: no key, the wrong secret, another address, UDP.
	refused := func(what string, c *dns.Transfer, m *dns.Msg, want int) {
		t.Helper()
		env, err := c.In(m, n.dns.String())
		if err == nil {
			e := <-env
			err = e.Error
		}
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("bad xfr rcode: %d", want)) {
			t.Errorf("%s: %v, want rcode %s", what, err, dns.RcodeToString[want])
		}
	}
	axfr := func(key string) *dns.Msg {
		m := new(dns.Msg)
		m.SetAxfr(xfrOrigin)
		if key != "" {
			m.SetTsig(key+".", dns.HmacSHA256, 300, time.Now().Unix())
		}
		return m
	}
	refused("unsigned", &dns.Transfer{}, axfr(""), dns.RcodeRefused)
	// NOTAUTH, unsigned (RFC 8945 §5.2), which miekg reports as such.
	if env, err := (&dns.Transfer{TsigSecret: map[string]string{"nsd-key.": xfrKeys["knot-key"]}}).In(axfr("nsd-key"), n.dns.String()); err == nil {
		if e := <-env; e.Error == nil || !strings.Contains(e.Error.Error(), "bad authentication") {
			t.Errorf("wrong secret: %v, want NOTAUTH", e.Error)
		}
	}
	other := &dns.Transfer{TsigSecret: map[string]string{"nsd-key.": xfrKeys["nsd-key"]}, DialTimeout: 2 * time.Second}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
	if c, err := d.Dial("tcp", n.dns.String()); err == nil {
		other.Conn = &dns.Conn{Conn: c}
		refused("from 127.0.0.2", other, axfr("nsd-key"), dns.RcodeRefused)
	} else {
		t.Errorf("dial from 127.0.0.2: %v", err)
	}
	if r, _, err := (&dns.Client{Net: "udp", TsigSecret: map[string]string{"nsd-key.": xfrKeys["nsd-key"]}}).Exchange(axfr("nsd-key"), n.dns.String()); err != nil || r.Rcode != dns.RcodeRefused {
		t.Errorf("AXFR over UDP: %v %v", r, err)
	}
	// Allowed: several messages, each verified by miekg (it fails the
	// transfer on any message whose TSIG does not verify).
	env, err := (&dns.Transfer{TsigSecret: map[string]string{"nsd-key.": xfrKeys["nsd-key"]}}).In(axfr("nsd-key"), n.dns.String())
	if err != nil {
		t.Fatal(err)
	}
	msgs, records := 0, 0
	for e := range env {
		if e.Error != nil {
			t.Fatalf("signed AXFR message %d: %v", msgs+1, e.Error)
		}
		msgs++
		records += len(e.RR)
	}
	if msgs < 2 || records != 1500+4+1+1 {
		t.Errorf("AXFR: %d messages, %d records", msgs, records)
	}
	// miekg verifies the TSIG each message carries but lets one without
	// pass: read the messages raw and require one on every message.
	c, err := net.DialTimeout("tcp", n.dns.String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req := axfr("nsd-key")
	req.Extra = nil
	req.SetTsig("nsd-key.", dns.HmacSHA256, 300, time.Now().Unix())
	wire, _, err := dns.TsigGenerate(req, xfrKeys["nsd-key"], "", false)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(append([]byte{byte(len(wire) >> 8), byte(len(wire))}, wire...))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	signed, soas := 0, 0
	for soas < 2 {
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			t.Fatalf("reading message %d: %v", signed+1, err)
		}
		buf := make([]byte, int(l[0])<<8|int(l[1]))
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatalf("reading message %d: %v", signed+1, err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf); err != nil {
			t.Fatalf("message %d: %v", signed+1, err)
		}
		if m.IsTsig() == nil {
			t.Fatalf("message %d carries no TSIG", signed+1)
		}
		signed++
		for _, rr := range m.Answer {
			if rr.Header().Rrtype == dns.TypeSOA {
				soas++
			}
		}
	}
	c.Close()
	if signed != msgs {
		t.Errorf("%d signed messages, the transfer had %d", signed, msgs)
	}

	dir := t.TempDir()
	absent := filepath.Join(dir, "absent.zone")
	nsd := peertest.StartNSD(t, []peertest.Zone{{Origin: xfrOrigin, File: absent}}, peertest.Options{
		Server: "xfrd-reload-timeout: 0\n",
		Top:    fmt.Sprintf("key:\n  name: nsd-key\n  algorithm: hmac-sha256\n  secret: %q\n", xfrKeys["nsd-key"]),
		Zone:   fmt.Sprintf("request-xfr: %s@%d nsd-key\nallow-notify: 127.0.0.1 nsd-key\n", host, port),
	})
	knot := peertest.StartKnot(t, []peertest.Zone{{Origin: xfrOrigin, File: filepath.Join(dir, "knot.zone")}}, peertest.Options{
		Top: fmt.Sprintf(`key:
  - id: knot-key
    algorithm: hmac-sha256
    secret: %s
remote:
  - id: steer
    address: %s@%d
    key: knot-key
acl:
  - id: notify
    address: 127.0.0.1
    key: knot-key
    action: notify
`, xfrKeys["knot-key"], host, port),
		Zone: "master: steer\nacl: notify\nzonefile-load: none\n",
	})
	dummy := filepath.Join(dir, "dummy.zone")
	writeFile(t, dir, "dummy.zone", "dummy.test. 60 IN SOA ns.dummy.test. h.dummy.test. 1 60 60 600 60\ndummy.test. 60 IN NS ns.dummy.test.\nns.dummy.test. 60 IN A 192.0.2.1\n")
	bind := peertest.StartBIND(t, []peertest.Zone{{Origin: "dummy.test.", File: dummy}}, peertest.Options{
		Top: fmt.Sprintf(`key "bind-key" { algorithm hmac-sha256; secret %q; };
zone %q { type secondary; primaries { %s port %d key "bind-key"; }; file %q; allow-notify { key "bind-key"; }; };
`, xfrKeys["bind-key"], xfrOrigin, host, port, filepath.Join(dir, "bind.db")),
	})
	peers := []*peertest.Server{nsd, knot, bind}
	for _, p := range peers {
		// The steered name is served as its fallback: the default pool.
		dnstest.WaitFor(t, 10*time.Second, p.Name+" to serve serial 1 and the fallback", func() bool { return serves(p, 1, "shop."+xfrOrigin, "198.51.100.2") })
	}

	// A new serial in the file, and a reload: each secondary is notified
	// with its own key and serves the new serial within 2 s.
	writeFile(t, n.dir, "steer.yaml", xfrConfig(map[string]int{"nsd-key": int(nsd.Addr.Port()), "knot-key": int(knot.Addr.Port()), "bind-key": int(bind.Addr.Port())}))
	writeFile(t, n.dir, "xfr.zone", bigZone(2, "two"))
	start := time.Now()
	if _, err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		dnstest.WaitFor(t, 5*time.Second, p.Name+" to serve serial 2", func() bool { return serves(p, 2, "shop."+xfrOrigin, "198.51.100.2") })
		took := time.Since(start)
		t.Logf("%s serves serial 2 %v after the reload began", p.Name, took.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("%s took %v to serve the new serial, want ≤ 2 s", p.Name, took)
		}
	}
	for _, p := range peers {
		q := new(dns.Msg)
		q.SetQuestion("gen."+xfrOrigin, dns.TypeTXT)
		if r, err := p.Exchange(q, "udp"); err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != "two" {
			t.Errorf("%s gen: %v %v", p.Name, r, err)
		}
	}

	// The fallback moves (the default pool is drained): steer gives the
	// zone the next serial, answers it itself, and the secondaries follow.
	if code, body := n.call("PUT", "/v1/records/shop.xfr.example./pools/other/state", "", `{"state":"down"}`); code != 204 {
		t.Fatalf("pool override: %d %s", code, body)
	}
	dnstest.WaitFor(t, 5*time.Second, "steer to give the zone serial 3", func() bool {
		r := n.query(xfrOrigin, dns.TypeSOA)
		return len(r.Answer) == 1 && r.Answer[0].(*dns.SOA).Serial == 3
	})
	for _, p := range peers {
		dnstest.WaitFor(t, 5*time.Second, p.Name+" to serve serial 3 with the new fallback", func() bool { return serves(p, 3, "shop."+xfrOrigin, "198.51.100.1") })
	}
	_, metricsText := n.call("GET", "/metrics", "", "")
	for _, want := range []string{
		`steer_zone_serial{zone="xfr.example."} 3`,
		`steer_zone_transfers_total{direction="out",result="ok",type="ixfr",zone="xfr.example."}`,
		`steer_zone_transfers_total{direction="out",result="ok",type="axfr",zone="xfr.example."}`,
		`steer_zone_transfers_total{direction="out",result="refused",type="axfr",zone="xfr.example."} 2`,
		`steer_zone_transfers_total{direction="out",result="tsig",type="axfr",zone="xfr.example."} 1`,
		`steer_notify_total{direction="sent",result="ok",zone="xfr.example."}`,
	} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metricsText, "xfr.example"))
		}
	}
	if _, body := n.call("GET", "/v1/status", "", ""); !strings.Contains(body, `"exported_serial": 3`) || !strings.Contains(body, `"file_serial": 2`) {
		t.Errorf("status: %s", grepLines(body, "transfer"))
	}
	if !strings.Contains(n.logs.String(), "form=incremental") {
		t.Errorf("no secondary took an incremental transfer:\n%s", grepLines(n.logs.String(), "transferred out"))
	}
	t.Logf("steer's transfers:\n%s", grepLines(n.logs.String(), "transferred out"))
}

const secOrigin = "sec.example."

func secZone(serial int, gen string) string {
	return fmt.Sprintf("$ORIGIN %s\n$TTL 300\n@ SOA ns1 hostmaster %d 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.53\ngen TXT %q\n", secOrigin, serial, gen)
}

// secConfig is the secondary's configuration, against the small country
// database as xfrConfig is.
func secConfig(secret string, knot netip.AddrPort) string {
	return fmt.Sprintf(`health: { state_file: state/steer-health.json }
api: { listen: "127.0.0.1:0" }
geo: { databases: [%q] }
tsig:
  xfr-key: { secret_file: xfr.key }
zones:
  - origin: sec.example
    primaries: [%s]
    tsig: xfr-key
records:
  - name: shop.sec.example
    ttl: 30
    pools:
      de: { address: 198.51.100.1 }
      other: { address: 198.51.100.2 }
    rules:
      - match: { country: DE }
        pool: de
      - default: { pool: other }
`, smallGeo, knot) + "# " + secret + "\n"
}

// TestSecondaryOfKnot: steer transfers a zone from a hidden Knot primary,
// serves it and its steered name, follows a change within 2 s of Knot's
// NOTIFY (by IXFR), serves its last copy after a restart with Knot gone,
// and a wrong key is refused and logged on both sides.
func TestSecondaryOfKnot(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	dnstest.NeedTool(t, "knotc")
	secret := xfrKeys["knot-key"]
	steerPort := dnstest.FreePort(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "sec.zone")
	writeFile(t, dir, "sec.zone", secZone(1, "one"))
	debugLog := filepath.Join(dir, "knot-debug.log")
	knot := peertest.StartKnot(t, []peertest.Zone{{Origin: secOrigin, File: file}}, peertest.Options{
		Top: fmt.Sprintf(`log:
  - target: %s
    any: debug
key:
  - id: xfr-key
    algorithm: hmac-sha256
    secret: %s
remote:
  - id: steer
    address: 127.0.0.1@%d
    key: xfr-key
acl:
  - id: xfr
    address: 127.0.0.1
    key: xfr-key
    action: transfer
`, debugLog, secret, steerPort),
		Zone: "acl: xfr\nnotify: steer\nzonefile-load: difference\njournal-content: changes\n",
	})
	if err := os.MkdirAll(filepath.Join(knot.Dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	knotc := func(args ...string) {
		t.Helper()
		out, err := exec.Command("knotc", append([]string{"-c", filepath.Join(knot.Dir, "knot.conf"), "-t", "5"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("knotc %v: %v\n%s", args, err, out)
		}
	}

	files := map[string]string{"steer.yaml": secConfig("", knot.Addr), "xfr.key": fmt.Sprintf("key \"xfr-key\" { algorithm hmac-sha256; secret %q; };\n", secret)}
	sdir := t.TempDir()
	for name, body := range files {
		writeFile(t, sdir, name, body)
	}
	n := startNodeIn(t, sdir, Options{Listen: []string{fmt.Sprintf("127.0.0.1:%d", steerPort)}})
	soa := func(n *testNode) uint32 {
		r := n.query(secOrigin, dns.TypeSOA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return 0
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	dnstest.WaitFor(t, 5*time.Second, "steer to serve the transferred zone", func() bool { return soa(n) == 1 })
	if got := n.a("shop." + secOrigin); got != "198.51.100.2" {
		t.Errorf("steered name in the transferred zone: %s", got)
	}
	if got := n.txt("gen." + secOrigin); got != "one" {
		t.Errorf("gen: %s", got)
	}

	// A change on Knot, which notifies steer: served within 2 s, by IXFR.
	writeFile(t, dir, "sec.zone", secZone(2, "two"))
	start := time.Now()
	knotc("zone-reload", secOrigin)
	dnstest.WaitFor(t, 5*time.Second, "steer to serve serial 2", func() bool { return soa(n) == 2 })
	took := time.Since(start)
	t.Logf("serial 2 served %v after Knot's reload began", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("the change took %v to be served, want ≤ 2 s", took)
	}
	if n.txt("gen."+secOrigin) != "two" || n.a("shop."+secOrigin) != "198.51.100.2" {
		t.Errorf("after the change: gen %s shop %s", n.txt("gen."+secOrigin), n.a("shop."+secOrigin))
	}
	if !strings.Contains(knot.Log.String(), "IXFR, outgoing") {
		t.Errorf("Knot did not serve an IXFR:\n%s", knot.Log.String())
	}
	if !strings.Contains(n.logs.String(), "NOTIFY received") {
		t.Errorf("steer logged no NOTIFY")
	}

	_, metricsText := n.call("GET", "/metrics", "", "")
	for _, want := range []string{
		`steer_zone_serial{zone="sec.example."} 2`,
		`steer_zone_transfers_total{direction="in",result="ok",type="ixfr",zone="sec.example."} 1`,
		`steer_zone_transfers_total{direction="in",result="ok",type="axfr",zone="sec.example."} 1`,
		`steer_notify_total{direction="received",result="ok",zone="sec.example."}`,
		`steer_zone_expires_in_seconds{zone="sec.example."} 86`,
	} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metricsText, "sec.example"))
		}
	}
	if code, _ := n.call("POST", "/v1/zones/sec.example./refresh", "", ""); code != 202 {
		t.Errorf("refresh: %d", code)
	}
	if code, body := n.call("POST", "/v1/zones/nope.example./refresh", "", ""); code != 404 || !strings.Contains(body, "not a secondary zone") {
		t.Errorf("refresh of an unknown zone: %d %s", code, body)
	}
	if _, body := n.call("GET", "/v1/status", "", ""); !strings.Contains(body, `"serving": "transfer"`) || !strings.Contains(body, `"last_transfer": "ixfr"`) {
		t.Errorf("status: %s", body)
	}

	// A wrong key (same name, another secret) on a second node: refused,
	// logged by steer and by Knot.
	wrong := "d3JvbmcgeGZyIGtleSBvZiB0aGlydHktdHdvIGJ5dGVz"
	wdir := t.TempDir()
	writeFile(t, wdir, "steer.yaml", secConfig("wrong", knot.Addr))
	writeFile(t, wdir, "xfr.key", fmt.Sprintf("key \"xfr-key\" { algorithm hmac-sha256; secret %q; };\n", wrong))
	w := startNodeIn(t, wdir, Options{})
	dnstest.WaitFor(t, 5*time.Second, "the wrong-key node to log the TSIG failure", func() bool { return strings.Contains(w.logs.String(), "TSIG") })
	if r := w.query(secOrigin, dns.TypeSOA); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("wrong key: SOA answered %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	dnstest.WaitFor(t, 5*time.Second, "Knot to log the bad signature", func() bool {
		b, _ := os.ReadFile(debugLog)
		return strings.Contains(string(b), "verification failed")
	})

	// Knot stopped, steer restarted: the last copy is served at once.
	knotc("stop")
	dnstest.WaitFor(t, 5*time.Second, "knotd to stop", func() bool {
		q := new(dns.Msg)
		q.SetQuestion(secOrigin, dns.TypeSOA)
		_, err := knot.Exchange(q, "udp")
		return err != nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n.Shutdown(ctx)
	cancel()
	again := startNodeIn(t, sdir, Options{})
	if s := soa(again); s != 2 {
		t.Fatalf("after a restart with the primary gone: serial %d, want the last copy's 2", s)
	}
	if again.txt("gen."+secOrigin) != "two" || again.a("shop."+secOrigin) != "198.51.100.2" {
		t.Errorf("restarted: gen %s shop %s", again.txt("gen."+secOrigin), again.a("shop."+secOrigin))
	}
}

// TestXfrServedSnapshotWhileServerInstalled: the transfer service is made
// before the DNS server (builds need its copies) and may read the served
// snapshot from its own goroutines while New installs the server (a
// secondary zone whose primary answered at once). That read must be
// synchronised with the install: under -race, a goroutine reading the
// snapshot before and while setServer runs is reported otherwise. The
// interleaving is forced here rather than left to a primary's timing: the
// race detector sees New's own instance only when the transfer lands in a
// few instructions' window, and any I/O between (the disk copy, the zone
// files New reads) orders the two accesses.
func TestXfrServedSnapshotWhileServerInstalled(t *testing.T) {
	built, err := New(Options{}) // the embedded demo; New opens no listener
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		built.Shutdown(context.Background())
		built.xfr.Close()
	})
	want := built.srv.Handler().Snapshot()

	n := &Node{}
	firstRead := make(chan struct{})
	got := make(chan *snapshot.Snapshot)
	go func() { // as the transfer service's goroutine, started before the server exists
		for i := 0; ; i++ {
			s := n.servedSnapshot()
			if i == 0 {
				if s != nil {
					t.Error("a served snapshot before the server exists")
				}
				close(firstRead)
			}
			if s != nil {
				got <- s
				return
			}
			runtime.Gosched()
		}
	}()
	<-firstRead
	n.setServer(built.srv)
	if s := <-got; s != want {
		t.Errorf("served snapshot %p, want the server's %p", s, want)
	}
}
