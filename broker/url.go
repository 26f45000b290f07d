package broker

import (
	"net/url"
	"strings"
)

// RedactURL returns a bus URL (or a comma-separated list of them) fit for a log line: a
// password, or a user part without one (a NATS token), is replaced by "xxxxx".
func RedactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		switch {
		case err != nil:
			parts[i] = "(unparsable URL)"
		case u.User == nil:
			parts[i] = u.String()
		default:
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			} else {
				u.User = url.User("xxxxx")
			}
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
