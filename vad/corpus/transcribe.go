package corpus

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/media"
)

// Word is one recognised word and when it was spoken, from the start of the
// input it was found in.
type Word struct {
	Text       string
	Start, End time.Duration
}

// The pocketsphinx-en-us model, as Debian installs it.
var (
	psModelDir = "/usr/share/pocketsphinx/model/en-us"
	psHMM      = filepath.Join(psModelDir, "en-us")
	psDict     = filepath.Join(psModelDir, "cmudict-en-us.dict")
)

const (
	psRate     = 16000                 // the only rate the en-us model takes
	psFrame    = 10 * time.Millisecond // pocketsphinx's default -frate 100
	psMinBatch = 4                     // fewest inputs worth a process of their own
)

// Transcribe recognises each of audio (mono PCM16 at rate) with
// pocketsphinx_batch and returns the words found in each, with times from
// the start of that input. Recognition is constrained to a free loop over
// vocab (zero or more words in any order): pocketsphinx's general language
// model does poorly on synthetic speech, a small vocabulary does well. Words
// missing from the pocketsphinx dictionary are left out of the grammar and
// so never recognised.
//
// Audio at rates other than 16 kHz is resampled (8 kHz telephone audio is
// upsampled; it recognises somewhat worse than wideband audio). The inputs
// are split between up to GOMAXPROCS pocketsphinx_batch processes, each
// working through its share from a control file, so that model loading is
// paid once per process, not once per input.
//
// Fillers, silences and null transitions are left out of the result, and
// alternative pronunciations ("word(2)") are reported as the word. If
// pocketsphinx or its English model is missing the error wraps ErrTools.
func Transcribe(ctx context.Context, rate int, audio [][]int16, vocab []string) ([][]Word, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("corpus: Transcribe: invalid rate %d", rate)
	}
	bin, err := findPocketsphinx()
	if err != nil {
		return nil, err
	}
	dict, err := loadDict(psDict)
	if err != nil {
		return nil, err
	}

	var (
		words []string
		prons []string
	)
	for _, w := range normaliseVocab(vocab) {
		if p, ok := dict[w]; ok {
			words = append(words, w)
			prons = append(prons, p...)
		}
	}
	if len(words) == 0 {
		return nil, errors.New("corpus: Transcribe: no word of the vocabulary is in the pocketsphinx dictionary")
	}

	out := make([][]Word, len(audio))
	var todo []int // inputs with audio; an empty one has no words
	for i, a := range audio {
		if len(a) > 0 {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return out, nil
	}

	tmp, err := os.MkdirTemp("", "holdline-transcribe-")
	if err != nil {
		return nil, fmt.Errorf("corpus: Transcribe: %w", err)
	}
	defer os.RemoveAll(tmp)

	gram := filepath.Join(tmp, "vocab.gram")
	if err := os.WriteFile(gram, []byte(jsgf(words)), 0o644); err != nil {
		return nil, fmt.Errorf("corpus: Transcribe: %w", err)
	}
	// A dictionary of just the grammar's words loads in no time; the full
	// one takes a noticeable part of a second per process.
	dictFile := filepath.Join(tmp, "vocab.dict")
	if err := os.WriteFile(dictFile, []byte(strings.Join(prons, "\n")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("corpus: Transcribe: %w", err)
	}
	for _, i := range todo {
		x, err := to16k(audio[i], rate)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, uttID(i)+".raw"), pcmBytes(x), 0o644); err != nil {
			return nil, fmt.Errorf("corpus: Transcribe: %w", err)
		}
	}

	procs := max(1, min(runtime.GOMAXPROCS(0), (len(todo)+psMinBatch-1)/psMinBatch))
	var mu sync.Mutex
	err = parallel(ctx, procs, func(p int) error {
		// Contiguous shares, as even as possible.
		share := todo[p*len(todo)/procs : (p+1)*len(todo)/procs]
		res, err := runBatch(ctx, bin, tmp, p, share, gram, dictFile)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, i := range share {
			out[i] = res[uttID(i)]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// findPocketsphinx returns the pocketsphinx_batch binary after checking
// that the English model is installed too.
func findPocketsphinx() (string, error) {
	bin, err := lookTool("pocketsphinx_batch", transcribePackages)
	if err != nil {
		return "", err
	}
	for _, p := range []string{filepath.Join(psHMM, "mdef"), psDict} {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: pocketsphinx English model not found (%v); install it with: apt-get install %s", ErrTools, err, transcribePackages)
		}
	}
	return bin, nil
}

func uttID(i int) string { return fmt.Sprintf("u%06d", i) }

// runBatch runs one pocketsphinx_batch over the inputs in share.
func runBatch(ctx context.Context, bin, dir string, p int, share []int, gram, dict string) (map[string][]Word, error) {
	ctl := filepath.Join(dir, fmt.Sprintf("batch%d.ctl", p))
	seg := filepath.Join(dir, fmt.Sprintf("batch%d.seg", p))
	logf := filepath.Join(dir, fmt.Sprintf("batch%d.log", p))
	var b strings.Builder
	for _, i := range share {
		b.WriteString(uttID(i) + "\n")
	}
	if err := os.WriteFile(ctl, []byte(b.String()), 0o644); err != nil {
		return nil, fmt.Errorf("corpus: Transcribe: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin,
		"-hmm", psHMM,
		"-dict", dict,
		"-jsgf", gram,
		"-ctl", ctl,
		"-cepdir", dir,
		"-cepext", ".raw",
		"-adcin", "yes",
		"-adchdr", "0",
		"-samprate", strconv.Itoa(psRate),
		// pocketsphinx's voice activity detector drops silent frames
		// before the search and so shifts all later word times; keep
		// them.
		"-remove_silence", "no",
		// A free word loop invites strings of short words ("a", "it",
		// "to") wherever the match is poor, in pauses especially. A
		// word insertion penalty well below the default 0.65, and a
		// silence probability well above the default 0.005, cut such
		// insertions by about two thirds and improve recall too (on
		// the corpus's clean sentences at 16 kHz: recall 0.87 -> 0.91
		// for the agent, 0.79 -> 0.80 for the user; 1.34 -> 1.00 and
		// 1.42 -> 1.12 words out per word in).
		"-wip", "1e-2",
		"-silprob", "0.1",
		// Beams narrower than the defaults (1e-48, 1e-48, 7e-29): about
		// 30% faster, with the same accuracy on this corpus.
		"-beam", "1e-30",
		"-pbeam", "1e-30",
		"-wbeam", "1e-20",
		"-hypseg", seg,
		"-logfn", logf,
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("corpus: pocketsphinx_batch: %w: %s%s", err, stderr.String(), logTail(logf, 15))
	}
	f, err := os.Open(seg)
	if err != nil {
		return nil, fmt.Errorf("corpus: pocketsphinx_batch wrote no results: %w%s", err, logTail(logf, 15))
	}
	defer f.Close()
	res, err := parseHypseg(f)
	if err != nil {
		return nil, err
	}
	for _, i := range share {
		if _, ok := res[uttID(i)]; !ok {
			return nil, fmt.Errorf("corpus: pocketsphinx_batch gave no result for input %d%s", i, logTail(logf, 15))
		}
	}
	return res, nil
}

func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return "\n" + strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// parseHypseg reads pocketsphinx's -hypseg output, one line per input:
//
//	uttid S score T score A score L score  sf ascr lscr word ...  ef
//
// where each word is preceded by its start frame and the last number is
// the end frame of the last word.
func parseHypseg(r io.Reader) (map[string][]Word, error) {
	res := map[string][]Word{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 10 || (len(f)-10)%4 != 0 || f[1] != "S" || f[3] != "T" || f[5] != "A" || f[7] != "L" {
			return nil, fmt.Errorf("corpus: unexpected pocketsphinx segmentation line %q", sc.Text())
		}
		words := []Word{}
		segs := f[9:]
		for k := 0; k+4 < len(segs); k += 4 {
			start, err1 := strconv.Atoi(segs[k])
			end, err2 := strconv.Atoi(segs[k+4])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("corpus: unexpected pocketsphinx segmentation line %q", sc.Text())
			}
			w, ok := cleanWord(segs[k+3])
			if !ok {
				continue
			}
			words = append(words, Word{Text: w, Start: time.Duration(start) * psFrame, End: time.Duration(end) * psFrame})
		}
		res[f[0]] = words
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("corpus: reading pocketsphinx results: %w", err)
	}
	return res, nil
}

// cleanWord maps a recognised token to a word: "word(2)" to "word"; false
// for null transitions, silences and fillers ("(NULL)", "<sil>", "<s>",
// "[NOISE]", "++BREATH++").
func cleanWord(tok string) (string, bool) {
	if tok == "" || strings.ContainsAny(tok[:1], "(<[+") {
		return "", false
	}
	if i := strings.IndexByte(tok, '('); i > 0 && strings.HasSuffix(tok, ")") {
		tok = tok[:i]
	}
	return tok, true
}

// jsgf is a grammar accepting any sequence of the words, including none (so
// that silence need not be forced into a word).
func jsgf(words []string) string {
	return "#JSGF V1.0;\ngrammar vocab;\npublic <utterance> = <word>*;\n<word> = " + strings.Join(words, " | ") + ";\n"
}

var dicts sync.Map // path -> map[string][]string

// loadDict reads a pocketsphinx dictionary into word -> its lines (the word
// and its numbered variants), memoised per path.
func loadDict(path string) (map[string][]string, error) {
	if d, ok := dicts.Load(path); ok {
		return d.(map[string][]string), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: pocketsphinx dictionary: %w", err)
	}
	defer f.Close()
	d := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		head, _, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexByte(head, '('); i > 0 {
			head = head[:i]
		}
		d[head] = append(d[head], line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("corpus: pocketsphinx dictionary: %w", err)
	}
	dicts.Store(path, d)
	return d, nil
}

// normaliseVocab lower-cases, deduplicates and sorts, keeping only words a
// JSGF grammar can hold unquoted.
func normaliseVocab(vocab []string) []string {
	var out []string
	for _, w := range vocab {
		w = strings.ToLower(strings.TrimSpace(w))
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyz0123456789'-") == "" {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resamplerDelay is the group delay of media.Resampler in samples of the
// lower of the two rates (see its documentation): 1 ms out of 16 kHz, 2 ms
// out of 8 kHz. TestResamplerDelay checks it.
const resamplerDelay = 16

// to16k resamples x to 16 kHz, compensating the resampler's delay so that
// word times refer to the original audio.
func to16k(x []int16, rate int) ([]int16, error) {
	if rate == psRate {
		return x, nil
	}
	r, err := media.NewResampler(rate, psRate)
	if err != nil {
		return nil, fmt.Errorf("corpus: Transcribe: %w", err)
	}
	lower := min(rate, psRate)
	skip := resamplerDelay * psRate / lower // in output samples
	in := append(append([]int16(nil), x...), make([]int16, resamplerDelay*rate/lower+1)...)
	y := r.Process(make([]int16, 0, r.OutputLen(len(in))), in)
	want := int((int64(len(x))*psRate + int64(rate) - 1) / int64(rate))
	return y[skip : skip+want], nil
}

func pcmBytes(x []int16) []byte {
	b := make([]byte, 2*len(x))
	for i, v := range x {
		b[2*i] = byte(v)
		b[2*i+1] = byte(uint16(v) >> 8)
	}
	return b
}

// Vocabulary returns every word of the clips' AgentText and UserText and the
// backchannel words, lower-cased, deduplicated and sorted: the vocabulary
// to give Transcribe for the corpus.
func Vocabulary(clips []Clip) []string {
	var all []string
	for _, c := range clips {
		all = append(all, textWords(c.AgentText)...)
		all = append(all, textWords(c.UserText)...)
	}
	for _, b := range backchannels {
		all = append(all, textWords(b.text)...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// textWords splits text into lower-case words: runs of letters, digits,
// apostrophes and hyphens, without leading or trailing punctuation
// ("Wait," -> "wait", "uh-huh" stays one word).
func textWords(text string) []string {
	f := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '\'' || r == '-')
	})
	out := f[:0]
	for _, w := range f {
		if w = strings.Trim(w, "'-"); w != "" {
			out = append(out, w)
		}
	}
	return out
}
