package cli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gen2brain/malgo"
	_ "github.com/pion/mediadevices/pkg/driver/audiotest" // "AudioTest": a 480 Hz tone as the microphone

	"github.com/holdline/holdline/localaudio"
	"github.com/holdline/holdline/media"
)

// On a machine without a sound card (CI's), talk says what is missing and
// what to check, instead of starting a session nobody can hear.
func TestTalkWithoutAudioDevicesSaysSo(t *testing.T) {
	if d, err := localaudio.Open(context.Background()); err == nil {
		d.Close()
		t.Skip("this machine has a microphone and a speaker")
	}
	var out, errs bytes.Buffer
	err := run(context.Background(), []string{"talk", "--agent", "booking"}, nil, &out, &errs)
	if !errors.Is(err, localaudio.ErrNoMicrophone) && !errors.Is(err, localaudio.ErrNoSpeaker) {
		t.Fatalf("talk: %v; want no microphone or no speaker\nstderr: %s", err, errs.String())
	}
	// This test binary has mediadevices' test source registered as a
	// microphone, so here it is the speaker that is missing; the holdline
	// binary says "no microphone or speaker found".
	want := regexp.MustCompile(`no (microphone|speaker|microphone or speaker) found \(is a sound card or PulseAudio available\?\)`)
	if !want.MatchString(err.Error()) {
		t.Fatalf("talk: %q; want it to say which device is missing and what to check", err)
	}
}

// notifyWriter is a buffer safe for concurrent use that closes seen once
// text has been written to it.
type notifyWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	text string
	seen chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.seen != nil && strings.Contains(w.buf.String(), w.text) {
		close(w.seen)
		w.seen = nil
	}
	return n, err
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// talkOnTestDevices runs talk with the booking agent on devices any machine
// has: mediadevices' test source as the microphone, miniaudio's null
// backend as the speaker. The source's tone is a caller who never pauses,
// so the session hears silence in its place, unless toneOverAgent: then the
// tone comes in with the first microphone frame that finds the speaker
// playing. Once stdout has wait, it stops talk as Ctrl-C would and returns
// stdout and the Device.
func talkOnTestDevices(t *testing.T, toneOverAgent bool, wait string) (string, *localaudio.Device) {
	t.Helper()
	var dev *localaudio.Device
	opened, pumped := openTalkDevice, pumpMicrophone
	t.Cleanup(func() { openTalkDevice, pumpMicrophone = opened, pumped })
	openTalkDevice = func(ctx context.Context, log *slog.Logger) (*localaudio.Device, error) {
		d, err := localaudio.Open(ctx, localaudio.WithLogger(log),
			localaudio.WithMicrophone("AudioTest"),
			localaudio.WithPlaybackBackends(malgo.BackendNull))
		dev = d
		return d, err
	}
	pumpMicrophone = func(d *localaudio.Device, ctx context.Context, push func(context.Context, media.Frame) error) error {
		var silence []int16
		heard := false
		return d.Pump(ctx, func(ctx context.Context, f media.Frame) error {
			heard = heard || toneOverAgent && d.Stats().Played > 0
			if !heard {
				if len(silence) < len(f.Samples) {
					silence = make([]int16, len(f.Samples))
				}
				f.Samples = silence[:len(f.Samples)]
			}
			return push(ctx, f)
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := &notifyWriter{text: wait, seen: make(chan struct{})}
	seen := out.seen
	var errs bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"talk", "--agent", "booking", "--llm", "demo", "--tts", "demo", "--words-per-second", "10", "--stt", "demo"}, nil, out, &errs)
	}()
	select {
	case <-seen:
	case err := <-done:
		t.Fatalf("talk ended before printing %q: %v\nstdout: %s\nstderr: %s", wait, err, out, errs.String())
	case <-ctx.Done():
		t.Fatalf("talk did not print %q within a minute\nstdout: %s\nstderr: %s", wait, out, errs.String())
	}
	cancel() // Ctrl-C
	if err := <-done; err != nil {
		t.Fatalf("talk: %v\nstderr: %s", err, errs.String())
	}
	if !strings.Contains(errs.String(), `microphone "AudioTest"`) {
		t.Errorf("stderr does not name the microphone:\n%s", errs.String())
	}
	for _, want := range []string{"model:      the agent's own (*scripted.LLM)\n", "voice:      demo tone at a speaking pace (local)", "recogniser: demo, scripted (local)\n", "VAD:        energy detector (local)\n"} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("stderr does not say which engines talk runs (%q):\n%s", want, errs.String())
		}
	}
	t.Logf("stdout:\n%s", out)
	return out.String(), dev
}

// The agent's greeting goes through the session's player to the speaker,
// and the conversation is printed as the console prints it.
func TestTalkPlaysTheGreeting(t *testing.T) {
	out, dev := talkOnTestDevices(t, false, "agent: ")
	if want := "agent: Hello, thanks for calling Holdline Bistro. I can check availability and book a table. How can I help?\n"; !strings.Contains(out, want) {
		t.Errorf("stdout lacks the whole greeting %q:\n%s", want, out)
	}
	s := dev.Stats()
	if s.Played == 0 {
		t.Errorf("stats %+v: nothing reached the speaker", s)
	}
	t.Logf("stats %+v", s)
}

// A caller talking over the agent, which is not the agent's own echo,
// interrupts it: the greeting is cut where the caller came in.
func TestTalkCallerOverTheAgentInterrupts(t *testing.T) {
	out, dev := talkOnTestDevices(t, true, "[interrupted]")
	if !strings.Contains(out, "agent: Hello") {
		t.Errorf("stdout lacks the interrupted greeting:\n%s", out)
	}
	t.Logf("stats %+v", dev.Stats())
}
