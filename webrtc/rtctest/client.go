package rtctest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/pion/interceptor"
	pion "github.com/pion/webrtc/v4"

	"github.com/holdline/holdline/events"
)

const (
	rate      = 48000
	frame     = rate / 50 // 20 ms
	frameTime = 20 * time.Millisecond
)

// Level is the loudness of one packet of the agent's audio as received.
type Level struct {
	At        time.Time // when the packet arrived
	RMS       float64   // 0..1 of full scale
	Timestamp uint32    // the packet's RTP timestamp: a jump is a pause of the sender
	Conn      int       // the connection it came on: 0 for Dial's, one more for each move
}

// Options for Dial.
type Options struct {
	// Token is the server's bearer token, if it needs one.
	Token string
	// ResumeToken resumes the session it names (a Client's ResumeToken
	// from an earlier connection).
	ResumeToken string
	// After is the last event seq already seen (hello's "after").
	After uint64
	// NoHello keeps the client from asking for events.
	NoHello bool
	// NoFollow keeps the client from following a draining server's
	// {"type":"move"}: by default it re-offers with the move's token, as
	// the web client does, and swaps to the new connection once it is up.
	NoFollow bool
	// HTTPClient posts the offers (default http.DefaultClient): one with
	// a cookie jar keeps a front door's affinity.
	HTTPClient *http.Client
	// Interfaces are the network interfaces the client offers candidates
	// on (default: loopback only, for a server on this machine); a client
	// in a network namespace of its own names its interface there.
	Interfaces []string
}

// Move is one move a draining server asked of the client.
type Move struct {
	At        time.Time // the move message arrived
	Gathered  time.Time // the new offer was ready (its candidates gathered)
	Answered  time.Time // the worker the front door chose answered it
	Connected time.Time // the new connection was up (zero if it never was)
	// Gap is how long the caller was on no worker: from the old
	// connection's last audio (or the move message, if later: the old
	// worker stops the session before it sends it) to the new connection
	// up, media and data channel. Nothing the caller said in it was heard,
	// and nothing the agent would have said could be. (Packets alone
	// cannot tell it: a worker sends none while its agent is silent.)
	Gap time.Duration
	Err error // why the move failed, if it did
}

// Client is one caller of a Holdline server, on one connection at a time:
// a move (or nothing else) replaces it. Its methods are safe for
// concurrent use.
type Client struct {
	// Location is the session's path, from the first answer's Location
	// header ("/v1/sessions/{id}").
	Location string
	// ResumeToken resumes the session on a new connection
	// (Options.ResumeToken); the server rotates it with every connection.
	// After a move, Session has the current one.
	ResumeToken string
	// Resumed says the server resumed a session rather than starting one.
	Resumed bool
	// Links are the answer's Link headers: the ICE servers the server
	// names (RFC 9725 section 4.6).
	Links []string

	base string
	opts Options
	mic  *Microphone
	spk  *Speaker

	mu        sync.Mutex
	cur       *conn
	wake      chan struct{}
	evs       []events.Event
	seen      map[uint64]bool
	maxSeq    uint64
	captions  []string
	errs      []string
	moves     []Move
	following bool          // a move is under way: the old connection's end is no hang-up
	session   answerHeaders // the latest answer's

	stop   chan struct{}
	hungUp chan struct{} // closed once the server ended the connection
	hangup sync.Once
	wg     sync.WaitGroup
}

// conn is one connection of a Client.
type conn struct {
	n   int // 0 for Dial's, then one more for each move
	pc  *pion.PeerConnection
	dc  *pion.DataChannel
	hdr answerHeaders
	// gathered and answered are when the offer was ready and when the
	// server's answer came.
	gathered, answered time.Time
}

type answerHeaders struct {
	location, resumeToken string
	resumed               bool
	links                 []string
}

// ErrStatus is returned for a refused offer, or a refused Delete; Status
// and Reason say how.
type ErrStatus struct {
	Status int    // the HTTP status, e.g. 503 when the server is full
	Reason string // the body the server sent with it, trimmed
}

// Error says the status and the reason.
func (e *ErrStatus) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Reason) }

var api = newAPI([]string{"lo"})

