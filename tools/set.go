package tools

import (
	"fmt"
	"slices"

	"github.com/holdline/holdline/llm"
)

// A Set is the tools of one agent, in the order they were given, which is the
// order the model sees them in. It is immutable and safe for concurrent use;
// a nil *Set is empty.
type Set struct {
	tools  []*Tool
	byName map[string]*Tool
}

// NewSet makes a set of tools. Two tools with one name are an error: the
// model could not tell them apart.
func NewSet(tools ...*Tool) (*Set, error) {
	s := &Set{tools: make([]*Tool, 0, len(tools)), byName: make(map[string]*Tool, len(tools))}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("tools: tool %d is nil", i)
		}
		if _, dup := s.byName[t.name]; dup {
			return nil, fmt.Errorf("tools: duplicate tool name %q", t.name)
		}
		s.byName[t.name] = t
		s.tools = append(s.tools, t)
	}
	return s, nil
}

// Lookup returns the tool with the given name. A name the model made up is
// not found; the session answers such a call with [ErrUnknownTool].
func (s *Set) Lookup(name string) (*Tool, bool) {
	if s == nil {
		return nil, false
	}
	t, ok := s.byName[name]
	return t, ok
}

// Specs returns the tools as described to the model, in order.
func (s *Set) Specs() []llm.ToolSpec {
	if s == nil {
		return nil
	}
	specs := make([]llm.ToolSpec, len(s.tools))
	for i, t := range s.tools {
		specs[i] = t.Spec()
	}
	return specs
}

// Len returns the number of tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tools)
}

// All returns the tools in order. The slice is the caller's to modify.
func (s *Set) All() []*Tool {
	if s == nil {
		return nil
	}
	return slices.Clone(s.tools)
}
