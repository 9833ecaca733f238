package zone

import (
	"io/fs"
	"sync/atomic"
	"syscall"
	"time"
)

// stampAndReadFile is StampAndReadFile of a file on the local disk. The
// file is read with system calls of its own rather than an os.File,
// whose open also registers the descriptor with the network poller (a
// refused epoll_ctl for a regular file) and sets a cleanup, and whose
// close undoes both: a quarter of the cost of reading a small file. It
// is opened with O_NOATIME where the kernel permits it (the file's
// owner, or root), as the read need not be written back to the disk as
// an access time; the stamp does not look at that time.
func stampAndReadFile(file string, now time.Time) (st FileStamp, ok bool, data []byte, err error) {
	fd, err := openRead(file)
	if err != nil {
		return st, false, nil, &fs.PathError{Op: "open", Path: file, Err: err}
	}
	defer syscall.Close(fd)
	var sys syscall.Stat_t
	size := 512
	if err := ignoringEINTR(func() error { return syscall.Fstat(fd, &sys) }); err == nil && sys.Mode&syscall.S_IFMT == syscall.S_IFREG {
		st = stampOfSys(&sys)
		ok = trusted(st, now)
		if sys.Size < 1<<30 {
			size = int(sys.Size) + 1 // +1: the read that finds the end
		}
	}
	data = make([]byte, 0, size)
	for {
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = syscall.Read(fd, data[len(data):cap(data)])
			return err
		})
		if err != nil {
			return st, ok, data, &fs.PathError{Op: "read", Path: file, Err: err}
		}
		if n <= 0 {
			return st, ok, data, nil
		}
		data = data[:len(data)+n]
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)] // grows, as os.ReadFile does
		}
	}
}

// noNoatime is set once the kernel refused O_NOATIME (a file of another
// user, without CAP_FOWNER): the files of one configuration mostly have
// one owner, so the flag is not tried again.
var noNoatime atomic.Bool

// openRead opens file for reading, with O_NOATIME when permitted.
func openRead(file string) (fd int, err error) {
	const flags = syscall.O_RDONLY | syscall.O_CLOEXEC
	if !noNoatime.Load() {
		err = ignoringEINTR(func() (err error) {
			fd, err = syscall.Open(file, flags|syscall.O_NOATIME, 0)
			return err
		})
		if err != syscall.EPERM {
			return fd, err
		}
		noNoatime.Store(true)
	}
	err = ignoringEINTR(func() (err error) {
		fd, err = syscall.Open(file, flags, 0)
		return err
	})
	return fd, err
}

// ignoringEINTR retries fn while it is interrupted by a signal, as the
// os package does.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != syscall.EINTR {
			return err
		}
	}
}
