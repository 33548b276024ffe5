package silero_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/vad"
	"github.com/holdline/holdline/vad/silero"
)

// A call's detector: Silero when its files are there, else the energy
// detector, which needs none.
func Example() {
	var det vad.Detector
	if s, err := silero.New(media.Rate16k); err == nil {
		defer s.Close()
		det = s
	} else if errors.Is(err, silero.ErrUnavailable) {
		log.Printf("%v; falling back to the energy detector", err)
		det = vad.NewEnergy()
	} else {
		log.Fatal(err)
	}

	seg := vad.NewSegmenter(vad.SegmenterConfig{})
	frame := media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k} // 20 ms from the caller
	p, err := det.Detect(frame)
	if err != nil {
		log.Fatal(err)
	}
	if seg.Push(p, frame.Duration()) == vad.Started {
		fmt.Println("caller started speaking")
	}
}

// What New says when ONNX Runtime is missing.
func ExampleNew_unavailable() {
	_, err := silero.New(media.Rate16k, silero.WithLibrary("/nonexistent/libonnxruntime.so.1"))
	fmt.Println(errors.Is(err, silero.ErrUnavailable))
	fmt.Println(err)
	// Output:
	// true
	// silero: ONNX Runtime library not found at /nonexistent/libonnxruntime.so.1: run "make models" (fetches onnxruntime-node@1.30.0 with npm pack) or set HOLDLINE_ONNXRUNTIME_LIB
}
