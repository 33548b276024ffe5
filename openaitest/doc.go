// Package openaitest runs an in-process server that speaks OpenAI's wire
// protocol: streamed chat completions (server-sent events), the audio
// transcription and speech endpoints, and the Realtime API over a
// websocket. Its answers come from a Brain, any llm.Model, so a test can
// drive Holdline's real OpenAI clients with a scripted or demo model, and
// its faults reproduce what real providers do on a bad day: tool-call
// deltas split mid-JSON, indexes that start at 1 or are missing, errors
// mid-stream, 429s, slow first tokens, cancelled responses that still
// finish their function-call arguments.
package openaitest
