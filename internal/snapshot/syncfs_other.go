//go:build !linux

package snapshot

import (
	"errors"
	"os"
)

// syncFS has no syncfs(2) to call here (sync(2) may return before the
// data is written): saveCopies syncs each file on its own instead.
func syncFS(*os.File) error { return errors.ErrUnsupported }
