package pocketsphinx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/internal/cheap"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

// The US English model as Debian's pocketsphinx-en-us installs it.
const (
	// DefaultModelDir is the acoustic model directory (pocketsphinx's
	// -hmm).
	DefaultModelDir = "/usr/share/pocketsphinx/model/en-us/en-us"
	// DefaultDictionary is the pronouncing dictionary (CMUdict).
	DefaultDictionary = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"
)

// Defaults of the options.
const (
	// DefaultPreRoll is how much audio from before StartOfSpeech an
	// utterance starts with: voice activity detectors call it a little
	// after speech begins.
	DefaultPreRoll = 300 * time.Millisecond
	// DefaultMaxUtterance bounds an utterance: one this long is finalised
	// and a new one opened, so that a stream whose speech never ends does
	// not grow the decoder's search history without end.
	DefaultMaxUtterance = 30 * time.Second
	// DefaultQueue is how much audio Write may queue ahead of the decoder.
	DefaultQueue = 2 * time.Second
	// DefaultWriteTimeout is how long Write waits for room in a full queue
	// before it drops the frame and returns ErrOverrun.
	DefaultWriteTimeout = 100 * time.Millisecond
	// DefaultNoiseFloor is the level of the noise added to the audio
	// before decoding, in dBFS.
	DefaultNoiseFloor = -60.0
)

// rate is the only sample rate the en-us acoustic model takes.
const rate = media.Rate16k

// Option configures a Recognizer; see New.
type Option func(*config)

type config struct {
	phrases      []string
	grammar      string
	modelDir     string
	dict         string
	partials     time.Duration
	preRoll      time.Duration
	maxUtterance time.Duration
	queue        time.Duration
	writeTimeout time.Duration
	noiseFloor   float64
	decoderArgs  []string
	idleDecoder  time.Duration
	maxDecoders  int
}

// WithPhrases builds the grammar from example phrases, as Grammar does but
// against the dictionary given WithDictionary.
func WithPhrases(phrases ...string) Option {
	return func(c *config) { c.phrases = append(c.phrases, phrases...) }
}

// WithGrammar uses a JSGF grammar of one's own instead. Every word in it
// must be in the dictionary, as written (the dictionary is lower case).
func WithGrammar(jsgf string) Option {
	return func(c *config) { c.grammar = jsgf }
}

// WithModelDir sets the acoustic model directory (default DefaultModelDir):
// a 16 kHz pocketsphinx model, with mdef, means, variances,
// transition_matrices and feat.params.
func WithModelDir(dir string) Option {
	return func(c *config) { c.modelDir = dir }
}

// WithDictionary sets the pronouncing dictionary (default
// DefaultDictionary). Only the entries of the grammar's words are given to
// the decoder, so a large dictionary costs nothing per stream.
func WithDictionary(path string) Option {
	return func(c *config) { c.dict = path }
}

// WithPartials makes streams yield partial transcripts, the best
// hypothesis so far, after every interval of utterance audio when it has
// changed. 0 (the default) yields finals only.
func WithPartials(interval time.Duration) Option {
	return func(c *config) { c.partials = interval }
}

// WithPreRoll sets how much audio from before StartOfSpeech an utterance
// starts with (default DefaultPreRoll).
func WithPreRoll(d time.Duration) Option {
	return func(c *config) { c.preRoll = d }
}

// WithMaxUtterance sets the longest utterance (default
// DefaultMaxUtterance).
func WithMaxUtterance(d time.Duration) Option {
	return func(c *config) { c.maxUtterance = d }
}

// WithQueue sets how much audio Write may queue ahead of the decoder
// (default DefaultQueue) and how long it waits for room before giving up
// with ErrOverrun (default DefaultWriteTimeout).
func WithQueue(audio, writeTimeout time.Duration) Option {
	return func(c *config) { c.queue, c.writeTimeout = audio, writeTimeout }
}

