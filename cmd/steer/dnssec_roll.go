package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnssec"
)

// This file has the commands that act on a zone's key plan, which the
// running node keeps (in its state directory, or in a fleet's store,
// driven by one node): steer dnssec status and roll-ksk go through the
// node's admin API, found as steer explain finds it (--api, or the
// configuration's api.listen and token), so that in a fleet the change
// reaches the plan every node follows. ds-check asks the parent itself,
// and takes the keys from the running node, or from the configuration's
// dnssec.keys when no node answers.

// dnssecFlagsOf says which flags each dnssec subcommand takes.
var dnssecFlagsOf = map[string][]string{
	"keygen":   {"algorithm", "role", "ksk-zsk", "dir"},
	"ds":       {"config"},
	"ds-check": {"config", "api", "token-file", "parent-ns", "tcp", "timeout", "json"},
	"status":   {"config", "api", "token-file", "json"},
	"roll-ksk": {"config", "api", "token-file", "algorithm", "complete", "parent-ns", "tcp", "timeout", "json"},
}

// apiDo sends method path (below /v1/) with the JSON body in (nil: none)
// to the node at target and decodes a 200's JSON into out; another
// status is an error with the node's message.
func apiDo(target, token, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequest(method, target+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(hr)
	if err != nil {
		return &noNodeError{fmt.Errorf("no running node answered at %s: %v", target, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.Unmarshal(b, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return fmt.Errorf("the node at %s answered %s: %s", target, resp.Status, e.Error)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("the node at %s: %v", target, err)
	}
	return nil
}

// noNodeError is apiDo's error when nothing answered at all.
type noNodeError struct{ error }

func (e *noNodeError) Unwrap() error { return e.error }

// nodeTarget finds the running node's API for the dnssec commands, or
// fails saying how to name it.
func nodeTarget(sub string, o dnssecOpts) (target, token, path string, err error) {
	path, _ = configPath(*o.config)
	target, token, err = explainTarget(*o.apiURL, *o.tokenFile, path)
	if err != nil {
		return "", "", path, err
	}
	if target == "" {
		what := path
		if what == "" {
			what = "no configuration (no --config and no " + defaultConfig() + ")"
		}
		return "", "", path, fmt.Errorf("%s acts on the running node's key plan: give --api URL, or --config of a node with api.listen (%s has none)", sub, what)
	}
	return target, token, path, nil
}

func zonePath(zone, suffix string) string {
	return "/v1/dnssec/" + url.PathEscape(dns.CanonicalName(zone)) + suffix
}

// dnssecStatus prints the zone's key plan as the running node has it.
func dnssecStatus(zone string, o dnssecOpts, stdout, stderr io.Writer) int {
	target, token, _, err := nodeTarget("steer dnssec status", o)
	if err != nil {
		fmt.Fprintln(stderr, "steer dnssec status:", err)
		return 1
	}
	var p api.KeyPlan
	if err := apiDo(target, token, "GET", zonePath(zone, ""), nil, &p); err != nil {
		fmt.Fprintln(stderr, "steer dnssec status:", err)
		return 1
	}
	if *o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(p)
		return 0
	}
	printPlan(stdout, p, time.Now())
	return 0
}

// printPlan prints a key plan as a table, then the DS the parent should
// have and the next event.
func printPlan(w io.Writer, p api.KeyPlan, now time.Time) {
	src := p.Source
	if p.Driver != "" {
		src += ", driven by node " + p.Driver
	}
	fmt.Fprintf(w, "zone %s (plan kept in the %s)\n", p.Zone, src)
	if p.Held != "" {
		fmt.Fprintf(w, "ROLLOVER HELD: %s\n", p.Held)
	}
	fmt.Fprintf(w, "%-6s %-4s %-16s %-10s %-20s %-20s %-20s %s\n", "TAG", "ROLE", "ALGORITHM", "STATE", "PUBLISH", "ACTIVE", "RETIRE", "REMOVE")
	ts := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format("2006-01-02T15:04:05Z")
	}
	for _, k := range p.Keys {
		fmt.Fprintf(w, "%-6d %-4s %-16s %-10s %-20s %-20s %-20s %s\n", k.Tag, strings.ToUpper(k.Role), k.Algorithm, k.State, ts(k.Publish), ts(k.Active), ts(k.Retire), ts(k.Remove))
	}
	if p.Rolling != nil {
		old := make([]string, len(p.Rolling.Old))
		for i, t := range p.Rolling.Old {
			old[i] = fmt.Sprint(t)
		}
		fmt.Fprintf(w, "KSK rollover under way: %d replaces %s; once the parent's DS names %d, run steer dnssec roll-ksk %s --complete --parent-ns ADDR\n",
			p.Rolling.New, strings.Join(old, ", "), p.Rolling.New, p.Zone)
	}
	fmt.Fprintln(w, "the parent should publish (CDS at the apex):")
	for _, ds := range p.ParentDS {
		fmt.Fprintln(w, "  "+ds)
	}
	if p.Next != nil {
		fmt.Fprintf(w, "next event: %s at %s (in %s)\n", p.Next.What, p.Next.Time.UTC().Format(time.RFC3339), p.Next.Time.Sub(now).Round(time.Second))
	} else {
		fmt.Fprintln(w, "next event: none scheduled")
	}
}

// rollKSK starts a KSK rollover on the running node, or completes it.
func rollKSK(zone string, o dnssecOpts, set map[string]bool, stdout, stderr io.Writer) int {
	if set["algorithm"] && *o.complete {
		fmt.Fprintln(stderr, "steer dnssec roll-ksk: --algorithm goes with starting a rollover, not with --complete")
		return 2
	}
	if !*o.complete && (set["parent-ns"] || set["tcp"] || set["timeout"]) {
		fmt.Fprintln(stderr, "steer dnssec roll-ksk: --parent-ns, --tcp and --timeout go with --complete")
		return 2
	}
	if *o.complete && *o.parentNS == "" {
		fmt.Fprintln(stderr, "steer dnssec roll-ksk --complete: --parent-ns ADDR[:PORT] is required: the old KSK is removed only once the parent's DS names the new one")
		return 2
	}
	target, token, _, err := nodeTarget("steer dnssec roll-ksk", o)
	if err != nil {
		fmt.Fprintln(stderr, "steer dnssec roll-ksk:", err)
		return 1
	}
	var res api.RollResult
	if *o.complete {
		err = apiDo(target, token, "POST", zonePath(zone, "/roll-ksk/complete"), api.CompleteKSKRequest{ParentNS: *o.parentNS, TCP: *o.tcp, Timeout: o.timeout.String()}, &res)
	} else {
		req := api.RollKSKRequest{}
		if set["algorithm"] {
			req.Algorithm = *o.algorithm
		}
		err = apiDo(target, token, "POST", zonePath(zone, "/roll-ksk"), req, &res)
	}
	if err != nil {
		fmt.Fprintln(stderr, "steer dnssec roll-ksk:", err)
		return 1
	}
	if *o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
		return 0
	}
	for _, d := range res.Done {
		fmt.Fprintln(stdout, d)
	}
	if !*o.complete && res.Plan.Rolling != nil {
		fmt.Fprintf(stdout, "give the parent the new DS (the apex's CDS and CDNSKEY name it too):\n")
		for _, k := range res.Plan.Keys {
			if k.Tag == res.Plan.Rolling.New && k.DS != "" {
				fmt.Fprintln(stdout, "  "+k.DS)
			}
		}
	}
	fmt.Fprintln(stdout)
	printPlan(stdout, res.Plan, time.Now())
	return 0
}

// dsCheckReport is steer dnssec ds-check --json.
type dsCheckReport struct {
	Zone   string `json:"zone"`
	Parent string `json:"parent"`
	Net    string `json:"net"`
	TTL    uint32 `json:"ttl"`
	// Keys says where the keys came from: the running node's plan, or
	// the configuration (no node answered).
	Keys    string        `json:"keys"`
	Matched []dsCheckLine `json:"matched"`
	// Retiring are DS records naming a published KSK the parent should
	// no longer point at; Stray those naming no published key; Missing
	// the KSKs the parent should point at and does not.
	Retiring []dsCheckLine `json:"retiring"`
	Stray    []dsCheckLine `json:"stray"`
	Missing  []dsCheckLine `json:"missing"`
	OK       bool          `json:"ok"`
}

type dsCheckLine struct {
	DS  string `json:"ds,omitempty"`
	Key uint16 `json:"key,omitempty"`
	Why string `json:"why,omitempty"`
}

// zoneKeysForCheck returns the zone's published DNSKEYs and the SEP keys
// the parent should point at: from the running node's plan when one
// answers (or --api is given), else from the configuration's keys (every
// SEP key of dnssec.keys), and says which.
func zoneKeysForCheck(zone string, o dnssecOpts) (published, want []*dns.DNSKEY, source string, err error) {
	path, _ := configPath(*o.config)
	target, token, err := explainTarget(*o.apiURL, *o.tokenFile, path)
	if err != nil {
		return nil, nil, "", err
	}
	why := "no --api and no api.listen in the configuration"
	if target != "" {
		var p api.KeyPlan
		err := apiDo(target, token, "GET", zonePath(zone, ""), nil, &p)
		var nn *noNodeError
		switch {
		case err == nil:
			return planKeys(p)
		case *o.apiURL != "" || !errors.As(err, &nn):
			return nil, nil, "", err
		}
		why = err.Error()
	}
	if path == "" {
		return nil, nil, "", fmt.Errorf("no running node answered (%s) and there is no configuration to read the keys from", why)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, "", err
	}
	i := slices.IndexFunc(cfg.Zones, func(z config.Zone) bool { return dns.CanonicalName(z.Origin) == dns.CanonicalName(zone) })
	switch {
	case i < 0:
		return nil, nil, "", fmt.Errorf("%s serves no zone %s", path, dns.CanonicalName(zone))
	case !cfg.Zones[i].Signed():
		return nil, nil, "", fmt.Errorf("%s:%d: zone %s has no dnssec section", path, cfg.Zones[i].Line, dns.CanonicalName(zone))
	}
	for _, b := range cfg.KeyBases(i) {
		dk, err := dnssec.ReadDNSKEY(cfg.FS, b)
		if err != nil {
			return nil, nil, "", err
		}
		published = append(published, dk)
		if dk.Flags&dns.SEP != 0 {
			want = append(want, dk)
		}
	}
	return published, want, "the keys " + path + " lists (OFFLINE: " + why + ")", nil
}

// planKeys are the DNSKEYs a plan publishes now and the SEP keys whose
// DS the parent should have.
func planKeys(p api.KeyPlan) (published, want []*dns.DNSKEY, source string, err error) {
	should := map[string]bool{}
	for _, ds := range p.ParentDS {
		should[ds] = true
	}
	for _, k := range p.Keys {
		if k.State == "removed" || k.State == "generated" {
			continue
		}
		rr, err := dns.NewRR(k.DNSKEY)
		dk, ok := rr.(*dns.DNSKEY)
		if err != nil || !ok {
			return nil, nil, "", fmt.Errorf("key %d of the node's plan: bad DNSKEY %q", k.Tag, k.DNSKEY)
		}
		published = append(published, dk)
		if k.DS != "" && should[k.DS] {
			want = append(want, dk)
		}
	}
	src := "the running node's key plan (" + p.Source + ")"
	return published, want, src, nil
}

// dsCheck compares the parent's DS RRset for zone with the zone's keys.
func dsCheck(zone string, o dnssecOpts, stdout, stderr io.Writer) int {
	if *o.parentNS == "" {
		fmt.Fprintln(stderr, "steer dnssec ds-check: --parent-ns ADDR[:PORT] is required: a server of the parent zone")
		return 2
	}
	server, err := dnssec.ParentServer(*o.parentNS)
	if err != nil {
		fmt.Fprintf(stderr, "steer dnssec ds-check: --parent-ns: %v\n", err)
		return 2
	}
	published, want, source, err := zoneKeysForCheck(zone, o)
	if err != nil {
		fmt.Fprintln(stderr, "steer dnssec ds-check:", err)
		return 1
	}
	ans, err := dnssec.ParentDS(context.Background(), zone, server, *o.tcp, *o.timeout)
	if err != nil {
		fmt.Fprintln(stderr, "steer dnssec ds-check:", err)
		return 1
	}
	c := dnssec.CheckDS(ans.DS, published, want)
	rep := dsCheckReport{Zone: dns.CanonicalName(zone), Parent: ans.Server, Net: ans.Net, TTL: ans.TTL, Keys: source, OK: c.OK()}
	for _, m := range c.Matched {
		rep.Matched = append(rep.Matched, dsCheckLine{DS: dsText(m.DS), Key: m.Key.KeyTag()})
	}
	for _, m := range c.Retiring {
		rep.Retiring = append(rep.Retiring, dsCheckLine{DS: dsText(m.DS), Key: m.Key.KeyTag(), Why: "names a KSK being rolled out: the parent should remove it"})
	}
	for _, m := range c.Stray {
		rep.Stray = append(rep.Stray, dsCheckLine{DS: dsText(m.DS), Why: m.Why})
	}
	for _, k := range c.Missing {
		rep.Missing = append(rep.Missing, dsCheckLine{Key: k.KeyTag(), DS: dnssec.DSLine(dnssec.DSOf(k)), Why: "the parent has no DS for it"})
	}
	if *o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		fmt.Fprintf(stdout, "parent %s (%s): %d DS for %s, TTL %d\nkeys: %s\n", ans.Server, strings.ToUpper(ans.Net), len(ans.DS), rep.Zone, ans.TTL, source)
		for _, l := range rep.Matched {
			fmt.Fprintf(stdout, "ok       %s -> KSK %d\n", l.DS, l.Key)
		}
		for _, l := range rep.Retiring {
			fmt.Fprintf(stdout, "retiring %s -> KSK %d: %s\n", l.DS, l.Key, l.Why)
		}
		for _, l := range rep.Stray {
			fmt.Fprintf(stdout, "STRAY    %s: matches no published KSK (%s)\n", l.DS, l.Why)
		}
		for _, l := range rep.Missing {
			fmt.Fprintf(stdout, "MISSING  KSK %d: the parent has no DS for it; give it %s\n", l.Key, l.DS)
		}
	}
	if !rep.OK {
		var why []string
		for _, l := range rep.Stray {
			why = append(why, "DS "+l.DS+" matches no published KSK")
		}
		for _, l := range rep.Missing {
			why = append(why, fmt.Sprintf("KSK %d has no DS at the parent", l.Key))
		}
		for _, l := range rep.Retiring {
			why = append(why, fmt.Sprintf("DS %s names KSK %d, which is being rolled out", l.DS, l.Key))
		}
		fmt.Fprintf(stderr, "steer dnssec ds-check: the parent's DS set for %s is not what it should be: %s\n", rep.Zone, strings.Join(why, "; "))
		return 1
	}
	return 0
}

