package cli

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/tts"
)

// turnFlags shape how a caller's turn ends and how soon it is answered, for
// the commands that take a caller's voice.
type turnFlags struct {
	speculate   bool
	firstPhrase int
	// endpointing is the silence that ends a turn; with min and max set,
	// the caller's words choose within them.
	endpointing, min, max time.Duration
}

func (f *turnFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.speculate, "speculate", true,
		"ask the model as soon as the caller's words are in, while the silence that ends their turn runs; "+
			"the answer plays only if the turn ends on the same words (false: ask once the turn has ended)")
	fs.IntVar(&f.firstPhrase, "first-phrase-words", tts.DefaultMinFirstPhraseWords,
		"how many words the first phrase of an answer needs before it goes to the voice at a comma, colon or dash (-1: at the end of its sentence)")
	f.endpointing = runtime.DefaultEndpointing
	fs.Func("endpointing", "the silence that ends the caller's turn: `DUR` (default 500ms), or MIN..MAX to let their words choose: "+
		"MIN after a complete request, MAX after words that leave it open (\"and\", \"um\"), 500ms (within them) otherwise", f.setEndpointing)
}

// setEndpointing parses DUR or MIN..MAX.
func (f *turnFlags) setEndpointing(s string) error {
	lo, hi, ranged := strings.Cut(s, "..")
	min, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil || min <= 0 {
		return fmt.Errorf("want a positive duration such as 500ms, or MIN..MAX such as 250ms..1.2s")
	}
	if !ranged {
		f.endpointing, f.min, f.max = min, 0, 0
		return nil
	}
	max, err := time.ParseDuration(strings.TrimSpace(hi))
	if err != nil || max < min {
		return fmt.Errorf("%q: want MIN..MAX with MIN <= MAX, such as 250ms..1.2s", s)
	}
	f.min, f.max = min, max
	f.endpointing = runtime.DefaultEndpointing
	return nil
}

// options are the session options the flags set.
func (f *turnFlags) options() []runtime.Option {
	opts := []runtime.Option{runtime.WithSpeculation(f.speculate), runtime.WithEndpointing(f.endpointing)}
	if f.max > 0 {
		opts = append(opts, runtime.WithEndpointingRange(f.min, f.max))
	}
	if f.firstPhrase != 0 {
		opts = append(opts, runtime.WithFirstPhrase(f.firstPhrase))
	}
	return opts
}
