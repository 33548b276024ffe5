package livekittest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	lkproto "github.com/livekit/protocol/livekit"
	lklogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	pionmedia "github.com/pion/webrtc/v4/pkg/media"

	pion "github.com/pion/webrtc/v4"

	"github.com/holdline/holdline/webrtc/rtctest"
)

// The topics and attributes of LiveKit's agents that the caller watches.
const (
	TopicTranscription = "lk.transcription"
	TopicChat          = "lk.chat"
	AttrAgentState     = "lk.agent.state"
)

// The SDK's pion loggers go to its global logger, which logs every level
// to stderr: a test's output would be mostly that. Set before any test
// runs, since the SDK reads it unguarded whenever a room is made.
func init() { lksdk.SetLogger(lklogger.GetDiscardLogger()) }

// Caller is a normal participant in a room, as a phone or browser caller
// is: it speaks on a microphone track, hears every audio track it is
// subscribed to, and records the text streams, data packets and
// attribute changes it sees, each with the time it arrived.
type Caller struct {
	Identity string
	Room     *lksdk.Room

	mic  *rtctest.Microphone
	stop chan struct{}

	mu       sync.Mutex
	closed   bool
	wg       sync.WaitGroup // the microphone, the listeners, the stream readers
	notify   chan struct{}  // closed and replaced on every record
	speakers map[string][]*rtctest.Speaker
	streams  []*TextStream
	attrs    []AttributeChange
	dtmf     []DTMF
}

// TextStream is a text stream the caller received.
type TextStream struct {
	ID         string
	Topic      string
	Sender     string // the identity it was sent under
	Attributes map[string]string
	Started    time.Time
	Chunks     []Chunk
	Text       string // all of it so far
	Done       bool   // the stream was closed
}

// Chunk is part of a text stream, as read when it arrived.
type Chunk struct {
	At   time.Time
	Text string
}

// AttributeChange is a change of a remote participant's attributes (or
// its attributes when it joined), as the caller saw it.
type AttributeChange struct {
	At       time.Time
	Identity string
	Kind     lkproto.ParticipantInfo_Kind
	Changed  map[string]string // a deleted attribute has ""
}

// DTMF is a SIP DTMF packet the caller received.
type DTMF struct {
	At     time.Time
	Sender string
	Code   uint32
	Digit  string
}

// CallerOption configures DialCaller.
type CallerOption func(*callerConfig)

type callerConfig struct {
	attrs    map[string]string
	metadata string
}

// WithAttributes gives the caller attributes when it joins.
func WithAttributes(attrs map[string]string) CallerOption {
	return func(c *callerConfig) { c.attrs = attrs }
}

// WithMetadata gives the caller metadata when it joins.
func WithMetadata(metadata string) CallerOption {
	return func(c *callerConfig) { c.metadata = metadata }
}

