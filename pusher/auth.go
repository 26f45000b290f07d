package pusher

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"hash"
	"io"
	"strings"

	"github.com/herald-rt/herald"
)

// Sign returns the lowercase hex HMAC-SHA256 of s keyed by secret: the signature scheme of
// every Pusher auth string, REST request and webhook.
func Sign(secret, s string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	io.WriteString(mac, s)
	return hex.EncodeToString(mac.Sum(nil))
}

// CheckChannelAuth reports whether auth, the "auth" of a pusher:subscribe, is
// app.Key + ":" + Sign(app.Secret, socketID+":"+channel) — with ":"+channelData appended to the
// signed string when channelData != "" (presence channels; the caller decides). The hex
// signature is compared in constant time and read case-insensitively. An app without a secret
// accepts nothing.
func CheckChannelAuth(app *herald.App, socketID, channel, channelData, auth string) bool {
	mac, ok := startCheck(app)
	if !ok {
		return false
	}
	io.WriteString(mac, socketID)
	io.WriteString(mac, ":")
	io.WriteString(mac, channel)
	if channelData != "" {
		io.WriteString(mac, ":")
		io.WriteString(mac, channelData)
	}
	return matchAuth(app, mac, auth)
}

// CheckUserAuth reports whether auth, the "auth" of a pusher:signin, is
// app.Key + ":" + Sign(app.Secret, socketID+"::user::"+userData), compared as CheckChannelAuth does.
func CheckUserAuth(app *herald.App, socketID, userData, auth string) bool {
	mac, ok := startCheck(app)
	if !ok {
		return false
	}
	io.WriteString(mac, socketID)
	io.WriteString(mac, "::user::")
	io.WriteString(mac, userData)
	return matchAuth(app, mac, auth)
}

func startCheck(app *herald.App) (hash.Hash, bool) {
	if app == nil || app.Secret == "" {
		return nil, false
	}
	return hmac.New(sha256.New, []byte(app.Secret)), true
}

// matchAuth compares "key:hexsig" with app's key and the MAC written so far.
func matchAuth(app *herald.App, mac hash.Hash, auth string) bool {
	colon := strings.LastIndexByte(auth, ':')
	if colon < 0 {
		return false
	}
	var got [sha256.Size]byte
	sig := auth[colon+1:]
	if len(sig) != hex.EncodedLen(len(got)) {
		return false
	}
	if _, err := hex.Decode(got[:], []byte(sig)); err != nil {
		return false
	}
	keyOK := subtle.ConstantTimeCompare([]byte(auth[:colon]), []byte(app.Key)) == 1
	var want [sha256.Size]byte
	return hmac.Equal(mac.Sum(want[:0]), got[:]) && keyOK
}
