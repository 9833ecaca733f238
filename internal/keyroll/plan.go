package keyroll

import (
	"fmt"
	"sort"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// Role is what a key signs.
type Role string

// The roles of a key.
const (
	// RoleKSK signs the apex's DNSKEY, CDS and CDNSKEY RRsets; the
	// parent's DS points at it (SEP flag).
	RoleKSK Role = "ksk"
	// RoleZSK signs every other RRset.
	RoleZSK Role = "zsk"
	// RoleCSK signs everything (a SEP key with no ZSK beside it).
	RoleCSK Role = "csk"
)

// Source says where a key came from.
type Source string

// The sources of a key.
const (
	// SourceConfig is a key of the zone's dnssec.keys (File is its base
	// path).
	SourceConfig Source = "config"
	// SourceGenerated is a key steer made for a rollover.
	SourceGenerated Source = "generated"
)

// Version is the plan format Save writes and Load reads.
const Version = 1

// Key is one key of a plan with its timeline (RFC 7583 §3.1): each time
// is zero when not scheduled. The key is in the zone's DNSKEY RRset from
// Publish until Remove and signs from Active until Retire; it is never
// active without being published.
type Key struct {
	Tag       uint16 `json:"tag"`
	Algorithm uint8  `json:"algorithm"`
	Role      Role   `json:"role"`
	Source    Source `json:"source"`
	// File is a configured key's base path (without .key or .private);
	// "" for a generated key.
	File string `json:"file,omitempty"`
	// DNSKEY is the public key as one DNSKEY record in presentation form
	// (the record line of BIND's .key file).
	DNSKEY string `json:"dnskey"`
	// Private is the key's .private file ("Private-key-format: v1.3");
	// it is cleared once the key is removed, so a plan keeps no private
	// material of a key nothing can use any more.
	Private string `json:"private,omitempty"`

	Created time.Time `json:"created"`
	Publish time.Time `json:"publish,omitzero"`
	Active  time.Time `json:"active,omitzero"`
	Retire  time.Time `json:"retire,omitzero"`
	Remove  time.Time `json:"remove,omitzero"`
	// Withdraw is when a KSK being rolled out left the apex's CDS and
	// CDNSKEY (the parent should drop its DS from then; ksk.go); it
	// signs until Retire still.
	Withdraw time.Time `json:"withdraw,omitzero"`

	// key is the parsed pair; nil once removed. A plan's keys are never
	// changed after Load, New, Sync or Next returns them, so the parsed
	// key is shared by the copies.
	key *dnssec.Key
}

// Published reports whether the key is in the DNSKEY RRset at now.
func (k *Key) Published(now time.Time) bool {
	return !k.Publish.IsZero() && !now.Before(k.Publish) && (k.Remove.IsZero() || now.Before(k.Remove))
}

// Signing reports whether the key signs at now.
func (k *Key) Signing(now time.Time) bool {
	return !k.Active.IsZero() && !now.Before(k.Active) && (k.Retire.IsZero() || now.Before(k.Retire))
}

// Removed reports whether the key has left the DNSKEY RRset for good at
// now.
func (k *Key) Removed(now time.Time) bool { return !k.Remove.IsZero() && !now.Before(k.Remove) }

// The states State reports, RFC 7583 §3.1's names.
const (
	StateGenerated = "generated" // made, not yet published
	StatePublished = "published" // in the DNSKEY RRset, not yet signing
	StateActive    = "active"    // signing
	StateRetired   = "retired"   // no longer signing, still published
	StateRemoved   = "removed"   // gone from the DNSKEY RRset
)

// State is the key's state at now: one of the State constants.
func (k *Key) State(now time.Time) string {
	switch {
	case k.Removed(now):
		return StateRemoved
	case k.Signing(now):
		return StateActive
	case !k.Retire.IsZero() && !now.Before(k.Retire):
		return StateRetired
	case k.Published(now):
		return StatePublished
	}
	return StateGenerated
}

// Key returns the parsed key pair; nil once the key is removed.
func (k *Key) Key() *dnssec.Key { return k.key }

// Name names the key in messages: "zsk 12345", with its file when
// configured.
func (k *Key) Name() string {
	if k.File != "" {
		return fmt.Sprintf("%s %d (%s)", k.Role, k.Tag, k.File)
	}
	return fmt.Sprintf("%s %d", k.Role, k.Tag)
}

// events returns the key's scheduled events.
func (k *Key) events() [4]Event {
	return [4]Event{
		{Tag: k.Tag, Role: k.Role, Kind: EventPublish, At: k.Publish},
		{Tag: k.Tag, Role: k.Role, Kind: EventActivate, At: k.Active},
		{Tag: k.Tag, Role: k.Role, Kind: EventRetire, At: k.Retire},
		{Tag: k.Tag, Role: k.Role, Kind: EventRemove, At: k.Remove},
	}
}

// same reports whether k is the DNSSEC key d (tag, algorithm, flags and
// public key).
func (k *Key) same(d *dns.DNSKEY) bool {
	return k.Tag == d.KeyTag() && k.Algorithm == d.Algorithm && k.DNSKEY == dnskeyText(d)
}

// Plan is a zone's keys and their timelines.
type Plan struct {
	Version int `json:"version"`
	// Zone is the zone's origin, canonical (lower case, final dot).
	Zone string `json:"zone"`
	// Keys are in the order they were added: configured keys first, each
	// successor after its predecessor.
	Keys []*Key `json:"keys"`
}

// EventKind is what happens to a key at an Event.
type EventKind string

// The kinds of event.
const (
	EventGenerate EventKind = "generate" // Next made a key (At: when)
	EventPublish  EventKind = "publish"
	EventActivate EventKind = "activate"
	EventRetire   EventKind = "retire"
	EventRemove   EventKind = "remove"
)

// Event is one scheduled change of a key.
type Event struct {
	Tag  uint16
	Role Role
	Kind EventKind
	At   time.Time
}

func (e Event) String() string {
	return fmt.Sprintf("%s %d %s at %s", e.Role, e.Tag, e.Kind, e.At.UTC().Format(time.RFC3339))
}

// Generator makes a key for zone of algorithm alg, a SEP key when sep;
// dnssec.GenerateKey is one, and Next's default.
type Generator func(zone string, alg uint8, sep bool) (*dnssec.Key, error)

// New returns the plan of zone with its configured keys, every one
// published and active from now (as steer signs without a plan): one CSK,
// or KSKs and ZSKs.
func New(zone string, configured []*dnssec.Key, now time.Time) (*Plan, error) {
	p := &Plan{Version: Version, Zone: dns.CanonicalName(zone)}
	if len(configured) == 0 {
		return nil, fmt.Errorf("zone %s: no keys", p.Zone)
	}
	for _, k := range configured {
		if k.DNSKEY.Hdr.Name != p.Zone {
			return nil, fmt.Errorf("%s: key for %s, not for zone %s", k.File, k.DNSKEY.Hdr.Name, p.Zone)
		}
		p.Keys = append(p.Keys, fromKey(k, roleOf(k, configured), SourceConfig, now))
	}
	return p, nil
}

// roleOf is the role of configured key k beside the others: a SEP key is
// a KSK when a key without the flag is configured, else a CSK.
func roleOf(k *dnssec.Key, all []*dnssec.Key) Role {
	if !k.SEP() {
		return RoleZSK
	}
	for _, o := range all {
		if !o.SEP() {
			return RoleKSK
		}
	}
	return RoleCSK
}

// fromKey returns the plan key of k, published and active from now.
func fromKey(k *dnssec.Key, r Role, src Source, now time.Time) *Key {
	_, priv := k.Files(now)
	pk := &Key{
		Tag: k.Tag, Algorithm: k.DNSKEY.Algorithm, Role: r, Source: src,
		DNSKEY: dnskeyText(k.DNSKEY), Private: string(priv),
		Created: now, Publish: now, Active: now, key: k,
	}
	if src == SourceConfig {
		pk.File = k.File
	}
	return pk
}

// dnskeyText is d in presentation form without TTL, as a .key file's
// record line.
func dnskeyText(d *dns.DNSKEY) string {
	return fmt.Sprintf("%s IN DNSKEY %d %d %d %s", d.Hdr.Name, d.Flags, d.Protocol, d.Algorithm, d.PublicKey)
}

// clone returns a copy of p whose keys can be changed without changing
// p's.
func (p *Plan) clone() *Plan {
	q := &Plan{Version: p.Version, Zone: p.Zone, Keys: make([]*Key, len(p.Keys))}
	for i, k := range p.Keys {
		c := *k
		q.Keys[i] = &c
	}
	return q
}

// State is what a plan says at one instant.
type State struct {
	// Sign are the keys that sign: the active KSKs (or CSK) and ZSKs.
	Sign []*dnssec.Key
	// Publish are the keys only published: a ZSK's successor before it
	// is active, a retired ZSK until it is removed.
	Publish []*dnssec.Key
	// Next is the time of the first event after now; zero when none is
	// scheduled (Next schedules the next rollover).
	Next time.Time
}

// At returns what the plan says at now: the keys that sign, those only
// published, and when that changes next. It fails, and the zone must go
// on with the keys it signs with, when the plan has no signing key for
// the DNSKEY RRset or for the data at now, or signs with a key it does
// not publish (a corrupt or hand-edited plan).
func (p *Plan) At(now time.Time) (State, error) {
	var st State
	var sep, data bool
	for _, k := range p.Keys {
		for _, e := range k.events() {
			if !e.At.IsZero() && e.At.After(now) && (st.Next.IsZero() || e.At.Before(st.Next)) {
				st.Next = e.At
			}
		}
		switch {
		case k.Signing(now):
			if !k.Published(now) {
				return State{}, fmt.Errorf("zone %s: key plan: %s is active but not published at %s", p.Zone, k.Name(), stamp(now))
			}
			if k.key == nil {
				return State{}, fmt.Errorf("zone %s: key plan: %s is active but its private key is gone", p.Zone, k.Name())
			}
			key := k.key
			if !k.Withdraw.IsZero() && !now.Before(k.Withdraw) {
				w := *key // the parsed key is shared by the plan's copies
				w.Withdrawn = true
				key = &w
			}
			st.Sign = append(st.Sign, key)
			sep = sep || k.Role != RoleZSK
			data = data || k.Role != RoleKSK
		case k.Published(now):
			if k.key == nil {
				return State{}, fmt.Errorf("zone %s: key plan: %s is published but was not read", p.Zone, k.Name())
			}
			st.Publish = append(st.Publish, k.key)
		}
	}
	switch {
	case !sep:
		return State{}, fmt.Errorf("zone %s: key plan has no active KSK or CSK at %s", p.Zone, stamp(now))
	case !data:
		return State{}, fmt.Errorf("zone %s: key plan has no active ZSK or CSK at %s", p.Zone, stamp(now))
	}
	return st, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Events returns the plan's events in (after, upto], in time order (for
// a log of what happened since the last look).
func (p *Plan) Events(after, upto time.Time) []Event {
	var out []Event
	for kind := range 4 {
		for _, k := range p.Keys {
			if e := k.events()[kind]; !e.At.IsZero() && e.At.After(after) && !e.At.After(upto) {
				out = append(out, e)
			}
		}
	}
	// At one instant a successor's activation comes before its
	// predecessor's retirement: the order of events().
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// Sync returns the plan brought in line with the zone's configured keys
// at now: a configured key the plan does not know is added, published
// and active from now (as steer signs without a plan); a configured key
// the plan has not retired and the configuration no longer lists is
// removed now (the operator took it out). A configured key the plan
// retired or removed stays so: the configuration may go on listing the
// ZSK a rollover replaced. Sync fails, and p stays, when the result
// would have no key to sign with.
func (p *Plan) Sync(configured []*dnssec.Key, now time.Time) (*Plan, error) {
	q := p.clone()
	changed := false
	for _, c := range configured {
		found := false
		for _, k := range q.Keys {
			if k.same(c.DNSKEY) {
				found = true
				if k.Source == SourceConfig && k.File != c.File {
					k.File, changed = c.File, true
				}
				break
			}
		}
		if !found {
			if c.DNSKEY.Hdr.Name != q.Zone {
				return p, fmt.Errorf("%s: key for %s, not for zone %s", c.File, c.DNSKEY.Hdr.Name, q.Zone)
			}
			q.Keys = append(q.Keys, fromKey(c, roleOf(c, configured), SourceConfig, now))
			changed = true
		}
	}
	for _, k := range q.Keys {
		if k.Source != SourceConfig || k.Removed(now) || (!k.Retire.IsZero() && !k.Retire.After(now)) {
			continue
		}
		listed := false
		for _, c := range configured {
			listed = listed || k.same(c.DNSKEY)
		}
		if !listed && !k.Retire.IsZero() {
			// A configured key a rollover is replacing: its
			// successor is scheduled; let the rollover finish.
			continue
		}
		if !listed {
			k.Retire, k.Remove, k.Private, k.key = now, now, "", nil
			if k.Active.After(now) {
				k.Active = now
			}
			changed = true
		}
	}
	if !changed {
		return p, nil
	}
	if _, err := q.At(now); err != nil {
		return p, err
	}
	return q, nil
}
