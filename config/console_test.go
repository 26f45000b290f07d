package config

import (
	"strings"
	"testing"
)

func TestConsoleConfig(t *testing.T) {
	token := "0123456789abcdef0"
	c, err := load(t, nil, map[string]string{"HERALD_CONSOLE_TOKEN": token, "HERALD_CONSOLE_EVENTS_PER_SECOND": "50"})
	if err != nil || c.Console.Token != token || c.Console.EventsPerSecond != 50 {
		t.Fatalf("from the environment: %+v, %v", c.Console, err)
	}
	c, err = load(t, []string{"--console-token", token}, nil)
	if err != nil || c.Console.Token != token || c.Console.EventsPerSecond != 0 {
		t.Fatalf("from a flag: %+v, %v", c.Console, err)
	}
	c, err = load(t, []string{"--config", writeFile(t, "c.yaml", "console:\n  token: "+token+"\n")}, nil)
	if err != nil || c.Console.Token != token {
		t.Fatalf("from a file: %+v, %v", c.Console, err)
	}
	if c, err = load(t, nil, nil); err != nil || c.Console.Token != "" {
		t.Fatalf("default: %+v, %v; want no token (console off)", c.Console, err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--console-token", "short"}, "console.token: 5 characters, at least 16"},
		{[]string{"--console-token", token, "--metrics-enabled=false"}, "console.token: the console is served on the metrics listener"},
		{[]string{"--console-events-per-second", "-1"}, "console.events_per_second: -1 out of range 0..10000"},
		{[]string{"--console-events-per-second", "10001"}, "console.events_per_second: 10001 out of range"},
	} {
		_, err := load(t, bad.args, nil)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v; want %q", bad.args, err, bad.want)
		}
	}
}
