package pocketsphinx

import (
	"regexp"
	"strconv"
	"strings"
)

// Normalise turns a written phrase into the words a caller speaks, as the
// pronouncing dictionary spells them: lower case, punctuation removed,
// numbers, times and ordinals spelled out ("7:30" -> "seven thirty",
// "7pm" -> "seven pm", "7:00" -> "seven o'clock", "21st" -> "twenty-first",
// "&" -> "and"). Apostrophes and hyphens inside words stay ("o'clock",
// "forty-five"); Grammar splits a hyphenated word the dictionary lacks into
// its parts.
func Normalise(phrase string) []string {
	s := strings.ToLower(phrase)
	s = strings.NewReplacer("&", " and ", "@", " at ", "%", " percent ", "+", " plus ").Replace(s)
	// "p.m." and "a.m." before punctuation goes: the dots are part of them.
	s = ampmDots.ReplaceAllString(s, "${1}m")
	s = clockTime.ReplaceAllStringFunc(s, func(m string) string {
		g := clockTime.FindStringSubmatch(m)
		h, _ := strconv.Atoi(g[1])
		min, _ := strconv.Atoi(g[2])
		out := spellNumber(h)
		switch {
		case min == 0 && g[3] == "":
			out += " o'clock"
		case min == 0:
		case min < 10:
			out += " oh " + spellNumber(min)
		default:
			out += " " + spellNumber(min)
		}
		if g[3] != "" {
			out += " " + g[3]
		}
		return " " + out + " "
	})
	s = ordinal.ReplaceAllStringFunc(s, func(m string) string {
		n, err := strconv.Atoi(ordinal.FindStringSubmatch(m)[1])
		if err != nil || n > maxSpelled {
			return m
		}
		return " " + spellOrdinal(n) + " "
	})
	s = number.ReplaceAllStringFunc(s, func(m string) string {
		n, err := strconv.Atoi(strings.ReplaceAll(m, ",", ""))
		if err != nil || n > maxSpelled {
			return " " + spellDigits(strings.ReplaceAll(m, ",", "")) + " "
		}
		return " " + spellNumber(n) + " "
	})
	var words []string
	for _, w := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r == '\'' || r == '-' || r >= 0x80)
	}) {
		// Apostrophes and hyphens only inside a word: quotes and dashes
		// around it are punctuation.
		if w = strings.Trim(w, "'-"); w != "" {
			words = append(words, w)
		}
	}
	return words
}

var (
	ampmDots  = regexp.MustCompile(`\b([ap])\.m\.?`)
	clockTime = regexp.MustCompile(`\b(\d{1,2})[:.](\d{2})(?:\s*(am|pm))?\b`)
	ordinal   = regexp.MustCompile(`\b(\d+)(?:st|nd|rd|th)\b`)
	number    = regexp.MustCompile(`\d+(?:,\d{3})*`)
)

// maxSpelled is the largest number spelled as a number; longer digit runs
// (phone numbers, codes) are read digit by digit.
const maxSpelled = 999_999

var (
	ones = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
		"ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"}
	tens = []string{"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"}
)

// spellNumber spells 0 <= n <= maxSpelled the way it is said: 45 is
// "forty-five", 120 "one hundred twenty".
func spellNumber(n int) string {
	switch {
	case n < 20:
		return ones[n]
	case n < 100:
		if n%10 == 0 {
			return tens[n/10]
		}
		return tens[n/10] + "-" + ones[n%10]
	case n < 1000:
		s := ones[n/100] + " hundred"
		if n%100 != 0 {
			s += " " + spellNumber(n%100)
		}
		return s
	}
	s := spellNumber(n/1000) + " thousand"
	if n%1000 != 0 {
		s += " " + spellNumber(n%1000)
	}
	return s
}

// spellDigits reads a run of digits one by one, 0 as "oh" as in phone
// numbers.
func spellDigits(d string) string {
	var b strings.Builder
	for i, c := range d {
		if c < '0' || c > '9' {
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if c == '0' {
			b.WriteString("oh")
		} else {
			b.WriteString(ones[c-'0'])
		}
	}
	return b.String()
}

var ordinalWords = map[string]string{
	"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
	"nine": "ninth", "twelve": "twelfth",
}

// spellOrdinal spells the ordinal of n: 21 is "twenty-first".
func spellOrdinal(n int) string {
	s := spellNumber(n)
	i := strings.LastIndexAny(s, " -") + 1
	last := s[i:]
	switch {
	case ordinalWords[last] != "":
		last = ordinalWords[last]
	case strings.HasSuffix(last, "y"):
		last = strings.TrimSuffix(last, "y") + "ieth"
	default:
		last += "th"
	}
	return s[:i] + last
}
