// Package carriertest has a phone on a carrier's line for tests: it does
// what Twilio, Telnyx or Plivo does (Config.Carrier), as each documents it,
// for a call to a Holdline server. It posts the voice webhook (signed the
// carrier's way), follows the answer to the stream, sends the caller's
// audio as mu-law at real time, plays what it is sent at real time
// (buffering it as the carriers do), returns each mark once the audio
// before it has played, honours clear (drops what it holds; Twilio and
// Telnyx return the pending marks at once, Plivo answers clearedAudio),
// and can add the agent's audio back as a line's echo.
//
// What differs between carriers is a dialect: the webhook's form and
// signature, the answer's shape, the frames' names and fields. The playout
// buffer, marks, clear and echo are the phone's, whatever the carrier. A
// frame from Holdline that the carrier would not take (a Plivo frame
// without its stream id, a Twilio frame on a Telnyx stream) is recorded
// (Phone.Refused), for tests to assert there are none.
package carriertest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/zaf/g711"
)

// frame is 20 ms at 8 kHz.
const frame = 160

// Carrier is the carrier a phone behaves as.
type Carrier string

// The carriers a phone can be on.
const (
	Twilio Carrier = "twilio"
	Telnyx Carrier = "telnyx"
	Plivo  Carrier = "plivo"
)

// Config is how the phone calls.
type Config struct {
	// BaseURL is the server's (http://127.0.0.1:PORT).
	BaseURL string
	// Carrier is the carrier the phone is on (default Twilio).
	Carrier Carrier
	// AuthToken signs the webhook (Twilio's X-Twilio-Signature, Plivo's
	// X-Plivo-Signature-V3); TelnyxKey signs Telnyx's
	// (telnyx-signature-ed25519, over SignedAt, default now). Unset, the
	// webhook goes unsigned. BadSignature signs it wrong.
	AuthToken    string
	TelnyxKey    ed25519.PrivateKey
	SignedAt     time.Time
	BadSignature bool
	// CallSid, From, To are the call's (defaults are made up; CallSid is
	// Plivo's CallUUID). CallStatus is the webhook's (default ringing;
	// Plivo's hang-up callback is completed).
	CallSid, From, To, CallStatus string
	// EchoDelay and EchoGainDB add what the phone plays back into what it
	// sends, as a line without echo cancellation does (0 delay: none).
	EchoDelay  time.Duration
	EchoGainDB float64
	// Client is the HTTP client (default http.DefaultClient).
	Client *http.Client
}

