package rtctest_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/webrtc"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// Onsets and Offsets say when the microphone's sound started and stopped,
// as sent: a 300 ms tone is sent in 15 packets, the first at its onset and
// the last 280 ms later, its offset.
func TestOffsetsSayWhenTheMicrophoneWentQuiet(t *testing.T) {
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS()
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{Name: "quiet", Model: scripted.NewLLM(), TTS: voice, STT: scripted.NewSTT()}, nil, nil
	}
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(newAgent, server.WithTransport(tr))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	c.Say(slices.Concat(rtctest.Tone(300*time.Millisecond, 0.3), rtctest.Silence(200*time.Millisecond), rtctest.Tone(200*time.Millisecond, 0.3)))
	if err := c.Wait(ctx, "two offsets", func(c *rtctest.Client) bool { return len(c.Offsets()) == 2 }); err != nil {
		t.Fatal(err)
	}
	on, off := c.Onsets(), c.Offsets()
	if len(on) != 2 {
		t.Fatalf("%d onsets, want 2", len(on))
	}
	// Packets leave every 20 ms on a ticker, which a busy machine may
	// delay: the bounds allow for it.
	for i, want := range []time.Duration{280 * time.Millisecond, 180 * time.Millisecond} {
		if d := off[i].Sub(on[i]); d < want-20*time.Millisecond || d > want+100*time.Millisecond {
			t.Errorf("sound %d: offset %v after its onset, want about %v", i, d, want)
		}
	}
	if gap := on[1].Sub(off[0]); gap < 200*time.Millisecond {
		t.Errorf("the second sound began %v after the first one's last packet, want at least the 200 ms of silence between", gap)
	}
}
