//go:build linux

package lazyfs

import (
	"context"
	"path/filepath"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a file or directory of the mount: the loopback's, with what changes a file's
// content or creates one noted first in the file's undo record.
type node struct {
	*gofs.LoopbackNode
	fs *FS
}

var (
	_ gofs.NodeWrapChilder    = (*node)(nil)
	_ gofs.NodeOpener         = (*node)(nil)
	_ gofs.NodeCreater        = (*node)(nil)
	_ gofs.NodeSetattrer      = (*node)(nil)
	_ gofs.NodeUnlinker       = (*node)(nil)
	_ gofs.NodeRenamer        = (*node)(nil)
	_ gofs.NodeOpendirHandler = (*node)(nil)
)

// WrapChild makes every node below the root a node of this file system.
func (n *node) WrapChild(_ context.Context, ops gofs.InodeEmbedder) gofs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*gofs.LoopbackNode), fs: n.fs}
}

// under is the node's path in the directory below.
func (n *node) under() string {
	return filepath.Join(n.RootData.Path, n.Path(nil))
}

// Open opens the file; with O_TRUNC, its content is saved first.
func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	f := n.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if errno := f.saveFrom(n.under(), 0); errno != 0 {
			return nil, 0, errno
		}
	}
	fh, flags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return f.wrap(fh), flags, 0
}

// saveFrom saves the content of the file at path from off on (a truncate to off follows).
// f.mu is held.
func (f *FS) saveFrom(path string, off int64) syscall.Errno {
	fd, err := syscall.Open(path, syscall.O_RDONLY, 0)
	if err != nil {
		return err.(syscall.Errno)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err.(syscall.Errno)
	}
	return f.record(st.Ino).save(fd, off, max(off, st.Size))
}

// wrap makes a loopback file handle one of this file system.
func (f *FS) wrap(fh gofs.FileHandle) gofs.FileHandle {
	lf, ok := fh.(*gofs.LoopbackFile)
	if !ok {
		return fh
	}
	fd, _ := lf.PassthroughFd()
	var st syscall.Stat_t
	_ = syscall.Fstat(fd, &st)
	return &file{LoopbackFile: lf, fs: f, fd: fd, ino: st.Ino}
}

// Create creates a file, marked as created until it or its directory is fsynced.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	f := n.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	dir := n.under()
	p := filepath.Join(dir, name)
	_, existed := inode(p)
	if existed && flags&syscall.O_TRUNC != 0 {
		if errno := f.saveFrom(p, 0); errno != 0 {
			return nil, nil, 0, errno
		}
	}
	in, fh, fflags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	w := f.wrap(fh)
	if !existed {
		if file, ok := w.(*file); ok {
			u := f.record(file.ino)
			u.created = true
			u.parent, _ = inode(dir)
		}
	}
	return in, w, fflags, 0
}

// Setattr saves what a truncate cuts off, or the size it grows from.
func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		f := n.fs
		f.mu.Lock()
		defer f.mu.Unlock()
		if errno := f.saveFrom(n.under(), int64(sz)); errno != 0 {
			return errno
		}
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// Unlink removes a name; the file's record goes with its last name.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	ino, nlink, ok := links(filepath.Join(n.under(), name))
	errno := n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 && ok && nlink <= 1 {
		delete(n.fs.records, ino)
	}
	return errno
}

// Rename moves a name; a file it replaces loses its record, and a file created since the
// last fsync is now of the new directory.
func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	f := n.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	src, _ := inode(filepath.Join(n.under(), name))
	newDir := np.under()
	dst, nlink, replaced := links(filepath.Join(newDir, newName))
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno != 0 {
		return errno
	}
	if replaced && nlink <= 1 && dst != src && flags&unixRenameExchange == 0 {
		delete(f.records, dst)
	}
	if u := f.records[src]; u != nil && u.created {
		u.parent, _ = inode(newDir)
	}
	return 0
}

const unixRenameExchange = 1 << 1 // RENAME_EXCHANGE

// OpendirHandle opens a directory whose fsync makes the names created in it durable.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	h, fflags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	ino, _ := inode(n.under())
	return &dir{h: h, fs: n.fs, ino: ino}, fflags, 0
}

// file is an open file of the mount: each change first saves what it changes.
type file struct {
	*gofs.LoopbackFile
	fs  *FS
	fd  int
	ino uint64
}

var (
	_ gofs.FileWriter          = (*file)(nil)
	_ gofs.FileWritever        = (*file)(nil)
	_ gofs.FileFsyncer         = (*file)(nil)
	_ gofs.FileAllocater       = (*file)(nil)
	_ gofs.FilePassthroughFder = (*file)(nil)
)

// PassthroughFd refuses the kernel's passthrough: every write must come through here.
func (f *file) PassthroughFd() (int, bool) { return -1, false }

// Write saves the old bytes of the range, then writes.
func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if errno := f.fs.record(f.ino).save(f.fd, off, off+int64(len(data))); errno != 0 {
		return 0, errno
	}
	return f.LoopbackFile.Write(ctx, data, off)
}

// Writev is Write of data in pieces.
func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	n := 0
	for _, d := range data {
		n += len(d)
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if errno := f.fs.record(f.ino).save(f.fd, off, off+int64(n)); errno != 0 {
		return 0, errno
	}
	return f.LoopbackFile.Writev(ctx, data, off)
}

// Allocate saves the range (a hole punched in it changes it), then allocates.
func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if errno := f.fs.record(f.ino).save(f.fd, int64(off), int64(off+size)); errno != 0 {
		return errno
	}
	return f.LoopbackFile.Allocate(ctx, off, size, mode)
}

// Fsync syncs the file below and forgets what it had to take back.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if errno := f.LoopbackFile.Fsync(ctx, flags); errno != 0 {
		return errno
	}
	if u := f.fs.records[f.ino]; u != nil {
		u.synced()
		delete(f.fs.records, f.ino)
	}
	return 0
}

// dir is an open directory of the mount.
type dir struct {
	h   gofs.FileHandle
	fs  *FS
	ino uint64
}

var (
	_ gofs.FileReaddirenter = (*dir)(nil)
	_ gofs.FileSeekdirer    = (*dir)(nil)
	_ gofs.FileReleasedirer = (*dir)(nil)
	_ gofs.FileFsyncdirer   = (*dir)(nil)
)

func (d *dir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if r, ok := d.h.(gofs.FileReaddirenter); ok {
		return r.Readdirent(ctx)
	}
	return nil, syscall.ENOTSUP
}

func (d *dir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.h.(gofs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

func (d *dir) Releasedir(ctx context.Context, flags uint32) {
	if r, ok := d.h.(gofs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
	}
}

// Fsyncdir syncs the directory below: the files created in it are durable.
func (d *dir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if s, ok := d.h.(gofs.FileFsyncdirer); ok {
		if errno := s.Fsyncdir(ctx, flags); errno != 0 {
			return errno
		}
	}
	d.fs.dirSynced(d.ino)
	return 0
}
