package pocketsphinx

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Grammar builds a JSGF grammar from an agent's example phrases, for
// WithGrammar; New(WithPhrases(phrases...)) does the same itself. Each
// phrase is normalised as Normalise does, and every word must be in
// DefaultDictionary, or the error wraps ErrUnknownWords and names them.
//
// The grammar accepts one phrase, or any sequence of the phrases' words.
// In the phrases each run of number words is a slot that takes any number,
// or an hour and its minutes, so that "a table for two at seven" also
// recognises "a table for five at nine thirty". The free loop of words lets
// a caller who says something else still come out word by word, but each
// of its words costs so much (freeWordWeight) that a phrase wins wherever
// the audio fits one: what makes a grammar accurate where pocketsphinx's
// general English model is not.
func Grammar(phrases []string) (string, error) {
	g, err := compile(phrases, DefaultDictionary)
	if err != nil {
		return "", err
	}
	return g.jsgf, nil
}

// compiled is a grammar and the dictionary entries of its words.
type compiled struct {
	jsgf  string
	words []string            // sorted
	prons map[string][]string // word -> its dictionary lines
}

// Backchannels are phrases every grammar built from phrases takes besides
// the caller's own: what people say over an agent to keep it talking.
// Without them the grammar fits such a sound to the nearest thing it has
// ("o'clock" for "uh-huh"), and a barge-in is judged on words the caller did
// not say. They are taken whole only: their words do not join the free
// loop. A word the dictionary lacks leaves its phrase out.
//
// Words that stop the agent ("stop", "hold on") are not added: on
// telephone audio a grammar offering "stop" as a phrase hears some of
// espeak-ng's "uh-huh"s as it, and would cut the agent for a caller who
// meant "go on". An agent whose callers say them puts them in its phrases.
var Backchannels = []string{"uh-huh", "mhm", "hmm", "mm", "yeah", "yep", "okay", "right", "sure", "alright"}

// compile normalises phrases, checks their words against the dictionary at
// dictPath and builds the grammar, with the Backchannels.
func compile(phrases []string, dictPath string) (*compiled, error) {
	var norm, extras [][]string
	var src []string // the phrase each of norm came from
	need := map[string]bool{}
	for i, p := range slices.Concat(phrases, Backchannels) {
		if i == len(phrases) && len(norm) == 0 {
			return nil, errors.New("pocketsphinx: no phrase has a word in it")
		}
		w := Normalise(p)
		if len(w) == 0 {
			continue
		}
		if i < len(phrases) {
			norm, src = append(norm, w), append(src, p)
		} else {
			extras = append(extras, w)
		}
		for _, x := range w {
			need[x] = true
			// A hyphenated word the dictionary lacks is said as its parts.
			for part := range strings.SplitSeq(x, "-") {
				need[part] = true
			}
		}
	}
	for _, w := range append(slices.Clone(countWords), minuteWords...) {
		need[w] = true
	}
	prons, err := lookup(dictPath, need)
	if err != nil {
		return nil, err
	}

	var unknown []string
	for i, p := range norm {
		var out []string
		for _, w := range p {
			if _, ok := prons[w]; ok {
				out = append(out, w)
				continue
			}
			parts := strings.Split(w, "-")
			ok := len(parts) > 1
			for _, part := range parts {
				_, known := prons[part]
				ok = ok && known
			}
			if !ok {
				unknown = append(unknown, fmt.Sprintf("%q in %q", w, src[i]))
				continue
			}
			out = append(out, parts...)
		}
		norm[i] = out
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w (%s): %s; spell them as they sound with words it has, or leave them out",
			ErrUnknownWords, dictPath, strings.Join(unknown, ", "))
	}

	known := extras[:0]
	for _, p := range extras {
		if !slices.ContainsFunc(p, func(w string) bool { _, ok := prons[w]; return !ok }) {
			known = append(known, p)
		}
	}
	extras = known
	c := &compiled{jsgf: phraseGrammar(norm, extras), prons: map[string][]string{}}
	for _, p := range slices.Concat(norm, extras) {
		for _, w := range p {
			c.prons[w] = prons[w]
		}
	}
	// The number classes hold number words not seen in any phrase.
	counts, minutes := numberClasses(norm)
	for _, w := range append(counts, minutes...) {
		if p, ok := prons[w]; ok {
			c.prons[w] = p
		}
	}
	for w := range c.prons {
		c.words = append(c.words, w)
	}
	slices.Sort(c.words)
	return c, nil
}

// freeWordWeight is the probability the grammar gives each word of the
// free loop. pocketsphinx 5prealpha takes JSGF weights as they are: it
// does not normalise a rule's alternatives, so an unweighted alternative
// has probability 1 (and a weight above 1 on <NULL> aborts the process),
// and weights on references to rules made no measurable difference when
// tried. So phrases, their numbers and the choice between a phrase and the
// free loop cost nothing here, and each free word costs this much, raised
// to the language weight (-lw 6.5): 1e-15 is 1e-97.
//
// It has to be that small. On synthetic speech the free loop otherwise
// finds word strings that fit the audio better than the phrase that was
// said, and telephone audio, which fits the 16 kHz model worse, suffers
// most. Word accuracy on the booking phrases at 16/8 kHz, then on
// sentences of their words not in the list (tests, caller voice): with
// 1e-10 per word 98.5/93.6/75/74%, with 1e-15 100/97.7/75/70%, with 1e-20
// 100/97.7/74/65%. The decoder's beams (decoderArgs) are widened to match:
// with pocketsphinx's default beams (1e-48) a free word would fall outside
// them at once, and an utterance that fits no phrase would come out as
// nothing at all.
var freeWordWeight = 1e-15

