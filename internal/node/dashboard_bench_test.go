package node

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
)

// BenchmarkOverviewPage: one page of the overview of 10,000 records, as
// GET /v1/overview asks it (without the JSON): the walk over every record
// for the filter and the state counts, then the page's 100 records.
func BenchmarkOverviewPage(b *testing.B) {
	dir := b.TempDir()
	writeFile(b, dir, "steer.yaml", dashConfig(1, 10_000))
	writeFile(b, dir, "example.com.zone", dashZone)
	n, err := New(Options{ConfigPath: filepath.Join(dir, "steer.yaml"), Listen: []string{"127.0.0.1:0"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	for _, c := range []struct {
		name string
		q    api.OverviewQuery
	}{
		{"page", api.OverviewQuery{Offset: 5000, Limit: 100}},
		{"filter", api.OverviewQuery{Filter: "F12", Limit: 100}},
		{"state", api.OverviewQuery{State: "down", Limit: 100}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ov, err := n.Overview(c.q)
			if err != nil || ov.Total == 0 || len(ov.Records) == 0 {
				b.Fatalf("%+v: total %d, %d records, %v", c.q, ov.Total, len(ov.Records), err)
			}
			b.ReportAllocs()
			for b.Loop() {
				n.Overview(c.q)
			}
		})
	}
}
