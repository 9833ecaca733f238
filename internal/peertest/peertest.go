// Package peertest starts the reference DNS servers steer is compared with
// in tests — Knot DNS (knotd), NSD and BIND (named), as Debian packages
// them — each from its own configuration in a temporary directory, on a
// free loopback port, and stops each by its PID when the test ends.
//
// It owns only the starting, the readiness wait and the stopping; what a
// test asks the servers and how it compares their answers is the test's.
package peertest

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// Zone is one zone a peer serves: its origin and the absolute path of its
// master file.
type Zone struct {
	Origin string
	File   string
	// Config is added to this zone alone, in the peer's syntax (Knot's
	// zone: item, NSD's zone: clause, BIND's zone { } block): a signing
	// policy for one zone of several, say.
	Config string
}

// Options adds configuration to what a peer is started with, in the
// peer's own syntax.
type Options struct {
	// Server is added inside the server section (Knot's server:, NSD's
	// server:, BIND's options { }).
	Server string
	// Zone is added to every zone (Knot's default template, NSD's zone:
	// clauses, BIND's zone { } blocks).
	Zone string
	// Top is added at the top level of the file (Knot's mod-cookies:
	// sections, BIND's key { } blocks).
	Top string
}

// Server is a running peer.
type Server struct {
	// Name is "knot", "nsd" or "bind".
	Name string
	// Addr is where it answers, over UDP and TCP.
	Addr netip.AddrPort
	// Dir holds its configuration, state and log.
	Dir string
	// Log is what the server printed.
	Log *dnstest.LockedBuffer

	cmd    *exec.Cmd
	loaded map[string]bool
}

// Loaded reports whether the server serves origin (it answered the zone's
// SOA with authority when it started).
func (s *Server) Loaded(origin string) bool { return s.loaded[dns.CanonicalName(origin)] }

// Exchange asks the server m over network ("udp" or "tcp").
func (s *Server) Exchange(m *dns.Msg, network string) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: 3 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, s.Addr.String())
	return r, err
}

// StartKnot starts knotd serving zones. A zone that fails to load is left
// out (Loaded says which did load).
func StartKnot(t testing.TB, zones []Zone, o Options) *Server {
	t.Helper()
	dnstest.NeedTool(t, "knotd")
	return start(t, "knot", zones, func(dir string, port int) (string, []string) {
		var b strings.Builder
		fmt.Fprintf(&b, "server:\n  rundir: %q\n  listen: 127.0.0.1@%d\n  background-workers: 1\n  udp-workers: 1\n  tcp-workers: 1\n%s\n",
			dir, port, indent(o.Server, "  "))
		fmt.Fprintf(&b, "log:\n  - target: stderr\n    any: info\n")
		fmt.Fprintf(&b, "database:\n  storage: %q\n", filepath.Join(dir, "db"))
		b.WriteString(o.Top + "\n")
		fmt.Fprintf(&b, "template:\n  - id: default\n    storage: %q\n    zonefile-sync: -1\n    zonefile-load: whole\n    journal-content: none\n%s\n",
			dir, indent(o.Zone, "    "))
		b.WriteString("zone:\n")
		for _, z := range zones {
			fmt.Fprintf(&b, "  - domain: %q\n    file: %q\n%s\n", z.Origin, z.File, indent(z.Config, "    "))
		}
		conf := filepath.Join(dir, "knot.conf")
		writeFile(t, conf, b.String())
		// The journal (journal-content: changes) needs its database
		// directory to exist before the first change.
		if err := os.MkdirAll(filepath.Join(dir, "db"), 0o755); err != nil {
			t.Fatal(err)
		}
		return conf, []string{"knotd", "-c", conf}
	})
}

