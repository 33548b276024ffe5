// Package runtime runs voice agents written in Go. An Agent is a value:
// instructions, tools (package tools turns typed Go functions into them),
// a model (llm.Model) and, for a voice, a synthesiser (TTS) and a
// recogniser (STT). A Session runs one conversation with it:
//
//	agent := &runtime.Agent{
//		Name:         "weather",
//		Instructions: "You tell callers the weather. Be brief.",
//		Tools:        []*tools.Tool{tools.MustNew("get_weather", "Current weather for a city.", weather, tools.WithEffect(tools.Read))},
//		Model:        model, // llm/openai's, or scripted.NewLLMFunc offline
//	}
//	s, err := runtime.New(agent)
//	go s.Run(ctx)
//	reply, err := s.Ask(ctx, "What's the weather in Paris?")
//	fmt.Println(reply.Heard) // Let me look. It's sunny and 21 degrees in Paris.
//
// The package example (Example) is that agent in full, as the README has
// it. To answer calls, give an AgentFunc, which makes an agent per call,
// to cli.Main: your main then has every command (a console, a server for
// browsers and phones, the simulator). Hosts and transports (packages
// calls, server, sip) make and run the sessions.
//
// Driving a session from Go: Ask says the caller's words and returns once
// the agent is idle again, with what it said, what the caller heard and
// the tool calls it made (Reply); Inject is the same without the wait;
// GenerateReply makes the agent speak (a greeting, from Agent.OnEnter);
// End ends the call. WithEventSink or Session.Subscribe give every event
// of the session (package events).
//
// In a tool's body, ctx belongs to the session: tools.WaitPlayout waits
// for the reply that made the call to be heard (ErrInterrupted if the
// caller cut in), Transfer hands the call to another party on whatever
// transport carries it, SessionFrom finds the session for
// Session.Handoff to another agent (with a ContextStrategy), and
// EndCallTool is a tool that hangs up once the goodbye has played.
//
// Every wait in a session is bounded, and a caller who talks over the
// agent stops it at once: the context keeps, of what the agent said, the
// words the caller heard. docs/ARCHITECTURE.md says how. The machinery — the
// session's state machine, its inputs and edges, the barge-in judge, the
// clocks, and the options a transport or host sets on a session — is
// package engine (runtime/engine).
package runtime
