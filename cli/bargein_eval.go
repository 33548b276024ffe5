package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/holdline/holdline/media/aec"
	"github.com/holdline/holdline/vad"
	"github.com/holdline/holdline/vad/corpus"
	"github.com/holdline/holdline/vad/eval"
	"github.com/holdline/holdline/vad/silero"
)

func bargeinEvalCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bargein-eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the results as a JSON array")
	rate := fs.Int("rate", 16000, "sample rate of the calls, `8000 or 16000`")
	detectors := fs.String("vad", "energy,silero", "voice activity detectors to compare, `LIST` of energy and silero")
	seed := fs.Int64("seed", 1, "corpus seed")
	noTranscripts := fs.Bool("no-transcripts", false, "run full without the transcript check (no pocketsphinx needed)")
	small := fs.Bool("small", false, "a quarter of the corpus, for a quick look")
	confirmWords := fs.Int("confirm-words", 0, "recognised words, neither echo nor backchannel, that confirm a barge-in on their own (0: off, the arbiter's default)")
	threshold := fs.Float64("speaking-threshold", 0, "speech probability needed over the agent (0: the arbiter's default)")
	minSpeech := fs.Duration("speaking-min-speech", 0, "speech over the agent that makes a suspicion (0: the arbiter's default)")
	confirmSpeech := fs.Duration("confirm-speech", 0, "speech after the echo tail that confirms a suspicion (0: the arbiter's default)")
	trace := fs.Bool("trace", false, "print, for full mode, the decisions in every scene that went wrong")
	corpusDir := fs.String("corpus", "", "evaluate the recorded clips listed in `DIR`/corpus.json instead of the synthesised corpus")
	exportDir := fs.String("export", "", "write the synthesised corpus to `DIR` as --corpus reads it (WAV files and corpus.json), and exit")
	openLoop := fs.Bool("open-loop", false, "play the synthesised corpus as recordings, as --corpus plays one: the echo goes on while the output pauses")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: holdline bargein-eval [--json] [--rate 8000|16000] [--vad energy,silero] [--seed S] [--no-transcripts] [--small] [--open-loop] [--trace] [arbiter settings]")
		fmt.Fprintln(stderr, "       holdline bargein-eval --corpus DIR [--json] [--vad energy,silero] [--no-transcripts] [--trace] [arbiter settings]")
		fmt.Fprintln(stderr, "       holdline bargein-eval --export DIR [--rate 8000|16000] [--seed S] [--small]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bargein-eval: unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *corpusDir != "" {
		for _, name := range []string{"export", "rate", "seed", "small", "open-loop"} {
			if set[name] {
				return fmt.Errorf("bargein-eval: --%s does not go with --corpus: a recorded corpus has its own clips and rate, and is always played open loop", name)
			}
		}
	}
	start := time.Now()
	var (
		scenes []eval.Scene
		vocab  []string
		source string
	)
	if *corpusDir != "" {
		recs, err := corpus.Load(*corpusDir)
		if err != nil {
			return err
		}
		if !*noTranscripts {
			if err := checkTexts(recs); err != nil {
				return err
			}
		}
		scenes, vocab = scenesOfRecordings(recs), corpus.RecordingVocabulary(recs)
		source = "recorded in " + *corpusDir + ", open loop"
	} else {
		opts := corpus.Options{Rate: *rate, Seed: *seed}
		if *small {
			opts.EchoSentences, opts.BargeIns, opts.Backchannels = 1, 24, 10
		}
		clips, err := corpus.Generate(ctx, opts)
		if err != nil {
			return err
		}
		scenes, vocab = scenesOf(clips), corpus.Vocabulary(clips)
		if *exportDir != "" {
			if err := corpus.Save(*exportDir, recordingsOf(clips, scenes)); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "wrote %d clips to %s\n", len(clips), filepath.Join(*exportDir, corpus.ManifestName))
			return nil
		}
		source = fmt.Sprintf("seed %d", *seed)
		if *openLoop {
			scenes = scenesOfRecordings(recordingsOf(clips, scenes))
			source += ", open loop"
		}
	}
	cfg := eval.Config{
		Canceller: func(rate int) (eval.Canceller, error) { return aec.New(rate) },
		Arbiter: vad.ArbiterConfig{
			ConfirmWords:      *confirmWords,
			SpeakingThreshold: float32(*threshold),
			SpeakingMinSpeech: *minSpeech,
			ConfirmSpeech:     *confirmSpeech,
		},
	}
	if *trace {
		cfg.Trace = func(m eval.Mode, sc eval.Scene, t eval.Trace) {
			if m != eval.Full && m != eval.FullCold {
				return
			}
			wrong := t.Interrupted != (sc.Kind == eval.BargeIn)
			slow := sc.Kind == eval.BargeIn && t.Detect > 250*time.Millisecond
			if !wrong && !slow {
				return
			}
			fmt.Fprintf(stderr, "%s %s onset=%.2fs interrupted=%v detect=%v\n", m, sc.Name, sc.UserOnset.Seconds(), t.Interrupted, t.Detect)
			for _, d := range t.Decisions {
				fmt.Fprintf(stderr, "    %s\n", d)
			}
		}
	}
	if !*noTranscripts {
		cfg.Transcriber = sphinx{vocab: vocab}
	}
	var results []eval.Result
	for _, name := range strings.Split(*detectors, ",") {
		switch name = strings.TrimSpace(name); name {
		case "energy":
			cfg.Detector = func(int) (vad.Detector, error) { return vad.NewEnergy(), nil }
		case "silero":
			cfg.Detector = func(rate int) (vad.Detector, error) { return silero.New(rate) }
		default:
			return fmt.Errorf("unknown detector %q: want energy or silero", name)
		}
		res, err := eval.Run(ctx, cfg, scenes, eval.Modes, name)
		if err != nil {
			return err
		}
		results = append(results, res...)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	fmt.Fprintf(stdout, "%d clips at %d Hz (%d echo-only, %d barge-ins, %d backchannels), %s, %v\n\n",
		len(scenes), results[0].Rate, results[0].EchoClips, results[0].BargeIns, results[0].Backchannels, source, time.Since(start).Round(time.Second))
	if n := results[0].NoEchoEchoClips; n > 0 {
		fmt.Fprintf(stdout, "(%d echo-only clips are on lines without echo: noise alone; the false and echo pause columns leave them out)\n\n", n)
	}
	return printTable(stdout, scenes, results)
}

