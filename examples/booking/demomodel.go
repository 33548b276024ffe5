package booking

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
)

// NewDemoModel returns the offline demo model: a deterministic intent model
// over the chat context, streamed at a model's pace through scripted.LLM. It
// is not a language model; it exists so the example runs with no network
// and no key.
func NewDemoModel() *scripted.LLM {
	return scripted.NewLLMFunc(demoAnswer)
}

const (
	demoTTFB = 250 * time.Millisecond
	demoRate = 30 // tokens per second
)

func say(text string, calls ...scripted.Call) scripted.Response {
	return scripted.Response{TTFB: demoTTFB, TokensPerSecond: demoRate, Text: text, ToolCalls: calls}
}

// slots is what the caller has told us so far.
type slots struct {
	party int
	time  string
}

func demoAnswer(req llm.Request) scripted.Response {
	items := req.Context.Items
	lastUser := -1
	for i, it := range items {
		if it.Kind == llm.KindMessage && it.Role == llm.RoleUser {
			lastUser = i
		}
	}
	if lastUser < 0 {
		return say("Hello, thanks for calling Holdline Bistro. I can check availability and book a table. How can I help?")
	}
	s := gatherSlots(items)
	user := strings.ToLower(items[lastUser].Text)

	// Answer the newest tool results of this user turn first.
	var avail *Availability
	for _, it := range items[lastUser+1:] {
		if it.Kind != llm.KindToolResult {
			continue
		}
		if strings.Contains(it.Output, `"still running"`) {
			return say("I'm still working on that; one moment.")
		}
		switch it.Name {
		case "cancel_booking":
			if it.IsError {
				return say("Sorry, I couldn't cancel that: " + strings.TrimPrefix(it.Output, "error: "))
			}
			var c Cancellation
			if json.Unmarshal([]byte(it.Output), &c) == nil {
				return say(fmt.Sprintf("Done: your booking %s, a table for %s at %s, is cancelled.", c.Code, words(c.Party), c.Time))
			}
		case "book_table":
			if it.IsError {
				return say("Sorry, I couldn't complete the booking: " + strings.TrimPrefix(it.Output, "error: "))
			}
			var b Booking
			if json.Unmarshal([]byte(it.Output), &b) == nil {
				return say(fmt.Sprintf("You're booked: a table for %s at %s. Your confirmation code is %s.", words(b.Party), b.Time, b.Code))
			}
		case "check_availability":
			if it.IsError {
				return say("Sorry, I couldn't check that: " + strings.TrimPrefix(it.Output, "error: "))
			}
			var a Availability
			if json.Unmarshal([]byte(it.Output), &a) == nil {
				avail = &a
			}
		}
	}
	if avail != nil {
		switch {
		case !avail.Available && len(avail.Alternatives) > 0:
			return say(fmt.Sprintf("Sorry, %s is full for %s. I could do %s. Which would you like?", avail.Time, words(avail.Party), strings.Join(avail.Alternatives, " or ")))
		case !avail.Available:
			return say(fmt.Sprintf("Sorry, we're full for %s tonight.", words(avail.Party)))
		case wantsBooking(items, lastUser):
			return say(fmt.Sprintf("Good news, a table for %s at %s is free. Booking it now.", words(avail.Party), avail.Time),
				scripted.Call{Name: "book_table", Args: BookArgs{Party: avail.Party, Time: avail.Time}})
		default:
			return say(fmt.Sprintf("Yes, a table for %s at %s is free. Shall I book it?", words(avail.Party), avail.Time))
		}
	}

	made := lastBooking(items)
	switch {
	case matches(user, `\bcancel\b`) && made != nil:
		return say("Cancelling your booking.", scripted.Call{Name: "cancel_booking", Args: CancelArgs{Code: made.Code}})
	case matches(user, `\b(what did i book|what have i booked|my booking|what's booked|what is booked|booking details)\b`):
		if made == nil {
			return say("You haven't booked anything yet. How many people, and what time?")
		}
		return say(fmt.Sprintf("You have a table for %s at %s. Your confirmation code is %s.", words(made.Party), made.Time, made.Code))
	case askedToConfirm(items, lastUser) && matches(user, `^(no|nope|wrong|not)\b`):
		return say("Sorry about that. How many people, and what time?")
	case !askedToConfirm(items, lastUser) && unsure(items[lastUser]) && (parseParty(user) > 0 || parseTime(user) != ""):
		// Heard, but not surely: say it back before acting on it.
		return say(confirmText(s) + ", is that right?")
	}
	switch {
	case matches(user, `\b(never ?mind|cancel|wait|stop|no thanks|don't)\b`):
		return say("Okay, I won't book anything. Is there anything else?")
	case matches(user, `\b(thanks|thank you|bye|goodbye)\b`):
		return say("You're welcome. Goodbye!")
	case matches(user, `^(yes|yeah|yep|sure|please|ok|okay|right|correct)\b`) && askedToConfirm(items, lastUser) && s.party > 0 && s.time != "":
		return say("Thanks. Let me check that for you.",
			scripted.Call{Name: "check_availability", Args: AvailabilityArgs{Party: s.party, Time: s.time}})
	case matches(user, `^(yes|yeah|yep|sure|please|ok|okay)\b`) && askedToBook(items, lastUser) && s.party > 0 && s.time != "":
		return say("Booking it now.", scripted.Call{Name: "book_table", Args: BookArgs{Party: s.party, Time: s.time}})
	}
	if s.party == 0 && s.time == "" && !matches(user, `\b(book|table|reserv|availab|free)`) {
		return say("I can check availability and book tables. How many guests, and what time?")
	}
	switch {
	case s.party == 0:
		return say("Sure. For how many people?")
	case s.time == "":
		return say(fmt.Sprintf("A table for %s. What time would you like?", words(s.party)))
	}
	return say("Let me check that for you.",
		scripted.Call{Name: "check_availability", Args: AvailabilityArgs{Party: s.party, Time: s.time}})
}

