// Package openai is an [llm.Model] for OpenAI's chat-completions API and
// the many servers that speak it (set the base URL), built on
// github.com/sashabaranov/go-openai.
//
// It streams text and tool-call deltas as they arrive and smooths over what
// providers do differently or wrongly: tool-call indexes that start at 1 or
// are missing, arguments split mid-JSON, errors sent inside a stream, and
// streams cut off before their end (reported as an error wrapping
// io.ErrUnexpectedEOF, never as a clean io.EOF).
//
// Failures before the first token (HTTP 429, 5xx, a dropped connection) are
// retried with exponential backoff and jitter, honouring Retry-After; once
// anything has been delivered nothing is retried, because a voice agent may
// already have spoken it. Errors wrap [ErrRateLimited] or [ErrServer] when
// retries ran out, and go-openai's *APIError or *RequestError for details.
// The API key never appears in an error.
//
// Cancelling the context given to Stream ends the stream at once, even
// while the provider has not sent a byte: the HTTP request is bound to the
// context, so a blocked Recv returns an error wrapping ctx.Err().
package openai
