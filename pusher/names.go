package pusher

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/herald-rt/herald"
)

// channelNameBytes are the bytes Pusher allows in a channel name: [A-Za-z0-9_\-=@,.;].
var channelNameBytes = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "_-=@,.;" {
		t[c] = true
	}
	return t
}()

// ValidateChannelName checks a channel name: non-empty, at most maxLen bytes, and made only of
// [A-Za-z0-9_\-=@,.;] — except that a name starting with herald.UserChannelPrefix
// ("#server-to-user-") may have its leading '#' and must name a user after the prefix.
// maxLen <= 0 means herald.DefaultLimits.MaxChannelNameLength. The error is a *herald.Error,
// herald.CodeTooLarge when only the length is wrong and herald.CodeInvalid otherwise.
func ValidateChannelName(name string, maxLen int) error {
	if maxLen <= 0 {
		maxLen = herald.DefaultLimits.MaxChannelNameLength
	}
	if name == "" {
		return invalid("channel name is empty")
	}
	start := 0
	if strings.HasPrefix(name, herald.UserChannelPrefix) {
		if len(name) == len(herald.UserChannelPrefix) {
			return invalid("user channel name has no user id after %q", herald.UserChannelPrefix)
		}
		start = 1 // the rest of the prefix is made of allowed bytes
	}
	for i := start; i < len(name); i++ {
		if !channelNameBytes[name[i]] {
			r, _ := utf8.DecodeRuneInString(name[i:])
			return invalid("channel name has invalid character %q at byte %d (allowed: A-Z a-z 0-9 _ - = @ , . ;)", r, i)
		}
	}
	if len(name) > maxLen {
		return herald.Errorf(herald.CodeTooLarge, "channel name is %d bytes, over the limit of %d", len(name), maxLen)
	}
	return nil
}

// ReservedEventName reports whether name belongs to the protocol (pusher: or
// pusher_internal:): only herald itself sends such events, never a publisher.
func ReservedEventName(name string) bool {
	return strings.HasPrefix(name, "pusher:") || strings.HasPrefix(name, "pusher_internal:")
}

// ValidateEventName checks an event name as a publisher sends it (the REST API, the console,
// an ingest source, a client event): non-empty, not reserved (ReservedEventName), valid UTF-8
// without control characters, and at most maxLen bytes (maxLen <= 0 means
// herald.DefaultLimits.MaxEventNameLength). The error is a *herald.Error, herald.CodeTooLarge
// when only the length is wrong and herald.CodeInvalid otherwise.
func ValidateEventName(name string, maxLen int) error {
	if maxLen <= 0 {
		maxLen = herald.DefaultLimits.MaxEventNameLength
	}
	if name == "" {
		return invalid("event name is empty")
	}
	if ReservedEventName(name) {
		return invalid("event name %q is reserved: names starting with pusher: or pusher_internal: are the protocol's", name)
	}
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return invalid("event name is not valid UTF-8 at byte %d", i)
		case unicode.IsControl(r):
			return invalid("event name has control character %U at byte %d", r, i)
		}
		i += size
	}
	if len(name) > maxLen {
		return herald.Errorf(herald.CodeTooLarge, "event name is %d bytes, over the limit of %d", len(name), maxLen)
	}
	return nil
}

// ValidSocketID reports whether s has the form of a socket id, digits "." digits, as
// pusher-http-node checks (/^\d+\.\d+$/).
func ValidSocketID(s string) bool {
	dot := strings.IndexByte(s, '.')
	return dot > 0 && dot < len(s)-1 && allDigits(s[:dot]) && allDigits(s[dot+1:])
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
