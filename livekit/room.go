package livekit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lkproto "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	pion "github.com/pion/webrtc/v4"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/opusrtp"
	"github.com/holdline/holdline/runtime/engine"
)

const (
	// callTimeout bounds one request to the session core from a callback
	// of the room (typed input, a key press).
	callTimeout = 2 * time.Second
	// rejoinMin and rejoinMax bound the wait between attempts to join the
	// room again after the agent's connection to the server was lost.
	rejoinMin = 500 * time.Millisecond
	rejoinMax = 5 * time.Second
	// aliasTTL is how long a room's alias outlives its call in the store:
	// the time LiveKit has to give a dead worker's job to another.
	aliasTTL = 2 * time.Minute
	// maxChatReaders bounds the lk.chat streams read at once: a reader
	// waits for its stream's end, which a client decides.
	maxChatReaders = 4
	// agentTrackName names the agent's audio track in the room.
	agentTrackName = "agent_voice"
	// mimeTypeRED is a publication of redundant Opus (RFC 2198), as LiveKit's
	// JavaScript client publishes a microphone unless told otherwise.
	mimeTypeRED = "audio/red"
)

// Attributes and topics of LiveKit's agent conventions.
const (
	AttrAgentState        = "lk.agent.state"
	AttrSegmentID         = "lk.segment_id"
	AttrTranscribedTrack  = "lk.transcribed_track_id"
	AttrTranscriptionDone = "lk.transcription_final"
	TopicTranscription    = "lk.transcription"
	TopicChat             = "lk.chat"
)

// The agent's states, as lk.agent.state says them.
const (
	StateInitializing = "initializing"
	StateListening    = "listening"
	StateThinking     = "thinking"
	StateSpeaking     = "speaking"
)

// errLeft ends a room's serve when the agent leaves it.
var errLeft = errors.New("livekit: left the room")

// room is one job: the agent in one LiveKit room, and its call.
type room struct {
	t   *Transport
	job Job
	log *slog.Logger

	lk  atomic.Pointer[lksdk.Room]     // the current connection; nil between connections
	out atomic.Pointer[opusrtp.Sender] // the agent's track on the current connection
	// agentTrack is the SID of the agent's published track, for the
	// agent's transcriptions.
	agentTrack atomic.Value // string

	callerC    chan struct{} // closed once the caller is chosen
	callerOnce sync.Once
	startedC   chan struct{} // closed once the call has started (hc is set)
	leftC      chan struct{} // closed as the agent leaves the room
	lostC      chan struct{} // the connection to the server ended (one pending signal)
	chatSem    chan struct{}

	pushMu sync.Mutex // PushAudio from one receiver at a time

	mu         sync.Mutex
	caller     string // the caller's identity, once chosen
	callerKind lksdk.ParticipantKind
	callerPub  string // the SID of the caller's audio track the agent listens to
	rxStop     chan struct{}
	hc         *calls.Call
	up         bool // the caller's audio flows
	leaving    bool
	ignored    map[string]bool // what was logged as ignored, once each
	state      string          // the lk.agent.state last set

	wg sync.WaitGroup // the goroutines the room started
}

