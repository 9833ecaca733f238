package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/keyroll"
)

// The admin API's view of a zone's key plan (GET /v1/dnssec/{zone}) and
// the operator's KSK rollover (POST .../roll-ksk, .../roll-ksk/complete),
// as pure functions of a plan: the node (keyplans.go) finds the plan,
// where it is kept, and writes the changed one back.

// planView is p at now as the API shows it: public keys only.
func planView(p *keyroll.Plan, now time.Time) api.KeyPlan {
	v := api.KeyPlan{Zone: p.Zone, Keys: []api.PlanKey{}, ParentDS: []string{}}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	for _, k := range p.Keys {
		pk := api.PlanKey{Tag: k.Tag, Role: string(k.Role), Algorithm: dns.AlgorithmToString[k.Algorithm], State: k.State(now),
			Publish: at(k.Publish), Active: at(k.Active), Retire: at(k.Retire), Remove: at(k.Remove), DNSKEY: k.DNSKEY}
		if d, err := k.DNSKEYRecord(); err == nil && k.Role != keyroll.RoleZSK {
			pk.DS = dnssec.DSLine(dnssec.DSOf(d))
		}
		v.Keys = append(v.Keys, pk)
	}
	for _, k := range p.ParentKeys(now) {
		if d, err := k.DNSKEYRecord(); err == nil {
			v.ParentDS = append(v.ParentDS, dnssec.DSLine(dnssec.DSOf(d)))
		}
	}
	if evs := p.Events(now, now.Add(100*365*24*time.Hour)); len(evs) > 0 {
		e := evs[0]
		v.Next = &api.KeyEvent{Time: e.At.UTC(), What: fmt.Sprintf("%s %s %d", e.Kind, strings.ToUpper(string(e.Role)), e.Tag)}
	}
	if r := p.RollingKSK(now); r != nil {
		v.Rolling = &api.KSKRoll{New: r.New.Tag}
		for _, o := range r.Old {
			v.Rolling.Old = append(v.Rolling.Old, o.Tag)
		}
	}
	return v
}

// startKSKRoll starts a KSK rollover of p at now (StartKSKRoll) and says
// what it did; a refusal is api.ErrBadInput.
func startKSKRoll(p *keyroll.Plan, now time.Time, req api.RollKSKRequest) (*keyroll.Plan, []string, error) {
	var alg uint8
	if req.Algorithm != "" {
		a, ok := dnssec.AlgorithmNames[strings.ToLower(req.Algorithm)]
		if !ok {
			return nil, nil, fmt.Errorf("algorithm %q is not ecdsap256sha256, ed25519 or rsasha256: %w", req.Algorithm, api.ErrBadInput)
		}
		alg = a
	}
	q, nk, err := p.StartKSKRoll(now, alg, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%v: %w", err, api.ErrBadInput)
	}
	r := q.RollingKSK(now)
	old := make([]string, len(r.Old))
	for i, o := range r.Old {
		old[i] = fmt.Sprint(o.Tag)
	}
	done := []string{
		fmt.Sprintf("zone %s: published KSK %d (%s), signing the DNSKEY RRset beside KSK %s (double-signature rollover, RFC 6781 section 4.1.2)",
			q.Zone, nk.Tag, dns.AlgorithmToString[nk.Algorithm], strings.Join(old, ", ")),
		fmt.Sprintf("the apex's CDS and CDNSKEY name KSK %s and %d; once the parent publishes the DS of %d, run steer dnssec roll-ksk %s --complete --parent-ns ADDR",
			strings.Join(old, ", "), nk.Tag, nk.Tag, q.Zone),
	}
	return q, done, nil
}

