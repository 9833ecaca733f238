package api

import (
	"context"
	"time"
)

// This file holds the wire types of the dashboard's read endpoints
// (internal/ui draws them; tests and scripts may read them too):
//
//	GET /v1/overview?offset=&limit=&q=&state=  Overview (paged records)
//	GET /v1/records/{name}                      RecordDetail
//	GET /v1/fleet                               FleetView (404 off a fleet)
//	GET /v1/events                              server-sent events: Event
//
// They are served when the Backend also implements DashboardBackend.

// DashboardBackend is what the dashboard's endpoints read. The node
// implements it beside Backend.
type DashboardBackend interface {
	// Overview describes the records matching q, one page of them.
	Overview(q OverviewQuery) (Overview, error)
	// Record describes one steered record (ErrNotFound when unknown).
	Record(name string) (RecordDetail, error)
	// Fleet describes the fleet as this node sees it; ErrNotFound when
	// the node is not in a fleet.
	Fleet() (FleetView, error)
	// Subscribe returns a channel that receives a value whenever what
	// the overview shows changes (health, overrides, a reload); cancel
	// stops it. The channel is never closed before cancel and drops
	// values a slow reader has not taken (it only says "changed").
	Subscribe(ctx context.Context) (ch <-chan Event, cancel func())
}

// OverviewQuery selects a page of the overview's records.
type OverviewQuery struct {
	Offset, Limit int    // Limit 0: DefaultOverviewLimit; at most MaxOverviewLimit
	Filter        string // substring of the record name (case-insensitive)
	State         string // "", or only records with a pool in this state ("down", "drain", ...)
}

const (
	DefaultOverviewLimit = 100
	MaxOverviewLimit     = 1000
)

// Overview is the body of GET /v1/overview.
type Overview struct {
	Generated time.Time   `json:"generated"`
	Node      *NodeStatus `json:"node,omitempty"`
	// Fleet is set when the shares are the fleet's sum; Nodes counts
	// the nodes whose counts are in it.
	Fleet      bool `json:"fleet"`
	FleetNodes int  `json:"fleet_nodes,omitempty"`
	// Windows says how much history each share covers (a node up for
	// two minutes has "2m" of the 5-minute window).
	Covered5m string `json:"covered_5m"`
	Covered1h string `json:"covered_1h"`
	// Total is how many records match the query; Records is the page.
	Total   int              `json:"total"`
	Offset  int              `json:"offset"`
	Records []OverviewRecord `json:"records"`
	// Map are the points on the world map: the pools of the page's
	// records (one point per distinct location) and the fleet's nodes.
	Map []MapPoint `json:"map"`
	// Counts of pools in each state over all records (not just the page).
	States map[string]int `json:"states"`
}

// OverviewRecord is one steered record in the overview.
type OverviewRecord struct {
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	TTL       uint32         `json:"ttl"`
	Policy    string         `json:"policy,omitempty"` // the named policy it uses; "" for its own rules
	Answers5m uint64         `json:"answers_5m"`
	Answers1h uint64         `json:"answers_1h"`
	Pools     []OverviewPool `json:"pools"`
}

// OverviewPool is one pool of a record in the overview.
type OverviewPool struct {
	Name string `json:"name"`
	// State is up, down, drain or disabled; Reason says why (the check's
	// message, "override", "min_up 2 of 3 up"), Since when it became so.
	State    string     `json:"state"`
	Reason   string     `json:"reason,omitempty"`
	Since    time.Time  `json:"since,omitempty"`
	Override bool       `json:"override,omitempty"`
	Expires  *time.Time `json:"override_expires,omitempty"`
	// Capacity is the capacity feedback state of a pool that declares a
	// capacity ("shed: load 130 % of target (...)").
	Capacity string `json:"capacity,omitempty"`
	// Answers and shares (0..1 of the record's answers) over the windows.
	Answers5m uint64  `json:"answers_5m"`
	Answers1h uint64  `json:"answers_1h"`
	Share5m   float64 `json:"share_5m"`
	Share1h   float64 `json:"share_1h"`
	// DrainSafe is set for a drained pool: true once the TTL has passed
	// since the last answer naming it. LastAnswered is that answer.
	DrainSafe    *bool     `json:"drain_safe,omitempty"`
	LastAnswered time.Time `json:"last_answered"`
	// NoTraffic says why a pool with no answers in the last 5 minutes has
	// none ("down: ...", "drained", "disabled", "excluded by policy: ...",
	// "failover standby: primary up", "no queries for the record", ...);
	// "" when it has answers.
	NoTraffic string `json:"no_traffic,omitempty"`
	// Location is where the map draws the pool (config location, else
	// its first address's geo lookup); nil when unknown.
	Location *LatLon `json:"location,omitempty"`
	// TargetsUp and Targets count its addresses.
	TargetsUp int `json:"targets_up"`
	Targets   int `json:"targets"`
}

// LatLon is a point in degrees.
type LatLon struct {
	Lat float64 `json:"lat"`
	Lon float64 `json:"lon"`
}

// MapPoint is one point of the world map.
type MapPoint struct {
	Kind  string `json:"kind"` // "pool" or "node"
	Label string `json:"label"`
	LatLon
	// State is the worst state of the pools at the point (up, drain,
	// down, disabled), or a node's ("up", "error", "stale").
	State string `json:"state"`
	// Pools are "record/pool" for a pool point.
	Pools []string `json:"pools,omitempty"`
}

