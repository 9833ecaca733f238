//go:build !race

// Fleet nodes on embedded etcd with and without TLS: a wall-time heavy
// scenario, run beside the raced packages.

package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/keyroll"
)

// TestFleetRolloverNeedsProtectedStore: the node driving a ZSK rollover
// writes the successor's private key to the store only when the store is
// TLS and authenticated, or the node's file allows it
// (fleet.allow_insecure_keys). On a plain etcd the rollover is held: no
// successor in the store's plan, the reason in the log, in /v1/status and
// in the plan's view (steer dnssec status), and the zone answered signed
// by its configured ZSK. Allowed, or on etcd with TLS and client
// certificates, the successor is made and written.
func TestFleetRolloverNeedsProtectedStore(t *testing.T) {
	const origin = "held.example."
	for _, tc := range []struct {
		name  string
		tls   bool
		allow bool
		held  bool
	}{
		{name: "plain", held: true},
		{name: "plain-allowed", allow: true},
		{name: "tls-client-certificates", tls: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := etcdtest.Options{}
			var files *etcdtest.TLSFiles
			if tc.tls {
				files = etcdtest.NewTLS(t)
				opts = etcdtest.Options{TLS: files, ClientCertAuth: true}
			}
			c := etcdtest.Start(t, opts)
			cfg := fleet.EtcdConfig{Endpoints: c.Endpoints(), RequestTimeout: 3 * time.Second}
			local := fleetLocal(c.Endpoints(), "a")
			if tc.tls {
				cfg.CAFile, cfg.CertFile, cfg.KeyFile = files.CA, files.ClientCert, files.ClientKey
				local = strings.Replace(local, "    dial_timeout: 1s\n",
					fmt.Sprintf("    dial_timeout: 1s\n    tls: { ca: %s, cert: %s, key: %s }\n", files.CA, files.ClientCert, files.ClientKey), 1)
			}
			if tc.allow {
				local += "  allow_insecure_keys: true\n"
			}
			s, err := fleet.OpenEtcd(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			bundle := map[string][]byte{}
			var zsk uint16
			var bases []string
			for _, sep := range []bool{true, false} {
				k, err := dnssec.GenerateKey(origin, dns.ECDSAP256SHA256, sep)
				if err != nil {
					t.Fatal(err)
				}
				pub, priv := k.Files(time.Now())
				bundle["keys/"+k.BaseName()+".key"], bundle["keys/"+k.BaseName()+".private"] = pub, priv
				bases = append(bases, "keys/"+k.BaseName())
				if !sep {
					zsk = k.Tag
				}
			}
			// A lifetime of an hour: the successor is made at once and
			// nothing else happens within the test, however slow the
			// machine (15 s let a loaded one see the next successor).
			bundle["steer.yaml"] = []byte(fmt.Sprintf(`identity: pushed
zones:
  - origin: %s
    file: held.zone
    dnssec:
      keys: [%s]
      zsk_lifetime: 1h
      dnskey_ttl: 1s
      max_zone_ttl: 1s
      propagation_delay: 1s
`, origin, strings.Join(bases, ", ")))
			bundle["held.zone"] = []byte("$ORIGIN " + origin + "\n$TTL 1\n@ SOA ns1 hostmaster 1 7200 3600 1209600 1\n@ NS ns1\nns1 A 192.0.2.53\nwww A 192.0.2.80\n")
			if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", fleet.Bundle{Files: bundle}, 0); err != nil {
				t.Fatal(err)
			}
			// storeKeys is how many keys the store's plan holds, and
			// whether one was generated (0: no plan yet).
			storeKeys := func() (int, bool) {
				kvs, _, err := s.Get(context.Background(), "/steer/v1/dnssec/"+origin)
				if err != nil || len(kvs) != 1 {
					return 0, false
				}
				p, err := keyroll.Decode("store", kvs[0].Value)
				if err != nil {
					t.Fatal(err)
				}
				gen := false
				for _, k := range p.Keys {
					gen = gen || k.Source == keyroll.SourceGenerated
				}
				return len(p.Keys), gen
			}
			n := startNode(t, map[string]string{"steer.yaml": local}, Options{})
			if !tc.held {
				dnstest.WaitFor(t, 20*time.Second, "the driver to store a plan with the ZSK's successor", func() bool {
					keys, gen := storeKeys()
					return keys == 3 && gen
				}, func() string { return grepLines(n.logs.String(), "DNSSEC") })
				logs := n.logs.String()
				if warned := strings.Contains(logs, "fleet.allow_insecure_keys allows"); warned != tc.allow {
					t.Errorf("the warning about an insecure store logged %v, want %v:\n%s", warned, tc.allow, grepLines(logs, "DNSSEC"))
				}
				if st := n.Status(); st.Zones[0].DNSSEC.RolloverHeld != "" {
					t.Errorf("status: rollover held: %s", st.Zones[0].DNSSEC.RolloverHeld)
				}
				// The status lists the successor (generated, or
				// published already) beside the keys that sign, and the
				// next key event.
				var keys string
				dnstest.WaitFor(t, 5*time.Second, "the status to list the published successor", func() bool {
					d := n.Status().Zones[0].DNSSEC
					keys = fmt.Sprint(d.Keys)
					states := map[string]int{}
					for _, k := range d.Keys {
						states[k.State]++
					}
					return len(d.Keys) == 3 && states[keyroll.StateActive] == 2 && states[keyroll.StateGenerated]+states[keyroll.StatePublished] == 1 && d.NextKeyEvent != nil
				}, func() string { return keys })
				return
			}
			dnstest.WaitFor(t, 10*time.Second, "the driver to log the rollover held", func() bool {
				return strings.Contains(n.logs.String(), "DNSSEC key rollover held")
			}, func() string { return grepLines(n.logs.String(), "DNSSEC") })
			if keys, gen := storeKeys(); gen || keys > 2 {
				t.Errorf("the store's plan holds %d keys, a generated one %v", keys, gen)
			}
			why := "not both TLS and authenticated"
			if l := grepLines(n.logs.String(), "rollover held"); !strings.Contains(l, why) || !strings.Contains(l, "fleet.allow_insecure_keys") || strings.Count(l, "\n") > 0 {
				t.Errorf("the log, once, should say why and what to do:\n%s", l)
			}
			// The status and the plan's view say so (on the driver; a
			// loaded machine may make it lose its lease a moment, and
			// the next step hold the rollover again).
			var held, planHeld string
			dnstest.WaitFor(t, 5*time.Second, "the status and the plan's view to say the rollover is held", func() bool {
				st := n.Status()
				if len(st.Zones) != 1 || st.Zones[0].DNSSEC == nil {
					return false
				}
				held = st.Zones[0].DNSSEC.RolloverHeld
				v, err := (&backend{n: n.Node}).KeyPlan(origin)
				planHeld = v.Held
				return err == nil && strings.Contains(held, why) && strings.Contains(planHeld, why)
			}, func() string { return fmt.Sprintf("status %q, plan %q", held, planHeld) })
			for _, k := range n.Status().Zones[0].DNSSEC.Keys {
				if k.State != keyroll.StateActive {
					t.Errorf("status: key %d %s, want active", k.Tag, k.State)
				}
			}
			// Still signed, by the configured ZSK.
			m := new(dns.Msg)
			m.SetQuestion("www."+origin, dns.TypeA)
			m.SetEdns0(1232, true)
			r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, n.dns.String())
			if err != nil {
				t.Fatal(err)
			}
			signed := false
			for _, rr := range r.Answer {
				if sig, ok := rr.(*dns.RRSIG); ok && sig.KeyTag == zsk {
					signed = true
				}
			}
			if !signed {
				t.Errorf("www is not signed by the configured ZSK %d: %v", zsk, r.Answer)
			}
		})
	}
}
