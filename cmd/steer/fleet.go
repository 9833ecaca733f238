package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/fleetnode"
	"github.com/steer-dns/steer/internal/node"
)

// fleetOpts are steer fleet's flags.
type fleetOpts struct {
	config, etcd, prefix, nodeFile *string
	timeout                        *time.Duration
	json                           *bool
	canary                         *string
	insecureKeys                   *bool
}

func fleetFlags(fs *flag.FlagSet) fleetOpts {
	return fleetOpts{
		config:       fs.String("config", "", "push: the configuration to publish, with every zone it names (default: "+DefaultConfig+")"),
		etcd:         fs.String("etcd", "", "etcd client URLs, comma-separated (default: from --fleet)"),
		prefix:       fs.String("prefix", "", "the fleet's key prefix (default: from --fleet, else /steer/v1)"),
		nodeFile:     fs.String("fleet", "", "a node configuration whose fleet section names the store (endpoints, prefix, TLS, credentials)"),
		timeout:      fs.Duration("timeout", 5*time.Second, "how long each request to etcd may take"),
		json:         fs.Bool("json", false, "status: print JSON"),
		canary:       fs.String("canary", "", "push: apply the configuration to these nodes only (comma-separated names), until steer fleet promote or rollback"),
		insecureKeys: fs.Bool("allow-insecure-keys", false, "push: send the zones' DNSSEC private keys to an etcd that is not both TLS and authenticated. Dangerous: anyone who can read that etcd, or the network to it, gets the keys and can sign anything for the zones"),
	}
}

// fleetCmd runs steer fleet push|status|promote|rollback.
func fleetCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || !slices.Contains(subWords["fleet"], args[0]) {
		fmt.Fprintln(stderr, "usage: steer fleet push|status|promote|rollback [--config FILE] [--canary NODE,...] [--allow-insecure-keys] [--etcd URL,...] [--prefix P] [--fleet NODE.yaml] [--json]")
		return 2
	}
	sub := args[0]
	fs := newFlagSet("fleet "+sub, stderr)
	o := fleetFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	fo := fleetOptions{Prefix: *o.prefix, NodeFile: *o.nodeFile, Timeout: *o.timeout, InsecureKeys: *o.insecureKeys}
	if fo.InsecureKeys && sub != "push" {
		fmt.Fprintf(stderr, "steer fleet %s: --allow-insecure-keys goes with push\n", sub)
		return 2
	}
	if *o.etcd != "" {
		fo.Endpoints = strings.Split(*o.etcd, ",")
	}
	if *o.canary != "" {
		if sub != "push" {
			fmt.Fprintf(stderr, "steer fleet %s: --canary goes with push\n", sub)
			return 2
		}
		for _, n := range strings.Split(*o.canary, ",") {
			if n = strings.TrimSpace(n); n != "" && !slices.Contains(fo.Canary, n) {
				fo.Canary = append(fo.Canary, n)
			}
		}
	}
	switch sub {
	case "push":
		path := *o.config
		if path == "" {
			path = defaultConfig()
		}
		res, err := fleetPush(path, fo)
		if err != nil {
			fmt.Fprintf(stderr, "steer fleet push: %v\n", err)
			return 1
		}
		for _, w := range res.Warnings {
			fmt.Fprintln(stderr, w)
		}
		fmt.Fprintf(stdout, "pushed %s: serial %d at revision %d, digest %s, %d files (%s)\n", path, res.Serial, res.Rev, fleet.ShortDigest(res.Digest), len(res.Files), res.Summary)
		if len(fo.Canary) > 0 {
			fmt.Fprintf(stdout, "canary on %s; the other nodes keep serial %d: steer fleet promote to apply it everywhere, steer fleet rollback to withdraw it\n",
				strings.Join(fo.Canary, ", "), res.Current)
		}
		return 0
	case "promote", "rollback":
		msg, warns, err := fleetRollout(sub, fo)
		for _, w := range warns {
			fmt.Fprintln(stderr, w)
		}
		if err != nil {
			fmt.Fprintf(stderr, "steer fleet %s: %v\n", sub, err)
			return 1
		}
		fmt.Fprintln(stdout, msg)
		return 0
	default:
		st, err := fleetStatus(fo)
		if err != nil {
			fmt.Fprintf(stderr, "steer fleet status: %v\n", err)
			return 1
		}
		if *o.json {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			out := map[string]any{"published": st.Published.Meta, "revision": st.Published.Rev, "nodes": st.Nodes}
			if st.Canary.Rev != 0 {
				out["canary"] = st.Canary.Meta
			}
			if st.Previous.Rev != 0 {
				out["previous"] = st.Previous.Meta
			}
			enc.Encode(out)
			return 0
		}
		fmt.Fprint(stdout, st.Text(time.Now()))
		return 0
	}
}

