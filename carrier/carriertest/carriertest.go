// Package carriertest has a phone on a carrier's line for tests: it does
// what Twilio does, as Twilio documents it, for a call to a Holdline
// server. It posts the voice webhook (signed), follows the TwiML to the
// stream, sends the caller's audio as mu-law at real time, plays what it
// is sent at real time (buffering it as Twilio does), returns each mark
// once the audio before it has played, honours clear (drops what it
// holds, returns the pending marks at once), and can add the agent's
// audio back as a line's echo.
//
// The phone speaks Twilio's messages (Webhook, Open, Start, Send and the
// reader); its playout buffer, marks, clear and echo are how any carrier
// that buffers behaves, for a Telnyx or Plivo phone to reuse with its own
// messages.
package carriertest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/zaf/g711"

	"github.com/holdline/holdline/carrier"
)

// frame is 20 ms at 8 kHz.
const frame = 160

// Config is how the phone calls.
type Config struct {
	// BaseURL is the server's (http://127.0.0.1:PORT).
	BaseURL string
	// AuthToken signs the webhook (X-Twilio-Signature); "" leaves it
	// unsigned. BadSignature signs it wrong.
	AuthToken    string
	BadSignature bool
	// CallSid, From, To are the call's (defaults are made up).
	CallSid, From, To string
	// EchoDelay and EchoGainDB add what the phone plays back into what it
	// sends, as a line without echo cancellation does (0 delay: none).
	EchoDelay  time.Duration
	EchoGainDB float64
	// Client is the HTTP client (default http.DefaultClient).
	Client *http.Client
}

// Mark is a mark the phone was sent: where in the audio it came (samples
// received before it), and whether it came back played or was cleared.
type Mark struct {
	Name    string
	Pos     int64
	Played  bool
	Cleared bool
	At      time.Time
}

// Phone is one call from the carrier's side.
type Phone struct {
	cfg       Config
	conn      *websocket.Conn
	streamSid string
	TwiML     string
	Params    map[string]string

	wmu  sync.Mutex // one writer at a time
	seq  int64
	mbuf []byte

	mu       sync.Mutex
	buf      []int16 // received, not yet played
	received int64   // samples received
	played   int64   // samples played
	marks    []Mark
	queued   []int // indexes into marks not yet played, in order
	clears   []time.Time
	media    []time.Time // when each media message came
	speech   []int16
	onset    time.Time // when the queued speech started going out
	heard    []heardFrame
	echo     []int16 // a FIFO, as long as the echo delay
	gain     float64
	closed   chan struct{}
	closeErr error
	stopOnce sync.Once
}

type heardFrame struct {
	at   time.Time
	loud bool
}

