package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/herald-rt/herald/config"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// tlsCerts is the public port's certificates: from files, reloaded on SIGHUP and whenever
// the files change (checked every watchEvery), or from an ACME CA. Connections already
// established keep the certificate they were made with: a reload only changes what new
// handshakes get, and drops nobody.
type tlsCerts struct {
	cfg   config.TLSConfig
	log   *slog.Logger
	every time.Duration // how often the files are checked for a change

	cert  atomic.Pointer[tls.Certificate]
	stamp fileStamps // of the files last loaded; the watcher's
	acme  *autocert.Manager

	stopc chan struct{}
	done  chan struct{}
	once  sync.Once
}

// watchEvery is how often the certificate files are checked: a stat of each, nothing more.
const watchEvery = time.Second

func newTLSCerts(cfg config.Config, log *slog.Logger) *tlsCerts {
	return &tlsCerts{cfg: cfg.TLS, log: log, every: watchEvery, stopc: make(chan struct{}), done: make(chan struct{})}
}

// start loads the certificate (or sets ACME up) and starts the watcher. It gives the public
// port's TLS configuration (config); nil when TLS is off.
func (t *tlsCerts) start() (*tls.Config, error) {
	close(t.done) // reopened below when a watcher runs
	switch {
	case t.cfg.CertFile != "":
		if err := t.load(); err != nil {
			t.log.Error("tls: load the certificate", "cert_file", t.cfg.CertFile, "err", err)
			return nil, err
		}
		t.done = make(chan struct{})
		go t.watch()
	case t.cfg.ACME.Domains != "":
		m, err := t.newACME()
		if err != nil {
			t.log.Error("tls: acme", "err", err)
			return nil, err
		}
		t.acme = m
		t.log.Info("tls: certificates from ACME", "domains", t.cfg.ACME.DomainList(), "directory", m.Client.DirectoryURL,
			"cache_dir", t.cfg.ACME.CacheDir)
	default:
		return nil, nil
	}
	return t.config(), nil
}

// stop stops the watcher.
func (t *tlsCerts) stop(context.Context) error {
	t.once.Do(func() { close(t.stopc) })
	<-t.done
	return nil
}

// aeadSuites are the cipher suites the public port offers TLS 1.2 clients: ECDHE key exchange
// and an AEAD cipher only, none of the CBC suites with SHA-1 or SHA-256 MACs that Go still
// offers by default (Lucky13-style padding oracles) nor RSA key exchange (no forward secrecy).
// Every browser and client library of the last decade has one of them. TLS 1.3's suites are
// all AEAD and are not configurable.
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// config is the public port's TLS configuration: TLS 1.2 with AEAD suites only (aeadSuites),
// or TLS 1.3. HTTP/1.1 only: WebSocket upgrades need it, and REST calls are single requests.
func (t *tlsCerts) config() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: aeadSuites, NextProtos: []string{"http/1.1"}, DynamicRecordSizingDisabled: true}
	if t.acme != nil {
		c.GetCertificate = t.acme.GetCertificate
		c.NextProtos = append(c.NextProtos, acme.ALPNProto) // TLS-ALPN-01 challenges, on this port
		return c
	}
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return t.cert.Load(), nil }
	return c
}

// load reads the certificate and key files and makes them the certificate new handshakes get.
func (t *tlsCerts) load() error {
	stamp := stampOf(t.cfg.CertFile, t.cfg.KeyFile)
	c, err := tls.LoadX509KeyPair(t.cfg.CertFile, t.cfg.KeyFile)
	if err != nil {
		return err
	}
	leaf := c.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return err
		}
	}
	t.cert.Store(&c)
	t.stamp = stamp
	t.log.Info("tls: certificate loaded", "cert_file", t.cfg.CertFile, "subject", leaf.Subject.String(),
		"serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// watch reloads the certificate on SIGHUP and when its files change. A reload that fails
// (a file half written, a key that does not match) keeps the previous certificate and is
// logged; the next change or SIGHUP tries again.
func (t *tlsCerts) watch() {
	defer close(t.done)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	for {
		why := ""
		select {
		case <-t.stopc:
			return
		case <-hup:
			why = "SIGHUP"
		case <-tick.C:
			if stampOf(t.cfg.CertFile, t.cfg.KeyFile) == t.stamp {
				continue
			}
			why = "file changed"
		}
		if err := t.load(); err != nil {
			t.stamp = stampOf(t.cfg.CertFile, t.cfg.KeyFile) // try again on the next change, not every tick
			t.log.Warn("tls: certificate reload failed: the previous one stays", "reason", why, "cert_file", t.cfg.CertFile, "err", err)
		}
	}
}

// newACME sets up the ACME client.
func (t *tlsCerts) newACME() (*autocert.Manager, error) {
	a := t.cfg.ACME
	if err := os.MkdirAll(a.CacheDir, 0o700); err != nil {
		return nil, err
	}
	client := &acme.Client{DirectoryURL: a.Directory, UserAgent: "herald"}
	if client.DirectoryURL == "" {
		client.DirectoryURL = acme.LetsEncryptURL
	}
	if a.CAFile != "" {
		b, err := os.ReadFile(a.CAFile)
		if err != nil {
			return nil, err
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, errors.New("tls.acme.ca_file holds no PEM certificate")
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		client.HTTPClient = &http.Client{Transport: tr, Timeout: time.Minute}
	}
	return &autocert.Manager{Prompt: autocert.AcceptTOS, Cache: autocert.DirCache(a.CacheDir),
		HostPolicy: autocert.HostWhitelist(a.DomainList()...), Email: a.Email, Client: client}, nil
}

// fileStamps tell whether the certificate or key file changed: size and modification time
// of each (a file replaced by a rename, as certificate managers do, changes both).
type fileStamps struct{ cert, key fileStamp }

type fileStamp struct {
	size  int64
	mtime time.Time
	ok    bool
}

func stampOf(cert, key string) fileStamps { return fileStamps{stat(cert), stat(key)} }

func stat(path string) fileStamp {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{size: st.Size(), mtime: st.ModTime(), ok: true}
}
