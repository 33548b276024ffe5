package sip_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/sip"
)

// Answering phone calls: a Server runs an agent on every call it answers.
// Here the phone is a second Server on the same machine, whose agent only
// listens, placing a call with Server.Call; any SIP phone or trunk does
// the same. The agent greets the caller, and the call is listed on the
// host until the agent's side hangs up with a BYE.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// The agent that answers. The scripted model and voice stand in for
	// real providers; 8 kHz suits a phone line.
	frontDesk := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithWordsPerSecond(20))
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{
			Name:  "front-desk",
			Model: scripted.NewLLM(scripted.Response{Text: "Thanks for calling Holdline. How can I help?"}),
			TTS:   voice,
			STT:   scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				return s.GenerateReply(ctx, "Greet the caller.")
			},
		}, nil, nil
	}
	greeted := make(chan events.Event, 1)
	desk, err := sip.New(frontDesk, sip.WithSessionOptions(runtime.WithEventSink(func(e events.Event) {
		if e.Kind == events.PlayoutDone {
			greeted <- e
		}
	})))
	if err != nil {
		log.Fatal(err)
	}
	defer desk.Close()
	// In a main: desk.ListenAndServeUDP(ctx, "0.0.0.0:5060").
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go desk.ServeUDP(ctx, conn)

	// The phone: an agent that never says a word.
	listener := func(context.Context) (*runtime.Agent, func(), error) {
		quiet := scripted.NewLLMFunc(func(llm.Request) scripted.Response { return scripted.Response{} })
		return &runtime.Agent{Name: "caller", Model: quiet, STT: scripted.NewSTT()}, nil, nil
	}
	phone, err := sip.New(listener)
	if err != nil {
		log.Fatal(err)
	}
	defer phone.Close()
	phoneConn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go phone.ServeUDP(ctx, phoneConn)
	hungUp := make(chan error, 1)
	go func() { hungUp <- phone.Call(ctx, "sip:front-desk@"+conn.LocalAddr().String()) }()

	select {
	case e := <-greeted:
		fmt.Printf("the agent said %q\n", e.Text)
	case <-ctx.Done():
		log.Fatal("no greeting")
	}
	for _, c := range desk.Host().List() {
		fmt.Printf("a %s call, running %v\n", c.Transport, c.Running)
		desk.Host().Lookup(c.ID).End("the agent hung up")
	}
	fmt.Println(len(desk.Host().List()), "calls on the host")
	fmt.Println("the phone's Call returned", <-hungUp)
	// Output:
	// the agent said "Thanks for calling Holdline. How can I help?"
	// a sip call, running true
	// 0 calls on the host
	// the phone's Call returned <nil>
}
