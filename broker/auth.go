package broker

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
)

// MinSecretBytes is the shortest cluster secret NewAuth takes.
const MinSecretBytes = 32

// DefaultMaxSkew is how far a message's send time may be from the receiver's clock unless
// AuthConfig says otherwise: the nodes' clocks must agree within it.
const DefaultMaxSkew = time.Minute

// replayWindow is how many of one sender's messages, counted back from the newest received,
// may still arrive out of order (each once): the messages a node seals while one of its
// history publishes waits for its store (a NATS node seals a history event before JetStream
// stores it and publishes it after).
const replayWindow = 8192

// The errors of Auth.Open and Auth.OpenStored.
var (
	// ErrForged is a message that is not sealed with the cluster's secret: unauthenticated
	// (an older version, or a node without the secret), altered, or forged.
	ErrForged = errors.New("broker: bus message not authenticated by the cluster secret")
	// ErrReplayed is an authentic message received before, or sent too long ago (its send
	// time is more than the maximum skew away, or it is older than the sender's replay
	// window).
	ErrReplayed = errors.New("broker: bus message replayed or stale")
)

// AuthConfig configures a node's Auth. Zero values mean the defaults noted.
type AuthConfig struct {
	// Secret seals this node's messages and opens the others': every node of a cluster
	// shares it. At least MinSecretBytes.
	Secret []byte
	// Accept are other secrets whose messages are opened too, never used to seal: the old
	// or the new secret during a rotation.
	Accept [][]byte
	// Encrypt encrypts each message's payload (AES-256-GCM), not only authenticates it.
	// Receivers open both kinds whatever their own setting.
	Encrypt bool
	// MaxSkew bounds how far a message's send time may be from the receiver's clock; default
	// DefaultMaxSkew.
	MaxSkew time.Duration
	// Now is the clock; default time.Now. For tests.
	Now func() time.Time
}

// Enabled reports whether the configuration has a secret: without one there is no Auth.
func (c AuthConfig) Enabled() bool { return len(c.Secret) > 0 }

// Auth seals the messages one node sends on the bus and opens the ones it receives, so that
// only the nodes holding the cluster's secret can make messages the others act on, and a
// message can be acted on once. AppendMessage's encodings travel inside version 4:
//
//	4, flags (bit 0: payload encrypted),
//	the sender's epoch (8 random bytes, drawn at its start), its sequence number (8 bytes,
//	from 1), its send time (4 bytes, Unix seconds), all big-endian,
//	the message as AppendMessage encodes it (position, kind, origin, app, channel, node,
//	excluded socket), its payload in clear or encrypted, then a 16-byte tag.
//
// The tag is AES-256-GCM's, under a key derived from the secret, the bus prefix, the
// sender's node id and its epoch (HMAC-SHA256), with the epoch's last 4 bytes and the
// sequence number as nonce: it covers
// every byte before it (as additional data, or as additional data and ciphertext when the
// payload is encrypted). So a message is authentic only for the sender it names, on the bus
// prefix it was sent under; a sequence number is never used twice under one key, since each
// start of a node draws its epoch (at random, not from the clock, which a restored virtual
// machine or a clock stepped back could repeat).
//
// A receiver refuses (ErrReplayed) a message whose send time is more than MaxSkew from its
// own clock, and a message of a sender's epoch that it accepted before, or that is
// replayWindow or more behind the newest it accepted of that epoch; later messages of an
// epoch may come before earlier ones (a NATS node's history events do). Each epoch of a
// sender is tracked on its own, so a restarted node is accepted whatever its clock said
// before, and the messages of its previous run stop being accepted MaxSkew after they were
// sent. A receiver forgets an epoch unheard for twice MaxSkew: its messages are stale by
// then.
//
// Seal is safe for concurrent use; so are Open and OpenStored.
type Auth struct {
	prefix, node string
	epoch        uint64
	seq          atomic.Uint64
	seal         cipher.AEAD
	encrypt      bool
	secrets      [][]byte // Secret first
	skew         time.Duration
	now          func() time.Time

	mu      sync.Mutex
	senders map[senderKey]*sender // epochs heard, for Open
	keys    map[senderKey]cipher.AEAD
	swept   time.Time
}

type senderKey struct {
	node  string
	epoch uint64
}

// sender is what a receiver knows of one epoch of one node.
type sender struct {
	aead  cipher.AEAD
	win   window
	heard time.Time
}

