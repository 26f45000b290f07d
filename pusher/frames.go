package pusher

import (
	"encoding/json"
	"strconv"

	"github.com/herald-rt/herald"
)

// The fixed frames. pusher-js answers any "pusher:ping" with a pong whatever its data, and
// treats every frame it receives, a pong included, as activity.
var (
	// PingPayload is the server's pusher:ping.
	PingPayload = []byte(`{"event":"pusher:ping","data":"{}"}`)
	// PongPayload is the server's answer to a client's pusher:ping.
	PongPayload = []byte(`{"event":"pusher:pong","data":"{}"}`)
)

// AppendEvent appends a channel event: {"event":E,"channel":C,"data":D,"user_id":U} where the
// data is a JSON string holding data verbatim (Pusher's double encoding: pusher-js JSON.parses
// it when it can and keeps the string otherwise). "channel" is omitted when channel == "" and
// "user_id" when userID == "".
func AppendEvent(dst []byte, event, channel, data, userID string) []byte {
	dst = append(dst, `{"event":`...)
	dst = AppendString(dst, event)
	if channel != "" {
		dst = append(dst, `,"channel":`...)
		dst = AppendString(dst, channel)
	}
	dst = append(dst, `,"data":`...)
	dst = AppendString(dst, data)
	if userID != "" {
		dst = append(dst, `,"user_id":`...)
		dst = AppendString(dst, userID)
	}
	return append(dst, '}')
}

// AppendError appends {"event":"pusher:error","data":{"code":N,"message":M}}. Its data is an
// object, as Pusher sends it; pusher-js reads data.code and data.message.
func AppendError(dst []byte, code int, message string) []byte {
	dst = append(dst, `{"event":"pusher:error","data":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, message)
	return append(dst, `}}`...)
}

// AppendConnectionEstablished appends the handshake frame,
// {"event":"pusher:connection_established","data":"{\"socket_id\":S,\"activity_timeout\":N}"}.
// pusher-js fails the handshake when activity_timeout is missing or zero, so zero or less
// sends DefaultActivityTimeout.
func AppendConnectionEstablished(dst []byte, socketID string, activityTimeoutSec int) []byte {
	if activityTimeoutSec <= 0 {
		activityTimeoutSec = DefaultActivityTimeout
	}
	dst = append(dst, `{"event":"pusher:connection_established","data":"{\"socket_id\":`...)
	dst = appendInnerString(dst, socketID)
	dst = append(dst, `,\"activity_timeout\":`...)
	dst = strconv.AppendInt(dst, int64(activityTimeoutSec), 10)
	return append(dst, `}"}`...)
}

// AppendSubscriptionSucceeded appends pusher_internal:subscription_succeeded for channel. Its
// data is the string "{}" unless isPresence, when it is the string of
// {"presence":{"ids":[...],"hash":{id:info,...},"count":N}} built from presence, which must hold
// distinct user ids (info is null when nil or not valid JSON). pusher-js reads presence.hash
// and presence.count.
func AppendSubscriptionSucceeded(dst []byte, channel string, presence []herald.Member, isPresence bool) []byte {
	dst = append(dst, `{"event":"pusher_internal:subscription_succeeded","channel":`...)
	dst = AppendString(dst, channel)
	if !isPresence {
		return append(dst, `,"data":"{}"}`...)
	}
	dst = append(dst, `,"data":"{\"presence\":{\"ids\":[`...)
	for i, m := range presence {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendInnerString(dst, m.UserID)
	}
	dst = append(dst, `],\"hash\":{`...)
	for i, m := range presence {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendInnerString(dst, m.UserID)
		dst = append(dst, ':')
		dst = appendInnerRaw(dst, m.Info)
	}
	dst = append(dst, `},\"count\":`...)
	dst = strconv.AppendInt(dst, int64(len(presence)), 10)
	return append(dst, `}}"}`...)
}

