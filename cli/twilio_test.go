package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
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
	const token = "e2e-plivo-token"
	t.Setenv("PLIVO_AUTH_TOKEN", token)
	callToServeBooksOnce(t, carriertest.Config{Carrier: carriertest.Plivo, AuthToken: token})
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
	if n := len(p.Clears()); n > 0 {
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
