package snapshot

import (
	"runtime"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/presign"
	"github.com/steer-dns/steer/internal/zone"
)

// Signing is the node's online signing state, which a reload keeps: the
// budget every signature made on a query's behalf draws from (denial,
// a steered set nobody foresaw) and the cache those signatures are kept
// in (the signing section of the configuration).
type Signing struct {
	Budget *dnssec.Budget
	Cache  *dnssec.Cache
	// perCore and entries are the configuration they were made from.
	perCore, entries int
}

// signingFor returns prev's signing state when the configuration still
// asks for it, else a new one; nil when no zone is signed online (the
// cache's slots, 512 KiB by default, are made only for a zone that signs).
func signingFor(cfg *config.Config, prev *Snapshot) *Signing {
	if !signsOnline(cfg) {
		return nil
	}
	perCore, entries := cfg.Signing.BudgetPerCore, cfg.Signing.CacheEntries
	if perCore <= 0 {
		perCore = dnssec.DefaultBudgetPerCore
	}
	if entries <= 0 {
		entries = dnssec.DefaultCacheSize
	}
	if prev != nil && prev.Signing != nil && prev.Signing.perCore == perCore && prev.Signing.entries == entries {
		return prev.Signing
	}
	return &Signing{Budget: dnssec.NewBudget(perCore * runtime.GOMAXPROCS(0)), Cache: dnssec.NewCache(entries),
		perCore: perCore, entries: entries}
}

// signsOnline reports whether a zone of cfg is signed by this node (the
// zones build gives a signer).
func signsOnline(cfg *config.Config) bool {
	for i := range cfg.Zones {
		if signsZone(&cfg.Zones[i]) {
			return true
		}
	}
	return false
}

// signsZone: the build gives zc a signer (keys of its own, or online
// signing); a presigned zone without keys is served as it comes.
func signsZone(zc *config.Zone) bool {
	return zc.DNSSEC != nil && (len(zc.DNSSEC.Keys) > 0 || !zc.DNSSEC.Presigned)
}

// presignSteered signs the steered answer sets of the records in signed zones
// (presign.Build, at now: the previous snapshot's fresh signatures are
// kept); the live state's health changes sign what they make reachable.
func presignSteered(sg *Signing, set *zone.Set, table *policy.Table, live *policy.Live, prev *Snapshot, now time.Time) (*presign.Table, error) {
	var prevTable *presign.Table
	if prev != nil {
		prevTable = prev.Presigned
	}
	o := presign.Options{
		Policies: table,
		Signer: func(name string) *dnssec.Signer {
			if z := set.Find(name); z != nil {
				return z.SteeredSigner() // a multi-signer zone's is its ZSK's
			}
			return nil
		},
		Previous: prevTable,
		Live:     live,
		Workers:  policy.Workers(prev != nil),
		Now:      func() time.Time { return now },
	}
	if sg != nil {
		o.Budget, o.Cache = sg.Budget, sg.Cache
	}
	t, err := presign.Build(o)
	if err != nil {
		return nil, err
	}
	if live != nil {
		if t != nil {
			t.Watch(live)
		} else {
			live.OnHealth(nil)
		}
	}
	return t, nil
}
