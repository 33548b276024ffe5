package localaudio

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gen2brain/malgo"
	_ "github.com/pion/mediadevices/pkg/driver/audiotest" // "AudioTest": a 480 Hz tone at a quarter of full scale

	"github.com/holdline/holdline/media"
)

// testMicrophone is the label of mediadevices' test audio source.
const testMicrophone = "AudioTest"

// openTest opens mediadevices' test source as the microphone and
// miniaudio's null backend, which drains audio at real-time pace, as the
// speaker: a Device any machine has.
func openTest(t *testing.T, opts ...Option) *Device {
	t.Helper()
	opts = append([]Option{WithMicrophone(testMicrophone), WithPlaybackBackends(malgo.BackendNull)}, opts...)
	d, err := Open(context.Background(), opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func rms(s []int16) float64 {
	var sum float64
	for _, v := range s {
		sum += float64(v) * float64(v)
	}
	return math.Sqrt(sum / float64(len(s)))
}

// The microphone reaches the session as it wants it: 20 ms frames at
// 16 kHz, mono, at the source's level.
func TestPumpDeliversTwentyMillisecondFramesAt16kHz(t *testing.T) {
	d := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const want = 25 // half a second
	var frames []media.Frame
	err := d.Pump(ctx, func(_ context.Context, f media.Frame) error {
		frames = append(frames, media.Frame{Samples: slices.Clone(f.Samples), SampleRate: f.SampleRate})
		if len(frames) == want {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Pump returned %v; want context.Canceled", err)
	}
	if len(frames) < want {
		t.Fatalf("got %d frames; want %d", len(frames), want)
	}
	for i, f := range frames {
		if f.SampleRate != media.Rate16k || len(f.Samples) != 320 {
			t.Fatalf("frame %d: %d samples at %d Hz; want 320 at 16000", i, len(f.Samples), f.SampleRate)
		}
	}
	// The source is a sine of amplitude 0.25: an RMS of 0.25/√2 of full
	// scale, about 5790. Skip the resampler's first frame.
	for i, f := range frames[1:] {
		if r := rms(f.Samples); r < 5000 || r > 6500 {
			t.Fatalf("frame %d: RMS %.0f; want the tone's ≈5790", i+1, r)
		}
	}
	if s := d.Stats(); s.Captured == 0 {
		t.Fatalf("stats %+v; want samples captured", s)
	}
}

// Audio written to the Device is drained by the speaker's callback in full
// and in order. The writes follow the speaker's own clock, keeping two
// frames queued, as the session's player does on average; how much
// lateness on either side the buffer absorbs is
// TestPlayoutAbsorbsLateFramesAndCallbacks's business, in virtual time,
// where a loaded machine cannot make it flaky.
func TestSpeakerPlaysEverythingWritten(t *testing.T) {
	const frames = 50 // a second
	n := media.SamplesFor(media.Rate16k, FrameDuration)
	total := frames * n
	var (
		mu       sync.Mutex
		played   []int16
		progress = make(chan struct{}, 1)
	)
	d := openTest(t, WithRate(media.Rate16k), withPlayHook(func(s []int16) {
		if len(s) == 0 {
			return
		}
		mu.Lock()
		played = append(played, s...)
		mu.Unlock()
		select {
		case progress <- struct{}{}:
		default:
		}
	}))
	if d.Rate() != media.Rate16k {
		t.Fatalf("Rate() = %d; want 16000", d.Rate())
	}
	playedLen := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(played)
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	waitUntil := func(what string, done func() bool) {
		for !done() {
			select {
			case <-progress:
			case <-timeout.C:
				t.Fatalf("timed out waiting for %s: the speaker took %d of %d samples; stats %+v", what, playedLen(), total, d.Stats())
			}
		}
	}
	for i := range frames {
		waitUntil("room", func() bool { return i*n-playedLen() <= n })
		if err := d.WriteFrame(media.Frame{Samples: ramp(1+i*n, n), SampleRate: media.Rate16k, Epoch: 1}); err != nil {
			t.Fatalf("WriteFrame: %v", err)
		}
	}
	waitUntil("the last frame", func() bool { return playedLen() >= total })

	mu.Lock()
	got := slices.Clone(played)
	mu.Unlock()
	if !slices.Equal(got, ramp(1, total)) {
		t.Fatalf("the speaker played %d samples, not the %d written in order", len(got), total)
	}
	s := d.Stats()
	if s.Overruns != 0 || s.Dropped != 0 || s.Played != int64(total) {
		t.Fatalf("stats %+v; want all %d samples played, none dropped", s, total)
	}
}

// Close stops both devices, ends a running Pump with ErrClosed and leaves
// no goroutine behind; later calls are harmless.
func TestCloseEndsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	d, err := Open(context.Background(), WithMicrophone(testMicrophone), WithPlaybackBackends(malgo.BackendNull))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	pumping := make(chan struct{})
	pumped := make(chan error, 1)
	go func() {
		var once sync.Once
		pumped <- d.Pump(context.Background(), func(context.Context, media.Frame) error {
			once.Do(func() { close(pumping) })
			return nil
		})
	}()
	<-pumping
	if err := d.WriteFrame(media.Frame{Samples: make([]int16, 960), SampleRate: media.Rate48k, Epoch: 1}); err != nil {
		t.Fatalf("WriteFrame: %v", err)
	}

	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-pumped; !errors.Is(err, ErrClosed) {
		t.Fatalf("Pump returned %v; want ErrClosed", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := d.WriteFrame(media.Frame{Samples: make([]int16, 960), SampleRate: media.Rate48k, Epoch: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("WriteFrame after Close: %v; want ErrClosed", err)
	}
	if err := d.Pump(context.Background(), func(context.Context, media.Frame) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Pump after Close: %v; want ErrClosed", err)
	}

	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}

// A microphone that is not there is ErrNoMicrophone, and the message says
// which were.
func TestUnknownMicrophoneIsErrNoMicrophone(t *testing.T) {
	_, err := Open(context.Background(), WithMicrophone("Nonexistent USB Mic"), WithPlaybackBackends(malgo.BackendNull))
	if !errors.Is(err, ErrNoMicrophone) {
		t.Fatalf("Open: %v; want ErrNoMicrophone", err)
	}
	for _, want := range []string{`no microphone named "Nonexistent USB Mic"`, `"AudioTest"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// On a machine without a sound card the backends still list a device:
// miniaudio's null backend, or ALSA's "null" PCM. Neither is a speaker.
func TestOpenWithoutSoundCardSaysNoSpeaker(t *testing.T) {
	d, err := Open(context.Background(), WithMicrophone(testMicrophone))
	if err == nil {
		d.Close()
		t.Skip("this machine has a speaker")
	}
	if !errors.Is(err, ErrNoSpeaker) {
		t.Fatalf("Open: %v; want ErrNoSpeaker", err)
	}
	if want := "no speaker found (is a sound card or PulseAudio available?)"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
}

func TestNullDevicesAreNotDevices(t *testing.T) {
	for _, c := range []struct {
		id   []byte
		name string
		null bool
	}{
		{[]byte("null\x00\x00"), "Discard all samples (playback) or generate zero samples (capture)", true},
		{make([]byte, 8), "NULL Capture Device", true},
		{make([]byte, 8), "NULL Playback Device", true},
		{[]byte("default"), "Default ALSA Output", false},
		{[]byte("alsa_output.pci-0000_00_1f.3.analog-stereo"), "Built-in Audio Analog Stereo", false},
	} {
		if got := isNullDevice(c.id, c.name); got != c.null {
			t.Errorf("isNullDevice(%q, %q) = %v; want %v", c.id, c.name, got, c.null)
		}
	}
	// One sentence for a machine with neither, matching both sentinels.
	var err error = noDevicesError{}
	if !errors.Is(err, ErrNoMicrophone) || !errors.Is(err, ErrNoSpeaker) {
		t.Fatal("noDevicesError does not match both sentinels")
	}
	if got, want := err.Error(), "localaudio: no microphone or speaker found (is a sound card or PulseAudio available?)"; got != want {
		t.Fatalf("message %q; want %q", got, want)
	}
}
