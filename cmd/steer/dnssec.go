package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnssec"
)

// dnssecOpts are steer dnssec's flags.
type dnssecOpts struct {
	algorithm, role, dir, config *string
	kskZSK                       *bool
	// ds-check, status, roll-ksk (dnssec_roll.go).
	apiURL, tokenFile, parentNS *string
	tcp, json, complete         *bool
	timeout                     *time.Duration
}

func dnssecFlags(fs *flag.FlagSet) dnssecOpts {
	o := dnssecOpts{
		algorithm: fs.String("algorithm", "ecdsap256sha256", "keygen, roll-ksk: ecdsap256sha256, ed25519 or rsasha256 (2048 bits); roll-ksk: default the old KSK's"),
		role:      fs.String("role", "csk", "keygen: csk (one key signs everything), ksk or zsk"),
		kskZSK:    fs.Bool("ksk-zsk", false, "keygen: make a KSK and a ZSK instead of a CSK"),
		dir:       fs.String("dir", ".", "keygen: the directory the key files are written to"),
		config:    fs.String("config", "", "ds: the configuration naming the zone's keys (default: "+DefaultConfig+", unless key files are given); status, roll-ksk, ds-check: its api.listen and token find the running node"),
	}
	rollFlags(fs, &o)
	return o
}

