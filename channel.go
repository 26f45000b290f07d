package herald

import "strings"

// ChannelKind is what a channel name's prefix makes it.
type ChannelKind uint8

// The channel kinds of the Pusher protocol.
const (
	Public ChannelKind = iota
	Private
	PrivateEncrypted
	Presence
	User // #server-to-user-{id}
)

// UserChannelPrefix starts the channel a signed-in user receives server-to-user events on.
const UserChannelPrefix = "#server-to-user-"

// ChannelInfo is a channel name's classification.
type ChannelInfo struct {
	Kind  ChannelKind
	Cache bool // cache-, private-cache-, private-encrypted-cache-, presence-cache-
}

// Classify returns the kind of the named channel. It does not validate the name.
func Classify(name string) ChannelInfo {
	switch {
	case strings.HasPrefix(name, UserChannelPrefix):
		return ChannelInfo{Kind: User}
	case strings.HasPrefix(name, "private-encrypted-"):
		return ChannelInfo{Kind: PrivateEncrypted, Cache: strings.HasPrefix(name, "private-encrypted-cache-")}
	case strings.HasPrefix(name, "private-"):
		return ChannelInfo{Kind: Private, Cache: strings.HasPrefix(name, "private-cache-")}
	case strings.HasPrefix(name, "presence-"):
		return ChannelInfo{Kind: Presence, Cache: strings.HasPrefix(name, "presence-cache-")}
	default:
		return ChannelInfo{Kind: Public, Cache: strings.HasPrefix(name, "cache-")}
	}
}

// NeedsAuth reports whether subscribing needs a signature from the app's auth endpoint.
func (k ChannelKind) NeedsAuth() bool {
	return k == Private || k == PrivateEncrypted || k == Presence
}

// String names the kind as the REST API and logs do.
func (k ChannelKind) String() string {
	switch k {
	case Private:
		return "private"
	case PrivateEncrypted:
		return "private-encrypted"
	case Presence:
		return "presence"
	case User:
		return "user"
	default:
		return "public"
	}
}
