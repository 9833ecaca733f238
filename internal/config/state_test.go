package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// TestStatePath: state_dir left out is steer-state beside the file; a
// relative one is relative to the file's directory, an absolute one is
// itself; a configuration read from an fs.FS (the demo, a fleet bundle)
// keeps nothing unless given an absolute directory (a fleet member's).
func TestStatePath(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ file, stateDir, want string }{
		{filepath.Join(dir, "steer.yaml"), "", filepath.Join(dir, "steer-state")},
		{filepath.Join(dir, "steer.yaml"), "state", filepath.Join(dir, "state")},
		{filepath.Join(dir, "steer.yaml"), "../x/./state", filepath.Join(filepath.Dir(dir), "x", "state")},
		{filepath.Join(dir, "steer.yaml"), "/var/lib/steer", "/var/lib/steer"},
	} {
		text := "listen: [\"127.0.0.1:0\"]\n"
		if c.stateDir != "" {
			text += "state_dir: " + c.stateDir + "\n"
		}
		if err := os.WriteFile(c.file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.StatePath(); got != c.want {
			t.Errorf("state_dir %q: StatePath %q, want %q", c.stateDir, got, c.want)
		}
		if got, want := cfg.HealthStateFile(), filepath.Join(c.want, StateHealth); got != want {
			t.Errorf("state_dir %q: HealthStateFile %q, want %q", c.stateDir, got, want)
		}
	}
	// A relative configuration path still gives an absolute directory.
	wd, _ := os.Getwd()
	cfg := &Config{File: "steer.yaml"}
	if got, want := cfg.StatePath(), filepath.Join(wd, "steer-state"); got != want {
		t.Errorf("relative file: %q, want %q", got, want)
	}
	// health.state_file (deprecated) still names the health state.
	cfg = &Config{File: filepath.Join(dir, "steer.yaml"), Health: HealthOptions{StateFile: "h.json"}}
	if got, want := cfg.HealthStateFile(), filepath.Join(dir, "h.json"); got != want {
		t.Errorf("health.state_file: %q, want %q", got, want)
	}
	// ... and, without state_dir, its directory is the state directory
	// (where an earlier version kept its copies).
	cfg.Health.StateFile = "var/h.json"
	if got, want := cfg.StatePath(), filepath.Join(dir, "var"); got != want {
		t.Errorf("health.state_file without state_dir: StatePath %q, want %q", got, want)
	}
	cfg.StateDir = "st"
	if got, want := cfg.StatePath(), filepath.Join(dir, "st"); got != want {
		t.Errorf("health.state_file with state_dir: StatePath %q, want %q", got, want)
	}
	if got, want := cfg.HealthStateFile(), filepath.Join(dir, "var", "h.json"); got != want {
		t.Errorf("health.state_file with state_dir: HealthStateFile %q, want %q", got, want)
	}
	demo, err := LoadDemo()
	if err != nil {
		t.Fatal(err)
	}
	if got := demo.StatePath(); got != "" {
		t.Errorf("the embedded demo keeps state in %q, want nothing", got)
	}
	if got := demo.HealthStateFile(); got != "" {
		t.Errorf("the embedded demo keeps health state in %q, want nothing", got)
	}
	bundle, err := Parse(fstest.MapFS{}, "steer.yaml", []byte("state_dir: rel\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := bundle.StatePath(); got != "" {
		t.Errorf("a relative state_dir in an fs.FS: %q, want nothing", got)
	}
	bundle.StateDir = "/srv/state"
	if got := bundle.StatePath(); got != "/srv/state" {
		t.Errorf("an absolute state_dir in an fs.FS: %q", got)
	}
}

// TestStateDirWritable: MakeStateDir creates a missing directory and
// proves it writable; one that cannot be made (under a regular file, which
// fails even for root) is an error naming it. CheckStateDir says the same
// and creates nothing.
func TestStateDirWritable(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "a", "b")
	if err := CheckStateDir(ok); err != nil {
		t.Errorf("CheckStateDir(%s): %v", ok, err)
	}
	if _, err := os.Stat(ok); err == nil {
		t.Error("CheckStateDir created the directory")
	}
	if err := MakeStateDir(ok); err != nil {
		t.Fatalf("MakeStateDir(%s): %v", ok, err)
	}
	if fi, err := os.Stat(ok); err != nil || !fi.IsDir() {
		t.Fatalf("MakeStateDir made no directory: %v", err)
	}
	if ents, _ := os.ReadDir(ok); len(ents) != 0 {
		t.Errorf("MakeStateDir left %v behind", ents)
	}
	if err := CheckStateDir(ok); err != nil {
		t.Errorf("CheckStateDir of an existing directory: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{file, filepath.Join(file, "sub"), filepath.Join(file, "sub", "deeper")} {
		for name, f := range map[string]func(string) error{"MakeStateDir": MakeStateDir, "CheckStateDir": CheckStateDir} {
			err := f(bad)
			if err == nil || !strings.Contains(err.Error(), "state directory "+bad+" ") || !strings.Contains(err.Error(), "set state_dir") {
				t.Errorf("%s(%s): %v, want an error naming it", name, bad, err)
			}
		}
	}
	// The problem is at state_dir's line when the file sets it.
	cf := filepath.Join(dir, "steer.yaml")
	if err := os.WriteFile(cf, []byte("listen: [\"127.0.0.1:0\"]\nstate_dir: file/sub\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(cf)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.StateProblem(CheckStateDir(cfg.StatePath()))
	if want := cf + ":2: state directory " + filepath.Join(file, "sub") + " cannot be created"; !strings.HasPrefix(p.Error(), want) {
		t.Errorf("problem %q, want it to start %q", p.Error(), want)
	}
}
