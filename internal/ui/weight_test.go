package ui

import (
	"io/fs"
	"testing"
)

// MaxPageWeight bounds the bytes a browser loads for the dashboard:
// index.html and every asset (all of the embedded files, an upper bound on
// what the pages load).
const MaxPageWeight = 500 << 10

func TestPageWeight(t *testing.T) {
	files := loadAssets()
	var raw, gz int
	err := fs.WalkDir(Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		a := files[p]
		if a == nil {
			t.Errorf("%s is embedded but not served", p)
			return nil
		}
		n := len(a.raw)
		if a.gz != nil {
			n = len(a.gz)
		}
		raw += len(a.raw)
		gz += n
		t.Logf("%-24s %8d bytes, %8d gzipped", p, len(a.raw), n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["index.html"]; !ok {
		t.Fatal("no index.html")
	}
	t.Logf("page weight: %d bytes raw, %d gzipped (limit %d raw)", raw, gz, MaxPageWeight)
	if raw >= MaxPageWeight {
		t.Errorf("the dashboard's assets weigh %d bytes raw (%d gzipped), over the %d limit", raw, gz, MaxPageWeight)
	}
}