// completeKSKRoll completes p's KSK rollover at now once the parent
// server req names answers with a DS naming the new KSK: the old KSK
// leaves the CDS at once and signs until the parent's DS TTL and the
// propagation delay have passed. It refuses (api.ErrBadInput), naming
// what the parent has, when no DS names the new KSK, and when no
// rollover is under way.
func completeKSKRoll(ctx context.Context, p *keyroll.Plan, now time.Time, req api.CompleteKSKRequest, propagation time.Duration) (*keyroll.Plan, []string, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("zone %s: %s: %w", p.Zone, fmt.Sprintf(format, args...), api.ErrBadInput)
	}
	r := p.RollingKSK(now)
	if r == nil {
		return nil, nil, bad("no KSK rollover is under way (steer dnssec roll-ksk %s starts one)", p.Zone)
	}
	server, err := dnssec.ParentServer(req.ParentNS)
	if err != nil {
		return nil, nil, bad("parent_ns: %v", err)
	}
	timeout := 5 * time.Second
	if req.Timeout != "" {
		if timeout, err = time.ParseDuration(req.Timeout); err != nil || timeout <= 0 || timeout > time.Minute {
			return nil, nil, bad("timeout %q is not a duration between 0 and 1m", req.Timeout)
		}
	}
	ans, err := dnssec.ParentDS(ctx, p.Zone, server, req.TCP, timeout)
	if err != nil {
		return nil, nil, bad("the old KSK stays: %v", err)
	}
	var published, want []*dns.DNSKEY
	for _, k := range p.Keys {
		if !k.Published(now) {
			continue
		}
		if d, err := k.DNSKEYRecord(); err == nil {
			published = append(published, d)
		}
	}
	newKey, err := r.New.DNSKEYRecord()
	if err != nil {
		return nil, nil, bad("%v", err)
	}
	want = append(want, newKey)
	c := dnssec.CheckDS(ans.DS, published, want)
	if !c.Names(newKey) {
		has := "no DS at all (an unsigned delegation)"
		if len(ans.DS) > 0 {
			var l []string
			for _, m := range append(append(c.Matched, c.Retiring...), c.Stray...) {
				what := "matches no published KSK"
				if m.Key != nil {
					what = fmt.Sprintf("names KSK %d", m.Key.KeyTag())
				}
				l = append(l, fmt.Sprintf("%s (%s)", dnssec.DSLine(m.DS), what))
			}
			has = strings.Join(l, "; ")
		}
		return nil, nil, bad("the parent server %s has no DS naming the new KSK %d, so the old KSK stays; the parent has %s; it needs %s",
			ans.Server, r.New.Tag, has, dnssec.DSLine(dnssec.DSOf(newKey)))
	}
	linger := time.Duration(ans.TTL)*time.Second + propagation
	q, done, err := p.CompleteKSKRoll(now, linger)
	if err != nil {
		return nil, nil, fmt.Errorf("%v: %w", err, api.ErrBadInput)
	}
	out := []string{fmt.Sprintf("zone %s: the parent server %s names the new KSK %d (%d DS, TTL %d)", q.Zone, ans.Server, r.New.Tag, len(ans.DS), ans.TTL)}
	for _, o := range done.Old {
		out = append(out, fmt.Sprintf("KSK %d left the CDS and CDNSKEY; it signs the DNSKEY RRset until %s (the parent's DS TTL %ds + propagation %s) and is removed then",
			o.Tag, o.Remove.UTC().Format(time.RFC3339), ans.TTL, propagation))
	}
	for _, m := range c.Retiring {
		out = append(out, fmt.Sprintf("the parent still has %s of KSK %d: it should drop it (the CDS names KSK %d alone now)", dnssec.DSLine(m.DS), m.Key.KeyTag(), r.New.Tag))
	}
	for _, m := range c.Stray {
		out = append(out, fmt.Sprintf("the parent has %s, which matches no published KSK (%s): it should drop it", dnssec.DSLine(m.DS), m.Why))
	}
	return q, out, nil
}

// servedSigned finds the served zone the API names, signed by steer, and
// the keys it signs with; an api.ErrNotFound names what was asked.
func (n *Node) servedSigned(zone string) (string, []*dnssec.Key, error) {
	origin := dns.CanonicalName(zone)
	if _, ok := dns.IsDomainName(zone); !ok || zone == "" {
		return "", nil, fmt.Errorf("%q is not a zone name: %w", zone, api.ErrNotFound)
	}
	snap := n.srv.Handler().Snapshot()
	if snap == nil || snap.Zones == nil {
		return "", nil, fmt.Errorf("no zone %s is served: %w", origin, api.ErrNotFound)
	}
	for _, z := range snap.Zones.Zones() {
		if z.Origin != origin {
			continue
		}
		s := z.Signer()
		if s == nil || len(s.Keys()) == 0 || !s.Keys()[0].SEP() {
			return "", nil, fmt.Errorf("zone %s is served but not signed by steer (no dnssec keys with a KSK or CSK): %w", origin, api.ErrNotFound)
		}
		return origin, append(s.Keys(), s.Published()...), nil
	}
	return "", nil, fmt.Errorf("no zone %s is served (a typo?): %w", origin, api.ErrNotFound)
}