// DialCaller joins room on srv as identity and publishes its microphone.
func DialCaller(ctx context.Context, srv *Server, room, identity string, opts ...CallerOption) (_ *Caller, err error) {
	var cfg callerConfig
	for _, o := range opts {
		o(&cfg)
	}
	c := &Caller{Identity: identity, stop: make(chan struct{}), notify: make(chan struct{}), speakers: map[string][]*rtctest.Speaker{}}
	cb := lksdk.NewRoomCallback()
	cb.OnTrackSubscribed = c.onTrack
	cb.OnParticipantConnected = func(p *lksdk.RemoteParticipant) {
		c.recordAttrs(p, p.Attributes())
	}
	cb.OnAttributesChanged = func(changed map[string]string, p lksdk.Participant) {
		if p.Identity() != c.Identity {
			c.recordAttrs(p, changed)
		}
	}
	cb.OnDataPacket = func(data lksdk.DataPacket, params lksdk.DataReceiveParams) {
		if d, ok := data.(*lkproto.SipDTMF); ok {
			c.record(func() {
				c.dtmf = append(c.dtmf, DTMF{At: time.Now(), Sender: params.SenderIdentity, Code: d.Code, Digit: d.Digit})
			})
		}
	}
	c.Room = lksdk.NewRoom(cb)
	for _, topic := range []string{TopicTranscription, TopicChat} {
		if err := c.Room.RegisterTextStreamHandler(topic, c.onText); err != nil {
			return nil, fmt.Errorf("livekittest: %w", err)
		}
	}
	// Attributes and metadata go in the token.
	info := lksdk.ConnectInfo{APIKey: srv.APIKey, APISecret: srv.APISecret, RoomName: room, ParticipantIdentity: identity,
		ParticipantMetadata: cfg.metadata, ParticipantAttributes: cfg.attrs}
	if err := c.Room.JoinWithContext(ctx, srv.URL, info, lksdk.WithAutoSubscribe(true), lksdk.WithLogger(lklogger.GetDiscardLogger())); err != nil {
		return nil, fmt.Errorf("livekittest: %s joining room %s: %w", identity, room, err)
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	// The participants already there joined before the callback could
	// see them.
	for _, p := range c.Room.GetRemoteParticipants() {
		c.recordAttrs(p, p.Attributes())
	}
	if c.mic, err = rtctest.NewMicrophone(identity); err != nil {
		return nil, err
	}
	if _, err := c.Room.LocalParticipant.PublishTrack(c.mic.Track(), &lksdk.TrackPublicationOptions{Name: "microphone", Source: lkproto.TrackSource_MICROPHONE}); err != nil {
		return nil, fmt.Errorf("livekittest: publishing %s's microphone: %w", identity, err)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.mic.Run(c.stop)
	}()
	return c, nil
}

// add counts a goroutine the caller owns; false once it is closing.
func (c *Caller) add() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

func (c *Caller) onTrack(tr *pion.TrackRemote, _ *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
	if tr.Kind() != pion.RTPCodecTypeAudio || !c.add() {
		return
	}
	s := rtctest.NewSpeaker(c.wake)
	c.record(func() { c.speakers[rp.Identity()] = append(c.speakers[rp.Identity()], s) })
	go func() {
		defer c.wg.Done()
		s.Listen(tr)
	}()
}

// onText runs on a goroutine of lksdk's; the room's Disconnect closes the
// reader, which ends it.
func (c *Caller) onText(r *lksdk.TextStreamReader, sender string) {
	if !c.add() {
		return
	}
	defer c.wg.Done()
	ts := &TextStream{ID: r.Info.Id, Topic: r.Info.Topic, Sender: sender, Attributes: maps.Clone(r.Info.Attributes), Started: time.Now()}
	c.record(func() { c.streams = append(c.streams, ts) })
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			chunk := Chunk{At: time.Now(), Text: string(buf[:n])}
			c.record(func() {
				ts.Chunks = append(ts.Chunks, chunk)
				ts.Text += chunk.Text
			})
		}
		if err == io.EOF {
			// The trailer's attributes (lk.transcription_final) are
			// merged into the reader's by the time it ends.
			attrs := maps.Clone(r.Info.Attributes)
			c.record(func() { ts.Done, ts.Attributes = true, attrs })
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *Caller) recordAttrs(p lksdk.Participant, changed map[string]string) {
	ch := AttributeChange{At: time.Now(), Identity: p.Identity(), Kind: lkproto.ParticipantInfo_Kind(p.Kind()), Changed: maps.Clone(changed)}
	c.record(func() { c.attrs = append(c.attrs, ch) })
}

// record applies f under the lock and wakes the waiters.
func (c *Caller) record(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
	c.wake()
}

func (c *Caller) wake() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.notify)
	c.notify = make(chan struct{})
}

// Wait waits until cond holds (checked whenever the caller records
// something, and every 50 ms) or ctx ends; what names it in the error.
func (c *Caller) Wait(ctx context.Context, what string, cond func(c *Caller) bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		ch := c.notify
		c.mu.Unlock()
		if cond(c) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("livekittest: %s waiting for %s: %w", c.Identity, what, ctx.Err())
		case <-ch:
		case <-tick.C:
		}
	}
}

// Say queues 48 kHz audio on the microphone; it is sent in 20 ms packets
// at real time.
func (c *Caller) Say(samples []int16) { c.mic.Say(samples) }

// Onsets and Offsets are when the microphone went from silence to sound
// and back.
func (c *Caller) Onsets() []time.Time  { return c.mic.Onsets() }
func (c *Caller) Offsets() []time.Time { return c.mic.Offsets() }

