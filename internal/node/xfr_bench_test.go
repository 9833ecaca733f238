package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkExportFallbackChange measures what one change of a steered
// name's exported fallback costs on a large zone transferred out: the
// pool the fallback answers is drained, the transfer service sees the
// new fallback, the zone gets the next serial, and the new export (and
// its IXFR delta) is published. Time and allocated bytes are the whole
// node's over that change; they should follow the change (one name),
// not the zone's size. STEER_BENCH_RECORDS sets the zone's size
// (default 100,000 records).
func BenchmarkExportFallbackChange(b *testing.B) {
	records := 100_000
	if v := os.Getenv("STEER_BENCH_RECORDS"); v != "" {
		fmt.Sscan(v, &records)
	}
	dir := b.TempDir()
	var z strings.Builder
	fmt.Fprintf(&z, "$ORIGIN %s\n$TTL 300\n@ SOA ns1 hostmaster 1 86400 3600 1209600 60\n@ NS ns1\nns1 A 192.0.2.53\n", xfrOrigin)
	for i := range records {
		fmt.Fprintf(&z, "h%d A 10.%d.%d.%d\n", i, i>>16&255, i>>8&255, i&255)
	}
	files := map[string]string{"steer.yaml": xfrConfig(nil), "xfr.zone": z.String()}
	for k := range xfrKeys {
		files[strings.TrimSuffix(k, "-key")+".key"] = keyFile(k)
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	n, err := New(Options{ConfigPath: filepath.Join(dir, "steer.yaml"), Listen: []string{"127.0.0.1:0"},
		Log: slog.New(slog.DiscardHandler)})
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
	serial := func() uint32 { return n.xfr.Status(xfrOrigin).ExportedSerial }
	if serial() != 1 {
		b.Fatalf("exported serial %d at start, want 1", serial())
	}
	states := []string{"down", "up"}
	// A node in its steady state: the start's garbage collected (else
	// the reload's memory limit, boundReloadMemory, collects it inside
	// the measurement, at a cost in the heap's size).
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		want := serial() + 1
		if code, body := callAPI(b, n.APIAddr(), "PUT", "/v1/records/shop.xfr.example./pools/other/state", "", `{"state":"`+states[i%2]+`"}`); code != 204 {
			b.Fatalf("pool override: %d %s", code, body)
		}
		n.xfr.Refresh() // rather than wait for HealthChanged's 500 ms
		deadline := time.Now().Add(time.Minute)
		for serial() != want {
			if time.Now().After(deadline) {
				b.Fatalf("exported serial %d after a minute, want %d", serial(), want)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(records), "records")
}
