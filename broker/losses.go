package broker

import (
	"strings"
	"sync"
)

// maxLosses bounds the keys a Losses remembers; past it, it says that every key may have
// lost messages.
const maxLosses = 4096

// Losses is the set of keys whose received messages an engine dropped (its queue to the
// delivery goroutine was full) since the node last took them, so that the node can tell
// whom a loss concerns: a channel's subscribers, or its history's gap repair. The zero
// value is empty and ready to use; safe for concurrent use.
type Losses struct {
	mu   sync.Mutex
	keys map[Key]struct{}
	all  bool // more than maxLosses keys since the last Take
}

// Add records that a message of k was dropped.
func (l *Losses) Add(k Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.all {
		return
	}
	if l.keys == nil {
		l.keys = map[Key]struct{}{}
	}
	l.keys[k] = struct{}{}
	if len(l.keys) > maxLosses {
		l.all, l.keys = true, nil
	}
}

// Take calls f with each key recorded since the last Take, and forgets them. It returns
// false, without calling f, when more keys lost messages than it could remember: every key
// may have.
func (l *Losses) Take(f func(app, channel string)) bool {
	l.mu.Lock()
	keys, all := l.keys, l.all
	l.keys, l.all = nil, false
	l.mu.Unlock()
	if all {
		return false
	}
	for k := range keys {
		f(k.App, k.Channel)
	}
	return true
}

// ParseSubject is Subject's inverse: the key whose subject under prefix is subject, and
// false when subject is not one.
func ParseSubject(prefix, subject string) (Key, bool) {
	rest, ok := strings.CutPrefix(subject, prefix+".")
	if !ok {
		return Key{}, false
	}
	app, channel, ok := strings.Cut(rest, ".")
	if !ok {
		return Key{}, false
	}
	a, okA := unescape(app)
	c, okC := unescape(channel)
	return Key{App: a, Channel: c}, okA && okC
}

// Internal reports whether subject (under prefix) is an internal key's (app id ""): the
// keys every node has interest in, whose messages (the state stream's, above all) go on a
// queue of their own that a flood of events does not fill.
func Internal(prefix, subject string) bool {
	return len(subject) > len(prefix)+2 && subject[len(prefix)+1] == '%' && subject[len(prefix)+2] == '.' &&
		strings.HasPrefix(subject, prefix)
}

// unescape undoes escape; "%" alone is the empty name.
func unescape(s string) (string, bool) {
	if s == "%" {
		return "", true
	}
	if !strings.Contains(s, "%") {
		return s, s != ""
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := strings.IndexByte(hexDigits, s[i+1]), strings.IndexByte(hexDigits, s[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), true
}