// printTable prints the results as the README shows them, with "–" where
// the corpus has nothing to measure (no barge-ins, no echo at -3 dB, none
// detected), rather than a 0 that reads as a result.
func printTable(w io.Writer, scenes []eval.Scene, results []eval.Result) error {
	var lowEcho, echo3 bool
	for _, sc := range scenes {
		if sc.Kind == eval.Echo {
			lowEcho = lowEcho || sc.GainDB <= -6
			echo3 = echo3 || sc.GainDB == -3
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "vad\tmode\tfalse ≤-6dB\tfalse -3dB\tmiss\tdetect p50\tdetect p95\tbackchannel\tresume gap p50/p95\techo pauses\t")
	for _, r := range results {
		detected := r.BargeIns > 0 && r.MissRate < 1
		gap := "–"
		if r.ResumeGaps > 0 {
			gap = fmt.Sprintf("%.0f/%.0f ms", r.ResumeGapP50, r.ResumeGapP95)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.VAD, r.Mode,
			share(r.FalseBargeInRate, lowEcho), share(r.FalseBargeInByGain["-3"], echo3), share(r.MissRate, r.BargeIns > 0),
			millis(r.DetectP50, detected), millis(r.DetectP95, detected),
			share(r.BackchannelRate, r.Backchannels > 0), gap, share(r.PauseRate, r.EchoClips > r.NoEchoEchoClips))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printConditions(w, results)
}

// printConditions prints the second table: the barge-in figures by line
// (echoing or not) and caller level, the echo-only clips of lines without
// echo, and the backchannel interruption rate by voice. It prints nothing
// if the corpus has none of these conditions.
func printConditions(w io.Writer, results []eval.Result) error {
	type col struct {
		line  string
		level float64
	}
	var cols []col
	seen := map[col]bool{}
	voiceSet := map[string]bool{}
	noEcho := false
	for _, r := range results {
		for _, s := range r.BargeInsBy {
			if c := (col{s.Line, s.CallerLevelDB}); !seen[c] {
				seen[c] = true
				cols = append(cols, c)
			}
		}
		for v := range r.BackchannelRateByVoice {
			voiceSet[v] = true
		}
		noEcho = noEcho || r.NoEchoEchoClips > 0
	}
	if len(cols) <= 1 && len(voiceSet) <= 1 && !noEcho {
		return nil
	}
	voices := make([]string, 0, len(voiceSet))
	for v := range voiceSet {
		voices = append(voices, v)
	}
	sort.Strings(voices)
	lineName := map[string]string{eval.LineEcho: "echo", eval.LineNoEcho: "no echo"}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "vad\tmode\t"
	for _, c := range cols {
		head += fmt.Sprintf("miss %s %gdB\tp50/p95\t", lineName[c.line], c.level)
	}
	if noEcho {
		head += "false no echo\tpauses no echo\t"
	}
	for _, v := range voices {
		head += "bc " + v + "\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range results {
		row := r.VAD + "\t" + string(r.Mode) + "\t"
		for _, c := range cols {
			var s *eval.BargeInSlice
			for i := range r.BargeInsBy {
				if b := &r.BargeInsBy[i]; b.Line == c.line && b.CallerLevelDB == c.level {
					s = b
				}
			}
			if s == nil {
				row += "–\t–\t"
				continue
			}
			detected := s.Clips > 0 && s.MissRate < 1
			lat := "–"
			if detected {
				lat = fmt.Sprintf("%.0f/%.0f ms", s.DetectP50, s.DetectP95)
			}
			row += share(s.MissRate, s.Clips > 0) + "\t" + lat + "\t"
		}
		if noEcho {
			row += share(r.NoEchoFalseBargeInRate, r.NoEchoEchoClips > 0) + "\t" + share(r.NoEchoPauseRate, r.NoEchoEchoClips > 0) + "\t"
		}
		for _, v := range voices {
			x, ok := r.BackchannelRateByVoice[v]
			row += share(x, ok) + "\t"
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// share prints a rate, or "–" if there was nothing to count.
func share(x float64, counted bool) string {
	if !counted {
		return "–"
	}
	return pct(x)
}

func millis(x float64, measured bool) string {
	if !measured {
		return "–"
	}
	return fmt.Sprintf("%.0f ms", x)
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// scenesOf turns corpus clips into evaluation scenes, in parts, so that
// the echo follows what the output really plays.
func scenesOf(clips []corpus.Clip) []eval.Scene {
	out := make([]eval.Scene, len(clips))
	for i, c := range clips {
		user := c.User
		if user == nil {
			user = make([]int16, len(c.Near))
		}
		out[i] = eval.Scene{
			Name: c.Name, Kind: eval.Kind(c.Kind), Rate: c.Rate,
			Agent: c.Far, AgentText: c.AgentText,
			EchoDelay: int(c.Delay * time.Duration(c.Rate) / time.Second), EchoTaps: c.EchoTaps,
			User: user, Noise: c.Background,
			UserOnset: c.UserOnset, UserEnd: c.UserEnd, GainDB: c.GainDB,
			NoEcho: c.NoEcho, UserLevelDB: c.UserLevelDB, Voice: c.Voice,
			Before: earlierTurn(clips, i),
		}
	}
	return out
}

// earlierTurn picks, for clip i, what the agent said in an earlier turn of
// the call: the nearest clip before it (or after, for the first) with
// another sentence.
func earlierTurn(clips []corpus.Clip, i int) []int16 {
	for k := 1; k < len(clips); k++ {
		j := (i - k + len(clips)) % len(clips)
		if clips[j].AgentText != clips[i].AgentText {
			return clips[j].Far
		}
	}
	return nil
}

// sphinx transcribes with pocketsphinx over the corpus vocabulary.
type sphinx struct{ vocab []string }

func (s sphinx) Transcribe(ctx context.Context, rate int, audio [][]int16) ([][]eval.Word, error) {
	res, err := corpus.Transcribe(ctx, rate, audio, s.vocab)
	if err != nil {
		return nil, err
	}
	out := make([][]eval.Word, len(res))
	for i, ws := range res {
		for _, w := range ws {
			out[i] = append(out[i], eval.Word{Text: w.Text, End: w.End})
		}
	}
	return out, nil
}
