package node

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/fleet"
	zonefile "github.com/steer-dns/steer/internal/zone"
)

// PushBundle reads the configuration at path (on disk) and the files that
// travel with it into a bundle for steer fleet push: every zone file and
// what it $INCLUDEs, the DNSSEC key pairs, the cookie secret and the TSIG
// key files, each stored under the name a node resolves it to in the
// bundle (fleet.BundleName).
// Keys the nodes ignore in a pushed configuration (state_dir) are
// warnings. The problems that make a configuration unfit to push are errors, with
// file:line: a node-local file (geo database, latency or feed file, query
// log, state file, API token, BGP password) named by a relative path, and
// a file that travels with the configuration but lies outside its
// directory. The caller checks the configuration (steer check) first.
func PushBundle(p string) (_ fleet.Bundle, warns []string, _ error) {
	cfg, err := config.Load(p)
	if err != nil {
		return fleet.Bundle{}, nil, err
	}
	if cfg.Fleet != nil {
		return fleet.Bundle{}, nil, diag.Problems{{File: p, Line: cfg.Line("fleet"),
			Msg: "this is a fleet node's file (it has a fleet section); push the fleet's configuration, which has none"}}
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return fleet.Bundle{}, nil, err
	}
	b := fleet.Bundle{Files: map[string][]byte{fleet.ConfigName: data}}
	probs, ws := cfg.PushProblems()
	for _, w := range ws {
		warns = append(warns, w.String())
	}
	dir, err := filepath.Abs(filepath.Dir(p))
	if err != nil {
		return fleet.Bundle{}, nil, err
	}
	for _, r := range cfg.BundledPaths() {
		if !config.InDir(dir, r.Path) {
			continue // PushProblems said so
		}
		local := cfg.Resolve(r.Path)
		fd, err := os.ReadFile(local)
		if err != nil {
			probs.Add(cfg.File, r.Line, "%s: %v", r.Key, err)
			continue
		}
		name := fleet.BundleName(r.Path)
		b.Files[name] = fd
		if !strings.HasPrefix(r.Key, "zones[") || !strings.HasSuffix(r.Key, ".file") {
			continue
		}
		// What the zone includes goes too, under the names a node's
		// parser resolves from the zone's name in the bundle.
		names := map[string]string{local: name}
		for _, inc := range zonefile.Includes(nil, local, fd) {
			switch {
			case inc.Err != nil:
				probs.Add(inc.From, inc.Line, "$INCLUDE %s: %v", inc.Name, inc.Err)
				continue
			case !config.InDir(dir, inc.Path):
				probs.Add(inc.From, inc.Line, "$INCLUDE %s: %s is outside the configuration's directory %s: files pushed with it must be in that directory or below", inc.Name, inc.Path, dir)
				continue
			}
			in := fleet.BundleName(inc.Name)
			if !path.IsAbs(inc.Name) {
				in = path.Join(path.Dir(names[inc.From]), inc.Name)
			}
			names[inc.Path] = in
			b.Files[in] = inc.Data
		}
	}
	if err := probs.Err(); err != nil {
		return fleet.Bundle{}, warns, fmt.Errorf("nothing was pushed:\n%w", err)
	}
	return b, warns, nil
}
