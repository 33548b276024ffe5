package corpus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/holdline/holdline/media"
)

// ErrTools is wrapped by the errors of Generate and Transcribe when a
// program they run is not installed. The wrapping error names the program
// and the Debian packages that provide it.
var ErrTools = errors.New("corpus: required program not installed")

const (
	synthPackages      = "espeak-ng sox"
	transcribePackages = "pocketsphinx pocketsphinx-en-us"
)

// lookTool finds prog in PATH, or returns an error wrapping ErrTools that
// says which packages to install.
func lookTool(prog, packages string) (string, error) {
	p, err := exec.LookPath(prog)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found in PATH; install it with: apt-get install %s", ErrTools, prog, packages)
	}
	return p, nil
}

// synthTools are the resolved espeak-ng and sox binaries plus a fingerprint
// of their versions, part of every cache key so that upgrading either
// invalidates the cache rather than mixing old and new audio.
type synthTools struct {
	espeak, sox string
	version     string
}

var toolVersions sync.Map // binary path -> version output

func toolVersion(ctx context.Context, path string) (string, error) {
	if v, ok := toolVersions.Load(path); ok {
		return v.(string), nil
	}
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("corpus: %s --version: %w", path, err)
	}
	v := strings.TrimSpace(string(out))
	toolVersions.Store(path, v)
	return v, nil
}

func findSynthTools(ctx context.Context) (synthTools, error) {
	espeak, err := lookTool("espeak-ng", synthPackages)
	if err != nil {
		return synthTools{}, err
	}
	sox, err := lookTool("sox", synthPackages)
	if err != nil {
		return synthTools{}, err
	}
	ev, err := toolVersion(ctx, espeak)
	if err != nil {
		return synthTools{}, err
	}
	sv, err := toolVersion(ctx, sox)
	if err != nil {
		return synthTools{}, err
	}
	return synthTools{espeak: espeak, sox: sox, version: ev + "\n" + sv}, nil
}

// voice is an espeak-ng voice: the arguments selecting and shaping it.
type voice struct {
	name string
	args []string
}

// The two voices differ in sex, pitch and speed so that the echo of the
// agent never sounds like the caller. Both were chosen among espeak-ng's
// variants for how well pocketsphinx recognises them, so that transcripts
// of the corpus mean something.
var (
	// agentVoice: female variant, raised pitch (median about 225 Hz).
	agentVoice = voice{"agent", []string{"-v", "en-us+f5", "-p", "60", "-s", "165"}}
	// userVoice: male variant, lowered pitch (median about 85 Hz).
	userVoice = voice{"user", []string{"-v", "en-us+edward", "-p", "35", "-s", "175"}}
	// backchannelVoices: three, so that a backchannel is not one voice's
	// "uh-huh": the caller's voice a little slower (at its own speed a
	// backchannel lasts under 0.4 s), a female variant at a low pitch
	// (well below the agent's) speaking slowly, and another male variant,
	// slower still; every backchannel lasts 0.4-0.8 s. Names are the
	// clips' Voice.
	backchannelVoices = []voice{
		{"user-slow", []string{"-v", "en-us+edward", "-p", "35", "-s", "140"}},
		{"user-f", []string{"-v", "en-us+f2", "-p", "40", "-s", "140"}},
		{"user-m", []string{"-v", "en-us+m3", "-p", "50", "-s", "120"}},
	}
)

// utterance is one thing a voice says: the text recorded in clips and the
// input given to espeak-ng, which differ when the spelling would be read
// out wrongly (espeak-ng spells "mm-hmm" out as "em em hmm").
type utterance struct {
	text  string
	speak string
}

// synthesizer produces utterances at one sample rate, through the cache.
type synthesizer struct {
	tools synthTools
	rate  int
	dir   string // cache directory
}

// cacheKey identifies the audio of u in v at s.rate, down to the versions
// of the tools and of the processing below.
func (s *synthesizer) cacheKey(v voice, u utterance) string {
	h := sha256.New()
	for _, part := range []string{
		"holdline corpus v1",
		s.tools.version,
		strings.Join(v.args, " "),
		u.speak,
		strconv.Itoa(s.rate),
		strings.Join(s.soxEffects(), " "),
	} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// soxEffects: 6 dB of headroom so resampling loud synthetic speech never
// clips (levels are normalised afterwards), the phone band at 8 kHz, then
// the rate conversion.
func (s *synthesizer) soxEffects() []string {
	e := []string{"gain", "-6"}
	if s.rate <= 8000 {
		e = append(e, "sinc", "300-3400")
	}
	return append(e, "rate", "-h", strconv.Itoa(s.rate))
}

// speak returns u in voice v at s.rate as it comes out of sox, from the
// cache when it is there.
func (s *synthesizer) speak(ctx context.Context, v voice, u utterance) ([]int16, error) {
	path := filepath.Join(s.dir, v.name+"-"+s.cacheKey(v, u)+".wav")
	if x, err := readWAVFile(path, s.rate); err == nil {
		return x, nil
	}

	tmp, err := os.MkdirTemp(s.dir, ".synth-")
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	defer os.RemoveAll(tmp)
	raw := filepath.Join(tmp, "espeak.wav")
	out := filepath.Join(tmp, "out.wav")

	args := append(append([]string{}, v.args...), "-w", raw, "--", u.speak)
	if err := run(ctx, s.tools.espeak, args...); err != nil {
		return nil, err
	}
	// -D: no dither and -R: repeatable, so the output is a pure function of
	// the input.
	args = append([]string{"-D", "-R", raw, "-r", strconv.Itoa(s.rate), "-c", "1", "-b", "16", out}, s.soxEffects()...)
	if err := run(ctx, s.tools.sox, args...); err != nil {
		return nil, err
	}
	x, err := readWAVFile(out, s.rate)
	if err != nil {
		return nil, err
	}
	// Rename is atomic: a concurrent run sees either no file or all of it.
	if err := os.Rename(out, path); err != nil {
		return nil, fmt.Errorf("corpus: caching %q: %w", u.text, err)
	}
	return x, nil
}

// run runs a program, returning its standard error in the error if it fails.
func run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, prog, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("corpus: %s %s: %w: %s", filepath.Base(prog), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func readWAVFile(path string, rate int) ([]int16, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	x, r, err := media.ReadWAV(f)
	if err != nil {
		return nil, fmt.Errorf("corpus: %s: %w", path, err)
	}
	if r != rate {
		return nil, fmt.Errorf("corpus: %s: %d Hz, want %d", path, r, rate)
	}
	return x, nil
}

func writeWAVFile(path string, x []int16, rate int) error {
	var buf bytes.Buffer
	if err := media.WriteWAV(&buf, x, rate); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
