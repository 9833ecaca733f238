package tcplimit_test

import (
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/tcplimit"
)

// TestSetDefaults: the zero Limits gets every default and validates; a
// small MaxConns caps the default PerPrefix; Idle stays 0 (the snapshot's)
// and fields already set are kept.
func TestSetDefaults(t *testing.T) {
	var l tcplimit.Limits
	l.SetDefaults()
	want := tcplimit.Limits{MaxConns: 1000, PerPrefix: 32, IPv4Prefix: 24, IPv6Prefix: 56, FirstQuery: 2 * time.Second}
	if l != want {
		t.Errorf("defaults %+v, want %+v", l, want)
	}
	if err := l.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	small := tcplimit.Limits{MaxConns: 7, FirstQuery: time.Second}
	small.SetDefaults()
	if small.MaxConns != 7 || small.PerPrefix != 7 || small.FirstQuery != time.Second || small.Idle != 0 {
		t.Errorf("max 7: %+v, want per-prefix 7 and the first-query timeout kept", small)
	}
	if err := small.Validate(); err != nil {
		t.Errorf("max 7: %v", err)
	}
}
