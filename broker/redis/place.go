package redis

// Placement of channels. A channel's shard is chosen by rendezvous (highest random weight)
// hashing: each shard's score for (app, channel) is mix(FNV-1a 64 of the shard's id, a zero
// byte, the app id, a zero byte, the channel name), and the shard with the highest score
// holds the channel. Every node computes the same answer from the same shard ids, whatever
// the order they are listed in and across restarts. Adding a shard to N moves only the
// channels the new shard now wins (about 1/(N+1) of them), all to the new shard; removing one
// moves only its own channels. (A hash mod N would move about N/(N+1) of them.)
//
// On a Redis Cluster the same hash of (app, channel) alone, mod ClusterSlots, picks the
// channel's group; the cluster maps the group's hash slot to a node.

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnv adds s to an FNV-1a 64 hash.
func fnv(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix is splitmix64's finalizer: FNV's high bits alone are poorly spread for short inputs.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// channelHash hashes (app, channel), continuing from h.
func channelHash(h uint64, app, channel string) uint64 {
	h = fnv(h, "\x00")
	h = fnv(h, app)
	h = fnv(h, "\x00")
	return mix(fnv(h, channel))
}

// Rendezvous returns the index in ids of the shard that holds (app, channel). ids must not be
// empty; with one shard it is 0.
func Rendezvous(ids []string, app, channel string) int {
	return pick(seeds(ids), app, channel)
}

// seeds returns the hashes of the shard ids that pick starts from.
func seeds(ids []string) []uint64 {
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = fnv(fnvOffset, id)
	}
	return out
}

// pick is Rendezvous on the shards' seeds.
func pick(seeds []uint64, app, channel string) int {
	if len(seeds) == 1 {
		return 0
	}
	best, bestScore := 0, uint64(0)
	for i, seed := range seeds {
		if s := channelHash(seed, app, channel); i == 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// ClusterGroup returns the group, from 0 to ClusterSlots-1, of (app, channel) on a Redis
// Cluster: its keys and pub/sub channel start with the hash tag {<prefix>.<group>}.
func ClusterGroup(app, channel string) int {
	return int(channelHash(fnvOffset, app, channel) % ClusterSlots)
}
