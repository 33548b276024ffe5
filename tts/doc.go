// Package tts defines streaming speech synthesis as the session core sees it
// (text in; audio frames and word timings out; cancellable), and the Chunker
// that cuts a token stream into phrases so synthesis starts before the model
// finishes.
package tts
