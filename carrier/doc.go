// Package carrier answers phone calls that a carrier streams over a
// WebSocket instead of SIP: Twilio's Media Streams (<Connect><Stream>),
// Telnyx's media streaming and Plivo's audio streams. Most phone numbers
// bought from a carrier reach an agent this way.
//
// One transport carries every carrier's stream; a Codec per carrier reads
// and writes its JSON frames, so that a new carrier is a file, not a
// transport. The transport does what every transport does (see
// docs/ARCHITECTURE.md): the caller's mu-law at 8 kHz, decoded, goes to
// the session in 20 ms frames, with the echo canceller on as for any
// phone line; the session's output goes back paced at real time; a
// socket that drops is a lost connection.
//
// What the caller heard is what the carrier played, not what was sent:
// the transport puts a mark after each phrase (where the turn's audio
// stops) and at least every 200 ms of audio (WithMarkInterval), and the
// marks the carrier returns drive the session's playout clock (the line is
// a media.PlayoutReporter), so that an interrupted answer is cut in the
// context at what was played. On a barge-in, suspected or confirmed, the
// transport clears the carrier's buffer at once (the line is a
// media.OutputClearer); marks returned for a clear count as not played.
//
// NewTwilio, NewTelnyx and NewPlivo serve each carrier's routes: the voice
// webhook, which answers the carrier's XML connecting the call to the
// stream with a one-time stream token (the carrier's signature checked when
// its secret is set: X-Twilio-Signature, telnyx-signature-ed25519,
// X-Plivo-Signature-V3), and the stream. What the three share (the token,
// the public URL, refusing with the reason) is one unexported type, so that
// a new carrier is a codec and a handler. carriertest is a phone that
// behaves as any of the three does, for tests.
package carrier
