package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFiles names the files of a TLS connection to a bus server, all PEM: CA, the
// certificates that verify the server (empty: the system's roots), and Cert and Key, this
// node's client certificate and its key (both or neither).
type TLSFiles struct {
	CA, Cert, Key string
}

// Set reports whether any file is named.
func (f TLSFiles) Set() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Config reads the files into a TLS client configuration (TLS 1.2 or later) that verifies a
// server named serverName (empty: the name the client dials).
func (f TLSFiles) Config(serverName string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("tls CA: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls CA: %s holds no PEM certificate", f.CA)
		}
	}
	switch {
	case f.Cert != "" && f.Key != "":
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("tls client certificate: give its certificate and its key, or neither")
	}
	return c, nil
}