// RecordDetail is the body of GET /v1/records/{name}.
type RecordDetail struct {
	OverviewRecord
	// Config is the record's (and its named policy's) text as the
	// configuration says it, with the file and first line.
	Config     string `json:"config"`
	ConfigFile string `json:"config_file,omitempty"`
	ConfigLine int    `json:"config_line,omitempty"`
	// Rules are its rules in order, each with its share of decisions.
	Rules []RuleDetail `json:"rules"`
	// Scopes are the ECS scope lengths returned, per family.
	Scopes []ScopeHistogram `json:"scopes"`
	// Widened lists where health widened the scopes ("49.36.0.0/16 from
	// /24: pool mumbai down").
	Widened []string `json:"widened,omitempty"`
	// Latency are excerpts of the latency map for latency rules: per
	// client network sampled, the sites ranked.
	Latency []LatencyExcerpt `json:"latency,omitempty"`
}

// RuleDetail is one rule (or a tree's node, indented by Depth).
type RuleDetail struct {
	Index       int     `json:"index"` // 1-based, as metrics and explain number them
	Depth       int     `json:"depth,omitempty"`
	Match       string  `json:"match"`  // "country IN", "default", ...
	Action      string  `json:"action"` // "weighted mumbai:3 frankfurt:1", ...
	Decisions5m uint64  `json:"decisions_5m"`
	Decisions1h uint64  `json:"decisions_1h"`
	Share5m     float64 `json:"share_5m"`
	Share1h     float64 `json:"share_1h"`
}

// ScopeHistogram counts answers by ECS scope prefix length.
type ScopeHistogram struct {
	Family string `json:"family"` // "ipv4", "ipv6"
	// Counts[i] is answers over the last hour with scope Lengths[i].
	Lengths []int    `json:"lengths"`
	Counts  []uint64 `json:"counts"`
	// Widened counts those whose scope health widened.
	Widened uint64 `json:"widened"`
	// WidenedCounts, when set, splits Widened by length: WidenedCounts[i]
	// of Counts[i] had their scope widened (the record page hatches that
	// part of each bar; without it, one "widened" bar per family).
	WidenedCounts []uint64 `json:"widened_counts,omitempty"`
}

// LatencyExcerpt is one client network's ranking of sites.
type LatencyExcerpt struct {
	Network string   `json:"network"`
	Sites   []string `json:"sites"` // "frankfurt 38ms", best first
	Age     string   `json:"age,omitempty"`
}

// FleetView is the body of GET /v1/fleet.
type FleetView struct {
	Node    string          `json:"node"` // the answering node
	Prefix  string          `json:"prefix"`
	Nodes   []FleetNodeView `json:"nodes"`
	Targets []FleetTarget   `json:"targets"`
	// Errors are the store's or this node's problems with it.
	Errors []string `json:"errors,omitempty"`
	// Warnings are what this node finds wrong with the store or the
	// fleet (a database past half its quota, regions short of observers).
	Warnings []string `json:"warnings,omitempty"`
}

// FleetNodeView is one node of the fleet.
type FleetNodeView struct {
	Name   string `json:"name"`
	Region string `json:"region,omitempty"`
	Digest string `json:"digest,omitempty"`
	Serial int64  `json:"serial"`
	Canary bool   `json:"canary,omitempty"`
	// ViewAge is how old the node's last complete view of the store
	// is; HealthMode how it decides health ("quorum", "local", "frozen
	// since ..."); Error why it does not serve the newest bundle.
	ViewAt     time.Time `json:"view_at"`
	ViewAge    string    `json:"view_age"`
	HealthMode string    `json:"health_mode"`
	Error      string    `json:"error,omitempty"`
	Warning    string    `json:"warning,omitempty"`
	Pending    int       `json:"pending,omitempty"`
	Version    string    `json:"version,omitempty"`
	Location   *LatLon   `json:"location,omitempty"`
	// Self marks the answering node; HeardAt is when its status last
	// reached the answering node (its clock; unset for itself).
	Self    bool       `json:"self,omitempty"`
	HeardAt *time.Time `json:"heard_at,omitempty"`
}

// FleetTarget is one health-check target with each observer's verdict
// and the fleet's.
type FleetTarget struct {
	Target  string `json:"target"`  // address/check
	Verdict string `json:"verdict"` // up, down, unknown (none yet)
	// Reason says how the quorum reached it, Since when it last changed.
	Reason    string            `json:"reason,omitempty"`
	Since     *time.Time        `json:"since,omitempty"`
	Observers []ObserverVerdict `json:"observers"`
}

// ObserverVerdict is one node's observation of a target.
type ObserverVerdict struct {
	Node   string    `json:"node"`
	Region string    `json:"region,omitempty"`
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	Stale  bool      `json:"stale,omitempty"`
	// Own marks the answering node's own check result.
	Own bool `json:"own,omitempty"`
}

// Event is one server-sent event of GET /v1/events.
type Event struct {
	Kind string    `json:"kind"` // "health", "override", "reload", "fleet"
	At   time.Time `json:"at"`
}
