package booking

// Phrases are things callers of the booking agent say, written as they
// would be transcribed. A local recogniser with a grammar builds it from
// them: stt/pocketsphinx's New(WithPhrases(booking.Phrases...)) accepts
// these phrases whole, with their numbers free to change ("a table for two
// at seven" also gives "a table for five at nine"), and any of their words
// on its own, so keep them to what callers really say.
//
// They stay within what the demo model understands (see demomodel.go):
// party sizes ("for four people", "three of us", "party of six"), times
// after "at", "around" or "for" ("at seven", "at 7:30", "at half past
// seven", "at eight pm", "for seven o'clock"), asking to book or reserve,
// asking what is free or available, yes and no, never mind, thanks and
// goodbye. The names are for book_table's name argument: the demo model
// ignores them, a real model does not.
var Phrases = []string{
	// Asking to book.
	"Book a table for two at seven.",
	"I'd like to book a table for four at 8:30.",
	"Can I book a table for two at half past seven?",
	"I want to reserve a table for six at seven o'clock.",
	"I'd like to make a reservation.",
	"I want to book a table.",
	"Can I book a table for tonight?",
	"A table for two, please.",
	"Table for five at 6:30.",
	"I'd like a table for three.",
	"Could we book for four people at eight?",
	"Reserve a table for two at 9pm, please.",

	// Asking what is free.
	"Do you have a table for four at eight?",
	"Do you have a table for two at 7:30?",
	"Is there a table free for three at nine?",
	"What times are available?",
	"Are you free at eight?",
	"Do you have anything at nine?",
	"Do you have availability for four people?",
	"Is there anything free around seven?",

	// Party sizes.
	"For two people.",
	"For four people.",
	"For six people.",
	"There will be three of us.",
	"Five guests.",
	"Just the two of us.",
	"A party of eight.",
	"It's for ten people.",

	// Times.
	"At seven.",
	"At 8:30.",
	"At half past seven.",
	"At seven o'clock.",
	"Around eight.",
	"At 8pm.",
	"At 9:15.",
	"At 6:45.",
	"For seven o'clock.",
	"Can we make it at nine instead?",

	// Yes and no.
	"Yes.",
	"Yes, please.",
	"Yeah, that's fine.",
	"Sure.",
	"Okay.",
	"Yes, book it.",
	"No thanks.",
	"No, thank you.",
	"Never mind.",
	"Cancel that.",
	"Wait.",
	"Don't book it.",

	// Names.
	"My name is Anna.",
	"My name is John Smith.",
	"It's under the name Maria.",
	"The name is David.",

	// Closing.
	"Thank you.",
	"Thanks, goodbye.",
	"That's all, thank you.",
	"Bye.",
}