// NewAuth returns the Auth of node nodeID on a bus whose subjects start with prefix.
func NewAuth(cfg AuthConfig, prefix, nodeID string) (*Auth, error) {
	if len(cfg.Secret) < MinSecretBytes {
		return nil, fmt.Errorf("cluster secret: %d bytes, want at least %d", len(cfg.Secret), MinSecretBytes)
	}
	for i, s := range cfg.Accept {
		if len(s) < MinSecretBytes {
			return nil, fmt.Errorf("accepted cluster secret %d: %d bytes, want at least %d", i+1, len(s), MinSecretBytes)
		}
	}
	a := &Auth{prefix: prefix, node: nodeID, encrypt: cfg.Encrypt, skew: cfg.MaxSkew, now: cfg.Now,
		senders: map[senderKey]*sender{}, keys: map[senderKey]cipher.AEAD{}}
	if a.skew <= 0 {
		a.skew = DefaultMaxSkew
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.secrets = append([][]byte{cfg.Secret}, cfg.Accept...)
	var e [8]byte
	for a.epoch == 0 {
		_, _ = rand.Read(e[:])
		a.epoch = binary.BigEndian.Uint64(e[:])
	}
	a.seal = a.aead(cfg.Secret, senderKey{nodeID, a.epoch})
	a.swept = a.now()
	return a, nil
}

// aead derives the key of one epoch of one node from secret.
func (a *Auth) aead(secret []byte, k senderKey) cipher.AEAD {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("herald bus v4\x00"))
	mac.Write([]byte(a.prefix))
	mac.Write([]byte{0})
	mac.Write([]byte(k.node))
	mac.Write([]byte{0})
	mac.Write(binary.BigEndian.AppendUint64(nil, k.epoch))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		panic(err) // a 32-byte key
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return g
}

// The layout of version 4.
const (
	wireVersionAuth = 4
	authHead        = 2 + 8 + 8 + 4
	authTag         = 16
	flagEncrypted   = 1
	// nonceAt is where a message's nonce starts: the epoch's last 4 bytes and the sequence
	// number, unique under the key of one epoch.
	nonceAt = 6
)

// SealedSize is the length Seal adds for m.
func SealedSize(m herald.BusMessage) int { return authHead + EncodedSize(m) + authTag }

// Seal appends m sealed to dst, with this node's id as m.Node. With room for SealedSize(m)
// in dst it does not allocate.
func (a *Auth) Seal(dst []byte, m herald.BusMessage) []byte {
	m.Node = a.node
	seq := a.seq.Add(1)
	start := len(dst)
	flags := byte(0)
	if a.encrypt {
		flags = flagEncrypted
	}
	dst = append(dst, wireVersionAuth, flags)
	dst = binary.BigEndian.AppendUint64(dst, a.epoch)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.BigEndian.AppendUint32(dst, uint32(a.now().Unix()))
	payload := m.Payload
	m.Payload = nil
	dst = AppendMessage(dst, m)
	nonce := dst[start+nonceAt : start+nonceAt+12] // in the message: a local array would escape
	if a.encrypt {
		n := len(dst)
		if cap(dst)-n < len(payload)+authTag {
			dst = append(dst[:n:n], make([]byte, len(payload)+authTag)...)[:n]
		}
		return a.seal.Seal(dst, nonce, payload, dst[start:n])
	}
	dst = append(dst, payload...)
	n := len(dst)
	if cap(dst)-n < authTag {
		dst = append(dst[:n:n], make([]byte, authTag)...)[:n]
	}
	return a.seal.Seal(dst, nonce, nil, dst[start:n])
}

// sealed is a version 4 message parsed but not yet verified.
type sealed struct {
	key       senderKey
	seq       uint64
	nonce     []byte
	sent      time.Time
	encrypted bool
	msg       herald.BusMessage // Payload: the payload as received (ciphertext when encrypted)
	aad       []byte            // what the tag covers besides the ciphertext
	tagged    []byte            // the ciphertext and the tag, or the tag alone
}

// parse reads b's version 4 layout.
func parse(b []byte) (sealed, error) {
	var s sealed
	if len(b) > 0 && !knownVersion(b[0]) {
		return s, unknownVersion(b)
	}
	if len(b) < authHead+2+authTag || b[0] != wireVersionAuth || b[1]&^flagEncrypted != 0 {
		return s, ErrForged
	}
	s.encrypted = b[1]&flagEncrypted != 0
	s.key.epoch = binary.BigEndian.Uint64(b[2:])
	s.seq = binary.BigEndian.Uint64(b[10:])
	s.nonce = b[nonceAt : nonceAt+12]
	s.sent = time.Unix(int64(binary.BigEndian.Uint32(b[18:])), 0)
	body := b[authHead : len(b)-authTag]
	m, err := DecodeMessage(body)
	if _, ok := err.(*VersionError); ok {
		return s, err // sealed around a version this node does not know: unverifiable, not forged
	}
	if err != nil || s.seq == 0 || s.key.epoch == 0 {
		return s, ErrForged
	}
	s.key.node = m.Node
	s.msg = m
	if s.encrypted {
		cut := len(b) - authTag - len(m.Payload) // where the payload starts
		s.aad, s.tagged = b[:cut], b[cut:]
	} else {
		s.aad, s.tagged = b[:len(b)-authTag], b[len(b)-authTag:]
	}
	return s, nil
}

