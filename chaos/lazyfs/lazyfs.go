//go:build linux

// Package lazyfs is a FUSE file system that forgets, on demand, what was not synced: a
// passthrough of a directory that keeps, for each file, what writes, truncates and
// allocations changed since the file's last fsync (or fdatasync), and takes it all back at
// a Cut. A cut is what a power cut does to a file system whose page cache is lost: what
// a process wrote and did not sync is gone, though the process was told it was written.
// The fault-injection harness (package chaos) mounts one over each bus server's data
// directory, kills the servers, cuts, and starts them again.
//
// What it models, and what not:
//   - A file's data and size go back to what they were at its last fsync.
//   - A file created since then, that neither it nor its directory was fsynced since, is
//     removed (an fsync of a file makes its name durable too, as on ext4).
//   - Renames, unlinks, new directories and metadata (modes, times) are durable at once:
//     a cut brings back no unlinked file and moves no renamed file back.
//   - Nothing is lost at random: everything not synced is lost, as if the cut came at the
//     worst moment, before the kernel wrote any of it back.
//
// It needs /dev/fuse and the right to mount (root): Mount says so when it cannot.
package lazyfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a lazy file system mounted on a directory over another.
type FS struct {
	dir, mnt string

	mu      sync.Mutex
	server  *fuse.Server
	bound   bool             // mnt is bind-mounted on itself, under the file system
	records map[uint64]*undo // by the inode number in dir
}

// Loss is what a cut took back.
type Loss struct {
	Files   int   // files whose content went back
	Bytes   int64 // bytes of those files restored or cut off
	Removed int   // files created since their last fsync, removed
}

// Mount mounts a lazy view of dir on mnt (both must exist, mnt empty).
func Mount(dir, mnt string) (*FS, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if mnt, err = filepath.Abs(mnt); err != nil {
		return nil, err
	}
	f := &FS{dir: dir, mnt: mnt, records: map[uint64]*undo{}}
	// A process started in a new mount namespace (ip netns exec) gets a copy of the mount,
	// which would keep the file system alive after it is unmounted here. An unmount reaches
	// such copies when the mount it is on is shared: the file system goes on a shared bind
	// mount of mnt on itself, whose copies are its peers (slaves, after ip netns exec).
	if err := syscall.Mount(mnt, mnt, "", syscall.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("lazyfs: bind-mounting %s: %w", mnt, err)
	}
	if err := syscall.Mount("", mnt, "", syscall.MS_SHARED, ""); err != nil {
		_ = syscall.Unmount(mnt, 0)
		return nil, fmt.Errorf("lazyfs: making %s a shared mount: %w", mnt, err)
	}
	f.bound = true
	if err := f.mount(); err != nil {
		_ = syscall.Unmount(mnt, 0)
		return nil, err
	}
	return f, nil
}

// Available reports why a lazy file system cannot be mounted here, or nil.
func Available() error {
	fd, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("no FUSE: %w", err)
	}
	fd.Close()
	if os.Geteuid() != 0 {
		return errors.New("mounting FUSE without fusermount needs root")
	}
	return nil
}

func (f *FS) mount() error {
	root, err := gofs.NewLoopbackRoot(f.dir)
	if err != nil {
		return err
	}
	node := &node{LoopbackNode: root.(*gofs.LoopbackNode), fs: f}
	zero := time.Duration(0)
	srv, err := gofs.Mount(f.mnt, node, &gofs.Options{
		// No caching of names or attributes: a cut changes the files below.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // mount(2) as root, no fusermount
			FsName:            f.dir,
			Name:              "lazyfs",
			DisableXAttrs:     true,
		},
	})
	if err != nil {
		return fmt.Errorf("lazyfs: mounting %s on %s: %w", f.dir, f.mnt, err)
	}
	f.server = srv
	return nil
}

// Dir is the directory below; Mountpoint where it is mounted.
func (f *FS) Dir() string        { return f.dir }
func (f *FS) Mountpoint() string { return f.mnt }

// Unmount unmounts the file system, keeping everything written (no cut). Nothing may
// have a file open in it.
func (f *FS) Unmount() error {
	f.mu.Lock()
	bound := f.bound
	f.bound = false
	f.mu.Unlock()
	err := f.unmountFUSE()
	if bound && err == nil {
		if err = syscall.Unmount(f.mnt, 0); err != nil {
			err = fmt.Errorf("lazyfs: unmounting the bind mount %s: %w", f.mnt, err)
		}
	}
	return err
}

// unmountFUSE unmounts the file system, leaving the bind mount under it.
func (f *FS) unmountFUSE() error {
	f.mu.Lock()
	srv := f.server
	f.server = nil
	f.mu.Unlock()
	if srv == nil {
		return nil
	}
	return unmount(srv, f.mnt)
}

// unmount unmounts srv from mnt, detaching it if it stays busy.
func unmount(srv *fuse.Server, mnt string) error {
	done := make(chan error, 1)
	go func() { done <- srv.Unmount() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second): // a process still holds it
		return fmt.Errorf("lazyfs: %s unmounted, but the file system is still in use 10 s later (processes with a copy of the mount: %s)", mnt, holders(mnt))
	}
}

// holders lists the processes whose mount namespace has a mount on mnt.
func holders(mnt string) string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile("/proc/" + p.Name() + "/mountinfo")
		if err != nil || !strings.Contains(string(b), " "+mnt+" ") {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + p.Name() + "/comm")
		out = append(out, p.Name()+" "+strings.TrimSpace(string(comm)))
	}
	return strings.Join(out, ", ")
}

// Cut is a power cut: it unmounts the file system, takes every file back to its last fsync
// (and removes those created since), and mounts it again, with nothing left to lose. The
// processes that used it must have been killed: nothing may have a file open in it.
func (f *FS) Cut() (Loss, error) {
	if err := f.unmountFUSE(); err != nil {
		return Loss{}, err
	}
	f.mu.Lock()
	records := f.records
	f.records = map[uint64]*undo{}
	f.mu.Unlock()
	loss, err := apply(f.dir, records)
	if err != nil {
		return loss, err
	}
	return loss, f.mount()
}

// apply takes back what records say of the files below dir.
func apply(dir string, records map[uint64]*undo) (Loss, error) {
	var loss Loss
	if len(records) == 0 {
		return loss, nil
	}
	var errs []error
	done := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil {
			return nil
		}
		u := records[st.Ino]
		if u == nil || done[st.Ino] {
			return nil
		}
		done[st.Ino] = true
		if u.created {
			loss.Removed++
			errs = append(errs, os.Remove(p))
			return nil
		}
		n, err := u.apply(p)
		if u.dirty {
			loss.Files++
			loss.Bytes += n
		}
		errs = append(errs, err)
		return nil
	})
	errs = append(errs, err)
	return loss, errors.Join(errs...)
}

// record returns the undo record of inode ino, made when missing; f.mu is held.
func (f *FS) record(ino uint64) *undo {
	u := f.records[ino]
	if u == nil {
		u = &undo{}
		f.records[ino] = u
	}
	return u
}

// dirSynced clears the created mark of the files in directory ino.
func (f *FS) dirSynced(ino uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.records {
		if u.created && u.parent == ino {
			u.created = false
			if !u.dirty {
				u.parent = 0
			}
		}
	}
}

// inode returns the inode number of path below.
func inode(path string) (uint64, bool) {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil {
		return 0, false
	}
	return st.Ino, true
}

// links returns the inode number of path and its link count.
func links(path string) (ino uint64, nlink uint64, ok bool) {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil {
		return 0, 0, false
	}
	return st.Ino, uint64(st.Nlink), true
}
