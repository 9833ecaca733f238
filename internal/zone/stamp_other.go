//go:build !(linux || openbsd || dragonfly || solaris || illumos || darwin || freebsd || netbsd)

package zone

import "io/fs"

// statStamp has no stat with an inode and a change time to read here
// (Windows, Plan 9, wasm): no file is stamped, so each reload reads and
// compares every zone file, as for an fs.FS.
func statStamp(fs.FileInfo) (FileStamp, bool) { return FileStamp{}, false }
