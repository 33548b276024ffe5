package examples

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/tools"
)

// backOffice is the demo restaurant's settings on serve: how long a
// booking takes, and a file every booking is appended to (JSON lines), so
// that workers sharing sessions share one record of what was booked.
type backOffice struct {
	serviceTime time.Duration
	file        string
	mu          sync.Mutex
}

// BookingRecord is one line of the file --bookings names.
type BookingRecord struct {
	booking.Booking
	Call string `json:"call"`
	Key  string `json:"key"` // the call's idempotency key
	PID  int    `json:"pid"`
}

func (b *backOffice) options() []booking.RestaurantOption {
	var opts []booking.RestaurantOption
	if b.serviceTime > 0 {
		opts = append(opts, booking.WithServiceTime(b.serviceTime))
	}
	if b.file != "" {
		opts = append(opts, booking.WithBookingHook(b.record))
	}
	return opts
}

func (b *backOffice) record(ctx context.Context, bk booking.Booking) {
	rec := BookingRecord{Booking: bk, PID: os.Getpid()}
	if ci, ok := tools.CallInfoFrom(ctx); ok {
		rec.Call, rec.Key = ci.ID, ci.IdempotencyKey
	}
	line, _ := json.Marshal(rec)
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := os.OpenFile(b.file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bookings file:", err)
		return
	}
	defer f.Close()
	_, _ = f.Write(append(line, '\n'))
	_ = f.Sync() // a worker killed right after must not lose it
}
