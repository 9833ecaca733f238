package fleet_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
)

// TestPublishAndRead publishes bundles with compare-and-swap on the
// revision: the first needs none published, each next the revision read,
// a stale expectation is ErrConflict and writes nothing, and files the new
// bundle drops are deleted.
func TestPublishAndRead(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	s := open(t, fleet.EtcdConfig{Endpoints: c.Endpoints()})
	ctx := context.Background()
	const p = "/steer/v1"
	b, err := fleet.ReadBundle(ctx, s, p)
	if err != nil || b.Rev != 0 || len(b.Files) != 0 {
		t.Fatalf("empty fleet: %+v %v", b, err)
	}
	one := fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte("identity: a\n"), "zones/a.zone": []byte("a"), "zones/b.zone": []byte("b")}}
	rev1, serial, err := fleet.Publish(ctx, s, p, one, 0)
	if err != nil || serial != 1 {
		t.Fatalf("first publish: %d %d %v", rev1, serial, err)
	}
	if _, _, err := fleet.Publish(ctx, s, p, one, 0); !errors.Is(err, fleet.ErrConflict) {
		t.Errorf("a second first publish: %v, want ErrConflict", err)
	}
	two := fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte("identity: b\n"), "zones/a.zone": []byte("a2")}, Meta: fleet.Meta{PushedBy: "test"}}
	rev2, serial, err := fleet.Publish(ctx, s, p, two, rev1)
	if err != nil || serial != 2 || rev2 <= rev1 {
		t.Fatalf("second publish: %d %d %v", rev2, serial, err)
	}
	if _, _, err := fleet.Publish(ctx, s, p, one, rev1); !errors.Is(err, fleet.ErrConflict) {
		t.Errorf("publish on a stale revision: %v, want ErrConflict", err)
	}
	got, err := fleet.ReadBundle(ctx, s, p)
	if err != nil || got.Rev != rev2 || got.Meta.Serial != 2 || got.Meta.PushedBy != "test" || len(got.Files) != 2 ||
		string(got.Files["steer.yaml"]) != "identity: b\n" || string(got.Files["zones/a.zone"]) != "a2" {
		t.Errorf("read back: %+v %v", got, err)
	}
	if _, ok := got.Files["zones/b.zone"]; ok {
		t.Error("a file the new bundle dropped is still published")
	}
	if _, _, err := fleet.Publish(ctx, s, p, fleet.Bundle{Files: map[string][]byte{"x": nil}}, rev2); err == nil {
		t.Error("a bundle without steer.yaml was published")
	}
	// More files than one transaction holds: refused, nothing written.
	many := fleet.Bundle{Files: map[string][]byte{"steer.yaml": nil}}
	for i := range fleet.MaxTxnOps {
		many.Files[string(rune('a'+i%26))+string(rune('a'+i/26))] = []byte("x")
	}
	if _, _, err := fleet.Publish(ctx, s, p, many, rev2); !errors.Is(err, fleet.ErrTooManyOps) {
		t.Errorf("a bundle of %d files: %v, want ErrTooManyOps", len(many.Files), err)
	}
}

// TestBundleOfIncomplete: a meta listing a file the store does not have
// is an error, not a bundle missing a zone.
func TestBundleOfIncomplete(t *testing.T) {
	kvs := []fleet.KV{{Key: "/p/config/meta", Value: []byte(`{"serial":3,"files":["steer.yaml","zones/a"]}`), Rev: 9},
		{Key: "/p/config/file/steer.yaml", Value: []byte("x")}}
	if _, err := fleet.BundleOf("/p", kvs); err == nil {
		t.Error("an incomplete bundle was accepted")
	}
	kvs = append(kvs, fleet.KV{Key: "/p/config/file/zones/a", Value: []byte("z")})
	b, err := fleet.BundleOf("/p", kvs)
	if err != nil || b.Rev != 9 || b.Meta.Serial != 3 {
		t.Errorf("complete bundle: %+v %v", b, err)
	}
}

// TestBundleFS serves the bundle's files and falls back for the others.
func TestBundleFS(t *testing.T) {
	b := fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte("cfg"), "zones/a.zone": []byte("zone")}}
	local := fstest.MapFS{"var/lib/geo/city.mmdb": {Data: []byte("db")}}
	f := b.FS(local)
	for name, want := range map[string]string{"steer.yaml": "cfg", "zones/a.zone": "zone", "var/lib/geo/city.mmdb": "db"} {
		if got, err := fs.ReadFile(f, name); err != nil || string(got) != want {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
	if _, err := fs.ReadFile(b.FS(nil), "var/lib/geo/city.mmdb"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no fallback: %v", err)
	}
	if fleet.BundleName("/etc/steer/zones/a.zone") != "etc/steer/zones/a.zone" || fleet.BundleName("./zones//a.zone") != "zones/a.zone" {
		t.Error("BundleName")
	}
}
