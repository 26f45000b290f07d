package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/herald-rt/herald/config"
)

// TestSystemdUnitSecrets: deploy/herald.service keeps secrets out of world-readable files, the
// environment and the command line: the config file comes in as a credential (LoadCredential=)
// and is read from the credential directory; every secret-file variable it shows is one herald
// reads. With systemd-analyze on the machine the unit is verified too.
func TestSystemdUnitSecrets(t *testing.T) {
	b, err := os.ReadFile("../../deploy/herald.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"\nDynamicUser=yes\n",
		"\nLoadCredential=herald.yaml:/etc/herald/herald.yaml\n",
		"\nExecStart=/usr/local/bin/herald serve --config %d/herald.yaml\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("deploy/herald.service lacks %q", strings.TrimSpace(want))
		}
	}
	known := map[string]bool{}
	for _, v := range config.SecretFileVars() { // the cluster secret's file has a setting of its own
		known[v] = true
	}
	vars := regexp.MustCompile(`Environment=(HERALD_[A-Z_]+)=%d/`).FindAllStringSubmatch(unit, -1)
	if len(vars) != len(known) {
		t.Errorf("the unit shows %d secret-file variables, herald reads %d", len(vars), len(known))
	}
	for _, m := range vars {
		if !known[m[1]] {
			t.Errorf("the unit sets %s, which herald does not read", m[1])
		}
	}
	for _, line := range strings.Split(unit, "\n") {
		if strings.HasPrefix(line, "Environment=") && regexp.MustCompile(`(SECRET|TOKEN|URL)=[^%]`).MatchString(line) {
			t.Errorf("a secret set in the environment: %s", line)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze: the unit is not verified")
		return
	}
	// verify checks that ExecStart's binary exists: point it at one that does.
	path := filepath.Join(t.TempDir(), "herald.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/herald", "/bin/true")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
