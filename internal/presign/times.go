package presign

import (
	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// SignatureTimes calls yield once per zone whose steered sets t holds
// signatures of (the signer's zone), with the earliest point (Unix
// seconds) at which one of them is due for renewal and the earliest
// expiration among them: the node's renewal timer, status and metrics
// count the steered answers' signatures with the zone's own.
func (t *Table) SignatureTimes(yield func(zone string, refresh, expire uint32)) {
	if t == nil {
		return
	}
	type times struct{ refresh, expire uint32 }
	byZone := map[string]*times{}
	add := func(e *dnssec.Entry) {
		if e == nil || len(e.Sigs) == 0 {
			return
		}
		sig, ok := e.Sigs[0].(*dns.RRSIG)
		if !ok {
			return
		}
		tz := byZone[sig.SignerName]
		if tz == nil {
			tz = &times{refresh: e.Refresh, expire: sig.Expiration}
			byZone[sig.SignerName] = tz
		}
		tz.refresh = min(tz.refresh, e.Refresh)
		for _, rr := range e.Sigs {
			if s, ok := rr.(*dns.RRSIG); ok {
				tz.expire = min(tz.expire, s.Expiration)
			}
		}
	}
	for _, e := range t.sets {
		add(e)
	}
	if m := t.late.Load(); m != nil {
		for _, e := range *m {
			add(e)
		}
	}
	for z, tz := range byZone {
		yield(z, tz.refresh, tz.expire)
	}
}
