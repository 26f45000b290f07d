// Package tlstest makes certificates for tests: a CA of the test's own and a server
// certificate it signs for 127.0.0.1, ::1 and localhost, written as PEM files when asked.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the CA certificate, for clients to trust
	Pool *x509.CertPool
}

// NewCA makes a CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	ca, err := MakeCA()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// MakeCA makes a CA (for a program: NewCA is the tests' form).
func MakeCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "herald test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Pool: pool}, nil
}

// Leaf is a server certificate and its key, PEM-encoded.
type Leaf struct {
	CertPEM, KeyPEM []byte
	Serial          int64
}

var serial = time.Now().UnixNano()

// Issue signs a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Issue(t testing.TB) Leaf {
	t.Helper()
	l, err := ca.Make()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Make is Issue for a program.
func (ca *CA) Make() (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, err
	}
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Leaf{}, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	return Leaf{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), Serial: serial}, nil
}

// TLS returns the leaf as a tls.Certificate.
func (l Leaf) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Write writes the leaf to cert.pem and key.pem in dir (replacing them atomically, as a
// certificate manager does) and returns their paths.
func (l Leaf) Write(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path string
		b    []byte
	}{{keyFile, l.KeyPEM}, {certFile, l.CertPEM}} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// ClientConfig trusts the CA only.
func (ca *CA) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
}
