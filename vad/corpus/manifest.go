package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/holdline/holdline/media"
)

// ManifestName is the file in a corpus directory that lists its clips.
const ManifestName = "corpus.json"

// ManifestVersion is the version of the manifest format that Load reads
// and Save writes.
const ManifestVersion = 1

// Recording is a clip as a call recording holds it: what the agent's input
// heard and what the agent played, without the parts a simulation has (the
// caller alone, the echo path). A corpus directory holds recordings,
// whether taken from real calls or exported from Generate's clips.
type Recording struct {
	// ID names the clip in errors and traces, unique within a corpus. It
	// is free-form in a manifest; Save needs a relative slash-separated
	// path, as Clip.Name is, and writes the clip's files under it.
	ID   string
	Kind Kind
	// Rate is the sample rate of all the clip's audio, 8000 or 16000,
	// and the same for every clip of a corpus.
	Rate int
	// Mic is what the agent's input heard: the echo of Reference plus,
	// in BargeIn and Backchannel clips, the caller.
	Mic []int16
	// Reference is what the agent played, on Mic's timeline, as the
	// echo canceller is given it.
	Reference []int16
	// UserOnset is when the caller starts speaking in Mic; -1 in Echo
	// clips.
	UserOnset time.Duration
	// GainDB is the echo's energy relative to Reference's, in dB. The
	// evaluation reports false barge-ins on echo at -6 dB and below apart
	// from louder echo, so Load measures it on Echo clips whose manifest
	// does not give it (see MeasureEchoGain).
	GainDB float64
	// AgentText and UserText are what the agent and the caller say, if
	// known: the transcript check listens for these words, and rules out
	// the agent's own.
	AgentText, UserText string
	// UserLevelDB and UserVoice label the caller, if known: the level
	// relative to the agent's in dB and the voice, as the synthesised
	// corpus sets them (Clip.UserLevelDB, Clip.Voice), for the report's
	// breakdowns.
	UserLevelDB float64
	UserVoice   string
	// EarlierMic and EarlierReference are, if known, an earlier stretch
	// of the same call with the agent speaking and the caller silent: the
	// echo canceller hears it before the clip, as it had heard the call
	// by then.
	EarlierMic, EarlierReference []int16
}

// manifest is the JSON of ManifestName.
type manifest struct {
	Version int     `json:"version"`
	Clips   []entry `json:"clips"`
}

// entry is one clip of a manifest. Paths are relative to the corpus
// directory, with forward slashes.
type entry struct {
	ID         string   `json:"id,omitempty"`
	Kind       string   `json:"kind"`
	Mic        string   `json:"mic"`
	Reference  string   `json:"reference"`
	OnsetMS    *float64 `json:"onset_ms,omitempty"`
	GainDB     *float64 `json:"gain_db,omitempty"`
	AgentText  string   `json:"agent_text,omitempty"`
	CallerText string   `json:"caller_text,omitempty"`
	// CallerLevelDB and CallerVoice are optional labels (Recording's
	// UserLevelDB and UserVoice).
	CallerLevelDB *float64 `json:"caller_level_db,omitempty"`
	CallerVoice   string   `json:"caller_voice,omitempty"`
	Earlier       *earlier `json:"earlier,omitempty"`
}

type earlier struct {
	Mic       string `json:"mic"`
	Reference string `json:"reference"`
}

// manifestKinds maps the manifest's kinds to Kind. An echo clip is
// "echo_only" there: a reader of the file should not take it for a
// recording of the echo path.
var manifestKinds = map[string]Kind{"echo_only": Echo, "barge_in": BargeIn, "backchannel": Backchannel}

func manifestKind(k Kind) (string, bool) {
	for name, kind := range manifestKinds {
		if kind == k {
			return name, true
		}
	}
	return "", false
}