// newAPI is a pion API whose candidates are on interfaces only, IPv4 UDP.
func newAPI(interfaces []string) *pion.API {
	m := &pion.MediaEngine{}
	if err := m.RegisterCodec(pion.RTPCodecParameters{
		RTPCodecCapability: pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: rate, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1"},
		PayloadType:        111,
	}, pion.RTPCodecTypeAudio); err != nil {
		panic(err)
	}
	ir := &interceptor.Registry{}
	if err := pion.RegisterDefaultInterceptors(m, ir); err != nil {
		panic(err)
	}
	var se pion.SettingEngine
	se.SetNetworkTypes([]pion.NetworkType{pion.NetworkTypeUDP4})
	se.SetIncludeLoopbackCandidate(slices.Contains(interfaces, "lo"))
	se.SetInterfaceFilter(func(name string) bool { return slices.Contains(interfaces, name) })
	return pion.NewAPI(pion.WithMediaEngine(m), pion.WithInterceptorRegistry(ir), pion.WithSettingEngine(se))
}

// Dial connects to the server at base (http://host:port) and waits until
// media and the data channel are up, or ctx ends: it posts an offer to
// base+"/v1/sessions", and says hello on the data channel (unless
// o.NoHello), so that the session's events come. The server must be on
// this machine: the client offers loopback candidates only. Close the
// Client when done.
func Dial(ctx context.Context, base string, o Options) (*Client, error) {
	c := &Client{base: base, opts: o, wake: make(chan struct{}), seen: map[uint64]bool{}, stop: make(chan struct{}), hungUp: make(chan struct{})}
	var err error
	c.spk = NewSpeaker(func() {
		c.mu.Lock()
		c.notify()
		c.mu.Unlock()
	})
	if c.mic, err = NewMicrophone("rtctest"); err != nil {
		return nil, err
	}
	cn, err := c.connect(ctx, 0, o.ResumeToken, o.After)
	if err != nil {
		c.closeOnce()
		return nil, err
	}
	c.mu.Lock()
	c.cur = cn
	c.session = cn.hdr
	c.mu.Unlock()
	c.Location, c.ResumeToken, c.Resumed, c.Links = cn.hdr.location, cn.hdr.resumeToken, cn.hdr.resumed, cn.hdr.links
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.mic.Run(c.stop)
	}()
	return c, nil
}

// connect makes connection n: an offer posted with resumeToken, the
// answer applied, media and the data channel up.
func (c *Client) connect(ctx context.Context, n int, resumeToken string, after uint64) (*conn, error) {
	a := api
	if len(c.opts.Interfaces) > 0 {
		a = newAPI(c.opts.Interfaces)
	}
	pc, err := a.NewPeerConnection(pion.Configuration{})
	if err != nil {
		return nil, err
	}
	cn := &conn{n: n, pc: pc}
	ok := false
	defer func() {
		if !ok {
			pc.Close()
		}
	}()
	if _, err := pc.AddTransceiverFromTrack(c.mic.Track(), pion.RTPTransceiverInit{Direction: pion.RTPTransceiverDirectionSendrecv}); err != nil {
		return nil, err
	}
	cn.dc, err = pc.CreateDataChannel("holdline", nil)
	if err != nil {
		return nil, err
	}
	opened := make(chan struct{})
	cn.dc.OnOpen(func() {
		if !c.opts.NoHello {
			b, _ := json.Marshal(map[string]any{"type": "hello", "after": after})
			_ = cn.dc.SendText(string(b))
		}
		close(opened)
	})
	cn.dc.OnMessage(func(m pion.DataChannelMessage) { c.onMessage(cn, m.Data) })
	cn.dc.OnClose(func() { c.ended(cn) })
	connected := make(chan struct{})
	var once sync.Once
	pc.OnConnectionStateChange(func(s pion.PeerConnectionState) {
		switch s {
		case pion.PeerConnectionStateConnected:
			once.Do(func() { close(connected) })
		case pion.PeerConnectionStateClosed, pion.PeerConnectionStateFailed:
			c.ended(cn)
		}
	})
	pc.OnTrack(func(tr *pion.TrackRemote, _ *pion.RTPReceiver) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.spk.listen(tr, n)
		}()
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return nil, err
	}
	gathered := pion.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		return nil, err
	}
	select {
	case <-gathered:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cn.gathered = time.Now()
	answer, hdr, err := c.post(ctx, resumeToken, pc.LocalDescription().SDP)
	if err != nil {
		return nil, err
	}
	cn.hdr, cn.answered = hdr, time.Now()
	if err := pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeAnswer, SDP: answer}); err != nil {
		return nil, err
	}
	for _, ch := range []chan struct{}{connected, opened} {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting: %w", ctx.Err())
		}
	}
	ok = true
	return cn, nil
}