// Levels returns the level of every packet heard from identity's audio
// tracks ("": everyone's), in the order they arrived.
func (c *Caller) Levels(identity string) []rtctest.Level {
	c.mu.Lock()
	var sp []*rtctest.Speaker
	for id, s := range c.speakers {
		if identity == "" || id == identity {
			sp = append(sp, s...)
		}
	}
	c.mu.Unlock()
	var out []rtctest.Level
	for _, s := range sp {
		out = append(out, s.Levels()...)
	}
	slices.SortStableFunc(out, func(a, b rtctest.Level) int { return a.At.Compare(b.At) })
	return out
}

// Heard says whether a packet of identity's audio louder than
// rtctest.Loud arrived after from.
func (c *Caller) Heard(identity string, from time.Time) bool {
	for _, l := range c.Levels(identity) {
		if l.At.After(from) && l.RMS > rtctest.Loud {
			return true
		}
	}
	return false
}

// TextStreams returns copies of the text streams received on topic ("":
// all), in the order they began.
func (c *Caller) TextStreams(topic string) []TextStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []TextStream
	for _, s := range c.streams {
		if topic == "" || s.Topic == topic {
			cp := *s
			cp.Chunks = slices.Clone(s.Chunks)
			out = append(out, cp)
		}
	}
	return out
}

// Transcriptions is TextStreams(TopicTranscription).
func (c *Caller) Transcriptions() []TextStream { return c.TextStreams(TopicTranscription) }

// AttributeChanges returns the attribute changes of the remote
// participants, in order.
func (c *Caller) AttributeChanges() []AttributeChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.attrs)
}

// StateChange is a value an attribute took.
type StateChange struct {
	At       time.Time
	Identity string
	State    string
}

// AgentStates returns the values lk.agent.state took on agent
// participants, in order.
func (c *Caller) AgentStates() []StateChange {
	var out []StateChange
	for _, a := range c.AttributeChanges() {
		if v, ok := a.Changed[AttrAgentState]; ok && a.Kind == lkproto.ParticipantInfo_AGENT {
			out = append(out, StateChange{At: a.At, Identity: a.Identity, State: v})
		}
	}
	return out
}

// DTMFs returns the DTMF packets received, in order.
func (c *Caller) DTMFs() []DTMF {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.dtmf)
}

// SendChat sends text as a text stream on lk.chat, as typed input.
func (c *Caller) SendChat(text string) {
	c.Room.LocalParticipant.SendText(text, lksdk.StreamTextOptions{Topic: TopicChat})
}

// SendDTMF sends a SIP DTMF packet: code is the RFC 4733 event (0-9, 10
// for *, 11 for #), digit the key.
func (c *Caller) SendDTMF(code uint32, digit string) error {
	if err := c.Room.LocalParticipant.PublishDTMF(code, digit); err != nil {
		return fmt.Errorf("livekittest: %s sending DTMF %s: %w", c.Identity, digit, err)
	}
	return nil
}

// PublishVideo publishes a VP8 camera track and sends a few frames (about
// a third of a second), for tests of an agent given input it does not
// take. The frames have a VP8 key-frame header and no picture.
func (c *Caller) PublishVideo(ctx context.Context) error {
	track, err := pion.NewTrackLocalStaticSample(pion.RTPCodecCapability{MimeType: pion.MimeTypeVP8, ClockRate: 90000}, "video", c.Identity+"-video")
	if err != nil {
		return err
	}
	if _, err := c.Room.LocalParticipant.PublishTrack(track, &lksdk.TrackPublicationOptions{Name: "camera", Source: lkproto.TrackSource_CAMERA, VideoWidth: 16, VideoHeight: 16}); err != nil {
		return fmt.Errorf("livekittest: publishing %s's camera: %w", c.Identity, err)
	}
	// A key frame's tag (key frame, version 0, shown, first partition of
	// 16 bytes), the start code, 16×16, then zeros.
	frame := append([]byte{0x50, 0x02, 0x00, 0x9d, 0x01, 0x2a, 16, 0, 16, 0}, make([]byte, 32)...)
	tick := time.NewTicker(33 * time.Millisecond)
	defer tick.Stop()
	for range 10 {
		if err := track.WriteSample(pionmedia.Sample{Data: frame, Duration: 33 * time.Millisecond}); err != nil {
			return fmt.Errorf("livekittest: %s's video: %w", c.Identity, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// Close leaves the room and waits for the caller's goroutines.
func (c *Caller) Close() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if already {
		return
	}
	close(c.stop)
	c.Room.Disconnect()
	c.wg.Wait()
}
