// Package packaging holds the Debian package's files (nfpm.yaml, the
// starter configuration, the systemd unit, the maintainer scripts) and the
// test that builds the package with scripts/package.sh, checks it, installs
// it on this machine and removes it again.
package packaging

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// need skips when a tool is missing, or fails with STEER_REQUIRE_TOOLS=1
// (scripts/test.sh installs them).
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("STEER_REQUIRE_TOOLS") == "1" {
				t.Fatalf("%s is not installed (STEER_REQUIRE_TOOLS=1)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("%s %s: %v", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// dpkgRun runs dpkg, waiting out another dpkg or apt holding its lock.
func dpkgRun(t *testing.T, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := exec.Command("dpkg", args...).CombinedOutput()
		if err == nil {
			return string(out)
		}
		if !strings.Contains(string(out), "lock") || time.Now().After(deadline) {
			t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		time.Sleep(time.Second)
	}
}

func installed() bool {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "steer").Output()
	return err == nil && strings.Contains(string(out), "installed")
}

// TestDebianPackage builds the package, checks its metadata, files and
// lintian, installs it, runs the installed steer, verifies the unit, and
// purges it: nothing it installed may remain.
func TestDebianPackage(t *testing.T) {
	need(t, "go", "dpkg", "dpkg-deb", "lintian")
	if os.Geteuid() != 0 {
		if os.Getenv("STEER_REQUIRE_TOOLS") == "1" {
			t.Fatal("installing the package needs root (STEER_REQUIRE_TOOLS=1)")
		}
		t.Skip("installing the package needs root")
	}
	if installed() {
		t.Skip("a steer package is installed on this machine already; not touching it")
	}
	start := time.Now()
	out := t.TempDir()
	cmd := exec.Command("../scripts/package.sh")
	cmd.Env = append(os.Environ(), "OUT="+out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/package.sh: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	deb := lines[len(lines)-1]
	t.Logf("built %s in %v", filepath.Base(deb), time.Since(start).Round(time.Millisecond))

	info := sh(t, "dpkg-deb", "--info", deb)
	for _, want := range []string{"Package: steer", "Architecture: ", "Depends: adduser", "postinst", "postrm", "conffiles"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb --info has no %q:\n%s", want, info)
		}
	}
	cf := sh(t, "sh", "-c", "dpkg-deb --ctrl-tarfile "+deb+" | tar -xO ./conffiles")
	for _, want := range []string{"/etc/steer/steer.yaml", "/etc/steer/zones/example.com.zone"} {
		if !strings.Contains(cf, want+"\n") {
			t.Errorf("not a conffile: %s (conffiles: %q)", want, cf)
		}
	}
	contents := sh(t, "dpkg-deb", "--contents", deb)
	files := []string{
		"./usr/bin/steer", "./etc/steer/steer.yaml", "./etc/steer/zones/example.com.zone",
		"./lib/systemd/system/steer.service", "./usr/share/man/man1/steer.1.gz", "./usr/share/man/man5/steer.yaml.5.gz",
		"./usr/share/bash-completion/completions/steer", "./usr/share/zsh/vendor-completions/_steer",
		"./usr/share/fish/vendor_completions.d/steer.fish", "./usr/share/doc/steer/copyright",
		"./usr/share/doc/steer/THIRD_PARTY_NOTICES.gz", "./var/lib/steer/",
	}
	for _, f := range files {
		if !strings.Contains(contents, " "+f+"\n") {
			t.Errorf("package has no %s", f)
		}
	}

	// lintian: no errors; warnings are reported, not failed. It reads
	// the .deb alone and is the test's longest step (single-threaded
	// CPU): it runs while the package is installed, served and purged,
	// which mostly wait, and is waited for at the end (and before the
	// .deb's directory is removed, if the test stops early).
	lintian := make(chan []byte, 1)
	var lintianTook time.Duration
	go func() {
		start := time.Now()
		lout, _ := exec.Command("lintian", "--tag-display-limit", "0", deb).CombinedOutput()
		lintianTook = time.Since(start)
		lintian <- lout
	}()
	var lout []byte
	lintianDone := false
	waitLintian := func() []byte {
		if !lintianDone {
			lout, lintianDone = <-lintian, true
		}
		return lout
	}
	t.Cleanup(func() { waitLintian() })

	t.Cleanup(func() {
		if installed() {
			if out, err := exec.Command("dpkg", "--purge", "steer").CombinedOutput(); err != nil {
				t.Errorf("cleanup: dpkg --purge steer: %v\n%s", err, out)
			}
		}
	})
	dpkgRun(t, "-i", deb)
	ver := sh(t, "/usr/bin/steer", "version")
	if !strings.HasPrefix(ver, "steer v") {
		t.Errorf("installed steer version:\n%s", ver)
	}
	// From a git checkout the package names its commit (not from a tarball).
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		if want := "commit:     " + strings.TrimSpace(string(head)); !strings.Contains(ver, want) {
			t.Errorf("installed steer version, want %q:\n%s", want, ver)
		}
	}
	if out := sh(t, "/usr/bin/steer", "check", "--config", "/etc/steer/steer.yaml"); !strings.Contains(out, ": ok") {
		t.Errorf("steer check of the starter config: %s", out)
	}
	// The service's user can read it too.
	sh(t, "su", "-s", "/bin/sh", "steer", "-c", "/usr/bin/steer check --config /etc/steer/steer.yaml")
	if out := sh(t, "id", "steer"); !strings.Contains(out, "(steer)") {
		t.Errorf("id steer: %s", out)
	}
	if fi, err := os.Stat("/var/lib/steer"); err != nil || !fi.IsDir() {
		t.Errorf("/var/lib/steer: %v", err)
	}
	serveAsSteer(t)
	dpkgRun(t, "-i", deb) // again: postinst is idempotent (the user exists)
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		if out := sh(t, "systemd-analyze", "verify", "/lib/systemd/system/steer.service"); strings.TrimSpace(out) != "" {
			t.Errorf("systemd-analyze verify: %s", out)
		}
		sec := exec.Command("systemd-analyze", "security", "--offline=yes", "/lib/systemd/system/steer.service")
		if o, _ := sec.CombinedOutput(); len(o) > 0 {
			ls := strings.Split(strings.TrimSpace(string(o)), "\n")
			t.Logf("systemd-analyze security: %s", ls[len(ls)-1])
		}
	} else if os.Getenv("STEER_REQUIRE_TOOLS") == "1" {
		t.Error("systemd-analyze is not installed (STEER_REQUIRE_TOOLS=1)")
	}

	// Nothing of the steer user may still run when the package goes:
	// a process outliving the wrapper that served it would write its
	// state again after postrm removed /var/lib/steer.
	for deadline := time.Now().Add(10 * time.Second); exec.Command("pgrep", "-u", "steer").Run() == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			out, _ := exec.Command("ps", "-u", "steer", "-o", "pid,args").CombinedOutput()
			t.Fatalf("processes of the steer user still run 10 s after the test stopped its server:\n%s", out)
		}
	}
	dpkgRun(t, "--purge", "steer")
	if installed() {
		t.Fatal("steer still installed after dpkg --purge")
	}
	for _, f := range append(files, "/etc/steer", "/etc/systemd/system/multi-user.target.wants/steer.service") {
		f = strings.TrimSuffix(strings.TrimPrefix(f, "."), "/")
		if _, err := os.Lstat(f); err == nil {
			ls, _ := exec.Command("ls", "-laR", f).CombinedOutput()
			t.Errorf("%s is left after dpkg --purge:\n%s", f, ls)
		}
	}
	if err := exec.Command("getent", "passwd", "steer").Run(); err == nil {
		t.Error("user steer is left after dpkg --purge")
	}
	lintianWait := time.Now()
	for _, l := range strings.Split(string(waitLintian()), "\n") {
		switch {
		case strings.HasPrefix(l, "E: "):
			t.Errorf("lintian: %s", l)
		case strings.HasPrefix(l, "W: "):
			t.Logf("lintian: %s", l)
		}
	}
	t.Logf("lintian: %v, beside the install; waited %v for it after the rest", lintianTook.Round(time.Millisecond), time.Since(lintianWait).Round(time.Millisecond))
	t.Logf("package test took %v", time.Since(start).Round(time.Millisecond))
}

