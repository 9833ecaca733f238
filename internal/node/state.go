package node

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/steer-dns/steer/internal/config"
)

// migrateLegacyState copies into the state directory dir what a node of
// an earlier version kept elsewhere, so an upgrade loses nothing: beside
// health.state_file, the zone copies ("zones"), the secondary copies
// ("secondary"), the exported serials ("steer-xfr-serials.json") and a
// fleet member's bundle and health view ("steer-fleet-bundle.json",
// "steer-fleet-health.json", beside the configuration file when no state
// file was set). What is already in dir is never replaced, and the old
// files are left where they were (an older steer still finds them). The
// health state file itself stays where health.state_file names it. A
// "zones" or "secondary" directory that holds a zone file the
// configuration reads is the operator's, not an earlier version's, and is
// not copied.
func migrateLegacyState(log *slog.Logger, cfg *config.Config, dir string) {
	if cfg.FS != nil {
		return
	}
	var olds []string
	if cfg.Health.StateFile != "" {
		olds = append(olds, filepath.Dir(cfg.HealthStateFile()))
	}
	olds = append(olds, filepath.Dir(cfg.File))
	moves := []struct{ from, to string }{
		{config.StateZones, config.StateZones},
		{config.StateSecondary, config.StateSecondary},
		{"steer-xfr-serials.json", config.StateSerials},
		{"steer-fleet-bundle.json", filepath.Join(config.StateFleet, "bundle.json")},
		{"steer-fleet-health.json", filepath.Join(config.StateFleet, "health-view.json")},
	}
	for i, old := range olds {
		if a, err := filepath.Abs(old); err == nil {
			old = a
		}
		for _, mv := range moves {
			if i > 0 && (mv.from == config.StateZones || mv.from == config.StateSecondary || mv.from == "steer-xfr-serials.json") {
				continue // kept beside the configuration only by a fleet member
			}
			from, to := filepath.Join(old, mv.from), filepath.Join(dir, mv.to)
			if from == to {
				continue
			}
			if _, err := os.Lstat(from); err != nil {
				continue
			}
			if _, err := os.Lstat(to); err == nil {
				continue
			}
			if (mv.from == config.StateZones || mv.from == config.StateSecondary) && holdsZoneFile(cfg, from) {
				// The operator's own zone files (a "zones" directory
				// beside steer.yaml is a common layout), not an
				// earlier version's copies: copying them would take
				// them for last good copies and duplicate every file.
				log.Debug("not copied into the state directory: it holds zone files the configuration reads", "dir", from)
				continue
			}
			if err := copyTree(from, to); err != nil {
				log.Warn("state of an earlier version not copied into the state directory", "from", from, "to", to, "err", err)
				continue
			}
			log.Info("state of an earlier version copied into the state directory (the old copy can be removed)", "from", from, "to", to)
		}
	}
}

// holdsZoneFile reports whether a zone file the configuration names lies
// in the directory dir or below it.
func holdsZoneFile(cfg *config.Config, dir string) bool {
	for i := range cfg.Zones {
		if cfg.Zones[i].File == "" {
			continue
		}
		f := cfg.Resolve(cfg.Zones[i].File)
		if a, err := filepath.Abs(f); err == nil {
			f = a
		}
		if rel, err := filepath.Rel(dir, f); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// copyTree copies the regular file or the directory tree at from to to,
// which must not exist; a directory is copied under a temporary name and
// renamed, so an interrupted copy is not taken for a complete one.
func copyTree(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o750); err != nil {
		return err
	}
	tmp := to + ".migrating"
	os.RemoveAll(tmp)
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o750)
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o600)
		default:
			return errors.New(p + " is neither a file nor a directory")
		}
	})
	if err == nil {
		err = os.Rename(tmp, to)
	}
	if err != nil {
		os.RemoveAll(tmp)
	}
	return err
}
