package api

import (
	"context"
	"io"
	"net/netip"
	"time"

	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/version"
)

// Backend is what the admin API reads and acts on: the running server.
// The node implements it (internal/node's backend adapter); tests use a
// fake.
type Backend interface {
	// Ready reports whether config, zones and geo databases are loaded and
	// the listeners are up, and if not, why.
	Ready() (bool, string)
	// Status describes everything being served now.
	Status() Status
	// Explain answers one query through the server's own handler with a
	// trace (see package explain).
	Explain(req explain.Request) (*explain.Report, error)
	// SetTargetState sets an external state for a health-check target
	// address: "up", "down", "drain" or "auto", with an optional expiry
	// (zero: none). It fails for an unknown state, and with ErrNotFound for
	// an address that is no pool's target.
	SetTargetState(addr netip.Addr, state string, expires time.Time) error
	// SetPoolState does the same for one pool of one steered record. It
	// fails for an unknown record, pool or state (ErrNotFound for the
	// first two).
	//
	// Both may return a *PendingError: the state is applied on this node
	// but not yet where it is shared (a fleet's store); the API answers
	// 202 with {"applied": "this node", "pending": "fleet", "reason": ...}.
	SetPoolState(record, pool, state string, expires time.Time) error
	// Reload re-reads the configuration as SIGHUP does and waits for the
	// result; the error lists every problem when the new configuration is
	// rejected (the result then says so too).
	Reload(ctx context.Context) (ReloadResult, error)
	// PushLatency applies one batch of latency measurements read from body
	// in format (LatencyJSON or LatencyCSV) as one update, all or nothing;
	// a batch it rejects is an ErrBadInput naming the bad entry.
	PushLatency(format string, body io.Reader) (LatencyResult, error)
	// LatencyStatus describes the latency map.
	LatencyStatus() LatencyStatus
}

// PendingError says a state was applied on this node but is not yet
// where it is shared: Where ("fleet") takes it later, Reason says why not
// now.
type PendingError struct {
	Where, Reason string
}

func (e *PendingError) Error() string {
	return "applied on this node; pending: " + e.Where + ": " + e.Reason
}

// ZoneReloader is a Backend that reloads named zones only (POST
// /v1/reload?zone=NAME, repeated or comma-separated): their files are
// read again when they changed, nothing else is (the configuration
// neither). An unknown zone is ErrNotFound, one that cannot be reloaded
// from a file ErrBadInput.
type ZoneReloader interface {
	ReloadZones(ctx context.Context, zones []string) (ReloadResult, error)
}

// ReloadResult is the outcome of one reload, as logged and as the body of
// POST /v1/reload.
type ReloadResult struct {
	// Seq numbers the reloads of this process, from 1.
	Seq uint64 `json:"seq"`
	// Trigger is what asked for it ("SIGHUP", "api", "geo file ...").
	// Requests that arrive during a reload share the next one, so Trigger
	// may list several.
	Trigger string `json:"trigger"`
	// Applied is false when the new configuration was rejected whole.
	Applied bool `json:"applied"`
	// Problems are the reasons for a rejection, each file:line: message.
	Problems []string `json:"problems,omitempty"`
	// Warnings are non-fatal problems: warnings of the configuration,
	// zones that failed alone and serve their last good copy or SERVFAIL.
	Warnings []string `json:"warnings,omitempty"`
	// Changed says what the reload changed, one line per setting or zone.
	Changed []string `json:"changed,omitempty"`
	// RestartNeeded names each changed setting the reload could not apply.
	RestartNeeded []string `json:"restart_needed,omitempty"`
	// Took is how long the reload took.
	Took string `json:"took"`
}