// dnssecCmd runs steer dnssec keygen|ds ZONE.
func dnssecCmd(args []string, stdout, stderr io.Writer) int {
	const use = "usage: steer dnssec keygen ZONE [--algorithm ecdsap256sha256|ed25519|rsasha256] [--ksk-zsk | --role csk|ksk|zsk] [--dir DIR]\n" +
		"       steer dnssec ds ZONE [--config FILE | KEYFILE...]\n" +
		"       steer dnssec ds-check ZONE --parent-ns ADDR[:PORT] [--tcp] [--timeout 5s] [--config FILE | --api URL [--token-file FILE]] [--json]\n" +
		"       steer dnssec status ZONE [--config FILE | --api URL [--token-file FILE]] [--json]\n" +
		"       steer dnssec roll-ksk ZONE [--algorithm ALG] [--config FILE | --api URL [--token-file FILE]] [--json]\n" +
		"       steer dnssec roll-ksk ZONE --complete --parent-ns ADDR[:PORT] [--tcp] [--timeout 5s] [--config FILE | --api URL [--token-file FILE]] [--json]"
	if len(args) == 0 || !slices.Contains(subWords["dnssec"], args[0]) {
		fmt.Fprintln(stderr, use)
		return 2
	}
	sub := args[0]
	fs := newFlagSet("dnssec "+sub, stderr)
	o := dnssecFlags(fs)
	pos, ok := parseInterspersed(fs, args[1:])
	if !ok {
		return 2
	}
	if len(pos) == 0 {
		fmt.Fprintln(stderr, use)
		return 2
	}
	zone := pos[0]
	if _, ok := dns.IsDomainName(zone); !ok {
		fmt.Fprintf(stderr, "steer dnssec %s: %q is not a domain name\n", sub, zone)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for f := range set {
		if !slices.Contains(dnssecFlagsOf[sub], f) {
			fmt.Fprintf(stderr, "steer dnssec %s: --%s does not go with %s\n%s\n", sub, f, sub, use)
			return 2
		}
	}
	switch sub {
	case "ds-check", "status", "roll-ksk":
		if len(pos) > 1 {
			fmt.Fprintf(stderr, "steer dnssec %s: takes one zone (got %q too)\n", sub, pos[1])
			return 2
		}
		switch sub {
		case "ds-check":
			return dsCheck(zone, o, stdout, stderr)
		case "status":
			return dnssecStatus(zone, o, stdout, stderr)
		}
		return rollKSK(zone, o, set, stdout, stderr)
	}
	if sub == "keygen" {
		if len(pos) > 1 || set["config"] {
			fmt.Fprintf(stderr, "steer dnssec keygen: takes one zone and no --config\n%s\n", use)
			return 2
		}
		return keygen(zone, o, set, stdout, stderr)
	}
	for _, f := range []string{"algorithm", "role", "ksk-zsk", "dir"} {
		if set[f] {
			fmt.Fprintf(stderr, "steer dnssec ds: --%s goes with keygen\n", f)
			return 2
		}
	}
	return printDS(zone, *o.config, pos[1:], stdout, stderr)
}

// keygen writes the zone's new key pair(s) and prints each base path, as
// dnssec-keygen prints the base name.
func keygen(zone string, o dnssecOpts, set map[string]bool, stdout, stderr io.Writer) int {
	alg, ok := dnssec.AlgorithmNames[strings.ToLower(*o.algorithm)]
	if !ok {
		fmt.Fprintf(stderr, "steer dnssec keygen: --algorithm %q is not ecdsap256sha256, ed25519 or rsasha256\n", *o.algorithm)
		return 2
	}
	var seps []bool
	switch {
	case *o.kskZSK && set["role"]:
		fmt.Fprintln(stderr, "steer dnssec keygen: give --ksk-zsk or --role, not both")
		return 2
	case *o.kskZSK:
		seps = []bool{true, false}
	case *o.role == "csk", *o.role == "ksk":
		seps = []bool{true}
	case *o.role == "zsk":
		seps = []bool{false}
	default:
		fmt.Fprintf(stderr, "steer dnssec keygen: --role %q is not csk, ksk or zsk\n", *o.role)
		return 2
	}
	now := time.Now()
	var written []string
	for _, sep := range seps {
		base, err := writeNewKey(zone, alg, sep, *o.dir, now)
		if err != nil {
			fmt.Fprintf(stderr, "steer dnssec keygen: %v\n", err)
			for _, b := range written { // all or nothing
				os.Remove(b + ".key")
				os.Remove(b + ".private")
			}
			return 1
		}
		written = append(written, base)
	}
	for _, b := range written {
		fmt.Fprintln(stdout, b)
	}
	return 0
}

// writeNewKey makes a key and writes it, making another should its file
// names (the key tag) be taken already.
func writeNewKey(zone string, alg uint8, sep bool, dir string, now time.Time) (string, error) {
	for range 8 {
		k, err := dnssec.GenerateKey(zone, alg, sep)
		if err != nil {
			return "", err
		}
		base, err := dnssec.WriteKey(dir, k, now)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return base, err
	}
	return "", fmt.Errorf("%s: every key made had the tag of a key already there", dir)
}

// printDS prints the DS records (SHA-256) of the zone's SEP keys: those
// of the key files given, else those the configuration names for it.
func printDS(zone, cfgPath string, files []string, stdout, stderr io.Writer) int {
	var fsys fs.FS
	bases := files
	if len(files) == 0 {
		if cfgPath == "" {
			cfgPath = defaultConfig()
		}
		cfg, err := config.Load(cfgPath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		i := slices.IndexFunc(cfg.Zones, func(z config.Zone) bool { return dns.CanonicalName(z.Origin) == dns.CanonicalName(zone) })
		switch {
		case i < 0:
			fmt.Fprintf(stderr, "steer dnssec ds: %s serves no zone %s\n", cfgPath, dns.CanonicalName(zone))
			return 1
		case !cfg.Zones[i].Signed():
			fmt.Fprintf(stderr, "%s:%d: zone %s has no dnssec section\n", cfgPath, cfg.Zones[i].Line, dns.CanonicalName(zone))
			return 1
		}
		fsys, bases = cfg.FS, cfg.KeyBases(i)
	} else if cfgPath != "" {
		fmt.Fprintln(stderr, "steer dnssec ds: give --config or key files, not both")
		return 2
	}
	n, bad := 0, false
	for _, b := range bases {
		dk, err := dnssec.ReadDNSKEY(fsys, b)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "steer dnssec ds: %v\n", err)
			bad = true
			continue
		case dk.Hdr.Name != dns.CanonicalName(zone):
			fmt.Fprintf(stderr, "steer dnssec ds: %s is a key for %s, not for %s\n", b, dk.Hdr.Name, dns.CanonicalName(zone))
			bad = true
			continue
		case dk.Flags&dns.SEP == 0:
			continue // a ZSK: the parent does not point at it
		}
		fmt.Fprintln(stdout, dnssec.DSLine(dnssec.DSOf(dk)))
		n++
	}
	if bad {
		return 1
	}
	if n == 0 {
		fmt.Fprintf(stderr, "steer dnssec ds: no key of %s has the SEP flag (a KSK or CSK)\n", dns.CanonicalName(zone))
		return 1
	}
	return 0
}