func (c Config) dialect() dialect {
	switch c.Carrier {
	case Telnyx:
		return telnyxDialect{}
	case Plivo:
		return plivoDialect{}
	}
	return twilioDialect{}
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
	d         dialect
	conn      *websocket.Conn
	streamSid string
	// TwiML is the webhook's answer as it came (TwiML, TeXML or Plivo's
	// XML), Params the parameters it gave the stream.
	TwiML  string
	Params map[string]string

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
	refused  []string
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

// Webhook posts the voice webhook, signed as the carrier signs it, and
// returns the response and its body.
func Webhook(ctx context.Context, cfg Config) (*http.Response, string, error) {
	d := cfg.dialect()
	if cfg.CallSid == "" {
		cfg.CallSid = d.callID()
	}
	form := d.form(cfg)
	u := strings.TrimRight(cfg.BaseURL, "/") + d.voicePath()
	body := form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	d.sign(req, cfg, u, form, body)
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

// TwiML is the webhook's answer as Twilio reads it (and Telnyx its TeXML,
// with the stream's attributes).
type TwiML struct {
	Connect struct {
		Stream struct {
			URL               string `xml:"url,attr"`
			Codec             string `xml:"codec,attr"`
			BidirectionalMode string `xml:"bidirectionalMode,attr"`
			Params            []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"Parameter"`
		} `xml:"Stream"`
	} `xml:"Connect"`
}

// Dial places a call: the webhook, then the stream its answer names, with
// the carrier's opening frames (connected, start) sent. The phone then
// runs until ctx ends or the stream closes.
func Dial(ctx context.Context, cfg Config) (*Phone, error) {
	if cfg.CallSid == "" {
		cfg.CallSid = cfg.dialect().callID()
	}
	res, body, err := Webhook(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("webhook answered %s: %s", res.Status, body)
	}
	streamURL, params, err := cfg.dialect().answer(body)
	if err != nil {
		return nil, fmt.Errorf("webhook's answer: %w", err)
	}
	p, err := Open(ctx, streamURL, cfg)
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

// Open opens the stream's WebSocket and sends what the carrier sends
// first (connected; Plivo sends nothing); Start comes next.
func Open(ctx context.Context, streamURL string, cfg Config) (*Phone, error) {
	conn, _, err := websocket.Dial(ctx, streamURL, nil)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", streamURL, err)
	}
	conn.SetReadLimit(1 << 20)
	d := cfg.dialect()
	p := &Phone{cfg: cfg, d: d, conn: conn, streamSid: d.streamID(), closed: make(chan struct{}),
		gain: math.Pow(10, cfg.EchoGainDB/20)}
	if cfg.EchoDelay > 0 {
		p.echo = make([]int16, int(cfg.EchoDelay.Seconds()*8000))
	}
	if msg := d.connected(); msg != nil {
		return p, p.Send(ctx, msg)
	}
	return p, nil
}

// Conn is the stream's socket, for tests that misbehave on purpose.
func (p *Phone) Conn() *websocket.Conn { return p.conn }

// StreamSid is the stream's id.
func (p *Phone) StreamSid() string { return p.streamSid }

// Send sends one message (JSON-encoded), with what the carrier puts on
// every message after its first (the sequence number and the stream id,
// under the carrier's names).
func (p *Phone) Send(ctx context.Context, msg map[string]any) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if msg["event"] != "connected" {
		p.seq++
		p.d.stamp(msg, p.seq, p.streamSid)
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

// Start sends the start message with the answer's parameters.
func (p *Phone) Start(ctx context.Context, callSid string, params map[string]string) error {
	return p.Send(ctx, p.d.start(p.cfg, p.streamSid, callSid, params))
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

// Refused are the frames Holdline sent that the carrier would not have
// taken, each with why.
func (p *Phone) Refused() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.refused...)
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
		in, why := p.d.decode(b, p.streamSid)
		if why != "" {
			p.mu.Lock()
			p.refused = append(p.refused, fmt.Sprintf("%s: %.200s", why, b))
			p.mu.Unlock()
			continue
		}
		switch in.kind {
		case inMedia:
			p.mu.Lock()
			for _, v := range in.audio {
				p.buf = append(p.buf, g711.DecodeUlawFrame(v))
			}
			p.received += int64(len(in.audio))
			p.media = append(p.media, time.Now())
			p.mu.Unlock()
		case inMark:
			p.mu.Lock()
			p.marks = append(p.marks, Mark{Name: in.name, Pos: p.received})
			p.queued = append(p.queued, len(p.marks)-1)
			p.mu.Unlock()
		case inClear:
			p.mu.Lock()
			p.clears = append(p.clears, time.Now())
			p.buf = p.buf[:0]
			q := p.queued
			p.queued = nil
			var names []string
			for _, i := range q {
				p.marks[i].Cleared, p.marks[i].At = true, time.Now()
				names = append(names, p.marks[i].Name)
			}
			p.mu.Unlock()
			// Twilio and Telnyx send the pending marks back on a clear;
			// Plivo drops them and says clearedAudio.
			for _, msg := range p.d.cleared(names) {
				_ = p.Send(ctx, msg)
			}
		}
	}
}

func (p *Phone) sendMark(ctx context.Context, name string) {
	_ = p.Send(ctx, p.d.played(name))
}

// tick plays what was received and sends the caller's line, 20 ms at a
// time, on the phone's own clock.
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
			// The phone's audio clock runs at its rate whatever the
			// scheduler does: a late tick plays, echoes and sends every
			// frame that fell due meanwhile, as a sound card's fixed
			// clock would, so that the line's echo keeps its delay.
			for due := int64(now.Sub(start) / (20 * time.Millisecond)); chunk < due; {
				chunk++
				at := start.Add(time.Duration(chunk) * 20 * time.Millisecond)
				p.playFrame(ctx, at, out, payload)
				_ = p.sendMedia(ctx, chunk, at.Sub(start).Milliseconds(), payload)
			}
		}
	}
}

// playFrame plays the next 20 ms of what the phone was sent at at, sends
// back the marks now played, and fills payload with what goes up the
// line: the caller's voice and the echo of what played.
func (p *Phone) playFrame(ctx context.Context, at time.Time, out []int16, payload []byte) {
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
	p.heard = append(p.heard, heardFrame{at: at, loud: loud})
	// Marks whose audio has now all played come back.
	var due []string
	for len(p.queued) > 0 && p.marks[p.queued[0]].Pos <= p.received-int64(len(p.buf)) {
		i := p.queued[0]
		p.queued = p.queued[1:]
		p.marks[i].Played, p.marks[i].At = true, at
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
				p.onset = at
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
}

// sendMedia sends one media message, built in place: a phone sends fifty
// a second, and a load test runs hundreds of phones.
func (p *Phone) sendMedia(ctx context.Context, chunk, ts int64, payload []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.seq++
	p.mbuf = p.d.appendMedia(p.mbuf[:0], p.seq, p.streamSid, chunk, ts, payload)
	return p.conn.Write(ctx, websocket.MessageText, p.mbuf)
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
	return p.Send(ctx, p.d.dtmf(digit))
}

// Hangup ends the stream as the carrier does when the caller hangs up
// (Twilio's and Telnyx's stop; Plivo closes the socket), and waits for
// the stream to close.
func (p *Phone) Hangup(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		if msg := p.d.stop(p.cfg.CallSid); msg != nil {
			err = p.Send(ctx, msg)
			return
		}
		// An error here is a stream closed already (by the server,
		// say): either way it is closed.
		_ = p.conn.Close(websocket.StatusNormalClosure, "")
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

// ParseAnswer reads a voice webhook's answer as carrier c does: the
// stream's URL and the parameters it hands the stream. An answer c would
// not stream as a conversation (Telnyx's mp3 mode, Plivo's linear audio)
// is an error.
func ParseAnswer(c Carrier, body string) (streamURL string, params map[string]string, err error) {
	return Config{Carrier: c}.dialect().answer(body)
}