// Webhook posts the voice webhook and returns the response and its body.
func Webhook(ctx context.Context, cfg Config) (*http.Response, string, error) {
	if cfg.CallSid == "" {
		cfg.CallSid = "CA" + strconv.FormatInt(time.Now().UnixNano(), 16)
	}
	form := url.Values{"CallSid": {cfg.CallSid}, "AccountSid": {"ACtest"}, "From": {orDefault(cfg.From, "+15550100")},
		"To": {orDefault(cfg.To, "+15550199")}, "CallStatus": {"ringing"}, "Direction": {"inbound"}}
	u := strings.TrimRight(cfg.BaseURL, "/") + carrier.TwilioVoicePath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cfg.AuthToken != "" {
		sig := carrier.TwilioSignature(cfg.AuthToken, u, form)
		if cfg.BadSignature {
			sig = carrier.TwilioSignature(cfg.AuthToken+"x", u, form)
		}
		req.Header.Set("X-Twilio-Signature", sig)
	}
	client := cfg.Client
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, string(b), err
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// TwiML is the webhook's answer as Twilio reads it.
type TwiML struct {
	Connect struct {
		Stream struct {
			URL    string `xml:"url,attr"`
			Params []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"Parameter"`
		} `xml:"Stream"`
	} `xml:"Connect"`
}

// Dial places a call: the webhook, then the stream its TwiML names, with
// connected and start sent. The phone then runs until ctx ends or the
// stream closes.
func Dial(ctx context.Context, cfg Config) (*Phone, error) {
	if cfg.CallSid == "" {
		cfg.CallSid = "CA" + strconv.FormatInt(time.Now().UnixNano(), 16)
	}
	res, body, err := Webhook(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("webhook answered %s: %s", res.Status, body)
	}
	var doc TwiML
	if err := xml.Unmarshal([]byte(body), &doc); err != nil {
		return nil, fmt.Errorf("webhook's TwiML: %w", err)
	}
	params := map[string]string{}
	for _, p := range doc.Connect.Stream.Params {
		params[p.Name] = p.Value
	}
	p, err := Open(ctx, doc.Connect.Stream.URL, cfg)
	if err != nil {
		return nil, err
	}
	p.TwiML, p.Params = body, params
	if err := p.Start(ctx, cfg.CallSid, params); err != nil {
		p.conn.CloseNow()
		return nil, err
	}
	p.Run(ctx)
	return p, nil
}

// Open opens the stream's WebSocket and sends connected; Start comes next.
func Open(ctx context.Context, streamURL string, cfg Config) (*Phone, error) {
	conn, _, err := websocket.Dial(ctx, streamURL, nil)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", streamURL, err)
	}
	conn.SetReadLimit(1 << 20)
	p := &Phone{cfg: cfg, conn: conn, streamSid: "MZ" + strconv.FormatInt(time.Now().UnixNano(), 16), closed: make(chan struct{}),
		gain: math.Pow(10, cfg.EchoGainDB/20)}
	if cfg.EchoDelay > 0 {
		p.echo = make([]int16, int(cfg.EchoDelay.Seconds()*8000))
	}
	return p, p.Send(ctx, map[string]any{"event": "connected", "protocol": "Call", "version": "1.0.0"})
}

// Conn is the stream's socket, for tests that misbehave on purpose.
func (p *Phone) Conn() *websocket.Conn { return p.conn }

// StreamSid is the stream's id.
func (p *Phone) StreamSid() string { return p.streamSid }

// Send sends one message (JSON-encoded), with the sequence number Twilio
// puts on every message after connected.
func (p *Phone) Send(ctx context.Context, msg map[string]any) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if msg["event"] != "connected" {
		p.seq++
		msg["sequenceNumber"] = strconv.FormatInt(p.seq, 10)
		if _, ok := msg["streamSid"]; !ok {
			msg["streamSid"] = p.streamSid
		}
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return p.conn.Write(ctx, websocket.MessageText, b)
}

// SendRaw sends bytes as a text message.
func (p *Phone) SendRaw(ctx context.Context, b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.conn.Write(ctx, websocket.MessageText, b)
}

// Start sends the start message with the TwiML's parameters.
func (p *Phone) Start(ctx context.Context, callSid string, params map[string]string) error {
	return p.Send(ctx, map[string]any{"event": "start", "start": map[string]any{
		"accountSid": "ACtest", "streamSid": p.streamSid, "callSid": callSid,
		"tracks":           []string{"inbound"},
		"customParameters": params,
		"mediaFormat":      map[string]any{"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
	}})
}

// Run starts the phone: its reader and its 20 ms clock, until ctx ends or
// the stream closes (Closed).
func (p *Phone) Run(ctx context.Context) {
	go p.read(ctx)
	go p.tick(ctx)
}

// Closed is closed once the stream has closed; CloseErr then says how.
func (p *Phone) Closed() <-chan struct{} { return p.closed }

// CloseErr is the stream's close (a websocket.CloseError with the
// server's status and reason, when it closed the stream).
func (p *Phone) CloseErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closeErr
}

func (p *Phone) read(ctx context.Context) {
	defer close(p.closed)
	for {
		_, b, err := p.conn.Read(ctx)
		if err != nil {
			p.mu.Lock()
			p.closeErr = err
			p.mu.Unlock()
			return
		}
		var m struct {
			Event     string `json:"event"`
			StreamSid string `json:"streamSid"`
			Media     struct {
				Payload string `json:"payload"`
			} `json:"media"`
			Mark struct {
				Name string `json:"name"`
			} `json:"mark"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			continue
		}
		switch m.Event {
		case "media":
			audio, err := base64.StdEncoding.DecodeString(m.Media.Payload)
			if err != nil {
				continue
			}
			p.mu.Lock()
			for _, v := range audio {
				p.buf = append(p.buf, g711.DecodeUlawFrame(v))
			}
			p.received += int64(len(audio))
			p.media = append(p.media, time.Now())
			p.mu.Unlock()
		case "mark":
			p.mu.Lock()
			p.marks = append(p.marks, Mark{Name: m.Mark.Name, Pos: p.received})
			p.queued = append(p.queued, len(p.marks)-1)
			p.mu.Unlock()
		case "clear":
			p.mu.Lock()
			p.clears = append(p.clears, time.Now())
			p.buf = p.buf[:0]
			q := p.queued
			p.queued = nil
			for _, i := range q {
				p.marks[i].Cleared, p.marks[i].At = true, time.Now()
			}
			p.mu.Unlock()
			// Twilio sends the pending marks back on a clear.
			for _, i := range q {
				p.sendMark(ctx, p.marks[i].Name)
			}
		}
	}
}

func (p *Phone) sendMark(ctx context.Context, name string) {
	_ = p.Send(ctx, map[string]any{"event": "mark", "mark": map[string]any{"name": name}})
}

// tick plays 20 ms of what was received and sends 20 ms of the caller's
// line, every 20 ms.
func (p *Phone) tick(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	out := make([]int16, frame)
	payload := make([]byte, frame)
	var chunk int64
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.closed:
			return
		case now := <-t.C:
			p.mu.Lock()
			n := min(frame, len(p.buf))
			played := out[:frame]
			copy(played, p.buf[:n])
			clear(played[n:])
			p.buf = append(p.buf[:0], p.buf[n:]...)
			p.played += int64(n)
			loud := false
			for _, v := range played[:n] {
				if v > 600 || v < -600 {
					loud = true
					break
				}
			}
			p.heard = append(p.heard, heardFrame{at: now, loud: loud})
			// Marks whose audio has now all played come back.
			var due []string
			for len(p.queued) > 0 && p.marks[p.queued[0]].Pos <= p.received-int64(len(p.buf)) {
				i := p.queued[0]
				p.queued = p.queued[1:]
				p.marks[i].Played, p.marks[i].At = true, now
				due = append(due, p.marks[i].Name)
			}
			// The line: the caller's voice, and the echo of what played.
			for i := range frame {
				var v float64
				if len(p.echo) > 0 {
					e := p.echo[0]
					copy(p.echo, p.echo[1:])
					p.echo[len(p.echo)-1] = played[i]
					v = float64(e) * p.gain
				}
				if len(p.speech) > 0 {
					if p.onset.IsZero() {
						p.onset = now
					}
					v += float64(p.speech[0])
					p.speech = p.speech[1:]
				}
				payload[i] = g711.EncodeUlawFrame(int16(max(-32768, min(32767, v))))
			}
			p.mu.Unlock()
			for _, name := range due {
				p.sendMark(ctx, name)
			}
			chunk++
			_ = p.sendMedia(ctx, chunk, now.Sub(start).Milliseconds(), payload)
		}
	}
}