// ended is connection cn going down: a hang-up by the server if it is
// the current one (not one a move replaced).
func (c *Client) ended(cn *conn) {
	c.mu.Lock()
	current := c.cur == cn && !c.following
	c.mu.Unlock()
	if !current {
		return
	}
	select {
	case <-c.stop: // Close: this side hung up
	default:
		c.hangup.Do(func() { close(c.hungUp) })
	}
}

func (c *Client) post(ctx context.Context, resumeToken, offer string) (string, answerHeaders, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/sessions", bytes.NewBufferString(offer))
	if err != nil {
		return "", answerHeaders{}, err
	}
	req.Header.Set("Content-Type", "application/sdp")
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if resumeToken != "" {
		req.Header.Set("Holdline-Resume-Token", resumeToken)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return "", answerHeaders{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", answerHeaders{}, &ErrStatus{Status: resp.StatusCode, Reason: string(bytes.TrimSpace(body))}
	}
	return string(body), answerHeaders{
		location:    resp.Header.Get("Location"),
		resumeToken: resp.Header.Get("Holdline-Resume-Token"),
		resumed:     resp.Header.Get("Holdline-Session-Resumed") == "true",
		links:       resp.Header.Values("Link"),
	}, nil
}

func (c *Client) httpClient() *http.Client {
	if c.opts.HTTPClient != nil {
		return c.opts.HTTPClient
	}
	return http.DefaultClient
}

// moveTimeout bounds following one move.
const moveTimeout = 20 * time.Second

// moveRetry is how long the client waits before offering again when the
// offer of a move is refused with 503 (no front door took it elsewhere).
const moveRetry = 250 * time.Millisecond

// follow re-offers with a move's token, and swaps to the new connection
// once it is up; the old one is closed then.
func (c *Client) follow(token string) {
	defer c.wg.Done()
	c.mu.Lock()
	i := len(c.moves)
	c.moves = append(c.moves, Move{At: time.Now()})
	c.following = true
	old := c.cur
	after := c.maxSeq
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), moveTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var cn *conn
	var err error
	for {
		if cn, err = c.connect(ctx, old.n+1, token, after); err == nil {
			break
		}
		var st *ErrStatus
		if !errors.As(err, &st) || st.Status != http.StatusServiceUnavailable {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(moveRetry):
			continue
		}
		break
	}
	c.mu.Lock()
	c.following = false
	if err != nil {
		c.moves[i].Err = err
		c.notify()
		c.mu.Unlock()
		// The old connection is all there is: its end is the call's.
		if old.pc.ConnectionState() == pion.PeerConnectionStateClosed {
			c.ended(old)
		}
		return
	}
	c.moves[i].Connected = time.Now()
	c.moves[i].Gathered, c.moves[i].Answered = cn.gathered, cn.answered
	c.cur = cn
	c.session = cn.hdr
	c.notify()
	c.mu.Unlock()
	old.pc.Close()
}

// Session returns the session's path and its current resume token: after
// a move, the new worker's.
func (c *Client) Session() (location, resumeToken string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session.location, c.session.resumeToken
}

// Moves returns the moves the server asked for, with the gap the caller
// heard in each.
func (c *Client) Moves() []Move {
	c.mu.Lock()
	moves := slices.Clone(c.moves)
	c.mu.Unlock()
	levels := c.spk.Levels()
	for i := range moves {
		if moves[i].Connected.IsZero() {
			continue
		}
		from := moves[i].At
		for _, lv := range levels {
			if lv.Conn == i && lv.At.After(from) {
				from = lv.At
			}
		}
		moves[i].Gap = moves[i].Connected.Sub(from)
	}
	return moves
}

func (c *Client) current() *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

func (c *Client) notify() {
	close(c.wake)
	c.wake = make(chan struct{})
}

