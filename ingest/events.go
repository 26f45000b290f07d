package ingest

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

// Format is how a source turns a record into events.
type Format uint8

const (
	// FormatTemplate renders each record's channel, event and data from the templates.
	FormatTemplate Format = iota
	// FormatPusher reads each record as a REST events body: name, channel or channels, data,
	// optional socket_id.
	FormatPusher
)

// events appends the events of r to evs; a bad record is a *badRecord.
func (p *Pipeline) events(evs []herald.Event, r *Record) ([]herald.Event, *badRecord) {
	if p.cfg.Format == FormatPusher {
		return p.pusherEvents(evs, r)
	}
	var v value
	ch, err := p.cfg.Channel.render(r, &v)
	if err != nil {
		return evs, renderBad(err)
	}
	name, err := p.cfg.Event.render(r, &v)
	if err != nil {
		return evs, renderBad(err)
	}
	data := string(r.Value)
	if p.cfg.Data != nil {
		if data, err = p.cfg.Data.render(r, &v); err != nil {
			return evs, renderBad(err)
		}
	}
	if b := p.check(name, []string{ch}, data, ""); b != nil {
		return evs, b
	}
	return append(evs, herald.Event{Name: name, Channel: ch, Data: data, Origin: r.Time, Key: r.key()}), nil
}

func renderBad(err error) *badRecord {
	var m errMissing
	if errors.As(err, &m) {
		return bad(ReasonMissingField, err.Error())
	}
	return bad(ReasonInvalidJSON, err.Error())
}

func (p *Pipeline) pusherEvents(evs []herald.Event, r *Record) ([]herald.Event, *badRecord) {
	var b pusher.EventBody
	if err := json.Unmarshal(r.Value, &b); err != nil {
		return evs, bad(ReasonInvalidJSON, err.Error())
	}
	chans, err := b.Targets()
	if err != nil {
		return evs, bad(ReasonInvalidBody, herald.MessageOf(err))
	}
	data, err := pusher.EventData(b.Data)
	if err != nil {
		return evs, bad(ReasonInvalidJSON, herald.MessageOf(err))
	}
	if bd := p.check(b.Name, chans, data, b.SocketID); bd != nil {
		return evs, bd
	}
	chans, _ = pusher.ValidateChannels(chans, p.limits) // repeats removed
	key := r.key()
	for _, ch := range chans {
		evs = append(evs, herald.Event{Name: b.Name, Channel: ch, Data: data, SocketID: b.SocketID, Origin: r.Time, Key: key})
	}
	return evs, nil
}

// check validates one event as the REST API does, classifying what is wrong.
func (p *Pipeline) check(name string, chans []string, data, socketID string) *badRecord {
	lim := p.limits
	if err := pusher.ValidateEventName(name, lim.MaxEventNameLength); err != nil {
		return bad(ReasonInvalidEvent, herald.MessageOf(err))
	}
	if _, err := pusher.ValidateChannels(chans, lim); err != nil {
		return bad(ReasonInvalidChannel, herald.MessageOf(err))
	}
	for _, ch := range chans {
		if !p.allowed(ch) {
			return bad(ReasonChannelNotAllowed, "channel "+strconv.Quote(ch)+" is not in the source's allow_channels")
		}
	}
	if socketID != "" && !pusher.ValidSocketID(socketID) {
		return bad(ReasonInvalidBody, "socket_id is not a socket id")
	}
	if err := pusher.ValidateEventData(data, lim.MaxEventPayloadBytes); err != nil {
		return bad(ReasonTooLarge, herald.MessageOf(err))
	}
	return nil
}

// allowed reports whether the source may publish to ch (Config.AllowChannels).
func (p *Pipeline) allowed(ch string) bool {
	return AllowsChannel(p.cfg.AllowChannels, ch)
}

// AllowsChannel reports whether a source whose allow_channels are patterns may publish to
// ch: ch matches one of them, or, with none, ch is a public channel.
func AllowsChannel(patterns []string, ch string) bool {
	if len(patterns) == 0 {
		return herald.Classify(ch).Kind == herald.Public
	}
	for _, g := range patterns {
		if herald.Glob(g, ch) {
			return true
		}
	}
	return false
}
