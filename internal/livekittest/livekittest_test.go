package livekittest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	protologger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/holdline/holdline/webrtc/rtctest"
)

func TestMain(m *testing.M) {
	// server-sdk-go and pion log to stderr at every level otherwise.
	lksdk.SetLogger(protologger.LogRLogger(logr.Discard()))
	os.Exit(m.Run())
}

// Two callers in a room of a real livekit-server hear each other's audio,
// and a chat one sends reaches the other whole, under its sender's
// identity, with the time it arrived; DTMF arrives too. This proves the
// rig the LiveKit tests stand on.
func TestTwoCallersHearEachOtherAndExchangeText(t *testing.T) {
	srv := StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	alice, err := DialCaller(ctx, srv, "rig", "alice", WithAttributes(map[string]string{"role": "caller"}))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := DialCaller(ctx, srv, "rig", "bob")
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()

	// Each hears the other's tone, once it hears the other's track (its
	// silence) at all.
	for _, pair := range []struct{ from, to *Caller }{{alice, bob}, {bob, alice}} {
		if err := pair.to.Wait(ctx, pair.from.Identity+"'s track", func(c *Caller) bool { return len(c.Levels(pair.from.Identity)) > 0 }); err != nil {
			t.Fatal(err)
		}
		said := time.Now()
		pair.from.Say(rtctest.Tone(time.Second, 0.3))
		if err := pair.to.Wait(ctx, pair.from.Identity+"'s tone", func(c *Caller) bool { return c.Heard(pair.from.Identity, said) }); err != nil {
			t.Fatal(err)
		}
	}

	const text = "a table for two at eight, please"
	alice.SendChat(text)
	if err := bob.Wait(ctx, "alice's chat", func(c *Caller) bool {
		s := c.TextStreams(TopicChat)
		return len(s) == 1 && s[0].Done
	}); err != nil {
		t.Fatal(err)
	}
	got := bob.TextStreams(TopicChat)[0]
	if got.Sender != "alice" || got.Text != text || len(got.Chunks) == 0 || got.Chunks[0].At.Before(got.Started) {
		t.Errorf("bob got %+v; want %q from alice in at least one chunk", got, text)
	}
	if err := bob.SendDTMF(11, "#"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Wait(ctx, "bob's DTMF", func(c *Caller) bool { return len(c.DTMFs()) == 1 }); err != nil {
		t.Fatal(err)
	}
	if d := alice.DTMFs()[0]; d.Sender != "bob" || d.Code != 11 || d.Digit != "#" {
		t.Errorf("alice got DTMF %+v; want # (11) from bob", d)
	}
	// Bob saw alice's attributes when he joined (she was there first).
	var role string
	for _, a := range bob.AttributeChanges() {
		if a.Identity == "alice" {
			role += a.Changed["role"]
		}
	}
	if !strings.Contains(role, "caller") {
		t.Errorf("bob saw alice's attributes %+v; want role caller", bob.AttributeChanges())
	}
	if err := alice.PublishVideo(ctx); err != nil {
		t.Fatal(err)
	}
}

// A server with a key of its own and an extra key accepts both and
// refuses others.
func TestKeys(t *testing.T) {
	srv := StartT(t, WithKey("k1", "secret-one-0123456789abcdef0123456789"), WithExtraKey("k2", "secret-two-0123456789abcdef0123456789"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := srv.CreateRoom(ctx, "keys"); err != nil {
		t.Fatal(err)
	}
	other := *srv
	other.APIKey, other.APISecret = "k2", "secret-two-0123456789abcdef0123456789"
	if _, err := other.Participants(ctx, "keys"); err != nil {
		t.Errorf("the extra key: %v", err)
	}
	other.APISecret = "wrong-secret-0123456789abcdef0123456789"
	if _, err := other.Participants(ctx, "keys"); err == nil {
		t.Errorf("a wrong secret was accepted")
	}
}