// StartNSD starts nsd in the foreground serving zones, without a chroot,
// a database or a control socket. NSD refuses a zone with any error in it
// and serves the others.
func StartNSD(t testing.TB, zones []Zone, o Options) *Server {
	t.Helper()
	dnstest.NeedTool(t, "nsd")
	return start(t, "nsd", zones, func(dir string, port int) (string, []string) {
		var b strings.Builder
		fmt.Fprintf(&b, `server:
  ip-address: 127.0.0.1@%d
  port: %d
  username: ""
  chroot: ""
  zonesdir: %q
  pidfile: %q
  xfrdfile: %q
  zonelistfile: %q
  xfrdir: %q
  database: ""
  server-count: 1
  verbosity: 1
  reuseport: no
  refuse-any: no
%s
remote-control:
  control-enable: no
%s
`, port, port, dir, filepath.Join(dir, "nsd.pid"), filepath.Join(dir, "xfrd.state"), filepath.Join(dir, "zone.list"), dir,
			indent(o.Server, "  "), o.Top)
		for _, z := range zones {
			fmt.Fprintf(&b, "zone:\n  name: %q\n  zonefile: %q\n%s\n%s\n", z.Origin, z.File, indent(o.Zone, "  "), indent(z.Config, "  "))
		}
		conf := filepath.Join(dir, "nsd.conf")
		writeFile(t, conf, b.String())
		return conf, []string{"nsd", "-d", "-c", conf}
	})
}

// StartBIND starts named in the foreground serving zones as primaries.
func StartBIND(t testing.TB, zones []Zone, o Options) *Server {
	t.Helper()
	dnstest.NeedTool(t, "named")
	return start(t, "bind", zones, func(dir string, port int) (string, []string) {
		var b strings.Builder
		fmt.Fprintf(&b, `options {
	directory %q;
	pid-file %q;
	listen-on port %d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	notify no;
	%s
};
%s
`, dir, filepath.Join(dir, "named.pid"), port, o.Server, o.Top)
		for _, z := range zones {
			fmt.Fprintf(&b, "zone %q { type primary; file %q; %s %s };\n", z.Origin, z.File, o.Zone, z.Config)
		}
		conf := filepath.Join(dir, "named.conf")
		writeFile(t, conf, b.String())
		args := []string{"named", "-g", "-n", "1", "-c", conf}
		if os.Geteuid() == 0 {
			args = append(args, "-u", "root")
		}
		return conf, args
	})
}

// start picks a port, writes the configuration, starts the server and
// waits (at most 15 s) until it answers and every zone has loaded or
// failed.
func start(t testing.TB, name string, zones []Zone, configure func(dir string, port int) (string, []string)) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "steer-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var lastErr string
	for attempt := 0; attempt < 3; attempt++ {
		port := dnstest.FreePort(t)
		_, args := configure(dir, port)
		s := &Server{Name: name, Dir: dir, Log: &dnstest.LockedBuffer{}, loaded: map[string]bool{},
			Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))}
		s.cmd = exec.Command(args[0], args[1:]...)
		s.cmd.Dir = dir
		s.cmd.Stdout, s.cmd.Stderr = s.Log, s.Log
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		exited := make(chan struct{})
		go func() { s.cmd.Wait(); close(exited) }()
		stop := func() {
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		if s.ready(zones, exited) {
			t.Cleanup(stop)
			return s
		}
		stop()
		lastErr = s.Log.String()
	}
	t.Fatalf("%s did not start:\n%s", name, lastErr)
	return nil
}

// ready waits until the server answers and each zone either answers its
// SOA with authority or has been reported failed in the log.
func (s *Server) ready(zones []Zone, exited <-chan struct{}) bool {
	deadline := time.Now().Add(15 * time.Second)
	pending := map[string]bool{}
	for _, z := range zones {
		pending[dns.CanonicalName(z.Origin)] = true
	}
	up := false
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		for origin := range pending {
			m := new(dns.Msg)
			m.SetQuestion(origin, dns.TypeSOA)
			c := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond}
			r, _, err := c.Exchange(m, s.Addr.String())
			if err != nil {
				break
			}
			up = true
			if r.Rcode == dns.RcodeSuccess && r.Authoritative && len(r.Answer) > 0 {
				s.loaded[origin] = true
				delete(pending, origin)
			} else if s.failed(origin) {
				delete(pending, origin)
			}
		}
		if up && len(pending) == 0 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return up
}

// failed reports whether the log says origin will not be served. NSD has
// read every zone before it answers at all.
func (s *Server) failed(origin string) bool {
	log := strings.ToLower(s.Log.String())
	o := strings.ToLower(origin)
	switch s.Name {
	case "knot":
		return strings.Contains(log, "["+o+"] zone event 'load' failed") || strings.Contains(log, "["+o+"] failed")
	case "nsd":
		return true
	case "bind":
		return strings.Contains(log, "zone "+strings.TrimSuffix(o, ".")+"/in: not loaded")
	}
	return false
}

func indent(s, pre string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pre + l
	}
	return strings.Join(lines, "\n")
}

func writeFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
