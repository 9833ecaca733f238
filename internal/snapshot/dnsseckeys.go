package snapshot

import (
	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
)

// loadDNSSECKeys reads the keys of every signed zone (config.ZoneKeys:
// the files, their modes, the pair, the owner, the algorithm, a SEP key),
// once per build, by canonical origin; each problem is an error at the
// line of the key's entry, so steer check, a start and a reload refuse a
// zone whose keys cannot sign it rather than serve it unsigned.
func loadDNSSECKeys(cfg *config.Config, errs *diag.Problems) map[string][]*dnssec.Key {
	var out map[string][]*dnssec.Key
	for i := range cfg.Zones {
		if !cfg.Zones[i].Signed() {
			continue
		}
		keys, probs := cfg.ZoneKeys(i)
		if len(probs) > 0 {
			*errs = append(*errs, probs...)
			continue
		}
		if out == nil {
			out = map[string][]*dnssec.Key{}
		}
		out[dns.CanonicalName(cfg.Zones[i].Origin)] = keys
	}
	return out
}
