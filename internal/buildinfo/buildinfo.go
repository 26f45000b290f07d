// Package buildinfo names the version of a herald binary.
package buildinfo

import "runtime/debug"

// Version is a binary's version: ldflags (the value set at build time with -ldflags
// "-X main.version=v1.2.3") when not empty, else the main module's version or VCS revision
// recorded by the go command, else "dev".
func Version(ldflags string) string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(ldflags, info)
}

// versionOf picks the version from the ldflags value and the build information (nil when
// the binary has none).
func versionOf(ldflags string, info *debug.BuildInfo) string {
	if ldflags != "" {
		return ldflags
	}
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(len(s.Value), 12)]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "dev"
	}
	return rev + dirty
}
