package main

import (
	"context"
	"os"
	"time"
)

// fileStamp is what a poll compares: a file replaced or rewritten changes
// its modification time or size.
type fileStamp struct {
	mod  time.Time
	size int64
}

// watchFiles polls the files paths() returns every interval and calls
// changed when any of them differs from the previous poll. Polling, rather
// than inotify, also sees files replaced by rename and on any filesystem,
// and a database is rewritten at most a few times a day.
func watchFiles(ctx context.Context, interval time.Duration, paths func() []string, changed func()) {
	stamps := map[string]fileStamp{}
	poll := func() bool {
		diff := false
		seen := map[string]bool{}
		for _, p := range paths() {
			seen[p] = true
			var st fileStamp
			if fi, err := os.Stat(p); err == nil {
				st = fileStamp{fi.ModTime(), fi.Size()}
			}
			if old, ok := stamps[p]; ok && old != st {
				diff = true
			}
			stamps[p] = st
		}
		for p := range stamps {
			if !seen[p] {
				delete(stamps, p)
			}
		}
		return diff
	}
	poll()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if poll() {
				changed()
			}
		}
	}
}
