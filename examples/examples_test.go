// Package examples holds complete example configurations (one directory
// each) and the test that every one passes steer check; examples/simulate
// holds scenarios for steer simulate against examples/larkbook.
package examples

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/node"
	"github.com/steer-dns/steer/internal/simulate"
	"github.com/steer-dns/steer/internal/snapshot"
)

// TestExamplesCheck runs steer check's validation on every
// examples/*/steer.yaml: each must pass without warnings.
func TestExamplesCheck(t *testing.T) {
	configs, err := filepath.Glob("*/steer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(configs) < 5 {
		t.Fatalf("only %d examples: %v", len(configs), configs)
	}
	for _, c := range configs {
		t.Run(filepath.Dir(c), func(t *testing.T) {
			t.Parallel()
			summary, warns, err := node.Check(c)
			for _, w := range warns {
				t.Errorf("warning: %s", w)
			}
			if err != nil {
				t.Fatalf("steer check %s:\n%v", c, err)
			}
			t.Logf("%s: ok (%s)", c, summary)
		})
	}
}

// TestLarkbookIsTheDemo keeps examples/larkbook the embedded demo.
func TestLarkbookIsTheDemo(t *testing.T) {
	for ex, demo := range map[string]string{
		"larkbook/steer.yaml":             "../internal/config/demo/steer.yaml",
		"larkbook/zones/example.com.zone": "../internal/config/demo/zones/example.com.zone",
	} {
		a, err1 := os.ReadFile(ex)
		b, err2 := os.ReadFile(demo)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		// The first line says what the file is; the rest is the same.
		if _, a2, _ := bytes.Cut(a, []byte("\n")); true {
			if _, b2, _ := bytes.Cut(b, []byte("\n")); !bytes.Equal(a2, b2) {
				t.Errorf("%s differs from %s (copy it again, keeping the first line)", ex, demo)
			}
		}
	}
}

// TestSimulateScenarios parses every examples/simulate/*.yaml and compiles
// it against the configuration it is written for: the one its comment's
// command names (--config examples/NAME/steer.yaml), else examples/larkbook.
func TestSimulateScenarios(t *testing.T) {
	scenarios, err := filepath.Glob("simulate/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(scenarios) < 2 {
		t.Fatalf("only %d scenarios: %v", len(scenarios), scenarios)
	}
	cfg, err := config.Load("larkbook/steer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := simulate.Base{Config: cfg, Geo: snap.Geo, Table: snap.Policies, LoadConfig: config.Load}
	for _, p := range scenarios {
		t.Run(filepath.Base(p), func(t *testing.T) {
			sc, err := simulate.LoadScenario(p)
			if err != nil {
				t.Fatal(err)
			}
			b := base
			data, _ := os.ReadFile(p)
			if m := configRE.FindSubmatch(data); m != nil && string(m[1]) != "larkbook" {
				// Another example's configuration, on the same
				// (embedded) geo database: Compile builds its table.
				other, err := config.Load(string(m[1]) + "/steer.yaml")
				if err != nil {
					t.Fatal(err)
				}
				b = simulate.Base{Config: other, Geo: snap.Geo, LoadConfig: config.Load}
			}
			m, err := simulate.Compile(sc, b)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d subnets, %d resolvers, %d phases", p, len(m.Subnets), len(m.Resolvers), len(m.Phases))
		})
	}
}

var configRE = regexp.MustCompile(`--config examples/([\w-]+)/steer\.yaml`)
