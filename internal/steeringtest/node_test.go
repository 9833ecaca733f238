package steeringtest

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/querylog"
	"github.com/steer-dns/steer/internal/servertest"
)

// nearRecord ranks a Frankfurt and a Mumbai site by distance.
const nearRecord = `  - name: near.example.com
    ttl: 60
    pools:
      fra: { address: 198.51.100.21, location: { lat: 50.11, lon: 8.68 } }
      bom: { address: 203.0.113.21, location: { lat: 19.08, lon: 72.88 } }
    rules:
      - default: { by: geoproximity }
`

const (
	nearName = "near.example.com."
	nearFra  = "198.51.100.21"
	nearBom  = "203.0.113.21"
)

// anycastNodes starts two steer nodes that differ only in node.location
// (Frankfurt and Mumbai) and steer unknown clients by it; loopback and
// 1.1.1.0/24 (placed in Sydney by the Larkbook data) are anycast
// resolvers.
func anycastNodes(t *testing.T) (fra, bom *servertest.Server) {
	t.Helper()
	o := cfgOpts{extra: nearRecord,
		ecsExtra: `, unknown_client: node, anycast_resolvers: [127.0.0.0/8, "::1/128", 1.1.1.0/24]`}
	// Every query comes from loopback: rate limiting would slip some.
	const rrlOff = "rrl: { enabled: false }\n"
	o.top = rrlOff + "node: { name: fra-1, region: eu, location: { lat: 50.11, lon: 8.68 } }\n"
	fra = start(t, o)
	o.top = rrlOff + "node: { name: bom-1, region: ap, location: { lat: 19.08, lon: 72.88 } }\n"
	bom = start(t, o)
	return fra, bom
}

// TestAnycastNodesAnswerUnknownClients: the same resolver, sending no
// usable ECS, gets the site nearest the node it asked; a real subnet is
// steered by the subnet on both nodes, with the same scope.
func TestAnycastNodesAnswerUnknownClients(t *testing.T) {
	fra, bom := anycastNodes(t)
	nodes := []struct {
		name string
		srv  *servertest.Server
		want string
	}{{"fra-1", fra, nearFra}, {"bom-1", bom, nearBom}}
	for _, n := range nodes {
		// kdig from 127.0.0.2 (listed) without ECS, and with a /0 source:
		// scope 0.
		for _, src := range []string{"127.0.0.2", "127.0.0.1"} {
			k := parseKdig(t, dnstest.Kdig(t, n.srv.V4, "-b", src, "+norec", nearName, "A"))
			if k.status != "NOERROR" || len(k.answers) != 1 || k.answers[0].rdata != n.want {
				t.Errorf("%s, kdig from %s, no ECS: %s %v, want %s\n%s", n.name, src, k.status, k.answers, n.want, k.raw)
			}
			k = parseKdig(t, dnstest.Kdig(t, n.srv.V4, "-b", src, "+norec", nearName, "A", "+subnet=0.0.0.0/0"))
			if len(k.answers) != 1 || k.answers[0].rdata != n.want || k.ecs != "0.0.0.0/0/0" {
				t.Errorf("%s, kdig from %s, ECS /0: %v ecs %q, want %s with 0.0.0.0/0/0\n%s", n.name, src, k.answers, k.ecs, n.want, k.raw)
			}
		}
		if n.srv.V6.IsValid() {
			k := parseKdig(t, dnstest.Kdig(t, n.srv.V6, "+norec", nearName, "A", "+subnet=::/0"))
			if len(k.answers) != 1 || k.answers[0].rdata != n.want || k.ecs != "::/0/0" {
				t.Errorf("%s over IPv6, ECS ::/0: %v ecs %q, want %s with ::/0/0\n%s", n.name, k.answers, k.ecs, n.want, k.raw)
			}
		}
		// 1.1.1.1 is placed in Sydney (nearer Mumbai); listed, it gets the
		// node's site on both paths. Through the server's own handler, as
		// the packet's source cannot be 1.1.1.1 here.
		h := n.srv.Handler()
		for _, m := range []*dns.Msg{query(nearName, dns.TypeA), ecsQuery(nearName, dns.TypeA, "0.0.0.0/0")} {
			r, _ := handleFrom(t, h, m, "1.1.1.1")
			if got := addrs(r, nearName); len(got) != 1 || got[0] != n.want {
				t.Errorf("%s, from 1.1.1.1: %v, want %s", n.name, got, n.want)
			}
		}
		// ECS with a real subnet steers by the subnet on both nodes.
		for _, c := range []struct{ subnet, want, scope string }{
			{mumbaiPfx, nearBom, "192.0.2.16/28/"},
			{berlinPfx, nearFra, "192.0.2.48/28/"},
			{"2001:db8:2::/48", nearBom, "2001:db8:2::/48/"},
		} {
			k := parseKdig(t, dnstest.Kdig(t, n.srv.V4, "-b", "127.0.0.2", "+norec", nearName, "A", "+subnet="+c.subnet))
			if len(k.answers) != 1 || k.answers[0].rdata != c.want || !strings.HasPrefix(k.ecs, c.scope) || strings.HasSuffix(k.ecs, "/0") {
				t.Errorf("%s, ECS %s: %v ecs %q, want %s with a scope", n.name, c.subnet, k.answers, k.ecs, c.want)
			}
			other := parseKdig(t, dnstest.Kdig(t, nodes[0].srv.V4, "+norec", nearName, "A", "+subnet="+c.subnet))
			if other.ecs != k.ecs {
				t.Errorf("ECS %s: scope %q on %s, %q on fra-1: the node must not change a subnet's scope", c.subnet, k.ecs, n.name, other.ecs)
			}
		}
	}
}

