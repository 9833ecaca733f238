package node

import (
	"crypto"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/snapshot"
	zonedata "github.com/steer-dns/steer/internal/zone"
)

func TestRenewalTimings(t *testing.T) {
	for _, c := range []struct {
		validity    time.Duration
		gap, window time.Duration
	}{
		{14 * 24 * time.Hour, time.Hour, 48 * time.Hour},
		{7 * 24 * time.Hour, 50*time.Minute + 24*time.Second, 24 * time.Hour},
		{8 * time.Second, time.Second, 8 * time.Second / 7},
	} {
		if g, w := renewGap(c.validity), alarmWindow(c.validity); g != c.gap || w != c.window {
			t.Errorf("validity %v: gap %v window %v, want %v %v", c.validity, g, w, c.gap, c.window)
		}
	}
}

// signedSnapshot is a snapshot serving example.com signed at now with a
// CSK of validity.
func signedSnapshot(t *testing.T, validity time.Duration, now time.Time) *snapshot.Snapshot {
	t.Helper()
	dk := &dns.DNSKEY{Hdr: dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600},
		Flags: dns.ZONE | dns.SEP, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
	pk, err := dk.Generate(256)
	if err != nil {
		t.Fatal(err)
	}
	key := &dnssec.Key{DNSKEY: dk, Signer: pk.(crypto.Signer), Tag: dk.KeyTag(), File: "keys/Kexample.com.+013+00001"}
	s, err := dnssec.NewSigner("example.com.", []*dnssec.Key{key}, dnssec.Options{Validity: validity})
	if err != nil {
		t.Fatal(err)
	}
	z, errs, _ := zonedata.Parse(nil, "example.com.", "example.com.zone", []byte(zone("example.com", 1, "v1")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := z.Sign(s, now, 1); err != nil {
		t.Fatal(err)
	}
	set := zonedata.NewSet([]*zonedata.Zone{z, zonedata.NewFailed("other.example.", "x", "broken")})
	set.Precompile()
	return &snapshot.Snapshot{Zones: set}
}

// TestExpiryAlarm: a signature closer to its expiration than the alarm
// window is logged at ERROR (once per interval, not at every look) and
// said in the zone's status; before that, neither.
func TestExpiryAlarm(t *testing.T) {
	now := time.Now()
	snap := signedSnapshot(t, 14*24*time.Hour, now)
	v := viewOf(snap, nil)
	if len(v.zones) != 1 || v.validity != 14*24*time.Hour {
		t.Fatalf("view: %+v", v)
	}
	refresh, expire := v.earliest()
	// Jitter takes up to a tenth of the validity off the expiration;
	// inception is back-dated an hour.
	if d := expire.Sub(now); d > 14*24*time.Hour || d < 12*24*time.Hour {
		t.Fatalf("earliest expiry in %v", d)
	}
	if !refresh.After(now) || !refresh.Before(expire.Add(-48*time.Hour)) {
		t.Fatalf("first renewal %v, expiry %v", refresh, expire)
	}
	if v2 := viewOf(snap, v); v2.zones[0] != v.zones[0] {
		t.Fatal("a kept zone's times are not reused")
	}

	logs := &dnstest.LockedBuffer{}
	n := &Node{log: slog.New(slog.NewTextHandler(logs, nil))}
	logged := map[string]time.Time{}
	n.alarm(v, now, logged)
	n.alarm(v, refresh, logged) // due for renewal: not yet an alarm
	if logs.String() != "" {
		t.Fatalf("logged before the window:\n%s", logs)
	}
	z := snap.Zones.Zone("example.com.")
	if st := dnssecStatus(z, v, refresh); st.Expiring != "" {
		t.Fatalf("status expiring at the refresh point: %q", st.Expiring)
	}
	late := expire.Add(-47 * time.Hour)
	n.alarm(v, late, logged)
	n.alarm(v, late.Add(time.Minute), logged)
	if got := strings.Count(logs.String(), "level=ERROR"); got != 1 || !strings.Contains(logs.String(), "zone=example.com.") {
		t.Fatalf("%d ERROR lines, want 1:\n%s", got, logs)
	}
	n.alarm(v, late.Add(time.Hour), logged)
	if got := strings.Count(logs.String(), "level=ERROR"); got != 2 {
		t.Fatalf("%d ERROR lines an hour on, want 2:\n%s", got, logs)
	}
	st := dnssecStatus(z, v, late)
	if !strings.Contains(st.Expiring, "renewal is not keeping up") {
		t.Fatalf("status expiring: %q", st.Expiring)
	}
	if st = dnssecStatus(z, v, expire.Add(time.Second)); !strings.Contains(st.Expiring, "expired") {
		t.Fatalf("status expiring after expiry: %q", st.Expiring)
	}
	if len(st.Keys) != 1 || st.Keys[0].Role != "CSK" || st.Keys[0].Algorithm != "ECDSAP256SHA256" ||
		st.Keys[0].File != "keys/Kexample.com.+013+00001" || !strings.HasPrefix(st.Keys[0].DS, "example.com. IN DS ") {
		t.Fatalf("status keys: %+v", st.Keys)
	}
	if st.Made["load"] == 0 || st.Made["renew"] != 0 || st.Validity != "336h0m0s" || st.Refresh != 0.75 {
		t.Fatalf("status: %+v", st)
	}
	if !st.EarliestExpiry.Equal(expire) || !st.NextRenewal.Equal(refresh) {
		t.Fatalf("status times: %+v", st)
	}
	if dnssecStatus(snap.Zones.Zone("other.example."), v, now) != nil {
		t.Fatal("an unsigned zone has a dnssec status")
	}
}