// phraseGrammar writes the JSGF grammar for normalised phrases, and extras:
// phrases taken whole, whose words stay out of the free loop.
func phraseGrammar(phrases, extras [][]string) string {
	counts, minutes := numberClasses(phrases)
	var alts []string
	seen := map[string]bool{}
	vocab := map[string]bool{}
	for _, w := range append(slices.Clone(counts), minutes...) {
		vocab[w] = true
	}
	for _, p := range phrases {
		var toks []string
		for _, run := range numberRuns(p) {
			for _, w := range run.words {
				vocab[w] = true
			}
			switch n := len(run.words); {
			case !run.number:
				toks = append(toks, run.words...)
			case n <= 2:
				// A number slot is a count, or an hour and minutes:
				// "seven", "seven thirty", "six forty-five".
				toks = append(toks, "<number> [<minutes>]")
			default:
				// Longer runs are numbers read one by one.
				for range n {
					toks = append(toks, "<number>")
				}
			}
		}
		alt := strings.Join(toks, " ")
		if !seen[alt] {
			seen[alt] = true
			alts = append(alts, alt)
		}
	}
	for _, p := range extras {
		if alt := strings.Join(p, " "); !seen[alt] {
			seen[alt] = true
			alts = append(alts, alt)
		}
	}
	words := make([]string, 0, len(vocab))
	for w := range vocab {
		words = append(words, w)
	}
	slices.Sort(words)

	var b strings.Builder
	b.WriteString("#JSGF V1.0;\n\ngrammar holdline;\n\n")
	b.WriteString("public <utterance> = <phrase> | <free>;\n\n")
	b.WriteString("<phrase> =\n\t  ")
	b.WriteString(strings.Join(alts, "\n\t| "))
	b.WriteString(";\n\n")
	if len(counts) > 0 {
		b.WriteString("<number> = " + strings.Join(counts, " | ") + ";\n\n")
		b.WriteString("<minutes> = " + strings.Join(minutes, " | ") + ";\n\n")
	}
	b.WriteString("<free> = <word>+;\n\n")
	w := strconv.FormatFloat(freeWordWeight, 'g', -1, 64)
	b.WriteString("<word> =\n\t  /" + w + "/ ")
	b.WriteString(strings.Join(words, "\n\t| /"+w+"/ "))
	b.WriteString(";\n")
	return b.String()
}

// Number words. A run of them in a phrase becomes a slot that takes a
// count or an hour (<number>), then perhaps minutes (<minutes>): the
// numbers a caller gives as party sizes and times. Each class also takes
// the words found in its place in the phrases. Keeping them apart matters
// on telephone audio, where "six" and "fifty", "seven" and "eleven" sound
// alike: a party of fifty, or a table at fifty, is not on offer unless a
// phrase says so.
var (
	countWords  = []string{"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	minuteWords = []string{"fifteen", "twenty", "thirty", "forty", "forty-five", "fifty"}
)

func isNumberWord(w string) bool {
	return slices.Contains(countWords, w) || slices.Contains(minuteWords, w)
}

// run is a stretch of a phrase: number words, or other words.
type run struct {
	words  []string
	number bool
}

// numberRuns splits a phrase into runs of number words and of other words.
func numberRuns(p []string) []run {
	var out []run
	for i := 0; i < len(p); {
		num := isNumberWord(p[i])
		j := i + 1
		for j < len(p) && isNumberWord(p[j]) == num {
			j++
		}
		out = append(out, run{p[i:j], num})
		i = j
	}
	return out
}

// numberClasses returns the words of the <number> and <minutes> classes,
// or nils if no phrase has a number.
func numberClasses(phrases [][]string) (counts, minutes []string) {
	var firsts, laters []string
	for _, p := range phrases {
		for _, r := range numberRuns(p) {
			switch {
			case !r.number:
			case len(r.words) <= 2:
				firsts = append(firsts, r.words[0])
				laters = append(laters, r.words[1:]...)
			default:
				firsts = append(firsts, r.words...)
			}
		}
	}
	if len(firsts) == 0 {
		return nil, nil
	}
	add := func(class, extra []string) []string {
		out := slices.Clone(class)
		slices.Sort(extra)
		for _, w := range slices.Compact(extra) {
			if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
		return out
	}
	return add(countWords, firsts), add(minuteWords, laters)
}

// lookup reads the pronouncing dictionary at path and returns the lines of
// each word in need (the word and its variants, "word(2)").
func lookup(path string, need map[string]bool) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &missingError{fmt.Sprintf("pocketsphinx: dictionary %s not found: install the Debian package %s", path, modelPackage), ErrMissingModel}
		}
		return nil, fmt.Errorf("pocketsphinx: dictionary: %w", err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		head, _, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";;") {
			continue
		}
		if i := strings.IndexByte(head, '('); i > 0 {
			head = head[:i]
		}
		if need[head] {
			out[head] = append(out[head], line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("pocketsphinx: dictionary %s: %w", path, err)
	}
	return out, nil
}
