package servicetest

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CA is a certificate authority a test makes, in the test's temporary directory: it issues
// the certificates of servers and clients, each written as PEM files.
type CA struct {
	CertFile string // the CA's certificate
	dir      string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
}

// NewCA makes a CA valid for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "herald test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{dir: t.TempDir(), cert: cert, key: key}
	ca.CertFile = ca.write(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

// Issue returns the files of a new certificate and its key for name: a server's, valid for
// 127.0.0.1 and localhost, or a client's.
func (ca *CA) Issue(t testing.TB, name string, client bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key) // PKCS #8: what Java's PEM key stores take too
	if err != nil {
		t.Fatal(err)
	}
	return ca.write(t, name+".pem", "CERTIFICATE", der), ca.write(t, name+"-key.pem", "PRIVATE KEY", kder)
}

func (ca *CA) write(t testing.TB, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ClientTLS is a TLS configuration that trusts ca and presents the client certificate given
// (none when certFile is empty).
func (ca *CA) ClientTLS(t testing.TB, certFile, keyFile string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c
}

// RedisTLS starts a redis-server that listens only for TLS, its certificate issued by ca,
// requiring clients to present a certificate of ca (tls-auth-clients), with the extra
// arguments (say, "--user", ...). Its URL is rediss://.
func RedisTLS(t testing.TB, ca *CA, extra ...string) *Server {
	t.Helper()
	cert, key := ca.Issue(t, "redis-server", false)
	probeCert, probeKey := ca.Issue(t, "redis-probe", true)
	probe := ca.ClientTLS(t, probeCert, probeKey)
	return start(t, &Server{Name: "redis-server", tls: true,
		args: func(port int, dir string) []string {
			return append([]string{"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca.CertFile, "--tls-auth-clients", "yes",
				"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--protected-mode", "no",
				"--loglevel", "warning"}, extra...)
		},
		ready: func(c net.Conn) error {
			tc := tls.Client(c, probe)
			if err := tc.Handshake(); err != nil {
				return err
			}
			// An answer, whatever it is (a NOAUTH error when the default user is off), says
			// that the server is up.
			if _, err := tc.Write([]byte("PING\r\n")); err != nil {
				return err
			}
			line, err := bufio.NewReader(tc).ReadString('\n')
			if err != nil {
				return err
			}
			if !strings.HasPrefix(line, "+PONG") && !strings.HasPrefix(line, "-NOAUTH") {
				return fmt.Errorf("PING answered %q", line)
			}
			return nil
		}})
}

// NATSConf starts a nats-server on a free loopback port with conf, a configuration file's
// text (its listen address is added), with JetStream when js. Its URL is nats://.
func NATSConf(t testing.TB, conf string, js bool) *Server {
	t.Helper()
	return start(t, &Server{Name: "nats-server",
		args: func(port int, dir string) []string {
			text := fmt.Sprintf("listen: 127.0.0.1:%d\n%s\n", port, conf)
			if js {
				text += fmt.Sprintf("jetstream: {store_dir: %q}\n", filepath.Join(dir, "jetstream"))
			}
			path := filepath.Join(dir, "nats.conf")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{"-c", path}
		},
		ready: func(c net.Conn) error {
			line, err := bufio.NewReader(c).ReadBytes('\n')
			if err != nil {
				return err
			}
			if !bytes.HasPrefix(line, []byte("INFO ")) {
				return fmt.Errorf("server said %q", line)
			}
			return nil
		}})
}
