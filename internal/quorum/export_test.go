package quorum

import "slices"

// Only tests list a Tracker's targets or drop one.

// forget drops the state of the target with this key (it left the config);
// seen again, it starts afresh and its first verdict is adopted at once.
func (t *Tracker) forget(key string) {
	t.mu.Lock()
	delete(t.targets, key)
	t.mu.Unlock()
}

// keys returns the keys of every target held, sorted.
func (t *Tracker) keys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.targets))
	for k := range t.targets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
