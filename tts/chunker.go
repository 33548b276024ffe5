package tts

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultMinFirstPhraseWords is the number of words the first phrase needs
// before a Chunker may end it at a comma, semicolon, colon or dash.
const DefaultMinFirstPhraseWords = 4

// Chunker cuts text streamed from a model into phrases that can be spoken
// on their own, so that synthesis starts before the model finishes.
//
// Phrases end at sentence ends: '.', '!', '?' or '…' (with any closing
// quotes and brackets) followed by whitespace, or the CJK '。', '！', '？'.
// A period after a common abbreviation (Mr., Dr., e.g., etc.) or an initial
// ends nothing, and one inside a number or time such as 3.5 or 7.30 is not
// followed by whitespace so ends nothing either. To shorten the time to
// first audio, the first phrase may also end at a comma, semicolon or colon
// followed by whitespace, or at a dash set off by spaces (" — ", " – ",
// " - "), once it has MinFirstPhraseWords words; not at a comma that ends a
// one-word item of a list ("margherita, pepperoni, veggie").
//
// A cut is only decided once the text after it has arrived, so the phrases
// are the same however the text is split into deltas. Phrases are trimmed,
// never blank, and hold a letter or digit: punctuation on its own joins the
// next phrase. Apart from a cut after a CJK terminator, every cut falls on
// whitespace, so the phrases hold exactly the words of the text.
//
// The zero value is ready to use. A Chunker is not safe for concurrent use.
type Chunker struct {
	// MinFirstPhraseWords is how many words the first phrase needs before
	// it may end at a comma, semicolon, colon or dash. 0 means
	// DefaultMinFirstPhraseWords; a negative value turns early cuts off.
	MinFirstPhraseWords int

	buf     []byte // text not yet emitted, from the start of a phrase
	scanned int    // bytes of buf known to hold no cut
	emitted bool   // a phrase was emitted since the last Flush
}

// Push adds a delta of text and returns the phrases it completed, if any.
func (c *Chunker) Push(delta string) []string {
	c.buf = append(c.buf, delta...)
	var out []string
	for {
		cut, ok := c.nextCut()
		if !ok {
			return out
		}
		phrase := string(bytes.TrimSpace(c.buf[:cut]))
		rest := bytes.TrimLeftFunc(c.buf[cut:], unicode.IsSpace)
		c.buf = c.buf[:copy(c.buf, rest)]
		c.scanned = 0
		out = append(out, phrase)
		c.emitted = true
	}
}

// Flush returns the rest of the text, trimmed, and readies the Chunker for
// a new text, whose first phrase may again be cut early.
func (c *Chunker) Flush() string {
	rest := string(bytes.TrimSpace(c.buf))
	c.buf = c.buf[:0]
	c.scanned = 0
	c.emitted = false
	return rest
}

// nextCut finds the end of the next phrase in c.buf. When it cannot tell
// yet, because the text that decides has not arrived, it remembers how far
// it got and reports false.
func (c *Chunker) nextCut() (int, bool) {
	b := c.buf
	i := c.scanned
	for i < len(b) {
		if !utf8.FullRune(b[i:]) {
			break
		}
		r, size := utf8.DecodeRune(b[i:])
		end := i + size
		switch {
		case isSentenceEnd(r), isCJKSentenceEnd(r):
			j, ok := skipClosing(b, end)
			if !ok {
				c.scanned = i
				return 0, false
			}
			if isCJKSentenceEnd(r) {
				if speakable(b[:j]) {
					return j, true
				}
			} else {
				next, _ := utf8.DecodeRune(b[j:])
				abbrev := r == '.' && j == end && isAbbreviation(b[:i])
				if unicode.IsSpace(next) && !abbrev && speakable(b[:j]) {
					return j, true
				}
			}
			i = j
		case isDash(r) && i > 0 && b[i-1] == ' ' && c.earlyCuts():
			// A dash set off by spaces ends a clause; one inside a word
			// ("well-known", "7-9") does not.
			if end == len(b) || !utf8.FullRune(b[end:]) {
				c.scanned = i
				return 0, false
			}
			next, _ := utf8.DecodeRune(b[end:])
			if unicode.IsSpace(next) && countWords(b[:i]) >= c.minWords() && speakable(b[:i]) {
				return end, true
			}
			i = end
		case (r == ',' || r == ';' || r == ':') && c.earlyCuts():
			if end == len(b) || !utf8.FullRune(b[end:]) {
				c.scanned = i
				return 0, false
			}
			next, _ := utf8.DecodeRune(b[end:])
			if unicode.IsSpace(next) && countWords(b[:end]) >= c.minWords() && speakable(b[:end]) && !(r == ',' && inList(b[:i])) {
				return end, true
			}
			i = end
		default:
			i = end
		}
	}
	c.scanned = i
	return 0, false
}

func (c *Chunker) earlyCuts() bool { return !c.emitted && c.MinFirstPhraseWords >= 0 }

func (c *Chunker) minWords() int {
	if c.MinFirstPhraseWords == 0 {
		return DefaultMinFirstPhraseWords
	}
	return c.MinFirstPhraseWords
}

// skipClosing returns the index after the run of sentence-end marks and
// closing quotes or brackets that starts at i, and whether the rune after
// the run has arrived.
func skipClosing(b []byte, i int) (int, bool) {
	for i < len(b) {
		if !utf8.FullRune(b[i:]) {
			return i, false
		}
		r, size := utf8.DecodeRune(b[i:])
		if !isSentenceEnd(r) && !isCJKSentenceEnd(r) && !isClosing(r) {
			return i, true
		}
		i += size
	}
	return i, false
}

// inList reports whether the comma after b ends a one-word item after an
// earlier comma ("margherita, pepperoni,"): a list goes on, and a voice
// reading half of it as a phrase of its own gets the intonation wrong.
func inList(b []byte) bool {
	prev := bytes.LastIndexByte(b, ',')
	return prev >= 0 && countWords(b[prev+1:]) == 1
}

func isDash(r rune) bool { return r == '—' || r == '–' || r == '-' }

func isSentenceEnd(r rune) bool { return r == '.' || r == '!' || r == '?' || r == '…' }

func isCJKSentenceEnd(r rune) bool { return r == '。' || r == '！' || r == '？' }

func isClosing(r rune) bool {
	switch r {
	case '"', '\'', ')', ']', '}', '”', '’', '»', '」', '』', '）', '】':
		return true
	}
	return false
}

// abbreviations are words after which a period rarely ends a sentence,
// without the final period and compared case-insensitively.
var abbreviations = []string{
	"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs",
	"etc", "e.g", "i.e", "cf", "approx",
}

// isAbbreviation reports whether the word at the end of b, where a period
// follows, is an abbreviation or an initial.
func isAbbreviation(b []byte) bool {
	start := bytes.LastIndexFunc(b, unicode.IsSpace) + 1
	word := strings.TrimLeft(string(b[start:]), `"'([{“‘«`)
	if n := utf8.RuneCountInString(word); n == 1 {
		r, _ := utf8.DecodeRuneInString(word)
		return unicode.IsLetter(r)
	}
	for _, a := range abbreviations {
		if strings.EqualFold(word, a) {
			return true
		}
	}
	return false
}

func speakable(b []byte) bool {
	return bytes.IndexFunc(b, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

func countWords(b []byte) int {
	n := 0
	inWord := false
	for _, r := range string(b) {
		sp := unicode.IsSpace(r)
		if !sp && !inWord {
			n++
		}
		inWord = !sp
	}
	return n
}
