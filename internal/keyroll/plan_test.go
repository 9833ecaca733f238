package keyroll

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"encoding/json"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

const zone = "example.com."

func genKey(t *testing.T, sep bool) *dnssec.Key {
	t.Helper()
	k, err := dnssec.GenerateKey(zone, dns.ECDSAP256SHA256, sep)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// kskZSK returns a plan of a KSK and a ZSK configured at t0.
func kskZSK(t *testing.T, t0 time.Time) (*Plan, *dnssec.Key, *dnssec.Key) {
	t.Helper()
	ksk, zsk := genKey(t, true), genKey(t, false)
	p, err := New(zone, []*dnssec.Key{ksk, zsk}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return p, ksk, zsk
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var timings = Timings{
	ZSKLifetime:      30 * 24 * time.Hour,
	DNSKEYTTL:        time.Hour,
	MaxZoneTTL:       24 * time.Hour,
	PropagationDelay: 5 * time.Minute,
	SignDelay:        10 * time.Second,
}

func tags(keys []*dnssec.Key) []uint16 {
	var out []uint16
	for _, k := range keys {
		out = append(out, k.Tag)
	}
	return out
}

func sameTags(a []*dnssec.Key, want ...uint16) bool {
	got := tags(a)
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func mustAt(t *testing.T, p *Plan, now time.Time) State {
	t.Helper()
	st, err := p.At(now)
	if err != nil {
		t.Fatalf("At(%s): %v", now, err)
	}
	return st
}

// The intervals of RFC 7583 §3.2: Ipub = Dprp + TTLkey, Iret = Dsgn +
// Dprp + TTLsig, the successor published Ipub before its predecessor's
// lifetime ends and active when it ends, the predecessor removed Iret
// later; and what At says at each stage.
func TestTimelineRFC7583(t *testing.T) {
	p, ksk, zsk := kskZSK(t, t0)
	if got, want := timings.Ipub(), time.Hour+5*time.Minute; got != want {
		t.Fatalf("Ipub %s, want %s", got, want)
	}
	if got, want := timings.Iret(), 24*time.Hour+5*time.Minute+10*time.Second; got != want {
		t.Fatalf("Iret %s, want %s", got, want)
	}
	st := mustAt(t, p, t0)
	if !sameTags(st.Sign, ksk.Tag, zsk.Tag) || len(st.Publish) != 0 || !st.Next.IsZero() {
		t.Fatalf("new plan at t0: sign %v publish %v next %s", tags(st.Sign), tags(st.Publish), st.Next)
	}

	q, ev, err := p.Next(t0, timings, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 || ev[0].Kind != EventGenerate || ev[0].Role != RoleZSK {
		t.Fatalf("events %v, want one generate", ev)
	}
	if len(p.Keys) != 2 {
		t.Fatal("Next changed the plan it was given")
	}
	succ := q.Keys[2]
	old := q.Keys[1]
	L := timings.ZSKLifetime
	if want := t0.Add(L - timings.Ipub()); !succ.Publish.Equal(want) {
		t.Errorf("Tpub(N+1) = %s, want Tact(N)+Lzsk-Ipub = %s", succ.Publish, want)
	}
	if want := t0.Add(L); !succ.Active.Equal(want) || !old.Retire.Equal(want) {
		t.Errorf("Tact(N+1) = %s, Tret(N) = %s, want both %s", succ.Active, old.Retire, want)
	}
	if want := t0.Add(L + timings.Iret()); !old.Remove.Equal(want) {
		t.Errorf("Trem(N) = %s, want Tret(N)+Iret = %s", old.Remove, want)
	}
	// Before publication: nothing changes, the next event is the
	// publication.
	st = mustAt(t, q, t0.Add(time.Hour))
	if !sameTags(st.Sign, ksk.Tag, zsk.Tag) || len(st.Publish) != 0 || !st.Next.Equal(succ.Publish) {
		t.Fatalf("before Tpub: sign %v publish %v next %s", tags(st.Sign), tags(st.Publish), st.Next)
	}
	// Published, not yet signing.
	st = mustAt(t, q, succ.Publish)
	if !sameTags(st.Sign, ksk.Tag, zsk.Tag) || !sameTags(st.Publish, succ.Tag) || !st.Next.Equal(succ.Active) {
		t.Fatalf("at Tpub: sign %v publish %v next %s", tags(st.Sign), tags(st.Publish), st.Next)
	}
	if s := succ.State(succ.Publish); s != StatePublished {
		t.Errorf("successor at Tpub is %s", s)
	}
	// One instant before the swap the old key signs, at it the new one.
	st = mustAt(t, q, succ.Active.Add(-time.Nanosecond))
	if !sameTags(st.Sign, ksk.Tag, zsk.Tag) {
		t.Fatalf("just before Tact: sign %v", tags(st.Sign))
	}
	st = mustAt(t, q, succ.Active)
	if !sameTags(st.Sign, ksk.Tag, succ.Tag) || !sameTags(st.Publish, zsk.Tag) || !st.Next.Equal(old.Remove) {
		t.Fatalf("at Tact: sign %v publish %v next %s", tags(st.Sign), tags(st.Publish), st.Next)
	}
	if s := old.State(succ.Active); s != StateRetired {
		t.Errorf("predecessor at Tact is %s", s)
	}
	st = mustAt(t, q, old.Remove)
	if !sameTags(st.Sign, ksk.Tag, succ.Tag) || len(st.Publish) != 0 {
		t.Fatalf("at Trem: sign %v publish %v", tags(st.Sign), tags(st.Publish))
	}

	// Stepping again before the swap changes nothing.
	r, ev, err := q.Next(succ.Publish.Add(time.Minute), timings, nil)
	if err != nil || len(ev) != 0 || len(r.Keys) != 3 || !r.Keys[2].Active.Equal(succ.Active) {
		t.Fatalf("second step: %v %v", ev, err)
	}
	// After the swap, the successor gets its own successor; after the
	// removal, the first ZSK loses its private key.
	r, ev, err = r.Next(old.Remove, timings, nil)
	if err != nil || len(ev) != 1 {
		t.Fatalf("step after the swap: %v %v", ev, err)
	}
	if r.Keys[1].Private != "" || r.Keys[1].Key() != nil || r.Keys[1].State(old.Remove) != StateRemoved {
		t.Error("the removed key keeps its private key")
	}
	third := r.Keys[3]
	if want := succ.Active.Add(L - timings.Ipub()); !third.Publish.Equal(want) {
		t.Errorf("third ZSK published at %s, want %s", third.Publish, want)
	}
	// The log of what happened between two looks, in order.
	evs := r.Events(t0, old.Remove)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind))
	}
	if got := strings.Join(kinds, ","); got != "publish,activate,retire,remove" {
		t.Errorf("events from t0 to Trem: %s", got)
	}
}

// A node that was down past the successor's publication time publishes
// it when it comes back and activates it Ipub later, never earlier.
func TestLateStep(t *testing.T) {
	p, _, _ := kskZSK(t, t0)
	late := t0.Add(timings.ZSKLifetime + 3*time.Hour) // past the whole lifetime
	q, _, err := p.Next(late, timings, nil)
	if err != nil {
		t.Fatal(err)
	}
	succ, old := q.Keys[2], q.Keys[1]
	if !succ.Publish.Equal(late) || !succ.Active.Equal(late.Add(timings.Ipub())) || !old.Retire.Equal(succ.Active) {
		t.Fatalf("late: publish %s active %s retire %s", succ.Publish, succ.Active, old.Retire)
	}
	if st := mustAt(t, q, late); !sameTags(st.Sign, q.Keys[0].Tag, old.Tag) {
		t.Fatalf("late: the old key must go on signing until the new one is ready: %v", tags(st.Sign))
	}
}

// A successor not yet published follows changed timings; once
// published, its activation only moves later.
func TestReschedule(t *testing.T) {
	p, _, _ := kskZSK(t, t0)
	q, _, err := p.Next(t0, timings, nil)
	if err != nil {
		t.Fatal(err)
	}
	short := timings
	short.ZSKLifetime = 10 * 24 * time.Hour
	r, _, err := q.Next(t0.Add(time.Hour), short, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(short.ZSKLifetime - short.Ipub()); !r.Keys[2].Publish.Equal(want) || !r.Keys[2].Active.Equal(t0.Add(short.ZSKLifetime)) {
		t.Fatalf("unpublished successor not rescheduled: publish %s active %s", r.Keys[2].Publish, r.Keys[2].Active)
	}
	// Published: a longer DNSKEY TTL pushes the activation and the
	// removal later.
	pub := r.Keys[2].Publish
	longer := short
	longer.DNSKEYTTL = 48 * time.Hour
	s, _, err := r.Next(pub.Add(time.Minute), longer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := pub.Add(longer.Ipub()); !s.Keys[2].Active.Equal(want) || !s.Keys[1].Retire.Equal(want) || !s.Keys[1].Remove.Equal(want.Add(longer.Iret())) {
		t.Fatalf("published successor: active %s (want %s), old retire %s remove %s", s.Keys[2].Active, want, s.Keys[1].Retire, s.Keys[1].Remove)
	}
	// A shorter lifetime does not bring a published key's activation
	// earlier.
	u, _, err := s.Next(pub.Add(2*time.Minute), short, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !u.Keys[2].Active.Equal(s.Keys[2].Active) {
		t.Fatalf("activation moved earlier: %s to %s", s.Keys[2].Active, u.Keys[2].Active)
	}
}

// The refusals: a CSK-only zone, a lifetime shorter than the rollover, a
// plan that would leave no signing ZSK, one that signs with a key not
// published; each leaves the plan as it was.
func TestRefusals(t *testing.T) {
	csk := genKey(t, true)
	pc, err := New(zone, []*dnssec.Key{csk}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pc.Next(t0, timings, nil); err == nil || !strings.Contains(err.Error(), "CSK only") {
		t.Errorf("CSK only: %v", err)
	}

	p, _, zsk := kskZSK(t, t0)
	short := timings
	short.ZSKLifetime = 20 * time.Hour
	if q, _, err := p.Next(t0, short, nil); err == nil || !strings.Contains(err.Error(), "is not longer than") || q != p {
		t.Errorf("short lifetime: %v", err)
	}

	// Every ZSK retired (hand-edited plan): no step, no state.
	q := p.clone()
	q.Keys[1].Retire, q.Keys[1].Remove = t0.Add(time.Hour), t0.Add(48*time.Hour)
	if r, _, err := q.Next(t0, timings, nil); err == nil || r != q {
		t.Errorf("every ZSK retired: %v", err)
	} else if !strings.Contains(err.Error(), "no active ZSK") {
		t.Errorf("every ZSK retired: %v", err)
	}
	if _, err := q.At(t0.Add(2 * time.Hour)); err == nil {
		t.Error("At with no active ZSK: no error")
	}

	// Active but not published.
	q = p.clone()
	q.Keys[1].Publish = t0.Add(time.Hour)
	if _, err := q.At(t0); err == nil || !strings.Contains(err.Error(), "active but not published") {
		t.Errorf("active, unpublished: %v", err)
	}

	// A generated successor published less than Ipub before it signs.
	q, _, err = p.Next(t0, timings, nil)
	if err != nil {
		t.Fatal(err)
	}
	q.Keys[2].Publish = q.Keys[2].Active.Add(-time.Minute)
	if err := q.Check(t0, timings); err == nil || !strings.Contains(err.Error(), "publication interval") {
		t.Errorf("short publication: %v", err)
	}
	// Once published, Next repairs it by moving the activation later.
	at := q.Keys[2].Publish.Add(time.Second)
	if r, _, err := q.Next(at, timings, nil); err != nil || !r.Keys[2].Active.Equal(q.Keys[2].Publish.Add(timings.Ipub())) {
		t.Errorf("short publication not repaired: %v", err)
	}

	// A generator that fails or makes the wrong key.
	bad := func(string, uint8, bool) (*dnssec.Key, error) { return nil, errors.New("no entropy") }
	if _, _, err := p.Next(t0, timings, bad); err == nil || !strings.Contains(err.Error(), "no entropy") {
		t.Errorf("failing generator: %v", err)
	}
	dup := func(string, uint8, bool) (*dnssec.Key, error) { return zsk, nil }
	if _, _, err := p.Next(t0, timings, dup); err == nil || !strings.Contains(err.Error(), "collides") {
		t.Errorf("colliding tag: %v", err)
	}
}

// Sync: a configured ZSK replaced by a rollover stays replaced though
// the configuration goes on listing it; a newly configured key is added;
// one the configuration drops goes.
func TestSync(t *testing.T) {
	p, ksk, zsk := kskZSK(t, t0)
	q, _, err := p.Next(t0, timings, nil)
	if err != nil {
		t.Fatal(err)
	}
	after := q.Keys[1].Remove.Add(time.Second)
	q, _, err = q.Next(after, timings, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.Sync([]*dnssec.Key{ksk, zsk}, after)
	if err != nil {
		t.Fatal(err)
	}
	st := mustAt(t, r, after)
	if !sameTags(st.Sign, ksk.Tag, q.Keys[2].Tag) || len(st.Publish) != 0 {
		t.Fatalf("sync brought back the replaced ZSK: sign %v publish %v", tags(st.Sign), tags(st.Publish))
	}
	extra := genKey(t, false)
	r, err = r.Sync([]*dnssec.Key{ksk, zsk, extra}, after)
	if err != nil {
		t.Fatal(err)
	}
	if st := mustAt(t, r, after); !sameTags(st.Sign, ksk.Tag, q.Keys[2].Tag, extra.Tag) {
		t.Fatalf("added key: sign %v", tags(st.Sign))
	}
	r, err = r.Sync([]*dnssec.Key{ksk, zsk}, after.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st := mustAt(t, r, after.Add(time.Second)); !sameTags(st.Sign, ksk.Tag, q.Keys[2].Tag) {
		t.Fatalf("dropped key: sign %v", tags(st.Sign))
	}
	// Dropping the KSK would leave nothing to sign the DNSKEY RRset.
	if s, err := r.Sync([]*dnssec.Key{zsk}, after.Add(2*time.Second)); err == nil || s != r {
		t.Errorf("dropping the only KSK: %v", err)
	}
}

// Save and Load: the file is 0600, the plan comes back the same; a
// missing file is fs.ErrNotExist, a corrupt one an error naming it.
func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	p, _, _ := kskZSK(t, t0)
	p, _, err := p.Next(t0, timings, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := File(dir, "Example.COM")
	if want := filepath.Join(dir, "keyroll", "example.com.json"); path != want {
		t.Fatalf("File: %s, want %s", path, want)
	}
	if _, err := Load(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if err := Save(path, p); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", st.Mode(), err)
	}
	q, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{t0, p.Keys[2].Publish, p.Keys[2].Active, p.Keys[1].Remove} {
		a, b := mustAt(t, p, at), mustAt(t, q, at)
		if !sameTags(b.Sign, tags(a.Sign)...) || !sameTags(b.Publish, tags(a.Publish)...) || !a.Next.Equal(b.Next) {
			t.Fatalf("at %s: loaded plan differs", at)
		}
	}
	b, _ := os.ReadFile(path)
	for name, body := range map[string]string{
		"truncated":     string(b[:len(b)/2]),
		"wrong private": strings.Replace(string(b), jsonText(q.Keys[1].Private), jsonText(q.Keys[2].Private), 1),
		"bad role":      strings.Replace(string(b), `"role": "zsk"`, `"role": "zzz"`, 1),
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// Timings that grow while a retired ZSK waits for its removal (a slower
// rebuild, a longer TTL) push the removal later, also while the next
// successor is already scheduled.
func TestRetiredKeyFollowsLongerIret(t *testing.T) {
	p, _, _ := kskZSK(t, t0)
	q, _, err := p.Next(t0, timings, nil)
	if err != nil {
		t.Fatal(err)
	}
	swap := q.Keys[2].Active
	q, _, err = q.Next(swap, timings, nil) // schedules the third ZSK
	if err != nil || len(q.Keys) != 4 {
		t.Fatalf("step at the swap: %v", err)
	}
	slower := timings
	slower.SignDelay = time.Hour
	r, _, err := q.Next(swap.Add(time.Second), slower, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := swap.Add(slower.Iret()); !r.Keys[1].Remove.Equal(want) {
		t.Fatalf("retired ZSK removed at %s, want %s", r.Keys[1].Remove, want)
	}
}
