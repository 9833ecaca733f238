package health

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestValidateOK(t *testing.T) {
	for _, c := range []Check{
		{Name: "https-healthz", Type: "https", Path: "/healthz", Port: 443, Host: "shop.example.com", Expect: []int{200, 204}, Interval: 5 * time.Second, Timeout: 2 * time.Second, Rise: 2, Fall: 3},
		{Name: "tcp443", Type: "tcp", Port: 443, Interval: 5 * time.Second, Timeout: time.Second, Rise: 2, Fall: 2},
		{Name: "dns", Type: "dns", QName: "example.com", QType: dns.TypeSOA, Port: 53, Interval: 5 * time.Second, Timeout: time.Second},
		{Name: "plain", Type: "HTTP"},
		{Name: "fast", Type: "tcp", Port: 1, Interval: time.Second}, // timeout defaults to min(2s, interval)
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
}

func TestValidateErrors(t *testing.T) {
	for _, tt := range []struct {
		c    Check
		want []string
	}{
		{Check{Name: "x"}, []string{`check "x": type is required`}},
		{Check{Type: "icmp"}, []string{`unknown type "icmp"`}},
		{Check{Type: "tcp"}, []string{"port is required for tcp checks"}},
		{Check{Type: "http", Port: 70000}, []string{"port 70000 out of range 1-65535"}},
		{Check{Type: "http", Port: -1}, []string{"port -1 out of range"}},
		{Check{Type: "http", Path: "healthz"}, []string{`path "healthz" must start with /`}},
		{Check{Type: "http", Expect: []int{200, 42}}, []string{"expect: 42 is not an HTTP status code"}},
		{Check{Type: "http", Host: "a/b"}, []string{`host "a/b" is not a host name`}},
		{Check{Type: "http", InsecureSkipVerify: true}, []string{"insecure_skip_verify applies only to https checks"}},
		{Check{Type: "tcp", Port: 1, Path: "/", BodyContains: "ok"}, []string{"path applies only to http and https checks", "body_contains applies only to http and https checks"}},
		{Check{Type: "dns"}, []string{"name (the query name) is required for dns checks"}},
		{Check{Type: "dns", QName: "bad..name"}, []string{`name "bad..name" is not a domain name`}},
		{Check{Type: "tcp", Port: 1, QName: "example.com"}, []string{"name applies only to dns checks"}},
		{Check{Type: "tcp", Port: 1, Interval: -time.Second}, []string{"interval -1s is negative"}},
		{Check{Type: "tcp", Port: 1, Interval: time.Millisecond}, []string{"interval 1ms is shorter than 10ms"}},
		{Check{Type: "tcp", Port: 1, Timeout: -time.Second}, []string{"timeout -1s is negative"}},
		{Check{Type: "tcp", Port: 1, Interval: time.Second, Timeout: 3 * time.Second}, []string{"timeout 3s exceeds interval 1s"}},
		{Check{Type: "tcp", Port: 1, Rise: -1, Fall: 1000}, []string{"rise -1 out of range 1-100", "fall 1000 out of range 1-100"}},
	} {
		err := tt.c.Validate()
		if err == nil {
			t.Errorf("%+v: no error, want %q", tt.c, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q lacks %q", tt.c, err, w)
			}
		}
		if n := strings.Count(err.Error(), "\n") + 1; n != len(tt.want) {
			t.Errorf("%+v: %d problems reported, want %d: %v", tt.c, n, len(tt.want), err)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	c := Check{Type: "https"}.WithDefaults()
	if c.Port != 443 || c.Path != "/" || len(c.Expect) != 1 || c.Expect[0] != 200 ||
		c.Interval != 5*time.Second || c.Timeout != 2*time.Second || c.Rise != 2 || c.Fall != 3 {
		t.Errorf("https defaults: %+v", c)
	}
	if d := (Check{Type: "dns", QName: "a."}).WithDefaults(); d.Port != 53 || d.QType != dns.TypeSOA {
		t.Errorf("dns defaults: %+v", d)
	}
	if d := (Check{Type: "tcp", Interval: time.Second}).WithDefaults(); d.Timeout != time.Second {
		t.Errorf("timeout not capped at interval: %+v", d)
	}
}

// TestMachine checks the rise/fall counting exactly, result by result.
func TestMachine(t *testing.T) {
	for _, tt := range []struct {
		name       string
		start      Status
		restored   bool
		rise, fall int
		results    string // + pass, - fail
		want       string // status after each result: U up, D down, ? unknown
	}{
		{"unknown up on first success", Unknown, false, 2, 3, "+", "U"},
		{"unknown down after fall", Unknown, false, 2, 3, "---", "??D"},
		{"unknown failures then success", Unknown, false, 2, 3, "--+", "??U"},
		{"up down after fall", Up, false, 2, 3, "--+---", "UUUUUD"},
		{"down up after rise", Down, false, 2, 3, "+-++", "DDDU"},
		{"down rise 3", Down, false, 3, 2, "++-+++", "DDDDDU"},
		{"flapping never down fall 2", Up, false, 2, 2, "-+-+-+-+-+", "UUUUUUUUUU"},
		{"flapping never up rise 2", Down, false, 2, 2, "+-+-+-+-", "DDDDDDDD"},
		{"fall 1", Up, false, 1, 1, "-+-", "DUD"},
		{"restored down first success up", Down, true, 3, 3, "+", "U"},
		{"restored down failures stay down", Down, true, 3, 3, "-+", "DD"},
		{"restored up falls as usual", Up, true, 2, 2, "--", "UD"},
	} {
		mc := machine{status: tt.start, provisional: tt.restored}
		var got strings.Builder
		for _, r := range tt.results {
			old := mc.status
			changed := mc.step(r == '+', tt.rise, tt.fall)
			if changed != (old != mc.status) {
				t.Errorf("%s: step reported changed=%v for %v→%v", tt.name, changed, old, mc.status)
			}
			got.WriteByte(map[Status]byte{Unknown: '?', Up: 'U', Down: 'D'}[mc.status])
		}
		if got.String() != tt.want {
			t.Errorf("%s: %s gave %s, want %s", tt.name, tt.results, got.String(), tt.want)
		}
	}
}

func TestParseOverride(t *testing.T) {
	for s, want := range map[string]Override{"up": OverrideUp, "down": OverrideDown, "drain": OverrideDrain, "auto": OverrideNone} {
		o, err := ParseOverride(s)
		if err != nil || o != want || (s != "auto" && o.String() != s) {
			t.Errorf("ParseOverride(%q) = %v, %v", s, o, err)
		}
	}
	if _, err := ParseOverride("sideways"); err == nil {
		t.Error("ParseOverride(sideways): no error")
	}
}

// TestParseExpires is the one expiry rule of the admin API and the feed
// file: both refuse a time already past when the operator wrote it.
func TestParseExpires(t *testing.T) {
	ref := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"30m":                  ref.Add(30 * time.Minute),
		" 1h ":                 ref.Add(time.Hour),
		"2026-12-01T13:00:00Z": ref.Add(time.Hour),
	} {
		if got, err := ParseExpires(in, ref); err != nil || !got.Equal(want) {
			t.Errorf("ParseExpires(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"soon":                 "want a duration (30m) or an RFC 3339 time",
		"-5m":                  "the duration must be positive",
		"0s":                   "the duration must be positive",
		"2026-12-01T12:00:00Z": "the time is in the past",
		"2001-01-01T00:00:00Z": "the time is in the past",
	} {
		if _, err := ParseExpires(in, ref); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "expires") {
			t.Errorf("ParseExpires(%q): %v, want an error naming expires and saying %q", in, err, want)
		}
	}
}
