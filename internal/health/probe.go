package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// prober runs one check against one address. It returns whether the check
// passed and a short human reason ("HTTP 503", "timeout after 2s").
type prober func(ctx context.Context) (ok bool, reason string)

// newProber builds the prober for check c (with defaults) against addr,
// including any per-check client.
func newProber(c Check, addr netip.Addr, dial DialFunc) prober {
	target := netip.AddrPortFrom(addr, uint16(c.Port)).String()
	if dial == nil {
		dial = (&net.Dialer{Timeout: c.Timeout}).DialContext
	}
	switch c.Type {
	case TypeHTTP, TypeHTTPS:
		return httpProber(c, target, dial)
	case TypeTCP:
		return func(ctx context.Context) (bool, string) {
			ctx, cancel := context.WithTimeout(ctx, c.Timeout)
			defer cancel()
			conn, err := dial(ctx, "tcp", target)
			if err != nil {
				return false, errReason(err, c)
			}
			conn.Close()
			return true, "connected"
		}
	case TypeDNS:
		return dnsProber(c, target)
	}
	return func(context.Context) (bool, string) { return false, "unknown check type " + c.Type }
}

// DialFunc opens a connection for a probe (net.Dialer.DialContext's
// shape).
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

func httpProber(c Check, target string, dial DialFunc) prober {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		DisableKeepAlives:   true, // each check proves a new connection works
		TLSHandshakeTimeout: c.Timeout,
		TLSClientConfig: &tls.Config{
			ServerName:         c.Host,
			InsecureSkipVerify: c.InsecureSkipVerify,
		},
		MaxResponseHeaderBytes: 64 << 10,
	}
	client := &http.Client{
		Transport: tr,
		Timeout:   c.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	u := c.Type + "://" + target + c.Path
	want := []byte(c.BodyContains)
	return func(ctx context.Context) (bool, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return false, err.Error()
		}
		if c.Host != "" {
			req.Host = c.Host
		}
		req.Header.Set("User-Agent", "steer-health/1")
		resp, err := client.Do(req)
		if err != nil {
			return false, errReason(err, c)
		}
		defer resp.Body.Close()
		code := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if !slices.Contains(c.Expect, resp.StatusCode) {
			return false, code
		}
		if len(want) > 0 {
			body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
			if !bytes.Contains(body, want) {
				if err != nil {
					return false, "body: " + errReason(err, c)
				}
				return false, fmt.Sprintf("body lacks %q", c.BodyContains)
			}
		}
		return true, code
	}
}

func dnsProber(c Check, target string) prober {
	client := &dns.Client{Net: "udp", Timeout: c.Timeout}
	name := dns.Fqdn(c.QName)
	return func(ctx context.Context) (bool, string) {
		q := new(dns.Msg)
		q.SetQuestion(name, c.QType)
		q.RecursionDesired = false
		r, _, err := client.ExchangeContext(ctx, q, target)
		if err != nil {
			return false, errReason(err, c)
		}
		rc := dns.RcodeToString[r.Rcode]
		if rc == "" {
			rc = fmt.Sprint(r.Rcode)
		}
		if r.Rcode != dns.RcodeSuccess {
			return false, "rcode " + rc
		}
		return true, "rcode " + rc
	}
}

// errReason turns a probe error into a short human string.
func errReason(err error, c Check) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return "timeout after " + c.Timeout.String()
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Error() // "connect: connection refused"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	s := err.Error()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		s = "connection closed early"
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.TrimSpace(s)
}
