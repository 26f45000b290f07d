//go:build linux

package lazyfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// mount mounts a lazy file system over a new directory, or skips without FUSE.
func mount(t *testing.T) *FS {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("lazyfs: %v", err)
	}
	below, mnt := t.TempDir(), t.TempDir()
	f, err := Mount(below, mnt)
	if err != nil {
		t.Skipf("cannot mount FUSE here: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return f
}

func write(t *testing.T, f *os.File, s string, off int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func fsync(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func cut(t *testing.T, fs *FS) Loss {
	t.Helper()
	loss, err := fs.Cut()
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	return loss
}

func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func create(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCutKeepsOnlyWhatWasSynced(t *testing.T) {
	fs := mount(t)
	p := filepath.Join(fs.Mountpoint(), "log")
	f := create(t, p)
	write(t, f, "0123456789", 0)
	fsync(t, f)
	write(t, f, "ab", 3)               // overwrites synced bytes
	write(t, f, "cd", 4)               // overlaps the last write
	write(t, f, "tail after sync", 10) // grows the file
	if got := content(t, p); got != "012acd6789tail after sync" {
		t.Fatalf("before the cut: %q", got)
	}
	f.Close()
	loss := cut(t, fs)
	if got := content(t, p); got != "0123456789" {
		t.Fatalf("after the cut: %q, want the synced 0123456789", got)
	}
	if loss.Files != 1 || loss.Removed != 0 || loss.Bytes == 0 {
		t.Fatalf("loss %+v, want one file", loss)
	}
	// The cut leaves nothing to take back: a second one changes nothing.
	if loss := cut(t, fs); loss != (Loss{}) {
		t.Fatalf("second cut lost %+v", loss)
	}
	if got := content(t, p); got != "0123456789" {
		t.Fatalf("after a second cut: %q", got)
	}
}

func TestCutKeepsWritesSyncedOnAnotherDescriptor(t *testing.T) {
	fs := mount(t)
	p := filepath.Join(fs.Mountpoint(), "log")
	f := create(t, p)
	fsync(t, f)
	write(t, f, "synced", 0)
	g, err := os.Open(p) // read-only: fsync syncs the file whatever the descriptor
	if err != nil {
		t.Fatal(err)
	}
	fsync(t, g)
	g.Close()
	write(t, f, "-lost", 6)
	f.Close()
	cut(t, fs)
	if got := content(t, p); got != "synced" {
		t.Fatalf("after the cut: %q, want synced", got)
	}
}

func TestCutUndoesTruncates(t *testing.T) {
	fs := mount(t)
	p := filepath.Join(fs.Mountpoint(), "data")
	f := create(t, p)
	write(t, f, "hello world", 0)
	fsync(t, f)
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	write(t, f, "XYZXYZXYZXYZXYZ", 3) // over the cut-off part and beyond
	f.Close()
	if err := os.WriteFile(filepath.Join(fs.Mountpoint(), "data"), []byte("new"), 0o644); err != nil { // O_TRUNC
		t.Fatal(err)
	}
	cut(t, fs)
	if got := content(t, p); got != "hello world" {
		t.Fatalf("after the cut: %q, want hello world", got)
	}
}

func TestCutRemovesFilesCreatedSinceTheirSync(t *testing.T) {
	fs := mount(t)
	m := fs.Mountpoint()
	unsynced := create(t, filepath.Join(m, "unsynced"))
	write(t, unsynced, "gone", 0)
	unsynced.Close()
	synced := create(t, filepath.Join(m, "synced"))
	write(t, synced, "kept", 0)
	fsync(t, synced)
	synced.Close()
	if err := os.Mkdir(filepath.Join(m, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	inDir := create(t, filepath.Join(m, "d", "named")) // its name made durable by its directory's fsync
	inDir.Close()
	d, err := os.Open(filepath.Join(m, "d"))
	if err != nil {
		t.Fatal(err)
	}
	fsync(t, d)
	d.Close()
	loss := cut(t, fs)
	if _, err := os.Stat(filepath.Join(m, "unsynced")); !os.IsNotExist(err) {
		t.Fatalf("a file never synced is still there after the cut (%v)", err)
	}
	if got := content(t, filepath.Join(m, "synced")); got != "kept" {
		t.Fatalf("synced: %q", got)
	}
	if _, err := os.Stat(filepath.Join(m, "d", "named")); err != nil {
		t.Fatalf("a file whose directory was synced: %v", err)
	}
	if loss.Removed != 1 {
		t.Fatalf("loss %+v, want one file removed", loss)
	}
}

func TestCutFollowsRenames(t *testing.T) {
	fs := mount(t)
	m := fs.Mountpoint()
	f := create(t, filepath.Join(m, "a.tmp"))
	write(t, f, "first", 0)
	fsync(t, f)
	write(t, f, " and more", 5)
	f.Close()
	old := create(t, filepath.Join(m, "a"))
	write(t, old, "replaced", 0)
	fsync(t, old)
	old.Close()
	if err := os.Rename(filepath.Join(m, "a.tmp"), filepath.Join(m, "a")); err != nil {
		t.Fatal(err)
	}
	cut(t, fs)
	if got := content(t, filepath.Join(m, "a")); got != "first" {
		t.Fatalf("after the cut: %q, want first (the renamed file as synced)", got)
	}
}

func TestUnmountKeepsEverything(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("lazyfs: %v", err)
	}
	below, mnt := t.TempDir(), t.TempDir()
	fs, err := Mount(below, mnt)
	if err != nil {
		t.Skipf("cannot mount FUSE here: %v", err)
	}
	f := create(t, filepath.Join(mnt, "x"))
	write(t, f, "never synced", 0)
	f.Close()
	if err := fs.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, filepath.Join(below, "x")); got != "never synced" {
		t.Fatalf("below after unmount: %q", got)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(b, []byte(" "+mnt+" ")) {
		t.Fatalf("%s is still mounted", mnt)
	}
}
