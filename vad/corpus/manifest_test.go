package corpus

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
)

// tone is n samples of a 440 Hz tone at amplitude a, with a little noise so
// that no two calls give the same audio.
func tone(r *rand.Rand, n, rate int, a float64) []int16 {
	x := make([]int16, n)
	for i := range x {
		x[i] = int16(a*math.Sin(2*math.Pi*440*float64(i)/float64(rate)) + r.NormFloat64()*50)
	}
	return x
}

// scaled is x delayed by d samples and scaled by g dB, as a line's echo.
func scaled(x []int16, d int, g float64) []int16 {
	out := make([]int16, len(x))
	for i := d; i < len(x); i++ {
		out[i] = int16(math.Round(float64(x[i-d]) * math.Pow(10, g/20)))
	}
	return out
}

func TestSaveLoadRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const rate = 8000
	ref := tone(r, rate*3, rate, 8000)
	earlierRef := tone(r, rate*2, rate, 8000)
	recs := []Recording{
		{
			ID: "echo/one", Kind: Echo, Rate: rate, Mic: scaled(ref, 400, -12), Reference: ref,
			UserOnset: -1, GainDB: -12, AgentText: "I can book a table.",
			EarlierMic: scaled(earlierRef, 400, -12), EarlierReference: earlierRef,
		},
		{
			// Its reference is the first clip's earlier reference: an
			// exported corpus has that, and it is written once.
			ID: "barge_in/two", Kind: BargeIn, Rate: rate, Mic: tone(r, rate*2, rate, 3000), Reference: earlierRef,
			// An onset between samples' nanoseconds survives the round
			// trip through milliseconds.
			UserOnset: 1234*time.Millisecond + 562500*time.Nanosecond, GainDB: -6,
			AgentText: "Your table is booked.", UserText: "Wait, make it Friday.",
		},
		{
			ID: "backchannel/three", Kind: Backchannel, Rate: rate, Mic: tone(r, rate, rate, 3000), Reference: tone(r, rate, rate, 3000),
			UserOnset: 0, GainDB: -20,
		},
	}
	dir := t.TempDir()
	if err := Save(dir, recs); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		for i := range recs {
			if !reflect.DeepEqual(got[i], recs[i]) {
				t.Errorf("recording %d: loaded\n%+v\nsaved\n%+v", i, summary(got[i]), summary(recs[i]))
			}
		}
	}

	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Clips[0].Earlier == nil || m.Clips[0].Earlier.Reference != m.Clips[1].Reference {
		t.Errorf("earlier reference %+v, second clip's reference %q: want the same file", m.Clips[0].Earlier, m.Clips[1].Reference)
	}
	if m.Clips[0].Kind != "echo_only" || m.Clips[0].OnsetMS != nil {
		t.Errorf("echo clip written as kind %q with onset %v, want echo_only and none", m.Clips[0].Kind, m.Clips[0].OnsetMS)
	}

	// Save does not overwrite a corpus.
	err = Save(dir, recs)
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("Save over an existing corpus: %v, want an error saying it exists", err)
	}
}

// summary is a recording without its audio, for messages.
func summary(r Recording) Recording {
	r.Mic, r.Reference, r.EarlierMic, r.EarlierReference = r.Mic[:min(len(r.Mic), 4)], nil, nil, nil
	return r
}

