package webrtc_test

import (
	"context"
	"log/slog"
	"net"
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
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"), webrtc.WithLogger(slog.New(slog.DiscardHandler)),
		webrtc.WithICEServers("stun:"+silent.LocalAddr().String()), webrtc.WithGatherTimeout(500*time.Millisecond))
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
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the answer took %v", d)
	}
}