// Serve joins the job's room as the agent and serves its call until the
// call ends, the agent leaves, or ctx ends. When ctx ends first (the job
// was terminated, the worker is going away), the call is released with
// its checkpoint kept, for the worker LiveKit gives the job to next.
//
// It returns ErrNoCaller when nobody joins the room in time, and an error
// when the room cannot be joined.
func (t *Transport) Serve(ctx context.Context, job Job) error {
	if job.URL == "" || job.Token == "" {
		return errors.New("livekit: a job needs the server's URL and a token")
	}
	r := &room{
		t: t, job: job,
		log:      t.cfg.log.With("room", job.Room, "job", job.ID),
		callerC:  make(chan struct{}),
		startedC: make(chan struct{}),
		leftC:    make(chan struct{}),
		lostC:    make(chan struct{}, 1),
		chatSem:  make(chan struct{}, maxChatReaders),
		ignored:  map[string]bool{},
	}
	r.agentTrack.Store("")
	if err := r.join(ctx); err != nil {
		return err
	}
	defer r.leave()
	timer := time.NewTimer(t.cfg.callerTimeout)
	defer timer.Stop()
	select {
	case <-r.callerC:
	case <-timer.C:
		return fmt.Errorf("%w within %v", ErrNoCaller, t.cfg.callerTimeout)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	hc, err := r.start(ctx)
	if err != nil {
		return err
	}
	r.wg.Go(func() { r.forward(hc) })
	for {
		select {
		case <-hc.Done():
			return nil
		case <-ctx.Done():
			hc.Release("the job ended: " + context.Cause(ctx).Error())
			<-hc.Done()
			return nil
		case <-r.lostC:
			// The SDK gave up on its own reconnection: the agent is
			// out of the room. The call waits its resume window while
			// the room is joined again.
			r.dropCaller()
			hc.Lost()
			r.rejoin(ctx, hc)
		}
	}
}

// start makes the room's call: the conversation the room had, when a
// worker that served it died, else a new one.
func (r *room) start(ctx context.Context) (*calls.Call, error) {
	lk := r.lk.Load()
	alias := roomAlias(lk)
	snap, unclaim := r.t.host.PickUp(ctx, alias, leaseTTL)
	defer unclaim()
	r.mu.Lock()
	caller, kind := r.caller, r.callerKind
	r.mu.Unlock()
	spec := calls.Spec{
		Kind:       Kind,
		Input:      r.input(kind),
		OutputRate: media.Rate24k,
		Resumed:    snap,
		Recovery: calls.Recovery{
			LeaseTTL:       leaseTTL,
			ResumeTTL:      r.t.cfg.resumeTTL,
			ConnectTimeout: r.t.cfg.callerTimeout,
		},
		Facts: map[string]string{"room": r.job.Room, "room_sid": lk.SID(), "caller": caller},
	}
	if snap != nil {
		spec.Origin = calls.Reconnected
	}
	hc, err := r.t.host.Start(ctx, spec, r)
	if err != nil {
		return nil, fmt.Errorf("livekit: starting the call: %w", err)
	}
	r.mu.Lock()
	r.hc = hc
	up := r.up
	r.mu.Unlock()
	close(r.startedC)
	if up {
		hc.Connected()
	}
	hc.KeepAlias(hc.Context(), alias, aliasTTL)
	r.log.Info("call started", "session", hc.ID(), "caller", caller, "origin", spec.Origin.String())
	return hc, nil
}

// roomAlias names a room's conversation in the store: the room's id, which
// a re-dispatched job finds again and a new room of the same name does
// not.
func roomAlias(lk *lksdk.Room) string { return aliasOf(lk.SID()) }

// aliasOf is the alias of the room with id sid.
func aliasOf(sid string) string { return "livekit-room:" + sid }

// input is how a caller's audio is judged: a phone line bridged in by
// LiveKit's SIP service echoes; a browser or an app cancels its own echo.
func (r *room) input(kind lksdk.ParticipantKind) engine.InputConfig {
	phone := lkproto.ParticipantInfo_Kind(kind) == lkproto.ParticipantInfo_SIP
	if phone || r.t.cfg.echoCancelAll {
		return engine.InputConfig{Rate: inputRate}
	}
	return engine.InputConfig{Rate: inputRate, NoEchoCancellation: true, EchoFree: true}
}

// join connects to the room and publishes the agent's track.
func (r *room) join(ctx context.Context) error {
	cb := lksdk.NewRoomCallback()
	cb.OnTrackPublished = r.onTrackPublished
	cb.OnTrackSubscribed = r.onTrackSubscribed
	cb.OnTrackUnpublished = r.onTrackUnpublished
	cb.OnParticipantDisconnected = r.onParticipantLeft
	cb.OnDataPacket = r.onData
	lk := lksdk.NewRoom(cb)
	lk.SetLogger(r.t.sdkLogger(r.log))
	cb.OnReconnecting = func() {
		if r.lk.Load() == lk {
			r.log.Info("the connection to the LiveKit server dropped: reconnecting")
			r.connectionDown()
		}
	}
	cb.OnReconnected = func() {
		if r.lk.Load() == lk {
			r.log.Info("reconnected to the LiveKit server")
			r.resync(lk)
		}
	}
	cb.OnDisconnected = func() {
		// Only the current connection's end matters; leave() clears it
		// first, so that the agent's own leaving is no loss.
		if r.lk.Load() == lk {
			select {
			case r.lostC <- struct{}{}:
			default:
			}
		}
	}
	jctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	if err := lk.JoinWithContextAndToken(jctx, r.job.URL, r.job.Token, lksdk.WithAutoSubscribe(false), lksdk.WithLogger(r.t.sdkLogger(r.log))); err != nil {
		return fmt.Errorf("livekit: joining room %q at %s: %w", r.job.Room, r.job.URL, err)
	}
	track, err := pion.NewTrackLocalStaticRTP(pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "audio", "holdline")
	if err != nil {
		lk.Disconnect()
		return fmt.Errorf("livekit: the agent's track: %w", err)
	}
	pub, err := lk.LocalParticipant.PublishTrack(track, &lksdk.TrackPublicationOptions{Name: agentTrackName, Source: lkproto.TrackSource_MICROPHONE})
	if err != nil {
		lk.Disconnect()
		return fmt.Errorf("livekit: publishing the agent's track: %w", err)
	}
	out := opusrtp.NewSender(track, opusrtp.WithOpus(r.t.cfg.opusComplexity, r.t.cfg.opusBitrate))
	out.SetConnected(true)
	r.out.Store(out)
	r.agentTrack.Store(pub.SID())
	if err := lk.RegisterTextStreamHandler(TopicChat, r.onChat); err != nil {
		r.log.Warn("typed input (lk.chat) is not read", "err", err)
	}
	r.mu.Lock()
	state := r.state
	if state == "" {
		state = StateInitializing
	}
	r.mu.Unlock()
	lk.LocalParticipant.SetAttributes(map[string]string{AttrAgentState: state})
	r.lk.Store(lk)
	// Whoever is in the room already: their tracks were announced before
	// the callbacks could see them.
	for _, rp := range lk.GetRemoteParticipants() {
		for _, tp := range rp.TrackPublications() {
			if pub, ok := tp.(*lksdk.RemoteTrackPublication); ok {
				r.onTrackPublished(pub, rp)
			}
		}
	}
	return nil
}

// rejoin joins the room again, with backoff, until it works or the call
// ends (its resume window ran out).
func (r *room) rejoin(ctx context.Context, hc *calls.Call) {
	if old := r.lk.Swap(nil); old != nil {
		old.Disconnect()
	}
	wait := rejoinMin
	for {
		err := r.join(ctx)
		if err == nil {
			r.log.Info("back in the room")
			return
		}
		r.log.Warn("joining the room again failed", "err", err, "retry_in", wait)
		select {
		case <-hc.Done():
			return
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, rejoinMax)
	}
}

// leave stops the caller's audio and leaves the room, then waits for the
// room's goroutines.
func (r *room) leave() {
	r.mu.Lock()
	r.leaving = true
	r.mu.Unlock()
	close(r.leftC)
	r.dropCaller()
	if lk := r.lk.Swap(nil); lk != nil {
		lk.Disconnect()
	}
	r.wg.Wait()
}

// WriteFrame sends the agent's audio on the room's track; between
// connections it is dropped.
func (r *room) WriteFrame(f media.Frame) error {
	if out := r.out.Load(); out != nil && r.lk.Load() != nil {
		return out.WriteFrame(f)
	}
	return nil
}

// Hangup is the host ending the call: Serve sees it end and leaves.
func (r *room) Hangup(reason string) {
	r.log.Info("call ended", "reason", reason)
}

// onTrackPublished chooses the caller (the job's participant, else the
// first non-agent to publish a microphone) and subscribes to the caller's
// audio; everything else is ignored, once with a log line.
func (r *room) onTrackPublished(pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
	if lkproto.ParticipantInfo_Kind(rp.Kind()) == lkproto.ParticipantInfo_AGENT {
		return
	}
	if pub.Kind() != lksdk.TrackKindAudio {
		r.ignore(rp.Identity()+"/"+pub.SID(), "a track that is not audio is ignored", "participant", rp.Identity(), "kind", pub.Kind())
		return
	}
	// LiveKit's JavaScript client publishes a browser's microphone as RED
	// (audio/red, redundant Opus) by default; the server forwards it as
	// plain Opus to a subscriber that, like this one, offers no RED. The
	// codec the subscription negotiates is checked in onTrackSubscribed.
	if mt := pub.MimeType(); mt != "" && !strings.EqualFold(mt, pion.MimeTypeOpus) && !strings.EqualFold(mt, mimeTypeRED) {
		r.ignore(rp.Identity()+"/"+pub.SID(), "audio that is not Opus is ignored", "participant", rp.Identity(), "codec", mt)
		return
	}
	r.mu.Lock()
	if r.caller == "" && (r.job.Participant == "" || r.job.Participant == rp.Identity()) {
		r.caller, r.callerKind = rp.Identity(), rp.Kind()
		r.callerOnce.Do(func() { close(r.callerC) })
	}
	isCaller := r.caller == rp.Identity()
	second := isCaller && r.callerPub != "" && r.callerPub != pub.SID()
	if isCaller && !second {
		r.callerPub = pub.SID()
	}
	r.mu.Unlock()
	if !isCaller {
		r.ignore(rp.Identity(), "another participant's audio is not heard: the agent listens to its caller", "participant", rp.Identity())
		return
	}
	if second {
		// One caller, one voice: the track the agent listens to stays
		// until it is unpublished.
		r.ignore(rp.Identity()+"/"+pub.SID(), "a second audio track of the caller is ignored", "participant", rp.Identity(), "track", pub.SID())
		return
	}
	if err := pub.SetSubscribed(true); err != nil {
		r.log.Warn("subscribing to the caller's audio failed", "participant", rp.Identity(), "err", err)
	}
}

// ignore logs what the room does not use, once per key.
func (r *room) ignore(key, msg string, args ...any) {
	r.mu.Lock()
	seen := r.ignored[key]
	r.ignored[key] = true
	r.mu.Unlock()
	if !seen {
		r.log.Info(msg, args...)
	}
}

// onTrackSubscribed starts the caller's audio into the call.
func (r *room) onTrackSubscribed(track *pion.TrackRemote, pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
	if track.Kind() != pion.RTPCodecTypeAudio {
		return
	}
	if !strings.EqualFold(track.Codec().MimeType, pion.MimeTypeOpus) {
		r.ignore(rp.Identity()+"/"+pub.SID(), "audio that is not Opus is ignored", "participant", rp.Identity(), "codec", track.Codec().MimeType)
		return
	}
	rx, err := opusrtp.NewReceiver(inputRate, r.push, r.t.cfg.jitter...)
	if err != nil {
		r.log.Error("the caller's audio", "err", err)
		return
	}
	stop := make(chan struct{})
	r.mu.Lock()
	if r.leaving || rp.Identity() != r.caller || pub.SID() != r.callerPub {
		r.mu.Unlock()
		return
	}
	if r.rxStop != nil {
		close(r.rxStop)
	}
	r.rxStop, r.up = stop, true
	hc := r.hc
	// Added under mu, with leaving checked: leave's Wait cannot have
	// started.
	r.wg.Add(2)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		rx.Run(stop)
	}()
	go func() {
		defer r.wg.Done()
		for {
			pkt, _, err := track.ReadRTP()
			if err != nil {
				r.trackEnded(stop)
				return
			}
			select {
			case <-stop:
				return
			default:
			}
			rx.Push(pkt, time.Now())
		}
	}()
	r.log.Info("hearing the caller", "participant", rp.Identity(), "track", pub.SID())
	if hc != nil {
		hc.Connected()
	}
}

