//go:build !race

package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/keyroll"
	"github.com/steer-dns/steer/internal/validatortest"
)

// rollZone is the zone of the rollover test: every TTL 2 s (the SOA's,
// so the DNSKEY RRset's and the negative answers' too).
const rollZone = `$ORIGIN example.com.
$TTL 2
@      2 SOA  ns1 hostmaster 1 7200 3600 1209600 2
       NS   ns1
ns1    A    192.0.2.53
www    A    192.0.2.80
`

// TestZSKRolloverUnderValidator is issue 29's single-node "Done when":
// with zsk_lifetime and TTLs of seconds, a full ZSK rollover (successor
// published, active, old ZSK retired, removed) completes while Unbound,
// validating with the KSK as its trust anchor, asks for the steered name
// and a nonexistent one every 100 ms: no SERVFAIL, no answer without AD.
// The node is stopped and started again on the same state directory
// between the successor's publication and its activation: the plan goes
// on from disk (the successor the first process made becomes active,
// no other is made). Not under -race: it runs on wall-clock seconds.
func TestZSKRolloverUnderValidator(t *testing.T) {
	t.Parallel()
	dnstest.NeedTool(t, "unbound")
	dir := t.TempDir()
	kskBase, ksk := writeKey(t, dir, "example.com", true)
	zskBase, zsk := writeKey(t, dir, "example.com", false)
	writeFile(t, dir, "example.com.zone", rollZone)
	port := dnstest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// Ipub = 1 s + 2 s; Iret = Dsgn (1 s + the rebuild, rounded up to
	// seconds) + 1 s + 2 s: a lifetime of 16 s publishes the successor
	// at 13 s, switches at 16 s and removes the old ZSK at about 21 s;
	// the successor's own successor comes at 29 s (with 12 s it came 4 s
	// after the removal, and a loaded machine's slower restart saw it
	// before it saw the old ZSK gone).
	writeFile(t, dir, "steer.yaml", fmt.Sprintf(`listen: [%q]
zones:
  - origin: example.com
    file: example.com.zone
    dnssec:
      keys: [%s, %s]
      zsk_lifetime: 16s
      dnskey_ttl: 2s
      propagation_delay: 1s
records:
  - name: shop.example.com
    ttl: 2
    pools:
      primary: { address: 192.0.2.1 }
      backup:  { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, backup] }
`, addr, kskBase, zskBase))
	start := time.Now()
	n := startNodeIn(t, dir, Options{Listen: []string{addr}})
	server := netip.MustParseAddrPort(addr)
	planFile := keyroll.File(filepath.Join(dir, "steer-state"), "example.com")
	if st, err := os.Stat(planFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key plan %s: %v %v", planFile, st, err)
	}

	res := validatortest.StartUnbound(t, server, validatortest.NewAnchor(t, "example.com", []dns.RR{ksk}))

	// The validator's view, every 100 ms per name, until stop.
	var queries, servfail, noAD, unreachable atomic.Int64
	// The restart's window, in time since start: from just before the
	// node stops until 3 s after it serves again (Unbound backs off a
	// server it found unreachable before asking it again) (downAt set,
	// upAt 0: still down).
	var downAt, upAt atomic.Int64
	inRestart := func(sent time.Duration) bool {
		d, u := downAt.Load(), upAt.Load()
		return d != 0 && int64(sent) >= d && (u == 0 || int64(sent) <= u+int64(3*time.Second))
	}
	var badMu sync.Mutex
	var bad []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, q := range []string{"shop.example.com.", "nx.example.com."} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				m := new(dns.Msg)
				m.SetQuestion(q, dns.TypeA)
				m.RecursionDesired = true
				m.SetEdns0(1232, true)
				sent := time.Since(start)
				r, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(m, res.Addr.String())
				queries.Add(1)
				at := time.Since(start).Round(time.Millisecond)
				switch {
				case (err != nil || r.Rcode == dns.RcodeServerFailure) && inRestart(sent):
					// The only server is stopped: Unbound has no
					// authority to ask once its 2-second copies
					// expire. Not a validation failure; counted apart.
					unreachable.Add(1)
				case err != nil:
					servfail.Add(1)
					badMu.Lock()
					bad = append(bad, fmt.Sprintf("%s %s: %v", at, q, err))
					badMu.Unlock()
				case r.Rcode == dns.RcodeServerFailure:
					servfail.Add(1)
					badMu.Lock()
					bad = append(bad, fmt.Sprintf("%s %s: SERVFAIL", at, q))
					badMu.Unlock()
				case !r.AuthenticatedData:
					noAD.Add(1)
					badMu.Lock()
					bad = append(bad, fmt.Sprintf("%s %s: %s without AD", at, q, dns.RcodeToString[r.Rcode]))
					badMu.Unlock()
				}
			}
		}()
	}

	// The node's own view: which ZSKs the DNSKEY RRset holds and which
	// signs the steered answer, over time.
	type view struct{ dnskey, signer string }
	look := func() view {
		m := new(dns.Msg)
		m.SetQuestion("example.com.", dns.TypeDNSKEY)
		m.SetEdns0(1232, true)
		r, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, addr)
		if err != nil {
			return view{}
		}
		var zsks []string
		for _, rr := range r.Answer {
			if k, ok := rr.(*dns.DNSKEY); ok && k.Flags&dns.SEP == 0 {
				zsks = append(zsks, fmt.Sprint(k.KeyTag()))
			}
		}
		sort.Strings(zsks)
		m.SetQuestion("shop.example.com.", dns.TypeA)
		r, _, err = (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, addr)
		if err != nil {
			return view{}
		}
		var signer string
		for _, rr := range r.Answer {
			if s, ok := rr.(*dns.RRSIG); ok {
				signer = fmt.Sprint(s.KeyTag)
			}
		}
		return view{strings.Join(zsks, ","), signer}
	}
	old := fmt.Sprint(zsk.KeyTag())
	var seen []view
	var seenAt []time.Time
	record := func() view {
		v := look()
		if v.dnskey != "" && (len(seen) == 0 || seen[len(seen)-1] != v) {
			seen = append(seen, v)
			seenAt = append(seenAt, time.Now())
			t.Logf("%s: DNSKEY ZSKs %s, steered answer signed by %s", time.Since(start).Round(time.Millisecond), v.dnskey, v.signer)
		}
		return v
	}
	history := func() string { return fmt.Sprintf("views %v\nnode log:\n%s", seen, n.logs) }

	// The successor is published (pre-publication: the old ZSK signs).
	dnstest.WaitFor(t, 18*time.Second, "the successor ZSK published", func() bool {
		v := record()
		return strings.Contains(v.dnskey, ",") && v.signer == old
	}, history)
	successor := ""
	for _, tag := range strings.Split(seen[len(seen)-1].dnskey, ",") {
		if tag != old {
			successor = tag
		}
	}

	// Restart on the same state directory before the successor signs.
	downAt.Store(int64(time.Since(start)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n.Shutdown(ctx)
	cancel()
	t.Logf("%s: restarting", time.Since(start).Round(time.Millisecond))
	firstLogs := n.logs
	n = startNodeIn(t, dir, Options{Listen: []string{addr}})
	restarted := time.Now()
	upAt.Store(int64(time.Since(start)))
	if !strings.Contains(n.logs.String(), "DNSSEC key plan loaded") {
		t.Errorf("the restarted node did not load its plan:\n%s", n.logs)
	}

	// The successor signs, then the old ZSK leaves the DNSKEY RRset.
	dnstest.WaitFor(t, 10*time.Second, "the successor signing", func() bool {
		return record().signer == successor
	}, history)
	// From the switch on nothing the node serves carries a signature by
	// the old ZSK: the zone's data, its denial, the steered answer.
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"example.com", dns.TypeSOA}, {"www.example.com", dns.TypeA}, {"nx.example.com", dns.TypeA},
		{"www.example.com", dns.TypeTXT}, {"shop.example.com", dns.TypeA}, {"example.com", dns.TypeDNSKEY}} {
		r := n.doQuery(q.name, q.qtype)
		sigs := 0
		for _, sec := range [][]dns.RR{r.Answer, r.Ns} {
			for _, rr := range sec {
				if s, ok := rr.(*dns.RRSIG); ok {
					sigs++
					if fmt.Sprint(s.KeyTag) == old {
						t.Errorf("%s %s after the switch: RRSIG by the old ZSK %s\n%v", q.name, dns.TypeToString[q.qtype], old, r)
					}
				}
			}
		}
		if sigs == 0 {
			t.Errorf("%s %s after the switch: no RRSIG\n%v", q.name, dns.TypeToString[q.qtype], r)
		}
	}
	dnstest.WaitFor(t, 10*time.Second, "the old ZSK removed", func() bool {
		return record().dnskey == successor
	}, history)
	time.Sleep(2500 * time.Millisecond) // the validator's caches turn over once more
	close(stop)
	wg.Wait()

	// The order the node went through: old alone, both with the old
	// signing, both with the successor signing, the successor alone.
	var steps []string
	for _, v := range seen {
		s := v.dnskey + "/" + v.signer
		if len(steps) == 0 || steps[len(steps)-1] != s {
			steps = append(steps, s)
		}
	}
	pair := old + "," + successor
	if old > successor {
		pair = successor + "," + old
	}
	// The plan the node kept: the successor published Ipub (3 s) before
	// it signed, the old ZSK published Iret (at least 4 s) after it
	// stopped; and the node followed it: nothing seen before its time.
	p, err := keyroll.Load(planFile)
	if err != nil {
		t.Fatal(err)
	}
	var oldK, newK *keyroll.Key
	for _, k := range p.Keys {
		switch fmt.Sprint(k.Tag) {
		case old:
			oldK = k
		case successor:
			newK = k
		}
	}
	if oldK == nil || newK == nil {
		t.Fatalf("plan without the old ZSK or its successor: %+v", p.Keys)
	}
	// A step that fell while the node was down (a restart that took
	// longer than the step lasted, on a loaded machine) cannot be seen.
	want := []string{old + "/" + old, pair + "/" + old}
	if restarted.Before(oldK.Remove) {
		want = append(want, pair+"/"+successor)
	}
	want = append(want, successor+"/"+successor)
	if strings.Join(steps, " ") != strings.Join(want, " ") {
		t.Errorf("rollover steps %v, want %v (node down %s)", steps, want, time.Duration(upAt.Load()-downAt.Load()).Round(time.Millisecond))
	}
	if d := newK.Active.Sub(newK.Publish); d < 3*time.Second {
		t.Errorf("successor published %s before it signed, want Ipub 3s", d)
	}
	if d := oldK.Remove.Sub(oldK.Retire); d < 4*time.Second || !oldK.Retire.Equal(newK.Active) {
		t.Errorf("old ZSK retired at %s (successor active %s), removed %s later, want Iret >= 4s", oldK.Retire, newK.Active, d)
	}
	for i, v := range seen {
		var due time.Time
		switch {
		case v.dnskey == pair && v.signer == old:
			due = newK.Publish
		case v.dnskey == pair && v.signer == successor:
			due = newK.Active
		case v.dnskey == successor:
			due = oldK.Remove
		}
		if seenAt[i].Before(due) {
			t.Errorf("%v seen at %s, before the plan's %s", v, seenAt[i].Format(time.StampMilli), due.Format(time.StampMilli))
		}
	}
	if strings.Count(n.logs.String(), "event=generate") > 1 {
		t.Errorf("the restarted node made another successor:\n%s", n.logs)
	}
	// Each event is logged once by the node running when it falls due
	// (one that falls while none runs is in the restarted node's "plan
	// loaded" line instead).
	logs := firstLogs.String() + n.logs.String()
	events := []string{"event=generate", "event=publish"}
	if restarted.Before(newK.Active) {
		events = append(events, "event=activate", "event=retire")
	}
	removes := 0
	if restarted.Before(oldK.Remove) {
		events, removes = append(events, "event=remove"), 1
	}
	for _, ev := range events {
		if c := strings.Count(logs, ev); c < 1 {
			t.Errorf("no %s logged", ev)
		}
	}
	if strings.Count(logs, "tag="+successor+" role=zsk event=publish") != 1 || strings.Count(logs, "tag="+old+" role=zsk event=remove") != removes {
		t.Errorf("an event logged twice:\n%s", logs)
	}
	if strings.Contains(logs, "Private-key") || strings.Contains(logs, "PrivateKey:") {
		t.Error("private key material in the log")
	}
	t.Logf("%d validator queries in %s: %d SERVFAIL or unanswered, %d without AD; %d unanswerable while the node restarted (%s)",
		queries.Load(), time.Since(start).Round(time.Millisecond), servfail.Load(), noAD.Load(), unreachable.Load(),
		time.Duration(upAt.Load()-downAt.Load()).Round(time.Millisecond))
	if servfail.Load() != 0 || noAD.Load() != 0 || queries.Load() < 100 {
		t.Errorf("%d queries, %d SERVFAIL, %d without AD:\n%s\nunbound log:\n%s", queries.Load(), servfail.Load(), noAD.Load(),
			strings.Join(bad, "\n"), res.Log())
	}
}
