package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// keepAlive is how often an idle event stream gets a comment, so proxies
// don't close it.
const keepAlive = 15 * time.Second

// streamEvents serves the session's events as Server-Sent Events: the kept
// history after Last-Event-ID (or ?after=), then live events, until the
// session ends or the client goes.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	c := s.lookup(w, r)
	if c == nil {
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return
	}
	var seq uint64
	from := r.Header.Get("Last-Event-ID")
	if from == "" {
		from = r.URL.Query().Get("after")
	}
	if from != "" {
		n, err := strconv.ParseUint(from, 10, 64)
		if err != nil {
			s.fail(w, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID %q is not an event number", from))
			return
		}
		seq = n
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		evs, wake, closed := c.Events(seq)
		for _, e := range evs {
			b, err := json.Marshal(e)
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, b); err != nil {
				return
			}
			seq = e.Seq
		}
		fl.Flush()
		if closed {
			return
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
	}
}