// gatherSlots reads party and time from the caller's messages since the
// last completed booking; later mentions win.
func gatherSlots(items []llm.Item) slots {
	var s slots
	for _, it := range items {
		switch {
		case it.Kind == llm.KindToolResult && it.Name == "book_table" && !it.IsError:
			s = slots{}
		case it.Kind == llm.KindMessage && it.Role == llm.RoleUser:
			text := strings.ToLower(it.Text)
			if p := parseParty(text); p > 0 {
				s.party = p
			}
			if t := parseTime(text); t != "" {
				s.time = t
			}
		}
	}
	return s
}

// wantsBooking reports whether the caller asked to book (not just to ask).
func wantsBooking(items []llm.Item, lastUser int) bool {
	for i := lastUser; i >= 0; i-- {
		it := items[i]
		if it.Kind == llm.KindMessage && it.Role == llm.RoleUser {
			t := strings.ToLower(it.Text)
			if matches(t, `\b(book|reserve)\b`) {
				return true
			}
			if matches(t, `\b(availab|free|do you have)`) {
				return false
			}
		}
	}
	return false
}

// unsureBelow is the recogniser confidence under which the demo model
// says back what it heard before acting on it (llm.Item.Confidence; typed
// text has none and is taken as said).
const unsureBelow = 0.5

func unsure(it llm.Item) bool { return it.Confidence > 0 && it.Confidence < unsureBelow }

// confirmText says back the party and time heard: "Two people at 19:00".
func confirmText(s slots) string {
	switch {
	case s.party > 0 && s.time != "":
		return fmt.Sprintf("A table for %s at %s", words(s.party), s.time)
	case s.party > 0:
		return fmt.Sprintf("A table for %s", words(s.party))
	default:
		return "At " + s.time
	}
}

// askedToConfirm reports whether the agent's last message said back what
// it heard and asked whether it is right.
func askedToConfirm(items []llm.Item, lastUser int) bool {
	for i := lastUser - 1; i >= 0; i-- {
		it := items[i]
		if it.Kind == llm.KindMessage && it.Role == llm.RoleAssistant {
			return strings.HasSuffix(it.Text, "is that right?")
		}
	}
	return false
}

