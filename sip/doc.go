// Package sip answers phone calls with Holdline agents: SIP signalling on
// emiago/sipgo, and an RTP media leg of its own, because exact playout
// timing is what echo cancellation and context truncation depend on.
//
// A Server takes INVITEs over UDP, TCP and TLS (ServeUDP, ServeTCP,
// ServeTLS; on a connection, responses and in-dialog requests go back
// over it). Behind NAT it advertises WithPublicAddr's address, and it
// binds RTP in WithRTPPorts's range (503 when that is used up). An offer
// with PCMU, PCMA or Opus audio is answered with 200 OK and the codec the
// offerer preferred among those (plus telephone-event when offered); each
// call gets a runtime.Session whose output is the leg and whose input is
// the caller's RTP. Errors are answered with a status and a Warning
// header that says why: 400 for malformed SDP, 488 for an offer without
// audio or without a codec in common, 415 for a body that is not SDP, 403
// for a source outside the allowlist (WithAllow), 486 when every line is
// taken, and 513 with the limit in its reason phrase for a message larger
// than the SIP stack's read buffer (32,768 bytes over UDP).
//
// The leg makes one RTP packet per player frame (20 ms), so the echo
// canceller's reference is exactly what went out, and the server's pacer,
// a thread of its own, sends every call's packets one per 20 ms at the
// same instant of each period, however busy the goroutines are
// (WithRealtimePacing gives it real-time priority). The caller's packets
// go through a jitter buffer
// (media/jitter: reordering, concealment of losses, late packets dropped)
// and reach the session one frame per period, at 8 kHz for G.711 (judged
// and recognised as they came) or 16 kHz for Opus. A caller that sends no
// RTP for the RTP timeout (WithRTPTimeout) is hung up, unless the call is
// on hold with its media inactive.
//
// Media may be encrypted with SRTP (RFC 3711, AES_CM_128_HMAC_SHA1_80
// or _32) keyed by SDES (RFC 4568 a=crypto lines, ParseCrypto), on
// pion/srtp. WithSRTP sets the mode: SRTPOptional (the default) answers
// an RTP/SAVP offer, or an RTP/AVP one with a=crypto, with SRTP in the
// same profile, the offer's tag and suite and a fresh key of Holdline's
// own, and a plain offer with plain RTP; SRTPRequired answers a plain
// offer 488 and SRTPOff an RTP/SAVP one, each with a Warning. A
// re-INVITE may rekey the other side; Holdline keeps its key unless the
// suite changes, and refuses (488) a re-offer that would drop SRTP.
// Server.Call offers RTP/SAVP unless SRTP is off, and under SRTPOptional
// calls again in the clear when that is refused with 488 (and takes a
// plain RTP/AVP answer as a plain call). Encryption
// happens at the leg's socket edge only, so the pacer, the jitter buffer
// and the echo canceller work on the media in the clear. A packet that
// does not authenticate (plain RTP on an SRTP call, a wrong key, a
// replay) is dropped and counted, and the first of a call is logged
// with the reason; SRTCP arriving on the RTP port is checked and dropped,
// as the leg uses no RTCP. Keys are never logged: a Crypto formats with
// its key redacted. SDES keys travel in the SIP messages, so they are
// private only over ServeTLS.
//
// Keys the caller presses, as RFC 4733 events (media/dtmf) or SIP INFO
// (application/dtmf-relay, application/dtmf), become Session.PushDTMF.
// A re-INVITE moves the media or puts the call on hold and back; BYE ends
// the call from either side, and a call the agent ends is hung up with
// BYE. A REFER from the caller is refused with 403.
//
// A caller that looks to be behind NAT (its SDP or Contact names a private
// address other than its packets' source) gets symmetric RTP and
// Holdline's requests at that source, without WithSymmetricRTP.
//
// Server.Call places a call (PCMU, PCMA, Opus and telephone-event offered)
// and runs the agent on it; a sips: or ;transport=tcp|tls target is called
// over that transport (WithTLSClientConfig for the roots), on a connection
// of its own when the server does not listen on it. Transfer, called from a tool or OnEnter with
// its context, hands the call over with a blind transfer: a REFER with
// the X-Holdline-Handoff token, tracked through its NOTIFYs, then BYE.
//
// WarmTransfer, from a tool, hands the call to a person who is told first
// what it is about. The caller hears hold audio (WithHoldAudio: a WAV
// file or a comfort tone); the agent is silent and what the caller says
// or presses meanwhile is ignored (the session hears silence, so no turn
// starts). Holdline calls the person on a second leg of the same Server
// (Server.Call's dialling) and, once answered, speaks the briefing
// (WithBriefing, or the model's summary of the call as for a handoff)
// with the agent's voice. The person accepts by saying yes (the agent's
// recogniser listens) or pressing 1 (RFC 4733 or SIP INFO), and declines
// with no or 2. Accepted, the two are connected by a REFER with Replaces
// (RFC 3891) when the caller's side advertises REFER and replaces, else
// by bridging the legs' media in Holdline until either hangs up. A
// decline, no answer (WithAnswerTimeout), no decision
// (WithDecisionTimeout) or the person hanging up gives the caller back to
// the agent and the tool a sentinel error (ErrTransferDeclined,
// ErrTransferNoAnswer, ErrTransferNoDecision, ErrTransferHungUp). Each
// step is a transfer_* event and a checkpoint with TransferState.
//
// Register keeps the server's contact registered at a registrar (a PBX,
// a SIP provider) for the calls it delivers only to registered
// contacts: the digest challenge answered, refreshed before the lifetime
// the registrar granted runs out, retried with a capped exponential
// backoff while it is down, and removed on Close. Over TCP and TLS the
// calls come back over the registration's own connection and are
// answered on it (WithTLSClientConfig sets the roots it is verified with).
//
// With WithStore, calls are checkpointed to a store shared by workers: a
// Holdline worker answering a transferred call takes its conversation
// over by the token, and a caller who dials the same number again after
// their worker died is picked up where they were (WithRedialWindow).
//
// Opus calls are coded with libopus through cgo (github.com/hraban/opus),
// and on Linux the pacer is a thread of its own made through cgo: building
// needs a C compiler and the Debian packages libopus-dev, libopusfile-dev
// and pkg-config, even for a server that only takes G.711 calls.
package sip
