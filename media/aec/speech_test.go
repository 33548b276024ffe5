package aec

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/media"
)

// espeak synthesises text with espeak-ng at rate, or skips the test where
// espeak-ng is missing (fails under HOLDLINE_REQUIRE_MODELS=1, as with
// "make test", which installs it).
func espeak(t *testing.T, rate int, text string) []int16 {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		need.Missing(t, err)
	}
	path := filepath.Join(t.TempDir(), "speech.wav")
	if out, err := exec.Command("espeak-ng", "-w", path, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	samples, from, err := media.ReadWAV(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r, err := media.NewResampler(from, rate)
	if err != nil {
		t.Fatal(err)
	}
	return r.Process(make([]int16, 0, r.OutputLen(len(samples))), samples)
}

// TestRealSpeech runs the canceller on the echo of synthesised speech,
// which has pauses, pitch and formants of its own.
func TestRealSpeech(t *testing.T) {
	const text = "Thank you for calling. I can book you a table for tonight or tomorrow. " +
		"How many people will be joining you, and what time would suit you best?"
	for _, rate := range []int{8000, 16000} {
		speech := espeak(t, rate, text)
		for _, p := range []path{
			{delay: 40 * time.Millisecond, gainDB: -6, room: true},
			{delay: 180 * time.Millisecond, gainDB: -10, room: true},
		} {
			t.Run(fmt.Sprintf("%d/%v", rate, p.delay), func(t *testing.T) {
				c := newCanceller(t, rate)
				near := mix(p.echo(speech, rate), noise(len(speech), noiseDBFS, 7))
				tr := run(t, c, speech, near)
				want := truth(p.delay, c)
				lock := tr.firstLock()
				last := len(tr.ok) - 1
				tail := samplesFor(rate, 3*time.Second)
				n := len(tr.out)
				atten := ratioDB(energy(near[n-tail:n]), energy(tr.out[n-tail:]))
				t.Logf("%v of speech; delay %v after %v, %v at the end (want %v); attenuation over the last 3 s %.1f dB",
					time.Duration(len(speech))*time.Second/time.Duration(rate),
					tr.delay[max(lock, 0)], time.Duration(lock+1)*frameDur(c), tr.delay[last], want, atten)
				if lock < 0 || time.Duration(lock+1)*frameDur(c) > lockWithin {
					t.Errorf("no delay locked within %v", lockWithin)
				}
				if !tr.ok[last] || !within(tr.delay[last], want) {
					t.Errorf("final delay %v, want %v", tr.delay[last], want)
				}
				if atten < minAtten {
					t.Errorf("attenuation %.1f dB, want at least %.0f dB", atten, minAtten)
				}
			})
		}
	}
}
