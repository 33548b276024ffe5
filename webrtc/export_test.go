package webrtc

// HasLBRR is hasLBRR, for the external tests.
var HasLBRR = hasLBRR
