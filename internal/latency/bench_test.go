package latency

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// benchBatch returns n measurements over a few sites and keys of every kind.
func benchBatch(n int) []Measurement {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sites := []string{"bom", "fra", "iad", "sin"}
	ms := make([]Measurement, n)
	for i := range ms {
		var key string
		switch i % 8 {
		case 0:
			key = "AS" + fmt.Sprint(64496+i)
		case 1:
			key = "IN"
		case 2:
			key = "IN-MH"
		case 3:
			key = "continent:EU"
		default:
			key = fmt.Sprintf("10.%d.%d.0/24", i>>8&255, i&255)
		}
		ms[i] = Measurement{Key: key, Site: sites[i%len(sites)], RTTms: float64(10 + i%200), Samples: 1, MeasuredAt: at}
	}
	return ms
}

func benchCSV(n int) []byte {
	var b bytes.Buffer
	b.WriteString(csvHeader + "\n")
	for _, m := range benchBatch(n) {
		fmt.Fprintf(&b, "%s,%s,%g,%d,%s\n", m.Key, m.Site, m.RTTms, m.Samples, m.MeasuredAt.Format(time.RFC3339))
	}
	return b.Bytes()
}

func benchJSON(n int) []byte {
	type el struct {
		Key        string  `json:"key"`
		Site       string  `json:"site"`
		RTTms      float64 `json:"rtt_ms"`
		Samples    int     `json:"samples"`
		MeasuredAt string  `json:"measured_at"`
	}
	var all []el
	for _, m := range benchBatch(n) {
		all = append(all, el{m.Key, m.Site, m.RTTms, m.Samples, m.MeasuredAt.Format(time.RFC3339)})
	}
	data, err := json.Marshal(all)
	if err != nil {
		panic(err)
	}
	return data
}

func BenchmarkParseCSV100k(b *testing.B) {
	data := benchCSV(100_000)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseCSV("bench.csv", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseJSON100k(b *testing.B) {
	data := benchJSON(100_000)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseJSON("bench.json", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheck100k(b *testing.B) {
	ms, err := ParseCSV("bench.csv", bytes.NewReader(benchCSV(100_000)))
	if err != nil {
		b.Fatal(err)
	}
	sites := map[string]bool{"bom": true, "fra": true, "iad": true, "sin": true}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(ms, sites, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate100k: one Update of a store with 100,000 measurements
// into a fresh store (TestLargeUpdateConcurrentLookups checks that
// lookups go on during it).
func BenchmarkUpdate100k(b *testing.B) {
	ms, err := ParseCSV("bench.csv", bytes.NewReader(benchCSV(100_000)))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		s := NewStore(Options{HalfLife: time.Hour, MaxAge: 24 * time.Hour})
		s.Update(ms, now)
	}
}
