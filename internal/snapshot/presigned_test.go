package snapshot_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/snapshot"
)

const presignedConfig = `zones:
  - origin: example.com
    file: signed.zone
DNSSEC
`

// TestPresignedZone: a zone signed elsewhere is found without
// configuration and said so; dnssec.presigned refuses a copy that came
// unsigned; a copy whose chain is broken, or whose signatures expired,
// fails alone and the last good copy is served.
func TestPresignedZone(t *testing.T) {
	t.Parallel()
	signed := signElsewhere(t, multiZone)
	setup := func(section, zone string) string {
		_, dir := write(t, map[string]string{"steer.yaml": strings.Replace(presignedConfig, "DNSSEC\n", section, 1), "signed.zone": zone})
		return dir
	}

	dir := setup("", signed)
	snap, warns, err := snapshot.Build(reload(t, dir))
	if err != nil || len(warns) > 0 {
		t.Fatalf("Build: %v %v", err, warns)
	}
	if z := snap.Zones.Zone("example.com."); !z.Presigned() || !strings.Contains(snap.Summary(), "1 pre-signed") || !strings.Contains(snap.Summary(), "NSEC (") {
		t.Errorf("summary: %s", snap.Summary())
	}

	// presigned: true, and the copy is not signed.
	_, _, err = snapshot.Build(reload(t, setup("    dnssec: { presigned: true }\n", multiZone)))
	if err == nil || !strings.Contains(err.Error(), "has no RRSIGs at its apex, but dnssec.presigned (") {
		t.Errorf("unsigned with presigned: true: %v", err)
	}
	if _, _, err := snapshot.Build(reload(t, setup("    dnssec: { presigned: true }\n", signed))); err != nil {
		t.Errorf("signed with presigned: true: %v", err)
	}

	// A broken chain at a reload: the zone fails alone, at file:line,
	// and the copy served until now goes on.
	var broken []string
	for _, l := range strings.Split(signed, "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[0] == "www.example.com." && (f[3] == "NSEC" || f[3] == "RRSIG" && f[4] == "NSEC") {
			continue
		}
		broken = append(broken, l)
	}
	if err := os.WriteFile(filepath.Join(dir, "signed.zone"), []byte(strings.Join(broken, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	next, warns, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: snap})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Degraded) != 1 || next.Degraded[0].Serving != snapshot.ServingPrevious || !strings.Contains(next.Degraded[0].Problem, "signed.zone:") ||
		!strings.Contains(next.Degraded[0].Problems.Error(), "www.example.com. has data but no NSEC: the NSEC chain skips it") {
		t.Errorf("degraded: %+v\n%v", next.Degraded, warns)
	}
	expectAnswer(t, next, "www.example.com.", 1, "NOERROR", "A 192.0.2.80")

	// Signatures expired (the signer stopped): the zone is not kept as
	// served, and no copy validates: SERVFAIL, never bogus answers.
	if err := os.WriteFile(filepath.Join(dir, "signed.zone"), []byte(signed), 0o644); err != nil {
		t.Fatal(err)
	}
	later, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: snap, Now: time.Now().Add(60 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(later.Degraded) != 1 || later.Degraded[0].Serving != snapshot.ServingServfail || !strings.Contains(later.Degraded[0].Problem, "expired at") {
		t.Errorf("expired: %+v", later.Degraded)
	}
	expectAnswer(t, later, "www.example.com.", 1, "SERVFAIL")

	// The same while served, with no reload: the node's renewal step
	// (its timer wakes at the first expiration) answers the zone
	// SERVFAIL once its signer has let the signatures expire.
	if same, err := snap.Resigned(time.Now()); err != nil || same != snap {
		t.Errorf("renewal before the expiry changed the snapshot (%v)", err)
	}
	gone, err := snap.Resigned(time.Now().Add(60 * 24 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(gone.Degraded) != 1 || gone.Degraded[0].Serving != snapshot.ServingServfail || !strings.Contains(gone.Degraded[0].Problem, "signatures expired at") {
		t.Errorf("expired while served: %+v", gone.Degraded)
	}
	expectAnswer(t, gone, "www.example.com.", 1, "SERVFAIL")
}
