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
	for _, w := range slices.Concat(countWords, minuteWords, digitWords) {
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
	for _, w := range numberClasses(norm).words() {
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
	cl := numberClasses(phrases)
	var alts []string
	seen := map[string]bool{}
	vocab := map[string]bool{}
	for _, w := range cl.words() {
		vocab[w] = true
	}
	for _, p := range phrases {
		var toks []string
		for _, run := range numberRuns(p) {
			for _, w := range run.words {
				vocab[w] = true
			}
			switch run.kind {
			case plainWords:
				toks = append(toks, run.words...)
			case timeSlot:
				// "seven", "seven thirty", "six forty-five".
				toks = append(toks, "<hour> [<minutes>]")
			case countSlot:
				toks = append(toks, "<count>")
			default:
				// Longer runs are numbers read one by one.
				for range run.words {
					toks = append(toks, "<digit>")
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
	for _, c := range []struct {
		name  string
		words []string
	}{{"count", cl.counts}, {"hour", cl.hours}, {"minutes", cl.minutes}, {"digit", cl.digits}} {
		if len(c.words) > 0 {
			b.WriteString("<" + c.name + "> = " + strings.Join(c.words, " | ") + ";\n\n")
		}
	}
	b.WriteString("<free> = <word>+;\n\n")
	w := strconv.FormatFloat(freeWordWeight, 'g', -1, 64)
	b.WriteString("<word> =\n\t  /" + w + "/ ")
	b.WriteString(strings.Join(words, "\n\t| /"+w+"/ "))
	b.WriteString(";\n")
	return b.String()
}

// Number words. A run of them in a phrase becomes a slot of the kind its
// place says: a time (<hour>, then perhaps <minutes>) after "at", "around"
// or "past", before "o'clock", "am" or "pm", or when it is an hour and its
// minutes; a run of three or more is digits read one by one (<digit>); any
// other is a count (<count>), such as a party size. Each class takes only
// the words that can be in its place, because most confusions on
// synthetic and telephone audio are between number words ("seven" heard
// as "one" or "eleven", "six" as "three", "eight" as "two"), and a class
// that does not offer the wrong one cannot pick it:
//
//   - <hour> takes the hours the phrases give as times, and every hour
//     between, widened by one either side: phrases that book dinner at six
//     to nine take five to ten, not "at one".
//   - <minutes> takes the quarter hours and the minutes the phrases use.
//   - <count> takes one to twelve, and any count the phrases use.
//   - <digit> takes zero to nine and "oh".
var (
	countWords   = []string{"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	minuteWords  = []string{"fifteen", "thirty", "forty-five"}
	digitWords   = []string{"oh", "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
	otherNumbers = []string{"twenty", "forty", "fifty", "thirteen", "fourteen", "sixteen", "seventeen", "eighteen", "nineteen",
		"sixty", "seventy", "eighty", "ninety", "hundred", "thousand"}

	// timeBefore and timeAfter are the words that make a number next to
	// them a time.
	timeBefore = []string{"at", "around", "past", "about", "until", "before", "after"}
	timeAfter  = []string{"o'clock", "am", "pm"}
)

// isNumberWord reports whether w is a number word; "oh" is one only
// among other number words (see numberRuns).
func isNumberWord(w string) bool {
	if slices.Contains(countWords, w) || slices.Contains(minuteWords, w) || slices.Contains(digitWords, w) && w != "oh" {
		return true
	}
	if slices.Contains(otherNumbers, w) {
		return true
	}
	first, second, ok := strings.Cut(w, "-")
	return ok && slices.Contains(otherNumbers, first) && slices.Contains(countWords, second)
}

// slotKind is what a run of a phrase is.
type slotKind uint8

const (
	plainWords slotKind = iota // not numbers
	timeSlot
	countSlot
	digitSlot
)

// run is a stretch of a phrase: number words, or other words.
type run struct {
	words []string
	kind  slotKind
}

// numberRuns splits a phrase into runs of number words and of other words,
// and tells the number runs' kinds.
func numberRuns(p []string) []run {
	var out []run
	num := func(i int) bool {
		// "oh" is a number between numbers: "one oh five".
		return isNumberWord(p[i]) || p[i] == "oh" && i > 0 && i+1 < len(p) && isNumberWord(p[i-1]) && isNumberWord(p[i+1])
	}
	for i := 0; i < len(p); {
		isNum := num(i)
		j := i + 1
		for j < len(p) && num(j) == isNum {
			j++
		}
		r := run{words: p[i:j]}
		switch {
		case !isNum:
		case j-i >= 3:
			r.kind = digitSlot
		case j-i == 2 || i > 0 && slices.Contains(timeBefore, p[i-1]) || j < len(p) && slices.Contains(timeAfter, p[j]):
			r.kind = timeSlot
		default:
			r.kind = countSlot
		}
		out = append(out, r)
		i = j
	}
	return out
}

// classes are the words of the number classes; a class no phrase uses is
// empty.
type classes struct {
	counts, hours, minutes, digits []string
}

func (c classes) words() []string {
	return slices.Concat(c.counts, c.hours, c.minutes, c.digits)
}

// numberClasses returns the words of the number classes the phrases use.
func numberClasses(phrases [][]string) classes {
	var c classes
	var counts, minutes, digits []string
	lo, hi := 0, 0 // the hours the phrases give, as indexes in countWords
	for _, p := range phrases {
		for _, r := range numberRuns(p) {
			switch r.kind {
			case countSlot:
				counts = append(counts, r.words...)
			case digitSlot:
				digits = append(digits, r.words...)
			case timeSlot:
				h := slices.Index(countWords, r.words[0])
				if h < 0 {
					// Not an hour: "at twenty" is taken as it is.
					counts = append(counts, r.words[0])
				} else if lo == 0 {
					lo, hi = h+1, h+1
				} else {
					lo, hi = min(lo, h+1), max(hi, h+1)
				}
				minutes = append(minutes, r.words[1:]...)
			}
		}
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
	if len(counts) > 0 {
		c.counts = add(countWords, counts)
	}
	if lo > 0 {
		c.hours = countWords[max(lo-2, 0):min(hi+1, len(countWords))]
		c.minutes = add(minuteWords, minutes)
	}
	if len(digits) > 0 {
		c.digits = add(digitWords, digits)
	}
	return c
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

// Confidence of a final transcript, from the one thing the grammar tells
// for certain: whether the words are one of the phrases (numbers aside) or
// came out of the free word loop. The free loop is where the decoder goes
// when no phrase fits the audio, so words from it, and numbers among
// them, are much less often right (TestUnlistedPhrases: about 70% of
// words against 97% or more for phrases). pocketsphinx 5prealpha's word
// posteriors would say more, but computing them on the lattices of the
// wide beams decoderArgs needs takes far longer than decoding.
const (
	phraseConfidence = 0.9
	freeConfidence   = 0.3
)

// phraseShapes returns the phrases' shapes (see shape), for confidence;
// nil if there are none (a grammar of one's own).
func phraseShapes(phrases []string) map[string]bool {
	if len(phrases) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, p := range slices.Concat(phrases, Backchannels) {
		out[shape(Normalise(p))] = true
	}
	return out
}

// shape is a phrase with each run of number words as "#", hyphenated words
// split: the phrases that one grammar alternative takes share a shape.
func shape(words []string) string {
	var out []string
	for _, w := range words {
		for part := range strings.SplitSeq(w, "-") {
			if isNumberWord(part) || part == "oh" && len(out) > 0 && out[len(out)-1] == "#" {
				part = "#"
			}
			if part == "#" && len(out) > 0 && out[len(out)-1] == "#" {
				continue
			}
			out = append(out, part)
		}
	}
	return strings.Join(out, " ")
}

// confidence is the confidence of a final transcript of text, given the
// phrases' shapes: 0 (unknown) without phrases.
func confidence(shapes map[string]bool, text string) float64 {
	switch {
	case shapes == nil || text == "":
		return 0
	case shapes[shape(strings.Fields(text))]:
		return phraseConfidence
	default:
		return freeConfidence
	}
}