// WithNoiseFloor sets the level, in dBFS, of the white noise added to the
// audio before it is decoded (default DefaultNoiseFloor, -60 dBFS);
// math.Inf(-1) adds none. The acoustic model was trained on recordings,
// whose silence is never silent: on digital silence, as synthetic speech
// and noise-suppressed browser audio have between words, its silence model
// fits worse than many words, and words appear in the pauses. On the
// booking phrases with 300 ms of digital silence around each, word
// accuracy without the floor is 99.2% at 16 kHz but 89.0% at 8 kHz
// (97.7% with it), and on sentences not in the list 68% and 53% (75% and
// 70%). -60 dBFS is below the noise of any real line.
func WithNoiseFloor(dBFS float64) Option {
	return func(c *config) { c.noiseFloor = dBFS }
}

// WithIdleDecoder sets how long a decoder no utterance uses is kept for
// the next one before it is freed (default DefaultIdleDecoder). A quiet
// server holds none: the next utterance makes one (about 15 ms, while
// its audio queues).
func WithIdleDecoder(d time.Duration) Option {
	return func(c *config) { c.idleDecoder = d }
}

// WithMaxDecoders bounds the decoders the Recognizer makes, which bounds
// its memory: each holds the acoustic model, the grammar and a search,
// some 5 to 10 MB. Half of them (rounded down) decode utterances as they
// are spoken; the other half decode whole utterances at their end (a
// sentence again, for accuracy, or one that opened when the first half
// were all held), held only for that, some 80 ms for a second of speech.
// Decoding is work for the CPU, so more decoders than cores buy little;
// the default is DefaultMaxDecoders.
func WithMaxDecoders(n int) Option {
	return func(c *config) { c.maxDecoders = n }
}

// DefaultMaxDecoders is twice GOMAXPROCS, and at least 4.
func DefaultMaxDecoders() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// WithDecoderArgs passes further pocketsphinx arguments, name/value pairs
// such as "-beam", "1e-40", after the package's own (which they override):
// see pocketsphinx_continuous -help. "-hmm", "-dict", "-jsgf",
// "-samprate" and "-logfn" are the package's.
func WithDecoderArgs(nameValue ...string) Option {
	return func(c *config) { c.decoderArgs = append(c.decoderArgs, nameValue...) }
}

// decoderArgs are the package's tuning of pocketsphinx for short
// grammar-constrained utterances, before any WithDecoderArgs. The numbers
// quoted are word accuracy on the booking phrases at 16 and 8 kHz, then on
// sentences of their words that are not in the list, at 16 and 8 kHz (see
// TestBookingPhrasesWordAccuracy and TestUnlistedPhrases); with all of
// these, 100/97.7/75/70%.
var decoderArgs = []string{
	// pocketsphinx's own voice activity detection drops the frames it
	// takes for silence before the search and before the cepstral mean
	// is updated, so that long pauses (an utterance opened at the first
	// Write, without StartOfSpeech, spans every one) neither skew the
	// mean nor give the free word loop room for words. Without it:
	// 100/95.5/77/72%.
	"-remove_silence", "yes",
	// Beams far wider than the defaults (1e-48, 1e-48, 7e-29), so that
	// the free word loop, with its tiny word probability (see
	// freeWordWeight), survives where no phrase fits; with the defaults
	// such an utterance often comes out as nothing: 100/95.1/49/51%.
	// Decoding costs three times as much: 0.08 CPU seconds per second of
	// 16 kHz audio on the development machine.
	"-beam", "1e-100",
	"-pbeam", "1e-100",
	"-wbeam", "1e-80",
	// A word insertion penalty well below the default 0.65 and a silence
	// probability well above the default 0.005, as vad/corpus found for
	// its free word loop: fewer short words inserted in pauses. With the
	// defaults: 98.5/96.2/75/67%.
	"-wip", "1e-2",
	"-silprob", "0.1",
}

