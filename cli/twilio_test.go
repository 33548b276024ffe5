package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/carrier/carriertest"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
)

// phoneVoice is espeak-ng's caller voice saying text at 8 kHz, as a phone
// line carries it.
func phoneVoice(t *testing.T, text string) []int16 {
	t.Helper()
	out, err := exec.Command("espeak-ng", "-v", "en-us+edward", "--stdout", text).Output()
	if err != nil {
		missing(t, "espeak-ng: "+err.Error())
	}
	pcm, rate, err := media.ReadWAV(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := media.NewResampler(rate, 8000)
	if err != nil {
		t.Fatal(err)
	}
	return rs.Process(nil, pcm)
}

// chatOf is the context of the only session on serve at url.
func chatOf(t *testing.T, ctx context.Context, url string) (llm.ChatContext, bool) {
	t.Helper()
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	if !getJSON(ctx, url+"/v1/sessions", &list) || len(list.Sessions) != 1 {
		return llm.ChatContext{}, false
	}
	var cc llm.ChatContext
	return cc, getJSON(ctx, url+"/v1/sessions/"+list.Sessions[0].ID+"/context", &cc)
}

func getJSON(ctx context.Context, url string, v any) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	return res.StatusCode == http.StatusOK && json.NewDecoder(res.Body).Decode(v) == nil
}

