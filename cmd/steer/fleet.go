package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
}

func fleetFlags(fs *flag.FlagSet) fleetOpts {
	return fleetOpts{
		config:   fs.String("config", "", "push: the configuration to publish, with every zone it names (default: "+DefaultConfig+")"),
		etcd:     fs.String("etcd", "", "etcd client URLs, comma-separated (default: from --fleet)"),
		prefix:   fs.String("prefix", "", "the fleet's key prefix (default: from --fleet, else /steer/v1)"),
		nodeFile: fs.String("fleet", "", "a node configuration whose fleet section names the store (endpoints, prefix, TLS, credentials)"),
		timeout:  fs.Duration("timeout", 5*time.Second, "how long each request to etcd may take"),
		json:     fs.Bool("json", false, "status: print JSON"),
	}
}

// fleetCmd runs steer fleet push|status.
func fleetCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "push" && args[0] != "status") {
		fmt.Fprintln(stderr, "usage: steer fleet push|status [--config FILE] [--etcd URL,...] [--prefix P] [--fleet NODE.yaml] [--json]")
		return 2
	}
	sub := args[0]
	fs := newFlagSet("fleet "+sub, stderr)
	o := fleetFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	fo := fleetOptions{Prefix: *o.prefix, NodeFile: *o.nodeFile, Timeout: *o.timeout}
	if *o.etcd != "" {
		fo.Endpoints = strings.Split(*o.etcd, ",")
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
		fmt.Fprintf(stdout, "pushed %s: serial %d at revision %d, %d files (%s)\n", path, res.Serial, res.Rev, len(res.Files), res.Summary)
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
			enc.Encode(map[string]any{"published": st.Published.Meta, "revision": st.Published.Rev, "nodes": st.Nodes})
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
	Files       []string
	Summary     string
	Warnings    []string
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
	cur, err := fleet.ReadBundle(ctx, s, prefix)
	if err != nil {
		return nil, fmt.Errorf("reading the published configuration: %w", err)
	}
	rev, serial, err := fleet.Publish(ctx, s, prefix, b, cur.Rev)
	if err != nil {
		return nil, err
	}
	res := &pushResult{Serial: serial, Rev: rev, Summary: summary, Warnings: warns}
	for name := range b.Files {
		res.Files = append(res.Files, name)
	}
	return res, nil
}

// fleetState is what steer fleet status shows.
type fleetState struct {
	Published fleet.Bundle
	Nodes     []fleet.Status
}

// FleetStatus reads the published bundle's meta and every live node's
// status.
func fleetStatus(o fleetOptions) (*fleetState, error) {
	s, prefix, err := openFleetStore(o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ctx := context.Background()
	b, err := fleet.ReadBundle(ctx, s, prefix)
	if err != nil {
		return nil, err
	}
	nodes, err := fleet.ReadStatuses(ctx, s, prefix)
	if err != nil {
		return nil, err
	}
	return &fleetState{Published: b, Nodes: nodes}, nil
}

// Text is the status as a table.
func (st *fleetState) Text(now time.Time) string {
	var b strings.Builder
	if st.Published.Rev == 0 {
		b.WriteString("published: nothing yet\n")
	} else {
		m := st.Published.Meta
		fmt.Fprintf(&b, "published: serial %d (revision %d), %d files, pushed %s by %s\n",
			m.Serial, st.Published.Rev, len(m.Files), m.PushedAt.Format(time.RFC3339), m.PushedBy)
	}
	fmt.Fprintf(&b, "%-16s %-8s %-8s %-10s %-10s %s\n", "NODE", "REGION", "SERIAL", "VIEW AGE", "VERSION", "ERROR")
	for _, n := range st.Nodes {
		age := "-"
		if !n.ViewAt.IsZero() {
			age = now.Sub(n.ViewAt).Round(time.Second).String()
		}
		serial := fmt.Sprint(n.Serial)
		if n.Serial != st.Published.Meta.Serial {
			serial += " (old)"
		}
		fmt.Fprintf(&b, "%-16s %-8s %-8s %-10s %-10s %s\n", n.Node, dash(n.Region), serial, age, dash(n.Version), n.Error)
	}
	if len(st.Nodes) == 0 {
		b.WriteString("(no node is running)\n")
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
