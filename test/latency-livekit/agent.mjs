// A LiveKit Agents for Node voice agent that does what Holdline's booking
// agent does, for "holdline bench latency --runtime livekit"
// (cli/bench_livekit.go starts it; see the README's "Measuring voice-to-voice
// latency"). Every provider is the bench's fake OpenAI-compatible server:
// OpenAI STT on /v1/audio/transcriptions (non-streaming, so LiveKit cuts the
// audio into utterances with Silero VAD), OpenAI LLM on chat completions and
// OpenAI TTS, so both runtimes wait exactly as long for them.
//
// Environment (the bench sets all of it):
//   LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET  the local livekit-server
//   HOLDLINE_LK_AGENT_NAME     the name the worker registers (explicit dispatch)
//   HOLDLINE_LK_PORT           the worker's health server port (on 127.0.0.1)
//   HOLDLINE_LK_OPENAI_URL     the fake server's base URL, ending in /v1
//   HOLDLINE_LK_OPENAI_KEY     its key
//   HOLDLINE_LK_PREEMPTIVE     "true" or "false": preemptive generation
//   HOLDLINE_LK_MIN_SILENCE_MS Silero's minSilenceDuration
//   HOLDLINE_LK_MIN_DELAY_MS   turnHandling.endpointing.minDelay
//   HOLDLINE_LK_EVENTS         a file the job appends its session events to,
//                              one JSON object a line, with wall-clock times
import { ServerOptions, cli, defineAgent, llm, voice } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import * as silero from '@livekit/agents-plugin-silero';
import { appendFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const env = (name) => {
  const v = process.env[name];
  if (v === undefined || v === '') {
    throw new Error(`agent.mjs: ${name} is not set (cli/bench_livekit.go sets it)`);
  }
  return v;
};

// The booking agent's system prompt (examples/booking.Instructions).
const instructions = `You are the phone host of Holdline Bistro. You check availability and book tables.
Before booking, know the party size and the time. Keep answers short: they are spoken.`;

// now is the wall-clock time in ms with sub-ms precision, comparable with
// the bench's own clock on the same machine.
const now = () => performance.timeOrigin + performance.now();

// recorder appends the events of the call in room for the bench.
// Synchronous and small, so the order in the file is the order things
// happened.
const recorder = (room) => (kind, fields = {}) => {
  appendFileSync(env('HOLDLINE_LK_EVENTS'), JSON.stringify({ at: now(), room, kind, ...fields }) + '\n');
};

// Restaurant is examples/booking's Restaurant, as small: 8 guests a slot,
// the same confirmation codes, so the demo model behind the fake server
// sees the same tool results from either runtime.
class Restaurant {
  constructor(capacity) {
    this.capacity = capacity;
    this.booked = new Map();
    this.bookings = [];
    this.cancelled = new Set();
  }
  check(party, time) {
    if (!(party >= 1 && party <= 12)) {
      throw new llm.ToolError(`invalid arguments: party must be between 1 and 12, got ${party}`);
    }
    if (!/^([01]\d|2[0-3]):[0-5]\d$/.test(time)) {
      throw new llm.ToolError(`invalid arguments: time must be HH:MM on a 24-hour clock, got "${time}"`);
    }
  }
  availability({ party, time }) {
    this.check(party, time);
    const res = { available: (this.booked.get(time) ?? 0) + party <= this.capacity, time, party };
    if (!res.available) {
      res.alternatives = ['17:30', '18:00', '20:30', '21:00'].filter(
        (t) => (this.booked.get(t) ?? 0) + party <= this.capacity,
      );
    }
    return res;
  }
  book({ party, time }) {
    this.check(party, time);
    if ((this.booked.get(time) ?? 0) + party > this.capacity) {
      throw new llm.ToolError(`no table for ${party} left at ${time}`);
    }
    this.booked.set(time, (this.booked.get(time) ?? 0) + party);
    const n = String(this.bookings.length + 1).padStart(2, '0');
    const b = { code: `HB${time.replace(':', '')}${party}${n}`, party, time };
    this.bookings.push(b);
    return b;
  }
  cancel({ code }) {
    code = String(code ?? '').trim().toUpperCase();
    const b = this.bookings.find((x) => x.code === code);
    if (!b || this.cancelled.has(code)) {
      throw new llm.ToolError(`no such booking: ${code}`);
    }
    this.cancelled.add(code);
    this.booked.set(b.time, this.booked.get(b.time) - b.party);
    return { code, party: b.party, time: b.time, cancelled: true };
  }
}

const party = z.number().int().describe('number of guests, 1 to 12');
const time = z.string().describe('time of the reservation as HH:MM, 24-hour clock');

function bookingTools(r) {
  // LiveKit sends the model JSON.stringify of what a tool returns, as
  // Holdline sends the JSON of its result; a ToolError is the error text.
  return {
    check_availability: llm.tool({
      description: 'Check whether a table is free for a party at a time.',
      parameters: z.object({ party, time }),
      execute: async (args) => r.availability(args),
    }),
    book_table: llm.tool({
      description: 'Book a table. Only after the guest asked to book and party and time are known.',
      parameters: z.object({ party, time, name: z.string().optional().describe('name for the reservation') }),
      execute: async (args) => r.book(args),
    }),
    cancel_booking: llm.tool({
      description: 'Cancel a booking by its confirmation code. Only when the guest asked to cancel it.',
      parameters: z.object({ code: z.string().describe("the booking's confirmation code, as book_table gave it") }),
      execute: async (args) => r.cancel(args),
    }),
  };
}

export default defineAgent({
  prewarm: async (proc) => {
    proc.userData.vad = await silero.VAD.load({
      minSilenceDuration: Number(env('HOLDLINE_LK_MIN_SILENCE_MS')),
    });
  },
  entry: async (ctx) => {
    const baseURL = env('HOLDLINE_LK_OPENAI_URL');
    const apiKey = env('HOLDLINE_LK_OPENAI_KEY');
    const preemptive = env('HOLDLINE_LK_PREEMPTIVE') === 'true';
    const record = recorder(ctx.job.room?.name ?? ctx.room.name);
    const session = new voice.AgentSession({
      vad: ctx.proc.userData.vad,
      // Non-streaming: LiveKit's StreamAdapter sends each utterance the VAD
      // cuts to /v1/audio/transcriptions (whisper-1, the plugin's default
      // model for that endpoint).
      stt: new openai.STT({ baseURL, apiKey, useRealtime: false }),
      llm: new openai.LLM({ baseURL, apiKey, model: 'gpt-4o-mini' }),
      tts: new openai.TTS({ baseURL, apiKey }),
      turnHandling: {
        // Turns end on the VAD's silence and the endpointing delay, as in
        // Holdline; left unset, LiveKit would load its turn-detector model
        // from LiveKit Cloud.
        turnDetection: 'vad',
        endpointing: { mode: 'fixed', minDelay: Number(env('HOLDLINE_LK_MIN_DELAY_MS')) },
        // Interruptions by the VAD, not the adaptive (cloud) detector.
        interruption: { mode: 'vad' },
        preemptiveGeneration: { enabled: preemptive },
      },
    });
    session.on(voice.AgentSessionEventTypes.UserStateChanged, (ev) =>
      record('user_state', { old: ev.oldState, new: ev.newState }),
    );
    session.on(voice.AgentSessionEventTypes.AgentStateChanged, (ev) =>
      record('agent_state', { old: ev.oldState, new: ev.newState }),
    );
    session.on(voice.AgentSessionEventTypes.UserInputTranscribed, (ev) =>
      record('transcript', { text: ev.transcript, final: ev.isFinal }),
    );
    session.on(voice.AgentSessionEventTypes.Error, (ev) =>
      record('error', { error: String(ev.error?.message ?? ev.error) }),
    );
    record('job', { room: ctx.room.name, preemptive });

    const agent = new voice.Agent({ instructions, tools: bookingTools(new Restaurant(8)) });
    await session.start({ agent, room: ctx.room, record: false });
    await ctx.connect();
    // The booking agent greets the caller when the session starts.
    session.generateReply({ instructions: 'Greet the caller.' });
  },
});

cli.runApp(
  new ServerOptions({
    agent: fileURLToPath(import.meta.url),
    agentName: env('HOLDLINE_LK_AGENT_NAME'),
    host: '127.0.0.1',
    port: Number(env('HOLDLINE_LK_PORT')),
    // One process kept warm for the next call; more would only load the
    // two cores while the other runtime is measured.
    numIdleProcesses: 1,
    // In production mode a worker calls itself full, and livekit-server
    // gives it no job, while the machine's CPU is above 70%: on two cores
    // busy with the other runtime's round that left the bench's dispatch
    // unanswered. The bench runs one call at a time; load shedding is for
    // fleets.
    loadThreshold: Infinity,
  }),
);
