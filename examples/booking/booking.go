package booking

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

// Instructions is the agent's system prompt.
const Instructions = `You are the phone host of Holdline Bistro. You check availability and book tables.
Before booking, know the party size and the time. Keep answers short: they are spoken.`

// AvailabilityArgs are check_availability's arguments.
type AvailabilityArgs struct {
	Party int    `json:"party" jsonschema:"number of guests, 1 to 12"`
	Time  string `json:"time" jsonschema:"time of the reservation as HH:MM, 24-hour clock"`
}

// Availability is check_availability's answer.
type Availability struct {
	Available    bool     `json:"available"`
	Time         string   `json:"time"`
	Party        int      `json:"party"`
	Alternatives []string `json:"alternatives,omitempty"`
}

// BookArgs are book_table's arguments.
type BookArgs struct {
	Party int    `json:"party" jsonschema:"number of guests, 1 to 12"`
	Time  string `json:"time" jsonschema:"time of the reservation as HH:MM, 24-hour clock"`
	Name  string `json:"name,omitempty" jsonschema:"name for the reservation"`
}

// Booking is book_table's answer.
type Booking struct {
	Code  string `json:"code"`
	Party int    `json:"party"`
	Time  string `json:"time"`
}

// CancelArgs are cancel_booking's arguments.
type CancelArgs struct {
	Code string `json:"code" jsonschema:"the booking's confirmation code, as book_table gave it"`
}

// Cancellation is cancel_booking's answer.
type Cancellation struct {
	Code      string `json:"code"`
	Party     int    `json:"party"`
	Time      string `json:"time"`
	Cancelled bool   `json:"cancelled"`
}

// ErrNoSuchBooking is cancel_booking's error for a code that names no
// booking, or one already cancelled.
var ErrNoSuchBooking = errors.New("no such booking")

// Restaurant is the in-memory reservation book the tools act on.
type Restaurant struct {
	mu       sync.Mutex
	capacity int            // guests per time slot
	booked   map[string]int // guests booked per slot
	bookings []Booking
	// cancelled holds the codes of cancelled bookings.
	cancelled map[string]bool

	serviceTime time.Duration
	onBook      func(ctx context.Context, b Booking)
}

// RestaurantOption configures a Restaurant.
type RestaurantOption func(*Restaurant)

// WithServiceTime makes every booking take d, as a real back office does:
// long enough for a caller to cut in, or a worker to die, mid-booking.
func WithServiceTime(d time.Duration) RestaurantOption {
	return func(r *Restaurant) { r.serviceTime = d }
}

// WithBookingHook calls fn with every booking made, with the tool call's
// context (tools.CallInfoFrom names the call and its idempotency key): a
// back office shared by several workers records them there.
func WithBookingHook(fn func(ctx context.Context, b Booking)) RestaurantOption {
	return func(r *Restaurant) { r.onBook = fn }
}

