package openai

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkFirstTokenOverhead measures what this package adds to the time
// to first token: from the moment the server flushes the first content
// chunk to the moment Recv returns it, against a baseline that reads the
// same kind of response with a bufio.Reader up to the first data line.
// Both readers are waiting on an open response when the chunk is sent, so
// connecting and the headers are not counted.
//
//	ns/first-token-ours  server flush -> Stream.Recv returns the text
//	ns/first-token-raw   server flush -> bufio reader has the data line
//	ns/overhead          the difference (target: well under 1 ms)
func BenchmarkFirstTokenOverhead(b *testing.B) {
	const (
		first = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}` + "\n\n"
		rest  = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	)
	// Each request hands the benchmark a trigger once its headers are out
	// and reports when it flushed the first chunk.
	arrived := make(chan chan struct{})
	sentAt := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		trigger := make(chan struct{})
		select {
		case arrived <- trigger:
		case <-r.Context().Done():
			return
		}
		select {
		case <-trigger:
		case <-r.Context().Done():
			return
		}
		t := time.Now()
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		sentAt <- t
		io.WriteString(w, rest)
	}))
	defer srv.Close()

	m, err := New(WithBaseURL(srv.URL), WithAPIKey("sk-bench"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true}`)

	var ours, raw time.Duration
	n := 0
	for b.Loop() {
		// Ours.
		st, err := m.Stream(ctx, hello)
		if err != nil {
			b.Fatal(err)
		}
		trigger := <-arrived
		<-st.(*stream).ready // our side has the headers too
		close(trigger)
		c, err := st.Recv()
		out := time.Now()
		if err != nil || c.Text != "Hello" {
			b.Fatalf("Recv: %+v, %v", c, err)
		}
		ours += out.Sub(<-sentAt)
		for {
			if _, err := st.Recv(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
		st.Close()

		// Raw, over the same HTTP client.
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/chat/completions", bytes.NewReader(body))
		resp, err := m.cfg.httpClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		trigger = <-arrived
		close(trigger)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(line, "data: ") {
				break
			}
		}
		out = time.Now()
		raw += out.Sub(<-sentAt)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		n++
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(n), "ns/first-token-ours")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(n), "ns/first-token-raw")
	b.ReportMetric(float64((ours-raw).Nanoseconds())/float64(n), "ns/overhead")
}
