// Package booking is an example agent that books restaurant tables: a read
// tool (check_availability), a mutation (book_table) and a greeting. Copy it
// to start an agent of your own.
//
// It runs with no network and no API key because it ships DemoModel, a small
// deterministic intent model that answers and calls tools the way a chat
// model would. DemoModel is a demo, not a language model: it understands
// party sizes, times and a handful of intents. Swap it for a real model (any
// llm.Model) in New's options.
package booking
