package booking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/holdline/holdline/llm"
)

func TestDemoModelUnderstandsPartyAndTime(t *testing.T) {
	cases := []struct {
		text  string
		party int
		time  string
	}{
		{"book a table for two at seven", 2, "19:00"},
		{"Book a table for 4 people at 8pm", 4, "20:00"},
		{"table for six at 19:30", 6, "19:30"},
		{"for three at half past seven", 3, "19:30"},
		{"can we come at seven thirty, party of five", 5, "19:30"},
		{"is there something for 7pm", 0, "19:00"},
		{"a table for seven o'clock", 0, "19:00"},
		{"two people around 9", 2, "21:00"},
		{"hello", 0, ""},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			if got := parseParty(c.text); got != c.party {
				t.Errorf("party = %d; want %d", got, c.party)
			}
			if got := parseTime(c.text); got != c.time {
				t.Errorf("time = %q; want %q", got, c.time)
			}
		})
	}
}

func requestWithUser(text string) llm.Request {
	return llm.Request{Context: llm.ChatContext{Items: []llm.Item{{Kind: llm.KindMessage, Role: llm.RoleUser, Text: text}}}}
}

// conversation runs the demo model over a conversation, playing the tools
// on r as the runtime would, and returns what the agent said after each
// caller line. conf is the recogniser confidence of each caller line (0:
// typed).
func conversation(t *testing.T, r *Restaurant, lines []string, conf []float64) []string {
	t.Helper()
	var items []llm.Item
	var said []string
	calls := 0
	for i, line := range lines {
		it := llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: line}
		if i < len(conf) {
			it.Confidence = conf[i]
		}
		items = append(items, it)
		var turn []string
		for range 5 {
			resp := demoAnswer(llm.Request{Context: llm.ChatContext{Items: items}})
			turn = append(turn, resp.Text)
			items = append(items, llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: resp.Text})
			if len(resp.ToolCalls) == 0 {
				break
			}
			for _, c := range resp.ToolCalls {
				calls++
				id := fmt.Sprint("call", calls)
				args, _ := json.Marshal(c.Args)
				items = append(items, llm.Item{Kind: llm.KindToolCall, CallID: id, Name: c.Name, Arguments: args})
				var out any
				var err error
				ctx := context.Background()
				switch c.Name {
				case "check_availability":
					out, err = r.CheckAvailability(ctx, c.Args.(AvailabilityArgs))
				case "book_table":
					out, err = r.BookTable(ctx, c.Args.(BookArgs))
				case "cancel_booking":
					out, err = r.CancelBooking(ctx, c.Args.(CancelArgs))
				default:
					t.Fatalf("unknown tool %s", c.Name)
				}
				res := llm.Item{Kind: llm.KindToolResult, CallID: id, Name: c.Name}
				if err != nil {
					res.Output, res.IsError = "error: "+err.Error(), true
				} else {
					b, _ := json.Marshal(out)
					res.Output = string(b)
				}
				items = append(items, res)
			}
		}
		said = append(said, strings.Join(turn, " / "))
	}
	return said
}

// "Cancel the booking" cancels the booking made in this call, by its
// code, and says so; the seats are free again and a second cancel has
// nothing left to cancel.
func TestCancelTheBookingMadeInThisCall(t *testing.T) {
	r := NewRestaurant(8)
	said := conversation(t, r, []string{"Book a table for two at seven", "Cancel the booking", "Cancel the booking"}, nil)
	if !strings.Contains(said[0], "You're booked") {
		t.Fatalf("booking: %q", said[0])
	}
	if !strings.Contains(said[1], "is cancelled") || !strings.Contains(said[1], "HB") {
		t.Errorf("cancel: %q; want the cancelled booking's code", said[1])
	}
	if b := r.Bookings(); len(b) != 0 {
		t.Errorf("bookings after cancel %+v; want none", b)
	}
	if strings.Contains(said[2], "is cancelled") {
		t.Errorf("second cancel: %q; nothing was left to cancel", said[2])
	}
	if _, err := r.CancelBooking(context.Background(), CancelArgs{Code: "HB0000000"}); !errors.Is(err, ErrNoSuchBooking) {
		t.Errorf("unknown code: %v; want ErrNoSuchBooking", err)
	}
}

// "What did I book?" is answered from the booking made, not with a
// question about the party.
func TestWhatDidIBookIsAnsweredFromTheBooking(t *testing.T) {
	r := NewRestaurant(8)
	said := conversation(t, r, []string{"What did I book?", "Book a table for four at 8:30", "What did I book?"}, nil)
	if !strings.Contains(said[0], "haven't booked anything") {
		t.Errorf("before booking: %q", said[0])
	}
	code := r.Bookings()[0].Code
	if want := "You have a table for four at 20:30. Your confirmation code is " + code; !strings.Contains(said[2], want) {
		t.Errorf("after booking: %q; want %q", said[2], want)
	}
}

// Words heard with low confidence are said back before anything is booked;
// "yes" then books them, "no" asks again. Typed text and confident
// recognition book at once.
func TestUnsureTimeOrPartyIsConfirmedBeforeBooking(t *testing.T) {
	r := NewRestaurant(8)
	said := conversation(t, r, []string{"book a table for two at seven", "yes"}, []float64{0.3, 0.9})
	if want := "A table for two at 19:00, is that right?"; said[0] != want {
		t.Errorf("unsure: %q; want %q", said[0], want)
	}
	if b := r.Bookings(); len(b) != 1 || b[0].Party != 2 || b[0].Time != "19:00" {
		t.Errorf("after yes: bookings %+v; want one for 2 at 19:00", b)
	}

	r = NewRestaurant(8)
	said = conversation(t, r, []string{"book a table for two at seven", "no", "for three at eight"}, []float64{0.3, 0.9, 0.9})
	if !strings.Contains(said[1], "How many people") {
		t.Errorf("after no: %q", said[1])
	}
	if b := r.Bookings(); len(b) != 1 || b[0].Party != 3 || b[0].Time != "20:00" {
		t.Errorf("after the correction: bookings %+v; want one for 3 at 20:00", b)
	}

	r = NewRestaurant(8)
	conversation(t, r, []string{"book a table for two at seven"}, []float64{0.9})
	if b := r.Bookings(); len(b) != 1 {
		t.Errorf("confident: bookings %+v; want one at once", b)
	}
}
