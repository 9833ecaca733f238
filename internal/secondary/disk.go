package secondary

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"
	zonedata "github.com/steer-dns/steer/internal/zone"
)

// CacheFile returns the name of the file, in Options.Dir, that holds the
// last good copy of the zone origin: zone.CacheFile, the name snapshot's
// cache of file zones uses too.
func CacheFile(origin string) string { return zonedata.CacheFile(origin) }

type diskCopy struct {
	copy *Copy
	rrs  []dns.RR
}

// loadDisk reads origin's copy from Dir; nil when there is none or it is
// unusable (logged).
func (m *Manager) loadDisk(origin string) *diskCopy {
	if m.o.Dir == "" {
		return nil
	}
	path := filepath.Join(m.o.Dir, CacheFile(origin))
	text, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Stat(path)
	}
	if err != nil {
		m.log.Error("cannot read the zone's saved copy", "zone", origin, "file", path, "error", err.Error())
		return nil
	}
	rrs, err := parseZone(origin, text)
	if err != nil {
		m.log.Error("saved copy is corrupt; ignoring it", "zone", origin, "file", path, "error", err.Error())
		return nil
	}
	if err := m.accept(origin, text); err != nil {
		m.log.Error("saved copy rejected; ignoring it", "zone", origin, "file", path, "error", err.Error())
		return nil
	}
	soa := rrs[0].(*dns.SOA)
	refreshed := fi.ModTime()
	c := &Copy{Origin: origin, Serial: soa.Serial, Text: text, Refreshed: refreshed,
		Expires: refreshed.Add(time.Duration(soa.Expire) * time.Second), From: "disk"}
	c.Expired = m.o.Now().After(c.Expires)
	if c.Expired {
		m.log.Error(fmt.Sprintf("zone %s expired: no primary confirmed serial %d since %s; answering SERVFAIL",
			origin, c.Serial, refreshed.UTC().Format(time.RFC3339)), "zone", origin, "serial", c.Serial)
	} else {
		m.log.Info("loaded the zone's saved copy", "zone", origin, "serial", soa.Serial, "records", len(rrs),
			"refreshed", refreshed, "expires", c.Expires)
	}
	return &diskCopy{c, rrs}
}

// parseZone parses master-file text of origin: the SOA must be the first
// record and at the apex, and every name in the zone. The records come
// back as a copy keeps them (SOA first, the rest sorted, no duplicates),
// which applyIXFR relies on, whatever the order in the file.
func parseZone(origin string, text []byte) ([]dns.RR, error) {
	zp := dns.NewZoneParser(bytes.NewReader(text), origin, "")
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, err
	}
	if err := checkZone(origin, rrs); err != nil {
		return nil, err
	}
	sortRecords(rrs[1:])
	return dedup(rrs), nil
}

// checkZone checks that rrs starts with the apex SOA, has only one SOA
// and only names in the zone.
func checkZone(origin string, rrs []dns.RR) error {
	if len(rrs) == 0 {
		return errors.New("no records")
	}
	if soa, ok := rrs[0].(*dns.SOA); !ok || !strings.EqualFold(soa.Hdr.Name, origin) {
		return errors.New("no SOA at the apex first")
	}
	for _, rr := range rrs[1:] {
		if rr.Header().Rrtype == dns.TypeSOA {
			return fmt.Errorf("a second SOA: %s", rr)
		}
		if !dns.IsSubDomain(origin, rr.Header().Name) {
			return fmt.Errorf("out of zone: %s", rr)
		}
	}
	return nil
}

// save writes text as origin's copy atomically, with mtime refreshed.
func (m *Manager) save(origin string, text []byte, refreshed time.Time) error {
	if m.o.Dir == "" {
		return nil
	}
	if err := os.MkdirAll(m.o.Dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(m.o.Dir, CacheFile(origin))
	f, err := os.CreateTemp(m.o.Dir, ".tmp-"+CacheFile(origin)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, nothing
	if _, err := f.Write(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chtimes(tmp, refreshed, refreshed); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(m.o.Dir)
}

// touch sets the copy's mtime to when a primary confirmed it.
func (m *Manager) touch(origin string, refreshed time.Time) {
	if m.o.Dir == "" {
		return
	}
	path := filepath.Join(m.o.Dir, CacheFile(origin))
	if err := os.Chtimes(path, refreshed, refreshed); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("cannot record the zone's refresh time", "zone", origin, "file", path, "error", err.Error())
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
