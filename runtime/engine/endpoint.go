package engine

import (
	"strings"
	"time"
	"unicode"
)

// endpointRanged reports whether the caller's words choose the silence
// that ends their turn (Config.EndpointingMin and EndpointingMax).
func (c *conductor) endpointRanged() bool { return c.cfg.EndpointingMax > 0 }

// endpointFor is the silence that ends the caller's turn, as their words
// so far call for it: the words of the utterance that just ended, if the
// recogniser has given them.
func (c *conductor) endpointFor() time.Duration {
	if !c.chat.heard.wordsSinceSpeech {
		return c.cfg.Endpointing
	}
	return c.cfg.EndpointFor(c.chat.heard.words(), c.agent.Phrases)
}

// EndpointFor is the silence that ends a caller's turn whose words are text,
// for an agent that knows phrases: with EndpointingMin and EndpointingMax
// set, the shorter after a complete request, the longer after words that
// leave it open, Endpointing otherwise; Endpointing when they are not set.
// Call it on a Config with its defaults filled in (as NewCore has it).
func (c Config) EndpointFor(text string, phrases []string) time.Duration {
	if c.EndpointingMax <= 0 {
		return c.Endpointing
	}
	switch judgeWords(text, phrases) {
	case wordsComplete:
		return c.EndpointingMin
	case wordsOpen:
		return c.EndpointingMax
	}
	return c.Endpointing
}

// wordsVerdict is what a turn's words say about whether it is over.
type wordsVerdict int

const (
	wordsUndecided wordsVerdict = iota
	// wordsComplete: a request as callers make it (one of the agent's
	// phrases) or a sentence the recogniser ended.
	wordsComplete
	// wordsOpen: the words end where speakers go on ("and", "um").
	wordsOpen
)

// openEnds are last words after which a speaker who pauses is not done: a
// conjunction, a filler, a word that needs the next one.
var openEnds = map[string]bool{
	"and": true, "or": true, "but": true, "so": true, "because": true, "then": true, "also": true,
	"um": true, "uh": true, "er": true, "erm": true, "hmm": true, "like": true, "well": true,
	"the": true, "a": true, "an": true, "to": true, "for": true, "of": true, "with": true, "at": true,
	"my": true, "is": true, "it's": true, "i'm": true, "i": true,
}

// judgeWords tells whether text, the caller's words so far, is a
// complete request, one left open, or neither.
func judgeWords(text string, phrases []string) wordsVerdict {
	norm := normalizeWords(text)
	if norm == "" {
		return wordsUndecided
	}
	words := strings.Fields(norm)
	if openEnds[words[len(words)-1]] {
		return wordsOpen
	}
	for _, p := range phrases {
		if normalizeWords(p) == norm {
			return wordsComplete
		}
	}
	trimmed := strings.TrimRightFunc(text, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`"')]`, r) })
	if strings.HasSuffix(trimmed, "...") || strings.HasSuffix(trimmed, "…") {
		return wordsOpen // the recogniser heard the voice trail off
	}
	if n := len(trimmed); n > 0 && strings.ContainsRune(".?!", rune(trimmed[n-1])) {
		return wordsComplete
	}
	return wordsUndecided
}

// normalizeWords lower-cases text and keeps only its words, apostrophes
// within them included, separated by single spaces.
func normalizeWords(text string) string {
	var b strings.Builder
	for _, w := range strings.Fields(strings.ToLower(text)) {
		w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if w == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}