// Recognizer is an stt.Recognizer on pocketsphinx with a grammar. It is
// safe for concurrent use.
//
// Its decoders are shared by its streams, and bounded (WithMaxDecoders): a
// decoder holds the acoustic model, the grammar and a search, 5 to 10 MB,
// so one per call would make memory grow with the calls. A stream takes
// one from the Recognizer's pool when its caller starts speaking and gives
// it back when they stop, so a live call holds no decoder most of the
// time. Decoders left idle for DefaultIdleDecoder are freed, and the
// memory they held is handed back to the system.
type Recognizer struct {
	cfg     config
	args    []string // decoder arguments
	words   []string // the grammar's vocabulary
	pool    *pool
	cleanup runtime.Cleanup
}

var _ stt.Recognizer = (*Recognizer)(nil)

// DefaultIdleDecoder is how long a decoder no stream uses is kept for the
// next utterance before it is freed; WithIdleDecoder sets another.
const DefaultIdleDecoder = 10 * time.Second

// pool is what a Recognizer owns outside the Go heap: the directory
// holding its grammar and dictionary, and the decoders made from them that
// no utterance is using. It is kept apart from the Recognizer so that a
// cleanup can release it if the Recognizer is dropped without Close.
type pool struct {
	lib  *cLib
	args []string
	dir  string
	ttl  time.Duration // how long an idle decoder is kept

	// files is held for reading while a decoder is made from the files
	// in dir, and for writing while they are removed.
	files sync.RWMutex

	// streamMax bounds the decoders held by utterances decoded as they
	// are spoken; bursts (WithMaxDecoders) bounds those decoding a whole
	// utterance at once, a slot per decoder.
	streamMax int
	bursts    chan struct{}

	mu        sync.Mutex
	idle      []idleDecoder // the most recently used last
	out       int           // decoders taken and not yet given back
	streaming int           // of them, held by utterances as spoken
	streams   int           // streams open
	sweep     *time.Timer   // frees decoders idle past ttl; nil: none due
	closed    bool          // Close was called: no new streams
	gone      bool          // closed and no stream left: released
}

type idleDecoder struct {
	d     *decoder
	since time.Time
}

// close stops new streams, and releases the pool once the streams still
// open have ended.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	last := p.streams == 0
	p.mu.Unlock()
	if last {
		p.release()
	}
}

// open counts a new stream in, unless the pool is closed.
func (p *pool) open() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.streams++
	return nil
}

// done counts a stream out, after it has given its decoder back.
func (p *pool) done() {
	p.mu.Lock()
	p.streams--
	last := p.closed && p.streams == 0
	p.mu.Unlock()
	if last {
		p.release()
	}
}

// release frees every idle decoder and removes the files; decoders still
// out are freed when they come back.
func (p *pool) release() {
	p.files.Lock()
	defer p.files.Unlock()
	p.mu.Lock()
	if p.gone {
		p.mu.Unlock()
		return
	}
	idle := p.idle
	p.idle, p.closed, p.gone = nil, true, true
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	freeAll(idle)
	os.RemoveAll(p.dir)
}

