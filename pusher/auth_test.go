package pusher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
)

// docsApp holds the credentials of Pusher's documented examples.
var docsApp = &herald.App{ID: "3", Key: "278d425bdf160c739803", Secret: "7ad3773142a6692b25b8"}

// hmacHex is an independent HMAC-SHA256 for cross-checking Sign.
func hmacHex(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func TestSign(t *testing.T) {
	tests := []struct{ msg, want string }{
		// Pusher's channel authorization docs, private channel example.
		{"1234.1234:private-foobar", "58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"},
		// Pusher's docs, presence example (also in anycable's tests).
		{`1234.1234:presence-foobar:{"user_id":10,"user_info":{"name":"Mr. Channels"}}`, "31935e7d86dba64c2a90aed31fdc61869f9b22ba9d8863bba239c03ca481bc80"},
		// The older docs' presence example, "Mr. Pusher".
		{`1234.1234:presence-foobar:{"user_id":10,"user_info":{"name":"Mr. Pusher"}}`, "afaed3695da2ffd16931f457e338e6c9f2921fa133ce7dac49f529792be6304c"},
		// Computed with Python's hmac module.
		{`1234.1234::user::{"id":"12345","user_info":{"name":"Ada"}}`, "76924b7e2308132ecc83bf364be36900affb9c4816f5fb437f5ed0f36f88cb13"},
		{"1234.1234:private-encrypted-foobar", "e6a18892d037c5d5e76a2265df4f086ffc38631605530dfd214aa5bff495f533"},
	}
	for _, tt := range tests {
		if got := Sign(docsApp.Secret, tt.msg); got != tt.want {
			t.Errorf("Sign(%q) = %s, want %s", tt.msg, got, tt.want)
		}
		if got := hmacHex(docsApp.Secret, tt.msg); got != tt.want {
			t.Errorf("crypto/hmac(%q) = %s, want %s", tt.msg, got, tt.want)
		}
	}
}

func TestCheckChannelAuth(t *testing.T) {
	const (
		privateAuth  = "278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"
		presenceData = `{"user_id":10,"user_info":{"name":"Mr. Channels"}}`
		presenceAuth = "278d425bdf160c739803:31935e7d86dba64c2a90aed31fdc61869f9b22ba9d8863bba239c03ca481bc80"
	)
	tests := []struct {
		name                               string
		app                                *herald.App
		socket, channel, channelData, auth string
		want                               bool
	}{
		{"docs private", docsApp, "1234.1234", "private-foobar", "", privateAuth, true},
		{"docs presence", docsApp, "1234.1234", "presence-foobar", presenceData, presenceAuth, true},
		{"uppercase hex", docsApp, "1234.1234", "private-foobar", "", strings.ToUpper(privateAuth[:21]) + strings.ToUpper(privateAuth[21:]), false},
		{"uppercase sig only", docsApp, "1234.1234", "private-foobar", "", privateAuth[:21] + strings.ToUpper(privateAuth[21:]), true},
		{"other socket", docsApp, "1234.1235", "private-foobar", "", privateAuth, false},
		{"other channel", docsApp, "1234.1234", "private-foobaz", "", privateAuth, false},
		{"presence without data", docsApp, "1234.1234", "presence-foobar", "", presenceAuth, false},
		{"private with data", docsApp, "1234.1234", "private-foobar", presenceData, privateAuth, false},
		{"changed channel_data", docsApp, "1234.1234", "presence-foobar", presenceData + " ", presenceAuth, false},
		{"other key", docsApp, "1234.1234", "private-foobar", "", "278d425bdf160c739804" + privateAuth[20:], false},
		{"no key", docsApp, "1234.1234", "private-foobar", "", privateAuth[20:], false},
		{"no colon", docsApp, "1234.1234", "private-foobar", "", privateAuth[21:], false},
		{"short sig", docsApp, "1234.1234", "private-foobar", "", privateAuth[:len(privateAuth)-2], false},
		{"long sig", docsApp, "1234.1234", "private-foobar", "", privateAuth + "00", false},
		{"not hex", docsApp, "1234.1234", "private-foobar", "", privateAuth[:len(privateAuth)-1] + "g", false},
		{"empty", docsApp, "1234.1234", "private-foobar", "", "", false},
		{"nil app", nil, "1234.1234", "private-foobar", "", privateAuth, false},
		{"no secret", &herald.App{Key: docsApp.Key}, "1234.1234", "private-foobar", "", docsApp.Key + ":" + hmacHex("", "1234.1234:private-foobar"), false},
	}
	for _, tt := range tests {
		if got := CheckChannelAuth(tt.app, tt.socket, tt.channel, tt.channelData, tt.auth); got != tt.want {
			t.Errorf("%s: CheckChannelAuth = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCheckUserAuth(t *testing.T) {
	userData := `{"id":"12345","user_info":{"name":"Ada"}}`
	auth := docsApp.Key + ":" + hmacHex(docsApp.Secret, "1234.1234::user::"+userData)
	if auth != docsApp.Key+":76924b7e2308132ecc83bf364be36900affb9c4816f5fb437f5ed0f36f88cb13" {
		t.Fatalf("cross-check vector drifted: %s", auth)
	}
	if !CheckUserAuth(docsApp, "1234.1234", userData, auth) {
		t.Error("valid user auth refused")
	}
	for name, tc := range map[string][3]string{
		"other socket":    {"1234.1235", userData, auth},
		"other user_data": {"1234.1234", `{"id":"12346"}`, auth},
		"channel form":    {"1234.1234", userData, docsApp.Key + ":" + hmacHex(docsApp.Secret, "1234.1234:"+userData)},
		"other key":       {"1234.1234", userData, "x" + auth},
	} {
		if CheckUserAuth(docsApp, tc[0], tc[1], tc[2]) {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzChannelAuth checks that the signature Sign makes always verifies, and that changing any
// input makes it fail; nothing may panic.
func FuzzChannelAuth(f *testing.F) {
	f.Add("278d425bdf160c739803", "7ad3773142a6692b25b8", "1234.1234", "private-foobar", "", "x")
	f.Add("k", "s", "1.2", "presence-a", `{"user_id":1}`, "k:00")
	f.Fuzz(func(t *testing.T, key, secret, socket, channel, channelData, junk string) {
		app := &herald.App{Key: key, Secret: secret}
		msg := socket + ":" + channel
		if channelData != "" {
			msg += ":" + channelData
		}
		sig := Sign(secret, msg)
		if sig != hmacHex(secret, msg) {
			t.Fatal("Sign disagrees with crypto/hmac")
		}
		auth := key + ":" + sig
		CheckChannelAuth(app, socket, channel, channelData, junk)
		CheckUserAuth(app, socket, channelData, junk)
		if secret == "" {
			if CheckChannelAuth(app, socket, channel, channelData, auth) {
				t.Fatal("app without secret accepted a signature")
			}
			return
		}
		if !CheckChannelAuth(app, socket, channel, channelData, auth) {
			t.Fatalf("correct channel auth refused: %q", auth)
		}
		if CheckChannelAuth(app, socket+"1", channel, channelData, auth) {
			t.Fatal("auth accepted for another socket")
		}
		if CheckChannelAuth(app, socket, channel, channelData, key+"x:"+sig) {
			t.Fatal("auth accepted with another key")
		}
		userAuth := key + ":" + Sign(secret, socket+"::user::"+channelData)
		if !CheckUserAuth(app, socket, channelData, userAuth) {
			t.Fatalf("correct user auth refused: %q", userAuth)
		}
	})
}