// lastBooking returns the booking made in this call, from book_table's
// results, unless it was cancelled since; nil if there is none.
func lastBooking(items []llm.Item) *Booking {
	var b *Booking
	for _, it := range items {
		if it.Kind != llm.KindToolResult || it.IsError || strings.Contains(it.Output, `"still running"`) {
			continue
		}
		switch it.Name {
		case "book_table":
			var x Booking
			if json.Unmarshal([]byte(it.Output), &x) == nil && x.Code != "" {
				b = &x
			}
		case "cancel_booking":
			b = nil
		}
	}
	return b
}

func askedToBook(items []llm.Item, lastUser int) bool {
	for i := lastUser - 1; i >= 0; i-- {
		it := items[i]
		if it.Kind == llm.KindMessage && it.Role == llm.RoleAssistant {
			return strings.Contains(it.Text, "Shall I book")
		}
	}
	return false
}

func matches(s, pattern string) bool { return regexp.MustCompile(pattern).MatchString(s) }

var numberWords = map[string]int{
	"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
	"nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple": 2, "couple": 2,
}

func number(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return numberWords[s]
}

const numberPattern = `(\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)`

var (
	partyRe = []*regexp.Regexp{
		regexp.MustCompile(`\b(?:for|party of|table of)\s+` + numberPattern + `\b(?:\s*(?:people|persons|guests|of us))?(?:\s|$|[.,!?])`),
		regexp.MustCompile(`\b` + numberPattern + `\s+(?:people|persons|guests|of us)\b`),
	}
	clockRe = regexp.MustCompile(`\b(\d{1,2})[:.](\d{2})\s*(am|pm|a\.m\.|p\.m\.)?`)
	hourRe  = regexp.MustCompile(`\b(?:at|around|for)\s+(?:half past\s+)?` + numberPattern + `(?:\s+(thirty|fifteen|forty-five))?\s*(o'clock|am|pm|a\.m\.|p\.m\.)?(?:\s|$|[.,!?])`)
	ampmRe  = regexp.MustCompile(`\b` + numberPattern + `\s*(am|pm|a\.m\.|p\.m\.)`)
)

func parseParty(text string) int {
	for _, re := range partyRe {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			// "for seven o'clock" or "for 7pm" is a time, not a party.
			rest := text[strings.Index(text, m[0])+len(m[0]):]
			if strings.HasPrefix(strings.TrimSpace(rest), "o'clock") || strings.Contains(m[0], "pm") {
				continue
			}
			if n := number(m[1]); n > 0 {
				return n
			}
		}
	}
	return 0
}

func parseTime(text string) string {
	if m := clockRe.FindStringSubmatch(text); m != nil {
		h, _ := strconv.Atoi(m[1])
		min, _ := strconv.Atoi(m[2])
		return clock(h, min, m[3])
	}
	if m := ampmRe.FindStringSubmatch(text); m != nil {
		return clock(number(m[1]), 0, m[2])
	}
	for _, m := range hourRe.FindAllStringSubmatch(text, -1) {
		// "for two" is a party; only "at", "around" or an explicit
		// o'clock/am/pm make "for N" a time.
		if strings.HasPrefix(strings.TrimSpace(m[0]), "for") && m[3] == "" {
			continue
		}
		min := 0
		switch {
		case strings.Contains(m[0], "half past"), m[2] == "thirty":
			min = 30
		case m[2] == "fifteen":
			min = 15
		case m[2] == "forty-five":
			min = 45
		}
		return clock(number(m[1]), min, m[3])
	}
	return ""
}

// clock renders an hour the way a restaurant hears it: without am/pm, 1–11
// mean the afternoon or evening.
func clock(h, min int, suffix string) string {
	suffix = strings.ReplaceAll(suffix, ".", "")
	if suffix == "o'clock" {
		suffix = ""
	}
	switch {
	case suffix == "pm" && h < 12:
		h += 12
	case suffix == "am" && h == 12:
		h = 0
	case suffix == "" && h >= 1 && h <= 11:
		h += 12
	}
	if h > 23 || min > 59 {
		return ""
	}
	return fmt.Sprintf("%02d:%02d", h, min)
}

func words(n int) string {
	for w, v := range numberWords {
		if v == n && !strings.Contains(w, "couple") {
			return w
		}
	}
	return strconv.Itoa(n)
}

// parseClock reads HH:MM.
func parseClock(s string) (time.Duration, bool) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, false
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, true
}
