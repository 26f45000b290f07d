package herald

import (
	"errors"
	"fmt"
	"testing"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name  string
		kind  ChannelKind
		cache bool
	}{
		{"news", Public, false},
		{"cache-news", Public, true},
		{"private-chat", Private, false},
		{"private-cache-chat", Private, true},
		{"private-encrypted-chat", PrivateEncrypted, false},
		{"private-encrypted-cache-chat", PrivateEncrypted, true},
		{"presence-room", Presence, false},
		{"presence-cache-room", Presence, true},
		{"#server-to-user-42", User, false},
		{"privatechat", Public, false},
	}
	for _, c := range cases {
		got := Classify(c.name)
		if got.Kind != c.kind || got.Cache != c.cache {
			t.Errorf("Classify(%q) = %v cache=%v; want %v cache=%v", c.name, got.Kind, got.Cache, c.kind, c.cache)
		}
	}
}

func TestEveryCodeHasPusherCodeAndStatus(t *testing.T) {
	if len(pusherCodes) != len(httpStatuses) {
		t.Fatalf("tables differ in length: %d pusher codes, %d statuses", len(pusherCodes), len(httpStatuses))
	}
	for c := Code(0); int(c) < len(pusherCodes); c++ {
		if p := c.PusherCode(); p < 4000 || p > 4399 {
			t.Errorf("code %d: Pusher code %d outside 4000-4399", c, p)
		}
		if s := c.HTTPStatus(); s < 400 || s > 599 {
			t.Errorf("code %d: HTTP status %d is not an error status", c, s)
		}
	}
	// PROTOCOL.md §1.3: the codes pusher-js acts on.
	for code, want := range map[Code]int{CodeAppNotFound: 4001, CodeAppOverQuota: 4004, CodeOverCapacity: 4100,
		CodeSlowConsumer: 4100, CodePongTimeout: 4201, CodeReconnect: 4200, CodeUnauthorized: 4009, CodeRateLimited: 4301} {
		if got := code.PusherCode(); got != want {
			t.Errorf("code %d: Pusher code %d, want %d", code, got, want)
		}
	}
}

func TestCodeOfWrapped(t *testing.T) {
	err := fmt.Errorf("publish: %w", Errorf(CodeTooLarge, "data is %d bytes", 20000))
	if CodeOf(err) != CodeTooLarge || MessageOf(err) != "data is 20000 bytes" {
		t.Fatalf("CodeOf/MessageOf lost the domain error: %v %q", CodeOf(err), MessageOf(err))
	}
	if CodeOf(errors.New("boom")) != CodeInternal || MessageOf(errors.New("boom")) != "internal error" {
		t.Fatal("a plain error must map to CodeInternal with a generic message")
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	l := Limits{MaxPresenceMembers: 5}.WithDefaults()
	if l.MaxPresenceMembers != 5 || l.MaxEventPayloadBytes != DefaultLimits.MaxEventPayloadBytes {
		t.Fatalf("WithDefaults = %+v", l)
	}
}
