package broker

import (
	"math/rand/v2"

	"github.com/herald-rt/herald"
)

// CheckRule returns the error of a History's Publish or Read under a rule that could keep
// nothing: CodeInvalid unless its Size and TTL are both more than 0.
func CheckRule(r herald.HistoryRule) error {
	if r.Size < 1 || r.TTL <= 0 {
		return herald.Errorf(herald.CodeInvalid, "history rule %q: size %d and ttl %v: want both more than 0", r.Channels, r.Size, r.TTL)
	}
	return nil
}

// NewEpoch returns a new epoch for a channel history that starts: 16 random hex digits, from
// math/rand/v2's generator (seeded by the system): epochs must not repeat, they need not be
// secret.
func NewEpoch() string {
	const hex = "0123456789abcdef"
	var b [16]byte
	r := rand.Uint64()
	for i := range b {
		b[i] = hex[r&15]
		r >>= 4
	}
	return string(b[:])
}
