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

// TestRollout: a canary is served by the nodes it names only, is promoted
// or rolled back, a plain push is refused while it runs, a rollback
// restores the previous bundle, and the store keeps at most three
// bundles, sharing the files they have in common.
func TestRollout(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	s := open(t, fleet.EtcdConfig{Endpoints: c.Endpoints()})
	ctx := context.Background()
	const p = "/steer/v1"
	bundle := func(cfg string) fleet.Bundle {
		return fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte(cfg), "zones/big.zone": []byte("the same big zone")}}
	}
	keys := func() int {
		kvs, _, err := s.Get(ctx, p+"/config/")
		if err != nil {
			t.Fatal(err)
		}
		return len(kvs)
	}
	if _, _, err := fleet.PublishCanary(ctx, s, p, bundle("c"), []string{"n1"}, 0); err == nil {
		t.Error("a canary with nothing published was accepted")
	}
	rev1, _, err := fleet.Publish(ctx, s, p, bundle("one"), 0)
	if err != nil {
		t.Fatal(err)
	}
	rev2, _, err := fleet.Publish(ctx, s, p, bundle("two"), rev1)
	if err != nil {
		t.Fatal(err)
	}
	// current + previous: 2 metas, 3 blobs (the zone is shared), the
	// serial.
	if n := keys(); n != 6 {
		t.Errorf("%d keys after two pushes, want 6", n)
	}
	_, serial, err := fleet.PublishCanary(ctx, s, p, bundle("three"), []string{"n1"}, rev2)
	if err != nil || serial != 3 {
		t.Fatalf("canary: %d %v", serial, err)
	}
	pub, err := fleet.ReadPublished(ctx, s, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(pub.For("n1").Files["steer.yaml"]); got != "three" {
		t.Errorf("n1 serves %q, want the canary", got)
	}
	if got := string(pub.For("n2").Files["steer.yaml"]); got != "two" {
		t.Errorf("n2 serves %q, want the current bundle", got)
	}
	if pub.Canary.Meta.Digest != fleet.Digest(pub.Canary.Files) || pub.Current.Meta.Digest == pub.Canary.Meta.Digest {
		t.Errorf("digests: current %s canary %s", pub.Current.Meta.Digest, pub.Canary.Meta.Digest)
	}
	if _, _, err := fleet.Publish(ctx, s, p, bundle("four"), rev2); !errors.Is(err, fleet.ErrCanary) {
		t.Errorf("a push during a canary: %v, want ErrCanary", err)
	}
	// Rolling the canary back leaves current and previous as they were.
	now, undone, err := fleet.Rollback(ctx, s, p)
	if err != nil || string(now.Files["steer.yaml"]) != "two" || undone.Meta.Serial != 3 {
		t.Fatalf("rollback of the canary: %v %v %v", now.Meta, undone.Meta, err)
	}
	if n := keys(); n != 6 {
		t.Errorf("%d keys after the canary's rollback, want 6", n)
	}
	// Canary again, promoted: current three, previous two, "one" gone.
	if _, _, err := fleet.PublishCanary(ctx, s, p, bundle("three"), []string{"n1"}, rev2); err != nil {
		t.Fatal(err)
	}
	b, err := fleet.Promote(ctx, s, p)
	if err != nil || string(b.Files["steer.yaml"]) != "three" || b.Meta.Serial != 4 || len(b.Meta.Canary) != 0 {
		t.Fatalf("promote: %+v %v", b.Meta, err)
	}
	if _, err := fleet.Promote(ctx, s, p); !errors.Is(err, fleet.ErrNothing) {
		t.Errorf("promote without a canary: %v", err)
	}
	if n := keys(); n != 6 {
		t.Errorf("%d keys after the promotion, want 6", n)
	}
	pub, _ = fleet.ReadPublished(ctx, s, p)
	if string(pub.Previous.Files["steer.yaml"]) != "two" || pub.Canary.Rev != 0 || pub.Current.Rev != b.Rev {
		t.Errorf("after the promotion: previous %q canary rev %d", pub.Previous.Files["steer.yaml"], pub.Canary.Rev)
	}
	// A rollback restores two, and keeps no previous bundle.
	now, _, err = fleet.Rollback(ctx, s, p)
	if err != nil || string(now.Files["steer.yaml"]) != "two" || now.Meta.Serial != 2 {
		t.Fatalf("rollback: %+v %v", now.Meta, err)
	}
	if got, _ := fleet.ReadBundle(ctx, s, p); string(got.Files["steer.yaml"]) != "two" || got.Rev != now.Rev {
		t.Errorf("read after the rollback: %q at %d", got.Files["steer.yaml"], got.Rev)
	}
	if _, _, err := fleet.Rollback(ctx, s, p); !errors.Is(err, fleet.ErrNothing) {
		t.Errorf("a second rollback: %v, want ErrNothing", err)
	}
	if n := keys(); n != 4 {
		t.Errorf("%d keys after the rollback, want 4", n)
	}
	// The next push numbers past every serial the store has seen.
	if _, serial, err := fleet.Publish(ctx, s, p, bundle("five"), now.Rev); err != nil || serial != 5 {
		t.Errorf("push after the rollback: serial %d %v", serial, err)
	}
}

// TestLegacyLayout: a bundle published by an older steer (files under
// P/config/file/) is read, and the next publication moves it to blobs.
func TestLegacyLayout(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	s := open(t, fleet.EtcdConfig{Endpoints: c.Endpoints()})
	ctx := context.Background()
	const p = "/steer/v1"
	ok, rev, err := s.Txn(ctx, nil, []fleet.KV{
		{Key: p + "/config/meta", Value: []byte(`{"serial":7,"files":["steer.yaml"]}`)},
		{Key: p + "/config/file/steer.yaml", Value: []byte("old")},
	}, nil)
	if err != nil || !ok {
		t.Fatal(err)
	}
	b, err := fleet.ReadBundle(ctx, s, p)
	if err != nil || b.Rev != rev || string(b.Files["steer.yaml"]) != "old" {
		t.Fatalf("legacy read: %+v %v", b, err)
	}
	if _, serial, err := fleet.Publish(ctx, s, p, fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte("new")}}, rev); err != nil || serial != 8 {
		t.Fatalf("publish over the old layout: %d %v", serial, err)
	}
	pub, err := fleet.ReadPublished(ctx, s, p)
	if err != nil || string(pub.Previous.Files["steer.yaml"]) != "old" || string(pub.Current.Files["steer.yaml"]) != "new" {
		t.Fatalf("after: %+v %v", pub, err)
	}
	if kvs, _, _ := s.Get(ctx, p+"/config/file/"); len(kvs) != 0 {
		t.Errorf("%d files of the old layout left", len(kvs))
	}
}
