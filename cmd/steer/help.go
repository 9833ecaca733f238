package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// The commands and their flags are defined once, here: the commands use
// them, and usage (--help), the man pages (steer manpage) and the shell
// completions (steer completion) are written from them.

type command struct {
	name     string
	synopsis string // after "steer NAME"
	summary  string // one line
	desc     string // a paragraph for the man page
	flags    func(fs *flag.FlagSet)
}

var commands = []command{
	{"serve", "[--config FILE] [--listen ADDR]... [--pid-file FILE] [--log-format text|json] [--log-level LEVEL] [--watch-interval 5s]",
		"run a node",
		"Serve DNS (and the admin API, health checks and anycast the configuration sets). Without --config it uses " + DefaultConfig + " when that file exists, otherwise the embedded demo (zone example.com on 127.0.0.1:5353 and [::1]:5353), and says so in a warning on its first log line. SIGHUP reloads the configuration and zones and reopens the query log; SIGUSR1 reopens the query log only; SIGTERM and SIGINT drain and stop. Under systemd (Type=notify) it reports READY=1 once the first snapshot serves, RELOADING=1 and READY=1 around a reload and STOPPING=1 at shutdown.",
		func(fs *flag.FlagSet) { serveFlags(fs) }},
	{"check", "[--config FILE]", "validate a configuration and every file it names",
		"Load and validate the configuration and every file it names (zones, geo databases, latency files, token and password files) without serving. Without --config it checks " + DefaultConfig + ". Prints each problem as file:line: message and exits 1 when any is found; warnings do not fail the check.",
		func(fs *flag.FlagSet) { checkFlags(fs) }},
	{"explain", "NAME [--config FILE | --api URL [--token-file FILE]] [--offline] [--type A] [--ecs PREFIX] [--from IP] [--node NAME] [--dnssec=false] [--json]",
		"say why a client gets the answer it gets",
		"Ask the running node (its admin API) to answer one query through its own handler and say why: the input used, the geo record, each rule, pool states, the decision, answer, TTL and ECS scope. The query has the DO bit, as a validating resolver's: for a signed zone the signatures the answer carries are listed with their validity and expiry, each verified with the zone's served DNSKEY; --dnssec=false asks without it. The first line says the source: live, or OFFLINE with why. In a fleet, --node NAME answers as that node would: its identity (name, region, country, location) decides rules on node and node_region and where ecs.unknown_client: node steers a client nothing places, with the asked node's live health. Without --config it uses " + DefaultConfig + " when that file exists, otherwise the embedded demo.",
		func(fs *flag.FlagSet) { explainFlags(fs) }},
	{"simulate", "[--config FILE] [--scenario FILE] [--from-log QUERYLOG [--ttl D] [--record NAME] [--sample F]] --out DIR [--seed N] [--runs N] [--load POOL=VALUE ... | --load-file FILE] [--load-model fixed|proportional] [--load-interval D] [--load-intervals N] [--json]",
		"predict what users see after a change, through resolver caches and TTLs",
		"Run a scenario against the configuration's compiled policies: steer's own decision code answers every cache miss of a population of resolvers (sites with a share of the clients, cache instances, ECS on or off and its source prefix, TTL clamps, TTL violators) over a timeline of events (weight changes, drains, failures, recoveries, another configuration file), many times with different seeds. Writes to --out, per time bin, the share of user queries per pool and per resolver site with p5-p95 bands over the runs (CSV and JSON), the deviation from the configured weights, when each drain is safe (at most 1 % of user queries still reach the drained pool), the authoritative queries per second and resolver cache entries per phase, and charts (PNG and SVG); prints a one-page summary (--json: the result as JSON) and lists the files written. Without --config it uses " + DefaultConfig + " when that file exists, otherwise the embedded demo. --from-log QUERYLOG infers the population from steer's query log (per resolver and ECS block: the miss rate inverted to a user query rate, flagged saturated where that is only a lower bound; several cache instances from repeated misses within a TTL), writes it as population.yaml to --out and prints what it inferred and what it could not; with --scenario too, the scenario's timeline runs on that population. With a load feed (--load POOL=VALUE, --load-file in the node's load-file format, or the scenario's capacity section and load events) it also predicts capacity feedback: the node's own shedding step runs at the end of every feed interval over the population's traffic (fixed load, or --load-model proportional: the load follows the user queries the pool answers), and the summary, result.json and capacity.csv give per interval each pool's share of user queries and of steer's answers, the load as a percentage of the target with the reason explain gives (shed: load 150 % of target ...), and the networks shed, where their users went and their countries. Scenario and configuration problems are printed as file:line and exit 1; Ctrl-C stops the simulation.",
		func(fs *flag.FlagSet) { simulateFlags(fs) }},
	{"fleet", "push|status|promote|rollback [--config FILE] [--canary NODE,...] [--allow-insecure-keys] [--etcd URL,...] [--prefix P] [--fleet NODE.yaml] [--timeout 5s] [--json]",
		"publish the configuration to the fleet, or show what each node serves",
		"push runs the whole of steer check on the configuration and, when it passes, publishes it with every zone it names (with the DNSSEC key pairs of its signed zones, its TSIG key files and its cookie secret file) to the fleet's etcd in one transaction, on top of the configuration published now: a push that races another, or finds the store without quorum, fails and writes nothing. Every node following the fleet applies it within a second, and a signed zone is signed with the same keys on every node. A bundle with DNSSEC private keys goes only to an etcd that is both TLS (https:// endpoints, the members' certificates verified) and authenticated (etcd's authentication enabled, or members that require a client certificate), as the push checks with etcd itself: otherwise it is refused, naming what is missing, unless --allow-insecure-keys is given, which pushes with a warning (anyone who can read that etcd, or the network to it, gets the keys and can sign anything for the zones). promote and rollback write no file's contents and warn when the bundle they make current holds private keys in such a store. With --canary NODE,... the push goes to the named nodes only (live nodes of the fleet; others are refused) while the others keep the current bundle; promote then applies it on every node, rollback withdraws it. Without a canary, rollback makes the previous bundle (kept in etcd) current again. status lists the published, canary and previous serials with their digests (SHA-256 of the bundle's files) and, for every live node, the serial and digest it serves, the age of its view of the store, its version and why it does not serve the newest. The store is named by --etcd and --prefix, or by the fleet section of a node configuration given with --fleet.",
		func(fs *flag.FlagSet) { fleetFlags(fs) }},
	{"dnssec", "keygen|ds|ds-check|status|roll-ksk ZONE [--algorithm ecdsap256sha256|ed25519|rsasha256] [--ksk-zsk | --role csk|ksk|zsk] [--dir DIR] [--config FILE | KEYFILE...] [--api URL [--token-file FILE]] [--parent-ns ADDR[:PORT] [--tcp] [--timeout 5s]] [--complete] [--json]",
		"make a zone's DNSSEC keys, print or check its DS records, show and roll its keys",
		"keygen writes a new key pair for ZONE into --dir (default: the current directory) in the form BIND's dnssec-keygen writes, K<zone>+<alg>+<tag>.key and .private (mode 0600), and prints its base path, which is what the zone's dnssec.keys lists: by default one CSK (flags 257, ECDSAP256SHA256); --ksk-zsk makes a KSK and a ZSK; --role ksk or zsk makes one of those (a KSK of one algorithm may sign over a ZSK of another, such as an existing RSASHA256 KSK over an ECDSA ZSK); --algorithm ed25519 or rsasha256 (2048 bits) picks another algorithm. It never replaces a file. BIND's tools read the files, and steer reads keys BIND made. ds prints the DS records (SHA-256, as dnssec-dsfromkey -2 prints them) of the zone's SEP keys (CSK or KSK), to give the parent zone's operator: those of the keys the configuration lists for ZONE (--config, default " + DefaultConfig + "), or of the key files given (base paths or .key files). It reads the public halves only. " +
			"status, roll-ksk and ds-check act on the zone's key plan as the running node keeps it (in its state directory, or in a fleet's store where one node drives it), through its admin API found as steer explain finds it (--api and --token-file, or the configuration's api.listen and token). " +
			"status lists every key of the plan (tag, role, algorithm, state: generated, published, active, retired or removed, with the times of each), the DS the parent should publish and the next key event with its time; --json prints the API's answer. " +
			"roll-ksk starts a KSK rollover (the double-signature rollover of RFC 6781 section 4.1.2): a new KSK (the old one's algorithm unless --algorithm) is published and signs the DNSKEY RRset beside the old one, the apex's CDS and CDNSKEY (RFC 7344, RFC 8078) name it, and its DS is printed for the parent. Once the parent publishes that DS, roll-ksk --complete --parent-ns ADDR asks the parent server for the zone's DS RRset and, only when a DS names the new KSK, retires the old KSK (it leaves the CDS and stops signing at once, and the DNSKEY RRset after the parent's DS TTL); otherwise it refuses, naming the DS the parent has. " +
			"ds-check asks a server of the parent zone (--parent-ns, UDP then TCP when truncated, or --tcp, within --timeout) for the zone's DS RRset and compares it with the keys the running node's plan publishes (the configuration's dnssec.keys when no node answers, and it says so): each DS is printed with the KSK it names (SHA-256 and SHA-384 digests; SHA-1 is matched too), each KSK the parent should point at and does not, and each DS that matches no published KSK. It exits 0 only when the parent's DS set is what the plan says it should be, 1 otherwise.",
		func(fs *flag.FlagSet) { dnssecFlags(fs) }},
	{"rum", "report [NAME] [--config FILE | --api URL [--token-file FILE]] [--country-factor 1.5] [--neighbour-km 2000] [--margin 0.2] [--min-count 3] [--limit 50] [--json]",
		"find where GeoIP is wrong from real-user measurements",
		"report asks the running node (its admin API, found as steer explain finds it) to compare the real-user measurements its beacon listener (rum.listen) aggregated with what the policy of record NAME (default: the one record steered by latency) chooses: per country, as GeoIP places networks, and per site the p75 users measured and the beacons behind it; the countries whose p75 to the sites the policy chooses is above --country-factor times the median of their neighbours' (countries whose centres are within --neighbour-km, else those of the continent); the networks GeoIP seems to misplace (their measured best site beats, by the margin, the site best for the country GeoIP puts them in; the country they resemble is named); and the networks steered to a site slower than their measured best by more than the margin (the latency map's switch_margin unless --margin). Each finding says how many beacons back it. --json prints the API's answer (GET /v1/rum/report).",
		func(fs *flag.FlagSet) { rumFlags(fs) }},
	{"version", "", "print the version, commit, build date and Go version", "Print the version, the commit it was built from, the build date and the Go version.", nil},
	{"completion", "bash|zsh|fish", "print a shell completion script",
		"Print a completion script for the shell: source <(steer completion bash), or install it where the shell looks (the Debian package does).", nil},
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseInterspersed parses args with fs, flags before or after the
// positional arguments, and returns the positionals in order; false
// when a flag is bad (fs has said why).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		if fs.NArg() == 0 {
			return pos, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

type serveOpts struct {
	config, pidFile, logFormat, logLevel *string
	listen                               *listFlag
	watchInterval                        *time.Duration
}

func serveFlags(fs *flag.FlagSet) serveOpts {
	var o serveOpts
	o.config = fs.String("config", "", "configuration file (default: "+DefaultConfig+" if it exists, else the embedded demo)")
	o.listen = &listFlag{}
	fs.Var(o.listen, "listen", "address to serve DNS on, host:port (repeatable; replaces the config's listen)")
	o.pidFile = fs.String("pid-file", "", "write the process ID to this file")
	o.logFormat = fs.String("log-format", "text", "log format: text or json")
	o.logLevel = fs.String("log-level", "info", "log level: debug, info, warn or error")
	o.watchInterval = fs.Duration("watch-interval", 5*time.Second, "how often geo database, latency and health feed files are checked for changes")
	return o
}

type checkOpts struct{ config *string }

func checkFlags(fs *flag.FlagSet) checkOpts {
	return checkOpts{fs.String("config", "", "configuration file to check (default: "+DefaultConfig+")")}
}

type explainOpts struct {
	config, apiURL, tokenFile, qtype, ecs, from, node *string
	offline, json, dnssec                             *bool
}

func explainFlags(fs *flag.FlagSet) explainOpts {
	var o explainOpts
	o.config = fs.String("config", "", "configuration file: its api.listen and token find the running node; with --offline, what is explained (default: "+DefaultConfig+" if it exists, else the embedded demo)")
	o.apiURL = fs.String("api", "", "admin API of the running node, e.g. http://127.0.0.1:8053 (default: the config's api.listen)")
	o.tokenFile = fs.String("token-file", "", "bearer token for --api (default: the config's api token)")
	o.offline = fs.Bool("offline", false, "explain the configuration alone, without asking a running node")
	o.qtype = fs.String("type", "A", "query type")
	o.ecs = fs.String("ecs", "", "client subnet to send, e.g. 49.36.0.0/24 (default: none)")
	o.from = fs.String("from", "127.0.0.1", "resolver address the query comes from")
	o.json = fs.Bool("json", false, "print JSON")
	o.node = fs.String("node", "", "in a fleet: answer as this node of the fleet would (its name, region, country and location decide), with the asked node's live health; needs a running node")
	o.dnssec = fs.Bool("dnssec", true, "ask with the DO bit and list the answer's signatures (--dnssec=false: without)")
	return o
}

// flagList is a command's flags in order of name.
func flagList(c command) []*flag.Flag {
	if c.flags == nil {
		return nil
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.flags(fs)
	var fl []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { fl = append(fl, f) })
	sort.Slice(fl, func(i, j int) bool { return fl[i].Name < fl[j].Name })
	return fl
}

// isBool says whether a flag takes no value.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func usage() string {
	var b strings.Builder
	b.WriteString("steer: a GeoDNS authoritative nameserver\n\nusage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  steer %s %s\n", c.name, c.synopsis)
	}
	b.WriteString("\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(&b, "\nWithout --config, serve, check, explain and simulate use %s when it\n"+
		"exists; serve, explain and simulate otherwise use the embedded demo configuration\n"+
		"(zone example.com on 127.0.0.1:5353 and [::1]:5353).\n"+
		"Signals: SIGHUP reloads the configuration and zones and reopens the query\n"+
		"log; SIGUSR1 reopens the query log only; SIGTERM and SIGINT stop.\n"+
		"steer COMMAND -h lists a command's flags; man steer, man steer.yaml.\n", DefaultConfig)
	return b.String()
}
