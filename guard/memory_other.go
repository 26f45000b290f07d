//go:build !linux

package guard

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
)

// ResidentBytes is the memory the Go runtime holds from the system (runtime/metrics: all
// classes less the heap it has released). Off Linux there is no /proc to read the resident
// set from; this leaves out what cgo or the system maps for the process.
func ResidentBytes() (uint64, error) {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64(), nil
}

// DetectMemoryLimit is the Go runtime's soft memory limit (GOMEMLIMIT) when one is set. Off
// Linux there is no cgroup or /proc/meminfo to read, so without GOMEMLIMIT or a configured
// limit the limit is so high that the guard never refuses: the guard is off on the
// development systems unless told a limit.
func DetectMemoryLimit() (uint64, error) {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return uint64(l), nil
	}
	return math.MaxInt64, nil
}
