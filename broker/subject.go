package broker

import "strings"

// Subject names the bus subject of (app, channel) under prefix: "prefix.app.channel", where
// app and channel are escaped so that each is one non-empty token made only of
// [A-Za-z0-9_=@,;#-]: every other byte (the '.' that separates NATS tokens, '%', ':',
// wildcards, spaces) becomes %XX, and an empty name becomes "%". The mapping is one to one,
// so two channels never share a subject; Redis uses the same names for its channels.
func Subject(prefix, app, channel string) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(app) + len(channel) + 2)
	b.WriteString(prefix)
	b.WriteByte('.')
	escape(&b, app)
	b.WriteByte('.')
	escape(&b, channel)
	return b.String()
}

// Token escapes name into one token of a subject, as Subject escapes app and channel.
func Token(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	escape(&b, name)
	return b.String()
}

const hexDigits = "0123456789ABCDEF"

func escape(b *strings.Builder, s string) {
	if s == "" {
		b.WriteByte('%')
		return
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
}

func plain(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("_=@,;#-", c) >= 0
}

// ValidPrefix reports whether prefix can start a subject: non-empty, printable ASCII
// without spaces or wildcards, and no empty token.
func ValidPrefix(prefix string) bool {
	if prefix == "" || prefix[0] == '.' || prefix[len(prefix)-1] == '.' || strings.Contains(prefix, "..") {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; c <= ' ' || c >= 0x7f || c == '*' || c == '>' {
			return false
		}
	}
	return true
}
