package config

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// secretKeys are the settings that may hold a secret: each can also be read from a file
// named by its variable or flag with a _FILE / -file suffix (HERALD_CONSOLE_TOKEN_FILE,
// --console-token-file), so that the secret is not in the environment of the process (seen
// by whoever can read /proc/PID/environ) nor on its command line (ps, /proc/PID/cmdline).
// systemd's LoadCredential= hands such files to the service (see deploy/herald.service).
// HERALD_APP_SECRET has its file variant too (appSecretFile).
var secretKeys = []string{"console.token", "cluster.url"}

// maxSecretFile bounds what a secret file may hold.
const maxSecretFile = 64 << 10

// readSecretFile returns the content of a secret file, its final line break removed.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s: over %d bytes: not a secret", path, maxSecretFile)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// secretSetting returns the setting of key.
func secretSetting(key string) setting {
	for _, s := range settings {
		if s.key == key {
			return s
		}
	}
	panic("no setting " + key)
}

// fileVar and fileFlag name a secret's file variants.
func fileVar(env string) string   { return env + "_FILE" }
func fileFlag(flag string) string { return flag + "-file" }

// setSecretFiles reads the secret files named in the environment (at the environment's
// precedence) or by flags (at the flags'): a value and its file at the same level are an
// error.
func (l *loader) setSecretFiles(flags map[string]string, env func(string) string, fromFlags bool) {
	for _, key := range secretKeys {
		s := secretSetting(key)
		var path, named, plain string
		var plainSet bool
		if fromFlags {
			path, named = flags[fileFlag(s.flag())], "flag --"+fileFlag(s.flag())
			_, plainSet = flags[s.flag()]
			plain = "--" + s.flag()
		} else {
			path, named = env(fileVar(s.env())), "env "+fileVar(s.env())
			plainSet = env(s.env()) != ""
			plain = s.env()
		}
		if path == "" {
			continue
		}
		if plainSet {
			l.add(key, named, "set %s or its file, not both", plain)
			continue
		}
		v, err := readSecretFile(path)
		if err != nil {
			l.fail(key, named, err)
			continue
		}
		l.set(s, v, "the file named by "+named)
	}
}

// appSecretField is the app's secret among appFields.
var appSecretField = appFields[2]

// appSecretFile reads the app secret from the file at path (named by named), unless path is
// empty; plain reports that the secret itself was set at the same level, an error.
func (l *loader) appSecretFile(val, src *string, path, named string, plain bool) {
	if path == "" {
		return
	}
	if plain {
		l.add("apps[0].secret", named, "set %s or its file, not both", strings.TrimSuffix(strings.TrimSuffix(named, "_FILE"), "-file"))
		return
	}
	v, err := readSecretFile(path)
	if err != nil {
		l.add("apps[0].secret", named, "%v", err)
		return
	}
	*val, *src = v, "the file named by "+named
}

// EnvVars lists every environment variable `herald serve` reads but the secret files' (see
// SecretFileVars): HERALD_CONFIG, one per setting, and the app credentials'.
func EnvVars() []string {
	vars := []string{"HERALD_CONFIG"}
	for _, s := range settings {
		vars = append(vars, s.env())
	}
	for _, f := range appFields[:appCredentials] {
		vars = append(vars, f.env())
	}
	return vars
}

// SecretFileVars lists the environment variables that name a file holding a secret
// (HERALD_CONSOLE_TOKEN_FILE, ...), the cluster secret's own setting among them.
func SecretFileVars() []string {
	vars := []string{fileVar(appSecretField.env())}
	for _, k := range secretKeys {
		vars = append(vars, fileVar(secretSetting(k).env()))
	}
	return append(vars, secretSetting("cluster.secret_file").env())
}
