package latency

import (
	"math"
	"net/netip"
	"testing"
	"time"
)

// Real-user values are blended with probe values by RUMWeight where both
// measure a site, replace the estimate where only users measured, and
// never overwrite probe values (a probe update leaves them be).
func TestRUMBlend(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewStore(Options{RUMWeight: 0.7})
	s.Update([]Measurement{
		{Key: "DE", Site: "fra", RTTms: 80, Samples: 1, MeasuredAt: now},
		{Key: "192.0.2.0/24", Site: "fra", RTTms: 40, Samples: 9, MeasuredAt: now, RUM: true},
		{Key: "192.0.2.0/24", Site: "bom", RTTms: 150, Samples: 9, MeasuredAt: now, RUM: true},
		{Key: "AS64496", Site: "bom", RTTms: 1, Samples: 1, MeasuredAt: now, RUM: true}, // not a network: ignored
	}, now)
	m := s.Map()
	c := &Client{Addr: netip.MustParseAddr("192.0.2.9"), Country: "DE", Lat: 50, Lon: 8, HasLocation: true}
	sites := []Site{{Name: "fra"}, {Name: "bom", Lat: 19, Lon: 72, HasLocation: true}}
	got := m.Lookup(nil, c, sites, now)
	if r := got[0]; math.Abs(r.Ms-(0.7*40+0.3*80)) > 1e-9 || r.Key != "DE" || r.RUMKey != "rum:192.0.2.0/24" || r.RUMms != 40 {
		t.Errorf("fra: %+v, want 52 ms blended from DE and rum:192.0.2.0/24", r)
	}
	if r := got[1]; r.Ms != 150 || r.Source != SourceMeasured || r.Key != "rum:192.0.2.0/24" {
		t.Errorf("bom: %+v, want the users' 150 ms over the estimate", r)
	}
	if m.RUMValues() != 2 || m.Len() != 3 || m.NumPrefixes() != 1 || len(m.Prefixes()) != 1 {
		t.Errorf("values %d (rum %d), prefixes %d %v", m.Len(), m.RUMValues(), m.NumPrefixes(), m.Prefixes())
	}
	// A probe for the same prefix is kept apart from the users' value.
	s.Update([]Measurement{{Key: "192.0.2.0/24", Site: "fra", RTTms: 60, Samples: 1, MeasuredAt: now.Add(time.Second)}}, now.Add(time.Second))
	if r := s.Map().Lookup(nil, c, sites, now)[0]; math.Abs(r.Ms-(0.7*40+0.3*60)) > 1e-9 || r.Key != "192.0.2.0/24" {
		t.Errorf("fra after a probe of the /24: %+v, want 46 ms", r)
	}
	// An evicted block's values are forgotten; the probes' stay.
	s.Update([]Measurement{{Key: "192.0.2.0/24", RUM: true, Forget: true}}, now.Add(2*time.Second))
	if m := s.Map(); m.RUMValues() != 0 || m.Len() != 2 || m.Lookup(nil, c, sites, now)[0].RUMKey != "" {
		t.Errorf("after forgetting the /24: %d values (%d rum)", m.Len(), m.RUMValues())
	}
	// Weight 0 ignores users.
	z := NewStore(Options{})
	z.Update([]Measurement{{Key: "192.0.2.0/24", Site: "fra", RTTms: 40, Samples: 9, MeasuredAt: now, RUM: true}}, now)
	if r := z.Map().Lookup(nil, c, sites[:1], now)[0]; r.Source != SourceNone {
		t.Errorf("weight 0: %+v, want no value", r)
	}
}
