package calls_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
)

// line is a transport's side of one call (calls.Line): where the agent's
// audio goes, and how the host hangs up. A real transport sends the frames
// on (RTP, WebRTC, a websocket); this one counts them.
type line struct {
	frames atomic.Int64
	hungUp chan string
}

func (l *line) WriteFrame(media.Frame) error { l.frames.Add(1); return nil }
func (l *line) Hangup(reason string)         { l.hungUp <- reason }

// A transport of one's own on a Host: the host makes the session for the
// agent, runs it once the transport says its media flows, keeps its
// events, counts it against the host's cap, and hangs up the line when
// the call ends.
func ExampleHost() {
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
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				return s.GenerateReply(ctx, "Greet the caller.")
			},
		}, nil, nil
	}
	host, err := calls.New(newAgent, calls.WithMaxCalls(1))
	if err != nil {
		log.Fatal(err)
	}
	defer host.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spec := calls.Spec{
		Kind:       "mytransport", // the metrics' label
		Input:      engine.InputConfig{Rate: media.Rate16k},
		OutputRate: media.Rate16k,
	}
	l := &line{hungUp: make(chan string, 1)}
	c, err := host.Start(ctx, spec, l)
	if err != nil {
		log.Fatal(err)
	}
	c.Connected() // media flows: the session runs, and the agent greets
	fmt.Println(said(c, 1))

	// The host is full: a second call is refused, for a 486 or a 503.
	_, err = host.Start(ctx, spec, &line{hungUp: make(chan string, 1)})
	fmt.Println(errors.Is(err, calls.ErrFull))

	if err := c.Inject(ctx, "When do you open?"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(said(c, 2))
	for _, info := range host.List() {
		fmt.Println(info.Transport, info.Running, info.Connected, info.Origin)
	}

	c.End("the caller hung up")
	fmt.Println("hung up:", <-l.hungUp)
	fmt.Println(host.Len(), "calls; audio sent:", l.frames.Load() > 0)
	// Output:
	// Hello, how can I help?
	// true
	// We open at noon.
	// mytransport true true fresh
	// hung up: the caller hung up
	// 0 calls; audio sent: true
}

// said waits for the agent to finish speaking in turn epoch, and returns
// what it said, from the events the host keeps for the call.
func said(c *calls.Call, epoch uint64) string {
	var seq uint64
	for {
		evs, more, ended := c.Events(seq)
		for _, e := range evs {
			if e.Kind == events.PlayoutDone && e.Epoch == epoch {
				return e.Text
			}
			seq = e.Seq
		}
		if ended {
			return "the call ended"
		}
		select {
		case <-more:
		case <-c.Context().Done():
			return "the call ended"
		}
	}
}
