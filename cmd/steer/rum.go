package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"

	"github.com/steer-dns/steer/internal/rum"
)

// rumOpts are steer rum's flags.
type rumOpts struct {
	config, apiURL, tokenFile *string
	json                      *bool
	countryFactor, neighbour  *float64
	margin, minCount          *float64
	limit                     *int
}

func rumFlags(fs *flag.FlagSet) rumOpts {
	return rumOpts{
		config:        fs.String("config", "", "the configuration whose api.listen and token find the running node (default: "+DefaultConfig+")"),
		apiURL:        fs.String("api", "", "the running node's admin API, host:port or URL (instead of the configuration's api.listen)"),
		tokenFile:     fs.String("token-file", "", "file holding the admin API token (default: the configuration's api.token)"),
		json:          fs.Bool("json", false, "print the API's answer as JSON"),
		countryFactor: fs.Float64("country-factor", 0, "list a country whose p75 to its chosen sites is above this many times its neighbours' (default 1.5)"),
		neighbour:     fs.Float64("neighbour-km", 0, "countries whose centres are this close are neighbours (default 2000; none that close: the continent's)"),
		margin:        fs.Float64("margin", 0, "how much better a measured best site must be to be a finding (default: the latency map's switch_margin)"),
		minCount:      fs.Float64("min-count", 0, "decayed beacons a network needs to a site to take part (default 3)"),
		limit:         fs.Int("limit", 50, "networks listed per finding in the text (0: all; --json lists all)"),
	}
}

// rumCmd runs steer rum report [NAME].
func rumCmd(args []string, stdout, stderr io.Writer) int {
	const use = "usage: steer rum report [NAME] [--config FILE | --api URL [--token-file FILE]] [--country-factor 1.5] [--neighbour-km 2000] [--margin 0.2] [--min-count 3] [--limit 50] [--json]"
	if len(args) == 0 || !slices.Contains(subWords["rum"], args[0]) {
		fmt.Fprintln(stderr, use)
		return 2
	}
	fs := newFlagSet("rum report", stderr)
	o := rumFlags(fs)
	pos, ok := parseInterspersed(fs, args[1:])
	if !ok {
		return 2
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "steer rum report: one record at most (got %q and %q)\n%s\n", pos[0], pos[1], use)
		return 2
	}
	path, _ := configPath(*o.config)
	target, token, err := explainTarget(*o.apiURL, *o.tokenFile, path)
	if err == nil && target == "" {
		what := path
		if what == "" {
			what = "no configuration (no --config and no " + defaultConfig() + ")"
		}
		err = fmt.Errorf("the measurements are the running node's: give --api URL, or --config of a node with api.listen (%s has none)", what)
	}
	if err != nil {
		fmt.Fprintln(stderr, "steer rum report:", err)
		return 1
	}
	q := url.Values{}
	if len(pos) == 1 {
		q.Set("name", pos[0])
	}
	for name, v := range map[string]float64{"country_factor": *o.countryFactor, "neighbour_km": *o.neighbour, "margin": *o.margin, "min_count": *o.minCount} {
		if v != 0 {
			q.Set(name, strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	path = "/v1/rum/report"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var rep rum.Report
	if err := apiDo(target, token, "GET", path, nil, &rep); err != nil {
		fmt.Fprintln(stderr, "steer rum report:", err)
		return 1
	}
	if *o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return 0
	}
	rep.WriteText(stdout, *o.limit)
	return 0
}
