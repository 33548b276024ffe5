package pocketsphinx

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/holdline/holdline/examples/booking"
)

func TestNormalise(t *testing.T) {
	for in, want := range map[string]string{
		"Book a table for two at 7:30, please!": "book a table for two at seven thirty please",
		"At 7:00.":                              "at seven o'clock",
		"At 7pm":                                "at seven pm",
		"at 7 p.m.":                             "at seven pm",
		"At 9:05 am":                            "at nine oh five am",
		"6:45":                                  "six forty-five",
		"It's for 12 people":                    "it's for twelve people",
		"the 21st":                              "the twenty-first",
		"on the 3rd":                            "on the third",
		"120 guests":                            "one hundred twenty guests",
		"1,500":                                 "one thousand five hundred",
		"call 5550123":                          "call five five five oh one two three",
		"Tom & Jerry":                           "tom and jerry",
		`"Yes," she said -- 'okay'.`:            "yes she said okay",
		"O'Clock, forty-five":                   "o'clock forty-five",
	} {
		if got := strings.Join(Normalise(in), " "); got != want {
			t.Errorf("Normalise(%q) = %q, want %q", in, got, want)
		}
	}
}

// needDictionary skips (or fails under HOLDLINE_REQUIRE_MODELS=1) a test
// that reads the pronouncing dictionary when it is not installed.
func needDictionary(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(DefaultDictionary); err != nil {
		absent(t, err)
	}
}

func TestGrammar(t *testing.T) {
	needDictionary(t)
	g, err := Grammar([]string{"Book a table for two at 7:30.", "Yes, please.", "Book a table for four at 8:30.", "My code is one two three four."})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(g)
	for _, want := range []string{
		"#JSGF V1.0;",
		"public <utterance> = <phrase> | <free>;",
		// Numbers generalised, and the two phrases are now one.
		"book a table for <count> at <hour> [<minutes>]\n\t| yes please\n\t| my code is <digit> <digit> <digit> <digit>\n\t| uh-huh\n\t| mhm",
		"<count> = one | two |",
		// Hours from the phrases' seven and eight, widened by one.
		"<hour> = six | seven | eight | nine;",
		"<digit> = oh | zero | one |",
		"<free> = <word>+;",
		"/1e-15/ yes\n",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("grammar lacks %q", want)
		}
	}
	if strings.Count(g, "book a table") != 1 {
		t.Error("duplicate phrase")
	}

	_, err = Grammar([]string{"A table for Aoife.", "Zzyzx road"})
	if !errors.Is(err, ErrUnknownWords) {
		t.Fatalf("got %v, want ErrUnknownWords", err)
	}
	for _, w := range []string{`"aoife" in "A table for Aoife."`, `"zzyzx"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
	if _, err := Grammar([]string{"...", ""}); err == nil {
		t.Error("a grammar without words")
	}
}

// TestBookingPhrases checks that every word of the booking agent's phrases
// is in the dictionary.
func TestBookingPhrases(t *testing.T) {
	needDictionary(t)
	c, err := compile(booking.Phrases, DefaultDictionary)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(booking.Phrases); n < 40 || n > 80 {
		t.Errorf("%d phrases", n)
	}
	for _, w := range []string{"o'clock", "forty-five", "pm", "anna", "reservation"} {
		if !slices.Contains(c.words, w) {
			t.Errorf("%q not in the vocabulary", w)
		}
	}
	t.Logf("%d phrases, %d words", len(booking.Phrases), len(c.words))
}

func TestGrammarWords(t *testing.T) {
	needDictionary(t)
	const jsgf = `#JSGF V1.0;
// a comment: with words
grammar test;
/* another
   comment */
public <answer> = /0.7/ yes [please] | /0.3/ no {tag} | <time>;
<time> = at (seven | eight) o'clock;`
	c, err := grammarWords(jsgf, DefaultDictionary)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"at", "eight", "no", "o'clock", "please", "seven", "yes"}
	if !slices.Equal(c.words, want) {
		t.Errorf("words %v, want %v", c.words, want)
	}
	if _, err := grammarWords(strings.Replace(jsgf, "please", "pleeease", 1), DefaultDictionary); !errors.Is(err, ErrUnknownWords) {
		t.Errorf("unknown word: %v", err)
	}
}