// trackEnded: the caller's track the receiver behind stop read has ended
// (the caller's connection, or the agent's, went away); unless it was
// replaced already, the caller's audio is gone.
func (r *room) trackEnded(stop chan struct{}) {
	r.mu.Lock()
	current := r.rxStop == stop
	r.mu.Unlock()
	if current {
		r.callerGone("the caller's audio track ended")
	}
}

// connectionDown: the agent's connection to the server dropped and the
// SDK is getting it back; the caller is not heard meanwhile.
func (r *room) connectionDown() {
	r.mu.Lock()
	hc, up := r.hc, r.up
	r.mu.Unlock()
	if hc != nil && up {
		hc.Lost()
	}
}

// resync follows the room after the SDK got the connection back: if the
// caller's track is still subscribed (a resumed connection), the call is
// connected again; after a full reconnection the tracks are announced
// anew, and onTrackSubscribed does it.
func (r *room) resync(lk *lksdk.Room) {
	r.mu.Lock()
	hc, caller, pubSID, up := r.hc, r.caller, r.callerPub, r.up
	r.mu.Unlock()
	rp := lk.GetParticipantByIdentity(caller)
	if rp == nil {
		r.callerGone("the caller is not in the room after the reconnection")
		return
	}
	for _, tp := range rp.TrackPublications() {
		if pub, ok := tp.(*lksdk.RemoteTrackPublication); ok {
			if pub.SID() == pubSID && pub.TrackRemote() != nil && up && hc != nil {
				hc.Connected()
				return
			}
			r.onTrackPublished(pub, rp)
		}
	}
}