// AppendSubscriptionError appends
// {"event":"pusher:subscription_error","channel":C,"data":"{\"type\":T,\"error\":E,\"status\":S}"}.
// pusher-js emits the parsed data on the channel as pusher:subscription_error, the shape it
// uses itself when an auth endpoint fails ({type:"AuthError", error, status}).
func AppendSubscriptionError(dst []byte, channel, typ, errMsg string, status int) []byte {
	dst = append(dst, `{"event":"pusher:subscription_error","channel":`...)
	dst = AppendString(dst, channel)
	dst = append(dst, `,"data":"{\"type\":`...)
	dst = appendInnerString(dst, typ)
	dst = append(dst, `,\"error\":`...)
	dst = appendInnerString(dst, errMsg)
	dst = append(dst, `,\"status\":`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	return append(dst, `}"}`...)
}

// AppendMemberAdded appends pusher_internal:member_added for channel, with data the string of
// {"user_id":U,"user_info":I} (I is null when m.Info is nil or not valid JSON).
func AppendMemberAdded(dst []byte, channel string, m herald.Member) []byte {
	dst = append(dst, `{"event":"pusher_internal:member_added","channel":`...)
	dst = AppendString(dst, channel)
	dst = append(dst, `,"data":"{\"user_id\":`...)
	dst = appendInnerString(dst, m.UserID)
	dst = append(dst, `,\"user_info\":`...)
	dst = appendInnerRaw(dst, m.Info)
	return append(dst, `}"}`...)
}

// AppendMemberRemoved appends pusher_internal:member_removed for channel, with data the string
// of {"user_id":U}.
func AppendMemberRemoved(dst []byte, channel, userID string) []byte {
	dst = append(dst, `{"event":"pusher_internal:member_removed","channel":`...)
	dst = AppendString(dst, channel)
	dst = append(dst, `,"data":"{\"user_id\":`...)
	dst = appendInnerString(dst, userID)
	return append(dst, `}"}`...)
}

// AppendSigninSuccess appends {"event":"pusher:signin_success","data":"{\"user_data\":U}"}
// where U is userData as a JSON string: pusher-js JSON.parses data.user_data itself and
// needs a non-empty string "id" in it.
func AppendSigninSuccess(dst []byte, userData string) []byte {
	dst = append(dst, `{"event":"pusher:signin_success","data":"{\"user_data\":`...)
	dst = appendInnerString(dst, userData)
	return append(dst, `}"}`...)
}

// AppendCacheMiss appends {"event":"pusher:cache_miss","channel":C}, sent on a cache channel
// with nothing cached right after subscription_succeeded.
func AppendCacheMiss(dst []byte, channel string) []byte {
	dst = append(dst, `{"event":"pusher:cache_miss","channel":`...)
	dst = AppendString(dst, channel)
	return append(dst, '}')
}

// AppendSubscriptionCount appends pusher_internal:subscription_count for channel, with data the
// string of {"subscription_count":N}; pusher-js re-emits it as pusher:subscription_count.
func AppendSubscriptionCount(dst []byte, channel string, count int) []byte {
	dst = append(dst, `{"event":"pusher_internal:subscription_count","channel":`...)
	dst = AppendString(dst, channel)
	dst = append(dst, `,"data":"{\"subscription_count\":`...)
	dst = strconv.AppendInt(dst, int64(count), 10)
	return append(dst, `}"}`...)
}

// AppendWatchlistEvent appends pusher_internal:watchlist_events with one entry, data the string
// of {"events":[{"name":N,"user_ids":[...]}]}; name is "online" or "offline". pusher-js emits
// each entry on pusher.user.watchlist under its name.
func AppendWatchlistEvent(dst []byte, name string, userIDs []string) []byte {
	dst = append(dst, `{"event":"pusher_internal:watchlist_events","data":"{\"events\":[{\"name\":`...)
	dst = appendInnerString(dst, name)
	dst = append(dst, `,\"user_ids\":[`...)
	for i, id := range userIDs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendInnerString(dst, id)
	}
	return append(dst, `]}]}"}`...)
}

