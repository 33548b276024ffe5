package examples_test

import (
	"flag"
	"fmt"
	"maps"
	"slices"

	"github.com/holdline/holdline/examples"
)

// The agents cmd/holdline runs, by name, and the flags their demo back
// office adds to every command.
func ExampleDemo() {
	var demo examples.Demo
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	demo.Flags(fs)
	fmt.Println(slices.Sorted(maps.Keys(demo.Agents())))
	fs.VisitAll(func(f *flag.Flag) { fmt.Println("--" + f.Name) })
	// Output:
	// [booking pizza support]
	// --booking-time
	// --bookings
}