// push hands the session a frame of the caller's audio.
func (r *room) push(f media.Frame) {
	r.mu.Lock()
	hc := r.hc
	r.mu.Unlock()
	if hc == nil {
		return
	}
	r.pushMu.Lock()
	defer r.pushMu.Unlock()
	_ = hc.PushAudio(hc.Context(), f)
}

// onTrackUnpublished: the caller's microphone gone is the connection lost.
func (r *room) onTrackUnpublished(pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
	r.mu.Lock()
	mine := rp.Identity() == r.caller && pub.SID() == r.callerPub
	r.mu.Unlock()
	if mine {
		r.callerGone("the caller's microphone was unpublished")
	}
}

// onParticipantLeft: the caller leaving is the connection lost; the call
// waits its resume window for the caller to join again.
func (r *room) onParticipantLeft(rp *lksdk.RemoteParticipant) {
	r.mu.Lock()
	mine := rp.Identity() == r.caller
	r.mu.Unlock()
	if mine {
		r.callerGone("the caller left the room")
	}
}

func (r *room) callerGone(why string) {
	hc, was := r.dropCaller()
	if was && hc != nil {
		r.log.Info(why)
		hc.Lost()
	}
}

// dropCaller stops the caller's audio; it returns the call and whether
// the audio was flowing.
func (r *room) dropCaller() (*calls.Call, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rxStop != nil {
		close(r.rxStop)
		r.rxStop = nil
	}
	was := r.up
	r.up, r.callerPub = false, ""
	return r.hc, was
}

