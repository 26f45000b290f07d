package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	info := func(main string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Version: main}}
		for i := 0; i < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		name, ldflags string
		info          *debug.BuildInfo
		want          string
	}{
		{"ldflags win", "v1.2.3", info("v0.9.0", "vcs.revision", rev), "v1.2.3"},
		{"module version", "", info("v0.9.0", "vcs.revision", rev), "v0.9.0"},
		{"revision", "", info("(devel)", "vcs.revision", rev), "0123456789ab"},
		{"modified revision", "", info("(devel)", "vcs.revision", rev, "vcs.modified", "true"), "0123456789ab-dirty"},
		{"nothing recorded", "", info("(devel)"), "dev"},
		{"no build info", "", nil, "dev"},
	} {
		if got := versionOf(c.ldflags, c.info); got != c.want {
			t.Errorf("%s: versionOf = %q, want %q", c.name, got, c.want)
		}
	}
}
