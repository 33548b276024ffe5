package espeak

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tts"
)

// collect reads a stream to its end.
func collect(t testing.TB, st tts.Stream) (audio []int16, rate int, chunks int, words []tts.WordTiming) {
	t.Helper()
	defer st.Close()
	for {
		c, err := st.Recv()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := len(c.Audio.Samples); n > 0 {
			if rate != 0 && c.Audio.SampleRate != rate {
				t.Fatalf("chunk at %d Hz after chunks at %d Hz", c.Audio.SampleRate, rate)
			}
			rate = c.Audio.SampleRate
			if d := c.Audio.Duration(); d > ChunkDuration {
				t.Errorf("chunk of %v, want at most %v", d, ChunkDuration)
			}
			if len(words) > 0 {
				t.Error("audio after the word timings")
			}
			audio = append(audio, c.Audio.Samples...)
			chunks++
		}
		words = append(words, c.Words...)
	}
}

func TestSynthesize(t *testing.T) {
	s := newSynth(t)
	const text = "Good news, a table for two at seven is free. Shall I book it?"
	st, err := s.Synthesize(context.Background(), text)
	if err != nil {
		t.Fatal(err)
	}
	audio, rate, chunks, words := collect(t, st)
	if rate != NativeRate || s.SampleRate() != NativeRate {
		t.Fatalf("rate %d (SampleRate %d), want %d", rate, s.SampleRate(), NativeRate)
	}
	d := media.Frame{Samples: audio, SampleRate: rate}.Duration()
	if d < 2*time.Second || d > 8*time.Second {
		t.Errorf("%v of audio for %d words", d, len(strings.Fields(text)))
	}
	if chunks < int(d/ChunkDuration) {
		t.Errorf("%d chunks for %v", chunks, d)
	}
	var peak int16
	for _, v := range audio {
		peak = max(peak, v, -v)
	}
	if peak < 3000 {
		t.Errorf("peak %d: silent?", peak)
	}
	want := strings.Fields(text)
	if len(words) != len(want) {
		t.Fatalf("%d word timings, want %d: %v", len(words), len(want), words)
	}
	var last time.Duration
	for i, w := range words {
		if w.Word != want[i] || w.Start < last || w.End <= w.Start || w.End > d {
			t.Errorf("word %d: %+v (audio %v, previous end %v)", i, w, d, last)
		}
		last = w.End
	}
	// espeak-ng pauses after the comma and the period, and the timings
	// put the words on either side of each pause.
	if !(words[2].Start > words[1].End && words[10].Start > words[9].End) {
		t.Errorf("no pause between clauses: %v", words)
	}
	t.Logf("%v of audio in %d chunks; words %v", d, chunks, words)
}

func TestSampleRate(t *testing.T) {
	for _, rate := range []int{media.Rate8k, media.Rate16k, media.Rate24k, media.Rate48k} {
		s := newSynth(t, WithSampleRate(rate))
		st, err := s.Synthesize(context.Background(), "Table for two.")
		if err != nil {
			t.Fatal(err)
		}
		audio, got, _, _ := collect(t, st)
		if got != rate || s.SampleRate() != rate {
			t.Errorf("chunks at %d Hz (SampleRate %d), want %d", got, s.SampleRate(), rate)
		}
		if d := (media.Frame{Samples: audio, SampleRate: got}).Duration(); d < 500*time.Millisecond {
			t.Errorf("%d Hz: %v of audio", rate, d)
		}
	}
	if _, err := New(WithSampleRate(22050)); !errors.Is(err, media.ErrUnsupportedRate) {
		t.Errorf("WithSampleRate(22050): %v, want ErrUnsupportedRate", err)
	}
}

func TestOptions(t *testing.T) {
	base := newSynth(t)
	dur := func(s *Synthesizer, text string) time.Duration {
		st, err := s.Synthesize(context.Background(), text)
		if err != nil {
			t.Fatal(err)
		}
		a, rate, _, _ := collect(t, st)
		return media.Frame{Samples: a, SampleRate: rate}.Duration()
	}
	const text = "I can check availability and book a table."
	slow, fast := dur(newSynth(t, WithWordsPerMinute(120)), text), dur(newSynth(t, WithWordsPerMinute(300)), text)
	if !(slow > dur(base, text) && dur(base, text) > fast) {
		t.Errorf("durations at 120, 175 and 300 wpm: %v, %v, %v", slow, dur(base, text), fast)
	}
	dur(newSynth(t, WithVoice("en-us+f5"), WithPitch(70)), text)
	for _, o := range []Option{WithVoice("nosuchvoice"), WithVoice("-x"), WithWordsPerMinute(10), WithPitch(100)} {
		if _, err := New(o); err == nil {
			t.Error("New accepted an invalid option")
		}
	}
}