// onData takes the caller's key presses (LiveKit's SIP bridge sends them
// as SipDTMF packets).
func (r *room) onData(data lksdk.DataPacket, params lksdk.DataReceiveParams) {
	d, ok := data.(*lkproto.SipDTMF)
	if !ok {
		return
	}
	r.mu.Lock()
	hc, caller := r.hc, r.caller
	r.mu.Unlock()
	if hc == nil || params.SenderIdentity != caller {
		return
	}
	digit := dtmfDigit(d)
	if digit == 0 {
		r.log.Info("a key press that is no key is ignored", "code", d.Code, "digit", d.Digit)
		return
	}
	ctx, cancel := context.WithTimeout(hc.Context(), callTimeout)
	defer cancel()
	if err := hc.Session().PushDTMF(ctx, digit); err != nil {
		r.log.Warn("a key press was not taken", "err", err)
	}
}

// dtmfDigit is the key of a SipDTMF packet: its digit, else its RFC 4733
// event code.
func dtmfDigit(d *lkproto.SipDTMF) rune {
	if len(d.Digit) == 1 && strings.ContainsRune("0123456789*#ABCDabcd", rune(d.Digit[0])) {
		return rune(strings.ToUpper(d.Digit)[0])
	}
	const keys = "0123456789*#ABCD"
	if d.Code < uint32(len(keys)) {
		return rune(keys[d.Code])
	}
	return 0
}

// onChat injects the caller's typed input as the caller's turn.
func (r *room) onChat(reader *lksdk.TextStreamReader, identity string) {
	r.mu.Lock()
	leaving := r.leaving
	if !leaving {
		r.wg.Add(1)
	}
	r.mu.Unlock()
	if leaving {
		return
	}
	go func() {
		defer r.wg.Done()
		// Typed input can come before the call has started (the caller
		// typed as the agent joined, or the room's job moved here a
		// moment ago): it waits for the call, as the caller does.
		wait := time.NewTimer(r.t.cfg.callerTimeout + callTimeout)
		defer wait.Stop()
		select {
		case <-r.startedC:
		case <-r.leftC:
			return
		case <-wait.C:
			r.log.Warn("typed input dropped: the call did not start in time", "participant", identity)
			return
		}
		r.mu.Lock()
		hc, caller := r.hc, r.caller
		r.mu.Unlock()
		if identity != caller {
			r.ignore("chat/"+identity, "typed input from someone other than the caller is ignored", "participant", identity)
			return
		}
		select {
		case r.chatSem <- struct{}{}:
			defer func() { <-r.chatSem }()
		default:
			r.log.Warn("typed input dropped: too many lk.chat streams open at once", "participant", identity)
			return
		}
		// ReadAll waits for the stream's end; the client decides when
		// that is, so a reader is one of a few (maxChatReaders).
		text := strings.TrimSpace(reader.ReadAll())
		if text == "" {
			return
		}
		ctx, cancel := context.WithTimeout(hc.Context(), callTimeout)
		defer cancel()
		if err := hc.Inject(ctx, text); err != nil {
			r.log.Warn("typed input was not taken", "err", err)
		}
	}()
}
