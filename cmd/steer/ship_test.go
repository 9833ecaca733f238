package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// serveFirstLine runs "steer serve" with env, waits for "msg=serving" and
// returns the first log line and the whole log.
func serveLog(t *testing.T, env []string, args ...string) (first, all string) {
	t.Helper()
	cmd := exec.Command(steerBin, append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var lines []string
	sc := bufio.NewScanner(stderr)
	found := make(chan struct{})
	go func() {
		defer close(found)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), "msg=serving") {
				return
			}
		}
	}()
	select {
	case <-found:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-found
		t.Fatalf("no serving line:\n%s", strings.Join(lines, "\n"))
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if len(lines) == 0 {
		t.Fatal("no log")
	}
	return lines[0], strings.Join(lines, "\n")
}

// TestDefaultConfig: without --config, serve uses the default path when
// it exists, and otherwise serves the demo and says so first, as a
// warning; check uses the default path or asks for --config.
func TestDefaultConfig(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	missing := filepath.Join(dir, "absent.yaml")
	first, _ := serveLog(t, []string{"STEER_DEFAULT_CONFIG=" + missing}, "--listen", addr)
	want := "no --config and no " + missing + ": serving the embedded demo"
	if !strings.Contains(first, "level=WARN") || !strings.Contains(first, want) {
		t.Errorf("first log line %q, want a WARN with %q", first, want)
	}

	def := filepath.Join(dir, "steer.yaml")
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "default"))
	writeAtomic(t, def, fmt.Sprintf("listen: [%q]\nzones:\n  - { origin: example.com, file: example.com.zone }\n", addr))
	env := []string{"STEER_DEFAULT_CONFIG=" + def}
	first, all := serveLog(t, env)
	if strings.Contains(all, "embedded demo") || !strings.Contains(all, "config="+def) {
		t.Errorf("with %s present: first line %q\n%s", def, first, all)
	}

	check := func(env ...string) (int, string) {
		cmd := exec.Command(steerBin, "check")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, string(out)
	}
	if code, out := check(env...); code != 0 || !strings.Contains(out, def+": ok") {
		t.Errorf("check with the default present: %d %s", code, out)
	}
	if code, out := check("STEER_DEFAULT_CONFIG=" + missing); code != 2 || !strings.Contains(out, "--config FILE is required") {
		t.Errorf("check without a default: %d %s", code, out)
	}
}

// TestSdNotify runs serve with $NOTIFY_SOCKET: READY=1 once serving,
// RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 at SIGTERM.
func TestSdNotify(t *testing.T) {
	t.Parallel()                        // a subprocess waited on: overlaps the others
	dir, err := os.MkdirTemp("", "sdn") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sockPath := filepath.Join(dir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := sock.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	cmd := exec.Command(steerBin, "serve", "--listen", addr)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sockPath)
	var out bytes.Buffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	next := func(want string) string {
		t.Helper()
		select {
		case m := <-msgs:
			if !strings.HasPrefix(m, want) {
				t.Fatalf("notify %q, want %s...\n%s", m, want, out.String())
			}
			return m
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s\n%s", want, out.String())
		}
		return ""
	}
	next("READY=1")
	if r, err := query(addr, "example.com.", 6); err != nil || r.Rcode != 0 {
		t.Fatalf("not serving at READY=1: %v %v", r, err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	if m := next("RELOADING=1"); !strings.Contains(m, "MONOTONIC_USEC=") {
		t.Errorf("RELOADING without MONOTONIC_USEC: %q", m)
	}
	if m := next("READY=1"); !strings.Contains(m, "reload applied") {
		t.Errorf("after reload: %q", m)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, out.String())
	}
}

func steerOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(steerBin, args...).Output()
	if err != nil {
		t.Fatalf("steer %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// TestCompletion: each script names every command and flag and parses in
// its shell (where the shell is installed).
func TestCompletion(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	for _, sh := range []string{"bash", "zsh", "fish"} {
		script := steerOut(t, "completion", sh)
		for _, c := range commands {
			if !strings.Contains(script, c.name) {
				t.Errorf("%s: no command %s", sh, c.name)
			}
			for _, f := range flagList(c) {
				if !strings.Contains(script, f.Name) {
					t.Errorf("%s: no flag --%s of %s", sh, f.Name, c.name)
				}
			}
		}
		if _, err := exec.LookPath(sh); err != nil {
			continue
		}
		f := filepath.Join(t.TempDir(), "c."+sh)
		os.WriteFile(f, []byte(script), 0o644)
		if out, err := exec.Command(sh, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", sh, err, out)
		}
	}
	if sh, err := exec.LookPath("bash"); err == nil {
		// Complete "steer serve --log-l" in bash itself.
		script := steerOut(t, "completion", "bash")
		prog := script + "\nCOMP_WORDS=(steer serve --log-l); COMP_CWORD=2; _steer; echo \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(sh, "-c", prog).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "--log-level" {
			t.Errorf("bash completion of --log-l: %q %v", out, err)
		}
	}
	if fish, err := exec.LookPath("fish"); err == nil {
		f := filepath.Join(t.TempDir(), "steer.fish")
		os.WriteFile(f, []byte(steerOut(t, "completion", "fish")), 0o644)
		out, err := exec.Command(fish, "--no-config", "-c", "source "+f+"; complete -C'steer serve --log-l'").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "--log-level\t") {
			t.Errorf("fish completion of --log-l: %q %v", out, err)
		}
	}
	if code, _, _ := runCapture("completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d", code)
	}
}

func runCapture(args ...string) (int, string, string) {
	var o, e bytes.Buffer
	code := run(args, &o, &e)
	return code, o.String(), e.String()
}

// TestManpages: steer(1) documents every command and flag; both pages
// are valid roff (groff reports no warnings, where it is installed).
func TestManpages(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	page := steerOut(t, "manpage", "1")
	for _, c := range commands {
		if !strings.Contains(page, "steer "+c.name) {
			t.Errorf("steer(1) has no %s", c.name)
		}
		for _, f := range flagList(c) {
			if !strings.Contains(page, `\-\-`+strings.ReplaceAll(f.Name, "-", `\-`)) {
				t.Errorf("steer(1) has no --%s of %s", f.Name, c.name)
			}
		}
	}
	conf := steerOut(t, "manpage", "5")
	for _, key := range []string{"listen", "zones", "records", "health_checks", "latency", "rrl", "cookies", "api", "anycast"} {
		if !strings.Contains(conf, ".B "+key+"\n") {
			t.Errorf("steer.yaml(5) has no %s", key)
		}
	}
	if _, err := exec.LookPath("groff"); err != nil {
		return
	}
	for name, text := range map[string]string{"steer.1": page, "steer.yaml.5": conf} {
		cmd := exec.Command("groff", "-man", "-ww", "-z")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff %s: %v\n%s", name, err, out)
		}
	}
}

// TestUsageFromDefinitions: --help lists what the man page does.
func TestUsageFromDefinitions(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	code, out, _ := runCapture("--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, c := range commands {
		if !strings.Contains(out, "steer "+c.name+" "+c.synopsis) {
			t.Errorf("usage has no %q", "steer "+c.name+" "+c.synopsis)
		}
	}
}
