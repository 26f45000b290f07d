package guard

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// statm is /proc/self/statm, opened once: each reading is one pread(2) from its start (the
// kernel renders the file afresh at offset 0), not an open, a read and a close.
var statm struct {
	once sync.Once
	f    *os.File
	err  error
}

// ResidentBytes is the process's resident set size, from /proc/self/statm.
func ResidentBytes() (uint64, error) {
	statm.once.Do(func() { statm.f, statm.err = os.Open("/proc/self/statm") })
	if statm.err != nil {
		return 0, statm.err
	}
	var buf [256]byte
	n, err := statm.f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0, err
	}
	f := bytes.Fields(buf[:n])
	if len(f) < 2 {
		return 0, errors.New("guard: unexpected /proc/self/statm")
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * uint64(os.Getpagesize()), nil
}

// DetectMemoryLimit is the cgroup v2 memory.max of this process when it has one, else the
// machine's total memory.
func DetectMemoryLimit() (uint64, error) {
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if s := strings.TrimSpace(string(b)); s != "max" {
			if v, err := strconv.ParseUint(s, 10, 64); err == nil && v > 0 {
				return v, nil
			}
		}
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("memory guard: no limit configured and none detected: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10, nil
			}
		}
	}
	return 0, errors.New("memory guard: no limit configured and none detected in /proc/meminfo")
}