// fleetOptions says which store steer fleet talks to: endpoints and a
// prefix given directly, or the fleet section of a node's file (with its
// TLS and credentials), or both (the flags win).
type fleetOptions struct {
	Endpoints []string
	Prefix    string
	// NodeFile is a node configuration whose fleet section names the store.
	NodeFile string
	Timeout  time.Duration
	// Canary names the nodes a push is applied to first.
	Canary []string
	// InsecureKeys lets a push send DNSSEC private keys to a store that
	// is not both TLS and authenticated (with a warning).
	InsecureKeys bool
}

// openFleetStore opens the store o names.
func openFleetStore(o fleetOptions) (fleet.Store, string, error) {
	var ec fleet.EtcdConfig
	prefix := config.DefaultFleetPrefix
	if o.NodeFile != "" {
		local, err := config.Load(o.NodeFile)
		if err != nil {
			return nil, "", err
		}
		if local.Fleet == nil {
			return nil, "", fmt.Errorf("%s has no fleet section", o.NodeFile)
		}
		ec, prefix = fleetnode.EtcdConfig(local), local.Fleet.Etcd.Prefix
	}
	ec.RequestTimeout = o.Timeout
	if len(o.Endpoints) > 0 {
		ec.Endpoints = o.Endpoints
	}
	if o.Prefix != "" {
		prefix = "/" + strings.Trim(o.Prefix, "/")
	}
	if len(ec.Endpoints) == 0 {
		return nil, "", errors.New("no etcd endpoints: give --etcd URL,... or --fleet NODE.yaml")
	}
	if ec.RequestTimeout == 0 {
		ec.RequestTimeout = 5 * time.Second
	}
	s, err := fleet.OpenEtcd(ec)
	return s, prefix, err
}

// pushResult is what steer fleet push did.
type pushResult struct {
	Serial, Rev int64
	Digest      string
	// Current is the serial the other nodes keep (a canary push).
	Current  int64
	Files    []string
	Summary  string
	Warnings []string
}

