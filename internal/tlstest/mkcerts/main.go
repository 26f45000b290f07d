// Command mkcerts writes a CA made for one test run (ca.pem) and a server certificate it
// signs for 127.0.0.1, ::1 and localhost (cert.pem, key.pem) into the directory given: the
// real-client suite (test/js) runs herald with TLS on them, its clients trusting ca.pem.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/herald-rt/herald/internal/tlstest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkcerts DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "mkcerts:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	ca, err := tlstest.MakeCA()
	if err != nil {
		return err
	}
	leaf, err := ca.Make()
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{"ca.pem": ca.PEM, "cert.pem": leaf.CertPEM, "key.pem": leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
