package nats

import (
	"strconv"
	"strings"

	"github.com/herald-rt/herald"
)

// MinReplicatedVersion is the first nats-server whose replicated streams check a publish's
// expected last sequence of its subject against the publishes of that subject still being
// stored, not only against what is stored: before it (Debian's 2.9.10), two nodes'
// publishes to one channel at the same moment can both be stored with one offset. With
// HistoryReplicas above 1 a History refuses an older server (checkServer).
const MinReplicatedVersion = "2.11.0"

// checkServer fails, with CodeUnavailable, when this History's streams are replicated and
// the server the broker is connected to is older than MinReplicatedVersion. Not connected,
// it passes: the next publish checks again.
func (h *History) checkServer() error {
	if h.replicas() < 2 {
		return nil
	}
	v := h.b.nc.ConnectedServerVersion()
	if v == "" || !older(v, MinReplicatedVersion) {
		return nil
	}
	return herald.Errorf(herald.CodeUnavailable, "history.replicas %d needs nats-server %s or later on every server of the cluster "+
		"(an older one can give one offset of a channel to two nodes' publishes); the server at %s runs %s: upgrade it, or set history.replicas to 1",
		h.replicas(), MinReplicatedVersion, h.b.nc.ConnectedUrlRedacted(), v)
}

// older reports whether version v (major.minor.patch, perhaps with a suffix such as
// "-RC.1", which is ignored) is before least.
func older(v, least string) bool {
	a, b := versionOf(v), versionOf(least)
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func versionOf(v string) [3]int {
	var n [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	for i, f := range strings.SplitN(v, ".", 3) {
		n[i], _ = strconv.Atoi(f)
	}
	return n
}