// serveAsSteer runs the installed steer as the unit does: the steer user,
// only CAP_NET_BIND_SERVICE (ambient), the packaged configuration on
// port 53, $NOTIFY_SOCKET. It must report READY=1, answer the steered
// name, stop on SIGTERM and leave its state file in /var/lib/steer.
func serveAsSteer(t *testing.T) {
	t.Helper()
	const addr = "127.0.0.1:53"
	if l, err := net.ListenPacket("udp", addr); err != nil {
		t.Logf("%s is busy (%v): not serving the starter configuration", addr, err)
		return
	} else {
		l.Close()
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Logf("no setpriv: not serving the starter configuration")
		return
	}
	dir, err := os.MkdirTemp("", "steer-notify")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	sockPath := filepath.Join(dir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	os.Chmod(sockPath, 0o777)
	cmd := exec.Command("setpriv", "--reuid=steer", "--regid=steer", "--init-groups",
		"--inh-caps=+net_bind_service", "--ambient-caps=+net_bind_service", "--",
		"/usr/bin/steer", "serve", "--config", "/etc/steer/steer.yaml", "--listen", addr)
	cmd.Dir = "/var/lib/steer"
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sockPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	sock.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	n, err := sock.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "READY=1") {
		t.Fatalf("no READY=1 from steer serve as the steer user (%v %q):\n%s", err, buf[:n], out.String())
	}
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	r, err := dns.Exchange(m, addr)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("www.example.com A on %s: %v %v\n%s", addr, err, r, out.String())
	}
	a := r.Answer[0].(*dns.A).A.String()
	if a != "198.51.100.20" && a != "192.0.2.30" {
		t.Errorf("www.example.com A %s, want a pool's address", a)
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGINT: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit after SIGINT\n%s", out.String())
	}
	if fi, err := os.Stat("/var/lib/steer/health.json"); err != nil {
		t.Errorf("no state file written by the steer user: %v\n%s", err, out.String())
	} else {
		t.Logf("served %s as the steer user with CAP_NET_BIND_SERVICE; state file %d bytes", addr, fi.Size())
	}
}
