package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/node"
)

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
	fo := node.FleetOptions{Prefix: *o.prefix, NodeFile: *o.nodeFile, Timeout: *o.timeout}
	if *o.etcd != "" {
		fo.Endpoints = strings.Split(*o.etcd, ",")
	}
	switch sub {
	case "push":
		path := *o.config
		if path == "" {
			path = defaultConfig()
		}
		res, err := node.FleetPush(path, fo)
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
		st, err := node.FleetStatus(fo)
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
