package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/fleet"
)

// FleetOptions says which store steer fleet talks to: endpoints and a
// prefix given directly, or the fleet section of a node's file (with its
// TLS and credentials), or both (the flags win).
type FleetOptions struct {
	Endpoints []string
	Prefix    string
	// NodeFile is a node configuration whose fleet section names the store.
	NodeFile string
	Timeout  time.Duration
}

// openFleetStore opens the store o names.
func openFleetStore(o FleetOptions) (fleet.Store, string, error) {
	ec := fleet.EtcdConfig{RequestTimeout: o.Timeout}
	prefix := config.DefaultFleetPrefix
	if o.NodeFile != "" {
		local, err := config.Load(o.NodeFile)
		if err != nil {
			return nil, "", err
		}
		if local.Fleet == nil {
			return nil, "", fmt.Errorf("%s has no fleet section", o.NodeFile)
		}
		f := local.Fleet
		ec.Endpoints, ec.Username, prefix = f.Etcd.Endpoints, f.Etcd.Username, f.Etcd.Prefix
		ec.DialTimeout = time.Duration(f.Etcd.DialTimeout)
		if f.Etcd.TLS.CA != "" {
			ec.CAFile = local.Resolve(f.Etcd.TLS.CA)
		}
		if f.Etcd.TLS.Cert != "" {
			ec.CertFile, ec.KeyFile = local.Resolve(f.Etcd.TLS.Cert), local.Resolve(f.Etcd.TLS.Key)
		}
		ec.Password = f.Etcd.Password.Value() // read with the configuration
	}
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

// PushResult is what steer fleet push did.
type PushResult struct {
	Serial, Rev int64
	Files       []string
	Summary     string
	Warnings    []string
}

// FleetPush checks the configuration at path as steer check does and, when
// it passes, publishes it with every zone file it names, in one
// transaction, on top of the bundle published now (a push that races
// another fails, and writes nothing), and the cookie secret file when it
// names one. Other files (geo databases, latency and feed files) are not
// pushed: each node reads them from its own disk, by their absolute paths.
func FleetPush(path string, o FleetOptions) (*PushResult, error) {
	summary, warns, err := Check(path)
	if err != nil {
		return nil, fmt.Errorf("the configuration does not pass steer check; nothing was pushed:\n%w", err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b := fleet.Bundle{Files: map[string][]byte{fleet.ConfigName: data}}
	for _, z := range cfg.Zones {
		zd, err := os.ReadFile(cfg.Resolve(z.File))
		if err != nil {
			return nil, fmt.Errorf("zone %s: %v", z.Origin, err)
		}
		b.Files[fleet.BundleName(z.File)] = zd
	}
	// The cookie secret goes with the bundle: every node of the anycast
	// set then mints and accepts the same cookies, and a push rotates it.
	if sf := cfg.Cookies.SecretFile; sf != "" {
		sd, err := os.ReadFile(cfg.Resolve(sf))
		if err != nil {
			return nil, fmt.Errorf("cookies.secret_file: %v", err)
		}
		b.Files[fleet.BundleName(sf)] = sd
	}
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
	res := &PushResult{Serial: serial, Rev: rev, Summary: summary, Warnings: warns}
	for name := range b.Files {
		res.Files = append(res.Files, name)
	}
	return res, nil
}

// FleetState is what steer fleet status shows.
type FleetState struct {
	Published fleet.Bundle
	Nodes     []fleet.Status
}

// FleetStatus reads the published bundle's meta and every live node's
// status.
func FleetStatus(o FleetOptions) (*FleetState, error) {
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
	return &FleetState{Published: b, Nodes: nodes}, nil
}

// Text is the status as a table.
func (st *FleetState) Text(now time.Time) string {
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
