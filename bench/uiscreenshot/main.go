// Command uiscreenshot draws the README's picture of the dashboard: it
// serves Larkbook's demo configuration (examples/larkbook, with the admin
// API and a token added, on free loopback ports), sends queries from
// clients around the world so the shares have something to show, logs in
// with headless Chromium, waits for the overview's table and map, and
// writes a PNG of the page. bench/ui-screenshot.sh runs it.
//
//	go run ./bench/uiscreenshot -steer /tmp/steer -out docs/ui-overview.png
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/uitest"
)

func main() {
	steer := flag.String("steer", "steer", "the steer binary")
	out := flag.String("out", "docs/ui-overview.png", "the PNG to write")
	example := flag.String("example", "examples/larkbook", "the demo configuration's directory")
	width := flag.Int("width", 1280, "window width")
	height := flag.Int("height", 860, "window height")
	maxBytes := flag.Int("max-bytes", 300_000, "refuse a PNG larger than this")
	flag.Parse()
	if err := run(*steer, *out, *example, *width, *height, *maxBytes); err != nil {
		fmt.Fprintln(os.Stderr, "uiscreenshot:", err)
		os.Exit(1)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return 0, err
	}
	u.Close()
	return port, nil
}

func run(steerBin, out, example string, width, height, maxBytes int) error {
	chromium := uitest.FindChromium()
	if chromium == "" {
		return fmt.Errorf("no chromium (apt install chromium)")
	}
	dir, err := os.MkdirTemp("", "uiscreenshot")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg, err := os.ReadFile(filepath.Join(example, "steer.yaml"))
	if err != nil {
		return err
	}
	dnsPort, err := freePort()
	if err != nil {
		return err
	}
	apiPort, err := freePort()
	if err != nil {
		return err
	}
	// The demo as it is, on other ports, with the admin API.
	var lines []string
	for _, l := range strings.Split(string(cfg), "\n") {
		if strings.HasPrefix(l, "listen:") {
			l = fmt.Sprintf("listen: [\"127.0.0.1:%d\"]\napi: { listen: \"127.0.0.1:%d\", token_file: token }", dnsPort, apiPort)
		}
		lines = append(lines, l)
	}
	if err := os.CopyFS(filepath.Join(dir, "zones"), os.DirFS(filepath.Join(example, "zones"))); err != nil {
		return err
	}
	const token = "readme-screenshot"
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	config := filepath.Join(dir, "steer.yaml")
	if err := os.WriteFile(config, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(steerBin, "serve", "--config", config)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = serverProcAttr() // procattr_*.go
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	server := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	// Clients around the world; more from some than others, as a real day.
	clients := []struct {
		subnet string
		n      int
	}{
		{"49.36.0.0/24", 40}, {"117.192.0.0/24", 25}, {"91.64.1.0/24", 30}, {"90.0.0.0/24", 12}, {"81.2.69.0/24", 10},
		{"8.8.8.0/24", 35}, {"24.0.0.0/24", 20}, {"177.0.0.0/24", 8}, {"126.0.0.0/24", 10}, {"1.128.0.0/24", 6},
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := query(server, "shop.example.com", "49.36.0.0/24"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("steer did not answer on %s within 30 s", server)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range clients {
		for range c.n {
			if _, err := query(server, "shop.example.com", c.subnet); err != nil {
				return err
			}
		}
	}
	profile := filepath.Join(dir, "profile")
	b, err := uitest.StartBrowser(chromium, profile, uitest.Options{Width: width, Height: height})
	if err != nil {
		return err
	}
	defer b.Close()
	p, err := b.OpenPage(fmt.Sprintf("http://127.0.0.1:%d", apiPort))
	if err != nil {
		return err
	}
	defer p.Close()
	var shot []byte
	err = func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		p.Login(token)
		p.WaitFor(10*time.Second, "the overview's rows and map",
			`document.querySelector('table#records tr.pool-row') && document.querySelectorAll('svg#map circle.point').length > 0`)
		// The shares, once the node's counters have them (a warning only:
		// the picture is still the overview without them).
		func() {
			defer func() {
				if r := recover(); r != nil {
					fmt.Fprintln(os.Stderr, "uiscreenshot: warning: no share above 0 % shown:", r)
				}
			}()
			p.WaitFor(15*time.Second, "a share above 0 %", `Array.from(document.querySelectorAll('td.share-5m')).some((c) => /[1-9]/.test(c.textContent))`)
		}()
		time.Sleep(500 * time.Millisecond) // fonts and the last paint
		shot, err = p.CaptureScreenshot("")
		return err
	}()
	if err != nil {
		return err
	}
	if err := uitest.CheckPicture(shot, 5000, 6); err != nil {
		return err
	}
	if len(shot) > maxBytes {
		return fmt.Errorf("the PNG is %d bytes, more than %d", len(shot), maxBytes)
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %d bytes, %d × %d\n", out, len(shot), width, height)
	return nil
}

func query(server, name, subnet string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	_, n, err := net.ParseCIDR(subnet)
	if err != nil {
		return nil, err
	}
	ones, _ := n.Mask.Size()
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(1232)
	opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(ones), Address: n.IP.To4()})
	m.Extra = append(m.Extra, opt)
	c := &dns.Client{Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, server)
	return r, err
}
