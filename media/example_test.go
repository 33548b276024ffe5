package media_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/holdline/holdline/media"
)

func ExampleWriteWAV() {
	samples := make([]int16, 160) // 10 ms of silence at 16 kHz
	var buf bytes.Buffer
	if err := media.WriteWAV(&buf, samples, media.Rate16k); err != nil {
		log.Fatal(err)
	}
	fmt.Println(buf.Len(), "bytes")
	// Output: 364 bytes
}

func ExampleReadWAV() {
	var buf bytes.Buffer
	if err := media.WriteWAV(&buf, []int16{0, 1000, -1000}, 22050); err != nil {
		log.Fatal(err)
	}

	samples, rate, err := media.ReadWAV(&buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(samples, rate)

	_, _, err = media.ReadWAV(bytes.NewReader([]byte("ID3\x04 not a wav file")))
	fmt.Println(err)
	// Output:
	// [0 1000 -1000] 22050
	// media: not a valid WAV stream: starts with "ID3\x04", want "RIFF"
}

func ExampleWAVWriter() {
	f, err := os.CreateTemp("", "call-*.wav")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()

	w, err := media.NewWAVWriter(f, media.Rate8k)
	if err != nil {
		log.Fatal(err)
	}
	frame := media.Frame{Samples: make([]int16, 160), SampleRate: media.Rate8k}
	for range 50 { // one second of 20 ms frames
		if err := w.WriteFrame(frame); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	if _, err := f.Seek(0, 0); err != nil {
		log.Fatal(err)
	}
	samples, rate, err := media.ReadWAV(f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(samples), "samples at", rate, "Hz")
	// Output: 8000 samples at 8000 Hz
}

func ExampleResampler() {
	// Telephone audio up to a 48 kHz transport, one 20 ms frame at a time.
	r, err := media.NewResampler(media.Rate8k, media.Rate48k)
	if err != nil {
		log.Fatal(err)
	}
	in := make([]int16, 160)
	out := make([]int16, 0, r.OutputLen(len(in))) // reused: no allocation per frame
	for range 3 {
		out = r.Process(out[:0], in)
		fmt.Println(len(out))
	}
	// Output:
	// 960
	// 960
	// 960
}

func ExamplePlayer() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	sink := media.SinkFunc(func(f media.Frame) error {
		fmt.Printf("epoch %d: %v\n", f.Epoch, f.Duration())
		return nil
	})
	p, err := media.NewPlayer(sink,
		media.WithPlayerRate(media.Rate16k),
		media.WithFrameDuration(10*time.Millisecond),
		media.WithEpochDone(func(epoch uint64) {
			fmt.Println("epoch", epoch, "played")
			cancel() // a real agent would move on to listening
		}),
	)
	if err != nil {
		log.Fatal(err)
	}

	// A turn's audio (as from TTS), then the mark that it is complete.
	const turn = 1
	if err := p.Enqueue(ctx, turn, make([]int16, 400)); err != nil { // 25 ms
		log.Fatal(err)
	}
	p.EndEpoch(turn)

	if err := p.Run(ctx); !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
	fmt.Println("played", p.Played(turn))
	// Output:
	// epoch 1: 10ms
	// epoch 1: 10ms
	// epoch 1: 10ms
	// epoch 1 played
	// played 25ms
}
