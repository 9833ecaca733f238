package node

import (
	"os"
	"time"
)

// fileStamp is what a poll compares: a file replaced or rewritten changes
// its modification time or size.
type fileStamp struct {
	mod  time.Time
	size int64
}

// stampOf returns p's stamp; a file that cannot be stat'ed has the zero
// stamp (and the error).
func stampOf(p string) (fileStamp, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// watcher polls files for changes. Polling, rather than inotify, also sees
// files replaced by rename and works on any filesystem; these files change
// at most a few times a day.
type watcher struct {
	paths  func() []string
	stamps map[string]fileStamp
}

// newWatcher takes the files' current state as the baseline at once, so a
// change made after it returns is never mistaken for the starting state.
// Read the files after calling it.
func newWatcher(paths func() []string) *watcher {
	w := &watcher{paths: paths, stamps: map[string]fileStamp{}}
	w.poll()
	return w
}

// poll reports whether any file differs from the previous poll.
func (w *watcher) poll() bool {
	diff := false
	seen := map[string]bool{}
	for _, p := range w.paths() {
		seen[p] = true
		st, _ := stampOf(p)
		if old, ok := w.stamps[p]; ok && old != st {
			diff = true
		}
		w.stamps[p] = st
	}
	for p := range w.stamps {
		if !seen[p] {
			delete(w.stamps, p)
		}
	}
	return diff
}