// Status is the body of GET /v1/status.
type Status struct {
	Version string `json:"version"`
	// Build is the running build (version, commit, date, Go version);
	// the API fills it in when the Backend leaves it nil.
	Build   *version.Info  `json:"build,omitempty"`
	Loaded  time.Time      `json:"loaded"`
	Records []RecordStatus `json:"records"`
	Zones   []ZoneStatus   `json:"zones"`
	Geo     []GeoStatus    `json:"geo"`
	Anycast *AnycastStatus `json:"anycast,omitempty"`
	// Node is the answering node's identity, when the configuration
	// gives one (node:, or a fleet's node and region).
	Node *NodeStatus `json:"node,omitempty"`
	// Degraded lists what serves but not as configured (zones on their
	// last good copy or answering SERVFAIL); empty when all is well.
	Degraded []string `json:"degraded,omitempty"`
	// Pending lists operator overrides applied on this node that the
	// fleet's store has not taken yet ("fleet: target 192.0.2.1 drain"),
	// written to it when it answers again, and likewise pools' loads
	// ("fleet: load shop.example.com./a 140 at 2026-01-02T03:04:05Z").
	Pending []string `json:"pending,omitempty"`
	// LastReload is the outcome of the latest reload, if any.
	LastReload *ReloadResult `json:"last_reload,omitempty"`
}

// RecordStatus is one steered record.
type RecordStatus struct {
	Name  string       `json:"name"`
	Type  string       `json:"type"`
	TTL   uint32       `json:"ttl"`
	Pools []PoolStatus `json:"pools"`
}

// PoolStatus is one pool of a record.
type PoolStatus struct {
	Name    string         `json:"name"`
	State   string         `json:"state"` // up, down, disabled, drain
	Reason  string         `json:"reason,omitempty"`
	Expires *time.Time     `json:"override_expires,omitempty"`
	Targets []TargetStatus `json:"targets"`
	// DrainSafe is set for a drained pool once the record's TTL has
	// passed since the last answer naming it.
	DrainSafe *bool `json:"drain_safe,omitempty"`
	// LastAnswered is when an answer last named the pool (to within a
	// quarter second), or when the configuration was loaded.
	LastAnswered time.Time `json:"last_answered"`
	// Capacity is the capacity feedback state of a pool that declares a
	// capacity ("shed: load 130 % of target (...)").
	Capacity string `json:"capacity,omitempty"`
}

// TargetStatus is one address of a pool and its health.
type TargetStatus struct {
	Address     string    `json:"address"`
	Check       string    `json:"check,omitempty"`
	State       string    `json:"state"` // unknown, up, down, and overrides
	Reason      string    `json:"reason,omitempty"`
	Since       time.Time `json:"since,omitempty"`
	LastLatency string    `json:"last_latency,omitempty"`
}

// NodeStatus is the node's identity and how it steers unknown clients.
type NodeStatus struct {
	Name    string   `json:"name"`
	Region  string   `json:"region,omitempty"`
	Country string   `json:"country,omitempty"`
	Lat     *float64 `json:"lat,omitempty"`
	Lon     *float64 `json:"lon,omitempty"`
	// UnknownClient is ecs.unknown_client: resolver or node.
	UnknownClient    string   `json:"unknown_client"`
	AnycastResolvers []string `json:"anycast_resolvers,omitempty"`
}

// ZoneStatus is one served zone.
type ZoneStatus struct {
	Origin  string `json:"origin"`
	Serial  uint32 `json:"serial"`
	Records int    `json:"records"`
	File    string `json:"file"`
	// Serving is "file", "transfer", "last good copy ..." or "SERVFAIL: reason".
	Serving string `json:"serving,omitempty"`
	// Transfer, for a secondary zone or one with secondaries.
	Transfer *ZoneTransfer `json:"transfer,omitempty"`
	// DNSSEC, for a signed zone.
	DNSSEC *ZoneDNSSEC `json:"dnssec,omitempty"`
}

// GeoStatus is one loaded geo database.
type GeoStatus struct {
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	Layout string    `json:"layout"`
	Built  time.Time `json:"built"`
}
