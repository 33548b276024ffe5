package support

// Phrases are what the desk's callers say, for a local recogniser's
// grammar (stt/pocketsphinx.WithPhrases).
var Phrases = []string{
	"I was charged twice on account A7.",
	"I was charged twice on account B12.",
	"There is a problem with my bill on account A7.",
	"It is about account A7.",
	"My account is 1 2 3 4 5.",
	"My account number is 4 0 1 7 2.",
	"Hello, I have a question about my bill.",
	"Yes, refund one please.",
	"Yes please.",
	"No thanks.",
	"Can I have a refund?",
	"That is all, thank you.",
	"Bye.",
}
