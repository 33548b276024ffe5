package rtctest_test

import (
	"context"
	"fmt"
	"log"
	"math"
	"net/http/httptest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/webrtc"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// A test's call to an agent served by package server: the client hears the
// greeting, says something into its microphone (a tone, which the scripted
// recogniser hears as the words it was given), and hears the answer.
func Example() {
	ears := scripted.NewSTT(scripted.WithLatency(0)) // what the agent hears the caller say
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithWordsPerSecond(20))
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{
			Name: "front-desk",
			Model: scripted.NewLLM(
				scripted.Response{Text: "Hello, how can I help?"},
				scripted.Response{Text: "We open at noon."},
			),
			TTS: voice,
			STT: ears,
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				return s.GenerateReply(ctx, "Greet the caller.")
			},
		}, nil, nil
	}
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"))
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(newAgent, server.WithTransport(tr),
		server.WithSessionOptions(runtime.WithEndpointing(100*time.Millisecond))) // quick turns, for a quick example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	said := func(epoch uint64) string {
		e, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone && e.Epoch == epoch })
		if err != nil {
			log.Fatal(err)
		}
		return e.Text
	}
	err = c.Wait(ctx, "the greeting's audio", func(c *rtctest.Client) bool {
		for _, l := range c.Levels() {
			if l.RMS > 0.01 {
				return true
			}
		}
		return false
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("agent:", said(1))

	ears.Say("When do you open?")
	c.Say(rtctest.Tone(300*time.Millisecond, 0.3))
	turn, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.UserTurn })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("caller:", turn.Text)
	fmt.Println("agent:", said(2))
	// Output:
	// agent: Hello, how can I help?
	// caller: When do you open?
	// agent: We open at noon.
}

// Tone is loud and voiced enough for any voice detector: a test's stand-in
// for speech.
func ExampleTone() {
	t := rtctest.Tone(500*time.Millisecond, 0.3)
	var sum float64
	for _, v := range t {
		f := float64(v) / 32768
		sum += f * f
	}
	fmt.Printf("%d samples at 48 kHz, RMS %.2f of full scale\n", len(t), math.Sqrt(sum/float64(len(t))))
	fmt.Println(len(rtctest.Silence(20*time.Millisecond)), "samples of silence")
	// Output:
	// 24000 samples at 48 kHz, RMS 0.14 of full scale
	// 960 samples of silence
}