// KeyPlan is api.DNSSECBackend's: the zone's plan, or, for a zone that
// has none (no rollover ever), its keys as configured.
func (b *backend) KeyPlan(zone string) (api.KeyPlan, error) {
	origin, keys, err := b.n.servedSigned(zone)
	if err != nil {
		return api.KeyPlan{}, err
	}
	p := b.n.keys.plan(origin)
	if p == nil {
		if p, err = keyroll.New(origin, keys, b.n.loadedAt()); err != nil {
			return api.KeyPlan{}, err
		}
	}
	return b.n.planView(p), nil
}

// loadedAt is when the served snapshot was built.
func (n *Node) loadedAt() time.Time {
	if snap := n.srv.Handler().Snapshot(); snap != nil && !snap.Loaded.IsZero() {
		return snap.Loaded
	}
	return time.Now()
}

func (n *Node) planView(p *keyroll.Plan) api.KeyPlan {
	v := planView(p, time.Now())
	v.Source, v.Driver = n.keys.source()
	v.Held = n.keys.held(p.Zone)
	return v
}

// RollKSK is api.DNSSECBackend's.
func (b *backend) RollKSK(ctx context.Context, zone string, req api.RollKSKRequest) (api.RollResult, error) {
	origin, keys, err := b.n.servedSigned(zone)
	if err != nil {
		return api.RollResult{}, err
	}
	var done []string
	q, err := b.n.keys.change(origin, keys, func(cur *keyroll.Plan) (*keyroll.Plan, error) {
		q, d, err := startKSKRoll(cur, time.Now(), req)
		done = d
		return q, err
	})
	if err != nil {
		return api.RollResult{}, err
	}
	b.n.keysChanged(ctx, "KSK rollover of "+origin)
	return api.RollResult{Done: done, Plan: b.n.planView(q)}, nil
}

// CompleteKSK is api.DNSSECBackend's.
func (b *backend) CompleteKSK(ctx context.Context, zone string, req api.CompleteKSKRequest) (api.RollResult, error) {
	origin, keys, err := b.n.servedSigned(zone)
	if err != nil {
		return api.RollResult{}, err
	}
	prop := b.n.propagationDelay(origin)
	var done []string
	q, err := b.n.keys.change(origin, keys, func(cur *keyroll.Plan) (*keyroll.Plan, error) {
		q, d, err := completeKSKRoll(ctx, cur, time.Now(), req, prop)
		done = d
		return q, err
	})
	if err != nil {
		return api.RollResult{}, err
	}
	b.n.keysChanged(ctx, "KSK rollover of "+origin+" completed")
	return api.RollResult{Done: done, Plan: b.n.planView(q)}, nil
}

// keysChanged builds the served snapshot again with the zones' key plans
// and waits for it (within ctx), so that an API answer after a change
// describes what is served.
func (n *Node) keysChanged(ctx context.Context, why string) {
	select {
	case <-n.request(kindZones, why):
	case <-ctx.Done():
	}
}

// propagationDelay is Dprp of the zone's keys (its propagation_delay, or
// keyroll's default): how long a change takes to reach every server
// answering for it.
func (n *Node) propagationDelay(origin string) time.Duration {
	if snap := n.srv.Handler().Snapshot(); snap != nil && snap.Config != nil {
		for _, z := range snap.Config.Zones {
			if dns.CanonicalName(z.Origin) == origin && z.DNSSEC != nil && z.DNSSEC.PropagationDelay > 0 {
				return z.DNSSEC.PropagationDelay
			}
		}
	}
	return keyroll.DefaultPropagationDelay
}