// FleetPush checks the configuration at path as steer check does and, when
// it passes, publishes it in one transaction, on top of the bundle
// published now (a push that races another fails, and writes nothing),
// with the files that travel with it (node.PushBundle): every zone file
// and what it includes, the cookie secret (every node of the anycast set
// then mints and accepts the same cookies, and a push rotates it) and the
// TSIG key files. Node-local files (geo databases, latency and feed
// files, the query log, the API token) are not pushed: each node opens
// them on its own disk by their absolute paths, which push insists on.
func fleetPush(path string, o fleetOptions) (*pushResult, error) {
	summary, warns, err := node.Check(path)
	if err != nil {
		return nil, fmt.Errorf("the configuration does not pass steer check; nothing was pushed:\n%w", err)
	}
	b, pwarns, err := node.PushBundle(path)
	if err != nil {
		return nil, err
	}
	warns = append(warns, pwarns...)
	host, _ := os.Hostname()
	b.Meta.PushedBy, b.Meta.PushedAt = host, time.Now().UTC()
	s, prefix, err := openFleetStore(o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ctx := context.Background()
	kw, err := keysSafe(ctx, s, o, fleetnode.Secrets(b), "push")
	if err != nil {
		return nil, err
	}
	warns = append(warns, kw...)
	cur, err := fleet.ReadBundle(ctx, s, prefix)
	if err != nil {
		return nil, fmt.Errorf("reading the published configuration: %w", err)
	}
	var rev, serial int64
	if len(o.Canary) > 0 {
		if err := knownNodes(ctx, s, prefix, o.Canary); err != nil {
			return nil, err
		}
		rev, serial, err = fleet.PublishCanary(ctx, s, prefix, b, o.Canary, cur.Rev)
	} else {
		rev, serial, err = fleet.Publish(ctx, s, prefix, b, cur.Rev)
	}
	if err != nil {
		return nil, err
	}
	res := &pushResult{Serial: serial, Rev: rev, Summary: summary, Warnings: warns, Digest: fleet.Digest(b.Files), Current: cur.Meta.Serial}
	for name := range b.Files {
		res.Files = append(res.Files, name)
	}
	return res, nil
}

// knownNodes refuses canary names that are no live node of the fleet,
// listing those that are.
func knownNodes(ctx context.Context, s fleet.Store, prefix string, names []string) error {
	sts, err := fleet.ReadStatuses(ctx, s, prefix)
	if err != nil {
		return fmt.Errorf("reading the nodes' statuses: %w", err)
	}
	var known, unknown []string
	for _, st := range sts {
		known = append(known, st.Node)
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	list := "none is running"
	if len(known) > 0 {
		list = "running: " + strings.Join(known, ", ")
	}
	return fmt.Errorf("--canary: no node of the fleet is named %s (%s); nothing was pushed", strings.Join(unknown, ", "), list)
}

// fleetRollout runs steer fleet promote or rollback and says what it did.
// Neither writes a file's contents (the bundles' files are in the store
// already), so neither is refused for private keys; when the bundle it
// makes current holds some and the store is not TLS and authenticated, it
// warns as a push with --allow-insecure-keys does.
func fleetRollout(sub string, o fleetOptions) (string, []string, error) {
	s, prefix, err := openFleetStore(o)
	if err != nil {
		return "", nil, err
	}
	defer s.Close()
	ctx := context.Background()
	warn := func(b fleet.Bundle) []string {
		o.InsecureKeys = true
		w, _ := keysSafe(ctx, s, o, fleetnode.Secrets(b), sub)
		return w
	}
	if sub == "promote" {
		b, err := fleet.Promote(ctx, s, prefix)
		if err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("promoted serial %d (%s) at revision %d: every node applies it; the bundle it replaced is kept for steer fleet rollback",
			b.Meta.Serial, fleet.ShortDigest(b.Meta.Digest), b.Rev), warn(b), nil
	}
	now, undone, err := fleet.Rollback(ctx, s, prefix)
	if err != nil {
		return "", nil, err
	}
	if undone.Meta.Canary != nil {
		return fmt.Sprintf("withdrew the canary serial %d (%s) from %s: every node serves serial %d (%s)",
			undone.Meta.Serial, fleet.ShortDigest(undone.Meta.Digest), strings.Join(undone.Meta.Canary, ", "), now.Meta.Serial, fleet.ShortDigest(now.Meta.Digest)), nil, nil
	}
	return fmt.Sprintf("rolled back from serial %d (%s) to serial %d (%s) at revision %d; no previous bundle is kept now",
		undone.Meta.Serial, fleet.ShortDigest(undone.Meta.Digest), now.Meta.Serial, fleet.ShortDigest(now.Meta.Digest), now.Rev), warn(now), nil
}

// keysSafe decides whether the secrets of a bundle (fleetnode.Secrets)
// may go to the store s. DNSSEC private keys go only to a store that is
// both TLS (the members' certificates verified) and authenticated, as
// the store itself confirms (fleet.Protection), unless the operator
// accepts the danger with --allow-insecure-keys: then, and for the other
// secrets (TSIG keys, the cookie secret), an unprotected store is a
// warning. A bundle without secrets asks nothing of the store.
func keysSafe(ctx context.Context, s fleet.Store, o fleetOptions, secrets map[string]string, what string) ([]string, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	p := fleet.ProtectionOf(ctx, s)
	if p.OK() {
		return nil, nil
	}
	keys := fleetnode.HasPrivateKeys(secrets)
	var other []string
	for name, kind := range secrets {
		if kind != config.SecretDNSSEC {
			other = append(other, kind+" "+name)
		}
	}
	slices.Sort(other)
	reasons := "\n  - " + strings.Join(p.Missing, "\n  - ")
	const danger = "anyone who can read that etcd, or the network to it, has the keys and can sign anything for the zones"
	if len(keys) > 0 && !o.InsecureKeys {
		return nil, fmt.Errorf("the bundle holds DNSSEC private keys (%s), and etcd is not both TLS and authenticated:%s\n"+
			"Pushed there, %s. Name a store with both (--fleet NODE.yaml whose fleet.etcd section has https:// endpoints, tls, and a username and password or client certificate that etcd requires; "+
			"README: \"DNSSEC keys in a fleet\"), or push with --allow-insecure-keys to accept the danger. Nothing was pushed",
			strings.Join(keys, ", "), reasons, danger)
	}
	var warns []string
	switch {
	case len(keys) > 0 && what == "push":
		warns = append(warns, fmt.Sprintf("warning: --allow-insecure-keys: DNSSEC private keys (%s) pushed to an etcd that is not both TLS and authenticated:%s\n%s.",
			strings.Join(keys, ", "), reasons, danger))
	case len(keys) > 0:
		warns = append(warns, fmt.Sprintf("warning: the bundle now current holds DNSSEC private keys (%s) in an etcd that is not both TLS and authenticated:%s\n%s.",
			strings.Join(keys, ", "), reasons, danger))
	}
	if len(other) > 0 {
		warns = append(warns, fmt.Sprintf("warning: the bundle holds secrets (%s) in an etcd that is not both TLS and authenticated (%s): anyone who can read it has them",
			strings.Join(other, ", "), strings.Join(shortReasons(p.Missing), "; ")))
	}
	return warns, nil
}

// shortReasons are the reasons up to their first colon ("no TLS", "no
// authentication").
func shortReasons(missing []string) []string {
	out := make([]string, len(missing))
	for i, m := range missing {
		out[i], _, _ = strings.Cut(m, ":")
	}
	return out
}

// fleetState is what steer fleet status shows.
type fleetState struct {
	// Published is the current bundle; Canary and Previous the others
	// kept (Rev 0: none).
	Published, Canary, Previous fleet.Bundle
	Nodes                       []fleet.Status
}

// FleetStatus reads the published bundles' metas and every live node's
// status.
func fleetStatus(o fleetOptions) (*fleetState, error) {
	s, prefix, err := openFleetStore(o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ctx := context.Background()
	pub, err := fleet.ReadPublished(ctx, s, prefix)
	if err != nil {
		return nil, err
	}
	nodes, err := fleet.ReadStatuses(ctx, s, prefix)
	if err != nil {
		return nil, err
	}
	return &fleetState{Published: pub.Current, Canary: pub.Canary, Previous: pub.Previous, Nodes: nodes}, nil
}

// Text is the status as a table.
func (st *fleetState) Text(now time.Time) string {
	var b strings.Builder
	if st.Published.Rev == 0 {
		b.WriteString("published: nothing yet\n")
	} else {
		m := st.Published.Meta
		fmt.Fprintf(&b, "published: serial %d (%s, revision %d), %d files, pushed %s by %s\n",
			m.Serial, digestOf(st.Published), st.Published.Rev, len(m.Files), m.PushedAt.Format(time.RFC3339), m.PushedBy)
	}
	if c := st.Canary; c.Rev != 0 {
		fmt.Fprintf(&b, "canary:    serial %d (%s, revision %d) on %s: steer fleet promote or rollback\n",
			c.Meta.Serial, digestOf(c), c.Rev, strings.Join(c.Meta.Canary, ", "))
	}
	if p := st.Previous; p.Rev != 0 {
		fmt.Fprintf(&b, "previous:  serial %d (%s), kept for steer fleet rollback\n", p.Meta.Serial, digestOf(p))
	}
	fmt.Fprintf(&b, "%-16s %-8s %-12s %-14s %-10s %-10s %s\n", "NODE", "REGION", "SERIAL", "DIGEST", "VIEW AGE", "VERSION", "ERROR")
	for _, n := range st.Nodes {
		age := "-"
		if !n.ViewAt.IsZero() {
			age = now.Sub(n.ViewAt).Round(time.Second).String()
		}
		want := st.Published
		if st.Canary.Rev != 0 && slices.Contains(st.Canary.Meta.Canary, n.Node) {
			want = st.Canary
		}
		serial := fmt.Sprint(n.Serial)
		switch {
		case n.Canary:
			serial += " (canary)"
		case n.Serial != want.Meta.Serial:
			serial += " (old)"
		}
		msg := n.Error
		if msg != "" {
			msg = fmt.Sprintf("newest serial %d (%s) rejected: %s", n.ErrorSerial, dash(fleet.ShortDigest(n.ErrorDigest)), n.Error)
		}
		if n.Pending > 0 {
			msg = strings.TrimPrefix(msg+fmt.Sprintf("; pending: fleet (%d overrides set while the store was unreachable)", n.Pending), "; ")
		}
		if n.PendingLoads > 0 {
			msg = strings.TrimPrefix(msg+fmt.Sprintf("; pending: fleet (%d loads put while the store was unreachable)", n.PendingLoads), "; ")
		}
		if n.Warning != "" {
			msg = strings.TrimPrefix(msg+"; "+n.Warning, "; ")
		}
		fmt.Fprintf(&b, "%-16s %-8s %-12s %-14s %-10s %-10s %s\n", n.Node, dash(n.Region), serial, dash(fleet.ShortDigest(n.Digest)), age, dash(n.Version), msg)
	}
	if len(st.Nodes) == 0 {
		b.WriteString("(no node is running)\n")
	}
	return b.String()
}

// digestOf is b's short digest, from its meta or its files.
func digestOf(b fleet.Bundle) string {
	d := b.Meta.Digest
	if d == "" {
		d = b.Digest()
	}
	return fleet.ShortDigest(d)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
