package latency

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/geo"
)

// MaxClockSkew is how far in the future a measured_at may be before Check
// rejects it: up to this much is taken as clock skew (and Store.Update
// counts it as now).
const MaxClockSkew = time.Minute

// MaxProblems is how many problems a CheckError lists; the rest are only
// counted.
const MaxProblems = 5

// maxKnownSites is how many known site names an unknown-site problem lists.
const maxKnownSites = 10

// Origin is where a measurement was read. ParseCSV and ParseJSON fill it
// in; it is the zero Origin for a measurement built in code.
type Origin struct {
	Name string // the name given to the parser ("latency.csv", "body")
	// Pos is the CSV line number (1-based) or, when JSON is set, the JSON
	// array index (0-based).
	Pos  int
	JSON bool
}

// String names the entry the way parse errors do: "name:line" for CSV,
// "name: [index]" for JSON, "" for the zero Origin.
func (o Origin) String() string {
	switch {
	case o == Origin{}:
		return ""
	case o.JSON:
		return o.Name + ": [" + strconv.Itoa(o.Pos) + "]"
	}
	return o.Name + ":" + strconv.Itoa(o.Pos)
}

// CheckError is the error Check returns. Its message, one line, can be
// given to whoever sent the batch (an HTTP 400 reason, a log line).
type CheckError struct {
	// Problems are the first MaxProblems problems in batch order, each
	// starting with the entry it is about ("body: [2]: site ...").
	Problems []string
	// Total counts every problem found, including those not listed.
	Total int
}

// Error joins the problems with "; ", adding how many more there were.
func (e *CheckError) Error() string {
	s := strings.Join(e.Problems, "; ")
	if more := e.Total - len(e.Problems); more > 0 {
		s += fmt.Sprintf("; and %d more problem%s", more, plural(more))
	}
	return s
}

// Check reports whether a batch is fit to apply, as all or nothing: it
// returns nil, or a *CheckError listing what is wrong, each problem naming
// its entry by Origin (by "measurement N", the 0-based index in ms, when
// the Origin is zero). On top of Validate (which the parsers have already
// applied) it rejects:
//
//   - a site that is not in sites, the site names of the configuration's
//     latency-steered records (only true entries count; nil or empty means
//     no record is latency-steered, so every site is unknown);
//   - a country key that package geo does not know: the assigned ISO 3166-1
//     alpha-2 codes plus the codes geo databases emit (AN, AP, EU, XK), so
//     user-assigned codes such as XX or ZZ are rejected;
//   - a subdivision key whose country part is not such a country (the
//     subdivision part itself is not checked);
//   - a continent key other than AF AN AS EU NA OC SA;
//   - a MeasuredAt more than MaxClockSkew after now. Old measurements are
//     fine: they are merely stale.
//
// Check does not modify ms and does not allocate unless it finds a problem.
func Check(ms []Measurement, sites map[string]bool, now time.Time) error {
	c := checker{sites: sites}
	for i := range ms {
		c.check(i, &ms[i], now)
	}
	if c.err == nil {
		return nil
	}
	return c.err
}

// checker collects Check's problems.
type checker struct {
	sites map[string]bool
	known string      // the sorted known sites, built at the first unknown site
	err   *CheckError // nil until the first problem
}

// check adds the problems of ms[i], m.
func (c *checker) check(i int, m *Measurement, now time.Time) {
	if err := m.validateRest(); err != nil {
		c.add(i, m, "%v", err)
	}
	k, err := ParseKey(m.Key)
	if err != nil {
		c.add(i, m, "%v", err)
	} else {
		switch k.Kind {
		case KindCountry:
			if _, ok := geo.LookupCountry(k.Code); !ok {
				hint := ""
				if geo.IsContinent(k.Code) {
					hint = fmt.Sprintf("; for the continent write %s%s", ContinentPrefix, k.Code)
				}
				c.add(i, m, "country %q is not an ISO 3166-1 alpha-2 country code%s", m.Key, hint)
			}
		case KindSubdivision:
			if _, ok := geo.LookupCountry(k.Code[:2]); !ok {
				c.add(i, m, "subdivision %q: %q is not an ISO 3166-1 alpha-2 country code", m.Key, k.Code[:2])
			}
		}
		// A continent key that parses has a valid code: ParseKey rejects
		// the others ("bad continent key").
	}
	if m.Site != "" && !c.sites[m.Site] {
		c.add(i, m, "site %q is not a site of any latency-steered record (%s)", m.Site, c.knownSites())
	}
	if d := m.MeasuredAt.Sub(now); !m.MeasuredAt.IsZero() && d > MaxClockSkew {
		c.add(i, m, "measured_at %s is %s in the future (at most %s of clock skew is allowed)",
			m.MeasuredAt.Format(time.RFC3339), ahead(d), MaxClockSkew)
	}
}

// add records a problem of ms[i], m.
func (c *checker) add(i int, m *Measurement, format string, args ...any) {
	if c.err == nil {
		c.err = &CheckError{}
	}
	c.err.Total++
	if len(c.err.Problems) >= MaxProblems {
		return
	}
	where := m.Origin.String()
	if where == "" {
		where = "measurement " + strconv.Itoa(i)
	}
	c.err.Problems = append(c.err.Problems, where+": "+fmt.Sprintf(format, args...))
}

// knownSites describes the known sites: "known: a, b, c", truncated.
func (c *checker) knownSites() string {
	if c.known != "" {
		return c.known
	}
	var names []string
	for s, ok := range c.sites {
		if ok {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	switch n := len(names); {
	case n == 0:
		c.known = "no record is latency-steered"
	case n > maxKnownSites:
		c.known = fmt.Sprintf("known: %s and %d more", strings.Join(names[:maxKnownSites], ", "), n-maxKnownSites)
	default:
		c.known = "known: " + strings.Join(names, ", ")
	}
	return c.known
}

// ahead formats how far in the future a time is: to the second under two
// days, in days beyond.
func ahead(d time.Duration) string {
	if d < 48*time.Hour {
		return d.Round(time.Second).String()
	}
	return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + " days"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
