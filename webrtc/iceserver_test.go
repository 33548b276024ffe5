package webrtc_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/webrtc"
)

// ICE servers as the W3C JSON form gives them: a TURN server with its
// credentials is taken, and what cannot work is refused with why.
func TestICEServersTakeTheW3CFormAndRefuseWhatCannotWork(t *testing.T) {
	got, err := webrtc.ParseICEServers([]byte(`[{"urls": "stun:127.0.0.1:3478"},
		{"urls": ["turn:127.0.0.1:3478?transport=udp", "turns:example.net:5349"], "username": "u", "credential": "p"}]`))
	if err != nil || len(got) != 2 || len(got[1].URLs) != 2 || got[1].Username != "u" || got[1].Credential != "p" {
		t.Fatalf("ParseICEServers = %+v, %v", got, err)
	}
	if _, err := webrtc.NewTransport(webrtc.WithICEServer(got...)); err != nil {
		t.Errorf("a transport with them: %v", err)
	}
	for _, tc := range []struct{ json, want string }{
		{`[{"urls": "turn:127.0.0.1:3478"}]`, "needs a username and a credential"},
		{`[{"urls": "turn:user:pass@127.0.0.1:3478", "username": "u", "credential": "p"}]`, "not in the URL"},
		{`[{"urls": "http://example.net"}]`, "not a stun:"},
		{`[{"urls": []}]`, "no urls"},
		{`[{"urls": 7}]`, "neither a string nor an array"},
		{`{"urls": "stun:x"}`, "JSON array"},
	} {
		_, err := webrtc.ParseICEServers([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.json, err, tc.want)
		}
	}
	if _, err := webrtc.NewTransport(webrtc.WithICEServers("turn:127.0.0.1:3478")); err == nil || !strings.Contains(err.Error(), "WithICEServer") {
		t.Errorf("WithICEServers with a TURN URL and no credentials: %v; want the error to point at WithICEServer", err)
	}
}

// A STUN server that never answers does not cost the call: at the gather
// deadline the answer goes with the candidates gathered so far.
func TestASilentSTUNServerStillGetsAnAnswer(t *testing.T) {
	silent, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// The gather deadline is the default; the STUN timeout inside it is
	// what ends the wait.
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"), webrtc.WithLogger(slog.New(slog.DiscardHandler)),
		webrtc.WithICEServers("stun:"+silent.LocalAddr().String()), webrtc.WithSTUNTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	p, _ := dialPeer(t, ctx, tr)
	if !strings.Contains(p.Answer(), "a=candidate:") {
		t.Errorf("the answer has no candidates:\n%s", p.Answer())
	}
	t.Logf("answered in %v", time.Since(start))
	if d := time.Since(start); d >= webrtc.DefaultGatherTimeout {
		t.Errorf("the answer took %v: it waited for the gather deadline, not the STUN timeout", d)
	}
}

// Credentials minted from a secret shared with the TURN server are what
// coturn's use-auth-secret checks: "EXPIRY:USER" and the base64 of the
// username's HMAC-SHA1 under the secret (this one computed with
// openssl dgst -sha1 -hmac secret).
func TestTURNCredentialsAreCoturnsRESTScheme(t *testing.T) {
	user, cred := webrtc.TURNCredentials("secret", "alice", time.Unix(1700000000, 0))
	if user != "1700000000:alice" || cred != "d8soP47RbdIKLDUOpnJPVQyq5Ts=" {
		t.Errorf("TURNCredentials = %q, %q", user, cred)
	}
	if user, _ := webrtc.TURNCredentials("secret", "a:b", time.Unix(1, 0)); user != "1:a_b" {
		t.Errorf("a colon in the user: username %q; want 1:a_b", user)
	}
	tr, err := webrtc.NewTransport(webrtc.WithTURNSecret("secret", 0, "turn:127.0.0.1:3478"))
	if err != nil {
		t.Fatal(err)
	}
	got := tr.ICEServers("s1")
	if len(got) != 1 || !strings.HasSuffix(got[0].Username, ":s1") {
		t.Fatalf("ICEServers = %+v", got)
	}
	exp, _, _ := strings.Cut(got[0].Username, ":")
	if sec, _ := strconv.ParseInt(exp, 10, 64); time.Until(time.Unix(sec, 0)) < webrtc.DefaultTURNCredentialTTL-time.Minute {
		t.Errorf("the credential expires at %s; want a day from now", exp)
	}
	for _, tc := range []struct {
		secret string
		urls   []string
		want   string
	}{
		{"", []string{"turn:h:3478"}, "empty"},
		{"s", nil, "no turn: URL"},
		{"s", []string{"stun:h:3478"}, "not a turn:"},
		{"s", []string{"turn:u:p@h:3478"}, "not in the URL"},
	} {
		if _, err := webrtc.NewTransport(webrtc.WithTURNSecret(tc.secret, time.Hour, tc.urls...)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WithTURNSecret(%q, %q): %v; want an error saying %q", tc.secret, tc.urls, err, tc.want)
		}
	}
}
