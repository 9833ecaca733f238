package node

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// A subsystem the configuration does not ask for costs nothing: no
// goroutine, no listener, no table. These are the goroutines' frames of
// the subsystems a node may run, by what turns each on.
var optionalFrames = map[string][]string{
	"anycast (BGP)": {"steer/internal/anycast.", "github.com/osrg/gobgp/"},
	"fleet (etcd)":  {"steer/internal/fleetnode.", "steer/internal/fleet.", "go.etcd.io/", "google.golang.org/grpc"},
	"rum":           {"steer/internal/rum.", "node.(*rumWiring)"},
	"query_log":     {"steer/internal/querylog."},
	"api":           {"steer/internal/api.", "node.(*apiWiring)", "steer/internal/ui."},
}

var goroutineLabel atomic.Uint64

// startLabelled is startNode with every goroutine the node starts (and
// those they start: labels are inherited) labelled, so that
// nodeGoroutines finds this node's among those of tests running beside it.
func startLabelled(t *testing.T, files map[string]string) (*testNode, string) {
	t.Helper()
	label := fmt.Sprint("fixedcost-", goroutineLabel.Add(1))
	var n *testNode
	pprof.Do(context.Background(), pprof.Labels("steer-node", label), func(context.Context) {
		n = startNode(t, files, Options{})
	})
	return n, label
}

// nodeGoroutines returns the stacks of the goroutines labelled label.
func nodeGoroutines(t *testing.T, label string) []string {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, `"steer-node":"`+label+`"`) {
			out = append(out, g)
		}
	}
	return out
}

// running returns, for each optional subsystem with a goroutine among gs,
// one of its frames.
func running(gs []string) map[string]string {
	out := map[string]string{}
	for _, g := range gs {
		for name, frames := range optionalFrames {
			for _, f := range frames {
				if i := strings.Index(g, f); i >= 0 {
					line, _, _ := strings.Cut(g[i:], "\n")
					out[name] = line
				}
			}
		}
	}
	return out
}

// A node with one zone and nothing else configured runs no BGP speaker,
// etcd client, beacon listener or RUM rounds, query log writer or API,
// and makes no DNSSEC signing cache and opens no geo database; a reload
// that turns RUM and the query log on starts theirs, and one that turns
// them off again stops them and drops the beacon store.
func TestUnconfiguredSubsystemsStartNothing(t *testing.T) {
	t.Parallel()
	base := "zones: [{ origin: example.com, file: example.com.zone }]\n"
	n, label := startLabelled(t, map[string]string{
		"steer.yaml": base, "example.com.zone": zone("example.com", 1, "x"), "rumtoken": "beacon-key",
	})
	if got := n.txt("gen.example.com."); got != "x" {
		t.Fatalf("gen TXT = %q", got)
	}
	// The node's own goroutines are found by their label (so the check
	// can fail); one just made may not be in the profile yet.
	var gs []string
	dnstest.WaitFor(t, 5*time.Second, "the node's DNS readers among its labelled goroutines", func() bool {
		gs = nodeGoroutines(t, label)
		all := strings.Join(gs, "")
		return strings.Contains(all, "dnsserver.(*Server).serveRaw") || strings.Contains(all, "dnsserver.(*Server).serveUDP")
	}, func() string { return strings.Join(gs, "\n\n") })
	for name, frame := range running(gs) {
		t.Errorf("%s is not configured but runs: %s", name, frame)
	}
	snap := n.srv.Handler().Snapshot()
	if snap.Signing != nil {
		t.Error("no zone is signed, but the snapshot has a signing budget and cache")
	}
	if snap.Geo != nil {
		t.Errorf("no steered record, but geo databases are open: %s", snap.Geo.Summary())
	}
	if t.Failed() {
		t.Logf("the node's goroutines:\n%s", strings.Join(gs, "\n\n"))
	}

	// On, then off again by reloads.
	writeFile(t, n.dir, "steer.yaml", base+"rum: { listen: \"127.0.0.1:0\", token_file: rumtoken }\nquery_log: { path: q.log, sample: 1 }\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := n.Reload(ctx); err != nil {
		t.Fatalf("reload turning rum and query_log on: %v %+v", err, res)
	}
	// A goroutine just made may not be in the profile yet.
	var on map[string]string
	dnstest.WaitFor(t, 5*time.Second, "rum and query log goroutines after the reload that turned them on", func() bool {
		on = running(nodeGoroutines(t, label))
		return on["rum"] != "" && on["query_log"] != ""
	}, func() string { return fmt.Sprint(on) })
	writeFile(t, n.dir, "steer.yaml", base)
	if res, err := n.Reload(ctx); err != nil {
		t.Fatalf("reload turning them off: %v %+v", err, res)
	}
	var left map[string]string
	dnstest.WaitFor(t, 5*time.Second, "rum and query log goroutines to end after the reload that removed them", func() bool {
		left = running(nodeGoroutines(t, label))
		return len(left) == 0
	}, func() string { return fmt.Sprint(left) })
	if s := n.rum.currentStore(); s != nil || n.rum.store != nil {
		t.Error("rum is off, but its beacon store is kept")
	}
}
