package localaudio_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/gen2brain/malgo"
	_ "github.com/pion/mediadevices/pkg/driver/audiotest" // "AudioTest": a 480 Hz tone as a microphone

	"github.com/holdline/holdline/localaudio"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
)

// agent is the agent to talk to: its model, voice and recogniser.
var agent *runtime.Agent

// Talking to an agent on this computer: the Device is the session's output
// and, through Pump, its input. Caller audio at 16 kHz keeps the session's
// echo canceller on, which is what lets the agent hear itself through the
// speaker without taking it for an interruption.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	dev, err := localaudio.Open(ctx)
	if err != nil {
		// Without a sound card: ErrNoMicrophone or ErrNoSpeaker, saying
		// what is missing and what to check.
		log.Fatal(err)
	}
	defer dev.Close()

	sess, err := runtime.New(agent,
		runtime.WithOutput(dev, dev.Rate()),
		engine.WithInput(engine.InputConfig{Rate: media.Rate16k}))
	if err != nil {
		log.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- sess.Run(ctx) }()
	if err := dev.Pump(ctx, sess.PushAudio); err != nil && ctx.Err() == nil {
		log.Print(err) // the microphone stopped
	}
	stop()
	if err := <-ended; err != nil {
		log.Fatal(err)
	}
}

// Pump delivers the microphone as 20 ms frames at 16 kHz, whatever the
// device records. Here the microphone is mediadevices' test source and the
// speaker miniaudio's null backend, so the example runs on any machine.
func ExampleDevice_Pump() {
	dev, err := localaudio.Open(context.Background(),
		localaudio.WithMicrophone("AudioTest"),
		localaudio.WithPlaybackBackends(malgo.BackendNull))
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()

	ctx, cancel := context.WithCancel(context.Background())
	frames := 0
	err = dev.Pump(ctx, func(_ context.Context, f media.Frame) error {
		if frames++; frames == 3 {
			fmt.Printf("%v frames of %d samples at %d Hz\n", f.Duration(), len(f.Samples), f.SampleRate)
			cancel()
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// 20ms frames of 320 samples at 16000 Hz
	// context canceled
}
