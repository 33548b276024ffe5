package tts

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// chunk pushes the deltas and returns the phrases Push gave and what Flush
// gave.
func chunk(c *Chunker, deltas ...string) (pushed []string, flushed string) {
	for _, d := range deltas {
		pushed = append(pushed, c.Push(d)...)
	}
	return pushed, c.Flush()
}

var chunkerCases = []struct {
	name, text string
	pushed     []string
	flushed    string
}{
	{"sentences", "Hello there. How are you? I'm fine!",
		[]string{"Hello there.", "How are you?"}, "I'm fine!"},
	{"abbreviations and numbers",
		"Mr. Smith went to Washington. He arrived at 7.30 and paid 3.5 dollars, e.g. cash etc. Then left. Bye.",
		[]string{"Mr. Smith went to Washington.", "He arrived at 7.30 and paid 3.5 dollars, e.g. cash etc. Then left."}, "Bye."},
	{"i.e. and Dr.", "That is, i.e. the one Dr. Who liked. Done.",
		[]string{"That is, i.e. the one Dr. Who liked."}, "Done."},
	{"initials", "J. R. R. Tolkien wrote books. Yes.",
		[]string{"J. R. R. Tolkien wrote books."}, "Yes."},
	{"early cut at a comma", "Sure, let me check that for you, one moment. Okay, fine, good.",
		[]string{"Sure, let me check that for you,", "one moment."}, "Okay, fine, good."},
	{"early cut at exactly four words", "Well, I think so, yes.",
		[]string{"Well, I think so,"}, "yes."},
	{"early cut at a colon, not in a time", "Meet at 10:30 tomorrow morning: bring coffee.",
		[]string{"Meet at 10:30 tomorrow morning:"}, "bring coffee."},
	{"early cut at a semicolon, not in a number", "It costs 1,000 dollars; really. Fine.",
		[]string{"It costs 1,000 dollars;", "really."}, "Fine."},
	{"early cut at a dash set off by spaces", "Right, one moment please — let me look. Good.",
		[]string{"Right, one moment please —", "let me look."}, "Good."},
	{"no early cut at a dash inside words", "A well-known place for 7-9 people, yes. Good.",
		[]string{"A well-known place for 7-9 people,", "yes."}, "Good."},
	{"no early cut inside a list", "We have margherita, pepperoni, veggie and more, all fresh. Good.",
		[]string{"We have margherita, pepperoni, veggie and more,", "all fresh."}, "Good."},
	{"no early cut after the first phrase", "Yes. Sure, let me check that for you, ok.",
		[]string{"Yes."}, "Sure, let me check that for you, ok."},
	{"ellipses", "Hmm… let me see. Wait... what?",
		[]string{"Hmm…", "let me see.", "Wait..."}, "what?"},
	{"closing quotes", `She said "Hi." Then (quietly!) she left.`,
		[]string{`She said "Hi."`, "Then (quietly!)"}, "she left."},
	{"punctuation joins the next phrase", "... Hello there. ! ? Bye now.",
		[]string{"... Hello there."}, "! ? Bye now."},
	{"whitespace", "  \n First line.\n\nSecond   line.\t ",
		[]string{"First line.", "Second   line."}, ""},
	{"CJK", "你好。今天天气很好！我们走吧？",
		[]string{"你好。", "今天天气很好！"}, "我们走吧？"},
	{"CJK closing bracket", "他说「好。」然后走了。",
		[]string{"他说「好。」"}, "然后走了。"},
	{"empty", "", nil, ""},
	{"blank", " \n\t ", nil, ""},
	{"no punctuation", "just some words without an end",
		nil, "just some words without an end"},
}

func TestChunker(t *testing.T) {
	for _, tc := range chunkerCases {
		var c Chunker
		pushed, flushed := chunk(&c, tc.text)
		if !reflect.DeepEqual(pushed, tc.pushed) || flushed != tc.flushed {
			t.Errorf("%s:\n got %q + %q\nwant %q + %q", tc.name, pushed, flushed, tc.pushed, tc.flushed)
		}
	}
}

// randomSplit cuts s into pieces of 0 to 7 bytes, even inside a rune.
func randomSplit(rng *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(rng.IntN(8), len(s))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func TestChunkerSplitIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var all []string
	for _, tc := range chunkerCases {
		all = append(all, tc.text)
	}
	texts := append(all, strings.Join(all, " "), strings.Join(all, ""))
	for _, text := range texts {
		var c Chunker
		wantPushed, wantFlushed := chunk(&c, text)
		want := append(wantPushed, wantFlushed)
		for range 200 {
			deltas := randomSplit(rng, text)
			pushed, flushed := chunk(&c, deltas...)
			if got := append(pushed, flushed); !reflect.DeepEqual(got, want) {
				t.Fatalf("%q split as %q:\n got %q\nwant %q", text, deltas, got, want)
			}
		}
		one := make([]string, 0, len(text))
		for _, r := range text {
			one = append(one, string(r))
		}
		if pushed, flushed := chunk(&c, one...); !reflect.DeepEqual(append(pushed, flushed), want) {
			t.Errorf("%q rune by rune: %q", text, append(pushed, flushed))
		}
	}
}

func TestChunkerKeepsWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := []string{
		"Hello", "world", "Mr.", "Dr.", "e.g.", "i.e.", "etc.", "3.5", "7.30", "10:30", "1,000",
		"yes.", "no!", "why?", "well,", "so;", "thus:", "wait...", "hmm…", `"quoted."`, "(aside.)",
		"a", "b.", "Z.", "...", "!", "—", "über.", "naïve,",
	}
	spaces := []string{" ", " ", " ", "  ", "\n", "\t "}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(vocab[rng.IntN(len(vocab))])
			b.WriteString(spaces[rng.IntN(len(spaces))])
		}
		text := b.String()
		var c Chunker
		c.MinFirstPhraseWords = rng.IntN(6) - 1
		pushed, flushed := chunk(&c, randomSplit(rng, text)...)
		for _, p := range pushed {
			if p == "" || p != strings.TrimSpace(p) {
				t.Fatalf("%q: phrase %q is blank or untrimmed", text, p)
			}
			if strings.IndexFunc(p, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0 {
				t.Fatalf("%q: phrase %q has nothing to say", text, p)
			}
		}
		got := strings.Fields(strings.Join(append(pushed, flushed), " "))
		if want := strings.Fields(text); !reflect.DeepEqual(got, want) && len(want)+len(got) > 0 {
			t.Fatalf("%q:\nphrases %q\n  words %q\n   want %q", text, append(pushed, flushed), got, want)
		}
	}
}

func TestChunkerCJKKeepsText(t *testing.T) {
	text := "我们明天见。好的！真的吗？「是的。」再见"
	var c Chunker
	pushed, flushed := chunk(&c, text)
	if got := strings.Join(append(pushed, flushed), ""); got != text {
		t.Errorf("phrases %q do not rebuild %q", append(pushed, flushed), text)
	}
	if len(pushed) != 4 {
		t.Errorf("phrases %q, want four sentences pushed", pushed)
	}
}

func TestChunkerMinFirstPhraseWords(t *testing.T) {
	text := "Yes, of course, I can do that, no problem at all."
	for _, tc := range []struct {
		min  int
		want []string
	}{
		{0, []string{"Yes, of course, I can do that,", "no problem at all."}},
		{1, []string{"Yes,", "of course, I can do that, no problem at all."}},
		{3, []string{"Yes, of course,", "I can do that, no problem at all."}},
		{-1, []string{"Yes, of course, I can do that, no problem at all."}},
	} {
		c := Chunker{MinFirstPhraseWords: tc.min}
		pushed, flushed := chunk(&c, text)
		if got := append(pushed, flushed); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("min %d: %q, want %q", tc.min, got, tc.want)
		}
	}
}

func TestChunkerFlushResets(t *testing.T) {
	var c Chunker
	for turn := range 2 {
		pushed, flushed := chunk(&c, "Right, so here we go, first. Then, the rest, of it")
		want := []string{"Right, so here we go,", "first."}
		if !reflect.DeepEqual(pushed, want) || flushed != "Then, the rest, of it" {
			t.Errorf("turn %d: %q + %q", turn, pushed, flushed)
		}
	}
	if c.Flush() != "" {
		t.Error("second Flush returned text")
	}
}

func TestChunkerStreaming(t *testing.T) {
	// A phrase is released as soon as the text after its end arrives.
	var c Chunker
	steps := []struct {
		delta string
		want  []string
	}{
		{"Hello", nil},
		{" there.", nil},
		{" ", []string{"Hello there."}},
		{"It is 3.", nil},
		{"5 now. ", []string{"It is 3.5 now."}},
		{"Dr.", nil},
		{" No", nil},
	}
	for _, s := range steps {
		if got := c.Push(s.delta); !reflect.DeepEqual(got, s.want) {
			t.Errorf("Push(%q) = %q, want %q", s.delta, got, s.want)
		}
	}
	if got := c.Flush(); got != "Dr. No" {
		t.Errorf("Flush() = %q", got)
	}
}

func TestChunkerInvalidUTF8(t *testing.T) {
	// Broken bytes from a provider must not stall the chunker nor be lost.
	text := "bad \xff bytes. fine\xe2 here. end\xe2"
	var c Chunker
	pushed, flushed := chunk(&c, text)
	want := []string{"bad \xff bytes.", "fine\xe2 here."}
	if !reflect.DeepEqual(pushed, want) || flushed != "end\xe2" {
		t.Errorf("got %q + %q, want %q + %q", pushed, flushed, want, "end\xe2")
	}
}

func ExampleChunker() {
	var c Chunker
	// Deltas as a model streams them.
	for _, delta := range []string{"Sure", ", let me", " look that", " up for you", ", one", " moment. Dr", ". Lee is free at 3", ".30 tomorrow.", " Shall I book it?"} {
		for _, phrase := range c.Push(delta) {
			fmt.Printf("speak %q\n", phrase)
		}
	}
	fmt.Printf("speak %q\n", c.Flush())
	// Output:
	// speak "Sure, let me look that up for you,"
	// speak "one moment."
	// speak "Dr. Lee is free at 3.30 tomorrow."
	// speak "Shall I book it?"
}
