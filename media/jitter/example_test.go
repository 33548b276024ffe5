package jitter_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/holdline/holdline/media/jitter"
)

func ExampleBuffer() {
	b, err := jitter.New(8000, 20*time.Millisecond, jitter.WithDepth(40*time.Millisecond))
	if err != nil {
		panic(err)
	}
	pcm := make([]int16, 160) // one 20 ms packet
	out := make([]int16, b.FrameLen())

	// Each frame period the ticker pops a frame and the UDP reader pushes
	// what arrived: packets 0-3 come in as 1, 0, 3, 2 and 2 again.
	arrivals := [][]int{{1}, {0}, {3}, {2, 2}}
	var log []string
	for tick := range 9 {
		log = append(log, b.Pop(out).String())
		if tick < len(arrivals) {
			for _, k := range arrivals[tick] {
				if err := b.Push(uint16(k), uint32(k*160), false, pcm); err != nil {
					log = append(log, "("+err.Error()+")")
				}
			}
		}
	}
	fmt.Println(strings.Join(log, " "))
	fmt.Printf("%+v\n", b.Stats())
	// Output:
	// Silence Silence Played Played (jitter: duplicate packet) Played Played Concealed Concealed Concealed
	// {Received:5 Played:4 Late:0 Duplicate:1 Overflow:0 Concealed:3 Resyncs:0 Silence:2}
}
