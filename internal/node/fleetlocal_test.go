package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/fleet"
)

// TestFleetNodeOwnFile: a fleet node serves the pushed configuration with
// its own file's api and identity (the pushed api is not used, and a push
// without one leaves the node's on); a reload reads the node's own file
// again, so a moved api and a new identity apply without a restart; a
// changed fleet section is named as needing a restart; a broken own file
// is rejected with file:line while the node keeps serving.
func TestFleetNodeOwnFile(t *testing.T) {
	c, s := fleetStore(t)
	ctx := context.Background()
	b := fleetBundle(1, "one")
	b.Files["steer.yaml"] = append([]byte("api: { listen: \"127.0.0.1:1\" }\n"), b.Files["steer.yaml"]...)
	rev, _, err := fleet.Publish(ctx, s, "/steer/v1", b, 0)
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := func() string { return fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t)) }
	first := apiAddr()
	own := func(api, extra string) string {
		return fmt.Sprintf("api: { listen: %q }\n%s", api, extra) + fleetLocal(c.Endpoints(), "fra-1")
	}
	n := startNode(t, map[string]string{"steer.yaml": own(first, "")}, Options{})
	id := func() string {
		q := new(dns.Msg)
		q.SetQuestion("id.server.", dns.TypeTXT)
		q.Question[0].Qclass = dns.ClassCHAOS
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(q, n.dns.String())
		if err != nil || len(r.Answer) == 0 {
			return fmt.Sprintf("%v %v", r, err)
		}
		return r.Answer[0].(*dns.TXT).Txt[0]
	}
	if n.APIAddr() != first {
		t.Fatalf("api on %s, want the node's own %s", n.APIAddr(), first)
	}
	if got := id(); got != "pushed" {
		t.Errorf("id.server %q, want the pushed identity (the node's file sets none)", got)
	}
	// A push without api: the node's own stays on.
	if _, _, err := fleet.Publish(ctx, s, "/steer/v1", fleetBundle(2, "two"), rev); err != nil {
		t.Fatal(err)
	}
	waitTXT(t, n, "two")
	if code, _ := n.call("GET", "/healthz", "", ""); code != 200 || n.APIAddr() != first {
		t.Errorf("after a push without api: %d on %s, want 200 on %s", code, n.APIAddr(), first)
	}

	// The node's own file changed: a reload moves the api and the identity.
	second := apiAddr()
	writeFile(t, n.dir, "steer.yaml", own(second, "identity: pop-fra\n"))
	res, err := n.Reload(ctx)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if n.APIAddr() != second || id() != "pop-fra" {
		t.Errorf("after the reload: api %s (want %s), id.server %q (want pop-fra); %+v", n.APIAddr(), second, id(), res)
	}
	if len(res.RestartNeeded) != 0 {
		t.Errorf("restart needed: %q", res.RestartNeeded)
	}
	// A changed fleet section needs a restart; the rest still applies.
	writeFile(t, n.dir, "steer.yaml", strings.Replace(own(second, "identity: pop-fra-2\n"), "lease_ttl: 2s", "lease_ttl: 3s", 1))
	res, err = n.Reload(ctx)
	if err != nil || len(res.RestartNeeded) != 1 || !strings.Contains(res.RestartNeeded[0], "fleet") || id() != "pop-fra-2" {
		t.Errorf("fleet section changed: %v, restart %q, id.server %q", err, res.RestartNeeded, id())
	}
	// A broken file: rejected, naming its line; the node serves on.
	writeFile(t, n.dir, "steer.yaml", own(second, "records: []\n"))
	if _, err := n.Reload(ctx); err == nil || !strings.Contains(err.Error(), "steer.yaml:2: records: this is a fleet node's file") {
		t.Errorf("a node file with records: %v", err)
	}
	if got := n.txt("gen.example.com"); got != "two" || id() != "pop-fra-2" {
		t.Errorf("after the rejected reload: %q, id.server %q", got, id())
	}
}