// open verifies s with g and decrypts its payload in place.
func (s *sealed) open(g cipher.AEAD) bool {
	if !s.encrypted {
		_, err := g.Open(nil, s.nonce, s.tagged, s.aad)
		return err == nil
	}
	p, err := g.Open(s.tagged[:0], s.nonce, s.tagged, s.aad)
	if err != nil {
		return false
	}
	s.msg.Payload = p
	return true
}

// Open verifies, checks for replay and decodes one message received from the bus; the
// returned Payload aliases b (decrypted in place). It returns ErrForged for anything not
// sealed with one of the secrets (an unsealed message of any version included),
// ErrReplayed for an authentic message it must not act on, and a *VersionError for a message
// of a version this node does not know (outside, or inside the seal).
func (a *Auth) Open(b []byte) (herald.BusMessage, error) {
	s, err := parse(b)
	if err != nil {
		return herald.BusMessage{}, err
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	snd := a.senders[s.key]
	known := snd != nil
	if !known {
		g := a.find(&s)
		if g == nil {
			return herald.BusMessage{}, ErrForged
		}
		snd = &sender{aead: g}
	} else if !s.open(snd.aead) {
		return herald.BusMessage{}, ErrForged
	}
	if d := now.Sub(s.sent); d > a.skew+time.Second || d < -a.skew { // sent: whole seconds
		return herald.BusMessage{}, ErrReplayed
	}
	if !snd.win.accept(s.seq) {
		return herald.BusMessage{}, ErrReplayed
	}
	snd.heard = now
	if !known {
		a.senders[s.key] = snd
	}
	if now.Sub(a.swept) > a.skew {
		a.sweep(now)
	}
	return s.msg, nil
}

// find returns the key that opens s, trying each secret, or nil. The caller holds a.mu.
func (a *Auth) find(s *sealed) cipher.AEAD {
	if g := a.keys[s.key]; g != nil {
		if s.open(g) {
			return g
		}
		return nil
	}
	for _, sec := range a.secrets {
		g := a.aead(sec, s.key)
		if s.open(g) {
			if len(a.keys) >= maxKeys {
				clear(a.keys)
			}
			a.keys[s.key] = g
			return g
		}
	}
	return nil
}

// maxKeys bounds the derived keys a receiver keeps for OpenStored.
const maxKeys = 4096

// sweep forgets the epochs unheard for twice the skew: their messages are stale. The caller
// holds a.mu.
func (a *Auth) sweep(now time.Time) {
	a.swept = now
	for k, s := range a.senders {
		if now.Sub(s.heard) > 2*a.skew {
			delete(a.senders, k)
		}
	}
}

// OpenStored verifies and decodes a message kept in a history store: as Open, without the
// checks for replay and send time (a kept event is read again and again, long after it was
// sent).
func (a *Auth) OpenStored(b []byte) (herald.BusMessage, error) {
	s, err := parse(b)
	if err != nil {
		return herald.BusMessage{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.find(&s) == nil {
		return herald.BusMessage{}, ErrForged
	}
	return s.msg, nil
}

// window is one sender epoch's replay window: which of the replayWindow sequence numbers up
// to top have been accepted, a bit each, in a ring of words.
type window struct {
	top  uint64
	bits [replayWindow / 64]uint64
}

// accept reports whether seq is new in the window, and marks it.
func (w *window) accept(seq uint64) bool {
	const words = replayWindow / 64
	switch {
	case seq > w.top:
		// Clear the words the window moves past, at most all of them.
		from, to := w.top/64+1, seq/64
		if w.top == 0 {
			from = 0
		}
		if to >= from && to-from >= words {
			from = to - words + 1
		}
		for i := from; i <= to; i++ {
			w.bits[i%words] = 0
		}
		w.top = seq
	case w.top-seq >= replayWindow:
		return false
	}
	word, bit := &w.bits[(seq/64)%words], uint64(1)<<(seq%64)
	if *word&bit != 0 {
		return false
	}
	*word |= bit
	return true
}

// OpenEntry returns the frame of an event a History kept sealed (the bus message it
// published, as Seal made it) after checking that it is authentic and that it is the
// BusEvent of (app, channel) at pos; anything else is ErrForged. The frame aliases b
// (decrypted in place).
func (a *Auth) OpenEntry(b []byte, app, channel string, pos herald.Position) ([]byte, error) {
	m, err := a.OpenStored(b)
	if err != nil {
		return nil, err
	}
	if m.Kind != herald.BusEvent || m.App != app || m.Channel != channel || m.Epoch != pos.Epoch || m.Offset != pos.Offset {
		return nil, ErrForged
	}
	return m.Payload, nil
}
