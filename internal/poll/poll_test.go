package poll

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// fatal records a Fatalf instead of ending the test, so that the failure itself can be checked.
type fatal struct {
	testing.TB
	msg string
}

func (f *fatal) Helper() {}

func (f *fatal) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	f := &fatal{TB: t}
	Until(f, time.Minute, "the third call", func() (bool, string) {
		n := calls.Add(1)
		return n == 3, fmt.Sprint(n, " calls")
	})
	if f.msg != "" || calls.Load() != 3 {
		t.Fatalf("Until failed with %q after %d calls; want success on the third", f.msg, calls.Load())
	}
}

func TestUntilReportsWhatItAwaitedAndSawLast(t *testing.T) {
	var calls atomic.Int32
	f := &fatal{TB: t}
	start := time.Now()
	Until(f, 50*time.Millisecond, "a count of 10", func() (bool, string) {
		return false, fmt.Sprint("count ", calls.Add(1))
	})
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("Until gave up after %v; want at least its deadline of 50ms", took)
	}
	want := fmt.Sprintf("waited 50ms for a count of 10; last saw: count %d", calls.Load())
	if f.msg != want {
		t.Fatalf("failure %q, want %q", f.msg, want)
	}
	if calls.Load() < 2 {
		t.Fatalf("the condition was called %d times in 50ms; want it polled", calls.Load())
	}
}

func TestNoErrorReportsTheLastError(t *testing.T) {
	f := &fatal{TB: t}
	n := 0
	NoError(f, 20*time.Millisecond, "the server", func() error { n++; return fmt.Errorf("refused %d", n) })
	if want := fmt.Sprintf("waited 20ms for the server; last saw: refused %d", n); f.msg != want {
		t.Fatalf("failure %q, want %q", f.msg, want)
	}
	f = &fatal{TB: t}
	errs := []error{errors.New("not yet"), nil}
	NoError(f, time.Minute, "the second call", func() error { err := errs[0]; errs = errs[1:]; return err })
	if f.msg != "" || len(errs) != 0 {
		t.Fatalf("NoError failed with %q, %d calls left; want success on the second call", f.msg, len(errs))
	}
}
