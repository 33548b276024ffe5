package events

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// JSONL writes events as JSON lines.
type JSONL struct {
	w   *bufio.Writer
	enc *json.Encoder
}

// NewJSONL returns a sink writing to w. Call Flush when done.
func NewJSONL(w io.Writer) *JSONL {
	bw := bufio.NewWriter(w)
	return &JSONL{w: bw, enc: json.NewEncoder(bw)}
}

// Write encodes one event as a line.
func (j *JSONL) Write(e Event) error {
	if err := j.enc.Encode(e); err != nil {
		return fmt.Errorf("events: write jsonl: %w", err)
	}
	return nil
}

// Flush writes buffered lines out.
func (j *JSONL) Flush() error {
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("events: flush jsonl: %w", err)
	}
	return nil
}
