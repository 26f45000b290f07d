package webhook

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// syncBuffer is a log destination the sending goroutines may write to concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogsRedactURL: the warnings of a failing webhook (an answer of 500, and a refused
// connection, whose error carries the URL) name it without its password and its query.
func TestLogsRedactURL(t *testing.T) {
	r := startReceiver(t)
	r.answer = func(int) int { return 500 }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	withCreds := func(hostport string) string {
		return "http://user:PASSWORD1@" + hostport + "/hook?token=QUERYTOKEN1#frag"
	}
	var logs syncBuffer
	a := testApp
	a.Webhooks = []Webhook{{URL: withCreds(strings.TrimPrefix(r.srv.URL, "http://"))}, {URL: withCreds(closed)}}
	s := New([]App{a}, Options{BatchInterval: 10 * time.Millisecond, RetryMinBackoff: 10 * time.Millisecond, RetryMaxBackoff: 50 * time.Millisecond},
		slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { // the events still failing are abandoned at once
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Close(ctx)
	})
	s.Observer("app-id").Observe(act(herald.ChannelOccupied, "a"))
	eventually(t, "both webhooks' failures logged", func() (bool, string) {
		out := logs.String()
		return strings.Count(out, "webhook failed") >= 2 && strings.Contains(out, "err="), out
	})
	out := logs.String()
	for _, secret := range []string{"PASSWORD1", "QUERYTOKEN1", "token=", "frag"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log holds %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "user:xxxxx@"+closed+"/hook") {
		t.Fatalf("the log does not name the URL redacted:\n%s", out)
	}
}

// TestConfigErrorsRedactURL: CheckURL's errors do not echo a password or a query either.
func TestConfigErrorsRedactURL(t *testing.T) {
	for _, u := range []string{"ftp://u:PASSWORD1@h/p?token=QUERYTOKEN1", "http://u:PASSWORD1@/p?token=QUERYTOKEN1",
		"http://u:PASSWORD1@h:bad/p?token=QUERYTOKEN1", "::PASSWORD1?token=QUERYTOKEN1"} {
		err := CheckURL(u)
		if err == nil {
			t.Fatalf("CheckURL(%q): no error", u)
		}
		if strings.Contains(err.Error(), "PASSWORD1") || strings.Contains(err.Error(), "QUERYTOKEN1") {
			t.Errorf("CheckURL(%q) = %v", u, err)
		}
	}
}

// TestHeaderControlCharacters: a header value holding any control character is refused, not
// only CR and LF.
func TestHeaderControlCharacters(t *testing.T) {
	for _, c := range []string{"\x00", "\x01", "\t", "\x0b", "\x1b", "\x7f", "\r", "\n"} {
		if CheckHeader("X-Token", "a"+c+"b") == nil {
			t.Errorf("a value holding %q passes", c)
		}
	}
	if err := CheckHeader("X-Token", "abc DEF-123_~é"); err != nil {
		t.Error(err)
	}
}