func (c *Client) onMessage(from *conn, b []byte) {
	var m struct {
		Type  string       `json:"type"`
		Event events.Event `json:"event"`
		Text  string       `json:"text"`
		Error string       `json:"error"`
		Token string       `json:"token"`
	}
	if json.Unmarshal(b, &m) != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m.Type {
	case "event":
		if !c.seen[m.Event.Seq] || m.Event.Kind == events.EventsDropped {
			c.seen[m.Event.Seq] = true
			c.evs = append(c.evs, m.Event)
			c.maxSeq = max(c.maxSeq, m.Event.Seq)
		}
	case "move":
		if c.opts.NoFollow || from != c.cur || m.Token == "" {
			break
		}
		select {
		case <-c.stop:
		default:
			c.wg.Add(1)
			go c.follow(m.Token)
		}
	case "caption":
		c.captions = append(c.captions, m.Text)
	case "error":
		c.errs = append(c.errs, m.Error)
	}
	c.notify()
}

// Say queues 48 kHz audio for the microphone, after what is queued; it
// is sent in 20 ms packets at real time, silence when nothing is queued.
func (c *Client) Say(samples []int16) { c.mic.Say(samples) }

// Tone returns d of a 220 Hz tone with harmonics at level (0..1), at
// 48 kHz: loud and voiced enough for any voice detector.
func Tone(d time.Duration, level float64) []int16 {
	n := int(d * rate / time.Second)
	out := make([]int16, n)
	for i := range out {
		t := float64(i) / rate
		v := math.Sin(2*math.Pi*220*t) + 0.5*math.Sin(2*math.Pi*440*t) + 0.25*math.Sin(2*math.Pi*660*t)
		out[i] = int16(level / 1.75 * 32767 * v)
	}
	return out
}

// Silence returns d of silence at 48 kHz.
func Silence(d time.Duration) []int16 { return make([]int16, int(d*rate/time.Second)) }

// Onsets returns when the microphone went from silence to sound.
func (c *Client) Onsets() []time.Time { return c.mic.Onsets() }

// Offsets returns when the microphone went from sound to silence: each
// time, the moment the last packet with sound was sent. With Onsets they
// say when the caller spoke, as the server was sent it; a packet has sound
// when its level is above Loud.
func (c *Client) Offsets() []time.Time { return c.mic.Offsets() }

// Levels returns the level of every packet of agent audio received, in
// order.
func (c *Client) Levels() []Level { return c.spk.Levels() }

// Events returns the session events received on the data channel, in
// order, each once.
func (c *Client) Events() []events.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.Event(nil), c.evs...)
}

// Captions returns the captions received: the words the agent is
// speaking, sent while it speaks.
func (c *Client) Captions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.captions...)
}

// Errors returns the error messages the server sent.
func (c *Client) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// Wait waits until cond holds, checking it whenever something arrives
// (an event, a caption, an error, a packet of audio), or until ctx ends;
// what names the awaited thing in the error.
func (c *Client) Wait(ctx context.Context, what string, cond func(c *Client) bool) error {
	for {
		c.mu.Lock()
		wake := c.wake
		c.mu.Unlock()
		if cond(c) {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// WaitEvent waits for an event matching match, among those received so far
// and those to come, and returns the first.
func (c *Client) WaitEvent(ctx context.Context, match func(events.Event) bool) (events.Event, error) {
	var got events.Event
	err := c.Wait(ctx, "an event", func(c *Client) bool {
		for _, e := range c.Events() {
			if match(e) {
				got = e
				return true
			}
		}
		return false
	})
	return got, err
}

// SendText sends typed input on the data channel, as the web page's text
// box does; the agent answers it as a turn.
func (c *Client) SendText(text string) error {
	b, _ := json.Marshal(map[string]any{"type": "text", "text": text})
	return c.current().dc.SendText(string(b))
}

// Send sends a raw data channel message, for testing what the server does
// with messages it does not expect.
func (c *Client) Send(msg string) error { return c.current().dc.SendText(msg) }

// HungUp is closed once the server ended the connection (the call was
// ended on its side: the agent hung up, DELETE), not when Close did.
func (c *Client) HungUp() <-chan struct{} { return c.hungUp }

// Close hangs up this connection (the session waits to be resumed).
func (c *Client) Close() error {
	c.closeOnce()
	var err error
	if cn := c.current(); cn != nil {
		err = cn.pc.Close()
	}
	c.wg.Wait()
	// A move under way when Close came may have swapped in a connection.
	if cn := c.current(); cn != nil {
		cn.pc.Close()
	}
	return err
}

func (c *Client) closeOnce() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
}

// Delete ends the session on the server (DELETE base+Location, with the
// bearer token if not empty). It does not close the connection.
func (c *Client) Delete(ctx context.Context, base, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, base+c.Location, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return &ErrStatus{Status: resp.StatusCode}
	}
	return nil
}
