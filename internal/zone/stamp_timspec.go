//go:build darwin || freebsd || netbsd

package zone

import (
	"io/fs"
	"syscall"
)

// statStamp reads a stamp from fi's stat.
func statStamp(fi fs.FileInfo) (FileStamp, bool) {
	sys, _ := fi.Sys().(*syscall.Stat_t)
	if sys == nil {
		return FileStamp{}, false
	}
	return stampOfSys(sys), true
}

// stampOfSys is the stamp in a stat (these systems name the times
// Mtimespec and Ctimespec, and darwin's device is an int32).
func stampOfSys(sys *syscall.Stat_t) FileStamp {
	return FileStamp{dev: uint64(sys.Dev), ino: uint64(sys.Ino), size: int64(sys.Size),
		mtime: sys.Mtimespec.Nano(), ctime: sys.Ctimespec.Nano()}
}
