package guard

import (
	"fmt"
	"net/url"
	"strings"
)

// Origins is an app's allow-list of browser origins. An empty list allows every origin.
type Origins struct {
	any      bool
	patterns []originPattern
}

type originPattern struct {
	scheme string // "" matches any scheme
	host   string // lower case, with port when given; "*.example.com" matches subdomains
}

// ParseOrigins compiles patterns: "*" (any origin), "https://example.com" (exactly that
// scheme, host and port), "example.com" (any scheme), and "https://*.example.com" or
// "*.example.com" (any subdomain of example.com, not example.com itself).
func ParseOrigins(patterns []string) (Origins, error) {
	var o Origins
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "*" {
			o.any = true
			continue
		}
		var op originPattern
		rest := p
		if scheme, host, ok := strings.Cut(p, "://"); ok {
			if scheme == "" {
				return Origins{}, fmt.Errorf("origin %q: empty scheme", p)
			}
			op.scheme, rest = strings.ToLower(scheme), host
		}
		if rest == "" || strings.ContainsAny(rest, "/?#@ ") {
			return Origins{}, fmt.Errorf("origin %q: want scheme://host[:port], host[:port] or *.domain", p)
		}
		if strings.Contains(strings.TrimPrefix(rest, "*."), "*") {
			return Origins{}, fmt.Errorf("origin %q: a wildcard may only start the host (*.example.com)", p)
		}
		op.host = strings.ToLower(rest)
		o.patterns = append(o.patterns, op)
	}
	return o, nil
}

// Allowed reports whether a browser's Origin header value may connect. A request without an
// Origin header (every non-browser client) is allowed: only browsers send it, and anything
// else can claim any origin it likes.
func (o Origins) Allowed(origin string) bool {
	if origin == "" || o.any || len(o.patterns) == 0 {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	for _, p := range o.patterns {
		if p.scheme != "" && p.scheme != scheme {
			continue
		}
		if suffix, ok := strings.CutPrefix(p.host, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
			continue
		}
		if host == p.host {
			return true
		}
	}
	return false
}

// Restricted reports whether the list allows only some origins.
func (o Origins) Restricted() bool { return !o.any && len(o.patterns) > 0 }

// NoOrigins allows no browser origin (a request without an Origin header still passes, as
// with every list): what an app whose list cannot be read gets.
func NoOrigins() Origins { return Origins{patterns: []originPattern{{host: "\x00"}}} }
