package config

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"os"
	"strings"
)

// TLSConfig is TLS on the public port (wss:// and https:// on one port): a certificate and
// key from files, reloaded on SIGHUP and when the files change, or certificates from an ACME
// CA (ACME). Neither: plain ws:// and http://, TLS terminated in front.
type TLSConfig struct {
	CertFile string // PEM certificate chain, leaf first
	KeyFile  string // PEM private key
	ACME     ACMEConfig
}

// ACMEConfig obtains and renews certificates from an ACME CA (Let's Encrypt by default),
// answering its TLS-ALPN-01 challenges on the public port itself.
type ACMEConfig struct {
	Domains   string // comma-separated host names the certificates are for; empty: ACME off
	Email     string // the account's contact, for the CA's notices
	Directory string // the CA's directory URL; empty: Let's Encrypt's production directory
	CacheDir  string // where the account key and certificates are kept across restarts
	CAFile    string // PEM roots trusted for the directory's HTTPS, besides the system's
}

var tlsSettings = []setting{
	{"tls.cert_file", "PEM certificate (chain) of the public port: it serves wss:// and https://; empty = plain ws://", func(c *Config) any { return &c.TLS.CertFile }},
	{"tls.key_file", "PEM private key of tls.cert_file", func(c *Config) any { return &c.TLS.KeyFile }},
	{"tls.acme.domains", "comma-separated host names to get certificates for from an ACME CA; empty = no ACME", func(c *Config) any { return &c.TLS.ACME.Domains }},
	{"tls.acme.email", "contact address of the ACME account", func(c *Config) any { return &c.TLS.ACME.Email }},
	{"tls.acme.directory", "the ACME CA's directory URL; empty = Let's Encrypt", func(c *Config) any { return &c.TLS.ACME.Directory }},
	{"tls.acme.cache_dir", "directory keeping the ACME account key and certificates", func(c *Config) any { return &c.TLS.ACME.CacheDir }},
	{"tls.acme.ca_file", "PEM roots trusted for the ACME directory's HTTPS, besides the system's", func(c *Config) any { return &c.TLS.ACME.CAFile }},
}

// On reports whether the public port speaks TLS.
func (c TLSConfig) On() bool { return c.CertFile != "" || c.ACME.Domains != "" }

// DomainList lists the ACME host names.
func (a ACMEConfig) DomainList() []string {
	var out []string
	for _, d := range strings.Split(a.Domains, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, strings.ToLower(d))
		}
	}
	return out
}

// tls checks tls.*: a readable, matching certificate and key, or a complete ACME setup;
// not both.
func (l *loader) tls(c *Config) {
	t := c.TLS
	switch {
	case t.CertFile == "" && t.KeyFile != "":
		l.problem("tls.cert_file", "must be set with tls.key_file")
	case t.CertFile != "" && t.KeyFile == "":
		l.problem("tls.key_file", "must be set with tls.cert_file")
	case t.CertFile != "":
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			l.problem("tls.cert_file", "%v", err)
		}
		if t.ACME.Domains != "" {
			l.problem("tls.acme.domains", "ACME and tls.cert_file exclude each other: the certificate comes from one or the other")
		}
	}
	a := t.ACME
	if a.Domains == "" {
		for key, v := range map[string]string{"tls.acme.email": a.Email, "tls.acme.directory": a.Directory, "tls.acme.cache_dir": a.CacheDir, "tls.acme.ca_file": a.CAFile} {
			if v != "" {
				l.problem(key, "set without tls.acme.domains")
			}
		}
		return
	}
	for _, d := range a.DomainList() {
		if !strings.Contains(d, ".") || strings.ContainsAny(d, " */:") || strings.Trim(d, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
			l.problem("tls.acme.domains", "%q is not a host name a CA certifies (a DNS name with a dot)", d)
		}
	}
	if a.CacheDir == "" {
		l.problem("tls.acme.cache_dir", "must be set with tls.acme.domains: without it every restart asks the CA again, and CAs limit how often")
	} else if st, err := os.Stat(a.CacheDir); err == nil && !st.IsDir() {
		l.problem("tls.acme.cache_dir", "%q is not a directory", a.CacheDir)
	}
	if a.Directory != "" {
		if u, err := url.Parse(a.Directory); err != nil || u.Scheme != "https" || u.Host == "" {
			l.problem("tls.acme.directory", "want an https:// URL")
		}
	}
	if a.CAFile != "" {
		if b, err := os.ReadFile(a.CAFile); err != nil {
			l.problem("tls.acme.ca_file", "%v", err)
		} else if !x509.NewCertPool().AppendCertsFromPEM(b) {
			l.problem("tls.acme.ca_file", "%q holds no PEM certificate", a.CAFile)
		}
	}
}
