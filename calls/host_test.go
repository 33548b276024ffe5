package calls_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/sip"
)

// TestAnAgentThatCannotBeMadeFailsAtStart checks that the host, and so
// every transport's server, makes one agent at New: an agent that cannot
// be made fails New with the reason, rather than the first call.
func TestAnAgentThatCannotBeMadeFailsAtStart(t *testing.T) {
	missing := errors.New("pocketsphinx: words missing from the dictionary: zyzzyva")
	broken := func(context.Context) (*runtime.Agent, func(), error) { return nil, nil, missing }
	modelless := func(context.Context) (*runtime.Agent, func(), error) { return &runtime.Agent{Name: "x"}, nil, nil }
	for name, newHost := range map[string]func(runtime.AgentFunc) error{
		"calls":  func(f runtime.AgentFunc) error { _, err := calls.New(f); return err },
		"server": func(f runtime.AgentFunc) error { _, err := server.New(f); return err },
		"sip":    func(f runtime.AgentFunc) error { _, err := sip.New(f); return err },
	} {
		if err := newHost(broken); !errors.Is(err, missing) {
			t.Errorf("%s.New with an agent that cannot be made: %v; want the reason", name, err)
		}
		if err := newHost(modelless); err == nil || !strings.Contains(err.Error(), "no Model") {
			t.Errorf("%s.New with an agent without a model: %v; want it refused", name, err)
		}
	}
	released := 0
	h, err := calls.New(func(context.Context) (*runtime.Agent, func(), error) {
		return &runtime.Agent{Model: nil}, func() { released++ }, nil
	})
	if err == nil {
		h.Close()
	}
	if released != 1 {
		t.Errorf("the agent made at New was released %d times; want once", released)
	}
}
