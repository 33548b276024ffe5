package tools

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
)

// Journal is the write-ahead log of mutations: the intent is written before
// a mutation's body runs and the outcome after it returns, so that after a
// crash an intent without an outcome marks a call whose effect is unknown
// rather than one that may be run again. The checkpoint store implements it;
// [MemoryJournal] keeps it in memory.
//
// Writes run on the tool's goroutine, never on the session core's, under the
// tool's deadline.
type Journal interface {
	WriteIntent(ctx context.Context, r Record) error
	WriteOutcome(ctx context.Context, r Record) error
	// Unresolved returns the session's intents that have no outcome.
	Unresolved(ctx context.Context, session string) ([]Record, error)
}

// JournalReader is implemented by journals that can list every record of
// a session, intents and outcomes, in the order written: what a resumed
// session settles its unfinished calls by.
type JournalReader interface {
	Records(ctx context.Context, session string) ([]Record, error)
}

// Record is one journal entry.
type Record struct {
	Session string          `json:"session"`
	CallID  string          `json:"call_id"`
	Tool    string          `json:"tool"`
	Key     string          `json:"key"`
	Args    json.RawMessage `json:"args,omitempty"`
	// Outcome fields, set on outcome records.
	State   State  `json:"state,omitempty"`
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// MemoryJournal is a Journal in memory, safe for concurrent use. It lasts as
// long as the process: it protects against repeats within it, not across a
// crash.
type MemoryJournal struct {
	mu       sync.Mutex
	intents  []Record
	outcomes map[string]Record // by session + call id
}

// NewMemoryJournal returns an empty journal.
func NewMemoryJournal() *MemoryJournal {
	return &MemoryJournal{outcomes: map[string]Record{}}
}

func journalKey(r Record) string { return r.Session + "\x00" + r.CallID }

// WriteIntent records that r's call is about to run.
func (j *MemoryJournal) WriteIntent(ctx context.Context, r Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.Args = slices.Clone(r.Args)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.intents = append(j.intents, r)
	return nil
}

// WriteOutcome records how r's call ended.
func (j *MemoryJournal) WriteOutcome(ctx context.Context, r Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.Args = slices.Clone(r.Args)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.outcomes[journalKey(r)] = r
	return nil
}

// Unresolved returns the session's intents without an outcome, in the order
// they were written.
func (j *MemoryJournal) Unresolved(ctx context.Context, session string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Record
	for _, r := range j.intents {
		if _, done := j.outcomes[journalKey(r)]; r.Session == session && !done {
			r.Args = slices.Clone(r.Args)
			out = append(out, r)
		}
	}
	return out, nil
}

// Outcome returns the recorded outcome of a call, if any.
func (j *MemoryJournal) Outcome(session, callID string) (Record, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r, ok := j.outcomes[session+"\x00"+callID]
	r.Args = slices.Clone(r.Args)
	return r, ok
}

// Records returns the session's intents, each followed by its outcome when
// there is one.
func (j *MemoryJournal) Records(ctx context.Context, session string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Record
	for _, r := range j.intents {
		if r.Session != session {
			continue
		}
		r.Args = slices.Clone(r.Args)
		out = append(out, r)
		if o, done := j.outcomes[journalKey(r)]; done {
			o.Args = slices.Clone(o.Args)
			out = append(out, o)
		}
	}
	return out, nil
}
