package carrier

import "errors"

// Kind is what a carrier's message says.
type Kind int

const (
	// Connected opens the stream (Twilio and Telnyx send it first).
	Connected Kind = iota + 1
	// Start names the call and the stream, the audio's format and the
	// parameters the webhook's answer carried.
	Start
	// Media carries the caller's audio (Event.Audio, mu-law).
	Media
	// DTMF is a key the caller pressed (Event.Digit).
	DTMF
	// Mark is the carrier's word that the audio sent before the mark
	// named Event.Mark has been played (or, after a clear, dropped).
	Mark
	// Cleared is the carrier's word that a clear was done (Plivo's
	// clearedAudio); carriers that say nothing return their pending marks.
	Cleared
	// Stop ends the stream: the caller hung up, or the call moved on.
	Stop
)

// Event is one message from a carrier, decoded.
type Event struct {
	Kind Kind
	// StreamID and CallID name the stream and the call (Start; other
	// messages may carry StreamID too).
	StreamID, CallID string
	// Params are the custom parameters of the webhook's answer (Start):
	// the caller, the callee and the one-time stream token among them.
	Params map[string]string
	// Encoding and Rate are the audio's format (Start): "audio/x-mulaw"
	// (or "PCMU") at 8000.
	Encoding string
	Rate     int
	// Audio is the caller's audio, mu-law (Media).
	Audio []byte
	// Seq is the message's sequence number where the carrier gives one,
	// and Timestamp the media's, in milliseconds from the stream's start.
	Seq, Timestamp int64
	// Digit is the key (DTMF).
	Digit string
	// Mark is the mark's name (Mark).
	Mark string
}

// A Codec reads and writes one carrier's frames. Its methods are safe for
// concurrent use: a Codec keeps no state.
type Codec interface {
	// Name is the carrier's name ("twilio"), for logs and metrics.
	Name() string
	// Decode reads one text message. A message the protocol does not
	// define gives ErrUnknownEvent; one that is malformed gives an error
	// wrapping ErrMalformed that says what is wrong.
	Decode(msg []byte) (Event, error)
	// Media encodes the agent's audio (mu-law) for stream.
	Media(streamID string, audio []byte) ([]byte, error)
	// Mark encodes a mark (a checkpoint) named name: the carrier returns
	// it once the audio sent before it has been played.
	Mark(streamID, name string) ([]byte, error)
	// Clear encodes the request to drop the audio the carrier holds.
	Clear(streamID string) ([]byte, error)
}

// Errors of Codec.Decode.
var (
	// ErrMalformed: the message is not the carrier's JSON, or lacks
	// what its event needs (no payload, bad base64, no stream id).
	ErrMalformed = errors.New("carrier: malformed message")
	// ErrUnknownEvent: the message's event is not one the carrier's
	// protocol defines. The stream goes on.
	ErrUnknownEvent = errors.New("carrier: unknown event")
)
