package pizza

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
)

// NewModel returns the shop's offline model: a few rules over the chat
// context, streamed at a model's pace. It is what a developer writes
// before plugging in a real model, and what the tests run.
func NewModel() llm.Model { return scripted.NewLLMFunc(answer) }

func say(text string, calls ...scripted.Call) scripted.Response {
	return scripted.Response{TTFB: 200 * time.Millisecond, TokensPerSecond: 40, Text: text, ToolCalls: calls}
}

var (
	numberWords = map[string]int{"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "1": 1, "2": 2, "3": 3, "4": 4}
	orderRE     = regexp.MustCompile(`\b(a|an|one|two|three|four|[1-4])?\s*(margherita|margarita|pepperoni|veggie)s?\b`)
)

// answer is the model: what to say (and call) given the conversation.
func answer(req llm.Request) scripted.Response {
	items := req.Context.Items
	last := -1
	for i, it := range items {
		if it.Kind == llm.KindMessage && it.Role == llm.RoleUser {
			last = i
		}
	}
	if last < 0 {
		return say("Hello, Holdline Pizza. What can I get you?")
	}
	// The newest results of this turn first.
	for _, it := range items[last+1:] {
		if it.Kind != llm.KindToolResult || llm.IsProvisional(it.Output) {
			continue
		}
		if it.IsError {
			if it.Name == "transfer_to_human" {
				return say("Sorry, I can't put you through to a person on this line. I can take your order, though.")
			}
			return say("Sorry, that didn't work: " + strings.TrimPrefix(it.Output, "error: "))
		}
		switch it.Name {
		case "menu":
			var menu []Item
			if json.Unmarshal([]byte(it.Output), &menu) == nil {
				names := make([]string, len(menu))
				for i, m := range menu {
					names[i] = m.Name
				}
				return say("We have " + strings.Join(names, ", ") + ". Which would you like?")
			}
		case "place_order":
			var o Order
			if json.Unmarshal([]byte(it.Output), &o) == nil {
				return say(fmt.Sprintf("Your order %s is in: %d %s, %.2f euros. Anything else?", o.ID, o.Quantity, o.Pizza, o.Total))
			}
		case "transfer_to_human":
			return say("")
		}
	}
	user := strings.ToLower(items[last].Text)
	pending, asked := askedToConfirm(items, last)
	switch {
	case strings.Contains(user, "menu") || strings.Contains(user, "what pizzas") || strings.Contains(user, "what do you have"):
		return say("Let me check the menu.", scripted.Call{Name: "menu"})
	case strings.Contains(user, "person") || strings.Contains(user, "human") || strings.Contains(user, "someone"):
		return say("Putting you through to the shop.", scripted.Call{Name: "transfer_to_human", Args: TransferArgs{Reason: "the caller asked for a person"}})
	case regexp.MustCompile(`\b(wait|cancel|no|stop)\b`).MatchString(user):
		return say("Okay, I won't place anything. What would you like?")
	case asked && regexp.MustCompile(`^(yes|yeah|yep|sure|please|ok|okay|correct)\b`).MatchString(user):
		return say("Placing your order now.", scripted.Call{Name: "place_order", Args: pending})
	case strings.Contains(user, "thank") || strings.Contains(user, "bye"):
		return say("Thanks for calling Holdline Pizza. Goodbye!", scripted.Call{Name: runtime.EndCallName, Args: map[string]string{"reason": "the caller said goodbye"}})
	}
	if o, ok := parseOrder(user); ok {
		price, _ := priceOf(o.Pizza)
		return say(fmt.Sprintf("%d %s, that's %.2f euros. Shall I place the order?", o.Quantity, o.Pizza, price*float64(o.Quantity)))
	}
	return say("I can tell you the menu or take an order. What would you like?")
}

// parseOrder reads "two pepperoni" from what the caller said.
func parseOrder(text string) (OrderArgs, bool) {
	m := orderRE.FindStringSubmatch(text)
	if m == nil {
		return OrderArgs{}, false
	}
	n := 1
	if m[1] != "" {
		n = numberWords[m[1]]
	}
	pizza := m[2]
	if pizza == "margarita" { // as a recogniser spells it
		pizza = "margherita"
	}
	return OrderArgs{Pizza: pizza, Quantity: n}, true
}

// askedToConfirm reports whether the agent's last message before the
// caller's latest turn asked to place an order, and which.
func askedToConfirm(items []llm.Item, last int) (OrderArgs, bool) {
	for i := last - 1; i >= 0; i-- {
		it := items[i]
		if it.Kind != llm.KindMessage || it.Role != llm.RoleAssistant {
			continue
		}
		if !strings.Contains(it.Text, "Shall I place the order?") {
			return OrderArgs{}, false
		}
		return parseOrder(strings.ToLower(it.Text))
	}
	return OrderArgs{}, false
}
