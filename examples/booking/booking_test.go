package booking

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
)

// The agent greets, checks availability, books once, and reads the code
// back; the context holds what was played and both results.
func TestBookingConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		voice, err := scripted.NewTTS()
		if err != nil {
			t.Fatal(err)
		}
		r := NewRestaurant(8)
		s, err := runtime.New(New(r, WithTTS(voice)))
		if err != nil {
			t.Fatal(err)
		}
		sub := s.Subscribe(0)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()

		// The greeting: Ask answers a turn of the caller's, so the first
		// idle is watched for here.
		idle := func() {
			t.Helper()
			timeout := time.After(time.Minute)
			for {
				select {
				case e := <-sub.C():
					if e.Kind == events.Idle && e.Epoch > 0 {
						return
					}
				case <-timeout:
					t.Fatal("agent never went idle")
				}
			}
		}
		idle() // greeting
		reply, err := s.Ask(ctx, "Book a table for two at seven")
		if err != nil {
			t.Fatal(err)
		}
		var ran []string
		for _, c := range reply.Calls {
			ran = append(ran, c.Tool+":"+string(c.State))
		}
		if got := strings.Join(ran, " "); got != "check_availability:succeeded book_table:succeeded" {
			t.Errorf("the exchange's calls: %s; want check_availability then book_table, both succeeded", got)
		}
		cc, err := s.ChatContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		b := r.Bookings()
		if len(b) != 1 || b[0].Party != 2 || b[0].Time != "19:00" {
			t.Fatalf("bookings = %+v; want one for 2 at 19:00", b)
		}
		text := cc.String()
		for _, want := range []string{"Hello, thanks for calling", "tool_result check_availability", "tool_result book_table", b[0].Code, "Your confirmation code is " + b[0].Code} {
			if !strings.Contains(text, want) {
				t.Errorf("context lacks %q:\n%s", want, text)
			}
		}
	})
}

// The agent asks for what it is missing before calling any tool.
func TestBookingAsksForMissingDetails(t *testing.T) {
	for _, c := range []struct{ say, want string }{
		{"I'd like to book a table", "For how many people?"},
		{"a table for four please", "What time would you like?"},
	} {
		resp := demoAnswer(requestWithUser(c.say))
		if !strings.Contains(resp.Text, c.want) || len(resp.ToolCalls) != 0 {
			t.Errorf("%q → %q %v; want %q and no call", c.say, resp.Text, resp.ToolCalls, c.want)
		}
	}
}
