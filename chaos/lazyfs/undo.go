//go:build linux

package lazyfs

import (
	"slices"
	"syscall"
)

// undo is what a power cut takes back from one file (one inode of the directory below the
// mount): what writes, truncates and allocations changed since its last fsync.
type undo struct {
	dirty   bool      // changed since its last fsync
	size    int64     // its size at its last fsync (valid when dirty)
	saved   []segment // the old bytes of the ranges below size changed since, sorted, disjoint
	created bool      // created since its last fsync and its directory's last fsync
	parent  uint64    // the inode of its directory, while created
}

// segment is old content at an offset.
type segment struct {
	off  int64
	data []byte
}

func (s segment) end() int64 { return s.off + int64(len(s.data)) }

// touch marks the file changed, noting its size first when it was clean.
func (u *undo) touch(fd int) syscall.Errno {
	if u.dirty {
		return 0
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err.(syscall.Errno)
	}
	u.dirty, u.size, u.saved = true, st.Size, nil
	return 0
}

// save keeps the old bytes of [off, end) that are below the size at the last fsync and not
// kept yet, reading them from fd, before they are changed.
func (u *undo) save(fd int, off, end int64) syscall.Errno {
	if errno := u.touch(fd); errno != 0 {
		return errno
	}
	end = min(end, u.size)
	for off < end {
		// The first segment that ends after off.
		i, _ := slices.BinarySearchFunc(u.saved, off, func(s segment, off int64) int {
			if s.end() <= off {
				return -1
			}
			return 1
		})
		if i < len(u.saved) && u.saved[i].off <= off {
			off = u.saved[i].end() // kept already
			continue
		}
		gap := end
		if i < len(u.saved) {
			gap = min(gap, u.saved[i].off)
		}
		buf := make([]byte, gap-off)
		n, err := syscall.Pread(fd, buf, off)
		if err != nil {
			return err.(syscall.Errno)
		}
		if n < len(buf) { // the file is shorter than it was at its fsync: the rest was cut off, and saved then
			buf = buf[:n]
			if n == 0 {
				return 0
			}
		}
		u.saved = slices.Insert(u.saved, i, segment{off, buf})
		off += int64(len(buf))
	}
	return 0
}

// synced forgets what was changed: an fsync made it durable.
func (u *undo) synced() {
	u.dirty, u.size, u.saved, u.created = false, 0, nil, false
}

// apply takes the file at path back to its state at its last fsync.
func (u *undo) apply(path string) (restored int64, err error) {
	if !u.dirty {
		return 0, nil
	}
	f, err := syscall.Open(path, syscall.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(f)
	for _, s := range u.saved {
		if _, err := syscall.Pwrite(f, s.data, s.off); err != nil {
			return restored, err
		}
		restored += int64(len(s.data))
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(f, &st); err != nil {
		return restored, err
	}
	if st.Size > u.size {
		restored += st.Size - u.size
	}
	if err := syscall.Ftruncate(f, u.size); err != nil {
		return restored, err
	}
	return restored, syscall.Fsync(f)
}
