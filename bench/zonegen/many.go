package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// tlds spread the many zones over a few parents, as a hosting provider's
// customers' zones are.
var tlds = []string{"com", "net", "org", "io", "de", "test"}

// ManyOrigin is the i-th zone of the many-zones set (0-based).
func manyOrigin(i int) string { return fmt.Sprintf("cust%06d.%s.", i, tlds[i%len(tlds)]) }

// manyZone writes the ten records of the i-th zone (serial s); the www A
// record is wwwA.
func manyZone(w *bufio.Writer, origin string, i, s int, wwwA string) {
	fmt.Fprintf(w, "$ORIGIN %s\n$TTL 3600\n", origin)
	fmt.Fprintf(w, "@ 3600 IN SOA ns1.hosting.test. hostmaster.hosting.test. %d 7200 3600 1209600 300\n", s)
	fmt.Fprintf(w, "@ 86400 IN NS ns1.hosting.test.\n@ 86400 IN NS ns2.hosting.test.\n")
	fmt.Fprintf(w, "@ IN MX 10 mail\n@ IN TXT \"v=spf1 mx -all\"\n")
	fmt.Fprintf(w, "@ IN A %s\nwww IN A %s\nwww IN AAAA %s\n", a4(2*i), wwwA, a6(i))
	fmt.Fprintf(w, "mail IN A %s\nftp IN CNAME www\n", a4rr(i))
}

// many writes N zones of ten records each, the many-zones benchmark's
// data (bench/manyzones.sh):
//
//	DIR/zones/<origin>zone   one file per zone, serial S
//	DIR/origins.txt          the origins, one a line, in order
//	DIR/changed.zone         the changed zone's second version (serial S+1,
//	                         www A changed), to be copied over its file
//	DIR/probes.tsv           probes of the first, changed and last zones
//
// and prints the probes. The probe "last" is the last zone's www A,
// "changed" the changed zone's www A (old and new).
func many(args []string) error {
	fs := flag.NewFlagSet("many", flag.ExitOnError)
	n := fs.Int("zones", 10000, "number of zones")
	out := fs.String("out", "", "output directory")
	fs.Parse(args)
	if *out == "" || *n < 3 {
		return fmt.Errorf("many: -out is needed and -zones at least 3")
	}
	zdir := filepath.Join(*out, "zones")
	if err := os.MkdirAll(zdir, 0o755); err != nil {
		return err
	}
	ol, err := os.Create(filepath.Join(*out, "origins.txt"))
	if err != nil {
		return err
	}
	obw := bufio.NewWriter(ol)
	bw := bufio.NewWriterSize(nil, 4096)
	write := func(path, origin string, i, s int, wwwA string) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		bw.Reset(f)
		manyZone(bw, origin, i, s, wwwA)
		if err := bw.Flush(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	changed := *n / 2
	for i := 0; i < *n; i++ {
		o := manyOrigin(i)
		if err := write(filepath.Join(zdir, o+"zone"), o, i, serial, a4(2*i+1)); err != nil {
			return err
		}
		fmt.Fprintln(obw, o)
	}
	if err := obw.Flush(); err != nil {
		return err
	}
	if err := ol.Close(); err != nil {
		return err
	}
	co := manyOrigin(changed)
	if err := write(filepath.Join(*out, "changed.zone"), co, changed, serial+1, "192.0.2.77"); err != nil {
		return err
	}

	var ps []probe
	add := func(label, name, qtype, kind, rcode string, w1, w2 []string) {
		k := func(ws []string) []string {
			o := make([]string, len(ws))
			for i, t := range ws {
				o[i] = mustKey(t)
			}
			sort.Strings(o)
			return o
		}
		k1 := k(w1)
		k2 := k1
		if w2 != nil {
			k2 = k(w2)
		}
		ps = append(ps, probe{label, name, qtype, kind, rcode, k1, k2})
	}
	soaOf := func(o string, s int) string {
		return fmt.Sprintf("%s 3600 IN SOA ns1.hosting.test. hostmaster.hosting.test. %d 7200 3600 1209600 300", o, s)
	}
	for _, z := range []struct {
		label string
		i     int
	}{{"first", 0}, {"changed", changed}, {"last", *n - 1}} {
		o := manyOrigin(z.i)
		var w2 []string
		s2 := serial
		if z.i == changed {
			w2 = []string{"www." + o + " 3600 IN A 192.0.2.77"}
			s2 = serial + 1
		}
		add(z.label, "www."+o, "A", "answer", "NOERROR", []string{"www." + o + " 3600 IN A " + a4(2*z.i+1)}, w2)
		add(z.label+"-soa", o, "SOA", "answer", "NOERROR", []string{soaOf(o, serial)}, []string{soaOf(o, s2)})
		add(z.label+"-ns", o, "NS", "answer", "NOERROR", []string{o + " 86400 IN NS ns1.hosting.test.", o + " 86400 IN NS ns2.hosting.test."}, nil)
		add(z.label+"-aaaa", "www."+o, "AAAA", "answer", "NOERROR", []string{"www." + o + " 3600 IN AAAA " + a6(z.i)}, nil)
		add(z.label+"-nxdomain", "nope."+o, "A", "nxdomain", "NXDOMAIN", []string{soaOf(o, serial)}, []string{soaOf(o, s2)})
	}
	pf, err := os.Create(filepath.Join(*out, "probes.tsv"))
	if err != nil {
		return err
	}
	pw := bufio.NewWriter(pf)
	fmt.Fprintln(pw, "# label\tname\ttype\tkind\trcode\twant (version 1)\twant (version 2)")
	for _, p := range ps {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", p.label, p.name, p.qtype, p.kind, p.rcode, strings.Join(p.want1, " ; "), strings.Join(p.want2, " ; "))
		fmt.Fprintln(pw, line)
		fmt.Println(line)
	}
	if err := pw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "zonegen: %d zones of 10 records in %s (changed: %s)\n", *n, zdir, co)
	return pf.Close()
}
