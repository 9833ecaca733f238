package simulate

import (
	"bytes"
	"testing"
	"time"
)

// BenchmarkFromLog reads a 24-hour log of about 20,000 misses from 4
// resolvers (one op is one whole log).
func BenchmarkFromLog(b *testing.B) {
	keys := []genKey{
		{res: "192.0.2.1", sources: map[string]float64{"198.51.100.0/24": 0.5, "198.51.101.0/24": 0.5}, scope: 20, lambda: 0.1, k: 1},
		{res: "198.18.5.9", sources: map[string]float64{"100.64.8.0/24": 1}, scope: 24, lambda: 0.5, k: 3},
		{res: "10.1.0.1", lambda: 0.2, k: 1, scope: -1},
	}
	data := genLog(b, 1, keys, logT0, 24*time.Hour, 30*time.Second)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := FromLog(bytes.NewReader(data), FromLogOptions{TTL: 30 * time.Second}); err != nil {
			b.Fatal(err)
		}
	}
}