// TestExplainUnknownClient: explain says which input steered and why.
func TestExplainUnknownClient(t *testing.T) {
	fra, _ := anycastNodes(t)
	for _, c := range []struct {
		from, ecs string
		want      string
		answer    string
	}{
		{"1.1.1.1", "", "node fra-1's location (resolver 1.1.1.1 is in ecs.anycast_resolvers)", nearFra},
		{"10.9.9.9", "", "node fra-1's location (resolver 10.9.9.9 is not placed by the geo database)", nearFra},
		{"192.0.2.20", "", "resolver address (no ECS)", nearBom},
		{"1.1.1.1", "0.0.0.0/0", "node fra-1's location (resolver 1.1.1.1 is in ecs.anycast_resolvers)", nearFra},
		{"1.1.1.1", mumbaiPfx, "ECS " + mumbaiPfx, nearBom},
	} {
		req := explain.Request{Name: nearName, Qtype: dns.TypeA, From: netip.MustParseAddr(c.from)}
		if c.ecs != "" {
			req.ECS = netip.MustParsePrefix(c.ecs)
		}
		rep, err := explain.Run(fra.Handler(), req)
		if err != nil {
			t.Fatal(err)
		}
		text := rep.Text()
		if rep.Input.SteeredBy != c.want || !strings.Contains(text, "steered by: "+c.want) {
			t.Errorf("from %s ecs %q: steered by %q, want %q\n%s", c.from, c.ecs, rep.Input.SteeredBy, c.want, text)
		}
		if len(rep.Answer) != 1 || !strings.HasSuffix(rep.Answer[0], c.answer) {
			t.Errorf("from %s ecs %q: answer %v, want %s", c.from, c.ecs, rep.Answer, c.answer)
		}
		node := strings.HasPrefix(c.want, "node")
		if node != strings.Contains(text, "steered as a client at the node: country=- continent=- location=50.1100,8.6800") {
			t.Errorf("from %s ecs %q: the node's geo facts shown %t, want %t\n%s", c.from, c.ecs, !node, node, text)
		}
	}
}

// TestQueryLogSaysNodeSteered: a sampled query the node steered says so
// in the query log, and one the client steered does not.
func TestQueryLogSaysNodeSteered(t *testing.T) {
	fra, _ := anycastNodes(t)
	path := filepath.Join(t.TempDir(), "q.log")
	ql, err := querylog.Open(querylog.Options{Path: path, Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := fra.Handler()
	h.SetQueryLog(ql)
	handleFrom(t, h, query(nearName, dns.TypeA), "1.1.1.1")
	handleFrom(t, h, ecsQuery(nearName, dns.TypeA, mumbaiPfx), "1.1.1.1")
	h.SetQueryLog(nil)
	if err := ql.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"steered_by":"node-anycast-resolver"`) || strings.Contains(lines[1], "steered_by") {
		t.Errorf("query log:\n%s", data)
	}
}
