package dtmf_test

import (
	"fmt"
	"time"

	"github.com/holdline/holdline/media/dtmf"
)

func ExampleDetector() {
	var d dtmf.Detector
	ts := uint32(160000)
	for _, key := range "1#1" {
		evs, err := dtmf.Packets(key, 100*time.Millisecond, 8000)
		if err != nil {
			panic(err)
		}
		// the network loses the start packet of the second press and
		// repeats every packet
		if key == '#' {
			evs = evs[1:]
		}
		for _, ev := range evs {
			for range 2 {
				if digit, ok := d.Push(ts, ev); ok {
					fmt.Printf("pressed %c\n", digit)
				}
			}
		}
		ts += 2400 // 300 ms later, the next press
	}
	// Output:
	// pressed 1
	// pressed #
	// pressed 1
}