// waitQuiet waits until the phone has had no audio for a second after
// some came: the agent finished speaking.
func waitQuiet(ctx context.Context, p *carriertest.Phone) bool {
	for ctx.Err() == nil {
		now := time.Now()
		if last := p.LastMediaBefore(now); !last.IsZero() && now.Sub(last) > 1500*time.Millisecond {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// A phone number's call, as Twilio places it, to holdline serve on this
// machine's engines (pocketsphinx, espeak-ng): the signed webhook, the
// stream its TwiML names, a caller on a line that echoes the agent back
// (120 ms, -6 dB) asking for a table in espeak-ng's voice. The greeting
// plays whole (its own echo does not cut it), and the booking is made
// once.
func TestTwilioCallToServeBooksOnce(t *testing.T) {
	const token = "e2e-auth-token"
	t.Setenv("TWILIO_AUTH_TOKEN", token)
	t.Setenv("TWILIO_ACCOUNT_SID", "ACtest")
	callToServeBooksOnce(t, carriertest.Config{Carrier: carriertest.Twilio, AuthToken: token})
}

// The same call as Telnyx places it: the webhook signed with the account's
// Ed25519 key (TELNYX_PUBLIC_KEY its public half), the TeXML's
// bidirectional RTP stream.
func TestTelnyxCallToServeBooksOnce(t *testing.T) {
	carrierEndToEnd(t)
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TELNYX_PUBLIC_KEY", base64.StdEncoding.EncodeToString(pub))
	callToServeBooksOnce(t, carriertest.Config{Carrier: carriertest.Telnyx, TelnyxKey: key})
}

// The same call as Plivo places it: the answer URL signed
// (X-Plivo-Signature-V3), the answer's bidirectional mu-law stream.
func TestPlivoCallToServeBooksOnce(t *testing.T) {
	carrierEndToEnd(t)
	const token = "e2e-plivo-token"
	t.Setenv("PLIVO_AUTH_TOKEN", token)
	callToServeBooksOnce(t, carriertest.Config{Carrier: carriertest.Plivo, AuthToken: token})
}

// carrierEndToEnd skips Telnyx's and Plivo's calls through serve unless
// HOLDLINE_CARRIER_E2E=all: make test runs Twilio's, and the carrier
// package runs Telnyx's and Plivo's routes with the same phone and a
// scripted recogniser. Each of these takes half a minute of real-time
// audio on this machine's engines, and their greeting checks share the
// canceller's first-seconds weakness (a greeting cleared by its own echo
// about once in ten calls on a loaded machine; see the README's barge-in
// limits).
func carrierEndToEnd(t *testing.T) {
	if os.Getenv("HOLDLINE_CARRIER_E2E") != "all" {
		t.Skip("HOLDLINE_CARRIER_E2E=all runs every carrier's call through serve; make test runs Twilio's")
	}
}

func callToServeBooksOnce(t *testing.T, cfg carriertest.Config) {
	book := phoneVoice(t, "Book a table for two at seven.")
	yes := phoneVoice(t, "Yes.")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := serveForBrowserWith(t, ctx, "", "--store", "none")
	cfg.BaseURL, cfg.EchoDelay, cfg.EchoGainDB = url, 120*time.Millisecond, -6
	p, err := carriertest.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Hangup(context.Background())
	if !waitQuiet(ctx, p) {
		t.Fatal("the greeting never ended")
	}
	first := p.FirstSound()
	if gap := p.LongestQuiet(first, time.Now()); gap > 900*time.Millisecond {
		t.Errorf("the greeting went quiet for %v in the middle: cut by its own echo?", gap)
	}
	// A suspicion on the greeting's own echo pauses it and clears the
	// carrier's buffer (under 100 ms of audio skipped). The canceller's
	// first seconds on an echoing line allow one, about once in ten calls
	// on a loaded machine (README, "Answering a phone number",
	// "Measured"); the carrier package's greeting tests, on a scripted
	// recogniser, allow none.
	switch n := len(p.Clears()); {
	case n == 1:
		t.Logf("the greeting was cleared once with only its echo on the line: the canceller's first-seconds limit")
	case n > 1:
		t.Errorf("the greeting was cleared %d times with only its echo on the line", n)
	}
	greeting, ok := chatOf(t, ctx, url)
	if !ok || len(greeting.Items) == 0 {
		t.Fatal("no context")
	}
	for _, it := range greeting.Items {
		if it.Role == llm.RoleAssistant && it.Interrupted {
			t.Errorf("the greeting was interrupted: %q", it.Text)
		}
	}
	t.Logf("greeting: %v of audio", p.Received())

	p.Say(book)
	booked := func() (int, llm.ChatContext) {
		cc, _ := chatOf(t, ctx, url)
		n := 0
		for _, it := range cc.Items {
			if it.Kind == llm.KindToolCall && it.Name == "book_table" {
				n++
			}
		}
		return n, cc
	}
	for range 2 {
		for p.Saying() && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		said := time.Now()
		for p.LastMediaBefore(time.Now()).Before(said) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		if !waitQuiet(ctx, p) {
			t.Fatal("the agent never finished answering")
		}
		time.Sleep(time.Second) // a tool's result and its answer
		if n, _ := booked(); n > 0 {
			break
		}
		// The agent asked back what it was unsure of.
		p.Say(yes)
	}
	n, cc := booked()
	var said []string
	for _, it := range cc.Items {
		if it.Kind == llm.KindMessage {
			said = append(said, string(it.Role)+": "+it.Text)
		}
	}
	t.Logf("conversation:\n%s", strings.Join(said, "\n"))
	if n != 1 {
		t.Errorf("book_table called %d times; want once", n)
	}
	if bad := p.Refused(); len(bad) > 0 {
		t.Errorf("frames %s would refuse: %q", cfg.Carrier, bad)
	}
}

// lockedBuffer is serve's stderr, read while serve writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serve mounts Telnyx's and Plivo's routes, says at start-up that their
// webhooks are not verified without TELNYX_PUBLIC_KEY and
// PLIVO_AUTH_TOKEN, and refuses a public key that is not one.
func TestServeMountsTelnyxAndPlivo(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("HOLDLINE_TOKEN", "")
	t.Setenv("TELNYX_PUBLIC_KEY", "not a key")
	err := run(t.Context(), []string{"serve", "--http", "127.0.0.1:0", "--store", "none", "--tts", "demo", "--stt", "demo"}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "TELNYX_PUBLIC_KEY") {
		t.Errorf("a bad TELNYX_PUBLIC_KEY: %v; want serve to refuse it", err)
	}

	for _, verified := range []bool{false, true} {
		t.Run(fmt.Sprintf("verified=%v", verified), func(t *testing.T) {
			const plivoToken = "plivo-token-in-no-log"
			pub, _, _ := ed25519.GenerateKey(nil)
			t.Setenv("TELNYX_PUBLIC_KEY", "")
			t.Setenv("PLIVO_AUTH_TOKEN", "")
			if verified {
				t.Setenv("TELNYX_PUBLIC_KEY", base64.StdEncoding.EncodeToString(pub))
				t.Setenv("PLIVO_AUTH_TOKEN", plivoToken)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			runCtx, stop := context.WithCancel(ctx)
			outR, outW := io.Pipe()
			stderr := &lockedBuffer{}
			done := make(chan error, 1)
			go func() {
				done <- run(runCtx, []string{"serve", "--http", "127.0.0.1:0", "--store", "none", "--tts", "demo", "--stt", "demo"}, strings.NewReader(""), outW, stderr)
				outW.Close()
			}()
			defer func() { stop(); <-done }()
			line, err := bufio.NewReader(outR).ReadString('\n')
			if err != nil {
				t.Fatalf("serve printed nothing: %v\n%s", err, stderr.String())
			}
			go io.Copy(io.Discard, outR)
			url := strings.TrimSuffix(strings.TrimSpace(line[strings.Index(line, "http://"):]), "/")
			for _, w := range []string{"TELNYX_PUBLIC_KEY is not set", "PLIVO_AUTH_TOKEN is not set"} {
				if got := strings.Contains(stderr.String(), w); got == verified {
					t.Errorf("start-up log says %q: %v, with the secrets set: %v", w, got, verified)
				}
			}
			// The routes are served: unsigned, answered or refused as
			// the secrets say.
			for _, path := range []string{"/v1/telnyx/voice", "/v1/plivo/voice"} {
				res, err := http.Post(url+path, "application/x-www-form-urlencoded", strings.NewReader("CallSid=c1&CallUUID=c1&From=1&To=2"))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				want := http.StatusOK
				if verified {
					want = http.StatusForbidden
				}
				if res.StatusCode != want || !verified && !strings.Contains(string(b), "/stream") {
					t.Errorf("POST %s: %d %q; want %d", path, res.StatusCode, b, want)
				}
			}
			if strings.Contains(stderr.String(), plivoToken) {
				t.Error("PLIVO_AUTH_TOKEN is in serve's log")
			}
		})
	}
}
