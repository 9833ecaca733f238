package validatortest

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// Delv runs BIND's delv against one server with the anchor as its only
// trust anchor (+root=ZONE): delv asks the server itself for the answer
// and every DNSKEY it needs and validates them.
type Delv struct {
	server netip.AddrPort
	zone   string
	anchor string // the anchor file
}

// NewDelv writes the anchor file (trust-anchors { ZONE static-key ...; })
// for delv queries to server.
func NewDelv(t testing.TB, server netip.AddrPort, a Anchor) *Delv {
	t.Helper()
	dnstest.NeedTool(t, "delv")
	var b strings.Builder
	b.WriteString("trust-anchors {\n")
	for _, k := range a.Keys {
		fmt.Fprintf(&b, "\t%s static-key %d %d %d %q;\n", a.Zone, k.Flags, k.Protocol, k.Algorithm, k.PublicKey)
	}
	b.WriteString("};\n")
	return &Delv{server: server, zone: a.Zone, anchor: writeFile(t, t.TempDir(), "anchor.conf", b.String())}
}

// Via returns a Delv with the same anchor that queries server instead
// (an ECS relay in front of the first, say).
func (d *Delv) Via(server netip.AddrPort) *Delv {
	c := *d
	c.server = server
	return &c
}

// DelvResult is what delv said about one query.
type DelvResult struct {
	Name  string
	Qtype uint16
	// Validated: "; fully validated" (a positive answer).
	Validated bool
	// Negative: "; negative response, fully validated" (NXDOMAIN or
	// NODATA proven by signed NSEC records).
	Negative bool
	// Answer holds the records delv printed, RRSIGs left out.
	Answer []dns.RR
	// Out is everything delv printed.
	Out string
	Err error
}

func (r DelvResult) String() string {
	return fmt.Sprintf("delv %s %s:\n%s", r.Name, dns.TypeToString[r.Qtype], r.Out)
}

// Query runs delv for name and qtype.
func (d *Delv) Query(name string, qtype uint16) DelvResult {
	res := DelvResult{Name: dns.CanonicalName(name), Qtype: qtype}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "delv", "@"+d.server.Addr().String(), "-p", strconv.Itoa(int(d.server.Port())),
		"-a", d.anchor, "+root="+d.zone, "-q", res.Name, "-t", dns.TypeToString[qtype], "+nocrypto")
	out, err := cmd.CombinedOutput()
	res.Out = string(out)
	if err != nil {
		res.Err = fmt.Errorf("delv: %v", err)
	}
	for _, line := range strings.Split(res.Out, "\n") {
		switch {
		case line == "; fully validated":
			res.Validated = true
		case line == "; negative response, fully validated":
			res.Negative = true
		case line == "" || strings.HasPrefix(line, ";"):
		default:
			rr, err := dns.NewRR(line)
			if err != nil || rr == nil {
				continue // +nocrypto prints RRSIGs without their signature
			}
			if rr.Header().Rrtype != dns.TypeRRSIG {
				res.Answer = append(res.Answer, rr)
			}
		}
	}
	return res
}

// DelvQuery is one query of a batch.
type DelvQuery struct {
	Name  string
	Qtype uint16
}

// All runs the queries, a few delv processes at a time, and returns their
// results in order.
func (d *Delv) All(qs []DelvQuery) []DelvResult {
	jobs := make([]DelvJob, len(qs))
	for i, q := range qs {
		jobs[i] = DelvJob{d, q}
	}
	return RunDelv(jobs)
}

// DelvJob is one query for one Delv.
type DelvJob struct {
	Delv  *Delv
	Query DelvQuery
}

// RunDelv runs the jobs, four delv processes at a time, and returns their
// results in order.
func RunDelv(jobs []DelvJob) []DelvResult {
	out := make([]DelvResult, len(jobs))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = j.Delv.Query(j.Query.Name, j.Query.Qtype)
		}()
	}
	wg.Wait()
	return out
}

// runTool runs a short command and returns its combined output.
func runTool(limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