func TestNothingToSay(t *testing.T) {
	// No process at all, so this runs without espeak-ng too.
	s := &Synthesizer{bin: "/nonexistent"}
	for _, text := range []string{"", "   ", " ... ", "—"} {
		st, err := s.Synthesize(context.Background(), text)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Errorf("%q: Recv: %v, want io.EOF", text, err)
		}
		st.Close()
	}
}

func TestMissingBinary(t *testing.T) {
	_, err := New(WithBinary("/nonexistent/espeak-ng"))
	if !errors.Is(err, ErrMissingBinary) {
		t.Fatalf("got %v, want ErrMissingBinary", err)
	}
	if !strings.Contains(err.Error(), "apt-get install espeak-ng") {
		t.Errorf("error %q does not say what to install", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := New(); !errors.Is(err, ErrMissingBinary) {
		t.Errorf("without espeak-ng in PATH: %v", err)
	}
}

func TestCancel(t *testing.T) {
	s := newSynth(t)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := s.Synthesize(ctx, strings.Repeat("A table for two at seven thirty, please. ", 40))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := st.Recv(); !errors.Is(err, context.Canceled) {
		t.Errorf("Recv after cancel: %v, want context.Canceled", err)
	}
	if ps := st.(*Stream).cmd.ProcessState; ps == nil {
		t.Error("espeak-ng not reaped after cancel")
	}
	st.Close()
	if _, err := st.Recv(); err != ErrClosed {
		t.Errorf("Recv after Close: %v, want ErrClosed", err)
	}

	// Cancelled before: no process.
	if _, err := s.Synthesize(ctx, "Hello."); !errors.Is(err, context.Canceled) {
		t.Errorf("Synthesize with a cancelled context: %v", err)
	}
}

func TestCloseEarly(t *testing.T) {
	s := newSynth(t)
	for range 5 {
		st, err := s.Synthesize(context.Background(), strings.Repeat("Book a table for four at eight. ", 20))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if st.(*Stream).cmd.ProcessState == nil {
			t.Error("espeak-ng not reaped by Close")
		}
		if _, err := st.Recv(); err != ErrClosed {
			t.Errorf("Recv after Close: %v, want ErrClosed", err)
		}
	}
	// Closed without a single Recv.
	st, err := s.Synthesize(context.Background(), "Hello there.")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if z := zombies(t); len(z) > 0 {
		t.Errorf("zombie children: %v", z)
	}
}

// TestCloseWhileBlocked closes a stream from another goroutine while Recv
// waits for output that never comes.
func TestCloseWhileBlocked(t *testing.T) {
	bin := fakeBinary(t, "printf 'RIFF\\0\\0\\0\\0WAVE'; exec sleep 30")
	s, err := New(WithBinary(bin))
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Synthesize(context.Background(), "Hello.")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	st.Close()
	select {
	case err := <-errc:
		if err != ErrClosed {
			t.Errorf("Recv: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv still blocked after Close")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	if z := zombies(t); len(z) > 0 {
		t.Errorf("zombie children: %v", z)
	}
}

// wav builds a WAV stream as a streaming writer would: sizes dataSize, a
// LIST chunk before the data, and samples.
func wav(rate int, dataSize uint32, samples []int16) []byte {
	le := binary.LittleEndian
	var b []byte
	b = append(b, "RIFF"...)
	b = le.AppendUint32(b, 0xFFFFFFFF)
	b = append(b, "WAVEfmt "...)
	b = le.AppendUint32(b, 16)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint32(b, uint32(rate))
	b = le.AppendUint32(b, uint32(2*rate))
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 16)
	b = append(b, "LIST"...)
	b = le.AppendUint32(b, 5)
	b = append(b, "abcde\x00"...) // odd size: a pad byte
	b = append(b, "data"...)
	b = le.AppendUint32(b, dataSize)
	for _, v := range samples {
		b = le.AppendUint16(b, uint16(v))
	}
	return b
}

// TestStreamingHeader feeds the parser WAV streams with the placeholder
// sizes streaming writers use, through a stand-in for espeak-ng.
func TestStreamingHeader(t *testing.T) {
	samples := make([]int16, 16000+7)
	for i := range samples {
		samples[i] = int16(i % 3000)
	}
	for _, size := range []uint32{0xFFFFFFFF, 0x7ffff000, 0} {
		path := filepath.Join(t.TempDir(), "out.wav")
		// A trailing odd byte, as a writer killed mid-sample leaves.
		if err := os.WriteFile(path, append(wav(16000, size, samples), 0x55), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := New(WithBinary(fakeBinary(t, "cat "+path)))
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Synthesize(context.Background(), "Hello.")
		if err != nil {
			t.Fatal(err)
		}
		audio, rate, chunks, words := collect(t, st)
		if rate != 16000 || len(audio) != len(samples) || chunks != 51 {
			t.Fatalf("size %#x: %d samples at %d Hz in %d chunks, want %d at 16000 in 51", size, len(audio), rate, chunks, len(samples))
		}
		for i := range audio {
			if audio[i] != samples[i] {
				t.Fatalf("size %#x: sample %d is %d, want %d", size, i, audio[i], samples[i])
			}
		}
		if len(words) != 1 || words[0].Word != "Hello." {
			t.Errorf("words %v", words)
		}
	}

	// A real size is honoured: what follows the data is not audio.
	path := filepath.Join(t.TempDir(), "out.wav")
	os.WriteFile(path, append(wav(16000, 200, samples[:100]), "JUNKJUNK"...), 0o644)
	s, err := New(WithBinary(fakeBinary(t, "cat "+path)))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Synthesize(context.Background(), "Hello.")
	if audio, _, _, _ := collect(t, st); len(audio) != 100 {
		t.Errorf("%d samples, want 100", len(audio))
	}
}

func TestBadOutput(t *testing.T) {
	for name, body := range map[string]string{
		"not wav":   "echo hello there, this is not a WAV stream",
		"fails":     "printf 'RIFF\\0\\0\\0\\0WAVEfmt '; echo 'voice data missing' >&2; exit 3",
		"stereo":    "printf 'RIFF\\377\\377\\377\\377WAVEfmt \\020\\0\\0\\0\\001\\0\\002\\0\\042\\126\\0\\0\\0\\0\\0\\0\\004\\0\\020\\0data\\377\\377\\377\\377'",
		"truncated": "printf 'RIFF\\377\\377\\377\\377WAVEfm'",
	} {
		t.Run(name, func(t *testing.T) {
			s, err := New(WithBinary(fakeBinary(t, body)))
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Synthesize(context.Background(), "Hello.")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var rerr error
			for rerr == nil {
				_, rerr = st.Recv()
			}
			if rerr == io.EOF {
				t.Fatal("bad output ended cleanly")
			}
			if name == "fails" && !strings.Contains(rerr.Error(), "voice data missing") {
				t.Errorf("error %q does not carry espeak-ng's message", rerr)
			}
			t.Log(rerr)
			if _, again := st.Recv(); again.Error() != rerr.Error() {
				t.Errorf("second Recv: %v, want %v again", again, rerr)
			}
		})
	}
}

func TestEstimate(t *testing.T) {
	// 10 ms windows: 100 ms of silence, 400 ms of speech, a 200 ms
	// pause, 300 ms of speech, 300 ms of silence.
	var voiced []bool
	add := func(v bool, n int) {
		for range n {
			voiced = append(voiced, v)
		}
	}
	add(false, 10)
	add(true, 40)
	add(false, 20)
	add(true, 30)
	add(false, 30)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }

	// Two clauses, two stretches of speech: each clause on its own.
	w := estimate("Good news, table free.", voiced, 10*time.Millisecond)
	if len(w) != 4 || w[0].Start != ms(100) || w[1].End != ms(500) || w[2].Start != ms(700) || w[3].End != ms(1000) {
		t.Errorf("clauses: %+v", w)
	}
	// One clause over both: the whole speech, silence left out.
	w = estimate("Good news table free", voiced, 10*time.Millisecond)
	if len(w) != 4 || w[0].Start != ms(100) || w[3].End != ms(1000) {
		t.Errorf("one clause: %+v", w)
	}
	for i := 1; i < len(w); i++ {
		if w[i].Start != w[i-1].End {
			t.Errorf("gap between %+v and %+v", w[i-1], w[i])
		}
	}
	// Longer words take longer.
	w = estimate("a reservation", voiced[:60], 10*time.Millisecond)
	if w[0].End-w[0].Start >= w[1].End-w[1].Start {
		t.Errorf("weights: %+v", w)
	}
	if w := estimate("hello", make([]bool, 50), 10*time.Millisecond); w != nil {
		t.Errorf("no speech: %+v", w)
	}
}

// TestDropped drops a stream without closing it: espeak-ng, blocked on a
// full pipe, is killed and reaped when the stream is collected.
func TestDropped(t *testing.T) {
	s := newSynth(t)
	pid := func() int {
		st, err := s.Synthesize(context.Background(), strings.Repeat("A table for two at seven thirty, please. ", 30))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		return st.(*Stream).cmd.Process.Pid
	}()
	proc := fmt.Sprintf("/proc/%d", pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if _, err := os.Stat(proc); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("espeak-ng (pid %d) still there, zombies %v", pid, zombies(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
