package pusher

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
)

func TestValidateEvent(t *testing.T) {
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("c%d", i)
		}
		return out
	}
	small := herald.Limits{MaxEventNameLength: 5, MaxChannelNameLength: 6, MaxEventPayloadBytes: 4, MaxChannelsPerEvent: 2}
	for _, tc := range []struct {
		name     string
		event    string
		channels []string
		data     string
		socketID string
		lim      herald.Limits
		want     []string    // channels returned, when valid
		code     herald.Code // when invalid
		message  string      // part of the error's message, when invalid
	}{
		{name: "valid", event: "e", channels: []string{"a", "private-b"}, data: "{}", socketID: "123.456", want: []string{"a", "private-b"}},
		{name: "zero limits are the defaults", event: strings.Repeat("e", 200), channels: many(100), data: strings.Repeat("x", 10240), want: many(100)},
		{name: "repeats removed in first order", event: "e", channels: []string{"b", "a", "b", "a", "c"}, want: []string{"b", "a", "c"}},
		{name: "empty data", event: "e", channels: []string{"a"}, want: []string{"a"}},
		{name: "name at the limit", event: "12345", channels: []string{"a"}, lim: small, want: []string{"a"}},
		{name: "name too long", event: "123456", channels: []string{"a"}, lim: small, code: herald.CodeInvalid, message: "name: event name is 6 bytes, over the limit of 5"},
		{name: "default name limit", event: strings.Repeat("e", 201), channels: []string{"a"}, code: herald.CodeInvalid, message: "over the limit of 200"},
		{name: "empty name", channels: []string{"a"}, code: herald.CodeInvalid, message: "name: event name is empty"},
		{name: "name with a control character", event: "a\nb", channels: []string{"a"}, code: herald.CodeInvalid, message: "control character"},
		{name: "name not UTF-8", event: "a\xffb", channels: []string{"a"}, code: herald.CodeInvalid, message: "not valid UTF-8"},
		{name: "no channel", event: "e", code: herald.CodeInvalid, message: "at least one channel"},
		{name: "channels at the limit", event: "e", channels: many(2), lim: small, want: many(2)},
		{name: "channels over the limit", event: "e", channels: many(3), lim: small, code: herald.CodeInvalid, message: "at most 2 channels per event"},
		{name: "101 channels by default", event: "e", channels: many(101), code: herald.CodeInvalid, message: "at most 100 channels per event"},
		{name: "repeats count before removal", event: "e", channels: []string{"a", "a", "a"}, lim: small, code: herald.CodeInvalid, message: "at most 2 channels"},
		{name: "channel name too long", event: "e", channels: []string{"abcdefg"}, lim: small, code: herald.CodeInvalid, message: `channel "abcdefg": channel name is 7 bytes, over the limit of 6`},
		{name: "default channel name limit", event: "e", channels: []string{strings.Repeat("c", 165)}, code: herald.CodeInvalid, message: "over the limit of 164"},
		{name: "channel with a space", event: "e", channels: []string{"ok", "has space"}, code: herald.CodeInvalid, message: `channel "has space": channel name has invalid character ' '`},
		{name: "channel with a slash", event: "e", channels: []string{"a/b"}, code: herald.CodeInvalid, message: "invalid character '/'"},
		{name: "empty channel", event: "e", channels: []string{""}, code: herald.CodeInvalid, message: "channel name is empty"},
		{name: "user channel", event: "e", channels: []string{"#server-to-user-42"}, want: []string{"#server-to-user-42"}},
		{name: "socket id without a dot", event: "e", channels: []string{"a"}, socketID: "123", code: herald.CodeInvalid, message: `socket_id "123" is not a socket id`},
		{name: "socket id with letters", event: "e", channels: []string{"a"}, socketID: "12a.3", code: herald.CodeInvalid, message: "not a socket id"},
		{name: "socket id with two dots", event: "e", channels: []string{"a"}, socketID: "1.2.3", code: herald.CodeInvalid, message: "not a socket id"},
		{name: "socket id with an empty part", event: "e", channels: []string{"a"}, socketID: "1.", code: herald.CodeInvalid, message: "not a socket id"},
		{name: "socket id with a sign", event: "e", channels: []string{"a"}, socketID: "-1.2", code: herald.CodeInvalid, message: "not a socket id"},
		{name: "data at the limit", event: "e", channels: []string{"a"}, data: "abcd", lim: small, want: []string{"a"}},
		{name: "data over the limit", event: "e", channels: []string{"a"}, data: "abcde", lim: small, code: herald.CodeTooLarge, message: "data is 5 bytes, over the limit of 4"},
		{name: "data over the default limit", event: "e", channels: []string{"a"}, data: strings.Repeat("x", 10241), code: herald.CodeTooLarge, message: "over the limit of 10240"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ValidateEvent(tc.event, tc.channels, tc.data, tc.socketID, tc.lim)
			if tc.message == "" {
				if err != nil || !slices.Equal(got, tc.want) {
					t.Fatalf("ValidateEvent = %q, %v; want %q, nil", got, err, tc.want)
				}
				return
			}
			if err == nil || herald.CodeOf(err) != tc.code || !strings.Contains(herald.MessageOf(err), tc.message) {
				t.Fatalf("ValidateEvent = %q, %v (code %v); want code %v with %q", got, err, herald.CodeOf(err), tc.code, tc.message)
			}
		})
	}
}

func TestValidateChannelsKeepsASliceWithoutRepeats(t *testing.T) {
	in := []string{"a", "b", "c"}
	got, err := ValidateChannels(in, herald.Limits{})
	if err != nil || &got[0] != &in[0] {
		t.Fatalf("ValidateChannels(%q) = %q, %v; want the same slice back", in, got, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ValidateChannels(in, herald.Limits{}) }); n != 0 {
		t.Fatalf("ValidateChannels allocates %v times for channels without repeats; want 0", n)
	}
	dup := []string{"a", "b", "a"}
	if got, _ := ValidateChannels(dup, herald.Limits{}); !slices.Equal(dup, []string{"a", "b", "a"}) || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ValidateChannels(%q) = %q and changed its argument to %q", []string{"a", "b", "a"}, got, dup)
	}
}

func TestValidateEventData(t *testing.T) {
	if err := ValidateEventData(strings.Repeat("x", 10240), 0); err != nil {
		t.Fatalf("10240 bytes under the default limit: %v", err)
	}
	if err := ValidateEventData(strings.Repeat("x", 10241), 0); herald.CodeOf(err) != herald.CodeTooLarge {
		t.Fatalf("10241 bytes under the default limit: %v; want CodeTooLarge", err)
	}
}
