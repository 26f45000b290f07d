//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/herald-rt/herald/chaos/lazyfs"
)

// mountDisks puts each bus server's data directory on a lazy file system, over a directory
// beside it (<data>.disk), for the power cuts.
func (r *run) mountDisks() error {
	if err := lazyfs.Available(); err != nil {
		return fmt.Errorf("--power-cut needs FUSE: %w", err)
	}
	for _, s := range r.bus.servers {
		below := s.data + ".disk"
		for _, d := range []string{below, s.data} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		fs, err := lazyfs.Mount(below, s.data)
		if err != nil {
			return fmt.Errorf("--power-cut: %w", err)
		}
		r.disks = append(r.disks, fs)
	}
	return nil
}

// unmountDisks unmounts the lazy file systems; the bus servers must have been stopped.
func (r *run) unmountDisks() {
	for _, d := range r.disks {
		if err := d.Unmount(); err != nil {
			r.o.Log.Error("unmounting a lazy file system", "dir", d.Mountpoint(), "err", err)
		}
	}
	r.disks = nil
}

// powerCut kills every bus server at once, takes back what they had not fsynced, and
// returns what that was, server by server.
func (m *nemesis) powerCut() (string, error) {
	for _, s := range m.bus.servers {
		_ = s.proc.signal(syscall.SIGKILL) // an error: it had exited
	}
	for _, s := range m.bus.servers {
		<-s.proc.exited()
	}
	var lost []string
	var errs []error
	for i, d := range m.disks {
		loss, err := d.Cut()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.bus.servers[i].name, err))
		}
		lost = append(lost, fmt.Sprintf("%s %d files, %d bytes, %d new files", m.bus.servers[i].name, loss.Files, loss.Bytes, loss.Removed))
	}
	return strings.Join(lost, "; "), errors.Join(errs...)
}

// startBus starts every bus server and waits for the bus to form.
func (m *nemesis) startBus(ctx context.Context) error {
	var errs []error
	for _, s := range m.bus.servers {
		if err := s.start(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return poll(ctx, 2*startWait, nil, m.bus.formed, func() string { return "the bus did not form again" })
}