// sendMedia sends one media message, built in place: a phone sends fifty
// a second, and a load test runs hundreds of phones.
func (p *Phone) sendMedia(ctx context.Context, chunk, ts int64, payload []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.seq++
	b := p.mbuf[:0]
	b = append(b, `{"event":"media","sequenceNumber":"`...)
	b = strconv.AppendInt(b, p.seq, 10)
	b = append(b, `","streamSid":"`...)
	b = append(b, p.streamSid...)
	b = append(b, `","media":{"track":"inbound","chunk":"`...)
	b = strconv.AppendInt(b, chunk, 10)
	b = append(b, `","timestamp":"`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `","payload":"`...)
	b = base64.StdEncoding.AppendEncode(b, payload)
	b = append(b, `"}}`...)
	p.mbuf = b
	return p.conn.Write(ctx, websocket.MessageText, b)
}

// Say queues the caller's voice (8 kHz) to go out from the next frame on;
// Onset then says when it started.
func (p *Phone) Say(pcm []int16) {
	p.mu.Lock()
	p.speech = append(p.speech, pcm...)
	p.onset = time.Time{}
	p.mu.Unlock()
}

// Saying reports whether the caller's voice is still going out.
func (p *Phone) Saying() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.speech) > 0
}

// Onset is when the latest Say started going out (zero: not yet).
func (p *Phone) Onset() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.onset
}

// DTMF presses a key.
func (p *Phone) DTMF(ctx context.Context, digit string) error {
	return p.Send(ctx, map[string]any{"event": "dtmf", "dtmf": map[string]any{"track": "inbound_track", "digit": digit}})
}

// Hangup sends stop, as Twilio does when the caller hangs up, and waits
// for the server to close the stream.
func (p *Phone) Hangup(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		err = p.Send(ctx, map[string]any{"event": "stop", "stop": map[string]any{"accountSid": "ACtest", "callSid": p.cfg.CallSid}})
	})
	if err != nil {
		return err
	}
	select {
	case <-p.closed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Clears are when the phone was told to clear.
func (p *Phone) Clears() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.clears...)
}

// LastMediaBefore is when the last media message before t came (zero:
// none).
func (p *Phone) LastMediaBefore(t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last time.Time
	for _, m := range p.media {
		if m.Before(t) {
			last = m
		}
	}
	return last
}

// Marks are the marks the phone was sent, in order.
func (p *Phone) Marks() []Mark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Mark(nil), p.marks...)
}

// Received is how much audio the phone was sent; Played how much it has
// played.
func (p *Phone) Received() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(p.received) * time.Second / 8000
}

// FirstSound is when the phone first played something loud (zero: never).
func (p *Phone) FirstSound() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.heard {
		if h.loud {
			return h.at
		}
	}
	return time.Time{}
}

// LongestQuiet is the longest run of quiet the phone played between its
// first and last loud frame in [from, to): a greeting cut by its own echo
// shows as a long quiet in the middle of it.
func (p *Phone) LongestQuiet(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var longest time.Duration
	var last time.Time
	for _, h := range p.heard {
		if h.at.Before(from) || !h.at.Before(to) || !h.loud {
			continue
		}
		if !last.IsZero() {
			longest = max(longest, h.at.Sub(last)-20*time.Millisecond)
		}
		last = h.at
	}
	return longest
}

// ErrNotClosed: the stream did not close in time.
var ErrNotClosed = errors.New("carriertest: the stream did not close")

// WaitClosed waits for the server to close the stream and returns its
// close status and reason.
func (p *Phone) WaitClosed(ctx context.Context) (websocket.StatusCode, string, error) {
	select {
	case <-p.closed:
	case <-ctx.Done():
		return -1, "", ErrNotClosed
	}
	err := p.CloseErr()
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code, ce.Reason, nil
	}
	return -1, "", err
}

// MuLaw20ms is 20 ms of mu-law silence, for tests that build messages.
var MuLaw20ms = bytes.Repeat([]byte{0xff}, frame)