// Load reads the corpus in dir: its manifest, ManifestName, and the WAV
// files it names. Every recording must be mono 16-bit PCM at 8000 or
// 16000 Hz, one rate for the whole corpus. Errors name the file and the
// clip at fault; unknown fields in the manifest are errors, so that a
// misspelt optional field is not silently ignored.
func Load(dir string) ([]Recording, error) {
	file := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("corpus: %s: %w", file, jsonError(b, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("corpus: %s: data after the manifest's closing brace", file)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("corpus: %s: version %d, want %d", file, m.Version, ManifestVersion)
	}
	if len(m.Clips) == 0 {
		return nil, fmt.Errorf("corpus: %s: no clips", file)
	}
	recs := make([]Recording, len(m.Clips))
	seen := map[string]int{}
	for i, e := range m.Clips {
		id := e.ID
		if id == "" {
			id = e.Mic
		}
		r, err := e.load(dir, id)
		if err != nil {
			return nil, fmt.Errorf("corpus: %s: clip %d (%q): %w", file, i+1, id, err)
		}
		if j, ok := seen[id]; ok {
			return nil, fmt.Errorf("corpus: %s: clip %d has the id %q of clip %d", file, i+1, id, j+1)
		}
		seen[id] = i
		if i > 0 && r.Rate != recs[0].Rate {
			return nil, fmt.Errorf("corpus: %s: clip %d (%q) is at %d Hz, clip 1 (%q) at %d Hz: a corpus is at one rate",
				file, i+1, id, r.Rate, recs[0].ID, recs[0].Rate)
		}
		recs[i] = r
	}
	return recs, nil
}

// load reads one clip's recordings and checks its fields.
func (e entry) load(dir, id string) (Recording, error) {
	r := Recording{ID: id, AgentText: e.AgentText, UserText: e.CallerText, UserOnset: -1, UserVoice: e.CallerVoice}
	if e.CallerLevelDB != nil {
		r.UserLevelDB = *e.CallerLevelDB
	}
	kind, ok := manifestKinds[e.Kind]
	if !ok {
		return r, fmt.Errorf("unknown kind %q, want echo_only, barge_in or backchannel", e.Kind)
	}
	r.Kind = kind
	var err error
	if r.Mic, r.Rate, err = readRecording(dir, "mic", e.Mic); err != nil {
		return r, err
	}
	var rate int
	if r.Reference, rate, err = readRecording(dir, "reference", e.Reference); err != nil {
		return r, err
	}
	if rate != r.Rate {
		return r, fmt.Errorf("mic %s is at %d Hz and reference %s at %d Hz: want one rate", e.Mic, r.Rate, e.Reference, rate)
	}
	length := time.Duration(len(r.Mic)) * time.Second / time.Duration(r.Rate)
	switch {
	case kind == Echo && e.OnsetMS != nil:
		return r, errors.New("onset_ms given for an echo_only clip: it has no caller")
	case kind != Echo && e.OnsetMS == nil:
		return r, fmt.Errorf("no onset_ms: a %s clip needs the caller's onset", e.Kind)
	case e.OnsetMS != nil:
		r.UserOnset = time.Duration(math.Round(*e.OnsetMS * float64(time.Millisecond)))
		if r.UserOnset < 0 || r.UserOnset >= length {
			return r, fmt.Errorf("onset_ms %g is outside the mic recording, which lasts %g ms", *e.OnsetMS, float64(length)/float64(time.Millisecond))
		}
	}
	switch {
	case e.GainDB != nil:
		r.GainDB = *e.GainDB
	case kind == Echo:
		if r.GainDB, err = MeasureEchoGain(r.Mic, r.Reference); err != nil {
			return r, fmt.Errorf("%w; give gain_db", err)
		}
	}
	if e.Earlier != nil {
		if r.EarlierMic, rate, err = readRecording(dir, "earlier mic", e.Earlier.Mic); err != nil {
			return r, err
		}
		if rate != r.Rate {
			return r, fmt.Errorf("earlier mic %s is at %d Hz, the clip at %d Hz", e.Earlier.Mic, rate, r.Rate)
		}
		if r.EarlierReference, rate, err = readRecording(dir, "earlier reference", e.Earlier.Reference); err != nil {
			return r, err
		}
		if rate != r.Rate {
			return r, fmt.Errorf("earlier reference %s is at %d Hz, the clip at %d Hz", e.Earlier.Reference, rate, r.Rate)
		}
	}
	return r, nil
}

// readRecording reads the WAV file at rel, a path relative to dir; what
// says which of the clip's recordings it is, for errors.
func readRecording(dir, what, rel string) ([]int16, int, error) {
	if rel == "" {
		return nil, 0, fmt.Errorf("no %s file given", what)
	}
	if filepath.IsAbs(rel) || path.IsAbs(rel) {
		return nil, 0, fmt.Errorf("%s %s: the path is absolute; paths are relative to the corpus directory", what, rel)
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%s %s does not exist: %w", what, rel, err)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	x, rate, err := media.ReadWAV(bytes.NewReader(b))
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", what, rel, err)
	}
	if n := wavChannels(b); n != 1 {
		return nil, 0, fmt.Errorf("%s %s has %d channels, want mono (a call recorded in stereo has one side per channel: split them, e.g. sox in.wav mic.wav remix 1)", what, rel, n)
	}
	if rate != 8000 && rate != 16000 {
		return nil, 0, fmt.Errorf("%s %s is at %d Hz, want 8000 or 16000", what, rel, rate)
	}
	if len(x) == 0 {
		return nil, 0, fmt.Errorf("%s %s holds no audio", what, rel)
	}
	return x, rate, nil
}

// wavChannels returns the channel count of a WAV file that media.ReadWAV
// has read. ReadWAV averages the channels, which would be wrong here: a
// call recorded in stereo has the caller in one channel and the agent in
// the other, and their mix is neither the microphone nor the reference.
func wavChannels(b []byte) int {
	for p := 12; p+8 <= len(b); {
		size := int64(binary.LittleEndian.Uint32(b[p+4 : p+8]))
		switch string(b[p : p+4]) {
		case "fmt ":
			if p+12 > len(b) {
				return 0
			}
			return int(binary.LittleEndian.Uint16(b[p+10 : p+12]))
		case "data":
			return 0
		}
		next := int64(p) + 8 + size + size&1
		if next > int64(len(b)) {
			return 0
		}
		p = int(next)
	}
	return 0
}

// MeasureEchoGain measures the echo level of an echo-only recording: the
// energy of mic relative to reference's over mic's length, in dB, rounded
// to whole dB as the synthesised corpus's gains are, and at least -90 dB.
// The line's noise counts as echo, so a noisy line measures a little
// louder than its echo is.
func MeasureEchoGain(mic, reference []int16) (float64, error) {
	var em, er float64
	for i, v := range mic {
		em += float64(v) * float64(v)
		if i < len(reference) {
			er += float64(reference[i]) * float64(reference[i])
		}
	}
	if er == 0 {
		return 0, errors.New("the reference is silent over the mic recording, so the echo level cannot be measured")
	}
	if em == 0 {
		return -90, nil
	}
	return max(math.Round(10*math.Log10(em/er)), -90), nil
}

// jsonError says where a JSON syntax or type error is, by line and
// column, and what a truncated file's error means.
func jsonError(b []byte, err error) error {
	var off int64
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the JSON ends early: %w", err)
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	default:
		return err
	}
	// The offset is past the byte at fault.
	off = min(max(off-1, 0), int64(len(b)))
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(b[:off], '\n'))
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

