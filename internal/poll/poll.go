package poll

import (
	"testing"
	"time"
)

// maxInterval is the longest pause between two calls of a condition. Calls start 1 ms apart
// and the pause doubles up to it, so a condition that holds soon is seen soon, and one that
// takes seconds (an HTTP probe, a node starting) is not called hundreds of times a second.
const maxInterval = 20 * time.Millisecond

// Until calls cond until it reports true, or fails t once d has passed with what was awaited
// and the state cond described on its last call ("waited 5s for 3 members; last saw 2").
func Until(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if seen, ok := wait(d, cond); !ok {
		t.Fatalf("waited %v for %s; last saw: %s", d, what, seen)
	}
}

// NoError calls f until it returns nil, or fails t once d has passed with what was awaited
// and the last error f returned.
func NoError(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	Until(t, d, what, func() (bool, string) {
		if err := f(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// wait calls cond until it holds (true) or d has passed (false, with what it saw last). The
// last call is made after d has passed, so a condition that comes true within d is seen.
func wait(d time.Duration, cond func() (bool, string)) (string, bool) {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for {
		ok, seen := cond()
		if ok {
			return "", true
		}
		if time.Now().After(deadline) {
			return seen, false
		}
		time.Sleep(pause) // the polling interval, not a wait for an event
		pause = min(2*pause, maxInterval)
	}
}
