package cluster

// share is one node's part of the state, as this node received it.
type share struct {
	subs    map[chanKey]int
	members map[chanKey]map[string][]byte
	// A snapshot being received: its records that say the sender did not fire their change.
	unfiredSubs    map[chanKey]bool
	unfiredMembers map[memberKey]bool
}

func newShare() *share {
	return &share{subs: map[chanKey]int{}, members: map[chanKey]map[string][]byte{}}
}

// stage records rec in a snapshot being received, with whether its sender fired it.
func (sh *share) stage(rec stateRecord) {
	if !rec.fired {
		if sh.unfiredSubs == nil {
			sh.unfiredSubs, sh.unfiredMembers = map[chanKey]bool{}, map[memberKey]bool{}
		}
		if rec.op == recSubs {
			sh.unfiredSubs[chanKey{rec.app, rec.channel}] = true
		} else {
			sh.unfiredMembers[memberKey{rec.app, rec.channel, rec.user}] = true
		}
	}
	sh.set(rec)
}

// set records rec in a share.
func (sh *share) set(rec stateRecord) {
	k := chanKey{rec.app, rec.channel}
	switch rec.op {
	case recSubs:
		if rec.subs > 0 {
			sh.subs[k] = rec.subs
		} else {
			delete(sh.subs, k)
		}
	case recMember:
		m := sh.members[k]
		if rec.present {
			if m == nil {
				m = map[string][]byte{}
				sh.members[k] = m
			}
			m[rec.user] = rec.info
		} else if m != nil {
			delete(m, rec.user)
			if len(m) == 0 {
				delete(sh.members, k)
			}
		}
	}
}
