package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/node"
	"github.com/steer-dns/steer/internal/qtype"
)

// explainCmd asks the running node (its admin API) why a query gets its
// answer, so the explanation has the node's live health, overrides and
// latency; --offline evaluates the configuration alone and says so.
func explainCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("explain", stderr)
	o := explainFlags(fs)
	apiURL, tokenFile, offline, typeFlag, ecsFlag, from, asJSON := o.apiURL, o.tokenFile, o.offline, o.qtype, o.ecs, o.from, o.json
	// Accept the name anywhere among the flags: Go's flag package stops at
	// the first non-flag argument, so parse again after it.
	var name string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		if name != "" {
			fmt.Fprintf(stderr, "steer explain: one NAME only (got %q and %q)\n", name, fs.Arg(0))
			return 2
		}
		name, rest = fs.Arg(0), fs.Args()[1:]
	}
	if name == "" {
		fmt.Fprintln(stderr, "steer explain: a NAME to explain is required")
		return 2
	}
	t, err := qtype.Parse(*typeFlag)
	if err != nil {
		fmt.Fprintf(stderr, "steer explain: unknown type %q\n", *typeFlag)
		return 2
	}
	req := explain.Request{Name: name, Qtype: t, NoDNSSEC: !*o.dnssec, Node: *o.node}
	if req.From, err = netip.ParseAddr(*from); err != nil {
		fmt.Fprintf(stderr, "steer explain: --from %q is not an IP address\n", *from)
		return 2
	}
	if *ecsFlag != "" {
		if req.ECS, err = netip.ParsePrefix(*ecsFlag); err != nil {
			if a, err2 := netip.ParseAddr(*ecsFlag); err2 == nil {
				req.ECS = netip.PrefixFrom(a, a.BitLen())
			} else {
				fmt.Fprintf(stderr, "steer explain: --ecs %q is not a prefix such as 49.36.0.0/24\n", *ecsFlag)
				return 2
			}
		}
	}
	path, _ := configPath(*o.config)
	what := path
	if what == "" {
		what = "the embedded demo"
	}
	var rep *explain.Report
	why := "--offline"
	if !*offline {
		target, token, err := explainTarget(*apiURL, *tokenFile, path)
		switch {
		case err != nil:
			fmt.Fprintln(stderr, "steer explain:", err)
			return 1
		case target == "":
			why = "no --api given and " + what + " has no api.listen"
		default:
			rep, err = explainLive(target, token, req)
			if err != nil && *apiURL != "" {
				fmt.Fprintln(stderr, "steer explain:", err)
				return 1
			}
			if err != nil {
				why = err.Error()
			} else {
				rep.Source = "source:   live, the running node at " + target
			}
		}
	}
	if rep == nil && req.Node != "" {
		fmt.Fprintf(stderr, "steer explain: --node %s: only a running node of the fleet can answer as another (%s)\n", req.Node, why)
		return 1
	}
	if rep == nil {
		quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if rep, err = node.ExplainOffline(path, req, quiet); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		rep.Source = "source:   OFFLINE, " + what + " alone (" + why + "): every pool as configured, no health checks, overrides or latency pushes"
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return 0
	}
	fmt.Fprint(stdout, rep.Text())
	return 0
}

// explainTarget finds the running node's API: --api, or the config's
// api.listen ("" when neither names one) and its token.
func explainTarget(apiURL, tokenFile, path string) (target, token string, err error) {
	if tokenFile != "" {
		s, err := config.ReadSecret(nil, tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("admin API token: %w", err)
		}
		token = s.Value()
	}
	if apiURL != "" {
		if !strings.Contains(apiURL, "://") {
			apiURL = "http://" + apiURL
		}
		return strings.TrimRight(apiURL, "/"), token, nil
	}
	if path == "" {
		return "", "", nil
	}
	cfg, err := config.Load(path)
	if err != nil {
		return "", "", err
	}
	if cfg.API.Listen == "" {
		return "", "", nil
	}
	host, port, err := net.SplitHostPort(cfg.API.Listen)
	if err != nil {
		return "", "", fmt.Errorf("%s: api.listen %q: %v", path, cfg.API.Listen, err)
	}
	if a, err := netip.ParseAddr(host); host == "" || err == nil && a.IsUnspecified() {
		host = "127.0.0.1" // a wildcard listener answers on loopback
		if err == nil && a.Is6() {
			host = "::1"
		}
	}
	if token == "" {
		token = cfg.API.Token.Value() // read with the configuration
	}
	return "http://" + net.JoinHostPort(host, port), token, nil
}

// explainLive asks GET /v1/explain of the node at target.
func explainLive(target, token string, req explain.Request) (*explain.Report, error) {
	q := url.Values{"name": {req.Name}, "type": {dns.TypeToString[req.Qtype]}, "from": {req.From.String()}}
	if req.ECS.IsValid() {
		q.Set("ecs", req.ECS.String())
	}
	if req.NoDNSSEC {
		q.Set("dnssec", "false")
	}
	if req.Node != "" {
		q.Set("node", req.Node)
	}
	hr, err := http.NewRequest("GET", target+"/v1/explain?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("no running node answered at %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.Unmarshal(body, &e)
		return nil, fmt.Errorf("the node at %s answered %s: %s", target, resp.Status, e.Error)
	}
	var rep explain.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, fmt.Errorf("the node at %s: %v", target, err)
	}
	return &rep, nil
}
