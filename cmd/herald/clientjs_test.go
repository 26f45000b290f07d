package main

import (
	"bytes"
	"testing"

	clientjs "github.com/herald-rt/herald/clients/js"
)

// TestServesRecoveryHelper: the public port serves the recovery helper beside the API: the
// ES module is clients/js/index.js, the plain script sets the global, an unknown file under
// /client/ is 404, and the API's own routes are unchanged.
func TestServesRecoveryHelper(t *testing.T) {
	n := startServe(t, "client")
	until(t, "the node to answer /health", func() bool { code, _, err := n.get(t, "/health"); return err == nil && code == 200 })
	code, body, err := n.get(t, clientjs.ModulePath)
	if err != nil || code != 200 || !bytes.Equal(body, clientjs.Module) {
		t.Fatalf("%s: %d, %d bytes, %v; want 200 and index.js", clientjs.ModulePath, code, len(body), err)
	}
	script, _ := clientjs.Script(clientjs.Module)
	code, body, err = n.get(t, clientjs.ScriptPath)
	if err != nil || code != 200 || !bytes.Equal(body, script) {
		t.Fatalf("%s: %d, %d bytes, %v; want 200 and the plain script", clientjs.ScriptPath, code, len(body), err)
	}
	if code, _, _ := n.get(t, "/client/nothing.js"); code != 404 {
		t.Errorf("/client/nothing.js: %d, want 404", code)
	}
	if code, body, _ := n.get(t, "/"); code != 200 || !bytes.Contains(body, []byte(`"server":"herald"`)) {
		t.Errorf("/: %d %s", code, body)
	}
	if code, body, _ := n.get(t, "/clients"); code != 404 || !bytes.Contains(body, []byte(`"error"`)) {
		t.Errorf("/clients (the API's 404): %d %s", code, body)
	}
}
