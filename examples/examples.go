// Package examples gives the example agents the names the holdline command
// runs them by, with the flags of the booking demo's back office. Its
// Agents is what cmd/holdline hands to cli.Main; your own main hands it
// your agents instead.
package examples

import (
	"context"
	"flag"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/examples/pizza"
	"github.com/holdline/holdline/examples/support"
	"github.com/holdline/holdline/runtime"
)

// Demo holds the settings of the example agents' demo back office, set by
// the flags Flags registers.
type Demo struct {
	office backOffice
}

// Flags registers the booking demo's flags on fs: --booking-time and
// --bookings.
func (d *Demo) Flags(fs *flag.FlagSet) {
	fs.DurationVar(&d.office.serviceTime, "booking-time", 0, "the booking demo: how long a booking takes")
	fs.StringVar(&d.office.file, "bookings", "", "the booking demo: append every booking to `FILE` (JSON lines; workers may share it)")
}

// Agents are the example agents by name: booking (a restaurant's table
// bookings), pizza (a pizza shop written with the public API only, as a
// user writes an agent) and support (a front desk that hands billing
// questions to a billing desk). Each call gets agents of its own; the restaurant's tables
// are the call's.
func (d *Demo) Agents() map[string]runtime.AgentFunc {
	return map[string]runtime.AgentFunc{
		"booking": func(context.Context) (*runtime.Agent, func(), error) {
			return booking.New(booking.NewRestaurant(8, d.office.options()...)), nil, nil
		},
		"pizza": pizza.New,
		"support": func(context.Context) (*runtime.Agent, func(), error) {
			return support.New().FrontDesk, nil, nil
		},
	}
}
