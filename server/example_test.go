package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/webrtc"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// Serving an agent from your own main: the Server is an http.Handler, so
// it goes on any listener or mux. Here it is served on a loopback port,
// and a WebRTC client (package rtctest, which does what the reference web
// page does) calls it: the agent greets, the call is listed, and DELETE
// ends it.
func Example() {
	// One agent per call. The scripted model and voice stand in for real
	// providers (llm/openai, tts/espeak, ...).
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithWordsPerSecond(20))
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{
			Name:  "front-desk",
			Model: scripted.NewLLM(scripted.Response{Text: "Hello, how can I help?"}),
			TTS:   voice,
			STT:   scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				return s.GenerateReply(ctx, "Greet the caller.")
			},
		}, nil, nil
	}
	// Calls on the loopback interface only, as befits an example; a real
	// server leaves the interfaces be (server.New makes its own
	// Transport).
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"))
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(newAgent, server.WithAgentName("front-desk"), server.WithTransport(tr))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	// In a main: http.ListenAndServe("127.0.0.1:8080", srv).
	hs := httptest.NewServer(srv)
	defer hs.Close()

	list := func() {
		resp, err := http.Get(hs.URL + "/v1/sessions")
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Sessions []struct {
				Transport string `json:"transport"`
				Running   bool   `json:"running"`
			} `json:"sessions"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d sessions %+v\n", len(body.Sessions), body.Sessions)
	}
	list()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	greeting, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("the agent said %q\n", greeting.Text)
	list()

	resp, err := http.Get(hs.URL + "/healthz")
	if err != nil {
		log.Fatal(err)
	}
	health, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("healthz: %d %s\n", resp.StatusCode, bytes.TrimSpace(health))

	if err := c.Delete(ctx, hs.URL, ""); err != nil {
		log.Fatal(err)
	}
	list()
	// Output:
	// 0 sessions []
	// the agent said "Hello, how can I help?"
	// 1 sessions [{Transport:webrtc Running:true}]
	// healthz: 200 ok
	// 0 sessions []
}
