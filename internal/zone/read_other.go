//go:build !linux

package zone

import (
	"io"
	"os"
	"time"
)

// stampAndReadFile is StampAndReadFile of a file on the local disk,
// through the os package (read_linux.go has the system calls of its own
// and O_NOATIME, which is Linux's).
func stampAndReadFile(file string, now time.Time) (st FileStamp, ok bool, data []byte, err error) {
	f, err := os.Open(file)
	if err != nil {
		return st, false, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		data, err = io.ReadAll(f)
		return st, false, data, err
	}
	st, ok = stampOf(fi, now)
	size := 512
	if fi.Mode().IsRegular() && fi.Size() < 1<<30 {
		size = int(fi.Size()) + 1 // +1: the read that finds the end
	}
	data = make([]byte, 0, size)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return st, ok, data, nil
		}
		if err != nil {
			return st, ok, data, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)] // grows, as os.ReadFile does
		}
	}
}
