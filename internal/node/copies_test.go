package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestManyZonesLastGoodPack: a node of 300 zones keeps their last good
// copies in one pack (zones/copies.pack), a reload's changed zone in a
// file of its own beside it; restarted with that zone and another broken,
// each serves its newest copy, and nothing is written again.
func TestManyZonesLastGoodPack(t *testing.T) {
	t.Parallel() // starts nodes: overlaps the other such tests
	const zones = 300
	var cfg strings.Builder
	cfg.WriteString("listen: [\"127.0.0.1:0\"]\napi: { listen: \"127.0.0.1:0\", token_file: token }\nzones:\n")
	files := map[string]string{"token": "tok"}
	for i := range zones {
		fmt.Fprintf(&cfg, "  - { origin: z%03d.example, file: z%03d.zone }\n", i, i)
		files[fmt.Sprintf("z%03d.zone", i)] = zone(fmt.Sprintf("z%03d.example", i), 1, "v1")
	}
	files["steer.yaml"] = cfg.String()
	n := startNode(t, files, Options{})
	state := filepath.Join(n.dir, "steer-state", "zones")
	kept := func(n *testNode) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n.copies.wait(ctx)
		cancel()
		ents, err := os.ReadDir(state)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	if got := kept(n); !slices.Equal(got, []string{"copies.pack"}) {
		t.Fatalf("state zones/ holds %v, want copies.pack alone", got)
	}
	writeFile(t, n.dir, "z007.zone", zone("z007.example", 2, "v2"))
	if _, err := n.ReloadZones(context.Background(), []string{"z007.example"}); err != nil {
		t.Fatal(err)
	}
	if got := kept(n); !slices.Equal(got, []string{"copies.pack", "z007.example.zone"}) {
		t.Fatalf("after a one-zone reload zones/ holds %v, want the pack and z007's file", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	n.Shutdown(ctx)
	cancel()

	writeFile(t, n.dir, "z007.zone", "broken\n")
	writeFile(t, n.dir, "z123.zone", "broken too\n")
	st, err := os.Stat(filepath.Join(state, "copies.pack"))
	if err != nil {
		t.Fatal(err)
	}
	n2 := startNodeIn(t, n.dir, Options{})
	if a, b, c := n2.txt("gen.z007.example"), n2.txt("gen.z123.example"), n2.txt("gen.z299.example"); a != "v2" || b != "v1" || c != "v1" {
		t.Fatalf("after a restart: z007 %q (want its reload's copy v2), z123 %q (the pack's v1), z299 %q", a, b, c)
	}
	if _, body := n2.call("GET", "/v1/status", "tok", ""); !strings.Contains(body, "copies.pack#z123.example.zone") {
		t.Errorf("status does not say z123 serves the pack's copy:\n%s", body)
	}
	if got := kept(n2); !slices.Equal(got, []string{"copies.pack", "z007.example.zone"}) {
		t.Fatalf("after the restart zones/ holds %v", got)
	}
	if st2, err := os.Stat(filepath.Join(state, "copies.pack")); err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("the restart wrote the pack again: %v", err)
	}
}
