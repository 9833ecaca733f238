package difftest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/peertest"
	"github.com/steer-dns/steer/internal/zone"
)

// TestLoadsWhatPeersLoad serves the peer zones unchanged from Knot and
// NSD and requires steer to load every zone that both of them load.
func TestLoadsWhatPeersLoad(t *testing.T) {
	zones := readZones(t, peerDir(t))
	knot := peertest.StartKnot(t, peerZones(zones), peertest.Options{})
	nsd := peertest.StartNSD(t, peerZones(zones), peertest.Options{})
	both := 0
	for _, z := range zones {
		_, errs, _ := zone.Load(nil, z.Origin, z.File)
		k, n := knot.Loaded(z.Origin), nsd.Loaded(z.Origin)
		if k && n {
			both++
			if len(errs) > 0 {
				t.Errorf("%s: Knot and NSD load it, steer refuses it: %v", z.Origin, errs)
			}
			continue
		}
		t.Logf("%-36s knot %-8s nsd %-8s steer %s", z.Origin, loadWord(k), loadWord(n), loadWord(len(errs) == 0))
	}
	if both < len(zones)/2 {
		t.Errorf("Knot and NSD both load only %d of %d zones: the peers are misconfigured\nknot:\n%s\nnsd:\n%s", both, len(zones), knot.Log, nsd.Log)
	}
	t.Logf("%d of %d zones load in Knot and NSD alike, and in steer", both, len(zones))
}

func loadWord(ok bool) string {
	if ok {
		return "loads"
	}
	return "refuses"
}

// TestStrippedLines loads each line the comparison strips on its own (the
// zone with every other stripped line commented out): steer loads the
// ones strip says it loads, and refuses the others naming the file and
// the line.
func TestStrippedLines(t *testing.T) {
	dir := peerDir(t)
	byOrigin := map[string]peerZone{}
	for _, z := range readZones(t, dir) {
		byOrigin[z.Origin] = z
	}
	tmp := t.TempDir()
	for i, s := range strip {
		z, ok := byOrigin[s.zone]
		if !ok {
			t.Fatalf("strip names %s, which zones.tsv does not list", s.zone)
		}
		data, err := os.ReadFile(z.File)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for _, o := range strip {
			if o.zone == s.zone && o.line != s.line {
				lines[o.line-1] = "; stripped: " + lines[o.line-1]
			}
		}
		file := filepath.Join(tmp, strings.TrimSuffix(s.zone, ".")+"-"+string(rune('a'+i)))
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errs, _ := zone.Load(nil, s.zone, file)
		switch {
		case s.steer && len(errs) > 0:
			t.Errorf("%s:%d (%s): steer should load it, refuses: %v", s.zone, s.line, s.refusedBy, errs)
		case !s.steer && len(errs) == 0:
			t.Errorf("%s:%d (%s): steer should refuse it, loads it", s.zone, s.line, s.refusedBy)
		case !s.steer && (errs[0].Line != s.line || errs[0].File == ""):
			t.Errorf("%s:%d: refused, but the problem names %v", s.zone, s.line, errs[0])
		case !s.steer:
			t.Logf("%s:%d refused: %s", s.zone, s.line, errs[0].Msg)
		}
	}
}
