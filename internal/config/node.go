package config

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"strings"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/geo"
)

// Node is the identity of the node answering: rules may match on its name
// and region (match: node, node_region), and with ecs.unknown_client:
// node its location (or its country's) stands in for a client steering
// cannot place. It is fixed for the process: rules are evaluated against
// it when compiled.
type Node struct {
	// Name is the node's name: letters, digits, '-', '_' and '.'; default
	// fleet.node, else the host name.
	Name string `yaml:"name"`
	// Location is where the node is; optional.
	Location *Location `yaml:"location"`
	// Region is the node's region; default fleet.region.
	Region string `yaml:"region"`
	// Country is the ISO 3166-1 alpha-2 code of the node's country
	// (which gives its continent too); optional.
	Country string `yaml:"country"`
}

// The values of ecs.unknown_client.
const (
	// UnknownClientResolver steers a query with no usable ECS by the
	// resolver's address (the default).
	UnknownClientResolver = "resolver"
	// UnknownClientNode steers it by the node's location when the
	// resolver is in ecs.anycast_resolvers or the geo databases do not
	// place it.
	UnknownClientNode = "node"
)

// nodeNameChars are the characters of a node name.
const nodeNameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."

// ValidNodeName reports whether s is a node name: 1 to 63 letters,
// digits, '-', '_' or '.'.
func ValidNodeName(s string) bool {
	return s != "" && len(s) <= 63 && strings.Trim(s, nodeNameChars) == ""
}

// ValidRegion reports whether s may name a region: no '/' or spaces.
func ValidRegion(s string) bool { return !strings.ContainsAny(s, "/ \t") }

func (c *Config) applyNodeDefaults() {
	if c.ECS.UnknownClient == "" {
		c.ECS.UnknownClient = UnknownClientResolver
	}
	if c.Node == nil {
		if c.Fleet == nil {
			return
		}
		c.Node = &Node{}
	}
	n := c.Node
	if n.Name == "" {
		if c.Fleet != nil {
			n.Name = c.Fleet.Node
		} else {
			n.Name, _ = os.Hostname()
		}
	}
	if n.Region == "" && c.Fleet != nil {
		n.Region = c.Fleet.Region
	}
	n.Country = strings.ToUpper(n.Country)
}

func (c *Config) checkNode(probs *diag.Problems) {
	bad := func(key, format string, args ...any) {
		probs.Add(c.File, c.Line(key), "%s: %s", key, fmt.Sprintf(format, args...))
	}
	switch c.ECS.UnknownClient {
	case UnknownClientResolver, UnknownClientNode:
	default:
		bad("ecs.unknown_client", "%q is not resolver or node", c.ECS.UnknownClient)
	}
	seen := map[netip.Prefix]int{}
	for i, s := range c.ECS.AnycastResolvers {
		key := fmt.Sprintf("ecs.anycast_resolvers[%d]", i)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			if a, err2 := netip.ParseAddr(s); err2 == nil && a.Zone() == "" {
				p = netip.PrefixFrom(a, a.BitLen())
			} else {
				bad(key, "%q is not a CIDR prefix such as 1.1.1.0/24", s)
				continue
			}
		}
		switch {
		case p.Masked() != p:
			bad(key, "%s has host bits set (did you mean %s?)", s, p.Masked())
		case p.Addr().Is4In6():
			bad(key, "write IPv4 prefix %s as plain IPv4", s)
		default:
			if prev, dup := seen[p]; dup {
				bad(key, "%s is listed twice (line %d)", p, prev)
			}
			seen[p] = c.Line(key)
		}
	}
	n := c.Node
	if n == nil {
		return
	}
	if !ValidNodeName(n.Name) {
		bad("node.name", "%q is not a node name (1 to 63 letters, digits, '-', '_' or '.')", n.Name)
	}
	if !ValidRegion(n.Region) {
		bad("node.region", "%q may not hold '/' or spaces", n.Region)
	}
	if n.Country != "" {
		if _, ok := geo.LookupCountry(n.Country); !ok || len(n.Country) != 2 {
			bad("node.country", "unknown country code %q (ISO 3166-1 alpha-2, such as DE or IN)", n.Country)
		}
	}
	if l := n.Location; l != nil {
		if math.IsNaN(l.Lat) || l.Lat < -90 || l.Lat > 90 {
			bad("node.location.lat", "%v is not a latitude between -90 and 90", l.Lat)
		}
		if math.IsNaN(l.Lon) || l.Lon < -180 || l.Lon > 180 {
			bad("node.location.lon", "%v is not a longitude between -180 and 180", l.Lon)
		}
	}
}

// AnycastResolverPrefixes returns ecs.anycast_resolvers parsed (a single
// address as a full-length prefix); entries that do not parse are left
// out (check reports them).
func (e *ECS) AnycastResolverPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(e.AnycastResolvers))
	for _, s := range e.AnycastResolvers {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p)
	}
	return out
}
