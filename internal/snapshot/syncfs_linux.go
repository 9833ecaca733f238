package snapshot

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS makes everything written to the file system of d durable, in
// one call (syncfs(2)).
func syncFS(d *os.File) error { return unix.Syncfs(int(d.Fd())) }