func TestSaveRefusesWhatLoadWouldNot(t *testing.T) {
	x := make([]int16, 800)
	for _, tc := range []struct {
		name string
		rec  Recording
		want string
	}{
		{"escaping id", Recording{ID: "../out", Kind: Echo, Rate: 8000, Mic: x, Reference: x, UserOnset: -1}, "not a relative"},
		{"bad rate", Recording{ID: "a", Kind: Echo, Rate: 44100, Mic: x, Reference: x, UserOnset: -1}, "rate 44100"},
		{"no onset", Recording{ID: "a", Kind: BargeIn, Rate: 8000, Mic: x, Reference: x, UserOnset: -1}, "onset"},
		{"half an earlier stretch", Recording{ID: "a", Kind: Echo, Rate: 8000, Mic: x, Reference: x, UserOnset: -1, EarlierMic: x}, "earlier"},
		{"unknown kind", Recording{ID: "a", Kind: "cough", Rate: 8000, Mic: x, Reference: x}, `unknown kind "cough"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := Save(dir, []Recording{tc.rec})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Save: %v, want an error containing %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
				t.Errorf("a failed Save left a manifest")
			}
		})
	}
}

func TestLoadMeasuresEchoGain(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const rate = 16000
	ref := tone(r, rate*2, rate, 6000)
	for _, g := range []float64{-3, -6, -12, -20} {
		dir := t.TempDir()
		writeTestWAV(t, dir, "mic.wav", scaled(ref, 960, g), rate)
		writeTestWAV(t, dir, "ref.wav", ref, rate)
		writeManifest(t, dir, `{"version": 1, "clips": [{"kind": "echo_only", "mic": "mic.wav", "reference": "ref.wav", "agent_text": "hello"}]}`)
		recs, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if recs[0].GainDB != g {
			t.Errorf("echo at %g dB measured at %g dB", g, recs[0].GainDB)
		}
		if recs[0].ID != "mic.wav" {
			t.Errorf("id %q, want the mic's path when the manifest gives none", recs[0].ID)
		}
	}
}

// writeTestWAV writes x as a mono WAV file with media.WriteWAV.
func writeTestWAV(t *testing.T, dir, name string, x []int16, rate int) {
	t.Helper()
	var b bytes.Buffer
	if err := media.WriteWAV(&b, x, rate); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, name, b.Bytes())
}

func writeFile(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeManifest(t *testing.T, dir, text string) {
	t.Helper()
	writeFile(t, dir, ManifestName, []byte(text))
}

// patchedWAV is a WAV file of x from media.WriteWAV with its fmt chunk's
// channel count and bits per sample replaced, and, if junk, an odd-sized
// chunk before the fmt chunk, as some recorders write.
func patchedWAV(t *testing.T, x []int16, rate, channels, bits int, junk bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := media.WriteWAV(&buf, x, rate); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	le := binary.LittleEndian
	le.PutUint16(b[22:], uint16(channels))
	le.PutUint32(b[28:], uint32(rate*channels*bits/8))
	le.PutUint16(b[32:], uint16(channels*bits/8))
	le.PutUint16(b[34:], uint16(bits))
	if !junk {
		return b
	}
	chunk := append([]byte("junk\x03\x00\x00\x00abc"), 0) // 3 bytes and the pad
	out := append(append(append([]byte{}, b[:12]...), chunk...), b[12:]...)
	le.PutUint32(out[4:], uint32(len(out)-8))
	return out
}

func TestLoadErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	wide := tone(r, 16000, 16000, 5000) // 1 s at 16 kHz
	narrow := tone(r, 8000, 8000, 5000) // 1 s at 8 kHz
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		writeTestWAV(t, dir, "mic.wav", wide, 16000)
		writeTestWAV(t, dir, "ref.wav", wide, 16000)
		writeTestWAV(t, dir, "narrow/mic.wav", narrow, 8000)
		writeTestWAV(t, dir, "narrow/ref.wav", narrow, 8000)
		writeTestWAV(t, dir, "cd.wav", tone(r, 44100, 44100, 5000), 44100)
		writeTestWAV(t, dir, "empty.wav", nil, 16000)
		writeTestWAV(t, dir, "silent.wav", make([]int16, 16000), 16000)
		writeFile(t, dir, "stereo.wav", patchedWAV(t, wide, 16000, 2, 16, false))
		writeFile(t, dir, "stereo-junk.wav", patchedWAV(t, wide, 16000, 2, 16, true))
		writeFile(t, dir, "eight.wav", patchedWAV(t, wide, 16000, 1, 8, false))
		writeFile(t, dir, "notes.wav", []byte("these are my notes, not audio\n"))
		return dir
	}
	clip := func(fields string) string {
		return `{"version": 1, "clips": [{"id": "c1", ` + fields + `}]}`
	}
	echo := `"kind": "echo_only", "gain_db": -6, `
	barge := `"kind": "barge_in", "onset_ms": 400, `
	for _, tc := range []struct {
		name     string
		manifest string // "" for none
		want     []string
	}{
		{"no manifest", "", []string{ManifestName, "no such file"}},
		{"not JSON", `{"version": 1, "clips": [`, []string{ManifestName, "ends early"}},
		{"bad syntax", "{\"version\": 1,\n \"clips\": [}", []string{ManifestName, "line 2, column 12", "invalid character"}},
		{"misspelt field", clip(barge + `"mic": "mic.wav", "reference": "ref.wav", "onset": 300`), []string{ManifestName, `unknown field "onset"`}},
		{"wrong type", "{\"version\": 1,\n \"clips\": [{\"kind\": \"barge_in\", \"onset_ms\": \"400\"}]}", []string{ManifestName, "line 2", "onset_ms"}},
		{"data after", `{"version": 1, "clips": []} {}`, []string{ManifestName, "after"}},
		{"no version", `{"clips": [{"kind": "echo_only", "mic": "mic.wav", "reference": "ref.wav"}]}`, []string{"version 0, want 1"}},
		{"future version", `{"version": 2, "clips": []}`, []string{"version 2, want 1"}},
		{"no clips", `{"version": 1, "clips": []}`, []string{"no clips"}},
		{"unknown kind", clip(`"kind": "bargein", "onset_ms": 400, "mic": "mic.wav", "reference": "ref.wav"`),
			[]string{ManifestName, `clip 1 ("c1")`, `unknown kind "bargein"`, "echo_only, barge_in or backchannel"}},
		{"echo named echo", clip(`"kind": "echo", "mic": "mic.wav", "reference": "ref.wav"`), []string{`unknown kind "echo"`}},
		{"missing mic file", clip(barge + `"mic": "calls/7/mic.wav", "reference": "ref.wav"`),
			[]string{`clip 1 ("c1")`, "mic calls/7/mic.wav does not exist"}},
		{"missing reference file", clip(barge + `"mic": "mic.wav", "reference": "ref-7.wav"`),
			[]string{`clip 1 ("c1")`, "reference ref-7.wav does not exist"}},
		{"no reference", clip(barge + `"mic": "mic.wav"`), []string{`clip 1 ("c1")`, "no reference file given"}},
		{"absolute path", clip(barge + `"mic": "/tmp/mic.wav", "reference": "ref.wav"`), []string{"mic /tmp/mic.wav", "absolute"}},
		{"no onset", clip(`"kind": "barge_in", "mic": "mic.wav", "reference": "ref.wav"`), []string{`clip 1 ("c1")`, "no onset_ms", "barge_in"}},
		{"no onset for a backchannel", clip(`"kind": "backchannel", "mic": "mic.wav", "reference": "ref.wav"`), []string{"no onset_ms", "backchannel"}},
		{"onset for echo", clip(`"kind": "echo_only", "onset_ms": 400, "mic": "mic.wav", "reference": "ref.wav"`), []string{"onset_ms given for an echo_only clip"}},
		{"onset past the end", clip(`"kind": "barge_in", "onset_ms": 1000, "mic": "mic.wav", "reference": "ref.wav"`), []string{"onset_ms 1000", "lasts 1000 ms"}},
		{"negative onset", clip(`"kind": "barge_in", "onset_ms": -5, "mic": "mic.wav", "reference": "ref.wav"`), []string{"onset_ms -5"}},
		{"CD rate", clip(barge + `"mic": "cd.wav", "reference": "ref.wav"`), []string{"mic cd.wav is at 44100 Hz, want 8000 or 16000"}},
		{"rates differ", clip(barge + `"mic": "mic.wav", "reference": "narrow/ref.wav"`),
			[]string{"mic mic.wav is at 16000 Hz and reference narrow/ref.wav at 8000 Hz"}},
		{"stereo", clip(barge + `"mic": "mic.wav", "reference": "stereo.wav"`), []string{"reference stereo.wav has 2 channels, want mono"}},
		{"stereo after another chunk", clip(barge + `"mic": "stereo-junk.wav", "reference": "ref.wav"`), []string{"mic stereo-junk.wav has 2 channels"}},
		{"8-bit", clip(barge + `"mic": "eight.wav", "reference": "ref.wav"`), []string{"mic eight.wav", "unsupported WAV encoding", "8 bits"}},
		{"not a WAV", clip(barge + `"mic": "notes.wav", "reference": "ref.wav"`), []string{"mic notes.wav", "not a valid WAV"}},
		{"empty", clip(barge + `"mic": "empty.wav", "reference": "ref.wav"`), []string{"mic empty.wav holds no audio"}},
		{"silent reference, no gain", clip(`"kind": "echo_only", "mic": "mic.wav", "reference": "silent.wav"`), []string{"reference is silent", "give gain_db"}},
		{"half an earlier stretch", clip(echo + `"mic": "mic.wav", "reference": "ref.wav", "earlier": {"mic": "mic.wav"}`), []string{"no earlier reference file given"}},
		{"earlier at another rate", clip(echo + `"mic": "mic.wav", "reference": "ref.wav", "earlier": {"mic": "narrow/mic.wav", "reference": "narrow/ref.wav"}`),
			[]string{"earlier mic narrow/mic.wav is at 8000 Hz, the clip at 16000 Hz"}},
		{"corpus at two rates", `{"version": 1, "clips": [
			{"kind": "echo_only", "gain_db": -6, "mic": "mic.wav", "reference": "ref.wav"},
			{"kind": "echo_only", "gain_db": -6, "mic": "narrow/mic.wav", "reference": "narrow/ref.wav"}]}`,
			[]string{`clip 2 ("narrow/mic.wav") is at 8000 Hz, clip 1 ("mic.wav") at 16000 Hz`}},
		{"same id twice", `{"version": 1, "clips": [
			{"id": "x", "kind": "echo_only", "gain_db": -6, "mic": "mic.wav", "reference": "ref.wav"},
			{"id": "x", "kind": "echo_only", "gain_db": -6, "mic": "mic.wav", "reference": "ref.wav"}]}`,
			[]string{`clip 2 has the id "x" of clip 1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := setup(t)
			if tc.manifest != "" {
				writeManifest(t, dir, tc.manifest)
			}
			recs, err := Load(dir)
			if err == nil {
				t.Fatalf("Load gave %d recordings, want an error", len(recs))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadGoodManifest(t *testing.T) {
	// The same files as TestLoadErrors's, listed right: each kind, every
	// optional field, an id left out.
	r := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	ref := tone(r, 16000, 16000, 5000)
	writeTestWAV(t, dir, "a/mic.wav", scaled(ref, 320, -12), 16000)
	writeTestWAV(t, dir, "a/ref.wav", ref, 16000)
	writeTestWAV(t, dir, "b/mic.wav", tone(r, 20000, 16000, 5000), 16000)
	writeManifest(t, dir, `{
  "version": 1,
  "clips": [
    {"id": "call 12, first turn", "kind": "echo_only", "mic": "a/mic.wav", "reference": "a/ref.wav",
     "gain_db": -11.5, "agent_text": "Your table is booked.", "earlier": {"mic": "a/mic.wav", "reference": "a/ref.wav"}},
    {"kind": "barge_in", "mic": "b/mic.wav", "reference": "a/ref.wav", "onset_ms": 612.5,
     "agent_text": "Your table is booked.", "caller_text": "No, Friday."},
    {"kind": "backchannel", "mic": "a/mic.wav", "reference": "a/ref.wav", "onset_ms": 0, "id": "uh-huh"}
  ]
}`)
	recs, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id     string
		kind   Kind
		onset  time.Duration
		gain   float64
		micLen int
	}{
		{"call 12, first turn", Echo, -1, -11.5, 16000},
		{"b/mic.wav", BargeIn, 612500 * time.Microsecond, 0, 20000},
		{"uh-huh", Backchannel, 0, 0, 16000},
	}
	for i, w := range want {
		g := recs[i]
		if g.ID != w.id || g.Kind != w.kind || g.UserOnset != w.onset || g.GainDB != w.gain || len(g.Mic) != w.micLen || g.Rate != 16000 {
			t.Errorf("clip %d: %+v, want %+v", i+1, summary(g), w)
		}
	}
	if len(recs[0].EarlierMic) != 16000 || len(recs[0].EarlierReference) != 16000 || recs[1].EarlierMic != nil {
		t.Errorf("earlier stretches: %d and %d samples for clip 1, %d for clip 2; want 16000, 16000, none",
			len(recs[0].EarlierMic), len(recs[0].EarlierReference), len(recs[1].EarlierMic))
	}
	vocab := RecordingVocabulary(recs)
	for _, w := range []string{"booked", "friday", "uh-huh"} {
		if !strings.Contains(" "+strings.Join(vocab, " ")+" ", " "+w+" ") {
			t.Errorf("vocabulary %v lacks %q", vocab, w)
		}
	}
}

// TestExportedCorpusLoads saves Generate's clips as recordings and checks
// that what Load reads back is them: the microphone is Near, the reference
// Far, and the labels survive.
func TestExportedCorpusLoads(t *testing.T) {
	clips := corpusFor(t, smallOptions(8000))
	recs := make([]Recording, len(clips))
	for i, c := range clips {
		recs[i] = Recording{ID: c.Name, Kind: c.Kind, Rate: c.Rate, Mic: c.Near, Reference: c.Far,
			UserOnset: c.UserOnset, GainDB: c.GainDB, AgentText: c.AgentText, UserText: c.UserText,
			UserLevelDB: c.UserLevelDB, UserVoice: c.Voice}
	}
	dir := t.TempDir()
	if err := Save(dir, recs); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatal("the loaded recordings differ from the saved ones")
	}
	if v, w := RecordingVocabulary(got), Vocabulary(clips); !reflect.DeepEqual(v, w) {
		t.Errorf("vocabulary of the recordings %v, of the clips %v", v, w)
	}
	// With the gains left out, Load measures the echo-only clips' gains
	// within a dB of their labels (the noise counts as echo); on a line
	// without echo what it measures is the noise.
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for i := range m.Clips {
		m.Clips[i].GainDB = nil
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, dir, string(b))
	if got, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	for i, c := range clips {
		if c.Kind == Echo && !c.NoEcho && math.Abs(got[i].GainDB-c.GainDB) > 1 {
			t.Errorf("%s: echo measured at %g dB", c.Name, got[i].GainDB)
		}
	}
}