// dsText is a DS in the form steer dnssec ds prints, with its digest
// type named when it is not SHA-256.
func dsText(ds *dns.DS) string {
	s := dnssec.DSLine(ds)
	if ds.DigestType != dns.SHA256 {
		s += " (" + dnssec.DigestName(ds.DigestType) + ")"
	}
	return s
}

// rollFlags adds the flags of ds-check, status and roll-ksk.
func rollFlags(fs *flag.FlagSet, o *dnssecOpts) {
	o.apiURL = fs.String("api", "", "status, roll-ksk, ds-check: admin API of the running node, e.g. http://127.0.0.1:8053 (default: the config's api.listen)")
	o.tokenFile = fs.String("token-file", "", "status, roll-ksk, ds-check: bearer token for --api (default: the config's api token)")
	o.parentNS = fs.String("parent-ns", "", "ds-check, roll-ksk --complete: a server of the parent zone, ADDR[:PORT] (port 53 by default)")
	o.tcp = fs.Bool("tcp", false, "ds-check, roll-ksk --complete: ask the parent over TCP (default: UDP, then TCP when truncated)")
	o.timeout = fs.Duration("timeout", 5*time.Second, "ds-check, roll-ksk --complete: how long the parent has to answer")
	o.json = fs.Bool("json", false, "status, ds-check, roll-ksk: print JSON")
	o.complete = fs.Bool("complete", false, "roll-ksk: complete the rollover under way: retire the old KSK once the parent's DS names the new one")
}
