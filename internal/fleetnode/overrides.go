package fleetnode

import (
	"context"
	"encoding/json"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
)

// Operator overrides are fleet-wide in a fleet: the admin API of any node
// writes them to the store (P/overrides/target/ADDR and
// P/overrides/pool/RECORD/POOL, no lease: they outlive the node that set
// them), and every node follows them into its health manager. An override
// set to auto is deleted.

type storedOverride struct {
	State   string    `json:"state"`
	Expires time.Time `json:"expires,omitzero"`
}

func overridesPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/overrides/" }

func targetOverrideKey(prefix string, a netip.Addr) string {
	return overridesPrefix(prefix) + "target/" + a.String()
}

func poolOverrideKey(prefix, record, pool string) string {
	return overridesPrefix(prefix) + "pool/" + url.PathEscape(record) + "/" + url.PathEscape(pool)
}

// SetTargetOverride writes (or, for auto, deletes) an override of target
// address a for the fleet; every node (this one too) applies it as it
// follows the store.
func (m *Member) SetTargetOverride(a netip.Addr, o health.Override, expires time.Time) error {
	return m.setOverride(targetOverrideKey(m.prefix, a), o, expires)
}

// SetPoolOverride writes (or, for auto, deletes) an override of record's
// pool for the fleet.
func (m *Member) SetPoolOverride(record, pool string, o health.Override, expires time.Time) error {
	return m.setOverride(poolOverrideKey(m.prefix, record, pool), o, expires)
}

// setOverride writes (or, for auto, deletes) an override for the fleet.
func (m *Member) setOverride(key string, o health.Override, expires time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if o == health.OverrideNone {
		_, _, err := m.store.Txn(ctx, nil, nil, []string{key})
		return err
	}
	data, _ := json.Marshal(storedOverride{State: o.String(), Expires: expires})
	_, _, err := m.store.Txn(ctx, nil, []fleet.KV{{Key: key, Value: data}}, nil)
	return err
}

// followOverrides keeps the health manager's overrides equal to the
// fleet's until ctx ends.
func (m *Member) followOverrides(ctx context.Context, hm *health.Manager) {
	p := overridesPrefix(m.prefix)
	applied := map[string]bool{}
	apply := func(view map[string][]byte) {
		seen := map[string]bool{}
		for key, v := range view {
			var so storedOverride
			if json.Unmarshal(v, &so) != nil {
				m.log.Warn("fleet: an override in the store cannot be read", "key", key)
				continue
			}
			o, err := health.ParseOverride(so.State)
			if err != nil {
				m.log.Warn("fleet: an override in the store cannot be read", "key", key, "err", err)
				continue
			}
			if m.applyOverride(hm, strings.TrimPrefix(key, p), o, so.Expires) {
				seen[key] = true
			}
		}
		for key := range applied {
			if !seen[key] {
				m.applyOverride(hm, strings.TrimPrefix(key, p), health.OverrideNone, time.Time{})
			}
		}
		applied = seen
	}
	m.followView(ctx, p, apply)
}

// applyOverride sets one override named by its key below P/overrides/.
func (m *Member) applyOverride(hm *health.Manager, rest string, o health.Override, expires time.Time) bool {
	kind, name, _ := strings.Cut(rest, "/")
	switch kind {
	case "target":
		a, err := netip.ParseAddr(name)
		if err != nil {
			return false
		}
		if cur, exp, ok := hm.TargetOverride(a); !ok || cur != o || !exp.Equal(expires) {
			hm.SetOverride(a, o, expires)
		}
		return true
	case "pool":
		r, p, ok := strings.Cut(name, "/")
		if !ok {
			return false
		}
		record, err1 := url.PathUnescape(r)
		pool, err2 := url.PathUnescape(p)
		if err1 != nil || err2 != nil {
			return false
		}
		if cur, exp, ok := hm.PoolOverride(record, pool); !ok || cur != o || !exp.Equal(expires) {
			hm.SetPoolOverride(record, pool, o, expires)
		}
		return true
	}
	m.log.Warn("fleet: an unknown key among the overrides", "key", rest)
	return false
}
