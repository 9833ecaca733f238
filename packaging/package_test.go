// Package packaging holds the Debian package's files (nfpm.yaml, the
// starter configuration, the systemd unit, the maintainer scripts) and the
// test that builds the package with scripts/package.sh, checks it, installs
// it on this machine and removes it again.
package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

	// lintian: no errors; warnings are reported, not failed.
	lcmd := exec.Command("lintian", "--tag-display-limit", "0", deb)
	lout, _ := lcmd.CombinedOutput()
	for _, l := range strings.Split(string(lout), "\n") {
		switch {
		case strings.HasPrefix(l, "E: "):
			t.Errorf("lintian: %s", l)
		case strings.HasPrefix(l, "W: "):
			t.Logf("lintian: %s", l)
		}
	}

	t.Cleanup(func() {
		if installed() {
			if out, err := exec.Command("dpkg", "--purge", "steer").CombinedOutput(); err != nil {
				t.Errorf("cleanup: dpkg --purge steer: %v\n%s", err, out)
			}
		}
	})
	dpkgRun(t, "-i", deb)
	ver := sh(t, "/usr/bin/steer", "version")
	if !strings.HasPrefix(ver, "steer v") || strings.Contains(ver, "commit:     unknown") || strings.HasPrefix(ver, "steer dev") {
		t.Errorf("installed steer version:\n%s", ver)
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

	dpkgRun(t, "--purge", "steer")
	if installed() {
		t.Fatal("steer still installed after dpkg --purge")
	}
	for _, f := range append(files, "/etc/steer", "/etc/systemd/system/multi-user.target.wants/steer.service") {
		f = strings.TrimSuffix(strings.TrimPrefix(f, "."), "/")
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("%s is left after dpkg --purge", f)
		}
	}
	if err := exec.Command("getent", "passwd", "steer").Run(); err == nil {
		t.Error("user steer is left after dpkg --purge")
	}
	t.Logf("package test took %v", time.Since(start).Round(time.Millisecond))
}