// Save writes recs to dir as Load reads them: for each recording, mic.wav,
// reference.wav and, if it has an earlier stretch, earlier_mic.wav in the
// directory dir/ID, and the manifest. An earlier reference identical to a
// recording already written (in an exported corpus, another clip's
// reference) is not written again. Save refuses to replace an existing
// manifest, which may list someone's recordings, and writes the manifest
// last, so an interrupted Save leaves no corpus behind.
func Save(dir string, recs []Recording) error {
	file := filepath.Join(dir, ManifestName)
	if _, err := os.Stat(file); err == nil {
		return fmt.Errorf("corpus: Save: %s exists; remove it or choose another directory", file)
	}
	if len(recs) == 0 {
		return errors.New("corpus: Save: no recordings")
	}
	m := manifest{Version: ManifestVersion, Clips: make([]entry, len(recs))}
	written := map[[sha256.Size]byte]string{} // audio -> file
	write := func(rel string, x []int16, rate int) (string, error) {
		h := sha256.New()
		binary.Write(h, binary.LittleEndian, int64(rate))
		binary.Write(h, binary.LittleEndian, x)
		var key [sha256.Size]byte
		h.Sum(key[:0])
		if f, ok := written[key]; ok {
			return f, nil
		}
		if err := writeWAVFile(filepath.Join(dir, filepath.FromSlash(rel)), x, rate); err != nil {
			return "", err
		}
		written[key] = rel
		return rel, nil
	}
	seen := map[string]bool{}
	for i, r := range recs {
		if !validName(r.ID) {
			return fmt.Errorf("corpus: Save: recording %d: id %q is not a relative slash-separated path", i+1, r.ID)
		}
		if seen[r.ID] {
			return fmt.Errorf("corpus: Save: recording %d: id %q used twice", i+1, r.ID)
		}
		seen[r.ID] = true
		kind, ok := manifestKind(r.Kind)
		if !ok {
			return fmt.Errorf("corpus: Save: %s: unknown kind %q", r.ID, r.Kind)
		}
		if r.Rate != 8000 && r.Rate != 16000 {
			return fmt.Errorf("corpus: Save: %s: rate %d, want 8000 or 16000", r.ID, r.Rate)
		}
		if r.Kind != Echo && r.UserOnset < 0 {
			return fmt.Errorf("corpus: Save: %s: a %s recording needs the caller's onset", r.ID, kind)
		}
		if (r.EarlierMic == nil) != (r.EarlierReference == nil) {
			return fmt.Errorf("corpus: Save: %s: an earlier stretch needs both its mic and its reference", r.ID)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(r.ID)), 0o755); err != nil {
			return fmt.Errorf("corpus: Save: %w", err)
		}
		gain := r.GainDB
		e := entry{ID: r.ID, Kind: kind, GainDB: &gain, AgentText: r.AgentText, CallerText: r.UserText, CallerVoice: r.UserVoice}
		if r.Kind != Echo {
			level := r.UserLevelDB
			e.CallerLevelDB = &level
		}
		if r.Kind != Echo {
			onset := float64(r.UserOnset) / float64(time.Millisecond)
			e.OnsetMS = &onset
		}
		var err error
		if e.Mic, err = write(r.ID+"/mic.wav", r.Mic, r.Rate); err != nil {
			return fmt.Errorf("corpus: Save: %w", err)
		}
		if e.Reference, err = write(r.ID+"/reference.wav", r.Reference, r.Rate); err != nil {
			return fmt.Errorf("corpus: Save: %w", err)
		}
		if r.EarlierMic != nil {
			e.Earlier = &earlier{}
			if e.Earlier.Mic, err = write(r.ID+"/earlier_mic.wav", r.EarlierMic, r.Rate); err != nil {
				return fmt.Errorf("corpus: Save: %w", err)
			}
			if e.Earlier.Reference, err = write(r.ID+"/earlier_reference.wav", r.EarlierReference, r.Rate); err != nil {
				return fmt.Errorf("corpus: Save: %w", err)
			}
		}
		m.Clips[i] = e
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("corpus: Save: %w", err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("corpus: Save: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("corpus: Save: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("corpus: Save: %w", err)
	}
	return nil
}

// validName reports whether name is a relative slash-separated path that
// stays inside the directory it is joined to.
func validName(name string) bool {
	return name != "" && !path.IsAbs(name) && !strings.Contains(name, "\\") && path.Clean(name) == name &&
		name != ".." && !strings.HasPrefix(name, "../") && name != "."
}

// RecordingVocabulary is Vocabulary for recordings: every word of their
// AgentText and UserText and the backchannel words.
func RecordingVocabulary(recs []Recording) []string {
	clips := make([]Clip, len(recs))
	for i, r := range recs {
		clips[i] = Clip{AgentText: r.AgentText, UserText: r.UserText}
	}
	return Vocabulary(clips)
}
