package steeringtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// steerBinary builds cmd/steer once for the package (dnstest.SteerBinary:
// one link shared with the other packages that run it) and returns its path.
func steerBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "steer-bin-"); binErr != nil {
			return
		}
		binPath, binErr = dnstest.SteerBinary(binDir)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// runSteer runs the steer binary with args and returns stdout, stderr and
// the exit code.
func runSteer(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	bin := steerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("steer %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// writeConfig writes the test configuration and zone into a new temporary
// directory and returns the configuration's path and text.
func writeConfig(t *testing.T, o cfgOpts, edit func(string) string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	f := files(t, o)
	if edit != nil {
		f["steer.yaml"] = edit(f["steer.yaml"])
	}
	dnstest.WriteFiles(t, dir, f)
	return filepath.Join(dir, "steer.yaml"), f["steer.yaml"]
}

// lineOf returns the 1-based line of the first line of text containing s.
func lineOf(t *testing.T, text, s string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q is not in the text", s)
	return 0
}

// explainReport is the part of `steer explain --json` the tests read.
type explainReport struct {
	Query string `json:"query"`
	Input struct {
		ECS       string `json:"ecs"`
		Resolver  string `json:"resolver"`
		Used      string `json:"used"`
		Truncated bool   `json:"truncated"`
	} `json:"input"`
	Steer []struct {
		Record string `json:"record"`
		Client string `json:"client"`
		Geo    struct {
			Country   string `json:"country"`
			Continent string `json:"continent"`
		} `json:"geo"`
		Rules []struct {
			Rule    int      `json:"rule"`
			Line    int      `json:"line"`
			Default bool     `json:"default"`
			Matched bool     `json:"matched"`
			Why     []string `json:"why"`
			Action  string   `json:"action"`
		} `json:"rules"`
		Ranking  []string `json:"geoproximity"`
		Decision string   `json:"decision"`
		Chosen   []string `json:"chosen"`
		Scope    int      `json:"partition_scope"`
	} `json:"steering"`
	Rcode  string   `json:"rcode"`
	Answer []string `json:"answer"`
	TTL    *uint32  `json:"ttl"`
	Scope  *int     `json:"ecs_scope"`
}

func explainJSON(t *testing.T, args ...string) explainReport {
	t.Helper()
	out, errOut, code := runSteer(t, append([]string{"explain"}, append(args, "--json")...)...)
	if code != 0 {
		t.Fatalf("steer explain exit %d: %s", code, errOut)
	}
	var rep explainReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("decoding the JSON: %v\n%s", err, out)
	}
	return rep
}

// wantBerlinText checks the text explanation of shop.example.com for the
// Berlin subnet.
func wantBerlinText(t *testing.T, out, cfgText string) {
	t.Helper()
	line := lineOf(t, cfgText, "- match: { continent: EU }")
	var missing []string
	for _, want := range []string{
		"ecs:      " + berlinPfx,
		"input:    " + berlinPfx,
		"client " + berlinPfx,
		"country=DE continent=EU subdivision=DE-BE",
		"country DE is not in [IN LK BD NP]",
		fmt.Sprintf("rule 2 (line %d, match on client): yes -> pool eu-central", line),
		"continent EU is in [EU]",
		fmt.Sprintf("decision: rule 2 (line %d) decides: pool eu-central -> eu-central", line),
		"rcode:    NOERROR",
		"answer:   shop.example.com.\t60\tIN\tA\t" + euCentral,
		"ttl:      60",
		"ecs scope: /28",
		"cookie:   absent",
		"rate limit: ",
	} {
		if !strings.Contains(out, want) {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		t.Errorf("explain output lacks %q:\n%s", missing, out)
	}
}

// TestExplainCLI runs `steer explain` on the test configuration.
func TestExplainCLI(t *testing.T) {
	cfg, cfgText := writeConfig(t, cfgOpts{}, nil)

	t.Run("text", func(t *testing.T) {
		// NAME first, then flags; and flags first, then NAME last.
		for _, args := range [][]string{
			{"explain", "shop.example.com", "--config", cfg, "--ecs", berlinPfx},
			{"explain", "--config", cfg, "--ecs", berlinPfx, "shop.example.com"},
		} {
			out, errOut, code := runSteer(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			wantBerlinText(t, out, cfgText)
		}
	})

	t.Run("json", func(t *testing.T) {
		line := lineOf(t, cfgText, "- match: { continent: EU }")
		rep := explainJSON(t, "shop.example.com", "--config", cfg, "--ecs", berlinPfx)
		if rep.Input.ECS != berlinPfx || rep.Input.Used != berlinPfx || rep.Input.Truncated {
			t.Errorf("input %+v, want ECS and used %s, not truncated", rep.Input, berlinPfx)
		}
		if len(rep.Steer) != 1 {
			t.Fatalf("%d steering steps, want 1", len(rep.Steer))
		}
		s := rep.Steer[0]
		if s.Record != "shop.example.com. A" || s.Client != berlinPfx || s.Geo.Country != "DE" || s.Geo.Continent != "EU" {
			t.Errorf("step %+v", s)
		}
		if want := fmt.Sprintf("rule 2 (line %d) decides: pool eu-central -> eu-central", line); s.Decision != want {
			t.Errorf("decision %q, want %q", s.Decision, want)
		}
		if len(s.Chosen) != 1 || s.Chosen[0] != "eu-central" || s.Scope != 28 {
			t.Errorf("chosen %v partition scope %d, want [eu-central] 28", s.Chosen, s.Scope)
		}
		if len(s.Rules) != 4 || s.Rules[0].Matched || !s.Rules[1].Matched || s.Rules[1].Line != line || s.Rules[2].Matched || !s.Rules[3].Default {
			t.Errorf("rules %+v", s.Rules)
		}
		if rep.Rcode != "NOERROR" || len(rep.Answer) != 1 || !strings.HasSuffix(rep.Answer[0], "\t"+euCentral) {
			t.Errorf("rcode %s answer %v", rep.Rcode, rep.Answer)
		}
		if rep.TTL == nil || *rep.TTL != 60 || rep.Scope == nil || *rep.Scope != 28 {
			t.Errorf("ttl %v ecs_scope %v, want 60 and 28", rep.TTL, rep.Scope)
		}
	})

	t.Run("resolver_without_ecs", func(t *testing.T) {
		defaultLine := lineOf(t, cfgText, "- default:")
		out, errOut, code := runSteer(t, "explain", "shop.example.com", "--config", cfg, "--from", singaporeResolver)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{
			"ecs:      none",
			"resolver: " + singaporeResolver,
			"input:    " + singaporeResolver + "/32",
			"country=SG continent=AS",
			fmt.Sprintf("rule 4 (line %d, default on client): yes", defaultLine),
			"geoproximity: ap-south ",
			fmt.Sprintf("decision: rule 4 (line %d) decides: geoproximity", defaultLine),
			"-> ap-south\n",
			"answer:   shop.example.com.\t60\tIN\tA\t" + apSouth,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("explain --from %s lacks %q:\n%s", singaporeResolver, want, out)
			}
		}
		if strings.Contains(out, "ecs scope") {
			t.Errorf("a query without ECS has no scope to report:\n%s", out)
		}
		rep := explainJSON(t, "shop.example.com", "--config", cfg, "--from", singaporeResolver)
		if len(rep.Steer) != 1 || len(rep.Steer[0].Ranking) != 3 {
			t.Fatalf("steering %+v, want one step ranking 3 pools", rep.Steer)
		}
		r := rep.Steer[0].Ranking
		if !strings.HasPrefix(r[0], "ap-south ") || !strings.HasPrefix(r[1], "eu-central ") || !strings.HasPrefix(r[2], "us-east ") {
			t.Errorf("geoproximity ranking %v, want ap-south, eu-central, us-east", r)
		}
		if rep.Scope != nil {
			t.Errorf("ecs_scope %d without ECS", *rep.Scope)
		}
	})

	// explain answers through the server's own handler: it agrees with a
	// live server on the answer and the scope.
	t.Run("agrees_with_server", func(t *testing.T) {
		srv := start(t, cfgOpts{})
		for _, c := range seedCases {
			if len(c.want) != 1 {
				continue // a split draws again per query
			}
			rep := explainJSON(t, "shop.example.com", "--config", cfg, "--ecs", c.subnet)
			k := kdigA(t, srv.V4, shop, c.subnet)
			if len(rep.Answer) != 1 || len(k.answers) != 1 || !strings.HasSuffix(rep.Answer[0], "\t"+k.answers[0].rdata) {
				t.Errorf("%s: explain says %v, the server %+v", c.city, rep.Answer, k.answers)
			}
			if rep.Scope == nil || k.ecs != fmt.Sprintf("%s/%d", c.subnet, *rep.Scope) {
				t.Errorf("%s: explain scope %v, server CLIENT-SUBNET %s", c.city, rep.Scope, k.ecs)
			}
		}
	})
}

// TestExplainCLIFlagsAfterName runs explain as its usage line writes it,
// `steer explain [--config FILE] NAME [--type A] [--ecs PREFIX] ...`: the
// flags after NAME must be honoured.
func TestExplainCLIFlagsAfterName(t *testing.T) {
	cfg, cfgText := writeConfig(t, cfgOpts{}, nil)
	out, errOut, code := runSteer(t, "explain", "--config", cfg, "shop.example.com", "--ecs", berlinPfx)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "ecs:      none") {
		t.Errorf("steer explain --config FILE NAME --ecs PREFIX: --ecs was silently ignored (exit 0, explained without ECS)")
	}
	wantBerlinText(t, out, cfgText)
	out, _, _ = runSteer(t, "explain", "--config", cfg, "shop.example.com", "--ecs", berlinPfx, "--json")
	if !strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Errorf("--json after NAME ignored: output is not JSON:\n%s", out)
	}
}

