package fleetnode

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/fleet"
)

// Pools' loads (capacity feedback) are fleet-wide in a fleet: PUT
// /v1/load on any node writes them to the store (P/load/RECORD/POOL, no
// lease: the load's own time says how old it is, and every node ignores
// it once it is older than load.stale_after), and every node follows
// them into its feedback loop, so one feed reaches all nodes.

// Load is one pool's load as the store holds it.
type Load struct {
	Record  string    `json:"record"`
	Pool    string    `json:"pool"`
	Current float64   `json:"current"`
	At      time.Time `json:"at"`
}

func loadPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/load/" }

func loadKey(prefix, record, pool string) string {
	return loadPrefix(prefix) + url.PathEscape(record) + "/" + url.PathEscape(pool)
}

// PutLoads writes loads to the store in one transaction; it fails when
// the store does not take them within directWrite (the caller has
// applied them on this node already).
func (m *Member) PutLoads(loads []Load) error {
	kvs := make([]fleet.KV, 0, len(loads))
	for _, l := range loads {
		v, err := json.Marshal(l)
		if err != nil {
			return err
		}
		kvs = append(kvs, fleet.KV{Key: loadKey(m.prefix, l.Record, l.Pool), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), directWrite)
	defer cancel()
	_, _, err := m.store.Txn(ctx, nil, kvs, nil)
	return err
}

// FollowLoads calls apply with every load in the store, at once and at
// each change, until ctx ends (or Close). Values that do not read are
// skipped with a warning.
func (m *Member) FollowLoads(ctx context.Context, apply func([]Load)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.followView(ctx, loadPrefix(m.prefix), func(view map[string][]byte, _ int64) {
			out := make([]Load, 0, len(view))
			for key, v := range view {
				var l Load
				if err := json.Unmarshal(v, &l); err != nil || l.Record == "" || l.Pool == "" {
					m.log.Warn("fleet: a load in the store cannot be read", "key", key)
					continue
				}
				out = append(out, l)
			}
			apply(out)
		})
	}()
}
