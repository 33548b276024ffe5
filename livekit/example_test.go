package livekit_test

import (
	"context"
	"log"
	"os"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/livekit"
	"github.com/holdline/holdline/runtime"
)

// A LiveKit agent worker for the booking agent: LiveKit dispatches rooms
// named for "booking" to it, and each room is one call on the host.
func ExampleNewWorker() {
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		return booking.New(booking.NewRestaurant(8)), nil, nil
	}
	host, err := calls.New(newAgent)
	if err != nil {
		log.Fatal(err)
	}
	defer host.Close()
	rooms := livekit.NewTransport(host)
	w, err := livekit.NewWorker(os.Getenv("LIVEKIT_URL"), os.Getenv("LIVEKIT_API_KEY"), os.Getenv("LIVEKIT_API_SECRET"),
		rooms.Serve, livekit.WithAgentName("booking"), livekit.WithMaxJobs(host.MaxCalls()))
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
