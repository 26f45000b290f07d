package pusher

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/herald-rt/herald"
)

func TestValidateChannelName(t *testing.T) {
	ok := []string{
		"my-channel",
		"private-azAZ09_-=@,.;",
		"presence-room.42",
		"private-encrypted-cache-x",
		"#server-to-user-12345",
		"#server-to-user-a@b.c",
		strings.Repeat("a", 164),
		"server-to-user-x",
	}
	for _, name := range ok {
		if err := ValidateChannelName(name, 164); err != nil {
			t.Errorf("ValidateChannelName(%q): %v", name, err)
		}
	}
	bad := []struct {
		name string
		code herald.Code
		msg  string
	}{
		{"", herald.CodeInvalid, "empty"},
		{"my channel", herald.CodeInvalid, "invalid character ' ' at byte 2"},
		{"a:b", herald.CodeInvalid, "invalid character ':'"},
		{"#general", herald.CodeInvalid, "invalid character '#' at byte 0"},
		{"#server-to-user-", herald.CodeInvalid, "no user id"},
		{"#server-to-user-a#b", herald.CodeInvalid, "invalid character '#' at byte 17"},
		{"#server-to-user-a b", herald.CodeInvalid, "invalid character ' '"},
		{"private-\u00e9", herald.CodeInvalid, "invalid character 'é' at byte 8"},
		{"bad\xff", herald.CodeInvalid, "invalid character"},
		{"a/b", herald.CodeInvalid, "invalid character '/'"},
		{strings.Repeat("a", 165), herald.CodeTooLarge, "165 bytes, over the limit of 164"},
		{strings.Repeat("a", 164) + " ", herald.CodeInvalid, "invalid character"},
		{"#server-to-user-" + strings.Repeat("1", 149), herald.CodeTooLarge, "over the limit"},
	}
	for _, tt := range bad {
		err := ValidateChannelName(tt.name, 164)
		if err == nil {
			t.Errorf("ValidateChannelName(%q) succeeded", tt.name)
			continue
		}
		wantErr(t, err, tt.code, tt.msg)
	}
	if err := ValidateChannelName(strings.Repeat("a", 200), 0); err == nil {
		t.Error("maxLen 0 does not fall back to the default limit")
	}
}

func TestValidateEventName(t *testing.T) {
	for _, name := range []string{"my-event", "client-typing", "pusher-ping", "pusher_ping", "my-pusher:ping", "with space", "\u00e9v\u00e9nement", "x"} {
		if err := ValidateEventName(name, 200); err != nil {
			t.Errorf("ValidateEventName(%q): %v", name, err)
		}
	}
	bad := []struct {
		name string
		code herald.Code
		msg  string
	}{
		{"", herald.CodeInvalid, "empty"},
		{"pusher:ping", herald.CodeInvalid, "reserved"},
		{"pusher:error", herald.CodeInvalid, "reserved"},
		{"pusher_internal:member_added", herald.CodeInvalid, `"pusher_internal:member_added" is reserved`},
		{"a\nb", herald.CodeInvalid, "control character U+000A at byte 1"},
		{"a\x00", herald.CodeInvalid, "control character U+0000"},
		{"a\x7f", herald.CodeInvalid, "control character U+007F"},
		{"a\u0085", herald.CodeInvalid, "control character U+0085"},
		{"a\xffb", herald.CodeInvalid, "not valid UTF-8 at byte 1"},
		{strings.Repeat("e", 201), herald.CodeTooLarge, "201 bytes, over the limit of 200"},
		{strings.Repeat("e", 201) + "\n", herald.CodeInvalid, "control character"},
	}
	for _, tt := range bad {
		err := ValidateEventName(tt.name, 200)
		if err == nil {
			t.Errorf("ValidateEventName(%q) succeeded", tt.name)
			continue
		}
		wantErr(t, err, tt.code, tt.msg)
	}
}

func TestValidSocketID(t *testing.T) {
	for s, want := range map[string]bool{
		"1234.1234": true, "1.2": true, "0.0": true,
		"": false, ".": false, "1.": false, ".1": false, "1": false, "1.2.3": false, "a.1": false, "1.2 ": false, "-1.2": false,
	} {
		if got := ValidSocketID(s); got != want {
			t.Errorf("ValidSocketID(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzValidateChannelName checks ValidateChannelName against a plain reading of the rule.
func FuzzValidateChannelName(f *testing.F) {
	for _, s := range []string{"my-channel", "#server-to-user-1", "#server-to-user-", "a b", "private-\u00e9", strings.Repeat("x", 170)} {
		f.Add(s, 164)
	}
	f.Fuzz(func(t *testing.T, name string, maxLen int) {
		err := ValidateChannelName(name, maxLen)
		limit := maxLen
		if limit <= 0 {
			limit = herald.DefaultLimits.MaxChannelNameLength
		}
		body, user := strings.CutPrefix(name, herald.UserChannelPrefix)
		charsOK := name != "" && !(user && body == "") && strings.Trim(body, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-=@,.;") == ""
		var e *herald.Error
		switch {
		case charsOK && len(name) <= limit:
			if err != nil {
				t.Fatalf("ValidateChannelName(%q, %d) = %v, want nil", name, maxLen, err)
			}
		case err == nil:
			t.Fatalf("ValidateChannelName(%q, %d) accepted it", name, maxLen)
		case !errors.As(err, &e):
			t.Fatalf("error %v is not a *herald.Error", err)
		case charsOK && e.Code != herald.CodeTooLarge, !charsOK && e.Code != herald.CodeInvalid:
			t.Fatalf("ValidateChannelName(%q, %d) code %d", name, maxLen, e.Code)
		}
		if err != nil && !utf8.ValidString(err.Error()) {
			t.Fatalf("error message is not UTF-8: %q", err.Error())
		}
	})
}
