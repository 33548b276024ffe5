// Package stt defines streaming speech recognition as the session core sees
// it: audio frames in, partial and final transcripts out, cancellable.
package stt