// NewRestaurant returns a restaurant that seats capacity guests per slot.
func NewRestaurant(capacity int, opts ...RestaurantOption) *Restaurant {
	r := &Restaurant{capacity: capacity, booked: map[string]int{}, cancelled: map[string]bool{}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Bookings returns every booking made and not cancelled.
func (r *Restaurant) Bookings() []Booking {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Booking
	for _, b := range r.bookings {
		if !r.cancelled[b.Code] {
			out = append(out, b)
		}
	}
	return out
}

// CancelBooking is the cancel_booking mutation's body: it frees the
// booking's seats. A code that names no booking, or one cancelled already,
// is an error wrapping ErrNoSuchBooking.
func (r *Restaurant) CancelBooking(_ context.Context, a CancelArgs) (Cancellation, error) {
	code := strings.ToUpper(strings.TrimSpace(a.Code))
	if code == "" {
		return Cancellation{}, fmt.Errorf("%w: code is empty", tools.ErrInvalidArguments)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bookings {
		if b.Code != code {
			continue
		}
		if r.cancelled[code] {
			return Cancellation{}, fmt.Errorf("%w: %s is already cancelled", ErrNoSuchBooking, code)
		}
		r.cancelled[code] = true
		r.booked[b.Time] -= b.Party
		return Cancellation{Code: code, Party: b.Party, Time: b.Time, Cancelled: true}, nil
	}
	return Cancellation{}, fmt.Errorf("%w: no booking has the code %s", ErrNoSuchBooking, code)
}

func checkArgs(party int, at string) error {
	if party < 1 || party > 12 {
		return fmt.Errorf("%w: party must be between 1 and 12, got %d", tools.ErrInvalidArguments, party)
	}
	if _, ok := parseClock(at); !ok {
		return fmt.Errorf("%w: time must be HH:MM on a 24-hour clock, got %q", tools.ErrInvalidArguments, at)
	}
	return nil
}

// CheckAvailability is the read tool's body.
func (r *Restaurant) CheckAvailability(_ context.Context, a AvailabilityArgs) (Availability, error) {
	if err := checkArgs(a.Party, a.Time); err != nil {
		return Availability{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Availability{Time: a.Time, Party: a.Party, Available: r.booked[a.Time]+a.Party <= r.capacity}
	if !res.Available {
		for _, alt := range []string{"17:30", "18:00", "20:30", "21:00"} {
			if r.booked[alt]+a.Party <= r.capacity {
				res.Alternatives = append(res.Alternatives, alt)
			}
		}
	}
	return res, nil
}

// BookTable is the mutation's body.
func (r *Restaurant) BookTable(ctx context.Context, a BookArgs) (Booking, error) {
	if err := checkArgs(a.Party, a.Time); err != nil {
		return Booking{}, err
	}
	if r.serviceTime > 0 {
		select {
		case <-time.After(r.serviceTime):
		case <-ctx.Done():
			return Booking{}, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.booked[a.Time]+a.Party > r.capacity {
		return Booking{}, fmt.Errorf("no table for %d left at %s", a.Party, a.Time)
	}
	r.booked[a.Time] += a.Party
	b := Booking{
		Code:  fmt.Sprintf("HB%s%d%02d", strings.ReplaceAll(a.Time, ":", ""), a.Party, len(r.bookings)+1),
		Party: a.Party,
		Time:  a.Time,
	}
	r.bookings = append(r.bookings, b)
	if r.onBook != nil {
		r.onBook(ctx, b)
	}
	return b, nil
}

// Tools returns the agent's tools acting on r.
func (r *Restaurant) Tools() []*tools.Tool {
	return []*tools.Tool{
		tools.MustNew("check_availability", "Check whether a table is free for a party at a time.",
			r.CheckAvailability, tools.WithEffect(tools.Read)),
		tools.MustNew("book_table", "Book a table. Only after the guest asked to book and party and time are known.",
			r.BookTable, tools.WithEffect(tools.Mutation)),
		tools.MustNew("cancel_booking", "Cancel a booking by its confirmation code. Only when the guest asked to cancel it.",
			r.CancelBooking, tools.WithEffect(tools.Mutation)),
	}
}

// Option adjusts the agent New builds.
type Option func(*runtime.Agent)

// WithModel replaces the demo model.
func WithModel(m llm.Model) Option { return func(a *runtime.Agent) { a.Model = m } }

// WithSTT sets the speech recogniser.
func WithSTT(r stt.Recognizer) Option { return func(a *runtime.Agent) { a.STT = r } }

// WithTTS sets the voice.
func WithTTS(s tts.Synthesizer) Option { return func(a *runtime.Agent) { a.TTS = s } }

// New returns the booking agent acting on r. It greets the caller when the
// session starts.
func New(r *Restaurant, opts ...Option) *runtime.Agent {
	a := &runtime.Agent{
		Name:         "booking",
		Instructions: Instructions,
		Tools:        r.Tools(),
		Phrases:      Phrases,
		Model:        NewDemoModel(),
		OnEnter: func(ctx context.Context, s *runtime.Session) error {
			if s.Restored() {
				return nil // the caller was greeted before the move
			}
			return s.GenerateReply(ctx, "Greet the caller.")
		},
	}
	for _, o := range opts {
		o(a)
	}
	return a
}
