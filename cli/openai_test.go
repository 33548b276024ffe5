package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/openaitest"
)

// The acceptance run of the OpenAI providers, tried as a new user would:
// one scripted line, OPENAI_BASE_URL pointed at a server that speaks
// OpenAI's wire protocol, every role there (chat completions and speech,
// asked for by flag since the server is not OpenAI's own; --llm realtime:
// the Realtime websocket). book_table runs once and the model's reply is
// printed.
func TestConsoleOnOpenAITriedAsANewUserWould(t *testing.T) {
	for _, backend := range []string{"openai", "realtime"} {
		t.Run(backend, func(t *testing.T) {
			srv := openaitest.New(booking.NewDemoModel())
			defer srv.Close()
			t.Setenv("OPENAI_BASE_URL", srv.URL())
			t.Setenv("OPENAI_API_KEY", openaitest.APIKey)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var out, errs bytes.Buffer
			in := strings.NewReader("Book a table for two at seven\n")
			start := time.Now()
			args := []string{"console", "--agent", "booking", "--llm", backend}
			if backend == "openai" {
				args = append(args, "--tts", "openai")
			}
			if err := run(ctx, args, in, &out, &errs); err != nil {
				t.Fatalf("console: %v\nstdout: %s\nstderr: %s", err, out.String(), errs.String())
			}
			got := out.String()
			t.Logf("%s in %v:\n%s", backend, time.Since(start).Round(time.Millisecond), got)
			for _, want := range []string{
				"agent: Hello, thanks for calling Holdline Bistro.",
				"user: Book a table for two at seven\n",
				"tool: book_table -> succeeded\n",
				"agent: You're booked: a table for two at 19:00.",
			} {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s\nstderr: %s", want, got, errs.String())
				}
			}
			if n := strings.Count(got, "tool: book_table"); n != 1 {
				t.Errorf("book_table ran %d times; want once", n)
			}
			if strings.Contains(got, "error:") || strings.Contains(got, "failover:") {
				t.Errorf("a provider failed:\n%s", got)
			}
			if backend == "openai" && len(srv.Speeches()) == 0 {
				t.Error("the OpenAI voice never spoke")
			}
			if v := srv.RealtimeViolations(); len(v) > 0 {
				t.Errorf("Realtime protocol violations: %q", v)
			}
			if strings.Contains(out.String()+errs.String(), openaitest.APIKey) {
				t.Error("the API key was printed")
			}
		})
	}
}
