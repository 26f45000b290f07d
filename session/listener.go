package session

import (
	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// listener is the server as its cluster.State's Listener: what the other nodes change,
// told to this node's clients and observers.
type listener struct{ s *Server }

var _ cluster.Listener = listener{}

func (l listener) Wants(app string, k herald.ActivityKind) bool {
	a := l.s.state(app)
	return a != nil && a.wants(k)
}

func (l listener) Emit(app string, act *herald.Activity) {
	if a := l.s.state(app); a != nil {
		a.emit(act)
	}
}

func (l listener) CountChanged(app, channel string) { l.s.countChanged(l.s.state(app), channel) }

func (l listener) MemberAdded(_ string, ch *cluster.Channel, m herald.Member) {
	l.s.eng.Dispatch(&ch.Channel, ws.TextFrame(pusher.AppendMemberAdded(nil, ch.Name(), m)), 0, nil, noMeasure)
}

func (l listener) MemberRemoved(_ string, ch *cluster.Channel, user string) {
	l.s.eng.Dispatch(&ch.Channel, ws.TextFrame(pusher.AppendMemberRemoved(nil, ch.Name(), user)), 0, nil, noMeasure)
}

func (l listener) RemoteUser(app, user string, present bool) {
	if a := l.s.state(app); a != nil {
		l.s.remoteUser(a, user, present)
	}
}

func (l listener) Terminate(app, user string) { l.s.closeUser(app, user) }

func (l listener) AppendPosition(dst []byte, channel string, p herald.Position) []byte {
	var scratch [256]byte
	return ws.AppendFrame(dst, ws.OpText, pusher.AppendPosition(scratch[:0], channel, p.Epoch, p.Offset))
}

func (l listener) Lost(_ string, ch *cluster.Channel) { l.s.eng.CloseChannel(&ch.Channel, l.s.lost) }

func (l listener) Missed(_ string, ch *cluster.Channel) {
	l.s.eng.CloseChannel(&ch.Channel, l.s.missed)
}
