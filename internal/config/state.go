package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/steer-dns/steer/internal/diag"
	"golang.org/x/sys/unix"
)

// DefaultStateDir is the state directory of a configuration file that
// names none: a directory of this name beside the file.
const DefaultStateDir = "steer-state"

// The fixed layout of the state directory (StatePath). Every part of a
// node keeps what it must remember across restarts there and nowhere else.
const (
	// StateHealth is the health manager's state: target statuses and
	// operator overrides with their expiries.
	StateHealth = "health.json"
	// StateZones holds the last good copy of each zone file.
	StateZones = "zones"
	// StateSecondary holds the last copy of each secondary zone.
	StateSecondary = "secondary"
	// StateSerials is the serial each exported zone went out under.
	StateSerials = "xfr-serials.json"
	// StateFleet holds a fleet member's bundle cache and health view.
	StateFleet = "fleet"
)

// StatePath is the state directory, absolute: state_dir resolved against
// the configuration file's directory, or DefaultStateDir beside the file
// when the key is left out. A file of an earlier version that sets only
// the deprecated health.state_file keeps its state where that version
// did: in the state file's directory (so an upgrade whose configuration
// was kept finds its copies, and is not sent to write beside a read-only
// /etc). It is "" for a configuration read from an fs.FS (the embedded
// demo, a fleet bundle) that names no absolute state_dir: such a node
// persists nothing. (A fleet member's configuration gets the state
// directory of the node's local file.)
func (c *Config) StatePath() string {
	d := c.StateDir
	if c.FS != nil {
		if d == "" || !filepath.IsAbs(d) {
			return ""
		}
		return filepath.Clean(d)
	}
	if d == "" && c.Health.StateFile != "" {
		return filepath.Dir(c.HealthStateFile())
	}
	if d == "" {
		d = DefaultStateDir
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(filepath.Dir(c.File), d)
	}
	if a, err := filepath.Abs(d); err == nil {
		d = a
	}
	return filepath.Clean(d)
}

// HealthStateFile is the health state file: health.state_file (deprecated)
// when set on a configuration read from the local disk, else
// StateHealth in StatePath; "" when nothing is persisted.
func (c *Config) HealthStateFile() string {
	if c.Health.StateFile != "" && c.FS == nil {
		p := c.Resolve(c.Health.StateFile)
		if a, err := filepath.Abs(p); err == nil {
			p = a
		}
		return p
	}
	if d := c.StatePath(); d != "" {
		return filepath.Join(d, StateHealth)
	}
	return ""
}

// MakeStateDir creates the state directory dir (and its parents) when
// missing and proves it writable by creating and removing a file in it.
// The error names dir and says what to do.
func MakeStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("state directory %s cannot be created: %v (set state_dir to a directory steer can write)", dir, unwrapPath(err))
	}
	f, err := os.CreateTemp(dir, ".steer-write-test-*")
	if err != nil {
		return fmt.Errorf("state directory %s is not writable: %v (set state_dir to a directory steer can write)", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// CheckStateDir is MakeStateDir for steer check, which must change
// nothing: an existing dir must be a writable directory; a missing one
// must be creatable (its nearest existing parent a writable directory).
func CheckStateDir(dir string) error {
	p := dir
	for {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				if p == dir {
					return fmt.Errorf("state directory %s is not a directory (set state_dir to a directory steer can write)", dir)
				}
				return fmt.Errorf("state directory %s cannot be created: %s is not a directory (set state_dir to a directory steer can write)", dir, p)
			}
			if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
				if p == dir {
					return fmt.Errorf("state directory %s is not writable: %v (set state_dir to a directory steer can write)", dir, err)
				}
				return fmt.Errorf("state directory %s cannot be created: %s is not writable: %v (set state_dir to a directory steer can write)", dir, p, err)
			}
			return nil
		}
		// A path under a regular file is ENOTDIR: the walk up finds it.
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("state directory %s: %v", dir, unwrapPath(err))
		}
		up := filepath.Dir(p)
		if up == p {
			return nil
		}
		p = up
	}
}

// unwrapPath drops the *PathError's path (the message names dir already).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if pe.Path != "" {
			return fmt.Errorf("%s %s: %w", pe.Op, pe.Path, pe.Err)
		}
	}
	return err
}

// StateProblem is err (from MakeStateDir or CheckStateDir) at the line
// of state_dir when the file sets it, else at the file as a whole.
func (c *Config) StateProblem(err error) diag.Problems {
	return diag.Problems{{File: c.File, Line: c.Line("state_dir"), Msg: err.Error()}}
}
