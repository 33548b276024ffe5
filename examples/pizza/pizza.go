// Package pizza is a pizza shop's phone agent, written as a Go developer
// writes their own, with Holdline's public API only: a read tool (menu), a
// mutation (place_order), a transfer to a person (transfer_to_human), and
// a hand-written offline model, so that it runs with no key and no
// network. Copy it to start an agent of your own: cmd/holdline runs it as
// "pizza", and a main of your own runs it with
//
//	cli.Main(map[string]runtime.AgentFunc{"pizza": pizza.New})
//
// The package builds without cgo; its scenarios (scenarios/*.yaml) name
// the agent itself, so they test this code, not a copy of it.
package pizza

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/tools"
)

// Instructions are the agent's system prompt, for a real model.
const Instructions = `You take pizza orders on the phone for Holdline Pizza.
Tell callers what is on the menu (the menu tool), repeat the order back and
ask before placing it (place_order), and hand the caller to a person when
they ask for one (transfer_to_human). Keep answers short: they are spoken.`

// Menu is what the shop sells, and for how much (euros).
var Menu = []Item{
	{Name: "margherita", Price: 9.5},
	{Name: "pepperoni", Price: 11},
	{Name: "veggie", Price: 10.5},
}

// Item is one pizza on the menu.
type Item struct {
	Name  string  `json:"name"`
	Price float64 `json:"price"`
}

// MenuArgs are the menu tool's arguments: none.
type MenuArgs struct{}

// OrderArgs are place_order's arguments.
type OrderArgs struct {
	Pizza    string `json:"pizza" jsonschema:"the pizza's name, as on the menu"`
	Quantity int    `json:"quantity" jsonschema:"how many, at least 1"`
}

// Order is a placed order: place_order's result.
type Order struct {
	ID       string  `json:"order_id"`
	Pizza    string  `json:"pizza"`
	Quantity int     `json:"quantity"`
	Total    float64 `json:"total"`
}

// TransferArgs are transfer_to_human's arguments.
type TransferArgs struct {
	Reason string `json:"reason,omitempty" jsonschema:"what the caller wants, for the person who takes the call"`
}

// Staff is where transfer_to_human sends the caller.
const Staff = "sip:staff@pizza.example"

// Kitchen takes the orders. Its zero value is not usable: NewKitchen.
type Kitchen struct {
	mu     sync.Mutex
	orders []Order
	// cook is how long placing an order takes.
	cook time.Duration
}

// NewKitchen returns a kitchen that takes cook to accept an order.
func NewKitchen(cook time.Duration) *Kitchen { return &Kitchen{cook: cook} }

// Orders are the orders placed so far.
func (k *Kitchen) Orders() []Order {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Order(nil), k.orders...)
}

func (k *Kitchen) place(ctx context.Context, args OrderArgs) (Order, error) {
	price, ok := priceOf(args.Pizza)
	if !ok {
		return Order{}, fmt.Errorf("there is no %q on the menu", args.Pizza)
	}
	if args.Quantity < 1 {
		return Order{}, errors.New("quantity must be at least 1")
	}
	select {
	case <-time.After(k.cook):
	case <-ctx.Done():
		return Order{}, ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	o := Order{ID: fmt.Sprintf("PZ%d", len(k.orders)+1), Pizza: args.Pizza, Quantity: args.Quantity, Total: price * float64(args.Quantity)}
	k.orders = append(k.orders, o)
	return o, nil
}

// Tools are the agent's tools over kitchen k.
func (k *Kitchen) Tools() []*tools.Tool {
	menu := tools.MustNew("menu", "List the pizzas and their prices.",
		func(context.Context, MenuArgs) ([]Item, error) { return Menu, nil },
		tools.WithEffect(tools.Read))
	// A mutation: by default it starts only once the agent has said what
	// it is about to do, and a caller who says "wait" before then stops it.
	order := tools.MustNew("place_order", "Place the caller's order, once they have confirmed it.",
		k.place, tools.WithEffect(tools.Mutation), tools.WithTimeout(10*time.Second))
	transfer := tools.MustNew("transfer_to_human", "Hand the caller to a person at the shop.",
		func(ctx context.Context, args TransferArgs) (string, error) {
			if err := runtime.Transfer(ctx, Staff); err != nil {
				return "", err
			}
			return "transferred", nil
		}, tools.WithEffect(tools.Mutation), tools.WithTimeout(40*time.Second))
	// end_call hangs up once the goodbye has played.
	return []*tools.Tool{menu, order, transfer, runtime.EndCallTool()}
}

// Phrases are what callers say, for a recogniser that listens for them,
// spelled as they sound: the local recogniser's dictionary has
// "margarita", not "margherita".
var Phrases = []string{
	"what pizzas do you have", "what's on the menu", "the menu please",
	"one margarita", "two margaritas", "one pepperoni", "two pepperoni", "three pepperoni",
	"one veggie", "two veggies", "I'd like a pepperoni", "I want two margaritas",
	"yes", "yes please", "no", "wait", "cancel that",
	"can I talk to a person", "a human please",
	"thank you", "goodbye",
}

// New makes the agent for one call, with a kitchen of its own: it is a
// runtime.AgentFunc.
func New(ctx context.Context) (*runtime.Agent, func(), error) {
	return NewAgent(NewKitchen(500 * time.Millisecond)), nil, nil
}

// NewAgent is the agent over kitchen k, on the offline model.
func NewAgent(k *Kitchen) *runtime.Agent {
	return &runtime.Agent{
		Name:         "pizza",
		Instructions: Instructions,
		Tools:        k.Tools(),
		Model:        NewModel(),
		Phrases:      Phrases,
		OnEnter: func(ctx context.Context, s *runtime.Session) error {
			if s.Restored() {
				return nil
			}
			return s.GenerateReply(ctx, "Greet the caller.")
		},
	}
}

func priceOf(name string) (float64, bool) {
	for _, it := range Menu {
		if it.Name == strings.ToLower(name) {
			return it.Price, true
		}
	}
	return 0, false
}