// take returns the most recently used idle decoder, or a new one.
func (p *pool) take() (*decoder, error) {
	p.files.RLock()
	defer p.files.RUnlock()
	p.mu.Lock()
	if p.gone {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	p.out++
	if n := len(p.idle); n > 0 {
		d := p.idle[n-1].d
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return d, nil
	}
	p.mu.Unlock()
	d, err := newDecoder(p.lib, p.args)
	if err != nil {
		p.mu.Lock()
		p.out--
		p.mu.Unlock()
		return nil, err
	}
	return d, nil
}

// put gives back a decoder taken with take, with no utterance open.
func (p *pool) put(d *decoder) {
	p.mu.Lock()
	p.out--
	if p.gone || d.ps == nil {
		p.mu.Unlock()
		d.free()
		return
	}
	p.idle = append(p.idle, idleDecoder{d: d, since: time.Now()})
	if len(p.idle) > 0 && p.sweep == nil {
		p.sweep = time.AfterFunc(p.ttl, p.freeIdle)
	}
	p.mu.Unlock()
}

// freeIdle frees the decoders idle for the pool's ttl or longer, and
// schedules itself again while idle decoders remain.
func (p *pool) freeIdle() {
	p.mu.Lock()
	p.sweep = nil
	if p.gone {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	var stale []idleDecoder
	// The oldest first: p.idle is in the order the decoders came back.
	for len(p.idle) > 0 && now.Sub(p.idle[0].since) >= p.ttl {
		stale = append(stale, p.idle[0])
		p.idle = p.idle[1:]
	}
	if len(p.idle) > 0 {
		next := p.ttl - now.Sub(p.idle[0].since)
		p.sweep = time.AfterFunc(max(next, time.Millisecond), p.freeIdle)
	}
	p.mu.Unlock()
	freeAll(stale)
}

// takeStreaming returns a decoder for an utterance to be decoded as it is
// spoken, or nil when as many are held so already as the pool allows.
func (p *pool) takeStreaming() (*decoder, error) {
	p.mu.Lock()
	if p.streaming >= p.streamMax {
		p.mu.Unlock()
		return nil, nil
	}
	p.streaming++
	p.mu.Unlock()
	d, err := p.take()
	if err != nil {
		p.mu.Lock()
		p.streaming--
		p.mu.Unlock()
	}
	return d, err
}

// putStreaming gives back a decoder from takeStreaming, with no utterance
// open, or frees it (d.ps nil) and counts it out.
func (p *pool) putStreaming(d *decoder) {
	p.mu.Lock()
	p.streaming--
	p.mu.Unlock()
	p.put(d)
}

// decode decodes a whole utterance of 16 kHz audio on a decoder of its
// own, once a burst slot is free, and returns its words.
func (p *pool) decode(ctx context.Context, x []int16) (string, error) {
	select {
	case p.bursts <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("pocketsphinx: waiting for a decoder: %w", ctx.Err())
	}
	defer func() { <-p.bursts }()
	d, err := p.take()
	if err != nil {
		return "", err
	}
	text, err := d.decode(x)
	p.put(d)
	return text, err
}

// stats returns how many decoders are in use and idle.
func (p *pool) stats() (inUse, idle int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out, len(p.idle)
}

// freeAll frees decoders, then hands the memory they held back to the
// system: the C allocator keeps freed memory for reuse in per-thread
// arenas otherwise, and a process that served a busy hour would stay at
// its peak for good.
func freeAll(ds []idleDecoder) {
	if len(ds) == 0 {
		return
	}
	for _, d := range ds {
		d.d.free()
	}
	cheap.Trim()
}

// New loads pocketsphinx and the model, writes the grammar and its
// dictionary to a temporary directory the Recognizer owns (removed by
// Close), and makes a first decoder, so that a broken configuration fails
// here rather than when a call starts. One of WithPhrases or WithGrammar is
// required.
//
// Errors wrap ErrMissingLibrary or ErrMissingModel, naming the Debian
// packages to install, or ErrUnknownWords.
func New(opts ...Option) (*Recognizer, error) {
	cfg := config{
		modelDir:     DefaultModelDir,
		dict:         DefaultDictionary,
		preRoll:      DefaultPreRoll,
		maxUtterance: DefaultMaxUtterance,
		queue:        DefaultQueue,
		writeTimeout: DefaultWriteTimeout,
		noiseFloor:   DefaultNoiseFloor,
		idleDecoder:  DefaultIdleDecoder,
		maxDecoders:  DefaultMaxDecoders(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case len(cfg.phrases) == 0 && cfg.grammar == "":
		return nil, errors.New("pocketsphinx: New: no grammar: give WithPhrases or WithGrammar")
	case len(cfg.phrases) > 0 && cfg.grammar != "":
		return nil, errors.New("pocketsphinx: New: WithPhrases and WithGrammar exclude each other")
	case cfg.partials < 0 || cfg.preRoll < 0 || cfg.maxUtterance < time.Second ||
		cfg.queue < 100*time.Millisecond || cfg.writeTimeout < 0 || cfg.idleDecoder < 0:
		return nil, fmt.Errorf("pocketsphinx: New: invalid durations (partials %v, pre-roll %v, max utterance %v, queue %v, write timeout %v, idle decoder %v)",
			cfg.partials, cfg.preRoll, cfg.maxUtterance, cfg.queue, cfg.writeTimeout, cfg.idleDecoder)
	case cfg.maxDecoders < 2:
		return nil, fmt.Errorf("pocketsphinx: New: at most %d decoders (want 2 or more)", cfg.maxDecoders)
	case math.IsNaN(cfg.noiseFloor) || cfg.noiseFloor > -20:
		return nil, fmt.Errorf("pocketsphinx: New: noise floor %v dBFS (want -20 dBFS or lower)", cfg.noiseFloor)
	case len(cfg.decoderArgs)%2 != 0:
		return nil, errors.New("pocketsphinx: New: WithDecoderArgs takes name/value pairs")
	}
	for i := 0; i < len(cfg.decoderArgs); i += 2 {
		switch cfg.decoderArgs[i] {
		case "-hmm", "-dict", "-jsgf", "-samprate", "-logfn":
			// -logfn above all: it swaps sphinxbase's process-wide
			// log file under other decoders' feet.
			return nil, fmt.Errorf("pocketsphinx: New: WithDecoderArgs cannot set %s", cfg.decoderArgs[i])
		}
	}

	l, err := loadLib()
	if err != nil {
		return nil, err
	}
	if err := checkModel(cfg.modelDir); err != nil {
		return nil, err
	}

	var c *compiled
	if cfg.grammar != "" {
		c, err = grammarWords(cfg.grammar, cfg.dict)
	} else {
		c, err = compile(cfg.phrases, cfg.dict)
	}
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "holdline-pocketsphinx-")
	if err != nil {
		return nil, fmt.Errorf("pocketsphinx: New: %w", err)
	}
	streamMax := cfg.maxDecoders / 2
	p := &pool{lib: l, dir: dir, ttl: cfg.idleDecoder,
		streamMax: streamMax, bursts: make(chan struct{}, cfg.maxDecoders-streamMax)}
	gram := filepath.Join(dir, "grammar.gram")
	dict := filepath.Join(dir, "words.dict")
	var lines []string
	for _, w := range c.words {
		lines = append(lines, c.prons[w]...)
	}
	if err := os.WriteFile(gram, []byte(c.jsgf), 0o600); err != nil {
		p.release()
		return nil, fmt.Errorf("pocketsphinx: New: %w", err)
	}
	if err := os.WriteFile(dict, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		p.release()
		return nil, fmt.Errorf("pocketsphinx: New: %w", err)
	}

	args := []string{
		"-hmm", cfg.modelDir,
		"-dict", dict,
		"-jsgf", gram,
		"-samprate", "16000",
	}
	args = append(args, decoderArgs...)
	args = dedupArgs(append(args, cfg.decoderArgs...))
	p.args = args
	// A first decoder, so that a broken configuration fails here; the
	// first utterance takes it.
	d, err := p.take()
	if err != nil {
		p.release()
		return nil, err
	}
	p.put(d)
	r := &Recognizer{cfg: cfg, args: args, words: c.words, pool: p}
	r.cleanup = runtime.AddCleanup(r, (*pool).close, p)
	return r, nil
}

// dedupArgs keeps the last value given for each name: cmd_ln_init with
// strict checking rejects a name given twice.
func dedupArgs(args []string) []string {
	last := map[string]int{}
	for i := 0; i < len(args); i += 2 {
		last[args[i]] = i
	}
	var out []string
	for i := 0; i < len(args); i += 2 {
		if last[args[i]] == i {
			out = append(out, args[i], args[i+1])
		}
	}
	return out
}

// checkModel checks the acoustic model directory before pocketsphinx does:
// some of its checks end the process.
func checkModel(dir string) error {
	for _, f := range []string{"mdef", "means", "variances", "transition_matrices", "feat.params"} {
		p := filepath.Join(dir, f)
		if _, err := os.Stat(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return &missingError{fmt.Sprintf("pocketsphinx: acoustic model %s incomplete (no %s): install the Debian package %s", dir, f, modelPackage), ErrMissingModel}
			}
			return fmt.Errorf("pocketsphinx: acoustic model: %w", err)
		}
	}
	return nil
}

// Words returns the grammar's vocabulary: the only words a transcript can
// hold.
func (r *Recognizer) Words() []string { return slices.Clone(r.words) }

// Close stops new streams: Stream fails with ErrClosed. Streams already
// open go on working; once the last has closed, the grammar files are
// removed and the decoders freed.
func (r *Recognizer) Close() error {
	r.cleanup.Stop()
	r.pool.close()
	return nil
}

// Decoders returns how many decoders the Recognizer holds: in use by an
// open utterance, and idle (kept for the next one, for at most the idle
// time, WithIdleDecoder). Each holds the acoustic model and the search.
func (r *Recognizer) Decoders() (inUse, idle int) { return r.pool.stats() }

// Stream implements stt.Recognizer: it opens a stream of audio at
// sampleRate (8, 16, 24 or 48 kHz; the decoder works at 16 kHz). Each
// utterance of the stream decodes on a decoder from the Recognizer's pool,
// made when none is idle (making one loads the acoustic model and the
// grammar: about 15 ms).
func (r *Recognizer) Stream(ctx context.Context, sampleRate int) (stt.Stream, error) {
	if err := media.CheckRate(sampleRate); err != nil {
		return nil, fmt.Errorf("pocketsphinx: Stream: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pocketsphinx: Stream: %w", err)
	}
	if err := r.pool.open(); err != nil {
		return nil, err
	}
	s, err := newStream(ctx, r.cfg, sampleRate, r.pool)
	if err != nil {
		r.pool.done()
		return nil, err
	}
	return s, nil
}

// grammarWords finds the words of a JSGF grammar and their dictionary
// entries.
func grammarWords(jsgf, dictPath string) (*compiled, error) {
	body := jsgfComments.ReplaceAllString(jsgf, " ")
	var words []string
	need := map[string]bool{}
	for _, stmt := range strings.Split(body, ";") {
		_, rhs, ok := strings.Cut(stmt, "=")
		if !ok {
			continue // header, grammar name, import
		}
		rhs = jsgfNonWords.ReplaceAllString(rhs, " ")
		for _, tok := range strings.Fields(rhs) {
			tok = strings.Trim(tok, `"`)
			if tok != "" && !need[tok] {
				need[tok] = true
				words = append(words, tok)
			}
		}
	}
	if len(words) == 0 {
		return nil, errors.New("pocketsphinx: grammar has no words")
	}
	prons, err := lookup(dictPath, need)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for _, w := range words {
		if _, ok := prons[w]; !ok {
			unknown = append(unknown, fmt.Sprintf("%q", w))
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w (%s): %s", ErrUnknownWords, dictPath, strings.Join(unknown, ", "))
	}
	slices.Sort(words)
	return &compiled{jsgf: jsgf, words: words, prons: prons}, nil
}

var (
	jsgfComments = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	// Rule references, weights, tags and operators.
	jsgfNonWords = regexp.MustCompile(`<[^>]*>|/[^/]*/|\{[^}]*\}|[()\[\]|*+]`)
)
