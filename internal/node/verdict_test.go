// Compute-bound (it compiles policies over whole configurations), so it is
// not built with the race detector: scripts/test.sh runs the tests of a
// raced package's !race files in its plain stage.

//go:build !race

package node

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCheckAndStartAgree: steer check (the plan, aborted) and a node's
// start (the plan, committed and served) give the same verdict on every
// configuration in the repository, and on broken copies of the examples.
// A node serves around a zone that fails and a latency file it rejects
// (degraded), where check reports an error; those count as start's
// errors, and each of start's problems must be among check's.
//
// Each fixture runs on a copy of its directory, with the admin API on a
// free loopback port and the anycast drain at 0 (the DNS listeners are
// replaced by Options.Listen). Nothing needs an external service: the
// secondary zones' primaries and the BGP peers of the examples are
// documentation addresses that a start only dials in the background.
func TestCheckAndStartAgree(t *testing.T) {
	fixtures, err := filepath.Glob("../../examples/*/steer.yaml")
	if err != nil || len(fixtures) < 5 {
		t.Fatalf("examples: %v %v", fixtures, err)
	}
	more, _ := filepath.Glob("../config/testdata/*.yaml")
	fixtures = append(fixtures, more...)
	fixtures = append(fixtures, "../config/demo/steer.yaml", "../../packaging/etc/steer.yaml")
	type tc struct {
		name, path string
		breakIt    func(t *testing.T, dir string) // nil: as in the repository
		wantErr    bool                           // for the broken copies
	}
	var cases []tc
	for _, f := range fixtures {
		rel := strings.TrimLeft(filepath.ToSlash(f), "./")
		cases = append(cases, tc{name: rel, path: f})
	}
	edit := func(name, old, new string) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, name)
			b, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(b), old) {
				t.Fatalf("%s: %q not found (%v)", p, old, err)
			}
			writeFile(t, dir, name, strings.Replace(string(b), old, new, 1))
		}
	}
	remove := func(name string) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The broken copies: a small node (no steered record, so nothing to
	// compile) with one thing broken, and two examples for what needs
	// steered records.
	small := filepath.Join(t.TempDir(), "steer.yaml")
	writeFile(t, filepath.Dir(small), "steer.yaml", `listen: ["127.0.0.1:0"]
api: { listen: "127.0.0.1:0", token_file: token }
cookies: { secret_file: cookie.key }
query_log: { path: q.log }
zones:
  - { origin: example.com, file: example.com.zone }
`)
	writeFile(t, filepath.Dir(small), "token", "tok")
	writeFile(t, filepath.Dir(small), "cookie.key", "0123456789abcdef0123456789abcdef\n")
	writeFile(t, filepath.Dir(small), "example.com.zone", zone("example.com", 1, "v1"))
	cases = append(cases,
		tc{"small", small, nil, false},
		tc{"broken/no token file", small, remove("token"), true},
		tc{"broken/no cookie secret", small, remove("cookie.key"), true},
		tc{"broken/zone file", small, func(t *testing.T, dir string) {
			writeFile(t, dir, "example.com.zone", "$ORIGIN example.com.\n@ 300 IN SOA\n")
		}, true},
		tc{"broken/query log directory", small, edit("steer.yaml", "q.log", "no/such/dir/q.log"), true},
		tc{"broken/empty bgp password", "../../examples/anycast/steer.yaml", func(t *testing.T, dir string) {
			writeFile(t, dir, "bgp.pw", "\n")
		}, true},
		tc{"broken/latency file", "../../examples/latency/steer.yaml", func(t *testing.T, dir string) {
			writeFile(t, dir, "latency.csv", "this,is,not\na latency file\n")
		}, true},
		tc{"broken/unknown pool", "../../examples/failover/steer.yaml", edit("steer.yaml", "pool: ", "pool: nosuch"), true},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := copyFixture(t, filepath.Dir(c.path))
			if c.breakIt != nil {
				c.breakIt(t, dir)
			}
			path := filepath.Join(dir, filepath.Base(c.path))
			_, _, checkErr := Check(path)
			startProblems := startVerdict(t, path)
			t.Logf("check: %v\nstart: %q", checkErr, startProblems)
			if (checkErr == nil) != (len(startProblems) == 0) {
				t.Fatalf("check and start disagree:\ncheck: %v\nstart: %q", checkErr, startProblems)
			}
			if c.breakIt != nil && c.wantErr != (checkErr != nil) {
				t.Fatalf("the broken copy passes")
			}
			for _, p := range startProblems {
				// The same problem at the same file:line (a dry run words
				// some differently: it opens nothing).
				if !strings.Contains(checkErr.Error(), where(p)) {
					t.Errorf("start's problem %q is not among check's:\n%v", p, checkErr)
				}
			}
		})
	}
}

var fileLine = regexp.MustCompile(`^\S+:\d+: `)

// where is p's file:line, or p itself without one.
func where(p string) string {
	if l := fileLine.FindString(p); l != "" {
		return l
	}
	return p
}

// startVerdict runs New and Start on path and shuts the node down; it
// returns New's or Start's error lines, or else what the started node
// serves around (failed zones, rejected latency files).
func startVerdict(t *testing.T, path string) []string {
	n, err := New(Options{ConfigPath: path, Listen: []string{"127.0.0.1:0"}, WatchInterval: time.Hour})
	if err != nil {
		return problemLines(err)
	}
	p := n.first
	var probs []string
	for _, d := range p.snap.Degraded {
		for _, z := range d.Problems {
			probs = append(probs, z.String())
		}
	}
	probs = append(probs, p.latErrs...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = n.Start(ctx)
	if err := n.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	if err != nil {
		return append(probs, problemLines(err)...)
	}
	return probs
}

// copyFixture copies dir into a new directory, with every admin API
// (indented listen) on a free port and no anycast drain.
func copyFixture(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	api := regexp.MustCompile(`(?m)^(\s+listen:\s*)\S+`)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".yaml") {
			b = api.ReplaceAll(b, []byte("${1}127.0.0.1:0"))
			b = regexp.MustCompile(`(?m)^(\s+drain:\s*)\S+`).ReplaceAll(b, []byte("${1}0s"))
		}
		rel, _ := filepath.Rel(dir, p)
		writeFile(t, out, rel, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