// AppendWatchlistStatus appends pusher_internal:watchlist_events with an "online" entry
// listing online and an "offline" entry listing offline, each left out when its list is
// empty: the status of a whole watchlist, sent on sign-in.
func AppendWatchlistStatus(dst []byte, online, offline []string) []byte {
	dst = append(dst, `{"event":"pusher_internal:watchlist_events","data":"{\"events\":[`...)
	first := true
	for _, e := range [2]struct {
		name string
		ids  []string
	}{{"online", online}, {"offline", offline}} {
		if len(e.ids) == 0 {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `{\"name\":`...)
		dst = appendInnerString(dst, e.name)
		dst = append(dst, `,\"user_ids\":[`...)
		for i, id := range e.ids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendInnerString(dst, id)
		}
		dst = append(dst, `]}`...)
	}
	return append(dst, `]}"}`...)
}

// appendInnerRaw appends raw JSON inside a JSON string literal, or null when raw is empty or
// not valid JSON.
func appendInnerRaw(dst []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 || !json.Valid(raw) {
		return append(dst, "null"...)
	}
	return appendEscaped(dst, []byte(raw), false)
}

// AppendPosition appends pusher_internal:position for channel: the event that follows it is
// number offset of the channel's history in epoch. Its data is the string of
// {"epoch":E,"offset":N}. It allocates only to grow dst.
func AppendPosition(dst []byte, channel, epoch string, offset uint64) []byte {
	dst = append(dst, `{"event":"pusher_internal:position","channel":`...)
	dst = AppendString(dst, channel)
	dst = appendPositionData(append(dst, `,"data":"`...), epoch, offset)
	return append(dst, `"}`...)
}

// appendPositionData appends the body of the data string {"epoch":E,"offset":N}, without its
// closing brace.
func appendPositionData(dst []byte, epoch string, offset uint64) []byte {
	dst = append(dst, `{\"epoch\":`...)
	dst = appendInnerString(dst, epoch)
	dst = append(dst, `,\"offset\":`...)
	dst = strconv.AppendUint(dst, offset, 10)
	return append(dst, '}')
}

// AppendRecovery appends pusher_internal:recovery for channel: the live events that follow
// start after offset in epoch. When the subscription asked to recover (asked), the data says
// whether it did, and why not.
func AppendRecovery(dst []byte, channel, epoch string, offset uint64, asked, recovered bool, reason string) []byte {
	dst = append(dst, `{"event":"pusher_internal:recovery","channel":`...)
	dst = AppendString(dst, channel)
	dst = appendPositionData(append(dst, `,"data":"`...), epoch, offset)
	if asked {
		dst = dst[:len(dst)-1]
		if recovered {
			dst = append(dst, `,\"recovered\":true}`...)
		} else {
			dst = append(dst, `,\"recovered\":false,\"reason\":`...)
			dst = append(appendInnerString(dst, reason), '}')
		}
	}
	return append(dst, `"}`...)
}

// AppendRecoveryUnknown appends pusher_internal:recovery for a subscription that did not ask
// to recover, to a history channel whose position the node does not know (its history
// cannot be read): data {}, no position, so that the client takes none.
func AppendRecoveryUnknown(dst []byte, channel string) []byte {
	dst = append(dst, `{"event":"pusher_internal:recovery","channel":`...)
	dst = AppendString(dst, channel)
	return append(dst, `,"data":"{}"}`...)
}

// AppendNoHistory appends pusher_internal:recovery for a channel without history whose
// subscription asked to recover: {"recovered":false,"reason":"no_history"}, no position.
func AppendNoHistory(dst []byte, channel string) []byte {
	dst = append(dst, `{"event":"pusher_internal:recovery","channel":`...)
	dst = AppendString(dst, channel)
	return append(dst, `,"data":"{\"recovered\":false,\"reason\":\"no_history\"}"}`...)
}
