//go:build linux || openbsd || dragonfly || solaris || illumos

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

// stampOfSys is the stamp in a stat. Nano, not Sec*1e9+Nsec: the fields
// are int32 on 32-bit Linux, where that product overflows; the device is
// a uint32 on MIPS, an int32 on OpenBSD.
func stampOfSys(sys *syscall.Stat_t) FileStamp {
	return FileStamp{dev: uint64(sys.Dev), ino: uint64(sys.Ino), size: int64(sys.Size),
		mtime: sys.Mtim.Nano(), ctime: sys.Ctim.Nano()}
}