// TestCheckCLI runs `steer check` on configurations with steering errors:
// each is reported as file:line with exit status 1.
func TestCheckCLI(t *testing.T) {
	cfg, _ := writeConfig(t, cfgOpts{}, nil)
	out, errOut, code := runSteer(t, "check", "--config", cfg)
	if code != 0 || !strings.Contains(out, cfg+": ok") {
		t.Fatalf("check of the good configuration: exit %d\n%s%s", code, out, errOut)
	}

	for _, c := range []struct {
		name string
		edit func(string) string
		at   string // text on the line the error must point at
		msg  string
		also string // more text the same line must hold
	}{
		{
			// Reported at the rules: key of the record.
			name: "missing default rule",
			edit: func(s string) string {
				return strings.Replace(s, `      - default:
          by: geoproximity      # nearest pool by great-circle distance
          fallback: [ap-south, eu-central, us-east]
`, "", 1)
			},
			at:  "    rules:",
			msg: "record shop.example.com. has no default rule",
		},
		{
			// Reported at the rule's pool: key.
			name: "unknown pool",
			edit: func(s string) string { return strings.Replace(s, "pool: eu-central", "pool: eu-west", 1) },
			at:   "pool: eu-west",
			msg:  `unknown pool "eu-west"`,
		},
		{
			name: "unknown pool in a split",
			edit: func(s string) string { return strings.Replace(s, "pool: us-east-canary,", "pool: us-canary,", 1) },
			at:   "        split:",
			msg:  `unknown pool "us-canary"`,
		},
		{
			name: "record outside the served zones",
			edit: func(s string) string {
				return strings.Replace(s, "name: shop.example.com", "name: shop.example.org", 1)
			},
			at:  "- name: shop.example.org",
			msg: "record shop.example.org. is in no served zone",
		},
		{
			name: "record over static A records",
			edit: func(s string) string {
				return strings.Replace(s, "name: shop.example.com", "name: static.example.com", 1)
			},
			at:   "- name: static.example.com",
			msg:  "static.example.com. already has A records at ",
			also: "example.com.zone:" + itoa(lineOf(t, zoneFile, "static  IN A")) + "; a steered name's records come from its pools",
		},
		{
			name: "record over a CNAME",
			edit: func(s string) string { return strings.Replace(s, "name: shop.example.com", "name: www.example.com", 1) },
			at:   "- name: www.example.com",
			msg:  "www.example.com. already has CNAME records",
		},
		{
			name: "unknown continent",
			edit: func(s string) string { return strings.Replace(s, "continent: EU", "continent: EUR", 1) },
			at:   "continent: EUR",
			msg:  `unknown continent code "EUR"`,
		},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			path, text := writeConfig(t, cfgOpts{}, c.edit)
			out, errOut, code := runSteer(t, "check", "--config", path)
			if code != 1 {
				t.Errorf("exit %d, want 1\n%s%s", code, out, errOut)
			}
			want := fmt.Sprintf("%s:%d: ", path, lineOf(t, text, c.at))
			found := false
			for _, l := range strings.Split(errOut, "\n") {
				if strings.HasPrefix(l, want) && strings.Contains(l, c.msg) && strings.Contains(l, c.also) {
					found = true
				}
			}
			if !found {
				t.Errorf("stderr lacks a line %q...%q:\n%s", want, c.msg, errOut)
			}
			if strings.Contains(out, ": ok") {
				t.Errorf("check printed ok:\n%s", out)
			}
		})
	}
}
